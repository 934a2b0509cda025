# SPDX-License-Identifier: MIT
"""xbd over network storage against fio's own engine on the same server.

  nbd    nbdkit's memory plugin on a Unix socket: fio's nbd engine on it,
         then fio through xbd (the fio engine, xbd-blkback's nbd driver)
  qcow2  a qcow2 image: fio's nbd engine on a qemu-storage-daemon export
         of it (the arguments xbd's qcow2 driver uses), then fio through
         xbd with format=qcow2 (xbd-blkback starts its own daemon)
  rbd    a single-node Ceph cluster (one monitor, one memstore OSD, no
         manager), started and SIGKILLed here with the tests' own code
         (tests/system/test_storage_rbd.py's Ceph): fio's rbd engine on
         an image, then fio through xbd's rbd driver on the same image;
         skipped, with the reason recorded, when Ceph is not installed

Like with like: one fio job at the same queue depth on each side, so
one connection each (fio's nbd and rbd engines open one per job; the
xbd job drives one queue, which has one connection), the same server
process and its default threads, and every store written once before it
is measured (a read of a never-written qcow2 cluster or nbdkit page is
a hole, nearly free, which measured the client's per-request overhead
alone and doubled the ratio's spread).

Stable: BENCH_ROUNDS rounds (3; BENCH_QUICK: 1) of one run each side,
the order alternating (fio first, then xbd first, ...), so the slow
drift of a machine shared with other work falls on both; each round's
ratio is of two neighbouring runs, and the figure kept is the median
ratio (with the lowest and highest).  Beside the IOPS each side's CPU
time per I/O is kept: fio's own process, xbd-blkback's, the server's
(nbdkit, qemu-storage-daemon, the OSD) — the load of other work moves
the IOPS much more than it moves these.

Each line: the workload, both median IOPS, the median ratio xbd / fio
and its range; the result goes to bench/results/storage-*.json (quick
runs: bench/results/quick/) with the machine, the commit and the load,
for bench/suite/docs.py.  A missing nbdkit, qemu or fio stops the run
with its Debian package named.  BENCH_SECONDS per run (3; BENCH_QUICK:
1).

Options (a cell rerun in a minute: `storage_bench.py BUILD --store nbd
--workload 4k-randread`):
  --store S          only store S (nbd, qcow2, rbd); repeatable
  --workload W       only workload W, BS-RW[-QD] (4k-randread, 4k-randwrite,
                     1M-read; -QD overrides the queue depth: 4k-randread-64);
                     repeatable
  --blkback-arg=A    an extra xbd-blkback argument (--poll_duration_us=0)
  --xbd-fio-arg=A    an extra fio argument on the xbd side only
                     (--xbd_poll_duration_us=0)
A filtered run writes to bench/results/quick/ (never the generated block).
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "bench", "suite"))
import runinfo  # noqa: E402

STORES = ("nbd", "qcow2", "rbd")
WORKLOADS = [("randread", "4k", 32), ("randwrite", "4k", 32), ("read", "1M", 8)]


def workload(spec):
    """BS-RW[-QD] (4k-randread, 1M-read-16) as (rw, bs, qd)."""
    f = spec.split("-")
    if len(f) not in (2, 3) or not (len(f) == 2 or f[2].isdigit()):
        raise argparse.ArgumentTypeError(f"{spec}: not BS-RW[-QD] (4k-randread)")
    for rw, bs, qd in WORKLOADS:
        if (bs.lower(), rw) == (f[0].lower(), f[1]):
            return rw, bs, int(f[2]) if len(f) == 3 else qd
    names = ", ".join(f"{bs}-{rw}" for rw, bs, _ in WORKLOADS)
    raise argparse.ArgumentTypeError(f"{spec}: not one of {names}")


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="xbd over network storage against fio's own engine on the same server",
        epilog="BENCH_SECONDS, BENCH_ROUNDS, BENCH_QUICK as for make bench; a run with "
               "a filter or an extra argument writes to bench/results/quick/.")
    p.add_argument("build", help="the build tree (bin/, lib/)")
    p.add_argument("--store", action="append", choices=STORES,
                   help="only this store (repeatable; default all)")
    p.add_argument("--workload", action="append", type=workload,
                   help="only this workload, BS-RW[-QD]: 4k-randread, 4k-randwrite, "
                        "1M-read; -QD sets the queue depth (repeatable; default all)")
    p.add_argument("--blkback-arg", action="append", default=[],
                   help="an extra xbd-blkback argument, e.g. --poll_duration_us=0")
    p.add_argument("--xbd-fio-arg", action="append", default=[],
                   help="an extra fio argument for the xbd side, e.g. "
                        "--xbd_poll_duration_us=0")
    return p.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
BUILD = os.path.abspath(ARGS.build)
SECONDS = int(os.environ.get("BENCH_SECONDS", "1" if runinfo.quick() else "3"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "1" if runinfo.quick() else "3"))
RESULTS = []
FILTERED = bool(ARGS.store or ARGS.workload or ARGS.blkback_arg or ARGS.xbd_fio_arg)
if ARGS.workload:
    WORKLOADS = ARGS.workload


def need(prog, package):
    if not shutil.which(prog):
        sys.exit(f"bench storage: {prog} not found (Debian package {package}); "
                 "run `make deps`")


def wait(cond, what, timeout=20):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            sys.exit(f"bench storage: {what} did not happen in {timeout} s")
        time.sleep(0.05)


def terse_iops(out):
    for line in out.splitlines():
        if line.startswith("3;"):
            f = line.split(";")
            return int(f[7]) + int(f[48])
    raise RuntimeError(out)


class Machine:
    def __init__(self, d):
        self.d = d
        self.env = dict(os.environ, XBD_RUNDIR=d,
                        XENSTORED_PATH=os.path.join(d, "xenstored.sock"))
        self.procs = []
        self.start([f"{BUILD}/bin/xbd-xenstored", "--foreground"])
        wait(lambda: os.path.exists(self.env["XENSTORED_PATH"]), "xenstored")
        self.start([f"{BUILD}/bin/xbd-blkback", "-N", "-p", "local", "-R", d,
                    "--sysfs=none", "--max_queues=2", *ARGS.blkback_arg])
        self.xbd("domain-create", "g1", "--memory", "256M")

    def start(self, argv):
        log = open(os.path.join(self.d, os.path.basename(argv[0]) + ".log"), "ab")
        p = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def xbd(self, *args):
        subprocess.run([f"{BUILD}/bin/xbd", "--platform", "local", *args],
                       env=self.env, check=True, capture_output=True, timeout=60)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid):
    """CPU seconds of process pid and its threads, living and exited
    (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def child_named(ppid, prefix):
    """The pid of a child of ppid whose command starts with prefix."""
    for e in os.listdir("/proc"):
        try:
            with open(f"/proc/{e}/stat") as f:
                v = f.read()
        except OSError:
            continue
        comm, rest = v[v.index("(") + 1:v.rindex(")")], v[v.rindex(")") + 2:].split()
        if comm.startswith(prefix) and int(rest[1]) == ppid:
            return int(e)
    return None


def fio(env, engine_args, rw, bs, qd, cwd, timed=True, cpu=None):
    """IOPS of one fio run on the first 64 MiB; timed=False: one pass.
    cpu: a dict that gets fio's own CPU seconds ("fio")."""
    when = ["--time_based", f"--runtime={SECONDS}"] if timed else []
    c0 = children_cpu()
    r = subprocess.run(["fio", "--output-format=terse", "--terse-version=3",
                        "--name=b", *engine_args, f"--rw={rw}", f"--bs={bs}",
                        f"--iodepth={qd}", "--size=64M", *when,
                        "--verify_state_save=0"],
                       env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=SECONDS + 120)
    if cpu is not None:
        cpu["fio"] = children_cpu() - c0
    if r.returncode:
        raise RuntimeError(r.stdout + r.stderr)
    return terse_iops(r.stdout)


def xbd_args(m):
    return [f"--ioengine=external:{BUILD}/lib/xbd-fio.so", "--xbd_domain=g1",
            "--xbd_vdev=xvdb", f"--xbd_rundir={m.d}", *ARGS.xbd_fio_arg]


def measured(run, pids):
    """One run: (IOPS, {process: CPU µs per I/O}).  run(cpu) runs fio and
    fills cpu["fio"]; pids() names the other processes to count
    ({name: pid}, read again after the run for a server started by it)."""
    cpu, before = {}, {k: proc_cpu(p) for k, p in pids().items()}
    iops = run(cpu)
    for k, p in pids().items():
        cpu[k] = proc_cpu(p) - before.get(k, 0.0)
    n = max(iops * SECONDS, 1)
    return iops, {k: round(v * 1e6 / n, 1) for k, v in cpu.items()}


def compare(store, engine, rw, bs, qd, base, ours):
    """ROUNDS rounds of base (fio's engine) and ours (xbd), each a
    (run, pids) pair for measured(), the first alternating; the median
    of the rounds' ratios is the figure."""
    rounds = []
    for i in range(ROUNDS):
        load = os.getloadavg()[0]
        sides = [("fio", base), ("xbd", ours)]
        got = {k: measured(*side) for k, side in (sides if i % 2 == 0 else sides[::-1])}
        rounds.append({"fio_iops": got["fio"][0], "xbd_iops": got["xbd"][0],
                       "ratio": round(got["xbd"][0] / max(got["fio"][0], 1), 3),
                       "load": round(load, 2), "fio_cpu_us": got["fio"][1],
                       "xbd_cpu_us": got["xbd"][1]})
    ratios = [r["ratio"] for r in rounds]

    def med(side, key):
        return statistics.median(r[side][key] for r in rounds if key in r[side])

    res = {"store": store, "workload": f"{bs} {rw} QD{qd}", "rw": rw, "bs": bs, "qd": qd,
           "fio_engine": engine,
           "fio_iops": int(statistics.median(r["fio_iops"] for r in rounds)),
           "xbd_iops": int(statistics.median(r["xbd_iops"] for r in rounds)),
           "ratio": statistics.median(ratios), "ratio_min": min(ratios),
           "ratio_max": max(ratios),
           "cpu_us_per_io": {side: {k: med(side + "_cpu_us", k) for k in rounds[0][side + "_cpu_us"]}
                             for side in ("fio", "xbd")},
           "rounds": rounds}
    RESULTS.append(res)
    cpu = " ".join(f"{side} " + "+".join(f"{v:.0f}" for v in res["cpu_us_per_io"][side].values())
                   for side in ("fio", "xbd"))
    print(f"{store:6s} {rw:9s} {bs:3s} QD{qd:<3d} fio-{engine} {res['fio_iops']:8d} IOPS  "
          f"xbd {res['xbd_iops']:8d} IOPS  ratio {res['ratio']:.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}, {ROUNDS} rounds)  CPU µs/IO {cpu}",
          flush=True)


def fio_run(env, args, rw, bs, qd, cwd):
    return lambda cpu: fio(env, args, rw, bs, qd, cwd, cpu=cpu)


def nbd(m, uri, server, cwd):
    """nbdkit: fio's nbd engine and xbd's nbd driver on one server."""
    eng = ["--ioengine=nbd", f"--uri={uri}"]
    fio(os.environ, eng, "write", "1M", 8, cwd, timed=False)   # no holes read
    m.xbd("block-attach", "g1", f"vdev=xvdb, access=rw, target={uri}")
    bb = m.procs[1].pid
    for rw, bs, qd in WORKLOADS:
        compare("nbd", "nbd", rw, bs, qd,
                (fio_run(os.environ, eng, rw, bs, qd, cwd), lambda: {"nbdkit": server.pid}),
                (fio_run(m.env, xbd_args(m), rw, bs, qd, cwd),
                 lambda: {"xbd-blkback": bb, "nbdkit": server.pid}))
    m.xbd("block-detach", "g1", "xvdb")


def rbd(m, cwd):
    """xbd's rbd driver against fio's rbd engine on one image of a
    private single-node cluster; returns the reason when it cannot run."""
    sys.path.insert(0, os.path.join(TOP, "tests", "system"))
    os.environ.setdefault("XBD_BUILD", BUILD)
    try:
        import test_storage_rbd as t
    except ImportError as e:
        return f"the Ceph test code does not import ({e})"
    missing = [p for p in t.TOOLS if shutil.which(p) is None]
    if missing:
        return (f"Ceph is not installed ({', '.join(missing)} missing; make deps: "
                "ceph-mon ceph-osd ceph-common)")
    d = tempfile.mkdtemp(prefix="xbd-bench-ceph-")
    c = None
    try:
        c = t.Ceph(d)
        c.rbd("create", "--size", "256M", "rbd/bench")
        # Both clients without librbd's cache: with it (librbd's default)
        # fio's client answered writes from it and merged them (0.72 OSD
        # writes per fio write, 1.00 per xbd write, measured) and served
        # part of the reads of the 64 MiB range from its 32 MiB: the
        # cache, not the image, was measured, and not alike on both sides.
        conf = os.path.join(d, "bench-client.conf")
        with open(c.conf) as f, open(conf, "w") as out:
            out.write(f.read() + "rbd cache = false\n")     # in [client], the last section
        env = dict(os.environ, CEPH_CONF=conf)
        eng = ["--ioengine=rbd", "--clientname=admin", "--pool=rbd", "--rbdname=bench"]
        # written once, so neither side reads objects that do not exist
        fio(env, eng, "write", "1M", 8, cwd, timed=False)
        m.xbd("block-attach", "g1", f"vdev=xvdb, access=rw, target=rbd:rbd/bench:conf={conf}")
        def osd():
            return {"ceph-osd": c.procs["osd"].pid}
        bb = m.procs[1].pid
        try:
            for rw, bs, qd in WORKLOADS:
                compare("rbd", "rbd", rw, bs, qd,
                        (fio_run(env, eng, rw, bs, qd, cwd), osd),
                        (fio_run(m.env, xbd_args(m), rw, bs, qd, cwd),
                         lambda: {"xbd-blkback": bb, **osd()}))
        finally:
            m.xbd("block-detach", "g1", "xvdb")
    finally:
        if c:
            c.stop()
        shutil.rmtree(d, ignore_errors=True)
    return None


def qsd(img, sock, d):
    """A daemon on img; retried while the image lock is still another's
    (xbd-blkback stops its own daemon just after a detach returns)."""
    for _ in range(100):
        p = _qsd(img, sock, d)
        end = time.monotonic() + 10
        while p.poll() is None and not os.path.exists(sock) and time.monotonic() < end:
            time.sleep(0.05)
        if os.path.exists(sock):
            return p
        if p.poll() is None:
            p.kill()
        p.wait()
        time.sleep(0.2)
    sys.exit("bench storage: qemu-storage-daemon does not start (see qsd.log)")


def _qsd(img, sock, d):
    return subprocess.Popen(
        ["qemu-storage-daemon", "--blockdev",
         # what backend/storage/qcow2.c passes to its own daemon
         f"driver=qcow2,node-name=fmt,read-only=off,discard=unmap,file.driver=file,"
         f"file.filename={img}",
         "--nbd-server", f"addr.type=unix,addr.path={sock}",
         "--export", "type=nbd,id=exp,node-name=fmt,name=xbd,writable=on"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "qsd.log"), "ab"))


def qcow2(m, d):
    """A qcow2 image: fio's nbd engine on our daemon's export, xbd with
    format=qcow2 on its own daemon; one of the two at a time holds the
    image's lock, so each run has its own daemon, started fresh (the
    same cold cache on both sides) and counted from its export's start
    to the end of the run."""
    img = os.path.join(d, "img.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-o",
                    "preallocation=metadata", img, "256M"], check=True)
    sock = os.path.join(d, "qsd.sock")
    uri = f"nbd+unix:///xbd?socket={sock}"
    eng = ["--ioengine=nbd", f"--uri={uri}"]
    bb = m.procs[1].pid

    def ours_daemon():
        return child_named(bb, "qemu-storage")

    def stop(p):
        p.send_signal(signal.SIGTERM)
        p.wait(20)
        if os.path.exists(sock):
            os.unlink(sock)

    def base(rw, bs, qd, cpu, timed=True):
        p = qsd(img, sock, d)
        try:
            q0 = proc_cpu(p.pid)
            iops = fio(os.environ, eng, rw, bs, qd, d, timed=timed, cpu=cpu)
            cpu["qemu-storage-daemon"] = proc_cpu(p.pid) - q0
        finally:
            stop(p)
        return iops

    def ours(rw, bs, qd, cpu):
        m.xbd("block-attach", "g1", f"format=qcow2, vdev=xvdb, access=rw, target={img}")
        try:
            q = ours_daemon()
            b0, q0 = proc_cpu(bb), proc_cpu(q) if q else 0.0
            iops = fio(m.env, xbd_args(m), rw, bs, qd, d, cpu=cpu)
            cpu["xbd-blkback"] = proc_cpu(bb) - b0
            if q:
                cpu["qemu-storage-daemon"] = proc_cpu(q) - q0
        finally:
            m.xbd("block-detach", "g1", "xvdb")
        return iops

    base("write", "1M", 8, {}, timed=False)     # every cluster allocated: no holes read
    for rw, bs, qd in WORKLOADS:
        compare("qcow2", "nbd", rw, bs, qd,
                (lambda cpu, a=(rw, bs, qd): base(*a, cpu), dict),
                (lambda cpu, a=(rw, bs, qd): ours(*a, cpu), dict))


def main():
    for prog, pkg in [("fio", "fio"), ("nbdkit", "nbdkit"),
                      ("qemu-storage-daemon", "qemu-system-common"),
                      ("qemu-img", "qemu-utils")]:
        need(prog, pkg)
    res = runinfo.header("xbd storage drivers")
    res.update({"seconds": SECONDS, "rounds": ROUNDS, "results": RESULTS, "skipped": []})
    stores = ARGS.store or STORES
    if FILTERED:
        res["filter"] = {"stores": list(stores),
                         "workloads": [f"{bs}-{rw}-{qd}" for rw, bs, qd in WORKLOADS],
                         "blkback_args": ARGS.blkback_arg, "xbd_fio_args": ARGS.xbd_fio_arg}
    print(f"machine: {os.cpu_count()} × {res['machine']['cpu']}, load "
          f"{os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{SECONDS} s a run, {ROUNDS} rounds")
    d = tempfile.mkdtemp(prefix="xbd-bench-storage-")
    m = None
    servers = []
    failed = False
    try:
        m = Machine(d)
        sock = os.path.join(d, "nbd.sock")
        if "nbd" in stores:
            servers.append(subprocess.Popen(["nbdkit", "--foreground", "-U", sock,
                                             "memory", "256M"]))
            wait(lambda: os.path.exists(sock), "nbdkit")
            nbd(m, f"nbd+unix:///?socket={sock}", servers[-1], d)
        if "qcow2" in stores:
            qcow2(m, d)
        why = None
        if "rbd" in stores:
            try:
                why = rbd(m, d)
            except (AssertionError, RuntimeError, subprocess.SubprocessError) as e:
                why, failed = f"FAILED: {str(e)[-300:]}", True
        if why:
            print(f"rbd    not measured: {why}", flush=True)
            res["skipped"].append({"store": "rbd", "why": why})
    finally:
        for s in servers:
            if s.poll() is None:
                s.send_signal(signal.SIGTERM)
                s.wait(20)
        if m:
            m.stop()
        shutil.rmtree(d, ignore_errors=True)
    if FILTERED:
        os.environ["BENCH_QUICK"] = "1"    # a part of the bench: to quick/, not the docs
    print(f"bench storage: {runinfo.save(res, 'storage')}")
    if failed:
        sys.exit("bench storage: the rbd comparison failed (see above)")


if __name__ == "__main__":
    main()
