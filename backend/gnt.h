/* SPDX-License-Identifier: MIT */
/*
 * The grant transport of one queue: how a request's segments (grant refs
 * of the frontend) become memory that io_uring reads or writes.  Three
 * ways, chosen per request (Documentation/backend.md has the numbers):
 *
 *   persistent  the frontend negotiated feature-persistent: every grant
 *               goes through the queue's gntpool (mapped once, writable,
 *               reused); a request whose new grants do not fit
 *               under max_persistent_grants is copied instead (below);
 *   copy        otherwise, a request of at most grant_copy_max_bytes
 *               (and at most 11 segments), or in persistent mode a
 *               request the pool cannot hold, is grant-copied into pool pages
 *               before a write / out of them after a read: no mapping;
 *   map         otherwise, every segment is mapped in one batch (read-only
 *               for writes) and unmapped when the I/O is over.
 *
 * Indirect pages are mapped read-only in one batch, copied out once by
 * ring_fetch_indirect_segs(), and unmapped at once.
 *
 * Memory budget (XSA-392 class: a guest must not make dom0 spend memory
 * without bound).  A queue's pages are its free and busy bounce pages,
 * its persistent grants and its one-off batch mappings in flight; they
 * are bounded three ways, all in 4 KiB pages: per queue
 * (max_queue_pages), per vbd (max_vbd_pages, a struct gnt_budget the
 * vbd owns) and for the whole backend (max_total_pages).  Before map()
 * takes new pages for a request it reserves them from all three; a
 * request that does not fit first makes its queue give back what it
 * holds idle (free pages, unused persistent grants), and if it still
 * does not fit map() returns -EAGAIN: the engine keeps the request and
 * takes nothing more from the ring until it fits (io_uring.h), as Linux
 * blkback stops taking requests when its pending pool is empty.  A
 * request waiting on the vbd's or the backend's budget also squeezes
 * every queue (gnt_squeeze_all) so that idle pools elsewhere give back
 * their pages.  Indirect pages are charged too, while they are mapped
 * (one request's, at most 8, during its fetch): a request whose indirect
 * pages do not fit waits before they are mapped (map_indirect -EAGAIN).
 *
 * Threads: a struct gnt_xport belongs to its queue thread, with its own
 * gnttab handle (platform handles are not shared between threads).  A
 * struct gnt_budget is shared by the queues of a vbd (atomics).
 */
#ifndef XBD_BACKEND_GNT_H
#define XBD_BACKEND_GNT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/gntpool.h"
#include "backend/io_uring.h"

enum gnt_mode { GNT_PERSISTENT = 1, GNT_COPY, GNT_MAP };

/* Pages charged to a vbd (or to the whole backend); relaxed atomics.
 * Lifetime: the vbd's outlives its queues (they charge it until
 * gnt_xport_destroy gives back everything). */
struct gnt_budget {
	uint64_t pages;
};

/* Pages charged to the whole backend (any thread). */
uint64_t gnt_budget_total(void);

struct gnt_xport {
	struct xbd_gnttab *gt;      /* not owned */
	xbd_domid_t domid;          /* the frontend */
	bool persistent;            /* negotiated at connect */
	unsigned int ring_grants;   /* grants the ring can have in flight; 0: unbounded */
	struct gntpool pool;        /* persistent grants */
	void **free_pages;          /* buffer pool: free bounce pages */
	unsigned int nr_free, cap_free;
	unsigned int free_low;      /* fewest free pages since the last tick */
	unsigned int pages_out;     /* buffer pages held by requests */
	unsigned int maps_out;      /* pages of one-off batch mappings in flight */
	unsigned int ind_out;       /* indirect pages mapped (during a fetch) */
	struct gnt_budget *vbd;     /* the vbd's budget; NULL: none */
	uint64_t charged;           /* pages charged to *vbd and the total */
	uint64_t squeeze_until_ns;  /* keep no free page before this */
	uint64_t seen_squeeze_ns;   /* gnt_squeeze_until() at the last tick */
	struct gnt_stats {
		uint64_t persistent, copied, mapped, pages_allocated;
		uint64_t budget_waits;  /* map() calls refused with -EAGAIN */
	} stats;
	/* Published by the queue thread after every change (relaxed atomic
	 * stores), read by the control thread for the tree: see gnt_xport_pool. */
	struct gnt_pool_view {
		uint64_t pages_free, pages_in_use, grants_mapped, squeezes;
		uint64_t budget_pages;  /* pages charged to the budget now */
	} pub;
};

/* What the tree shows of a queue's pool; any thread (relaxed loads). */
void gnt_xport_pool(const struct gnt_xport *x, struct gnt_pool_view *out);

/* Set up (no mapping yet).  0 or -ENOMEM. */
int gnt_xport_init(struct gnt_xport *x, struct xbd_gnttab *gt, xbd_domid_t domid,
		   bool persistent);
/*
 * Bound the persistent pool by what the queue's ring can have in flight
 * at once: ring_grants = ring slots x segments per request (the most the
 * backend accepts), set once at connect before the queue thread runs.
 * The pool then holds min(max_persistent_grants, ring_grants): a frontend
 * whose ring cannot use more grants at once cannot make the queue keep
 * more mapped, and a large ring of large requests (1 MiB at depth 16 is
 * 4096 pages) is not capped below its working set by a small ring's
 * figure.  0 (the default after init): max_persistent_grants alone.
 */
void gnt_xport_bound(struct gnt_xport *x, unsigned int ring_grants);

/* Charge the queue's pages to the vbd's budget b too (before the queue
 * thread runs; b outlives the transport). */
void gnt_xport_budget(struct gnt_xport *x, struct gnt_budget *b);

/* The queue's current cap on persistent grants (see gnt_xport_bound). */
unsigned int gnt_xport_pool_cap(const struct gnt_xport *x);

/* Unmaps the persistent grants and frees the pool, and gives back what
 * the queue charged to the budgets.  -EBUSY if grants were still in use
 * (see gntpool_destroy); everything else is freed anyway. */
int gnt_xport_destroy(struct gnt_xport *x);

/* Memory pressure: free every idle buffer page now and keep none for
 * duration_ms (buffer_squeeze_duration_ms).  Queue thread only. */
void gnt_xport_squeeze(struct gnt_xport *x, uint64_t now_ns, unsigned int duration_ms);

/*
 * Memory pressure seen by the process (backend/pressure.c, any thread):
 * every queue keeps no free buffer page and no idle persistent grant
 * until CLOCK_MONOTONIC until_ns.  Each queue thread applies it at its
 * next tick (at most BE_IO_TICK_MS later): it frees the free pages
 * (munmap: the memory goes back to the system) and unmaps every unused
 * persistent grant; pages and grants of requests in flight are untouched.
 */
void gnt_squeeze_all(uint64_t until_ns);
uint64_t gnt_squeeze_until(void);

/* The be_io transport; ctx is the struct gnt_xport. */
extern const struct be_xport_ops gnt_xport_ops;

#endif
