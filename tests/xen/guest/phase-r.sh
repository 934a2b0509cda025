# Phase R of the scenario (sourced by scenario.sh, run in dom0): xbd's
# frontend in a PV domU (guest/domr-init: libxbdfront with --platform xen)
# against the kernel's xen-blkback, attached with the real
# `xl block-attach` (phy, a loop device made by guest/loop-hotplug, as in
# phase K).  dom0 samples the backend's states and statistics while the
# domU works, keeps the negotiated xenstore nodes, checks its file's md5,
# then detaches while the domU's last connection is still open.  Output: XBDXEN-R <label> | - | <value> lines; the
# domU's own lines come as "XBDXEN-R domu | - | XBDXEN-DOMR...".
RDOM=xbdr
# the disk's size in MiB: smaller than phase K's, since xbd's frontend
# runs its dd-like steps, a verify and a second full read under TCG
R_MB=${R_MB:-8}

# r_sample DOMID: SAMPLE = the frontend and backend states and the kernel
# blkback's statistics (reset by blkback at every connection).  One fork:
# under TCG the sampler must not starve the domU it watches.
r_sample() {
	local st=/sys/bus/xen-backend/devices/vbd-$1-51728/statistics f v fe="" be=""
	{ read -r fe; read -r be; } < <(xenstore-read /local/domain/$1/device/vbd/51728/state \
		backend/vbd/$1/51728/state 2>/dev/null)
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
	wait_for $log XBDXEN-DOMR-DONE 300 || echo "XBDXEN-R domu | - | timeout"
	kill $sampler 2>/dev/null
	wait $sampler 2>/dev/null
	grep -a XBDXEN-DOMR $log | tr -d '\r' | sed 's/^/XBDXEN-R domu | - | /'
	echo "XBDXEN-R nodes-after-detach | - | $(xenstore-ls /local/domain/0/backend/vbd/$rid 2>&1 | tr '\n' ' ')"
	echo "XBDXEN-R loops-after-detach | - | '$(losetup -a)'"
	timed R-destroy timeout 180 xl destroy $RDOM
	rm -f /srv/r.img
}
