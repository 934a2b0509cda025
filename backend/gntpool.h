/* SPDX-License-Identifier: MIT */
/*
 * Persistent grants of one queue: grant ref -> a writable mapping that
 * stays mapped between requests, so a frontend that reuses its pages
 * (feature-persistent) costs no map/unmap per request.
 *
 * Policy (Linux xen-blkback's):
 *   - a grant not in the pool is mapped and added while the pool holds
 *     fewer than max_persistent_grants; otherwise it is mapped for that
 *     request only and the pool notes the overflow;
 *   - gntpool_purge(), run by the queue loop every 100 ms, unmaps unused
 *     grants: when the pool is over the cap, or at the cap after an
 *     overflow, the excess plus 5% of the cap, least recently used first;
 *     and, when persistent_grant_unused_seconds is not 0, every grant
 *     unused for that long.  Grants in use are never touched.
 *
 * Threads and lifetimes: a pool belongs to its queue thread (no locks).
 * An entry is mapped by gntpool_get() and unmapped only by the purge or
 * gntpool_destroy(); its address is then reset to GNTPOOL_UNMAPPED before
 * the entry is freed.  Each gntpool_get() is paired with one
 * gntpool_put() when the request's I/O is over.
 */
#ifndef XBD_BACKEND_GNTPOOL_H
#define XBD_BACKEND_GNTPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "platform/platform.h"

#define GNTPOOL_UNMAPPED NULL
#define GNTPOOL_BUCKETS 1024u      /* power of two */
#define GNTPOOL_LRU_INTERVAL_NS (100ull * 1000 * 1000)
#define GNTPOOL_LRU_PERCENT_CLEAN 5

struct pgnt {
	xbd_grant_ref_t gref;
	void *addr;                 /* GNTPOOL_UNMAPPED once unmapped */
	unsigned int active;        /* requests using it now */
	uint64_t last_used_ns;
	struct pgnt *lru_prev, *lru_next;  /* least recently used first */
	struct pgnt *hnext;
};

struct gntpool_stats {
	uint64_t hits, misses, transient, purged;
};

struct gntpool {
	struct xbd_gnttab *gt;      /* the queue's handle; not owned */
	xbd_domid_t domid;          /* the frontend */
	struct pgnt *hash[GNTPOOL_BUCKETS];
	struct pgnt *lru_head, *lru_tail;
	unsigned int count;         /* mapped persistent grants */
	unsigned int in_use;        /* entries with active > 0 */
	bool overflow;              /* a grant found the pool full */
	struct gntpool_stats stats;
};

void gntpool_init(struct gntpool *gp, struct xbd_gnttab *gt, xbd_domid_t domid);

/*
 * A writable mapping of gref for one request.  *e is the pool entry, or
 * NULL when the pool was full and *addr is a one-off mapping.  max: the
 * current max_persistent_grants.  0 or -errno from the platform (the
 * grant does not map: the request fails).
 */
int gntpool_get(struct gntpool *gp, xbd_grant_ref_t gref, unsigned int max,
		struct pgnt **e, void **addr);

/* Whether gref is in the pool (a gntpool_get() of it maps nothing). */
bool gntpool_cached(const struct gntpool *gp, xbd_grant_ref_t gref);

/* A request found the pool too full for its grants and took another path
 * than one-off mappings: the next purge makes room, as after one. */
void gntpool_note_overflow(struct gntpool *gp);

/* The request using (e, addr) is over; now_ns stamps its last use. */
void gntpool_put(struct gntpool *gp, struct pgnt *e, void *addr, uint64_t now_ns);

/* The Linux purge; returns how many grants were unmapped. */
unsigned int gntpool_purge(struct gntpool *gp, uint64_t now_ns, unsigned int max,
			   unsigned int unused_seconds);

/* Unmap every entry.  Returns 0, or -EBUSY with the entries still in use
 * left mapped (a leak the caller reports with be_fatal; it means a request
 * was not finished, which must not happen after the queue drained). */
int gntpool_destroy(struct gntpool *gp);

#endif
