# SPDX-License-Identifier: MIT
"""Instructions per 4k request under valgrind's callgrind.

callgrind counts user-space instructions only (the kernel's io_uring,
syscall and copy work is invisible to it), reproducibly on a loaded
machine.  Every server is measured at two fixed request counts of 4k
randread at QD64, and the difference of the totals is divided by the
difference of the counts, so start-up, connection and shutdown cancel
out:

  nbdkit, qsd-nbd   the server (all its threads) under fio's nbd engine
  xbd-blkback       the backend daemon (all its threads: control, queue)
                    under fio in a local guest through xbd-fio.so, one
                    queue, ring order 3 (xbd-fio's settings)
  xbd-queue         xbd-be-queue-bench (order 2): the backend's queue
                    thread alone, and the whole process (with its
                    in-process guest)

The xbd queue threads run with io_wait_poll=Y, which the backend sets
itself under valgrind: valgrind 3.19 cannot run a thread that waits in
io_uring_enter(2) (backend/io_uring.h).  Only the place where the thread
sleeps differs from the default; the ring, request, grant and io_uring
code counted is the same."""
import glob
import os

import parse
from contenders import Qsd, Nbdkit, XbdMachine, run_client, need

VALGRIND = ["valgrind", "--tool=callgrind", "--quiet"]
QD, ORDER_FIO, ORDER_QUEUE = 64, 3, 2


def _fio_fixed(n, target, log, env=None):
    cmd = ["fio", "--name=cg", "--rw=randread", "--bs=4096", f"--iodepth={QD}",
           "--size=64M", f"--number_ios={n}", "--norandommap", "--randrepeat=0",
           "--output-format=json"] + target
    run_client(cmd, 900, log, env)


def _per_request(ir, counts, what):
    return {"ir_per_req": (ir[1] - ir[0]) / (counts[1] - counts[0]),
            "ir": ir, "requests": list(counts), "what": what}


def server_ir(cls, build, work, store, counts):
    """Ir per request of an NBD server (all its threads)."""
    need("valgrind", "valgrind")
    ir = []
    for n in counts:
        out = os.path.join(work, f"cg.{cls.name}.{n}")
        c = cls(build, work)
        try:
            c.start(store, prefix=VALGRIND + ["--callgrind-out-file=" + out])
            _fio_fixed(n, ["--ioengine=nbd", "--uri=" + c.uri], c.log)
        finally:
            c.stop()
        with open(out) as f:
            ir.append(parse.callgrind_total(f.read()))
    return _per_request(ir, counts, "the server process, all threads")


def blkback_ir(build, work, store, counts):
    """Ir per request of xbd-blkback (all its threads) serving fio in a
    local guest through the external engine."""
    need("valgrind", "valgrind")
    engine = os.path.join(build, "lib", "xbd-fio.so")
    need(engine, "this tree (make)")
    log = os.path.join(work, "cg.xbd-blkback.log")
    ir = []
    for n in counts:
        out = os.path.join(work, f"cg.xbd-blkback.{n}")
        m = XbdMachine(build, work, log, prefix=VALGRIND + ["--callgrind-out-file=" + out])
        try:
            m.check()
            m.start(store)
            _fio_fixed(n, ["--ioengine=external:" + engine, "--xbd_domain=bench",
                           "--xbd_vdev=xvdb", "--xbd_max_queues=1",
                           f"--xbd_max_ring_page_order={ORDER_FIO}"], log, m.env)
        finally:
            m.stop()            # SIGTERM: the backend exits, callgrind dumps
        with open(out) as f:
            ir.append(parse.callgrind_total(f.read()))
    return _per_request(ir, counts, "the backend process, all threads; "
                        f"1 queue, ring order {ORDER_FIO}, fio + xbd-fio.so in a guest")


def queue_bench_ir(build, work, store, counts):
    """xbd-be-queue-bench with --separate-threads: the queue thread's Ir
    per request (the file that has be_io_run_once) and the process's."""
    need("valgrind", "valgrind")
    prog = os.path.join(build, "bench", "xbd-be-queue-bench")
    need(prog, "this tree (make be-queue-bench)")
    log = os.path.join(work, "cg.xbd-queue.log")
    thread, proc = [], []
    for n in counts:
        out = os.path.join(work, f"cg.xbd-queue.{n}")
        run_client(VALGRIND + ["--separate-threads=yes", "--callgrind-out-file=" + out,
                               prog, store.path, "--bs", "4096", "--qd", str(QD),
                               "--order", str(ORDER_QUEUE), "--requests", str(n)],
                   900, log)
        texts = []
        for path in sorted(glob.glob(out + "-*")):
            with open(path) as f:
                texts.append(f.read())
        t, p = parse.callgrind_threads(texts, "be_io_run_once")
        thread.append(t)
        proc.append(p)
    return {"xbd-queue (queue thread)": _per_request(
                thread, counts, f"the backend's queue thread, ring order {ORDER_QUEUE}, "
                "grant copy"),
            "xbd-queue (process)": _per_request(
                proc, counts, "xbd-be-queue-bench, all threads (backend + minimal guest)")}


def measure(build, work, store, quick):
    counts = (500, 2500) if quick else (2000, 12000)
    out = {"xbd-blkback": blkback_ir(build, work, store, counts)}
    out.update(queue_bench_ir(build, work, store, counts))
    out["nbdkit"] = server_ir(Nbdkit, build, work, store, counts)
    out["qsd-nbd"] = server_ir(Qsd, build, work, store, counts)
    return out
