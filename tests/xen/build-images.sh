#!/bin/bash
# Build what tests/xen/run.sh boots, under $XBD_XEN_OUT:
#   xen.elf              Debian's Xen 4.17, gunzipped (QEMU -kernel loads
#                        it through its multiboot header)
#   domu-initrd.cpio.gz  busybox + xen-blkfront.ko + xenstore-read/watch +
#                        guest/domu-init
#   dom0-base.cpio.gz    busybox, bash and the tools the hotplug scripts
#                        need, nbdkit and QEMU's storage tools (phase N),
#                        Ceph's daemons and CLIs with a prepared cluster
#                        (phase N, build-ceph.py),
#                        the Xen 4.17 userspace (xl, C xenstored,
#                        xenconsoled, xen-init-dom0, xenstore-*), /etc/xen,
#                        the dom0 Xen modules, the domU kernel + initrd,
#                        guest/dom0-init as /init
# The xbd programs and the scenario are not in here: run.sh appends them as
# a per-run overlay cpio (the kernel unpacks concatenated archives).
# Usage: build-images.sh          (inputs: installed Debian packages only)
set -euo pipefail
source "$(dirname "$0")/common.sh"

T0=$EPOCHREALTIME
mkdir -p "$XBD_XEN_OUT"
[ -r "$KERNEL" ] || die "no $KERNEL (apt-get install linux-image-amd64)"
[ -r "$XEN_GZ" ] || die "no $XEN_GZ (apt-get install xen-hypervisor-4.17-amd64)"
file -L /bin/busybox | grep -q 'statically linked' || die "need busybox-static"

zcat "$XEN_GZ" > "$XEN_ELF.tmp"
file "$XEN_ELF.tmp" | grep -q 'ELF 32-bit' || die "unexpected format of $XEN_GZ"
mv "$XEN_ELF.tmp" "$XEN_ELF"

# add_file ROOT FILE...: copy each file to the same path under ROOT, with
# every shared library ldd names for it.
add_file() {
	local root=$1 f
	shift
	for f in "$@"; do
		[ -e "$f" ] || die "missing $f"
		copy_with_libs "$root" "$f" "$f"
	done
}

add_busybox() { # ROOT: busybox with one link per applet
	local root=$1 a
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin}
	cp -L /bin/busybox "$root/bin/busybox"
	for a in $(/bin/busybox --list-full); do
		[ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
	done
}

# modules_in_order MOD...: the .ko files to insmod, dependencies first
modules_in_order() {
	local m
	for m in "$@"; do
		modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++'
}

pack() { # DIR OUT
	(cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 > "$2.tmp"
	mv "$2.tmp" "$2"
}

ROOTS=()
trap 'rm -rf "${ROOTS[@]}"' EXIT

# ---- domU: busybox + blkfront ---------------------------------------------
U=$(mktemp -d "$XBD_XEN_OUT/domu-root.XXXXXX"); ROOTS+=("$U")
add_busybox "$U"
mkdir -p "$U"/{proc,sys,dev,tmp,lib/modules}
for m in $(modules_in_order xen-blkfront); do cp "$m" "$U/lib/modules/"; done
# phase U's command channel: the domU reads and watches data/xbd-cmd
add_file "$U" /usr/bin/xenstore-read /usr/bin/xenstore-watch
install -m 0755 "$XBD_XEN_SRC/guest/domu-init" "$U/init"
pack "$U" "$DOMU_INITRD"

# ---- dom0 ------------------------------------------------------------------
D=$(mktemp -d "$XBD_XEN_OUT/dom0-root.XXXXXX"); ROOTS+=("$D")
add_busybox "$D"
mkdir -p "$D"/{proc,sys,dev,tmp,run,root,srv,boot,etc/xbd-xen,var/lib/xen,var/lib/xenstored,var/log/xen/console}
ln -s /run "$D/var/run"
# real bash and the coreutils/util-linux tools Xen's hotplug scripts use;
# libgcc_s is dlopen()ed by glibc for xl's pthread_cancel (ldd misses it)
for f in /bin/bash /usr/sbin/losetup /usr/bin/flock /usr/bin/stat /usr/bin/readlink \
	 /usr/bin/md5sum /usr/bin/timeout /lib/x86_64-linux-gnu/libgcc_s.so.1; do
	add_file "$D" "$f"
done
add_file "$D" $(find "$XEN_LIBEXEC/bin" -type f -perm -u+x)
# phase N's stores, when installed (nbdkit, qemu-utils, qemu-system-common):
# nbdkit with its file plugin, qemu-storage-daemon (xbd-blkback's qcow2
# driver starts it) and qemu-img
NBDKIT_PLUGIN=/usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-file-plugin.so
for f in /usr/bin/nbdkit "$NBDKIT_PLUGIN" /usr/bin/qemu-storage-daemon /usr/bin/qemu-img; do
	if [ -e "$f" ]; then add_file "$D" "$f"; else log "no $f: phase N skips its store"; fi
done
# phase N's rbd store, when Ceph is installed (ceph-mon, ceph-osd,
# ceph-common): the two daemons, the rbd and rados CLIs (C++; the `ceph`
# CLI is Python, which dom0 has not), the object classes RBD images need
# (cls_rbd, cls_lock, ...); and a cluster made here (build-ceph.py), which
# phase N copies to /run/xbd-ceph and starts.  No erasure-code plugins:
# its ceph.conf preloads none (see build-ceph.py)
CEPH_BINS="/usr/bin/ceph-mon /usr/bin/ceph-osd /usr/bin/rbd /usr/bin/rados"
CEPH_LIB=/usr/lib/x86_64-linux-gnu
if which ceph monmaptool $CEPH_BINS > /dev/null; then
	t=$EPOCHREALTIME
	/usr/bin/python3 "$XBD_XEN_SRC/build-ceph.py" "$D/srv/ceph" /run/xbd-ceph >&2 ||
		die "build-ceph.py failed"
	add_file "$D" $CEPH_BINS $CEPH_LIB/rados-classes/libcls_*.so
	log "ceph cluster and tools added in $(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
else
	log "no Ceph (ceph-mon, ceph-osd, ceph-common): phase N skips its rbd store"
fi
for f in /usr/bin/xenstore*; do [ -L "$f" ] || add_file "$D" "$f"; done
for t in xl xenstored xenconsoled xen-init-dom0; do
	ln -sf "$XEN_LIBEXEC/bin/$t" "$D/usr/sbin/$t"
done
cp -a /etc/xen "$D/etc/"
modules_in_order xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs loop fuse xen-blkback \
	> "$D/etc/xbd-xen/modules"
while read -r m; do mkdir -p "$D$(dirname "$m")"; cp "$m" "$D$m"; done < "$D/etc/xbd-xen/modules"
cp "$KERNEL" "$D/boot/vmlinuz-domu"
cp "$DOMU_INITRD" "$D/boot/domu-initrd.cpio.gz"
echo 'root:x:0:0:root:/root:/bin/sh' > "$D/etc/passwd"
echo 'root:x:0:' > "$D/etc/group"
sed "s#@XEN_BIN@#$XEN_LIBEXEC/bin#g" "$XBD_XEN_SRC/guest/dom0-init" > "$D/init"
chmod 0755 "$D/init"
pack "$D" "$DOM0_BASE"
log "images built in $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s:" \
    "$(du -h "$XEN_ELF" "$DOMU_INITRD" "$DOM0_BASE" | awk '{ printf "%s %s  ", $2, $1 }')"
