# SPDX-License-Identifier: MIT
"""Quotas for unprivileged domains (reference §1.10, §6.2 item 15), with
small limits from the command line."""
import time

from xenstored_fixtures import xenstored  # noqa: F401

import pytest

from xenstored_fixtures import HDR, Xenstored

ARGS = ["-E", "20", "-S", "256", "-W", "5", "-t", "2", "-A", "3",
        "-Q", "transaction-nodes=10", "-Q", "outstanding=4",
        "-Q", "watch-events=8", "-Q", "watch-event-timeout=2",
        "-Q", "connections=3"]


@pytest.fixture
def qxs(daemons, rundir):
    xd = Xenstored(daemons, rundir, args=ARGS)
    xd.introduce(5)
    d0 = xd.conn()
    d0.write("/local/domain/5", "")
    d0.call("SET_PERMS", "/local/domain/5", "n5")   # owned by 5: 1 node
    return xd


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def usage(xd, name, domid=5):
    for line in xd.conn().call("CONTROL", "quota", str(domid)).decode().splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    raise KeyError(name)


def test_quota_nodes(qxs):
    d5 = qxs.conn(5)
    for i in range(19):
        d5.write(f"n{i}", "")
    assert usage(qxs, "nodes") == 20
    assert d5.error("WRITE", "n19", "") == "ENOSPC"
    assert d5.error("WRITE", "deep/a/b", "") == "ENOSPC"
    d5.call("RM", "n0")
    d5.write("n19", "")
    # privileged callers are not limited
    d0 = qxs.conn()
    for i in range(30):
        d0.write(f"/local/domain/5/p{i}", "")
    assert d0.call("CONTROL", "check") == b"OK\0"


def test_quota_nodes_rechecked_at_commit(qxs):
    d5a, d5b = qxs.conn(5), qxs.conn(5)
    for i in range(15):
        d5a.write(f"n{i}", "")
    tx = d5b.start()
    for i in range(4):
        d5b.write(f"t{i}", "", tx=tx)
    for i in range(15, 19):
        d5a.write(f"n{i}", "")
    assert d5b.error("TRANSACTION_END", "T", tx=tx) in ("ENOSPC", "EAGAIN")
    assert usage(qxs, "nodes") == 20
    assert qxs.conn().call("CONTROL", "check") == b"OK\0"


def test_quota_node_size(qxs):
    d5 = qxs.conn(5)
    d5.write("s", "x" * (256 - 24 - 8 - 1))
    assert d5.error("WRITE", "s", "x" * (256 - 24 - 8)) == "ENOSPC"
    assert d5.read("s") == b"x" * 223
    qxs.conn().write("/local/domain/5/s", "y" * 1000)   # dom0: no limit


def test_quota_watches_e2big(qxs):
    d5 = qxs.conn(5)
    for i in range(6):       # cxenstored's ">" check: quota + 1 succeed
        d5.call("WATCH", f"w{i}", "t")
    assert d5.error("WATCH", "w6", "t") == "E2BIG"
    d5.call("RESET_WATCHES")
    d5.call("WATCH", "w6", "t")


def test_quota_transactions(qxs):
    d5, other = qxs.conn(5), qxs.conn(5)
    for _ in range(3):
        d5.start()
    assert d5.error("TRANSACTION_START", "") == "ENOSPC"
    # a second connection of the same domain buys no more
    assert other.error("TRANSACTION_START", "") == "ENOSPC"
    qxs.conn().start()                          # dom0 is not limited


def test_quota_perms(qxs):
    d5 = qxs.conn(5)
    d5.write("p", "")
    d5.call("SET_PERMS", "p", "n5", "r1", "r2")
    assert d5.error("SET_PERMS", "p", "n5", "r1", "r2", "r3") == "ENOSPC"


def test_quota_transaction_nodes(qxs):
    d5 = qxs.conn(5)
    tx = d5.start()
    for i in range(8):
        d5.write(f"tn{i}", "", tx=tx)
    assert d5.error("WRITE", "tn8/a/b", "", tx=tx) == "ENOSPC"
    # the transaction is failed now
    assert d5.error("TRANSACTION_END", "T", tx=tx) == "ENOMEM"
    assert d5.error("READ", "tn0") == "ENOENT"


def test_quota_outstanding_stops_reading(qxs):
    d0, d5 = qxs.conn(), qxs.conn(5)
    d0.write("/local/domain/5/big", "b" * 4000)
    d5.send_raw(b"".join(HDR.pack(2, i, 0, 4) + b"big\0" for i in range(200)))
    wait_for(lambda: usage(qxs, "queued-replies") == 4)
    time.sleep(0.2)
    assert usage(qxs, "queued-replies") == 4     # and no more
    d0.write("/alive", "1")             # others still served
    for i in range(200):
        assert d5.recv_msg() == (2, i, 0, b"b" * 4000)


def test_quota_pending_events_and_timeout(qxs):
    d0, d5 = qxs.conn(), qxs.conn(5)
    d5.call("WATCH", "ev", "t")
    d5.event()
    i = 0
    while usage(qxs, "queued-events") == 0:
        d0.write(f"/local/domain/5/ev/{i:03d}" + "f" * 1500, "")
        i += 1
    for j in range(20):
        d0.write(f"/local/domain/5/ev/more{j}", "")
    assert usage(qxs, "queued-events") == 8
    # unread events expire after 2 s (checked once a second)
    wait_for(lambda: usage(qxs, "queued-events") == 0, timeout=10)


def test_quota_names_documented(xenstored):
    import os
    import re
    report = xenstored.conn().call("CONTROL", "quota").decode().rstrip("\0")
    names = sorted(line.split()[0] for line in report.splitlines())
    abi = os.path.join(os.path.dirname(__file__), "..", "..", "Documentation",
                       "ABI", "xenstored-quotas")
    documented = sorted(re.findall(r'^What:\s+xbd-xenstored quota "([^"]+)"',
                                   open(abi).read(), re.M))
    assert names == documented
    r = xenstored.tool("xenstore-control", "quota", "set", "no-such", "1",
                       check=False)
    assert r.returncode == 3


def test_quota_connections(qxs):
    keep = [qxs.conn(5) for _ in range(3)]
    extra = qxs.conn(5)
    assert extra.closed()
    keep[0].close()
    wait_for(lambda: usage(qxs, "connections") == 2)
    qxs.conn(5).write("ok", "1")
    assert "more than 3 connections" in qxs.daemon.log_text()


def test_quota_memory(daemons, rundir):
    xd = Xenstored(daemons, rundir, args=["-Q", "memory=3000"])
    xd.introduce(5)
    d0 = xd.conn()
    d0.write("/local/domain/5", "")
    d0.call("SET_PERMS", "/local/domain/5", "n5")
    d5 = xd.conn(5)
    i = 0
    while True:
        try:
            d5.write(f"m{i}", "v" * 500)
        except Exception as e:            # noqa: BLE001
            assert e.err == "ENOMEM"
            break
        i += 1
    assert 3 <= i <= 5
    used = usage(xd, "memory")
    assert 2500 < used <= 3000
    assert d5.error("WATCH", "w", "t" * 1000) == "ENOMEM"
    d5.call("RM", "m0")
    assert usage(xd, "memory") < used - 500
    d5.call("WATCH", "w", "t" * 100)
    d0.write("/local/domain/5/big", "x" * 3000)   # dom0 is not limited
    assert d0.call("CONTROL", "check") == b"OK\0"
