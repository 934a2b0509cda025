# SPDX-License-Identifier: MIT
"""xbd block-attach / block-detach / block-list with a real xbd-xenstored.

The golden node set is what libxl 4.17 writes for a phy vbd
(tools/libs/light/libxl_disk.c device_disk_add and libxl_device.c
libxl__device_generic_add at RELEASE-4.17.7): keys, values and permissions
of the backend, frontend and /libxl directories, and nothing else.  The
same keys, values and backend/frontend permissions were observed from the
real `xl block-attach` on Xen 4.17 (make check-xen boots it: tests/xen).
"""
import os
import subprocess
import time

from conftest import binary, sanitizer_env
from xbd_fixtures import FakeBackend, machine  # noqa: F401  (fixture)

FE, BE, LIBXL = ("/local/domain/{d}/device/vbd/{id}",
                 "/local/domain/{b}/backend/vbd/{d}/{id}",
                 "/libxl/{d}/device/vbd/{id}")

# (relative key, value) of the backend directory, in libxl's order.
BACKEND_KEYS = [
    ("frontend", FE), ("params", "{target}"), ("script", "/etc/xen/scripts/block"),
    ("frontend-id", "{d}"), ("online", "1"), ("removable", "{removable}"),
    ("bootable", "1"), ("state", "1"), ("dev", "{vdev}"), ("type", "phy"),
    ("mode", "{mode}"), ("device-type", "{devtype}"),
    ("discard-enable", "{discard}"), ("specification", "xen"),
]
FRONTEND_KEYS = [
    ("backend", BE), ("backend-id", "{b}"), ("state", "1"),
    ("virtual-device", "{id}"), ("device-type", "{devtype}"), ("trusted", "1"),
    ("protocol", "x86_64-abi"),
]


def golden(d, b, devid, target, vdev, rw=True, cdrom=False):
    """{path: (value, perms)} libxl 4.17 writes for one vbd."""
    f = dict(d=d, b=b, id=devid, target=target, vdev=vdev,
             mode="w" if rw else "r", devtype="cdrom" if cdrom else "disk",
             removable=int(cdrom), discard=int(rw))
    fe, be, lx = (p.format(**f) for p in (FE, BE, LIBXL))
    out = {be: ("", (f"n{b}", f"r{d}")), fe: ("", (f"n{d}", f"r{b}")),
           lx: ("", ("n0",))}
    for key, val in BACKEND_KEYS:
        out[f"{be}/{key}"] = (val.format(**f), (f"n{b}", f"r{d}"))
        # libxl keeps a copy of every backend entry, plus frontend/backend.
        out[f"{lx}/{key}"] = (val.format(**f), ("n0",))
    out[f"{lx}/backend"] = (be, ("n0",))
    for key, val in FRONTEND_KEYS:
        out[f"{fe}/{key}"] = (val.format(**f), (f"n{d}", f"r{b}"))
    return out


def image(m, name="disk.img", size=1 << 20, mode=0o644):
    path = os.path.join(m.rundir, name)
    with open(path, "wb") as f:
        f.truncate(size)
    os.chmod(path, mode)
    return path


def added(before, after):
    return {k: v for k, v in after.items() if before.get(k) != v}


def test_attach_writes_libxl_node_set(machine):
    d = machine.create("guest")
    img = image(machine)
    before = machine.tree()
    machine.ok("block-attach", "guest", f"{img},raw,xvdb,w", "--timeout", "0")
    new = added(before, machine.tree())
    want = golden(d, 0, 51728, img, "xvdb")
    # Parents created on the way (inheriting their parents' permissions).
    parents = {"/local/domain/0/backend", "/local/domain/0/backend/vbd",
               f"/local/domain/0/backend/vbd/{d}", f"/local/domain/{d}/device/vbd",
               f"/libxl/{d}/device/vbd"}
    assert {k: v for k, v in new.items() if k not in parents} == want
    assert parents <= set(new)


def test_attach_cdrom_read_only_node_set(machine):
    d = machine.create("guest")
    iso = image(machine, "cd.iso")
    machine.ok("block-attach", "guest", f"format=raw, vdev=hdc, access=ro, "
               f"devtype=cdrom, target={iso}", "--timeout", "0")
    tree = machine.tree()
    for path, val in golden(d, 0, 5632, iso, "hdc", rw=False, cdrom=True).items():
        assert tree.get(path) == val, path


def test_attach_waits_for_initwait_and_detach_cleans_up(machine):
    machine.create("guest")
    img = image(machine)
    before = machine.tree()
    with FakeBackend(machine.sock) as fb:
        start = time.monotonic()
        machine.ok("block-attach", "guest", f"phy:{img},xvdb,w")
        assert time.monotonic() - start < 5
        be = "/local/domain/0/backend/vbd/1/51728"
        assert machine.read(f"{be}/state") == "2"
        assert fb.seen == {be}
        out = machine.ok("block-list", "guest").splitlines()
        assert out[0].split() == ["Vdev", "BE", "handle", "state", "evt-ch",
                                  "ring-ref", "BE-path", "storage"]
        # the fake backend opens no storage: no xbd-storage node
        assert out[1].split() == ["51728", "0", "1", "1", "-1", "-1", be, "-"]
        machine.ok("block-detach", "guest", "xvdb")
    assert machine.tree() == before


def test_no_backend_timeout_leaves_nodes(machine):
    """libxl's choice: on timeout the nodes stay for a later backend."""
    d = machine.create("guest")
    img = image(machine)
    before = machine.tree()
    start = time.monotonic()
    msg = machine.fail("block-attach", "guest", f"{img},,xvdb", "--timeout", "0.3")
    assert 0.3 <= time.monotonic() - start < 5
    assert "no backend in domain 0 answered for xvdb within 0.3 s" in msg
    assert "state Initialising" in msg
    assert machine.read(f"/local/domain/{d}/device/vbd/51728/state") == "1"
    # A backend that starts later picks it up.
    with FakeBackend(machine.sock):
        for _ in range(200):
            if machine.read("/local/domain/0/backend/vbd/1/51728/state") == "2":
                break
            time.sleep(0.01)
        assert machine.read("/local/domain/0/backend/vbd/1/51728/state") == "2"
        machine.ok("block-detach", "guest", "51728")
    assert machine.tree() == before


def test_disk_removed_while_waiting(machine):
    machine.create("guest")
    img = image(machine)
    p = subprocess.Popen([binary("xbd"), "--rundir", machine.rundir,
                          "block-attach", "guest", f"{img},,xvdb", "--timeout", "20"],
                         stderr=subprocess.PIPE, text=True, env=sanitizer_env())
    be = "/local/domain/0/backend/vbd/1/51728"
    for _ in range(500):
        if machine.exists(be):
            break
        time.sleep(0.01)
    start = time.monotonic()
    machine.xs.delete(be.encode())
    _, err = p.communicate(timeout=10)
    assert time.monotonic() - start < 5
    assert p.returncode == 1
    assert err == "xbd: xvdb was removed while waiting for its backend\n"


def test_detach_of_never_served_disk_does_not_wait(machine):
    machine.create("guest")
    img = image(machine)
    before = machine.tree()
    machine.ok("block-attach", "guest", f"{img},,xvdc", "--timeout", "0")
    start = time.monotonic()
    machine.ok("block-detach", "guest", "xvdc")
    assert time.monotonic() - start < 2
    assert machine.tree() == before


def test_backend_refusal_reports_its_error(machine):
    machine.create("guest")
    img = image(machine)
    with FakeBackend(machine.sock, refuse=True):
        msg = machine.fail("block-attach", "guest", f"{img},,xvdb")
        assert msg.startswith(f"backend closed xvdb (Closing): 2 cannot open {img}")
        machine.ok("block-detach", "guest", "xvdb")
    assert not machine.exists("/local/domain/0/backend/vbd/1/51728")


def test_driver_domain_backend(machine):
    d = machine.create("guest")
    b = machine.create("driver")
    img = image(machine)
    with FakeBackend(machine.sock, domid=b):
        machine.ok("block-attach", "guest", f"{img},,xvdc,backend=driver")
        tree = machine.tree()
        be_state = f"/local/domain/{b}/backend/vbd/{d}/51744/state"
        for path, val in golden(d, b, 51744, img, "xvdc").items():
            if path != be_state:      # the backend moved it on
                assert tree.get(path) == val, path
        assert tree[be_state] == ("2", (f"n{b}", f"r{d}"))
        assert not machine.exists("/local/domain/0/backend/vbd")
        out = machine.ok("block-list", str(d)).splitlines()
        assert out[1].split()[:2] == ["51744", str(b)]
        machine.ok("block-detach", str(d), "xvdc")
    assert not machine.exists(f"/local/domain/{b}/backend")


def test_block_list_sorted_and_multi_queue(machine):
    d = machine.create("guest")
    img = image(machine)
    for vdev in ("xvdc", "d536p37", "xvdb"):
        machine.ok("block-attach", "guest", f"{img},,{vdev},r", "--timeout", "0")
    fe = f"/local/domain/{d}/device/vbd"
    # What a frontend writes: one queue with a one-page ring, ...
    machine.write(f"{fe}/51728/event-channel", "3")
    machine.write(f"{fe}/51728/ring-ref", "10")
    machine.write(f"{fe}/51728/state", "4")
    # ... two queues with two-page rings.
    machine.write(f"{fe}/51744/multi-queue-num-queues", "2")
    for q, (evt, ref) in enumerate([(5, 20), (7, 22)]):
        machine.write(f"{fe}/51744/queue-{q}/event-channel", str(evt))
        machine.write(f"{fe}/51744/queue-{q}/ring-ref0", str(ref))
        machine.write(f"{fe}/51744/queue-{q}/ring-ref1", str(ref + 1))
    rows = [r.split() for r in machine.ok("block-list", "guest").splitlines()[1:]]
    assert [r[:6] for r in rows] == [
        ["51728", "0", str(d), "4", "3", "10"],
        ["51744", "0", str(d), "1", "5,7", "20,22"],
        ["268572709", "0", str(d), "1", "-1", "-1"],
    ]
    for vdev in ("xvdb", "xvdc", "xvdtq37"):
        machine.ok("block-detach", "guest", vdev)
    assert machine.ok("block-list", "guest").splitlines()[1:] == []
