# SPDX-License-Identifier: MIT
"""A restarted xbd-blkback adopts the rings of a Connected frontend
(Documentation/backend.md, "Restart"): a frontend that never reconnects
(xbdfront-io --no-recover, which closes the disk on a backend Closed as
Linux xen-blkfront does) keeps a verified workload running while the
backend is SIGKILLed and restarted at random moments, its state never
leaves Connected, and the journals go away on detach.  A corrupt, foreign
or missing journal falls back to the Closed scheme without a crash.

Every frontend here runs with XBDFRONT_TEST_EVENTS_ONLY=1: it looks at
its ring only after an event, never on a timeout's re-check, exactly as
Linux xen-blkfront, so a restart that leaves a response published but
never announced hangs the test instead of costing 10-100 ms (issue 20).
XBD_TEST_KILL_BEFORE_NOTIFY=N (a test-only hook of the backend) makes a
backend SIGKILL itself at its N-th notification of a queue, in exactly
that window."""
import fnmatch
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from conftest import binary, sanitizer_env
from frontend_fixtures import BE, FE, attach, frontend_argv, xbd
from xenstored_fixtures import xenstored  # noqa: F401

JOURNAL = "journal/vbd-0-1-51712.q{}"


EVENTS_ONLY = {"XBDFRONT_TEST_EVENTS_ONLY": "1"}


def blkback(daemons, xd, name, tree=False, **env):
    """tree: with the sysfs-style tree at $rundir/sys (needs FUSE)."""
    return daemons.start([binary("xbd-blkback"), "-N", "-p", "local", "-R",
                          xd.rundir, "-l", "info", "--max_queues=2",
                          "--max_ring_page_order=2",
                          *(() if tree else ("--sysfs=none",))],
                         name=name, env=dict(xd.env, **env))


class StateWatch:
    """Records every write to the frontend's and the backend's state node
    (a xenstore watch: no change can slip between two polls)."""

    def __init__(self, xd):
        self.conn = xd.conn()
        self.seen = []
        self.stop = threading.Event()
        for path in (FE + "/state", BE + "/state"):
            self.conn.call("WATCH", path, "adopt")
            self.conn.event()               # the one every watch fires at once
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                path, _ = self.conn.event(timeout=0.1)
            except (OSError, TimeoutError):
                continue
            path = path.decode()
            self.seen.append((path, self.conn.read(path).rstrip(b"\0").decode()))

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.conn.close()
        return self.seen


def writer(xd, *opts, nbytes=1 << 30):
    return subprocess.Popen(
        frontend_argv(xd, "--timeout", "10000", "--queues", "2",
                      "--ring-order", "2", *opts, "--bytes", str(nbytes),
                      "--seed", "7", "1", "xvda", "verify"),
        env=sanitizer_env(dict(xd.env, **EVENTS_ONLY)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def reap(w):
    """The writer is gone when this returns (killed if it still ran)."""
    if w.poll() is None:
        w.kill()
        w.wait()


def finish(w, timeout=180):
    try:
        out, err = w.communicate(timeout=timeout)
    finally:
        reap(w)
    return w.returncode, out, err


def assert_verified(rc, out, err):
    assert rc == 0, (out, err)
    assert out.startswith("verified "), out


def stats(xd, be):
    """The vbd's line of the SIGUSR1 statistics dump, as a dict."""
    path = os.path.join(xd.rundir, "xbd-blkback.stats")
    if os.path.exists(path):
        os.unlink(path)
    be.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                line = f.read()
            if line.endswith("\n"):
                # "vbd-D-N: key value ... lat_us from:count from:count"
                head, _, lat = line.partition(" lat_us")
                words = head.split()[1:]
                out = {k: v for k, v in zip(words[0::2], words[1::2])}
                out["lat_us"] = lat.strip()
                return out
        time.sleep(0.02)
    raise AssertionError("no statistics dump")


def wait_for(cond, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def state(xd, node):
    c = xd.conn()
    try:
        return c.read(node + "/state").rstrip(b"\0").decode()
    finally:
        c.close()


def journals(xd):
    d = os.path.join(xd.rundir, "journal")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_sigkill_restarts_are_invisible_to_a_frontend_that_never_recovers(
        daemons, xenstored):
    rng = random.Random(int(os.environ.get("XBD_TEST_SEED", "1")))
    be = blkback(daemons, xenstored, "blkback-0")
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored, "--no-recover")
    watch = None
    replayed = 0
    try:
        wait_for(lambda: journals(xenstored) == [JOURNAL.format(0)[8:],
                                                  JOURNAL.format(1)[8:]],
                 "a journal per queue once connected")
        wait_for(lambda: state(xenstored, FE) == state(xenstored, BE) == "4",
                 "both ends Connected")
        watch = StateWatch(xenstored)
        for n in range(1, 6):
            time.sleep(rng.uniform(0.2, 0.7))
            assert w.poll() is None, w.communicate()
            be.stop(signal.SIGTERM if n == 3 else signal.SIGKILL)
            time.sleep(rng.uniform(0.0, 0.3))      # the frontend goes on pushing
            be = blkback(daemons, xenstored, f"blkback-{n}")
            wait_for(lambda: "adopted 2 queue(s)" in be.log_text(),
                     f"restart {n} adopts:\n" + be.log_text())
            s = stats(xenstored, be)
            assert s["adopted"] == "2", s
            replayed += int(s["replayed_req"])
        rc, out, err = finish(w)
        seen = watch.close()
        watch = None
    finally:
        if watch:
            watch.close()
        reap(w)
    assert_verified(rc, out, err)
    # The first write to either state node is the frontend's own close at
    # the end: no Closed, InitWait or Initialising from any restart.
    assert seen and seen[0][0] == FE + "/state" and seen[0][1] in ("5", "6"), seen
    print(f"requests re-run over 5 restarts: {replayed}")
    # The frontend closed: the connection and its journals are gone.
    wait_for(lambda: journals(xenstored) == [], "journals removed on close")
    xbd(xenstored, "block-detach", "1", "xvda", "--timeout", "10")
    assert journals(xenstored) == []
    assert "cannot adopt" not in be.log_text()


def test_without_adoption_the_no_recover_frontend_loses_its_disk(daemons, xenstored):
    """The control for the test above: the same frontend against a restart
    that must reset the rings (its journals removed) fails its I/O."""
    be = blkback(daemons, xenstored, "blkback-0")
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored, "--no-recover", nbytes=256 << 20)
    try:
        wait_for(lambda: len(journals(xenstored)) == 2, "journals")
        time.sleep(0.5)
        be.stop(signal.SIGKILL)
        for j in journals(xenstored):
            os.unlink(os.path.join(xenstored.rundir, "journal", j))
        be = blkback(daemons, xenstored, "blkback-1")
        rc, out, err = finish(w, timeout=60)
    finally:
        reap(w)
    assert rc != 0 and "verified" not in out, (out, err)
    assert "cannot adopt the rings" in be.log_text()


def corrupt_garbage(xd, path):
    with open(path, "r+b") as f:
        f.seek(300)
        f.write(bytes(random.Random(3).getrandbits(8) for _ in range(4096)))


def corrupt_header(xd, path):
    with open(path, "r+b") as f:
        f.write(b"\xff" * 8)


def truncate(xd, path):
    os.truncate(path, 100)


def foreign_generation(xd, path):
    c = xd.conn()
    try:
        c.write(BE + "/xbd-generation", "12345")
    finally:
        c.close()


def test_bad_journal_falls_back_to_closed(daemons, xenstored):
    """Each kind of bad journal: the restarted backend refuses to adopt,
    says Closed, and the (recovering) frontend goes on with fresh rings;
    no crash, the data verified."""
    be = blkback(daemons, xenstored, "blkback-0")
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored)
    kinds = (corrupt_garbage, corrupt_header, truncate, foreign_generation)
    try:
        for n, spoil in enumerate(kinds, 1):
            wait_for(lambda: len(journals(xenstored)) == 2, "journals")
            # the journals come before Connected: a kill between the two
            # is a restart during the handshake, not one to adopt after
            wait_for(lambda: state(xenstored, FE) == state(xenstored, BE) == "4",
                     f"{spoil.__name__}: both ends Connected")
            time.sleep(0.3)
            assert w.poll() is None, w.communicate()
            be.stop(signal.SIGKILL)
            spoil(xenstored, os.path.join(xenstored.rundir, JOURNAL.format(0)))
            be = blkback(daemons, xenstored, f"blkback-{n}")
            wait_for(lambda: "cannot adopt the rings" in be.log_text(),
                     f"{spoil.__name__}: fallback\n" + be.log_text())
            # fresh rings: the frontend reconnected (not adopted)
            wait_for(lambda: state(xenstored, BE) == state(xenstored, FE) == "4",
                     f"{spoil.__name__}: reconnected")
            assert "adopted" not in be.log_text()
        be.stop(signal.SIGTERM)
        be = blkback(daemons, xenstored, "blkback-last")
        rc, out, err = finish(w)
    finally:
        reap(w)
    assert_verified(rc, out, err)


def test_stale_journals_are_ignored_and_removed(daemons, xenstored):
    """Journals left in the run directory by some earlier machine: the
    backend that probes the device (frontend not Connected) removes them
    and the connection that follows writes its own."""
    jdir = os.path.join(xenstored.rundir, "journal")
    os.makedirs(jdir)
    for q in (0, 1):
        with open(os.path.join(xenstored.rundir, JOURNAL.format(q)), "wb") as f:
            f.write(b"stale" * 1000)
    be = blkback(daemons, xenstored, "blkback-0")
    attach(xenstored, 32 << 20, "128M", 10)        # waits for InitWait
    assert journals(xenstored) == []
    w = writer(xenstored, "--no-recover", nbytes=16 << 20)
    rc, out, err = finish(w, timeout=60)
    assert rc == 0 and out.startswith("verified "), (out, err)
    wait_for(lambda: journals(xenstored) == [], "journals removed on close")
    assert "adopt" not in be.log_text()


def test_kills_during_adoption_itself(daemons, xenstored):
    """Ten SIGKILLs 0-100 ms apart, most of them while the new backend is
    still starting, loading the journal or re-running it: the last one
    adopts, the Linux-like writer never sees an error."""
    rng = random.Random(int(os.environ.get("XBD_TEST_SEED", "1")))
    be = blkback(daemons, xenstored, "blkback-0")
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored, "--no-recover", nbytes=512 << 20)
    try:
        wait_for(lambda: state(xenstored, FE) == "4", "frontend Connected")
        time.sleep(0.3)
        for n in range(1, 11):
            be.stop(signal.SIGKILL)
            be = blkback(daemons, xenstored, f"blkback-{n}")
            time.sleep(rng.uniform(0.0, 0.1))
        wait_for(lambda: "adopted 2 queue(s)" in be.log_text(),
                 "the last restart adopts:\n" + be.log_text())
        assert w.poll() is None, w.communicate()
        rc, out, err = finish(w)
    finally:
        reap(w)
    assert_verified(rc, out, err)
    assert state(xenstored, BE) == "6"          # followed the frontend's close


def test_killed_between_publish_and_notify_the_restart_notifies_first(
        daemons, xenstored):
    """The fault hook kills each backend right after it published a
    response the frontend asked to be told about, before the notify: the
    events-only writer is left waiting for an event only the restarted
    backend can send.  Each restart's first act on each queue is that
    notification (its log says so before anything else of the queue, and
    evt_out counts it), and the writer verifies its data.  Without the
    notification on adoption the writer waits for good and this fails."""
    hook = {"XBD_TEST_KILL_BEFORE_NOTIFY": "40"}
    be = blkback(daemons, xenstored, "blkback-0", **hook)
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored, "--no-recover", nbytes=64 << 20)
    try:
        for n in range(1, 4):
            wait_for(lambda: be.proc.poll() is not None or w.poll() is not None,
                     f"backend {n - 1} killed by the hook", 60)
            assert be.proc.returncode == -signal.SIGKILL, be.log_text()
            assert w.poll() is None, w.communicate()
            last = n == 3
            be = blkback(daemons, xenstored, f"blkback-{n}", **({} if last else hook))
            wait_for(lambda: "adopted 2 queue(s)" in be.log_text(),
                     f"restart {n} adopts:\n" + be.log_text())
            log = be.log_text()
            for q in (0, 1):
                assert f"queue {q}: adopted at rsp_prod" in log, log
            # a restart that carries the hook may be killed by it again
            # before it answers SIGUSR1; the last restart has no hook, so
            # its counters are always read
            try:
                s = stats(xenstored, be)
            except AssertionError:
                if last or be.proc.poll() is None:
                    raise
                continue
            assert int(s["evt_out"]) >= 2, s       # one per queue at least
        rc, out, err = finish(w, timeout=120)
    finally:
        reap(w)
    assert_verified(rc, out, err)


def test_backend_killed_under_a_detach_closes_the_device(daemons, xenstored):
    """The backend is frozen (SIGSTOP) when the toolstack detaches the
    disk (online 0, Closing) and killed once the frontend answered; the
    restarted backend still owes the toolstack its Closed: it probes the
    detached device, follows the frontend to Closed and the detach ends
    within its timeout (before, a restart ignored an offline device and
    the detach timed out)."""
    be = blkback(daemons, xenstored, "blkback-0")
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored, "--no-recover", nbytes=1 << 30)
    det = None
    try:
        wait_for(lambda: state(xenstored, FE) == state(xenstored, BE) == "4",
                 "both ends Connected")
        be.proc.send_signal(signal.SIGSTOP)
        det = subprocess.Popen([binary("xbd"), "--platform", "local", "block-detach",
                                "1", "xvda", "--timeout", "30"],
                               env=sanitizer_env(xenstored.env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        wait_for(lambda: state(xenstored, FE) in ("5", "6"), "the frontend closes", 30)
        be.stop(signal.SIGKILL)
        be = blkback(daemons, xenstored, "blkback-1")
        out, err = det.communicate(timeout=60)
        assert det.returncode == 0, (out, err, be.log_text())
        assert "probed" in be.log_text()
    finally:
        if det is not None and det.poll() is None:
            det.kill()
            det.wait()
        reap(w)
    assert journals(xenstored) == []


ABI = os.path.join(os.path.dirname(__file__), "..", "..", "Documentation",
                   "ABI", "testing", "sysfs-bus-xbd-backend")


def abi_entries():
    with open(ABI) as f:
        return [line.split("/sys/", 1)[1].strip() for line in f
                if line.startswith("What:") and "/sys/" in line]


def read_tree(vbd):
    """{dir: {name: value}} for statistics/ and every queue-N/."""
    out = {}
    for sub in sorted(os.listdir(vbd)):
        if sub != "statistics" and not sub.startswith("queue-"):
            continue
        names = os.listdir(os.path.join(vbd, sub))
        assert len(names) == len(set(names)), (sub, sorted(names))
        out[sub] = {}
        for n in names:
            with open(os.path.join(vbd, sub, n)) as f:
                out[sub][n] = f.read().strip()
    return out


def test_statistics_tree_matches_the_dump_after_adoption(daemons, xenstored):
    """Every statistic of the tree, after real I/O and a real adoption:
    one file per name in statistics/ and each queue-N/ (no duplicate in
    readdir), each named by an ABI entry, each with the SIGUSR1 dump's
    value (adopted 2, replayed_req as re-run), and the queues summing to
    statistics/.  A repeated name in the tree's table once made
    statistics/adopted read 0 while the dump said 2."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse: the tree cannot be mounted")
    be = blkback(daemons, xenstored, "blkback-0", tree=True)
    attach(xenstored, 32 << 20, "128M", 10)
    w = writer(xenstored, "--no-recover")
    vbd = os.path.join(xenstored.rundir, "sys", "bus", "xen-backend",
                       "devices", "vbd-1-51712")
    try:
        wait_for(lambda: len(journals(xenstored)) == 2, "journals")
        wait_for(lambda: state(xenstored, FE) == state(xenstored, BE) == "4",
                 "both ends Connected")
        time.sleep(0.5)
        be.stop(signal.SIGKILL)
        be = blkback(daemons, xenstored, "blkback-1", tree=True)
        wait_for(lambda: "adopted 2 queue(s)" in be.log_text(),
                 "the restart adopts:\n" + be.log_text())
        wait_for(lambda: os.path.isdir(os.path.join(vbd, "queue-1")),
                 "the adopted device in the tree")
        time.sleep(0.3)                          # more I/O after adoption
        w.send_signal(signal.SIGSTOP)           # quiet: the counters hold
        try:
            wait_for(lambda: read_tree(vbd)["statistics"]["inflight"] == "0",
                     "nothing in flight")
            for _ in range(20):                 # a pool tick may move a count
                before = read_tree(vbd)
                dump = stats(xenstored, be)
                if read_tree(vbd) == before:
                    break
        finally:
            w.send_signal(signal.SIGCONT)
        rc, out, err = finish(w)
    finally:
        reap(w)
        be.stop(signal.SIGTERM)     # its tree unmounted before the rundir goes
    assert_verified(rc, out, err)

    tree = before["statistics"]
    assert tree["adopted"] == dump["adopted"] == "2", (tree, dump)
    assert int(tree["rd_req"]) + int(tree["wr_req"]) > 0, tree
    # the dump's names are the tree's (latency_us is lat_us there)
    names = {("lat_us" if n == "latency_us" else n) for n in tree}
    assert names == set(dump) - {"queues"}, (sorted(names), sorted(dump))
    for n, v in tree.items():
        assert v == dump["lat_us" if n == "latency_us" else n], (n, v, dump)
    abi = abi_entries()
    queues = [d for d in before if d.startswith("queue-")]
    assert len(queues) == 2, sorted(before)
    for d, files in before.items():
        assert set(files) == set(tree), (d, sorted(files))
        for n in files:
            rel = f"bus/xen-backend/devices/vbd-1-51712/{d}/{n}"
            assert sum(fnmatch.fnmatchcase(rel, e) for e in abi) == 1, rel
    for n, v in tree.items():
        if n != "latency_us":
            assert int(v) == sum(int(before[q][n]) for q in queues), n
    print(f"after adoption: {dump}")
