#!/bin/sh
# make bench: the storage drivers (Documentation/storage.md, "Performance").
# XBD_BUILD is the optimised build tree; BENCH_SECONDS per run (default 3,
# BENCH_QUICK 1), BENCH_ROUNDS rounds (3, BENCH_QUICK 1).  Result: bench/results/storage-*.json (quick: quick/).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
exec /usr/bin/python3 "$here/storage_bench.py" "${XBD_BUILD:-$top/build}"
