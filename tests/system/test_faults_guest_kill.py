# SPDX-License-Identifier: MIT
"""SIGKILL of a real guest (xbdfront-io verify on libxbdfront: two
queues, four-page rings, persistent grants) with I/O in flight: once the
toolstack destroys the domain, xbd-blkback holds nothing of it.  Counted
from the backend's sysfs-style tree (the vbd and its persistent grants)
and from /proc/<pid>: fds (io_uring, event channels, the backing file),
threads (the queue threads; the kernel's io-wq workers not counted),
mappings of the domain's memory and grant table.  test_hostile_faults.py
does the same for the hostile frontend (no persistent grants, one
one-page ring, no tree)."""
import os
import signal
import subprocess
import time

import pytest

from conftest import binary, sanitizer_env
from hostile_fixtures import Proc
from xbd_fixtures import Machine

DEVICES = "bus/xen-backend/devices"


def threads(pid):
    """Our threads (io_uring's iou-wrk-* workers are the kernel's)."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                n += not f.read().startswith("iou-")
        except FileNotFoundError:
            pass
    return n


def fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            pass
    return out


class Box:
    def __init__(self, daemons, rundir, tmp):
        self.rundir, self.tmp = rundir, tmp
        self.tree = str(tmp / "sys")
        os.mkdir(self.tree)
        self.m = Machine(daemons, rundir)
        self.backend = daemons.start(
            [binary("xbd-blkback"), "-N", "-p", "local", "-R", rundir, "-l", "info",
             "--max_queues=2", f"--sysfs={self.tree}"], name="xbd-blkback",
            ready=lambda: os.path.isdir(os.path.join(self.tree, DEVICES)))
        self.n = 0

    def guest(self):
        self.n += 1
        domid = self.m.create(f"g{self.n}", "--memory", "64M")
        disk = str(self.tmp / f"disk{self.n}.img")
        with open(disk, "wb") as f:
            f.truncate(64 << 20)
        self.m.ok("block-attach", domid, f"{disk},raw,xvda,w")
        return domid, disk

    def front(self, domid, cmd, *opts):
        return [binary("xbdfront-io"), "--rundir", self.rundir, "--queues", "2",
                "--ring-order", "2", *opts, str(domid), "xvda", cmd]

    def vbds(self):
        return sorted(os.listdir(os.path.join(self.tree, DEVICES)))

    def stat(self, domid, name):
        with open(os.path.join(self.tree, DEVICES, f"vbd-{domid}-51712",
                               "statistics", name)) as f:
            return int(f.read())

    def held(self, domid, disk):
        """What the backend holds of domain domid: (fds, threads, mappings
        of its files, fds on its disk)."""
        pid = self.backend.pid
        p = Proc(pid)
        with open(f"/proc/{pid}/maps") as f:
            maps = [line for line in f if f"/dom{domid}/" in line]
        return p.fds, threads(pid), maps, [t for t in fd_targets(pid) if t == disk]


@pytest.fixture
def box(daemons, rundir, tmp_path):
    b = Box(daemons, rundir, tmp_path)
    try:
        yield b
    finally:
        b.backend.stop()      # unmount the tree before rundir goes
        b.m.close()


def settle(cond, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def test_real_guest_killed_mid_io_frees_everything(box):
    # baseline: a backend that served one guest and dropped it
    d0, _ = box.guest()
    r = subprocess.run(box.front(d0, "info"), capture_output=True, text=True,
                       env=sanitizer_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    box.m.ok("domain-destroy", d0)
    settle(lambda: box.vbds() == [], lambda: box.vbds())
    base = box.held(d0, None)
    domid, disk = box.guest()
    guest = subprocess.Popen(box.front(domid, "verify", "--bytes", str(1 << 30)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=sanitizer_env())
    try:
        # mid-I/O: the device has persistent grants and requests done
        settle(lambda: f"vbd-{domid}-51712" in box.vbds()
               and box.stat(domid, "persistent_grants") > 0
               and box.stat(domid, "wr_req") > 50, lambda: "guest does no I/O")
        time.sleep(0.3)
        during, grants = box.held(domid, disk), box.stat(domid, "persistent_grants")
        assert guest.poll() is None, guest.communicate()
        guest.send_signal(signal.SIGKILL)
        guest.wait()
    finally:
        if guest.poll() is None:
            guest.kill()
            guest.wait()
    assert during[0] > base[0] and during[1] >= base[1] + 2, (base, during)
    assert during[2] and during[3], "the backend maps nothing / has no disk fd?"
    box.m.ok("domain-destroy", domid)
    after = lambda: box.held(domid, disk)  # noqa: E731
    settle(lambda: box.vbds() == [] and after()[:2] == base[:2] and not after()[2]
           and not after()[3],
           lambda: f"still held: tree {box.vbds()} base {base[:2]} now {after()}")
    print(f"backend idle fds/threads {base[:2]}; serving {during[:2]} with "
          f"{len(during[2])} mappings of dom{domid}, {grants} persistent grants; "
          f"after SIGKILL + destroy {after()[:2]}, no mapping, no vbd in the tree")
    # and the next guest is served
    d2, _ = box.guest()
    r = subprocess.run(box.front(d2, "verify", "--bytes", str(1 << 20)),
                       capture_output=True, text=True, env=sanitizer_env(), timeout=60)
    assert r.returncode == 0, r.stderr
