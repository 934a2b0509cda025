# SPDX-License-Identifier: MIT
"""A frontend abusing xenstore: rapid state flipping (XSA-350) and
watch-event floods (XSA-349).  The backend must not leak (fds, threads,
RSS from /proc), must not crash, and must keep serving."""
import os
import time

from hostile_fixtures import host  # noqa: F401  (fixture)
from xenstored_fixtures import XsConn


def settle(host, base, slack_fds=0):
    """Wait (bounded) for the backend's fds and threads to come back to
    the baseline; the last snapshot."""
    deadline = time.monotonic() + 10
    while True:
        now = host.proc()
        if (now.fds <= base.fds + slack_fds and now.threads <= base.threads) \
                or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def test_rapid_state_flipping_leaks_nothing(host):
    good = host.guest("good")
    assert good.front("latency", 2)["roundtrips"] == "2"
    bad = host.guest("hostile")
    base = host.proc()
    for _ in range(2):
        out = bad.front("flip", 2000)
        assert out["flips"] == "2000"
    after = settle(host, base)
    print(f"backend before {base}, after 2 x 2000 flips {after}")
    assert after.fds <= base.fds and after.threads <= base.threads, (base, after)
    assert after.rss_kb < base.rss_kb + 64 * 1024, (base, after)
    # the flipping device still connects and serves; so does the other one
    assert bad.front("latency", 4)["roundtrips"] == "4"
    assert good.front("latency", 4)["roundtrips"] == "4"


def test_watch_event_flood_is_collapsed(host):
    g = host.guest("hostile")
    assert g.front("latency", 2)["roundtrips"] == "2"
    base = host.proc()
    out = g.front("flood", 3000)
    assert out["writes"] == "3000"
    assert out["roundtrips"] == "8"       # served right after the flood
    after = settle(host, base)
    print(f"backend before {base}, after 3000 watch events {after}")
    assert after.rss_kb < base.rss_kb + 64 * 1024, (base, after)
    assert after.fds <= base.fds and after.threads <= base.threads, (base, after)
    assert g.be_state() == "4"


def test_guest_text_cannot_forge_a_log_line(host):
    """Issue 18 item 7: a frontend's `protocol` with a newline and a
    terminal escape reaches the backend's log and error node escaped."""
    g = host.guest("forger")
    host.wait_state(f"{g.be}/state", 2)
    forged = "x\nxbd-blkback[1]: FORGED\x1b[2J"
    # the guest itself writes, on its own connection
    c = XsConn(os.path.join(host.rundir, f"dom{g.domid}", "xenstore.sock"))
    c.write(f"{g.fe}/protocol", forged)
    c.write(f"{g.fe}/state", "3")
    c.close()
    host.wait_state(f"{g.be}/state", 5)
    err = host.m.read(f"{g.be}/error")
    print(f"error node: {err!r}")
    assert "\n" not in err and "\x1b" not in err, err
    assert "x\\x0axbd-blkback[1]: FORGED\\x1b[2J" in err, err
    log = host.backend.log_text()
    lines = [ln for ln in log.splitlines() if "FORGED" in ln]
    print("log lines:", lines)
    assert lines, log
    for ln in lines:
        assert not ln.startswith("xbd-blkback[1]"), log
        assert "\x1b" not in ln, log
    assert g.be_state() == "5"
