#!/bin/sh
# make bench: run every benchmark under bench/ (each bench/*/run.sh).
set -u
cd "$(dirname "$0")"
rc=0; ran=0
for b in */run.sh; do
	[ -f "$b" ] || continue
	echo "== bench: $(dirname "$b")"
	sh "$b" || rc=1
	ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "bench: no benchmark exists yet" >&2; exit 1; }
exit $rc
