#!/bin/bash
# The scenario run in dom0 (from run.sh's overlay).  It only acts and
# prints; the host (tests/xen/test_xen.py) checks every line.  Phases:
#   P  the xen platform in dom0 alone, through xbd-test-platform: dom0
#      shares pages with itself and maps them, read-only grants, grant
#      copy both ways, a loopback event channel, domain queries
#   K  kernel xen-blkback baseline: xl block-attach a raw file to a PV
#      domU (phy, a loop device made by guest/loop-hotplug), O_DIRECT dd
#      with md5 checks in the domU
#   H  the xbd-block hotplug script (script=xbd-block) with kernel
#      blkback unloaded and a stub backend answering the state machine:
#      add writes hotplug-status=connected, remove runs, a missing target
#      fails with hotplug-error
#   N  xbd-blkback serving the domU's xen-blkfront from an nbd export
#      (nbdkit in dom0) and a qcow2 image (qemu-storage-daemon), each
#      attached by the real xl through script=xbd-block (guest/phase-n.sh);
#      run after H, before U (which destroys the domU)
#   U  xbd-blkback serving the domU's xen-blkfront (guest/phase-u.sh)
#   D  domain queries about the domU: alive, dying (held by our mapping
#      of its console grant) after xl destroy, then gone; with U, what
#      xbd-blkback still holds after the destroy
#   S  SIGKILL + restart of xbd-blkback under a domU's readers and
#      writers, 1 and 4 queues, persistent grants on and off; kills while
#      the frontend is Initialised and Closing; xl destroy under I/O
#      (guest/phase-s.sh)
#   R  xbd's frontend in a second PV domU against kernel xen-blkback
#      (guest/phase-r.sh, guest/domr-init); after U, xbd-blkback is
#      stopped and kernel blkback loaded again first
# Output lines: XBDXEN-<phase> <label> | <command> | <reply>, and
# XBDXEN-TIME <label> secs=<s> rc=<rc>.
export PATH=/opt/xbd/bin:$PATH
. /xbd/config
LOGS=/var/log/xbd
CONLOG=/var/log/xen/console
DOMU=xbdu
mkdir -p $LOGS
. /xbd/phase-u.sh

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
timed() { # LABEL CMD...: run CMD, print its time and status
	local label=$1 t0 rc
	shift
	t0=$EPOCHREALTIME
	"$@"
	rc=$?
	echo "XBDXEN-TIME $label secs=$(secs "$t0" "$EPOCHREALTIME") rc=$rc"
	return $rc
}
has() { [[ " $PHASES " == *" $1 "* ]]; }
wait_for() { # FILE REGEX SECONDS
	local i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt $(($3 * 4)) ] && return 1
		sleep 0.25
	done
}

# ---- xbd-test-platform as a coprocess: q PHASE LABEL COMMAND ------------
start_helper() {
	coproc HELPER { exec xbd-test-platform --platform xen 2>>$LOGS/helper.err; }
}
q() {
	local phase=$1 label=$2
	shift 2
	R="noreply"
	echo "$*" >&"${HELPER[1]}"
	IFS= read -r -t 30 R <&"${HELPER[0]}"
	echo "XBDXEN-$phase $label | $* | $R"
}
stop_helper() {
	echo exit >&"${HELPER[1]}"
	wait "$HELPER_PID" 2>/dev/null
}
word() { echo "$R" | cut -d' ' -f"$1"; }   # word N of the last reply

phase_p() {
	local a0 r1 r2 m0 a1 r3 m1 p1 p2 p3
	start_helper
	q P open open
	q P claim-other "claim 5"
	q P claim-self "claim 0"
	q P gntshr gntshr
	q P share-rw "share 0 2 rw"
	a0=$(word 2) r1=$(word 3) r2=$(word 4)
	q P fill-rw "fill $a0 0 165"
	q P gnttab "gnttab 0"
	q P map-rw "map 0 rw $r1 $r2"
	m0=$(word 2)
	q P map-rw-peek-first "mpeek $m0 0"
	q P map-rw-peek-last "mpeek $m0 8191"
	q P map-rw-poke "mpoke $m0 4100 66"
	q P share-peek-poked "peek $a0 4100"
	q P share-ro "share 0 1 ro"
	a1=$(word 2) r3=$(word 3)
	q P fill-ro "fill $a1 0 7"
	q P map-ro-grant-rw "map 0 rw $r3"
	q P map-ro "map 0 ro $r3"
	m1=$(word 2)
	q P map-ro-peek "mpeek $m1 0"
	q P map-ro-store "mpokefault $m1 0"
	q P map-ro-peek-after "mpeek $m1 0"
	q P copy-from "copyfrom 0 $r1 0 64"
	q P copy-to "copyto 0 $r2 8 16 9"
	q P copy-to-share-peek "peek $a0 4104"
	q P copy-to-map-peek "mpeek $m0 4104"
	q P copy-to-ro "copyto 0 $r3 0 16 1"
	q P copy-from-ro "copyfrom 0 $r3 0 16"
	q P copy-bad-ref "copyfrom 0 4000000 0 16"
	q P unmap-rw "unmap $m0"
	q P unmap-rw-again "unmap $m0"
	q P unmap-ro "unmap $m1"
	q P unshare-rw "unshare $a0"
	q P evtchn "evtchn 0"
	q P unbound "unbound 0"
	p1=$(word 2)
	q P bind "bind 0 $p1"
	p2=$(word 2)
	# Xen leaves a newly bound interdomain port pending: drain that first
	q P wait-bind "wait 5000"
	q P pending-bind pending
	q P unmask-bind "unmask $p2"
	q P wait-idle "wait 200"
	q P notify-bound "notify $p2"
	q P wait-1 "wait 5000"
	q P pending-1 pending
	q P notify-while-masked "notify $p2"
	q P wait-masked "wait 200"
	q P unmask-1 "unmask $p1"
	q P wait-unmasked "wait 5000"
	q P pending-unmasked pending
	q P unmask-1b "unmask $p1"
	q P notify-back "notify $p1"
	q P wait-2 "wait 5000"
	q P pending-2 pending
	q P unmask-2 "unmask $p2"
	q P notify-3x "notify $p2 3"
	q P wait-3 "wait 5000"
	q P pending-3 pending
	q P unmask-3 "unmask $p1"
	# an event sent after the first was taken is kept for the unmask:
	# three notifications make one or two events, never three
	q P wait-coalesced "wait 200"
	q P pending-extra pending
	q P unmask-extra "unmask $p1"
	q P wait-drained "wait 200"
	q P unbind "unbind $p2"
	q P notify-unbound "notify $p1"
	q P unbind-never-bound "unbind 4000"
	q P rebind "bind 0 $p1"
	p3=$(word 2)
	q P info-dom0 "info 0"
	q P info-absent "info 32000"
	q P info-reserved "info 32752"
	stop_helper
	echo "XBDXEN-P helper-stderr | - | $(tr '\n' ' ' < $LOGS/helper.err)"
}

# ---- the domU --------------------------------------------------------------
create_domu() { # MD5 of /srv/k.img
	cat > /xbd/$DOMU.cfg <<CFG
name = "$DOMU"
type = "pv"
kernel = "/boot/vmlinuz-domu"
ramdisk = "/boot/domu-initrd.cpio.gz"
extra = "console=hvc0 quiet xbd_md5=$1 xbd_mb=$MB xbd_blkfront=max_queues=2,max_ring_page_order=2 xbd_k=$(has K && echo 1) xbd_cmd=$({ has U || has N; } && echo 1)"
memory = 256
vcpus = 2
on_poweroff = "destroy"
on_crash = "destroy"
CFG
	timed xl-create xl create /xbd/$DOMU.cfg
	DOMID=$(xl domid $DOMU)
	echo "XBDXEN-DOMU-ID $DOMID"
	( tail -n +1 -F $CONLOG/guest-$DOMU.log 2>/dev/null |
		while IFS= read -r l; do echo "[domu] $l"; done ) &
}

# attach LABEL DISK-SPEC [HOOK]: xl -vvv block-attach, log kept in
# $LOGS/LABEL.log.  libxl gives the backend 10 s to reach InitWait, which a
# TCG dom0 on a loaded host can miss: on that error only, the nodes libxl
# left are removed (xl block-detach, then the nodes it may leave: xvdX
# only), HOOK runs (restarting a stub backend) and the attach
# is tried again, three times at most; each retry prints XBDXEN-RETRY.
attach() {
	local t0=$EPOCHREALTIME rc n vdev devid
	vdev=$(echo "$2" | sed -n 's/.*vdev=\([^,]*\).*/\1/p')
	for n in 1 2 3; do
		timeout 240 xl -vvv block-attach $DOMU "$2" > $LOGS/$1.log 2>&1
		rc=$?
		[ $rc = 0 ] || [ $n = 3 ] && break
		grep -aq 'wanted state 2 *timed out' $LOGS/$1.log || break
		echo "XBDXEN-RETRY $1 attempt=$n: backend not in InitWait within libxl's 10 s"
		timeout 180 xl block-detach $DOMU "$vdev" > /dev/null 2>&1
		devid=$(( (202 << 8) | ($(printf '%d' "'${vdev#xvd}") - 97) << 4 ))
		xenstore-rm /local/domain/0/backend/vbd/$DOMID/$devid \
			/local/domain/$DOMID/device/vbd/$devid /libxl/$DOMID/device/vbd/$devid 2>/dev/null
		[ -n "${3:-}" ] && $3
	done
	echo "XBDXEN-TIME $1 secs=$(secs "$t0" "$EPOCHREALTIME") rc=$rc"
	[ $rc = 0 ] || grep -aE 'error|fail|script|hotplug|timed out' $LOGS/$1.log |
		tail -20 | sed "s/^/XBDXEN-XL $1: /"
	return $rc
}

phase_k() {
	# The hotplug script must finish within libxl's 40 s: do not race it
	# against the domU's kernel boot under TCG, and use a lean one
	wait_for $CONLOG/guest-$DOMU.log XBDXEN-DOMU-UP 300
	if ! attach K-attach "format=raw,vdev=xvdb,access=rw,script=/xbd/loop-hotplug,target=/srv/k.img"; then
		xl block-detach $DOMU xvdb > /dev/null 2>&1   # libxl leaves the nodes
		return 1
	fi
	echo "XBDXEN-K backend | - | $(xenstore-read backend/vbd/$DOMID/51728/type backend/vbd/$DOMID/51728/physical-device-path backend/vbd/$DOMID/51728/hotplug-status 2>&1 | tr '\n' ' ')"
	if wait_for $CONLOG/guest-$DOMU.log XBDXEN-DOMU-DONE 300; then
		grep -a XBDXEN-DOMU $CONLOG/guest-$DOMU.log | tr -d '\r' | sed 's/^/XBDXEN-K domu | - | /'
		echo "XBDXEN-K file-md5 | - | $(md5sum < /srv/k.img | cut -d' ' -f1)"
	else
		echo "XBDXEN-K domu | - | timeout"
	fi
	timed K-detach timeout 180 xl block-detach $DOMU xvdb
	echo "XBDXEN-K loops-after-detach | - | '$(losetup -a)'"
}

stub() { # LOG: the stub backend for xvdc of the domU
	/xbd/stub-backend.sh $DOMID 51744 > $LOGS/$1 2>&1 &
	STUB=$!
}
unstub() {
	local i
	for i in $(seq 40); do kill -0 $STUB 2>/dev/null || break; sleep 0.25; done
	kill $STUB 2>/dev/null
	wait $STUB 2>/dev/null
	sed "s/^/XBDXEN-H stub-log | $1 | /" $LOGS/$1
}
restub() { # attach's retry hook: a fresh stub
	kill $STUB 2>/dev/null
	wait $STUB 2>/dev/null
	stub H-add.stub
}
be_nodes() { # the backend's nodes, one line
	xenstore-ls -f /local/domain/0/backend/vbd/$DOMID/51744 2>&1 | tr '\n' ';'
}

phase_h() {
	local be=/local/domain/0/backend/vbd/$DOMID/51744 t0 rc
	echo "XBDXEN-H rmmod | - | $(rmmod xen-blkback 2>&1 && echo ok)"
	dd if=/dev/urandom of=/srv/h.img bs=1M count=4 2>/dev/null
	stub H-add.stub
	attach H-add "format=raw,vdev=xvdc,access=rw,script=xbd-block,target=/srv/h.img" restub
	echo "XBDXEN-H add-status | - | $(xenstore-read $be/hotplug-status 2>&1)"
	echo "XBDXEN-H add-nodes | - | $(be_nodes)"
	wait_for $LOGS/H-add.stub 'frontend state=3' 180
	t0=$EPOCHREALTIME
	timeout 180 xl -vvv block-detach $DOMU xvdc > $LOGS/H-remove.log 2>&1
	rc=$?
	echo "XBDXEN-TIME H-remove secs=$(secs "$t0" "$EPOCHREALTIME") rc=$rc"
	echo "XBDXEN-H remove-script | - | $(grep -a 'xbd-block:' $LOGS/H-remove.log | tr '\n' ' ')"
	echo "XBDXEN-H remove-nodes | - | $(be_nodes)"
	unstub H-add.stub

	stub H-missing.stub
	attach H-missing "format=raw,vdev=xvdc,access=rw,script=xbd-block,target=/srv/missing.img"
	echo "XBDXEN-H missing-xl | - | $(grep -a 'script: ' $LOGS/H-missing.log | tr '\n' ' ')"
	echo "XBDXEN-H missing-nodes | - | $(be_nodes)"
	unstub H-missing.stub
	xl block-detach $DOMU xvdc > /dev/null 2>&1
	xenstore-rm $be /local/domain/$DOMID/device/vbd/51744 /libxl/$DOMID/device/vbd/51744 2>/dev/null
	insmod "$(grep xen-blkback /etc/xbd-xen/modules)" && echo "XBDXEN-H insmod | - | ok"
}

phase_d() {
	local m i
	start_helper
	q D open open
	q D gnttab "gnttab 0"
	q D info-alive "info $DOMID"
	q D map-console "map $DOMID ro 0"
	m=$(word 2)
	timed D-destroy timeout 180 xl destroy $DOMU
	has U && u_freed destroy
	q D info-dying "info $DOMID"
	q D unmap-console "unmap $m"
	for i in $(seq 40); do
		q D info-poll "info $DOMID"
		[[ $R == *exists=0* ]] && break
		sleep 0.25
	done
	q D info-gone "info $DOMID"
	stop_helper
}

echo "XBDXEN-SCENARIO-START phases='$PHASES' mb=$MB"
has P && timed phase-P phase_p
if has K || has H || has U || has D || has N; then
	dd if=/dev/urandom of=/srv/k.img bs=1M count=$MB 2>/dev/null
	echo "XBDXEN-K image-md5 | - | $(md5sum < /srv/k.img | cut -d' ' -f1)"
	create_domu "$(md5sum < /srv/k.img | cut -d' ' -f1)"
fi
has K && timed phase-K phase_k
has R && . /xbd/phase-r.sh && r_create   # its domU boots during H and D
has H && timed phase-H phase_h
# N before U: U (or D) destroys the domU at its end
has N && . /xbd/phase-n.sh && UPHASE=N timed phase-N phase_n
has U && timed phase-U phase_u
has D && timed phase-D phase_d
has S && . /xbd/phase-s.sh && UPHASE=S timed phase-S phase_s
{ has U || has S; } && u_stop
if { has U || has S || has N; } && has R && ! [ -d /sys/module/xen_blkback ]; then
	insmod "$(grep xen-blkback /etc/xbd-xen/modules)" && echo "XBDXEN-U insmod | - | ok"
fi
has R && timed phase-R phase_r
xl list | sed 's/^/XBDXEN-XL-LIST /'
echo "XBDXEN-SCENARIO-END"
