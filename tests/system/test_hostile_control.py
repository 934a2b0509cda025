# SPDX-License-Identifier: MIT
"""Issue 18, item 3: one guest cannot starve another's control plane.

While guest A cycles its frontend state as fast as xenstored takes the
writes (with and without the test holding locks on every file of A's
local domain), and while guest S's vbd, whose storage answers each
request after 1 s (tests/helpers/eio_fs.c --delay-ms), closes with four
writes in flight, guest B does three full connect + I/O rounds, each
under 2 s.  Before the fix the backend's single control thread acted on
every queued state event of A in turn (a full connect and disconnect
each) and waited, with no limit, for S's in-flight I/O to drain when S
closed: B's first connect then took 8 s (with 2 s per request).
"""
import fcntl
import os
import subprocess
import time

import pytest

from conftest import binary
from hostile_fixtures import host, wait_for  # noqa: F401  (fixture)

DELAY_MS = 1000
IN_FLIGHT = 4                    # S's drain: IN_FLIGHT x DELAY_MS, serially
ROUND_S = 2.0


def lock_domain_files(rundir, domid):
    """Write-lock every file of the running local domain (the guest owns
    them and may do so): the whole file, or, where the guest's frontend
    already holds a byte (its claim), everything after the first byte.
    The open files, to unlock by closing."""
    held = []
    d = os.path.join(rundir, f"dom{domid}")
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if not os.path.isfile(path):
            continue
        fd = os.open(path, os.O_RDWR)
        for start in (0, 1):
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, start)
                held.append(fd)
                break
            except OSError:
                pass
        else:
            os.close(fd)
    return held


@pytest.fixture
def slow_disk(tmp_path):
    mnt = tmp_path / "slow"
    mnt.mkdir()
    fs = subprocess.Popen([binary("xbd-test-eio-fs"), "-f", str(mnt),
                           "--size", str(8 << 20), "--delay-ms", str(DELAY_MS)],
                          stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.ismount(mnt), "FUSE server did not mount")
        yield str(mnt / "disk")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        try:
            fs.wait(30)
        except subprocess.TimeoutExpired:
            fs.kill()
            fs.wait()
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("locked", [False, True], ids=["unlocked", "locked"])
def test_flipping_and_slow_close_do_not_delay_another_connect(host, slow_disk, locked):
    a = host.guest("flipper")
    s = host.guest("slow", disk=slow_disk)
    b = host.guest("bystander")
    flipper = a.spawn("flip", 10 ** 7)
    held = []
    try:
        time.sleep(0.5)                       # A's events pile up
        if locked:
            held = lock_domain_files(host.rundir, a.domid)
            assert held, "no file of the flipping domain could be locked"
            print(f"locked {len(held)} files of dom{a.domid}")
        out = s.front("abandon", IN_FLIGHT, timeout=30)
        assert out["abandoned"] == str(IN_FLIGHT)
        times = []
        for _ in range(3):
            t0 = time.monotonic()
            r = b.front("latency", 4, timeout=30)
            times.append(time.monotonic() - t0)
            assert r["roundtrips"] == "4"
        print(f"locked={locked}: B's rounds took "
              + ", ".join(f"{t:.2f}s" for t in times))
        assert max(times) < ROUND_S, times
        assert flipper.poll() is None, \
            "the flipping guest stopped early: " + flipper.communicate()[1]
    finally:
        flipper.kill()
        flipper.wait()
        for fd in held:
            os.close(fd)
    # S's teardown finished on its own: its vbd is Closed, nothing lost
    try:
        host.wait_state(f"{s.be}/state", 6, timeout=IN_FLIGHT * DELAY_MS / 1000 + 20)
    except AssertionError:
        print(host.backend.log_text()[-6000:])
        raise
    host.proc()
    host.m.ok("domain-destroy", s.domid)   # closes the file: umount works
