# SPDX-License-Identifier: MIT
"""Polling in libxbdfront (poll_duration_us, Documentation/frontend.md
"Event channels and polling"): while requests are in flight a queue
polls its ring before it sleeps; an attached disk that is idle costs its
guest no CPU; fio's verify passes at depth 1 and 64 with polling on and
off, and the queue counters show polls only when it is on (at depth 1:
at depth 64 a queue polls only while at most 8 are in flight)."""
import os
import re
import time

import pytest

from guest_fixtures import guest, fio_ok, wait_until  # noqa: F401
from test_fio_engine import xfio

MiB = 1 << 20
STATS = re.compile(r"xbd: \w+ queue \d+: .* (\d+) polls, (\d+) poll hits")
HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system time of every thread of process pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


@pytest.mark.parametrize("poll", [50, 1000])
def test_idle_disk_costs_no_cpu(guest, poll):
    """xbd-blkfront with an attached disk, after some I/O (so the adaptive
    window has grown), then 10 s of nothing: under 1% of one core."""
    dev = guest.attach(guest.disk(size=32 * MiB))
    bf = guest.start_blkfront(f"--poll_duration_us={poll}", wait_for=dev)
    fio_ok(guest.fio("--name=w", f"--filename={dev}", "--ioengine=libaio",
                     "--direct=1", "--rw=randread", "--bs=4k", "--iodepth=16",
                     "--size=16M", "--io_size=8M"))
    time.sleep(1)
    before = cpu_seconds(bf.pid)
    time.sleep(10)
    used = cpu_seconds(bf.pid) - before
    assert used < 0.1, f"idle xbd-blkfront used {used:.2f} s of CPU in 10 s"


@pytest.mark.parametrize("depth", [1, 64])
@pytest.mark.parametrize("poll", [0, 50])
def test_verify_with_and_without_polling(guest, depth, poll):
    guest.attach(guest.disk(size=64 * MiB))
    r = xfio(guest, "--rw=randwrite", "--bs=4k", f"--iodepth={depth}",
             "--size=8M", "--verify=crc32c", "--do_verify=1",
             "--verify_fatal=1", f"--xbd_poll_duration_us={poll}",
             "--xbd_stats=1")
    out = fio_ok(r)
    assert out[0]["write_kb"] == 8192 and out[0]["read_kb"] == 8192, out
    found = STATS.findall(r.stderr)
    assert found, r.stderr
    polls = sum(int(p) for p, _ in found)
    hits = sum(int(h) for _, h in found)
    if not poll:
        assert polls == 0 and hits == 0, r.stderr
    elif depth == 1:                   # one request in flight: it polls
        assert polls > 0 and hits <= polls, r.stderr
    else:                              # 64 in flight: the backend is busy,
        assert hits <= polls           # it polls only below 9 (the drains)


def test_bad_poll_duration_refused(guest):
    guest.attach(guest.disk(size=16 * MiB))
    r = xfio(guest, "--rw=read", "--bs=4k", "--size=1M",
             "--xbd_poll_duration_us=1001")
    assert r.returncode != 0
    assert "xbd_poll_duration_us" in r.stderr, r.stderr
