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
    assert names == ["host", "qsd-nbd", "nbdkit", "xbd-fio", "xbd-fio-2q", "xbd-fuse",
                     "xbd-queue"]
    two_q = contenders.main_set("B", str(tmp_path), str(top))[4]
    assert two_q.queues == 2
    assert two_q.supports(workloads.by_name("read4k-qd64-j2"))
    assert not two_q.supports(workloads.by_name("read4k-qd64-j1"))
    labels = [v.name for v in contenders.variants("B", str(tmp_path))]
    assert {"xbd-fio order0", "xbd-fio order4", "xbd-fio copy (no persistent)",
            "xbd-fio map (no persistent)"} <= set(labels)


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
