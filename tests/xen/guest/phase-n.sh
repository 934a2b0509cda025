# Phase N, sourced by scenario.sh: network and image stores under the real
# libxl.  xbd-blkback --platform xen (phase U's helpers: u_start, u_cmd,
# u_detach) serves the domU's real xen-blkfront from
#   nbd    nbdkit (file plugin) in dom0 on a Unix socket:
#          target=nbd+unix:///?socket=/run/n.sock
#   qcow2  a qcow2 image through the qemu-storage-daemon xbd-blkback starts:
#          target=qcow2:/srv/n.qcow2 (format=raw: libxl sends format=qcow2
#          to QEMU's qdisk, not to a hotplug script)
# each attached by `xl block-attach ... script=xbd-block`; the domU's `io`
# command writes a pattern with O_DIRECT dd, reads it back with md5,
# discards MiB 1; dom0 checks the store with its own tools afterwards.
#   XBDXEN-N <store>.<name> | <command> | <values>
NSOCK=/run/n.sock
NIMG=/srv/n.img
NQCOW=/srv/n.qcow2

n_attach() { # LABEL TARGET
	echo "---- $EPOCHREALTIME $1" >> $LOGS/blkback.log
	attach "$1" "format=raw,vdev=xvdb,access=rw,script=xbd-block,target=$2" && return 0
	xenstore-ls -f /local/domain/0/backend/vbd/$DOMID | sed "s/^/XBDXEN-N-XS $1: /"
	return 1
}

n_nbd() {
	local pid
	dd if=/dev/zero of=$NIMG bs=1M count=$MB 2>/dev/null
	rm -f $NSOCK
	nbdkit --foreground --unix $NSOCK file $NIMG > $LOGS/nbdkit.log 2>&1 &
	pid=$!
	wait_for_sock $NSOCK 60
	u nbd.server "nbdkit --unix $NSOCK file $NIMG" "alive=$(kill -0 $pid 2>/dev/null && echo 1 || echo 0)"
	n_attach N-attach-nbd "nbd+unix:///?socket=$NSOCK" || { kill $pid; return 1; }
	u nbd.storage "xenstore-read xbd-storage" \
		"$(xenstore-read /local/domain/0/backend/vbd/$DOMID/$UDEV/xbd-storage 2>/dev/null || echo -)"
	u_cmd nbd 900 io
	u_detach N-detach-nbd
	kill $pid
	wait $pid 2>/dev/null
	u nbd.file "md5sum $NIMG" "$(md5sum < $NIMG | cut -d' ' -f1)"
}

n_qcow2() {
	rm -f $NQCOW
	u qcow2.create "qemu-img create -f qcow2 $NQCOW ${MB}M" \
		"rc=$(qemu-img create -f qcow2 $NQCOW ${MB}M > /dev/null 2>&1; echo $?)"
	n_attach N-attach-qcow2 "qcow2:$NQCOW" || return 1
	u qcow2.daemon "ls -d $URUN/qcow2/vbd-*" \
		"count=$(ls -d $URUN/qcow2/vbd-* 2>/dev/null | wc -l)"
	u_cmd qcow2 900 io
	u_detach N-detach-qcow2
	u qcow2.check "qemu-img check $NQCOW" "rc=$(qemu-img check $NQCOW > /dev/null 2>&1; echo $?)"
	qemu-img convert -O raw $NQCOW /srv/n-flat.raw 2>/dev/null
	u qcow2.file "qemu-img convert $NQCOW; md5sum" "$(md5sum < /srv/n-flat.raw | cut -d' ' -f1)"
	rm -f /srv/n-flat.raw
}

wait_for_sock() { # PATH SECONDS
	local i
	for i in $(seq $(($2 * 4))); do
		[ -S "$1" ] && return 0
		sleep 0.25
	done
	return 1
}

phase_n() {
	echo "XBDXEN-N rmmod | - | $( (! [ -d /sys/module/xen_blkback ] || rmmod xen-blkback) 2>&1 && echo ok)"
	u_start start
	wait_for $CONLOG/guest-$DOMU.log XBDXEN-DOMU-UP 300
	if command -v nbdkit > /dev/null; then
		n_nbd
	else
		u nbd.skip "command -v nbdkit" "not in the dom0 image"
	fi
	if command -v qemu-storage-daemon > /dev/null && command -v qemu-img > /dev/null; then
		n_qcow2
	else
		u qcow2.skip "command -v qemu-storage-daemon" "not in the dom0 image"
	fi
	u_stop                  # phase U starts its own
}
