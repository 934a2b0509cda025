# SPDX-License-Identifier: MIT
"""Fixtures for the `xbd` command's system tests.

`machine` starts a real xbd-xenstored in a private XBD_RUNDIR and returns a
`Machine`: it runs `xbd --rundir` (checking exit status and the one-line
error rule), reads the store through pyxs (a second, independent client),
and snapshots whole subtrees with their permissions.

`FakeBackend` stands in for xbd-blkback where only the xenstore handshake
matters: a thread with its own connection watches backend/vbd of its domain
and moves each new device to InitWait (or refuses it with an error node and
Closing, as a backend that cannot open the storage does), and each device
the toolstack takes offline and sets to Closing on to Closed.
"""
import os
import subprocess
import threading

import pytest
from pyxs import Client
from pyxs.exceptions import PyXSError

from conftest import BAD_LOG_WORDS, binary, sanitizer_env
from xenstored_fixtures import connectable


class Machine:
    def __init__(self, daemons, rundir):
        self.rundir = rundir
        self.sock = os.path.join(rundir, "xenstored.sock")
        self.daemon = daemons.start(
            [binary("xbd-xenstored"), "-N", "-R", rundir],
            ready=lambda: connectable(self.sock))
        self.xs = Client(unix_socket_path=self.sock)
        self.xs.connect()

    def close(self):
        self.xs.close()

    # ---- the command ----------------------------------------------------
    def run(self, *args, user=None, timeout=60, leaks=True):
        """leaks=False skips LeakSanitizer's exit scan (half of a short
        command's run time) for loops whose code paths other tests scan."""
        argv = [binary("xbd"), "--rundir", self.rundir] + [str(a) for a in args]
        if user is not None:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}",
                    "--clear-groups"] + argv
        env = sanitizer_env()
        if not leaks:
            env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace(
                "detect_leaks=1", "detect_leaks=0")
        p = subprocess.run(argv, capture_output=True, text=True, env=env,
                           timeout=timeout)
        for word in BAD_LOG_WORDS:
            assert word not in p.stderr, f"xbd {args}: {p.stderr}"
        return p

    def ok(self, *args, **kw):
        p = self.run(*args, **kw)
        assert p.returncode == 0, f"xbd {args} failed: {p.stderr}"
        return p.stdout

    def fail(self, *args, code=1, **kw):
        """Run a command that must fail; returns its one-line message."""
        p = self.run(*args, **kw)
        assert p.returncode == code, \
            f"xbd {args}: exit {p.returncode}, expected {code}: {p.stderr}"
        lines = p.stderr.strip().splitlines()
        assert lines and lines[0].startswith("xbd: "), p.stderr
        if code == 1:
            assert len(lines) == 1, f"more than one line: {p.stderr}"
        return lines[0][len("xbd: "):]

    def create(self, name, *args):
        return int(self.ok("domain-create", name, *args).strip())

    # ---- the store ------------------------------------------------------
    def read(self, path):
        try:
            return self.xs.read(path.encode()).decode()
        except PyXSError:
            return None

    def write(self, path, value):
        self.xs.write(path.encode(), value.encode())

    def exists(self, path):
        return self.xs.exists(path.encode())

    def perms(self, path):
        return [p.decode() for p in self.xs.get_perms(path.encode())]

    def tree(self, top="/"):
        """{path: (value, perms)} of top and everything below it."""
        out = {}
        if not self.exists(top):
            return out
        stack = [top]
        while stack:
            path = stack.pop()
            try:
                out[path] = (self.read(path), tuple(self.perms(path)))
                kids = self.xs.list(path.encode())
            except PyXSError:
                continue
            base = path.rstrip("/")
            stack.extend(f"{base}/{k.decode()}" for k in kids)
        return out


@pytest.fixture
def machine(daemons, rundir):
    m = Machine(daemons, rundir)
    yield m
    m.close()


class FakeBackend(threading.Thread):
    """Answers the toolstack's state changes for backend domain `domid`."""

    def __init__(self, sock, domid=0, refuse=False):
        super().__init__(daemon=True)
        self.sock, self.domid, self.refuse = sock, domid, refuse
        self.top = f"/local/domain/{domid}/backend/vbd"
        self.stop_path = f"/tool/fake-backend-stop-{domid}"
        self.stopping = False
        self.seen = set()
        self.errors = []
        self.ready = threading.Event()

    def __enter__(self):
        self.start()
        assert self.ready.wait(10), "fake backend did not start"
        return self

    def __exit__(self, *exc):
        self.stopping = True
        with Client(unix_socket_path=self.sock) as c:
            c.write(self.stop_path.encode(), b"1")
        self.join(10)
        assert not self.is_alive(), "fake backend did not stop"
        assert not self.errors, self.errors

    def run(self):
        try:
            with Client(unix_socket_path=self.sock) as c:
                m = c.monitor()
                m.watch(self.top.encode(), b"fb")
                m.watch(self.stop_path.encode(), b"stop")
                self.ready.set()
                for path, token in m.wait():
                    if self.stopping and token == b"stop":
                        break
                    self.event(c, path.decode())
                c.delete(self.stop_path.encode())
        except Exception as e:  # reported by __exit__
            self.errors.append(repr(e))
            self.ready.set()

    def event(self, c, path):
        # .../backend/vbd/<fe>/<devid>/...: that device; above it: all.
        parts = path.split("/")
        if path.startswith(self.top + "/") and len(parts) >= 8:
            self.step(c, "/".join(parts[:8]))
        else:
            self.scan(c)

    def scan(self, c):
        try:
            fronts = c.list(self.top.encode())
        except PyXSError:
            return
        for fe in fronts:
            try:
                devs = c.list(f"{self.top}/{fe.decode()}".encode())
            except PyXSError:
                continue
            for dev in devs:
                self.step(c, f"{self.top}/{fe.decode()}/{dev.decode()}")

    def step(self, c, path):
        try:
            state = c.read(f"{path}/state".encode())
            online = c.read(f"{path}/online".encode())
            if state == b"1" and online == b"1":
                self.seen.add(path)
                if self.refuse:
                    params = c.read(f"{path}/params".encode()).decode()
                    c.write(f"{path}/error".encode(),
                            f"2 cannot open {params}".encode())
                    c.write(f"{path}/state".encode(), b"5")
                else:
                    c.write(f"{path}/state".encode(), b"2")
            elif state == b"5" and online == b"0":   # the toolstack's Closing
                c.write(f"{path}/state".encode(), b"6")
        except PyXSError:
            pass   # the toolstack removed it meanwhile
