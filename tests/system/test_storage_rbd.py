# SPDX-License-Identifier: MIT
"""The rbd driver against a real single-node Ceph cluster from Debian's
packages: one monitor (msgr v2 on 127.0.0.1 and a free port) and one
memstore OSD, authentication off, pool size 1, in a private directory
with a private ceph.conf (nothing under /etc/ceph), no manager.  The
cluster is made once per module and SIGKILLed at the end (an OSD takes
seconds to stop on SIGTERM; memstore keeps nothing worth writing out)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from guest_fixtures import guest, fio_ok, wait_until  # noqa: F401
from test_fio_engine import xfio

MiB = 1 << 20
TOOLS = ("ceph-mon", "ceph-osd", "monmaptool", "ceph", "rbd")
pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS),
    reason="Ceph not installed (make deps: ceph-mon ceph-osd ceph-common)")

CONF = """[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{port}
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
ms bind msgr1 = false
public addr = 127.0.0.1
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 1073741824
memstore page set = true
osd min pg log entries = 10
osd max pg log entries = 100
osd op history size = 0
paxos propose interval = 0.1
mon mgr mkfs grace = 86400
mon allow pool size one = true
mon warn on pool no redundancy = false
run dir = {d}/run
log file = {d}/$name.log
admin socket = {d}/$name.asok
mon data = {d}/mon
osd data = {d}/osd
keyring = /dev/null
[client]
admin socket = {d}/client.$pid.asok
log file = {d}/client.$pid.log
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ceph:
    def __init__(self, d):
        self.d = d
        self.conf = os.path.join(d, "ceph.conf")
        self.procs = {}
        for sub in ("run", "mon", "osd"):
            os.makedirs(os.path.join(d, sub))
        fsid = str(uuid.uuid4())
        with open(self.conf, "w") as f:
            f.write(CONF.format(fsid=fsid, port=free_port(), d=d))
        port = open(self.conf).read().split("127.0.0.1:")[1].split()[0]
        monmap = os.path.join(d, "monmap")
        self.run("monmaptool", "--create", "--add", "a", f"v2:127.0.0.1:{port}",
                 "--fsid", fsid, monmap)
        self.run("ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", monmap)
        self.start("mon", "ceph-mon", "-i", "a")
        self.osd_uuid = str(uuid.uuid4())
        self.ceph("osd", "new", self.osd_uuid)
        self.run("ceph-osd", "-c", self.conf, "-i", "0", "--mkfs",
                 "--osd-uuid", self.osd_uuid)
        self.start_osd()
        self.ceph("osd", "pool", "create", "rbd", "8")

    def run(self, *argv, timeout=30, check=True):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, (argv, r.stdout, r.stderr)
        return r

    def ceph(self, *args, **kw):
        return self.run("ceph", "-c", self.conf, *args, **kw).stdout

    def rbd(self, *args, **kw):
        return self.run("rbd", "-c", self.conf, *args, **kw)

    def start(self, name, *argv):
        log = open(os.path.join(self.d, f"{name}.out"), "ab")
        self.procs[name] = subprocess.Popen([*argv, "-c", self.conf, "-f"],
                                            stdout=log, stderr=subprocess.STDOUT)

    def osd_up(self):
        out = self.ceph("osd", "dump", check=False, timeout=10)
        return any(line.startswith("osd.0 up") for line in out.splitlines())

    def start_osd(self):
        self.start("osd", "ceph-osd", "-i", "0")
        wait_until(self.osd_up, timeout=30, what="osd.0 up")

    def kill(self, name, sig=signal.SIGKILL):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            p.send_signal(sig)
            p.wait(timeout=60)

    def stop(self):
        for name in ("osd", "mon"):
            self.kill(name)


@pytest.fixture(scope="module")
def ceph():
    d = tempfile.mkdtemp(prefix="xbd-ceph-")
    c = None
    try:
        t = time.monotonic()
        c = Ceph(d)
        print(f"ceph cluster up in {time.monotonic() - t:.1f} s")
        yield c
    finally:
        if c:
            c.stop()
        shutil.rmtree(d, ignore_errors=True)


def rbd_target(ceph, image):
    return f"rbd:rbd/{image}:conf={ceph.conf}"


def attach(g, spec, vdev="xvdb", access="rw", check=True):
    return g.xbd("block-attach", "g1", f"vdev={vdev}, access={access}, {spec}",
                 "--timeout", "30", check=check)


VERIFY = ["--rw=randwrite", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"]


@pytest.mark.parametrize("bs,qd", [("4k", 1), ("4k", 64), ("1M", 64)])
def test_rbd_fio_verify_and_export(ceph, guest, bs, qd):
    img = f"v{bs}{qd}"
    ceph.rbd("create", "--size", "32M", f"rbd/{img}")
    attach(guest, f"target={rbd_target(ceph, img)}")
    rows = guest.xbd("block-list", "g1").splitlines()
    assert rows[1].split()[-1] == f"rbd:{rbd_target(ceph, img)[4:]}", rows
    out = fio_ok(xfio(guest, *VERIFY, f"--bs={bs}", f"--iodepth={qd}", "--size=8M"))
    assert out[0]["write_kb"] == 8192 and out[0]["read_kb"] == 8192, out
    guest.detach()
    dump = os.path.join(guest.rundir, "export.raw")
    ceph.rbd("export", f"rbd/{img}", dump)
    with open(dump, "rb") as f:
        data = f.read()
    assert len(data) == 32 * MiB and any(data[:8 * MiB]) and not any(data[8 * MiB:])


def test_rbd_discard_and_flush_reach_the_image(ceph, guest):
    ceph.rbd("create", "--size", "32M", "rbd/dis")
    attach(guest, f"target={rbd_target(ceph, 'dis')}")
    fio_ok(xfio(guest, "--rw=write", "--bs=1M", "--size=16M", "--end_fsync=1"))
    used = ceph.rbd("du", "rbd/dis").stdout
    fio_ok(xfio(guest, "--rw=trim", "--bs=4M", "--size=16M"))
    guest.detach()
    after = ceph.rbd("du", "rbd/dis").stdout
    # "NAME PROVISIONED USED": USED shrinks from 16 MiB
    assert used.split()[-2:] != after.split()[-2:], (used, after)
    assert "16 MiB" in used and "0 B" in after, (used, after)


def test_rbd_snapshot_is_read_only(ceph, guest):
    ceph.rbd("create", "--size", "8M", "rbd/snapped")
    attach(guest, f"target={rbd_target(ceph, 'snapped')}")
    fio_ok(xfio(guest, "--rw=write", "--bs=64k", "--size=1M",
                "--buffer_pattern=0x2c"))
    guest.detach()
    ceph.rbd("snap", "create", "rbd/snapped@s1")
    spec = f"target=rbd:rbd/snapped@s1:conf={ceph.conf}"
    r = attach(guest, spec, vdev="xvdc", check=False)
    assert r.returncode != 0 and "read-only" in r.stderr, r.stderr
    attach(guest, spec, vdev="xvdd", access="ro")
    fio_ok(xfio(guest, "--rw=read", "--bs=64k", "--size=1M", "--verify=pattern",
                "--verify_pattern=0x2c", "--verify_only=1", vdev="xvdd"))


def test_rbd_bad_targets_are_one_line_errors(ceph, guest):
    cases = [
        ("rbd:nopool", "bad target"),
        (f"rbd:nopool/img:conf={ceph.conf}", "pool nopool"),
        (f"rbd:rbd/noimage:conf={ceph.conf}", "noimage"),
    ]
    for i, (target, why) in enumerate(cases):
        r = attach(guest, f"target={target}", vdev=f"xvd{'bcd'[i]}", check=False)
        msg = r.stderr.strip()
        assert r.returncode != 0 and len(msg.splitlines()) == 1, msg
        assert why in msg, msg


def fio_popen(guest, *args):
    from test_storage_nbd import xfio_env
    from conftest import BUILD
    return subprocess.Popen(
        ["fio", "--output-format=terse", "--terse-version=3",
         "--verify_state_save=0", "--name=x",
         f"--ioengine=external:{os.path.join(BUILD, 'lib', 'xbd-fio.so')}",
         "--xbd_domain=g1", "--xbd_vdev=xvdb", f"--xbd_rundir={guest.rundir}",
         *args], cwd=guest.rundir, env=xfio_env(guest), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_rbd_osd_frozen_under_a_writer_is_a_stall(ceph, guest):
    """The OSD frozen (SIGSTOP) for 3 s under fio verify, then thawed: the
    guest sees a stall, every request completes and verify passes.  (Not
    SIGKILL and a restart: memstore keeps the data in RAM only, so a
    killed OSD comes back without the image.)"""
    ceph.rbd("create", "--size", "32M", "rbd/freeze")
    attach(guest, f"target={rbd_target(ceph, 'freeze')}")
    fio = fio_popen(guest, *VERIFY, "--bs=4k", "--iodepth=16", "--size=8M",
                    "--rate_iops=1000")
    osd = ceph.procs["osd"]
    try:
        time.sleep(1.5)
        assert fio.poll() is None, fio.communicate()
        osd.send_signal(signal.SIGSTOP)
        time.sleep(3)
        osd.send_signal(signal.SIGCONT)
        out, err = fio.communicate(timeout=180)
    finally:
        osd.send_signal(signal.SIGCONT)
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    assert fio.returncode == 0, guest.backend.log_text()[-3000:]
    res = fio_ok(subprocess.CompletedProcess(fio.args, fio.returncode, out, err))
    assert res[0]["write_kb"] == 8192 and res[0]["read_kb"] == 8192, res


def test_rbd_outage_past_the_limit_fails_then_recovers(ceph, guest):
    """storage_outage_ms=2000 and the OSD frozen for 6 s: the requests
    fail (rados_osd_op_timeout), the disk works again once it is back."""
    from test_storage_nbd import restart_backend
    restart_backend(guest, "--storage_outage_ms=2000")
    ceph.rbd("create", "--size", "16M", "rbd/outage")
    attach(guest, f"target={rbd_target(ceph, 'outage')}")
    fio_ok(xfio(guest, "--rw=write", "--bs=4k", "--size=1M"))
    osd = ceph.procs["osd"]
    osd.send_signal(signal.SIGSTOP)
    try:
        r = xfio(guest, "--rw=read", "--bs=4k", "--size=64k", timeout=60)
    finally:
        time.sleep(1)
        osd.send_signal(signal.SIGCONT)
    assert r.returncode != 0, r.stdout
    assert "timed out" in guest.backend.log_text()
    fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"))


def test_two_machines_share_one_image(ceph, daemons, guest, tmp_path):
    """The storage half of a live migration: two local machines (two
    XBD_RUNDIRs, each with its own xbd-xenstored and xbd-blkback) serve
    the same RBD image; written on one, detached, attached on the other,
    read back identical."""
    from guest_fixtures import Guest
    ceph.rbd("create", "--size", "16M", "rbd/shared")
    target = f"target={rbd_target(ceph, 'shared')}"
    attach(guest, target)
    fio_ok(xfio(guest, "--rw=write", "--bs=64k", "--size=4M",
                "--verify=crc32c", "--do_verify=0"))
    guest.detach()
    other_dir = tmp_path / "host-b"
    other_dir.mkdir()
    other = Guest(daemons, str(other_dir))
    try:
        attach(other, target)
        fio_ok(xfio(other, "--rw=write", "--bs=64k", "--size=4M",
                    "--verify=crc32c", "--verify_only=1"))
        other.detach()
    finally:
        other.teardown()


def test_restarted_backend_adopts_a_guest_on_rbd(ceph, guest):
    """The backend SIGKILLed under fio verify on an rbd disk: the new one
    adopts the ring (journal) and opens the image again; verify passes."""
    from test_storage_nbd import xfio_env
    from conftest import BUILD
    ceph.rbd("create", "--size", "32M", "rbd/adopt")
    attach(guest, f"target={rbd_target(ceph, 'adopt')}")
    fe = f"/local/domain/{guest.domid}/device/vbd/51728/state"
    r = guest.fio_under_backend_restart(
        ["--name=x", f"--ioengine=external:{os.path.join(BUILD, 'lib', 'xbd-fio.so')}",
         "--xbd_domain=g1", "--xbd_vdev=xvdb", f"--xbd_rundir={guest.rundir}",
         "--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=8M",
         "--rate_iops=1500", "--verify=md5", "--do_verify=1", "--verify_fatal=1"],
        env=xfio_env(guest),
        ready=lambda: guest.xd.tool("xenstore-read", fe, check=False)
        .stdout.strip() == "4")
    res = fio_ok(r)
    assert res[0]["write_kb"] == res[0]["read_kb"] == 8 * 1024, res


def test_rbd_resize_grows_the_guest_disk(ceph, guest):
    """`rbd resize` of an attached image (another client changes the
    header; librbd refreshes it): the backend's size check sees it and
    the guest's disk file grows; `xbd block-resize` refuses an rbd disk
    (it grows files) with one line."""
    ceph.rbd("create", "--size", "16M", "rbd/grow")
    attach(guest, f"target={rbd_target(ceph, 'grow')}")
    dev = os.path.join(guest.dev_dir, "xvdb")
    guest.start_blkfront(wait_for=dev)
    assert os.stat(dev).st_size == 16 * MiB
    ceph.rbd("resize", "--size", "48M", "rbd/grow")
    wait_until(lambda: os.stat(dev).st_size == 48 * MiB, timeout=15,
               what="the disk file grown to 48 MiB")
    with open(dev, "r+b") as f:
        f.seek(48 * MiB - 65536)
        f.write(b"\x3c" * 65536)
        os.fsync(f.fileno())
    r = guest.xbd("block-resize", "g1", "xvdb", "64M", check=False)
    assert r.returncode == 1 and "served by the rbd driver" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    guest.blkfront.stop()
    guest.blkfront = None
    guest.detach()
    dump = os.path.join(guest.rundir, "grow.raw")
    ceph.rbd("export", "rbd/grow", dump)
    with open(dump, "rb") as f:
        data = f.read()
    assert len(data) == 48 * MiB and data[-65536:] == b"\x3c" * 65536
