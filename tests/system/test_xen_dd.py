# SPDX-License-Identifier: MIT
"""xbd-test-xen-dd, the dd-like guest of phase R of make check-xen, on the
local platform against xbd-blkback: every step on one connection, data
and md5 equal on both sides, discard reads back zeroes, byte counts, and
failures that end the run with a clear message."""
import hashlib
import os
import subprocess
import time

from conftest import binary, sanitizer_env
from frontend_fixtures import attach, xbd
from xenstored_fixtures import xenstored, Xenstored  # noqa: F401

MIB = 1 << 20


def blkback(daemons, xd):
    return daemons.start([binary("xbd-blkback"), "-N", "-p", "local", "-R",
                          xd.rundir, "--max_queues=2",
                          "--max_ring_page_order=2", "--sysfs=none"],
                         name="blkback", env=xd.env)


def xen_dd(xd, *args):
    return subprocess.run([binary("xbd-test-xen-dd"), "--platform", "local",
                           "--rundir", xd.rundir, "--timeout", "10000", *args],
                          env=sanitizer_env(xd.env), capture_output=True,
                          text=True, timeout=120)


def steps(out):
    """step name -> {key: value} of each output line."""
    res = {}
    for line in out.strip().splitlines():
        name, *words = line.split()
        res[name] = dict((w.split("=", 1) + [""])[:2] for w in words)
    return res


def md5(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def test_usage(xenstored):
    for argv in ([], ["1", "xvda"], ["--bs", "0", "1", "xvda", "info"],
                 ["--ring-order", "6", "1", "xvda", "info"], ["x", "xvda", "info"]):
        r = xen_dd(xenstored, *argv)
        assert r.returncode == 2, argv
        assert r.stderr.startswith("usage: xbd-test-xen-dd"), argv


def test_one_connection_data_flush_discard(daemons, xenstored, tmp_path):
    blkback(daemons, xenstored)
    disk = attach(xenstored, 8 * MIB, "128M", 10)
    pat = tmp_path / "pat"
    pat.write_bytes(os.urandom(8 * MIB))
    back = tmp_path / "back"
    r = xen_dd(xenstored, "--queues", "2", "--ring-order", "2", "1", "xvda",
               "info", f"write={pat}", f"read={back}", "flush",
               f"discard={MIB}:{MIB}", f"zero={MIB}:{MIB}", "sleep=10")
    assert r.returncode == 0, (r.stdout, r.stderr)
    s = steps(r.stdout)
    assert s["info"]["queues"] == "2" and s["info"]["ring-page-order"] == "2"
    assert s["info"]["sectors"] == str(8 * MIB // 512)
    assert s["write"]["bytes"] == str(8 * MIB) and float(s["write"]["secs"]) > 0
    assert s["read"]["bytes"] == str(8 * MIB)
    assert md5(back) == md5(pat), "read back differs from what was written"
    assert s["flush"] == {"ok": ""}
    assert s["discard"] == {"off": str(MIB), "len": str(MIB)}
    assert s["zero"] == {"ok": str(MIB)}
    assert s["sleep"] == {"ms": "10"}
    with open(disk, "rb") as f:
        data = f.read()
    want = bytearray(pat.read_bytes())
    want[MIB:2 * MIB] = bytes(MIB)
    assert hashlib.md5(data).hexdigest() == hashlib.md5(want).hexdigest()


def test_failures_end_the_run(daemons, xenstored, tmp_path):
    blkback(daemons, xenstored)
    attach(xenstored, 2 * MIB, "128M", 10)
    big = tmp_path / "big"
    big.write_bytes(b"\1" * (3 * MIB))
    r = xen_dd(xenstored, "1", "xvda", f"write={big}", "info")
    assert r.returncode == 1
    assert "write=" in r.stderr and "File too large" in r.stderr
    assert "info " not in r.stdout, "a failed step must end the run"
    r = xen_dd(xenstored, "1", "xvda", "bogus")
    assert r.returncode == 1 and "bogus: Invalid argument" in r.stderr
    r = xen_dd(xenstored, "1", "xvda", f"zero={MIB}")
    assert r.returncode == 1 and "Invalid argument" in r.stderr
    r = xen_dd(xenstored, "1", "xvda", f"read={tmp_path}/no/such/dir")
    assert r.returncode == 1 and "No such file or directory" in r.stderr


def test_hold_ends_when_the_disk_is_detached(daemons, xenstored, tmp_path):
    blkback(daemons, xenstored)
    attach(xenstored, 2 * MIB, "128M", 10)
    p = subprocess.Popen([binary("xbd-test-xen-dd"), "--platform", "local",
                          "--rundir", xenstored.rundir, "--timeout", "10000",
                          "1", "xvda", f"read={tmp_path}/r", "hold=30000"],
                         env=sanitizer_env(xenstored.env), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("read bytes=2097152 "), p.stderr.read()
        t0 = time.monotonic()
        xbd(xenstored, "block-detach", "1", "xvda")
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 0, (out, err)
    hold = steps(out)["hold"]
    assert hold["error"] == "-19", hold          # -ENODEV: detached
    assert float(hold["secs"]) < time.monotonic() - t0 + 1
    r = xen_dd(xenstored, "--timeout", "300", "1", "xvda", "hold=100")
    assert r.returncode == 1       # the disk is gone
