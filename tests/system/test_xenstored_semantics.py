# SPDX-License-Identifier: MIT
"""Watches, transactions, permissions and domain operations with
cxenstored 4.17's semantics (reference §6.2 items 9-14)."""
import os

from xenstored_fixtures import XsConn, xenstored, xs  # noqa: F401


# ---- watches ----

def test_watch_initial_event_and_triggers(xenstored):
    w, c = xenstored.conn(), xenstored.conn()
    w.call("WATCH", "/w", "tok en!")
    assert w.event() == (b"/w", b"tok en!")
    c.write("/w/a", "1")
    assert w.event() == (b"/w/a", b"tok en!")
    c.call("MKDIR", "/w/d")
    assert w.event() == (b"/w/d", b"tok en!")
    c.call("MKDIR", "/w/d")                  # existing: nothing fires
    c.call("SET_PERMS", "/w/a", "n0", "r3")
    assert w.event() == (b"/w/a", b"tok en!")
    c.write("/other", "x")
    w.no_event()


def test_watch_rm_events(xenstored):
    w, c = xenstored.conn(), xenstored.conn()
    c.write("/r/a/b/c", "1")
    w.call("WATCH", "/r", "top")
    w.call("WATCH", "/r/a/b", "exact")
    w.call("WATCH", "/r/a/b/c/d", "below")
    assert {w.event(), w.event(), w.event()} == {
        (b"/r", b"top"), (b"/r/a/b", b"exact"), (b"/r/a/b/c/d", b"below")}
    c.call("RM", "/r/a")
    evs = {w.event(), w.event()}
    # root of the removed subtree to watchers above; descendants exactly
    assert evs == {(b"/r/a", b"top"), (b"/r/a/b", b"exact")}
    w.no_event()


def test_watch_relative_path(xs):
    xs.call("WATCH", "relw", "t")
    assert xs.event() == (b"relw", b"t")
    xs.write("/local/domain/0/relw/x", "1")
    assert xs.event() == (b"relw/x", b"t")


def test_watch_duplicate_and_unwatch(xs):
    xs.call("WATCH", "/u", "t")
    xs.event()
    assert xs.error("WATCH", "/u", "t") == "EEXIST"
    xs.call("WATCH", "/u", "t2")
    xs.event()
    xs.call("UNWATCH", "/u", "t")
    assert xs.error("UNWATCH", "/u", "t") == "ENOENT"
    assert xs.error("UNWATCH", "/nope", "t") == "ENOENT"
    xs.write("/u", "1")
    assert xs.event() == (b"/u", b"t2")
    xs.no_event()


def test_watch_special_paths(xs):
    xs.call("WATCH", "@foo", "f")
    assert xs.event() == (b"@foo", b"f")
    xs.call("WATCH", "@introduceDomain", "i")
    assert xs.event() == (b"@introduceDomain", b"i")
    xs.call("WATCH", "@releaseDomain", "r")
    assert xs.event() == (b"@releaseDomain", b"r")
    xs.call("INTRODUCE", "5", "0", "1")
    assert xs.event() == (b"@introduceDomain", b"i")
    xs.call("INTRODUCE", "5", "0", "1")       # re-introduce: silent
    xs.call("RELEASE", "5")
    assert xs.event() == (b"@releaseDomain", b"r")
    xs.no_event()


def test_watch_events_collapse_and_many_watches(xenstored):
    w, c = xenstored.conn(), xenstored.conn()
    for batch in range(0, 2000, 100):
        for i in range(batch, batch + 100):
            w.send(4, f"/many/{i}\0t{i}\0".encode())
        for i in range(batch, batch + 100):
            w.reply()           # OK; the initial events pile up meanwhile
    evs = list(w.events)
    w.events.clear()
    while len(evs) < 2000:
        evs.append(w.event())
    assert sorted(evs) == sorted((f"/many/{i}".encode(), f"t{i}".encode())
                                 for i in range(2000))
    c.write("/many/7", "x")
    assert w.event() == (b"/many/7", b"t7")
    w.call("RESET_WATCHES")
    c.write("/many/8", "x")
    w.no_event()


def queued_events(c, domid=0):
    report = c.call("CONTROL", "quota", str(domid)).decode()
    return sum(int(line.split()[1]) for line in report.splitlines()
               if line.startswith("queued-events"))


def test_identical_pending_event_collapsed(xenstored):
    w, c = xenstored.conn(), xenstored.conn()
    w.call("WATCH", "/col", "t")
    w.event()
    # w does not read: fill its socket until events queue in the daemon
    i = 0
    while queued_events(c) == 0:
        c.write(f"/col/{i:04d}" + "f" * 2000, "")
        i += 1
    for _ in range(3):
        c.write("/col/target", "x")
    events = [w.event() for _ in range(i + 1)]
    w.no_event()
    assert events.count((b"/col/target", b"t")) == 1


def test_no_events_from_aborted_or_failed_transactions(xenstored):
    w, c = xenstored.conn(), xenstored.conn()
    c.write("/tx", "0")
    w.call("WATCH", "/tx", "t")
    w.event()
    tx = c.start()
    c.write("/tx/a", "1", tx=tx)
    w.no_event()
    c.end(tx, commit=False)
    w.no_event()
    tx = c.start()
    c.read("/tx", tx=tx)
    c.write("/tx/b", "1", tx=tx)
    c.write("/tx", "ext")                   # conflict
    assert w.event() == (b"/tx", b"t")
    assert c.error("TRANSACTION_END", "T", tx=tx) == "EAGAIN"
    w.no_event()
    tx = c.start()
    c.write("/tx/c", "1", tx=tx)
    c.end(tx)
    assert w.event() == (b"/tx/c", b"t")


# ---- transactions ----

def test_transaction_ids_and_isolation(xenstored):
    a, b = xenstored.conn(), xenstored.conn()
    t1, t2 = a.start(), a.start()
    assert 0 not in (t1, t2) and t1 != t2
    assert b.error("READ", "/", tx=t1) == "ENOENT"   # foreign id
    a.write("/iso", "in", tx=t1)
    assert a.error("READ", "/iso") == "ENOENT"
    assert b.error("READ", "/iso") == "ENOENT"
    assert a.read("/iso", tx=t1) == b"in"
    a.end(t1)
    assert b.read("/iso") == b"in"
    a.end(t2, commit=False)


def test_conflict_read_then_external_write(xenstored):
    a, b = xenstored.conn(), xenstored.conn()
    a.write("/c", "1")
    tx = a.start()
    a.read("/c", tx=tx)
    b.write("/c", "2")
    a.write("/c", "3", tx=tx)
    assert a.error("TRANSACTION_END", "T", tx=tx) == "EAGAIN"
    assert a.read("/c") == b"2"
    assert a.error("TRANSACTION_END", "T", tx=tx) == "ENOENT"


def test_conflict_read_enoent_then_created(xenstored):
    a, b = xenstored.conn(), xenstored.conn()
    tx = a.start()
    assert a.error("READ", "/late", tx=tx) == "ENOENT"
    b.write("/late", "x")
    assert a.error("TRANSACTION_END", "T", tx=tx) == "EAGAIN"


def test_conflict_directory_then_child_added(xenstored):
    a, b = xenstored.conn(), xenstored.conn()
    a.write("/dir/x", "")
    tx = a.start()
    assert a.ls("/dir", tx=tx) == ["x"]
    b.write("/dir/y", "")
    assert a.error("TRANSACTION_END", "T", tx=tx) == "EAGAIN"


def test_unrelated_nodes_do_not_conflict(xenstored):
    a, b = xenstored.conn(), xenstored.conn()
    a.write("/n1", "1")
    a.write("/n2", "1")
    tx = a.start()
    a.read("/n1", tx=tx)
    a.write("/n1", "2", tx=tx)
    b.write("/n2", "2")
    a.end(tx)
    assert b.read("/n1") == b"2"


def test_two_transactions_delete_same_nodes(xenstored):
    a, b = xenstored.conn(), xenstored.conn()
    a.write("/del/x/y", "1")
    t1, t2 = a.start(), b.start()
    a.call("RM", "/del", tx=t1)
    b.call("RM", "/del", tx=t2)
    a.end(t1)
    assert b.error("TRANSACTION_END", "T", tx=t2) == "EAGAIN"
    assert a.error("READ", "/del") == "ENOENT"
    assert a.call("CONTROL", "check") == b"OK\0"


def test_create_and_delete_in_one_transaction(xenstored):
    a = xenstored.conn()
    tx = a.start()
    a.write("/cd/x", "1", tx=tx)
    a.call("RM", "/cd/x", tx=tx)
    a.end(tx)
    assert a.ls("/cd") == []
    assert a.call("CONTROL", "check") == b"OK\0"


def test_reset_watches_inside_transaction(xs):
    tx = xs.start()
    xs.write("/rw", "1", tx=tx)
    xs.call("WATCH", "/rw", "t")
    xs.event()
    xs.call("RESET_WATCHES", tx=tx)
    assert xs.error("TRANSACTION_END", "T", tx=tx) == "ENOENT"
    assert xs.error("READ", "/rw") == "ENOENT"
    xs.write("/rw", "2")
    xs.no_event()


# ---- permissions (domain 5 on its own socket) ----

def test_default_perms_and_inheritance(xs):
    xs.write("/perm/a/b", "1")
    assert xs.call("GET_PERMS", "/perm") == b"n0\0"
    xs.call("SET_PERMS", "/perm/a", "n0", "r5")
    xs.write("/perm/a/c", "")
    assert xs.call("GET_PERMS", "/perm/a/c") == b"n0\0r5\0"


def test_unprivileged_domain(xenstored):
    xenstored.introduce(5)
    assert os.path.exists(xenstored.dom_sock(5))
    d0, d5 = xenstored.conn(), xenstored.conn(5)
    d0.write("/local/domain/5/x", "1")
    d0.call("SET_PERMS", "/local/domain/5", "n0", "b5")
    d0.write("/secret/s", "s")
    d0.write("/public", "p")
    d0.call("SET_PERMS", "/public", "r0")
    # existence hiding: EACCES where the parent is unreadable
    assert d5.error("READ", "/secret/s") == "EACCES"
    assert d5.error("READ", "/secret/nope") == "EACCES"
    assert d5.error("READ", "/local/domain/5/nope") == "ENOENT"
    assert d5.read("/public") == b"p"
    assert d5.error("WRITE", "/public", "x") == "EACCES"
    # relative paths are the domain's home; the domain owns what it creates
    d5.write("mine", "m")
    assert d0.read("/local/domain/5/mine") == b"m"
    assert d5.call("GET_PERMS", "mine") == b"n5\0b5\0"
    # owner may change perms but not give the node away
    d5.call("SET_PERMS", "mine", "n5", "r0")
    assert d5.error("SET_PERMS", "mine", "n6") == "EPERM"
    assert d5.error("SET_PERMS", "/public", "r5") == "EACCES"
    # privileged-only operations
    for op, args in (("INTRODUCE", ("6", "0", "1")), ("RELEASE", ("5",)),
                     ("IS_DOMAIN_INTRODUCED", ("0",)), ("RESUME", ("5",)),
                     ("SET_TARGET", ("5", "6")), ("CONTROL", ("help",))):
        assert d5.error(op, *args) == "EACCES"
    assert d5.call("GET_DOMAIN_PATH", "5") == b"/local/domain/5\0"
    assert d0.call("CONTROL", "check") == b"OK\0"
    # the real tools, as domain 5, through its socket
    env = xenstored.dom_env(5)
    xenstored.tool("xenstore-write", "tool-node", "t", env=env)
    assert xenstored.tool("xenstore-read", "tool-node", env=env).stdout == "t\n"
    assert d0.read("/local/domain/5/tool-node") == b"t"
    r = xenstored.tool("xenstore-read", "/secret/s", env=env, check=False)
    assert r.returncode == 1


def test_watch_events_filtered_by_read_permission(xenstored):
    xenstored.introduce(5)
    d0, d5 = xenstored.conn(), xenstored.conn(5)
    d0.write("/f/open", "")
    d0.call("SET_PERMS", "/f", "r0")
    d0.call("SET_PERMS", "/f/open", "r0")
    d0.write("/f/closed/x", "")
    d0.call("SET_PERMS", "/f/closed", "n0")
    d0.call("SET_PERMS", "/f/closed/x", "n0")
    d5.call("WATCH", "/f", "t")
    d5.event()
    d0.write("/f/closed/x", "1")     # neither node nor parent readable
    d5.no_event()
    d0.write("/f/open", "1")
    assert d5.event() == (b"/f/open", b"t")
    d0.write("/f/closed", "1")       # parent /f readable
    assert d5.event() == (b"/f/closed", b"t")
    # special events need read access to the special node
    d5.call("WATCH", "@introduceDomain", "i")
    assert d5.event() == (b"@introduceDomain", b"i")
    xenstored.introduce(6)
    d5.no_event()
    d0.call("SET_PERMS", "@introduceDomain", "n0", "r5")
    xenstored.introduce(7)
    assert d5.event() == (b"@introduceDomain", b"i")


def test_release_closes_domain_and_cleans_up(xenstored):
    xenstored.introduce(5)
    d0, d5 = xenstored.conn(), xenstored.conn(5)
    d0.write("/local/domain/5", "")
    d0.call("SET_PERMS", "/local/domain/5", "n5")
    d5.write("data", "1")
    d0.write("/grant", "")
    d0.call("SET_PERMS", "/grant", "n0", "r5", "r6")
    d5.call("WATCH", "/grant", "t")
    d5.event()
    tx = d5.start()
    d5.write("data", "2", tx=tx)
    d0.call("WATCH", "@releaseDomain", "r")
    d0.event()
    d0.call("RELEASE", "5")
    assert d0.event() == (b"@releaseDomain", b"r")
    assert d5.closed()
    assert not os.path.exists(xenstored.dom_sock(5))
    assert os.path.isdir(os.path.join(xenstored.rundir, "dom5"))
    assert d0.error("READ", "/local/domain/5/data") == "ENOENT"
    assert d0.call("GET_PERMS", "/grant") == b"n0\0r6\0"
    assert d0.call("IS_DOMAIN_INTRODUCED", "5") == b"F\0"
    assert d0.call("CONTROL", "check") == b"OK\0"
    # a new domain 5 starts fresh
    xenstored.introduce(5)
    d5 = xenstored.conn(5)
    assert d5.error("READ", "/grant") == "EACCES"


def test_set_target(xenstored):
    xenstored.introduce(5)
    xenstored.introduce(6)
    d0, d6 = xenstored.conn(), xenstored.conn(6)
    d0.write("/tg", "")
    d0.call("SET_PERMS", "/tg", "n5")
    assert d6.error("READ", "/tg") == "EACCES"
    d0.call("SET_TARGET", "6", "5")      # 6 is 5's device model
    assert d6.read("/tg") == b""
    d6.write("/tg", "dm")


def test_control(xs):
    assert b"quota" in xs.call("CONTROL", "help")
    assert xs.error("CONTROL", "nonsense") == "EINVAL"
    assert b"nodes" in xs.call("CONTROL", "quota")
    xs.call("CONTROL", "quota", "set", "nodes", "50")
    assert b"nodes                50" in xs.call("CONTROL", "quota")
    assert b"domain 0" in xs.call("CONTROL", "quota", "0")
    xs.call("CONTROL", "log", "off")
    assert xs.call("CONTROL", "check") == b"OK\0"
