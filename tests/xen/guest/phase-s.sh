# Phase S, sourced by scenario.sh: SIGKILL + restart of xbd-blkback the
# way the Linux xen-blkfront lives through it (issue 20).  A domU of its
# own (xbds: 4 vCPUs, 1 GiB, so that blkfront can use 4 queues and
# preallocate a page per persistent grant) runs readers and writers on
# its disk while dom0 kills the backend again and again, each kill when
# the backend's statistics/inflight says requests are in flight (not on a
# timer), and starts it again; after each restart the backend must serve
# new requests within SDEADLINE seconds or the round fails (a hung domU:
# blkfront has no request timeout).  Afterwards every sector of the image
# is compared with what the readers found and the writers wrote.  Rounds
# (blkfront's options; ring order 4 in each):
#   s1 4 queues, persistent grants on    s2 4 queues, persistent off
#   s3 1 queue, persistent on            s4 1 queue, persistent off
# Then a kill while the frontend is Initialised (the backend frozen with
# SIGSTOP between its InitWait and the frontend's Initialised, so the kill
# lands there), one while the frontend is Closing (frozen under
# xl block-detach), and `xl destroy` of the domU under I/O.
# Settings (run.sh --set): SKILLS kills per round (10), SROUNDS the rounds
# ("s1 s2 s3 s4"), SDEADLINE seconds per kill (180).  Uses phase U's
# helpers (u_start, u_cmd, u_stat, u_held ...) with DOMU/DOMID switched to
# this domU.  Lines: XBDXEN-S <label> | <command> | <values>.
SKILLS=${SKILLS:-10}
SROUNDS=${SROUNDS:-s1 s2 s3 s4}
SDEADLINE=${SDEADLINE:-180}
SIMG=/srv/s.img
SAMB=8                          # MiB read by the readers
SBMB=8                          # MiB written by the writers (2 of them)

s() { echo "XBDXEN-S $1 | $2 | $3"; }

# s_read FILE: a number from the backend's tree, 0 when absent (a builtin
# read: no process per poll under TCG)
s_read() {
	local v=0
	[ -r "$1" ] && read -r v < "$1" 2>/dev/null
	echo "${v:-0}"
}
s_stat() { s_read "$(u_devdir)/statistics/$1"; }
s_state() { xenstore-read "$1/state" 2>/dev/null || echo -; }
s_fe() { echo /local/domain/$DOMID/device/vbd/$UDEV; }
s_be() { echo /local/domain/0/backend/vbd/$DOMID/$UDEV; }

s_create() {
	cat > /xbd/xbds.cfg <<CFG
name = "xbds"
type = "pv"
kernel = "/boot/vmlinuz-domu"
ramdisk = "/boot/domu-initrd.cpio.gz"
extra = "console=hvc0 quiet xbd_mb=$SAMB xbd_blkfront=max_queues=4,max_ring_page_order=4 xbd_cmd=1"
memory = 1024
vcpus = 4
on_poweroff = "destroy"
on_crash = "destroy"
CFG
	DOMU=xbds
	timed S-create xl create /xbd/xbds.cfg
	DOMID=$(xl domid $DOMU)
	s domid "xl domid" "$DOMID"
	( tail -n +1 -F $CONLOG/guest-$DOMU.log 2>/dev/null |
		while IFS= read -r l; do echo "[doms] $l"; done ) &
	wait_for $CONLOG/guest-$DOMU.log XBDXEN-DOMU-UP 600
}

# s_backend: a fresh xbd-blkback for this phase
s_backend() {
	echo "XBDXEN-S rmmod | - | $( (! [ -d /sys/module/xen_blkback ] || rmmod xen-blkback) 2>&1 && echo ok)"
	# phase U's backend offers 2 queues (dom0 has 2 vCPUs): this one, and
	# every restart, offers 4 (an adoption needs what was negotiated)
	if [ -n "${UPID:-}" ] && kill -0 $UPID 2>/dev/null; then
		kill $UPID
		wait $UPID 2>/dev/null
	fi
	UARGS="--max_queues=4 --max_ring_page_order=4"
	u_start start
	UBASE=$(u_held)
	u baseline "/proc/$UPID" "$UBASE"
}

# s_image: MiB [0, SAMB) random (the readers' md5), then the writers'
# share of zeroes; the reference image is what it must be afterwards
s_image() {
	local i per=$((SBMB / 2))
	dd if=/dev/urandom of=$SIMG bs=1M count=$SAMB 2>/dev/null
	dd if=/dev/zero of=$SIMG bs=1M seek=$SAMB count=$SBMB conv=notrunc 2>/dev/null
	SMD5=$(md5sum < $SIMG | cut -d' ' -f1)
	AMD5=$(head -c $((SAMB << 20)) $SIMG | md5sum | cut -d' ' -f1)
	{ head -c $((SAMB << 20)) $SIMG
	  for i in 0 1; do
		yes "xbd-s writer $i abcdefghijklmnopqrstuvw" | head -c $((per << 20))
	  done; } > /srv/s.ref
}

# s_compare LABEL: sectors of the image that differ from the reference
s_compare() {
	local bad
	bad=$(cmp -l $SIMG /srv/s.ref 2>/dev/null | awk '{ print int(($1 - 1) / 512) }' | uniq | wc -l)
	s "$1.sectors" "cmp -l $SIMG s.ref" "bad=$bad total=$(((SAMB + SBMB) * 2048)) size=$(stat -c %s $SIMG)"
}

# s_wait_inflight: until the backend has requests in flight; prints them
s_wait_inflight() {
	local t0=$SECONDS n
	while [ $((SECONDS - t0)) -lt $SDEADLINE ]; do
		n=$(s_stat inflight)
		[ "$n" -gt 0 ] 2>/dev/null && { echo "$n"; return 0; }
	done
	echo 0
	return 1
}

# s_wait_progress N: until the (new) backend answered N requests
s_wait_progress() {
	local t0=$SECONDS done
	while [ $((SECONDS - t0)) -lt $SDEADLINE ]; do
		done=$(( $(s_stat rd_req) + $(s_stat wr_req) ))
		[ "$done" -ge "$1" ] && return 0
		sleep 0.2
	done
	return 1
}

# s_round LABEL QUEUES PERSISTENT
s_round() {
	local l=$1 k=0 n t0 ok=1
	u_cmd $l.reload 120 reload max_queues=$2 max_ring_page_order=4 feature_persistent=$3
	s_image
	u_attach S-$l-attach || { s "$l.kills" "-" "done=0 ok=0 attach"; return 1; }
	u_cmd $l.stress 300 stress 2 2 $SAMB $SBMB $AMD5
	for k in $(seq $SKILLS); do
		n=$(s_wait_inflight) || { ok=0; s "$l.kill$k" "statistics/inflight" "inflight=0 ok=0"; break; }
		t0=$EPOCHREALTIME
		kill -9 $UPID
		wait $UPID 2>/dev/null
		u_start $l.start$k > /dev/null
		if s_wait_progress $((n + 64)); then
			s "$l.kill$k" "kill -9 at inflight=$n" "ok=1 inflight=$n secs=$(secs "$t0" "$EPOCHREALTIME")"
		else
			ok=0
			s "$l.kill$k" "kill -9 at inflight=$n" "ok=0 inflight=$n hung rd_req=$(s_stat rd_req) wr_req=$(s_stat wr_req)"
			break
		fi
	done
	s "$l.kills" "-" "done=$k ok=$ok"
	u_cmd $l.stop 600 stressstop
	u_xs $l
	u_detach S-$l-detach
	s_compare $l
}

# s_freeze_at VAR-PATH STATES... : SIGSTOP the backend as soon as the node
# reads one of STATES; prints the state seen
s_freeze_at() {
	local node=$1 st i
	shift
	for i in $(seq 2400); do
		st=$(s_state $node)
		case " $* " in *" $st "*) kill -STOP $UPID; echo "$st"; return 0 ;; esac
		sleep 0.05
	done
	echo "$st"
	return 1
}
# s_until NODE STATES... : wait (SDEADLINE) for one of STATES; prints it
s_until() {
	local node=$1 st t0=$SECONDS
	shift
	while [ $((SECONDS - t0)) -lt $SDEADLINE ]; do
		st=$(s_state $node)
		case " $* " in *" $st "*) echo "$st"; return 0 ;; esac
		sleep 0.25
	done
	echo "$st"
	return 1
}

# s_initialised: the backend killed between its InitWait and the
# frontend's Initialised; the restart connects the fresh rings
s_initialised() {
	local be fe apid rc
	u_cmd init.reload 120 reload max_queues=4 max_ring_page_order=4
	s_image
	attach S-init-attach "format=raw,vdev=xvdb,access=rw,script=xbd-block,target=$SIMG" &
	apid=$!
	be=$(s_freeze_at $(s_be) 2 4)
	fe=$(s_until $(s_fe) 3 4)
	s init.frozen "backend SIGSTOP" "be=$be fe=$fe"
	kill -9 $UPID
	kill -CONT $UPID 2>/dev/null
	wait $UPID 2>/dev/null
	u_start init.start
	wait $apid
	rc=$?
	s init.attach "xl block-attach" "rc=$rc"
	s init.connected "state" "be=$(s_until $(s_be) 4) fe=$(s_until $(s_fe) 4)"
	u_cmd init 300 readlong 1          # the domU reads MiB [0, SAMB)
	s init.file "md5sum of head -c ${SAMB}M $SIMG" "$(head -c $((SAMB << 20)) $SIMG | md5sum | cut -d' ' -f1) expected=$AMD5"
}

# s_closing: the backend killed while the frontend closes under
# xl block-detach; the restart follows it to Closed and the nodes go
s_closing() {
	local fe dpid rc
	kill -STOP $UPID
	timeout 240 xl block-detach $DOMU xvdb > $LOGS/S-close.log 2>&1 &
	dpid=$!
	fe=$(s_until $(s_fe) 5 6)
	s close.frozen "backend SIGSTOP" "be=$(s_state $(s_be)) fe=$fe"
	kill -9 $UPID
	kill -CONT $UPID 2>/dev/null
	wait $UPID 2>/dev/null
	u_start close.start
	st=$(s_until $(s_be) 6 -)
	wait $dpid
	rc=$?
	# libxl waits 10 s for the backend's Closed: a kill and a restart
	# under TCG may take longer; libxl then gives up and leaves the
	# nodes, and a second detach removes them
	s close.detach "xl block-detach" "rc=$rc be=$st"
	if [ $rc != 0 ]; then
		grep -a 'error' $LOGS/S-close.log | tail -5 | sed 's/^/XBDXEN-XL S-close: /'
		timeout 180 xl block-detach $DOMU xvdb > $LOGS/S-close2.log 2>&1
		s close.detach2 "xl block-detach" "rc=$?"
	fi
	u_cmd close 300 wait-gone
	s close.nodes "xenstore-ls backend" "$(xenstore-ls $(s_be) >/dev/null 2>&1 && echo present || echo gone)"
}

# s_destroy: xl destroy of the domU while its readers and writers run
s_destroy() {
	local n i
	u_cmd destroy.reload 120 reload max_queues=4 max_ring_page_order=4
	s_image
	u_attach S-destroy-attach || return 1
	u_cmd destroy.stress 300 stress 2 2 $SAMB $SBMB $AMD5
	n=$(s_wait_inflight)
	timed S-destroy timeout 180 xl destroy $DOMU
	s destroy.inflight "statistics/inflight" "$n"
	u_freed destroy
}

phase_s() {
	local r
	UIMG=$SIMG                  # u_attach's target
	s_backend
	s_create
	for r in $SROUNDS; do
		case $r in
		s1) s_round s1 4 1 ;;
		s2) s_round s2 4 0 ;;
		s3) s_round s3 1 1 ;;
		s4) s_round s4 1 0 ;;
		esac
	done
	s_initialised
	s_closing
	s_destroy
	s config "-" "kills=$SKILLS rounds=$(echo $SROUNDS | tr ' ' ,) deadline=$SDEADLINE"
}
