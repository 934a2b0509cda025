# SPDX-License-Identifier: MIT
"""Phase R on real Xen 4.17 (under QEMU): xbd's frontend (libxbdfront,
--platform xen) in a PV domU against the Linux kernel's xen-blkback in
dom0, attached with the real `xl block-attach`.

guest/domr-init runs the frontend in the domU (no xen-blkfront, no
privcmd); guest/phase-r.sh in dom0 samples the backend's states and
statistics, keeps the negotiated xenstore nodes and checks its file.
Every line they print is checked here.
"""
import re

MIB = 1 << 20


def kv(words):
    return dict(w.split("=", 1) for w in words if "=" in w)


class DomR:
    """The domU's XBDXEN-DOMR* lines, as dom0 relayed them."""

    def __init__(self, xen):
        self.lines = [r.strip() for r in xen.results.get("R", {}).get("domu", [])]
        assert self.lines, f"no phase R domU lines in {xen.rundir}/serial.log"

    def say(self, key):
        """The words after 'XBDXEN-DOMR' of the (last) line whose first
        word is key or key=..."""
        got = [ln.split()[1:] for ln in self.lines
               if ln.split()[0] == "XBDXEN-DOMR" and len(ln.split()) > 1
               and ln.split()[1].split("=", 1)[0] == key]
        assert got, f"no XBDXEN-DOMR {key} line: {self.lines}"
        return got[-1]

    def io(self, label):
        """step -> words of the 'XBDXEN-DOMR-IO <label> <step> ...' lines."""
        out = {}
        for ln in self.lines:
            w = ln.split()
            if w[:2] == ["XBDXEN-DOMR-IO", label] and len(w) > 2:
                out[w[2]] = w[3:]
        return out

    def rc(self, label):
        line = " ".join(self.say(label)[1:])
        m = re.match(r"rc=(\d+) err='(.*)'", line)
        assert m, line
        return int(m.group(1)), m.group(2).strip()


def samples(xen):
    """Every sample dom0 took: dicts of fe, be and the statistics."""
    return [kv(s.split()) for s in xen.replies("R", "sample")]


def nodes(xen, label):
    """path -> value from an 'xenstore-ls -f' line joined with ';'."""
    out = {}
    for item in xen.replies("R", label)[-1].split(";"):
        if " = " in item:
            path, value = item.split(" = ", 1)
            out[path.strip()] = value.strip().strip('"')
    return out


def test_domu_runs_the_frontend_without_kernel_blkfront_or_privcmd(xen):
    assert xen.time("R-create")[1] == 0
    d = DomR(xen)
    line = next(ln for ln in d.lines if ln.startswith("XBDXEN-DOMR modules="))
    info = kv(line.split())
    mods = line.split("'")[1].split()
    assert "xen_gntalloc" in mods and "xen_evtchn" in mods, mods
    assert "xen_blkfront" not in mods
    assert info["privcmd"] == "no" and info["blkfront"] == "absent"
    assert int(info["domid"]) == int(xen.reply("R", "domid")[0])
    assert xen.time("R-attach")[1] == 0
    rid = int(info["domid"])
    assert kv(d.say("vbd"))["backend"] == f"/local/domain/0/backend/vbd/{rid}/51728"


def test_negotiated_values_in_xenstore(xen):
    rid = int(xen.reply("R", "domid")[0])
    fe = nodes(xen, "fe-nodes")
    be = nodes(xen, "be-nodes")
    fdir = f"/local/domain/{rid}/device/vbd/51728"
    bdir = f"/local/domain/0/backend/vbd/{rid}/51728"
    assert fe[f"{fdir}/state"] == "4" and be[f"{bdir}/state"] == "4"
    assert fe[f"{fdir}/multi-queue-num-queues"] == "2"
    assert fe[f"{fdir}/ring-page-order"] == "2"
    assert fe[f"{fdir}/feature-persistent"] == "1"
    assert fe[f"{fdir}/protocol"] == "x86_64-abi"
    for q in (0, 1):
        refs = [fe[f"{fdir}/queue-{q}/ring-ref{i}"] for i in range(4)]
        assert all(int(r) >= 8 for r in refs), refs
        assert int(fe[f"{fdir}/queue-{q}/event-channel"]) > 0
    # kernel blkback's offer and what it took
    assert be[f"{bdir}/feature-persistent"] == "1"
    assert int(be[f"{bdir}/multi-queue-max-queues"]) >= 2
    assert int(be[f"{bdir}/max-ring-page-order"]) >= 2
    assert be[f"{bdir}/physical-device-path"].startswith("/dev/loop")
    assert be[f"{bdir}/sectors"] == str(int(xen.reply("R", "image-mb")[0]) * MIB // 512)
    # what the library reports is what xenstore says
    i = kv(DomR(xen).io("dd1")["info"])
    assert i["queues"] == "2" and i["ring-page-order"] == "2" and i["persistent"] == "1"
    assert i["sectors"] == be[f"{bdir}/sectors"]
    assert i["flush"] == "1" and i["discard"] == "1"


def test_data_md5_on_both_sides(xen):
    d = DomR(xen)
    assert d.rc("dd1") == (0, ""), d.lines
    mb = int(xen.reply("R", "image-mb")[0])
    io = d.io("dd1")
    assert kv(io["read"])["bytes"] == str(mb * MIB)
    assert kv(io["write"])["bytes"] == str(mb * MIB)
    # the image dom0 made, read in the domU
    read0 = kv(d.say("read0"))
    assert read0["md5"] == read0["expected"] == xen.reply("R", "image-md5")[0]
    # the domU's fresh pattern, written and read back
    read1 = kv(d.say("read1"))
    assert read1["md5"] == read1["expected"] == kv(d.say("pattern"))["md5"]
    assert read1["md5"] != read0["md5"]
    # after the discard and verify: the last read in the domU and dom0's
    # file agree
    assert d.rc("dd2") == (0, "")
    assert kv(d.io("dd2")["read"])["bytes"] == str(mb * MIB)
    assert kv(d.say("read2"))["md5"] == xen.reply("R", "file-md5")[0]


def test_flush_and_discard_reach_kernel_blkback(xen):
    d = DomR(xen)
    io = d.io("dd1")
    assert io["flush"] == ["ok"]
    assert kv(io["discard"]) == {"off": str(MIB), "len": str(MIB)}
    assert io["zero"] == [f"ok={MIB}"], "the discarded range must read zeroes"
    # dom0's samples of the first connection (blkback resets its
    # statistics at each one): f_req and ds_req start at 0 and each of our
    # one flush and one discard moves its counter by exactly one
    s = samples(xen)
    first = next(n for n, x in enumerate(s) if (x["fe"], x["be"]) == ("4", "4"))
    end = next(n for n, x in enumerate(s) if n > first and x["fe"] == "6")
    conn = [x for x in s[first - 1:end] if "f_req" in x]
    assert conn[0]["f_req"] == "0" and conn[0]["ds_req"] == "0", conn
    assert max(int(x["f_req"]) for x in conn) == 1, conn
    assert max(int(x["ds_req"]) for x in conn) == 1, conn
    assert max(int(x["wr_req"]) for x in conn) > 0, conn
    assert all(x["oo_req"] == "0" for x in s if "oo_req" in x)


def test_verify_on_a_second_connection(xen):
    d = DomR(xen)
    assert d.rc("verify") == (0, ""), d.lines
    words = d.io("verify")["verified"]
    assert int(words[0]) >= 4 << 20 and words[1] == "bytes"


def test_throughput_printed_with_byte_counts(xen):
    io = DomR(xen).io("dd1")
    mb = int(xen.reply("R", "image-mb")[0])
    for op in ("read", "write"):
        r = kv(io[op])
        assert int(r["bytes"]) == mb * MIB
        assert float(r["secs"]) > 0


def test_clean_close_between_connections(xen):
    # each close leaves the frontend Closed and kernel blkback Closed (it
    # stays online); the next open goes Initialising and blkback InitWait
    # (dom0 samples every half second at best: transient states may be
    # missed, so only what must be seen in order is checked)
    states = [(x.get("fe"), x.get("be")) for x in samples(xen)]
    first = states.index(("4", "4"))
    closed = next(n for n, st in enumerate(states) if n > first and st[0] == "6")
    again = next(n for n, st in enumerate(states) if n > closed and st[1] == "2")
    assert ("4", "4") in states[again:], states
    assert DomR(xen).rc("verify")[0] == 0


def test_detach_while_connected(xen):
    d = DomR(xen)
    # dom0 detached while the domU's last connection was open
    assert kv(xen.reply("R", "states-before-detach"))["fe"] == "4"
    assert kv(xen.reply("R", "states-before-detach"))["be"] == "4"
    assert xen.time("R-detach")[1] == 0
    # the library saw the backend go: pending and new I/O fail with ENODEV
    assert d.rc("dd2") == (0, "")
    assert kv(d.io("dd2")["hold"])["error"] == "-19"
    # the frontend said Closed (the domU may read that before libxl
    # removes the directory), then libxl removed the nodes
    assert kv(d.say("fe-state"))["fe-state"] in ("6", "gone")
    assert "No such file or directory" in " ".join(xen.reply("R", "nodes-after-detach"))
    assert xen.reply("R", "loops-after-detach") == ["''"]
    assert xen.time("R-destroy")[1] == 0
