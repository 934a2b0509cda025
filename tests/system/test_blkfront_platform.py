# SPDX-License-Identifier: MIT
"""xbd-blkfront's platform and mount-point handling, the parts that real
Xen (make check-xen, phase R) runs without --domain: regression tests on
the local platform.  On Xen the domain is implied; on the local platform
it is not, the default mount point's parents are made, and an explicit
--platform xen on a machine without Xen fails clearly."""
import os
import signal
import subprocess

from conftest import binary
from guest_fixtures import guest, mounted_under, wait_until  # noqa: F401

MiB = 1 << 20


def run(*argv, env=None):
    return subprocess.run([binary("xbd-blkfront"), *argv], capture_output=True,
                          text=True, timeout=60, env=env)


def test_domain_is_only_implied_on_xen(rundir):
    # no --domain: on the local platform (auto here: no /dev/xen) a usage
    # error, before anything is made under the run directory
    before = sorted(os.listdir(rundir))
    for argv in ([], ["--platform", "local", "--rundir", rundir],
                 ["--platform", "auto", "--rundir", rundir]):
        r = run(*argv)
        assert r.returncode == 2, (argv, r.stderr)
        assert "usage: xbd-blkfront" in r.stderr
        assert "(in a Xen domU)" in r.stderr
    assert sorted(os.listdir(rundir)) == before


def test_platform_errors_are_clear(rundir):
    r = run("--platform", "bogus", "--domain", "g1", "--rundir", rundir)
    assert r.returncode == 1
    assert "--platform bogus: not auto, local or xen" in r.stderr, r.stderr
    # Xen asked for where there is none: a clear error, nothing mounted
    r = run("--platform", "xen", "--mount", os.path.join(rundir, "m"))
    assert r.returncode == 1, r.stderr
    assert "No such device" in r.stderr, r.stderr
    assert "Sanitizer" not in r.stderr
    assert mounted_under(rundir) == []


def test_mount_point_parents_are_made(guest):
    dev = guest.attach(guest.disk(size=4 * MiB))
    mnt = os.path.join(guest.rundir, "a", "b", "c")
    bf = guest.daemons.start(
        [binary("xbd-blkfront"), "--domain", str(guest.domid), "--rundir",
         guest.rundir, "--mount", mnt + "/"], name="blkfront-nested",
        env=guest.env, ready=lambda: bool(mounted_under(mnt)))
    wait_until(lambda: os.path.exists(os.path.join(mnt, "xvdb")), what="xvdb")
    with open(os.path.join(mnt, "xvdb"), "rb") as f:
        assert len(f.read(MiB)) == MiB
    assert os.path.basename(dev) == "xvdb"
    assert bf.stop(signal.SIGTERM) == 0
    assert mounted_under(mnt) == []
    # a mount point under a regular file is refused, not half made
    blocker = os.path.join(guest.rundir, "file")
    open(blocker, "w").close()
    r = run("--domain", str(guest.domid), "--rundir", guest.rundir, "--mount",
            os.path.join(blocker, "d"), env=guest.env)
    assert r.returncode == 1
    assert "Not a directory" in r.stderr, r.stderr
