# SPDX-License-Identifier: MIT
"""xbd domain-create / domain-list / domain-destroy on the local platform
with a real xbd-xenstored (and xbd-test-platform playing a live guest)."""
import errno
import os
import subprocess
import sys
import time

from platform_fixtures import helpers  # noqa: F401  (fixture)
from xbd_fixtures import FakeBackend, machine  # noqa: F401  (fixture)


def listing(m):
    rows = [r.split() for r in m.ok("domain-list").splitlines()]
    assert rows[0] == ["ID", "Name", "State", "VBDs"]
    return {int(r[0]): r[1:] for r in rows[1:]}


def test_create_writes_domain_nodes(machine):
    d = machine.create("guest", "--memory", "64M")
    assert d == 1
    base = "/local/domain/1"
    assert machine.perms(base) == ["n0", "r1"]
    assert machine.read(f"{base}/name") == "guest"
    assert machine.read(f"{base}/domid") == "1"
    assert machine.read(f"{base}/memory/static-max") == str(64 * 1024)
    assert machine.read(f"{base}/memory/target") == str(64 * 1024)
    assert machine.perms(f"{base}/device") == ["n0", "r1"]
    assert machine.perms(f"{base}/control") == ["n0", "r1"]
    for rw in ("control/shutdown", "data", "drivers", "feature", "attr", "error"):
        assert machine.perms(f"{base}/{rw}") == ["n1"], rw
    vm = machine.read(f"{base}/vm")
    assert vm.startswith("/vm/") and machine.read(f"{vm}/name") == "guest"
    assert machine.read(f"{vm}/uuid") == vm[4:]
    assert machine.perms("/libxl/1") == ["n0"]
    # Domain 0's nodes, as xen-init-dom0 writes them.
    assert machine.read("/local/domain/0/name") == "Domain-0"
    # Introduced to xenstored (its socket exists) and on the platform.
    assert machine.xs.is_domain_introduced(1)
    assert os.path.exists(os.path.join(machine.rundir, "dom1", "xenstore.sock"))
    assert os.path.getsize(os.path.join(machine.rundir, "dom1", "memory")) == 64 << 20


def test_ids_names_and_list(machine):
    assert machine.create("a") == 1
    assert machine.create("b", "--memory", "1G") == 2
    msg = machine.fail("domain-create", "a")
    assert msg == "a domain named 'a' already exists (id 1)"
    assert listing(machine) == {0: ["Domain-0", "-", "0"],
                                1: ["a", "unclaimed", "0"],
                                2: ["b", "unclaimed", "0"]}
    machine.ok("domain-destroy", "a")
    assert machine.create("c") == 1          # the lowest free id again
    assert listing(machine)[1] == ["c", "unclaimed", "0"]


def test_destroy_removes_everything(machine):
    machine.create("keep")
    before = machine.tree()
    d = machine.create("gone")
    img = os.path.join(machine.rundir, "disk.img")
    open(img, "wb").close()
    os.truncate(img, 1 << 20)
    machine.ok("block-attach", "gone", f"{img},,xvdb", "--timeout", "0")
    machine.ok("block-attach", "gone", f"{img},,xvdc,r", "--timeout", "0")
    assert listing(machine)[d] == ["gone", "unclaimed", "2"]
    start = time.monotonic()
    machine.ok("domain-destroy", str(d))
    assert time.monotonic() - start < 5      # no guest: forced, no waiting
    assert machine.tree() == before
    assert not machine.xs.is_domain_introduced(d)
    assert not os.path.exists(os.path.join(machine.rundir, f"dom{d}"))
    assert machine.fail("domain-destroy", "gone") == "unknown domain 'gone'"
    assert machine.fail("domain-destroy", "0") == "domain 0 cannot be destroyed"


def test_live_guest_is_claimed_and_detached_gracefully(machine, helpers):
    d = machine.create("guest")
    img = os.path.join(machine.rundir, "disk.img")
    open(img, "wb").close()
    os.truncate(img, 1 << 20)
    guest = helpers.start("guest")
    guest.ok(f"claim {d}")
    assert listing(machine)[d] == ["guest", f"claimed:{guest.pid}", "0"]
    with FakeBackend(machine.sock) as fb:
        machine.ok("block-attach", "guest", f"{img},,xvdb")
        machine.write(f"/local/domain/0/backend/vbd/{d}/51728/state", "4")
        # A live guest: its disks are closed through the backend first.
        machine.ok("domain-destroy", "guest", "--timeout", "5")
        assert fb.seen == {f"/local/domain/0/backend/vbd/{d}/51728"}
    assert not machine.exists(f"/local/domain/{d}")
    assert not machine.exists("/local/domain/0/backend")
    guest.kill()


def test_dead_guest_is_unclaimed(machine, helpers):
    d = machine.create("guest")
    guest = helpers.start("guest")
    guest.ok(f"claim {d}")
    assert listing(machine)[d][1] == f"claimed:{guest.pid}"
    guest.kill()
    assert listing(machine)[d][1] == "unclaimed"


CONNECT = ("import socket, sys\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "try:\n"
           "    s.connect(sys.argv[1])\n"
           "except OSError as e:\n"
           "    print(e.errno); sys.exit(1)\n"
           "print('connected')\n")


def connect_as(uid, gid, path):
    p = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}",
                        "--clear-groups", sys.executable, "-c", CONNECT, path],
                       capture_output=True, text=True, timeout=30)
    return p.stdout.strip()


def test_domain_socket_is_for_root_and_its_owner(machine):
    """Issue 18 item 5: a per-domain xenstore socket is 0600 root (or the
    owner --user/--group name), so uid 65534 cannot act as the domain."""
    os.chmod(machine.rundir, 0o755)       # only the socket's mode protects
    plain = machine.create("plain")
    sock = os.path.join(machine.rundir, f"dom{plain}", "xenstore.sock")
    st = os.stat(sock)
    print(f"dom{plain}: mode {st.st_mode & 0o777:o} uid {st.st_uid}")
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == 0
    assert connect_as(65534, 65534, sock) == str(errno.EACCES)
    assert connect_as(0, 0, sock) == "connected"

    mine = machine.create("nobodys", "--user", "65534")
    sock = os.path.join(machine.rundir, f"dom{mine}", "xenstore.sock")
    st = os.stat(sock)
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == 65534
    assert os.stat(os.path.join(machine.rundir, f"dom{mine}", "memory")).st_uid == 65534
    assert connect_as(65534, 65534, sock) == "connected"
    assert connect_as(65533, 65533, sock) == str(errno.EACCES)

    grp = machine.create("groups", "--group", "4242")
    sock = os.path.join(machine.rundir, f"dom{grp}", "xenstore.sock")
    st = os.stat(sock)
    assert st.st_mode & 0o777 == 0o660 and st.st_gid == 4242
    assert connect_as(65534, 4242, sock) == "connected"
    assert connect_as(65534, 65534, sock) == str(errno.EACCES)
    assert "unknown user" in machine.fail("domain-create", "x", "--user",
                                          "no-such-user-xbd", code=2)
