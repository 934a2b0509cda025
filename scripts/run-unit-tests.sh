#!/bin/sh
# Run every cmocka unit test binary given on the command line, each with a
# time limit; fail if any fails.  A test that needs what the machine lacks
# skips itself (cmocka's skip(), its reason printed as "skip: TEST: WHY",
# tests/unit/test_pressure_src.h): the skips are counted and listed with
# their reasons.  Prints the summary line last.
set -u
pass=0; fail=0; failed=""; skipped=0
out=$(mktemp "${TMPDIR:-/tmp}/xbd-unit-XXXXXX")
reasons=$(mktemp "${TMPDIR:-/tmp}/xbd-unit-skips-XXXXXX")
trap 'rm -f "$out" "$reasons"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for t in "$@"; do
	if timeout 300 "$t" >"$out" 2>&1; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1)); failed="$failed $(basename "$t")"
	fi
	cat "$out"
	# cmocka's own count: " N SKIPPED TEST(S)"
	n=$(sed -n 's/^ *\([0-9][0-9]*\) SKIPPED TEST(S).*/\1/p' "$out" | tail -n 1)
	skipped=$((skipped + ${n:-0}))
	sed -n "s|^skip: |  $(basename "$t"): |p" "$out" >>"$reasons"
done
if [ "$skipped" -gt 0 ]; then
	echo "unit: skipped tests (the machine lacks what they need):"
	cat "$reasons"
fi
echo "unit: $pass passed, $fail failed${failed:+ ($failed )}; $skipped test(s) skipped"
[ "$fail" -eq 0 ]
