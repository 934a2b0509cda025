/* SPDX-License-Identifier: MIT */
/*
 * One frontend queue: a shared ring of 2^order granted pages, an event
 * channel, the shadow table, the grant pool for data and indirect pages,
 * and the list of application I/Os waiting to go on the ring.
 *
 * Data path: reads and writes go through pool pages (bounce buffers)
 * unless the caller's buffers were allocated granted (xbdfront_buf_alloc,
 * passed in as `direct` fragments).  A write's data is copied into its
 * pages when the I/O gets them (at submit, or later when the pool was
 * exhausted); a read's data is copied out to the caller's iovec when its
 * last request is answered OKAY.  Memory the caller did not allocate
 * granted is never granted, so a hostile backend can at worst write pool
 * pages, which are dedicated and zeroed when first granted (XSA-403).
 *
 * Threads and locking: `lock` protects every mutable field; any number of
 * application threads may submit and process concurrently.  Completion
 * callbacks run in the thread that called fe_queue_process() (or
 * fe_queue_fail_all / fe_queue_destroy), after the lock was dropped, so a
 * callback may submit again.  Event delivery follows late EOI (XSA-332,
 * XSA-391): the port is unmasked only after the ring has been drained, and
 * never again once the ring is broken.
 *
 * Lifetimes: the queue owns its sharing and event-channel handles, its ring
 * pages and its pool.  An application I/O is owned by the queue from a
 * successful fe_queue_submit() until its completion is delivered.
 */
#ifndef XBD_FRONTEND_QUEUE_H
#define XBD_FRONTEND_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "frontend/gntpool.h"
#include "frontend/request.h"
#include "platform/platform.h"

struct fe_queue_params {
	unsigned int index;           /* queue number, for messages */
	xbd_domid_t backend;          /* the backend's domain */
	unsigned int order;           /* ring-page-order, 0..5 */
	enum fe_abi abi;
	bool persistent;              /* negotiated feature-persistent */
	unsigned int max_pages;       /* data + indirect pages granted at most */
};

/* How an I/O reports its end: a callback, or an entry in the queue's
 * completion queue (cb == NULL) carrying user_data. */
typedef void (*fe_app_cb)(void *arg, int status);

struct fe_cqe {
	uint64_t user_data;
	int status;                   /* 0 or -errno */
};

struct fe_queue_stats {
	uint64_t submitted, completed, errors, notifies, events;
	uint64_t spurious;            /* processing rounds with events but no response */
	uint64_t io_allocs;           /* I/O structures taken from malloc (free list empty,
				       * or an I/O too large for a cached one) */
	unsigned int io_cached;       /* I/O structures on the free list now */
	struct fe_gntpool_stats pool;
};

struct fe_app_io;

struct fe_queue {
	/* set at create, then read-only */
	unsigned int index;
	xbd_domid_t backend;
	unsigned int pages_cap;       /* data pages one I/O may take */
	struct xbd_gntshr *gs;        /* owned */
	struct xbd_evtchn *evt;       /* owned */

	pthread_mutex_t lock;         /* protects everything below */
	enum fe_abi abi;
	bool persistent;
	unsigned int order;
	void *ring_mem;               /* 2^order shared pages */
	xbd_grant_ref_t ring_refs[1u << FE_RING_MAX_ORDER];
	int port;                     /* local event-channel port, -1 when none */
	struct fe_ring ring;
	struct fe_shadow_table shadow;
	struct fe_limits lim;         /* this queue's copy (EOPNOTSUPP edits it) */
	struct fe_gntpool *pool;
	struct fe_page_ops pages;
	bool connected;               /* limits known, backend attached */
	int dead;                     /* 0, or -errno: the queue refuses everything */
	char error[160];              /* why it died */
	struct fe_io *wait_head, *wait_tail; /* FIFO of I/Os not fully issued */
	struct fe_app_io *cq_head, *cq_tail; /* finished I/Os without callback */
	unsigned int cq_len;          /* entries on it; also read without the lock
				       * (atomic) by fe_queue_reap's empty check */
	/* Free list of I/O structures (LIFO, linked through done_next): an
	 * I/O small enough for the inline arrays comes from here and goes
	 * back here when its completion is delivered, so the steady state
	 * allocates nothing per request.  At most ring.size entries are
	 * kept (the ring bounds what is in flight on the backend; more
	 * go back to free()); freed at destroy. */
	struct fe_app_io *free_ios;
	unsigned int nfree_ios;
	struct fe_queue_stats stats;
	/* called (without the lock) once when the backend broke this ring,
	 * so the device can shut its other queues down too; set before I/O */
	void (*on_broken)(void *arg, int err, const char *why);
	void *on_broken_arg;
};

/*
 * Create a queue for a claimed domain: opens its own sharing and event
 * channel handles, shares the ring pages (fresh, zeroed, writable by the
 * backend), allocates an unbound port for the backend, creates the pool.
 * Not connected: I/O submitted now waits for fe_queue_connect().
 */
int fe_queue_create(struct xbd_platform *plat, struct xbd_domain *dom,
		    const struct fe_queue_params *par, struct fe_queue **out);
/* Fail everything with -ENODEV, then free all.  Safe with NULL. */
void fe_queue_destroy(struct fe_queue *q);

/* What the frontend publishes for this queue: ring-ref%u and event-channel. */
unsigned int fe_queue_ring_refs(struct fe_queue *q, xbd_grant_ref_t *refs);
int fe_queue_port(struct fe_queue *q);
/* The pollable fd: readable when the backend signalled this queue. */
int fe_queue_fd(struct fe_queue *q);

/*
 * The backend is connected with these limits: start issuing.
 * -EINVAL for limits fe_limits_check refuses, -ENODEV if dead.
 */
int fe_queue_connect(struct fe_queue *q, const struct fe_limits *lim);
/* The backend's final word on feature-persistent (fe_gntpool_set_persistent):
 * 0 or -EBUSY.  Call before fe_queue_connect(). */
int fe_queue_set_persistent(struct fe_queue *q, bool persistent);

/*
 * The backend went away: take every request off the ring (their I/Os wait
 * to be issued again, whole, on the next ring) and replace ring and event
 * channel by fresh ones of the given order and ABI.  The queue is then
 * disconnected until fe_queue_connect().  I/O does not fail.
 */
int fe_queue_reset(struct fe_queue *q, unsigned int order, enum fe_abi abi);

/*
 * Submit an I/O: op, byte offset and length, and for reads/writes the
 * caller's buffers (iov, iovcnt; the array is copied, the buffers must stay
 * valid until completion).  direct (ndirect fragments), when not NULL,
 * says the buffers are granted already (xbdfront_buf_alloc): the I/O uses
 * them as they are, with no bounce copy.  Returns 0 (the completion will be
 * delivered exactly once) or -errno (nothing will be): -EINVAL, -EROFS,
 * -EOPNOTSUPP as fe_io_prepare, -E2BIG beyond the pool, -ENODEV (or the
 * error it died with) when dead, -ENOTCONN before the first connect,
 * -ENOMEM.
 */
int fe_queue_submit(struct fe_queue *q, enum fe_op op, uint64_t offset, uint64_t len,
		    const struct iovec *iov, int iovcnt, const struct fe_frag *direct,
		    unsigned int ndirect, fe_app_cb cb, void *arg, uint64_t user_data);

/*
 * Batched submission (fio's queue/commit): as fe_queue_submit, but the
 * requests go on the ring unpublished; fe_queue_commit() publishes every
 * one of them with one index store and at most one notification.  A
 * fe_queue_process() meanwhile publishes them too (harmless).
 */
int fe_queue_submit_deferred(struct fe_queue *q, enum fe_op op, uint64_t offset,
			     uint64_t len, const struct iovec *iov, int iovcnt,
			     const struct fe_frag *direct, unsigned int ndirect,
			     uint64_t user_data);
void fe_queue_commit(struct fe_queue *q);

/*
 * Handle events: consume responses, issue waiting I/O, deliver completions
 * (callbacks run here, without the lock).  Returns the number of I/Os
 * completed, or the queue's -errno once it is dead (after failing them).
 */
int fe_queue_process(struct fe_queue *q);

/*
 * The same, for a caller that polls the fd itself: signalled says whether
 * it reported POLLIN.  Without it the event channel is left alone (no
 * syscall): only the ring is looked at.  With it, the kicks are drained
 * and the port unmasked once the ring is empty (late EOI), as in
 * fe_queue_process.  A caller must pass signalled after every POLLIN, or
 * the port stays masked and it is never woken again.
 */
int fe_queue_process_polled(struct fe_queue *q, bool signalled);

/* Whether a response is waiting on the ring: one load of the shared
 * index, no lock, no syscall (for a short poll before sleeping). */
bool fe_queue_rsp_waiting(struct fe_queue *q);

/* Take up to n entries from the completion queue; returns how many.  An
 * empty completion queue is seen without the lock (one atomic load): an
 * entry another thread is adding at that moment is left for the next
 * call, as if this one had come first. */
unsigned int fe_queue_reap(struct fe_queue *q, struct fe_cqe *cqe, unsigned int n);

/* Shut the queue down with err: every waiting and in-flight I/O completes
 * with err; later submissions fail with it. */
void fe_queue_fail_all(struct fe_queue *q, int err, const char *why);

/* Signal the backend on this queue's event channel (after it re-attached). */
void fe_queue_notify(struct fe_queue *q);

/* Online resize: the backend's new capacity (512-byte units). */
void fe_queue_set_sectors(struct fe_queue *q, uint64_t sectors);

void fe_queue_get_stats(struct fe_queue *q, struct fe_queue_stats *out);

#endif
