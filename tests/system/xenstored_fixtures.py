# SPDX-License-Identifier: MIT
"""Fixtures and a raw wire client for the xbd-xenstored system tests.

`xenstored` starts the daemon (from $XBD_BUILD) in a private XBD_RUNDIR and
returns an `Xenstored` handle: socket paths, an environment for the real
clients (XENSTORED_PATH), and raw connections speaking xs_wire.h.
"""
import os
import socket
import struct
import subprocess
import time

import pytest

from conftest import binary

XS = dict(CONTROL=0, DIRECTORY=1, READ=2, GET_PERMS=3, WATCH=4, UNWATCH=5,
          TRANSACTION_START=6, TRANSACTION_END=7, INTRODUCE=8, RELEASE=9,
          GET_DOMAIN_PATH=10, WRITE=11, MKDIR=12, RM=13, SET_PERMS=14,
          WATCH_EVENT=15, ERROR=16, IS_DOMAIN_INTRODUCED=17, RESUME=18,
          SET_TARGET=19, RESET_WATCHES=21, DIRECTORY_PART=22)
HDR = struct.Struct("=IIII")
TOOLS = "/usr/lib/xen-4.17/bin"


class XsError(Exception):
    def __init__(self, err):
        super().__init__(err)
        self.err = err


class XsConn:
    """One raw connection.  call() sends one request and returns the reply
    payload; events that arrive meanwhile are kept in self.events."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.events = []
        self.req_id = 100

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, type_, payload=b"", req_id=None, tx_id=0):
        if isinstance(payload, str):
            payload = payload.encode()
        if req_id is None:
            self.req_id += 1
            req_id = self.req_id
        self.sock.sendall(HDR.pack(type_, req_id, tx_id, len(payload)) + payload)
        return req_id

    def _recvn(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("connection closed")
            buf += chunk
        return buf

    def recv_msg(self):
        type_, req_id, tx_id, length = HDR.unpack(self._recvn(HDR.size))
        assert length <= 4096, f"reply of {length} bytes"
        return type_, req_id, tx_id, self._recvn(length)

    def reply(self):
        """Next non-event message."""
        while True:
            msg = self.recv_msg()
            if msg[0] == XS["WATCH_EVENT"]:
                self.events.append(tuple(msg[3].split(b"\0")[:2]))
                continue
            return msg

    def call(self, op, *args, tx=0, raw=None):
        payload = raw if raw is not None else b"".join(
            (a.encode() if isinstance(a, str) else a) + b"\0" for a in args)
        req_id = self.send(XS[op], payload, tx_id=tx)
        type_, rid, tid, body = self.reply()
        assert rid == req_id and tid == tx, (rid, req_id, tid, tx)
        if type_ == XS["ERROR"]:
            raise XsError(body.rstrip(b"\0").decode())
        assert type_ == XS[op], (type_, op)
        return body

    def write(self, path, value, tx=0):
        if isinstance(value, str):
            value = value.encode()
        return self.call("WRITE", raw=path.encode() + b"\0" + value, tx=tx)

    def read(self, path, tx=0):
        return self.call("READ", path, tx=tx)

    def ls(self, path, tx=0):
        body = self.call("DIRECTORY", path, tx=tx)
        return sorted(x.decode() for x in body.split(b"\0") if x)

    def start(self):
        return int(self.call("TRANSACTION_START", "").rstrip(b"\0"))

    def end(self, tx, commit=True):
        return self.call("TRANSACTION_END", "T" if commit else "F", tx=tx)

    def error(self, op, *args, **kw):
        """The error string of a request that must fail."""
        try:
            self.call(op, *args, **kw)
        except XsError as e:
            return e.err
        raise AssertionError(f"{op} {args} succeeded")

    def event(self, timeout=5.0):
        if self.events:
            return self.events.pop(0)
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            while True:
                type_, _, _, body = self.recv_msg()
                if type_ == XS["WATCH_EVENT"]:
                    return tuple(body.split(b"\0")[:2])
                raise AssertionError(f"unexpected message type {type_}")
        finally:
            self.sock.settimeout(old)

    def no_event(self, wait=0.2):
        assert not self.events, self.events
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
            raise AssertionError(f"unexpected data {data!r}")
        except socket.timeout:
            pass
        finally:
            self.sock.settimeout(10.0)

    def closed(self, timeout=5.0):
        """True if the daemon closed this connection."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Xenstored:
    def __init__(self, daemons, rundir, args=(), env=None, name="xenstored"):
        self.rundir = rundir
        self.sock = os.path.join(rundir, "xenstored.sock")
        self.pid_file = os.path.join(rundir, "xenstored.pid")
        self.env = dict(os.environ, XBD_RUNDIR=rundir, XENSTORED_PATH=self.sock)
        self.env.pop("XENSTORED_RUNDIR", None)
        if env:
            self.env.update(env)
        argv = [binary("xbd-xenstored"), "--foreground",
                "--pid-file", self.pid_file] + list(args)
        self.daemon = daemons.start(argv, name=name, env=self.env,
                                    ready=lambda: connectable(self.sock))

    def conn(self, domid=0):
        return XsConn(self.sock if domid == 0 else self.dom_sock(domid))

    def dom_sock(self, domid):
        return os.path.join(self.rundir, f"dom{domid}", "xenstore.sock")

    def dom_env(self, domid):
        return dict(self.env, XENSTORED_PATH=self.dom_sock(domid))

    def tool(self, name, *args, env=None, check=True, timeout=30, input=None):
        """Run a real client (xenstore-*, test-xenstore) against the daemon."""
        prog = name if name.startswith("/") else (
            os.path.join(TOOLS, name) if name in ("test-xenstore", "xenstore-control")
            else "/usr/bin/" + name)
        r = subprocess.run([prog] + list(args), env=env or self.env,
                           capture_output=True, text=True, timeout=timeout,
                           input=input)
        if check:
            assert r.returncode == 0, (name, args, r.returncode, r.stdout, r.stderr)
        return r

    def introduce(self, domid):
        c = self.conn()
        try:
            c.call("INTRODUCE", str(domid), "0", "1")
        finally:
            c.close()


@pytest.fixture
def xenstored(daemons, rundir):
    return Xenstored(daemons, rundir)


@pytest.fixture
def xs(xenstored):
    c = xenstored.conn()
    yield c
    c.close()
