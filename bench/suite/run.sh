#!/bin/sh
# make bench: the issue 8 suite (see Documentation/performance.md).
# XBD_BUILD is the optimised build tree; BENCH_QUICK=1 for a short run.
# Results: bench/results/run-*.json, README.md and PNG plots (quick runs
# write theirs under bench/results/quick/).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build="${XBD_BUILD:-$top/build}"
make --no-print-directory -C "$top" O="$build" be-queue-bench >/dev/null
exec /usr/bin/python3 "$here/suite.py" "$build" "${BENCH_RESULTS:-$top/bench/results}"
