# SPDX-License-Identifier: MIT
"""`make install` into a staging DESTDIR: every installed program has its
manual page (lintian's binary-without-manpage, for everyone who adds a
program), and the library, its header and pkg-config file, the fio
engine, the hotplug script and the systemd unit (with the memory-pressure
squeeze) land where Documentation/xen-host.md says."""
import os
import subprocess

import pytest

from conftest import BUILD

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def make_install(dest):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    r = subprocess.run(["make", "-s", "-C", ROOT, "install", f"O={BUILD}",
                        f"DESTDIR={dest}", "PREFIX=/usr",
                        "SYSTEMD_UNITDIR=/lib/systemd/system"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"make install failed:\n{r.stdout}{r.stderr}"


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
