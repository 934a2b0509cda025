# SPDX-License-Identifier: MIT
"""Framing, malformed payloads, bad paths and reply sizes (reference §6.2
items 1-7), on raw sockets."""
import struct
import time

import pytest

from xenstored_fixtures import HDR, XS, XsConn, xenstored, xs  # noqa: F401


def test_byte_at_a_time(xs):
    xs.write("/b", "v")
    msg = HDR.pack(XS["READ"], 77, 0, 3) + b"/b\0"
    for i in range(len(msg)):
        xs.send_raw(msg[i:i + 1])
        time.sleep(0.002)
    assert xs.recv_msg() == (XS["READ"], 77, 0, b"v")


def test_pipelined_replies_in_order_echo_ids(xs):
    xs.write("/p", "x")
    data = b""
    for i in range(50):
        data += HDR.pack(XS["READ"], 1000 + i, 0, 3) + b"/p\0"
    data += HDR.pack(XS["READ"], 0xdeadbeef, 0, 3) + b"/q\0"
    xs.send_raw(data)
    for i in range(50):
        assert xs.recv_msg() == (XS["READ"], 1000 + i, 0, b"x")
    assert xs.recv_msg() == (XS["ERROR"], 0xdeadbeef, 0, b"ENOENT\0")


def test_tx_id_echoed(xs):
    tx = xs.start()
    xs.send(XS["WRITE"], b"/t\0v", req_id=5, tx_id=tx)
    assert xs.recv_msg() == (XS["WRITE"], 5, tx, b"OK\0")


def test_len_4096_accepted(xs):
    path = b"/big\0"
    xs.send(XS["WRITE"], path + b"a" * (4096 - len(path)), req_id=9)
    assert xs.recv_msg() == (XS["WRITE"], 9, 0, b"OK\0")
    assert len(xs.read("/big")) == 4096 - len(path)


@pytest.mark.parametrize("length", [4097, 0xffffffff])
def test_oversize_drops_connection_only(xenstored, length):
    bad, good = xenstored.conn(), xenstored.conn()
    good.write("/still", "here")
    bad.send_raw(HDR.pack(XS["READ"], 1, 0, length))
    assert bad.closed()
    assert good.read("/still") == b"here"
    assert xenstored.conn().read("/still") == b"here"


@pytest.mark.parametrize("type_", [20, 23, 24, 25, 26, 1000, 0xffff,
                                   XS["WATCH_EVENT"], XS["ERROR"]])
def test_unknown_types_enosys(xs, type_):
    xs.send(type_, b"x\0", req_id=3)
    assert xs.recv_msg() == (XS["ERROR"], 3, 0, b"ENOSYS\0")
    xs.write("/alive", "1")


@pytest.mark.parametrize("op,payload", [
    ("READ", b"/a"),                    # no NUL
    ("READ", b"/a\0/b\0"),              # two strings
    ("DIRECTORY", b""),
    ("RM", b"/a\0x"),
    ("WATCH", b"/a\0"),                 # one string
    ("WATCH", b"/a\0t\0x\0"),           # three strings
    ("UNWATCH", b"/a\0"),
    ("SET_PERMS", b"/a\0"),             # no perms
    ("SET_PERMS", b"/a\0x1\0"),
    ("SET_PERMS", b"/a\0r\0"),
    ("SET_PERMS", b"/a\0rabc\0"),
    ("DIRECTORY_PART", b"/a\0"),
    ("WRITE", b"/a"),                   # no NUL at all
    ("INTRODUCE", b"5\0"),
    ("INTRODUCE", b"5\0" b"0\0" b"0\0"),  # port 0
    ("CONTROL", b""),
])
def test_malformed_payloads_einval(xs, op, payload):
    xs.write("/a", "1")
    assert xs.error(op, raw=payload) == "EINVAL"


def test_transaction_end_bad_arg(xs):
    tx = xs.start()
    assert xs.error("TRANSACTION_END", "X", tx=tx) == "EINVAL"
    xs.end(tx)      # still alive after EINVAL


@pytest.mark.parametrize("path", [
    "", "a//b", "/a//b", "/a/", "/a b", "/a\x01", "/caf\u00e9", "/a/./b",
    "x" * 2049, "/" + "y" * 2049, "@foo",
])
def test_bad_paths_einval(xs, path):
    assert xs.error("READ", path) == "EINVAL"
    assert xs.error("WRITE", raw=path.encode() + b"\0v") == "EINVAL"


def test_path_length_limits(xs):
    xs.write("x" * 2048, "ok")                     # relative: 2048 after prefix
    assert xs.read("/local/domain/0/" + "x" * 2048) == b"ok"
    xs.write("/" + "y" * 2047, "ok")               # absolute: 2048 in all
    assert xs.error("WRITE", raw=b"/" + b"y" * 2048 + b"\0v") == "EINVAL"


def test_root_read_and_rm(xs):
    assert xs.read("/") == b""
    assert xs.error("RM", "/") == "EINVAL"
    assert xs.ls("/") == ["tool"]


def test_directory_e2big_and_directory_part(xs):
    names = [f"child-{i:04d}-" + "n" * 20 for i in range(300)]
    tx = xs.start()
    for n in names:
        xs.write("/d/" + n, "", tx=tx)
    xs.end(tx)
    assert xs.error("DIRECTORY", "/d") == "E2BIG"
    got, off, gen0 = [], 0, None
    while True:
        body = xs.call("DIRECTORY_PART", "/d", str(off))
        assert len(body) <= 4096
        gen, rest = body.split(b"\0", 1)
        gen0 = gen0 or gen
        assert gen == gen0
        if rest == b"\0" or rest.endswith(b"\0\0"):
            got += [x.decode() for x in rest[:-1].split(b"\0") if x]
            break
        got += [x.decode() for x in rest.split(b"\0") if x]
        off += len(rest)
    assert got == names
    # past the end: just the generation and the terminator
    body = xs.call("DIRECTORY_PART", "/d", "999999")
    assert body == gen0 + b"\0\0"
    # a change between chunks changes the generation
    xs.write("/d/new", "")
    assert xs.call("DIRECTORY_PART", "/d", "0").split(b"\0")[0] != gen0


def test_directory_part_empty_node(xs):
    xs.write("/e", "")
    body = xs.call("DIRECTORY_PART", "/e", "0")
    gen, rest = body.split(b"\0", 1)
    assert gen.isdigit() and rest == b"\0"


def test_no_reply_above_4096(xs):
    xs.write("/v", "z" * 4090)
    assert len(xs.read("/v")) == 4090
    perms = [f"r{i}" for i in range(1, 800)]
    xs.call("SET_PERMS", "/v", "n0", *perms)
    body = xs.call("GET_PERMS", "/v")
    assert len(body) <= 4096
    assert body.split(b"\0")[:-1] == [b"n0"] + [p.encode() for p in perms]


def test_relative_paths_resolve_to_domain_0(xs):
    xs.write("rel/a", "1")
    assert xs.read("/local/domain/0/rel/a") == b"1"
    assert xs.ls("rel") == ["a"]


def test_get_domain_path_and_introduced(xs):
    assert xs.call("GET_DOMAIN_PATH", "7") == b"/local/domain/7\0"
    assert xs.call("IS_DOMAIN_INTRODUCED", "0") == b"T\0"
    assert xs.call("IS_DOMAIN_INTRODUCED", "9") == b"F\0"
    assert xs.error("RELEASE", "0") == "EINVAL"
    assert xs.error("RELEASE", "9") == "ENOENT"
    assert xs.error("SET_TARGET", "9", "8") == "ENOENT"
    assert xs.error("RESUME", "9") == "ENOENT"


def test_unknown_tx_id(xs):
    assert xs.error("READ", "/", tx=12345) == "ENOENT"
    assert xs.error("TRANSACTION_END", "T") == "ENOENT"
    tx = xs.start()
    assert xs.error("TRANSACTION_START", "", tx=tx) == "EBUSY"
    assert xs.error("TRANSACTION_START", "", tx=tx + 100) == "ENOENT"
    xs.end(tx, commit=False)
    assert xs.error("READ", "/", tx=tx) == "ENOENT"


def test_random_requests_one_reply_each(xenstored):
    """Seeded random requests from a privileged and an unprivileged
    connection: every request gets exactly one reply with its ids, the
    daemon stays consistent, and the sanitizers stay quiet."""
    import random
    rnd = random.Random(1234)
    xenstored.introduce(5)
    conns = [xenstored.conn(), xenstored.conn(5)]
    words = [b"/", b"/a", b"/a/b", b"/a/b/c", b"rel", b"rel/x", b"@releaseDomain",
             b"@introduceDomain", b"/local/domain/5/q", b"n0", b"r5", b"b0x7",
             b"w", b"T", b"F", b"7", b"8", b"0", b"-1", b"99999", b"", b"x" * 300,
             b"/a//b", b"\xff\xfe", b"check", b"help", b"quota", b"set", b"nodes"]
    for rounds in range(40):
        for c in conns:
            sent = []
            for _ in range(25):
                type_ = rnd.choice(list(range(0, 24)) + [0xffff])
                if type_ in (8, 9, 18, 19):      # keep domain 5 alive
                    payload = b"\0".join([rnd.choice([b"7", b"8", b"9"])] +
                                         [b"1"] * rnd.randint(0, 2)) + b"\0"
                else:
                    parts = [rnd.choice(words) for _ in range(rnd.randint(0, 4))]
                    payload = b"\0".join(parts) + (b"\0" if rnd.random() < 0.9 else b"")
                tx = rnd.choice([0, 0, 0, 1, 2, 77])
                sent.append(c.send(type_, payload[:4096], tx_id=tx))
            for req_id in sent:
                type_, rid, _, body = c.reply()
                assert rid == req_id
            c.events.clear()
    for c in conns:
        c.call("RESET_WATCHES")
    assert conns[0].call("CONTROL", "check") == b"OK\0"
    conns[0].write("/alive", "1")
