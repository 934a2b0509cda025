# SPDX-License-Identifier: MIT
"""The data-integrity matrix: libxbdfront (xbdfront-io) against the real
xbd-blkback over a covering design of the data-path dimensions rather than
their full product (which make check could not afford):

  queues 1, 2, 4      four rows each
  ring-page-order     0..5, two rows each (12 of the 18 pairs with queues)
  persistent grants   on / off (refused by the frontend or the backend)
  indirect segments   on / off (refused by the frontend or the backend)
  ABI                 x86_64-abi / x86_32-abi
  storage             a file (512), a loop device with 512-byte and one
                      with 4096-byte logical blocks (`losetup -b 4096`)

Each row checks what was negotiated, writes patterns at random offsets
and reads them back byte for byte (xbdfront-io verify), samples the
backing file for the same pattern, flushes (answered OKAY, not
EOPNOTSUPP: the library would report that) and discards a range that
then reads back as zeroes in the backing file while every other byte
stays as it was."""
import os
import random
import subprocess

import pytest

from conftest import binary
from frontend_fixtures import frontend, xbd
from xenstored_fixtures import xenstored, Xenstored  # noqa: F401

DISK = 8 << 20          # bytes per disk
VERIFY = 2 << 20        # bytes written (and read back) per row
WINDOW = 512 << 10     # discard length; offsets are multiples of it

# queues, order, persistent, indirect, abi, storage
#   persistent/indirect: "on", "fe" (frontend refuses), "be" (backend refuses)
#   storage: "file", "loop" (512-byte blocks), "loop4k"
ROWS = [
    (1, 0, "on", "fe", "x86_64", "file"),
    (1, 2, "be", "be", "x86_64", "loop"),
    (1, 4, "fe", "fe", "x86_64", "loop4k"),
    (1, 5, "on", "on", "x86_32", "loop"),
    (2, 0, "be", "on", "x86_32", "file"),
    (2, 1, "on", "be", "x86_64", "loop"),
    (2, 3, "on", "fe", "x86_32", "loop4k"),
    (2, 5, "be", "fe", "x86_64", "file"),
    (4, 1, "fe", "fe", "x86_32", "file"),
    (4, 2, "on", "on", "x86_32", "loop4k"),
    (4, 3, "be", "on", "x86_64", "loop"),
    (4, 4, "on", "be", "x86_32", "file"),
]


def row_id(row):
    q, order, pers, ind, abi, store = row
    return f"q{q}-o{order}-pers_{pers}-ind_{ind}-{abi}-{store}"


def test_rows_cover_every_value():
    """The design itself: each value of each dimension appears, and no
    queues x order pair twice."""
    cols = list(zip(*ROWS))
    assert set(cols[0]) == {1, 2, 4} and set(cols[1]) == set(range(6))
    assert len({(r[0], r[1]) for r in ROWS}) == len(ROWS)
    assert set(cols[2]) == set(cols[3]) == {"on", "fe", "be"}
    assert set(cols[4]) == {"x86_64", "x86_32"}
    assert set(cols[5]) == {"file", "loop", "loop4k"}


def pattern_byte(off, seed):
    """xbdfront-io verify's pattern: a function of the disk offset only."""
    return (((off * 2654435761) & (2 ** 64 - 1)) >> 13 ^ seed) & 0xff


@pytest.fixture
def storage(tmp_path):
    """make(kind) -> (target, backing file); loop devices are detached at
    teardown whatever happened."""
    loops = []

    def make(kind):
        img = str(tmp_path / "disk.img")
        with open(img, "wb") as f:
            f.truncate(DISK)
        if kind == "file":
            return img, img
        argv = ["losetup", "--find", "--show"]
        if kind == "loop4k":
            argv += ["--sector-size", "4096"]
        loop = subprocess.run(argv + [img], capture_output=True, text=True,
                              check=True).stdout.strip()
        loops.append(loop)
        return loop, img

    yield make
    for loop in loops:
        subprocess.run(["losetup", "-d", loop], check=False)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_datapath_row(daemons, xenstored, storage, row):
    q, order, pers, ind, abi, kind = row
    xd = xenstored
    be_argv = [binary("xbd-blkback"), "-N", "-p", "local", "-R", xd.rundir,
               "--max_queues=4", "--max_ring_page_order=5", "--sysfs=none"]
    fe_opts = ["--timeout", "10000", "--queues", str(q), "--ring-order",
               str(order), "--abi", abi]
    if pers == "be":
        be_argv.append("--feature_persistent=0")
    elif pers == "fe":
        fe_opts.append("--no-persistent")
    if ind == "be":
        be_argv.append("--max_indirect_segments=0")
    fe_opts += ["--indirect", "0" if ind == "fe" else "64"]
    daemons.start(be_argv, name="blkback", env=xd.env)

    target, img = storage(kind)
    assert xbd(xd, "domain-create", "g1", "--memory", "64M").strip() == "1"
    xbd(xd, "block-attach", "1", f"vdev=xvda,target={target}",
        "--timeout", "10")

    r = frontend(xd, *fe_opts, "1", "xvda", "info")
    assert r.returncode == 0, r.stderr
    info = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    sector_size = 4096 if kind == "loop4k" else 512
    assert info["queues"] == str(q) and info["ring-page-order"] == str(order)
    assert info["persistent"] == ("1" if pers == "on" else "0")
    assert (info["indirect-segments"] != "0") == (ind == "on")
    assert info["protocol"] == abi + "-abi"
    assert info["sector-size"] == str(sector_size)
    assert info["sectors"] == str(DISK // 512)
    assert info["flush"] == "1" and info["discard"] == "1", info

    seed = 1 + ROWS.index(row)
    r = frontend(xd, *fe_opts, "--bytes", str(VERIFY), "--seed", str(seed),
                 "1", "xvda", "verify")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.startswith("verified "), r.stdout

    # the backing file holds the pattern where it was written, zeroes
    # elsewhere: a sample of offsets, every one checked
    with open(img, "rb") as f:
        before = f.read()
    rng = random.Random(seed)
    hits = 0
    for off in rng.sample(range(DISK), 20000):
        expect = pattern_byte(off, seed)
        assert before[off] in (0, expect), off
        hits += before[off] == expect != 0
    assert hits > 2000, hits

    r = frontend(xd, *fe_opts, "1", "xvda", "flush")
    assert r.returncode == 0 and r.stdout == "flushed\n", (r.stdout, r.stderr)
    # discard the first window that holds data
    length = WINDOW
    off = next(w for w in range(0, DISK, WINDOW) if any(before[w:w + WINDOW]))
    r = frontend(xd, *fe_opts, "--offset", str(off), "--length", str(length),
                 "1", "xvda", "discard")
    assert r.returncode == 0, (r.stdout, r.stderr)
    with open(img, "rb") as f:
        after = f.read()
    assert after[off:off + length] == bytes(length)
    assert after[:off] == before[:off]
    assert after[off + length:] == before[off + length:]

    xbd(xd, "block-detach", "1", "xvda", "--timeout", "10")
