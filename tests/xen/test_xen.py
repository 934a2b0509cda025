# SPDX-License-Identifier: MIT
"""Real Xen 4.17 (under QEMU): the xen platform, kernel blkback, xbd-block.

Every reply printed by guest/scenario.sh in dom0 is checked here; the
labels are the scenario's.  Phase P: dom0 granting to itself and a
loopback event channel through xbd-test-platform --platform xen; K: the
kernel blkback baseline; H: the xbd-block hotplug script; D: domain
queries about a domU before, during and after `xl destroy`.
"""
import errno
import re


def kv(words):
    return dict(w.split("=", 1) for w in words if "=" in w)


def domu_id(xen):
    m = re.search(r"XBDXEN-DOMU-ID (\d+)", xen.log)
    assert m, "no domU was created"
    return int(m.group(1))


def test_scenario_ran_to_its_end(xen):
    ready = "XBDXEN-DOM0-READY" in xen.log
    ended = "XBDXEN-SCENARIO-END" in xen.log
    assert ready, f"dom0 did not come up: see {xen.rundir}/serial.log"
    assert ended, f"the scenario did not finish: see {xen.rundir}/serial.log and summary.txt"


# ---- P: the xen platform in dom0 -------------------------------------------

def test_platform_opens_and_claims_only_its_own_domain(xen):
    xen.ok("P", "open")
    assert xen.err("P", "claim-other") == -errno.EPERM
    xen.ok("P", "claim-self")
    xen.ok("P", "gntshr")
    xen.ok("P", "gnttab")
    assert xen.reply("P", "helper-stderr") == [], "xbd-test-platform wrote to stderr"


def test_shared_pages_map_back_and_bytes_cross_both_ways(xen):
    area, *refs = xen.ok("P", "share-rw")
    assert len(refs) == 2 and all(int(r) >= 8 for r in refs), "refs 0-7 are reserved"
    xen.ok("P", "fill-rw")
    xen.ok("P", "map-rw")
    assert xen.ok("P", "map-rw-peek-first") == ["165"]
    assert xen.ok("P", "map-rw-peek-last") == ["165"]
    xen.ok("P", "map-rw-poke")
    assert xen.ok("P", "share-peek-poked") == ["66"]


def test_readonly_grant_maps_readonly_only(xen):
    xen.ok("P", "share-ro")
    xen.ok("P", "fill-ro")
    # xen: gntdev folds the hypervisor's refusal into EINVAL (platform.h)
    assert xen.err("P", "map-ro-grant-rw") == -errno.EINVAL
    xen.ok("P", "map-ro")
    assert xen.ok("P", "map-ro-peek") == ["7"]
    assert xen.ok("P", "map-ro-store") == [f"signal={11}"]
    assert xen.ok("P", "map-ro-peek-after") == ["7"]


def test_grant_copy_both_ways(xen):
    assert xen.ok("P", "copy-from") == ["0", "165"]
    assert xen.ok("P", "copy-to") == ["0"]
    assert xen.ok("P", "copy-to-share-peek") == ["9"]
    assert xen.ok("P", "copy-to-map-peek") == ["9"]
    assert xen.ok("P", "copy-to-ro") == [str(-errno.EPERM)]
    assert xen.ok("P", "copy-from-ro") == ["0", "7"]
    assert xen.ok("P", "copy-bad-ref")[0] == str(-errno.EINVAL)


def test_unmap_and_unshare(xen):
    xen.ok("P", "unmap-rw")
    assert xen.err("P", "unmap-rw-again") == -errno.EINVAL
    xen.ok("P", "unmap-ro")
    xen.ok("P", "unshare-rw")


def test_event_channel_loopback(xen):
    p1 = int(xen.ok("P", "unbound")[0])
    p2 = int(xen.ok("P", "bind")[0])
    assert p1 > 0 and p2 > 0 and p1 != p2
    # the spurious event Xen raises on bind_interdomain
    assert xen.ok("P", "wait-bind") == ["ready"]
    assert xen.ok("P", "pending-bind") == [str(p2)]
    xen.ok("P", "unmask-bind")
    assert xen.ok("P", "wait-idle") == ["timeout"]
    # notify one end: the other is pending, then masked until unmask
    xen.ok("P", "notify-bound")
    assert xen.ok("P", "wait-1") == ["ready"]
    assert xen.ok("P", "pending-1") == [str(p1)]
    xen.ok("P", "notify-while-masked")
    assert xen.ok("P", "wait-masked") == ["timeout"]
    xen.ok("P", "unmask-1")
    assert xen.ok("P", "wait-unmasked") == ["ready"]
    assert xen.ok("P", "pending-unmasked") == [str(p1)]
    xen.ok("P", "unmask-1b")
    # and back the other way
    xen.ok("P", "notify-back")
    assert xen.ok("P", "wait-2") == ["ready"]
    assert xen.ok("P", "pending-2") == [str(p2)]
    xen.ok("P", "unmask-2")
    # three notifications coalesce into one event, or two when the third
    # came after the first was taken (Xen keeps it for the unmask)
    xen.ok("P", "notify-3x")
    assert xen.ok("P", "wait-3") == ["ready"]
    assert xen.ok("P", "pending-3") == [str(p1)]
    xen.ok("P", "unmask-3")
    if xen.ok("P", "wait-coalesced") == ["ready"]:
        assert xen.ok("P", "pending-extra") == [str(p1)]
    else:
        assert xen.err("P", "pending-extra") == -errno.EAGAIN
    xen.ok("P", "unmask-extra")
    assert xen.ok("P", "wait-drained") == ["timeout"]
    # unbinding one end leaves the other unbound: notify is dropped
    xen.ok("P", "unbind")
    xen.ok("P", "notify-unbound")
    assert xen.err("P", "unbind-never-bound") == -errno.EINVAL
    assert int(xen.ok("P", "rebind")[0]) > 0


def test_domain_info_dom0_absent_reserved(xen):
    d0 = kv(xen.ok("P", "info-dom0"))
    assert d0["exists"] == "1" and d0["dying"] == "0"
    assert int(d0["memory"]) >= 512 << 20
    assert kv(xen.ok("P", "info-absent"))["exists"] == "0"
    assert xen.err("P", "info-reserved") == -errno.EINVAL


# ---- K: kernel blkback baseline ---------------------------------------------

def dd_lines(xen):
    """op -> {mb, secs, md5, expected} from the domU's XBDXEN-DOMU-DD lines."""
    out = {}
    for reply in xen.replies("K", "domu"):
        words = reply.split()
        if words and words[0] == "XBDXEN-DOMU-DD":
            d = kv(words[1:])
            out[d["op"]] = d
    return out


def test_kernel_blkback_attach_and_dd_with_md5_checks(xen):
    assert xen.time("xl-create")[1] == 0
    assert xen.time("K-attach")[1] == 0
    assert xen.reply("K", "backend") == ["phy", "/dev/loop0", "connected"]
    dd = dd_lines(xen)
    assert set(dd) == {"read", "read+md5", "write", "readback+md5"}, dd
    image = xen.reply("K", "image-md5")[0]
    assert dd["read+md5"]["md5"] == dd["read+md5"]["expected"] == image
    assert dd["readback+md5"]["md5"] == dd["write"]["md5"]
    assert xen.reply("K", "file-md5") == [dd["write"]["md5"]], "write not in dom0's file"
    assert float(dd["read"]["secs"]) > 0 and float(dd["write"]["secs"]) > 0
    assert xen.time("K-detach")[1] == 0
    assert xen.reply("K", "loops-after-detach") == ["''"]


# ---- H: the xbd-block hotplug script -----------------------------------------

def test_hotplug_script_add_connects_and_remove_runs(xen):
    domid = domu_id(xen)
    be = f"/local/domain/0/backend/vbd/{domid}/51744"
    assert xen.reply("H", "rmmod") == ["ok"]
    assert xen.time("H-add")[1] == 0
    assert xen.reply("H", "add-status") == ["connected"]
    nodes = " ".join(xen.replies("H", "add-nodes"))
    assert f"{be}/params = \"/srv/h.img\"" in nodes
    assert f"{be}/script = \"/etc/xen/scripts/xbd-block\"" in nodes
    assert "physical-device" not in nodes, "xbd-block must not set up a loop device"
    stub = xen.replies("H", "stub-log")
    assert "hotplug-status=connected hotplug-error=" in stub
    assert "frontend state=3" in stub, "blkfront did not connect to the stub"
    assert xen.time("H-remove")[1] == 0
    assert f"xbd-block: remove backend/vbd/{domid}/51744" in " ".join(xen.reply("H", "remove-script"))
    assert "state=6" in " ".join(stub)
    assert "backend directory removed" in stub
    gone = " ".join(xen.replies("H", "remove-nodes"))
    assert "No such file or directory" in gone and "params" not in gone


def test_hotplug_script_refuses_a_missing_target(xen):
    assert xen.time("H-missing")[1] != 0
    msg = " ".join(xen.reply("H", "missing-xl"))
    assert "xbd-block: /srv/missing.img does not exist" in msg
    assert xen.reply("H", "insmod") == ["ok"]


# ---- D: domain queries about a domU ------------------------------------------

def test_domu_alive_dying_while_mapped_then_gone(xen):
    alive = kv(xen.ok("D", "info-alive"))
    assert alive["exists"] == "1" and alive["dying"] == "0"
    assert int(alive["memory"]) > 128 << 20
    # map the domU's console page (grant ref 0, granted to dom0 by the
    # toolstack): a foreign grant map on the real hypervisor
    xen.ok("D", "map-console")
    assert xen.time("D-destroy")[1] == 0
    dying = kv(xen.ok("D", "info-dying"))
    assert dying["exists"] == "1" and dying["dying"] == "1", "our mapping keeps it a zombie"
    xen.ok("D", "unmap-console")
    assert kv(xen.ok("D", "info-gone"))["exists"] == "0"
