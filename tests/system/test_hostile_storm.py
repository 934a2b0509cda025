# SPDX-License-Identifier: MIT
"""Event-channel storm (XSA-332/391): a frontend notifying in a tight loop
must not starve another vbd or the xenstore handling, and the backend's
CPU use is measured (reported; only a generous bound is asserted)."""
import time

from hostile_fixtures import host  # noqa: F401  (fixture)

STORM_S = 2


def test_notify_storm_starves_nobody(host):
    bad = host.guest("hostile")
    good = host.guest("good")
    assert good.front("latency", 4)["roundtrips"] == "4"
    quiet = good.front("latency", 50)
    storm = bad.spawn("storm", STORM_S)
    try:
        assert storm.stdout.readline().strip() == "connected 1"
        t0, cpu0 = time.monotonic(), host.proc().cpu_s
        busy = good.front("latency", 50)
        xs_worst = 0.0
        for i in range(50):
            t = time.monotonic()
            host.m.write(f"/tool/storm-probe/{i}", "x")
            assert host.m.read(f"/tool/storm-probe/{i}") == "x"
            xs_worst = max(xs_worst, time.monotonic() - t)
        wall, cpu = time.monotonic() - t0, host.proc().cpu_s - cpu0
        out, err = storm.communicate(timeout=STORM_S + 30)
    finally:
        if storm.poll() is None:
            storm.kill()
            storm.wait()
    assert storm.returncode == 0, err
    notifies = int(out.split("notifies ")[1].split()[0])
    print(f"storm: {notifies} notifies in {STORM_S}s; well-behaved guest "
          f"worst {quiet['worst_us']}us quiet, {busy['worst_us']}us under storm "
          f"(mean {quiet['mean_us']} / {busy['mean_us']}us); xenstore worst "
          f"{xs_worst * 1000:.1f}ms; backend cpu {cpu:.2f}s over {wall:.2f}s")
    assert notifies > 1000
    # generous bounds only (a loaded 2-core machine has seen 1.1 s worst
    # cases from scheduling alone): nothing starves for five seconds
    assert int(busy["worst_us"]) < 5_000_000
    assert xs_worst < 5.0
    # two cores: the backend can never use more than both
    assert cpu <= 2.2 * wall + 0.5
    assert good.front("latency", 4)["roundtrips"] == "4"
    assert bad.be_state() == "4"
