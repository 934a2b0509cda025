#!/bin/bash
# Phase R's domU initrd: busybox, the xen-evtchn, xen-gntalloc and fuse
# modules (no xen-blkfront, no privcmd), xenstore-read/write, util-linux
# fallocate (busybox's cannot punch holes), xbd's frontend programs
# (xbd-test-xen-dd, xbdfront-io, xbd-blkfront) with their libraries
# (libfuse3 among them; as root xbd-blkfront mounts without fusermount3)
# and libgcc_s, guest/domr-init as /init.  run.sh calls it for every run, because the xbd programs come
# from $XBD_BUILD; it takes a few seconds.
# Usage: build-domr.sh BUILD-DIR OUT-FILE
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ $# = 2 ] || die "usage: build-domr.sh BUILD-DIR OUT-FILE"
BUILD=$1 OUTFILE=$2
R=$(mktemp -d "${TMPDIR:-/tmp}/xbd-domr.XXXXXX")
trap 'rm -rf "$R"' EXIT

copy() { # FILE DEST: FILE at DEST under the root, and what ldd names for it
	copy_with_libs "$R" "$1" "$2"
}

mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,lib/modules,opt/xbd/bin}
cp -L /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list-full); do
	[ -e "$R/$a" ] || ln -s /bin/busybox "$R/$a"
done
for m in xen-evtchn xen-gntalloc fuse; do
	for ko in $(modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'); do
		cp "$ko" "$R/lib/modules/"
	done
done
copy /usr/bin/xenstore-read /usr/bin/xenstore-read
copy /usr/bin/xenstore-write /usr/bin/xenstore-write
copy /usr/bin/fallocate /usr/bin/fallocate.util-linux
# glibc dlopen()s libgcc_s for pthread_cancel (xs_close cancels
# libxenstore's reader thread); ldd does not list it
copy /lib/x86_64-linux-gnu/libgcc_s.so.1 /lib/x86_64-linux-gnu/libgcc_s.so.1
for p in xbd-test-xen-dd xbdfront-io xbd-blkfront; do
	[ -x "$BUILD/bin/$p" ] || die "no $BUILD/bin/$p: run make"
	copy "$BUILD/bin/$p" "/opt/xbd/bin/$p"
done
install -m 0755 "$XBD_XEN_SRC/guest/domr-init" "$R/init"
install -m 0644 "$XBD_XEN_SRC/guest/domr-fuse" "$R/fuse-part"
mkdir -p "$(dirname "$OUTFILE")"
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 > "$OUTFILE"
