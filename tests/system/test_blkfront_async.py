# SPDX-License-Identifier: MIT
"""xbd-blkfront answers FUSE requests asynchronously: the kernel's queue
depth of direct I/O reaches the ring, whatever the number of libfuse
worker threads.  The disk file's statistics are read-only extended
attributes (user.xbd.inflight, user.xbd.max_inflight); open files belong
to one connection of their vbd."""
import errno
import os
import signal
import subprocess

import pytest

from guest_fixtures import FIO, guest, fio_ok, wait_until  # noqa: F401

MiB = 1 << 20


def xattr(path, name):
    return int(os.getxattr(path, f"user.xbd.{name}"))


def test_statistics_are_listed_and_read_only(guest):
    dev = guest.attach(guest.disk(size=4 * MiB))
    guest.start_blkfront(wait_for=dev)
    assert sorted(os.listxattr(dev)) == ["user.xbd.inflight",
                                         "user.xbd.max_inflight"]
    assert xattr(dev, "inflight") == 0
    with open(dev, "rb") as f:
        assert len(f.read(8192)) == 8192
    assert xattr(dev, "max_inflight") >= 1
    with pytest.raises(OSError) as e:
        os.getxattr(dev, "user.xbd.nonesuch")
    assert e.value.errno == errno.ENODATA
    with pytest.raises(OSError):
        os.setxattr(dev, "user.xbd.inflight", b"5")
    assert os.listxattr(guest.dev_dir) == []


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
        wait_until(lambda: xattr(dev, "inflight") == 48 or
                   fio.poll() is not None, what="48 requests in flight")
        assert xattr(dev, "inflight") == 48, fio.poll()
        assert xattr(dev, "max_inflight") == 48
    finally:
        be.send_signal(signal.SIGCONT)
    out, err = fio.communicate(timeout=120)
    res = fio_ok(subprocess.CompletedProcess(fio.args, fio.returncode, out,
                                             err))
    assert res[0]["read_kb" if rw == "randread" else "write_kb"] == 48 * 4
    assert xattr(dev, "inflight") == 0


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
