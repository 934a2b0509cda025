/* SPDX-License-Identifier: MIT */
/*
 * Per-queue grant pool.  See gntpool.h for the two modes.
 *
 * Lifetimes: a batch (persistent mode) is shared by grow() and unshared
 * only by fe_gntpool_destroy(); a single page (non-persistent mode) is
 * shared by fe_gntpool_get() and unshared by fe_gntpool_put(), or parked on
 * `leaked` when the backend still maps it and unshared again at destroy.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "frontend/gntpool.h"

struct batch {
	void *addr;
	unsigned int count;
};

struct fe_gntpool {
	struct xbd_gntshr *gs;        /* the queue's handle, not owned */
	xbd_domid_t remote;
	bool persistent;
	unsigned int max_pages;
	struct fe_page *free;         /* LIFO stack of free granted pages */
	unsigned int nfree;
	struct batch *batches;        /* persistent: every shared batch */
	unsigned int nbatches;
	struct fe_page *leaked;       /* non-persistent: revoke refused */
	unsigned int nleaked;
	unsigned int granted;
	unsigned int in_use;
};

int fe_gntpool_create(struct xbd_gntshr *gs, xbd_domid_t remote, bool persistent,
		      unsigned int max_pages, struct fe_gntpool **out)
{
	struct fe_gntpool *p;

	*out = NULL;
	if (!gs || !max_pages)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->gs = gs;
	p->remote = remote;
	p->persistent = persistent;
	p->max_pages = max_pages;
	p->free = calloc(max_pages, sizeof(*p->free));
	p->leaked = calloc(max_pages, sizeof(*p->leaked));
	p->batches = calloc(max_pages / FE_GNTPOOL_BATCH + 1, sizeof(*p->batches));
	if (!p->free || !p->leaked || !p->batches) {
		fe_gntpool_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void fe_gntpool_destroy(struct fe_gntpool *p)
{
	unsigned int i;

	if (!p)
		return;
	assert(p->in_use == 0);
	/* -EBUSY: the backend still maps it; xbd_gntshr_close() frees it. */
	for (i = 0; i < p->nbatches; i++)
		(void)xbd_gntshr_unshare(p->gs, p->batches[i].addr, p->batches[i].count);
	for (i = 0; i < p->nleaked; i++)
		(void)xbd_gntshr_unshare(p->gs, p->leaked[i].addr, 1);
	free(p->free);
	free(p->leaked);
	free(p->batches);
	free(p);
}

/* Persistent mode: share the next batch and put it on the free stack. */
static int grow(struct fe_gntpool *p)
{
	unsigned int n = p->max_pages - p->granted, i;
	xbd_grant_ref_t refs[FE_GNTPOOL_BATCH];
	void *addr;
	int rc;

	if (n == 0)
		return -EAGAIN;
	if (n > FE_GNTPOOL_BATCH)
		n = FE_GNTPOOL_BATCH;
	rc = xbd_gntshr_share_pages(p->gs, p->remote, n, refs, true, &addr);
	if (rc)
		return rc;
	p->batches[p->nbatches++] = (struct batch){ addr, n };
	/* highest page first, so the lowest is handed out first */
	for (i = n; i-- > 0;)
		p->free[p->nfree++] = (struct fe_page){
			(char *)addr + (size_t)i * XBD_PAGE_SIZE, refs[i] };
	p->granted += n;
	return 0;
}

int fe_gntpool_get(struct fe_gntpool *p, struct fe_page *out)
{
	xbd_grant_ref_t ref;
	void *addr;
	int rc;

	if (!p->persistent) {
		if (p->granted >= p->max_pages)
			return -EAGAIN;
		rc = xbd_gntshr_share_pages(p->gs, p->remote, 1, &ref, true, &addr);
		if (rc)
			return rc;
		p->granted++;
		*out = (struct fe_page){ addr, ref };
		p->in_use++;
		return 0;
	}
	if (p->nfree == 0) {
		rc = grow(p);
		if (rc)
			return rc;
	}
	*out = p->free[--p->nfree];
	p->in_use++;
	return 0;
}

void fe_gntpool_put(struct fe_gntpool *p, const struct fe_page *pg)
{
	assert(p->in_use > 0);
	p->in_use--;
	if (p->persistent) {
		p->free[p->nfree++] = *pg;
		return;
	}
	if (xbd_gntshr_unshare(p->gs, pg->addr, 1) == 0) {
		p->granted--;
		return;
	}
	/* Still mapped by the backend (or not ours): never reuse it. */
	p->leaked[p->nleaked++] = *pg;
}

void fe_gntpool_get_stats(const struct fe_gntpool *p, struct fe_gntpool_stats *out)
{
	out->granted = p->granted;
	out->in_use = p->in_use;
	out->leaked = p->nleaked;
}

unsigned int fe_gntpool_available(const struct fe_gntpool *p)
{
	return p->nfree + (p->max_pages - p->granted);
}

int fe_gntpool_set_persistent(struct fe_gntpool *p, bool persistent)
{
	if (p->persistent == persistent)
		return 0;
	if (p->granted || p->in_use)
		return -EBUSY;
	p->persistent = persistent;
	return 0;
}
