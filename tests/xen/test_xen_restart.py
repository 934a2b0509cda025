# SPDX-License-Identifier: MIT
"""Phase S (guest/phase-s.sh): SIGKILL + restart of xbd-blkback the way the
Linux xen-blkfront lives through it (issue 20).  Each round has two
readers and two writers in a 4-vCPU domU and SKILLS kills, each when the
backend's statistics/inflight is above 0; after each restart the backend
must answer new requests within SDEADLINE s (a Linux guest whose
notification was lost would hang there: blkfront has no request
timeout), and afterwards no sector of the image may differ from what was
written and read.  Then a kill while the frontend is Initialised, one
while it is Closing, and xl destroy under I/O.

Run alone: tests/xen/run.sh --out build/xen/run-s --phases S
[--set SKILLS=3 --set SROUNDS=s1], then
XBD_XEN_RUN=build/xen/run-s pytest tests/xen -k restart_phase.
"""
import pytest

from test_xen import kv

ROUNDS = {"s1": ("4", "1"), "s2": ("4", "0"), "s3": ("1", "1"), "s4": ("1", "0")}


def s_kv(xen, label, index=-1):
    return kv(xen.replies("S", label)[index].split())


def config(xen):
    if "S" not in xen.results:
        pytest.skip("phase S did not run (run.sh --phases without S)")
    return s_kv(xen, "config")


def rounds(xen):
    return config(xen)["rounds"].split(",")


@pytest.mark.parametrize("r", sorted(ROUNDS))
def test_restart_phase_kills_under_readers_and_writers(xen, r):
    if r not in rounds(xen):
        pytest.skip(f"round {r} not in SROUNDS")
    queues, persistent = ROUNDS[r]
    kills = int(config(xen)["kills"])
    assert s_kv(xen, f"{r}.stress.started") == {"readers": "2", "writers": "2"}
    assert s_kv(xen, f"{r}.stress.dev")["queues"] == queues
    for k in range(1, kills + 1):
        line = s_kv(xen, f"{r}.kill{k}")
        assert line["ok"] == "1", f"{r}: kill {k} of {kills}: {line} (no progress after the restart)"
        assert int(line["inflight"]) > 0, line
    assert s_kv(xen, f"{r}.kills") == {"done": str(kills), "ok": "1"}
    assert xen.reply("S", f"{r}.stop.ack") == ["0"]
    for w in ("r0", "r1", "w0", "w1"):
        got = s_kv(xen, f"{r}.stop.{w}")
        assert int(got["passes"]) > 0 and got["bad"] == "0", (r, w, got)
    fe = s_kv(xen, f"{r}.fe")
    assert fe["state"] == "4" and fe["ring-page-order"] == "4"
    assert fe["multi-queue-num-queues"] == (queues if queues != "1" else "-")
    assert fe["feature-persistent"] == persistent
    assert xen.reply("S", f"S-{r}-detach.ack") == ["0"]
    bad = s_kv(xen, f"{r}.sectors")
    assert bad["bad"] == "0", f"{r}: {bad['bad']} of {bad['total']} sectors differ"


def test_restart_phase_kill_while_frontend_initialised(xen):
    config(xen)
    frozen = s_kv(xen, "init.frozen")
    # the kill landed between the backend's InitWait and its Connected
    assert frozen == {"be": "2", "fe": "3"}, frozen
    assert s_kv(xen, "init.attach") == {"rc": "0"}
    assert s_kv(xen, "init.connected") == {"be": "4", "fe": "4"}
    md5, expected = xen.reply("S", "init.file")[-2:]   # dom0's, of what it read
    assert "expected=" + md5 == expected
    assert s_kv(xen, "init.read1")["md5"] == md5


def test_restart_phase_kill_while_frontend_closing(xen):
    config(xen)
    assert s_kv(xen, "close.frozen")["fe"] in ("5", "6")
    detach = s_kv(xen, "close.detach")
    # the restarted backend followed the frontend to Closed (or libxl had
    # removed the directory already)
    assert detach["be"] in ("6", "-"), detach
    # libxl's own 10 s for that may run out under TCG; a second detach
    # then completes it
    if detach["rc"] != "0":
        assert s_kv(xen, "close.detach2") == {"rc": "0"}
    assert xen.reply("S", "close.ack") == ["0"], "the disk did not leave the domU"
    assert xen.reply("S", "close.nodes") == ["gone"]


def test_restart_phase_xl_destroy_under_io(xen):
    config(xen)
    assert int(xen.reply("S", "destroy.inflight")[0]) > 0
    assert xen.time("S-destroy")[1] == 0
    held = s_kv(xen, "destroy.held")
    assert held.pop("alive") == "1", "xbd-blkback died"
    assert held == s_kv(xen, "baseline"), "xbd-blkback still holds fds or mappings"
    assert xen.reply("S", "destroy.sysfs-dev") == ["gone"]
    assert xen.reply("S", "destroy.nodes") == ["gone"]
