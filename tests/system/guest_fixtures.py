# SPDX-License-Identifier: MIT
"""Fixtures for the guest-side system tests (xbd-blkfront, the fio engine,
the demo): a whole local machine in a private XBD_RUNDIR.

`guest` starts xbd-xenstored and xbd-blkback, creates domain g1 and gives
a `Guest` handle: attach/detach disks with `xbd`, start xbd-blkfront (its
FUSE mount is always unmounted at teardown, even when a test fails), run
fio, restart the backend.
"""
import os
import signal
import subprocess
import time

import pytest

from conftest import binary, sanitizer_env
from xenstored_fixtures import Xenstored

FIO = "/usr/bin/fio"


def wait_until(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def mounted_under(prefix):
    with open("/proc/mounts") as f:
        return [line.split()[1] for line in f
                if line.split()[1].startswith(prefix)]


FUSECTL = "/sys/fs/fuse/connections"


def thread_stacks(pid):
    """Each thread of pid: its name, state and kernel stack, as text."""
    out = []
    for t in sorted(os.listdir(f"/proc/{pid}/task")):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/task/{t}/stack") as f:
                stack = f.read()
        except OSError as e:
            stack = str(e)
        out.append(f"thread {t} {comm} {state}:\n{stack}")
    return "\n".join(out)


def abort_fuse_under(prefix):
    """Abort the FUSE connection of every mount under prefix (fusectl,
    mounted for it if it was not, unmounted after) and detach the
    mounts: every request of them fails, a thread waiting for one goes
    on."""
    conns = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            x = line.split()
            mnt = x[4].replace("\\040", " ")
            fstype = x[x.index("-") + 1]
            if mnt.startswith(prefix) and fstype.startswith("fuse"):
                major, minor = (int(n) for n in x[2].split(":"))
                conns.append((mnt, major << 20 | minor))   # the kernel's dev_t
    if not conns:
        return
    mounted = not any(line.split()[1] == FUSECTL for line in open("/proc/mounts"))
    if mounted:
        subprocess.run(["mount", "-t", "fusectl", "none", FUSECTL], check=False)
    try:
        for mnt, conn in conns:
            try:
                with open(f"{FUSECTL}/{conn}/abort", "w") as f:
                    f.write("1")
            except OSError:
                pass
            subprocess.run(["umount", "-l", mnt], check=False)
    finally:
        if mounted:
            subprocess.run(["umount", FUSECTL], check=False)


class Guest:
    def __init__(self, daemons, rundir):
        self.daemons = daemons
        self.rundir = rundir
        self.xd = Xenstored(daemons, rundir)
        self.env = self.xd.env
        self.backend = None
        self.blkfront = None
        self.start_backend()
        out = self.xbd("domain-create", "g1", "--memory", "256M")
        self.domid = int(out.strip())
        self.dev_dir = os.path.join(rundir, f"dom{self.domid}", "dev")

    # ---- the machine ------------------------------------------------------
    def xbd(self, *args, check=True):
        r = subprocess.run([binary("xbd"), "--platform", "local", *args],
                           env=sanitizer_env(self.env), capture_output=True,
                           text=True, timeout=60)
        if check:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout if check else r

    def start_backend(self, name="blkback", queues=2, sysfs=None, env=None, extra=()):
        """xbd-blkback; sysfs: a directory for its sysfs-style tree
        (none by default); env: variables added to self.env; extra:
        more options (tunables)."""
        self.backend = self.daemons.start(
            [binary("xbd-blkback"), "-N", "-p", "local", "-R", self.rundir,
             f"--max_queues={queues}", "--max_ring_page_order=2",
             f"--sysfs={sysfs or 'none'}", *extra],
            name=name, env=dict(self.env, **(env or {})),
            ready=(lambda: bool(mounted_under(sysfs))) if sysfs else None)
        return self.backend

    def restart_backend_with_tree(self, *extra, queues=2, env=None):
        """Stop the backend and start it again with its sysfs-style tree
        in $rundir/sys (and extra options); the tree's directory."""
        self.backend.stop()
        sysfs = os.path.join(self.rundir, "sys")
        self.start_backend(name="blkback-tree", queues=queues, sysfs=sysfs,
                           env=env, extra=extra)
        return sysfs

    def disk(self, name="disk.img", size=64 << 20):
        path = os.path.join(self.rundir, name)
        with open(path, "wb") as f:
            f.truncate(size)
        return path

    def attach(self, path, vdev="xvdb", access="rw"):
        self.xbd("block-attach", "g1",
                 f"format=raw, vdev={vdev}, access={access}, target={path}",
                 "--timeout", "20")
        return os.path.join(self.dev_dir, vdev)

    def detach(self, vdev="xvdb"):
        self.xbd("block-detach", "g1", vdev, "--timeout", "20")

    # ---- the guest --------------------------------------------------------
    def start_blkfront(self, *opts, wait_for=None):
        self.blkfront = self.daemons.start(
            [binary("xbd-blkfront"), "--domain", "g1", "--rundir", self.rundir,
             *opts], name="blkfront", env=self.env,
            ready=lambda: bool(mounted_under(self.dev_dir)))
        if wait_for:
            wait_until(lambda: os.path.exists(wait_for), what=wait_for)
        return self.blkfront

    def fio(self, *args, timeout=120, env=None):
        # verify_state_save=0 and cwd: no verify state files left behind
        r = subprocess.run([FIO, "--output-format=terse", "--terse-version=3",
                            "--verify_state_save=0", *args],
                           capture_output=True, text=True, cwd=self.rundir,
                           timeout=timeout, env=env or self.env)
        return r

    def fio_under_backend_restart(self, args, env=None, ready=None):
        """Start fio (terse output) with args, wait until ready() (default:
        at once), give it half a second of I/O, SIGKILL the backend and
        start a new one; returns fio's CompletedProcess."""
        fio = subprocess.Popen(
            [FIO, "--output-format=terse", "--terse-version=3",
             "--verify_state_save=0", *args], cwd=self.rundir,
            env=env or self.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            if ready:
                wait_until(lambda: ready() or fio.poll() is not None,
                           timeout=60, what="fio connected")
            time.sleep(0.5)
            assert fio.poll() is None, fio.communicate()
            self.backend.stop(signal.SIGKILL)
            time.sleep(0.3)
            self.start_backend("blkback-2")
            out, err = fio.communicate(timeout=180)
        finally:
            if fio.poll() is None:
                fio.kill()
                fio.wait()
        return subprocess.CompletedProcess(fio.args, fio.returncode, out, err)

    def stop_blkfront(self, sig=signal.SIGTERM, timeout=30.0):
        """Stop xbd-blkfront with sig; its exit status.  A stop that hangs
        (say a thread of it waiting for an answer on its own mount, where
        nothing answers: not even SIGKILL ends it) fails the test with the
        kernel stacks of its threads, after its FUSE connections were
        aborted so that it dies and pytest goes on."""
        b = self.blkfront
        if b.proc.poll() is None:
            b.proc.send_signal(sig)
            try:
                b.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                stacks = thread_stacks(b.proc.pid)
                abort_fuse_under(self.dev_dir)
                b.proc.kill()
                b.proc.wait(30)
                b.stop()
                raise AssertionError(f"xbd-blkfront not stopped {timeout}s after signal "
                                     f"{sig}:\n{stacks}\n{b.log_text()}")
        return b.stop()

    def teardown(self):
        try:
            if self.blkfront:
                self.stop_blkfront()
        finally:
            for m in mounted_under(self.rundir):
                subprocess.run(["umount", "-l", m], check=False)


@pytest.fixture
def guest(daemons, rundir):
    g = Guest(daemons, rundir)
    try:
        yield g
    finally:
        g.teardown()


def fio_ok(r):
    """The terse v3 line of a fio run that must have succeeded: the fields
    by name (read/write IOPS, total errors)."""
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Sanitizer" not in r.stderr, r.stderr    # a report in the engine
    lines = [x for x in r.stdout.splitlines() if x.startswith("3;")]
    assert lines, r.stdout
    out = []
    for line in lines:
        f = line.split(";")
        out.append(dict(name=f[2], error=int(f[4]), read_kb=int(f[5]),
                        read_iops=int(f[7]), write_kb=int(f[46]),
                        write_iops=int(f[48])))
    for o in out:
        assert o["error"] == 0, (o, r.stderr)
    return out


def stop_signal(d, sig=signal.SIGTERM):
    return d.stop(sig)


def descendants(pid):
    """Every living descendant of pid (/proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        cur = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{cur}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{cur}/task/{t}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def kill_if_running(p):
    """SIGKILL and reap a background process (fio) unless it has ended,
    with its children (fio forks a process per job unless --thread: a
    killed parent leaves its jobs running): the `finally` of a test that
    started it, so that a failed assertion leaves nothing running."""
    if p.poll() is None:
        kids = descendants(p.pid)
        p.kill()
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
