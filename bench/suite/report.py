# SPDX-License-Identifier: MIT
"""Markdown tables and PNG plots (gnuplot) from one suite result.

write(result, resdir) writes README.md and the plots into resdir (a full
run) or resdir/quick/ (BENCH_QUICK).  The xbd figure of a ratio is the
first xbd contender present in XBD_ORDER: the fio engine once it exists,
then the FUSE file, then the backend benchmark.  Ratios are reported,
never asserted."""
import os
import subprocess

XBD_ORDER = ("xbd-fio", "xbd-fuse", "xbd-queue")
NBD = ("qsd-nbd", "nbdkit")
HOST = "host"


def index(results):
    """{(store, workload): {contender: record}}"""
    idx = {}
    for r in results:
        idx.setdefault((r["store"], r["workload"]), {})[r["contender"]] = r
    return idx


def xbd_of(row):
    for name in XBD_ORDER:
        if name in row:
            return name, row[name]
    return None, None


def best_nbd(row):
    cands = [row[n] for n in NBD if n in row]
    return max(cands, key=lambda r: r["iops"]) if cands else None


def ratios(row, key="iops"):
    """(xbd name, xbd/host, xbd/best NBD); None where a side is absent."""
    name, x = xbd_of(row)
    if not x:
        return None, None, None
    h, n = row.get(HOST), best_nbd(row)
    return (name, x[key] / h[key] if h else None, x[key] / n[key] if n else None)


def contenders_in(results):
    seen = []
    for r in results:
        if r["contender"] not in seen:
            seen.append(r["contender"])
    return seen


def cpu_per_gb(r):
    gb = r["bytes"] / 1e9
    return (r.get("client_cpu_s", 0.0) + r.get("server_cpu_s", 0.0)) / gb if gb else None


def _f(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def perf_table(res, store):
    idx, names = index(res["results"]), contenders_in(res["results"])
    rows = [k[1] for k in idx if k[0] == store]
    head = ["workload"] + names + ["xbd/host", "xbd/best NBD"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" + " ---: |" * (len(head) - 1)]
    for wl in rows:
        row = idx[(store, wl)]
        key = "mbps" if wl.startswith(("seq", "dd", "seed")) else "iops"
        cells = [_fmt_cell(row.get(n), key) for n in names]
        xname, rh, rn = ratios(row, key)
        tag = f" ({xname})" if xname and xname != "xbd-queue" else ""
        lines.append("| " + " | ".join([wl] + cells + [_f(rh) + tag, _f(rn) + tag]) + " |")
    return "\n".join(lines)


def _fmt_cell(r, key):
    if not r:
        return "–"
    if key == "mbps":
        return f"{r['mbps']:.0f} MB/s"
    return f"{r['iops'] / 1000:.1f}k"


def cpu_table(res, store):
    idx, names = index(res["results"]), contenders_in(res["results"])
    lines = ["| workload | " + " | ".join(names) + " |",
             "| --- |" + " ---: |" * len(names)]
    for (st, wl), row in idx.items():
        if st == store:
            lines.append("| " + wl + " | " + " | ".join(
                _f(cpu_per_gb(row[n]) if n in row else None, "{:.1f}") for n in names) + " |")
    return "\n".join(lines)


def machine_cpu_table(res, store):
    """Machine CPU (/proc/stat busy, every CPU) per I/O in µs, 4k workloads."""
    idx, names = index(res["results"]), contenders_in(res["results"])
    lines = ["| workload | " + " | ".join(names) + " | xbd/host |",
             "| --- |" + " ---: |" * (len(names) + 1)]
    for (st, wl), row in idx.items():
        if st != store or not wl.startswith(("read4k", "write4k")):
            continue
        v = {n: row[n].get("machine_us_per_io") for n in names if n in row}
        xbd = next((v[n] for n in ("xbd-fio", "xbd-fio-2q") if v.get(n)), None)
        rel = xbd / v[HOST] if xbd and v.get(HOST) else None
        lines.append("| " + wl + " | " + " | ".join(_f(v.get(n), "{:.2f}") for n in names) +
                     " | " + _f(rel) + " |")
    return "\n".join(lines)


def variant_table(res):
    lines = ["| variant | workload | IOPS | MB/s | CPU s/GB | notifications/request |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    base = [r for r in res["results"] if r["store"] == "tmpfs" and
            r["contender"] in ("xbd-fio", "xbd-queue") and
            r["workload"] in ("read4k-qd64-j1", "read4k-qd1-j1", "seqread1m-qd16")]
    label = {"xbd-fio": "xbd-fio (order 3, zero copy, persistent, 256 segments)",
             "xbd-queue": "xbd-queue (order 2, copy)"}
    for r in base + res["variants"]:
        iops = f"{r['iops'] / 1000:.1f}k" if r["iops"] >= 1000 else f"{r['iops']:.0f}"
        lines.append(f"| {label.get(r['contender'], r['contender'])} | {r['workload']} | "
                     f"{iops} | {r['mbps']:.0f} | "
                     f"{_f(cpu_per_gb(r), '{:.1f}')} | {_f(r.get('evt_per_req'), '{:.3f}')} |")
    return "\n".join(lines)


def scaling(row):
    """2 jobs on 2 queues over 2 jobs on 1 queue, or None: from xbd-fio-2q's
    paired runs (1 and 2 queues alternating on one machine) when it has
    them, else xbd-fio-2q over xbd-fio (results of older runs)."""
    one, two = row.get("xbd-fio"), row.get("xbd-fio-2q")
    if two and two.get("paired_scaling") is not None:
        return two["paired_scaling"]
    return two["iops"] / one["iops"] if one and two and one["iops"] else None


def _paired_1q(row):
    """The 1-queue figure the ratio used: the mean of the paired runs."""
    two = row.get("xbd-fio-2q") or {}
    runs = two.get("paired_1q_iops")
    return {"iops": sum(runs) / len(runs)} if runs else row.get("xbd-fio")


def _paired_2q(row):
    two = row.get("xbd-fio-2q") or {}
    runs = two.get("paired_2q_iops")
    return {"iops": sum(runs) / len(runs)} if runs else two


def scaling_table(res):
    idx = index(res["results"])
    lines = ["| store | workload | 2 jobs, 1 queue | 2 jobs, 2 queues | 2 queues / 1 queue |",
             "| --- | --- | ---: | ---: | ---: |"]
    for (st, wl), row in idx.items():
        if "xbd-fio-2q" not in row:
            continue
        key = "mbps" if wl.startswith("seq") else "iops"
        if "paired_scaling" in row["xbd-fio-2q"]:
            key = "iops"        # the paired runs record IOPS
            one, two = _paired_1q(row), _paired_2q(row)
        else:
            one, two = row.get("xbd-fio"), row["xbd-fio-2q"]
        lines.append(f"| {st} | {wl} | {_fmt_cell(one, key)} | "
                     f"{_fmt_cell(two, key)} | {_f(scaling(row))} |")
    return "\n".join(lines)


def notify_table(res):
    lines = ["| store | contender | workload | requests sampled | kicks in | "
             "notifications out | per request |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in res["results"]:
        if r.get("evt_per_req") is not None:
            lines.append(f"| {r['store']} | {r['contender']} | {r['workload']} | "
                         f"{r['evt_requests']} | {r['evt_in']} | {r['evt_out']} | "
                         f"{r['evt_per_req']:.3f} |")
    return "\n".join(lines)


def callgrind_table(res):
    cg = res.get("callgrind") or {}
    lines = ["| server | instructions per 4k request | what was counted | how |",
             "| --- | ---: | --- | --- |"]
    for name, m in cg.items():
        if "error" in m:
            lines.append(f"| {name} | – | – | {m['error']} |")
        else:
            lines.append(f"| {name} | {m['ir_per_req']:.0f} | {m.get('what', '–')} | "
                         f"(Ir at {m['requests'][1]} − Ir at {m['requests'][0]} "
                         "requests) / difference |")
    return "\n".join(lines)


def goals(res):
    idx = index(res["results"])
    tm = lambda wl: idx.get(("tmpfs", wl), {})  # noqa: E731
    out = []
    name, rh, rn = ratios(tm("read4k-qd64-j1"))
    out.append(("4k randread QD64, 1 job, 1 queue: xbd ≥ 0.80 × host", rh, 0.80, name))
    name2, rh2, _ = ratios(tm("seqread1m-qd16"), "mbps")
    out.append(("1M seq read QD16: xbd ≥ 0.90 × host", rh2, 0.90, name2))
    out.append(("4k randread QD64: xbd ≥ 2.0 × best NBD", rn, 2.0, name))
    sc = scaling(tm("read4k-qd64-j2"))
    paired = "paired_scaling" in (tm("read4k-qd64-j2").get("xbd-fio-2q") or {})
    out.append(("2 jobs on 2 queues ≥ 1.5 × 2 jobs on 1 queue (4k randread QD64)", sc, 1.5,
                None if sc is None else "xbd-fio-2q, paired 1/2-queue runs" if paired
                else "xbd-fio-2q / xbd-fio"))
    fio = tm("read4k-qd64-j1").get("xbd-fio") or {}
    ev = fio.get("evt_per_req")
    out.append(("< 0.1 event-channel notifications per request at QD64", ev, -0.1,
                "xbd-fio" if ev is not None else None))
    lines = ["| goal | xbd contender | measured | met |", "| --- | --- | ---: | --- |"]
    for text, v, target, who in out:
        # a negative target is an upper bound: met below |target|
        ok = v is not None and (v < -target if target < 0 else v >= target)
        met = "not measurable yet" if v is None else ("yes" if ok else "no")
        if who == "xbd-queue" and v is not None:
            met += " (backend only: no frontend, no fio in the xbd path)"
        lines.append(f"| {text} | {who or '–'} | {_f(v)} | {met} |")
    return "\n".join(lines)


def markdown(res, plots):
    m = res["machine"]
    parts = [f"# xbd benchmark suite — {res['date']}{' (quick)' if res['quick'] else ''}",
             "",
             f"Commit {res['commit']}"
             f"{' (with uncommitted changes)' if res.get('dirty') else ''}; "
             f"{m['cpus']} × {m['cpu']}, {m['mem_mib']} MiB, "
             f"Linux {m['kernel']}; load average {m['load_start'][0]:.1f} at the start, "
             f"{m.get('load_end', [0])[0]:.1f} at the end.  {res['runtime_s']} s per "
             f"time-based run; dd count {res['dd_count']}.  Generated by "
             "bench/suite/report.py from the JSON next to this file.",
             "", "Cells: 4k workloads in IOPS (k), sequential and dd in MB/s.  "
             "Ratios use the same unit.", ""]
    for p in res.get("pending", []):
        parts.append(f"* Not in this run: **{p['contender']}** — {p['why']}.")
    for st in res["stores"]:
        parts += ["", f"## {st['what']} ({st['fs']})", "", perf_table(res, st["kind"]),
                  "", "CPU seconds per GB moved (client + server, /proc and getrusage):",
                  "", cpu_table(res, st["kind"]),
                  "", "Machine CPU per I/O in µs (/proc/stat busy time of every CPU over "
                  "the run / I/Os; everything else running on the machine counts too):",
                  "", machine_cpu_table(res, st["kind"])]
    parts += ["", "## Queue scaling (xbd-fio, 2 fio threads)", "",
              "1 queue and 2 queues alternate on one machine, twice (xbd-fio-2q's paired "
              "runs; mean IOPS of each).", "", scaling_table(res),
              "", "## Event-channel notifications per request (backend statistics, "
              "20% to 70% of each run)", "", notify_table(res)]
    parts += ["", "## xbd variations (tmpfs)", "", variant_table(res),
              "", "## Instructions per request (callgrind, user space only)", "",
              callgrind_table(res), "", "## Goals of issue 8 (reported, not asserted)", "",
              goals(res), ""]
    for title, png in plots:
        parts += [f"![{title}]({png})", ""]
    return "\n".join(parts)


def _bars(path, title, ylabel, clusters, series, values):
    """Clustered bar chart: values[i][j] for cluster i, series j."""
    base = path[:-4]
    with open(base + ".dat", "w") as f:
        f.write("cluster " + " ".join(f'"{s}"' for s in series) + "\n")
        for c, vals in zip(clusters, values):
            f.write(f'"{c}" ' + " ".join("-" if v is None else f"{v:.3f}" for v in vals) + "\n")
    cols = ", ".join(f"'' using {j + 2}:xtic(1) title columnhead" if j else
                     f"'{base}.dat' using {j + 2}:xtic(1) title columnhead"
                     for j in range(len(series)))
    gp = (f"set terminal png size 900,480\nset output '{path}'\nset title '{title}'\n"
          f"set ylabel '{ylabel}'\nset style data histograms\nset style histogram cluster gap 1\n"
          "set style fill solid border -1\nset datafile missing '-'\nset key top left\n"
          "set yrange [0:*]\nset grid ytics\n"
          f"plot {cols}\n")
    with open(base + ".gp", "w") as f:
        f.write(gp)
    subprocess.run(["gnuplot", base + ".gp"], check=True, timeout=60,
                   capture_output=True)


def plots(res, outdir):
    idx, names = index(res["results"]), contenders_in(res["results"])
    got = lambda wl, n, k: (idx.get(("tmpfs", wl), {}).get(n) or {}).get(k)  # noqa: E731
    made = []
    specs = [
        ("iops-by-qd.png", "4k randread, 1 job, tmpfs: IOPS by contender and QD", "kIOPS",
         [("QD1", "read4k-qd1-j1"), ("QD64", "read4k-qd64-j1")], "iops", 1e-3),
        ("mbps-by-bs.png", "read MB/s by block size, tmpfs", "MB/s",
         [("4k QD64", "read4k-qd64-j1"), ("1M QD16", "seqread1m-qd16")], "mbps", 1.0),
        ("scaling.png", "4k randread QD64, tmpfs: 1 vs 2 jobs (xbd-fio-2q: a queue per job)",
         "kIOPS", [("1 job", "read4k-qd64-j1"), ("2 jobs", "read4k-qd64-j2")], "iops", 1e-3),
    ]
    for png, title, ylabel, cl, key, scale in specs:
        vals = [[(got(wl, n, key) or 0) * scale if got(wl, n, key) else None for n in names]
                for _, wl in cl]
        _bars(os.path.join(outdir, png), title, ylabel, [c for c, _ in cl], names, vals)
        made.append((title, png))
    return made


def write(res, resdir):
    outdir = os.path.join(resdir, "quick") if res["quick"] else resdir
    os.makedirs(outdir, exist_ok=True)
    made = plots(res, outdir)
    path = os.path.join(outdir, "README.md")
    with open(path, "w") as f:
        f.write(markdown(res, made))
    print(f"bench/suite: {path}")
    return path


if __name__ == "__main__":
    # Regenerate a report: report.py RESULT.json [RESULTS_DIR]
    import json
    import sys
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: report.py RESULT.json [RESULTS_DIR]")
    with open(sys.argv[1]) as f:
        write(json.load(f), sys.argv[2] if len(sys.argv) == 3 else
              os.path.dirname(os.path.abspath(sys.argv[1])))
