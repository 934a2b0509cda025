/* SPDX-License-Identifier: MIT */
/*
 * One queue of a vbd: its shared ring (mapped from the frontend's grant
 * refs), its event channel, its grant transport, its io_uring and its
 * thread.  Queues share nothing on the hot path; only the storage (read
 * only) is common to the queues of a vbd.
 *
 * Threads and lifetimes:
 *   - be_queue_start() runs on the control thread: it opens this queue's
 *     own gnttab and evtchn handles, maps the ring, binds the event
 *     channel, sets up the engine, then starts the queue thread, handing
 *     every one of those over (pthread_create orders the hand-over);
 *   - the queue thread owns them until it exits: it runs be_io_run() and,
 *     when the frontend breaks the ring, records result = -EIO and makes
 *     done_fd readable so the control thread can report it (be_fatal) and
 *     stop the queue; the other queues keep running;
 *   - adoption (cfg->adopt): the same, but the ring is resumed where the
 *     dead backend's journal says and its unanswered requests are handed
 *     to the engine to re-run first (journal.h);
 *   - be_queue_stop() (control thread) signals stop, joins the thread,
 *     then undoes everything in reverse order; the journal is unmapped,
 *     its file left for the caller to keep (restart) or remove.  Idempotent, and safe on a
 *     queue whose start failed half-way or that is all zero (never started).
 *   - stats may be read by any thread (see stats.h).
 */
#ifndef XBD_BACKEND_QUEUE_H
#define XBD_BACKEND_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

#include "backend/gnt.h"
#include "backend/io_uring.h"

struct be_queue_cfg {
	struct xbd_platform *plat;
	xbd_domid_t self;             /* the backend's domain */
	xbd_domid_t frontend;
	unsigned int index;           /* queue number, for names and logs */
	unsigned int ring_order;
	xbd_grant_ref_t ring_refs[1u << RING_MAX_ORDER];
	xbd_evtchn_port_t remote_port;
	enum ring_abi abi;
	bool persistent;              /* feature-persistent negotiated */
	const struct storage *storage;
	struct gnt_budget *budget;    /* the vbd's memory budget; NULL: none */
	struct be_limit *limit;       /* the vbd's I/O limits; NULL: none */
	const int64_t *poll_us;       /* the vbd's poll_duration_us; NULL: none */
	struct req_limits limits;
	/* Online resize: queue 0 measures its store every size_check_ms
	 * and stores the bytes here (atomic) for the control thread; NULL
	 * for the other queues. */
	uint64_t *measured_size;
	/* The in-flight journal (journal.h): its file (NULL: no journal)
	 * and the identity parts the queue does not know (the rest comes
	 * from the fields above).  adopt: take over the live ring from the
	 * journal instead of starting a fresh one. */
	const char *journal_path;
	uint64_t generation;
	uint32_t devid, nr_queues;
	bool adopt;
};

struct be_queue {
	struct be_queue_cfg cfg;
	/* handed to the queue thread while it runs */
	struct xbd_gnttab *gt;
	struct xbd_evtchn *ev;
	int local_port;               /* -1: not bound */
	void *sring;                  /* ring mapping, 2^order pages */
	struct be_ring ring;
	struct gnt_xport xport;
	bool xport_up;
	struct be_io io;
	bool io_up;
	int stop_fd;                  /* eventfd: control -> queue thread */
	int done_fd;                  /* eventfd: queue thread -> control */
	pthread_t thread;
	bool thread_up;
	int result;                   /* written by the thread before done_fd;
	                               * read after reading done_fd or joining */
	struct be_journal *jr;        /* written by the thread while it runs */
	struct be_stats stats;
};

/* 0 or -errno: -EINVAL (bad order or limits), the platform's errors for
 * ring grants that do not map or a port that does not bind, -ENOMEM.
 * With cfg->adopt, be_journal_load()'s errors too (-ENOENT, -ESTALE,
 * -EBADMSG: no usable journal, the caller falls back).  Without, a
 * journal that cannot be created is logged and the queue runs without.
 * On error the queue is stopped (nothing left behind). */
int be_queue_start(struct be_queue *q, const struct be_queue_cfg *cfg);

/* Stop the thread (in-flight I/O completes and is answered), unmap and
 * unbind.  Returns the thread's result (0, or -EIO for a broken ring),
 * or -EBUSY when persistent grants were still in use at teardown. */
int be_queue_stop(struct be_queue *q);

#endif
