# SPDX-License-Identifier: MIT
"""Fixtures shared by the system tests.

Every test runs real processes built in $XBD_BUILD (build-asan/ under
`make check`) inside a private XBD_RUNDIR, and stops every process it
started.  A daemon whose log mentions a sanitizer report or a failed
assertion fails the test that started it (our dmesg scan).

Every test is bounded in time here, inside pytest (not only by an outer
`timeout`, whose kill skips every cleanup and leaves fio and daemons
running): its setup, its call and its teardown each get TIME_LIMIT
seconds (XBD_TEST_TIME_LIMIT, default 300; 0: none), or what
@pytest.mark.time_limit(S) says.  Past it SIGALRM raises TimeLimit where
the test waits, so it fails with a traceback and its fixtures' teardown
still runs (and stops what they started).
"""
import os
import signal
import subprocess
import tempfile
import time

import pytest

BUILD = os.environ.get("XBD_BUILD") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build-asan")
BUILD = os.path.abspath(BUILD)
BIN = os.path.join(BUILD, "bin")

TIME_LIMIT = float(os.environ.get("XBD_TEST_TIME_LIMIT", "300"))

BAD_LOG_WORDS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                 "Assertion", "assertion", "fatal error")


def binary(name):
    path = os.path.join(BIN, name)
    assert os.access(path, os.X_OK), f"{path} is not built"
    return path


def sanitizer_env(env=None):
    env = dict(os.environ if env is None else env)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    return env


class Daemon:
    """A background process with its log in a file; stop() is idempotent."""

    def __init__(self, argv, log_path, env=None, ready=None, timeout=10.0):
        self.argv = list(argv)
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     env=sanitizer_env(env))
        if ready is not None:
            deadline = time.monotonic() + timeout
            while not ready():
                if self.proc.poll() is not None:
                    raise AssertionError(
                        f"{argv[0]} exited with {self.proc.returncode}:\n"
                        + self.log_text())
                if time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"{argv[0]} not ready in {timeout}s:\n"
                                         + self.log_text())
                time.sleep(0.02)

    @property
    def pid(self):
        return self.proc.pid

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Stop the process; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def kill(self):
        return self.stop(signal.SIGKILL)

    def assert_clean_log(self):
        text = self.log_text()
        for word in BAD_LOG_WORDS:
            assert word not in text, f"{self.argv[0]} log has {word!r}:\n{text}"


@pytest.fixture
def rundir():
    """A private XBD_RUNDIR for one test, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="xbd-test-") as d:
        yield d


@pytest.fixture
def daemons(tmp_path):
    """Start daemons with daemons.start(argv, ready=...); all are stopped
    at teardown and their logs checked for sanitizer reports."""
    started = []

    class Starter:
        def start(self, argv, name=None, **kw):
            name = name or os.path.basename(argv[0])
            d = Daemon(argv, str(tmp_path / f"{name}.{len(started)}.log"), **kw)
            started.append(d)
            return d

    yield Starter()
    for d in reversed(started):
        d.stop()
    for d in started:
        d.assert_clean_log()


# ---- the per-test time limit (see the module's docstring) ----------------

class TimeLimit(Exception):
    """A test phase ran past its time limit."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "time_limit(seconds): bound of each of the test's setup, "
        "call and teardown (default XBD_TEST_TIME_LIMIT or 300 s; 0: none)")


def _limit_of(item):
    m = item.get_closest_marker("time_limit")
    return float(m.args[0]) if m else TIME_LIMIT


def _bounded(item, phase):
    """Around one phase: SIGALRM after the limit raises TimeLimit in the
    main thread, where pytest runs the test (and where it waits)."""
    limit = _limit_of(item)
    if limit <= 0:
        yield
        return

    def expired(signum, frame):
        raise TimeLimit(f"{item.nodeid}: {phase} ran past its time limit "
                        f"of {limit:g} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _bounded(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _bounded(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield from _bounded(item, "teardown")
