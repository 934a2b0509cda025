#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Backend polling, A/B in the same minutes (Documentation/performance.md,
"Polling").

One local machine (xbd-xenstored, xbd-blkback, domain "bench" with a
tmpfs file as xvdb), then fio through the external engine, 4k randread
at each depth, ROUNDS times with the settings interleaved: the backend's
poll_duration_us is written into the sysfs-style tree between runs (it
takes effect at once), the frontend's is the engine's
xbd_poll_duration_us.  Prints IOPS and the machine's busy CPU per I/O
(/proc/stat, all processes: other users of the machine included), the
CPU per I/O of xbd-blkback and of fio alone, and the backend's event and
poll counters per request, for every run, then the median of each.

usage: bench/poll/ab.py [BUILD] [--rounds N] [--seconds S] [--qd 1,64]
                        [--be 0,50] [--fe 50] [--pin] [--ignore-load]
                        [--sync Y,N] [--batch 0,8] [--host]
--pin runs xbd-blkback on CPU 0 and fio on CPU 1 (as a backend domain and
a guest have their own vCPUs on Xen); without, the scheduler places them.
--sync Y,N: the raw driver's sync_io (Documentation/backend.md, "Files
in memory") A/B as well; it is read when a vbd's storage opens, so each
value gets its own disk, attached under it (xvdb, xvdc, ...: a tmpfs file
each, of the same random bytes), and the runs pick the disk.  --host adds
host fio on the first file in the same rounds: io_uring at each depth
and psync at depth 1 (both --direct=1; on tmpfs io_uring hands each read
to its io-wq workers, so psync is the fair bound of a synchronous path).
--batch 0,8: the sync_io_batch module parameter (a sync_io queue's
helper thread, Documentation/backend.md) A/B too, written into the tree
between runs like poll_duration_us; the per-request line then has the
helper's share (helper_req / rd_req).
"""
import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "suite"))
from contenders import XbdMachine  # noqa: E402

MiB = 1 << 20


def busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]          # all but idle and iowait


VDEVS = ("xvdb", "xvdc", "xvdd", "xvde")


def vbd_dirs(m, vdev, *sub):
    """The tree's directory of vdev's vbd (xvdN: major 202, minor 16 N)."""
    devid = (202 << 8) | ((1 + VDEVS.index(vdev)) << 4)
    return glob.glob(os.path.join(m.run_dir, "sys", "bus", "xen-backend", "devices",
                                  f"vbd-*-{devid}", *sub))


def vbd_stats(m, vdev="xvdb"):
    d = vbd_dirs(m, vdev, "statistics")
    out = {}
    for n in ("rd_req", "evt_in", "evt_out", "polls", "poll_hits", "helper_req"):
        try:
            with open(os.path.join(d[0], n)) as f:
                out[n] = int(f.read())
        except (IndexError, OSError, ValueError):
            out[n] = 0
    return out


def proc_cpu(pid):
    """user + system seconds of every thread of pid."""
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def run_fio(m, build, qd, fe, seconds, pin, vdev="xvdb", host=None):
    """One run through the engine on vdev, or with host=(engine, file)
    host fio on that file.  (IOPS, machine busy CPU us per I/O)."""
    cmd = (["taskset", "-c", "1"] if pin else []) + ["fio", "--name=r", "--rw=randread", "--bs=4k", f"--iodepth={qd}",
           "--size=64M", "--time_based", f"--runtime={seconds}",
           "--randrepeat=0", "--norandommap", "--output-format=json"]
    if host:
        cmd += [f"--ioengine={host[0]}", "--direct=1", f"--filename={host[1]}"]
    else:
        cmd += ["--ioengine=external:" + os.path.join(build, "lib", "xbd-fio.so"),
                "--xbd_domain=bench", f"--xbd_vdev={vdev}", "--xbd_max_queues=1",
                "--xbd_max_ring_page_order=3", f"--xbd_poll_duration_us={fe}"]
    st = []
    t = threading.Timer(seconds / 2 + 0.5, lambda: st.append(vbd_stats(m, vdev)))
    t2 = threading.Timer(seconds - 0.2, lambda: st.append(vbd_stats(m, vdev)))
    t.start(), t2.start()
    b0 = proc_cpu(m.blkback.proc.pid)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    j0 = busy_jiffies()
    out = subprocess.run(cmd, capture_output=True, text=True, env=m.env,
                         timeout=seconds * 4 + 60)
    j1 = busy_jiffies()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b1 = proc_cpu(m.blkback.proc.pid)
    t.join(), t2.join()
    if len(st) == 2 and st[1]["rd_req"] > st[0]["rd_req"]:
        n = st[1]["rd_req"] - st[0]["rd_req"]
        d = {k: (st[1][k] - st[0][k]) / n for k in st[0]}
        print(f"   per request: evt_in {d['evt_in']:.2f} evt_out {d['evt_out']:.2f} "
              f"polls {d['polls']:.2f} hits {d['poll_hits']:.2f} "
              f"helper {d['helper_req']:.2f}", flush=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-600:])
    js = json.loads(out.stdout[out.stdout.index("{"):])
    rd = js["jobs"][0]["read"]
    ios = rd["total_ios"] or 1
    fio_cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    print(f"   per I/O: xbd-blkback {(b1 - b0) / ios * 1e6:.2f} us CPU, "
          f"fio {fio_cpu / ios * 1e6:.2f} us CPU", flush=True)
    hz = os.sysconf("SC_CLK_TCK")
    return rd["iops"], (j1 - j0) / hz / ios * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--qd", default="1,64")
    ap.add_argument("--be", default="0,50")
    ap.add_argument("--fe", default="50")
    ap.add_argument("--ignore-load", action="store_true",
                    help="spin even when every CPU is wanted "
                    "(XBD_TEST_POLL_IGNORE_LOAD)")
    ap.add_argument("--pin", action="store_true",
                    help="xbd-blkback on CPU 0, fio on CPU 1")
    ap.add_argument("--sync", default="",
                    help="sync_io values to compare (Y,N), a disk each")
    ap.add_argument("--batch", default="",
                    help="sync_io_batch values to compare (0,8)")
    ap.add_argument("--host", action="store_true",
                    help="host fio io_uring and psync on the file too")
    a = ap.parse_args()
    syncs = [x for x in a.sync.split(",") if x] or [None]
    if len(syncs) > len(VDEVS):
        ap.error("too many --sync values")
    build = os.path.abspath(a.build)
    if a.ignore_load:
        os.environ["XBD_TEST_POLL_IGNORE_LOAD"] = "1"
    work = tempfile.mkdtemp(prefix="xbd-poll-ab.")
    store = os.path.join("/dev/shm", os.path.basename(work) + ".img")
    with open(store, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(MiB))
    stores = [store]
    for i in range(1, len(syncs)):
        stores.append(f"{store}.{i}")
        with open(store, "rb") as src, open(stores[-1], "wb") as dst:
            dst.write(src.read())

    class S:
        path = store
    m = XbdMachine(build, work, os.path.join(work, "log"),
                   prefix=("taskset", "-c", "0") if a.pin else ())
    res = {}
    try:
        if syncs[0] is not None:   # the first disk opens under its value
            m.extra += (f"--sync_io={syncs[0]}",)
        m.start(S)
        params = os.path.join(m.run_dir, "sys", "module", "xen_blkback",
                              "parameters")
        tun = os.path.join(params, "poll_duration_us")
        for _ in range(200):               # the tree is mounted soon after start
            if os.path.exists(tun):
                break
            time.sleep(0.05)
        xbd = [m.bin("xbd"), "--platform", "local"]
        for i in range(1, len(syncs)):
            with open(os.path.join(params, "sync_io"), "w") as f:
                f.write(syncs[i])
            subprocess.run(xbd + ["block-attach", "bench",
                                  f"format=raw, vdev={VDEVS[i]}, target={stores[i]}"],
                           env=m.env, check=True, capture_output=True, timeout=60)
        for i, sync in enumerate(syncs):
            if sync is None:
                continue
            d = vbd_dirs(m, VDEVS[i])
            with open(os.path.join(d[0], "sync_io")) as f:
                print(f"{VDEVS[i]}: sync_io {f.read().strip()} ({stores[i]})",
                      flush=True)
        batches = [x for x in a.batch.split(",") if x] or [None]
        combos = [(qd, be, fe, sync, b) for qd in map(int, a.qd.split(","))
                  for fe in map(int, a.fe.split(","))
                  for be in map(int, a.be.split(","))
                  for sync in syncs for b in batches]
        if a.host:
            combos += [(qd, "host", "io_uring", None, None)
                       for qd in map(int, a.qd.split(","))]
            combos += [(1, "host", "psync", None, None)]
        for r in range(a.rounds):
            for qd, be, fe, sync, b in (combos if r % 2 == 0 else combos[::-1]):
                if be == "host":
                    iops, us = run_fio(m, build, qd, 0, a.seconds, a.pin,
                                       host=(fe, store))
                else:
                    with open(tun, "w") as f:
                        f.write(str(be))
                    if b is not None:
                        with open(os.path.join(params, "sync_io_batch"), "w") as f:
                            f.write(b)
                    iops, us = run_fio(m, build, qd, fe, a.seconds, a.pin,
                                       vdev=VDEVS[syncs.index(sync)])
                res.setdefault((qd, str(be), str(fe), str(sync), str(b)),
                               []).append((iops, us))
                print(f"round {r} qd {qd:3} backend {be:4} frontend {fe:4} "
                      f"sync_io {sync} batch {b}: "
                      f"{iops/1000:7.1f}k IOPS {us:5.2f} us CPU/IO", flush=True)
    finally:
        m.stop()
        for s in stores:
            os.unlink(s)
    print("median of", a.rounds, "rounds:")
    for (qd, be, fe, sync, b), v in sorted(res.items()):
        what = (f"host fio {fe:8}" if be == "host" else
                f"backend poll {be:4} frontend poll {fe:4} sync_io {sync} batch {b}")
        print(f"qd {qd:3} {what}: "
              f"{statistics.median(x for x, _ in v)/1000:7.1f}k IOPS "
              f"(range {min(x for x, _ in v)/1000:.1f}-{max(x for x, _ in v)/1000:.1f}k), "
              f"{statistics.median(y for _, y in v):5.2f} us machine CPU/IO")


if __name__ == "__main__":
    main()
