# SPDX-License-Identifier: MIT
"""Instructions per 4k request under valgrind's callgrind.

callgrind counts user-space instructions only (the kernel's io_uring,
syscall and copy work is invisible to it), reproducibly on a loaded
machine.  Servers are measured at two fixed request counts and the
difference is divided by the difference of the counts, so start-up and
shutdown cancel out."""
import os

import parse
from contenders import Qsd, Nbdkit, run_client, need

VALGRIND = ["valgrind", "--tool=callgrind", "--quiet"]


def _fio_fixed(uri, n, log):
    cmd = ["fio", "--name=cg", "--ioengine=nbd", "--uri=" + uri, "--rw=randread",
           "--bs=4096", "--iodepth=64", "--size=64M", f"--number_ios={n}",
           "--norandommap", "--randrepeat=0", "--output-format=json"]
    run_client(cmd, 900, log)


def server_ir(cls, build, work, store, counts):
    """Ir per request of an NBD server (all its threads)."""
    need("valgrind", "valgrind")
    ir = []
    for n in counts:
        out = os.path.join(work, f"cg.{cls.name}.{n}")
        c = cls(build, work)
        try:
            c.start(store, prefix=VALGRIND + ["--callgrind-out-file=" + out])
            _fio_fixed(c.uri, n, c.log)
        finally:
            c.stop()
        with open(out) as f:
            ir.append(parse.callgrind_total(f.read()))
    return {"ir_per_req": (ir[1] - ir[0]) / (counts[1] - counts[0]),
            "ir": ir, "requests": list(counts)}


# valgrind 3.19 (Debian 12) runs io_uring_enter(2) as a non-blocking
# syscall: a thread waiting in it keeps valgrind's big lock and every
# other thread stops (liburing issue 657, KDE bug 463859).  The xbd queue
# thread waits in io_uring_enter, so callgrind cannot run the backend.
XBD_BLOCKED = ("valgrind 3.19 deadlocks when a thread blocks in io_uring_enter "
               "(the xbd queue thread does); not measurable with Debian 12's valgrind")


def measure(build, work, store, quick):
    counts = (500, 2500) if quick else (2000, 12000)
    return {"xbd-backend": {"error": XBD_BLOCKED},
            "nbdkit": server_ir(Nbdkit, build, work, store, counts),
            "qsd-nbd": server_ir(Qsd, build, work, store, counts)}
