#!/bin/sh
# Install the Debian packages xbd needs to build, test and demo.
# With --xen, also what `make check-xen` needs.
# Idempotent and quiet when everything is present. Run as root (or with sudo).
set -eu

PKGS="gcc make pkg-config libc6-dev
libxen-dev xen-utils-4.17 xenstore-utils
liburing-dev libfuse3-dev fuse3 tmux
libcmocka-dev python3 python3-pytest python3-pyxs
fio dpkg-dev nbdkit libnbd-dev libnbd-bin qemu-system-common qemu-utils gnuplot-nox
librbd-dev ceph-mon ceph-osd ceph-common
clang libclang-rt-14-dev valgrind util-linux procps psmisc groff-base
cppcheck clang-tidy libtsan2"
# libtsan2: gcc's ThreadSanitizer runtime (make check-tsan; gcc pulls it in
# too); util-linux: setarch, which check-tsan runs it under where needed.
# dpkg-dev: dpkg-source, which scripts/fio-src.sh unpacks fio's source
# package with (the fio engine builds on fio's own headers).
# `make check-xen` (tests/xen: Xen + a Linux PV dom0 booted under
# qemu-system-x86_64) passes --xen for these as well.
XEN_PKGS="xen-hypervisor-4.17-amd64 qemu-system-x86 linux-image-amd64
busybox-static cpio gzip file kmod"
[ "${1:-}" = "--xen" ] && PKGS="$PKGS $XEN_PKGS"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "xbd: installing missing packages:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "xbd: need root to install packages (run as root or install them yourself)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists of a fresh machine are empty; refresh them once.
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
