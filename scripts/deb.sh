#!/bin/sh
# make deb: the Debian packages of debian/ with dpkg-buildpackage, into
# build/deb/, then lintian over them (errors and warnings fail).
# The working tree (committed or not; no build output, no .git) is copied
# to build/deb/xbd-VERSION/ and built there, so that dpkg-buildpackage's
# outputs, which go to the parent of the source tree, stay in build/deb/.
# As root, installs what it needs first: dpkg-dev, debhelper, lintian and
# debian/control's Build-Depends (apt-get build-dep).
set -eu
cd "$(dirname "$0")/.."
OUT=build/deb
VERSION=$(head -n1 debian/changelog | cut -d' ' -f2 | tr -d '()')
SRC=$OUT/xbd-$VERSION

if [ "$(id -u)" = 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	need=""
	for p in dpkg-dev debhelper lintian; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q "install ok installed" || need="$need $p"
	done
	if [ -n "$need" ] || ! dpkg-checkbuilddeps >/dev/null 2>&1; then
		echo "xbd: make deb: installing build dependencies"
		apt-get update -qq
		# shellcheck disable=SC2086
		[ -z "$need" ] || apt-get install -y -qq --no-install-recommends $need >/dev/null
		apt-get build-dep -y -qq ./ >/dev/null
	fi
fi

rm -rf "$OUT"
mkdir -p "$SRC"
tar -c --exclude=./build --exclude='./build-*' --exclude=./.git . | tar -x -C "$SRC"
(cd "$SRC" && dpkg-buildpackage -us -uc -b)
rm -rf "$SRC"
ls "$OUT"/*.deb
lintian --fail-on error,warning "$OUT"/*.changes
echo "xbd: make deb: $(ls "$OUT"/*.deb | wc -l) packages in $OUT, lintian clean"
