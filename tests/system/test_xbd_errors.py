# SPDX-License-Identifier: MIT
"""Bad input to xbd: each a one-line message naming the problem, a non-zero
exit, and the store exactly as before (nothing half-written)."""
import os
import stat

import pytest

from xbd_fixtures import FakeBackend, machine  # noqa: F401  (fixture)


@pytest.fixture
def guest(machine):
    """A machine with domain 'guest' and a 1 MiB image; yields (m, img)."""
    machine.create("guest")
    img = os.path.join(machine.rundir, "disk.img")
    with open(img, "wb") as f:
        f.truncate(1 << 20)
    return machine, img


ATTACH_ERRORS = [
    # (domain, spec, message)
    ("nosuch", "{img},,xvdb", "unknown domain 'nosuch'"),
    ("77", "{img},,xvdb", "unknown domain '77'"),
    ("guest", "bogus=1,{img},,xvdb",
     "disk spec: config parsing error in disk specification: unknown parameter"),
    ("guest", "{img}", "no vdev specified"),
    ("guest", "{img},qcow,xvdb", "unsupported format qcow (only raw and qcow2)"),
    ("guest", "{img},,xvdb,backendtype=qdisk", "unsupported backendtype=qdisk (only phy)"),
    ("guest", "{img},,xvda0", "invalid virtual disk identifier xvda0"),
    ("guest", "{img},,hde", "invalid virtual disk identifier hde"),
    ("guest", "/nonexistent/disk.img,,xvdb", "target /nonexistent/disk.img does not exist"),
    ("guest", "{dir},,xvdb", "is not a regular file or a block device"),
    ("guest", "{img},,xvdb,backend=nosuch", "unknown domain 'nosuch'"),
    # libxlutil's scanner exit()s on this one ("flex scanner jammed",
    # exit 2): refused first (tests/fuzz/corpus/disk_spec/crash-lexer-exit)
    ("guest", "b,,d2p[vdev=\n", "control character \\x0a in disk specification 1"),
]


@pytest.mark.parametrize("domain,spec,message", ATTACH_ERRORS)
def test_attach_errors(guest, domain, spec, message):
    m, img = guest
    before = m.tree()
    msg = m.fail("block-attach", domain,
                 spec.format(img=img, dir=m.rundir), "--timeout", "0")
    assert message in msg
    assert m.tree() == before


def test_read_only_target_attached_writable(guest):
    m, img = guest
    os.chmod(img, 0o444)
    before = m.tree()
    msg = m.fail("block-attach", "guest", f"{img},,xvdb,w", "--timeout", "0")
    assert msg == (f"target {img} is read-only but access is rw; "
                   "attach it with access=ro")
    assert m.tree() == before
    m.ok("block-attach", "guest", f"{img},,xvdb,r", "--timeout", "0")
    assert m.read("/local/domain/0/backend/vbd/1/51728/mode") == "r"


def test_unreadable_target(guest):
    """As an unprivileged user (root reads anything)."""
    m, img = guest
    os.chmod(img, 0)
    os.chmod(m.rundir, 0o755)  # let the user reach xenstored
    os.chmod(m.sock, 0o666)
    before = m.tree()
    msg = m.fail("block-attach", "guest", f"{img},,xvdb,r", "--timeout", "0",
                 user=65534)
    assert msg == f"cannot read target {img}: Permission denied"
    # Readable but not writable for that user: refused for rw.
    os.chmod(img, 0o644)
    msg = m.fail("block-attach", "guest", f"{img},,xvdb,w", "--timeout", "0",
                 user=65534)
    assert "is read-only but access is rw" in msg
    assert m.tree() == before


def test_vdev_in_use(guest):
    m, img = guest
    m.ok("block-attach", "guest", f"{img},,xvdb", "--timeout", "0")
    before = m.tree()
    for vdev in ("xvdb", "d1p0", "51728"):   # three spellings, one device
        msg = m.fail("block-attach", "guest", f"{img},,{vdev}", "--timeout", "0")
        assert msg == f"vdev {vdev} (device 51728) is already in use by domain 1"
    assert m.tree() == before


def test_detach_errors(guest):
    m, img = guest
    before = m.tree()
    assert m.fail("block-detach", "guest", "xvdz") == "domain 1 has no disk xvdz"
    assert m.fail("block-detach", "guest", "xvda0") == \
        "invalid virtual disk identifier 'xvda0'"
    assert m.fail("block-detach", "nosuch", "xvdb") == "unknown domain 'nosuch'"
    assert m.tree() == before


def test_detach_timeout_then_force(guest):
    """A backend that never closes: detach fails (nodes stay, online=0,
    Closing); --force removes them."""
    m, img = guest
    be = "/local/domain/0/backend/vbd/1/51728"
    with FakeBackend(m.sock):
        m.ok("block-attach", "guest", f"{img},,xvdb")
    m.write(f"{be}/state", "4")     # connected, then the backend hangs
    msg = m.fail("block-detach", "guest", "xvdb", "--timeout", "0.3")
    assert msg.startswith("backend of disk xvdb (domain 1) did not close within 0.3 s")
    assert m.read(f"{be}/online") == "0" and m.read(f"{be}/state") == "5"
    m.ok("block-detach", "guest", "xvdb", "--timeout", "0.3", "--force")
    assert not m.exists(be)
    assert not m.exists("/local/domain/1/device/vbd/51728")
    assert not m.exists("/libxl/1/device/vbd/51728")


def test_detach_with_invalid_backend_path_needs_force(guest):
    """The frontend's backend node is the guest's to write: an invalid one
    is not followed; --force removes what belongs to the guest."""
    m, img = guest
    m.ok("block-attach", "guest", f"{img},,xvdb", "--timeout", "0")
    fe = "/local/domain/1/device/vbd/51728"
    m.xs.delete(b"/libxl/1/device/vbd/51728/backend")
    m.write(f"{fe}/backend", "/local/domain/0/backend/vbd/9/51728")
    msg = m.fail("block-detach", "guest", "xvdb", "--timeout", "0.3")
    assert msg == "disk xvdb of domain 1 has an invalid backend path; use --force"
    assert m.exists(fe)
    m.ok("block-detach", "guest", "xvdb", "--force", "--timeout", "0.3")
    assert not m.exists(fe) and not m.exists("/libxl/1/device/vbd/51728")
    # The real backend directory was not named by a trusted path: it stays.
    assert m.exists("/local/domain/0/backend/vbd/1/51728")


USAGE_ERRORS = [
    ("block-attach",), ("block-attach", "guest"), ("block-detach", "guest"),
    ("block-detach", "guest", "xvdb", "extra"), ("domain-create",),
    ("domain-create", "a", "b"), ("domain-list", "x"), ("frobnicate",),
    ("block-attach", "guest", "/x,,xvdb", "--timeout", "soon"),
    ("block-attach", "guest", "/x,,xvdb", "--force"),
    ("domain-create", "bad/name"), ("domain-create", "1234"),
    ("domain-create", "x" * 64), ("domain-create", "ok", "--memory", "12q"),
    ("domain-create", "ok", "--memory", "0"), ("--platform", "mars", "domain-list"),
]


@pytest.mark.parametrize("args", USAGE_ERRORS)
def test_usage_errors(guest, args):
    m, _ = guest
    before = m.tree()
    m.fail(*args, code=2)
    assert m.tree() == before


def test_help(machine):
    out = machine.ok("help")
    for cmd in ("domain-create", "domain-destroy", "domain-list", "block-attach",
                "block-detach", "block-list", "help"):
        assert f"\n  {cmd} " in out
        assert machine.ok("help", cmd).startswith(f"usage: xbd {cmd}")
        assert machine.ok(cmd, "--help").startswith(f"usage: xbd {cmd}")


def test_no_xenstored(rundir):
    from xbd_fixtures import Machine
    m = Machine.__new__(Machine)
    m.rundir = rundir
    p = m.run("domain-list")
    assert p.returncode == 1
    assert p.stderr.startswith(f"xbd: cannot connect to xenstored at {rundir}/xenstored.sock")
    assert stat.S_ISDIR(os.stat(rundir).st_mode)
