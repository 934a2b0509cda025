# SPDX-License-Identifier: MIT
"""A frontend writing straight into the shared ring: double fetch
(XSA-155), stale bytes in responses (XSA-216) and a ring overrun."""
import os

from hostile_fixtures import DISK_BYTES, host  # noqa: F401  (fixture)


def test_double_fetch_acts_only_on_validated_requests(host):
    """Each request is rewritten by another thread while the backend reads
    it (valid versions, and versions with a bad op, count, segment or
    sector).  Every sector on disk must be zero or one a request could
    validly send, and nothing may be written past the end of the disk."""
    g = host.guest("hostile")
    out = g.front("doublefetch", 200, 3, check=False)
    print(out)
    assert out["_rc"] == 0, out["_stderr"]
    assert out["bad_sectors"] == "0"
    assert int(out["requests"]) > 0
    assert int(out["ok"]) + int(out["error"]) + int(out["clobbered"]) == int(out["requests"])
    assert int(out["rewrites"]) > int(out["requests"])
    assert os.path.getsize(g.disk) == DISK_BYTES
    assert g.be_state() == "4"
    # still serves, with the right bytes
    assert g.front("latency", 4)["roundtrips"] == "4"


def test_responses_carry_no_stale_bytes(host):
    g = host.guest("hostile")
    out = g.front("leak", 4, check=False)
    assert out["_rc"] == 0, out["_stderr"]
    assert out["slots_checked"] == str(4 * 32)
    assert out["bad_slots"] == "0"


def test_ring_overrun_closes_that_device_only(host):
    bad = host.guest("hostile")
    good = host.guest("good")
    out = bad.front("overrun")
    assert out["be_state"] == "closing"
    assert "overran" in out["error"]
    assert host.m.read(f"{bad.be}/error")
    assert bad.be_state() == "5"
    assert good.front("latency", 8)["roundtrips"] == "8"
    host.proc()                                # still alive
