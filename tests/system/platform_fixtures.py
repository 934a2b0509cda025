# SPDX-License-Identifier: MIT
"""Drive xbd-test-platform processes: each Helper is one separate process
playing a guest or a backend, answering one line per command."""
import errno
import os
import signal
import subprocess

import pytest

from conftest import binary, sanitizer_env, BAD_LOG_WORDS


class Helper:
    def __init__(self, rundir, log_dir, name, open_platform=True, exe=None, **popen):
        """exe: a copy of xbd-test-platform to run instead of the build's."""
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [exe or binary("xbd-test-platform"), "--rundir", rundir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=sanitizer_env(), text=True, bufsize=1, **popen)
        if open_platform:
            self.ok("open")

    @property
    def pid(self):
        return self.proc.pid

    def cmd(self, line):
        """Send one command; returns (rc, values): rc 0 or -errno."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().split()
        assert reply, f"helper died on {line!r}:\n{self.log_text()}"
        if reply[0] == "ok":
            return 0, reply[1:]
        return int(reply[1]), []

    def ok(self, line):
        rc, values = self.cmd(line)
        assert rc == 0, f"{line!r} failed: {errno.errorcode.get(-rc, rc)}"
        return values

    def err(self, line):
        rc, _ = self.cmd(line)
        return rc

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("exit\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.kill()
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def helpers(rundir, tmp_path):
    """helpers.start(name) -> a Helper in the test's private rundir.  All
    are stopped at teardown and their logs scanned for sanitizer reports."""
    started = []

    class Starter:
        def start(self, name, **kw):
            h = Helper(rundir, str(tmp_path), f"{name}{len(started)}", **kw)
            started.append(h)
            return h

    yield Starter()
    for h in reversed(started):
        h.stop()
    for h in started:
        text = h.log_text()
        for word in BAD_LOG_WORDS:
            assert word not in text, f"{h.log_path} has {word!r}:\n{text}"
