# SPDX-License-Identifier: MIT
"""The raw driver's synchronous data path (the sync_io tunable,
Documentation/backend.md "Files in memory"): a file on tmpfs is read and
written with preadv/pwritev on the queue thread, not through io_uring
(which hands every such request to an io-wq worker).

- the tree: module parameter auto by default, Y/N/auto accepted, anything
  else refused; each vbd's sync_io file says what its storage got (Y for
  a /dev/shm file under auto, N for a file on another file system, N for
  a /dev/shm file opened after sync_io=N, Y for that file after Y);
- fio's crc32c verify through the engine on a /dev/shm disk at depth 1
  and 64, with writes, flushes and discards, in both modes; the
  discarded range reads back as zeros and is a hole in the file; the
  vbd's counters say exactly what fio did;
- with sync_io the backend has no io-wq worker thread (iou-wrk-*) at the
  end of the job, without it the same job has some (so the check can
  fail);
- sync_io_batch (the queue's helper thread): crc32c verify at depth 64
  with it on (the queue's helper_req says the helper did some of the
  requests) and off (none), at depth 1 never; a helper-served read that
  fails (past the end of a file cut short under the disk) is answered
  BLKIF_RSP_ERROR, exactly those requests, the others verify."""
import errno
import json
import os
import tempfile
import threading
import time

import pytest

from guest_fixtures import guest  # noqa: F401
from test_fio_engine import xfio
from tree_files import cat, echo

MiB = 1 << 20
PARAM = "module/xen_blkback/parameters/sync_io"
SHM = "/dev/shm"


def _fs_type(path):
    best, fstype = "", None
    with open("/proc/self/mounts") as f:
        for line in f:
            mnt, typ = line.split()[1], line.split()[2]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and \
                    len(mnt) >= len(best):
                best, fstype = mnt, typ
    return fstype


@pytest.fixture
def shm_disk():
    """A 64 MiB sparse file on /dev/shm (tmpfs), removed afterwards."""
    if not os.path.isdir(SHM) or _fs_type(SHM) != "tmpfs":
        pytest.skip(f"{SHM} is not a tmpfs mount on this machine")
    fd, path = tempfile.mkstemp(prefix="xbd-sync-io-", suffix=".img", dir=SHM)
    try:
        os.ftruncate(fd, 64 * MiB)
        os.close(fd)
        yield path
    finally:
        os.unlink(path)


def with_tree(g, *extra, queues=2, env=None):
    return g.restart_backend_with_tree(*extra, queues=queues, env=env)


def vbd_dir(g, vdev="xvdb"):
    num = {"xvdb": 51728, "xvdc": 51744}[vdev]
    return f"bus/xen-backend/devices/vbd-{g.domid}-{num}"


def counters(g, vdev="xvdb"):
    return {k: int(cat(g, f"{vbd_dir(g, vdev)}/statistics/{k}"))
            for k in ("rd_req", "wr_req", "f_req", "ds_req", "rd_sect",
                      "wr_sect", "errors")}


def test_tree_shows_the_mode(guest, shm_disk):
    with_tree(guest)
    assert cat(guest, PARAM) == "auto\n"
    for bad in ("maybe", "2", "autox", " auto"):
        assert echo(guest, PARAM, bad) == errno.EINVAL, bad
        assert cat(guest, PARAM) == "auto\n", bad
    # auto: the tmpfs file gets it, a file on the run directory's file
    # system (not tmpfs here, else the second half says nothing) not
    guest.attach(shm_disk, "xvdb")
    assert cat(guest, f"{vbd_dir(guest)}/sync_io") == "Y\n"
    other = guest.disk()
    if _fs_type(other) in ("tmpfs", "ramfs", "hugetlbfs"):
        pytest.skip(f"the run directory {guest.rundir} is in memory too")
    guest.attach(other, "xvdc")
    assert cat(guest, f"{vbd_dir(guest, 'xvdc')}/sync_io") == "N\n"
    assert echo(guest, f"{vbd_dir(guest)}/sync_io", "N") == errno.EACCES
    guest.detach("xvdc")
    # N and Y apply to storage opened from then on
    assert echo(guest, PARAM, "N\n") == 0 and cat(guest, PARAM) == "N\n"
    assert cat(guest, f"{vbd_dir(guest)}/sync_io") == "Y\n"   # kept
    guest.detach("xvdb")
    guest.attach(shm_disk, "xvdb")
    assert cat(guest, f"{vbd_dir(guest)}/sync_io") == "N\n"
    guest.detach("xvdb")
    assert echo(guest, PARAM, "y") == 0 and cat(guest, PARAM) == "Y\n"
    guest.attach(other, "xvdc")
    assert cat(guest, f"{vbd_dir(guest, 'xvdc')}/sync_io") == "Y\n"
    assert echo(guest, PARAM, "auto") == 0 and cat(guest, PARAM) == "auto\n"


def fio_counting(g, *args, ok=True):
    """One fio job through the engine; the vbd's counters as its
    exec_postrun saw them (fio runs it after the job's I/O, before the
    engine closes the disk: the counters live as long as the queues).
    Returns (counters, the job's terse fields)."""
    snap = os.path.join(g.rundir, "counters")
    script = os.path.join(g.rundir, "snap.sh")
    stats = os.path.join(g.rundir, "sys", vbd_dir(g), "statistics")
    # and the backend's io-wq worker threads (comm iou-wrk-*): they are
    # the queue threads' and end with them when the disk closes
    with open(script, "w") as f:
        f.write(f"cd {stats} && {{ for n in *; do echo \"$n $(cat $n)\"; done;"
                f" echo \"iou_wrk $(cat /proc/{g.backend.pid}/task/*/comm"
                f" | grep -c ^iou-wrk)\"; echo \"q0_helper_req"
                f" $(cat ../queue-0/helper_req)\"; }} > {snap}.tmp && mv {snap}.tmp {snap}\n")
    if os.path.exists(snap):
        os.unlink(snap)
    r = xfio(g, *args, f"--exec_postrun=sh {script}", "--output-format=json")
    assert "Sanitizer" not in r.stderr, r.stderr
    assert r.returncode == 0 or not ok, (r.stdout, r.stderr)
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    assert job["error"] == 0 or not ok, job
    with open(snap) as f:
        c = dict(line.split(" ", 1) for line in f.read().splitlines())
    return {k: int(c[k]) for k in ("rd_req", "wr_req", "f_req", "ds_req",
                                   "rd_sect", "wr_sect", "errors",
                                   "helper_req", "q0_helper_req",
                                   "iou_wrk")}, job


@pytest.mark.parametrize("sync", ["Y", "N"])
@pytest.mark.parametrize("depth", [1, 64])
def test_verify_flush_discard_on_tmpfs(guest, shm_disk, sync, depth):
    with_tree(guest, f"--sync_io={sync}")
    guest.attach(shm_disk)
    assert cat(guest, f"{vbd_dir(guest)}/sync_io") == f"{sync}\n"
    # 8 MiB of 4k random writes with a flush every 16, all read back
    c, out = fio_counting(guest, "--rw=randwrite", "--bs=4k",
                          f"--iodepth={depth}", "--size=8M", "--fsync=16",
                          "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
    assert out["write"]["io_kbytes"] == 8192, out["write"]
    assert out["read"]["io_kbytes"] == 8192, out["read"]
    # what fio did, exactly: 2048 writes and 2048 verify reads of 8
    # sectors, and as many flushes as fio says it issued (fsync=16: one
    # after each 16th write, but more at depth 64, where fio issues one
    # whenever it finds the 16th write's count when it queues); nothing
    # failed
    assert out["sync"]["total_ios"] > 0, out["sync"]
    workers = c.pop("iou_wrk")
    c.pop("helper_req"), c.pop("q0_helper_req")
    assert c == dict(wr_req=2048, wr_sect=2048 * 8, rd_req=2048,
                     rd_sect=2048 * 8, f_req=out["sync"]["total_ios"], ds_req=0,
                     errors=0), c
    # then the first 2 MiB discarded in 64k pieces
    c, out = fio_counting(guest, "--rw=trim", "--bs=64k", f"--iodepth={depth}",
                          "--size=2M")
    assert out["trim"]["io_kbytes"] == 2048, out["trim"]
    c.pop("iou_wrk")
    c.pop("helper_req"), c.pop("q0_helper_req")
    assert c == dict(wr_req=0, wr_sect=0, rd_req=0, rd_sect=0, f_req=0,
                     ds_req=32, errors=0), c
    # the discarded range is a hole of zeros, the rest is fio's data
    with open(shm_disk, "rb") as f:
        assert f.read(2 * MiB) == bytes(2 * MiB)
        assert any(f.read(6 * MiB))
    fd = os.open(shm_disk, os.O_RDONLY)
    try:
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
    finally:
        os.close(fd)
    # the workers while the disk was open, after the verify: none with
    # sync_io, some without
    if sync == "Y":
        assert workers == 0, workers
    elif workers == 0:
        pytest.skip("this kernel reads tmpfs through io_uring without io-wq "
                    "workers: the worker check cannot fail here")


BATCH = "module/xen_blkback/parameters/sync_io_batch"
# the helper is offered work only while the machine has a CPU to spare
# (storage/raw.c); the tests run on busy machines too
HELPER_ANY_LOAD = {"XBD_TEST_HELPER_IGNORE_LOAD": "1"}


@pytest.mark.parametrize("batch", ["8", "0"])
def test_helper_takes_deep_batches(guest, shm_disk, batch):
    """A sync_io queue shares a batch of at least sync_io_batch reads
    and writes with its helper thread; 0 keeps all on the queue thread.
    Depth 1 never reaches the helper."""
    with_tree(guest, "--sync_io=Y", f"--sync_io_batch={batch}", queues=1,
              env=HELPER_ANY_LOAD)
    assert cat(guest, BATCH) == f"{batch}\n"
    for bad in ("-1", "4097", "x"):
        assert echo(guest, BATCH, bad) == errno.EINVAL, bad
        assert cat(guest, BATCH) == f"{batch}\n", bad
    guest.attach(shm_disk)
    c, out = fio_counting(guest, "--thread", "--rw=randwrite", "--bs=4k", "--iodepth=64",
                          "--iodepth_batch_submit=64", "--size=8M",
                          "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
    assert out["write"]["io_kbytes"] == 8192 and out["read"]["io_kbytes"] == 8192, out
    assert (c["wr_req"], c["rd_req"], c["errors"]) == (2048, 2048, 0), c
    assert c["q0_helper_req"] == c["helper_req"], c    # one queue: all of it
    if batch == "0":
        assert c["helper_req"] == 0, c
    else:
        assert 0 < c["helper_req"] <= c["wr_req"] + c["rd_req"], c
    c, out = fio_counting(guest, "--thread", "--rw=randread", "--bs=4k", "--iodepth=1",
                          "--size=8M", "--io_size=2M")
    assert (c["rd_req"], c["errors"], c["helper_req"]) == (512, 0, 0), c


def test_helper_failures_are_its_requests(guest, shm_disk):
    """Reads past the end of a file cut short under the open disk (the
    disk keeps its size) fail: each is answered BLKIF_RSP_ERROR, the
    helper serving some of them, and every read below the cut still
    verifies (an answer given to the wrong request would fail one or
    the other)."""
    with_tree(guest, "--sync_io=Y", "--sync_io_batch=8", queues=1,
              env=HELPER_ANY_LOAD)
    guest.attach(shm_disk)
    c, _ = fio_counting(guest, "--thread", "--rw=write", "--bs=4k", "--iodepth=64",
                        "--size=8M", "--verify=crc32c", "--do_verify=0")
    assert c["errors"] == 0, c
    os.truncate(shm_disk, 4 * MiB)
    c, out = fio_counting(guest, "--thread", "--rw=read", "--bs=4k", "--iodepth=64",
                          "--iodepth_batch_submit=64", "--size=8M",
                          "--verify=crc32c", "--verify_only",
                          "--continue_on_error=io", ok=False)
    assert c["rd_req"] == 2048 and c["errors"] == 1024, c
    assert c["helper_req"] > 0, c
    assert out["total_err"] == 1024, out
    assert out["read"]["io_kbytes"] == 4096, out["read"]


def test_helper_under_verify_seen_live(guest, shm_disk):
    """The helper at work under fio's crc32c verify at depth 64 with two
    fio threads on two queues, its share read from the tree while the
    job runs (no exec_postrun: this is the test check-tsan runs, and
    under ThreadSanitizer's preload fio's system() shell dies)."""
    with_tree(guest, "--sync_io=Y", "--sync_io_batch=8", queues=2,
              env=HELPER_ANY_LOAD)
    guest.attach(shm_disk)
    stat = os.path.join(guest.rundir, "sys", vbd_dir(guest), "statistics",
                        "helper_req")
    seen, done = [0], threading.Event()

    def watch():
        while not done.is_set():
            try:
                with open(stat) as f:
                    seen[0] = max(seen[0], int(f.read()))
            except (OSError, ValueError):
                pass                     # not connected yet, or gone
            time.sleep(0.02)
    t = threading.Thread(target=watch)
    t.start()
    try:
        r = xfio(guest, "--thread", "--numjobs=2", "--xbd_max_queues=2",
                 "--rw=randwrite", "--bs=4k", "--iodepth=64",
                 "--iodepth_batch_submit=64", "--size=16M",
                 "--offset_increment=16M", "--loops=4", "--verify=crc32c",
                 "--do_verify=1", "--verify_fatal=1")
    finally:
        done.set()
        t.join()
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Sanitizer" not in r.stderr, r.stderr
    assert seen[0] > 0, "the helper served nothing the tree showed"
