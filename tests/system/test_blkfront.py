# SPDX-License-Identifier: MIT
"""xbd-blkfront: a local guest showing its disks as files through FUSE,
with the real xbd-xenstored, xbd-blkback and `xbd block-attach`.  dd and
fio (psync, libaio, with verify) go through the file; the bytes are checked
through the frontend and in the backing file itself."""
import errno
import os
import signal
import subprocess
import time

import pytest

from conftest import binary
from guest_fixtures import guest, fio_ok, mounted_under, wait_until  # noqa: F401

MiB = 1 << 20


def dd(*args):
    r = subprocess.run(["dd", "status=none", *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_help_and_usage():
    r = subprocess.run([binary("xbd-blkfront"), "--help"], capture_output=True,
                       text=True)
    assert r.returncode == 0
    for name in ("max_queues", "max_ring_page_order", "max_indirect_segments",
                 "feature_persistent", "--domain", "--mount"):
        assert name in r.stdout
    for argv in ([], ["--domain", "g1", "extra"], ["--domain", "g1",
                 "--max_ring_page_order=6"], ["--domain", "g1",
                 "--feature_persistent=2"]):
        r = subprocess.run([binary("xbd-blkfront"), *argv],
                           capture_output=True, text=True)
        assert r.returncode == 2, argv
        assert "usage: xbd-blkfront" in r.stderr


def test_dd_4k_and_1m_read_back_both_ways(guest, tmp_path):
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--max_queues=2", wait_for=dev)
    assert os.stat(dev).st_size == 32 * MiB
    src = tmp_path / "src"
    src.write_bytes(os.urandom(8 * MiB))
    dd(f"if={src}", f"of={dev}", "bs=4k", "conv=notrunc,fsync")
    dd(f"if={src}", f"of={dev}", "bs=1M", f"seek=16", "oflag=direct",
       "conv=notrunc,fsync")
    want = src.read_bytes()
    for off in (0, 16 * MiB):
        back = tmp_path / "back"
        dd(f"if={dev}", f"of={back}", "bs=1M", f"skip={off // MiB}", "count=8",
           "iflag=direct")
        assert back.read_bytes() == want          # through the frontend
        with open(img, "rb") as f:                # and in the backing file
            f.seek(off)
            assert f.read(8 * MiB) == want
    # an unaligned write is read-modify-write of the sectors around it
    with open(dev, "r+b", buffering=0) as f:
        f.seek(1000)
        f.write(b"xbd" * 100)
    with open(img, "rb") as f:
        data = f.read(8 * MiB)
    assert data[1000:1300] == b"xbd" * 100
    assert data[:1000] == want[:1000] and data[1300:] == want[1300:]


@pytest.mark.parametrize("engine,queues", [("psync", 1), ("libaio", 2)])
def test_fio_verify_through_fuse(guest, engine, queues):
    img = guest.disk(size=64 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(f"--max_queues={queues}", wait_for=dev)
    for jobs in (1, 2):
        r = guest.fio("--name=v", f"--filename={dev}", f"--ioengine={engine}",
                      "--direct=1", "--rw=randwrite", "--bs=4k", "--iodepth=16",
                      "--size=16M", "--offset_increment=16M", f"--numjobs={jobs}",
                      "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
        fio_ok(r)
    # the data reached the backing file
    with open(img, "rb") as f:
        assert any(f.read(16 * MiB))


def test_read_only_disk(guest):
    img = guest.disk(size=8 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\xa5" * MiB)
    dev = guest.attach(img, access="ro")
    guest.start_blkfront(wait_for=dev)
    assert os.stat(dev).st_mode & 0o222 == 0
    for flags in (os.O_WRONLY, os.O_RDWR):
        with pytest.raises(OSError) as e:
            os.open(dev, flags)
        assert e.value.errno in (errno.EROFS, errno.EPERM, errno.EACCES)
    r = subprocess.run(["dd", f"of={dev}", "if=/dev/zero", "bs=4k", "count=1",
                        "conv=notrunc"], capture_output=True, text=True)
    assert r.returncode != 0
    with open(dev, "rb") as f:
        assert f.read(MiB) == b"\xa5" * MiB
    with open(img, "rb") as f:
        assert f.read(MiB) == b"\xa5" * MiB


def test_discard_and_flush(guest):
    img = guest.disk(size=8 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\x5a" * (2 * MiB))
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    fd = os.open(dev, os.O_RDWR)
    try:
        os.fsync(fd)
        r = subprocess.run(["fallocate", "--punch-hole", "--keep-size",
                            "--offset", str(MiB), "--length", str(MiB), dev],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    finally:
        os.close(fd)
    with open(img, "rb") as f:
        assert f.read(MiB) == b"\x5a" * MiB
        assert f.read(MiB) == bytes(MiB)


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def live_grants(g):
    """Grant entries of the domain that still permit access (the local
    platform's grant table: grant_entry_v1 = flags u16, domid u16, frame)."""
    import struct
    with open(os.path.join(g.rundir, f"dom{g.domid}", "gnttab"), "rb") as f:
        data = f.read()
    return sum(1 for (flags,) in struct.iter_unpack("<H6x", data) if flags & 1)


def test_attach_detach_cycles_leave_nothing(guest):
    img = guest.disk(size=4 * MiB)
    guest.start_blkfront()
    dev = os.path.join(guest.dev_dir, "xvdb")
    before = None
    for i in range(50):
        guest.attach(img)
        wait_until(lambda: os.path.exists(dev), what=f"{dev} (cycle {i})")
        with open(dev, "rb") as f:
            assert len(f.read(4096)) == 4096
        guest.detach()
        wait_until(lambda: not os.path.exists(dev), what=f"{dev} gone")
        counts = (fds(guest.blkfront.pid), fds(guest.backend.pid))
        # grants the backend still mapped at close are revoked once it
        # unmaps them: a bounded number, never a growing one
        assert live_grants(guest) <= 64, (i, live_grants(guest))
        if i == 1:
            before = counts
        elif i > 1:
            assert counts == before, (i, counts, before)
    assert mounted_under(guest.rundir) == [guest.dev_dir]
    assert os.listdir(guest.dev_dir) == []
    # (what the backend still mapped when a device closed stays reserved
    # until the domain is released: the platform's rule for revoking)


def test_sigterm_closes_unmounts_releases(guest):
    img = guest.disk(size=4 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    assert guest.blkfront.stop(signal.SIGTERM) == 0
    assert mounted_under(guest.rundir) == []
    state = guest.xd.tool("xenstore-read",
                          f"/local/domain/{guest.domid}/device/vbd/51728/state")
    assert state.stdout.strip() == "6"           # Closed
    # the domain was released: a new blkfront claims it and sees the disk
    guest.start_blkfront(wait_for=dev)
    with open(dev, "rb") as f:
        assert len(f.read(4096)) == 4096


def test_backend_restart_under_fio_verify(guest):
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--max_queues=2", wait_for=dev)
    fio = subprocess.Popen(
        ["fio", "--name=r", f"--filename={dev}", "--ioengine=psync",
         "--direct=1", "--rw=randwrite", "--bs=4k", "--size=32M",
         "--verify=md5", "--do_verify=1", "--verify_fatal=1",
         "--output-format=terse", "--terse-version=3",
         "--verify_state_save=0"], cwd=guest.rundir,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert fio.poll() is None, fio.communicate()
        guest.backend.stop(signal.SIGKILL)
        time.sleep(0.3)
        guest.start_backend("blkback-2")
        out, err = fio.communicate(timeout=180)
    finally:
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    assert fio.returncode == 0, (out, err)
    assert out.split(";")[4] == "0", out


def test_detach_under_dd_fails_it_with_eio(guest):
    img = guest.disk(size=64 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    dd_proc = subprocess.Popen(["dd", "if=/dev/zero", f"of={dev}", "bs=4k",
                                "count=16384", "conv=notrunc"],
                               stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert dd_proc.poll() is None
        guest.detach()                       # must not hang on the writer
        _, err = dd_proc.communicate(timeout=30)
    finally:
        if dd_proc.poll() is None:
            dd_proc.kill()
            dd_proc.wait()
    assert dd_proc.returncode != 0
    assert "Input/output error" in err or "No such file" in err, err
    wait_until(lambda: not os.path.exists(dev), what=f"{dev} gone")
    assert guest.blkfront.proc.poll() is None     # the daemon lives on
