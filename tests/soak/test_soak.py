# SPDX-License-Identifier: MIT
"""make soak: long runs that must not leak (not part of make check).

* test_attach_detach_cycles: SOAK_CYCLES (1000) times `xbd block-attach`,
  a guest (xbdfront-io) connects, reads what was negotiated and closes,
  `xbd block-detach`.
* test_concurrent_fio: SOAK_GUESTS (10) guest domains with SOAK_DISKS
  (4) disks each, under fio verify for SOAK_MINUTES (10).  Each guest is
  one fio process with the external engine (--thread: its jobs share one
  domain handle, Documentation/guest.md) and one job per disk, each job
  its own xbd_vdev (xvda, xvdb, ...): random 4k writes, crc32c verified
  in the background, a flush every 32 writes.  40 vbds, 80 rings in one
  backend.

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
             "-l", "info", "--max_queues=2", f"--sysfs={self.tree}"],
            name="xbd-blkback",
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
    # how often the backend saw a detach and the next attach of xvda as one
    # change (the race behind "backend closed xvda (Closed)") and coped
    raced = soak.backend.log_text().count("replaced by a new attach")
    print(f"{CYCLES} attach/connect/detach cycles in {time.monotonic() - t0:.0f} s; "
          f"xbd-blkback saw a detach and re-attach as one change {raced} times")
    soak.check()


def vdev_name(d):
    return "xvd" + chr(ord("a") + d)


def vbd_id(d):
    return (202 << 8) | (d << 4)        # xvda 51712, xvdb 51728, ...


def start_fio(soak, name, seconds):
    """One fio process is guest NAME (--thread: its jobs share the domain
    handle); one job per disk, each job its own xbd_vdev."""
    argv = ["fio", "--thread", f"--ioengine=external:{ENGINE}",
            f"--xbd_domain={name}", f"--xbd_rundir={soak.rundir}",
            "--xbd_max_queues=2", "--rw=randwrite", "--bs=4k", "--iodepth=4",
            "--size=8M", "--time_based", f"--runtime={seconds}",
            "--verify=crc32c", "--verify_backlog=256", "--verify_fatal=1",
            "--fsync=32", "--output-format=terse", "--terse-version=3",
            "--verify_state_save=0"]
    for d in range(DISKS):
        argv += [f"--name={vdev_name(d)}", f"--xbd_vdev={vdev_name(d)}"]

    class Env:
        env = dict(os.environ)
    return subprocess.Popen(argv, cwd=soak.rundir, env=engine_env(Env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def fio_results(name, p, seconds):
    """Wait for guest NAME's fio; returns its errors (empty if every job
    exited with no error and wrote and verified something)."""
    out, err = p.communicate(timeout=seconds + 330)
    lines = [x.split(";") for x in out.splitlines() if x.startswith("3;")]
    if p.returncode or len(lines) != DISKS:
        return [(name, p.returncode, len(lines), err[-500:])]
    errors = []
    for f in lines:
        # terse v3: 2 job name, 4 error, 5 read KiB (the verify reads),
        # 46 write KiB
        if f[4] != "0" or int(f[46]) == 0 or int(f[5]) == 0:
            errors.append((name, f[2], f[4], f[5], f[46], err[-500:]))
        print(f"{name} {f[2]}: wrote {int(f[46]) >> 10} MiB, verified "
              f"{int(f[5]) >> 10} MiB")
    return errors


def test_concurrent_fio(soak, tmp_path):
    seconds = max(int(MINUTES * 60), 20)
    fios, guests = [], []
    for g in range(GUESTS):
        name = f"g{g}"
        domid = soak.m.create(name, "--memory", "64M")
        for d in range(DISKS):
            disk = tmp_path / f"{name}-{vdev_name(d)}.img"
            with open(disk, "wb") as f:
                f.truncate(16 << 20)
            soak.m.ok("block-attach", domid, f"{disk},raw,{vdev_name(d)},w")
        guests.append((name, domid))
    try:
        # every job runs 30 s longer than the sampled period, so that all
        # of them still run at the last sample however long connecting took
        for name, domid in guests:
            fios.append((name, start_fio(soak, name, seconds + 30), domid))
        t0 = time.monotonic()
        # the first sample once every disk of every guest is Connected and warm
        states = [f"/local/domain/0/backend/vbd/{domid}/{vbd_id(d)}/state"
                  for _, _, domid in fios for d in range(DISKS)]
        while not all(soak.m.read(s) == "4" for s in states):
            assert time.monotonic() - t0 < 60, "disks do not connect"
            for name, p, _ in fios:
                assert p.poll() is None, (name, p.returncode, p.communicate())
            time.sleep(0.2)
        t0 = time.monotonic()
        for when, at in (("start", 0.15), ("middle", 0.5), ("end", 0.95)):
            time.sleep(max(0.0, t0 + at * seconds - time.monotonic()))
            assert soak.grants()[1] == GUESTS * DISKS
            soak.sample(when)
        errors = []
        for name, p, _ in fios:
            errors += fio_results(name, p, seconds)
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
