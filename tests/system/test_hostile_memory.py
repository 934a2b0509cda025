# SPDX-License-Identifier: MIT
"""Issue 18, item 1 (the XSA-392 class): a guest cannot make xbd-blkback
spend memory without bound.

A hostile frontend (tests/helpers/hostile_front.c, scenario `bloat`)
negotiates persistent grants and keeps its ring full of 256-segment
(1 MiB) indirect reads on more grants than the backend's persistent pool
holds, so that every request is bounce-copied.  Without a budget each
one took 256 fresh anonymous pages: the backend's anonymous memory grew
by the ring's depth times 1 MiB (530 MB with an order-4 ring).  With
max_queue_pages the queue holds at most that many pages; requests that
do not fit wait on the ring, and every one of them completes.
"""
import time

from hostile_fixtures import Host

BUDGET_PAGES = 1024                 # the smallest budget the tunable takes
# What the backend allocates besides the budget while it serves (ASan's
# allocator and quarantine, the slot tables, thread stacks).
SLACK_KB = 6 << 10


def peak_anon(h, proc, poll_s=0.01):
    """Largest RssAnon of the backend while proc runs."""
    peak = 0
    while proc.poll() is None:
        peak = max(peak, h.proc().rss_anon_kb)
        time.sleep(poll_s)
    return peak


def test_bounce_attack_stays_under_budget(daemons, rundir, tmp_path):
    h = Host(daemons, rundir, tmp_path,
             extra=["--max_persistent_grants=32",
                    f"--max_queue_pages={BUDGET_PAGES}"])
    try:
        g = h.guest("hog")
        base = h.proc().rss_anon_kb
        p = g.spawn("bloat", 4)
        peak = peak_anon(h, p)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, f"bloat failed:\n{out}\n{err}"
        res = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        assert int(res["ok"]) == int(res["requests"]) > 32, res
        assert res["error"] == "0", res
        growth = peak - base
        print(f"RssAnon {base} kB -> peak {peak} kB (+{growth} kB) over "
              f"{res['requests']} requests; budget {BUDGET_PAGES * 4} kB")
        assert growth < BUDGET_PAGES * 4 + SLACK_KB, \
            f"anonymous memory grew by {growth} kB, budget {BUDGET_PAGES * 4} kB"
    finally:
        h.m.close()
