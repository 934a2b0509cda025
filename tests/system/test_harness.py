# SPDX-License-Identifier: MIT
"""The harness itself: daemons are started, stopped and their logs
scanned; a hung test fails at its time limit and its fixtures still
clean up."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import Daemon


def test_daemon_stop_and_log(tmp_path):
    d = Daemon(["sh", "-c", "echo hello; exec sleep 30"], str(tmp_path / "log"),
               ready=lambda: os.path.getsize(tmp_path / "log") > 0)
    assert d.stop() == -15
    assert "hello" in d.log_text()
    d.assert_clean_log()


def test_log_scan_catches_sanitizer_report(tmp_path):
    d = Daemon(["sh", "-c", "echo '==1==ERROR: AddressSanitizer: heap-use-after-free'"],
               str(tmp_path / "log"))
    d.proc.wait()
    with pytest.raises(AssertionError):
        d.assert_clean_log()


HUNG = textwrap.dedent("""
    import os, subprocess, time
    import pytest

    @pytest.fixture
    def worker(tmp_path):
        # stands in for fio: a child the fixture must stop
        p = subprocess.Popen(["sleep", "1000"])
        with open(os.environ["PID_FILE"], "w") as f:
            f.write(str(p.pid))
        yield p
        p.kill()
        p.wait()

    @pytest.mark.time_limit(1)
    def test_hangs(worker):
        worker.wait()              # never returns by itself

    def test_next():
        pass
""")


@pytest.mark.time_limit(60)
def test_hung_test_fails_at_its_limit_and_cleans_up(tmp_path):
    """A child pytest (with this conftest as its plugin) runs a test that
    waits forever on a child process its fixture started: it fails after
    its 1 s limit with a traceback pointing at the wait, the fixture's
    teardown kills the child, and the next test still runs."""
    (tmp_path / "test_hung.py").write_text(HUNG)
    pid_file = tmp_path / "pid"
    env = dict(os.environ, PID_FILE=str(pid_file),
               PYTHONPATH=os.path.dirname(__file__))
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                            "-p", "conftest", "-q", str(tmp_path / "test_hung.py")],
                           capture_output=True, text=True, timeout=50, env=env,
                           cwd=tmp_path)
        pid = int(pid_file.read_text())
        alive = os.path.exists(f"/proc/{pid}") and \
            open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        assert not alive, "the fixture's child survived the hung test"
    finally:                      # without the limit the sleep would leak
        if pid_file.exists() and os.path.exists(f"/proc/{pid_file.read_text()}"):
            subprocess.run(["kill", "-9", pid_file.read_text()], check=False)
    took = time.monotonic() - t0
    print(r.stdout[-2000:])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout, r.stdout
    assert "TimeLimit" in r.stdout and "time limit of 1 s" in r.stdout, r.stdout
    assert "worker.wait()" in r.stdout, r.stdout      # where it hung
    assert took < 30, took
