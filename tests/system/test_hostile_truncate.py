# SPDX-License-Identifier: MIT
"""Issue 18 item 2: a guest truncating its own memory, grant table or
event-channel file under I/O.  Before, the backend's next access to such a
page raised SIGBUS and killed xbd-blkback with every guest's disk; now
only the offending disk gets an `error` node and Closing, and another
guest doing I/O meanwhile keeps going."""
import pytest

from hostile_fixtures import host  # noqa: F401  (fixture)


def wait_ready(p):
    while True:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        if line.strip() == "ready 1":
            return


@pytest.mark.parametrize("victim", ["memory", "gnttab", "evtchn"])
def test_truncating_a_guest_file_errors_only_its_disk(host, victim):
    good = host.guest("good")
    bad = host.guest("bad")
    assert good.front("latency", 2)["roundtrips"] == "2"
    other = good.spawn("busy", 3)
    try:
        wait_ready(other)
        out = bad.front("truncate", victim, timeout=60)
        print(f"{victim}: {out['_lines']}")
        assert out["truncated"] == victim
        assert "truncated" in out["error"], out
        host.proc()                       # alive
        out, errs = other.communicate(timeout=60)
        assert other.returncode == 0, f"{out}\n{errs}"
    finally:
        if other.poll() is None:
            other.kill()
            other.communicate()
    assert bad.be_state() == "5"
    # the backend lives on and serves the other guest
    assert good.front("latency", 8)["roundtrips"] == "8"
    assert good.be_state() == "4"
    print(f"backend {host.proc()}")
