/* SPDX-License-Identifier: MIT */
/* xbd-blkfront's FUSE operations; private_data is the struct disks. */
#ifndef XBD_BLKFRONT_FS_H
#define XBD_BLKFRONT_FS_H

struct fuse_operations;
extern const struct fuse_operations blkfront_fs_ops;

#endif
