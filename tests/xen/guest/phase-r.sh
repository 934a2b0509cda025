# Phase R of the scenario (sourced by scenario.sh, run in dom0): xbd's
# frontend in a PV domU (guest/domr-init: libxbdfront with --platform xen)
# against the kernel's xen-blkback, attached with the real
# `xl block-attach` (phy, a loop device made by guest/loop-hotplug, as in
# phase K).  dom0 samples the backend's states and statistics while the
# domU works, keeps the negotiated xenstore nodes, checks its file's md5,
# then detaches while the domU's last connection is still open.  Then
# r_fuse: the domU runs xbd-blkfront (guest/domr-fuse) and dom0 attaches
# two disks to it, samples kernel blkback between the domU's steps and
# detaches one under a reader.  Output: XBDXEN-R <label> | - | <value>
# lines; the domU's own lines come as "XBDXEN-R domu | - | XBDXEN-DOMR...".
RDOM=xbdr
# the disk's size in MiB: smaller than phase K's, since xbd's frontend
# runs its dd-like steps, a verify and a second full read under TCG
R_MB=${R_MB:-8}

# r_sample DOMID [DEVID]: SAMPLE = the frontend and backend states and the
# kernel blkback's statistics (reset by blkback at every connection) of
# the vbd DEVID (default 51728, xvdb).  One fork:
# under TCG the sampler must not starve the domU it watches.
r_sample() {
	local dev=${2:-51728}
	local st=/sys/bus/xen-backend/devices/vbd-$1-$dev/statistics f v fe="" be=""
	{ read -r fe; read -r be; } < <(xenstore-read /local/domain/$1/device/vbd/$dev/state \
		backend/vbd/$1/$dev/state 2>/dev/null)
	SAMPLE="fe=$fe be=$be "
	for f in rd_req wr_req f_req ds_req oo_req; do
		[ -r $st/$f ] && read -r v < $st/$f && SAMPLE+="$f=$v "
	done
}

# r_sampler DOMID: print every change of r_sample until killed, and the
# frontend's and backend's nodes the first time both are Connected
r_sampler() {
	local last="" shown=""
	while :; do
		r_sample "$1"
		if [ "$SAMPLE" != "$last" ]; then
			echo "XBDXEN-R sample | - | $SAMPLE"
			last=$SAMPLE
		fi
		if [ -z "$shown" ] && [[ $SAMPLE == "fe=4 be=4"* ]]; then
			echo "XBDXEN-R fe-nodes | - | $(xenstore-ls -f /local/domain/$1/device/vbd/51728 | tr '\n' ';')"
			echo "XBDXEN-R be-nodes | - | $(xenstore-ls -f /local/domain/0/backend/vbd/$1/51728 | tr '\n' ';')"
			shown=1
		fi
		sleep 0.5
	done
}

# r_create: the image and the domU.  scenario.sh calls it before phases H
# and D, so that the domU boots while they run (not during K's timings)
r_create() {
	local md5
	dd if=/dev/urandom of=/srv/r.img bs=1M count=$R_MB 2>/dev/null
	md5=$(md5sum < /srv/r.img | cut -d' ' -f1)
	echo "XBDXEN-R image-md5 | - | $md5"
	echo "XBDXEN-R image-mb | - | $R_MB"
	cat > /xbd/$RDOM.cfg <<CFG
name = "$RDOM"
type = "pv"
kernel = "/boot/vmlinuz-domu"
ramdisk = "/boot/domr-initrd.cpio.gz"
extra = "console=hvc0 quiet xbd_md5=$md5 xbd_mb=$R_MB"
memory = 256
vcpus = 2
on_poweroff = "destroy"
on_crash = "destroy"
CFG
	timed R-create xl create /xbd/$RDOM.cfg || return 1
	RID=$(xl domid $RDOM)
	echo "XBDXEN-R domid | - | $RID"
	( tail -n +1 -F $CONLOG/guest-$RDOM.log 2>/dev/null |
		while IFS= read -r l; do echo "[domr] $l"; done ) &
}

phase_r() {
	local log=$CONLOG/guest-$RDOM.log rid=$RID sampler rc t0
	[ -n "$rid" ] || return 1
	# as in phase K: the hotplug script must not race the domU's boot
	wait_for $log XBDXEN-DOMR-UP 300
	r_sampler "$rid" &
	sampler=$!
	t0=$EPOCHREALTIME
	timeout 240 xl -vvv block-attach $RDOM \
		"format=raw,vdev=xvdb,access=rw,script=/xbd/loop-hotplug,target=/srv/r.img" \
		> $LOGS/R-attach.log 2>&1
	rc=$?
	echo "XBDXEN-TIME R-attach secs=$(secs "$t0" "$EPOCHREALTIME") rc=$rc"
	if [ $rc = 0 ]; then
		wait_for $log "XBDXEN-DOMR hold-ready" 900 || echo "XBDXEN-R domu | - | timeout"
	else
		grep -aE 'error|fail|timed out' $LOGS/R-attach.log | tail -20 | sed 's/^/XBDXEN-XL R-attach: /'
	fi
	r_sample "$rid"
	echo "XBDXEN-R states-before-detach | - | $SAMPLE"
	echo "XBDXEN-R file-md5 | - | $(md5sum < /srv/r.img | cut -d' ' -f1)"
	# the domU's frontend is still connected: it must let go on its own
	timed R-detach timeout 180 xl block-detach $RDOM xvdb
	wait_for $log "XBDXEN-DOMR fe-state" 300 || echo "XBDXEN-R domu | - | timeout"
	kill $sampler 2>/dev/null
	wait $sampler 2>/dev/null
	r_gone "$rid"
	echo "XBDXEN-R nodes-after-detach | - | $(xenstore-ls /local/domain/0/backend/vbd/$rid 2>&1 | tr '\n' ' ')"
	echo "XBDXEN-R loops-after-detach | - | '$(losetup -a)'"
	r_fuse "$rid" "$log"
	wait_for $log XBDXEN-DOMR-DONE 300 || echo "XBDXEN-R domu | - | timeout"
	grep -a XBDXEN-DOMR $log | tr -d '\r' | sed 's/^/XBDXEN-R domu | - | /'
	timed R-destroy timeout 180 xl destroy $RDOM
	rm -f /srv/r.img /srv/c.img /srv/d.img
}

# r_gone DOMID: wait (bounded) until libxl removed the domain's backend
# directory and the hotplug script its loop devices (60 s at most: under
# load every fork of the loop takes seconds)
r_gone() {
	local end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		xenstore-ls /local/domain/0/backend/vbd/$1 > /dev/null 2>&1 ||
			[ -n "$(losetup -a)" ] || break
		sleep 0.5
	done
}

# r_step DOMID LOG NAME [CMD...]: wait for the domU's "step=NAME", run CMD,
# print kernel blkback's states and counters of xvdc as "XBDXEN-R NAME",
# then ack in the domU's data/xbd-ack.  The domU goes on after a timeout
# of its own, so a failed step never blocks the rest.
r_step() {
	local rid=$1 log=$2 name=$3
	shift 3
	if ! wait_for $log "XBDXEN-DOMR step=$name" 300; then
		echo "XBDXEN-R $name | - | timeout"
		return 1
	fi
	"$@"
	r_sample "$rid" 51744
	echo "XBDXEN-R $name | - | $SAMPLE"
	xenstore-write /local/domain/$rid/data/xbd-ack "$name"
}

r_attach() { # VDEV IMAGE: attach through loop-hotplug, as phase K
	local t0=$EPOCHREALTIME rc
	timeout 240 xl -vvv block-attach $RDOM \
		"format=raw,vdev=$1,access=rw,script=/xbd/loop-hotplug,target=$2" \
		> $LOGS/R-f-attach-$1.log 2>&1
	rc=$?
	echo "XBDXEN-TIME R-f-attach-$1 secs=$(secs "$t0" "$EPOCHREALTIME") rc=$rc"
}

r_md5() { # LABEL: the md5s of c.img (xvdc), whole and of its second MiB
	echo "XBDXEN-R $1 | - | md5=$(md5sum < /srv/c.img | cut -d' ' -f1)" \
		"mib1=$(dd if=/srv/c.img bs=1M skip=1 count=1 2>/dev/null | md5sum | cut -d' ' -f1)"
}

# r_fuse DOMID LOG: dom0's side of the domU's xbd-blkfront steps
# (guest/domr-fuse): xvdc (c.img) for writes, xvdd (d.img) read and
# detached under a reader
r_fuse() {
	local rid=$1 log=$2 end
	dd if=/dev/urandom of=/srv/c.img bs=1M count=$R_MB 2>/dev/null
	dd if=/dev/urandom of=/srv/d.img bs=1M count=$R_MB 2>/dev/null
	echo "XBDXEN-R f-image-md5 | - | $(md5sum < /srv/d.img | cut -d' ' -f1)"
	r_step "$rid" "$log" f-mounted eval 'r_attach xvdc /srv/c.img; r_attach xvdd /srv/d.img' || return 1
	r_step "$rid" "$log" f-ready
	r_step "$rid" "$log" f-written
	r_step "$rid" "$log" f-synced r_md5 f-synced-file
	r_step "$rid" "$log" f-punched r_md5 f-punched-file
	r_step "$rid" "$log" f-detach-d timed R-f-detach-xvdd timeout 180 xl block-detach $RDOM xvdd
	end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		xenstore-ls /local/domain/0/backend/vbd/$rid/51760 > /dev/null 2>&1 || break
		sleep 0.5
	done
	echo "XBDXEN-R f-xvdd-after-detach | - | $(xenstore-ls /local/domain/0/backend/vbd/$rid/51760 2>&1 | tr '\n' ' ')"
	r_step "$rid" "$log" f-stopped
	timed R-f-detach-xvdc timeout 180 xl block-detach $RDOM xvdc
	r_gone "$rid"
	echo "XBDXEN-R f-nodes-after-detach | - | $(xenstore-ls /local/domain/0/backend/vbd/$rid 2>&1 | tr '\n' ' ')"
	echo "XBDXEN-R f-loops-after-detach | - | '$(losetup -a)'"
}
