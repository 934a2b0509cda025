# SPDX-License-Identifier: MIT
"""Bad input to the platform: each is a clear -errno, never a crash."""
import errno
import os
import shutil
import tempfile

from conftest import binary
from platform_fixtures import Helper, helpers  # noqa: F401  (fixture)

MiB = 1 << 20


def test_missing_rundir_is_created(helpers, rundir):
    target = os.path.join(rundir, "machine")
    h = Helper(target, rundir, "h", open_platform=False)
    try:
        assert h.err("open") == 0
        assert os.path.isdir(target)
    finally:
        h.stop()


def test_rundir_with_missing_parent(rundir, tmp_path):
    h = Helper(os.path.join(rundir, "no", "such"), str(tmp_path), "h",
               open_platform=False)
    try:
        assert h.err("open") == -errno.ENOENT
        assert h.err("info 1") == -errno.ENXIO     # nothing opened: refused
    finally:
        h.stop()


def test_rundir_is_a_file(rundir, tmp_path):
    path = os.path.join(rundir, "file")
    open(path, "w").close()
    h = Helper(path, str(tmp_path), "h", open_platform=False)
    try:
        assert h.err("open") == -errno.ENOTDIR
    finally:
        h.stop()


def test_unwritable_rundir(rundir, tmp_path):
    """A user who may not write the machine directory is refused.  As root
    (who may write anything) the helper runs as nobody, from a copy in a
    directory nobody can reach: the checkout may not be (Debian's /root
    is mode 0700); otherwise the directory is made read-only."""
    kw = {}
    with tempfile.TemporaryDirectory(prefix="xbd-test-nobody-") as exe_dir:
        if os.geteuid() == 0:
            os.chmod(rundir, 0o755)
            os.chmod(exe_dir, 0o755)
            exe = os.path.join(exe_dir, "xbd-test-platform")
            shutil.copy2(binary("xbd-test-platform"), exe)
            os.chmod(exe, 0o755)
            kw = dict(user=65534, group=65534, extra_groups=[], cwd="/", exe=exe)
        else:
            os.chmod(rundir, 0o555)
        h = Helper(rundir, str(tmp_path), "h", open_platform=False, **kw)
        try:
            assert h.err("open") == -errno.EACCES
        finally:
            h.stop()
            os.chmod(rundir, 0o755)


def test_domain_ids_and_sizes(helpers):
    h = helpers.start("tool")
    assert h.err(f"create 32752 big {MiB}") == -errno.EINVAL   # > XBD_DOMID_MAX
    assert h.err(f"info 32752") == -errno.EINVAL
    assert h.err(f"claim 32752") == -errno.EINVAL
    assert h.err("gnttab 32752") == -errno.EINVAL
    assert h.err("evtchn 40000") == -errno.EINVAL
    assert h.err("create 5 odd 1000") == -errno.EINVAL         # not a page multiple
    assert h.err(f"create 5 huge {(1 << 40) + 4096}") == -errno.EINVAL
    assert h.err(f"create 5 a/b {MiB}") == -errno.EINVAL      # bad name
    assert h.err(f"create 5 {'n' * 64} {MiB}") == -errno.EINVAL
    assert h.err("claim 5") == -errno.ENOENT                   # does not exist
    assert h.err("gnttab 5") == -errno.ENOENT
    assert h.err("evtchn 5") == -errno.ENOENT
    h.ok("gnttab 0")
    assert h.err("map 40000 ro 8") == -errno.EINVAL            # remote out of range
    assert h.ok("copyfrom 40000 8 0 1") == [str(-errno.EINVAL), "0"]


def test_memory_exhaustion(helpers):
    h = helpers.start("guest")
    h.ok("create 1 small 16384")
    h.ok("claim 1")
    h.ok("gntshr")
    h.ok("share 0 3 rw")
    assert h.err("share 0 2 rw") == -errno.ENOMEM
    h.ok("share 0 1 rw")
