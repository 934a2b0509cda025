#!/bin/sh
# `make check-tsan`: the ThreadSanitizer build (O=build-tsan SAN=thread,
# built by make before this runs) through every unit test and the system
# tests that run several threads in one process: the queue threads (and
# their sync_io helper threads, storage/raw.c),
# control thread and reaper thread of xbd-blkback, the callers' threads on
# the channels of libxbdfront (the fio engine with fio's --thread jobs),
# and the FUSE worker threads of xbd-blkfront.  Any report fails: a unit
# test binary that reported exits with 66 (TSAN_OPTIONS exitcode), and a
# daemon's log with a report fails its system test (tests/system/
# conftest.py).  False positives only are suppressed, each with its reason
# (scripts/tsan-suppressions.txt).
#
# What TSan cannot see: memory two processes share (rings, granted pages,
# event-channel words of the local platform, io_uring's rings, FUSE's
# channel) is ordered by the other side or the kernel, not by anything in
# this process, and each side maps it at its own address.  Those accesses
# are not checked here (the ring protocol has its own unit tests).
#
# usage: scripts/check-tsan.sh [BUILD_DIR]   (default build-tsan)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build-tsan}" && pwd)
start=$(date +%s)

# gcc 12's ThreadSanitizer needs the address space layout it was built
# for: with more ASLR bits than it knows (vm.mmap_rnd_bits > 28 on some
# newer kernels) it dies at start with "unexpected memory mapping".  Then
# run everything without address randomization (setarch -R: a personality
# flag of this process that its children inherit; the machine's sysctls
# are left alone).  XBD_TSAN_SETARCH=1 forces it (to test this path).
probe() {
	"$build/tests/test_num" >/dev/null 2>&1
}
norand="setarch $(uname -m) -R"
if [ -z "${XBD_TSAN_NORAND:-}" ]; then
	if [ "${XBD_TSAN_SETARCH:-0}" = 1 ] || ! probe; then
		# A container's seccomp filter may refuse the personality
		# (Docker's default profile does): then this cannot run here.
		if ! $norand true 2>/dev/null; then
			bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo "?")
			echo "check-tsan: SKIPPED: ThreadSanitizer cannot start here" \
			     "(vm.mmap_rnd_bits=$bits) and setarch -R is refused:"
			"$build/tests/test_num" 2>&1 | head -n 3
			exit 0
		fi
		echo "check-tsan: running under setarch -R (no address randomization)"
		XBD_TSAN_NORAND=1 exec $norand sh "$0" "$build"
	fi
fi
if ! probe; then
	echo "check-tsan: a ThreadSanitizer binary does not start, even" \
	     "without address randomization:" >&2
	"$build/tests/test_num" 2>&1 | head -n 5 >&2
	exit 1
fi

TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1"
TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$root/scripts/tsan-suppressions.txt"
export TSAN_OPTIONS

echo "check-tsan: unit tests"
sh "$root/scripts/run-unit-tests.sh" "$build"/tests/test_*

# The system tests with several threads in one process, each multi-queue
# where it has the choice.  Not here: fio jobs as processes (fio forks
# after starting threads, which TSan does not support), and tests that
# time rates (TSan runs the code several times slower).  -k keeps every
# test named below and, of the data-path matrix, the 2- and 4-queue rows.
sys=tests/system
echo "check-tsan: system tests"
cd "$root"
XBD_BUILD="$build" /usr/bin/python3 -m pytest -p no:cacheprovider -q -rs \
	"$sys/test_datapath_matrix.py" -k "not test_datapath_row or q2 or q4" \
	"$sys/test_fio_engine.py::test_verify_jobs_and_queues" \
	"$sys/test_blkfront.py::test_fio_verify_through_fuse[psync-2]" \
	"$sys/test_blkfront.py::test_fio_verify_through_fuse[libaio-2]" \
	"$sys/test_blkfront.py::test_three_disks_at_once_and_detach_of_one" \
	"$sys/test_blkfront.py::test_backend_restart_under_fio_verify" \
	"$sys/test_blkfront_cache.py" \
	"$sys/test_fio_zerocopy.py::test_zero_copy_with_two_jobs_and_mixed_sizes" \
	"$sys/test_faults_restart.py::test_backend_sigkill_under_fio_verify_fuse" \
	"$sys/test_frontend_blkback.py::test_writer_survives_backend_stop_and_start" \
	"$sys/test_hostile_truncate.py" \
	"$sys/test_hostile_storm.py::test_notify_storm_starves_nobody" \
	"$sys/test_blkfront_async.py::test_queue_depth_48_reaches_the_ring" \
	"$sys/test_frontend_blkback.py::test_data_verified_in_each_configuration" \
	"$sys/test_frontend_blkback.py::test_detach_with_io_in_flight" \
	"$sys/test_frontend_blkback.py::test_next_guest_after_a_killed_one" \
	"$sys/test_backend_adopt.py::test_killed_between_publish_and_notify_the_restart_notifies_first" \
	"$sys/test_backend_adopt.py::test_kills_during_adoption_itself" \
	"$sys/test_hostile_control.py::test_flipping_and_slow_close_do_not_delay_another_connect[unlocked]" \
	"$sys/test_faults_guest_kill.py::test_real_guest_killed_mid_io_frees_everything" \
	"$sys/test_sysfs.py::test_devices_and_max_queues_next_connection" \
	"$sys/test_sync_io.py::test_helper_under_verify_seen_live"
echo "check-tsan: passed in $(( $(date +%s) - start )) s"
