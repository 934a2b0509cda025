#!/bin/sh
# make check-xen: build the images, boot Xen once and run the scenario,
# then check its output with pytest (tests/xen/test_xen.py).  Prints the
# time of each step.  XBD_BUILD and XBD_XEN_OUT come from the Makefile.
set -eu
DIR=$(dirname "$0")
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
t0=$(now)
bash "$DIR/build-images.sh"
echo "check-xen: images built in $(took "$t0") s"
t1=$(now)
rc=0
bash "$DIR/run.sh" --out "$XBD_XEN_OUT/run" || rc=$?
echo "check-xen: boot + scenario in $(took "$t1") s (run.sh status $rc, log $XBD_XEN_OUT/run/serial.log)"
# the same O_DIRECT dd in the domU (1 MiB blocks) through kernel blkback
# (phase K) and through xbd-blkback (phase U, its first round)
grep -a -e 'XBDXEN-K domu .*XBDXEN-DOMU-DD' -e 'XBDXEN-U r1\.dd ' "$XBD_XEN_OUT/run/serial.log" | tr -d '\r' |
	awk '{ delete v; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	       who = /XBDXEN-U/ ? "xbd-blkback" : "kernel blkback"
	       printf "check-xen: %-14s %-13s %s MiB in %s s (%.1f MiB/s)\n", who,
		      v["op"], v["mb"], v["secs"], (v["secs"] > 0 ? v["mb"] / v["secs"] : 0) }' || true
# phase R: xbd's frontend in a domU against kernel blkback (1 MiB I/Os, one
# in flight, as dd)
grep -a 'XBDXEN-R domu .*XBDXEN-DOMR-IO dd[12] \(read\|write\) bytes=' "$XBD_XEN_OUT/run/serial.log" |
	tr -d '\r' | awk '{ split($NF, s, "="); split($(NF-1), b, "=");
		printf "check-xen: xbd frontend %-5s %.0f MiB in %s s (%.1f MiB/s)\n",
		       $(NF-2), b[2] / 1048576, s[2], (s[2] > 0 ? b[2] / 1048576 / s[2] : 0) }' || true
# and xbd-blkfront, the FUSE daemon, in that domU: O_DIRECT dd through
# its files (busybox dd, 1 MiB blocks)
mb=$(grep -a 'XBDXEN-R image-mb ' "$XBD_XEN_OUT/run/serial.log" | tr -d '\r' | awk '{ print $NF }')
grep -a 'XBDXEN-R domu .*XBDXEN-DOMR f-\(read-d\|write\|read-c\) rc=0 secs=' "$XBD_XEN_OUT/run/serial.log" |
	tr -d '\r' | awk -v mb="${mb:-0}" '{ for (i = 1; i <= NF; i++) {
			if ($i ~ /^f-/ && !op) op = $i
			if ($i ~ /^secs=/) s = substr($i, 6) }
		printf "check-xen: xbd-blkfront %-9s %d MiB in %s s (%.1f MiB/s)\n",
		       op, mb, s, (s > 0 ? mb / s : 0); op = "" }' || true
XBD_XEN_RUN=$XBD_XEN_OUT/run /usr/bin/python3 -m pytest -p no:cacheprovider -q "$DIR" || rc=1
echo "check-xen: total $(took "$t0") s"
exit $rc
