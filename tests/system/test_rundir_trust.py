# SPDX-License-Identifier: MIT
"""Issue 18 item 6: the run directory is trusted only when root (or the
program's own user) owns it and nobody else can write it, and nothing is
opened in it through a link another user could plant."""
import os
import signal
import subprocess
import time

import pytest

from conftest import binary, sanitizer_env
from xbd_fixtures import Machine


def refused(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                       env=sanitizer_env())
    lines = p.stderr.strip().splitlines()
    print(argv[0], p.returncode, lines)
    assert p.returncode != 0, p.stderr
    return lines


@pytest.mark.parametrize("how", ["owner", "mode"])
def test_untrusted_rundir_is_refused(tmp_path, how):
    bad = tmp_path / "run"
    bad.mkdir()
    if how == "owner":
        os.chown(bad, 65534, 65534)        # created first by another user
        os.chmod(bad, 0o755)
        want = "owned by uid 65534, not root"
    else:
        os.chmod(bad, 0o777)
        want = "writable by group or others (mode 0777)"
    for argv in ([binary("xbd-xenstored"), "-N", "-R", str(bad)],
                 [binary("xbd-blkback"), "-N", "-p", "local", "-R", str(bad),
                  "--sysfs=none"]):
        lines = refused(argv)
        assert any(want in ln for ln in lines), lines
        assert len([ln for ln in lines if "refusing" in ln]) == 1, lines
    assert not os.path.exists(bad / "xenstored.sock")


def usr1_blocked(pid):
    """The daemon takes SIGUSR1 on its signalfd (blocked), not by default."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16) & (1 << (signal.SIGUSR1 - 1))
    return False


def test_planted_link_is_not_followed(daemons, rundir, tmp_path):
    """A link in the run directory (at the stats file's temporary name) or
    in a domain directory an unprivileged owner holds never makes root
    write through it."""
    m = Machine(daemons, rundir)
    try:
        be = daemons.start([binary("xbd-blkback"), "-N", "-p", "local", "-R",
                            rundir, "--sysfs=none"], name="xbd-blkback")
        deadline = time.monotonic() + 10
        while not usr1_blocked(be.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        victim = tmp_path / "victim"
        victim.write_text("precious\n")
        os.symlink(victim, os.path.join(rundir, "xbd-blkback.stats.tmp"))
        be.proc.send_signal(signal.SIGUSR1)
        stats = os.path.join(rundir, "xbd-blkback.stats")
        deadline = time.monotonic() + 10
        while not os.path.exists(stats) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(stats), be.log_text()
        assert victim.read_text() == "precious\n"
        assert not os.path.islink(stats)

        # a domain given to uid 65534 plants links in its own directory:
        # root's tools refuse to go through them
        domid = m.create("planter", "--user", "65534")
        d = os.path.join(rundir, f"dom{domid}")
        os.chmod(rundir, 0o755)        # the domain's owner reaches its dir
        os.unlink(os.path.join(d, "info"))
        subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", "ln", "-s", str(victim),
                        os.path.join(d, "info")], check=True)
        out = m.run("domain-list")
        print(out.stdout, out.stderr)
        assert "precious" not in out.stdout + out.stderr
        assert victim.read_text() == "precious\n"
        # root's domain-destroy writes `state` (dying = 1): a link there
        # to a root file is not written through, and the domain still goes
        target = tmp_path / "root-file"
        target.write_bytes(b"A" * 4096)
        os.unlink(os.path.join(d, "state"))
        subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", "ln", "-s", str(target),
                        os.path.join(d, "state")], check=True)
        m.ok("domain-destroy", "planter")
        assert target.read_bytes() == b"A" * 4096
        assert not os.path.exists(d)
    finally:
        m.close()
