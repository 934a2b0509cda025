# SPDX-License-Identifier: MIT
"""xbd-bench-fuse-floor (bench/fuse/fuse_floor.c), the FUSE transport's
floor that make bench and bench/fuse/floor.sh set xbd's disk file
against: a real FUSE mount whose file reads as zeros of the size asked,
with a clear error for a bad argument, over /dev/fuse and, where the
kernel offers it, over xbd-blkfront's io_uring transport; SIGTERM
unmounts it."""
import mmap
import os
import subprocess
import time

import pytest

MiB = 1 << 20
PARAM = "/sys/module/fuse/parameters/enable_uring"


def floor_bin():
    return os.path.join(os.environ["XBD_BUILD"], "bin", "xbd-bench-fuse-floor")


def mounted(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


def serve(mnt, *args):
    p = subprocess.Popen([floor_bin(), *args, str(mnt), "8"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    disk = os.path.join(mnt, "disk")
    deadline = time.monotonic() + 10
    while not os.path.exists(disk):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            out, err = p.communicate(timeout=10)
            raise AssertionError(f"no {disk}: rc {p.returncode}: {err}")
        time.sleep(0.05)
    return p, disk


def check_and_stop(p, disk, mnt):
    try:
        assert os.path.getsize(disk) == 8 * MiB
        fd = os.open(disk, os.O_RDONLY | os.O_DIRECT)
        try:
            buf = mmap.mmap(-1, MiB)
            assert os.preadv(fd, [buf], 3 * MiB) == MiB
            assert buf[:] == bytes(MiB)
            assert os.preadv(fd, [buf], 8 * MiB) == 0          # end of the file
        finally:
            os.close(fd)
        assert not os.path.exists(os.path.join(mnt, "other"))
    finally:
        p.terminate()
        out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    assert not mounted(str(mnt))
    return err


def test_floor_over_dev_fuse(tmp_path):
    p, disk = serve(tmp_path)
    assert "FUSE transport: /dev/fuse" in check_and_stop(p, disk, tmp_path)


def test_floor_over_io_uring(tmp_path):
    if not os.access(PARAM, os.W_OK):
        pytest.skip(f"this kernel cannot run FUSE over io_uring ({PARAM} not writable)")
    with open(PARAM) as f:
        saved = f.read().strip()
    try:
        with open(PARAM, "w") as f:
            f.write("Y")
        p, disk = serve(tmp_path, "--fuse-uring=on")
        assert "FUSE transport: io_uring" in check_and_stop(p, disk, tmp_path)
    finally:
        with open(PARAM, "w") as f:
            f.write(saved)


@pytest.mark.parametrize("args,msg", [
    (["--fuse-uring=maybe", "/nonexistent", "8"], "not auto, on or off"),
    (["/nonexistent", "0"], "not a number of MiB"),
    (["/nonexistent"], "usage:"),
])
def test_bad_arguments_are_refused(args, msg):
    r = subprocess.run([floor_bin(), *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and msg in r.stderr, (r.returncode, r.stderr)
