# SPDX-License-Identifier: MIT
"""The issue 8 suite: every contender runs every workload on every backing
store, in one run on one machine; the result is one JSON file, then
report.py writes the Markdown table and the plots.

usage: suite.py BUILD_DIR RESULTS_DIR
environment:
  BENCH_QUICK=1     1 s runs, tmpfs only, short dd and callgrind counts
  BENCH_RUNTIME=S   seconds per time-based run (default 3, quick 1)
  BENCH_STORES=...  comma list of tmpfs,loop,disk (default all; quick tmpfs)
  BENCH_DISK_DIR    directory of the disk store (default /var/tmp)
  BENCH_NO_CALLGRIND=1  leave the callgrind section out
Exit status: 0 when every run succeeded, 1 (with the reason) otherwise."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contenders  # noqa: E402
import cpucost  # noqa: E402
import parse  # noqa: E402
import report  # noqa: E402
import runinfo  # noqa: E402
import workloads  # noqa: E402
from stores import Store  # noqa: E402


def pending(top):
    """xbd contenders this tree cannot drive (their source is missing), and
    why.  They are listed in every report so that their absence is never
    silent."""
    p = []
    for name, sub, what in (("xbd-fio", "fio", "fio external engine"),
                            ("xbd-fuse", "blkfront", "xbd-blkfront FUSE file")):
        if not os.path.isdir(os.path.join(top, "frontend", sub)):
            p.append({"contender": name,
                      "why": f"no {what} in this tree (frontend/{sub}/)"})
    return p


def machine_busy_s():
    """The whole machine's busy CPU seconds so far (/proc/stat)."""
    with open("/proc/stat") as f:
        return parse.proc_stat_busy(f.read()) / parse.CLK_TCK


def run_contender(c, store, wls, runtime, results):
    try:
        c.start(store)      # a half-started contender is stopped too
        for w in wls:
            if not c.supports(w):
                continue
            t0 = time.monotonic()
            b0 = machine_busy_s()
            fig = c.run(w, runtime)
            busy = machine_busy_s() - b0
            ios = fig["bytes"] / w["bs"] if fig.get("bytes") else 0
            # machine CPU per I/O: /proc/stat busy time of every CPU over
            # the run (client start-up included) / I/Os; other work on the
            # machine counts too, so read it with the load beside it
            fig["machine_busy_s"] = busy
            fig["machine_us_per_io"] = busy / ios * 1e6 if ios else None
            rec = {"store": store.kind, "contender": c.name, "workload": w["name"],
                   "method": fig.pop("method", c.method), **fig}
            results.append(rec)
            print(f"  {store.kind:5} {c.name:22} {w['name']:16} "
                  f"{rec['iops']:10.0f} IOPS {rec['mbps']:8.1f} MB/s "
                  f"({time.monotonic() - t0:.1f} s)", flush=True)
    finally:
        c.stop()


def run_store(kind, cs, variants, cfg, out):
    store = Store(kind)
    try:
        store.setup()
        out["stores"].append(store.describe())
        wls = workloads.for_store(kind, cfg["quick"])
        for c in cs:
            run_contender(c, store, wls, cfg["runtime"], out["results"])
        if kind == "tmpfs":
            vw = [workloads.by_name("read4k-qd64-j1"), workloads.by_name("read4k-qd1-j1"),
                  dict(workloads.by_name("read4k-qd64-j1"), name="read4k-qd32-j1", qd=32),
                  workloads.by_name("seqread1m-qd16")]
            for v in variants:
                run_contender(v, store, vw, cfg["runtime"], out["variants"])
            if cfg["callgrind"]:
                print("  callgrind: instructions per 4k request", flush=True)
                out["callgrind"] = cpucost.measure(cfg["build"], cfg["work"], store,
                                                   cfg["quick"])
    finally:
        store.teardown()


def config(build):
    quick = os.environ.get("BENCH_QUICK", "0") not in ("", "0")
    stores = os.environ.get("BENCH_STORES", "tmpfs" if quick else "tmpfs,loop,disk")
    return {"quick": quick, "build": build,
            "runtime": int(os.environ.get("BENCH_RUNTIME", "1" if quick else "3")),
            "stores": [s for s in stores.split(",") if s],
            "callgrind": os.environ.get("BENCH_NO_CALLGRIND", "0") in ("", "0"),
            "dd_count": 16384 if quick else workloads.DD_COUNT}


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _sigterm)
    parse.CLK_TCK = os.sysconf("SC_CLK_TCK")
    build, resdir = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cfg = config(build)
    os.makedirs(resdir, exist_ok=True)
    out = runinfo.header("xbd issue 8")
    stamp = out["date"]
    out.update({"quick": cfg["quick"], "runtime_s": cfg["runtime"],
                "dd_count": cfg["dd_count"], "stores": [], "results": [],
                "variants": [], "callgrind": {}, "pending": pending(top)})
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="xbd-bench-suite.") as work:
        cfg["work"] = work
        cs = contenders.main_set(build, work, top)
        vs = contenders.variants(build, work)
        for c in cs + vs:
            c.dd_count = cfg["dd_count"]
        try:
            for c in cs:
                c.check()          # a missing contender stops the run here
            for kind in cfg["stores"]:
                run_store(kind, cs, vs, cfg, out)
        except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
            print(f"bench/suite: FAILED: {e}", file=sys.stderr)
            return 1
    runinfo.finish(out)
    out["elapsed_s"] = time.monotonic() - t0
    # a quick run's JSON goes with its report under quick/ (not committed)
    jdir = os.path.join(resdir, "quick") if cfg["quick"] else resdir
    os.makedirs(jdir, exist_ok=True)
    path = os.path.join(jdir, f"run-{stamp}{'-quick' if cfg['quick'] else ''}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"bench/suite: {path} ({out['elapsed_s']:.0f} s)")
    report.write(out, resdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
