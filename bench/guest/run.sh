#!/bin/sh
# make bench (guest side): the same backing file seen four ways, side by
# side, for a tmpfs file and a loop device:
#   host    fio io_uring on the backing file itself
#   engine  fio in the guest through the external engine (xbd-fio.so)
#   fuse    fio libaio through xbd-blkfront's FUSE file
#   dd      the seed's dd (bs=4k buffered writes, then sync) through the
#           FUSE file, to a loop device over the same backing file, and
#           to the backing file itself
# Random reads 4k at QD64, one job.  Prints IOPS, MB/s and the ratio to
# the host, then the engine's scaling from one queue to two (2 jobs).  Environment: XBD_BUILD (required), XBD_BENCH_SECONDS (3;
# BENCH_QUICK: 1), XBD_BENCH_MB (256).  Needs root (loop device, FUSE).
set -u
B="${XBD_BUILD:?}/bin"
ENGINE="${XBD_BUILD}/lib/xbd-fio.so"
case "${BENCH_QUICK:-0}" in ""|0) secs=3 ;; *) secs=1 ;; esac
SECS="${XBD_BENCH_SECONDS:-$secs}"
MB="${XBD_BENCH_MB:-256}"
D=$(mktemp -d /tmp/xbd-bench.XXXXXX)
chmod 755 "$D"
export XBD_RUNDIR="$D/run"
export XENSTORED_PATH="$XBD_RUNDIR/xenstored.sock"
mkdir -p "$XBD_RUNDIR" "$D/tmpfs"
loop=""
pids=""

cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	sleep 0.5
	for m in $(awk -v d="$D/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	[ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT INT TERM

die() { echo "bench/guest: $*" >&2; exit 1; }

wait_for() {   # wait_for SECONDS TEST...
	n=$(($1 * 10)); shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1)); [ $n -gt 0 ] || return 1; sleep 0.1
	done
}

# fio_iops ARGS...: "IOPS MB/s" of a terse v3 run (reads and writes summed)
fio_iops() {
	fio --output-format=terse --terse-version=3 "$@" 2>"$D/fio.err" |
		awk -F';' '$1 == 3 { if ($5 != 0) exit 1
			printf "%d %.1f\n", $8 + $49, ($7 + $48) * 1.024 / 1000 }' ||
		{ cat "$D/fio.err" >&2; return 1; }
}

# seed_dd TARGET: MB/s of the seed's dd to TARGET, "dd if=/dev/zero
# of=TARGET bs=4k count=N; sync", timed to the end of the sync (of that
# file only: "sync TARGET", so other users' dirty data on this shared
# machine is not in the figure)
seed_dd() {
	t0=$(date +%s.%N)
	dd if=/dev/zero of="$1" bs=4k count="$DDCOUNT" conv=notrunc status=none || return 1
	sync "$1" || return 1
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" -v n="$DDCOUNT" 'BEGIN { printf "%.1f\n", n * 4096 / (b - a) / 1e6 }'
}

row() {   # row LABEL IOPS MBS HOST_IOPS
	awk -v l="$1" -v i="$2" -v m="$3" -v h="$4" \
		'BEGIN { printf "  %-28s %9d IOPS %9.1f MB/s   %5.1f%% of host\n", l, i, m, h ? 100 * i / h : 0 }'
}

"$B/xbd-xenstored" --foreground >"$D/xenstored.log" 2>&1 &
pids="$pids $!"
wait_for 10 test -S "$XENSTORED_PATH" || die "xbd-xenstored did not start"
"$B/xbd-blkback" -N -p local -R "$XBD_RUNDIR" --max_queues=4 --max_ring_page_order=3 \
	>"$D/blkback.log" 2>&1 &
pids="$pids $!"
"$B/xbd" --platform local domain-create bench --memory 1G >/dev/null || die "domain-create"

mount -t tmpfs -o size=$((MB + 16))m xbd-bench "$D/tmpfs" || die "mount tmpfs"
dd if=/dev/urandom of="$D/tmpfs/disk.img" bs=1M count="$MB" status=none
dd if=/dev/urandom of="$D/loop.img" bs=1M count="$MB" status=none
loop=$(losetup -f --show "$D/loop.img") || die "losetup"

RR="--rw=randread --bs=4k --iodepth=64 --numjobs=1 --time_based --runtime=$SECS --name=b"
# the seed's dd is 131072 4k writes (512 MiB); at most the whole disk
DDCOUNT=$((MB * 256)); [ "$DDCOUNT" -gt 131072 ] && DDCOUNT=131072

# Queue scaling through the engine: two fio threads sharing one queue,
# then one queue each, for 4k random reads and writes QD64 and 1M
# sequential reads and writes QD16 (the data-path issue's "1 and 2 queues"; the ratio is issue 8's
# "2 jobs on 2 queues vs 2 jobs on 1 queue").  The suite's workload: random
# I/O in the first 64 MiB without fio's random map; 1 and 2 queues
# alternate twice and the ratio is of the sums, as bench/suite does, so a
# load change on this shared machine hits both sides.
scaling() {
	for w in "randread 4k 64 64m" "randwrite 4k 64 64m" "read 1M 16 ${MB}m" "write 1M 16 ${MB}m"; do
		set -- $w
		rw=$1 bs=$2 qd=$3 span=$4
		v1=0 m1=0 v2=0 m2=0
		for q in 1 2 1 2; do
			set -- $(fio_iops --rw="$rw" --bs="$bs" --iodepth="$qd" --numjobs=2 --thread \
				--group_reporting --time_based --runtime="$SECS" --name=s \
				--size="$span" --norandommap --randrepeat=0 \
				--ioengine=external:"$ENGINE" --xbd_domain=bench --xbd_vdev=xvdb \
				--xbd_max_queues="$q" --xbd_max_ring_page_order=3) ||
				die "engine fio, 2 jobs on $q queue(s)"
			eval "v$q=\$((v$q + \$1)) m$q=\$(awk -v a=\$m$q -v b=\$2 'BEGIN { print a + b }')"
			printf "  %-40s %9d IOPS %9.1f MB/s\n" "engine $rw $bs, 2 jobs, $q queue(s)" "$1" "$2"
		done
		awk -v a="$v1" -v b="$v2" -v l="$rw $bs" \
			'BEGIN { printf "  %-40s %5.2f x\n", "2 queues / 1 queue, " l, a ? b / a : 0 }'
	done
}

bench_one() {   # bench_one LABEL TARGET DIRECT
	label=$1 target=$2 direct=$3
	echo "$label ($target, ${MB} MiB, randread 4k QD64, ${SECS} s each):"
	set -- $(fio_iops $RR --ioengine=io_uring --direct="$direct" --filename="$target") ||
		die "host fio"
	host_iops=$1; row "host fio io_uring" "$1" "$2" "$1"
	"$B/xbd" --platform local block-attach bench "format=raw, vdev=xvdb, target=$target" ||
		die "block-attach"
	set -- $(fio_iops $RR --ioengine=external:"$ENGINE" --xbd_domain=bench --xbd_vdev=xvdb \
		--xbd_max_queues=1 --xbd_max_ring_page_order=3) || die "engine fio"
	row "guest fio external engine" "$1" "$2" "$host_iops"
	scaling
	"$B/xbd-blkfront" --domain bench --max_queues=4 --max_ring_page_order=3 \
		>>"$D/blkfront.log" 2>&1 &
	bf=$!
	dev="$XBD_RUNDIR/dom1/dev/xvdb"
	wait_for 20 test -f "$dev" || die "xbd-blkfront did not show $dev"
	set -- $(fio_iops $RR --ioengine=libaio --direct=1 --filename="$dev") || die "fuse fio"
	row "guest fio libaio via FUSE" "$1" "$2" "$host_iops"
	# xbd-blkfront's default transport (--fuse-uring), as its log says
	echo "    ($(grep -o 'FUSE transport: .*' "$D/blkfront.log" | tail -n 1))"
	echo "  the seed's dd, bs=4k count=$DDCOUNT then sync (MB/s to the end of the sync):"
	h=$(seed_dd "$target") || die "dd to $target"
	g=$(seed_dd "$dev") || die "dd to $dev"
	l=$h ll="(the target is a loop device)"
	if [ -f "$target" ]; then      # a loop device over the same backing file
		lo=$(losetup -f --show "$target") || die "losetup $target"
		l=$(seed_dd "$lo") || die "dd to $lo"
		losetup -d "$lo"
		ll="over the same file"
	fi
	awk -v h="$h" -v g="$g" -v l="$l" -v ll="$ll" 'BEGIN {
		printf "    %-26s %9.1f MB/s\n", "host file", h
		printf "    %-26s %9.1f MB/s  %s\n", "loop device", l, ll
		printf "    %-26s %9.1f MB/s  %5.2f x the loop device\n", "guest FUSE file", g, l ? g / l : 0 }'
	kill "$bf"; wait "$bf"
	"$B/xbd" --platform local block-detach bench xvdb || die "block-detach"
}

bench_one "tmpfs file" "$D/tmpfs/disk.img" 0
bench_one "loop device" "$loop" 1
echo "(host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
