# SPDX-License-Identifier: MIT
"""Network storage drivers (Documentation/storage.md): the nbd driver
against a real nbdkit, and the qcow2 driver through a real
qemu-storage-daemon, each with fio verify through the fio engine (the
guest) and the data checked with the store's own tools."""
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import binary
from guest_fixtures import guest, fio_ok, wait_until  # noqa: F401
from storage_fixtures import ENGINE, fio_under_fault, restart_backend, xfio_env
from test_fio_engine import xfio

MiB = 1 << 20

need_nbdkit = pytest.mark.skipif(shutil.which("nbdkit") is None,
                                 reason="nbdkit not installed (make deps)")
need_qemu = pytest.mark.skipif(
    shutil.which("qemu-storage-daemon") is None or shutil.which("qemu-img") is None,
    reason="qemu-storage-daemon / qemu-img not installed (make deps)")


def nbdkit(g, sock, *args, name="nbdkit"):
    """nbdkit in the foreground on a Unix socket; a daemon of the test."""
    if os.path.exists(sock):
        os.unlink(sock)
    return g.daemons.start(["nbdkit", "--foreground", "-U", sock, *args],
                           name=name, ready=lambda: os.path.exists(sock))


def uri(sock):
    return f"nbd+unix:///?socket={sock}"


def attach_spec(g, spec, vdev="xvdb", check=True):
    return g.xbd("block-attach", "g1", f"vdev={vdev}, access=rw, {spec}",
                 "--timeout", "20", check=check)


VERIFY = ["--rw=randwrite", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
          "--xbd_max_queues=2"]


@need_nbdkit
@pytest.mark.parametrize("bs,qd", [("4k", 1), ("4k", 64), ("1M", 64)])
def test_nbd_fio_verify(guest, bs, qd):
    img = guest.disk(size=32 * MiB)
    sock = os.path.join(guest.rundir, "nbd.sock")
    nbdkit(guest, sock, "file", f"file={img}")
    attach_spec(guest, f"target={uri(sock)}")
    r = xfio(guest, *VERIFY, f"--bs={bs}", f"--iodepth={qd}", "--size=8M")
    out = fio_ok(r)
    assert out[0]["write_kb"] == 8192 and out[0]["read_kb"] == 8192, out
    with open(img, "rb") as f:          # the data is in nbdkit's file
        assert any(f.read(8 * MiB))
    guest.detach()


@need_nbdkit
def test_nbd_data_reaches_the_export(guest):
    """A pattern written through the guest reads back with nbdcopy."""
    if shutil.which("nbdcopy") is None:
        pytest.skip("nbdcopy not installed (libnbd-bin)")
    sock = os.path.join(guest.rundir, "mem.sock")
    nbdkit(guest, sock, "memory", "16M")
    attach_spec(guest, f"target={uri(sock)}")
    rows = guest.xbd("block-list", "g1").splitlines()
    assert rows[0].split()[-1] == "storage"
    assert rows[1].split()[-1] == f"nbd:{uri(sock)}", rows
    fio_ok(xfio(guest, "--rw=write", "--bs=64k", "--size=4M",
                "--buffer_pattern=0x5a", "--iodepth=8"))
    guest.detach()
    out = os.path.join(guest.rundir, "copy.raw")
    subprocess.run(["nbdcopy", uri(sock), out], check=True, timeout=60)
    with open(out, "rb") as f:
        data = f.read()
    assert data[:4 * MiB] == b"\x5a" * (4 * MiB)
    assert data[4 * MiB:] == bytes(12 * MiB)


@need_nbdkit
def test_nbd_server_restarted_under_a_writer(guest):
    """nbdkit killed under fio verify and started again 1 s later: a
    stall, no error, and verify passes."""
    img = guest.disk(size=32 * MiB)
    sock = os.path.join(guest.rundir, "nbd.sock")
    server = nbdkit(guest, sock, "file", f"file={img}")
    attach_spec(guest, f"target={uri(sock)}")

    def fault():
        server.kill()
        time.sleep(1.0)
        nbdkit(guest, sock, "file", f"file={img}", name="nbdkit-2")

    r = fio_under_fault(guest, [*VERIFY, "--bs=4k", "--iodepth=16", "--size=16M",
                                "--rate_iops=2000"], fault, timeout=120)
    res = fio_ok(r)
    assert res[0]["write_kb"] == 16384 and res[0]["read_kb"] == 16384, res
    assert "lost its connection" in guest.backend.log_text()


@need_nbdkit
def test_nbd_outage_past_the_limit_fails_then_recovers(guest):
    restart_backend(guest, "--storage_outage_ms=300")
    img = guest.disk(size=16 * MiB)
    sock = os.path.join(guest.rundir, "nbd.sock")
    server = nbdkit(guest, sock, "file", f"file={img}")
    attach_spec(guest, f"target={uri(sock)}")
    fio_ok(xfio(guest, "--rw=write", "--bs=4k", "--size=1M"))
    server.kill()
    r = xfio(guest, "--rw=read", "--bs=4k", "--size=1M", "--direct=1")
    assert r.returncode != 0                      # errors past the limit
    assert "failing its I/O" in guest.backend.log_text()
    nbdkit(guest, sock, "file", f"file={img}", name="nbdkit-2")
    time.sleep(0.5)                               # a reconnect tick
    fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"))


@need_nbdkit
def test_nbd_eio_reaches_exactly_that_request(guest):
    """nbdkit's error filter fails reads of one 4k block with EIO: fio
    sees EIO there, every other block reads back."""
    img = guest.disk(size=16 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\x11" * MiB)
    sock = os.path.join(guest.rundir, "err.sock")
    trigger = os.path.join(guest.rundir, "fail-now")
    nbdkit(guest, sock, "--filter=error", "file", f"file={img}",
           "error-pread=EIO", "error-pread-rate=100%",
           f"error-pread-file={trigger}")
    attach_spec(guest, f"target={uri(sock)}")
    fio_ok(xfio(guest, "--rw=read", "--bs=4k", "--size=1M"))
    open(trigger, "w").close()
    r = xfio(guest, "--rw=read", "--bs=4k", "--size=4k", "--offset=8k")
    assert r.returncode != 0 and "Input/output error" in r.stdout + r.stderr, r
    os.unlink(trigger)
    fio_ok(xfio(guest, "--rw=read", "--bs=4k", "--size=1M"))


def test_bad_nbd_targets_are_one_line_errors(guest):
    r = attach_spec(guest, f"target=nbd+unix:///?socket={guest.rundir}/none.sock",
                    check=False)
    assert r.returncode != 0, (guest.backend.log_text(), guest.xd.tool(
        "xenstore-ls", "-f", "/local/domain/0/backend").stdout)
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1 and "nbd" in msg, msg
    # malformed (a Unix URI without its socket), and nothing listening
    # (port 1; not nbd:// alone, which is localhost:10809 and another
    # user's server may listen there)
    for i, bad in enumerate(["nbd+unix:///x", "nbd://127.0.0.1:1/x"]):
        r = attach_spec(guest, f"target={bad}", vdev=f"xvd{'cd'[i]}", check=False)
        msg = r.stderr.strip()
        assert r.returncode != 0 and len(msg.splitlines()) == 1, (
            msg, guest.backend.log_text(), guest.xd.tool(
                "xenstore-ls", "-f", "/local/domain/0/backend").stdout)
        assert "nbd" in msg, msg


# ---- qcow2 ---------------------------------------------------------------

def qemu_img(*args):
    return subprocess.run(["qemu-img", *args], capture_output=True, text=True,
                          timeout=60)


@need_qemu
def test_qcow2_backing_chain_fio_verify_and_compare(guest):
    base = os.path.join(guest.rundir, "base.raw")
    with open(base, "wb") as f:
        f.write(b"\x33" * (2 * MiB))
        f.truncate(32 * MiB)
    top = os.path.join(guest.rundir, "top.qcow2")
    assert qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", base,
                    top).returncode == 0
    attach_spec(guest, f"format=qcow2, target={top}")
    assert guest.xbd("block-list", "g1").splitlines()[1].split()[-1] == f"qcow2:{top}"
    # the backing file's data shows through
    r = xfio(guest, "--rw=read", "--bs=1M", "--size=2M",
             "--verify=pattern", "--verify_pattern=0x33", "--verify_only=1")
    fio_ok(r)
    r = xfio(guest, *VERIFY, "--bs=4k", "--iodepth=64", "--size=8M",
             "--offset=4M")
    out = fio_ok(r)
    assert out[0]["write_kb"] == 8192, out
    guest.detach()
    # the daemon is gone with the vbd (its image lock with it), the image
    # is sound and holds the data
    wait_until(lambda: qemu_img("check", top).returncode == 0, timeout=10,
               what="qemu-storage-daemon stopped and the image consistent")
    flat = os.path.join(guest.rundir, "flat.raw")
    assert qemu_img("convert", "-O", "raw", top, flat).returncode == 0
    assert qemu_img("compare", "-f", "qcow2", "-F", "raw", top, flat).returncode == 0
    with open(flat, "rb") as f:
        assert f.read(2 * MiB) == b"\x33" * (2 * MiB)
        f.seek(4 * MiB)
        data = f.read(8 * MiB)
        nz = [i for i in range(0, len(data), MiB) if any(data[i:i + MiB])]
        assert nz, (qemu_img("map", top).stdout, os.path.getsize(flat))
    with open(base, "rb") as f:           # the backing file is untouched
        f.seek(4 * MiB)
        assert not any(f.read(8 * MiB))


@need_qemu
def test_qcow2_bad_images_are_one_line_errors(guest):
    bad = os.path.join(guest.rundir, "corrupt.qcow2")
    with open(bad, "wb") as f:
        f.write(b"QFI\xfb" + b"\xff" * 4092)
    r = attach_spec(guest, f"format=qcow2, target={bad}", check=False)
    assert r.returncode != 0
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1 and "qcow2" in msg, msg
    orphan = os.path.join(guest.rundir, "orphan.qcow2")
    gone = os.path.join(guest.rundir, "gone.raw")
    open(gone, "wb").truncate(MiB)
    assert qemu_img("create", "-f", "qcow2", "-F", "raw", "-b", gone,
                    orphan).returncode == 0
    os.unlink(gone)
    r = attach_spec(guest, f"format=qcow2, target={orphan}", vdev="xvdc",
                    check=False)
    assert r.returncode != 0
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1 and "gone.raw" in msg, msg
    # the backend still serves raw disks
    guest.attach(guest.disk(size=8 * MiB), vdev="xvdd")
    fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                "--verify=crc32c", "--do_verify=1", vdev="xvdd"))


def stats(path):
    """nbdkit's stats filter file: {op: count}."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) > 2 and w[0].endswith(":") and w[2].startswith("ops"):
                out[w[0][:-1]] = int(w[1])
    return out


@need_nbdkit
def test_nbd_flush_and_discard_reach_the_server(guest):
    """fio's fsync and trim through the guest become NBD FLUSH and TRIM
    (nbdkit's stats filter counts them), and the trim punches the file."""
    img = guest.disk(size=16 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\x77" * (4 * MiB))
    sock = os.path.join(guest.rundir, "st.sock")
    statsfile = os.path.join(guest.rundir, "stats.txt")
    server = nbdkit(guest, sock, "--filter=stats", "file", f"file={img}",
                    f"statsfile={statsfile}")
    attach_spec(guest, f"target={uri(sock)}")
    fio_ok(xfio(guest, "--rw=write", "--bs=64k", "--size=1M", "--offset=8M",
                "--end_fsync=1"))
    fio_ok(xfio(guest, "--rw=trim", "--bs=1M", "--size=4M"))
    guest.detach()
    server.stop()                 # the stats file is written at exit
    st = stats(statsfile)
    assert st.get("flush", 0) >= 1 and st.get("trim", 0) >= 1, st
    assert os.stat(img).st_blocks * 512 < 4 * MiB     # the data is punched out
    with open(img, "rb") as f:
        assert not any(f.read(4 * MiB))


@need_nbdkit
def test_nbd_without_multi_conn_offers_one_queue(guest):
    """A server without multi-conn: one queue (flushes on one connection
    would not cover another's writes); with it, the backend's two."""
    img = guest.disk(size=8 * MiB)
    for i, mode in enumerate(["disable", "emulate"]):
        sock = os.path.join(guest.rundir, f"mc{i}.sock")
        nbdkit(guest, sock, "--filter=multi-conn", "file", f"file={img}",
               f"multi-conn-mode={mode}", name=f"nbdkit-{mode}")
        vdev = f"xvd{'bc'[i]}"
        attach_spec(guest, f"target={uri(sock)}", vdev=vdev)
        devid = 51728 + 16 * i
        be = f"/local/domain/0/backend/vbd/{guest.domid}/{devid}"
        got = guest.xd.tool("xenstore-read", f"{be}/multi-queue-max-queues").stdout
        assert got.strip() == ("1" if mode == "disable" else "2"), (mode, got)
        fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                    "--verify=crc32c", "--do_verify=1", vdev=vdev))
        guest.detach(vdev)


@need_nbdkit
def test_restarted_backend_adopts_a_guest_on_nbd(guest):
    """The backend SIGKILLed under fio verify on an nbd disk: the new one
    adopts the rings (journal), reconnects to the server, and the job
    verifies every block."""
    img = guest.disk(size=32 * MiB)
    sock = os.path.join(guest.rundir, "nbd.sock")
    nbdkit(guest, sock, "file", f"file={img}")
    attach_spec(guest, f"target={uri(sock)}")
    fe = f"/local/domain/{guest.domid}/device/vbd/51728/state"
    r = guest.fio_under_backend_restart(
        ["--name=x", f"--ioengine=external:{ENGINE}",
         "--xbd_domain=g1", "--xbd_vdev=xvdb", f"--xbd_rundir={guest.rundir}",
         "--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=12M",
         "--rate_iops=1500", "--verify=md5", "--do_verify=1", "--verify_fatal=1"],
        env=xfio_env(guest),
        ready=lambda: guest.xd.tool("xenstore-read", fe, check=False)
        .stdout.strip() == "4")
    res = fio_ok(r)
    assert res[0]["write_kb"] == res[0]["read_kb"] == 12 * 1024, res


@need_qemu
def test_qcow2_daemon_killed_is_an_error_node(guest):
    """qemu-storage-daemon SIGKILLed under a connected vbd: the vbd gets an
    error node and Closing at once (not after the outage limit); another
    vbd of the same backend keeps working."""
    img = os.path.join(guest.rundir, "a.qcow2")
    assert qemu_img("create", "-f", "qcow2", img, "16M").returncode == 0
    attach_spec(guest, f"format=qcow2, target={img}")
    raw = guest.attach(guest.disk(size=8 * MiB), vdev="xvdc")
    fio_ok(xfio(guest, "--rw=write", "--bs=4k", "--size=1M"))
    pids = subprocess.run(["pgrep", "-P", str(guest.backend.pid), "-f",
                           "qemu-storage-daemon"], capture_output=True,
                          text=True).stdout.split()
    assert len(pids) == 1, pids
    os.kill(int(pids[0]), 9)
    be = f"/local/domain/0/backend/vbd/{guest.domid}/51728"
    wait_until(lambda: "killed by signal 9" in guest.xd.tool(
        "xenstore-read", f"{be}/error", check=False).stdout, timeout=10,
        what="the error node")
    # Closing, or already Closed when the frontend answered it
    assert guest.xd.tool("xenstore-read", f"{be}/state").stdout.strip() in ("5", "6")
    assert raw
    fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                "--verify=crc32c", "--do_verify=1", vdev="xvdc"))


@pytest.fixture
def blackhole():
    """A TCP address on 127.0.0.1 whose connects hang: a listening socket
    with a backlog of 0 that never accepts, its queue filled by two
    connections of our own, so the kernel drops every further SYN."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        time.sleep(0.2)
        yield f"nbd://127.0.0.1:{port}/x"
    finally:
        for c in fillers:
            c.close()
        srv.close()


@need_nbdkit
def test_unreachable_server_does_not_hold_other_disks(guest, blackhole):
    """One vbd's NBD server does not answer (its TCP connect hangs until
    the driver's 10 s bound): meanwhile another disk of the same backend
    attaches and does I/O, so the control thread is not the one waiting
    (the open runs on a helper thread).  The hanging disk then fails
    with a one-line error."""
    hung = subprocess.Popen(
        [binary("xbd"), "--platform", "local", "block-attach", "g1",
         f"vdev=xvdc, access=rw, target={blackhole}", "--timeout", "30"],
        env=guest.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        be = f"/local/domain/0/backend/vbd/{guest.domid}/51744"
        wait_until(lambda: guest.xd.tool("xenstore-read", f"{be}/params",
                                         check=False).returncode == 0,
                   timeout=10, what="the hanging disk's nodes")
        time.sleep(0.3)                 # the backend is inside its connect
        t = time.monotonic()
        img = guest.disk(size=8 * MiB)
        sock = os.path.join(guest.rundir, "ok.sock")
        nbdkit(guest, sock, "file", f"file={img}")
        attach_spec(guest, f"target={uri(sock)}")
        fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                    "--verify=crc32c", "--do_verify=1"))
        took = time.monotonic() - t
        print(f"other disk attached and verified in {took:.2f} s "
              "while the hanging connect went on")
        # the hanging attach has not ended yet: nothing waited for it
        assert hung.poll() is None, hung.communicate()
        out, err = hung.communicate(timeout=40)
    finally:
        if hung.poll() is None:
            hung.kill()
            hung.wait()
    assert hung.returncode != 0, out
    msg = err.strip()
    assert len(msg.splitlines()) == 1 and "no answer" in msg, msg
    guest.detach()


def qcow2_allocated(img):
    """Bytes of guest data the image's own clusters hold (qemu-img map)."""
    import json
    r = qemu_img("map", "--output=json", img)
    assert r.returncode == 0, r.stderr
    return sum(e["length"] for e in json.loads(r.stdout) if e["data"])


@need_qemu
def test_qcow2_discard_frees_clusters(guest):
    """fio's trim through the guest reaches QEMU's qcow2 code (the daemon
    opens the image with discard=unmap): the clusters are freed (qemu-img
    map), the image is consistent (qemu-img check) and the file shrinks."""
    img = os.path.join(guest.rundir, "dis.qcow2")
    assert qemu_img("create", "-f", "qcow2", img, "32M").returncode == 0
    attach_spec(guest, f"format=qcow2, target={img}")
    fio_ok(xfio(guest, "--rw=write", "--bs=1M", "--size=8M", "--end_fsync=1"))
    guest.detach()
    wait_until(lambda: qemu_img("check", img).returncode == 0, timeout=10,
               what="qemu-storage-daemon stopped")
    full, full_blocks = qcow2_allocated(img), os.stat(img).st_blocks
    assert full == 8 * MiB, qemu_img("map", img).stdout
    attach_spec(guest, f"format=qcow2, target={img}")
    fio_ok(xfio(guest, "--rw=trim", "--bs=1M", "--size=6M"))
    guest.detach()
    wait_until(lambda: qemu_img("check", img).returncode == 0, timeout=10,
               what="qemu-storage-daemon stopped")
    assert qcow2_allocated(img) == 2 * MiB, qemu_img("map", img).stdout
    assert os.stat(img).st_blocks * 512 <= full_blocks * 512 - 5 * MiB


@need_qemu
def test_qcow2_daemon_socket_is_in_the_rundir(guest):
    """The daemon's private directory is $XBD_RUNDIR/qcow2/vbd-XXXXXX
    (mode 0700), not /tmp, and goes with the vbd; a $XBD_RUNDIR/qcow2
    that is a link (planted by someone else) is refused."""
    img = os.path.join(guest.rundir, "s.qcow2")
    assert qemu_img("create", "-f", "qcow2", img, "8M").returncode == 0
    base = os.path.join(guest.rundir, "qcow2")
    attach_spec(guest, f"format=qcow2, target={img}")
    dirs = os.listdir(base)
    assert len(dirs) == 1 and dirs[0].startswith("vbd-"), dirs
    st = os.lstat(os.path.join(base, dirs[0]))
    assert st.st_mode & 0o777 == 0o700
    assert os.path.exists(os.path.join(base, dirs[0], "sock"))
    assert os.lstat(base).st_mode & 0o777 == 0o700
    fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M",
                "--verify=crc32c", "--do_verify=1"))
    guest.detach()
    wait_until(lambda: not os.listdir(base), timeout=10,
               what="the daemon's directory removed")
    os.rmdir(base)
    elsewhere = os.path.join(guest.rundir, "elsewhere")
    os.mkdir(elsewhere, 0o700)
    os.symlink(elsewhere, base)
    r = attach_spec(guest, f"format=qcow2, target={img}", vdev="xvdc",
                    check=False)
    msg = r.stderr.strip()
    assert r.returncode != 0 and len(msg.splitlines()) == 1, msg
    assert "not a directory" in msg, msg
    assert not os.listdir(elsewhere)


@need_nbdkit
def test_detached_while_its_server_does_not_answer(guest, blackhole):
    """A disk detached (block-detach --force) while its backend is still
    inside the connect: when the open ends, nothing is written for it (no
    error node bringing its directory back), and the vdev attaches again
    to a server that answers."""
    r = guest.xbd("block-attach", "g1", f"vdev=xvdc, access=rw, target={blackhole}",
                  "--timeout", "1", check=False)
    assert r.returncode != 0 and "answered" in r.stderr, r.stderr
    guest.xbd("block-detach", "--force", "g1", "xvdc")
    be = f"/local/domain/0/backend/vbd/{guest.domid}/51744"

    def back():
        return guest.xd.tool("xenstore-ls", be, check=False).returncode == 0

    # the open ends (10 s bound): the log says so, or the directory is back
    wait_until(lambda: back() or "detached while its store was opening"
               in guest.backend.log_text(), timeout=30, what="the open's end")
    time.sleep(0.3)
    assert not back(), guest.xd.tool("xenstore-ls", "-f", be, check=False).stdout
    img = guest.disk(size=8 * MiB)
    sock = os.path.join(guest.rundir, "ok.sock")
    nbdkit(guest, sock, "file", f"file={img}")
    attach_spec(guest, f"target={uri(sock)}", vdev="xvdc")
    fio_ok(xfio(guest, "--rw=randwrite", "--bs=4k", "--size=1M", "--verify=crc32c",
                "--do_verify=1", vdev="xvdc"))
