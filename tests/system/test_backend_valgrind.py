# SPDX-License-Identifier: MIT
"""xbd-blkback under valgrind (--tool=none, the fast core callgrind
builds on): the backend sets io_wait_poll itself, its queue threads sleep
in poll(2) instead of io_uring_enter(2), and a frontend's verified I/O on
two queues completes; SIGTERM then ends it with status 0.  With the queue
threads waiting in io_uring_enter, valgrind 3.19 stops every other thread
and the frontend never connects (backend/io_uring.h).  Also the same I/O
with --io_wait_poll=Y on the normal (sanitizer) build.

valgrind cannot run a sanitizer build, so the backend under valgrind is
the optimised build: $XBD_OPT_BUILD, else $XBD_BUILD when it is not a
sanitizer build, else build/ (which `make check` builds first)."""
import os
import shutil

from conftest import BUILD, binary
from frontend_fixtures import attach, frontend
from xenstored_fixtures import xenstored  # noqa: F401

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def sanitized(path):
    with open(path, "rb") as f:
        return b"libasan.so" in f.read()


def plain_blkback():
    """The path of an xbd-blkback built without sanitizers."""
    for build in (os.environ.get("XBD_OPT_BUILD"), BUILD, os.path.join(TOP, "build")):
        path = os.path.join(build or "/nonexistent", "bin", "xbd-blkback")
        if os.access(path, os.X_OK) and not sanitized(path):
            return path
    raise AssertionError("no xbd-blkback without sanitizers: run `make all` (build/) "
                         "or set XBD_OPT_BUILD")


def start_blkback(daemons, xd, prefix=(), extra=(), binary_path=None):
    return daemons.start(list(prefix) + [binary_path or binary("xbd-blkback"), "-N", "-p",
                                         "local", "-R", xd.rundir, "--max_queues=2",
                                         "--sysfs=none"] + list(extra),
                         name="blkback", env=xd.env)


def verified_io(xd):
    r = frontend(xd, "--timeout", "30000", "--queues", "2", "--ring-order", "1",
                 "--bytes", str(2 << 20), "1", "xvda", "verify", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.startswith("verified "), r.stdout


def test_blkback_runs_under_valgrind(daemons, xenstored):
    valgrind = shutil.which("valgrind")
    assert valgrind, "valgrind is not installed (Debian package valgrind; make deps)"
    be = start_blkback(daemons, xenstored, prefix=[valgrind, "--tool=none", "--quiet"],
                       binary_path=plain_blkback())
    attach(xenstored, 16 << 20, "64M", 30)
    verified_io(xenstored)
    assert be.stop(timeout=20) == 0, be.log_text()
    assert "valgrind" not in be.log_text().lower(), be.log_text()


def test_poll_wait_mode_on_the_normal_build(daemons, xenstored):
    be = start_blkback(daemons, xenstored, extra=["--io_wait_poll=Y"])
    attach(xenstored, 16 << 20, "64M", 10)
    verified_io(xenstored)
    assert be.stop() == 0, be.log_text()
