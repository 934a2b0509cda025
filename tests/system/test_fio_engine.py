# SPDX-License-Identifier: MIT
"""The fio external ioengine (xbd-fio.so) in Debian's fio 3.33: the fio
process is the guest.  Verify (crc32c, md5, pattern) on every workload,
1 and 2 jobs, 1 and 2 queues; asynchronous depth; errors reported by fio
with the right errno; the data lands in the backing file."""
import os
import subprocess

import pytest

from conftest import BUILD, TSAN_OPTIONS
from guest_fixtures import guest, fio_ok  # noqa: F401

MiB = 1 << 20
ENGINE = os.path.join(BUILD, "lib", "xbd-fio.so")


def sanitizer_preload(names=("libasan.so", "libubsan.so")):
    """The sanitizer build's engine needs the sanitizer runtimes first in
    the (uninstrumented) fio process."""
    libs = []
    for name in names:
        r = subprocess.run(["gcc", f"-print-file-name={name}"],
                           capture_output=True, text=True)
        path = os.path.realpath(r.stdout.strip())
        if os.path.exists(path):
            libs.append(path)
    return " ".join(libs)


def engine_env(g):
    env = dict(g.env)
    if "-asan" in BUILD:
        env["LD_PRELOAD"] = sanitizer_preload()
        # fio itself is not built for LeakSanitizer; the engine's own
        # cleanup is checked by the cycle tests of libxbdfront.
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0"
    elif "-tsan" in BUILD:
        # fio's own accesses are not instrumented (unseen), its thread
        # and lock calls are: the engine's threads are checked.
        env["LD_PRELOAD"] = sanitizer_preload(("libtsan.so",))
        env.setdefault("TSAN_OPTIONS", TSAN_OPTIONS)
    return env


def xfio(g, *args, vdev="xvdb", timeout=180):
    return g.fio("--name=x", f"--ioengine=external:{ENGINE}",
                 "--xbd_domain=g1", f"--xbd_vdev={vdev}",
                 f"--xbd_rundir={g.rundir}", *args, timeout=timeout,
                 env=engine_env(g))


@pytest.mark.parametrize("jobs,queues", [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_verify_jobs_and_queues(guest, jobs, queues):
    img = guest.disk(size=64 * MiB)
    guest.attach(img)
    r = xfio(guest, "--thread", f"--numjobs={jobs}",
             f"--xbd_max_queues={queues}", "--rw=randwrite", "--bs=4k",
             "--iodepth=32", "--size=8M", "--offset_increment=16M",
             "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
    out = fio_ok(r)
    assert len(out) == jobs
    for o in out:                      # every job wrote, then read it all back
        assert o["write_kb"] == 8192 and o["read_kb"] == 8192, o
    with open(img, "rb") as f:
        for j in range(jobs):
            f.seek(j * 16 * MiB)
            assert any(f.read(8 * MiB)), j


def test_depth_above_the_queues_descriptors(guest):
    """iodepth 512 on a ring of 32 entries (128 descriptors): the engine's
    batch waits for descriptors, reaping meanwhile, and verify passes."""
    guest.attach(guest.disk(size=64 * MiB))
    r = xfio(guest, "--rw=randwrite", "--bs=4k", "--iodepth=512",
             "--iodepth_batch_submit=512", "--xbd_max_ring_page_order=0",
             "--size=16M", "--verify=crc32c", "--do_verify=1",
             "--verify_fatal=1")
    out = fio_ok(r)
    assert out[0]["write_kb"] == 16384 and out[0]["read_kb"] == 16384, out


@pytest.mark.parametrize("verify", ["md5", "pattern"])
def test_verify_mixed_sizes(guest, verify):
    guest.attach(guest.disk(size=32 * MiB))
    extra = (["--verify_pattern=0x5a6b7c8d"] if verify == "pattern" else [])
    r = xfio(guest, "--rw=randwrite", "--bsrange=4k-256k", "--iodepth=16",
             "--size=16M", f"--verify={verify}", "--do_verify=1",
             "--verify_fatal=1", *extra)
    fio_ok(r)


def test_async_depth_and_size_from_backend(guest):
    """No size= given: fio takes the disk's size from the engine; the
    reported depth distribution shows I/O really in flight at once."""
    guest.attach(guest.disk(size=16 * MiB))
    r = xfio(guest, "--rw=randread", "--bs=4k", "--iodepth=32",
             "--io_size=8M", "--output-format=json")
    assert r.returncode == 0, r.stderr
    import json
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    assert job["read"]["io_bytes"] == 8 * MiB
    depth = job["iodepth_level"]
    assert depth[">=64"] + depth["32"] + depth["16"] > 50, depth


def test_read_only_disk_fails_writes_with_erofs(guest):
    img = guest.disk(size=8 * MiB)
    with open(img, "r+b") as f:
        f.write(b"\x11" * MiB)
    guest.attach(img, access="ro")
    r = xfio(guest, "--rw=write", "--bs=4k", "--size=1M",
             "--output-format=terse", "--terse-version=3")
    assert r.returncode != 0
    assert "Read-only file system" in r.stderr or ";30;" in r.stdout, (r.stdout, r.stderr)
    with open(img, "rb") as f:
        assert f.read(MiB) == b"\x11" * MiB


def test_bad_options_are_clear_errors(guest):
    guest.attach(guest.disk(size=8 * MiB))
    r = xfio(guest, "--rw=read", "--size=1M", "--xbd_max_queues=0")
    assert r.returncode != 0 and "xbd: bad xbd_max_queues" in r.stderr
    r = xfio(guest, "--rw=read", "--size=1M", vdev="xvdq")
    assert r.returncode != 0 and "xbd:" in r.stderr


def test_jobs_on_different_disks_of_one_domain(guest):
    """xbd_vdev per job: one fio process (threads) is the domain once and
    drives two of its disks at the same time, verified."""
    imgs = {v: guest.disk(f"{v}.img", size=16 * MiB) for v in ("xvdb", "xvdc")}
    for v, img in imgs.items():
        guest.attach(img, vdev=v)
    r = guest.fio("--thread", f"--ioengine=external:{ENGINE}",
                  "--xbd_domain=g1", f"--xbd_rundir={guest.rundir}",
                  "--xbd_max_queues=2", "--rw=randwrite", "--bs=4k",
                  "--iodepth=16", "--size=8M", "--verify=crc32c",
                  "--do_verify=1", "--verify_fatal=1",
                  "--name=b", "--xbd_vdev=xvdb", "--numjobs=2",
                  "--offset_increment=8M", "--size=4M",
                  "--name=c", "--xbd_vdev=xvdc",
                  env=engine_env(guest), timeout=180)
    out = fio_ok(r)
    assert sorted(o["name"] for o in out) == ["b", "b", "c"], out
    for o in out:
        assert o["write_kb"] == o["read_kb"] > 0, o
    for v, img in imgs.items():
        with open(img, "rb") as f:
            assert any(f.read(8 * MiB)), v


def test_jobs_as_processes_get_a_clear_error(guest):
    """Without --thread each job is a process; the domain has one claimer,
    so the second job fails at once with one line that says what to do
    (no hang, no bare EBUSY)."""
    guest.attach(guest.disk(size=16 * MiB))
    r = xfio(guest, "--numjobs=2", "--rw=randread", "--bs=4k",
             "--iodepth=4", "--size=4M", "--time_based", "--runtime=3",
             timeout=60)
    assert r.returncode != 0, r.stdout
    lines = [x for x in r.stderr.splitlines() if x.startswith("xbd:")]
    assert len(lines) == 1, r.stderr
    assert "is claimed by process" in lines[0], lines
    assert "add --thread" in lines[0], lines


@pytest.mark.parametrize("queues", [1, 2])
def test_backend_restart_under_verify(guest, queues):
    """The backend is killed (SIGKILL) and started again while the engine
    has writes in flight: the job finishes, every block verified."""
    img = guest.disk(size=32 * MiB)
    guest.attach(img)
    fe = f"/local/domain/{guest.domid}/device/vbd/51728/state"
    # the job is connected and writing before the backend goes
    r = guest.fio_under_backend_restart(
        ["--name=x", f"--ioengine=external:{ENGINE}",
         "--xbd_domain=g1", "--xbd_vdev=xvdb", f"--xbd_rundir={guest.rundir}",
         "--thread", f"--numjobs={queues}", f"--xbd_max_queues={queues}",
         "--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=12M",
         # at least 2 s of writing, however fast the machine: the kill
         # must land while the job runs
         "--rate_iops=1500",
         "--offset_increment=16M", "--verify=md5", "--do_verify=1",
         "--verify_fatal=1"], env=engine_env(guest),
        ready=lambda: guest.xd.tool("xenstore-read", fe, check=False)
        .stdout.strip() == "4")
    res = fio_ok(r)
    assert len(res) == queues
    for o in res:
        assert o["write_kb"] == o["read_kb"] == 12 * 1024, o
