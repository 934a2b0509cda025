# SPDX-License-Identifier: MIT
"""`make install` into a staging DESTDIR: every installed program has its
manual page (lintian's binary-without-manpage, for everyone who adds a
program), and the library, its header and pkg-config file, the fio
engine, the hotplug script and the systemd unit (with the memory-pressure
squeeze) land where Documentation/xen-host.md says.

`make install O=$XBD_BUILD` runs in the tree the other tests use
(build-asan under `make check`): with the SAN the tree recorded
($(O)/.san), so an object it recompiles keeps the tree's sanitizers, and
a different SAN= is refused rather than mixed in."""
import os
import subprocess

import pytest

from conftest import BUILD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAN_FLAGS = {"0": None, "1": "-fsanitize=address,undefined",
             "thread": "-fsanitize=thread"}


def make_env():
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "SAN")}


def tree_san():
    """The SAN= the build tree was made with, as the Makefile recorded it."""
    path = os.path.join(BUILD, ".san")
    assert os.path.exists(path), f"{path} missing: the tree was not built by make"
    with open(path) as f:
        san = f.read().strip()
    assert san in SAN_FLAGS, f"{path} says SAN={san!r}"
    return san


def make(*args, timeout=600):
    return subprocess.run(["make", "-s", "-C", ROOT, *args, f"O={BUILD}"],
                          capture_output=True, text=True, timeout=timeout,
                          env=make_env())


def make_install(dest):
    r = make("install", f"SAN={tree_san()}", f"DESTDIR={dest}", "PREFIX=/usr",
             "SYSTEMD_UNITDIR=/lib/systemd/system")
    assert r.returncode == 0, f"make install failed:\n{r.stdout}{r.stderr}"


def test_stale_object_keeps_the_trees_san(tmp_path):
    """`make -n -W lib/log.c install` (as if lib/log.c had changed, nothing
    run): without SAN= the object is recompiled with the tree's own
    sanitizer flags (none for SAN=0); a different SAN= stops make with the
    recorded value named, before anything is built."""
    san = tree_san()
    obj = os.path.join(BUILD, "obj", "lib", "log.o")
    r = make("-n", "-W", "lib/log.c", "install", f"DESTDIR={tmp_path}",
             timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    cc = [x for x in r.stdout.splitlines() if f"-o {obj} " in x]
    assert len(cc) == 1, r.stdout[-2000:]
    flag = SAN_FLAGS[san]
    if flag:
        assert flag in cc[0], (san, cc[0])
    else:
        assert "-fsanitize" not in cc[0], cc[0]
    other = "0" if san != "0" else "1"
    r = make("-n", "install", f"SAN={other}", f"DESTDIR={tmp_path}", timeout=120)
    assert r.returncode != 0, r.stdout[-2000:]
    assert f"was built with SAN={san}, not SAN={other}" in r.stderr, r.stderr
    assert f"-o {obj} " not in r.stdout


@pytest.mark.time_limit(900)      # make install may rebuild (600 s bound)
def test_make_install(tmp_path):
    dest = str(tmp_path / "stage")
    make_install(dest)
    bindir = os.path.join(dest, "usr", "bin")
    mandir = os.path.join(dest, "usr", "share", "man")
    pages = {name.rsplit(".", 1)[0] for _, _, files in os.walk(mandir)
             for name in files}
    programs = sorted(os.listdir(bindir))
    assert programs, "make install installed no program"
    missing = [p for p in programs if p not in pages]
    assert not missing, (f"installed program(s) without a manual page: {missing}"
                         " (add man/<name>.<section>)")
    assert {"xbd-sysfs", "xbd-fio"} <= pages, sorted(pages)
    for path in ("usr/lib/libxbdfront.so.0", "usr/lib/libxbdfront.a",
                 "usr/lib/pkgconfig/xbdfront.pc", "usr/include/xbdfront.h",
                 "usr/lib/xbd/xbd-fio.so", "etc/xen/scripts/xbd-block",
                 "lib/systemd/system/xbd-blkback.service"):
        assert os.path.exists(os.path.join(dest, path)), f"{path} not installed"
    assert os.path.islink(os.path.join(dest, "usr/lib/libxbdfront.so"))
    with open(os.path.join(dest, "lib/systemd/system/xbd-blkback.service")) as f:
        unit = f.read()
    assert "ExecStart=/usr/bin/xbd-blkback " in unit
    assert "XBD_BLKBACK_PRESSURE=--pressure=auto" in unit
