# SPDX-License-Identifier: MIT
"""Faults: a guest killed mid-I/O, a backing file on a full filesystem, and
storage that returns EIO for chosen ranges.  The backend frees everything
it held for a dead guest, fails only the requests that hit the fault, stays
up, and the other disks are unaffected."""
import os
import subprocess
import time

import pytest

from conftest import binary
from hostile_fixtures import DISK_BYTES, host, wait_for  # noqa: F401  (fixture)


def dom_mappings(pid, domid):
    with open(f"/proc/{pid}/maps") as f:
        return [line for line in f if f"/dom{domid}/" in line]


def settled(host, domid):
    """The backend's counts once they stop changing and nothing of domain
    domid is mapped any more (bounded wait)."""
    last = None
    for _ in range(100):
        now = host.proc()
        key = (now.fds, now.threads, bool(dom_mappings(host.backend.pid, domid)))
        if key == last and not key[2]:
            return now
        last = key
        time.sleep(0.1)
    raise AssertionError(f"backend does not settle: {now}")


def test_guest_killed_mid_io_frees_everything(host):
    # the baseline: a backend that has served and dropped one device
    warm = host.guest("warmup")
    host.m.ok("domain-destroy", warm.domid)
    base = settled(host, warm.domid)
    g = host.guest("victim")
    p = g.spawn("busy", 30)
    try:
        assert p.stdout.readline().strip() == "connected 1"
        assert p.stdout.readline().strip() == "ready 1"
        during = host.proc()
        held = dom_mappings(host.backend.pid, g.domid)
        p.kill()
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # serving a guest costs threads and fds, and maps its memory
    assert during.threads > base.threads and during.fds > base.fds, (base, during)
    assert held, "the backend maps nothing of the guest's memory?"
    # the toolstack destroys the dead guest: its vbd goes, then everything
    host.m.ok("domain-destroy", g.domid)
    assert not host.m.exists(g.be)
    wait_for(lambda: (host.proc().fds, host.proc().threads) == (base.fds, base.threads)
             and not dom_mappings(host.backend.pid, g.domid),
             f"backend still holds the dead guest's resources: {host.proc()} "
             f"{dom_mappings(host.backend.pid, g.domid)}")
    after = host.proc()
    print(f"backend idle {base}, serving {during}, after kill+destroy {after}")
    # and serves the next guest
    assert host.guest("next").front("latency", 4)["roundtrips"] == "4"


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs of our own, unmounted (lazily if still busy) at the end."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "xbd-test", str(mnt)],
                   check=True)
    yield mnt
    if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_full_filesystem_fails_only_those_writes(host, small_fs):
    disk = str(small_fs / "disk.img")
    with open(disk, "wb") as f:
        f.truncate(DISK_BYTES)                # sparse: 8 MiB on 1 MiB
    full = host.guest("full", disk=disk)
    good = host.guest("good")
    out = full.front("io", "write", 0, 512)   # 2 MiB of writes
    print(f"writes on a 1 MiB filesystem: {out['ok']} ok, {out['error']} failed "
          f"from sector {out['first_error']}")
    assert int(out["ok"]) > 0 and int(out["error"]) > 0
    assert int(out["ok"]) + int(out["error"]) == 512
    assert int(out["ok"]) * 4096 <= 1 << 20
    assert full.be_state() == "4"             # errors, not a dead device
    # what did fit reads back; the other disk never noticed
    assert full.front("io", "read", 0, 16)["error"] == "0"
    assert good.front("latency", 8)["roundtrips"] == "8"
    host.proc()
    host.m.ok("domain-destroy", full.domid)   # closes the file: umount works


def test_eio_ranges_fail_only_those_requests(host, tmp_path):
    mnt = tmp_path / "eio"
    mnt.mkdir()
    # sectors [64, 96) fail on read, [128, 136) on write
    fs = subprocess.Popen([binary("xbd-test-eio-fs"), "-f", str(mnt),
                           "--size", str(DISK_BYTES),
                           "--eio-read", "32768:16384", "--eio-write", "65536:4096"],
                          stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.ismount(mnt), "FUSE server did not mount")
        g = host.guest("eio", disk=str(mnt / "disk"))
        good = host.guest("good")
        w = g.front("io", "write", 0, 32)            # sectors 0..255
        assert (w["error"], w["first_error"]) == ("1", "128"), w
        r = g.front("io", "read", 0, 32)
        assert (r["error"], r["first_error"]) == ("4", "64"), r
        assert g.be_state() == "4"
        assert good.front("latency", 8)["roundtrips"] == "8"
        host.m.ok("domain-destroy", g.domid)
    finally:
        # The backend closes the disk after domain-destroy returns (its
        # teardown is asynchronous): until then umount says busy.
        for _ in range(100):
            if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0 \
                    or not os.path.ismount(mnt):
                break
            time.sleep(0.1)
        try:
            fs.wait(10)
        except subprocess.TimeoutExpired:
            fs.kill()
            fs.wait()
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    assert fs.returncode == 0, fs.stderr.read()
