#!/bin/sh
# make lint: cppcheck and clang-tidy (Debian's) over every C file of the
# tree, with the checked-in configuration: .clang-tidy (and the nested
# ones under tests/ and bench/), scripts/cppcheck-suppressions.txt.
# Exit 1 with the findings when either reports anything.
#   usage: sh scripts/lint.sh FIO_TREE
# FIO_TREE is the configured fio source the fio engine builds against
# (frontend/fio/module.mk); the engine is checked against it.
set -eu
FIO_TREE=${1:?usage: lint.sh FIO_TREE}
JOBS=${LINT_JOBS:-2}
cd "$(dirname "$0")/.."

FILES=$(find lib xenstore backend frontend tools tests bench -name '*.c' | sort)
CFLAGS="-std=gnu11 -D_GNU_SOURCE -I. -Ilib -Itests/unit $(pkg-config --cflags fuse3)"
FIO_CFLAGS="-std=gnu11 -D_GNU_SOURCE -I. -isystem $FIO_TREE -include $FIO_TREE/config-host.h -DXBD_FIO_VERSION='\"lint\"'"
out=$(mktemp)
supp=$(mktemp)
trap 'rm -f "$out" "$supp"' EXIT
# cppcheck reads no comments in a suppressions list: drop ours
grep -v -e '^#' -e '^$' scripts/cppcheck-suppressions.txt >"$supp"
status=0

# cppcheck: warnings, portability and performance (no style).  Not the
# fio engine: fio's headers need the compiler's predefined macros, which
# cppcheck does not have (clang-tidy checks the engine with them).  Tests
# and the pool benchmark (cmocka) with scripts/cppcheck-cmocka.cfg, which
# tells cppcheck what cmocka's assertions mean; the rest without it (its
# fail() would clash with the tree's own).
cppcheck_run() {
	# shellcheck disable=SC2086
	[ -z "$2" ] || cppcheck -q -j"$JOBS" --std=c11 --error-exitcode=1 --inline-suppr \
		--enable=warning,portability,performance \
		--suppressions-list="$supp" $1 -D_GNU_SOURCE -I. -Ilib $2 >>"$out" 2>&1
}
CODE=$(printf '%s\n' $FILES | grep -v -e '^frontend/fio/' -e '^tests/' -e '^bench/pool/')
CMOCKA=$(printf '%s\n' $FILES | grep -e '^tests/' -e '^bench/pool/')
: >"$out"
if ! cppcheck_run "" "$CODE" ||
   ! cppcheck_run "--library=scripts/cppcheck-cmocka.cfg" "$CMOCKA"; then
	echo "lint: cppcheck:" >&2
	cat "$out" >&2
	status=1
fi

# clang-tidy, JOBS files at a time; the fio engine with fio's headers.
tidy() {
	flags=$1
	shift
	# shellcheck disable=SC2086
	printf '%s\n' "$@" | xargs -P"$JOBS" -n4 sh -c \
		'clang-tidy -quiet "$@" -- '"$flags"' 2>/dev/null' _
}
# shellcheck disable=SC2086
tidy "$CFLAGS" $(printf '%s\n' $FILES | grep -v '^frontend/fio/') >"$out" || true
tidy "$FIO_CFLAGS" frontend/fio/engine.c >>"$out" || true
if grep -q -E 'warning:|error:' "$out"; then
	echo "lint: clang-tidy:" >&2
	cat "$out" >&2
	status=1
fi
[ $status = 0 ] && echo "lint: cppcheck and clang-tidy clean ($(echo "$FILES" | wc -l) files)"
exit $status
