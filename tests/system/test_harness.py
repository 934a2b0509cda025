# SPDX-License-Identifier: MIT
"""The harness itself: daemons are started, stopped and their logs scanned."""
import os

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
