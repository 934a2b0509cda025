# SPDX-License-Identifier: MIT
"""Per-vbd I/O limits (backend/limit.c), with real daemons and real fio
through the fio engine (the fio process is the guest): a limited disk
stays within 5% of its IOPS and bytes-per-second limit over 10 s, shared
by two queues, with no error (requests over the limit wait, they never
fail); limits come from `xbd block-attach --limit`, from the backend's
default_* tunables, or live from the tree, where a change takes effect
within 100 ms; a second guest's unlimited disk on the same backend keeps
its speed.  Rates are what the limiter enforces, not performance claims:
the machine only has to be faster than the limits."""
import errno
import json
import os
import subprocess
import time

import pytest

from conftest import binary
from tree_files import cat as tree_cat, echo
from guest_fixtures import guest, fio_ok, kill_if_running, wait_until  # noqa: F401
from test_fio_engine import ENGINE, engine_env

MiB = 1 << 20
DEVICES = "bus/xen-backend/devices"


@pytest.fixture
def lguest(guest):
    """The guest's machine with the backend's tree mounted."""
    guest.backend.stop()
    guest.start_backend("blkback-tree", sysfs=os.path.join(guest.rundir, "sys"))
    return guest


def vbd_dir(g, domid, devid=51728):
    return f"{DEVICES}/vbd-{domid}-{devid}"


def cat(g, rel):
    return tree_cat(g, rel).strip()


def attach(g, img, vdev, domain="g1", limit=None):
    args = ["block-attach", domain,
            f"format=raw, vdev={vdev}, access=rw, target={img}", "--timeout", "20"]
    if limit:
        args += ["--limit", limit]
    g.xbd(*args)


def fio_job(g, rw, bs, seconds, vdev="xvdb", domain="g1", depth=16, jobs=2):
    """fio argv (terse) for `jobs` threads on two queues of one disk."""
    return ["/usr/bin/fio", "--output-format=terse", "--terse-version=3",
            "--verify_state_save=0", "--name=x", "--thread",
            f"--ioengine=external:{ENGINE}", f"--xbd_domain={domain}",
            f"--xbd_vdev={vdev}", f"--xbd_rundir={g.rundir}",
            "--xbd_max_queues=2", f"--numjobs={jobs}", "--group_reporting",
            f"--rw={rw}", f"--bs={bs}", f"--iodepth={depth}", "--size=32M",
            "--time_based", f"--runtime={seconds}"]


def run_fio(g, argv, timeout=120):
    """fio_ok's fields, and the run's time as fio measured it (s)."""
    r = subprocess.run(argv, capture_output=True, text=True, cwd=g.rundir,
                       timeout=timeout, env=engine_env(g))
    out = fio_ok(r)[0]
    f = [x for x in r.stdout.splitlines() if x.startswith("3;")][0].split(";")
    out["seconds"] = max(int(f[8]), int(f[49])) / 1000
    return out


def within(value, limit, tol=0.05):
    return abs(value - limit) <= tol * limit


def test_iops_limit_from_attach_holds_within_5_percent(lguest):
    """block-attach --limit read_iops=400: the backend node, the tree
    file, and fio's randread rate over 10 s on two queues."""
    g = lguest
    attach(g, g.disk(size=64 * MiB), "xvdb", limit="read_iops=400,write_bps=8M")
    d = vbd_dir(g, g.domid)
    assert cat(g, f"{d}/limits/read_iops") == "400"
    assert cat(g, f"{d}/limits/write_bps") == str(8 * MiB)
    assert cat(g, f"{d}/limits/write_iops") == "0"
    assert cat(g, f"{d}/limits/waits") == "0"
    out = run_fio(g, fio_job(g, "randread", "4k", 10))
    print(f"read_iops=400: fio {out['read_iops']} IOPS over {out['seconds']} s")
    assert out["error"] == 0
    assert within(out["read_iops"], 400), out
    # the requests held went on waiting: QD16 on two queues at 400 IOPS
    # means almost every request waited, about 2 x 16 / 400 s each
    waits, waited_us = int(cat(g, f"{d}/limits/waits")), int(cat(g, f"{d}/limits/waited_us"))
    print(f"limits/waits {waits}, waited_us {waited_us}")
    assert waits > 1000 and waited_us > 5 * 10**6, (waits, waited_us)


def test_bps_limit_set_live_holds_within_5_percent(lguest):
    """write_bps written to the tree before the run: 64 KiB writes at
    4 MiB/s (64 IOPS) over 10 s."""
    g = lguest
    attach(g, g.disk(size=64 * MiB), "xvdb")
    d = vbd_dir(g, g.domid)
    assert echo(g, f"{d}/limits/write_bps", f"{4 * MiB}\n") == 0
    out = run_fio(g, fio_job(g, "randwrite", "64k", 10))
    bps = out["write_kb"] * 1024 / out["seconds"]
    print(f"write_bps=4 MiB/s: fio {bps / MiB:.3f} MiB/s over {out['seconds']} s")
    assert within(bps, 4 * MiB), out


def test_discard_is_one_write_op_and_no_bytes(lguest):
    """Discards are charged one op each against write_iops and nothing
    against write_bps (limit.h): 1 MiB trims at write_iops=200 run at
    200/s although write_bps=64K would allow one every 16 s if their
    bytes counted; without any charge they would run thousands a second."""
    g = lguest
    attach(g, g.disk(size=64 * MiB), "xvdb", limit="write_iops=200,write_bps=64K")
    argv = [a for a in fio_job(g, "randtrim", "1M", 5) if not a.startswith("--terse")]
    argv[argv.index("--output-format=terse")] = "--output-format=json"
    r = subprocess.run(argv, capture_output=True, text=True, cwd=g.rundir,
                       timeout=120, env=engine_env(g))
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]   # terse v3 has no trims
    trim = job["trim"]
    rate = trim["total_ios"] / (trim["runtime"] / 1000)
    waits = int(cat(g, f"{vbd_dir(g, g.domid)}/limits/waits"))
    print(f"write_iops=200, write_bps=64K: {rate:.1f} trims/s of 1 MiB "
          f"over {trim['runtime'] / 1000} s; limits/waits {waits}")
    assert job["error"] == 0
    assert within(rate, 200, 0.10), trim
    assert waits > 500


def test_bad_values_are_refused(lguest):
    g = lguest
    attach(g, g.disk(size=16 * MiB), "xvdb")
    d = vbd_dir(g, g.domid)
    for bad in ("-1", "abc", "12x", str(1 << 49), "\n"):
        assert echo(g, f"{d}/limits/read_bps", bad) == errno.EINVAL, bad
    assert cat(g, f"{d}/limits/read_bps") == "0"
    r = g.xbd("block-attach", "g1", "vdev=xvdc, target=" + g.disk("c.img"),
              "--limit", "read_iops=fast", check=False)
    assert r.returncode == 2 and "read_iops=fast" in r.stderr, r.stderr
    r = g.xbd("block-attach", "g1", "vdev=xvdc, target=" + g.disk("c.img"),
              "--limit", "iops=5", check=False)
    assert r.returncode == 2 and "not KEY=N" in r.stderr, r.stderr


def test_default_from_backend_tunable(guest):
    """--default_read_iops: what a new vbd starts with when the toolstack
    set nothing; the toolstack's node wins."""
    g = guest
    g.backend.stop()
    sysdir = os.path.join(g.rundir, "sys")
    g.backend = g.daemons.start(
        [binary("xbd-blkback"), "-N", "-p", "local", "-R", g.rundir,
         "--max_queues=2", f"--sysfs={sysdir}", "--default_read_iops=300",
         "--default_write_bps_burst=65536"],
        name="blkback-def", env=g.env,
        ready=lambda: os.path.exists(os.path.join(sysdir, "bus")))
    attach(g, g.disk(size=16 * MiB), "xvdb")
    attach(g, g.disk("c.img", size=16 * MiB), "xvdc", limit="read_iops=0")
    d = vbd_dir(g, g.domid)
    assert cat(g, f"{d}/limits/read_iops") == "300"
    assert cat(g, f"{d}/limits/write_bps_burst") == "65536"
    assert cat(g, f"{vbd_dir(g, g.domid, 51744)}/limits/read_iops") == "0"
    assert cat(g, "module/xen_blkback/parameters/default_read_iops") == "300"


def test_live_change_takes_effect_within_100ms(lguest):
    """fio at read_iops=200; raise it to 4000 through the tree while it
    runs: the completion rate measured from 100 ms after the write is many
    times the rate before it."""
    g = lguest
    attach(g, g.disk(size=64 * MiB), "xvdb", limit="read_iops=200")
    d = vbd_dir(g, g.domid)
    fio = subprocess.Popen(fio_job(g, "randread", "4k", 6), cwd=g.rundir,
                           env=engine_env(g), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        samples = []          # (monotonic, rd_req)

        def sample_until(t_end):
            while time.monotonic() < t_end:
                samples.append((time.monotonic(), int(cat(g, f"{d}/statistics/rd_req"))))
                time.sleep(0.01)

        wait_until(lambda: int(cat(g, f"{d}/statistics/rd_req")) > 200,
                   timeout=30, what="fio running")
        t0 = time.monotonic()
        sample_until(t0 + 1.0)
        t_set = time.monotonic()
        assert echo(g, f"{d}/limits/read_iops", "4000") == 0
        sample_until(t_set + 0.6)
        out, err = fio.communicate(timeout=60)
        assert fio.returncode == 0, err
    finally:
        kill_if_running(fio)

    def rate(a, b):
        s = [x for x in samples if a <= x[0] <= b]
        return (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0])

    before = rate(t0, t_set)
    after = rate(t_set + 0.1, t_set + 0.6)
    print(f"completions: {before:.0f}/s before, {after:.0f}/s from 100 ms after")
    assert within(before, 200, 0.25), before
    assert after > 5 * before, (before, after)


def test_unlimited_neighbour_keeps_its_speed(lguest):
    """Guest g2's unlimited disk on the same backend: its randread rate
    with g1's disk held at 200 IOPS next to it, against its rate alone
    (generous margin: the machine is shared)."""
    g = lguest
    g2 = int(g.xbd("domain-create", "g2", "--memory", "256M").strip())
    attach(g, g.disk("n.img", size=64 * MiB), "xvdc", domain="g2")
    alone = run_fio(g, fio_job(g, "randread", "4k", 3, vdev="xvdc",
                               domain="g2", jobs=1))["read_iops"]
    attach(g, g.disk(size=64 * MiB), "xvdb", limit="read_iops=200")
    limited = subprocess.Popen(fio_job(g, "randread", "4k", 8), cwd=g.rundir,
                               env=engine_env(g), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: int(cat(g, f"{vbd_dir(g, g.domid)}/statistics/rd_req")) > 100,
                   timeout=30, what="limited fio running")
        beside = run_fio(g, fio_job(g, "randread", "4k", 3, vdev="xvdc",
                                    domain="g2", jobs=1))["read_iops"]
        out, err = limited.communicate(timeout=60)
        assert limited.returncode == 0, err
    finally:
        kill_if_running(limited)
    assert cat(g, f"{vbd_dir(g, g2, 51744)}/limits/read_iops") == "0"
    print(f"unlimited neighbour: {alone} IOPS alone, {beside} beside the limited disk")
    assert beside >= 0.5 * alone, (alone, beside)
