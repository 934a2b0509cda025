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
# machine, date and load it was measured on.  XBD_BUILD: the optimised
# build tree.
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
echo "  $(uname -n), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "${ROUNDS:-5}"); do
	for mode in off idle high; do
		out=$("$build/bench/xbd-be-queue-bench" "$dir/disk" --bs 4096 --qd 64 \
			--seconds "${SECONDS_PER_RUN:-3}" --limit "$mode")
		echo "$mode $(echo "$out" | sed -n 's/.*: \([0-9]*\) requests\/s.*/\1/p')"
	done
done | awk '
	{ v[$1, ++n[$1]] = $2 }
	function median(m,   i, j, t, k, a) {
		k = n[m]
		for (i = 1; i <= k; i++) a[i] = v[m, i]
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	END {
		off = median("off")
		printf "  4k randread QD64, %d rounds: requests/s median\n", n["off"]
		split("off idle high", ms, " ")
		for (i = 1; i <= 3; i++) {
			s = ""
			for (j = 1; j <= n[ms[i]]; j++) s = s " " v[ms[i], j]
			printf "  %-5s %9.0f  ratio %.3f  (runs:%s)\n", ms[i], median(ms[i]),
				median(ms[i]) / off, s
		}
	}'
if command -v valgrind >/dev/null 2>&1; then
	echo "  callgrind, the queue thread's instructions per 4k request at QD64:"
	/usr/bin/python3 "$top/bench/limits/ir.py" "$build/bench/xbd-be-queue-bench" \
		"$dir/disk" off idle high
else
	echo "  (valgrind missing: no instruction counts)"
fi
