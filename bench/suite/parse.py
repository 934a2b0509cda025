# SPDX-License-Identifier: MIT
"""Parsers for what the contenders print.  Each returns a plain dict of
figures ({"iops", "mbps", "bytes", "seconds", ...}) or raises ValueError
with the text that did not parse: a contender whose output cannot be read
fails the run, it is never recorded as zero."""
import json
import re

CLK_TCK = 100   # overridden by suite.py from os.sysconf when run for real


def fio_json(text):
    """fio --output-format=json with --group_reporting: one job entry."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON in fio output: " + text[:200])
    data = json.loads(text[start:])
    jobs = data.get("jobs") or []
    if len(jobs) != 1:
        raise ValueError(f"expected one (grouped) fio job, got {len(jobs)}")
    job = jobs[0]
    if job.get("error"):
        raise ValueError(f"fio job error {job['error']}")
    iops = nbytes = 0.0
    lat, wall_ms = [], 0
    for d in ("read", "write"):
        part = job.get(d) or {}
        iops += part.get("iops", 0.0)
        nbytes += part.get("io_bytes", 0)
        if part.get("total_ios"):
            lat.append(part.get("lat_ns", {}).get("mean", 0.0))
            wall_ms = max(wall_ms, part.get("runtime", 0))
    # Each direction's runtime is wall time (job_runtime sums the jobs).
    wall = wall_ms / 1000.0
    if wall <= 0 or nbytes <= 0:
        raise ValueError("fio moved no data")
    return {"iops": iops, "mbps": nbytes / wall / 1e6, "bytes": nbytes,
            "seconds": wall, "lat_us": (max(lat) / 1000.0) if lat else None}


_DD = re.compile(r"^(\d+) bytes .* copied, ([0-9.,e+-]+) s", re.M)


def dd(text, bs=4096):
    """GNU dd's last line: 'N bytes (...) copied, S s, R MB/s'."""
    m = _DD.search(text)
    if not m:
        raise ValueError("no dd summary in: " + text[-200:])
    nbytes, secs = int(m.group(1)), float(m.group(2).replace(",", "."))
    if secs <= 0 or nbytes <= 0:
        raise ValueError("dd moved no data")
    return {"iops": nbytes / bs / secs, "mbps": nbytes / secs / 1e6,
            "bytes": nbytes, "seconds": secs, "lat_us": secs / (nbytes / bs) * 1e6}


_QB = re.compile(r"^(rand\w+) bs=(\d+) qd=(\d+) order=(\d+)( persistent)?: "
                 r"([0-9.]+) requests/s, ([0-9.]+) MB/s "
                 r"\(rd_req (\d+) wr_req (\d+)\)", re.M)


def queue_bench(text):
    """xbd-be-queue-bench's one result line."""
    m = _QB.search(text)
    if not m:
        raise ValueError("no xbd-be-queue-bench result in: " + text[-200:])
    bs, rps = int(m.group(2)), float(m.group(6))
    reqs = int(m.group(8)) + int(m.group(9))
    if rps <= 0 or reqs <= 0:
        raise ValueError("xbd-be-queue-bench completed no request")
    return {"iops": rps, "mbps": float(m.group(7)), "bytes": reqs * bs,
            "seconds": reqs / rps, "requests": reqs, "order": int(m.group(4)),
            "persistent": bool(m.group(5)), "lat_us": None}


def proc_stat_busy(stat_text):
    """Busy clock ticks of the whole machine from /proc/stat's "cpu" line:
    user + nice + system + irq + softirq + steal (not idle, not iowait)."""
    for line in stat_text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            user, nice, system, _idle, _iowait, irq, softirq = map(int, f[1:8])
            steal = int(f[8]) if len(f) > 8 else 0
            return user + nice + system + irq + softirq + steal
    raise ValueError("no cpu line in /proc/stat")


def proc_cpu_ticks(stat_text):
    """utime + stime (clock ticks) from /proc/PID/stat; the command name
    may hold spaces and parentheses, so split after the last ')'."""
    rest = stat_text[stat_text.rindex(")") + 2:].split()
    return int(rest[11]) + int(rest[12])


def callgrind_total(text):
    """Instructions (Ir) of one callgrind.out file: its 'totals:' line,
    or 'summary:' in older formats."""
    m = re.search(r"^(?:totals|summary):\s+(\d+)", text, re.M)
    if not m:
        raise ValueError("no totals in callgrind output")
    return int(m.group(1))


def callgrind_threads(texts, fn):
    """callgrind --separate-threads=yes: (Ir of the one thread whose file
    names function fn, Ir of all the threads)."""
    pat = re.compile(r"^c?fn=(?:\(\d+\) )?" + re.escape(fn) + r"$", re.M)
    hits = [t for t in texts if pat.search(t)]
    if len(hits) != 1:
        raise ValueError(f"{len(hits)} callgrind thread files name {fn}, expected one")
    return callgrind_total(hits[0]), sum(callgrind_total(t) for t in texts)
