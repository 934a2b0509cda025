# SPDX-License-Identifier: MIT
"""Polling in xbd-blkback (the poll_duration_us tunable, Documentation/
backend.md "Polling"): a queue thread spins a short, adaptive time on
its ring and its completions before it sleeps on the event channel.

- an attached disk that is idle costs no process of the machine CPU
  (xbd-xenstored, xbd-blkback, the guest: xbd-blkfront or fio's engine),
  with both ends polling at the default and at the maximum;
- fio's crc32c verify passes at depth 1 and 64 with the backend polling
  on and off, the frontend on and off; the backend's polls counters move
  only when it polls;
- the tunable reads and writes in the tree, takes effect at once, and a
  value out of range is refused (EINVAL, the old value kept, the log and
  the command line say what the range is)."""
import errno
import os
import subprocess
import threading
import time

import pytest

from conftest import binary
from guest_fixtures import guest, descendants, fio_ok, kill_if_running, wait_until  # noqa: F401
from test_fio_engine import xfio, ENGINE, engine_env
from tree_files import cat, echo

MiB = 1 << 20
HZ = os.sysconf("SC_CLK_TCK")
PARAM = os.path.join("module", "xen_blkback", "parameters", "poll_duration_us")
DEFAULT, MAX = 50, 1000


def cpu_seconds(pid):
    """User + system time of every thread of process pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def with_tree(g, *extra):
    """Restart g's backend with its sysfs-style tree (and extra options);
    the tree's directory.  The backend does not spin while the machine
    has more runnable threads than CPUs (io_uring.c machine_busy); the
    test switch XBD_TEST_POLL_IGNORE_LOAD lifts that, so that the spin
    runs (and its CPU is counted) however busy the machine is."""
    return g.restart_backend_with_tree(*extra, env={"XBD_TEST_POLL_IGNORE_LOAD": "1"})


def vbd_stat(sysfs, name):
    """The vbd's counter (summed over its queues), or None while no
    frontend is connected."""
    d = os.path.join(sysfs, "bus", "xen-backend", "devices")
    try:
        for v in os.listdir(d):
            with open(os.path.join(d, v, "statistics", name)) as f:
                return int(f.read())
    except (OSError, ValueError):
        return None
    return None


def idle_cpu(pids, seconds=10):
    before = {p: cpu_seconds(p) for p in pids}
    time.sleep(seconds)
    return {p: cpu_seconds(p) - before[p] for p in pids}


@pytest.mark.parametrize("poll", [DEFAULT, MAX])
def test_idle_disk_costs_no_cpu_blkfront(guest, poll):
    """xbd-blkfront with an attached disk, after I/O at depth 1 (both ends
    have polled and their windows have grown), then 10 s of nothing:
    every process under 1% of one core."""
    sysfs = with_tree(guest, f"--poll_duration_us={poll}")
    dev = guest.attach(guest.disk(size=32 * MiB))
    bf = guest.start_blkfront(f"--poll_duration_us={poll}", wait_for=dev)
    fio_ok(guest.fio("--name=w", f"--filename={dev}", "--ioengine=libaio",
                     "--direct=1", "--rw=randread", "--bs=4k", "--iodepth=1",
                     "--size=16M", "--io_size=4M"))
    assert vbd_stat(sysfs, "polls") > 0      # the backend did poll
    time.sleep(1)
    used = idle_cpu([guest.xd.daemon.pid, guest.backend.pid, bf.pid])
    names = {guest.xd.daemon.pid: "xbd-xenstored", guest.backend.pid: "xbd-blkback",
             bf.pid: "xbd-blkfront"}
    for pid, s in used.items():
        assert s < 0.1, f"idle {names[pid]} used {s:.2f} s of CPU in 10 s"


@pytest.mark.parametrize("poll", [DEFAULT, MAX])
def test_idle_disk_costs_no_cpu_fio_engine(guest, poll):
    """A guest that is fio through the engine: a burst of 256 reads at
    depth 1, then it thinks 14 s with the disk attached and connected;
    over 10 s of that, every process under 1% of one core."""
    sysfs = with_tree(guest, f"--poll_duration_us={poll}")
    guest.attach(guest.disk(size=32 * MiB))
    fio = subprocess.Popen(
        ["/usr/bin/fio", "--output-format=terse", "--terse-version=3",
         "--name=idle", f"--ioengine=external:{ENGINE}", "--xbd_domain=g1",
         "--xbd_vdev=xvdb", f"--xbd_rundir={guest.rundir}",
         f"--xbd_poll_duration_us={poll}", "--rw=randread", "--bs=4k",
         "--size=16M", "--number_ios=257", "--thinktime=14s",
         "--thinktime_blocks=256"],
        cwd=guest.rundir, env=engine_env(guest), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (vbd_stat(sysfs, "rd_req") or 0) >= 256 or
                   fio.poll() is not None, timeout=60, what="the burst")
        assert fio.poll() is None, fio.communicate()
        assert vbd_stat(sysfs, "polls") > 0
        time.sleep(1)
        # fio forks its job: the engine (libxbdfront, its polling) runs in
        # the job's process; the parent is fio's own supervisor, which
        # wakes every few ms whatever the engine (0.10 s in 10 s once
        # under ASan in a fresh root), so it is not what is measured
        jobs = descendants(fio.pid)
        assert jobs, "fio has no job process"
        pids = {guest.xd.daemon.pid: "xbd-xenstored",
                guest.backend.pid: "xbd-blkback"}
        pids.update({j: "fio's job (the engine)" for j in jobs})
        used = idle_cpu(list(pids))
        assert fio.poll() is None, "fio ended before the 10 s were over"
        for pid, s in used.items():
            assert s < 0.1, f"idle {pids[pid]} used {s:.2f} s of CPU in 10 s"
        out, err = fio.communicate(timeout=60)
        assert fio.returncode == 0, err
    finally:
        kill_if_running(fio)


@pytest.mark.parametrize("depth", [1, 64])
@pytest.mark.parametrize("be,fe", [(0, 0), (0, DEFAULT), (DEFAULT, 0),
                                   (DEFAULT, DEFAULT), (MAX, MAX)])
def test_verify_with_and_without_polling(guest, depth, be, fe):
    """crc32c verify through the fio engine; the backend's polls counter
    is sampled while fio runs (the statistics go with the frontend)."""
    sysfs = with_tree(guest, f"--poll_duration_us={be}")
    guest.attach(guest.disk(size=64 * MiB))
    polls, done = [], threading.Event()

    def sample():
        while not done.wait(0.05):
            v = vbd_stat(sysfs, "polls")
            if v is not None:
                polls.append((v, vbd_stat(sysfs, "poll_hits") or 0))
    t = threading.Thread(target=sample)
    t.start()
    try:
        r = xfio(guest, "--rw=randwrite", "--bs=4k", f"--iodepth={depth}",
                 "--size=8M", "--verify=crc32c", "--do_verify=1",
                 "--verify_fatal=1", f"--xbd_poll_duration_us={fe}")
    finally:
        done.set()
        t.join()
    out = fio_ok(r)
    assert out[0]["write_kb"] == 8192 and out[0]["read_kb"] == 8192, out
    assert polls, "no statistics seen while fio ran"
    last, hits = max(polls)
    if be == 0:
        assert last == 0 and hits == 0, polls[-1]
    else:
        # at depth 1 the ring goes empty after every request, so a polling
        # backend spins; at depth 64 it may never go empty in so short a
        # job (seen: 0 polls in a fresh root), so only the bound is checked
        assert hits <= last, polls[-1]
        if depth == 1:
            assert last > 0, polls[-1]


def test_tunable_reads_writes_and_refuses(guest):
    sysfs = with_tree(guest)
    st = os.stat(os.path.join(sysfs, PARAM))
    assert st.st_mode & 0o777 == 0o644
    assert cat(guest, PARAM) == f"{DEFAULT}\n"
    for good in ("0", "1000", "7\n"):
        assert echo(guest, PARAM, good) == 0, good
        assert cat(guest, PARAM) == good.strip() + "\n"
    for bad in ("1001", "-1", "abc", " 5", "5x", "\n", "99999999999999999999999"):
        assert echo(guest, PARAM, bad) == errno.EINVAL, bad
        assert cat(guest, PARAM) == "7\n", bad
    wait_until(lambda: "poll_duration_us: 1001 refused: not a number in 0..1000"
               in guest.backend.log_text(), timeout=5, what="the refusal logged")


def reading_fio(guest, sysfs, name):
    """fio through the engine, 4k random reads at depth 1 for 30 s, once
    the backend counted its first hundred reads."""
    fio = subprocess.Popen(
        ["/usr/bin/fio", "--output-format=terse", "--terse-version=3",
         f"--name={name}", f"--ioengine=external:{ENGINE}", "--xbd_domain=g1",
         "--xbd_vdev=xvdb", f"--xbd_rundir={guest.rundir}", "--rw=randread",
         "--bs=4k", "--size=16M", "--time_based", "--runtime=30",
         "--iodepth=1"],
        cwd=guest.rundir, env=engine_env(guest), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (vbd_stat(sysfs, "rd_req") or 0) > 100 or
                   fio.poll() is not None, timeout=60, what="fio's reads")
    except BaseException:
        kill_if_running(fio)
        raise
    return fio


def test_tunable_takes_effect_at_once(guest):
    """Written on a running queue: 0 stops the polls counter, a value
    starts it again, with no reconnection."""
    sysfs = with_tree(guest, "--poll_duration_us=0")
    guest.attach(guest.disk(size=32 * MiB))
    fio = reading_fio(guest, sysfs, "live")
    try:
        time.sleep(0.5)
        assert vbd_stat(sysfs, "polls") == 0
        assert echo(guest, PARAM, "100") == 0
        wait_until(lambda: (vbd_stat(sysfs, "polls") or 0) > 0, timeout=10,
                   what="polls after the write")
        assert fio.poll() is None
    finally:
        kill_if_running(fio)


def test_vbd_override(guest):
    """A vbd's own poll_duration_us wins over the module's, both ways,
    live; -1 follows the module again; bad values refused."""
    sysfs = with_tree(guest, "--poll_duration_us=0")
    guest.attach(guest.disk(size=32 * MiB))
    devs = os.path.join(sysfs, "bus", "xen-backend", "devices")
    vbd = os.path.join("bus", "xen-backend", "devices", os.listdir(devs)[0],
                       "poll_duration_us")
    assert cat(guest, vbd) == "-1\n"
    for bad in ("-2", "1001", "x", " 5", "5x"):
        assert echo(guest, vbd, bad) == errno.EINVAL, bad
    assert cat(guest, vbd) == "-1\n"
    fio = reading_fio(guest, sysfs, "vbd")
    try:
        assert vbd_stat(sysfs, "polls") == 0          # the module says 0
        assert echo(guest, vbd, "100") == 0     # the vbd says 100
        wait_until(lambda: (vbd_stat(sysfs, "polls") or 0) > 0, timeout=10,
                   what="polls after the vbd's write")
        # the module polls, this vbd does not: its counter stops
        assert echo(guest, PARAM, "100") == 0
        assert echo(guest, vbd, "0") == 0
        time.sleep(0.3)
        stopped = vbd_stat(sysfs, "polls")
        time.sleep(1)
        assert vbd_stat(sysfs, "polls") == stopped
        assert echo(guest, vbd, "-1") == 0      # follows the module again
        wait_until(lambda: (vbd_stat(sysfs, "polls") or 0) > stopped, timeout=10,
                   what="polls after -1")
        assert fio.poll() is None
    finally:
        kill_if_running(fio)


def test_command_line_refuses_out_of_range(guest):
    r = subprocess.run([binary("xbd-blkback"), "-N", "-p", "local", "-R",
                        guest.rundir, "--sysfs=none", "--poll_duration_us=1001"],
                       capture_output=True, text=True, timeout=30, env=guest.env)
    assert r.returncode != 0
    assert "--poll_duration_us=1001: not a number in 0..1000" in r.stderr, r.stderr


def test_killed_fio_leaves_no_job_behind(guest):
    """fio forks a process per job: the finally of these tests must take
    the jobs too (a fresh root once found two of them still reading at the
    end of make check)."""
    sysfs = with_tree(guest)
    guest.attach(guest.disk(size=32 * MiB))
    fio = reading_fio(guest, sysfs, "orphan")
    jobs = descendants(fio.pid)
    assert jobs, "fio without --thread has a job process"
    kill_if_running(fio)

    def gone(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True
    wait_until(lambda: all(gone(j) for j in jobs), timeout=10,
               what="fio's job processes gone")
