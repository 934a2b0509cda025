# SPDX-License-Identifier: MIT
"""Real Xen 4.17 (under QEMU): the xen platform, kernel blkback, xbd-block.

Every reply printed by guest/scenario.sh in dom0 is checked here; the
labels are the scenario's.  Phase P: dom0 granting to itself and a
loopback event channel through xbd-test-platform --platform xen; K: the
kernel blkback baseline; H: the xbd-block hotplug script; D: domain
queries about a domU before, during and after `xl destroy`; U:
xbd-blkback --platform xen serving the domU's xen-blkfront (data,
discard, flush, detach and re-attach, blkfront options, restart, destroy),
and the same dd through kernel blkback and xbd-blkback.
"""
import errno
import hashlib
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


# ---- U: xbd-blkback serving the domU's xen-blkfront -------------------------

ZERO_MIB_MD5 = hashlib.md5(bytes(1 << 20)).hexdigest()
ROUNDS = {  # round: (queues, ring-page-order, persistent) blkfront negotiates
    "r1": (2, 2, 1),
    "r2": (2, 2, 1),
    "r3": (2, 2, 0),
    "r4": (1, 2, 1),
}


def mb(xen):
    m = re.search(r"XBDXEN-SCENARIO-START phases='[^']*' mb=(\d+)", xen.log)
    assert m, "no XBDXEN-SCENARIO-START line"
    return int(m.group(1))


def u_kv(xen, label, index=-1):
    return kv(xen.replies("U", label)[index].split())


def test_xbd_blkback_starts_with_its_tree_in_dom0(xen):
    assert xen.reply("U", "rmmod") == ["ok"]
    assert xen.reply("U", "fuse") == ["ok"]
    assert u_kv(xen, "start") == {"alive": "1", "sysfs": "1"}
    base = u_kv(xen, "baseline")
    assert base["gntdev_maps"] == "0" and int(base["fds"]) > 3


def check_round(xen, r):
    queues, order, persistent = ROUNDS[r]
    size = mb(xen)
    assert u_kv(xen, f"{r}.dev") == {"sectors": str(size * 2048), "queues": str(queues)}
    write, read = (kv(x.split()) for x in xen.replies("U", f"{r}.dd"))
    assert write["op"] == "write" and read["op"] == "read"
    assert write["bytes"] == read["bytes"] == str(size << 20)
    assert u_kv(xen, f"{r}.readback") == {"md5": write["md5"], "expected": write["md5"]}
    # discard: granted to the domU, MiB 1 reads back as zeroes on both sides
    assert int(u_kv(xen, f"{r}.discard-max")["bytes"]) > 0
    assert u_kv(xen, f"{r}.blkdiscard") == {"rc": "0"}
    assert u_kv(xen, f"{r}.discarded") == {"md5": ZERO_MIB_MD5, "zero": ZERO_MIB_MD5}
    after = u_kv(xen, f"{r}.after-discard")["md5"]
    assert after != write["md5"]
    assert xen.reply("U", f"{r}.file") == [after], "the domU's data is not in dom0's file"
    assert xen.reply("U", f"{r}.file-discarded") == [ZERO_MIB_MD5]
    assert xen.reply("U", f"{r}.ack") == ["0"]
    # fsync in the domU is a flush request at the backend
    assert u_kv(xen, f"{r}.sync.fsync") == {"rc": "0"}
    f = {k: int(v) for k, v in u_kv(xen, f"{r}.f_req").items()}
    assert f["before-io"] < f["after-io"] < f["after-fsync"], f
    stats = {k: int(v) for k, v in u_kv(xen, f"{r}.stats").items()}
    assert stats["rd_req"] > 0 and stats["wr_req"] > 0 and stats["ds_req"] > 0, stats
    assert stats["oo_req"] == 0
    # at least the pattern written, and read back three times
    assert stats["wr_sect"] >= size * 2048 and stats["rd_sect"] >= 3 * size * 2048, stats
    pgrants = int(xen.reply("U", f"{r}.pgrants")[0])
    assert (pgrants > 0) == bool(persistent), f"{pgrants} persistent grants"
    # what xenstore says was negotiated
    fe, be = u_kv(xen, f"{r}.fe"), u_kv(xen, f"{r}.be")
    assert fe["state"] == be["state"] == "4"
    assert fe["multi-queue-num-queues"] == (str(queues) if queues > 1 else "-")
    assert fe["ring-page-order"] == str(order)
    assert fe["feature-persistent"] == str(persistent)
    assert be["multi-queue-max-queues"] == "2" and int(be["max-ring-page-order"]) >= order
    assert be["feature-persistent"] == "1" and be["feature-flush-cache"] == "1"
    assert be["feature-discard"] == "1" and be["hotplug-status"] == "connected"
    assert xen.reply("U", f"{r}.sysfs-queues") == [str(queues)]


def test_xbd_blkback_serves_blkfront_with_two_queues(xen):
    assert xen.time("U-attach1")[1] == 0
    check_round(xen, "r1")


def test_xbd_blkback_detach_and_reattach(xen):
    assert xen.time("U-detach1")[1] == 0
    assert xen.reply("U", "U-detach1.ack") == ["0"], "the disk did not leave the domU"
    assert xen.reply("U", "U-detach1.nodes") == ["gone"]
    assert xen.time("U-attach2")[1] == 0
    check_round(xen, "r2")


def test_xbd_blkback_blkfront_without_persistent_grants(xen):
    assert xen.time("U-detach2")[1] == 0
    assert xen.reply("U", "U-detach2.nodes") == ["gone"]
    assert u_kv(xen, "r3.reload.reload") == {
        "rmmod": "0", "insmod": "0",
        "args": "max_queues=2,max_ring_page_order=2,feature_persistent=0"}
    assert xen.time("U-attach3")[1] == 0
    check_round(xen, "r3")


def test_xbd_blkback_blkfront_with_one_queue(xen):
    assert xen.time("U-detach3")[1] == 0
    assert xen.reply("U", "U-detach3.nodes") == ["gone"]
    assert u_kv(xen, "r4.reload.reload")["insmod"] == "0"
    assert xen.time("U-attach4")[1] == 0
    check_round(xen, "r4")


# The Linux xen-blkfront does not start over when its backend says Closed:
# a restarted xbd-blkback adopts the rings of the connected frontend
# (backend/journal.c, Documentation/backend.md "Restart"); without that
# the domU's dd hangs and this fails.
def test_xbd_blkback_restart_under_a_reading_domu(xen):
    assert u_kv(xen, "restart.start") == {"alive": "1", "sysfs": "1"}
    assert u_kv(xen, "restart.killed") == {"status": "137", "during": "1"}
    assert u_kv(xen, "restart.started") == {"n": "8"}
    want = u_kv(xen, "r4.after-discard")["md5"]
    for n in range(1, 9):
        assert u_kv(xen, f"restart.read{n}")["md5"] == want, f"read {n} after SIGKILL"
    assert xen.reply("U", "restart.ack") == ["0"]
    assert xen.reply("U", "restart.file") == [want]
    fe = u_kv(xen, "restart.fe")
    assert fe["state"] == "4" and fe["multi-queue-num-queues"] == "-"


# Online resize (Documentation/storage.md): xbd-blkback notices the grown
# image, writes `sectors` and state Connected again as Linux
# xen_vbd_resize does, and the kernel's xen-blkfront (blkfront_connect on
# a re-announced Connected) sets the new capacity; the domU reads past
# the old end.  `xbd block-resize` grows it again; a shrink is refused.
def test_online_resize_seen_by_linux_blkfront(xen):
    size = mb(xen)
    before = u_kv(xen, "resize.before")
    assert before["sectors"] == str(size * 2048)
    grow = u_kv(xen, "resize.grow.size")
    assert grow["sectors"] == str(2 * size * 2048), "xen-blkfront kept the old size"
    assert u_kv(xen, "resize.grow.tail") == {"mib": str(2 * size - 1), "bytes": str(1 << 20)}
    assert xen.reply("U", "resize.grow.ack") == ["0"]
    be = u_kv(xen, "resize.grow.be")
    assert be["sectors"] == be["tree"] == str(2 * size * 2048)
    assert be["state"] == "4"
    xbd = xen.replies("U", "resize.xbd")[-1]
    assert xbd.startswith("rc=0 "), xbd
    assert kv(xbd.split())["bytes"] == str(3 * size << 20)
    assert u_kv(xen, "resize.xbdgrow.size")["sectors"] == str(3 * size * 2048)
    assert xen.reply("U", "resize.xbdgrow.ack") == ["0"]
    shrink = xen.replies("U", "resize.shrink")[-1]
    assert shrink.startswith("rc=1 ") and "refusing to shrink xvdb" in shrink, shrink
    assert kv(shrink.split())["bytes"] == str(3 * size << 20)


def test_xbd_blkback_frees_everything_after_xl_destroy(xen):
    base = u_kv(xen, "baseline")
    held = u_kv(xen, "destroy.held")
    assert held.pop("alive") == "1", "xbd-blkback died"
    assert held == base, "xbd-blkback still holds fds or mappings of the destroyed domU"
    assert xen.reply("U", "destroy.sysfs-dev") == ["gone"]
    assert xen.reply("U", "destroy.nodes") == ["gone"]
    assert xen.reply("U", "stop") == ["status=0"]


def test_same_dd_through_kernel_blkback_and_xbd_blkback(xen):
    size = mb(xen)
    k = dd_lines(xen)
    u = {d["op"]: d for d in (kv(x.split()) for x in xen.replies("U", "r1.dd"))}
    for op in ("read", "write"):
        assert k[op]["bytes"] == u[op]["bytes"] == str(size << 20), (op, k[op], u[op])
        assert float(k[op]["secs"]) > 0 and float(u[op]["secs"]) > 0
