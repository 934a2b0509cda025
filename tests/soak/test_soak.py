# SPDX-License-Identifier: MIT
"""make soak: long runs that must not leak (not part of make check).

* test_attach_detach_cycles: SOAK_CYCLES (1000) times `xbd block-attach`,
  a guest (xbdfront-io) connects, reads what was negotiated and closes,
  `xbd block-detach`.
* test_concurrent_fio: SOAK_GUESTS x SOAK_DISKS (10 x 4) disks under
  fio verify (the external engine: random 4k writes, crc32c verified in
  the background, a flush every 32 writes) for SOAK_MINUTES (10).  A
  local domain has one claimer and a libxbdfront device claims it
  (Documentation/guest.md, "Known limit"), so each disk is its own guest
  domain: 40 frontends, 40 vbds, 80 rings in one backend.

Both sample every daemon (xbd-blkback, xbd-xenstored) from /proc (fds,
threads, mappings, RSS) and the backend's persistent grants from its
sysfs-style tree, at the start (after a warm-up), the middle and the end,
print the samples, and fail on growth beyond a small bound.  Run on the
optimised build (build/); `make soak` sets XBD_BUILD.
"""
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "system"))
from conftest import binary, daemons, rundir  # noqa: E402,F401  (fixtures)
from hostile_fixtures import Proc  # noqa: E402
from test_fio_engine import ENGINE, engine_env  # noqa: E402
from xbd_fixtures import Machine  # noqa: E402

CYCLES = int(os.environ.get("SOAK_CYCLES", "1000"))
MINUTES = float(os.environ.get("SOAK_MINUTES", "10"))
GUESTS = int(os.environ.get("SOAK_GUESTS", "10"))
DISKS = int(os.environ.get("SOAK_DISKS", "4"))
DEVICES = "bus/xen-backend/devices"

# Growth allowed from the first sample to the last.
BOUND = {"fds": 2, "threads": 1, "maps": 16, "rss_kb": 16 << 10}


def threads_by_name(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue
        out[name] = out.get(name, 0) + 1
    return out


class Soak:
    def __init__(self, daemons, rundir, tmp):
        self.rundir, self.tree = rundir, str(tmp / "sys")
        os.mkdir(self.tree)
        self.m = Machine(daemons, rundir)
        marker = os.path.join(self.tree, DEVICES)
        self.backend = daemons.start(
            [binary("xbd-blkback"), "-N", "-p", "local", "-R", rundir,
             "--max_queues=2", f"--sysfs={self.tree}"], name="xbd-blkback",
            ready=lambda: os.path.isdir(marker))
        self.samples = []

    def grants(self):
        top = os.path.join(self.tree, DEVICES)
        total = 0
        for vbd in os.listdir(top):
            with open(os.path.join(top, vbd, "statistics", "persistent_grants")) as f:
                total += int(f.read())
        return total, len(os.listdir(top))

    def sample(self, when):
        be, xs = Proc(self.backend.pid), Proc(self.m.daemon.pid)
        be.pid, xs.pid = self.backend.pid, self.m.daemon.pid
        for p in (be, xs):
            # io_uring's io-wq workers (iou-wrk-*) come and go with the load
            # and are the kernel's, not ours: not counted
            names = threads_by_name(p.pid)
            p.threads = sum(n for k, n in names.items() if not k.startswith("iou-"))
        grants, vbds = self.grants()
        self.samples.append((when, be, xs, grants))
        print(f"[{when}] xbd-blkback {be} | xbd-xenstored {xs} | "
              f"vbds {vbds} persistent grants {grants}", flush=True)

    def check(self):
        (_, be0, xs0, _), (_, be1, xs1, _) = self.samples[0], self.samples[-1]
        for name, a, b in (("xbd-blkback", be0, be1), ("xbd-xenstored", xs0, xs1)):
            for key, bound in BOUND.items():
                grew = getattr(b, key) - getattr(a, key)
                assert grew <= bound, f"{name} {key} grew by {grew}: {a} -> {b}"

    def stop(self):
        self.backend.stop()
        self.m.close()


@pytest.fixture
def soak(daemons, rundir, tmp_path):
    s = Soak(daemons, rundir, tmp_path)
    try:
        yield s
    finally:
        s.stop()       # the tree is unmounted before rundir goes


def test_attach_detach_cycles(soak, tmp_path):
    domid = soak.m.create("cycler", "--memory", "64M")
    disk = tmp_path / "disk.img"
    with open(disk, "wb") as f:
        f.truncate(16 << 20)
    marks = {CYCLES // 10: "start", CYCLES // 2: "middle", CYCLES: "end"}
    t0 = time.monotonic()
    for i in range(1, CYCLES + 1):
        soak.m.ok("block-attach", domid, f"{disk},raw,xvda,w", leaks=False)
        r = subprocess.run([binary("xbdfront-io"), "--rundir", soak.rundir,
                            "--queues", "2", str(domid), "xvda", "info"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "sectors 32768" in r.stdout, (i, r.stdout, r.stderr)
        soak.m.ok("block-detach", domid, "xvda", leaks=False)
        if i in marks:
            assert soak.grants() == (0, 0)        # nothing of the vbd is left
            soak.sample(f"cycle {i}")
    print(f"{CYCLES} attach/connect/detach cycles in {time.monotonic() - t0:.0f} s")
    soak.check()


def start_fio(soak, name, seconds):
    argv = ["fio", "--name=soak", f"--ioengine=external:{ENGINE}",
            f"--xbd_domain={name}", "--xbd_vdev=xvda", f"--xbd_rundir={soak.rundir}",
            "--xbd_max_queues=2", "--rw=randwrite", "--bs=4k", "--iodepth=4",
            "--size=8M", "--time_based", f"--runtime={seconds}",
            "--verify=crc32c", "--verify_backlog=256", "--verify_fatal=1",
            "--fsync=32", "--output-format=terse", "--terse-version=3",
            "--verify_state_save=0"]

    class Env:
        env = dict(os.environ)
    return subprocess.Popen(argv, cwd=soak.rundir, env=engine_env(Env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_concurrent_fio(soak, tmp_path):
    seconds = max(int(MINUTES * 60), 20)
    fios, disks = [], []
    for g in range(GUESTS):
        for d in range(DISKS):
            name = f"g{g}d{d}"
            domid = soak.m.create(name, "--memory", "32M")
            disk = tmp_path / f"{name}.img"
            with open(disk, "wb") as f:
                f.truncate(16 << 20)
            soak.m.ok("block-attach", domid, f"{disk},raw,xvda,w")
            disks.append((name, domid))
    try:
        # every job runs 30 s longer than the sampled period, so that all
        # of them still run at the last sample however long connecting took
        for name, domid in disks:
            fios.append((name, start_fio(soak, name, seconds + 30), domid))
        t0 = time.monotonic()
        # the first sample once every disk is Connected and warm
        while not all(soak.m.read(f"/local/domain/0/backend/vbd/{d}/51712/state") == "4"
                      for _, _, d in fios):
            assert time.monotonic() - t0 < 30, "disks do not connect"
            time.sleep(0.2)
        t0 = time.monotonic()
        for when, at in (("start", 0.15), ("middle", 0.5), ("end", 0.95)):
            time.sleep(max(0.0, t0 + at * seconds - time.monotonic()))
            assert soak.grants()[1] == GUESTS * DISKS
            soak.sample(when)
        errors = []
        for name, p, _ in fios:
            out, err = p.communicate(timeout=seconds + 330)
            line = [x for x in out.splitlines() if x.startswith("3;")]
            if p.returncode or not line or line[0].split(";")[4] != "0":
                errors.append((name, p.returncode, err[-500:]))
            else:
                f = line[0].split(";")
                print(f"{name}: wrote {int(f[46]) >> 10} MiB, verified "
                      f"{int(f[5]) >> 10} MiB")
        assert not errors, errors
    finally:
        for _, p, _ in fios:
            if p.poll() is None:
                p.kill()
                p.wait()
    soak.check()
    # the persistent grants of the end stay within the tunable's cap
    cap = 1056 * 2 * GUESTS * DISKS
    assert all(s[3] <= cap for s in soak.samples), soak.samples
