/* SPDX-License-Identifier: MIT */
/* xbd-blkfront's FUSE side (fs.c): the files of the disk table. */
#ifndef XBD_BLKFRONT_FS_H
#define XBD_BLKFRONT_FS_H

#include "frontend/blkfront/fuse_uring.h"

struct disks;

/*
 * Mount a FUSE file system on dir showing one file per disk of t and
 * serve it until SIGTERM, SIGINT or SIGHUP (taken here by a thread of
 * its own, which first writes back and flushes every disk's file) or an
 * unmount; every request is answered and the file system unmounted
 * before it returns.  While it serves, a detach of a disk writes its
 * file back first (disks_set_write_back).  transport: how the kernel's
 * requests reach us (fuse_uring.h).  0, -EIO when the session could not
 * be made, mounted or run, -EOPNOTSUPP when FUSE_URING_ON could not.
 */
int blkfront_fs_serve(struct disks *t, const char *dir, enum fuse_uring_mode transport);

#endif
