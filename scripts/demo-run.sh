#!/bin/sh
# The end-to-end demo on the local platform (called by scripts/demo.sh once
# every program is built): xbd-xenstored and xbd-blkback in a private
# XBD_RUNDIR, a domain, a 1 GiB sparse disk attached with xl syntax,
# xbd-blkfront for the domain, then the seed's dd and a 10 s fio randread
# 4k QD64 through the disk's file.  Prints their figures and the backend's
# statistics, detaches, stops everything and removes what it made.
# Exit status non-zero when any step failed.  By default everything lives
# in a fresh mkdtemp directory (mode 0700: a fixed name in /tmp could be
# created first by another user, issue 18); with XBD_DEMO_DIR, what a
# killed run left there is cleaned first.
#
# Environment: XBD_BUILD (required), XBD_DEMO_DIR (default: a new
# /tmp/xbd-demo.XXXXXX),
# XBD_DEMO_FIO_SECONDS (default 10), XBD_DEMO_DD_COUNT (default 131072).
set -u
B="${XBD_BUILD:?}/bin"
if [ -n "${XBD_DEMO_DIR:-}" ]; then
	D="$XBD_DEMO_DIR"
else
	D=$(mktemp -d "${TMPDIR:-/tmp}/xbd-demo.XXXXXX") || exit 1
fi
SECS="${XBD_DEMO_FIO_SECONDS:-10}"
COUNT="${XBD_DEMO_DD_COUNT:-131072}"
export XBD_RUNDIR="$D/run"
export XENSTORED_PATH="$XBD_RUNDIR/xenstored.sock"
LOG="$D/log"
failed=0

say() { echo "xbd demo: $*"; }
fail() { say "FAILED: $*"; failed=1; }

# Stop a process recorded in a pid file, if it still runs.
stop_pid() {
	[ -f "$1" ] || return 0
	p=$(cat "$1" 2>/dev/null)
	if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
		kill -TERM "$p" 2>/dev/null
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
	fi
	rm -f "$1"
}

# Everything this demo (or a killed earlier run) may have left behind.
cleanup() {
	for m in $(awk -v d="$D/" 'index($2, d) == 1 { print $2 }' /proc/mounts); do
		umount -l "$m" 2>/dev/null
	done
	stop_pid "$D/blkfront.pid"
	stop_pid "$D/blkback.pid"
	stop_pid "$D/xenstored.pid"
	for m in $(awk -v d="$D/" 'index($2, d) == 1 { print $2 }' /proc/mounts); do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$D"
}

wait_for() {   # wait_for SECONDS TEST...
	n=$(($1 * 10)); shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1))
		[ $n -gt 0 ] || return 1
		sleep 0.1
	done
}

start_bg() {   # start_bg NAME PROG ARGS...: log to $LOG/NAME.log
	name=$1; shift
	"$@" >"$LOG/$name.log" 2>&1 &
	echo $! >"$D/$name.pid"
}

run() {
	if [ -n "${XBD_DEMO_DIR:-}" ] && [ -d "$D" ]; then
		say "cleaning what a previous run left in $D"
		cleanup
	fi
	mkdir -p "$XBD_RUNDIR" "$LOG" || return 1
	say "rundir $XBD_RUNDIR"

	start_bg xenstored "$B/xbd-xenstored" --foreground
	wait_for 10 test -S "$XENSTORED_PATH" || { fail "xbd-xenstored did not start"; return 1; }
	start_bg blkback "$B/xbd-blkback" -N -p local -R "$XBD_RUNDIR" -l info \
		--max_queues=4 --max_ring_page_order=3
	domid=$("$B/xbd" --platform local domain-create demo-guest --memory 512M) ||
		{ fail "domain-create"; return 1; }
	say "domain demo-guest is $domid"
	truncate -s 1G "$D/disk.img" || return 1
	"$B/xbd" --platform local block-attach demo-guest \
		"format=raw, vdev=xvdb, access=rw, target=$D/disk.img" ||
		{ fail "block-attach"; return 1; }
	say "attached $D/disk.img (1 GiB sparse) as xvdb"

	start_bg blkfront "$B/xbd-blkfront" --domain demo-guest --max_queues=4 \
		--max_ring_page_order=3
	dev="$XBD_RUNDIR/dom$domid/dev/xvdb"
	wait_for 20 test -f "$dev" || { fail "xbd-blkfront did not show $dev"; return 1; }
	say "guest disk: $dev ($(stat -c %s "$dev") bytes)"

	say "dd if=/dev/zero of=$dev bs=4k count=$COUNT"
	dd if=/dev/zero of="$dev" bs=4k count="$COUNT" conv=fsync 2>"$LOG/dd.txt" ||
		{ cat "$LOG/dd.txt"; fail "dd"; return 1; }
	say "dd: $(tail -n 1 "$LOG/dd.txt")"

	say "fio --ioengine=libaio --rw=randread --bs=4k --iodepth=64 --numjobs=2 (${SECS} s)"
	fio --name=demo --filename="$dev" --ioengine=libaio --direct=1 --rw=randread \
		--bs=4k --iodepth=64 --numjobs=2 --group_reporting --time_based \
		--runtime="$SECS" --size=512M --output-format=terse --terse-version=3 \
		>"$LOG/fio.txt" 2>"$LOG/fio.err" || { cat "$LOG/fio.err"; fail "fio"; return 1; }
	awk -F';' '{ printf "xbd demo: fio: read %d IOPS, %.1f MB/s, errors %d\n", $8, $7 * 1.024 / 1000, $5 }' \
		"$LOG/fio.txt"
	errs=$(awk -F';' '{ print $5 }' "$LOG/fio.txt")
	[ "$errs" = 0 ] || fail "fio reported errors"

	say "backend statistics (kill -USR1 xbd-blkback):"
	kill -USR1 "$(cat "$D/blkback.pid")"
	wait_for 5 test -s "$XBD_RUNDIR/xbd-blkback.stats" && sed 's/^/  /' "$XBD_RUNDIR/xbd-blkback.stats"

	"$B/xbd" --platform local block-detach demo-guest xvdb || fail "block-detach"
	wait_for 10 test ! -e "$dev" || fail "$dev still there after detach"
	say "detached xvdb; $dev is gone"
	stop_pid "$D/blkfront.pid"
	"$B/xbd" --platform local domain-destroy demo-guest || fail "domain-destroy"
	return $failed
}

run
rc=$?
[ $rc -eq 0 ] || { say "logs:"; tail -n 20 "$LOG"/*.log 2>/dev/null; }
cleanup
if [ $rc -eq 0 ] && [ $failed -eq 0 ]; then
	say "done, everything stopped and removed"
	exit 0
fi
say "FAILED (see above)"
exit 1
