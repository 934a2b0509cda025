/* SPDX-License-Identifier: MIT */
/*
 * A virtual block device as the backend sees it: its xenstore paths, its
 * storage, the limits it offered and negotiated, and its queues.
 *
 * Threads and lifetime: a struct backend_dev is created, changed and
 * destroyed by the control thread only (xenstore events, FUSE writes).
 * Queue threads never touch it: each one gets its queue's own objects and
 * the storage, which is read-only while any queue runs, and the control
 * thread joins them before it changes or frees anything they use.
 *
 * References: the device table holds one reference from probe to
 * removal (be_dev_probe / be_dev_remove); any other holder (a FUSE reader
 * printing statistics, say) takes one with dev_get() and drops it with
 * dev_put().  The last dev_put() frees the device; by then its queues
 * have been stopped by be_dev_remove().
 */
#ifndef XBD_BACKEND_BLKIF_H
#define XBD_BACKEND_BLKIF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/limit.h"
#include "backend/queue.h"
#include "backend/storage/storage.h"
#include <xenbus.h>             /* lib/xenbus.h (not backend/xenbus.h) */

#define BE_PATH_MAX 128

/* Connects per frontend domain, for max_connects_per_second (xenbus.c):
 * one theoretical arrival time per domain (GCRA, a token bucket).
 * Control thread only. */
struct be_rates {
	struct be_rate {
		xbd_domid_t dom;
		uint64_t tat_ns;
	} *e;
	unsigned int n, cap;
};

/* What the backend's side of the control plane needs to know. */
struct be_ctx {
	struct xs_handle *xs;            /* the control thread's */
	struct xbd_platform *plat;
	xbd_domid_t self;                /* the backend's domain */
	/* Stop a disconnected vbd's queues on a reaper thread (the device
	 * table does), so that slow storage draining its I/O does not hold
	 * the control thread; false: inline (unit tests). */
	bool async_teardown;
	struct be_rates *rates;          /* NULL: connects are not limited */
};

struct be_reap;                          /* xenbus.c */
struct be_open;                          /* xenbus.c */

struct backend_dev {
	int refs;                        /* atomic; see dev_get/dev_put */
	const struct be_ctx *ctx;
	char be_path[BE_PATH_MAX];       /* .../backend/vbd/<fe>/<devid> */
	char fe_path[BE_PATH_MAX];       /* as read from "frontend" */
	xbd_domid_t fe_domid;
	uint32_t devid;
	enum xenbus_state state;         /* ours, as last written */
	bool fatal;                      /* be_fatal() reported an error */
	bool read_only;
	struct storage st;               /* open from probe to removal */
	/* offered at probe (tunables snapshot) */
	unsigned int max_queues, max_order, max_indirect;
	bool offer_persistent;
	/* negotiated at connect */
	unsigned int nr_queues, order;
	enum ring_abi abi;
	bool persistent;
	uint64_t generation;             /* of the connection: xbd-generation */
	struct be_queue *queues;         /* nr_queues of them while connected */
	struct gnt_budget mem;           /* pages its queues hold (gnt.h) */
	struct be_limit limit;           /* its I/O limits, shared by its queues */
	/* Its poll_duration_us (io_uring.c "Polling"): -1 follows the
	 * module parameter.  Written by the control thread (the tree),
	 * read by its queue threads at every decision (relaxed atomics). */
	int64_t poll_us;
	/* Control fairness (xenbus.c, devtab.c): the queues of the last
	 * connection while a reaper thread stops them; a connect the rate
	 * limit deferred until CLOCK_MONOTONIC retry_ns (0: none); an event
	 * seen in this pass of the device table (acted on once). */
	struct be_reap *reap;
	/* A store being opened on a helper thread (a network store: its
	 * connect is bounded but slow); the probe ends when it is open. */
	struct be_open *opening;
	bool stale;                      /* detached while opening: remove */
	uint64_t retry_ns;
	bool dirty;
	/* Online resize (be_dev_check_size): a grown size whose xenstore
	 * announce failed (tried again); the last shrunken size refused
	 * (logged once); what queue 0 measured. */
	bool size_unannounced;
	uint64_t refused_size;
	uint64_t measured_size;          /* queue 0's last probe (atomic); 0: none */
};

/* Take a reference; the call site names where it is dropped. */
static inline struct backend_dev *dev_get(struct backend_dev *d)
{
	__atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
	return d;
}

void be_dev_free(struct backend_dev *d);

/* Drop a reference; the last one frees the device (its queues are
 * already stopped: be_dev_remove() did that on the control thread). */
static inline void dev_put(struct backend_dev *d)
{
	if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
		be_dev_free(d);
}

#endif
