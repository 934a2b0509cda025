# SPDX-License-Identifier: MIT
"""xbd-blkfront answers FUSE requests asynchronously: the kernel's queue
depth of direct I/O reaches the ring, whatever the number of libfuse
worker threads.  The disk's statistics are read-only files,
DIR/.statistics/<vdev>/{inflight,max_inflight}, and the mount has no
extended attributes (so buffered writes cost no GETXATTR round trip);
open files belong to one connection of their vbd."""
import errno
import os
import signal
import subprocess

import pytest

from guest_fixtures import FIO, guest, fio_ok, wait_until  # noqa: F401

MiB = 1 << 20
TRACING = "/sys/kernel/tracing"
FUSE_SEND = "events/fuse/fuse_request_send"


def stats_dir(dev):
    return os.path.join(os.path.dirname(dev), ".statistics",
                        os.path.basename(dev))


def stat(dev, name):
    with open(os.path.join(stats_dir(dev), name), encoding="ascii") as f:
        text = f.read()
    assert text.endswith("\n") and text[:-1].isdigit(), repr(text)
    return int(text)


def test_statistics_are_listed_and_read_only(guest):
    dev = guest.attach(guest.disk(size=4 * MiB))
    guest.start_blkfront(wait_for=dev)
    assert sorted(os.listdir(guest.dev_dir)) == [".statistics", "xvdb"]
    assert os.listdir(os.path.join(guest.dev_dir, ".statistics")) == ["xvdb"]
    assert sorted(os.listdir(stats_dir(dev))) == ["inflight", "max_inflight"]
    assert stat(dev, "inflight") == 0
    with open(dev, "rb") as f:
        assert len(f.read(8192)) == 8192
    assert stat(dev, "max_inflight") >= 1
    with pytest.raises(FileNotFoundError):
        open(os.path.join(stats_dir(dev), "nonesuch"), "rb")
    for mode in ("wb", "r+b"):
        with pytest.raises(PermissionError):   # also for root, as sysfs
            open(os.path.join(stats_dir(dev), "inflight"), mode)
    with pytest.raises(OSError) as e:
        os.chmod(os.path.join(stats_dir(dev), "inflight"), 0o644)
    assert e.value.errno == errno.EPERM


def test_no_extended_attributes(guest):
    """The server has no xattr handlers: libfuse answers ENOSYS and the
    kernel says EOPNOTSUPP from then on, without asking."""
    dev = guest.attach(guest.disk(size=4 * MiB))
    guest.start_blkfront(wait_for=dev)
    for path in (dev, guest.dev_dir):
        for call in (lambda: os.getxattr(path, "user.xbd.inflight"),
                     lambda: os.listxattr(path),
                     lambda: os.setxattr(path, "user.xbd.inflight", b"5")):
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EOPNOTSUPP, path


@pytest.fixture
def tracing(tmp_path):
    """The kernel's tracefs: /sys/kernel/tracing, or (a fresh root where
    nothing mounted it) one this test mounts on a directory of its own
    and unmounts after."""
    if os.path.isdir(os.path.join(TRACING, "instances")):
        yield TRACING
        return
    own = tmp_path / "tracing"
    own.mkdir()
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", str(own)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no tracefs at {TRACING} and mounting one failed: "
                    f"{r.stderr.strip()}")
    try:
        yield str(own)
    finally:
        subprocess.run(["umount", str(own)], check=True)


def fuse_requests(tracefs, mount, run):
    """The FUSE requests the kernel sent to mount's server while run()
    ran, by opcode name (a private tracefs instance of the kernel's
    fuse_request_send event, filtered to this connection)."""
    event = os.path.join(tracefs, FUSE_SEND)
    if not os.path.isdir(event):
        pytest.skip(f"no {FUSE_SEND} in tracefs (Linux 6.15+): the "
                    "kernel's FUSE requests cannot be counted")
    inst = os.path.join(tracefs, "instances", f"xbd-test-{os.getpid()}")
    os.mkdir(inst)
    try:
        ev = os.path.join(inst, FUSE_SEND)
        with open(os.path.join(inst, "buffer_size_kb"), "w") as f:
            f.write("4096")
        with open(os.path.join(ev, "filter"), "w") as f:
            f.write(f"connection == {os.stat(mount).st_dev}")
        with open(os.path.join(ev, "enable"), "w") as f:
            f.write("1")
        run()
        with open(os.path.join(ev, "enable"), "w") as f:
            f.write("0")
        with open(os.path.join(inst, "trace"), encoding="utf-8") as f:
            lines = [ln for ln in f if " opcode " in ln]
    finally:
        os.rmdir(inst)
    counts = {}
    for ln in lines:
        name = ln.split(" opcode ", 1)[1].split("(", 1)[1].split(")", 1)[0]
        counts[name] = counts.get(name, 0) + 1
    return counts


def test_buffered_writes_send_no_getxattr(guest, tracing):
    """Every write(2) to a FUSE file asks for security.capability
    (file_remove_privs) unless the server answered GETXATTR with ENOSYS
    once: 256 buffered 4 KiB writes and an fsync send at most that one
    GETXATTR (and do reach the server as writes)."""
    dev = guest.attach(guest.disk(size=4 * MiB))
    guest.start_blkfront(wait_for=dev)
    block = b"\x5a" * 4096

    def writes():
        fd = os.open(dev, os.O_WRONLY)
        try:
            for i in range(256):
                assert os.pwrite(fd, block, i * 4096) == 4096
            os.fsync(fd)
        finally:
            os.close(fd)

    counts = fuse_requests(tracing, guest.dev_dir, writes)
    assert counts.get("FUSE_WRITE", 0) >= 1, counts
    assert counts.get("FUSE_GETXATTR", 0) <= 1, counts
    with open(dev, "rb") as f:
        assert f.read(MiB) == block * 256


@pytest.mark.parametrize("rw", ["randread", "randwrite"])
def test_queue_depth_48_reaches_the_ring(guest, rw):
    """With the backend stopped, fio's 48 direct I/Os (libaio, one job)
    all become requests in flight at once.  A daemon that serves each
    FUSE request in a worker thread until it completes holds at most
    its thread count (10 with libfuse's defaults) in flight."""
    img = guest.disk(size=64 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--max_queues=1", "--max_ring_page_order=2",
                         wait_for=dev)
    be = guest.backend.proc
    fio = None
    be.send_signal(signal.SIGSTOP)
    try:
        fio = subprocess.Popen(
            [FIO, "--output-format=terse", "--terse-version=3",
             "--name=qd", f"--filename={dev}", "--ioengine=libaio",
             "--direct=1", f"--rw={rw}", "--bs=4k", "--iodepth=48",
             "--iodepth_batch_submit=48", "--size=64M", "--number_ios=48",
             "--norandommap"], cwd=guest.rundir, env=guest.env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: stat(dev, "inflight") == 48 or
                   fio.poll() is not None, what="48 requests in flight")
        assert stat(dev, "inflight") == 48, fio.poll()
        assert stat(dev, "max_inflight") == 48
    finally:
        be.send_signal(signal.SIGCONT)
    out, err = fio.communicate(timeout=120)
    res = fio_ok(subprocess.CompletedProcess(fio.args, fio.returncode, out,
                                             err))
    assert res[0]["read_kb" if rw == "randread" else "write_kb"] == 48 * 4
    assert stat(dev, "inflight") == 0


def test_open_file_fails_after_reattach(guest):
    """A file opened before a detach fails with EIO afterwards, also when
    the same vbd is attached again (the inode number comes back with a new
    generation); a new open reaches the new disk."""
    img = guest.disk(size=4 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\x7e" * 4096)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    fd = os.open(dev, os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == b"\x7e" * 4096
        guest.detach()
        wait_until(lambda: not os.path.exists(dev), what=f"{dev} gone")
        guest.attach(img)
        wait_until(lambda: os.path.exists(dev), what=f"{dev} again")
        with pytest.raises(OSError) as e:
            os.pread(fd, 4096, 0)
        assert e.value.errno == errno.EIO
    finally:
        try:
            os.close(fd)       # the descriptor goes; the kernel may say EIO
        except OSError as e:   # (its inode is stale: a new generation)
            assert e.errno == errno.EIO
    with open(dev, "rb") as f:
        assert f.read(4096) == b"\x7e" * 4096
