# SPDX-License-Identifier: MIT
"""Instructions per request of the backend's queue thread under callgrind
(load-independent, unlike the rates): xbd-be-queue-bench at 4k QD64 with
2000 and 12000 requests, the difference divided by 10000 (setup and
teardown cancel out).  usage: ir.py BENCH FILE MODE... where MODE is a
--limit value, or "bin=PATH" for another build of the bench (no --limit:
a tree from before the limiter)."""
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "suite"))
import parse  # noqa: E402

COUNTS = (2000, 12000)


def thread_ir(prog, path, extra, n, work):
    out = os.path.join(work, f"cg.{n}")
    subprocess.run(["valgrind", "--tool=callgrind", "--quiet", "--separate-threads=yes",
                    "--callgrind-out-file=" + out, prog, path, "--bs", "4096",
                    "--qd", "64", "--requests", str(n), "--wait", "poll", *extra],
                   check=True, capture_output=True, timeout=900)
    texts = []
    for f in sorted(glob.glob(out + "-*")):
        with open(f) as fh:
            texts.append(fh.read())
        os.unlink(f)
    return parse.callgrind_threads(texts, "be_io_run_once")[0]


def per_request(prog, path, extra, counts=COUNTS):
    """The queue thread's instructions per request, setup cancelled out."""
    with tempfile.TemporaryDirectory() as work:
        a, b = (thread_ir(prog, path, extra, n, work) for n in counts)
    return (b - a) / (counts[1] - counts[0])


def main():
    prog, path, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
    base = None
    for mode in modes:
        if mode.startswith("bin="):
            p, extra = mode[4:], []
        else:
            p, extra = prog, ["--limit", mode]
        ir = per_request(p, path, extra)
        base = base or ir
        print(f"  {mode if not mode.startswith('bin=') else 'other build':<11} "
              f"{ir:8.0f} Ir/request (queue thread)  ratio {ir / base:.4f}")


if __name__ == "__main__":
    main()
