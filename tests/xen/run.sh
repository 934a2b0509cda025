#!/bin/bash
# Boot Xen + the Linux PV dom0 of build-images.sh in qemu-system-x86_64
# (TCG: no KVM needed), run guest/scenario.sh in dom0 with the xbd
# programs of $XBD_BUILD, and keep the serial log.
#
# Usage: run.sh --out DIR [--phases "P K H U D R"] [--mb N] [--timeout S]
#   --out DIR      run directory: serial.log, summary.txt, qemu.cmd
#   --phases LIST  scenario phases (default "P K H U D S R", see guest/scenario.sh)
#   --mb N         size of the dd tests in MiB (default 8)
#   --timeout S    kill QEMU after S seconds (default 2700; a loaded host
#                  slows TCG several times over)
#   --set K=V      a setting for the scenario (repeatable), e.g.
#                  URESTART=0 leaves out phase U's backend restart,
#                  SKILLS=3 SROUNDS=s1 shortens phase S (guest/phase-s.sh),
#                  UQUICK=1 keeps only phase U's r1 and online resize
# Environment: XBD_BUILD (default ./build) holds bin/xbd-test-platform
# (required), bin/xbd-blkback and bin/xbd (copied when present); XBD_XEN_OUT holds
# the images.  Exit status 0 when dom0 ran the scenario to its end; the
# results themselves are checked by test_xen.py.
set -uo pipefail
source "$(dirname "$0")/common.sh"

OUT="" PHASES="P K H U D S R" MB=8 TIMEOUT=2700 SETS=()
while [ $# -gt 0 ]; do
	case $1 in
	--out) OUT=$2; shift ;;
	--phases) PHASES=$2; shift ;;
	--mb) MB=$2; shift ;;
	--timeout) TIMEOUT=$2; shift ;;
	--set) [[ $2 =~ ^[A-Z_]+=[A-Za-z0-9_.\ ]*$ ]] || die "--set wants K=V, not '$2'"
	       SETS+=("$2"); shift ;;
	-h | --help) sed -n '2,/^set /p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
[ -n "$OUT" ] || die "--out DIR is required"
[ -r "$XEN_ELF" ] && [ -r "$DOM0_BASE" ] || die "no images in $XBD_XEN_OUT: run build-images.sh"
BUILD=$(readlink -f "${XBD_BUILD:-build}")
[ -x "$BUILD/bin/xbd-test-platform" ] || die "no $BUILD/bin/xbd-test-platform: run make"
SRC=$(cd "$XBD_XEN_SRC/../.." && pwd)
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")

# ---- per-run overlay: scenario, hotplug script, xbd programs + libraries --
O=$OUT/overlay
mkdir -p "$O/xbd" "$O/opt/xbd/bin" "$O/etc/xen/scripts"
install -m 0755 "$XBD_XEN_SRC/guest/scenario.sh" "$XBD_XEN_SRC/guest/stub-backend.sh" \
	"$XBD_XEN_SRC/guest/loop-hotplug" "$O/xbd/"
install -m 0644 "$XBD_XEN_SRC/guest/phase-u.sh" "$XBD_XEN_SRC/guest/phase-s.sh" "$O/xbd/"
install -m 0755 "$SRC/tools/hotplug/xbd-block" "$O/etc/xen/scripts/xbd-block"
# phase R: its scenario part and its domU's initrd (with the xbd frontend)
if [[ " $PHASES " == *" R "* ]]; then
	install -m 0644 "$XBD_XEN_SRC/guest/phase-r.sh" "$O/xbd/"
	bash "$XBD_XEN_SRC/build-domr.sh" "$BUILD" "$O/boot/domr-initrd.cpio.gz" || die "build-domr.sh failed"
fi
printf 'PHASES="%s"\nMB=%d\n' "$PHASES" "$MB" > "$O/xbd/config"
for kv in "${SETS[@]}"; do printf '%s=%q\n' "${kv%%=*}" "${kv#*=}" >> "$O/xbd/config"; done
for p in xbd-test-platform xbd-blkback xbd; do
	[ -x "$BUILD/bin/$p" ] || continue
	cp "$BUILD/bin/$p" "$O/opt/xbd/bin/"
	for lib in $(ldd "$BUILD/bin/$p" | grep -o '/[^ ]*'); do
		mkdir -p "$O$(dirname "$lib")"
		cp -Ln "$lib" "$O$lib"
	done
done
(cd "$O" && find . | cpio -o -H newc --quiet -R 0:0 | gzip -1) > "$OUT/overlay.cpio.gz"
cat "$DOM0_BASE" "$OUT/overlay.cpio.gz" > "$OUT/initrd.cpio.gz"
rm -rf "$O" "$OUT/overlay.cpio.gz"

# ---- QEMU: Xen as multiboot kernel, dom0 kernel + initramfs as modules ----
# bootscrub=false: QEMU's RAM starts zeroed; scrubbing it would cost TCG
# time and make QEMU touch all of it
XEN_ARGS="console=com1 com1=115200 loglvl=all guest_loglvl=all noreboot bootscrub=false"
XEN_ARGS="$XEN_ARGS dom0_mem=1024M,max:1024M dom0_max_vcpus=2"
DOM0_ARGS="console=hvc0 earlyprintk=xen loglevel=4"
SER=$OUT/serial.log
# phase S's domU has 1 GiB: QEMU only touches what the guests use
MEM=2048
[[ " $PHASES " == *" S "* ]] && MEM=3584
QEMU=(qemu-system-x86_64 -machine pc -accel tcg,thread=multi -cpu qemu64
      -smp 2 -m $MEM -nographic -nic none -no-reboot -monitor none
      -device isa-debug-exit,iobase=0xf4,iosize=0x01
      -serial "file:$SER"
      -kernel "$XEN_ELF" -append "$XEN_ARGS"
      -initrd "$KERNEL $DOM0_ARGS,$OUT/initrd.cpio.gz")
printf '%q ' "${QEMU[@]}" > "$OUT/qemu.cmd"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$EPOCHREALTIME
"${QEMU[@]}" > "$OUT/qemu.stdout" 2>&1 &
QPID=$!
trap 'kill $QPID 2>/dev/null' EXIT INT TERM
log "qemu pid $QPID, serial log $SER, timeout ${TIMEOUT}s"
since() { awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# Host-side timestamps of the boot milestones, and QEMU's peak RSS.
MARKS=("Xen version:xen" "XBDXEN-DOM0-INIT:dom0-init" "XBDXEN-DOM0-READY:dom0-ready"
       "XBDXEN-SCENARIO-START:scenario-start" "XBDXEN-DONE:done")
declare -A AT
HWM=0 STATUS=timeout
while :; do
	h=$(awk '/^VmHWM/ { print $2 }' /proc/$QPID/status 2>/dev/null)
	[ -n "$h" ] && [ "$h" -gt "$HWM" ] && HWM=$h
	for m in "${MARKS[@]}"; do
		name=${m#*:}
		[ -n "${AT[$name]:-}" ] && continue
		grep -aq "${m%%:*}" "$SER" 2>/dev/null && AT[$name]=$(since) && log "+${AT[$name]}s $name"
	done
	[ -n "${AT[done]:-}" ] && { STATUS=ok; break; }
	kill -0 $QPID 2>/dev/null || { STATUS=qemu-exited; break; }
	if grep -aqE 'Panic on CPU|Kernel panic|Triple fault' "$SER" 2>/dev/null; then STATUS=panic; break; fi
	awk -v t="$(since)" -v m="$TIMEOUT" 'BEGIN { exit !(t > m) }' && break
	sleep 0.5
done
for _ in $(seq 20); do kill -0 $QPID 2>/dev/null || break; sleep 0.25; done
kill $QPID 2>/dev/null
wait $QPID 2>/dev/null
trap - EXIT INT TERM
rm -f "$OUT/initrd.cpio.gz"
{
	echo "status=$STATUS total_s=$(since) qemu_peak_rss_mib=$((HWM / 1024))"
	echo "loadavg_start=$LOAD0 loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
	for m in "${MARKS[@]}"; do echo "at_s ${m#*:} ${AT[${m#*:}]:--}"; done
	grep -a 'XBDXEN-TIME' "$SER" | tr -d '\r'
} > "$OUT/summary.txt"
cat "$OUT/summary.txt" >&2
[ "$STATUS" = ok ]
