#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Backend polling, A/B in the same minutes (Documentation/performance.md,
"Polling").

One local machine (xbd-xenstored, xbd-blkback, domain "bench" with a
tmpfs file as xvdb), then fio through the external engine, 4k randread
at each depth, ROUNDS times with the settings interleaved: the backend's
poll_duration_us is written into the sysfs-style tree between runs (it
takes effect at once), the frontend's is the engine's
xbd_poll_duration_us.  Prints IOPS and the machine's busy CPU per I/O
(/proc/stat, all processes: other users of the machine included), the
CPU per I/O of xbd-blkback and of fio alone, and the backend's event and
poll counters per request, for every run, then the median of each.

usage: bench/poll/ab.py [BUILD] [--rounds N] [--seconds S] [--qd 1,64]
                        [--be 0,50] [--fe 50] [--pin] [--ignore-load]
--pin runs xbd-blkback on CPU 0 and fio on CPU 1 (as a backend domain and
a guest have their own vCPUs on Xen); without, the scheduler places them.
"""
import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "suite"))
from contenders import XbdMachine  # noqa: E402

MiB = 1 << 20


def busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]          # all but idle and iowait


def vbd_stats(m):
    d = glob.glob(os.path.join(m.run_dir, "sys", "bus", "xen-backend", "devices",
                               "vbd-*", "statistics"))
    out = {}
    for n in ("rd_req", "evt_in", "evt_out", "polls", "poll_hits"):
        try:
            with open(os.path.join(d[0], n)) as f:
                out[n] = int(f.read())
        except (IndexError, OSError, ValueError):
            out[n] = 0
    return out


def proc_cpu(pid):
    """user + system seconds of every thread of pid."""
    with open(f"/proc/{pid}/stat") as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def run_fio(m, build, qd, fe, seconds, pin):
    cmd = (["taskset", "-c", "1"] if pin else []) + ["fio", "--name=r", "--rw=randread", "--bs=4k", f"--iodepth={qd}",
           "--size=64M", "--time_based", f"--runtime={seconds}",
           "--randrepeat=0", "--norandommap", "--output-format=json",
           "--ioengine=external:" + os.path.join(build, "lib", "xbd-fio.so"),
           "--xbd_domain=bench", "--xbd_vdev=xvdb", "--xbd_max_queues=1",
           "--xbd_max_ring_page_order=3", f"--xbd_poll_duration_us={fe}"]
    st = []
    t = threading.Timer(seconds / 2 + 0.5, lambda: st.append(vbd_stats(m)))
    t2 = threading.Timer(seconds - 0.2, lambda: st.append(vbd_stats(m)))
    t.start(), t2.start()
    b0 = proc_cpu(m.blkback.proc.pid)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    j0 = busy_jiffies()
    out = subprocess.run(cmd, capture_output=True, text=True, env=m.env,
                         timeout=seconds * 4 + 60)
    j1 = busy_jiffies()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b1 = proc_cpu(m.blkback.proc.pid)
    t.join(), t2.join()
    if len(st) == 2 and st[1]["rd_req"] > st[0]["rd_req"]:
        n = st[1]["rd_req"] - st[0]["rd_req"]
        d = {k: (st[1][k] - st[0][k]) / n for k in st[0]}
        print(f"   per request: evt_in {d['evt_in']:.2f} evt_out {d['evt_out']:.2f} "
              f"polls {d['polls']:.2f} hits {d['poll_hits']:.2f}", flush=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-600:])
    js = json.loads(out.stdout[out.stdout.index("{"):])
    rd = js["jobs"][0]["read"]
    ios = rd["total_ios"] or 1
    fio_cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    print(f"   per I/O: xbd-blkback {(b1 - b0) / ios * 1e6:.2f} us CPU, "
          f"fio {fio_cpu / ios * 1e6:.2f} us CPU", flush=True)
    hz = os.sysconf("SC_CLK_TCK")
    return rd["iops"], (j1 - j0) / hz / ios * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--qd", default="1,64")
    ap.add_argument("--be", default="0,50")
    ap.add_argument("--fe", default="50")
    ap.add_argument("--ignore-load", action="store_true",
                    help="spin even when every CPU is wanted "
                    "(XBD_TEST_POLL_IGNORE_LOAD)")
    ap.add_argument("--pin", action="store_true",
                    help="xbd-blkback on CPU 0, fio on CPU 1")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if a.ignore_load:
        os.environ["XBD_TEST_POLL_IGNORE_LOAD"] = "1"
    work = tempfile.mkdtemp(prefix="xbd-poll-ab.")
    store = os.path.join("/dev/shm", os.path.basename(work) + ".img")
    with open(store, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(MiB))

    class S:
        path = store
    m = XbdMachine(build, work, os.path.join(work, "log"),
                   prefix=("taskset", "-c", "0") if a.pin else ())
    res = {}
    try:
        m.start(S)
        tun = os.path.join(m.run_dir, "sys", "module", "xen_blkback",
                           "parameters", "poll_duration_us")
        for _ in range(200):               # the tree is mounted soon after start
            if os.path.exists(tun):
                break
            time.sleep(0.05)
        combos = [(qd, be, fe) for qd in map(int, a.qd.split(","))
                  for fe in map(int, a.fe.split(","))
                  for be in map(int, a.be.split(","))]
        for r in range(a.rounds):
            for qd, be, fe in (combos if r % 2 == 0 else combos[::-1]):
                with open(tun, "w") as f:
                    f.write(str(be))
                iops, us = run_fio(m, build, qd, fe, a.seconds, a.pin)
                res.setdefault((qd, be, fe), []).append((iops, us))
                print(f"round {r} qd {qd:3} backend {be:4} frontend {fe:4}: "
                      f"{iops/1000:7.1f}k IOPS {us:5.2f} us CPU/IO", flush=True)
    finally:
        m.stop()
        os.unlink(store)
    print("median of", a.rounds, "rounds:")
    for (qd, be, fe), v in sorted(res.items()):
        print(f"qd {qd:3} backend poll {be:4} frontend poll {fe:4}: "
              f"{statistics.median(x for x, _ in v)/1000:7.1f}k IOPS "
              f"(range {min(x for x, _ in v)/1000:.1f}-{max(x for x, _ in v)/1000:.1f}k), "
              f"{statistics.median(y for _, y in v):5.2f} us machine CPU/IO")


if __name__ == "__main__":
    main()
