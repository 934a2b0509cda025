# SPDX-License-Identifier: MIT
"""Contenders: every one runs the same workload on the same store.

  host        the host's own fio (io_uring, O_DIRECT) on the store; the
              seed's dd as GNU dd with iflag=direct
  qsd-nbd     qemu-storage-daemon exporting the store over NBD on a Unix
              socket (cache.direct=on, aio=io_uring), fio's nbd engine
  nbdkit      nbdkit's file plugin on a Unix socket, fio's nbd engine
  xbd-fio     fio in a local guest domain through the external engine
              (xbd-fio.so), xbd-blkback and xbd-xenstored on the local
              platform; 2 jobs are 2 fio threads on one queue
  xbd-fio-2q  the 2-job workloads with one queue per job
  xbd-fuse    fio libaio (and the seed's dd) on xbd-blkfront's FUSE file
  loop-dev    a loop device over the store's file: the seed's dd only
              (the kernel block device a Linux guest's dd would write to)
  xbd-queue   xbd-be-queue-bench: one backend queue thread (io_uring,
              grant copy) serving an in-process guest on the local
              platform; random 4k at one job only

Variants (tmpfs only, after the main set; variants() below) include the
FUSE transport's floor: xbd-bench-fuse-floor, a FUSE file answered at
once with nothing behind it, set up as xbd-blkfront's disk file, under
fio libaio direct as xbd-fuse is; and, when the kernel lets FUSE run over
io_uring (/sys/module/fuse/parameters/enable_uring writable), the floor
and xbd-fuse over io_uring (--fuse-uring=on; the parameter is set to Y
from start to stop and restored).

A contender whose program is missing raises ContenderMissing: the run
fails loudly, nothing is silently left out.  Servers are started by
start() and stopped by stop(), which the suite calls from finally blocks.
CPU: the client's user+system seconds come from getrusage(RUSAGE_CHILDREN)
around the run (servers are never reaped during a run, so the delta is the
client's); a server's from /proc/PID/stat before and after.
"""
import glob
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import parse
from workloads import fio_args, DD_COUNT


class ContenderMissing(RuntimeError):
    pass


def need(prog, package):
    path = shutil.which(prog) if "/" not in prog else (prog if os.access(prog, os.X_OK) else None)
    if not path:
        raise ContenderMissing(f"bench: {prog} not found (Debian package {package}); "
                               "run `make deps`")
    return path


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_client(cmd, timeout, log, env=None):
    """Run a client to completion; returns (stdout+stderr text, cpu s)."""
    c0 = _children_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env=env)
    cpu = _children_cpu() - c0
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n" + out.stdout + out.stderr + "\n")
    if out.returncode:
        raise RuntimeError(f"bench: {cmd[0]} failed ({out.returncode}): "
                           + (out.stderr or out.stdout)[-400:])
    return out.stdout + "\n" + out.stderr, cpu


class Server:
    """A server process on a Unix socket, with its CPU readable."""

    def __init__(self, cmd, sock, log, startup=20.0, env=None):
        self.cmd, self.sock, self.log, self.startup = cmd, sock, log, startup
        self.proc, self.env = None, env

    def start(self):
        if os.path.exists(self.sock):     # left by an earlier server
            os.unlink(self.sock)
        logf = open(self.log, "a")
        self.proc = subprocess.Popen(self.cmd, stdout=logf, stderr=logf,
                                     stdin=subprocess.DEVNULL, env=self.env)
        logf.close()
        deadline = time.monotonic() + self.startup
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"bench: {' '.join(self.cmd)} exited at start "
                                   f"({self.proc.returncode}): {self._tail()}")
            if os.path.exists(self.sock) and self._connects():
                return
            time.sleep(0.05)
        raise RuntimeError(f"bench: {self.cmd[0]} did not listen on {self.sock} "
                           f"within {self.startup:.0f} s: {self._tail()}")

    def start_showing(self, path):
        """Start a server that shows a file (a FUSE mount) rather than
        listening on a socket: wait until path exists."""
        with open(self.log, "a") as logf:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=logf,
                                         stdin=subprocess.DEVNULL, env=self.env)
        deadline = time.monotonic() + self.startup
        while not os.path.exists(path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bench: {os.path.basename(self.cmd[0])} did not show "
                                   f"{path}: {self._tail()}")
            time.sleep(0.05)

    def _tail(self):
        with open(self.log) as f:
            return f.read()[-600:]

    def _connects(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.sock)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            return parse.proc_cpu_ticks(f.read()) / parse.CLK_TCK

    def stop(self, timeout=60):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


class Contender:
    name = "?"
    method = "?"

    def __init__(self, build, work):
        self.build, self.work, self.server = build, work, None
        self.log = os.path.join(work, self.name + ".log")

    def check(self):
        """Raise ContenderMissing if a program is not installed."""

    def supports(self, w):
        return not w.get("seed")    # only a path dd opens (seed_dd below)

    def start(self, store):
        self.store = store

    def stop(self):
        if self.server:
            self.server.stop()
            self.server = None

    def run(self, w, runtime):
        s0 = self.server.cpu() if self.server else 0.0
        fig = self._run(w, runtime)
        fig["server_cpu_s"] = (self.server.cpu() - s0) if self.server else 0.0
        return fig

    def _fio(self, w, runtime, target, env=None):
        cmd = ["fio"] + fio_args(w, runtime, self.dd_count) + target
        text, cpu = run_client(cmd, runtime * 4 + 120, self.log, env)
        fig = parse.fio_json(text[:text.rindex("}") + 1])
        fig["client_cpu_s"] = cpu
        return fig

    def _dd(self, w, path, method):
        """The seed's dd: GNU dd reading dd_count blocks of path, direct."""
        cmd = ["dd", f"if={path}", "of=/dev/null", f"bs={w['bs']}",
               f"count={self.dd_count}", "iflag=direct"]
        text, cpu = run_client(cmd, 600, self.log)
        fig = parse.dd(text, w["bs"])
        fig["client_cpu_s"] = cpu
        fig["method"] = method
        return fig

    def _seed_dd(self, path, method):
        """The seed's dd as the seed ran it: dd_count buffered 4k writes
        of zeros, then `sync PATH` (that file only: other users' dirty
        data is not in the figure), timed to the end of the sync."""
        t0 = time.monotonic()
        _, cpu = run_client(["dd", "if=/dev/zero", f"of={path}", "bs=4096",
                             f"count={self.dd_count}", "conv=notrunc", "status=none"],
                            900, self.log)
        _, cpu2 = run_client(["sync", path], 300, self.log)
        secs = time.monotonic() - t0
        nbytes = self.dd_count * 4096
        return {"iops": self.dd_count / secs, "mbps": nbytes / secs / 1e6,
                "bytes": nbytes, "seconds": secs, "lat_us": None,
                "client_cpu_s": cpu + cpu2, "method": method}

    dd_count = DD_COUNT


class Host(Contender):
    name, method = "host", "fio io_uring direct"

    def check(self):
        need("fio", "fio")
        need("dd", "coreutils")

    def supports(self, w):
        return True

    def _run(self, w, runtime):
        if w["seed"]:
            return self._seed_dd(self.store.path, "dd bs=4k buffered + sync, the file")
        if w["dd"]:
            return self._dd(w, self.store.path, "dd iflag=direct")
        return self._fio(w, runtime, ["--ioengine=io_uring", "--direct=1",
                                      "--filename=" + self.store.path])


class LoopDev(Contender):
    """A loop device over the store's file, for the seed's dd: what a
    Linux guest's dd writes to when its disk is a kernel block device
    over the same file.  Only on a file store (a loop device over the
    loop store would be a second block layer)."""
    name, method = "loop-dev", "dd bs=4k buffered + sync, loop device over the file"
    dev = None

    def check(self):
        need("losetup", "mount")
        need("dd", "coreutils")

    def supports(self, w):
        return bool(w.get("seed")) and not self.store.is_blockdev

    def start(self, store):
        self.store = store
        if store.is_blockdev:
            return
        out = subprocess.run(["losetup", "--find", "--show", store.path],
                             capture_output=True, text=True, timeout=30)
        if out.returncode:
            raise RuntimeError("bench: losetup failed: " + out.stderr.strip())
        self.dev = out.stdout.strip()

    def stop(self):
        if self.dev:
            subprocess.run(["losetup", "-d", self.dev], timeout=30)
            self.dev = None

    def _run(self, w, runtime):
        return self._seed_dd(self.dev, self.method)


class NbdContender(Contender):
    """A server on a Unix socket, driven by fio's nbd engine; the dd is
    fio's 4k QD1 pass.  Subclasses give the program, its package, the
    server's arguments and the export's URI path.  prefix (valgrind)
    goes before the server's command."""
    method = "fio nbd engine"

    def check(self):
        need("fio", "fio")
        need(self.prog, self.package)

    def start(self, store, prefix=()):
        self.store = store
        sock = os.path.join(self.work, self.name + ".sock")
        self.uri = f"nbd+unix:///{self.export}?socket={sock}"
        self.server = Server(list(prefix) + [self.prog] + self.args(store, sock),
                             sock, self.log, 120 if prefix else 20)
        self.server.start()

    def _run(self, w, runtime):
        fig = self._fio(w, runtime, ["--ioengine=nbd", "--uri=" + self.uri])
        if w["dd"]:
            fig["method"] = "fio nbd, 4k QD1 sequential pass (dd equivalent)"
        return fig


class Qsd(NbdContender):
    name, prog, package, export = "qsd-nbd", "qemu-storage-daemon", "qemu-system-common", "disk"

    def args(self, store, sock):
        driver = "host_device" if store.is_blockdev else "file"
        return ["--blockdev", f"driver={driver},node-name=f0,filename={store.path},"
                              "cache.direct=on,aio=io_uring",
                "--blockdev", "driver=raw,node-name=d0,file=f0",
                "--nbd-server", f"addr.type=unix,addr.path={sock}",
                "--export", "type=nbd,id=e0,node-name=d0,name=disk,writable=on"]


class Nbdkit(NbdContender):
    name, prog, package, export = "nbdkit", "nbdkit", "nbdkit", ""

    def args(self, store, sock):
        # No --exit-with-parent: it refuses to run under valgrind.
        return ["--foreground", "--unix", sock, "file", "file=" + store.path]


class XbdQueue(Contender):
    """The backend alone: random 4k, one job, queue depth up to its ring."""
    name, method = "xbd-queue", "xbd-be-queue-bench (backend + minimal guest)"
    order = 2
    extra = ()

    def prog(self):
        return os.path.join(self.build, "bench", "xbd-be-queue-bench")

    def check(self):
        need(self.prog(), "this tree (make be-queue-bench)")

    def supports(self, w):
        return (w["rw"].startswith("rand") and w["jobs"] == 1 and not w["dd"]
                and w["bs"] <= 45056 and w["qd"] <= (32 << self.order))

    def cmd(self, w, seconds):
        c = [self.prog(), self.store.path, "--bs", str(w["bs"]), "--qd", str(w["qd"]),
             "--seconds", str(max(1, int(seconds))), "--order", str(self.order)]
        if w["rw"] == "randwrite":
            c.append("--write")
        return c + list(self.extra)

    def _run(self, w, runtime):
        text, cpu = run_client(self.cmd(w, runtime), runtime * 4 + 120, self.log)
        fig = parse.queue_bench(text)
        fig["client_cpu_s"] = cpu   # guest and backend share the process
        return fig


class XbdQueueVariant(XbdQueue):
    """xbd-queue with another ring order or persistent grants."""

    def __init__(self, build, work, label, order, extra):
        self.name, self.order, self.extra = label, order, tuple(extra)
        super().__init__(build, work)


class XbdMachine:
    """A local xbd machine in work/xbd-run: xbd-xenstored, xbd-blkback
    (backend_extra: tunables; prefix: valgrind and its options before
    it), domain "bench" with the store as xvdb.  stats() reads the vbd's
    backend statistics (the sysfs-style tree); they exist while a
    frontend is connected."""

    def __init__(self, build, work, log, backend_extra=(), prefix=()):
        self.build, self.log, self.extra = build, log, tuple(backend_extra)
        self.prefix = tuple(prefix)
        self.work, self.xenstored = work, None
        self.blkback = self.run_dir = self.env = None

    def bin(self, prog):
        return os.path.join(self.build, "bin", prog)

    def check(self):
        for p in ("xbd-xenstored", "xbd-blkback", "xbd"):
            need(self.bin(p), "this tree (make)")

    def start(self, store):
        # a fresh machine each time: domain "bench" is dom1, nothing stale
        self.run_dir = tempfile.mkdtemp(prefix="xbd-run.", dir=self.work)
        self.env = dict(os.environ, XBD_RUNDIR=self.run_dir,
                        XENSTORED_PATH=os.path.join(self.run_dir, "xenstored.sock"))
        self.xenstored = Server([self.bin("xbd-xenstored"), "--foreground"],
                                self.env["XENSTORED_PATH"], self.log, env=self.env)
        self.xenstored.start()
        self.blkback = Server(list(self.prefix) +
                              [self.bin("xbd-blkback"), "-N", "-p", "local", "-R",
                               self.run_dir, "--max_queues=4", "--max_ring_page_order=4"]
                              + list(self.extra), None, self.log, env=self.env)
        self.blkback.proc = subprocess.Popen(self.blkback.cmd, stdout=subprocess.DEVNULL,
                                             stderr=open(self.log, "a"), env=self.env)
        xbd = [self.bin("xbd"), "--platform", "local"]
        run_client(xbd + ["domain-create", "bench", "--memory", "1G"], 60, self.log, self.env)
        run_client(xbd + ["block-attach", "bench",
                          f"format=raw, vdev=xvdb, target={store.path}"], 60, self.log,
                   self.env)

    def stop(self):
        for s in (self.blkback, self.xenstored):
            if s:
                s.stop()
        self.blkback = self.xenstored = None

    def stats(self):
        """{counter: value} of the vbd, or {} when no frontend is connected."""
        d = glob.glob(os.path.join(self.run_dir or "/nonexistent", "sys", "bus",
                                   "xen-backend", "devices",
                                   "vbd-*", "statistics"))
        out = {}
        for name in STAT_NAMES:
            try:
                with open(os.path.join(d[0], name)) as f:
                    out[name] = int(f.read())
            except (IndexError, OSError, ValueError):
                return {}
        return out


STAT_NAMES = ("rd_req", "wr_req", "evt_in", "evt_out")


def evt_per_req(a, b):
    """Event-channel notifications (both ways) per request between two
    samples of the backend's statistics; None when one is missing."""
    if not a or not b:
        return None
    reqs = (b["rd_req"] - a["rd_req"]) + (b["wr_req"] - a["wr_req"])
    evts = (b["evt_in"] - a["evt_in"]) + (b["evt_out"] - a["evt_out"])
    return {"evt_per_req": evts / reqs if reqs > 0 else None, "evt_requests": reqs,
            "evt_in": b["evt_in"] - a["evt_in"], "evt_out": b["evt_out"] - a["evt_out"]}


class XbdContender(Contender):
    """An xbd frontend on an XbdMachine: the run's server CPU is the
    backend's; the notifications per request are sampled from the
    backend's statistics in steady state (from 20% to 70% of a
    time-based run, counted from the frontend's connection)."""
    backend_extra = ()

    def check(self):
        need("fio", "fio")
        XbdMachine(self.build, self.work, self.log).check()

    def start(self, store):
        self.store = store
        self.machine = XbdMachine(self.build, self.work, self.log, self.backend_extra)
        self.machine.start(store)

    def stop(self):
        if getattr(self, "machine", None):
            self.machine.stop()
            self.machine = None
        super().stop()

    def run(self, w, runtime):
        samples, done = [], threading.Event()
        sampler = threading.Thread(target=self._sample, args=(runtime, samples, done))
        s0 = self.machine.blkback.cpu()
        if not w["dd"]:
            sampler.start()
        try:
            fig = self._run(w, runtime)
        finally:
            done.set()
            if sampler.is_alive() or sampler.ident:
                sampler.join()
        fig["server_cpu_s"] = self.machine.blkback.cpu() - s0
        if len(samples) == 2:
            fig.update(evt_per_req(*samples) or {})
        return fig

    @staticmethod
    def _busy(st):
        return bool(st) and st["rd_req"] + st["wr_req"] > 0

    def _sample(self, runtime, samples, done):
        """Two samples of the backend's statistics in steady state: the
        frontend connects some time after fio starts, so the clock starts
        when requests show; then at 20% and 70% of the runtime."""
        while not self._busy(self.machine.stats()):
            if done.wait(0.05):
                return
        for delay in (0.2 * runtime, 0.5 * runtime):
            if done.wait(delay):
                return
            samples.append(self.machine.stats())


class XbdFio(XbdContender):
    """fio in a guest domain through the external engine (xbd-fio.so).
    Two jobs are two fio threads (--thread: one process is the domain)
    sharing the device, on `queues` queues (job k on queue k % queues)."""
    name, method = "xbd-fio", "fio external engine xbd-fio.so"
    queues, order, engine_extra = 1, 3, ()

    def engine(self):
        return os.path.join(self.build, "lib", "xbd-fio.so")

    def check(self):
        super().check()
        need(self.engine(), "this tree (make)")

    def _run(self, w, runtime):
        args = ["--ioengine=external:" + self.engine(), "--xbd_domain=bench",
                "--xbd_vdev=xvdb", f"--xbd_max_queues={self.queues}",
                f"--xbd_max_ring_page_order={self.order}"] + list(self.engine_extra)
        if w["jobs"] > 1:
            args.append("--thread")
        fig = self._fio(w, runtime, args, self.machine.env)
        if w["dd"]:
            fig["method"] = "fio engine, 4k QD1 sequential pass (dd equivalent)"
        elif w["jobs"] > 1:
            fig["method"] = f"fio engine, {w['jobs']} threads on {self.queues} queue(s)"
        return fig


class XbdFio2Q(XbdFio):
    """The same two jobs, one queue each: issue 8's queue scaling.

    The ratio compares runs made in the same seconds on the same machine:
    each 2-job workload runs PAIRS times as 1 queue then 2 queues,
    alternating (the last 2-queue run is the one measured for CPU and
    notifications).  xbd-fio's own 2-job run, minutes earlier on another
    machine, is not the baseline: on a shared 2-CPU host the load moves
    between the two by more than the effect measured."""
    name, queues = "xbd-fio-2q", 2
    PAIRS = 2

    def supports(self, w):
        return w["jobs"] == 2

    def run(self, w, runtime):
        one, two = [], []
        for i in range(self.PAIRS):
            self.queues = 1
            one.append(self._run(w, runtime)["iops"])
            self.queues = 2
            fig = super().run(w, runtime) if i == self.PAIRS - 1 else self._run(w, runtime)
            two.append(fig["iops"])
        fig["paired_1q_iops"], fig["paired_2q_iops"] = one, two
        fig["paired_scaling"] = sum(two) / sum(one) if sum(one) else None
        return fig


class XbdFioVariant(XbdFio):
    """xbd-fio with other frontend options or backend tunables; only:
    the workload names it runs (None: all the variations' workloads)."""

    def __init__(self, build, work, label, order=3, engine_extra=(), backend_extra=(),
                 only=None):
        self.name, self.order = label, order
        self.engine_extra, self.backend_extra = tuple(engine_extra), tuple(backend_extra)
        self.only = only
        super().__init__(build, work)

    def supports(self, w):
        return self.only is None or w["name"] in self.only


FUSE_URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def fuse_uring_possible():
    """Whether this kernel can run FUSE over io_uring and we may turn it on."""
    return os.access(FUSE_URING_PARAM, os.W_OK)


class FuseUringParam:
    """The kernel's FUSE-over-io_uring switch set to Y while a contender
    runs over io_uring: on() at its start, restore() at its stop."""
    saved = None

    def on(self):
        with open(FUSE_URING_PARAM) as f:
            self.saved = f.read().strip()
        with open(FUSE_URING_PARAM, "w") as f:
            f.write("Y")

    def restore(self):
        if self.saved is not None:
            with open(FUSE_URING_PARAM, "w") as f:
                f.write(self.saved)
            self.saved = None


class FuseFloor(Contender):
    """The FUSE transport's floor: xbd-bench-fuse-floor's file (reads
    answered at once from zeros, no ring, no backend, no storage), fio
    libaio direct on it as on xbd-fuse; the floor's CPU is the server's.
    transport: its --fuse-uring (off: /dev/fuse)."""
    method = "fio libaio direct on xbd-bench-fuse-floor's FUSE file (nothing behind it)"
    READS = ("read4k-qd64-j1", "read4k-qd1-j1", "read4k-qd32-j1", "seqread1m-qd16")

    def __init__(self, build, work, label, transport="off"):
        self.name, self.transport, self.param = label, transport, FuseUringParam()
        super().__init__(build, work)

    def check(self):
        need("fio", "fio")
        need(os.path.join(self.build, "bin", "xbd-bench-fuse-floor"), "this tree (make)")

    def supports(self, w):
        return w["name"] in self.READS

    def start(self, store):
        self.store = store
        if self.transport != "off":
            self.param.on()
        mnt = os.path.join(self.work, "fuse-floor")
        os.makedirs(mnt, exist_ok=True)
        self.file = os.path.join(mnt, "disk")
        size_mib = max(1, os.path.getsize(store.path) >> 20) if not store.is_blockdev else 1024
        self.server = Server([os.path.join(self.build, "bin", "xbd-bench-fuse-floor"),
                              "--fuse-uring=" + self.transport, mnt, str(size_mib)],
                             None, self.log)
        self.server.start_showing(self.file)

    def stop(self):
        try:
            super().stop()              # SIGTERM: it unmounts and exits
        finally:
            self.param.restore()

    def _run(self, w, runtime):
        return self._fio(w, runtime, ["--ioengine=libaio", "--direct=1",
                                      "--filename=" + self.file])


class XbdFuse(XbdContender):
    """xbd-blkfront's FUSE file: the host's fio (libaio, O_DIRECT) and the
    seed's dd on $XBD_RUNDIR/dom1/dev/xvdb, one queue."""
    name, method = "xbd-fuse", "fio libaio direct on the xbd-blkfront FUSE file"
    blkfront_extra = ()

    def check(self):
        super().check()
        need(os.path.join(self.build, "bin", "xbd-blkfront"), "this tree (make)")
        need("dd", "coreutils")

    def start(self, store):
        super().start(store)
        m = self.machine
        self.dev = os.path.join(m.run_dir, "dom1", "dev", "xvdb")   # "bench" is dom1
        self.server = Server([m.bin("xbd-blkfront"), "--domain", "bench", "--max_queues=1",
                              "--max_ring_page_order=3", *self.blkfront_extra],
                             None, self.log, env=m.env)
        self.server.start_showing(self.dev)

    def stop(self):
        if self.server:                 # the frontend before the backend
            self.server.stop()
            self.server = None
        super().stop()

    def run(self, w, runtime):
        f0 = self.server.cpu()
        fig = super().run(w, runtime)
        fig["server_cpu_s"] += self.server.cpu() - f0     # blkfront too
        return fig

    def supports(self, w):
        return True

    def _run(self, w, runtime):
        if w["seed"]:
            return self._seed_dd(self.dev, "dd bs=4k buffered + sync, the FUSE file")
        if w["dd"]:
            return self._dd(w, self.dev, "dd iflag=direct on the FUSE file")
        return self._fio(w, runtime, ["--ioengine=libaio", "--direct=1",
                                      "--filename=" + self.dev])


class XbdFuseUring(XbdFuse):
    """xbd-fuse over io_uring (--fuse-uring=on), random and sequential
    reads only (the floor's workloads)."""
    name = "xbd-fuse over io_uring (--fuse-uring=on)"
    blkfront_extra = ("--fuse-uring=on",)

    def __init__(self, build, work):
        self.param = FuseUringParam()
        super().__init__(build, work)

    def supports(self, w):
        return w["name"] in FuseFloor.READS

    def start(self, store):
        self.param.on()
        super().start(store)

    def stop(self):
        try:
            super().stop()
        finally:
            self.param.restore()


def main_set(build, work, top):
    """The contenders; the xbd frontends when this tree has their source."""
    cs = [Host(build, work), LoopDev(build, work), Qsd(build, work), Nbdkit(build, work)]
    if os.path.isdir(os.path.join(top, "frontend", "fio")):
        cs += [XbdFio(build, work), XbdFio2Q(build, work)]
    if os.path.isdir(os.path.join(top, "frontend", "blkfront")):
        cs.append(XbdFuse(build, work))
    return cs + [XbdQueue(build, work)]


def variants(build, work):
    """xbd variations: the full path (xbd-fio) with ring order 0 and 4,
    without persistent grants (the backend then copies requests up to
    grant_copy_max_bytes and maps larger ones), and mapping everything;
    for 1 MiB reads, each of the three zero-copy levers undone alone
    (fio's buffers bounced, Linux's 1056-grant pool, 32-segment indirect
    requests); the frontend without polling; the FUSE transport's floor
    and, where the kernel allows it, the floor and xbd-fuse over io_uring;
    then the backend alone with other ring orders and persistent grants."""
    seq = ("seqread1m-qd16",)
    return [XbdFioVariant(build, work, "xbd-fio order0", order=0),
            XbdFioVariant(build, work, "xbd-fio order4", order=4),
            XbdFioVariant(build, work, "xbd-fio copy (no persistent)",
                          engine_extra=("--xbd_feature_persistent=0",)),
            XbdFioVariant(build, work, "xbd-fio map (no persistent)",
                          engine_extra=("--xbd_feature_persistent=0",),
                          backend_extra=("--grant_copy_max_bytes=0",)),
            XbdFioVariant(build, work, "xbd-fio no polling (xbd_poll_duration_us=0)",
                          engine_extra=("--xbd_poll_duration_us=0",)),
            XbdFioVariant(build, work, "xbd-fio bounced (xbd_zero_copy=0)",
                          engine_extra=("--xbd_zero_copy=0",), only=seq),
            XbdFioVariant(build, work, "xbd-fio pool 1056 (Linux's max_persistent_grants)",
                          backend_extra=("--max_persistent_grants=1056",), only=seq),
            XbdFioVariant(build, work, "xbd-fio 32 segments (xbd_max_indirect_segments=32)",
                          engine_extra=("--xbd_max_indirect_segments=32",), only=seq),
            FuseFloor(build, work, "fuse floor (nothing behind it)"),
            *([FuseFloor(build, work, "fuse floor over io_uring", "on"),
               XbdFuseUring(build, work)] if fuse_uring_possible() else []),
            XbdQueueVariant(build, work, "xbd-queue order0", 0, ()),
            XbdQueueVariant(build, work, "xbd-queue order4", 4, ()),
            XbdQueueVariant(build, work, "xbd-queue persistent", 2, ("--persistent",))]
