#!/bin/sh
# make bench: what the per-vbd I/O limiter (backend/limit.c) costs when no
# limit is set.  One backend queue serving an in-process guest
# (xbd-be-queue-bench), 4 KiB random reads at queue depth 64 on a file on
# tmpfs, ROUNDS (default 5) rounds of SECONDS (default 3) each, alternating
#   off   no limiter at all (a NULL limiter: the queue loop as before it),
#   idle  a vbd's limiter with no limit set (every vbd without limits),
#   high  limits set far above the rate (every request charged, none held);
# medians and the ratios to `off`; with valgrind, the queue thread's
# instructions per request too (bench/limits/ir.py), which load does not
# blur.  Not asserted: a report, with the
# machine, date and load it was measured on, in bench/results/limits-*.json
# (bench/limits/limits.py; quick runs: bench/results/quick/).  XBD_BUILD:
# the optimised build tree.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build="${XBD_BUILD:-$top/build}"
make --no-print-directory -C "$top" O="$build" be-queue-bench >/dev/null
base="${TMPDIR:-/tmp}"
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
dir=$(mktemp -d "$base/xbd-bench-limits.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
truncate -s 64M "$dir/disk"
dd if=/dev/urandom of="$dir/disk" bs=1M count=64 conv=notrunc status=none
/usr/bin/python3 "$top/bench/limits/limits.py" "$build/bench/xbd-be-queue-bench" "$dir/disk"
