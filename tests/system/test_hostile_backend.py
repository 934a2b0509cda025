# SPDX-License-Identifier: MIT
"""A hostile backend (XSA-376/396/403 class) against the real libxbdfront.

xbd-test-hostile-back (tests/helpers/hostile_back.c) plays domain 0's
backend of a vbd that `xbd block-attach --timeout 0` created (no
xbd-blkback runs); xbd-test-front-probe (tests/helpers/front_probe.c) is
the guest: libxbdfront with one-page I/Os between guard pages.  For every
way of breaking the response ring the frontend must detect it, fail the
I/O with EIO (no hang), never let a bad answer reach a buffer, keep its
guard pages intact (under ASan), and close cleanly.
"""
import re
import subprocess
import time

import pytest

from conftest import BAD_LOG_WORDS, binary, sanitizer_env
from xbd_fixtures import Machine

XVDA = 51712


def parse(text):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        out.setdefault(k, v)
    return out


class Bench:
    """xenstored, a domain with one attached disk, and no real backend."""

    def __init__(self, daemons, rundir, tmp_path):
        self.daemons, self.rundir, self.tmp = daemons, rundir, tmp_path
        self.m = Machine(daemons, rundir)
        self.n = 0

    def guest(self):
        self.n += 1
        domid = self.m.create(f"g{self.n}", "--memory", "16M")
        disk = self.tmp / f"d{self.n}.img"
        disk.write_bytes(b"")
        self.m.ok("block-attach", domid, f"{disk},raw,xvda,w", "--timeout", "0")
        return domid

    def backend(self, domid, scenario, *args):
        return self.daemons.start(
            [binary("xbd-test-hostile-back"), "-R", self.rundir, "-d", str(domid),
             "-v", str(XVDA)] + [str(a) for a in args] + [scenario],
            name=f"hostile-back-{scenario}")

    def probe(self, domid, *args, timeout=40):
        t0 = time.monotonic()
        p = subprocess.run([binary("xbd-test-front-probe"), "-R", self.rundir]
                           + [str(a) for a in args] + [str(domid), "xvda"],
                           capture_output=True, text=True, timeout=timeout,
                           env=sanitizer_env())
        for word in BAD_LOG_WORDS:
            assert word not in p.stderr, p.stderr
        assert p.returncode == 0, f"probe exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        out = parse(p.stdout)
        out["_secs"] = time.monotonic() - t0
        out["_stdout"] = p.stdout
        return out


@pytest.fixture
def bench(daemons, rundir, tmp_path):
    b = Bench(daemons, rundir, tmp_path)
    yield b
    b.m.close()


def finished(be, timeout=10, stop=False):
    """The hostile backend's output once it has seen the frontend close
    (or, with stop, once told to stop)."""
    if stop:
        be.proc.terminate()
    deadline = time.monotonic() + timeout
    while be.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert be.proc.poll() == 0, f"hostile backend: {be.proc.poll()}\n{be.log_text()}"
    return parse(be.log_text())


def test_good_backend_serves_the_probe(bench):
    """The control: the same two programs, no attack, every I/O is right
    (so the checks of the attacks below can see bad data if it came)."""
    domid = bench.guest()
    be = bench.backend(domid, "good")
    out = bench.probe(domid, "--count", 64)
    assert out["open"] == "0"
    assert (out["ok"], out["eio"], out["pending"]) == ("64", "0", "0"), out["_stdout"]
    assert (out["bad-data"], out["touched"], out["guards-bad"]) == ("0", "0", "0")
    assert (out["after"], out["error"]) == ("4096", "0")
    back = finished(be)
    assert back["requests"] == "65" and back["frontend-state"] == "6", back


ATTACKS = [
    # scenario, what the frontend's reason says
    ("dup-id", r"response id \d+ is not in flight"),
    ("unknown-id", r"response id \d+ is not in flight"),
    ("bad-id", r"response id \d+ out of range \(ring size 32\)"),
    ("wrong-op", r"response id \d+ has operation \d, request was \d"),
    ("runaway", r"rsp_prod \d+ runs past the \d+ requests issued"),
    ("backwards", r"rsp_prod \d+ runs past the \d+ requests issued"),
    ("torn", r"response id \d+ out of range"),
]


@pytest.mark.parametrize("scenario,reason", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_broken_responses_shut_the_device_down(bench, scenario, reason):
    domid = bench.guest()
    be = bench.backend(domid, scenario)
    out = bench.probe(domid, "--count", 64, "--qd", 4)
    print(f"{scenario}: ok {out['ok']} eio {out['eio']} submit-error "
          f"{out['submit-error']} close {out['close-ms']} ms: {out['reason']}")
    assert out["open"] == "0"
    # detected: the device is dead, with the reason, and stays dead
    assert out["error"] == "-5" and re.search(reason, out["reason"]), out["_stdout"]
    assert out["after"] == "-5"
    # no hang: everything submitted completed, the rest was refused with EIO
    assert out["pending"] == "0" and out["other"] == "0", out["_stdout"]
    assert int(out["eio"]) >= 1 and out["submit-error"] == "-5"
    assert int(out["ok"]) + int(out["eio"]) < 64
    # no corruption: good answers carried the right bytes, failed reads
    # and every write left their buffer alone, no byte outside one changed
    assert (out["bad-data"], out["touched"], out["guards-bad"]) == ("0", "0", "0")
    assert float(out["close-ms"]) < 6000
    back = finished(be)
    assert back["frontend-state"] == "6", back


def test_response_before_any_request(bench):
    """rsp_prod moves at connect, before the frontend asked anything: the
    ring breaks before the first submit (the probe waits 500 ms for the
    event first), so nothing is ever matched with a response the backend
    wrote before it saw the request."""
    domid = bench.guest()
    be = bench.backend(domid, "early")
    out = bench.probe(domid, "--count", 8, "--settle", 500)
    assert out["error"] == "-5" and "runs past the 0 requests" in out["reason"], out["_stdout"]
    assert (out["ok"], out["pending"], out["submit-error"]) == ("0", "0", "-5")
    assert (out["touched"], out["guards-bad"]) == ("0", "0")
    assert finished(be)["frontend-state"] == "6"


def test_bad_status_fails_that_io_only(bench):
    """A status that is no BLKIF_RSP_* value is an error for that request,
    not a success (its buffer untouched); the rest are served."""
    domid = bench.guest()
    be = bench.backend(domid, "bad-status")
    out = bench.probe(domid, "--count", 64, "--qd", 4)
    assert (out["ok"], out["eio"], out["pending"]) == ("63", "1", "0"), out["_stdout"]
    assert (out["bad-data"], out["touched"], out["guards-bad"]) == ("0", "0", "0")
    assert out["error"] == "0"
    assert finished(be)["frontend-state"] == "6"


@pytest.mark.parametrize("scenario", ["never-map", "hold-grants"])
def test_silent_backend_cannot_hang_close(bench, scenario):
    """A backend that never maps the ring, or maps every data grant and
    never answers nor lets go: I/O waits (as on Linux), but close fails
    it, returns within its bounded waits, and the process exits clean
    (LeakSanitizer) although the backend still maps its pages."""
    domid = bench.guest()
    be = bench.backend(domid, scenario)
    out = bench.probe(domid, "--count", 8, "--wait", 1000)
    assert out["open"] == "0"
    assert out["ok"] == "0" and out["pending"] == "4", out["_stdout"]
    assert (out["touched"], out["guards-bad"]) == ("0", "0")
    assert float(out["close-ms"]) < 6000, out["close-ms"]
    back = finished(be)
    assert back["frontend-state"] == "6"
    if scenario == "hold-grants":
        assert back["requests"] == "4"


@pytest.mark.parametrize("key", ["sectors=12ab", "sectors=", "sectors=-1",
                                 "sectors=99999999999999999999999",
                                 "sector-size=1000", "sector-size=0",
                                 "sector-size=8192", "info=x"])
def test_bogus_disk_nodes_are_refused(bench, key):
    """Values the frontend cannot use end the handshake: xbdfront_open
    fails with EPROTO, the frontend's error node says why, state Closing
    then Closed; nothing was connected."""
    domid = bench.guest()
    be = bench.backend(domid, "good", "--key", key)
    out = bench.probe(domid)
    assert out["open"] == "-71", out["_stdout"]
    err = bench.m.read(f"/local/domain/{domid}/device/vbd/{XVDA}/error")
    assert err and err.startswith("71 "), err
    back = finished(be, stop=True)
    assert back["requests"] == "0" and back["frontend-state"] in ("5", "6"), back


def test_odd_sector_count_for_4k_sectors_is_refused(bench):
    domid = bench.guest()
    be = bench.backend(domid, "good", "--key", "sector-size=4096", "--key", "sectors=7")
    assert bench.probe(domid)["open"] == "-71"
    finished(be, stop=True)


def test_bogus_feature_values_are_clamped(bench):
    """Optional features read like Linux's xenbus_read_unsigned: garbage is
    the default, too big is the frontend's own limit; I/O works."""
    domid = bench.guest()
    be = bench.backend(domid, "good",
                       "--key", "feature-max-indirect-segments=4294967295",
                       "--key", "multi-queue-max-queues=99999999999",
                       "--key", "max-ring-page-order=x",
                       "--key", "feature-flush-cache=7",
                       "--key", "feature-persistent=banana")
    out = bench.probe(domid, "--count", 16)
    assert out["open"] == "0" and out["ok"] == "16", out["_stdout"]
    assert (out["bad-data"], out["touched"], out["guards-bad"]) == ("0", "0", "0")
    finished(be)


def fio_env():
    from test_fio_engine import engine_env

    class G:
        env = dict(sanitizer_env())
    return engine_env(G)


@pytest.mark.parametrize("scenario", ["dup-id", "runaway"])
def test_fio_engine_gets_eio_not_a_hang(bench, scenario):
    """fio through the external engine (xbd-fio.so): the job ends with
    EIO, fio exits by itself (no signal, no hang)."""
    from test_fio_engine import ENGINE
    domid = bench.guest()
    be = bench.backend(domid, scenario, "--after", 16)
    r = subprocess.run(
        ["/usr/bin/fio", "--name=x", f"--ioengine=external:{ENGINE}",
         f"--xbd_domain=g{bench.n}", "--xbd_vdev=xvda", f"--xbd_rundir={bench.rundir}",
         "--rw=randread", "--bs=4k", "--iodepth=8", "--size=4M",
         "--output-format=terse", "--terse-version=3", "--verify_state_save=0"],
        capture_output=True, text=True, timeout=60, cwd=bench.rundir, env=fio_env())
    print(r.stdout[-300:], r.stderr[-500:])
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Input/output error" in r.stderr or ";5;" in r.stdout, (r.stdout, r.stderr)
    assert finished(be)["frontend-state"] == "6"


def test_blkfront_file_gets_eio_and_blkfront_survives(bench, daemons):
    """xbd-blkfront (the FUSE guest): dd on the disk's file fails with EIO
    at the attack, the daemon stays up and unmounts cleanly."""
    from guest_fixtures import mounted_under, wait_until
    import os
    domid = bench.guest()
    be = bench.backend(domid, "wrong-op", "--after", 8)
    dev = os.path.join(bench.rundir, f"dom{domid}", "dev")
    bf = daemons.start([binary("xbd-blkfront"), "--domain", f"g{bench.n}",
                        "--rundir", bench.rundir], name="blkfront",
                       ready=lambda: bool(mounted_under(dev)))
    try:
        wait_until(lambda: os.path.exists(os.path.join(dev, "xvda")), what="xvda")
        r = subprocess.run(["dd", f"if={dev}/xvda", "of=/dev/null", "bs=4k",
                            "count=256", "iflag=direct"],
                           capture_output=True, text=True, timeout=30)
        print(r.stderr)
        assert r.returncode == 1 and "Input/output error" in r.stderr, r.stderr
        # the daemon is alive and answers: a second read fails at once
        r = subprocess.run(["dd", f"if={dev}/xvda", "of=/dev/null", "bs=4k",
                            "count=1", "iflag=direct"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "Input/output error" in r.stderr, r.stderr
        assert bf.proc.poll() is None, bf.log_text()
    finally:
        assert bf.stop() == 0, bf.log_text()
        for m in mounted_under(bench.rundir):
            subprocess.run(["umount", "-l", m], check=False)
    assert not mounted_under(dev)
    finished(be)
