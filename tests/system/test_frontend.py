# SPDX-License-Identifier: MIT
"""xbdfront-io (a guest on libxbdfront) against the real xbd-xenstored and
the nodes `xbd block-attach` writes.  Without a backend serving the disk
the handshake must end in a clear error: in the exit status, on stderr and
in the device's xenstore `error` node, with the frontend state Closing."""
import os
import subprocess

from conftest import binary, sanitizer_env
from xenstored_fixtures import xenstored, Xenstored  # noqa: F401

BE = "/local/domain/0/backend/vbd/1/51712"
FE = "/local/domain/1/device/vbd/51712"


def xbd(xd, *args):
    r = subprocess.run([binary("xbd"), "--platform", "local", *args],
                       env=sanitizer_env(xd.env), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def frontend(xd, *args, timeout=60):
    return subprocess.run([binary("xbdfront-io"), "--platform", "local",
                           "--rundir", xd.rundir, *args],
                          env=sanitizer_env(xd.env), capture_output=True,
                          text=True, timeout=timeout)


def read(xd, path):
    return xd.tool("xenstore-read", path).stdout.strip()


def attach(xd):
    assert xbd(xd, "domain-create", "g1", "--memory", "64M").strip() == "1"
    disk = os.path.join(xd.rundir, "disk.img")
    with open(disk, "wb") as f:
        f.truncate(16 << 20)
    xbd(xd, "block-attach", "1", f"vdev=xvda,target={disk}", "--timeout", "0")


def test_usage(xenstored):
    for argv in ([], ["1"], ["1", "xvda"], ["1", "xvda", "format"],
                 ["--ring-order", "6", "1", "xvda", "info"],
                 ["--abi", "arm", "1", "xvda", "info"], ["x", "xvda", "info"]):
        r = frontend(xenstored, *argv)
        assert r.returncode == 2, argv
        assert r.stderr.startswith("usage: xbdfront-io"), argv


def test_no_backend_times_out_with_error_node(xenstored):
    attach(xenstored)
    assert read(xenstored, f"{FE}/backend") == BE
    r = frontend(xenstored, "--timeout", "300", "1", "xvda", "info")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "cannot open xvda of domain 1: Connection timed out" in r.stderr
    want = f"110 backend {BE} stayed Initialising for 300 ms"
    assert read(xenstored, f"{FE}/error") == want
    assert read(xenstored, "/local/domain/1/error/device/vbd/51712/error") == want
    assert read(xenstored, f"{FE}/state") == "5"        # Closing
    # the domain claim was released: a second guest process may try again
    r = frontend(xenstored, "--timeout", "100", "1", "xvda", "info")
    assert r.returncode == 1 and "Connection timed out" in r.stderr


def test_unknown_disk(xenstored):
    attach(xenstored)
    r = frontend(xenstored, "--timeout", "100", "1", "xvdb", "info")
    assert r.returncode == 1
    assert "cannot open xvdb of domain 1: No such file or directory" in r.stderr
    r = frontend(xenstored, "--timeout", "100", "7", "xvda", "info")
    assert r.returncode == 1
