#!/bin/sh
# make bench, page pool: the seed's two experiments side by side (see
# pool_bench.c).  Results in $XBD_BUILD/bench/pool.{csv,png}.  Smaller
# runs: XBD_POOL_RUNS, XBD_POOL_COUNT, XBD_POOL_VBDS, XBD_POOL_SECONDS.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${XBD_BUILD:-$here/../../build}
cd "$here/../.."
XBD_POOL_OUT="$build/bench/pool.csv" "$build/bench/xbd-pool-bench" dd pressure >"$build/bench/pool.log" 2>&1 || {
	cat "$build/bench/pool.log" >&2
	exit 1
}
/usr/bin/python3 "$here/report.py" "$build/bench/pool.csv" "$build/bench/pool.png"
