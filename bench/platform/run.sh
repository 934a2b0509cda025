#!/bin/sh
# make bench: the platform layer's costs next to the raw syscalls, measured
# in the same run.  XBD_BUILD is the optimised build tree; SCALE (default 1)
# multiplies the iteration counts.  The machine directory goes on tmpfs
# (/dev/shm) when there is one, as /run is on a normal Debian system: on a
# disk filesystem guest memory pages would be written back to disk.
set -eu
build="${XBD_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}"
base="${TMPDIR:-/tmp}"
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
dir=$(mktemp -d "$base/xbd-bench-platform.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
echo "  (XBD_RUNDIR on $(stat -f -c %T "$dir"))"
"$build/bin/xbd-bench-platform" "$dir/run" "${SCALE:-1}"
