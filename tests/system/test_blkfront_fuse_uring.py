# SPDX-License-Identifier: MIT
"""xbd-blkfront's disk files over FUSE-over-io_uring (--fuse-uring,
frontend/blkfront/fuse_uring.c): with the fuse module's enable_uring set
to Y the kernel's requests come through the rings (the log says so, the
process holds io_uring fds whose completion queues advance with the I/O,
and the rings count what they served); the data is right with O_DIRECT
and through the page cache; a SIGTERM writes back over the rings and the
daemon exits 0 with nothing left mounted.  With enable_uring=N (or
--fuse-uring=off) it serves through /dev/fuse; --fuse-uring=on then
refuses to run.  Each test sets enable_uring and puts the previous value
back (the parameter is machine-wide: only read at a mount's INIT)."""
import os
import re
import signal
import subprocess

import pytest

from conftest import binary, sanitizer_env
from guest_fixtures import FIO, fio_ok, guest, mounted_under  # noqa: F401

MiB = 1 << 20
ENABLE = "/sys/module/fuse/parameters/enable_uring"


def set_enable(value):
    with open(ENABLE, "w") as f:
        f.write(value)


@pytest.fixture
def uring(request):
    """enable_uring set to request.param ('Y' or 'N'), restored after."""
    try:
        with open(ENABLE) as f:
            old = f.read().strip()
        set_enable(request.param)
    except OSError as e:
        pytest.skip(f"{ENABLE} cannot be set ({e}): no FUSE over io_uring here")
    try:
        yield request.param
    finally:
        set_enable(old)


def ring_fds(pid):
    """The fdinfo text of every io_uring fd of pid."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[io_uring]":
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    out.append(f.read())
        except OSError:
            pass
    return out


def cq_tails(pid):
    """The sum of the completion-queue tails of pid's io_urings (each
    request a ring brings is one completion)."""
    return sum(int(m.group(1)) for t in ring_fds(pid)
               for m in [re.search(r"CqTail:\s*(\d+)", t)] if m)


def served(log):
    m = re.search(r"(\d+) requests served through the rings", log)
    return int(m.group(1)) if m else None


def stop_clean(g):
    rc = g.stop_blkfront(signal.SIGTERM)
    assert rc == 0, g.blkfront.log_text()
    assert not mounted_under(g.dev_dir)
    return g.blkfront.log_text()


@pytest.mark.parametrize("uring", ["Y"], indirect=True)
def test_io_uring_serves_direct_and_buffered_io(guest, uring):
    img = guest.disk(size=64 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--max_queues=2", "--fuse-uring=auto", wait_for=dev)
    pid = guest.blkfront.proc.pid
    assert "FUSE transport: io_uring" in guest.blkfront.log_text()
    assert ring_fds(pid), "no io_uring fd in the daemon"
    before = cq_tails(pid)
    # O_DIRECT, QD16, every block checked after it was written
    r = guest.fio("--name=v", f"--filename={dev}", "--ioengine=libaio",
                  "--direct=1", "--rw=randwrite", "--bs=4k", "--iodepth=16",
                  "--size=16M", "--verify=crc32c", "--do_verify=1",
                  "--verify_fatal=1", "--randrepeat=0")
    o = fio_ok(r)[0]
    assert o["write_kb"] >= 16 * 1024, o
    # 4096 writes and 4096 verifying reads came through the rings
    assert cq_tails(pid) - before >= 8192, (before, cq_tails(pid))
    # buffered: write through the page cache, sync, compare with the backing file
    data = os.urandom(8 * MiB)
    with open(dev, "r+b") as f:
        f.seek(32 * MiB)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    with open(img, "rb") as f:
        f.seek(32 * MiB)
        assert f.read(len(data)) == data
    # and back through an O_DIRECT read of the disk file
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        import mmap
        buf = mmap.mmap(-1, len(data))
        os.preadv(fd, [buf], 32 * MiB)
        assert bytes(buf) == data
    finally:
        os.close(fd)
    n = served(stop_clean(guest))
    assert n is not None and n >= 8192, guest.blkfront.log_text()


@pytest.mark.parametrize("uring", ["Y"], indirect=True)
def test_sigterm_writes_back_over_the_rings(guest, uring):
    """Dirty pages in the page cache at SIGTERM reach the backing file
    (the stop's write-back and flush go through the rings)."""
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--fuse-uring=auto", wait_for=dev)
    assert "FUSE transport: io_uring" in guest.blkfront.log_text()
    data = os.urandom(4 * MiB)
    with open(dev, "r+b") as f:
        f.seek(MiB)
        f.write(data)                   # no fsync: left to the stop
    log = stop_clean(guest)
    assert served(log), log
    with open(img, "rb") as f:
        f.seek(MiB)
        assert f.read(len(data)) == data


@pytest.mark.parametrize("uring", ["N"], indirect=True)
def test_falls_back_to_dev_fuse_when_disabled(guest, uring):
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--fuse-uring=auto", wait_for=dev)
    log = guest.blkfront.log_text()
    assert "FUSE transport: /dev/fuse (the kernel does not offer it" in log, log
    assert not ring_fds(guest.blkfront.proc.pid)
    data = os.urandom(2 * MiB)
    with open(dev, "r+b") as f:
        f.write(data)
        os.fsync(f.fileno())
    with open(img, "rb") as f:
        assert f.read(len(data)) == data
    assert served(stop_clean(guest)) is None


@pytest.mark.parametrize("uring", ["Y"], indirect=True)
def test_off_keeps_dev_fuse(guest, uring):
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--fuse-uring=off", wait_for=dev)
    assert "FUSE transport: /dev/fuse (--fuse-uring=off)" in guest.blkfront.log_text()
    assert not ring_fds(guest.blkfront.proc.pid)
    with open(dev, "rb") as f:
        assert f.read(4096) == bytes(4096)
    stop_clean(guest)


@pytest.mark.parametrize("uring", ["N"], indirect=True)
def test_on_refuses_without_io_uring(guest, uring):
    img = guest.disk(size=32 * MiB)
    guest.attach(img)
    r = subprocess.run([binary("xbd-blkfront"), "--domain", "g1", "--rundir",
                        guest.rundir, "--fuse-uring=on"], capture_output=True,
                       text=True, timeout=60, env=sanitizer_env(guest.env))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "--fuse-uring=on: io_uring cannot be used" in r.stderr, r.stderr
    assert not mounted_under(guest.dev_dir)


def test_bad_value_is_a_usage_error(guest):
    r = subprocess.run([binary("xbd-blkfront"), "--domain", "g1", "--rundir",
                        guest.rundir, "--fuse-uring=maybe"], capture_output=True,
                       text=True, timeout=30, env=sanitizer_env(guest.env))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--fuse-uring=maybe: not auto, on or off" in r.stderr
