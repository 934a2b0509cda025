#!/bin/sh
# Unpack Debian's source of the installed fio (exactly its version) under
# DIR (default build/fio-src) as DIR/fio, configured as Debian builds it,
# for the fio engine's build: it includes fio's own fio.h and ioengines.h
# (with the config-host.h of fio's configure) and checks at load that the
# running fio's version string is DIR/fio/xbd-fio-version's.  apt needs a deb-src entry, which this
# adds privately (a sources file, lists and cache under DIR/apt) naming
# the archives of the host's own deb entries; the host's apt setup is not
# changed.  Prints the unpacked tree's path.  Idempotent: a tree already
# unpacked for the installed version is reused.
set -eu

dir=${1:-build/fio-src}
ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null) || {
	echo "fio-src: fio is not installed (make deps)" >&2
	exit 1
}
upver=${ver#*:}
upver=${upver%-*}
tree="$dir/fio-$upver"
if [ -f "$tree/.xbd-version" ] && [ "$(cat "$tree/.xbd-version")" = "$ver" ] &&
   [ -f "$tree/config-host.h" ]; then
	ln -sfn "fio-$upver" "$dir/fio"
	echo "$tree"
	exit 0
fi
apt="$dir/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts"
: >"$apt/sources.list"
# One deb-src line per archive and suite the host fetches binaries from
# (deb822 .sources files and one-line .list files alike).
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?/deb-src \1/p' "$f"
done >>"$apt/sources.list"
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	awk -v RS= '/(^|\n)Types:[^\n]*deb/ {
		uris = ""; suites = ""; comps = ""; keys = ""
		n = split($0, l, "\n")
		for (i = 1; i <= n; i++) {
			if (l[i] ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", l[i]); uris = l[i] }
			if (l[i] ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", l[i]); suites = l[i] }
			if (l[i] ~ /^Components:/) { sub(/^Components:[ \t]*/, "", l[i]); comps = l[i] }
			if (l[i] ~ /^Signed-By:/) { sub(/^Signed-By:[ \t]*/, "", l[i]); keys = l[i] }
		}
		ns = split(suites, s, " ")
		nu = split(uris, u, " ")
		for (j = 1; j <= nu; j++)
			for (k = 1; k <= ns; k++)
				printf "deb-src %s%s %s %s\n", keys ? "[signed-by=" keys "] " : "", u[j], s[k], comps
	}' "$f"
done >>"$apt/sources.list"
if [ ! -s "$apt/sources.list" ]; then
	echo "fio-src: no deb entries in /etc/apt to derive a deb-src entry from" >&2
	exit 1
fi
aptopt="-o Dir::Etc::SourceList=$PWD/$apt/sources.list -o Dir::Etc::SourceParts=$PWD/$apt/parts
-o Dir::State::Lists=$PWD/$apt/lists -o Dir::Cache=$PWD/$apt/cache
-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root
-o Debug::NoLocking=1"
# shellcheck disable=SC2086
apt-get $aptopt -qq update
rm -rf "$tree"
# shellcheck disable=SC2086
(cd "$dir" && apt-get $aptopt -qq source --download-only "fio=$ver")
(cd "$dir" && dpkg-source --no-check -x fio_"$upver"-*.dsc "fio-$upver" >/dev/null)
# Debian's configure line (debian/rules) less the GUI and engines that
# need libraries we do not install: neither changes a header we use.
# Without the caller's CFLAGS/CPPFLAGS/LDFLAGS (dpkg-buildflags under
# `make deb`): configure's probes would see ours, not fio's, and a probe
# failing on -D_FORTIFY_SOURCE or -Werror=... misdescribes fio's build.
(cd "$tree" && env -u CFLAGS -u CPPFLAGS -u LDFLAGS \
	./configure --disable-native --prefix=/usr >configure.log 2>&1) || {
	echo "fio-src: fio's configure failed, see $tree/configure.log" >&2
	exit 1
}
(cd "$tree" && sh ./FIO-VERSION-GEN >/dev/null 2>&1 &&
 sed -n 's/^FIO_VERSION = //p' FIO-VERSION-FILE >xbd-fio-version)
echo "$ver" >"$tree/.xbd-version"
ln -sfn "fio-$upver" "$dir/fio"
echo "$tree"
