# SPDX-License-Identifier: MIT
"""Where a benchmark result came from: the machine, its load, the UTC
time and the commit (with a dirty flag).  Every result JSON of `make
bench` (bench/suite, bench/storage, bench/limits) carries these, and
every figure written from it (bench/suite/docs.py) names them."""
import datetime
import json
import os
import platform
import subprocess

# 2: the result names its dirty flag and, for the suite, has the seed's
# dd and machine CPU per I/O; bench/suite/docs.py uses nothing older.
FORMAT = 2
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // 1024
    return {"kernel": platform.release(), "cpus": os.cpu_count(), "cpu": model,
            "mem_mib": mem, "load_start": os.getloadavg()}


def git(top, *args):
    """git's run in top, or None where git is not installed (a fresh
    machine has none: the checkout may have come as a tarball)."""
    try:
        return subprocess.run(["git", "-C", top, *args], capture_output=True,
                              text=True)
    except FileNotFoundError:
        return None


def git_commit(top=TOP):
    out = git(top, "rev-parse", "--short", "HEAD")
    return (out.stdout.strip() if out else "") or "?"


def git_dirty(top=TOP):
    """True when tracked files differ from the commit, so what ran is not
    exactly the commit named.  Markdown and bench/results/ do not count:
    `make bench` itself rewrites them, and they do not run."""
    out = git(top, "status", "--porcelain", "--untracked-files=no", "--", ".",
              ":(exclude)bench/results", ":(exclude)*.md")
    return bool(out.stdout.strip()) if out and out.returncode == 0 else None


def stamp():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def quick():
    return os.environ.get("BENCH_QUICK", "0") not in ("", "0")


def results_dir(top=TOP):
    """bench/results (BENCH_RESULTS), or its quick/ folder for a quick run:
    a quick run never replaces what a full run wrote."""
    d = os.path.abspath(os.environ.get("BENCH_RESULTS") or os.path.join(top, "bench", "results"))
    return os.path.join(d, "quick") if quick() else d


def header(suite):
    """The common head of a result JSON; call finish() at the end."""
    return {"suite": suite, "format": FORMAT, "date": stamp(), "commit": git_commit(),
            "dirty": git_dirty(), "quick": quick(), "machine": machine()}


def finish(res):
    res["machine"]["load_end"] = os.getloadavg()
    return res


def save(res, name):
    """finish() res and write it to results_dir()/NAME-DATE.json (the
    folder made if need be); the file's path."""
    finish(res)
    d = results_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{name}-{res['date']}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    return path
