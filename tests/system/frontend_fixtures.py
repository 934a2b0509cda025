# SPDX-License-Identifier: MIT
"""Helpers of the libxbdfront system tests: the `xbd` toolstack, the
xbdfront-io guest program and xbd-blkback, all on the local platform in
the test's xbd-xenstored run directory."""
import os
import subprocess

from conftest import binary, sanitizer_env

BE = "/local/domain/0/backend/vbd/1/51712"
FE = "/local/domain/1/device/vbd/51712"


def xbd(xd, *args):
    """Run the toolstack; it must succeed.  Returns its stdout."""
    r = subprocess.run([binary("xbd"), "--platform", "local", *args],
                       env=sanitizer_env(xd.env), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def frontend_argv(xd, *args):
    return [binary("xbdfront-io"), "--platform", "local", "--rundir",
            xd.rundir, *args]


def frontend(xd, *args, timeout=120):
    """Run xbdfront-io to completion; returns the CompletedProcess."""
    return subprocess.run(frontend_argv(xd, *args), env=sanitizer_env(xd.env),
                          capture_output=True, text=True, timeout=timeout)


def attach(xd, size=16 << 20, memory="64M", wait=0):
    """Domain 1 with a file-backed xvda of size bytes; returns the file."""
    assert xbd(xd, "domain-create", "g1", "--memory", memory).strip() == "1"
    disk = os.path.join(xd.rundir, "disk.img")
    with open(disk, "wb") as f:
        f.truncate(size)
    xbd(xd, "block-attach", "1", f"vdev=xvda,target={disk}",
        "--timeout", str(wait))
    return disk
