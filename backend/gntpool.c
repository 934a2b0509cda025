/* SPDX-License-Identifier: MIT */
/* backend/gntpool.c: persistent grants of one queue.  See gntpool.h. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/gntpool.h"

static unsigned int bucket(xbd_grant_ref_t gref)
{
	return (gref * 2654435761u) & (GNTPOOL_BUCKETS - 1);
}

void gntpool_init(struct gntpool *gp, struct xbd_gnttab *gt, xbd_domid_t domid)
{
	memset(gp, 0, sizeof(*gp));
	gp->gt = gt;
	gp->domid = domid;
}

static struct pgnt *lookup(const struct gntpool *gp, xbd_grant_ref_t gref)
{
	struct pgnt *e = gp->hash[bucket(gref)];

	while (e && e->gref != gref)
		e = e->hnext;
	return e;
}

static void lru_unlink(struct gntpool *gp, struct pgnt *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		gp->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		gp->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_append(struct gntpool *gp, struct pgnt *e)
{
	e->lru_prev = gp->lru_tail;
	e->lru_next = NULL;
	if (gp->lru_tail)
		gp->lru_tail->lru_next = e;
	else
		gp->lru_head = e;
	gp->lru_tail = e;
}

static int add(struct gntpool *gp, xbd_grant_ref_t gref, void *addr, struct pgnt **out)
{
	struct pgnt *e = calloc(1, sizeof(*e));
	unsigned int b = bucket(gref);

	if (!e)
		return -ENOMEM;
	e->gref = gref;
	e->addr = addr;
	e->hnext = gp->hash[b];
	gp->hash[b] = e;
	lru_append(gp, e);
	gp->count++;
	*out = e;
	return 0;
}

int gntpool_get(struct gntpool *gp, xbd_grant_ref_t gref, unsigned int max,
		struct pgnt **e, void **addr)
{
	int rc;

	*e = lookup(gp, gref);
	if (*e) {
		gp->stats.hits++;
	} else {
		rc = xbd_gnttab_map(gp->gt, gp->domid, 1, &gref,
				    PROT_READ | PROT_WRITE, addr);
		if (rc)
			return rc;
		gp->stats.misses++;
		if (gp->count >= max || add(gp, gref, *addr, e)) {
			gp->overflow = true;       /* a one-off mapping */
			gp->stats.transient++;
			*e = NULL;
			return 0;
		}
	}
	if (!(*e)->active++)
		gp->in_use++;
	*addr = (*e)->addr;
	return 0;
}

bool gntpool_cached(const struct gntpool *gp, xbd_grant_ref_t gref)
{
	return lookup(gp, gref) != NULL;
}

void gntpool_note_overflow(struct gntpool *gp)
{
	gp->overflow = true;
	gp->stats.transient++;
}

void gntpool_put(struct gntpool *gp, struct pgnt *e, void *addr, uint64_t now_ns)
{
	if (!e) {
		/* One-off mapping of gntpool_get(): unmap it now.  It cannot
		 * fail for an area we mapped; if it did, the handle's close
		 * unmaps it at disconnect. */
		(void)xbd_gnttab_unmap(gp->gt, addr, 1);
		return;
	}
	assert(e->active > 0);
	if (!--e->active)
		gp->in_use--;
	e->last_used_ns = now_ns;
	lru_unlink(gp, e);
	lru_append(gp, e);                 /* most recently used last */
}

static void remove_entry(struct gntpool *gp, struct pgnt *e)
{
	struct pgnt **pp = &gp->hash[bucket(e->gref)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(gp, e);
	(void)xbd_gnttab_unmap(gp->gt, e->addr, 1);
	e->addr = GNTPOOL_UNMAPPED;
	gp->count--;
	free(e);
}

/* How many unused grants the cap makes us drop (Linux's arithmetic). */
static unsigned int to_clean(const struct gntpool *gp, unsigned int max)
{
	unsigned int n;

	if (gp->count < max || (gp->count == max && !gp->overflow))
		return 0;
	n = gp->count - max + (max / 100) * GNTPOOL_LRU_PERCENT_CLEAN;
	return n < gp->count ? n : gp->count;
}

unsigned int gntpool_purge(struct gntpool *gp, uint64_t now_ns, unsigned int max,
			   unsigned int unused_seconds)
{
	unsigned int clean = to_clean(gp, max), done = 0;
	uint64_t idle = (uint64_t)unused_seconds * 1000000000ull;
	struct pgnt *e, *next;

	for (e = gp->lru_head; e; e = next) {
		next = e->lru_next;
		if (e->active)
			continue;
		if (clean)
			clean--;
		else if (!unused_seconds || now_ns - e->last_used_ns < idle)
			continue;
		remove_entry(gp, e);
		done++;
	}
	gp->overflow = false;
	gp->stats.purged += done;
	return done;
}

int gntpool_destroy(struct gntpool *gp)
{
	struct pgnt *e, *next;
	unsigned int busy = 0;

	for (e = gp->lru_head; e; e = next) {
		next = e->lru_next;
		if (e->active)
			busy++;           /* left mapped: see gntpool.h */
		else
			remove_entry(gp, e);
	}
	assert(gp->count == busy);
	return busy ? -EBUSY : 0;
}
