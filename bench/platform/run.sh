#!/bin/sh
# make bench: the platform layer's costs next to the raw syscalls, measured
# in the same run.  XBD_BUILD is the optimised build tree; SCALE (default 1)
# multiplies the iteration counts.
set -eu
build="${XBD_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bench-platform.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
"$build/bin/xbd-bench-platform" "$dir/run" "${SCALE:-1}"
