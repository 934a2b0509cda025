/* SPDX-License-Identifier: MIT */
/*
 * One queue of a device: the channel.  It owns everything of the queue,
 * as Linux blkfront's struct blkfront_ring_info does:
 *   - the shared ring (2^order granted pages) and its event channel;
 *   - the one request table: rq[id] for every ring id (Linux blkfront's
 *     shadow[]): the descriptor a request belongs to, the operation its
 *     response must carry, its indirect pages; free ids on a LIFO list.
 *     A response is judged against it and nothing else;
 *   - the descriptors (struct fe_io, one per application request) and
 *     the grant pool of bounce and indirect pages, both on free lists
 *     made when the channel is created;
 *   - the limits the backend connected with (EOPNOTSUPP edits them).
 *
 * The life of a request: xbdfront_submit() takes a descriptor and, for
 * bounced data, its pages (lock), fills them and copies a write's data in
 * (no lock), then queues it (lock): it goes on the ring, unpublished, or
 * waits on the channel's FIFO when ids, slots or pages are short (it
 * never fails for that).  xbdfront_commit() publishes.  Reaping takes the
 * responses and finishes what completed (lock), copies reads out and runs
 * callbacks (no lock), and gives pages and descriptors back (lock).
 *
 * Threads and locking: `lock` protects every mutable field below it; any
 * number of threads may submit, commit and reap concurrently.  No data is
 * copied and no callback runs under the lock.  The few words read
 * without it (the spin of xbdfront_wait, the device's info) are atomics,
 * named as such.  Event delivery follows late EOI (XSA-332, XSA-391): the
 * port is unmasked only after the ring has been drained, never once the
 * ring is broken.
 *
 * Lifetimes: the channel owns its sharing and event-channel handles, its
 * ring pages, its pool, its descriptors and its wake-up eventfd.  A
 * descriptor belongs to the channel from submit until its completion was
 * delivered (a callback ran, or xbdfront_reap handed the entry out).
 */
#ifndef XBD_FRONTEND_CHANNEL_H
#define XBD_FRONTEND_CHANNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/buffer.h"
#include "frontend/gntpool.h"
#include "frontend/request.h"
#include "frontend/xbdfront.h"
#include "platform/platform.h"

struct fe_chan_params {
	unsigned int index;           /* queue number, for messages */
	xbd_domid_t backend;          /* the backend's domain */
	unsigned int order;           /* ring-page-order, 0..5 */
	enum fe_abi abi;
	bool persistent;              /* feature-persistent as offered */
	unsigned int max_pages;       /* data + indirect pages granted at most */
	unsigned int poll_us;         /* xbdfront_opts.poll_duration_us */
	const struct fe_bufs *bufs;   /* the device's zero-copy buffers, not owned */
	/* called (without the lock) once when the backend broke this ring,
	 * so the device can shut its other channels down too */
	void (*on_broken)(void *arg, int err, const char *why);
	void *on_broken_arg;
};

struct fe_chan_stats {
	uint64_t submitted, completed, errors, notifies, events;
	uint64_t spurious;            /* event rounds that brought no response */
	uint64_t commits;             /* publishes that moved req_prod */
	uint64_t spins, spin_hits;    /* xbdfront_wait polls, and those that found one */
	uint64_t grows;               /* descriptor arrays grown (first use of a size) */
	uint64_t waits;               /* submissions that waited for a descriptor */
	unsigned int nr_ios, ios_free;/* descriptors, and free now */
	struct fe_gntpool_stats pool;
};

/* Features as the channel knows them now (EOPNOTSUPP drops them):
 * FE_FEAT_* bits, read without the lock. */
#define FE_FEAT_FLUSH 1u
#define FE_FEAT_BARRIER 2u
#define FE_FEAT_DISCARD 4u
#define FE_FEAT_SECURE 8u

struct fe_chan;

/*
 * Create a channel for a claimed domain: its own sharing and event
 * channel handles, the ring pages shared (fresh, zeroed, writable by the
 * backend), an unbound port for the backend, the pool and the
 * descriptors.  Not connected: submissions fail with -ENOTCONN until
 * fe_chan_connect().  0, -EINVAL, -ENOMEM or a platform error.
 */
int fe_chan_create(struct xbd_platform *plat, struct xbd_domain *dom,
		   const struct fe_chan_params *par, struct fe_chan **out);
/*
 * The channel as fe_chan_create(par) leaves it, keeping its descriptor and
 * request tables, its ring pages and its port: what a harness that runs
 * one channel across many inputs calls between them
 * (tests/fuzz/fuzz_fe_response.c; libxbdfront makes a channel per
 * connection).  Every I/O it holds ends with -ENODEV first (as in
 * fe_chan_destroy), the grant pool is made again (its pages unshared),
 * the ring cleared; of the tables only what was used since (ids and
 * descriptors below a high-water mark) is cleared.  par must name the
 * ring's present order and ABI and what create was given (only persistent
 * may differ), and nobody may wait in the channel: -EINVAL / -EBUSY
 * otherwise (nothing changed).  0, or -ENOMEM (the channel is then dead:
 * destroy it).
 */
int fe_chan_recycle(struct fe_chan *c, const struct fe_chan_params *par);

/* Fail everything with -ENODEV, then free all.  Safe with NULL. */
void fe_chan_destroy(struct fe_chan *c);

/* What the frontend publishes: ring-ref%u (returns how many) and
 * event-channel. */
unsigned int fe_chan_ring_refs(struct fe_chan *c, xbd_grant_ref_t *refs);
int fe_chan_port(struct fe_chan *c);
int fe_chan_fd(struct fe_chan *c);

/* The backend is connected with these limits: start issuing.  -EINVAL
 * for limits fe_limits_check refuses, the death -errno if dead. */
int fe_chan_connect(struct fe_chan *c, const struct fe_limits *lim);
/* The backend's final word on feature-persistent (fe_gntpool_set_persistent):
 * 0 or -EBUSY.  Before fe_chan_connect(). */
int fe_chan_set_persistent(struct fe_chan *c, bool persistent);
/* Recovery: every request comes off the ring (its descriptor waits to be
 * issued again, whole) and ring and event channel are replaced by fresh
 * ones of this order and ABI; disconnected until fe_chan_connect(). */
int fe_chan_reset(struct fe_chan *c, unsigned int order, enum fe_abi abi);

/* xbdfront_submit, _commit, _reap, _wait and _process on this channel. */
int fe_chan_submit(struct fe_chan *c, const struct xbdfront_sqe *sqe, unsigned int n);
int fe_chan_commit(struct fe_chan *c);
int fe_chan_reap(struct fe_chan *c, struct xbdfront_cqe *cqe, unsigned int n);
int fe_chan_wait(struct fe_chan *c, int timeout_ms, int extra_fd);
int fe_chan_process(struct fe_chan *c);

/* Shut the channel down with err: every waiting and in-flight request
 * completes with err; later submissions fail with it. */
void fe_chan_fail(struct fe_chan *c, int err, const char *why);
/* 0, or the -errno it died with (why: len bytes, the reason). */
int fe_chan_error(struct fe_chan *c, char *why, size_t len);
unsigned int fe_chan_features(const struct fe_chan *c);
/* Signal the backend (after it re-attached to our rings). */
void fe_chan_notify(struct fe_chan *c);
/* Online resize: the backend's new capacity (512-byte units). */
void fe_chan_set_sectors(struct fe_chan *c, uint64_t sectors);
void fe_chan_get_stats(struct fe_chan *c, struct fe_chan_stats *out);

#endif
