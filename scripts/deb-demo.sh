#!/bin/sh
# The installed packages at work, with nothing from the build tree: run
# after `apt-get install ./build/deb/*.deb` (see Documentation/xen-host.md,
# "Debian packages").  On the local platform in a private XBD_RUNDIR:
# xbd-xenstored, xbd-blkback (with the memory-pressure squeeze when the
# kernel has PSI), a domain and a 64 MiB disk, xbdfront-io verify, fio
# verify through /usr/lib/xbd/xbd-fio.so, a program built against
# libxbdfront-dev with pkg-config; the manual pages and the unit are
# checked to be in place.  Stops everything and removes what it made.
# Needs no FUSE.  Exit status non-zero when a step failed.
# XBD_FIO_ENGINE and XBD_UNIT name the engine and the unit elsewhere
# (to try the script on a `make install DESTDIR=` tree).
set -u
ENGINE=${XBD_FIO_ENGINE:-/usr/lib/xbd/xbd-fio.so}
UNIT=${XBD_UNIT:-/lib/systemd/system/xbd-blkback.service}
D=$(mktemp -d /tmp/xbd-deb-demo.XXXXXX)
export XBD_RUNDIR="$D/run"
export XENSTORED_PATH="$XBD_RUNDIR/xenstored.sock"
failed=0
say() { echo "xbd deb-demo: $*"; }
fail() { say "FAILED: $*"; failed=1; }

stop_pid() {
	[ -f "$1" ] || return 0
	p=$(cat "$1")
	kill -TERM "$p" 2>/dev/null
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL "$p" 2>/dev/null
	rm -f "$1"
}
cleanup() {
	stop_pid "$D/blkback.pid"
	stop_pid "$D/xenstored.pid"
	rm -rf "$D"
}
trap cleanup EXIT
wait_for() {
	n=$(($1 * 10)); shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1)); [ $n -gt 0 ] || return 1; sleep 0.1
	done
}

for p in xbd xbd-blkback xbd-blkfront xbd-xenstored xbdfront-io; do
	command -v $p >/dev/null || fail "$p is not installed"
done
for m in xbd.1 xbdfront-io.1 xbd-sysfs.5 xbd-fio.7 xbd-blkback.8 xbd-blkfront.8 xbd-xenstored.8; do
	man -w "${m%.*}" >/dev/null 2>&1 || [ -e "/usr/share/man/man${m##*.}/$m.gz" ] ||
		fail "no manual page $m"
done
say "programs and manual pages installed"
[ -x /etc/xen/scripts/xbd-block ] || fail "no /etc/xen/scripts/xbd-block"
grep -q -- '--pressure=auto' "$UNIT" ||
	fail "the unit does not squeeze on memory pressure"
say "unit: $(grep '^ExecStart=' "$UNIT")"

mkdir -p "$XBD_RUNDIR"
xbd-xenstored --foreground >"$D/xenstored.log" 2>&1 &
echo $! >"$D/xenstored.pid"
wait_for 10 test -S "$XENSTORED_PATH" || { fail "xbd-xenstored did not start"; exit 1; }
pressure=""
if [ -r /proc/pressure/memory ]; then
	pressure="--pressure=auto"
else
	say "no /proc/pressure/memory here: xbd-blkback runs without --pressure"
fi
xbd-blkback -N -p local -R "$XBD_RUNDIR" -l info --sysfs none $pressure \
	>"$D/blkback.log" 2>&1 &
echo $! >"$D/blkback.pid"
sleep 0.5
kill -0 "$(cat "$D/blkback.pid")" || { cat "$D/blkback.log"; fail "xbd-blkback $pressure exited"; exit 1; }
say "xbd-blkback runs ${pressure:-without --pressure}"

domid=$(xbd --platform local domain-create g1 --memory 128M) || { fail "domain-create"; exit 1; }
truncate -s 64M "$D/disk.img"
xbd --platform local block-attach g1 "format=raw, vdev=xvdb, access=rw, target=$D/disk.img" ||
	fail "block-attach"
xbd --platform local block-list g1

xbdfront-io --platform local "$domid" xvdb verify --bytes 1048576 >"$D/io.log" 2>&1 ||
	{ cat "$D/io.log"; fail "xbdfront-io verify"; }
say "xbdfront-io verify: $(tail -n 1 "$D/io.log")"

fio --name=v --ioengine="external:$ENGINE" --xbd_domain=g1 --xbd_vdev=xvdb \
	--rw=randwrite --bs=4k --iodepth=16 --size=8M --verify=crc32c --do_verify=1 \
	--verify_state_save=0 \
	--output-format=terse --terse-version=3 >"$D/fio.log" 2>&1 ||
	{ cat "$D/fio.log"; fail "fio through xbd-fio.so"; }
say "fio xbd-fio.so randwrite+verify: errors $(awk -F';' 'NF > 5 { print $5; exit }' "$D/fio.log")"

cat >"$D/t.c" <<'C'
#include <stdio.h>
#include <xbdfront.h>
int main(void)
{
	struct xbdfront_opts o;

	xbdfront_opts_default(&o);
	printf("libxbdfront: default max_queues %u\n", o.max_queues);
	return 0;
}
C
if command -v cc >/dev/null; then
	# shellcheck disable=SC2046
	cc -o "$D/t" "$D/t.c" $(pkg-config --cflags --libs xbdfront) && "$D/t" ||
		fail "a program built against libxbdfront-dev"
else
	say "no C compiler: the libxbdfront-dev check is left out"
fi

xbd --platform local block-detach g1 xvdb || fail "block-detach"
xbd --platform local domain-destroy g1 || fail "domain-destroy"
[ $failed = 0 ] && say "all steps passed"
exit $failed
