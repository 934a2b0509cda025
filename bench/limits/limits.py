# SPDX-License-Identifier: MIT
"""What the per-vbd I/O limiter costs when no limit is set (run.sh says
how).  usage: limits.py BENCH FILE; writes bench/results/limits-*.json
(quick runs: bench/results/quick/) and prints the medians and ratios.
ROUNDS (5; quick 2) rounds of SECONDS_PER_RUN (3; quick 1) seconds,
the modes alternating in each round so a load change hits all three;
then the queue thread's instructions per request under callgrind
(BENCH_NO_CALLGRIND=1 leaves them out)."""
import os
import re
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "suite"))
import runinfo  # noqa: E402
import ir as irmod  # noqa: E402

MODES = ("off", "idle", "high")


def rate(prog, path, mode, seconds):
    out = subprocess.run([prog, path, "--bs", "4096", "--qd", "64", "--seconds",
                          str(seconds), "--limit", mode], capture_output=True,
                         text=True, timeout=seconds * 10 + 60, check=True).stdout
    m = re.search(r": ([0-9.]+) requests/s", out)
    if not m:
        raise RuntimeError("bench/limits: no rate in: " + out[-300:])
    return float(m.group(1))


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def main():
    prog, path = sys.argv[1], sys.argv[2]
    q = runinfo.quick()
    rounds = int(os.environ.get("ROUNDS", "2" if q else "5"))
    secs = int(os.environ.get("SECONDS_PER_RUN", "1" if q else "3"))
    res = runinfo.header("xbd limiter cost")
    m = res["machine"]
    print(f"  {m['cpus']} × {m['cpu']}, {res['date']}, load {m['load_start'][0]:.2f}")
    runs = {k: [] for k in MODES}
    for _ in range(rounds):
        for mode in MODES:
            runs[mode].append(rate(prog, path, mode, secs))
    res.update({"rounds": rounds, "seconds": secs, "workload": "4k randread QD64",
                "modes": {k: {"runs": v, "median": median(v)} for k, v in runs.items()}})
    off = res["modes"]["off"]["median"]
    print(f"  4k randread QD64, {rounds} rounds: requests/s median")
    for k in MODES:
        md = res["modes"][k]
        print(f"  {k:<5} {md['median']:9.0f}  ratio {md['median'] / off:.3f}  "
              f"(runs: {' '.join(f'{x:.0f}' for x in md['runs'])})")
    if os.environ.get("BENCH_NO_CALLGRIND", "0") not in ("", "0"):
        print("  (BENCH_NO_CALLGRIND: no instruction counts)")
    elif shutil.which("valgrind"):
        counts = (500, 2500) if q else irmod.COUNTS
        print("  callgrind, the queue thread's instructions per 4k request at QD64:")
        base = None
        for k in MODES:
            ir = irmod.per_request(prog, path, ["--limit", k], counts)
            res["modes"][k]["ir"] = ir
            base = base or ir
            print(f"  {k:<5} {ir:8.0f} Ir/request  ratio {ir / base:.4f}")
    else:
        print("  (valgrind missing: no instruction counts)")
    print(f"  {runinfo.save(res, 'limits')}")


if __name__ == "__main__":
    main()
