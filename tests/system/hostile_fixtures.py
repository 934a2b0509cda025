# SPDX-License-Identifier: MIT
"""Fixtures for the hostile-peer system tests (tests/system/test_hostile_*.py).

`host` starts a real xbd-xenstored and a real xbd-blkback in a private
XBD_RUNDIR; `Host.guest()` creates a domain with `xbd domain-create` and
attaches a disk image with `xbd block-attach`; `Host.front()` runs
xbd-test-hostile-front (tests/helpers/hostile_front.c) as that guest's
frontend with a scenario.  `Proc` reads the counts the leak checks compare
(fds, threads, mappings, RSS, CPU time) from /proc/<pid>.
"""
import os
import subprocess
import time

import pytest

from conftest import BAD_LOG_WORDS, binary, sanitizer_env
from xbd_fixtures import Machine

DISK_BYTES = 8 << 20
XVDA = 51712


def wait_for(cond, what, timeout=10):
    """Poll cond() until it holds; fail with what after timeout s."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


class Proc:
    """A snapshot of what a process holds, from /proc/<pid>."""

    def __init__(self, pid):
        base = f"/proc/{pid}"
        self.fds = len(os.listdir(f"{base}/fd"))
        self.threads = len(os.listdir(f"{base}/task"))
        with open(f"{base}/maps") as f:
            self.maps = sum(1 for _ in f)
        with open(f"{base}/status") as f:
            st = dict(line.split(":", 1) for line in f if ":" in line)
        self.rss_kb = int(st["VmRSS"].split()[0])
        self.rss_anon_kb = int(st["RssAnon"].split()[0])
        with open(f"{base}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        self.cpu_s = (int(fields[11]) + int(fields[12])) / tick

    def __repr__(self):
        return (f"fds={self.fds} threads={self.threads} maps={self.maps} "
                f"rss={self.rss_kb}kB cpu={self.cpu_s:.2f}s")


class Guest:
    def __init__(self, host, domid, disk, vdev=XVDA):
        self.host, self.domid, self.disk, self.vdev = host, domid, disk, vdev
        self.be = f"/local/domain/0/backend/vbd/{domid}/{vdev}"
        self.fe = f"/local/domain/{domid}/device/vbd/{vdev}"

    def front(self, *args, timeout=60, check=True):
        """Run the hostile frontend to completion; {key: value} of its
        output (all values are strings)."""
        p = subprocess.run(self.argv(*args), capture_output=True, text=True,
                           timeout=timeout, env=sanitizer_env())
        for word in BAD_LOG_WORDS:
            assert word not in p.stderr, p.stderr
        if check:
            assert p.returncode == 0, \
                f"front {args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        out = {}
        for line in p.stdout.splitlines():
            k, _, v = line.partition(" ")
            out.setdefault(k, v)
        out["_rc"], out["_stderr"] = p.returncode, p.stderr
        out["_lines"] = p.stdout.splitlines()
        return out

    def spawn(self, *args):
        """Start the hostile frontend in the background."""
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=sanitizer_env())

    def argv(self, *args):
        return [binary("xbd-test-hostile-front"), "-R", self.host.rundir,
                "-d", str(self.domid), "-v", str(self.vdev),
                "--disk", self.disk] + [str(a) for a in args]

    def be_state(self):
        return self.host.m.read(f"{self.be}/state")


class Host:
    def __init__(self, daemons, rundir, tmp_path, extra=()):
        """extra: more xbd-blkback options (tunables, --sysfs=DIR...)."""
        self.rundir, self.tmp = rundir, tmp_path
        self.m = Machine(daemons, rundir)
        sysfs = [] if any(a.startswith("--sysfs") for a in extra) else ["--sysfs=none"]
        self.backend = daemons.start(
            [binary("xbd-blkback"), "-N", "-p", "local", "-R", rundir,
             "-l", "info", "--max_queues=2"] + sysfs + list(extra), name="xbd-blkback")
        self.ndisk = 0

    def guest(self, name, disk=None, size=DISK_BYTES, vdev="xvda"):
        """Create a domain and attach a raw disk (a fresh sparse file in
        tmp_path unless disk is given); the Guest, with the backend in
        InitWait."""
        domid = self.m.create(name, "--memory", "16M")
        if disk is None:
            self.ndisk += 1
            disk = str(self.tmp / f"disk{self.ndisk}.img")
            with open(disk, "wb") as f:
                f.truncate(size)
        self.m.ok("block-attach", domid, f"{disk},raw,{vdev},w")
        num = XVDA + 16 * (ord(vdev[-1]) - ord("a"))
        return Guest(self, domid, disk, num)

    def proc(self):
        assert self.backend.proc.poll() is None, \
            "xbd-blkback died:\n" + self.backend.log_text()
        return Proc(self.backend.pid)

    def wait_state(self, path, want, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.m.read(path) == str(want):
                return
            time.sleep(0.02)
        raise AssertionError(f"{path} is {self.m.read(path)}, want {want}")


@pytest.fixture
def host(daemons, rundir, tmp_path):
    h = Host(daemons, rundir, tmp_path)
    yield h
    h.m.close()
