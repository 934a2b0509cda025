# Phase U, sourced by scenario.sh: xbd-blkback serves the domU's real
# xen-blkfront.  Kernel blkback is unloaded, xbd-blkback --platform xen
# runs in dom0 with its sysfs tree (FUSE), and `xl block-attach` names the
# xbd-block hotplug script.  The domU (guest/domu-init, xbd_cmd=1) runs
# the commands dom0 writes to its data/xbd-cmd node; its results come back
# through its console log and are printed here as
#   XBDXEN-U <round>.<name> | <command> | <values>
# Rounds: r1 (max_queues=2 max_ring_page_order=2, as booted), r2 after a
# detach and re-attach, r3 with blkfront reloaded with feature_persistent=0,
# r4 with max_queues=1; then SIGKILL and restart of xbd-blkback under a
# reading domU; an online resize (the image grown by truncate, then by
# `xbd block-resize`, a shrink refused); finally `xl destroy` with the
# disk attached (by phase D when it runs, else here) and what the backend
# still holds after it.  UQUICK=1 (run.sh --set) keeps r1 and the resize
# only.
UDEV=51728                      # xvdb
URUN=/run/xbd-u                 # xbd-blkback's rundir
USYS=$URUN/sys                  # its sysfs-style tree
USEQ=0                          # sequence number of the domU's commands
UIMG=/srv/u.img
UBLKFRONT="max_queues=2 max_ring_page_order=2"

# phase S (phase-s.sh) uses these helpers too, with UPHASE=S
u() { echo "XBDXEN-${UPHASE:-U} $1 | $2 | $3"; }
u_devdir() { echo "$USYS/bus/xen-backend/devices/vbd-$DOMID-$UDEV"; }

# u_start LABEL: start xbd-blkback (with $UARGS) and wait for its tree
# (or 60 s)
u_start() {
	local i
	mkdir -p $URUN
	echo "---- $1" >> $LOGS/blkback.log
	# each log line gets dom0's clock (bash's own, no process per line)
	xbd-blkback --platform xen --rundir $URUN --foreground --log-level info ${UARGS:-} \
		> >(while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done >> $LOGS/blkback.log) 2>&1 &
	UPID=$!
	for i in $(seq 240); do
		[ -d $USYS/module/xen_blkback ] && break
		kill -0 $UPID 2>/dev/null || break
		sleep 0.25
	done
	u "$1" "xbd-blkback --platform xen" \
		"alive=$(kill -0 $UPID 2>/dev/null && echo 1 || echo 0) sysfs=$([ -d $USYS/module/xen_blkback ] && echo 1 || echo 0)"
}

# u_stat NAME: one of the device's statistics (sysfs tree, else SIGUSR1)
u_stat() {
	local f
	f=$(u_devdir)/statistics/$1
	if [ -r "$f" ]; then
		cat "$f"
		return
	fi
	rm -f $URUN/xbd-blkback.stats
	kill -USR1 $UPID
	wait_for $URUN/xbd-blkback.stats "vbd-$DOMID-$UDEV" 10
	sed -n "s/^vbd-$DOMID-$UDEV:.* $1 \([0-9]*\).*/\1/p" $URUN/xbd-blkback.stats | grep . || echo none
}

# u_held: what the backend process holds: fds, gntdev mappings, evtchn fds
u_held() {
	local maps fds ev gnt
	maps=$(grep -c /dev/xen/gntdev /proc/$UPID/maps 2>/dev/null)
	fds=$(ls /proc/$UPID/fd 2>/dev/null | wc -l)
	ev=$(ls -l /proc/$UPID/fd 2>/dev/null | grep -c /dev/xen/evtchn)
	gnt=$(ls -l /proc/$UPID/fd 2>/dev/null | grep -c /dev/xen/gntdev)
	echo "fds=$fds gntdev_maps=${maps:-0} evtchn_fds=$ev gntdev_fds=$gnt"
}

# u_wait REGEX SECONDS: wait for a line of the domU's console (polling
# once a second: every process costs under TCG, and libxl gives the
# backend only 10 s to answer an attach)
u_wait() {
	local i=0
	until grep -aq "$1" $CONLOG/guest-$DOMU.log 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt "$2" ] && return 1
		sleep 1
	done
}

# u_send CMD ARGS...: hand a command to the domU (sets SEQ)
u_send() {
	USEQ=$((USEQ + 1))
	SEQ=$USEQ
	xenstore-write /local/domain/$DOMID/data/xbd-cmd "$SEQ $*"
}
# u_collect LABEL SECONDS CMD...: wait for the domU's ack, relay its lines
u_collect() {
	local label=$1 to=$2 ack
	shift 2
	u_wait "XBDXEN-DOMU-ACK $SEQ " "$to"
	grep -a "XBDXEN-DOMU-R $SEQ " $CONLOG/guest-$DOMU.log | tr -d '\r' |
		while read -r _ _ name rest; do u "$label.$name" "$*" "$rest"; done
	ack=$(grep -a "XBDXEN-DOMU-ACK $SEQ " $CONLOG/guest-$DOMU.log | tr -d '\r' | sed 's/.*rc=//')
	u "$label.ack" "$*" "${ack:-timeout}"
}
u_cmd() { # LABEL SECONDS CMD ARGS...
	local label=$1 to=$2
	shift 2
	u_send "$@"
	u_collect "$label" "$to" "$@"
}

# u_xs LABEL: what both ends negotiated, from xenstore
u_xs() {
	local fe=/local/domain/$DOMID/device/vbd/$UDEV be=/local/domain/0/backend/vbd/$DOMID/$UDEV k
	u "$1.fe" "xenstore-read $fe" "$(for k in state multi-queue-num-queues ring-page-order feature-persistent; do
		printf '%s=%s ' $k "$(xenstore-read $fe/$k 2>/dev/null || echo -)"; done)"
	u "$1.be" "xenstore-read $be" "$(for k in state multi-queue-max-queues max-ring-page-order feature-persistent feature-flush-cache feature-discard hotplug-status; do
		printf '%s=%s ' $k "$(xenstore-read $be/$k 2>/dev/null || echo -)"; done)"
	u "$1.sysfs-queues" "ls $(u_devdir)" "$(ls $(u_devdir) 2>/dev/null | grep -c '^queue-')"
}

u_attach() { # LABEL: fails phase U (after a dump of the nodes) on error
	echo "---- $EPOCHREALTIME $1" >> $LOGS/blkback.log
	attach "$1" "format=raw,vdev=xvdb,access=rw,script=xbd-block,target=$UIMG" && return 0
	xenstore-ls -f /local/domain/0/backend/vbd/$DOMID | sed "s/^/XBDXEN-U-XS $1: /"
	return 1
}
u_detach() { # LABEL: xl block-detach, and the domU sees the disk go
	timed "$1" timeout 180 xl block-detach $DOMU xvdb
	u_cmd "$1" 300 wait-gone
	u "$1.nodes" "xenstore-ls backend" "$(xenstore-ls /local/domain/0/backend/vbd/$DOMID/$UDEV >/dev/null 2>&1 && echo present || echo gone)"
}

# u_round LABEL: data checks on the attached disk, flushes, negotiation
u_round() {
	local l=$1 f0 f1
	f0=$(u_stat f_req)
	u_cmd "$l" 900 io
	# idle persistent grants go after persistent_grant_unused_seconds:
	# count them while the domU's last read is recent
	u "$l.pgrants" "statistics/persistent_grants" "$(u_stat persistent_grants)"
	u "$l.file" "md5sum $UIMG" "$(md5sum < $UIMG | cut -d' ' -f1)"
	u "$l.file-discarded" "dd $UIMG skip=1 count=1" "$(dd if=$UIMG bs=1M skip=1 count=1 2>/dev/null | md5sum | cut -d' ' -f1)"
	f1=$(u_stat f_req)
	u_cmd "$l.sync" 120 fsync
	u "$l.f_req" "statistics/f_req" "before-io=$f0 after-io=$f1 after-fsync=$(u_stat f_req)"
	u "$l.stats" "statistics" "$(for k in rd_req wr_req ds_req oo_req rd_sect wr_sect; do printf '%s=%s ' $k "$(u_stat $k)"; done)"
	u_xs "$l"
}

# u_restart: SIGKILL xbd-blkback while the domU reads, start it again
u_restart() {
	local t0
	local n=8 during
	u_send readlong $n
	u_wait "XBDXEN-DOMU-R $SEQ started" 120
	sleep 0.5
	t0=$EPOCHREALTIME
	kill -9 $UPID
	# the domU had not finished its last read when the backend died
	grep -aq "XBDXEN-DOMU-R $SEQ read$n " $CONLOG/guest-$DOMU.log && during=0 || during=1
	wait $UPID 2>/dev/null
	u restart.killed "kill -9" "status=$? during=$during"
	u_start restart.start
	u_collect restart 240 readlong $n
	echo "XBDXEN-TIME U-restart secs=$(secs "$t0" "$EPOCHREALTIME") rc=0"
	u restart.file "md5sum $UIMG" "$(md5sum < $UIMG | cut -d' ' -f1)"
	u_xs restart
}

# u_resize: online resize (Documentation/storage.md): the image grows
# under the connected disk, by truncate (xbd-blkback notices within
# size_check_ms) and by `xbd block-resize`; the domU's xen-blkfront must
# see each size in /sys/block/xvdb/size and read past the old end.  A
# shrink is refused.  Last in phase U: the checks before compare dom0's
# whole file with the domU's first $MB MiB.
u_resize() {
	local be=/local/domain/0/backend/vbd/$DOMID/$UDEV s1=$((MB * 2)) s2=$((MB * 3)) err rc
	u resize.before "stat $UIMG" "bytes=$(stat -c %s $UIMG) sectors=$(xenstore-read $be/sectors)"
	truncate -s ${s1}M $UIMG
	u_cmd resize.grow 180 wait-size $((s1 * 2048)) 90
	u resize.grow.be "xenstore-read $be/sectors" "sectors=$(xenstore-read $be/sectors) tree=$(cat $(u_devdir)/sectors 2>/dev/null || echo -) state=$(xenstore-read $be/state)"
	if ! command -v xbd > /dev/null; then
		u resize.xbd "xbd block-resize" "rc=no-xbd"
		return
	fi
	err=$(xbd --platform xen block-resize $DOMID xvdb ${s2}M --timeout 60 2>&1)
	rc=$?
	u resize.xbd "xbd block-resize $DOMID xvdb ${s2}M" "rc=$rc bytes=$(stat -c %s $UIMG) err='$(echo $err)'"
	u_cmd resize.xbdgrow 180 wait-size $((s2 * 2048)) 90
	err=$(xbd --platform xen block-resize $DOMID xvdb ${s1}M 2>&1)
	rc=$?
	u resize.shrink "xbd block-resize $DOMID xvdb ${s1}M" "rc=$rc bytes=$(stat -c %s $UIMG) err='$(echo $err)'"
}

# u_freed LABEL: after `xl destroy`: the backend let go of everything
u_freed() {
	local i
	for i in $(seq 240); do
		[ ! -d "$(u_devdir)" ] && [ "$(u_held)" = "$UBASE" ] && break
		sleep 0.25
	done
	u "$1.held" "/proc/$UPID" "alive=$(kill -0 $UPID 2>/dev/null && echo 1 || echo 0) $(u_held)"
	u "$1.sysfs-dev" "ls $(u_devdir)" "$([ -d "$(u_devdir)" ] && echo present || echo gone)"
	u "$1.nodes" "xenstore-ls backend" "$(xenstore-ls /local/domain/0/backend/vbd/$DOMID >/dev/null 2>&1 && echo present || echo gone)"
}

# u_stop: SIGTERM xbd-blkback; its log (the test looks for errors)
u_stop() {
	kill $UPID 2>/dev/null
	wait $UPID 2>/dev/null
	u stop "kill -TERM" "status=$?"
	tail -300 $LOGS/blkback.log | sed 's/^/XBDXEN-U-LOG /'
}

phase_u() {
	echo "XBDXEN-U rmmod | - | $( (! [ -d /sys/module/xen_blkback ] || rmmod xen-blkback) 2>&1 && echo ok)"
	echo "XBDXEN-U fuse | - | $([ -c /dev/fuse ] && echo ok || echo 'no /dev/fuse')"
	dd if=/dev/urandom of=$UIMG bs=1M count=$MB 2>/dev/null
	u_start start
	UBASE=$(u_held)
	u baseline "/proc/$UPID" "$UBASE"
	wait_for $CONLOG/guest-$DOMU.log XBDXEN-DOMU-UP 300
	u_attach U-attach1 || return 1
	u_round r1
	if [ "${UQUICK:-0}" != 1 ]; then
		u_detach U-detach1
		u_attach U-attach2 || return 1
		u_round r2
		u_detach U-detach2
		u_cmd r3.reload 120 reload $UBLKFRONT feature_persistent=0
		u_attach U-attach3 || return 1
		u_round r3
		u_detach U-detach3
		u_cmd r4.reload 120 reload max_queues=1 max_ring_page_order=2
		u_attach U-attach4 || return 1
		u_round r4
		[ "${URESTART:-1}" = 1 ] && u_restart
	fi
	u_resize
	if ! has D; then
		timed U-destroy timeout 180 xl destroy $DOMU
		u_freed destroy
	fi
}
