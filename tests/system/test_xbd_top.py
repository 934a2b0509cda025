# SPDX-License-Identifier: MIT
"""`xbd top` on a real local machine: xbd-xenstored, xbd-blkback with its
sysfs tree, domain g1 with two disks; the fio engine (the guest) drives
xvdc while xvdb stays idle (attached, no frontend).

  - --batch: one header, one line per vbd per iteration; the busy vbd
    shows non-zero IOPS and latency, the idle one zero;
  - --json: every line parses; the queues' figures with --queues;
  - the backend's polling counters (POLLS, HITS; polls, poll_hits) are
    the tree's, per vbd and per queue;
  - the requests the raw driver's sync_io helper thread served (HELPER;
    helper_req) are the tree's, and move under a deep batch on tmpfs;
  - a real terminal (tmux on a private socket): the screen comes up
    sorted by vbd, `>` keys move the sort to iops and the busy row moves
    to the top (capture-pane), `q` quits with exit status 0;
  - bad arguments: one line on stderr, exit status 2;
  - `xbd top -b | head -3`: the reader closing the pipe ends it quietly
    with status 0 (as top and xentop), also with no vbd to write about.
"""
import json
import os
import shlex
import shutil
import subprocess
import time

import pytest

from conftest import binary, sanitizer_env
from guest_fixtures import (guest, kill_if_running, mounted_under,  # noqa: F401
                            wait_until)
from test_fio_engine import ENGINE, engine_env
from test_sync_io import HELPER_ANY_LOAD, shm_disk  # noqa: F401

MiB = 1 << 20
BUSY, IDLE = "xvdc", "xvdb"          # xvdb sorts first by vbd (devid)


def start_machine(g):
    sysfs = os.path.join(g.rundir, "sys")
    g.backend.stop()
    g.start_backend("blkback-sys", sysfs=sysfs)
    g.attach(g.disk("idle.img", 16 * MiB), vdev=IDLE)
    g.attach(g.disk("busy.img", 64 * MiB), vdev=BUSY)
    return sysfs


def start_fio(g, seconds=30):
    """fio through the engine on the busy disk, in the background until
    it is stopped (time_based)."""
    argv = ["/usr/bin/fio", "--name=busy", f"--ioengine=external:{ENGINE}",
            "--xbd_domain=g1", f"--xbd_vdev={BUSY}",
            f"--xbd_rundir={g.rundir}", "--xbd_max_queues=2",
            "--rw=randrw", "--bs=4k", "--iodepth=8", "--size=32M",
            "--time_based", f"--runtime={seconds}", "--verify_state_save=0"]
    return subprocess.Popen(argv, cwd=g.rundir, env=engine_env(g),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def stop_fio(p):
    if p.poll() is None:
        p.terminate()
    out, err = p.communicate(timeout=60)
    return out, err


def busy_connected(sysfs):
    st = os.path.join(sysfs, "bus", "xen-backend", "devices")
    try:
        for d in os.listdir(st):
            with open(os.path.join(st, d, "state")) as f:
                if f.read().strip() == "Connected":
                    with open(os.path.join(st, d, "statistics",
                                           "wr_req")) as f2:
                        return int(f2.read()) > 0
    except OSError:
        return False
    return False


def top(g, *args, timeout=60):
    r = subprocess.run([binary("xbd"), "--rundir", g.rundir, "top", *args],
                       env=sanitizer_env(g.env), capture_output=True,
                       text=True, timeout=timeout)
    return r


def rows_by_vdev(lines, header):
    cols = header.split()
    out = []
    for line in lines:
        f = line.split()
        out.append(dict(zip(cols, f[:len(cols) - 1]), STORAGE=f[-1]))
    return out


def test_batch_busy_and_idle(guest):
    sysfs = start_machine(guest)
    fio = start_fio(guest)
    try:
        wait_until(lambda: busy_connected(sysfs) or fio.poll() is not None,
                   timeout=60, what="fio's I/O")
        assert fio.poll() is None, stop_fio(fio)
        r = top(guest, "--batch", "--iterations", "3", "--delay", "0.5")
    finally:
        out, err = stop_fio(fio)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["GUEST", "DOMID", "VDEV"], lines
    assert sum(1 for x in lines if x.startswith("GUEST")) == 1  # one header
    rows = rows_by_vdev(lines[1:], lines[0])
    assert len(rows) == 3 * 2, lines                  # 2 vbds x 3 iterations
    for i in range(3):
        it = {x["VDEV"]: x for x in rows[2 * i:2 * i + 2]}
        busy, idle = it[BUSY], it[IDLE]
        assert busy["GUEST"] == "g1" and busy["DOMID"] == str(guest.domid)
        assert busy["STATE"] == "Connected" and busy["Q"] == "2", busy
        assert int(busy["RD_IOPS"]) > 0 and int(busy["WR_IOPS"]) > 0, busy
        assert float(busy["WR_MB/s"]) > 0 and busy["P50_us"] != "-", busy
        assert int(busy["GRANTS"]) > 0, busy
        assert busy["STORAGE"].endswith("busy.img"), busy
        assert idle["STATE"] == "InitWait", idle
        assert idle["RD_IOPS"] == "0" and idle["WR_IOPS"] == "0", idle
        assert idle["P50_us"] == "-", idle
        assert idle["STORAGE"].endswith("idle.img"), idle


def test_json_with_queues(guest):
    sysfs = start_machine(guest)
    fio = start_fio(guest)
    try:
        wait_until(lambda: busy_connected(sysfs) or fio.poll() is not None,
                   timeout=60, what="fio's I/O")
        r = top(guest, "--json", "--queues", "-n", "2", "-d", "0.5",
                "--sort", "iops")
    finally:
        stop_fio(fio)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, lines
    for line in lines:
        doc = json.loads(line)
        assert doc["sort"] == "iops" and doc["interval_s"] > 0.3, doc
        vbds = doc["vbds"]
        assert [v["vdev"] for v in vbds] == [BUSY, IDLE], vbds  # iops first
        busy, idle = vbds
        assert busy["guest"] == "g1" and busy["queues"] == 2
        # the tree's storage node (driver and target) when it has one
        assert busy["storage"] in (
            "raw " + os.path.join(guest.rundir, "busy.img"),
            os.path.join(guest.rundir, "busy.img")), busy
        assert busy["rd_iops"] > 0 and busy["wr_iops"] > 0, busy
        assert busy["lat_p50_us"] is not None
        assert busy["lat_p99_us"] >= busy["lat_p50_us"], busy
        assert busy["errors"] == 0 and busy["persistent_grants"] > 0
        assert [q["queue"] for q in busy["queue_stats"]] == [0, 1]
        assert sum(q["wr_iops"] for q in busy["queue_stats"]) > 0
        assert idle["wr_iops"] == 0 and idle["lat_p50_us"] is None, idle
        assert idle["queue_stats"] == [] and idle["state"] == "InitWait"


def tree_polls(sysfs):
    """{row: (polls, poll_hits)} of the tree's one vbd: "vbd" for its
    statistics/, N for its queue-N/."""
    devs = os.path.join(sysfs, "bus", "xen-backend", "devices")
    (vbd,) = os.listdir(devs)
    out = {}
    for name in sorted(os.listdir(os.path.join(devs, vbd))):
        if name == "statistics" or name.startswith("queue-"):
            d = os.path.join(devs, vbd, name)
            with open(os.path.join(d, "polls")) as f, \
                    open(os.path.join(d, "poll_hits")) as g:
                key = "vbd" if name == "statistics" else int(name[6:])
                out[key] = (int(f.read()), int(g.read()))
    return out


def wait_still(fio, read, moved, what):
    """Wait until the counters read() returns have moved (moved(a)) and
    stand still for 0.5 s while fio (thinking) still runs."""
    def still():
        try:
            a = read()
            time.sleep(0.5)
            return a if a and moved(a) and a == read() else None
        except (OSError, ValueError):
            return None
    wait_until(lambda: still() or fio.poll() is not None, timeout=60, what=what)
    assert fio.poll() is None, fio.communicate()


def test_polls_shown_as_in_the_tree(guest):
    """The backend's polling counters: 256 reads at depth 1 through the
    fio engine (a polling backend spins each time the ring goes empty),
    then fio thinks with the disk connected and the counters stand still;
    the batch's POLLS and HITS and the JSON's polls and poll_hits, of the
    vbd and of each queue, are the tree's statistics/polls, poll_hits
    and queue-N/ files read before and after."""
    sysfs = os.path.join(guest.rundir, "sys")
    guest.backend.stop()
    # spin whatever the machine's load (test_backend_poll.py with_tree)
    guest.start_backend("blkback-sys", sysfs=sysfs,
                        env={"XBD_TEST_POLL_IGNORE_LOAD": "1"})
    guest.attach(guest.disk(size=32 * MiB), vdev=IDLE)
    fio = subprocess.Popen(
        ["/usr/bin/fio", "--name=burst", f"--ioengine=external:{ENGINE}",
         "--xbd_domain=g1", f"--xbd_vdev={IDLE}", f"--xbd_rundir={guest.rundir}",
         "--xbd_max_queues=2", "--rw=randread", "--bs=4k", "--size=16M",
         "--number_ios=257", "--thinktime=30s", "--thinktime_blocks=256"],
        cwd=guest.rundir, env=engine_env(guest), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_still(fio, lambda: tree_polls(sysfs), lambda a: a["vbd"][0] > 0,
                   "the burst's polls, then still counters")
        before = tree_polls(sysfs)
        text = top(guest, "--batch", "-n", "1", "-d", "0.1")
        js = top(guest, "--json", "--queues", "-n", "1", "-d", "0.1")
        after = tree_polls(sysfs)
        assert fio.poll() is None, "fio ended while thinking"
    finally:
        kill_if_running(fio)
    assert before == after, (before, after)
    assert len(before) == 3 and before["vbd"][0] > 0, before   # vbd, 2 queues
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    lines = text.stdout.splitlines()
    assert "POLLS" in lines[0].split() and "HITS" in lines[0].split(), lines[0]
    (row,) = rows_by_vdev(lines[1:], lines[0])
    assert (int(row["POLLS"]), int(row["HITS"])) == before["vbd"], (row, before)
    (vbd,) = json.loads(js.stdout)["vbds"]
    assert (vbd["polls"], vbd["poll_hits"]) == before["vbd"], (vbd, before)
    queues = {q["queue"]: (q["polls"], q["poll_hits"]) for q in vbd["queue_stats"]}
    assert queues == {0: before[0], 1: before[1]}, (queues, before)


def tree_helper(sysfs):
    """{row: helper_req} of the tree's one vbd, as tree_polls."""
    devs = os.path.join(sysfs, "bus", "xen-backend", "devices")
    (vbd,) = os.listdir(devs)
    out = {}
    for name in sorted(os.listdir(os.path.join(devs, vbd))):
        if name == "statistics" or name.startswith("queue-"):
            with open(os.path.join(devs, vbd, name, "helper_req")) as f:
                out["vbd" if name == "statistics" else int(name[6:])] = int(f.read())
    return out


def test_helper_requests_shown_as_in_the_tree(guest, shm_disk):  # noqa: F811
    """2048 random 4k writes at depth 64 on a tmpfs file with sync_io on
    and the helper offered work whatever the load; fio then thinks with
    the disk connected.  The batch's HELPER and the JSON's helper_req,
    of the vbd and of its one queue, are the tree's helper_req, and the
    helper served some of the burst."""
    sysfs = guest.restart_backend_with_tree("--sync_io=Y", "--sync_io_batch=8",
                                            queues=1, env=HELPER_ANY_LOAD)
    guest.attach(shm_disk, vdev=BUSY)
    fio = subprocess.Popen(
        ["/usr/bin/fio", "--name=burst", f"--ioengine=external:{ENGINE}",
         "--xbd_domain=g1", f"--xbd_vdev={BUSY}", f"--xbd_rundir={guest.rundir}",
         "--xbd_max_queues=1", "--thread", "--rw=randwrite", "--bs=4k",
         "--iodepth=64", "--iodepth_batch_submit=64", "--size=16M",
         "--number_ios=2049", "--thinktime=30s", "--thinktime_blocks=2048",
         "--thinktime_blocks_type=issue"],
        cwd=guest.rundir, env=engine_env(guest), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_still(fio, lambda: tree_helper(sysfs), lambda a: a["vbd"] > 0,
                   "the burst's helper requests, then still counters")
        before = tree_helper(sysfs)
        text = top(guest, "--batch", "-n", "1", "-d", "0.1")
        js = top(guest, "--json", "--queues", "-n", "1", "-d", "0.1",
                 "--sort", "helper_req")
        after = tree_helper(sysfs)
        assert fio.poll() is None, "fio ended while thinking"
    finally:
        kill_if_running(fio)
    assert before == after, (before, after)
    assert before["vbd"] == before[0] and 0 < before["vbd"] <= 2049, before
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    lines = text.stdout.splitlines()
    assert "HELPER" in lines[0].split(), lines[0]
    (row,) = rows_by_vdev(lines[1:], lines[0])
    assert int(row["HELPER"]) == before["vbd"], (row, before)
    (vbd,) = json.loads(js.stdout)["vbds"]
    assert vbd["helper_req"] == before["vbd"], (vbd, before)
    assert [(q["queue"], q["helper_req"]) for q in vbd["queue_stats"]] == \
        [(0, before[0])], (vbd, before)


class Tmux:
    """A tmux server of our own (private socket), killed at the end."""

    def __init__(self, rundir):
        self.sock = os.path.join(rundir, "tmux.sock")

    def __call__(self, *args, check=True):
        r = subprocess.run(["tmux", "-S", self.sock, *args],
                           capture_output=True, text=True, timeout=30)
        if check:
            assert r.returncode == 0, (args, r.stderr)
        return r.stdout

    def screen(self):
        return self("capture-pane", "-p", "-t", "top").splitlines()

    def kill(self):
        self("kill-server", check=False)


def data_rows(screen):
    """The vdevs of the table's rows, top to bottom, and the title."""
    title = screen[0] if screen else ""
    try:
        start = next(i for i, x in enumerate(screen) if x.startswith("GUEST"))
    except StopIteration:
        return title, []
    return title, [x.split()[2] for x in screen[start + 1:] if x.strip()]


def test_tmux_keys_sort_and_quit(guest):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (scripts/deps.sh installs it)")
    sysfs = start_machine(guest)
    rc_file = os.path.join(guest.rundir, "top.rc")
    env = sanitizer_env(guest.env)
    cmd = " ".join(
        [f"{k}={shlex.quote(env[k])}" for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS")]
        + [shlex.quote(binary("xbd")), "--rundir", shlex.quote(guest.rundir),
           "top", "--delay", "0.5", "2>" + shlex.quote(rc_file + ".err"),
           ";", "echo", "$?", ">", shlex.quote(rc_file)])
    tmux = Tmux(guest.rundir)
    fio = start_fio(guest, seconds=60)
    try:
        tmux("new-session", "-d", "-s", "top", "-x", "200", "-y", "40",
             "sh", "-c", cmd)
        wait_until(lambda: data_rows(tmux.screen())[1] == [IDLE, BUSY],
                   timeout=30, what="the screen sorted by vbd")
        assert "sort vbd" in data_rows(tmux.screen())[0]
        wait_until(lambda: busy_connected(sysfs) or fio.poll() is not None,
                   timeout=60, what="fio's I/O")
        assert fio.poll() is None, stop_fio(fio)
        for _ in range(3):                    # vbd -> guest -> vdev -> iops
            tmux("send-keys", "-t", "top", ">")
        wait_until(lambda: "sort iops" in data_rows(tmux.screen())[0],
                   timeout=10, what="the sort key iops")
        # the busy disk moves up once an interval with its I/O is shown
        wait_until(lambda: data_rows(tmux.screen())[1] == [BUSY, IDLE],
                   timeout=10, what=f"{BUSY} on top: {tmux.screen()}")
        tmux("send-keys", "-t", "top", "r")   # reversed: the idle one first
        wait_until(lambda: data_rows(tmux.screen())[1] == [IDLE, BUSY],
                   timeout=10, what="the reversed order")
        tmux("send-keys", "-t", "top", "q")
        wait_until(lambda: os.path.exists(rc_file), timeout=20,
                   what="xbd top to quit")
        time.sleep(0.1)
        with open(rc_file) as f:
            assert f.read().strip() == "0"
        with open(rc_file + ".err") as f:
            assert f.read() == ""
    finally:
        tmux.kill()
        stop_fio(fio)


@pytest.mark.parametrize("args", [
    ["--bogus"], ["--delay", "0.01"], ["--delay", "x"], ["--sort", "size"],
    ["--iterations", "0"], ["-n"], ["extra"],
])
def test_bad_arguments(guest, args):
    r = top(guest, "--batch", *args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("xbd: top: "), r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("vbds", [2, 0])
def test_closed_pipe_ends_quietly(guest, vbds):
    """`xbd top -b | head -3`: once head has its lines and closes the
    pipe, the next write fails with EPIPE (SIGPIPE is ignored) and top
    ends with status 0 and nothing on stderr, not 1.  With no vbd
    (`| head -1`, the header alone) nothing more is ever written: top
    still ends, within a few intervals, with status 0."""
    if vbds:
        start_machine(guest)
        want = 3
    else:
        guest.backend.stop()
        guest.start_backend("blkback-sys", sysfs=os.path.join(guest.rundir, "sys"))
        want = 1
    head = subprocess.Popen(["head", f"-{want}"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    top_p = subprocess.Popen([binary("xbd"), "--rundir", guest.rundir, "top", "-b",
                              "--delay", "0.1"], env=sanitizer_env(guest.env),
                             stdout=head.stdin, stderr=subprocess.PIPE, text=True)
    head.stdin.close()              # top holds the only write end
    head.stdin = None
    try:
        out, _ = head.communicate(timeout=30)
        _, err = top_p.communicate(timeout=30)
    finally:
        for p in (top_p, head):
            if p.poll() is None:
                p.kill()
                p.wait()
    lines = out.splitlines()
    assert len(lines) == want and lines[0].startswith("GUEST"), (out, err)
    assert top_p.returncode == 0, (top_p.returncode, err)
    assert err == "", err


def test_batch_and_json_with_no_vbd(guest):
    """A backend with its tree and no vbd: the batch is its header alone,
    the JSON an empty list per interval, status 0 and nothing on stderr
    (it sorted no rows: an empty table is not handed to memcpy, which
    UBSan reported as a null argument)."""
    guest.backend.stop()
    guest.start_backend("blkback-sys", sysfs=os.path.join(guest.rundir, "sys"))
    r = top(guest, "--batch", "-n", "2", "-d", "0.1")
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    assert r.stdout.splitlines() == [r.stdout.splitlines()[0]], r.stdout
    assert r.stdout.startswith("GUEST"), r.stdout
    r = top(guest, "--json", "--queues", "-n", "2", "-d", "0.1")
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    docs = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(docs) == 2 and all(d["vbds"] == [] for d in docs), docs


def test_not_a_terminal(guest):
    start_machine(guest)
    r = top(guest)                     # stdin/stdout are pipes here
    assert r.returncode == 2 and "use --batch" in r.stderr, r.stderr
