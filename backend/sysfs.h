/* SPDX-License-Identifier: MIT */
/*
 * The sysfs-style tree of xbd-blkback: a FUSE file system (libfuse3)
 * mounted at $rundir/sys (or --sysfs DIR) that looks like the parts of
 * Linux's /sys that administrators use with xen-blkback:
 *
 *   module/xen_blkback/parameters/<tunable>   Linux's module parameters
 *                                             and ours (backend/tunables.c)
 *   module/xen_blkback/memory_pressure        write 1: report memory
 *                                             pressure (squeeze); read: how
 *                                             many reports so far
 *   bus/xen-backend/devices/vbd-<domid>-<devid>/
 *       mode, physical_device, state, nodename
 *       statistics/{oo,rd,wr,f,ds}_req, {rd,wr}_sect   summed over queues
 *       statistics/{inflight, latency_us, pool_pages_free,
 *                   pool_pages_in_use, persistent_grants, squeezes}  (ours)
 *       queue-<n>/<the same statistics, for one queue>
 *       limits/{read,write}_{iops,bps}[_burst]   I/O limits (limit.h),
 *                                                 writable, live
 *
 * Documentation/ABI/ has one entry per file; tests/system/test_sysfs.py
 * checks that the tree and the entries name the same files.
 *
 * `cat` and `echo N >` work as in sysfs: a bad value fails the write with
 * EINVAL and keeps the old value; writing a read-only file fails with
 * EACCES.  Files report size 4096 and are read without page cache, so
 * every read shows the current value.
 *
 * Threads: no FUSE thread.  The control thread polls sysfs_fd() with the
 * rest and calls sysfs_process(), so the tree reads the device table and
 * the tunables on the thread that owns them, with no lock; queue
 * statistics and pool counts are relaxed atomics (stats.h, gnt.h).
 * Lifetime: sysfs_mount() cleans a stale mount left by a killed backend
 * (ENOTCONN) and mounts; sysfs_unmount() unmounts and removes the
 * directory if it created it.
 */
#ifndef XBD_BACKEND_SYSFS_H
#define XBD_BACKEND_SYSFS_H

#include "backend/devtab.h"

struct sysfs;

/* Mount the tree at dir (created if missing).  0 or -errno. */
int sysfs_mount(const char *dir, struct devtab *t, struct sysfs **out);
void sysfs_unmount(struct sysfs *s);

int sysfs_fd(const struct sysfs *s);
/* The fd polled readable: serve one request.  0, or -errno when the
 * mount went away (someone unmounted it); then stop polling it. */
int sysfs_process(struct sysfs *s);

#endif
