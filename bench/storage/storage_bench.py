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

Each line: the workload, both IOPS and the ratio xbd / fio; the result
goes to bench/results/storage-*.json (quick runs: bench/results/quick/)
with the machine, the commit and the load, for bench/suite/docs.py.
A missing nbdkit, qemu or fio stops the run with its Debian package
named.  BENCH_SECONDS per run (3; BENCH_QUICK: 1).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "bench", "suite"))
import runinfo  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
SECONDS = int(os.environ.get("BENCH_SECONDS", "1" if runinfo.quick() else "3"))
RESULTS = []
WORKLOADS = [("randread", "4k", 32), ("randwrite", "4k", 32), ("read", "1M", 8)]


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
                    "--sysfs=none", "--max_queues=2"])
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


def fio(env, engine_args, rw, bs, qd, cwd, timed=True):
    """IOPS of one fio run on the first 64 MiB; timed=False: one pass."""
    when = ["--time_based", f"--runtime={SECONDS}"] if timed else []
    r = subprocess.run(["fio", "--output-format=terse", "--terse-version=3",
                        "--name=b", *engine_args, f"--rw={rw}", f"--bs={bs}",
                        f"--iodepth={qd}", "--size=64M", *when,
                        "--verify_state_save=0"],
                       env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=SECONDS + 120)
    if r.returncode:
        raise RuntimeError(r.stdout + r.stderr)
    return terse_iops(r.stdout)


def xbd_args(m):
    return [f"--ioengine=external:{BUILD}/lib/xbd-fio.so", "--xbd_domain=g1",
            "--xbd_vdev=xvdb", f"--xbd_rundir={m.d}"]


def record(store, engine, rw, bs, qd, base, ours):
    RESULTS.append({"store": store, "workload": f"{bs} {rw} QD{qd}", "rw": rw, "bs": bs,
                    "qd": qd, "fio_engine": engine, "fio_iops": base, "xbd_iops": ours})
    print(f"{store:6s} {rw:9s} {bs:3s} QD{qd:<3d} fio-{engine} {base:8d} IOPS  "
          f"xbd {ours:8d} IOPS  ratio {ours / base:.2f}", flush=True)


def compare(name, m, uri, cwd):
    for rw, bs, qd in WORKLOADS:
        base = fio(os.environ, ["--ioengine=nbd", f"--uri={uri}"], rw, bs, qd, cwd)
        ours = fio(m.env, xbd_args(m), rw, bs, qd, cwd)
        record(name, "nbd", rw, bs, qd, base, ours)


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
        env = dict(os.environ, CEPH_CONF=c.conf)
        eng = ["--ioengine=rbd", "--clientname=admin", "--pool=rbd", "--rbdname=bench"]
        # written once, so neither side reads objects that do not exist
        fio(env, eng, "write", "1M", 8, cwd, timed=False)
        m.xbd("block-attach", "g1", f"vdev=xvdb, access=rw, target={t.rbd_target(c, 'bench')}")
        try:
            for rw, bs, qd in WORKLOADS:
                base = fio(env, eng, rw, bs, qd, cwd)
                ours = fio(m.env, xbd_args(m), rw, bs, qd, cwd)
                record("rbd", "rbd", rw, bs, qd, base, ours)
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
         f"driver=qcow2,node-name=fmt,file.driver=file,file.filename={img}",
         "--nbd-server", f"addr.type=unix,addr.path={sock}",
         "--export", "type=nbd,id=exp,node-name=fmt,name=xbd,writable=on"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "qsd.log"), "ab"))


def main():
    for prog, pkg in [("fio", "fio"), ("nbdkit", "nbdkit"),
                      ("qemu-storage-daemon", "qemu-system-common"),
                      ("qemu-img", "qemu-utils")]:
        need(prog, pkg)
    res = runinfo.header("xbd storage drivers")
    res.update({"seconds": SECONDS, "results": RESULTS, "skipped": []})
    print(f"machine: {os.cpu_count()} × {res['machine']['cpu']}, load "
          f"{os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{SECONDS} s a run")
    d = tempfile.mkdtemp(prefix="xbd-bench-storage-")
    m = None
    servers = []
    failed = False
    try:
        m = Machine(d)
        sock = os.path.join(d, "nbd.sock")
        servers.append(subprocess.Popen(["nbdkit", "--foreground", "-U", sock,
                                         "memory", "256M"]))
        wait(lambda: os.path.exists(sock), "nbdkit")
        uri = f"nbd+unix:///?socket={sock}"
        m.xbd("block-attach", "g1", f"vdev=xvdb, access=rw, target={uri}")
        compare("nbd", m, uri, d)
        m.xbd("block-detach", "g1", "xvdb")
        img = os.path.join(d, "img.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-o",
                        "preallocation=metadata", img, "256M"], check=True)
        qsock = os.path.join(d, "qsd.sock")
        servers.append(qsd(img, qsock, d))
        quri = f"nbd+unix:///xbd?socket={qsock}"
        # the same image, so one of the two at a time holds its lock
        for rw, bs, qd in WORKLOADS:
            base = fio(os.environ, ["--ioengine=nbd", f"--uri={quri}"], rw, bs, qd, d)
            servers[-1].send_signal(signal.SIGTERM)
            servers[-1].wait(20)
            m.xbd("block-attach", "g1", f"format=qcow2, vdev=xvdb, access=rw, target={img}")
            ours = fio(m.env, xbd_args(m), rw, bs, qd, d)
            m.xbd("block-detach", "g1", "xvdb")
            record("qcow2", "nbd", rw, bs, qd, base, ours)
            if os.path.exists(qsock):
                os.unlink(qsock)
            servers.append(qsd(img, qsock, d))
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
    print(f"bench storage: {runinfo.save(res, 'storage')}")
    if failed:
        sys.exit("bench storage: the rbd comparison failed (see above)")


if __name__ == "__main__":
    main()
