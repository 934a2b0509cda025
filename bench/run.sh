#!/bin/sh
# make bench: run every benchmark under bench/ (each bench/*/run.sh), then,
# for a full run (not BENCH_QUICK), rewrite the generated blocks of
# README.md and Documentation/performance.md from the newest full results
# (bench/suite/docs.py; Documentation/performance.md, "How the figures
# are regenerated").  A quick run writes under bench/results/quick/ only.
set -u
cd "$(dirname "$0")"
top=$(cd .. && pwd)
rc=0; ran=0
t0=$(date +%s)
for b in */run.sh; do
	[ -f "$b" ] || continue
	echo "== bench: $(dirname "$b") ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
	sh "$b" || { rc=1; echo "== bench: $(dirname "$b") FAILED" >&2; }
	ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "bench: no benchmark exists yet" >&2; exit 1; }
echo "== bench: $ran benchmarks in $(( $(date +%s) - t0 )) s"
case "${BENCH_QUICK:-0}" in
""|0)
	/usr/bin/python3 suite/docs.py "${BENCH_RESULTS:-$top/bench/results}" "$top" || rc=1 ;;
*)
	echo "== bench: quick run: README.md and Documentation/performance.md left as they are" ;;
esac
exit $rc
