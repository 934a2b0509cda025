/* SPDX-License-Identifier: MIT */
/*
 * The control thread's table of devices: it turns xenstore watch events
 * into probes, state changes and removals, adopts the devices present at
 * start, collects the queues that ended on their own, and dumps
 * statistics.  Everything here runs on the control thread only.
 */
#ifndef XBD_BACKEND_DEVTAB_H
#define XBD_BACKEND_DEVTAB_H

#include <poll.h>
#include <stdio.h>

#include "backend/blkif.h"

struct devtab {
	struct be_ctx ctx;
	char base[64];                 /* /local/domain/<self>/backend/vbd */
	struct backend_dev **dev;      /* each holds the table's reference */
	unsigned int n, cap;
	struct be_rates rates;         /* connects per domain (ctx.rates) */
	uint64_t size_check_ns;        /* next online-resize check (monotonic) */
};

/* Watch the backend/vbd directory and adopt every device under it whose
 * online is 1.  0 or -errno (the watch could not be set). */
int devtab_start(struct devtab *t, const struct be_ctx *ctx);

/* Handle every pending watch event, coalesced: all queued events are
 * read first, then each device they name acts once on its state as it
 * is now (one guest's burst of state writes costs one pass, not one
 * connect and disconnect per write).  0 or -errno (connection lost). */
int devtab_events(struct devtab *t);

/* Poll entries for the done_fd of every running queue, the eventfd of
 * every reaper (xenbus.h) and each device's storage watch fd
 * (storage.h), after base[0..n); returns how many were added (at most
 * max). */
unsigned int devtab_pollfds(struct devtab *t, struct pollfd *fds, unsigned int max);
/* A done_fd polled readable: report its queue through be_fatal; a
 * reaper's: the device's teardown is over, act on its state; a storage
 * watch fd: be_dev_storage_event(). */
void devtab_queue_done(struct devtab *t, int fd);

/* Sum the statistics and pool counts of queue q of d, or of all its
 * queues when q < 0: the one source of both the tree's statistics and
 * the SIGUSR1 dump, so the two cannot disagree.  Any thread. */
void devtab_gather(const struct backend_dev *d, int q, struct be_stats *s,
		   struct gnt_pool_view *v);

/* The ms until devtab_timers() has work (deferred connects, teardown
 * deadlines, the size check of every size_check_ms while a device
 * exists), or -1; and that work. */
int devtab_timeout_ms(const struct devtab *t);
void devtab_timers(struct devtab *t);

/* One line per device with its statistics summed over its queues. */
void devtab_dump_stats(const struct devtab *t, FILE *f);

/* Stop every device's queues and drop the table (xenstore untouched, so
 * a restarted backend adopts the devices again). */
void devtab_stop(struct devtab *t);

#endif
