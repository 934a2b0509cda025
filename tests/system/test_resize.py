# SPDX-License-Identifier: MIT
"""Online resize, both ends: the backend notices its store grew (every
size_check_ms), writes the new `sectors` and state Connected again (as
Linux xen_vbd_resize); libxbdfront takes the new capacity and
xbd-blkfront's disk file grows, under running fio verify.
`xbd block-resize` grows a file-backed disk itself; shrinking is refused
at both ends.  Every wait is bounded."""
import os
import signal
import subprocess
import threading
import time

from conftest import binary, sanitizer_env
from guest_fixtures import guest, fio_ok, wait_until  # noqa: F401

MiB = 1 << 20
GROW_BOUND_S = 5.0          # size_check_ms (1 s by default) plus slack


def size_of(path):
    return os.stat(path).st_size


def test_grow_under_fio_verify_through_the_disk_file(guest):
    """truncate -s bigger on the backing file while fio writes and verifies
    through the guest's disk file: fio passes, the file's size (stat) and
    the backend's sectors show the new size within GROW_BOUND_S, and the
    new end reads and writes."""
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    assert size_of(dev) == 32 * MiB
    fio = subprocess.Popen(
        ["/usr/bin/fio", "--output-format=terse", "--terse-version=3",
         "--verify_state_save=0", "--name=v", f"--filename={dev}",
         "--ioengine=libaio", "--direct=1", "--rw=randwrite", "--bs=4k",
         "--iodepth=16", "--size=24M", "--loops=12", "--verify=crc32c",
         "--do_verify=1", "--verify_fatal=1"],
        cwd=guest.rundir, env=guest.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert fio.poll() is None, fio.communicate()
        os.truncate(img, 96 * MiB)
        t0 = time.monotonic()
        wait_until(lambda: size_of(dev) == 96 * MiB or fio.poll() is not None,
                   timeout=GROW_BOUND_S, what="the disk file grown to 96 MiB")
        seen_s = time.monotonic() - t0
        grew_under_fio = fio.poll() is None and size_of(dev) == 96 * MiB
        out, err = fio.communicate(timeout=120)
    finally:
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    fio_ok(subprocess.CompletedProcess(fio.args, fio.returncode, out, err))
    assert grew_under_fio, "the disk file did not grow while fio ran"
    print(f"new size seen by the guest after {seen_s:.2f} s")
    # the new end: a buffered and a direct write past the old end, read back
    with open(dev, "r+b") as f:
        f.seek(90 * MiB)
        f.write(b"\xa5" * 65536)
        f.flush()
        os.fsync(f.fileno())
        f.seek(90 * MiB)
        assert f.read(65536) == b"\xa5" * 65536
        f.seek(96 * MiB - 4096)
        assert f.read(8192) == b"\0" * 4096       # up to the new end, no further
    with open(img, "rb") as f:
        f.seek(90 * MiB)
        assert f.read(65536) == b"\xa5" * 65536


def test_libxbdfront_takes_the_new_size_while_open(guest):
    """A device open in libxbdfront (xbdfront-io info --wait-sectors):
    the resized callback fires with the new capacity and
    xbdfront_get_info reports it, without a reopen."""
    img = guest.disk(size=8 * MiB)
    guest.attach(img)
    p = subprocess.Popen(
        [binary("xbdfront-io"), "--rundir", guest.rundir, "--platform", "local",
         "--wait-sectors", str(24 * MiB // 512), "--seconds", "20",
         str(guest.domid), "xvdb", "info"],
        env=sanitizer_env(guest.env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()            # connected: the info is out
        assert first == f"sectors {8 * MiB // 512}\n", (first, p.stderr.read())
        os.truncate(img, 24 * MiB)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, (out, err)
    assert f"resized {24 * MiB // 512}\n" in out, out
    assert f"sectors-now {24 * MiB // 512}\n" in out, out


def test_block_resize_grows_and_refuses_a_shrink(guest):
    img = guest.disk(size=16 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    r = guest.xbd("block-resize", "g1", "xvdb", "40M", check=False)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert os.path.getsize(img) == 40 * MiB
    wait_until(lambda: size_of(dev) == 40 * MiB, timeout=GROW_BOUND_S,
               what="the disk file grown to 40 MiB")
    # the same size again: nothing to do, success
    assert guest.xbd("block-resize", "g1", "xvdb", "40M", check=False).returncode == 0
    # shrink: one line, exit 1, nothing changed
    r = guest.xbd("block-resize", "g1", "xvdb", "8M", check=False)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to shrink xvdb" in lines[0], r.stderr
    assert os.path.getsize(img) == 40 * MiB
    assert size_of(dev) == 40 * MiB


def test_block_resize_errors_are_clear(guest):
    img = guest.disk(size=16 * MiB)
    guest.attach(img)
    cases = [
        (("nosuchguest", "xvdb", "32M"), 1, "nosuchguest"),
        (("g1", "xvdc", "32M"), 1, "has no disk xvdc"),
        (("g1", "notavdev", "32M"), 1, "invalid virtual disk identifier"),
        (("g1", "xvdb", "12X"), 2, "invalid size '12X'"),
        (("g1", "xvdb", "1000"), 2, "multiple of 512"),
        (("g1", "xvdb"), 2, "usage"),
    ]
    for args, status, text in cases:
        r = guest.xbd("block-resize", *args, check=False)
        assert r.returncode == status, (args, r.stdout, r.stderr)
        assert text in r.stderr, (args, r.stderr)
    assert os.path.getsize(img) == 16 * MiB


def test_backend_refuses_a_store_that_shrank(guest):
    """A backing file cut behind the backend's back: the backend logs the
    refusal once and the guest's disk keeps its size."""
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    os.truncate(img, 16 * MiB)
    wait_until(lambda: "refused" in guest.backend.log_text(), timeout=GROW_BOUND_S,
               what="the backend's refusal in its log")
    time.sleep(1.5)                    # more checks: still one line
    assert guest.backend.log_text().count("shrank from") == 1
    assert size_of(dev) == 32 * MiB
    # growing again past the old size works
    os.truncate(img, 48 * MiB)
    wait_until(lambda: size_of(dev) == 48 * MiB, timeout=GROW_BOUND_S,
               what="the disk file grown to 48 MiB")


def test_store_grown_while_the_backend_was_down(guest):
    """SIGKILL of the backend, the file grows, a new backend adopts the
    rings: it announces the size the old one never saw, and the disk file
    grows; the new end works."""
    img = guest.disk(size=16 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    with open(dev, "r+b") as f:
        f.write(b"\x5a" * 4096)
        os.fsync(f.fileno())
    guest.backend.stop(signal.SIGKILL)
    os.truncate(img, 40 * MiB)
    guest.start_backend("blkback-2")
    wait_until(lambda: size_of(dev) == 40 * MiB, timeout=GROW_BOUND_S + 10,
               what="the disk file grown to 40 MiB after the restart")
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    try:
        import mmap
        buf = mmap.mmap(-1, 4096)
        buf.write(b"\xc3" * 4096)
        assert os.pwritev(fd, [buf], 40 * MiB - 4096) == 4096
        back = mmap.mmap(-1, 4096)
        assert os.preadv(fd, [back], 0) == 4096
        assert bytes(back) == b"\x5a" * 4096
    finally:
        os.close(fd)
    with open(img, "rb") as f:
        f.seek(40 * MiB - 4096)
        assert f.read(4096) == b"\xc3" * 4096


def test_grow_under_fio_verify_through_the_fio_engine(guest):
    """The same grow under the fio engine's verify (libxbdfront, no FUSE):
    the backend announces the new `sectors` while fio runs, and fio's
    verify passes."""
    from test_fio_engine import xfio
    img = guest.disk(size=32 * MiB)
    guest.attach(img)
    be = f"/local/domain/0/backend/vbd/{guest.domid}/51728"
    xs = guest.xd.conn()
    result = {}
    fio = threading.Thread(target=lambda: result.update(r=xfio(
        guest, "--rw=randwrite", "--bs=4k", "--iodepth=32", "--size=24M",
        "--loops=24", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")))
    fio.start()
    try:
        wait_until(lambda: guest.xbd("block-list", "g1").count(" 4 ") >= 1,
                   timeout=30, what="fio's disk connected")
        os.truncate(img, 64 * MiB)
        def announced():
            return xs.read(f"{be}/sectors") == str(64 * MiB // 512).encode()
        wait_until(lambda: announced() or not fio.is_alive(), timeout=GROW_BOUND_S,
                   what="the backend's new sectors")
        announced_under_fio = fio.is_alive() and announced()
    finally:
        fio.join(timeout=180)
        xs.close()
    fio_ok(result["r"])
    assert announced_under_fio, "the backend did not announce the size while fio ran"
