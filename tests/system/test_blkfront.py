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
from guest_fixtures import FIO, guest, fio_ok, mounted_under, wait_until  # noqa: F401

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


@pytest.mark.parametrize("engine,queues", [("psync", 1), ("psync", 2),
                                            ("libaio", 1), ("libaio", 2)])
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
        assert e.value.errno in (errno.EROFS, errno.EPERM), e.value
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


def sysfs_int(path):
    with open(path) as f:
        return int(f.read().strip())


def test_attach_detach_cycles_leave_nothing(guest):
    """50 attach/detach cycles under a running xbd-blkfront: the file comes
    and goes each time, and nothing accumulates: no mount, no descriptor
    of either daemon (/proc/PID/fd), no device or grant in the backend's
    sysfs tree, no grant of the guest's table left granted."""
    sysfs = os.path.join(guest.rundir, "sys")
    guest.backend.stop()
    guest.start_backend("blkback-sys", sysfs=sysfs)
    devices = os.path.join(sysfs, "bus", "xen-backend", "devices")
    vbd = os.path.join(devices, f"vbd-{guest.domid}-51728")
    img = guest.disk(size=4 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\x3c" * 65536)
    guest.start_blkfront()
    dev = os.path.join(guest.dev_dir, "xvdb")
    before = None
    for i in range(50):
        guest.attach(img)
        wait_until(lambda: os.path.exists(dev), what=f"{dev} (cycle {i})")
        with open(dev, "rb") as f:
            assert f.read(65536) == b"\x3c" * 65536
        st = os.path.join(vbd, "statistics")
        assert sysfs_int(os.path.join(st, "rd_req")) >= 1, i
        assert sysfs_int(os.path.join(st, "persistent_grants")) > 0, i
        guest.detach()
        wait_until(lambda: not os.path.exists(dev), what=f"{dev} gone")
        wait_until(lambda: not os.path.exists(vbd), what="backend device gone")
        assert os.listdir(devices) == [], i
        # the backend unmapped everything before the frontend revoked its
        # grants, so none stays granted; the frontend revokes them once it
        # has seen the backend Closed, which may come after the backend's
        # device left the tree (a leak still fails here, at the bound)
        wait_until(lambda: live_grants(guest) == 0, timeout=10,
                   what=f"grants revoked (cycle {i})")
        counts = (fds(guest.blkfront.pid), fds(guest.backend.pid))
        if i == 1:
            before = counts
        elif i > 1:
            assert counts == before, (i, counts, before)
    assert sorted(mounted_under(guest.rundir)) == sorted([guest.dev_dir, sysfs])
    assert os.listdir(guest.dev_dir) == [".statistics"]
    assert os.listdir(os.path.join(guest.dev_dir, ".statistics")) == []


VBD = {"xvdb": 51728, "xvdc": 51744, "xvdd": 51760}


def xs_read(g, path):
    return g.xd.tool("xenstore-read", path).stdout.strip()


def claim_state(g):
    """`xbd domain-list`'s state column of g1: claimed:PID or unclaimed."""
    for line in g.xbd("domain-list").splitlines():
        if line.split()[:1] == ["g1"] or f" {g.domid} " in f" {line} ":
            return [w for w in line.split() if "claimed" in w][0]
    raise AssertionError("g1 not listed")


def test_sigterm_closes_unmounts_releases(guest):
    devs = [guest.attach(guest.disk(f"{v}.img", size=4 * MiB), vdev=v)
            for v in ("xvdb", "xvdc")]
    guest.start_blkfront(wait_for=devs[0])
    wait_until(lambda: all(os.path.exists(d) for d in devs), what="both disks")
    pid = guest.blkfront.pid
    assert claim_state(guest) == f"claimed:{pid}"
    assert guest.blkfront.stop(signal.SIGTERM) == 0
    assert mounted_under(guest.rundir) == []
    for v in ("xvdb", "xvdc"):                    # every disk Closed
        fe = f"/local/domain/{guest.domid}/device/vbd/{VBD[v]}"
        assert xs_read(guest, f"{fe}/state") == "6", v
    assert claim_state(guest) == "unclaimed"      # the domain was released
    # so a new blkfront claims it and sees both disks again
    guest.start_blkfront(wait_for=devs[0])
    wait_until(lambda: all(os.path.exists(d) for d in devs), what="both again")
    for d in devs:
        with open(d, "rb") as f:
            assert len(f.read(4096)) == 4096


def test_two_stop_signals_still_close_every_disk(guest):
    """SIGTERM and SIGINT together (two kinds do not merge into one
    pending signal): the stopper takes one, the other must not kill the
    process when the loop has ended, before the disks were closed."""
    dev = guest.attach(guest.disk("xvdb.img", size=4 * MiB), vdev="xvdb")
    guest.start_blkfront(wait_for=dev)
    pid = guest.blkfront.pid
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGINT)
    assert guest.stop_blkfront() == 0, guest.blkfront.log_text()
    fe = f"/local/domain/{guest.domid}/device/vbd/{VBD['xvdb']}"
    assert xs_read(guest, f"{fe}/state") == "6"
    assert claim_state(guest) == "unclaimed"
    assert "already stopping" in guest.blkfront.log_text()


def test_second_claimer_is_refused_clearly(guest):
    dev = guest.attach(guest.disk(size=4 * MiB))
    guest.start_blkfront(wait_for=dev)
    r = subprocess.run([binary("xbd-blkfront"), "--domain", "g1", "--rundir",
                        guest.rundir, "--mount", guest.rundir + "/other"],
                       env=guest.env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert f"already claimed by process {guest.blkfront.pid}" in r.stderr, \
        r.stderr
    assert mounted_under(guest.rundir + "/other") == []


def fio_verify_args(name, dev, size="8M", extra=()):
    return [f"--name={name}", f"--filename={dev}", "--ioengine=libaio",
            "--direct=1", "--rw=randwrite", "--bs=4k", "--iodepth=8",
            f"--size={size}", "--verify=crc32c", "--do_verify=1",
            "--verify_fatal=1", *extra]


def test_three_disks_at_once_and_detach_of_one(guest):
    """One xbd-blkfront serves every vbd of its domain: two attached before
    it starts, one while it runs; I/O on all three at once; one detached
    while the other two keep working."""
    imgs = {v: guest.disk(f"{v}.img", size=32 * MiB) for v in VBD}
    devs = {v: os.path.join(guest.dev_dir, v) for v in VBD}
    guest.attach(imgs["xvdb"], vdev="xvdb")
    guest.attach(imgs["xvdc"], vdev="xvdc")
    guest.start_blkfront("--max_queues=2", wait_for=devs["xvdb"])
    wait_until(lambda: os.path.exists(devs["xvdc"]), what="xvdc")
    guest.attach(imgs["xvdd"], vdev="xvdd")
    wait_until(lambda: os.path.exists(devs["xvdd"]), what="xvdd (hot)")
    assert sorted(os.listdir(guest.dev_dir)) == [".statistics"] + sorted(VBD)
    assert sorted(os.listdir(os.path.join(guest.dev_dir, ".statistics"))) \
        == sorted(VBD)
    for v in VBD:
        fe = f"/local/domain/{guest.domid}/device/vbd/{VBD[v]}"
        assert xs_read(guest, f"{fe}/state") == "4", v       # Connected

    # all three at once, in one fio run (a job per disk), verified
    args = []
    for v in VBD:
        args += fio_verify_args(v, devs[v])
    out = fio_ok(guest.fio(*args))
    assert sorted(o["name"] for o in out) == sorted(VBD)
    for o in out:
        assert o["write_kb"] == 8192 and o["read_kb"] == 8192, o
    for v in VBD:
        with open(imgs[v], "rb") as f:
            assert any(f.read(8 * MiB)), v

    # xvdd goes while xvdb and xvdc are busy: they finish without error
    busy = subprocess.Popen(
        [FIO, "--output-format=terse", "--terse-version=3",
         "--verify_state_save=0", "--loops=4",
         *fio_verify_args("b", devs["xvdb"], "16M"),
         *fio_verify_args("c", devs["xvdc"], "16M")],
        cwd=guest.rundir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        time.sleep(0.5)
        assert busy.poll() is None, busy.communicate()
        guest.detach("xvdd")
        wait_until(lambda: not os.path.exists(devs["xvdd"]), what="xvdd gone")
        assert busy.poll() is None        # still running: the detach was seen
        out, err = busy.communicate(timeout=240)
    finally:
        if busy.poll() is None:
            busy.kill()
            busy.wait()
    res = fio_ok(subprocess.CompletedProcess(busy.args, busy.returncode,
                                             out, err))
    assert len(res) == 2
    assert sorted(os.listdir(guest.dev_dir)) == [".statistics", "xvdb", "xvdc"]
    fe = f"/local/domain/{guest.domid}/device/vbd/{VBD['xvdd']}"
    r = guest.xd.tool("xenstore-read", f"{fe}/state", check=False)
    assert r.returncode != 0 or r.stdout.strip() in ("5", "6"), r.stdout
    # and it comes back
    guest.attach(imgs["xvdd"], vdev="xvdd")
    wait_until(lambda: os.path.exists(devs["xvdd"]), what="xvdd again")
    with open(devs["xvdd"], "rb") as f, open(imgs["xvdd"], "rb") as g:
        assert f.read(MiB) == g.read(MiB)
    assert guest.blkfront.proc.poll() is None


def test_backend_restart_under_fio_verify(guest):
    img = guest.disk(size=32 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront("--max_queues=2", wait_for=dev)
    r = guest.fio_under_backend_restart(
        ["--name=r", f"--filename={dev}", "--ioengine=psync",
         "--direct=1", "--rw=randwrite", "--bs=4k", "--size=32M",
         "--rate_iops=2000",   # >= 4 s of writing: the kill lands in it
         "--verify=md5", "--do_verify=1", "--verify_fatal=1"])
    out = fio_ok(r)
    assert out[0]["write_kb"] == out[0]["read_kb"] == 32 * 1024, out


def test_detach_under_dd_fails_it_with_eio(guest):
    img = guest.disk(size=64 * MiB)
    dev = guest.attach(img)
    guest.start_blkfront(wait_for=dev)
    # O_DIRECT: each write is a request in flight (buffered writes would
    # finish in the page cache before the detach)
    dd_proc = subprocess.Popen(["dd", "if=/dev/zero", f"of={dev}", "bs=4k",
                                "count=16384", "conv=notrunc", "oflag=direct"],
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


def test_max_queues_above_16_is_capped_with_a_message(guest):
    """--max_queues takes up to 64 (as the option always did) but a disk
    has at most 16 queues: a larger value says so in one line and the disk
    connects with 16 (the backend offering 32); 65 is a usage error."""
    r = subprocess.run([binary("xbd-blkfront"), "--domain", "g1", "--max_queues=65"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "usage: xbd-blkfront" in r.stderr, r.stderr
    guest.backend.stop()
    guest.start_backend("blkback-32", queues=32)
    dev = guest.attach(guest.disk(size=16 * MiB))
    guest.start_blkfront("--max_queues=64", wait_for=dev)
    lines = [x for x in guest.blkfront.log_text().splitlines() if "capped" in x]
    assert lines == ["xbd-blkfront: --max_queues=64 capped at 16, the most "
                     "queues a disk has"], guest.blkfront.log_text()
    stats = os.path.join(guest.rundir, "xbd-blkback.stats")
    guest.backend.proc.send_signal(signal.SIGUSR1)
    wait_until(lambda: os.path.exists(stats), what=stats)
    with open(stats) as f:
        assert " queues 16 " in f.read()
    with open(dev, "rb") as f:                  # and it serves I/O
        assert f.read(4096) == bytes(4096)
