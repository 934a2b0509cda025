/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront's disk table: the vbds of one domain, each opened with
 * libxbdfront and shown as one file by the FUSE side (fs.c).
 *
 * Threads: the watcher thread (disks_start) is the only one that opens
 * and closes devices, all in the one domain handle main() opened (so any
 * number of vbds of the domain are connected at once); FUSE worker
 * threads look disks up by name and hold a reference for the length of
 * one operation.
 * Lifetime: a disk is unlinked from the table when its vbd goes away
 * (the toolstack detached it, or the device died); the watcher then waits
 * for every reference to drop before xbdfront_close(), which fails what
 * the backend has not answered with -ENODEV (no I/O hangs).
 */
#ifndef XBD_BLKFRONT_DISKS_H
#define XBD_BLKFRONT_DISKS_H

#include <stdbool.h>
#include <stdint.h>
#include "frontend/xbdfront.h"

struct disk {
	char name[32];                /* vdev name, the file's name */
	uint32_t devid;
	struct xbdfront_dev *dev;     /* owned; closed by the watcher */
	uint64_t size;                /* bytes */
	unsigned int sector_size;
	bool readonly, discard, flush;
	unsigned int refs;            /* under the table lock */
	struct disk *next;
};

struct disks;

/* Open the table for the claimed domain dom (which must outlive the
 * table); starts the watcher thread, which connects every vbd now under
 * device/vbd and every one added later, each with xbdfront_open_in(). */
int disks_start(struct xbdfront_domain *dom, const struct xbdfront_opts *opts,
		struct disks **out);
/* Stop the watcher, close every device (Closing -> Closed); the domain
 * stays claimed until its owner closes it. */
void disks_stop(struct disks *t);

/* A referenced disk by file name, or NULL; disks_put() drops it. */
struct disk *disks_get(struct disks *t, const char *name);
void disks_put(struct disks *t, struct disk *d);
/* Call fn for every connected disk (names for readdir), under the lock. */
void disks_each(struct disks *t, void (*fn)(void *arg, const struct disk *d), void *arg);

#endif
