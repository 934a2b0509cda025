/* SPDX-License-Identifier: MIT */
/*
 * Raw storage for a vbd: a regular file or a block device.
 *
 * storage_open() opens the target once, with O_DIRECT when the target
 * allows it at the advertised logical block size (falling back to the page
 * cache otherwise), read-only for mode "r", and O_EXCL for block devices
 * (a mounted or otherwise claimed device is refused with -EBUSY, as Linux
 * blkback claims its bdev).  It learns what blkback advertises: size,
 * logical and physical block size, discard (punch-hole for files,
 * BLKDISCARD for block devices) with granularity/alignment, and secure
 * discard (BLKSECDISCARD).
 *
 * The data path itself (reads, writes, fdatasync, punch-hole) goes
 * through the queue's io_uring on storage->fd; only block-device discard
 * is synchronous (storage_discard(), as Linux issues it from its ring
 * thread).  A struct storage is read-only after open and may be shared by
 * every queue of the vbd; the control thread opens and closes it.
 */
#ifndef XBD_BACKEND_STORAGE_H
#define XBD_BACKEND_STORAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/falloc.h>

struct storage_opts {
	bool read_only;         /* mode "r": open O_RDONLY */
	bool no_direct;         /* never use O_DIRECT */
	/* Logical block size to advertise, 512..4096, power of two.  0: the
	 * block device's own, or 512 for files.  A block device refuses a
	 * size below its own (-EINVAL). */
	uint32_t sector_size;
};

struct storage {
	int fd;                 /* -1 when closed */
	bool is_blkdev;
	bool read_only;
	bool direct;            /* fd is O_DIRECT */
	dev_t rdev;             /* block devices: for physical-device */
	uint64_t size;          /* bytes, a multiple of logical_block */
	uint32_t logical_block; /* sector-size */
	uint32_t physical_block;/* physical-sector-size (>= logical_block) */
	bool discard;           /* feature-discard */
	bool discard_secure;    /* discard-secure */
	uint32_t discard_granularity;  /* bytes */
	uint32_t discard_alignment;    /* bytes */
};

/* 0 or -errno (-ENOENT, -EACCES, -EBUSY, -EINVAL for a bad sector_size or
 * a target that is neither a regular file nor a block device, -ENOSPC for
 * an empty target).  On error *s is closed (fd -1). */
int storage_open(const char *path, const struct storage_opts *opts,
		 struct storage *s);
/* Idempotent: safe on a closed or failed storage. */
void storage_close(struct storage *s);

/* Synchronous discard of [off, off + len) bytes on a block device
 * (BLKSECDISCARD when secure).  Files discard through io_uring's
 * fallocate instead; this returns -EOPNOTSUPP for them. */
int storage_discard(const struct storage *s, uint64_t off, uint64_t len,
		    bool secure);

/* fallocate() mode that discards a file range. */
#define STORAGE_PUNCH_MODE (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)

#endif
