# Phase N, sourced by scenario.sh: network and image stores under the real
# libxl.  xbd-blkback --platform xen (phase U's helpers: u_start, u_cmd,
# u_detach) serves the domU's real xen-blkfront from
#   nbd    nbdkit (file plugin) in dom0 on a Unix socket:
#          target=nbd+unix:///?socket=/run/n.sock
#   qcow2  a qcow2 image through the qemu-storage-daemon xbd-blkback starts:
#          target=qcow2:/srv/n.qcow2 (format=raw: libxl sends format=qcow2
#          to QEMU's qdisk, not to a hotplug script)
#   rbd    an RBD image of a single-node Ceph cluster in dom0 (one
#          monitor on 127.0.0.1, one memstore OSD, made on the host by
#          build-ceph.py; its daemons start with the phase and boot, and
#          the image is made, while nbd and qcow2 run):
#          target=rbd:rbd/n:conf=/run/xbd-ceph/ceph.conf
# each attached by `xl block-attach ... script=xbd-block`; the domU's `io`
# command writes a pattern with O_DIRECT dd, reads it back with md5,
# discards MiB 1; dom0 checks the store with its own tools afterwards.
#   XBDXEN-N <store>.<name> | <command> | <values>
NSOCK=/run/n.sock
NIMG=/srv/n.img
NQCOW=/srv/n.qcow2
NCEPH=/run/xbd-ceph             # build-ceph.py's DOM0DIR: its ceph.conf names it
NCONF=$NCEPH/ceph.conf

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

# n_ceph_start: the cluster the image carries (/srv/ceph), in /run, a
# tmpfs of a known size (the monitor checks its store's free space), with
# loopback up; its daemons themselves (-f), so that their PIDs are ours.
# The image is made in the background (while nbd and qcow2 run: each
# Ceph CLI takes 15-20 s under TCG): `rbd create` waits until the
# monitor has the OSD up and its PG active (bounded: TCG on a loaded host
# is slow, but a cluster that never comes up must not hang).  1 MiB
# objects: the domU's discard of MiB 1 is one whole object.
n_ceph_start() {
	ip link set lo up
	cp -a /srv/ceph $NCEPH
	ceph-mon -c $NCONF -i a -f > $NCEPH/mon.out 2>&1 &
	NMON=$!
	ceph-osd -c $NCONF -i 0 -f > $NCEPH/osd.out 2>&1 &
	NOSD=$!
	( t0=$EPOCHREALTIME
	  timeout 300 rbd -c $NCONF create --size ${MB}M --object-size 1M rbd/n > $NCEPH/create.out 2>&1
	  echo "rc=$? secs=$(secs $t0 $EPOCHREALTIME)" > $NCEPH/create.rc ) &
	NCREATE=$!
}

alive() { kill -0 "$1" 2>/dev/null && echo 1 || echo 0; }
n_rss() { awk '/^VmRSS/ { print $2 }' /proc/$1/status 2>/dev/null || echo -; }

n_rbd() {
	local rc objs
	wait $NCREATE
	u rbd.create "rbd create --size ${MB}M --object-size 1M rbd/n" \
		"$(cat $NCEPH/create.rc 2>/dev/null || echo rc=-) mon=$(alive $NMON) osd=$(alive $NOSD)"
	grep -q '^rc=0 ' $NCEPH/create.rc 2>/dev/null ||
		{ tail -25 $NCEPH/create.out $NCEPH/mon.out $NCEPH/osd.out | sed 's/^/XBDXEN-N-CEPH /'; return 1; }
	n_attach N-attach-rbd "rbd:rbd/n:conf=$NCONF" || return 1
	u rbd.storage "xenstore-read xbd-storage" \
		"$(xenstore-read /local/domain/0/backend/vbd/$DOMID/$UDEV/xbd-storage 2>/dev/null || echo -)"
	u_cmd rbd 900 io
	u_detach N-detach-rbd
	# the image's data and its objects, the two CLIs side by side
	rm -f /run/n-rbd.raw
	timeout 120 rbd -c $NCONF export rbd/n /run/n-rbd.raw > /dev/null 2>&1 &
	rc=$!
	objs=$(timeout 120 rados -c $NCONF -p rbd ls 2>/dev/null | grep '^rbd_data\.')
	wait $rc
	rc=$?
	u rbd.export "rbd export rbd/n; md5sum" \
		"rc=$rc md5=$(md5sum < /run/n-rbd.raw | cut -d' ' -f1) bytes=$(stat -c %s /run/n-rbd.raw)"
	rm -f /run/n-rbd.raw
	u rbd.objects "rados -p rbd ls" \
		"data=$(echo "$objs" | grep -c .) mib1=$(echo "$objs" | grep -c '\.0000000000000001$')"
	u rbd.mem "VmRSS, MemAvailable (KiB)" \
		"mon=$(n_rss $NMON) osd=$(n_rss $NOSD) dom0_avail=$(awk '/^MemAvailable/ { print $2 }' /proc/meminfo)"
}

n_ceph_stop() { # SIGKILL: the store is not needed after the phase
	kill -KILL $NOSD $NMON 2>/dev/null
	wait $NOSD $NMON 2>/dev/null
	rm -rf $NCEPH
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
	local ceph=0 b
	if [ -d /srv/ceph ]; then
		ceph=1
		for b in ceph-mon ceph-osd rbd rados; do command -v $b > /dev/null || ceph=0; done
	fi
	[ $ceph = 1 ] && n_ceph_start
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
	if [ $ceph = 1 ]; then
		timed N-rbd n_rbd
		n_ceph_stop
	else
		u rbd.skip "ls /srv/ceph; command -v ceph-mon ceph-osd rbd rados" \
			"no Ceph in the dom0 image (build-images.sh: apt-get install ceph-mon ceph-osd ceph-common)"
	fi
	u_stop                  # phase U starts its own
}
