# SPDX-License-Identifier: MIT
"""Grant-map failures (XSA-361/362/365/371): a request whose grants partly
fail to map gets BLKIF_RSP_ERROR and the backend unmaps exactly what it
mapped; the guest can revoke every grant afterwards."""
from hostile_fixtures import host  # noqa: F401  (fixture)


def test_partly_unmappable_requests_fail_and_leave_nothing_mapped(host):
    g = host.guest("hostile")
    out = g.front("badgrant", check=False)
    cases = dict(line.split()[1:] for line in out["_lines"]
                 if line.startswith("case "))
    ok, err = "0", "-1"     # BLKIF_RSP_OKAY, BLKIF_RSP_ERROR
    assert cases == {
        "all-valid": ok, "write-from-ro": ok, "same-ref-twice": ok,
        "invalid-middle": err, "revoked-last": err, "foreign-first": err,
        "read-into-ro": err, "read-into-ro-11": err, "write-revoked-11": err,
    }, out["_stderr"]
    assert out["_rc"] == 0, out["_stderr"]
    assert out["pinned"] == "0"
    assert out["revoke"] == "0 0 0"
    # the backend is still serving that device
    assert g.be_state() == "4"
