# SPDX-License-Identifier: MIT
"""Contenders: every one runs the same workload on the same store.

  host        the host's own fio (io_uring, O_DIRECT) on the store; the
              seed's dd as GNU dd with iflag=direct
  qsd-nbd     qemu-storage-daemon exporting the store over NBD on a Unix
              socket (cache.direct=on, aio=io_uring), fio's nbd engine
  nbdkit      nbdkit's file plugin on a Unix socket, fio's nbd engine
  xbd-queue   xbd-be-queue-bench: one backend queue thread (io_uring,
              grant copy) serving an in-process guest on the local
              platform; random 4k at one job only (no frontend yet)

A contender whose program is missing raises ContenderMissing: the run
fails loudly, nothing is silently left out.  Servers are started by
start() and stopped by stop(), which the suite calls from finally blocks.
CPU: the client's user+system seconds come from getrusage(RUSAGE_CHILDREN)
around the run (servers are never reaped during a run, so the delta is the
client's); a server's from /proc/PID/stat before and after.
"""
import os
import resource
import shutil
import socket
import subprocess
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
        return True

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

    dd_count = DD_COUNT


class Host(Contender):
    name, method = "host", "fio io_uring direct"

    def check(self):
        need("fio", "fio")
        need("dd", "coreutils")

    def _run(self, w, runtime):
        if w["dd"]:
            cmd = ["dd", f"if={self.store.path}", "of=/dev/null", f"bs={w['bs']}",
                   f"count={self.dd_count}", "iflag=direct"]
            text, cpu = run_client(cmd, 600, self.log)
            fig = parse.dd(text, w["bs"])
            fig["client_cpu_s"] = cpu
            fig["method"] = "dd iflag=direct"
            return fig
        return self._fio(w, runtime, ["--ioengine=io_uring", "--direct=1",
                                      "--filename=" + self.store.path])


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


class XbdFio(Contender):
    """fio in a guest domain through the external engine (xbd-fio.so):
    xbd-xenstored, xbd-blkback and a domain on the local platform, the
    store attached as xvdb.  One job (each job would be a frontend)."""
    name, method = "xbd-fio", "fio external engine xbd-fio.so"
    queues = 1

    def engine(self):
        return os.path.join(self.build, "lib", "xbd-fio.so")

    def check(self):
        need("fio", "fio")
        for p in ("xbd-xenstored", "xbd-blkback", "xbd"):
            need(os.path.join(self.build, "bin", p), "this tree (make)")
        need(self.engine(), "this tree (make)")

    def supports(self, w):
        return w["jobs"] == 1

    def start(self, store):
        self.store, self.run_dir = store, os.path.join(self.work, "xbd-run")
        os.makedirs(self.run_dir, exist_ok=True)
        self.env = dict(os.environ, XBD_RUNDIR=self.run_dir,
                        XENSTORED_PATH=os.path.join(self.run_dir, "xenstored.sock"))
        b = os.path.join(self.build, "bin")
        self.server = Server([os.path.join(b, "xbd-xenstored"), "--foreground"],
                             self.env["XENSTORED_PATH"], self.log, env=self.env)
        self.server.start()
        self.blkback = Server([os.path.join(b, "xbd-blkback"), "-N", "-p", "local",
                               "-R", self.run_dir, "--max_queues=4",
                               "--max_ring_page_order=3"], None, self.log, env=self.env)
        self.blkback.proc = subprocess.Popen(self.blkback.cmd, stdout=subprocess.DEVNULL,
                                             stderr=open(self.log, "a"), env=self.env)
        xbd = [os.path.join(b, "xbd"), "--platform", "local"]
        run_client(xbd + ["domain-create", "bench", "--memory", "1G"], 60, self.log, self.env)
        run_client(xbd + ["block-attach", "bench",
                          f"format=raw, vdev=xvdb, target={store.path}"], 60, self.log,
                   self.env)

    def stop(self):
        if getattr(self, "blkback", None):
            self.blkback.stop()
            self.blkback = None
        super().stop()

    def run(self, w, runtime):
        s0 = self.blkback.cpu()
        fig = self._run(w, runtime)
        fig["server_cpu_s"] = self.blkback.cpu() - s0
        return fig

    def _run(self, w, runtime):
        fig = self._fio(w, runtime, ["--ioengine=external:" + self.engine(),
                                     "--xbd_domain=bench", "--xbd_vdev=xvdb",
                                     f"--xbd_max_queues={self.queues}",
                                     "--xbd_max_ring_page_order=3"], self.env)
        if w["dd"]:
            fig["method"] = "fio engine, 4k QD1 sequential pass (dd equivalent)"
        return fig


def main_set(build, work, top):
    """The contenders; xbd-fio when this tree has the engine's source."""
    cs = [Host(build, work), Qsd(build, work), Nbdkit(build, work)]
    if os.path.isdir(os.path.join(top, "frontend", "fio")):
        cs.append(XbdFio(build, work))
    return cs + [XbdQueue(build, work)]


def variants(build, work):
    """xbd variations the backend benchmark can express today."""
    return [XbdQueueVariant(build, work, "xbd-queue order0", 0, ()),
            XbdQueueVariant(build, work, "xbd-queue order4", 4, ()),
            XbdQueueVariant(build, work, "xbd-queue persistent", 2, ("--persistent",))]
