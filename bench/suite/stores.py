# SPDX-License-Identifier: MIT
"""Backing stores: a file on tmpfs, a loop device over a tmpfs file, and a
file on the disk.  Each is created by setup() and removed by teardown();
the suite calls teardown() from a finally block, so a loop device is
detached and every file removed on errors and on SIGINT/SIGTERM too.

Every store holds STORE_SIZE bytes of non-zero data written once, so no
contender reads holes."""
import os
import shutil
import subprocess
import tempfile

from workloads import STORE_SIZE


def _fill(path, size):
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def _tmpfs_dir():
    base = "/dev/shm"
    if not (os.path.isdir(base) and os.access(base, os.W_OK)):
        raise RuntimeError("bench: /dev/shm (tmpfs) is needed for the tmpfs store")
    return tempfile.mkdtemp(prefix="xbd-bench-suite.", dir=base)


class Store:
    """kind: tmpfs | loop | disk; path: what the contenders open."""

    def __init__(self, kind, disk_dir=None):
        self.kind, self.path, self.dir, self.loop = kind, None, None, None
        self.disk_dir = disk_dir or os.environ.get("BENCH_DISK_DIR", "/var/tmp")
        self.fs = None

    def setup(self):
        self.dir = (tempfile.mkdtemp(prefix="xbd-bench-suite.", dir=self.disk_dir)
                    if self.kind == "disk" else _tmpfs_dir())
        image = os.path.join(self.dir, "disk.img")
        _fill(image, STORE_SIZE)
        self.path = image
        if self.kind == "loop":
            out = subprocess.run(["losetup", "--find", "--show", image],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode:
                raise RuntimeError("bench: losetup failed: " + out.stderr.strip())
            self.loop = self.path = out.stdout.strip()
        st = subprocess.run(["stat", "-f", "-c", "%T", self.dir],
                            capture_output=True, text=True, timeout=10)
        self.fs = st.stdout.strip()
        return self

    def teardown(self):
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], timeout=30)
            self.loop = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def describe(self):
        what = {"tmpfs": "file on tmpfs", "loop": "loop device over a tmpfs file",
                "disk": "file on the disk"}[self.kind]
        return {"kind": self.kind, "what": what, "fs": self.fs,
                "path": self.path, "size": STORE_SIZE}

    @property
    def is_blockdev(self):
        return self.kind == "loop"
