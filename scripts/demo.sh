#!/bin/sh
# make demo: the main job on the local platform.  Runs each step whose
# pieces exist and says plainly which steps are not there yet.
set -u
B="${XBD_BUILD:?}/bin"
missing=""
have() { [ -x "$B/$1" ]; }
for p in xbd-xenstored xbd-blkback xbd xbd-blkfront; do
	have "$p" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "xbd demo: not built yet:$missing"
	echo "xbd demo: the end-to-end demo (xenstored, blkback, a guest, block-attach, dd and fio) needs all of them."
	echo "xbd demo: what exists today is checked by 'make check'."
	exit 1
fi
exec sh "$(dirname "$0")/demo-run.sh"
