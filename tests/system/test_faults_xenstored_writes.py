# SPDX-License-Identifier: MIT
"""XSA-206: a domain rewriting nodes as fast as it can must not starve the
other clients of xbd-xenstored (their transactions failing with EAGAIN
again and again).  Writes of an unprivileged domain are paced per domain
(quotas write-rate, 200/s, and write-burst, 10, as cxenstored); they are
delayed, never refused, and other domains and dom0 go on at full speed."""
import threading
import time

from xenstored_fixtures import XsConn, XsError, xenstored  # noqa: F401  (fixture)

FLOODER, OTHER = 5, 6


def give(xs, domid):
    xs.call("INTRODUCE", str(domid), "0", "1")
    path = f"/local/domain/{domid}/data"
    xs.write(path, "0")
    xs.call("SET_PERMS", path, f"n{domid}")
    return path


class Flood(threading.Thread):
    """Domain FLOODER writes its node back to back until stopped."""

    def __init__(self, xenstored, path):
        super().__init__(daemon=True)
        self.c = XsConn(xenstored.dom_sock(FLOODER))
        self.path, self.writes, self.stop = path, 0, False
        self.errors = []

    def run(self):
        try:
            while not self.stop:
                self.c.write(self.path, str(self.writes))
                self.writes += 1
        except Exception as e:  # reported by the test
            self.errors.append(repr(e))


def transaction(xs, path, i):
    """Read the flooded node and write ours in one transaction; the
    number of attempts it took to commit."""
    for attempt in range(1, 1000):
        tx = xs.start()
        xs.read(path, tx=tx)
        xs.write(f"/tool/fair{i}", str(i), tx=tx)
        try:
            xs.end(tx)
            return attempt
        except XsError as e:
            assert e.err == "EAGAIN", e.err
    raise AssertionError("transaction never committed")


def test_write_flood_cannot_starve_transactions(xenstored):
    xs = xenstored.conn()
    path = give(xs, FLOODER)
    other = give(xs, OTHER)
    flood = Flood(xenstored, path)
    t0 = time.monotonic()
    flood.start()
    try:
        time.sleep(0.3)
        attempts = [transaction(xs, path, i) for i in range(30)]
        # another domain's writes are not held back by the flooder's pacing
        oc = XsConn(xenstored.dom_sock(OTHER))
        t1 = time.monotonic()
        for i in range(10):
            oc.write(other, str(i))
        other_s = time.monotonic() - t1
        oc.close()
    finally:
        flood.stop = True
        flood.join(10)
    secs = time.monotonic() - t0
    rate = flood.writes / secs
    print(f"flooder: {flood.writes} writes in {secs:.2f} s ({rate:.0f}/s); "
          f"30 dom0 transactions: attempts max {max(attempts)}, mean "
          f"{sum(attempts) / len(attempts):.2f}; 10 writes of another domain "
          f"in {other_s * 1000:.0f} ms")
    assert not flood.errors, flood.errors          # delayed, never refused
    assert flood.writes <= 200 * secs + 10 + 5, rate
    assert flood.writes >= 50 * secs, rate        # paced, not stopped
    assert max(attempts) <= 10, attempts
    assert other_s < 1.0
    xs.close()


def test_write_rate_is_a_quota(xenstored):
    """Shown and set like every quota (CONTROL quota); 0 turns pacing off."""
    xs = xenstored.conn()
    report = xs.call("CONTROL", "quota").decode()
    assert "write-rate" in report and "200" in report.split("write-rate")[1].split("\n")[0]
    assert "write-burst" in report
    xs.call("CONTROL", "quota", "set", "write-rate", "0")
    path = give(xs, FLOODER)
    c = XsConn(xenstored.dom_sock(FLOODER))
    t0 = time.monotonic()
    for i in range(400):
        c.write(path, str(i))
    unpaced = time.monotonic() - t0
    xs.call("CONTROL", "quota", "set", "write-rate", "200")
    t0 = time.monotonic()
    for i in range(110):
        c.write(path, str(i))
    paced = time.monotonic() - t0
    print(f"400 writes unpaced in {unpaced:.2f} s; 110 paced in {paced:.2f} s")
    assert paced >= 0.45                       # 10 at once, then 100 at 200/s
    c.close()
    xs.close()
