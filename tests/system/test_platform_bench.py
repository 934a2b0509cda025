# SPDX-License-Identifier: MIT
"""bench/platform runs (at a tiny scale) and prints every figure: a smoke
test so `make bench` cannot rot.  No timing is asserted."""
import os
import subprocess

from conftest import binary, sanitizer_env, BAD_LOG_WORDS

ROWS = ("notify round trip", "pipe ping-pong", "eventfd ping-pong",
        "notifies/s, peer not reading", "eventfd writes",
        "notifies/s, peer consuming", "wake-ups/s", "map+touch+unmap, 1 grant",
        "mmap+touch+munmap", "32 scattered grants", "grant copy per 4 KiB",
        "pread 4 KiB", "memcpy 4 KiB")


def test_bench_prints_every_figure(rundir):
    out = subprocess.run([binary("xbd-bench-platform"),
                          os.path.join(rundir, "machine"), "0.001"],
                         capture_output=True, text=True, timeout=120,
                         env=sanitizer_env())
    assert out.returncode == 0, out.stdout + out.stderr
    for row in ROWS:
        assert row in out.stdout, f"{row!r} missing:\n{out.stdout}"
    for word in BAD_LOG_WORDS:
        assert word not in out.stderr, out.stderr


def test_bench_usage():
    out = subprocess.run([binary("xbd-bench-platform")], capture_output=True,
                         text=True, timeout=30, env=sanitizer_env())
    assert out.returncode == 2
    assert "usage:" in out.stderr
