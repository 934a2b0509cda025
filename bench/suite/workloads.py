# SPDX-License-Identifier: MIT
"""The workloads of issue 8 and the fio arguments each contender shares.

A workload is a plain dict so that it goes into the result JSON as it is:
  name      short key used in file names and tables
  rw        fio's rw= (randread, randwrite, read, write)
  bs        block size in bytes
  qd        fio iodepth (per job)
  jobs      fio numjobs
  dd        True for the seed's dd read (bs=4k count=131072, direct)
  seed      True for the seed's dd as the seed ran it: buffered 4k
            writes of /dev/zero, then sync, timed to the end of the sync
            (only a path dd can open: the host file, a loop device over
            it, the FUSE file)
Random workloads stay in the first RANDOM_SPAN bytes of the store, the
span xbd-be-queue-bench uses, so every contender touches the same data.
"""

RANDOM_SPAN = 64 << 20
DD_COUNT = 131072          # the seed's dd: bs=4k count=131072 (512 MiB)
STORE_SIZE = 512 << 20     # large enough for the dd


def _w(name, rw, bs, qd, jobs, dd=False, seed=False):
    return {"name": name, "rw": rw, "bs": bs, "qd": qd, "jobs": jobs, "dd": dd,
            "seed": seed}


ALL = (
    [_w(f"{op}4k-qd{qd}-j{j}", f"rand{op}", 4096, qd, j)
     for op in ("read", "write") for qd in (1, 64) for j in (1, 2)] +
    [_w("seqread1m-qd16", "read", 1 << 20, 16, 1),
     _w("seqwrite1m-qd16", "write", 1 << 20, 16, 1),
     _w("dd4k", "read", 4096, 1, 1, dd=True),
     _w("seeddd", "write", 4096, 1, 1, seed=True)]
)

# Stores other than tmpfs run a subset, to keep the full run near 10 min.
SUBSET = ("read4k-qd1-j1", "read4k-qd64-j1", "read4k-qd64-j2",
          "write4k-qd64-j1", "seqread1m-qd16", "seqwrite1m-qd16")


def by_name(name):
    for w in ALL:
        if w["name"] == name:
            return w
    raise KeyError(name)


def for_store(store_kind, quick):
    """Workloads run on a store: all on tmpfs; a subset elsewhere."""
    if store_kind == "tmpfs":
        return list(ALL)
    if quick:
        return []
    return [by_name(n) for n in SUBSET]


def fio_args(w, runtime, dd_count=DD_COUNT):
    """fio options of a workload, without the target (filename or uri)."""
    args = ["--name=" + w["name"], "--rw=" + w["rw"], f"--bs={w['bs']}",
            f"--iodepth={w['qd']}", f"--numjobs={w['jobs']}",
            "--group_reporting", "--output-format=json", "--randrepeat=0",
            "--norandommap"]
    if w["dd"]:
        # The dd as fio runs it for targets dd cannot open (NBD): one
        # sequential pass of dd_count blocks at queue depth 1, cut at
        # 4 runtimes so a slow server cannot stretch the run.
        args += ["--offset=0", f"--size={dd_count * w['bs']}",
                 f"--runtime={4 * runtime}"]
    else:
        span = RANDOM_SPAN if w["rw"].startswith("rand") else STORE_SIZE
        args += [f"--size={span}", "--time_based", f"--runtime={runtime}"]
    return args
