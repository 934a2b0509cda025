# SPDX-License-Identifier: MIT
"""xbdfront-io (a guest on libxbdfront) against the real xbd-xenstored and
the nodes `xbd block-attach` writes.  Without a backend serving the disk
the handshake must end in a clear error: in the exit status, on stderr and
in the device's xenstore `error` node, with the frontend state Closing,
then Closed (as Linux blkfront), so that the toolstack may tear down or
try again."""
import time

from frontend_fixtures import BE, FE, attach, frontend
from xenstored_fixtures import xenstored, Xenstored  # noqa: F401


def read(xd, path):
    return xd.tool("xenstore-read", path).stdout.strip()


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
    # the one-line error carries the reason, the words of the error node
    assert (f"cannot open xvda of domain 1: Connection timed out; backend {BE} "
            "stayed Initialising for 300 ms\n") in r.stderr
    want = f"110 backend {BE} stayed Initialising for 300 ms"
    assert read(xenstored, f"{FE}/error") == want
    assert read(xenstored, "/local/domain/1/error/device/vbd/51712/error") == want
    assert read(xenstored, f"{FE}/state") == "6"        # Closing, then Closed
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


def wait_for(xd, path, want, timeout=10):
    end = time.monotonic() + timeout
    while read(xd, path) != want:
        assert time.monotonic() < end, (path, read(xd, path), want)
        time.sleep(0.05)


def test_refusing_backend_reason_reaches_the_user(xenstored):
    """A backend that could not open the disk's file says why in its error
    node and goes Closing (written here as xbd-blkback's be_fatal writes
    them).  xbdfront-io fails at once, not after its timeout, with that
    reason on its one line, and the frontend ends Closed."""
    attach(xenstored)
    xenstored.tool("xenstore-write", f"{BE}/error", "2 opening /srv/gone.img",
                   f"{BE}/state", "5")
    start = time.monotonic()
    r = frontend(xenstored, "--timeout", "10000", "1", "xvda", "info")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert time.monotonic() - start < 5
    assert r.stderr.splitlines()[-1] == (
        "xbdfront-io: cannot open xvda of domain 1: No such device; "
        "backend: opening /srv/gone.img (No such file or directory)")
    assert read(xenstored, f"{FE}/state") == "6"
    assert read(xenstored, f"{FE}/error") == f"19 backend {BE} is Closing"
