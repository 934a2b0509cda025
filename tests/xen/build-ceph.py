#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Prepare phase N's Ceph cluster for the dom0 image (build-images.sh).

Usage: build-ceph.py OUT DOM0DIR

The dom0 has no Python, so the `ceph` CLI cannot run there: the cluster is
made here, on the host, with the system tests' own code
(tests/system/test_storage_rbd.py's Ceph: one monitor, msgr v2 on
127.0.0.1 and a free port, one memstore OSD, auth none, no manager, pool
`rbd` of 8 PGs, pool size 1).  All 8 PGs are made active (`rados ls`
lists every PG), `noout` is set (the OSD stays down from here until dom0
starts it again, maybe long after), and the OSD is stopped with SIGTERM
and `osd_fast_shutdown` off, on which memstore writes its in-RAM store
out into its data directory (checked: the pool's 8 PGs); then the
monitor.  OUT gets the monitor's store (mon/), the OSD's
directory (osd/), an empty run/ and a ceph.conf whose paths name DOM0DIR,
where phase N (guest/phase-n.sh) copies OUT to.  The monitor's address
(127.0.0.1:PORT) is in its monmap: the same address serves inside dom0,
whose loopback is its own.  Prints the time it took.
"""
import os
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "system"))
os.environ.setdefault("XBD_BUILD", os.path.join(HERE, "..", "..", "build"))

import test_storage_rbd as t  # noqa: E402

# In dom0: no erasure-code plugins preloaded (the monitor and the OSD load
# them at start; jerasure's gf-complete runs SSSE3 code without asking the
# CPU, an illegal instruction on QEMU's qemu64 model; the pool is
# replicated); and dom0's hostname is the kernel's "(none)", not a valid
# CRUSH name, so the OSD keeps the location it was made with.
DOM0_CONF = """[mon]
osd erasure code plugins =
[osd]
osd erasure code plugins =
osd crush update on start = false
"""


def main(out, dom0dir):
    t0 = time.monotonic()
    d = tempfile.mkdtemp(prefix="xbd-xen-ceph-")
    c = None
    try:
        c = t.Ceph(d)
        c.ceph("osd", "set", "noout")
        c.run("rados", "-c", c.conf, "-p", "rbd", "ls", timeout=60)
        # a fast shutdown (the default) exits without writing memstore out
        c.ceph("tell", "osd.0", "config", "set", "osd_fast_shutdown", "false")
        c.kill("osd", signal.SIGTERM)
        pgs = [f for f in os.listdir(os.path.join(d, "osd")) if f.endswith("_head")]
        assert len(pgs) == 8, f"the stopped OSD wrote out {sorted(pgs)}, not pool rbd's 8 PGs"
        c.kill("mon", signal.SIGTERM)
        c.procs.clear()
        with open(c.conf) as f:
            conf = f.read().replace(d, dom0dir)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(os.path.join(out, "run"))
        for sub in ("mon", "osd"):
            shutil.copytree(os.path.join(d, sub), os.path.join(out, sub), symlinks=True)
        with open(os.path.join(out, "ceph.conf"), "w") as f:
            f.write(conf + DOM0_CONF)
    finally:
        if c:
            c.stop()
        shutil.rmtree(d, ignore_errors=True)
    print(f"build-ceph: cluster for {dom0dir} made in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
