# SPDX-License-Identifier: MIT
"""Event channels between separate processes: wake-ups, coalescing,
masking, unbind."""
import errno

import pytest

from platform_fixtures import helpers  # noqa: F401  (fixture)

MiB = 1 << 20
QUIET_MS = 150    # how long "no wake-up" is watched for


@pytest.fixture
def channel(helpers):
    """(guest dom1, guest port, backend dom0, backend port), connected."""
    guest = helpers.start("guest")
    guest.ok(f"create 1 guest {MiB}")
    guest.ok("claim 1")
    guest.ok("evtchn 1")
    gport = int(guest.ok("unbound 0")[0])
    backend = helpers.start("backend")
    backend.ok("evtchn 0")
    bport = int(backend.ok(f"bind 1 {gport}")[0])
    assert gport > 0 and bport > 0
    return guest, gport, backend, bport


def test_notify_wakes_the_peer_fd(channel):
    guest, gport, backend, bport = channel
    assert backend.ok("wait 0") == ["timeout"]
    guest.ok(f"notify {gport}")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(bport)]
    assert backend.err("pending") == -errno.EAGAIN
    backend.ok(f"unmask {bport}")
    # and the other way
    backend.ok(f"notify {bport}")
    assert guest.ok("wait 5000") == ["ready"]
    assert guest.ok("pending") == [str(gport)]


def test_notifies_while_pending_coalesce_into_one_wake(channel):
    guest, gport, backend, bport = channel
    guest.ok(f"notify {gport} 1000")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(bport)]
    assert backend.err("pending") == -errno.EAGAIN
    assert backend.ok("wait 0") == ["timeout"]


def test_masked_port_stays_quiet_until_unmask_rearms(channel):
    guest, gport, backend, bport = channel
    guest.ok(f"notify {gport}")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(bport)]
    # still masked: new notifies are remembered, not delivered
    guest.ok(f"notify {gport} 10")
    assert backend.ok(f"wait {QUIET_MS}") == ["timeout"]
    backend.ok(f"unmask {bport}")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(bport)]
    assert backend.err("pending") == -errno.EAGAIN
    # nothing pending at unmask: unmasked, quiet, next notify wakes again
    backend.ok(f"unmask {bport}")
    assert backend.ok(f"wait {QUIET_MS}") == ["timeout"]
    guest.ok(f"notify {gport}")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(bport)]


def test_unbind_disconnects_and_peer_can_rebind(channel, helpers):
    guest, gport, backend, bport = channel
    backend.ok(f"unbind {bport}")
    assert backend.err(f"notify {bport}") == -errno.EINVAL
    assert backend.err(f"unbind {bport}") == -errno.EINVAL
    guest.ok(f"notify {gport}")          # dropped: the peer is gone
    assert backend.ok(f"wait {QUIET_MS}") == ["timeout"]
    # the guest's end is unbound again, so a new backend can connect
    newport = int(backend.ok(f"bind 1 {gport}")[0])
    guest.ok(f"notify {gport}")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(newport)]


def test_dead_handle_ports_are_released(channel, helpers):
    guest, gport, backend, bport = channel
    backend.kill()
    guest.ok(f"notify {gport}")          # no reader: dropped, no error
    heir = helpers.start("heir")
    heir.ok("evtchn 0")                  # takes the dead handle's slot
    port = int(heir.ok(f"bind 1 {gport}")[0])
    guest.ok(f"notify {gport}")
    assert heir.ok("wait 5000") == ["ready"]
    assert heir.ok("pending") == [str(port)]


def test_bind_errors(channel, helpers):
    guest, gport, backend, bport = channel
    assert backend.err(f"bind 1 {gport}") == -errno.EINVAL      # already bound
    other = helpers.start("other")
    other.ok(f"create 2 other {MiB}")
    other.ok("claim 2")
    other.ok("evtchn 2")
    p2 = int(other.ok("unbound 1")[0])                         # offered to dom1
    assert backend.err(f"bind 2 {p2}") == -errno.EPERM
    assert backend.err("bind 2 4096") == -errno.EINVAL         # port out of range
    assert backend.err("bind 2 0") == -errno.EINVAL
    assert backend.err("bind 2 4000") == -errno.EINVAL         # free port
    assert backend.err("bind 9 1") == -errno.ENOENT            # no such domain
    assert backend.err("unbound 40000") == -errno.EINVAL       # domid out of range
    assert backend.err("notify 4000") == -errno.EINVAL         # not ours
    assert backend.err("unmask 0") == -errno.EINVAL
    assert guest.err(f"unmask {gport + 1}") == -errno.EINVAL   # not bound


def test_garbage_in_the_fifo_is_skipped(channel, rundir):
    """Anyone can write into a handle's FIFO: bogus port numbers (out of
    range, not ours, short writes) are skipped, real events still arrive."""
    import os
    import struct
    guest, gport, backend, bport = channel
    fifo = os.path.join(rundir, "dom0", "evtchn.0")   # the backend's slot
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, struct.pack("<III", 0xffffffff, 4095, 0) + b"xy")
    finally:
        os.close(fd)
    assert backend.ok("wait 1000") == ["ready"]
    assert backend.err("pending") == -errno.EAGAIN
    guest.ok(f"notify {gport}")
    assert backend.ok("wait 5000") == ["ready"]
    assert backend.ok("pending") == [str(bport)]


def test_scribbled_port_table_cannot_crash_the_peer(channel, rundir):
    """The guest rewrites its own port table: the backend's notify finds no
    matching peer and drops the event; its own port keeps working."""
    import os
    import struct
    guest, gport, backend, bport = channel
    with open(os.path.join(rundir, "dom1", "evtchn"), "r+b") as f:
        f.seek(gport * 32)
        # interdomain to dom0 port 4095, pending clear, owner slot 9999
        f.write(struct.pack("<QII", 3 | (0 << 8) | (4095 << 32), 0, 10000))
    backend.ok(f"notify {bport}")
    assert guest.ok(f"wait {QUIET_MS}") == ["timeout"]
    assert guest.err(f"pending") == -errno.EAGAIN


def test_backend_handle_follows_a_recreated_domain(channel, helpers):
    guest, gport, backend, bport = channel
    guest.kill()
    tool = helpers.start("tool")
    tool.ok("destroy 1")
    tool.ok(f"create 1 again {MiB}")
    assert backend.err(f"bind 1 {gport}") == -errno.EINVAL   # new domain: port free
    heir = helpers.start("heir")
    heir.ok("claim 1")
    heir.ok("evtchn 1")
    hport = int(heir.ok("unbound 0")[0])
    port = int(backend.ok(f"bind 1 {hport}")[0])
    backend.ok(f"notify {port}")
    assert heir.ok("wait 5000") == ["ready"]
    assert heir.ok("pending") == [str(hport)]


def test_ports_of_every_dead_handle_are_released(helpers):
    """Two backends die; the next one to open frees the ports of both (one
    by taking over the slot, one by the sweep), so both guest ports can be
    bound again."""
    guest = helpers.start("guest")
    guest.ok(f"create 1 guest {MiB}")
    guest.ok("claim 1")
    guest.ok("evtchn 1")
    g1 = int(guest.ok("unbound 0")[0])
    g2 = int(guest.ok("unbound 0")[0])
    a = helpers.start("a")
    a.ok("evtchn 0")
    b = helpers.start("b")
    b.ok("evtchn 0")
    a.ok(f"bind 1 {g1}")
    b.ok(f"bind 1 {g2}")
    a.kill()
    b.kill()
    c = helpers.start("c")
    c.ok("evtchn 0")
    p2 = int(c.ok(f"bind 1 {g2}")[0])
    p1 = int(c.ok(f"bind 1 {g1}")[0])
    guest.ok(f"notify {g2}")
    assert c.ok("wait 5000") == ["ready"]
    assert c.ok("pending") == [str(p2)]
    c.ok(f"unmask {p2}")
    guest.ok(f"notify {g1}")
    assert c.ok("wait 5000") == ["ready"]
    assert c.ok("pending") == [str(p1)]
