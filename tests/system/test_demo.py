# SPDX-License-Identifier: MIT
"""scripts/demo-run.sh (what `make demo` runs once everything is built):
a whole run prints honest dd and fio figures and the backend's statistics
and leaves nothing behind; a second run works; a run after one killed
half-way cleans the stale directory and works.  dd and fio are shortened
through the script's environment knobs to keep make check quick."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BUILD
from guest_fixtures import mounted_under

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                      "demo-run.sh")


def demo_env(d):
    env = dict(os.environ, XBD_BUILD=BUILD, XBD_DEMO_DIR=d,
               XBD_DEMO_FIO_SECONDS="1", XBD_DEMO_DD_COUNT="2048")
    env.pop("XBD_RUNDIR", None)
    return env


def run_demo(d):
    return subprocess.run(["sh", SCRIPT], env=demo_env(d), capture_output=True,
                          text=True, timeout=300)


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def check_ok(r, d):
    out = r.stdout
    assert r.returncode == 0, (out, r.stderr)
    assert re.search(r"dd: 8388608 bytes .* copied, [0-9.]+ s, [0-9.]+ [kMG]B/s", out), out
    m = re.search(r"fio: read (\d+) IOPS, ([0-9.]+) MB/s, errors 0", out)
    assert m and int(m.group(1)) > 0, out
    assert re.search(r"loop-device dd \(same file, same dd\): (8388608 bytes .* copied|skipped)",
                     out), out
    # the 2048 buffered 4k writes reach the backend written back in
    # large requests: far fewer than 2048
    m = re.search(r"vbd-1-51728: queues \d+ .*rd_req [1-9]\d* wr_req (\d+) ", out)
    assert m and 1 <= int(m.group(1)) < 2048, out
    assert "done, everything stopped and removed" in out
    assert not os.path.exists(d)
    assert mounted_under(d) == []


@pytest.mark.time_limit(900)      # two demos, each bounded at 300 s
def test_demo_runs_twice(tmp_path):
    d = str(tmp_path / "demo")
    check_ok(run_demo(d), d)
    check_ok(run_demo(d), d)


def test_demo_after_a_killed_run(tmp_path):
    d = str(tmp_path / "demo")
    p = subprocess.Popen(["sh", SCRIPT], env=demo_env(d), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        for line in p.stdout:
            if "guest disk:" in line:
                break
        p.send_signal(signal.SIGKILL)          # half-way: daemons and mount stay
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    pids = []
    for name in ("xenstored", "blkback", "blkfront"):
        with open(os.path.join(d, f"{name}.pid")) as f:
            pids.append(int(f.read()))
    assert all(alive(x) for x in pids)
    assert mounted_under(d)
    r = run_demo(d)
    check_ok(r, d)
    assert "cleaning what a previous run left" in r.stdout
    deadline = time.monotonic() + 10
    while any(alive(x) for x in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(x) for x in pids)
