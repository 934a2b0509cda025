#!/bin/sh
# Per-request cost of the fio engine path (fio + xbd-fio.so + libxbdfront
# + xbd-blkback), for A/B comparisons of two build trees in the same
# minutes.  Not part of `make bench` (it is not a run.sh): run by hand.
#
#   sh bench/guest/cost.sh BUILD cpu [REQUESTS [JOBS [QUEUES]]]
#                                                   CPU µs per request
#   sh bench/guest/cost.sh BUILD strace [REQUESTS [JOBS [QUEUES]]]
#                                                   syscalls per request (fio)
#   sh bench/guest/cost.sh BUILD syscalls [REQUESTS [JOBS [QUEUES]]]
#                        the same from perf's syscall tracepoints (no strace slow-down)
#   sh bench/guest/cost.sh BUILD callgrind          fio instructions per request
#   sh bench/guest/cost.sh BUILD scale [SECONDS] [SPAN_MB] [ROUNDS] [FIO_ARGS...]
#       2 jobs (--thread) on 1 queue, then on 2 queues, ROUNDS times
#       alternating; IOPS, CPU per request and the ratio of each round
#
# Workload: 4k random reads at QD64, one job (fio thread) per JOBS, on
# QUEUES queues (default 1 and 1), ring order 3,
# inside the first 64 MiB of a 64 MiB file on /dev/shm (the suite's span).
# cpu: fio's user+system time (getrusage of the child, from /usr/bin/time)
# plus xbd-blkback's utime+stime from /proc/PID/stat around the run, over
# a fixed request count (fio --io_size: REQUESTS 4k reads per job),
# divided by that count.
# callgrind: the fio process under valgrind at 4096 and 20480 requests;
# (Ir difference) / 16384, so start-up and teardown cancel out; with
# COST_KEEP=DIR the callgrind files are kept there for callgrind_annotate.
# Needs root (a domain on the local platform); everything lives in a
# private temporary XBD_RUNDIR and is removed at exit.
set -u
BUILD=$(cd "${1:?usage: cost.sh BUILD cpu|strace|callgrind|scale}" && pwd)
MODE="${2:?usage: cost.sh BUILD cpu|strace|callgrind|scale}"
shift 2
ENGINE="$BUILD/lib/xbd-fio.so"
D=$(mktemp -d /tmp/xbd-cost.XXXXXX)
export XBD_RUNDIR="$D/run"
export XENSTORED_PATH="$XBD_RUNDIR/xenstored.sock"
STORE=$(mktemp /dev/shm/xbd-cost.XXXXXX)
mkdir -p "$XBD_RUNDIR"
pids=""
bb=""

cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$D" "$STORE"
}
trap cleanup EXIT INT TERM

die() { echo "cost.sh: $*" >&2; exit 1; }

wait_for() {   # wait_for SECONDS TEST...
	w=$(($1 * 10)); shift
	while ! "$@" 2>/dev/null; do
		w=$((w - 1)); [ $w -gt 0 ] || return 1; sleep 0.1
	done
}

# utime + stime of a process (all threads), in clock ticks
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

setup() {   # setup SPAN_MB
	dd if=/dev/urandom of="$STORE" bs=1M count="$1" status=none
	"$BUILD/bin/xbd-xenstored" --foreground >"$D/xenstored.log" 2>&1 &
	pids="$pids $!"
	wait_for 10 test -S "$XENSTORED_PATH" || die "xbd-xenstored did not start"
	"$BUILD/bin/xbd-blkback" -N -p local -R "$XBD_RUNDIR" --max_queues=4 \
		--max_ring_page_order=3 >"$D/blkback.log" 2>&1 &
	bb=$!
	pids="$pids $bb"
	"$BUILD/bin/xbd" --platform local domain-create bench --memory 1G >/dev/null ||
		die "domain-create"
	"$BUILD/bin/xbd" --platform local block-attach bench \
		"format=raw, vdev=xvdb, target=$STORE" || die "block-attach"
}

FIO="fio --ioengine=external:$ENGINE --xbd_domain=bench --xbd_vdev=xvdb
	--xbd_max_ring_page_order=3 --rw=randread --bs=4k --iodepth=64 --size=64m
	--norandommap --randrepeat=0 --name=c"

case "$MODE" in
cpu)
	n="${1:-262144}" jobs="${2:-1}" queues="${3:-1}"
	setup 64
	b0=$(ticks "$bb")
	/usr/bin/time -f "%U %S" -o "$D/time" $FIO --xbd_max_queues="$queues" \
		--io_size=$((n * 4))k --numjobs="$jobs" --thread --output-format=terse \
		>/dev/null || die "fio"
	n=$((n * jobs))
	b1=$(ticks "$bb")
	hz=$(getconf CLK_TCK)
	read -r u s <"$D/time"
	awk -v u="$u" -v s="$s" -v b="$((b1 - b0))" -v hz="$hz" -v n="$n" 'BEGIN {
		printf "requests %d  fio %.3f s (user %.2f sys %.2f)  blkback %.3f s\n",
			n, u + s, u, s, b / hz
		printf "CPU per request: fio %.2f us, blkback %.2f us, total %.2f us\n",
			(u + s) * 1e6 / n, b / hz * 1e6 / n, (u + s + b / hz) * 1e6 / n }'
	;;
strace)
	n="${1:-20480}" jobs="${2:-1}" queues="${3:-1}"
	setup 64
	strace -f -c -o "$D/strace" $FIO --xbd_max_queues="$queues" --io_size=$((n * 4))k \
		--numjobs="$jobs" --thread --output-format=terse >/dev/null || die "fio"
	n=$((n * jobs))
	awk -v n="$n" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
		printf "%-16s %9d calls %7.3f per request\n", $NF, $4, $4 / n }' "$D/strace" |
		sort -k2 -n -r | head -15
	;;
syscalls)
	n="${1:-262144}" jobs="${2:-1}" queues="${3:-1}"
	setup 64
	ev=""
	for c in write read futex poll ppoll; do ev="$ev -e syscalls:sys_enter_$c"; done
	perf stat -x, -o "$D/perf" $ev $FIO --xbd_max_queues="$queues" --io_size=$((n * 4))k \
		--numjobs="$jobs" --thread --output-format=terse >/dev/null || die "fio"
	awk -F, -v n="$((n * jobs))" '$3 ~ /sys_enter/ { sub(/.*sys_enter_/, "", $3)
		printf "%-8s %9d calls %7.3f per request\n", $3, $1, $1 / n }' "$D/perf"
	;;
callgrind)
	setup 64
	for n in 4096 20480; do
		valgrind --tool=callgrind --callgrind-out-file="$D/cg.$n.%p" $FIO \
			--xbd_max_queues=1 --io_size=$((n * 4))k --output-format=terse \
			>/dev/null 2>"$D/vg.$n" || die "valgrind fio"
		ir=$(grep -h '^summary:' "$D"/cg.$n.* | awk '{ s += $2 } END { print s }')
		eval "ir$n=$ir"
		[ -n "${COST_KEEP:-}" ] && cp "$D"/cg.$n.* "$COST_KEEP"/
		rm -f "$D"/cg.$n.*
	done
	awk -v a="$ir4096" -v b="$ir20480" 'BEGIN {
		printf "fio process instructions per request: %.0f\n", (b - a) / 16384 }'
	;;
scale)
	secs="${1:-3}" span="${2:-64}" rounds="${3:-3}"
	shift 3 2>/dev/null || shift $#
	setup "$span"
	hz=$(getconf CLK_TCK)
	r=0
	while [ "$r" -lt "$rounds" ]; do
		r=$((r + 1))
		for q in 1 2; do
			b0=$(ticks "$bb")
			/usr/bin/time -f "%U %S" -o "$D/time" fio --ioengine=external:"$ENGINE" \
				--xbd_domain=bench --xbd_vdev=xvdb --xbd_max_ring_page_order=3 \
				--xbd_max_queues="$q" --rw=randread --bs=4k --iodepth=64 \
				--numjobs=2 --thread --group_reporting --time_based \
				--runtime="$secs" --size="${span}m" --name=s \
				--output-format=terse --terse-version=3 "$@" >"$D/s$q" || die "fio"
			b1=$(ticks "$bb")
			read -r u s <"$D/time"
			awk -F';' -v q="$q" -v r="$r" -v b="$((b1 - b0))" -v hz="$hz" -v u="$u" \
				-v s="$s" -v t="$secs" '$1 == 3 {
				printf "round %d  2 jobs on %d queue(s): %8d IOPS  CPU per request: " \
					"fio %.2f us, blkback %.2f us\n", r, q, $8,
					(u + s) * 1e6 / ($8 * t), b / hz * 1e6 / ($8 * t) }' "$D/s$q"
			eval "v$q=\$(awk -F';' '\$1 == 3 { print \$8 }' \"\$D/s\$q\")"
		done
		awk -v a="$v1" -v b="$v2" -v r="$r" \
			'BEGIN { printf "round %d  2 queues / 1 queue: %.2f x\n", r, a ? b / a : 0 }'
	done
	;;
*)
	die "unknown mode $MODE"
	;;
esac
