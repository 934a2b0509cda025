#!/bin/sh
# make bench: xbd-xenstored throughput (1 and 8 clients) and watch-event
# latency with 1,000 watches, next to a bare Unix-socket round trip.
# Uses the optimised build in $XBD_BUILD; writes nothing outside a temp dir.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
B="${XBD_BUILD:?set XBD_BUILD to the build directory}"
tmp="$(mktemp -d /tmp/xbd-bench-xs.XXXXXX)"
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

gcc -O2 -std=gnu11 -Wall -Wextra -Werror -pthread -o "$tmp/xsbench" "$here/xsbench.c"
"$B/bin/xbd-xenstored" --foreground --rundir "$tmp" 2>"$tmp/log" &
pid=$!
i=0
while [ ! -S "$tmp/xenstored.sock" ]; do
	i=$((i + 1)); [ $i -lt 200 ] || { echo "xenstored did not start" >&2; cat "$tmp/log" >&2; exit 1; }
	sleep 0.05
done
echo "xbd-xenstored benchmark ($(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ))"
"$tmp/xsbench" "$tmp/xenstored.sock" "${XS_BENCH_SECONDS:-1}"
