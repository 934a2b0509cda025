# SPDX-License-Identifier: MIT
"""Zero copy through the fio engine (issue 8, 1 MiB reads): fio's buffers
are memory granted to the backend (the engine's iomem_alloc hook), so no
request is bounced in the frontend; the backend keeps those pages in its
persistent pool (sized by the ring, max_persistent_grants 8192) and reads
straight into them, with no grant copy.  Every run is verified (crc32c).
Counts, never timings."""
import os
import re
import subprocess
import time

from guest_fixtures import FIO, guest, fio_ok  # noqa: F401
from test_fio_engine import ENGINE, engine_env, xfio

MiB = 1 << 20
STATS = re.compile(r"xbd: (\w+) queue (\d+): (\d+) requests zero-copy, (\d+) bounced")


def engine_counts(stderr):
    """(zero-copy, bounced) summed over the jobs' xbd_stats lines."""
    found = STATS.findall(stderr)
    assert found, stderr
    return (sum(int(f[2]) for f in found), sum(int(f[3]) for f in found))


def write_verify(g, *extra):
    """32 MiB of 1 MiB writes at depth 16, then read back and checked."""
    r = xfio(g, "--rw=write", "--bs=1M", "--iodepth=16", "--size=32M",
             "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
             "--xbd_stats=1", *extra)
    out = fio_ok(r)
    assert out[0]["write_kb"] == out[0]["read_kb"] == 32 * 1024, out
    return engine_counts(r.stderr)


def test_engine_buffers_are_granted(guest):
    """With the hook, every write and every verify read uses fio's own
    buffer; with xbd_zero_copy=0 (fio's buffers in plain memory) every one
    is bounced: the counts come from the I/O path, not from a flag."""
    img = guest.disk(size=64 * MiB)
    guest.attach(img)
    direct, bounced = write_verify(guest)
    assert bounced == 0 and direct >= 64, (direct, bounced)
    direct, bounced = write_verify(guest, "--xbd_zero_copy=0")
    assert direct == 0 and bounced >= 64, (direct, bounced)
    with open(img, "rb") as f:                 # the data is on the disk
        assert any(f.read(32 * MiB))


def test_zero_copy_with_two_jobs_and_mixed_sizes(guest):
    """Two jobs (threads) share the disk and its one queue, each with its
    own granted buffers; block sizes that are not page multiples and
    offsets inside pages still go direct (sector aligned)."""
    guest.attach(guest.disk(size=64 * MiB))
    r = xfio(guest, "--thread", "--numjobs=2", "--xbd_max_queues=1",
             "--rw=randwrite", "--bsrange=512-200k", "--blockalign=512",
             "--iodepth=8", "--size=8M", "--offset_increment=16M",
             "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
             "--xbd_stats=1")
    out = fio_ok(r)
    assert len(out) == 2
    direct, bounced = engine_counts(r.stderr)
    assert bounced == 0 and direct > 0, (direct, bounced)


def start_backend_with_tree(g, *opts):
    """Replace the guest's backend by one serving its sysfs-style tree
    (order-3 rings); the vbd's statistics directory."""
    sysfs = g.restart_backend_with_tree("--max_ring_page_order=3", *opts)
    return os.path.join(sysfs, "bus/xen-backend/devices",
                        f"vbd-{g.domid}-51728", "statistics")


def run_sampled(g, stats_dir, args):
    """Run fio (engine) with args; sample the vbd's persistent_grants and
    buffer-pool pages while it runs.  Returns (fio result, samples)."""
    argv = [FIO, "--output-format=terse", "--terse-version=3",
            "--verify_state_save=0", "--name=x", f"--ioengine=external:{ENGINE}",
            "--xbd_domain=g1", "--xbd_vdev=xvdb", f"--xbd_rundir={g.rundir}",
            *args]
    fio = subprocess.Popen(argv, cwd=g.rundir, env=engine_env(g), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    samples = []
    try:
        deadline = time.monotonic() + 120
        while fio.poll() is None and time.monotonic() < deadline:
            try:
                s = {n: int(open(os.path.join(stats_dir, n)).read())
                     for n in ("persistent_grants", "pool_pages_in_use",
                               "pool_pages_free", "rd_req")}
                samples.append(s)
            except (OSError, ValueError):
                pass                           # not connected (yet, or any more)
            time.sleep(0.05)
        out, err = fio.communicate(timeout=60)
    finally:
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    return subprocess.CompletedProcess(argv, fio.returncode, out, err), samples


def test_backend_reads_into_the_granted_pages(guest):
    """1 MiB reads at depth 16 (4096 pages of fio's buffers): the backend's
    pool holds them all (more than Linux's 1056) and never takes a buffer
    page for a grant copy; the data read is the data written."""
    stats = start_backend_with_tree(guest)
    guest.attach(guest.disk(size=64 * MiB))
    fio_ok(xfio(guest, "--rw=write", "--bs=1M", "--iodepth=16", "--size=64M",
                "--verify=crc32c", "--do_verify=0", "--xbd_max_queues=1",
                "--xbd_max_ring_page_order=3"))
    r, samples = run_sampled(guest, stats, [
        "--rw=read", "--bs=1M", "--iodepth=16", "--size=64M", "--time_based",
        "--runtime=2", "--xbd_max_queues=1", "--xbd_max_ring_page_order=3",
        "--xbd_stats=1"])
    fio_ok(r)
    direct, bounced = engine_counts(r.stderr)
    assert bounced == 0 and direct >= 64, (direct, bounced)
    busy = [s for s in samples if s["rd_req"] > 0]
    assert busy, samples
    assert max(s["persistent_grants"] for s in busy) >= 4096, busy[-5:]
    assert all(s["pool_pages_in_use"] == 0 and s["pool_pages_free"] == 0
               for s in busy), busy
    # what the zero-copy reads bring is what was written
    fio_ok(xfio(guest, "--rw=read", "--bs=1M", "--iodepth=16", "--size=64M",
                "--verify=crc32c", "--verify_fatal=1", "--xbd_max_queues=1",
                "--xbd_max_ring_page_order=3"))


def test_pool_is_bounded_by_the_ring(guest):
    """A frontend whose ring can carry 32 x 11 grants at once (one ring
    page, a backend offering no indirect requests) cannot make the queue
    keep more mapped, however many pages it cycles through; what does not
    fit is copied, and the data stays right."""
    stats = start_backend_with_tree(guest, "--max_indirect_segments=0")
    guest.attach(guest.disk(size=64 * MiB))
    r, samples = run_sampled(guest, stats, [
        "--rw=write", "--bs=1M", "--iodepth=16", "--size=48M",
        "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
        "--xbd_max_queues=1", "--xbd_max_ring_page_order=0"])
    fio_ok(r)
    busy = [s for s in samples if s["persistent_grants"] > 0]
    assert busy, samples
    assert max(s["persistent_grants"] for s in busy) <= 32 * 11, busy
