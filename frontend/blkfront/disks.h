/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront's disk table: the vbds of one domain, each opened with
 * libxbdfront and shown as one file by the FUSE side (fs.c).
 *
 * Threads: the watcher thread (disks_start) is the only one that opens
 * and closes devices, all in the one domain handle main() opened (so any
 * number of vbds of the domain are connected at once); FUSE worker
 * threads look disks up by name or id and hold a reference for the
 * length of one request: from the handler until the request is answered,
 * which for I/O is the completion callback.  Each disk has one completion
 * thread per queue (started with the disk, stopped before it is closed):
 * it waits with xbdfront_wait() and runs xbdfront_reap(), so the callbacks
 * of that queue's I/O run there (or on whichever thread fails the I/O).
 * Lifetime: a disk is unlinked from the table when its vbd goes away
 * (the toolstack detached it, or the device died); the watcher then waits
 * for every reference to drop before it stops the completion threads and
 * calls xbdfront_close().  A detach fails what the backend has not
 * answered (libxbdfront's monitor), so no request holds a disk forever.
 */
#ifndef XBD_BLKFRONT_DISKS_H
#define XBD_BLKFRONT_DISKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "frontend/xbdfront.h"

struct disk {
	char name[32];                /* vdev name, the file's name */
	uint32_t devid;
	struct xbdfront_dev *dev;     /* owned; closed by the watcher */
	uint64_t size;                /* bytes; grows online (atomic: disk_size) */
	unsigned int sector_size;
	bool readonly, discard, flush;
	uint64_t serial;              /* unique per connection of this table (open
				       * files remember it: a re-attached vbd is a
				       * new disk to them) */
	unsigned int nq;              /* queues of dev */
	unsigned int rr;              /* next queue (atomic, round robin) */
	unsigned long inflight;       /* FUSE requests not answered yet (atomic) */
	unsigned long max_inflight;   /* the most at once since connect (atomic) */
	int stop_fd;                  /* eventfd: the completion threads stop */
	pthread_t *reapers;           /* completion threads (watcher only) */
	unsigned int nreapers;        /* how many of them run */
	unsigned int refs;            /* under the table lock */
	bool writing_back;            /* atomic: the detach hook writes it back;
				       * the watcher keeps it in the table */
	struct disks *table;
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
/* The same, by vbd device id. */
struct disk *disks_get_id(struct disks *t, uint32_t devid);
void disks_put(struct disks *t, struct disk *d);
/*
 * What a detach of a disk calls before the disk goes (fs.c: write back
 * its file's cached pages and flush), with the disk's name; NULL: nothing.
 * Called on libxbdfront's monitor thread while the disk is still in the
 * table and its ring works (see xbdfront_opts.detaching).
 */
void disks_set_write_back(struct disks *t, void (*fn)(void *arg, const char *name),
			  void *arg);
/*
 * What an online resize of a disk calls after the disk's size grew
 * (fs.c: make the kernel take the file's new size), with the disk's
 * name and new size in bytes; NULL: nothing.  Called on libxbdfront's
 * monitor thread (xbdfront_opts.resized): fn must not wait for I/O.
 */
void disks_set_resized(struct disks *t, void (*fn)(void *arg, const char *name,
						    uint64_t bytes), void *arg);
/*
 * What every completion thread calls around each xbdfront_reap(): fn(false)
 * before, fn(true) after, on that thread (fs.c: the FUSE answers the
 * reap's callbacks give are sent together at the end); NULL: nothing.
 * A reap keeps the fn it began with.
 */
void disks_set_reap_batch(struct disks *t, void (*fn)(bool end));
/* The disk's size in bytes now (it grows online); any thread. */
static inline uint64_t disk_size(const struct disk *d)
{
	return __atomic_load_n(&d->size, __ATOMIC_ACQUIRE);
}

/* Call fn for every connected disk (names for readdir), under the lock. */
void disks_each(struct disks *t, void (*fn)(void *arg, const struct disk *d), void *arg);

#endif
