# SPDX-License-Identifier: MIT
"""bench/suite's parsers and report on a tiny synthetic result set: what
fio, dd, xbd-be-queue-bench, /proc and callgrind print is parsed into
figures, and the Markdown table, ratios, goals and PNG plots come out of
them.  Nothing is timed and no contender runs."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "suite"))
import parse  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402


def fio_text(read_iops, read_bytes, runtime_ms, write_iops=0.0, write_bytes=0):
    def part(iops, nbytes):
        return {"iops": iops, "io_bytes": nbytes, "runtime": runtime_ms if nbytes else 0,
                "total_ios": int(nbytes / 4096), "lat_ns": {"mean": 250000.0}}
    job = {"jobname": "w", "error": 0, "job_runtime": 2 * runtime_ms,
           "read": part(read_iops, read_bytes), "write": part(write_iops, write_bytes)}
    return "fio: a warning line\n" + json.dumps({"fio version": "fio-3.33", "jobs": [job]})


def test_fio_json_uses_wall_runtime_not_summed_job_runtime():
    fig = parse.fio_json(fio_text(1000.0, 8_192_000, 2000))
    assert fig["iops"] == 1000.0
    assert fig["seconds"] == 2.0
    assert fig["mbps"] == pytest.approx(4.096)
    assert fig["lat_us"] == pytest.approx(250.0)


def test_fio_json_adds_both_directions():
    fig = parse.fio_json(fio_text(100.0, 409_600, 1000, 50.0, 204_800))
    assert fig["iops"] == 150.0
    assert fig["bytes"] == 614_400


@pytest.mark.parametrize("text", ["", "no json here", json.dumps({"jobs": []}),
                                  json.dumps({"jobs": [{"error": 5}]}),
                                  fio_text(0.0, 0, 0)])
def test_fio_json_rejects_bad_output(text):
    with pytest.raises(ValueError):
        parse.fio_json(text)


def test_dd_summary():
    text = ("131072+0 records in\n131072+0 records out\n"
            "536870912 bytes (537 MB, 512 MiB) copied, 2.5 s, 215 MB/s\n")
    fig = parse.dd(text)
    assert fig["bytes"] == 536870912
    assert fig["iops"] == pytest.approx(131072 / 2.5)
    with pytest.raises(ValueError):
        parse.dd("dd: failed to open 'x': No such file or directory\n")


def test_queue_bench_line():
    fig = parse.queue_bench("randread bs=4096 qd=64 order=2 persistent: 64935 requests/s, "
                            "266.0 MB/s (rd_req 64971 wr_req 0)\n")
    assert fig["iops"] == 64935 and fig["mbps"] == 266.0
    assert fig["requests"] == 64971 and fig["persistent"] and fig["order"] == 2
    with pytest.raises(ValueError):
        parse.queue_bench("setup failed (FILE must be >= 64 MiB)\n")


def test_proc_stat_with_odd_command_name():
    fields = " ".join(str(i) for i in range(3, 53))   # field 3 .. 52
    text = f"1234 (qemu (x) d) {fields}\n"
    assert parse.proc_cpu_ticks(text) == 14 + 15        # utime + stime


def test_callgrind_totals():
    assert parse.callgrind_total("events: Ir\nfn=main\n1 2\ntotals: 98765\n") == 98765
    assert parse.callgrind_total("summary: 42\n") == 42
    with pytest.raises(ValueError):
        parse.callgrind_total("events: Ir\n")


def test_callgrind_thread_files_pick_the_queue_thread():
    main = "fn=(1) main\ncfn=(2) be_queue_start\ntotals: 500\n"
    queue = "fn=(1) queue_main\ncfn=(2) be_io_run\nfn=(3) be_io_run_once\ntotals: 7000\n"
    assert parse.callgrind_threads([main, queue], "be_io_run_once") == (7000, 7500)
    assert parse.callgrind_threads([queue, main], "be_io_run_once") == (7000, 7500)
    with pytest.raises(ValueError):             # no thread, or two, ran it
        parse.callgrind_threads([main, main], "be_io_run_once")
    with pytest.raises(ValueError):
        parse.callgrind_threads([queue, queue], "be_io_run_once")


def test_workload_matrix_is_issue_8s():
    names = {w["name"] for w in workloads.ALL}
    for op in ("read", "write"):
        for qd in (1, 64):
            for j in (1, 2):
                assert f"{op}4k-qd{qd}-j{j}" in names
    assert {"seqread1m-qd16", "seqwrite1m-qd16", "dd4k"} <= names
    dd = workloads.by_name("dd4k")
    assert "--size=536870912" in workloads.fio_args(dd, 3)
    assert workloads.for_store("disk", quick=True) == []


def rec(contender, wl, iops, mbps=None, store="tmpfs", cpu=1.0):
    mbps = mbps if mbps is not None else iops * 4096 / 1e6
    return {"store": store, "contender": contender, "workload": wl, "iops": iops,
            "mbps": mbps, "bytes": mbps * 1e6 * 2, "seconds": 2.0,
            "client_cpu_s": cpu, "server_cpu_s": cpu, "method": "synthetic"}


def synthetic():
    res = [rec("host", "read4k-qd64-j1", 100000), rec("qsd-nbd", "read4k-qd64-j1", 10000),
           rec("nbdkit", "read4k-qd64-j1", 20000), rec("xbd-queue", "read4k-qd64-j1", 90000),
           rec("host", "read4k-qd64-j2", 150000), rec("nbdkit", "read4k-qd64-j2", 30000),
           rec("host", "read4k-qd1-j1", 20000), rec("xbd-queue", "read4k-qd1-j1", 5000),
           rec("host", "seqread1m-qd16", 1000, 1000.0), rec("nbdkit", "seqread1m-qd16", 80, 80.0)]
    return {"date": "20260101T000000Z", "commit": "abc1234", "quick": False, "runtime_s": 3,
            "dd_count": 131072,
            "machine": {"kernel": "6.1", "cpus": 2, "cpu": "test cpu", "mem_mib": 1024,
                        "load_start": [4.0, 4.0, 4.0], "load_end": [5.0, 5.0, 5.0]},
            "stores": [{"kind": "tmpfs", "what": "file on tmpfs", "fs": "tmpfs"}],
            "results": res,
            "variants": [rec("xbd-queue persistent", "read4k-qd64-j1", 95000)],
            "callgrind": {"nbdkit": {"ir_per_req": 1871.0, "requests": [500, 2500]},
                          "xbd-backend": {"error": "valgrind deadlock"}},
            "pending": [{"contender": "xbd-fio", "why": "not in this tree"}]}


def test_ratios_take_xbd_over_host_and_best_nbd():
    row = report.index(synthetic()["results"])[("tmpfs", "read4k-qd64-j1")]
    name, rh, rn = report.ratios(row)
    assert name == "xbd-queue"
    assert rh == pytest.approx(0.9)
    assert rn == pytest.approx(4.5)                     # best NBD is nbdkit's 20k
    row2 = report.index(synthetic()["results"])[("tmpfs", "read4k-qd64-j2")]
    assert report.ratios(row2) == (None, None, None)    # no xbd figure


def test_markdown_table_goals_and_plots(tmp_path):
    res = synthetic()
    path = report.write(res, str(tmp_path))
    text = open(path).read()
    assert "| read4k-qd64-j1 | 100.0k | 10.0k | 20.0k | 90.0k | 0.90 | 4.50 |" in text
    assert "| seqread1m-qd16 | 1000 MB/s | – | 80 MB/s | – | – | – |" in text
    backend_only = "yes (backend only: no frontend, no fio in the xbd path)"
    assert ("| 4k randread QD64: xbd ≥ 2.0 × best NBD | xbd-queue | 4.50 | "
            + backend_only + " |") in text
    assert ("| 4k randread QD64, 1 job, 1 queue: xbd ≥ 0.80 × host | xbd-queue | 0.90 | "
            + backend_only + " |") in text
    assert "| 1M seq read QD16: xbd ≥ 0.90 × host | – | – | not measurable yet |" in text
    assert "| nbdkit | 1871 |" in text and "valgrind deadlock" in text
    assert "xbd-queue persistent" in text and "**xbd-fio**" in text
    # CPU s/GB: (1 + 1) s over 2 * 409.6 MB for the 100k IOPS host run.
    assert f"{2.0 / (100000 * 4096 * 2 / 1e9):.1f}" in text
    for png in ("iops-by-qd.png", "mbps-by-bs.png", "scaling.png"):
        with open(tmp_path / png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in text


def test_the_seeds_dd_row_is_in_mb_per_s(tmp_path):
    res = synthetic()
    res["results"] += [rec("host", "seeddd", 100000, 900.0),
                       rec("loop-dev", "seeddd", 50000, 400.0)]
    text = open(report.write(res, str(tmp_path))).read()
    assert "| seeddd | 900 MB/s | – | – | – | 400 MB/s | – | – |" in text


def test_quick_results_go_to_their_own_folder(tmp_path):
    res = dict(synthetic(), quick=True)
    path = report.write(res, str(tmp_path))
    assert path == str(tmp_path / "quick" / "README.md")
    assert "(quick)" in open(path).read()


def test_pending_xbd_contenders_are_always_named(tmp_path):
    import suite
    names = [p["contender"] for p in suite.pending(str(tmp_path))]
    assert names == ["xbd-fio", "xbd-fuse"]
    assert suite.pending(str(tmp_path))[1]["why"].startswith("no xbd-blkfront FUSE file")
    (tmp_path / "frontend" / "fio").mkdir(parents=True)
    left = suite.pending(str(tmp_path))             # xbd-fio is a contender now
    assert [p["contender"] for p in left] == ["xbd-fuse"]
    (tmp_path / "frontend" / "blkfront").mkdir(parents=True)
    assert suite.pending(str(tmp_path)) == []       # and so is xbd-fuse


def test_main_set_drives_every_xbd_frontend(tmp_path):
    import contenders
    top = tmp_path / "top"
    (top / "frontend" / "fio").mkdir(parents=True)
    (top / "frontend" / "blkfront").mkdir(parents=True)
    names = [c.name for c in contenders.main_set("B", str(tmp_path), str(top))]
    assert names == ["host", "loop-dev", "qsd-nbd", "nbdkit", "xbd-fio", "xbd-fio-2q",
                     "xbd-fuse", "xbd-queue"]
    two_q = contenders.main_set("B", str(tmp_path), str(top))[5]
    assert two_q.queues == 2
    assert two_q.supports(workloads.by_name("read4k-qd64-j2"))
    assert not two_q.supports(workloads.by_name("read4k-qd64-j1"))
    labels = [v.name for v in contenders.variants("B", str(tmp_path))]
    assert {"xbd-fio order0", "xbd-fio order4", "xbd-fio copy (no persistent)",
            "xbd-fio map (no persistent)"} <= set(labels)


def test_the_seeds_dd_runs_where_dd_can_write(tmp_path):
    """The seed's dd (buffered writes + sync) goes to the host file, a
    loop device over it and the FUSE file; nothing else claims it."""
    import contenders
    from stores import Store
    top = tmp_path / "top"
    (top / "frontend" / "fio").mkdir(parents=True)
    (top / "frontend" / "blkfront").mkdir(parents=True)
    seed = workloads.by_name("seeddd")
    assert seed["seed"] and not seed["dd"]
    store = Store("tmpfs")
    got = []
    for c in contenders.main_set("B", str(tmp_path), str(top)):
        c.store = store
        if c.supports(seed):
            got.append(c.name)
    assert got == ["host", "loop-dev", "xbd-fuse"]
    loop = contenders.LoopDev("B", str(tmp_path))
    loop.store = Store("loop")
    assert not loop.supports(seed)          # no loop device over a loop device
    assert not loop.supports(workloads.by_name("read4k-qd64-j1"))


def test_notifications_per_request_from_backend_statistics():
    import contenders
    a = {"rd_req": 1000, "wr_req": 0, "evt_in": 10, "evt_out": 12}
    b = {"rd_req": 41000, "wr_req": 9000, "evt_in": 510, "evt_out": 1012}
    got = contenders.evt_per_req(a, b)
    assert got["evt_per_req"] == pytest.approx(1500 / 49000)
    assert got["evt_requests"] == 49000 and got["evt_in"] == 500 and got["evt_out"] == 1000
    assert contenders.evt_per_req({}, b) is None        # not connected at a sample
    assert contenders.evt_per_req(a, a)["evt_per_req"] is None


def test_scaling_from_paired_runs(tmp_path):
    """xbd-fio-2q's alternating 1/2-queue runs decide the ratio, not
    xbd-fio's 2-job run made minutes earlier on another machine."""
    res = synthetic()
    two = dict(rec("xbd-fio-2q", "read4k-qd64-j2", 190000),
               paired_1q_iops=[100000, 120000], paired_2q_iops=[180000, 190000],
               paired_scaling=370000 / 220000)
    res["results"] += [rec("xbd-fio", "read4k-qd64-j2", 40000), two]
    text = open(report.write(res, str(tmp_path))).read()
    assert "| tmpfs | read4k-qd64-j2 | 110.0k | 185.0k | 1.68 |" in text
    assert ("| 2 jobs on 2 queues ≥ 1.5 × 2 jobs on 1 queue (4k randread QD64) | "
            "xbd-fio-2q, paired 1/2-queue runs | 1.68 | yes |") in text


def test_paired_runs_alternate_queue_counts():
    """XbdFio2Q runs 1 queue then 2 queues, PAIRS times, and measures the
    last 2-queue run through the contender's run() (CPU, notifications)."""
    import contenders
    c = contenders.XbdFio2Q("B", "W")
    seen, measured = [], []

    def fake_run(w, runtime):
        seen.append(c.queues)
        return {"iops": 1000.0 * c.queues}
    c._run = fake_run
    orig = contenders.XbdFio.run
    contenders.XbdFio.run = lambda self, w, rt: measured.append(self.queues) or fake_run(w, rt)
    try:
        fig = c.run({"jobs": 2}, 1)
    finally:
        contenders.XbdFio.run = orig
    assert seen == [1, 2] * c.PAIRS
    assert measured == [2]
    assert fig["paired_1q_iops"] == [1000.0] * c.PAIRS
    assert fig["paired_scaling"] == 2.0


def test_goals_scaling_and_notifications(tmp_path):
    res = synthetic()
    fio1 = dict(rec("xbd-fio", "read4k-qd64-j1", 85000), evt_per_req=0.032,
                evt_requests=100000, evt_in=1600, evt_out=1600)
    res["results"] += [fio1, rec("xbd-fio", "read4k-qd64-j2", 100000),
                       rec("xbd-fio-2q", "read4k-qd64-j2", 170000)]
    text = open(report.write(res, str(tmp_path))).read()
    assert ("| 2 jobs on 2 queues ≥ 1.5 × 2 jobs on 1 queue (4k randread QD64) | "
            "xbd-fio-2q / xbd-fio | 1.70 | yes |") in text
    assert ("| < 0.1 event-channel notifications per request at QD64 | xbd-fio | 0.03 | "
            "yes |") in text
    assert "| tmpfs | read4k-qd64-j2 | 100.0k | 170.0k | 1.70 |" in text
    assert "| tmpfs | xbd-fio | read4k-qd64-j1 | 100000 | 1600 | 1600 | 0.032 |" in text
    # the xbd figure of the ratios is the full path now, not the backend alone
    assert "| 4k randread QD64, 1 job, 1 queue: xbd ≥ 0.80 × host | xbd-fio | 0.85 | yes |" \
        in text
    fio1["evt_per_req"] = 0.5
    text = open(report.write(res, str(tmp_path))).read()
    assert "| < 0.1 event-channel notifications per request at QD64 | xbd-fio | 0.50 | no |" \
        in text


# --- the generated blocks of README.md and Documentation/performance.md ----

def headline_result():
    """A full suite result with every contender of the headline table."""
    res = synthetic()
    res["date"], res["commit"], res["dirty"] = "20261202T081500Z", "f00ba47", True
    res["format"] = 2
    res["results"] = [r for r in res["results"] if r["contender"] != "xbd-queue"]
    us = {"host": 3.0, "xbd-fio": 6.0, "nbdkit": 9.0, "xbd-fuse": 12.0}
    for wl, key, host, nbd, eng, fuse in (
            ("read4k-qd64-j1", "iops", 200000, 50000, 160000, 80000),
            ("write4k-qd64-j1", "iops", 180000, 40000, 150000, 60000),
            ("read4k-qd1-j1", "iops", 30000, 15000, 12000, 10000),
            ("seqwrite1m-qd16", "mbps", 5000, 2000, 4000, 2500)):
        for name, v in (("host", host), ("nbdkit", nbd), ("xbd-fio", eng),
                        ("xbd-fuse", fuse)):
            r = rec(name, wl, v if key == "iops" else v * 1e6 / (1 << 20),
                    v if key == "mbps" else None)
            r["machine_us_per_io"] = us[name]
            res["results"] = [x for x in res["results"]
                              if (x["contender"], x["workload"]) != (name, wl)] + [r]
    two = dict(rec("xbd-fio-2q", "read4k-qd64-j2", 140000),
               paired_1q_iops=[70000, 80000], paired_2q_iops=[130000, 150000],
               paired_scaling=280000 / 150000)
    res["results"] += [two, rec("xbd-fio", "seqread1m-qd16", 1000, 1200.0),
                       rec("host", "seeddd", 100000, 900.0),
                       rec("loop-dev", "seeddd", 50000, 400.0),
                       rec("xbd-fuse", "seeddd", 25000, 100.0)]
    return res


def storage_result():
    return {"suite": "xbd storage drivers", "format": 2, "date": "20261202T082000Z",
            "commit": "f00ba47",
            "dirty": False, "quick": False, "seconds": 5,
            "machine": {"kernel": "6.1", "cpus": 2, "cpu": "test cpu", "mem_mib": 1024,
                        "load_start": [0.5, 0.5, 0.5], "load_end": [0.7, 0.6, 0.5]},
            "results": [{"store": "nbd", "workload": "4k randread QD32", "fio_engine": "nbd",
                         "fio_iops": 100000, "xbd_iops": 95000},
                        {"store": "qcow2", "workload": "4k randread QD32",
                         "fio_engine": "nbd", "fio_iops": 100000, "xbd_iops": 50000},
                        # rounds: the median of the rounds' ratios is the
                        # figure, not the ratio of the median IOPS (0.80)
                        {"store": "qcow2", "workload": "4k randwrite QD32",
                         "fio_engine": "nbd", "fio_iops": 50000, "xbd_iops": 40000,
                         "ratio": 0.91, "ratio_min": 0.7, "ratio_max": 1.1,
                         "cpu_us_per_io": {"fio": {"fio": 10.0, "qemu-storage-daemon": 20.0},
                                           "xbd": {"fio": 5.0, "xbd-blkback": 12.0,
                                                   "qemu-storage-daemon": 21.0}},
                         "rounds": [{}, {}, {}]}],
            "skipped": [{"store": "rbd", "why": "Ceph is not installed"}]}


def limits_result():
    return {"suite": "xbd limiter cost", "format": 2, "date": "20261202T082500Z",
            "commit": "f00ba47",
            "dirty": False, "quick": False, "rounds": 5, "seconds": 3,
            "machine": storage_result()["machine"],
            "modes": {"off": {"median": 250000.0, "ir": 1747.0},
                      "idle": {"median": 249000.0, "ir": 1748.0},
                      "high": {"median": 240000.0, "ir": 1976.0}}}


DOC = """# a page

Hand-written text before; an example of a block is text, not a block:

    <!-- bench:begin NAME -->
    <!-- bench:end NAME -->

<!-- bench:begin headline -->
| an | old | 155.5k | table |
<!-- bench:end headline -->
Text between stays byte for byte: 1.24 × host (history, 2026-11-30).
<!-- bench:begin goals -->
<!-- bench:end goals -->
<!-- bench:begin storage -->
old storage
<!-- bench:end storage -->
<!-- bench:begin limits -->
<!-- bench:end limits -->
The end.
"""

README = """# readme
intro
<!-- bench:begin headline -->
stale
<!-- bench:end headline -->
mid
<!-- bench:begin storage-line -->
<!-- bench:end storage-line -->
tail
"""


def outside(text):
    """text with the inside of every block taken out."""
    import re
    return re.sub(r"(<!-- bench:begin (\S+) -->).*?(<!-- bench:end \2 -->)", r"\1\3",
                  text, flags=re.S)


def test_blocks_are_replaced_and_the_rest_left_alone():
    import docs
    b = docs.bodies((headline_result(), "/x/run-20261202T081500Z.json"),
                    (storage_result(), "/x/storage-20261202T082000Z.json"),
                    (limits_result(), "/x/limits-20261202T082500Z.json"))
    out = docs.rewrite(DOC, b[docs.PERF], "perf")
    assert outside(out) == outside(DOC)
    assert "155.5k" not in out and "old storage" not in out
    assert out.startswith("# a page\n\nHand-written text before; an example")
    assert "\n    <!-- bench:begin NAME -->\n    <!-- bench:end NAME -->\n" in out
    assert "Text between stays byte for byte: 1.24 × host (history, 2026-11-30).\n" in out
    # the headline: engine / host and / best NBD; 2 jobs on 2 queues (paired mean)
    assert ("| 4k randread QD64 | 200.0k IOPS | 50.0k (nbdkit) | 160.0k | 80.0k | "
            "0.80 | 3.20 |") in out
    assert "| 4k randread QD64, 2 jobs | 150.0k IOPS | 30.0k (nbdkit) | 140.0k (2 queues) |" \
        in out
    assert "| 1M seq write QD16 | 5000 MB/s | 2000 MB/s (nbdkit) | 4000 MB/s | 2500 MB/s |" \
        in out
    assert "| randread | 3.00 µs | 9.00 µs | 6.00 µs | 12.00 µs | 2.00 |" in out
    assert "through xbd's guest disk file (FUSE) 100 MB/s, to a loop device over the " \
        "file 400 MB/s (guest / loop device 0.25)" in out
    # goals as measured ratios with met / not met
    assert "| 4k randread QD64, 1 job, 1 queue, fio engine ≥ 1.0 × host fio | 0.80 | " \
        "not met |" in out
    assert "| 4k randread QD64 ≥ 3 × the best NBD server | 3.20 | met |" in out
    assert "| machine CPU per 4k I/O at QD64 (randread) ≤ 1.5 × host | 2.00 | not met |" \
        in out
    assert "| 4k randread QD64, 2 jobs on 2 queues ≥ 0.8 × host fio with 2 jobs | 0.93 | " \
        "met |" in out
    # storage and limits
    assert "| nbd | 4k randread QD32 | 100.0k IOPS (nbd) | 95.0k | 0.95 | 1 | – | – | met |" in out
    assert "| qcow2 | 4k randread QD32 | 100.0k IOPS (nbd) | 50.0k | 0.50 | 1 | – | – | " \
        "not met |" in out
    assert "| qcow2 | 4k randwrite QD32 | 50.0k IOPS (nbd) | 40.0k | 0.91 | 3: 0.70–1.10 | " \
        "fio 10 + qemu-storage-daemon 20 | fio 5 + xbd-blkback 12 + qemu-storage-daemon 21 | " \
        "met |" in out
    assert "Not measured: **rbd** — Ceph is not installed." in out
    assert "xbd fio engine / host fio at 4k randread QD64 0.80 (2026-12-02 08:15 UTC)" in out
    assert "| a vbd's limiter, no limit set | 249000 | 0.996 | 1748 | 1.0006 |" in out
    assert "instructions met, rate met" in out


def test_every_block_names_machine_date_commit_and_load():
    import docs
    b = docs.bodies((headline_result(), "/x/run-20261202T081500Z.json"),
                    (storage_result(), "/x/storage-20261202T082000Z.json"),
                    (limits_result(), "/x/limits-20261202T082500Z.json"))
    for name, body in b[docs.PERF].items():
        assert "2 × test cpu, Linux 6.1" in body, name
        assert "commit f00ba47" in body, name
        assert "load average" in body, name
    assert "2026-12-02 08:15 UTC" in b[docs.PERF]["headline"]
    assert "commit f00ba47 (with uncommitted changes)" in b[docs.PERF]["headline"]
    assert "2026-12-02 08:20 UTC" in b[docs.PERF]["storage"]
    assert "load average 0.5 at the start, 0.7 at the end" in b[docs.PERF]["storage"]
    line = b[docs.README]["storage-line"]
    assert "nbd 0.95" in line and "qcow2 0.50–0.91" in line and "2026-12-02 08:20 UTC" in line
    assert "2 × test cpu, Linux 6.1, commit f00ba47, load 0.5 → 0.7" in line
    assert "\n" not in line


@pytest.mark.parametrize("text,msg", [
    (DOC.replace("<!-- bench:begin limits -->\n<!-- bench:end limits -->\n", ""),
     "no bench block limits"),
    (DOC.replace("<!-- bench:end storage -->\n", ""), "begins inside 'storage'"),
    (DOC.replace("<!-- bench:end limits -->\n", ""), "has no '<!-- bench:end limits -->'"),
    (DOC.replace("<!-- bench:begin goals -->\n", ""), "without its"),
    (DOC + "<!-- bench:begin goals -->\n<!-- bench:end goals -->\n", "appears twice"),
    (DOC + "<!-- bench:begin qd2 -->\n<!-- bench:end qd2 -->\n", "qd2 is not generated"),
])
def test_bad_markers_are_a_clear_error(text, msg):
    import docs
    b = docs.bodies(None, None, None)
    with pytest.raises(docs.BlockError, match="perf.md: .*" + msg.replace("(", r"\(")
                       .replace(")", r"\)")):
        docs.rewrite(text, b[docs.PERF], "perf.md")


def write_tree(tmp_path, perf=DOC, readme=README):
    top = tmp_path / "top"
    (top / "Documentation").mkdir(parents=True)
    (top / "Documentation" / "performance.md").write_text(perf)
    (top / "README.md").write_text(readme)
    res = tmp_path / "results"
    (res / "quick").mkdir(parents=True)
    return top, res


def test_write_uses_the_newest_full_results_and_skips_quick_ones(tmp_path):
    import docs
    top, resdir = write_tree(tmp_path)
    old = dict(headline_result(), date="20261130T093319Z", commit="0ld0ld0")
    for name, r in (("run-20261130T093319Z.json", old),
                    ("run-20261202T081500Z.json", headline_result()),
                    # newer, but of the format before the blocks: history only
                    ("run-20261202T085000Z.json", dict(synthetic(), commit="f0rmat1")),
                    ("run-20261202T090000Z-quick.json", dict(headline_result(), quick=True,
                                                            commit="quick00")),
                    ("storage-20261202T082000Z.json", storage_result()),
                    ("limits-20261202T082500Z.json", limits_result())):
        (resdir / name).write_text(json.dumps(r))
    (resdir / "quick" / "run-20261202T100000Z-quick.json").write_text(
        json.dumps(dict(headline_result(), quick=True, commit="quick11")))
    assert docs.main(["docs.py", str(resdir), str(top)]) == 0
    perf = (top / "Documentation" / "performance.md").read_text()
    readme = (top / "README.md").read_text()
    assert outside(perf) == outside(DOC) and outside(readme) == outside(README)
    for text in (perf, readme):
        assert "commit f00ba47" in text
        for other in ("0ld0ld0", "quick00", "quick11", "f0rmat1"):
            assert other not in text
    assert "stale" not in readme and "run-20261202T081500Z.json" in readme
    # a second run over its own output changes nothing
    assert docs.main(["docs.py", str(resdir), str(top)]) == 0
    assert (top / "Documentation" / "performance.md").read_text() == perf


def test_a_bad_file_leaves_every_file_unwritten(tmp_path, capsys):
    import docs
    top, resdir = write_tree(tmp_path, readme=README.replace(
        "<!-- bench:end storage-line -->\n", ""))
    (resdir / "run-20261202T081500Z.json").write_text(json.dumps(headline_result()))
    assert docs.main(["docs.py", str(resdir), str(top)]) == 1
    assert "README.md: bench block 'storage-line' has no" in capsys.readouterr().err
    assert (top / "Documentation" / "performance.md").read_text() == DOC


def test_the_repository_documents_carry_every_block():
    """README.md and Documentation/performance.md have each block the
    generator writes, and nothing outside them looks like an old copy."""
    import docs
    top = os.path.join(os.path.dirname(__file__), "..", "..")
    b = docs.bodies(None, None, None)
    for rel, blocks in b.items():
        with open(os.path.join(top, rel)) as f:
            text = f.read()
        assert sorted(docs.blocks_in(text, rel)) == sorted(blocks), rel
        docs.rewrite(text, blocks, rel)


def test_quick_make_bench_does_not_rewrite_the_documents():
    """bench/run.sh calls the block writer only for a full run."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "run.sh")) as f:
        text = f.read()
    assert 'case "${BENCH_QUICK:-0}" in\n""|0)\n\t/usr/bin/python3 suite/docs.py' in text


def test_result_header_names_machine_commit_and_dirty_flag():
    import runinfo
    import shutil
    res = runinfo.finish(runinfo.header("t"))
    assert res["format"] == runinfo.FORMAT
    if shutil.which("git"):
        assert res["commit"] != "?" and res["dirty"] in (True, False)
    else:               # a fresh machine: the header says it cannot tell
        assert res["commit"] == "?" and res["dirty"] is None
    m = res["machine"]
    assert m["cpus"] >= 1 and m["cpu"] != "?" and m["kernel"]
    assert len(m["load_start"]) == 3 and len(m["load_end"]) == 3


def test_limits_bench_writes_a_result_the_block_reads(tmp_path):
    """bench/limits for real (one round of 1 s per mode, no callgrind):
    its JSON lands in BENCH_RESULTS and makes the limits block."""
    import subprocess
    import docs
    from conftest import BUILD
    prog = os.path.join(BUILD, "bench", "xbd-be-queue-bench")
    if not os.access(prog, os.X_OK):
        pytest.skip(f"{prog} not built (make be-queue-bench)")
    disk = tmp_path / "disk"
    with open(disk, "wb") as f:
        f.write(os.urandom(64 << 20))
    here = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "limits", "limits.py")
    env = dict(os.environ, BENCH_RESULTS=str(tmp_path / "res"), ROUNDS="1",
               SECONDS_PER_RUN="1", BENCH_NO_CALLGRIND="1", BENCH_QUICK="0")
    r = subprocess.run(["/usr/bin/python3", here, prog, str(disk)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    found = docs.newest(str(tmp_path / "res"), "limits-*.json")
    assert found, r.stdout
    res, _ = found
    assert set(res["modes"]) == {"off", "idle", "high"}
    assert all(m["median"] > 0 and len(m["runs"]) == 1 for m in res["modes"].values())
    text = docs.limits_text(*found)
    assert "| a vbd's limiter, no limit set |" in text and "commit " in text


def test_the_fuse_goal_is_set_against_the_floor_of_the_same_run():
    """The goals table says what the FUSE transport alone gives in the
    same run (the floor variant), over /dev/fuse and, when measured,
    over io_uring; a run without the floor says nothing of it."""
    import docs
    res = headline_result()                 # host 200k, xbd-fuse 80k at QD64
    assert "floor" not in docs.goals_table(res)
    res["variants"] = [rec("fuse floor (nothing behind it)", "read4k-qd64-j1", 100000)]
    text = docs.goals_table(res)
    assert "0.50 × host over /dev/fuse, xbd's FUSE file 0.80 of it" in text
    assert "not measured: the kernel does not offer it here" in text
    res["variants"] += [rec("fuse floor over io_uring", "read4k-qd64-j1", 120000),
                        rec("xbd-fuse over io_uring (--fuse-uring=on)", "read4k-qd64-j1",
                            90000)]
    text = docs.goals_table(res)
    assert "over io_uring the floor 0.60 × host, xbd's FUSE file 0.45 × host, 0.75 of its " \
        "floor." in text


def test_the_floor_variants_run_reads_only(tmp_path):
    import contenders
    floor = contenders.FuseFloor("B", str(tmp_path), "fuse floor (nothing behind it)")
    assert floor.supports(workloads.by_name("read4k-qd64-j1"))
    assert not floor.supports(workloads.by_name("write4k-qd64-j1"))
    assert not floor.supports(workloads.by_name("seeddd"))
    names = [v.name for v in contenders.variants("B", str(tmp_path))]
    assert "fuse floor (nothing behind it)" in names
    assert ("fuse floor over io_uring" in names) == contenders.fuse_uring_possible()
