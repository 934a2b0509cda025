#!/bin/sh
# Run every cmocka unit test binary given on the command line, each with a
# time limit; fail if any fails.  Prints one summary line at the end.
set -u
pass=0; fail=0; failed=""
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "$@"; do
	if timeout 300 "$t"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1)); failed="$failed $(basename "$t")"
	fi
done
echo "unit: $pass passed, $fail failed${failed:+ ($failed )}"
[ "$fail" -eq 0 ]
