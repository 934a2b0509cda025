# SPDX-License-Identifier: MIT
"""The sysfs-style tree of xbd-blkback, through the file system as an
administrator uses it (cat / echo): Linux's parameters with their
defaults and modes, sysfs write semantics (EINVAL / EACCES, the old value
kept), the per-device files, max_queues applying to the next device only,
and the mount's life: gone on exit, a killed backend's stale mount cleaned
by the next one.  I/O, the page pool and the squeeze are proven in
tests/unit/test_pressure_daemon.c (the test there is the guest)."""
import errno
import os
import signal
import stat
import subprocess
import time

import pytest

from conftest import binary
from tree_files import cat, echo
from xbd_fixtures import machine  # noqa: F401  (fixture)

PARAMS = "module/xen_blkback/parameters"
DEVICES = "bus/xen-backend/devices"

# Linux xen-blkback's parameters: (default, mode); max_queues is the CPUs.
LINUX = {
    "max_buffer_pages": ("1024", 0o644),
    "max_persistent_grants": ("8192", 0o644),  # Linux: 1056 (tunables.c)
    "persistent_grant_unused_seconds": ("60", 0o644),
    "max_queues": (str(os.cpu_count()), 0o644),
    "max_ring_page_order": ("4", 0o444),
    "log_stats": ("N", 0o644),
    "buffer_squeeze_duration_ms": ("10", 0o644),
    "feature_persistent": ("Y", 0o644),
}


@pytest.fixture
def backends(daemons, machine):
    """Backends started by a test, stopped before its rundir goes (the
    rundir fixture is torn down before `daemons`, and its removal must not
    walk a live tree)."""
    started = []
    yield started
    for d in started:
        d.stop()


def start_backend(daemons, m, *args, started=None, ready=None):
    tree = os.path.join(m.rundir, "sys", PARAMS, "max_queues")
    d = daemons.start([binary("xbd-blkback"), "-N", "-p", "local", "-R",
                       m.rundir, "-l", "info", *args],
                      ready=ready or (lambda: os.path.exists(tree)))
    started.append(d)
    return d


def open_files(pid):
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def test_parameters_as_linux(daemons, machine, backends):
    start_backend(daemons, machine, started=backends)
    names = set(os.listdir(os.path.join(machine.rundir, "sys", PARAMS)))
    assert set(LINUX) <= names
    assert names - set(LINUX) == {"max_indirect_segments", "grant_copy_max_bytes",
                                  "io_wait_poll", "max_queue_pages", "max_vbd_pages",
                                  "max_total_pages", "max_connects_per_second",
                                  "storage_outage_ms", "size_check_ms",
                                  "poll_duration_us", "sync_io", "sync_io_batch"} | {
        f"default_{k}{b}" for k in ("read_iops", "write_iops", "read_bps", "write_bps")
        for b in ("", "_burst")}
    for name, (default, mode) in LINUX.items():
        st = os.stat(os.path.join(machine.rundir, "sys", PARAMS, name))
        assert stat.S_IMODE(st.st_mode) == mode, name
        assert st.st_size == 4096
        assert cat(machine, f"{PARAMS}/{name}") == default + "\n", name


def test_echo_semantics(daemons, machine, backends):
    start_backend(daemons, machine, started=backends)
    p = f"{PARAMS}/max_buffer_pages"
    assert echo(machine, p, "5\n") == 0
    assert cat(machine, p) == "5\n"
    assert echo(machine, p, "77") == 0           # echo -n works too
    assert cat(machine, p) == "77\n"
    for bad in ("abc", "-1", "1048577", " 5", "5x", "\n", "99999999999999999999999"):
        assert echo(machine, p, bad) == errno.EINVAL, bad
        assert cat(machine, p) == "77\n", bad    # the old value stays
    # the memory budget (issue 18): at least one request's worth of pages
    q = f"{PARAMS}/max_queue_pages"
    assert cat(machine, q) == "16384\n"
    assert echo(machine, q, "1023") == errno.EINVAL and cat(machine, q) == "16384\n"
    assert echo(machine, q, "1024") == 0 and cat(machine, q) == "1024\n"
    b = f"{PARAMS}/feature_persistent"
    assert echo(machine, b, "n\n") == 0 and cat(machine, b) == "N\n"
    assert echo(machine, b, "maybe") == errno.EINVAL and cat(machine, b) == "N\n"
    # read-only: refused even for root, as sysfs does
    assert echo(machine, f"{PARAMS}/max_ring_page_order", "2") == errno.EACCES
    assert cat(machine, f"{PARAMS}/max_ring_page_order") == "4\n"
    # the pressure file takes 1 only, and counts
    mp = "module/xen_blkback/memory_pressure"
    assert cat(machine, mp) == "0\n"
    assert echo(machine, mp, "2") == errno.EINVAL
    assert echo(machine, mp, "1\n") == 0
    assert cat(machine, mp) == "1\n"
    # nothing else can be made or removed
    with pytest.raises(OSError):
        open(os.path.join(machine.rundir, "sys", PARAMS, "new"), "w")
    with pytest.raises(OSError):
        os.unlink(os.path.join(machine.rundir, "sys", p))


def test_devices_and_max_queues_next_connection(daemons, machine, backends, tmp_path):
    start_backend(daemons, machine, "--max_queues=2", started=backends)
    dom = machine.create("guest")
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * (1 << 20))
    machine.ok("block-attach", "guest", f"{img},raw,xvda,w")
    vbd = f"{DEVICES}/vbd-{dom}-51712"
    be = f"/local/domain/0/backend/vbd/{dom}/51712"
    assert cat(machine, f"{vbd}/mode") == "w\n"
    assert cat(machine, f"{vbd}/state") == "InitWait\n"
    assert cat(machine, f"{vbd}/physical_device") == "0:0\n"
    assert cat(machine, f"{vbd}/nodename") == be + "\n"
    assert cat(machine, f"{vbd}/storage") == f"raw {img}\n"
    assert cat(machine, f"{vbd}/sectors") == f"{(1 << 20) // 512}\n"
    for counter in ("oo_req", "rd_req", "wr_req", "f_req", "ds_req", "rd_sect",
                    "wr_sect"):
        assert cat(machine, f"{vbd}/statistics/{counter}") == "0\n"
        assert echo(machine, f"{vbd}/statistics/{counter}", "5") == errno.EACCES
    # each statistic once (a name listed twice once shifted the values of
    # adopted and replayed_req onto the duplicates)
    names = os.listdir(os.path.join(machine.rundir, "sys", vbd, "statistics"))
    assert len(names) == len(set(names)), sorted(names)
    assert {"adopted", "replayed_req", "persistent_grants"} <= set(names)
    assert cat(machine, f"{vbd}/statistics/adopted") == "0\n"
    assert echo(machine, f"{vbd}/mode", "r") == errno.EACCES
    assert machine.read(f"{be}/multi-queue-max-queues") == "2"

    # max_queues applies to the next device, not to the one offered already
    assert echo(machine, f"{PARAMS}/max_queues", "1") == 0
    machine.ok("block-attach", "guest", f"{img},raw,xvdb,r")
    assert machine.read(f"{be}/multi-queue-max-queues") == "2"
    be2 = f"/local/domain/0/backend/vbd/{dom}/51728"
    assert machine.read(f"{be2}/multi-queue-max-queues") == "1"
    assert cat(machine, f"{DEVICES}/vbd-{dom}-51728/mode") == "r\n"
    assert sorted(os.listdir(os.path.join(machine.rundir, "sys", DEVICES))) == \
        [f"vbd-{dom}-51712", f"vbd-{dom}-51728"]

    machine.ok("block-detach", "guest", "xvdb")
    assert os.listdir(os.path.join(machine.rundir, "sys", DEVICES)) == \
        [f"vbd-{dom}-51712"]


def test_mount_life(daemons, machine, backends):
    sysdir = os.path.join(machine.rundir, "sys")
    be = start_backend(daemons, machine, started=backends)
    assert mounted(sysdir)
    assert be.kill() == -signal.SIGKILL
    with pytest.raises(OSError) as e:
        os.stat(sysdir)
    assert e.value.errno == errno.ENOTCONN          # the stale mount

    be = start_backend(daemons, machine, started=backends)            # cleans it, mounts anew
    assert cat(machine, f"{PARAMS}/max_buffer_pages") == "1024\n"
    assert "stale mount" in be.log_text()
    assert be.stop() == 0
    assert not mounted(sysdir)
    assert not os.path.exists(sysdir)

    # --sysfs DIR, and --sysfs none
    other = os.path.join(machine.rundir, "elsewhere")
    be = start_backend(daemons, machine, "--sysfs", other, started=backends,
                       ready=lambda: os.path.exists(f"{other}/{PARAMS}"))
    assert not os.path.exists(sysdir)
    assert be.stop() == 0 and not mounted(other)
    be = start_backend(daemons, machine, "--sysfs", "none", "--pressure", "psi",
                       started=backends, ready=lambda: True)
    assert wait_for(lambda: "/proc/pressure/memory" in open_files(be.pid))
    assert be.stop() == 0
    assert not os.path.exists(sysdir)


def test_bad_pressure_spec(machine):
    p = subprocess.run([binary("xbd-blkback"), "-N", "-p", "local", "-R",
                        machine.rundir, "--sysfs", "none", "--pressure", "bogus"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "--pressure bogus: Invalid argument" in p.stderr


def cgroup2_mount():
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup on Debian
    12, /sys/fs/cgroup/unified on a hybrid layout), or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"] and left.split()[3] == "/":
                return left.split()[4]
    return None


def own_cgroup2_pressure(pid):
    """The memory.pressure of pid's cgroup v2 group, if it can be armed."""
    mnt = cgroup2_mount()
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::") and mnt:
                path = line[3:].strip().rstrip("/")
                file = f"{mnt}{path}/memory.pressure"
                if os.access(file, os.W_OK):
                    return file
    return None


def test_pressure_auto_is_the_default_and_says_which(daemons, machine, backends):
    """No --pressure: auto, which arms the backend's own cgroup v2
    memory.pressure when there is one, else /proc/pressure/memory, and
    logs the choice; --pressure none arms nothing."""
    be = start_backend(daemons, machine, "--sysfs", "none", started=backends,
                       ready=lambda: True)
    assert wait_for(lambda: "--pressure auto: " in be.log_text()), be.log_text()
    want = own_cgroup2_pressure(be.pid)
    if want:
        assert f"--pressure auto: psi:{want} (the service's cgroup v2)" in be.log_text()
    else:
        assert ("--pressure auto: psi:/proc/pressure/memory (system-wide PSI)"
                in be.log_text()), be.log_text()
    assert wait_for(lambda: (want or "/proc/pressure/memory") in open_files(be.pid))
    print(be.log_text())
    assert be.stop() == 0
    be = start_backend(daemons, machine, "--sysfs", "none", "--pressure", "none",
                       started=backends, ready=lambda: True)
    time.sleep(0.5)
    assert not any(f.endswith("/memory.pressure") or f.startswith("/proc/pressure")
                   for f in open_files(be.pid))
    assert "--pressure" not in be.log_text()
    assert be.stop() == 0


def test_pressure_auto_picks_the_services_cgroup(daemons, machine, backends):
    """The backend started in a cgroup v2 group of its own, as systemd
    starts the shipped unit: auto arms that group's memory.pressure."""
    mnt = cgroup2_mount()
    if not mnt:
        pytest.skip("no cgroup v2 hierarchy mounted; "
                    "test_pressure_auto_is_the_default_and_says_which "
                    "proves the choice of the system-wide PSI")
    group = os.path.join(mnt, f"xbd-test-auto-{os.getpid()}")
    try:
        os.mkdir(group)
    except OSError as e:
        pytest.skip(f"cannot make a cgroup v2 group ({e.strerror}): not "
                    "delegated to us; test_pressure_auto_is_the_default_and_"
                    "says_which proves the choice")
    try:
        argv = [binary("xbd-blkback"), "-N", "-p", "local", "-R",
                machine.rundir, "-l", "info", "--sysfs", "none"]
        be = daemons.start(["sh", "-c", f'echo $$ > "{group}/cgroup.procs" && exec "$@"',
                            "sh", *argv], ready=lambda: True)
        backends.append(be)
        want = f"--pressure auto: psi:{group}/memory.pressure (the service's cgroup v2)"
        assert wait_for(lambda: want in be.log_text()), be.log_text()
        assert f"{group}/memory.pressure" in open_files(be.pid)
        assert be.stop() == 0
    finally:
        for _ in range(100):
            try:
                os.rmdir(group)
                break
            except OSError:
                time.sleep(0.05)


def test_shipped_unit_passes_pressure_auto():
    """The systemd unit names the choice (it is also the default)."""
    unit = os.path.join(os.path.dirname(__file__), "..", "..", "tools",
                        "hotplug", "xbd-blkback.service.in")
    with open(unit) as f:
        lines = f.read().splitlines()
    execs = [line for line in lines if line.startswith("ExecStart=")]
    assert len(execs) == 1 and "$XBD_BLKBACK_PRESSURE" in execs[0], execs
    assert "Environment=XBD_BLKBACK_PRESSURE=--pressure=auto" in lines, lines
