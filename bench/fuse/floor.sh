#!/bin/bash
# bench/fuse/floor.sh: the FUSE disk file against the FUSE transport's floor,
# in the same minutes, rounds interleaved (Documentation/performance.md,
# "The FUSE transport's floor").  Per round, fio 4k random reads for SECS s:
# the host on a 1 GiB /dev/shm file (io_uring and libaio, direct), then,
# libaio direct: xbd-bench-fuse-floor's file (answers at once, no backend)
# and xbd-blkfront's disk file, each over /dev/fuse and, if the kernel
# allows it, over io_uring (--fuse-uring=on), the order alternating each
# round.
#     XBD_BUILD=build ROUNDS=4 SECS=5 bench/fuse/floor.sh
# Prints one line per figure: round N qd Q WHO IOPS.  Root; quiet machine.
set -eu
B=${XBD_BUILD:-build}/bin
ROUNDS=${ROUNDS:-4}; SECS=${SECS:-5}
EN=/sys/module/fuse/parameters/enable_uring
R=$(mktemp -d /tmp/xbd-floor.XXXXXX); chmod 755 "$R"
IMG=$(mktemp /dev/shm/xbd-floor.XXXXXX)
export XBD_RUNDIR=$R
XS= BB= BF= FL= EN0=
cleanup() {
	[ -n "$BF" ] && kill "$BF" 2>/dev/null && wait "$BF" 2>/dev/null
	[ -n "$FL" ] && kill "$FL" 2>/dev/null && wait "$FL" 2>/dev/null
	[ -n "$BB" ] && kill "$BB" 2>/dev/null && wait "$BB" 2>/dev/null
	[ -n "$XS" ] && kill "$XS" 2>/dev/null && wait "$XS" 2>/dev/null
	[ -n "$EN0" ] && echo "$EN0" > $EN
	rm -f "$IMG"; rm -rf "$R"
}
trap cleanup EXIT
dd if=/dev/urandom of="$IMG" bs=1M count=1024 status=none
"$B"/xbd-xenstored --foreground > "$R"/xs.log 2>&1 & XS=$!
sleep 0.5
"$B"/xbd-blkback -N -p local -R "$R" > "$R"/bb.log 2>&1 & BB=$!
sleep 0.5
DOM=$("$B"/xbd --platform local domain-create bench --memory 512M)
"$B"/xbd --platform local block-attach bench "format=raw, vdev=xvdb, access=rw, target=$IMG" --timeout 20
DEV=$R/dom$DOM/dev/xvdb
modes="floor-off xbd-off"
if [ -w $EN ]; then EN0=$(cat $EN); echo Y > $EN && modes="floor-off xbd-off floor-on xbd-on"; fi
fio_iops() {
	fio --output-format=terse --terse-version=3 --name=b --rw=randread --bs=4k \
	    --time_based --runtime="$SECS" --numjobs=1 "$@" 2>>"$R"/fio.err |
	    awk -F';' '$1 == 3 { print $8 }'
}
wait_file() { for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.05; done; echo "no $1" >&2; return 1; }
stop_pid() { kill -TERM "$1"; wait "$1" || true; }
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for qd in 64 1; do
		echo "round $r qd $qd host-io_uring $(fio_iops --ioengine=io_uring --direct=1 --iodepth=$qd --filename="$IMG")"
		echo "round $r qd $qd host-libaio $(fio_iops --ioengine=libaio --direct=1 --iodepth=$qd --filename="$IMG")"
	done
	order=$modes; [ $((r % 2)) = 0 ] && order=$(echo "$modes" | tr ' ' '\n' | tac | tr '\n' ' ')
	for m in $order; do
		case $m in floor-*)
			mkdir -p "$R"/floor
			"$B"/xbd-bench-fuse-floor --fuse-uring="${m#floor-}" "$R"/floor 1024 \
				>> "$R"/floor.log 2>&1 & FL=$!
			wait_file "$R"/floor/disk; f=$R/floor/disk ;;
		*)
			"$B"/xbd-blkfront --domain bench --max_queues=1 --max_ring_page_order=3 \
				--fuse-uring="${m#xbd-}" >> "$R"/bf.log 2>&1 & BF=$!
			wait_file "$DEV"; f=$DEV ;;
		esac
		for qd in 64 1; do
			echo "round $r qd $qd $m $(fio_iops --ioengine=libaio --direct=1 --iodepth=$qd --filename="$f")"
		done
		case $m in floor-*) stop_pid "$FL"; FL= ;; *) stop_pid "$BF"; BF= ;; esac
	done
	echo "# load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%TZ)"
done
