# tests/xen: settings shared by build-images.sh and run.sh (sourced).
# Everything built or logged goes under $XBD_XEN_OUT (make check-xen sets
# it to build/xen); nothing large is written into the source tree.
XBD_XEN_OUT=${XBD_XEN_OUT:-$PWD/build/xen}
XBD_XEN_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# One Debian kernel (linux-image-amd64) serves as dom0 and as the PV domU.
KVER=${KVER:-$(ls /lib/modules | sort -V | tail -1)}
KERNEL=${KERNEL:-/boot/vmlinuz-$KVER}
# Xen (xen-hypervisor-4.17-amd64).  QEMU's multiboot loader wants the ELF,
# not Debian's gzip file.
XEN_GZ=${XEN_GZ:-/boot/xen-4.17-amd64.gz}
XEN_LIBEXEC=${XEN_LIBEXEC:-/usr/lib/xen-4.17}

XEN_ELF=$XBD_XEN_OUT/xen.elf
DOM0_BASE=$XBD_XEN_OUT/dom0-base.cpio.gz
DOMU_INITRD=$XBD_XEN_OUT/domu-initrd.cpio.gz

log() { echo "[xbd-xen $(date +%T)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# copy_with_libs ROOT FILE DEST: FILE at DEST under ROOT, with every shared
# library ldd names for it (at its own path; ones already there are kept).
copy_with_libs() {
	local root=$1 f=$2 dest=$3 lib
	mkdir -p "$root$(dirname "$dest")"
	rm -f "$root$dest"
	cp -L "$f" "$root$dest"
	for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}
