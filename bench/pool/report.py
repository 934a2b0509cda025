#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Summarise xbd-pool-bench's CSV: the dd experiment's statistics with a
Welch t-test at 95%, the pressure experiment's counters, and a PNG plot
of pool pages over time for the squeeze on (red) and off (blue).

usage: report.py CSV PNG"""
import math
import statistics
import struct
import sys
import zlib


def betacf(a, b, x):
    """Continued fraction of the incomplete beta function (Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def ibeta(a, b, x):
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1 - x) / b


def welch(x, y):
    """t, degrees of freedom and the two-sided p-value."""
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    if vx + vy == 0:
        return 0.0, float(len(x) + len(y) - 2), 1.0
    t = (statistics.mean(x) - statistics.mean(y)) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return t, df, ibeta(df / 2, 0.5, df / (df + t * t))


def png(path, series, w=800, h=400):
    """Line plot of [(colour, [(x, y)])] with axes; no text."""
    img = [[(255, 255, 255)] * w for _ in range(h)]
    pts = [p for _, s in series for p in s]
    xmax = max((p[0] for p in pts), default=1) or 1
    ymax = max((p[1] for p in pts), default=1) or 1
    m = 30

    def plot(x, y, c):
        if 0 <= x < w and 0 <= y < h:
            img[y][x] = c

    def line(x0, y0, x1, y1, c):
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for i in range(n + 1):
            plot(round(x0 + (x1 - x0) * i / n), round(y0 + (y1 - y0) * i / n), c)

    line(m, h - m, w - m, h - m, (0, 0, 0))
    line(m, m, m, h - m, (0, 0, 0))
    for i in range(1, 11):     # ticks: tenths of the axes
        line(m + (w - 2 * m) * i // 10, h - m, m + (w - 2 * m) * i // 10, h - m + 5, (0, 0, 0))
        line(m - 5, h - m - (h - 2 * m) * i // 10, m, h - m - (h - 2 * m) * i // 10, (0, 0, 0))
    for colour, s in series:
        xy = [(m + round(x / xmax * (w - 2 * m)), h - m - round(y / ymax * (h - 2 * m)))
              for x, y in s]
        for a, b in zip(xy, xy[1:]):
            line(*a, *b, colour)
    raw = b"".join(b"\0" + bytes(v for px in row for v in px) for row in img)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    return xmax, ymax


def main(csv, out_png):
    dd, pr = {}, {"on": [], "off": []}
    for line in open(csv):
        f = line.strip().split(",")
        if f[0] == "dd":
            dd.setdefault(int(f[1]), []).append(float(f[3]))
        elif f[0] == "pressure":
            pr[f[1]].append([int(v) for v in f[2:]])
    if dd:
        print("(1) dd bs=4k, QD 1, sequential writes, MB/s per run")
        print(f"{'max_buffer_pages':>16} {'runs':>4} {'median':>8} {'mean':>8} {'stddev':>8}")
        for pages in sorted(dd):
            v = dd[pages]
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            print(f"{pages:>16} {len(v):>4} {statistics.median(v):>8.1f} "
                  f"{statistics.mean(v):>8.1f} {sd:>8.1f}")
        if len(dd) == 2 and all(len(v) > 1 for v in dd.values()):
            t, df, p = welch(*dd.values())
            verdict = "a significant" if p < 0.05 else "no significant"
            print(f"Welch t = {t:.2f}, df = {df:.1f}, p = {p:.3f}: {verdict} difference at 95%")
    if pr["on"] or pr["off"]:
        print("(2) vbds under a memory-limited cgroup v1, squeeze on (10 ms) vs off (0)")
        print(f"{'squeeze':>7} {'samples':>7} {'pool mean':>9} {'pool max':>8} "
              f"{'RSS mean kB':>11} {'majflt':>6} {'pswpin':>6} {'pswpout':>7} {'reports':>7}")
        for name, rows in pr.items():
            if not rows:
                continue
            pool = [r[1] for r in rows]
            rss = [r[2] for r in rows]
            print(f"{name:>7} {len(rows):>7} {statistics.mean(pool):>9.0f} {max(pool):>8} "
                  f"{statistics.mean(rss):>11.0f} {rows[-1][3] - rows[0][3]:>6} "
                  f"{rows[-1][4] - rows[0][4]:>6} {rows[-1][5] - rows[0][5]:>7} "
                  f"{rows[-1][6] - rows[0][6]:>7}")
        xmax, ymax = png(out_png, [((220, 0, 0), [(r[0], r[1]) for r in pr["on"]]),
                                   ((0, 0, 220), [(r[0], r[1]) for r in pr["off"]])])
        print(f"plot: {out_png} (pool pages free over time; red: squeeze on, blue: off; "
              f"x to {xmax} ms, y to {ymax} pages, ticks at tenths)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
