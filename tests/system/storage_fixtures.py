# SPDX-License-Identifier: MIT
"""Helpers the storage-driver tests share (test_storage_nbd.py,
test_storage_rbd.py): fio through the fio engine in the background while
a test breaks the store under it, and the backend restarted with extra
options."""
import os
import subprocess
import time

from conftest import BUILD, binary
from guest_fixtures import FIO
from test_fio_engine import engine_env

ENGINE = os.path.join(BUILD, "lib", "xbd-fio.so")
VERIFY = ["--rw=randwrite", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"]


def xfio_env(g):
    return engine_env(g)


def fio_popen(g, *args, vdev="xvdb"):
    """fio (terse v3) through the engine on g's disk vdev, running in the
    background; the caller communicates with it."""
    return subprocess.Popen(
        [FIO, "--output-format=terse", "--terse-version=3",
         "--verify_state_save=0", "--name=x", f"--ioengine=external:{ENGINE}",
         "--xbd_domain=g1", f"--xbd_vdev={vdev}", f"--xbd_rundir={g.rundir}",
         *args], cwd=g.rundir, env=xfio_env(g), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def fio_under_fault(g, args, fault, settle=1.5, timeout=180, cleanup=None):
    """Start fio with args, let it run settle seconds, call fault() (which
    breaks the store and brings it back, in its own time), and wait for
    fio; returns its CompletedProcess.  cleanup() runs in any case (to
    undo a fault a failing test left behind)."""
    fio = fio_popen(g, *args)
    try:
        time.sleep(settle)
        assert fio.poll() is None, fio.communicate()
        fault()
        out, err = fio.communicate(timeout=timeout)
    finally:
        if cleanup:
            cleanup()
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    return subprocess.CompletedProcess(fio.args, fio.returncode, out, err)


def restart_backend(g, *extra):
    """The guest's backend again, with extra options."""
    g.backend.stop()
    g.backend = g.daemons.start(
        [binary("xbd-blkback"), "-N", "-p", "local", "-R", g.rundir,
         "--max_queues=2", "--max_ring_page_order=2", "--sysfs=none", *extra],
        name="blkback-opts", env=g.env)
