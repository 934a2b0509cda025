# SPDX-License-Identifier: MIT
"""Start, stop, restart, persistence, hostile and vanishing clients, and a
concurrency soak (reference §6.2 items 3, 8, 16-19)."""
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import binary, sanitizer_env
from xenstored_fixtures import HDR, XS, Xenstored, connectable, xenstored  # noqa: F401,E501


def test_sigterm_clean_shutdown(xenstored):
    xenstored.introduce(4)
    assert os.path.exists(xenstored.pid_file)
    assert int(open(xenstored.pid_file).read()) == xenstored.daemon.pid
    assert xenstored.daemon.stop() == 0
    assert not os.path.exists(xenstored.sock)
    assert not os.path.exists(xenstored.dom_sock(4))
    assert not os.path.exists(xenstored.pid_file)
    assert os.path.isdir(os.path.join(xenstored.rundir, "dom4"))


def test_refuses_second_instance(xenstored):
    r = subprocess.run([binary("xbd-xenstored"), "--foreground"],
                       env=sanitizer_env(xenstored.env), capture_output=True,
                       text=True, timeout=20)
    assert r.returncode != 0
    assert "another xenstored" in r.stderr
    assert connectable(xenstored.sock)


def test_replaces_stale_socket(daemons, rundir):
    path = os.path.join(rundir, "xenstored.sock")
    os.mkdir(os.path.join(rundir, "dom9"))
    stale_dom = os.path.join(rundir, "dom9", "xenstore.sock")
    for p in (path, stale_dom):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(p)
        s.close()                                 # stale socket files
    open(os.path.join(rundir, "dom9", "memory"), "w").close()
    xd = Xenstored(daemons, rundir)
    xd.conn().write("/ok", "1")
    assert not os.path.exists(stale_dom)          # ours, removed
    assert os.path.exists(os.path.join(rundir, "dom9", "memory"))


def read_pid(path):
    try:
        return int(open(path).read())
    except (OSError, ValueError):
        return None


def test_daemon_mode_and_trace(rundir, tmp_path):
    trace = str(tmp_path / "trace")
    pid_file = os.path.join(rundir, "pid")
    sock = os.path.join(rundir, "xenstored.sock")
    env = sanitizer_env(dict(os.environ, XBD_RUNDIR=rundir))
    r = subprocess.run([binary("xbd-xenstored"), "--pid-file", pid_file,
                        "--trace", trace], env=env, timeout=20)
    assert r.returncode == 0
    pid = None
    try:
        deadline = time.monotonic() + 10
        while pid is None or not connectable(sock):
            assert time.monotonic() < deadline, "daemon did not come up"
            time.sleep(0.05)
            pid = read_pid(pid_file)
        subprocess.run(["/usr/bin/xenstore-write", "/traced", "v"],
                       env=dict(env, XENSTORED_PATH=sock), check=True,
                       timeout=20)
    finally:
        pid = pid or read_pid(pid_file)
        if pid:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while os.path.exists(pid_file):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    text = open(trace).read()
    assert "dom 0 WRITE req 0 tx 0 len 9 \"/traced v\"" in text
    assert "OUT conn" in text and "WRITE req 0 tx 0 len 3 \"OK \"" in text


def test_restart_without_persistence(daemons, rundir):
    xd = Xenstored(daemons, rundir)
    c = xd.conn()
    c.write("/gone", "1")
    c.call("WATCH", "/gone", "t")
    c.event()
    assert xd.daemon.stop() == 0
    assert c.closed()
    xd = Xenstored(daemons, rundir, name="xenstored2")
    c = xd.conn()
    assert c.error("READ", "/gone") == "ENOENT"
    assert c.ls("/") == ["tool"]
    c.call("WATCH", "/gone", "t")
    assert c.event() == (b"/gone", b"t")


def test_libxenstore_client_reconnects_after_restart(daemons, rundir,
                                                      monkeypatch):
    import sys
    sys.path.insert(0, "/usr/lib/xen-4.17/lib/python")
    from xen.lowlevel import xs
    xd = Xenstored(daemons, rundir)
    monkeypatch.setenv("XENSTORED_PATH", xd.sock)
    h = xs.xs()
    h.watch("/again", "t")
    assert h.read_watch() == ("/again", "t")
    assert xd.daemon.stop() == 0
    with pytest.raises(xs.Error):
        h.read_watch()                   # connection lost
    with pytest.raises(xs.Error):
        h.read("", "/again")
    h.close()
    xd = Xenstored(daemons, rundir, name="xenstored2")
    h = xs.xs()
    h.watch("/again", "t")
    assert h.read_watch() == ("/again", "t")   # the resync point
    h.close()


def test_restart_with_persistence(daemons, rundir, tmp_path):
    db = str(tmp_path / "store.db")
    xd = Xenstored(daemons, rundir, args=["--db", db])
    c = xd.conn()
    c.write("/keep/a", b"\x00bin\xff")
    c.call("SET_PERMS", "/keep/a", "n0", "r5")
    xd.introduce(5)
    tx = c.start()
    c.write("/keep/tx", "lost", tx=tx)
    assert xd.daemon.stop() == 0
    xd = Xenstored(daemons, rundir, args=["--db", db], name="xenstored2")
    c = xd.conn()
    assert c.read("/keep/a") == b"\x00bin\xff"
    assert c.call("GET_PERMS", "/keep/a") == b"n0\0r5\0"
    assert c.error("READ", "/keep/tx") == "ENOENT"
    assert c.call("IS_DOMAIN_INTRODUCED", "5") == b"T\0"
    assert xd.conn(5).read("/keep/a") == b"\x00bin\xff"
    assert c.call("CONTROL", "check") == b"OK\0"


def test_kill9_during_writes_leaves_consistent_store(daemons, rundir, tmp_path):
    db = str(tmp_path / "store.db")
    xd = Xenstored(daemons, rundir, args=["--db", db])
    c = xd.conn()
    for i in range(300):
        c.write(f"/k/{i}", "v" * 100)
        if i == 150:
            time.sleep(1.0)            # at least one snapshot is written
    xd.daemon.kill()
    xd = Xenstored(daemons, rundir, args=["--db", db], name="xenstored2")
    c = xd.conn()
    n = len(c.ls("/k"))
    assert 150 <= n <= 300
    assert c.call("CONTROL", "check") == b"OK\0"


def test_corrupt_store_refused(rundir, tmp_path):
    db = tmp_path / "store.db"
    db.write_bytes(b"XBDXS1\ngarbage")
    r = subprocess.run([binary("xbd-xenstored"), "--foreground", "--db", str(db)],
                       env=sanitizer_env(dict(os.environ, XBD_RUNDIR=rundir)),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert "corrupt" in r.stderr
    assert not os.path.exists(os.path.join(rundir, "xenstored.sock"))


def test_clients_vanishing(xenstored):
    c = xenstored.conn()
    c.write("/v", "0")
    c.call("WATCH", "/v", "t")
    c.event()
    # mid-header
    a = xenstored.conn()
    a.send_raw(HDR.pack(XS["READ"], 1, 0, 3)[:7])
    a.close()
    # mid-body
    a = xenstored.conn()
    a.send_raw(HDR.pack(XS["WRITE"], 1, 0, 100) + b"/v\0partial")
    a.close()
    # mid-transaction
    a = xenstored.conn()
    tx = a.start()
    a.write("/v", "from-tx", tx=tx)
    a.write("/v/new", "x", tx=tx)
    a.close()
    # with queued events
    a = xenstored.conn()
    a.call("WATCH", "/v", "gone")
    for i in range(50):
        c.write(f"/v/{i}", "x" * 1000)
    a.close()
    time.sleep(0.2)
    assert c.read("/v") == b"0"
    assert c.error("READ", "/v/new") == "ENOENT"
    events = {c.event()[0] for _ in range(50)}
    assert len(events) == 50
    c.no_event()


def test_client_that_never_reads(daemons, rundir):
    xd = Xenstored(daemons, rundir, args=["-Q", "priv-watch-events=100"])
    lazy, c = xd.conn(), xd.conn()
    lazy.call("WATCH", "/", "t")
    lazy.event()
    for i in range(2000):
        c.write(f"/flood/{i}", "x" * 2000)
    report = c.call("CONTROL", "quota", "0").decode()
    queued = [int(l.split()[1]) for l in report.splitlines()
              if l.startswith("queued-events")][0]
    assert queued == 100                  # bounded
    assert c.read("/flood/3") == b"x" * 2000
    assert "unread watch events" in xd.daemon.log_text()


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise KeyError


def soak_round(xd):
    procs = [subprocess.Popen(["/usr/lib/xen-4.17/bin/test-xenstore", "-r", "2"],
                              env=xd.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for _ in range(8)]
    watcher = subprocess.Popen(["/usr/bin/xenstore-watch", "-n", "100000", "/"],
                               env=xd.env, stdout=subprocess.DEVNULL)
    try:
        while any(p.poll() is None for p in procs):
            subprocess.run(["/usr/bin/xenstore-ls", "-f", "/local"], env=xd.env,
                           capture_output=True, timeout=30)
        for p in procs:
            out, _ = p.communicate()
            assert p.returncode == 0, out
            assert "Exhaustive transaction retries" not in out
    finally:
        watcher.kill()
        watcher.wait()


def test_concurrency_soak_bounded_rss(daemons, rundir):
    # a small ASan quarantine, so RSS shows leaks rather than freed memory
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:quarantine_size_mb=4"}
    xenstored = Xenstored(daemons, rundir, env=env)
    soak_round(xenstored)
    first = rss_kb(xenstored.daemon.pid)
    soak_round(xenstored)
    second = rss_kb(xenstored.daemon.pid)
    assert second < first + 16384, (first, second)
    c = xenstored.conn()
    assert c.call("CONTROL", "check") == b"OK\0"


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_file_descriptors(daemons, rundir):
    # prlimit lowers the daemon's descriptor limit once it runs
    xd = Xenstored(daemons, rundir)
    subprocess.run(["prlimit", f"--pid={xd.daemon.pid}", "--nofile=24"],
                   check=True)
    held = []
    try:
        for _ in range(40):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(xd.sock)
            held.append(s)
        before = cpu_seconds(xd.daemon.pid)
        time.sleep(1.0)
        assert cpu_seconds(xd.daemon.pid) - before < 0.5   # no busy loop
        for s in held[:30]:
            s.close()
        del held[:30]
        deadline = time.monotonic() + 10
        while True:                         # served again once fds free up
            try:
                c = xd.conn()
                c.write("/fd", "ok")
                break
            except (OSError, EOFError):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert "out of file descriptors" in xd.daemon.log_text()
    finally:
        for s in held:
            s.close()
