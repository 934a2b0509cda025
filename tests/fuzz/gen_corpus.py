#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Write the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

    tests/fuzz/gen_corpus.py [target ...]      (default: every target)

Each seed is a valid input in the layout the harness documents at its top:
requests of every blkif operation in both ABIs (be_request), responses to
requests of every kind (fe_response), messages of every xenstore type on both
connections (xenstored).  Seeds are named gen-*; entries added for crashes
the fuzzer found are named crash-* and are never rewritten.  Output is
deterministic, so re-running changes nothing.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

READ, WRITE, BARRIER, FLUSH, DISCARD, INDIRECT = 0, 1, 2, 3, 5, 6


def write_corpus(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("gen-"):
            os.unlink(os.path.join(d, f))
    for name, data in seeds:
        with open(os.path.join(d, "gen-" + name), "wb") as f:
            f.write(data)
    print(f"{target}: {len(seeds)} seeds")


# ---- be_request ---------------------------------------------------------

def seg(gref, first=0, last=7):
    return struct.pack("<IBBH", gref, first, last, 0)


def be_rw(x32, op, segs, rid, sector, handle=0x300):
    body = b"".join(segs).ljust(11 * 8, b"\0")
    if x32:
        return struct.pack("<BBHQQ", op, len(segs), handle, rid, sector) + body
    return struct.pack("<BBHIQQ", op, len(segs), handle, 0, rid, sector) + body


def be_discard(x32, rid, sector, nr, flag=0):
    if x32:
        return struct.pack("<BBHQQQ", DISCARD, flag, 0x300, rid, sector, nr).ljust(108, b"\0")
    return struct.pack("<BBHIQQQ", DISCARD, flag, 0x300, 0, rid, sector, nr).ljust(112, b"\0")


def be_indirect(x32, op, nsegs, rid, sector, grefs):
    g = struct.pack("<8I", *(grefs + [0] * (8 - len(grefs))))
    if x32:
        return (struct.pack("<BBHQQHH", INDIRECT, op, nsegs, rid, sector, 0x300, 0)
                + g).ljust(108, b"\0")
    return (struct.pack("<BBHIQQHH", INDIRECT, op, nsegs, 0, rid, sector, 0x300, 0)
            + g).ljust(112, b"\0")


def be_input(reqs, x32=False, order=0, persistent=False, blkdev=False, ro=False,
             flush=True, barrier=True, discard=True, secure=True, ss_shift=0,
             copy_sel=0, small_pool=False, max_ind=256, blocks=2047, rsp_prod=0,
             granted=0xffffffff, readonly=0, pages=b"", rounds=0):
    cfg0 = (x32 | (order << 1) | (persistent << 4) | (blkdev << 5) | (ro << 6)
            | (flush << 7))
    cfg1 = (barrier | (discard << 1) | (secure << 2) | (ss_shift << 3)
            | (copy_sel << 5) | (small_pool << 7))
    size = 108 if x32 else 112
    nr_ents = 1 << ((((4096 << order) - 64) // size).bit_length() - 1)
    ring = [bytes(size)] * nr_ents
    for i, r in enumerate(reqs):
        ring[(rsp_prod + i) % nr_ents] = r.ljust(size, b"\0")
    slots = b"".join(ring).rstrip(b"\0")
    hdr = struct.pack("<BBHHHIIIIB", cfg0, cfg1, max_ind, blocks, len(reqs),
                      rsp_prod, rsp_prod, granted, readonly, rounds)
    return hdr + struct.pack("<H", len(slots)) + slots + pages


def be_request_seeds():
    seeds = []
    for x32 in (False, True):
        a = "x32" if x32 else "x64"
        direct = [
            be_rw(x32, READ, [seg(1)], 1, 0),
            be_rw(x32, WRITE, [seg(i + 1, 1, 6) for i in range(11)], 2, 8),
            be_rw(x32, FLUSH, [], 3, 0),
            be_rw(x32, FLUSH, [seg(2)], 4, 16),
            be_rw(x32, BARRIER, [seg(3)], 5, 24),
            be_discard(x32, 6, 32, 64),
            be_discard(x32, 7, 32, 8, flag=1),
            be_rw(x32, 9, [], 8, 0),
        ]
        for i, r in enumerate(direct):
            seeds.append((f"{a}-op{i}", be_input([r], x32=x32)))
        seeds.append((f"{a}-all", be_input(direct, x32=x32)))
        # indirect pages sit at guest page 9 onwards
        for op in (READ, WRITE):
            segs = b"".join(seg(1 + (i % 8)) for i in range(40))
            pages = b"\x55" * (9 * 4096) + segs
            seeds.append((f"{a}-indirect{op}", be_input(
                [be_indirect(x32, op, 40, 10 + op, 0, [9])], x32=x32, pages=pages)))
            segs = b"".join(seg(1 + (i % 8)) for i in range(600))
            pages = b"\x55" * (9 * 4096) + segs
            seeds.append((f"{a}-indirect2p{op}", be_input(
                [be_indirect(x32, op, 600, 12 + op, 8, [9, 10])], x32=x32,
                pages=pages, max_ind=1024, blocks=0xffff)))
        seeds.append((f"{a}-persistent", be_input(direct, x32=x32, persistent=True)))
        seeds.append((f"{a}-persistent-small", be_input(
            direct * 2, x32=x32, persistent=True, small_pool=True, rounds=3)))
        seeds.append((f"{a}-rounds", be_input(direct * 3, x32=x32, rounds=3)))
        seeds.append((f"{a}-map", be_input(direct, x32=x32, copy_sel=1)))
        seeds.append((f"{a}-blkdev", be_input(direct, x32=x32, blkdev=True)))
        seeds.append((f"{a}-ro", be_input(direct, x32=x32, ro=True, readonly=0xff00)))
        seeds.append((f"{a}-4k", be_input(
            [be_rw(x32, READ, [seg(1, 0, 7)], 1, 8), be_rw(x32, WRITE, [seg(1, 0, 3)], 2, 8)],
            x32=x32, ss_shift=3)))
        seeds.append((f"{a}-order2-wrap", be_input(direct * 3, x32=x32, order=2,
                                                   rsp_prod=0xfffffffe)))
        seeds.append((f"{a}-nofeatures", be_input(direct, x32=x32, flush=False,
                                                  barrier=False, discard=False,
                                                  max_ind=0)))
        seeds.append((f"{a}-ungranted", be_input(direct, x32=x32, granted=0x5)))
        # raw.c's sync_io path (max_ind bit 15; bit 14: a file in memory),
        # with short transfers (failure bits 0 and 3) and one at the end
        # of the file (bits 2 and 3 after a short one at bit 1)
        seeds.append((f"{a}-sync", be_input(direct, x32=x32, max_ind=256 | 0x8000)))
        seeds.append((f"{a}-sync-memfs-short", be_input(
            direct, x32=x32, max_ind=256 | 0xc000, rounds=(0b1001 << 2))))
        seeds.append((f"{a}-sync-eof", be_input(
            direct, x32=x32, max_ind=256 | 0x8000, rounds=(0b1110 << 2))))
        segs = b"".join(seg(1 + (i % 8), 1, 6) for i in range(40))
        seeds.append((f"{a}-sync-indirect", be_input(
            [be_indirect(x32, READ, 40, 20, 0, [9])], x32=x32,
            pages=b"\x55" * (9 * 4096) + segs, max_ind=1024 | 0x8000, rounds=(0b1 << 2))))
    return seeds


# ---- fe_response --------------------------------------------------------

FE_READ, FE_WRITE, FE_FLUSH, FE_BARRIER, FE_DISCARD, FE_SDISCARD = range(6)


def fe_input(ios, rounds, x32=False, order=0, ro=False, flush=True, barrier=True,
             discard=True, secure=True, ss_shift=0, max_ind=0, blocks=4095):
    cfg0 = x32 | (order << 1) | (ro << 4) | (flush << 5) | (barrier << 6) | (discard << 7)
    cfg1 = secure | (ss_shift << 1)
    out = struct.pack("<BBHHB", cfg0, cfg1, max_ind, blocks, len(ios))
    for op, block, nblocks, frag_blocks in ios:
        out += struct.pack("<BHHB", op, block, nblocks, frag_blocks)
    for flags, raw_prod, rsps in rounds:
        out += struct.pack("<BBI", len(rsps), flags, raw_prod)
        for mode, pick, op_xor, status, raw_id in rsps:
            out += struct.pack("<BBBbQ", mode, pick, op_xor, status, raw_id)
    return out


def answer(n, status=0):
    """n rounds, each answering the first request in flight."""
    return [(0, 0, [(0, 0, 0, status, 0)]) for _ in range(n)]


def fe_response_seeds():
    every = [(FE_READ, 0, 7, 7), (FE_WRITE, 8, 15, 3), (FE_FLUSH, 0, 0, 0),
             (FE_BARRIER, 0, 0, 0), (FE_DISCARD, 16, 8, 0), (FE_SDISCARD, 32, 8, 0),
             (FE_READ, 100, 40, 7), (FE_WRITE, 200, 200, 0)]
    seeds = []
    for x32 in (False, True):
        a = "x32" if x32 else "x64"
        seeds.append((f"{a}-ok", fe_input(every, answer(40), x32=x32)))
        seeds.append((f"{a}-error", fe_input(every, answer(40, -1), x32=x32)))
        seeds.append((f"{a}-eopnotsupp", fe_input(every, answer(40, -2), x32=x32)))
        seeds.append((f"{a}-indirect", fe_input(
            [(FE_READ, 0, 300, 0), (FE_WRITE, 512, 511, 0)], answer(8), x32=x32,
            max_ind=256)))
        seeds.append((f"{a}-order3-4k", fe_input(every, answer(40), x32=x32, order=3,
                                                 ss_shift=3)))
        seeds.append((f"{a}-batch", fe_input(
            every, [(0, 0, [(0, k, 0, 0, 0) for k in range(6)])] + answer(10), x32=x32)))
        seeds.append((f"{a}-bad-id", fe_input(every, [(0, 0, [(1, 0, 0, 0, 999)])], x32=x32)))
        seeds.append((f"{a}-free-id", fe_input(every, [(0, 0, [(1, 0, 0, 0, 20)])], x32=x32)))
        seeds.append((f"{a}-bad-op", fe_input(every, [(0, 0, [(0, 0, 4, 0, 0)])], x32=x32)))
        seeds.append((f"{a}-dup", fe_input(every, [(0, 0, [(0, 0, 0, 0, 0)] * 2)], x32=x32)))
        seeds.append((f"{a}-overrun", fe_input(every, [(1, 1000, [])], x32=x32)))
        seeds.append((f"{a}-stale", fe_input(every, [(0, 0, [(2, 0, 0, 0, 0)])], x32=x32)))
        seeds.append((f"{a}-reconnect", fe_input(
            every, answer(2) + [(2, 0, [])] + answer(40), x32=x32)))
        seeds.append((f"{a}-ro", fe_input(every, answer(10), x32=x32, ro=True)))
        seeds.append((f"{a}-nofeatures", fe_input(every, answer(10), x32=x32, flush=False,
                                                  barrier=False, discard=False)))
    return seeds


# ---- xenstored ------------------------------------------------------------

(XS_CONTROL, XS_DIRECTORY, XS_READ, XS_GET_PERMS, XS_WATCH, XS_UNWATCH,
 XS_TRANSACTION_START, XS_TRANSACTION_END, XS_INTRODUCE, XS_RELEASE,
 XS_GET_DOMAIN_PATH, XS_WRITE, XS_MKDIR, XS_RM, XS_SET_PERMS, XS_WATCH_EVENT,
 XS_ERROR, XS_IS_DOMAIN_INTRODUCED, XS_RESUME, XS_SET_TARGET) = range(20)
XS_RESET_WATCHES, XS_DIRECTORY_PART = 21, 22
PRIV, GUEST = 0, 1


def xs(conn, typ, *args, tx=0, raw=None, noread=False, close=False):
    """One chunk: a message built by the harness (or raw bytes)."""
    payload = raw if raw is not None else b"".join(
        a if isinstance(a, bytes) else a.encode() + b"\0" for a in args)
    sel = conn | ((raw is not None) << 1) | (noread << 2) | (close << 3)
    return struct.pack("<BBBH", sel, typ, tx, len(payload)) + payload


def xs_write(conn, path, value, tx=0):
    return xs(conn, XS_WRITE, path.encode() + b"\0" + value.encode(), tx=tx)


def wire(typ, req, tx, payload):
    return struct.pack("<IIII", typ, req, tx, len(payload)) + payload


def xenstored_seeds():
    g = "/local/domain/1"
    every = {
        "control": [xs(PRIV, XS_CONTROL, "check"), xs(PRIV, XS_CONTROL, "quota"),
                    xs(PRIV, XS_CONTROL, "quota", "set", "nodes", "5"),
                    xs(PRIV, XS_CONTROL, "help"), xs(GUEST, XS_CONTROL, "check")],
        "directory": [xs(PRIV, XS_DIRECTORY, "/"), xs(GUEST, XS_DIRECTORY, g),
                      xs(GUEST, XS_DIRECTORY, "/local")],
        "read": [xs_write(PRIV, "/a", "v"), xs(PRIV, XS_READ, "/a"),
                 xs(GUEST, XS_READ, "/a"), xs(GUEST, XS_READ, "data")],
        "perms": [xs_write(PRIV, g + "/x", "1"), xs(PRIV, XS_GET_PERMS, g + "/x"),
                  xs(PRIV, XS_SET_PERMS, g + "/x", "n1", "r0", "b2"),
                  xs(GUEST, XS_GET_PERMS, g + "/x"),
                  xs(GUEST, XS_SET_PERMS, g + "/x", "n0")],
        "watch": [xs(GUEST, XS_WATCH, g, "tok"), xs(GUEST, XS_WATCH, "data", "rel"),
                  xs(GUEST, XS_WATCH, "@introduceDomain", "i"),
                  xs_write(PRIV, g + "/data/k", "v"), xs(PRIV, XS_WATCH, "/", "all"),
                  xs(PRIV, XS_RM, g + "/data"), xs(GUEST, XS_UNWATCH, g, "tok"),
                  xs(GUEST, XS_RESET_WATCHES)],
        "transaction": [xs(GUEST, XS_TRANSACTION_START, ""),
                        xs_write(GUEST, "data/t", "1", tx=1),
                        xs(GUEST, XS_READ, "data/t", tx=1),
                        xs(GUEST, XS_TRANSACTION_END, "T", tx=1),
                        xs(PRIV, XS_TRANSACTION_START, ""),
                        xs(PRIV, XS_MKDIR, "/tx", tx=1),
                        xs_write(PRIV, "/tx", "conflict"),
                        xs(PRIV, XS_TRANSACTION_END, "T", tx=1),
                        xs(PRIV, XS_TRANSACTION_START, ""),
                        xs(PRIV, XS_RM, "/tool", tx=2),
                        xs(PRIV, XS_TRANSACTION_END, "F", tx=2)],
        "domains": [xs(PRIV, XS_INTRODUCE, "2", "12345", "3"),
                    xs(PRIV, XS_IS_DOMAIN_INTRODUCED, "2"),
                    xs(PRIV, XS_GET_DOMAIN_PATH, "2"),
                    xs(PRIV, XS_SET_TARGET, "2", "1"), xs(PRIV, XS_RESUME, "2"),
                    xs_write(PRIV, "/local/domain/2/k", "v"),
                    xs(PRIV, XS_SET_PERMS, "/local/domain/2/k", "b2"),
                    xs(PRIV, XS_RELEASE, "2"), xs(GUEST, XS_INTRODUCE, "3", "1", "1"),
                    xs(GUEST, XS_GET_DOMAIN_PATH, "1")],
        "release-guest": [xs_write(GUEST, "data/a", "1"), xs(GUEST, XS_WATCH, "data", "t"),
                          xs(GUEST, XS_TRANSACTION_START, ""),
                          xs(PRIV, XS_RELEASE, "1"), xs(GUEST, XS_READ, "data/a"),
                          xs(PRIV, XS_INTRODUCE, "1", "1", "1"),
                          xs(GUEST, XS_READ, "data/a")],
        "mkdir-rm": [xs(GUEST, XS_MKDIR, "data/a/b/c"), xs(GUEST, XS_RM, "data/a"),
                     xs(GUEST, XS_RM, "/local"), xs(PRIV, XS_MKDIR, "/x/y"),
                     xs(PRIV, XS_RM, "/x")],
        "directory-part": [xs_write(PRIV, "/d/" + "n" * 200 + str(i), "v") for i in range(30)]
                          + [xs(PRIV, XS_DIRECTORY_PART, "/d", "0"),
                             xs(PRIV, XS_DIRECTORY_PART, "/d", "3000")],
        "errors": [xs(GUEST, XS_WATCH_EVENT, "x"), xs(GUEST, XS_ERROR, "x"),
                   xs(GUEST, 99, "x"), xs(GUEST, XS_READ, "bad//path"),
                   xs(GUEST, XS_READ, "x", tx=7), xs(GUEST, XS_WRITE, "")],
        "raw": [xs(GUEST, 0, raw=wire(XS_READ, 1, 0, b"data\0")[:7]),
                xs(GUEST, 0, raw=wire(XS_READ, 1, 0, b"data\0")[7:]
                   + wire(XS_DIRECTORY, 2, 0, b"/local\0")),
                xs(PRIV, 0, raw=wire(XS_WRITE, 3, 0, b"/big\0" + b"x" * 4000))],
        "oversize": [xs(GUEST, 0, raw=struct.pack("<IIII", XS_READ, 1, 0, 5000))],
        "backlog": [xs(GUEST, XS_WATCH, "data", "t", noread=True)]
                   + [xs_write(GUEST, "data/%d" % i, "v", ) for i in range(20)]
                   + [xs(GUEST, XS_READ, "data/1", noread=True) for _ in range(20)],
        "hangup": [xs(GUEST, XS_TRANSACTION_START, ""), xs(GUEST, XS_WATCH, "data", "t"),
                   xs(GUEST, XS_READ, "data", close=True), xs(GUEST, XS_READ, "data"),
                   xs(PRIV, XS_WATCH, "/", "w", close=True), xs(PRIV, XS_READ, "/")],
    }
    return [(k, b"".join(v)) for k, v in every.items()]


# ---- be_negotiate -----------------------------------------------------------

K_PROTOCOL, K_PERSISTENT, K_QUEUES, K_ORDER, K_REFN, K_REF, K_EVTCHN, K_STATE = range(8)


def neg_input(keys, max_queues=4, max_order=4, persistent=True, ro=False, twice=False,
              fe_state=3, max_ind=32, granted=(1 << 64) - 1, ports=(1 << 64) - 2):
    flags = persistent | (ro << 1) | (twice << 2) | ((fe_state is None) << 3)
    out = struct.pack("<BBBBHQQ", max_queues - 1, max_order, flags, fe_state or 0,
                      max_ind, granted, ports)
    for sel, idx, val in keys:
        v = val.encode()
        out += struct.pack("<BBB", sel, idx, len(v)) + v
    return out


def q_keys(q, order, ref0, port, multi):
    sel = 0x80 if multi else 0
    keys = [(K_EVTCHN | sel, q << 5, str(port))]
    if order == 0 and not multi:
        keys.append((K_REF, 0, str(ref0)))
    else:
        keys += [(K_REFN | sel, (q << 5) | i, str(ref0 + i)) for i in range(1 << order)]
    return keys


def be_negotiate_seeds():
    seeds = []
    single = q_keys(0, 0, 7, 3, False)
    seeds.append(("single", neg_input(single)))
    seeds.append(("single-connected", neg_input(single, fe_state=4, twice=True)))
    for proto in ("x86_64-abi", "x86_32-abi", "arm-abi", "sparc"):
        seeds.append(("proto-" + proto, neg_input([(K_PROTOCOL, 0, proto)] + single)))
    seeds.append(("persistent", neg_input([(K_PERSISTENT, 0, "1")] + single)))
    seeds.append(("ro", neg_input(single, ro=True)))
    order2 = [(K_ORDER, 0, "2")] + q_keys(0, 2, 10, 5, False)
    seeds.append(("order2", neg_input(order2)))
    seeds.append(("order2-too-big", neg_input(order2, max_order=1)))
    multi = [(K_QUEUES, 0, "4"), (K_ORDER, 0, "1")]
    for q in range(4):
        multi += q_keys(q, 1, 2 * q + 1, q + 1, True)
    seeds.append(("multi4", neg_input(multi)))
    seeds.append(("multi4-too-many", neg_input(multi, max_queues=2)))
    seeds.append(("multi4-missing", neg_input(multi[:-1])))
    seeds.append(("ungranted", neg_input(single, granted=0)))
    seeds.append(("unbound-port", neg_input(single, ports=0)))
    seeds.append(("bad-numbers", neg_input([(K_REF, 0, "-1"), (K_EVTCHN, 0, "0x10"),
                                            (K_QUEUES, 0, "")])))
    for st in (0, 1, 2, 5, 6, 7):
        seeds.append((f"state{st}", neg_input(single, fe_state=st)))
    seeds.append(("no-state", neg_input(single, fe_state=None)))
    return seeds


# ---- journal ------------------------------------------------------------
# struct fz_hdr of fuzz_journal.c, then the file from req_cons on: req_cons,
# rsp_prod, then nr_ents entries of 144 bytes (state, idx, rsp_idx, pad,
# then backend/ring.h struct ring_req: 128 bytes).
JE_FREE, JE_INFLIGHT, JE_ANSWERING = 0, 1, 2


def jrn_entry(state, idx, rsp_idx=0, op=READ, nsegs=1, rid=1, sector=0):
    copied = min(nsegs, 11) if op in (READ, WRITE, BARRIER, FLUSH) else 0
    if op == INDIRECT:
        copied = min((nsegs + 511) // 512, 8)
    req = struct.pack("<BBBxHHQQQI", op, READ if op == INDIRECT else 0, 0, nsegs, 0,
                      rid, sector, 0, copied)
    req += seg(8) * min(copied, 11)
    req = req.ljust(128, b"\0")
    return struct.pack("<IIII", state, idx, rsp_idx, 0) + req


def jrn_input(rsp_prod, req_cons, hdr_rsp, entries, order=0, raw=None, stale=False,
              short=False, long=False):
    cfg = order | (8 if raw is not None else 0) | (16 if stale else 0) | \
        (32 if short else 0) | (64 if long else 0)
    body = struct.pack("<II", req_cons, hdr_rsp)
    ents = {slot: e for slot, e in entries}
    last = max(ents) + 1 if ents else 0
    for i in range(last):
        body += ents.get(i, b"\0" * 144)
    return struct.pack("<BI", cfg, rsp_prod) + (raw or b"\0" * 24) + body


def journal_seeds():
    r = 1000
    w = 0xfffffff0          # index wrap
    return [
        ("empty", jrn_input(r, r, r, [])),
        ("empty-order5", jrn_input(r, r, r, [], order=5)),
        ("inflight1", jrn_input(r, r + 1, r, [(0, jrn_entry(JE_INFLIGHT, r))])),
        ("inflight3", jrn_input(r, r + 3, r, [(2, jrn_entry(JE_INFLIGHT, r + 1, op=WRITE)),
                                              (5, jrn_entry(JE_INFLIGHT, r)),
                                              (7, jrn_entry(JE_INFLIGHT, r + 2, op=FLUSH, nsegs=0))])),
        ("cons-not-moved", jrn_input(r, r, r, [(0, jrn_entry(JE_INFLIGHT, r))])),
        ("answering-published", jrn_input(r + 1, r + 1, r, [(0, jrn_entry(JE_ANSWERING, r, rsp_idx=r))])),
        ("answering-unpublished", jrn_input(r, r + 1, r, [(0, jrn_entry(JE_ANSWERING, r, rsp_idx=r))])),
        ("indirect", jrn_input(r, r + 1, r, [(1, jrn_entry(JE_INFLIGHT, r, op=INDIRECT, nsegs=600))])),
        ("discard", jrn_input(r, r + 1, r, [(0, jrn_entry(JE_INFLIGHT, r, op=DISCARD, nsegs=0))])),
        ("wrap", jrn_input(w, w + 2, w, [(0, jrn_entry(JE_INFLIGHT, w + 1)),
                                         (1, jrn_entry(JE_INFLIGHT, w))])),
        ("bad-copied", jrn_input(r, r + 1, r, [(0, jrn_entry(JE_INFLIGHT, r)[:48] + b"\x05" +
                                                 jrn_entry(JE_INFLIGHT, r)[49:])])),
        ("duplicate", jrn_input(r, r + 2, r, [(0, jrn_entry(JE_INFLIGHT, r)),
                                              (1, jrn_entry(JE_INFLIGHT, r))])),
        ("stale", jrn_input(r, r, r, [], stale=True)),
        ("short", jrn_input(r, r, r, [], short=True)),
        ("long", jrn_input(r, r, r, [], long=True)),
        ("bad-magic", jrn_input(r, r, r, [], raw=b"\1" * 24)),
    ]


# ---- disk_spec ----------------------------------------------------------
# The specs of one disk, NUL-separated: the examples of
# xl-disk-configuration(5) that tests/unit/test_diskspec.c checks, the
# forms xbd adds (NBD/RBD URIs, qcow2), and what xbd refuses.

def disk_spec_seeds():
    groups = [
        ["/dev/vg/guest-volume,,hda"], ["/dev/vg/guest-volume,raw,hda,rw"],
        ["format=raw, vdev=hda, access=rw, target=/dev/vg/guest-volume"],
        ["raw:/dev/vg/guest-volume,hda,w"], ["/root/image.iso,,hdc,cdrom"],
        ["/root/image.iso,raw,hdc,devtype=cdrom"], ["raw:/root/image.iso,hdc:cdrom,ro"],
        ["vg/guest-volume,,xvdb"], ["phy:/dev/sdz,xvdb,w"], ["tap:aio:/img,xvdc,r"],
        ["file:/img,xvdq,w"], ["vdev=xvdb, target=/srv/a,b c"],
        ["/img,raw,xvdb,rw,no-discard,direct-io-safe,backendtype=phy"],
        ["backend=driverdom,/img,,d1p2"], ["discard,/img,,xvdb,r"],
        ["script=block,/img,,xvdb"], ["vdev=xvde", "access=ro", "target=/img"],
        ["/img", "raw", "xvdb", "w"], ["format=qcow2,vdev=xvdb,target=/srv/a.qcow2"],
        ["vdev=xvdb,target=nbd://localhost:10809/export"],
        ["vdev=xvdb,target=nbd+unix:///e?socket=/run/s"], ["vdev=xvdb,target=rbd:pool/img"],
        ["format=qcow2,vdev=xvdb,target=nbd://h/e"], ["format=vhd,vdev=xvdb,target=/img"],
        ["backendtype=qdisk,vdev=xvdb,target=/img"], ["specification=virtio,vdev=xvdb,target=/img"],
        ["colo,colo-host=h,colo-port=1,colo-export=e,active-disk=a,hidden-disk=b,vdev=xvdb,target=/img"],
        ["script=/bin/sh,vdev=xvdb,target=/img"], ["vdev=xvdzzzzzz,target=/img"],
        ["vdev=sda17,target=/img"], [",,hdc,cdrom"], ["vdev=xvdb"], ["target=/img"],
        ["vdev=xvdb,trusted,target=/img"], ["vdev=xvdb,untrusted,removable,target=/img"],
        ["vdev=xvdb,target=\"/a b\""], ["vdev=xvdb,target=" + "a" * 5000],
    ]
    return [(f"{i:02d}", b"\0".join(x.encode() for x in g)) for i, g in enumerate(groups)]


# ---- local_platform -----------------------------------------------------
# struct fz_op of fuzz_local_platform.c: op, a, b (u16), val (u64).
(LP_GNT_WRITE, LP_GNT_VALID, LP_ACTIVE, LP_MAP, LP_UNMAP, LP_COPY, LP_EV_BIND,
 LP_EV_FLAGS, LP_EV_OFFER, LP_BIND, LP_EV_OP, LP_UNBIND) = range(12)


def lp(op, a=0, b=0, val=0):
    return struct.pack("<BBHQ", op, a, b, val)


def lp_grant(ref, frame, ro=False):
    return lp(LP_GNT_VALID, 1 if ro else 0, ref, frame)


def lp_map(refs, rw=False, raw_ref=None):
    a = (len(refs) - 1) | (4 if rw else 0) | (0x80 if raw_ref is not None else 0)
    val = int.from_bytes(bytes(refs).ljust(8, b"\0"), "little")
    return lp(LP_MAP, a, raw_ref or 0, val)


def lp_copy(ref, off, length, to_grant=False, both=False):
    a = 3 if both else (2 if to_grant else 1)
    return lp(LP_COPY, a, ref, off | length << 16)


def local_platform_seeds():
    return [
        ("map-ro", lp_grant(8, 3) + lp_map([8]) + lp(LP_UNMAP)),
        ("map-rw", lp_grant(8, 3) + lp_map([8], rw=True) + lp(LP_UNMAP)),
        ("map-run", lp_grant(8, 3) + lp_grant(9, 4) + lp_grant(10, 5) +
         lp_map([8, 9, 10], rw=True)),
        ("map-scattered", lp_grant(8, 7) + lp_grant(9, 2) + lp_grant(10, 11) +
         lp_grant(11, 12) + lp_map([8, 9, 10, 11])),
        ("map-twice", lp_grant(8, 3) + lp_map([8]) + lp_map([8], rw=True) +
         lp(LP_UNMAP) + lp(LP_UNMAP)),
        ("map-ro-as-rw", lp_grant(8, 3, ro=True) + lp_map([8], rw=True)),
        ("map-bad-frame", lp_grant(8, 17) + lp_map([8])),
        ("map-bad-ref", lp_map([0], raw_ref=40000)),
        ("map-other-dom", lp(LP_GNT_VALID, 2 | (5 << 2), 8, 3) + lp_map([8])),
        ("map-junk", lp(LP_GNT_WRITE, 0, 8, 0xffffffffffffffff) + lp_map([8])),
        ("map-scribbled-pins", lp_grant(8, 3) + lp(LP_ACTIVE, 0, 8, 0xffffffff) +
         lp_map([8], rw=True) + lp(LP_UNMAP)),
        ("regrant-mapped", lp_grant(8, 3) + lp_map([8]) + lp_grant(8, 9) + lp(LP_UNMAP)),
        ("copy-from", lp_grant(8, 3) + lp_copy(8, 100, 200)),
        ("copy-to", lp_grant(9, 3) + lp_copy(8, 0, 4096, to_grant=True)),
        ("copy-both", lp_grant(8, 3) + lp_grant(9, 4) + lp_copy(8, 0, 512, both=True)),
        ("copy-over-end", lp_grant(8, 3) + lp_copy(8, 4000, 200)),
        ("evtchn", lp(LP_EV_OFFER, 0, 3) + lp(LP_BIND, 0, 3) + lp(LP_EV_OP, 0) +
         lp(LP_EV_OP, 2) + lp(LP_EV_OP, 1) + lp(LP_EV_OP, 0) + lp(LP_UNBIND)),
        ("evtchn-no-offer", lp(LP_BIND, 0, 3)),
        ("evtchn-peer-closes", lp(LP_EV_OFFER, 0, 5) + lp(LP_BIND, 0, 5) +
         lp(LP_EV_BIND, 0, 5, 0) + lp(LP_EV_OP, 0) + lp(LP_UNBIND)),
        ("evtchn-flags", lp(LP_EV_OFFER, 0, 7) + lp(LP_BIND, 0, 7) +
         lp(LP_EV_FLAGS, 0, 7, 1 << 32 | 2) + lp(LP_EV_OP, 0) + lp(LP_EV_OP, 2)),
        ("evtchn-owner-junk", lp(LP_EV_OFFER, 0, 9) + lp(LP_BIND, 0, 9) +
         lp(LP_EV_FLAGS, 0, 9, 1025 << 32) + lp(LP_EV_OP, 0)),
        ("evtchn-other-dom", lp(LP_EV_BIND, 0, 3, 2 | 4 << 8) + lp(LP_BIND, 0, 3)),
    ]


TARGETS = {"local_platform": local_platform_seeds, "disk_spec": disk_spec_seeds, "be_negotiate": be_negotiate_seeds, "xenstored": xenstored_seeds, "be_request": be_request_seeds,
           "fe_response": fe_response_seeds, "journal": journal_seeds}

if __name__ == "__main__":
    for t in sys.argv[1:] or sorted(TARGETS):
        write_corpus(t, TARGETS[t]())
