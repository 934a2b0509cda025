# SPDX-License-Identifier: MIT
"""Local platform domains across processes: layout, claim, takeover, destroy."""
import errno
import os
import stat

from platform_fixtures import helpers  # noqa: F401  (fixture)

MiB = 1 << 20


def info(h, domid):
    return dict(kv.split("=", 1) for kv in h.ok(f"info {domid}"))


def test_create_lays_out_rundir(helpers, rundir):
    h = helpers.start("tool")
    h.ok(f"create 3 guest3 {4 * MiB}")
    d = os.path.join(rundir, "dom3")
    for f in ("info", "state", "claim", "memory", "gnttab", "active", "maptrack",
              "evtchn", "evtchn.lock"):
        assert os.path.exists(os.path.join(d, f)), f
    st = os.stat(os.path.join(d, "memory"))
    assert st.st_size == 4 * MiB
    assert st.st_blocks == 0, "memory file must be sparse"
    assert os.path.getsize(os.path.join(d, "gnttab")) == 32768 * 8
    i = info(h, 3)
    assert i == {"exists": "1", "dying": "0", "claimed_by": "0",
                 "memory": str(4 * MiB), "name": "guest3"}
    assert h.err(f"create 3 again {MiB}") == -errno.EEXIST
    assert info(h, 4)["exists"] == "0"


def test_default_memory_and_dom0_on_demand(helpers, rundir):
    h = helpers.start("tool")
    h.ok("create 6 dflt 0")
    assert info(h, 6)["memory"] == str(256 * MiB)
    assert os.stat(os.path.join(rundir, "dom6", "memory")).st_blocks == 0
    assert info(h, 0)["exists"] == "1"
    assert os.path.getsize(os.path.join(rundir, "dom0", "memory")) == 0
    h.ok("gnttab 0")
    h.ok("evtchn 0")


def test_second_claim_fails_and_dead_claim_is_taken_over(helpers):
    guest = helpers.start("guest")
    guest.ok(f"create 1 g {MiB}")
    guest.ok("claim 1")
    assert info(guest, 1)["claimed_by"] == str(guest.pid)

    intruder = helpers.start("intruder")
    assert intruder.err("claim 1") == -errno.EBUSY
    assert intruder.err("destroy 1") == -errno.EBUSY

    guest.kill()
    assert info(intruder, 1)["claimed_by"] == "0"
    intruder.ok("claim 1")
    assert info(intruder, 1)["claimed_by"] == str(intruder.pid)


def test_release_frees_the_claim(helpers):
    a = helpers.start("a")
    a.ok(f"create 1 g {MiB}")
    a.ok("claim 1")
    a.ok("release")
    b = helpers.start("b")
    b.ok("claim 1")


def test_destroy(helpers, rundir):
    tool = helpers.start("tool")
    tool.ok(f"create 2 g {MiB}")
    guest = helpers.start("guest")
    guest.ok("claim 2")
    assert tool.err("destroy 2") == -errno.EBUSY
    tool.ok("destroy 2 force")
    assert not os.path.exists(os.path.join(rundir, "dom2"))
    assert info(tool, 2)["exists"] == "0"
    assert tool.err("destroy 2") == -errno.ENOENT
    assert tool.err("claim 2") == -errno.ENOENT
    # the old claimer's memory mapping stays valid; a new domain 2 is fresh
    tool.ok(f"create 2 g {MiB}")
    tool.ok("claim 2")
