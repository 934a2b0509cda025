/* SPDX-License-Identifier: MIT */
/*
 * backend/gnt.c: the grant transport of a queue.  See gnt.h.
 *
 * Per request, the be_pending slot carries the transport's state:
 *   xport_mode   which of the three ways map() took;
 *   seg_priv[i]  persistent: the gntpool entry (NULL: one-off mapping,
 *                whose address is iov[i] minus the segment offset);
 *                copy: the buffer page of segment i;
 *   xport_priv   map: the address of the batch mapping.
 * Whatever map() takes, unmap() gives back, on every path.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend/gnt.h"
#include "backend/tunables.h"

#define GNT_MAX_BATCH 1024u        /* IOV_MAX */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int gnt_xport_init(struct gnt_xport *x, struct xbd_gnttab *gt, xbd_domid_t domid,
		   bool persistent)
{
	memset(x, 0, sizeof(*x));
	x->gt = gt;
	x->domid = domid;
	x->persistent = persistent;
	x->seen_squeeze_ns = gnt_squeeze_until();   /* only squeezes from now on */
	gntpool_init(&x->pool, gt, domid);
	return 0;
}

void gnt_xport_bound(struct gnt_xport *x, unsigned int ring_grants)
{
	x->ring_grants = ring_grants;
}

unsigned int gnt_xport_pool_cap(const struct gnt_xport *x)
{
	uint64_t max = tun_get(TUN_MAX_PERSISTENT_GRANTS);

	return (unsigned int)(x->ring_grants && x->ring_grants < max ? x->ring_grants : max);
}

/* ---- memory budget (see gnt.h) ------------------------------------------ */

static struct gnt_budget total_budget;

uint64_t gnt_budget_total(void)
{
	return __atomic_load_n(&total_budget.pages, __ATOMIC_RELAXED);
}

void gnt_xport_budget(struct gnt_xport *x, struct gnt_budget *b)
{
	x->vbd = b;
}

/* Every page the queue holds now. */
static uint64_t held(const struct gnt_xport *x)
{
	return (uint64_t)x->nr_free + x->pages_out + x->maps_out + x->ind_out +
	       x->pool.count;
}

/* Add n pages to b unless that takes it above max.  Lock-free: the
 * check and the add are one compare-and-swap (bounded: it retries only
 * when another queue changed the count in between). */
static bool budget_take(struct gnt_budget *b, uint64_t n, uint64_t max)
{
	uint64_t old = __atomic_load_n(&b->pages, __ATOMIC_RELAXED);

	do {
		if (old + n > max)
			return false;
	} while (!__atomic_compare_exchange_n(&b->pages, &old, old + n, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return true;
}

static void budget_add(struct gnt_budget *b, int64_t delta)
{
	if (b)
		__atomic_add_fetch(&b->pages, (uint64_t)delta, __ATOMIC_RELAXED);
}

/* Bring the shared budgets in line with what the queue holds (it gave
 * pages back, or took fewer than it reserved).  Nothing to do on the
 * hot path: a pool hit or a reused free page changes nothing. */
static void budget_sync(struct gnt_xport *x)
{
	uint64_t h = held(x);

	if (h == x->charged)
		return;
	budget_add(x->vbd, (int64_t)(h - x->charged));
	budget_add(&total_budget, (int64_t)(h - x->charged));
	x->charged = h;
}

enum budget_verdict { BUDGET_OK, BUDGET_QUEUE, BUDGET_SHARED };

/* Reserve need more pages for a request, from all three budgets. */
static enum budget_verdict budget_reserve(struct gnt_xport *x, unsigned int need)
{
	if (!need)
		return BUDGET_OK;
	if (held(x) + need > tun_get(TUN_MAX_QUEUE_PAGES))
		return BUDGET_QUEUE;
	if (x->vbd && !budget_take(x->vbd, need, tun_get(TUN_MAX_VBD_PAGES)))
		return BUDGET_SHARED;
	if (!budget_take(&total_budget, need, tun_get(TUN_MAX_TOTAL_PAGES))) {
		budget_add(x->vbd, -(int64_t)need);
		return BUDGET_SHARED;
	}
	x->charged += need;
	return BUDGET_OK;
}

/* ---- buffer pool: free pages for grant copy ------------------------------ */

/* The process-wide squeeze deadline (gnt_squeeze_all): written by any
 * thread, read by every queue thread; relaxed, only a time. */
static uint64_t squeeze_all_until_ns;

void gnt_squeeze_all(uint64_t until_ns)
{
	uint64_t old = __atomic_load_n(&squeeze_all_until_ns, __ATOMIC_RELAXED);

	while (until_ns > old &&
	       !__atomic_compare_exchange_n(&squeeze_all_until_ns, &old, until_ns, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

uint64_t gnt_squeeze_until(void)
{
	return __atomic_load_n(&squeeze_all_until_ns, __ATOMIC_RELAXED);
}

static void publish(struct gnt_xport *x)
{
	budget_sync(x);
	__atomic_store_n(&x->pub.budget_pages, x->charged, __ATOMIC_RELAXED);
	__atomic_store_n(&x->pub.pages_free, x->nr_free, __ATOMIC_RELAXED);
	__atomic_store_n(&x->pub.pages_in_use, x->pages_out, __ATOMIC_RELAXED);
	__atomic_store_n(&x->pub.grants_mapped, x->pool.count, __ATOMIC_RELAXED);
}

void gnt_xport_pool(const struct gnt_xport *x, struct gnt_pool_view *out)
{
	out->pages_free = __atomic_load_n(&x->pub.pages_free, __ATOMIC_RELAXED);
	out->pages_in_use = __atomic_load_n(&x->pub.pages_in_use, __ATOMIC_RELAXED);
	out->grants_mapped = __atomic_load_n(&x->pub.grants_mapped, __ATOMIC_RELAXED);
	out->squeezes = __atomic_load_n(&x->pub.squeezes, __ATOMIC_RELAXED);
	out->budget_pages = __atomic_load_n(&x->pub.budget_pages, __ATOMIC_RELAXED);
}

/* Pages are mmap'ed one by one so that freeing one really gives it back
 * to the system (malloc would keep it in its heap). */
static void *page_get(struct gnt_xport *x)
{
	void *pg;

	if (x->nr_free) {
		pg = x->free_pages[--x->nr_free];
		if (x->nr_free < x->free_low)
			x->free_low = x->nr_free;
	} else {
		x->free_low = 0;
		pg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pg == MAP_FAILED)
			return NULL;
		x->stats.pages_allocated++;
	}
	x->pages_out++;
	return pg;
}

static bool squeezed(const struct gnt_xport *x, uint64_t now)
{
	return now < x->squeeze_until_ns || now < gnt_squeeze_until();
}

static unsigned int keep_limit(const struct gnt_xport *x, uint64_t now)
{
	return squeezed(x, now) ? 0 : (unsigned int)tun_get(TUN_MAX_BUFFER_PAGES);
}

/* Keep a page for the next copy unless the pool is squeezed.  The trim
 * to max_buffer_pages is the tick's (at most every 100 ms): a burst of
 * large copied requests (1 MiB at depth 16 is 4096 pages) then reuses its
 * pages instead of an munmap and an mmap per page and request. */
static void page_put(struct gnt_xport *x, void *pg, uint64_t now)
{
	x->pages_out--;
	if (squeezed(x, now)) {
		munmap(pg, 4096);
		return;
	}
	if (x->nr_free == x->cap_free) {
		unsigned int cap = x->cap_free ? 2 * x->cap_free : 64;
		void **a = realloc(x->free_pages, cap * sizeof(*a));

		if (!a) {
			munmap(pg, 4096);
			return;
		}
		x->free_pages = a;
		x->cap_free = cap;
	}
	x->free_pages[x->nr_free++] = pg;
}

static void pages_trim(struct gnt_xport *x, unsigned int keep)
{
	while (x->nr_free > keep)
		munmap(x->free_pages[--x->nr_free], 4096);
}

void gnt_xport_squeeze(struct gnt_xport *x, uint64_t now_ns, unsigned int duration_ms)
{
	x->squeeze_until_ns = now_ns + (uint64_t)duration_ms * 1000000ull;
	pages_trim(x, 0);
	publish(x);
}

/* Apply a squeeze reported since we last looked (gnt_squeeze_all): free
 * every free page and unmap every idle persistent grant, even if the
 * squeeze is already over (a 10 ms squeeze is shorter than the tick).
 * Returns whether the pool is squeezed now. */
static bool apply_squeeze(struct gnt_xport *x, uint64_t now)
{
	uint64_t g = gnt_squeeze_until();
	bool fresh = g != x->seen_squeeze_ns;

	x->seen_squeeze_ns = g;
	if (fresh) {                      /* squeezes applied, for the tree */
		__atomic_store_n(&x->pub.squeezes, x->pub.squeezes + 1, __ATOMIC_RELAXED);
		gntpool_purge(&x->pool, now, 0, 0);
		pages_trim(x, 0);
		publish(x);
	}
	return fresh || squeezed(x, now);
}

/* ---- copy ---------------------------------------------------------------- */

static void copy_seg(struct gnt_xport *x, struct xbd_gnttab_copy_seg *c,
		     const struct blkif_request_segment *s, void *buf, bool to_grant)
{
	memset(c, 0, sizeof(*c));
	c->len = (uint16_t)req_seg_len(s);
	if (to_grant) {
		c->source.virt = buf;
		c->dest.foreign.ref = s->gref;
		c->dest.foreign.offset = (uint16_t)req_seg_offset(s);
		c->dest.foreign.domid = x->domid;
		c->flags = XBD_GNTCOPY_dest_gref;
	} else {
		c->source.foreign.ref = s->gref;
		c->source.foreign.offset = (uint16_t)req_seg_offset(s);
		c->source.foreign.domid = x->domid;
		c->dest.virt = buf;
		c->flags = XBD_GNTCOPY_source_gref;
	}
}

#define GNT_COPY_CHUNK 32u        /* segments per xbd_gnttab_copy call */

/* Grant-copy every segment between the grants and the buffer pages, in
 * chunks (an indirect request has up to max_indirect_segs segments). */
static int copy_all(struct gnt_xport *x, struct be_pending *p, bool to_grant)
{
	struct xbd_gnttab_copy_seg c[GNT_COPY_CHUNK];
	unsigned int n = p->v.nr_segs;
	int rc = 0;

	for (unsigned int base = 0; !rc && base < n; base += GNT_COPY_CHUNK) {
		unsigned int k = n - base < GNT_COPY_CHUNK ? n - base : GNT_COPY_CHUNK;

		for (unsigned int i = 0; i < k; i++)
			copy_seg(x, &c[i], &p->v.segs[base + i], p->iov[base + i].iov_base,
				 to_grant);
		rc = xbd_gnttab_copy(x->gt, k, c);
		for (unsigned int i = 0; !rc && i < k; i++)
			if (c[i].status)
				rc = -EIO;      /* check every element, not just the first */
	}
	return rc;
}

static void copy_release(struct gnt_xport *x, struct be_pending *p, unsigned int n)
{
	uint64_t now = now_ns();

	for (unsigned int i = 0; i < n; i++)
		page_put(x, p->seg_priv[i], now);
	publish(x);
}

static int copy_map(struct gnt_xport *x, struct be_pending *p)
{
	unsigned int i;
	int rc = 0;

	for (i = 0; i < p->v.nr_segs; i++) {
		void *pg = page_get(x);

		if (!pg) {
			rc = -ENOMEM;
			break;
		}
		p->seg_priv[i] = pg;
		p->iov[i].iov_base = (char *)pg + req_seg_offset(&p->v.segs[i]);
		p->iov[i].iov_len = req_seg_len(&p->v.segs[i]);
	}
	if (!rc && p->v.kind != VREQ_READ)
		rc = copy_all(x, p, false);   /* the data to write, once */
	if (rc)
		copy_release(x, p, i);
	else
		publish(x);
	return rc;
}

static int copy_unmap(struct gnt_xport *x, struct be_pending *p, bool ok)
{
	int rc = 0;

	if (ok && p->v.kind == VREQ_READ)
		rc = copy_all(x, p, true);    /* the data read, to the frontend */
	copy_release(x, p, p->v.nr_segs);
	return rc;
}

/* ---- batch map ------------------------------------------------------------ */

static int batch_map(struct gnt_xport *x, struct be_pending *p)
{
	xbd_grant_ref_t refs[GNT_MAX_BATCH] = { 0 };
	unsigned int n = p->v.nr_segs;
	int prot = p->v.kind == VREQ_READ ? PROT_READ | PROT_WRITE : PROT_READ;
	char *base;
	int rc;

	if (n > GNT_MAX_BATCH)
		return -EINVAL;     /* be_io_init caps segments at IOV_MAX */
	for (unsigned int i = 0; i < n; i++)
		refs[i] = p->v.segs[i].gref;
	rc = xbd_gnttab_map(x->gt, x->domid, n, refs, prot, (void **)&base);
	if (rc)
		return rc;
	/* One iovec per granted page: pages that are adjacent here are not
	 * merged into one segment (they need not be adjacent for the guest). */
	for (unsigned int i = 0; i < n; i++) {
		p->iov[i].iov_base = base + (size_t)i * 4096 + req_seg_offset(&p->v.segs[i]);
		p->iov[i].iov_len = req_seg_len(&p->v.segs[i]);
	}
	p->xport_priv = base;
	x->maps_out += n;
	publish(x);
	return 0;
}

/* ---- persistent ----------------------------------------------------------- */

static void *seg_page(const struct be_pending *p, unsigned int i)
{
	return (char *)p->iov[i].iov_base - req_seg_offset(&p->v.segs[i]);
}

static void persistent_release(struct gnt_xport *x, struct be_pending *p, unsigned int n)
{
	uint64_t now = now_ns();

	for (unsigned int i = 0; i < n; i++)
		gntpool_put(&x->pool, p->seg_priv[i], seg_page(p, i), now);
}

static int persistent_map(struct gnt_xport *x, struct be_pending *p)
{
	unsigned int max = gnt_xport_pool_cap(x), i;
	int rc = 0;

	for (i = 0; i < p->v.nr_segs; i++) {
		const struct blkif_request_segment *s = &p->v.segs[i];
		struct pgnt *e;
		void *pg;

		rc = gntpool_get(&x->pool, s->gref, max, &e, &pg);
		if (rc)
			break;
		p->seg_priv[i] = e;
		p->iov[i].iov_base = (char *)pg + req_seg_offset(s);
		p->iov[i].iov_len = req_seg_len(s);
	}
	if (rc)
		persistent_release(x, p, i);  /* stop at the first error */
	publish(x);
	return rc;
}

/* ---- be_xport_ops --------------------------------------------------------- */

/*
 * Persistent mode with a pool too full for the request's new grants: a
 * one-off mapping costs, per page, a map and an unmap (two lock syscalls
 * on the local platform; hypercalls and a TLB flush on Xen) against a
 * 4 KiB copy (about 0.1 us).  A frontend with more pages in flight than
 * the pool's cap (gnt_xport_pool_cap) would pay that on most of its
 * pages, so such a request is copied instead.
 */
static bool pool_fits(struct gnt_xport *x, const struct be_pending *p,
		      unsigned int *missing)
{
	unsigned int max = gnt_xport_pool_cap(x);
	unsigned int room = x->pool.count < max ? max - x->pool.count : 0, m = 0;

	for (unsigned int i = 0; i < p->v.nr_segs && m <= room; i++)
		m += !gntpool_cached(&x->pool, p->v.segs[i].gref);
	*missing = m;
	if (m <= room)
		return true;
	gntpool_note_overflow(&x->pool);
	return false;
}

/* The way to take the request, and the pages it adds to the queue's
 * (*need): new persistent grants, bounce pages beyond the free ones, or
 * the pages of a batch mapping. */
static enum gnt_mode choose(struct gnt_xport *x, const struct be_pending *p,
			    unsigned int *need)
{
	unsigned int n = p->v.nr_segs;

	if (x->persistent && pool_fits(x, p, need))
		return GNT_PERSISTENT;
	if (x->persistent || (n <= BLKIF_MAX_SEGMENTS_PER_REQUEST &&
			      (p->v.nr_sectors << 9) <= tun_get(TUN_GRANT_COPY_MAX_BYTES))) {
		*need = n > x->nr_free ? n - x->nr_free : 0;
		return GNT_COPY;
	}
	*need = n;
	return GNT_MAP;
}

/* Short of room: give back what the queue holds idle. */
static void give_back_idle(struct gnt_xport *x)
{
	gntpool_purge(&x->pool, now_ns(), 0, 0);
	pages_trim(x, 0);
	publish(x);
}

/* The second try did not fit either: the request waits. */
static int refuse(struct gnt_xport *x, enum budget_verdict v)
{
	if (v == BUDGET_SHARED)
		gnt_squeeze_all(now_ns());
	x->stats.budget_waits++;
	return -EAGAIN;
}

/*
 * Reserve the request's pages, or say it must wait (-EAGAIN).  Short of
 * room, the queue first gives back what it holds idle (its free pages
 * and unused persistent grants) and chooses again; if the vbd's or the
 * backend's budget is what is short, every other queue is asked to do
 * the same at its next tick.
 */
static int admit(struct gnt_xport *x, struct be_pending *p)
{
	unsigned int need = 0;
	enum budget_verdict v;

	p->xport_mode = choose(x, p, &need);
	if (__builtin_expect(budget_reserve(x, need) == BUDGET_OK, 1))
		return 0;
	give_back_idle(x);
	p->xport_mode = choose(x, p, &need);
	v = budget_reserve(x, need);
	return v == BUDGET_OK ? 0 : refuse(x, v);
}

static int x_map(void *ctx, struct be_pending *p)
{
	struct gnt_xport *x = ctx;

	/* under load, a squeeze need not wait for the tick (one relaxed load) */
	if (__builtin_expect(gnt_squeeze_until() != x->seen_squeeze_ns, 0))
		apply_squeeze(x, now_ns());
	if (admit(x, p))
		return -EAGAIN;      /* the engine retries later */
	switch (p->xport_mode) {
	case GNT_PERSISTENT:
		x->stats.persistent++;
		return persistent_map(x, p);
	case GNT_COPY:
		x->stats.copied++;
		return copy_map(x, p);
	default:
		x->stats.mapped++;
		return batch_map(x, p);
	}
}

static int x_unmap(void *ctx, struct be_pending *p, bool ok)
{
	struct gnt_xport *x = ctx;

	switch (p->xport_mode) {
	case GNT_PERSISTENT:
		persistent_release(x, p, p->v.nr_segs);
		return 0;
	case GNT_COPY:
		return copy_unmap(x, p, ok);
	default: {
		int rc = xbd_gnttab_unmap(x->gt, p->xport_priv, p->v.nr_segs);

		x->maps_out -= p->v.nr_segs;
		publish(x);
		return rc;
	}
	}
}

/* Indirect pages are mapped pages like any other: charged to the three
 * budgets while they are mapped (only during the request's fetch), and
 * a request they do not fit waits like one whose data does not. */
static int x_map_indirect(void *ctx, const grant_ref_t *refs, unsigned int n, void **pages)
{
	struct gnt_xport *x = ctx;
	enum budget_verdict v = budget_reserve(x, n);
	char *base;
	int rc;

	if (v != BUDGET_OK) {
		give_back_idle(x);
		v = budget_reserve(x, n);
		if (v != BUDGET_OK)
			return refuse(x, v);
	}
	x->ind_out += n;
	rc = xbd_gnttab_map(x->gt, x->domid, n, refs, PROT_READ, (void **)&base);
	if (rc) {
		x->ind_out -= n;
		publish(x);            /* gives the reservation back */
		return rc == -EAGAIN ? -EIO : rc;   /* -EAGAIN means the budget */
	}
	for (unsigned int i = 0; i < n; i++)
		pages[i] = base + (size_t)i * 4096;
	return 0;
}

static void x_unmap_indirect(void *ctx, void **pages, unsigned int n)
{
	struct gnt_xport *x = ctx;

	(void)xbd_gnttab_unmap(x->gt, pages[0], n);
	x->ind_out -= n;
	publish(x);
}

/* The free pages to keep at a tick: above max_buffer_pages (keep), only
 * those that stayed free for the whole last tick go.  Under a steady load
 * of large copied requests the free list dips to nothing every tick and
 * nothing is unmapped; once the load stops, the next tick trims to keep.
 * (Unmapping a page costs a TLB shootdown across the backend's threads,
 * tens of microseconds: trimming thousands of pages the next requests
 * need again would cost more than the copies.) */
static unsigned int idle_keep(const struct gnt_xport *x, unsigned int keep)
{
	unsigned int busy = x->nr_free - (x->free_low < x->nr_free ? x->free_low : x->nr_free);

	return busy > keep ? busy : keep;
}

/* Every BE_IO_TICK_MS: Linux's persistent-grant purge and the trim to
 * max_buffer_pages; under a squeeze, no free page and no idle grant. */
static void x_tick(void *ctx, uint64_t now)
{
	struct gnt_xport *x = ctx;
	bool sq = apply_squeeze(x, now);

	gntpool_purge(&x->pool, now,
		      sq ? 0 : gnt_xport_pool_cap(x),
		      (unsigned int)tun_get(TUN_PERSISTENT_GRANT_UNUSED_SECONDS));
	pages_trim(x, sq ? 0 : idle_keep(x, keep_limit(x, now)));
	x->free_low = x->nr_free;
	publish(x);
}

const struct be_xport_ops gnt_xport_ops = {
	.map = x_map,
	.unmap = x_unmap,
	.map_indirect = x_map_indirect,
	.unmap_indirect = x_unmap_indirect,
	.tick = x_tick,
};

int gnt_xport_destroy(struct gnt_xport *x)
{
	int rc = gntpool_destroy(&x->pool);

	pages_trim(x, 0);
	free(x->free_pages);
	x->free_pages = NULL;
	x->cap_free = 0;
	/* what is left mapped (grants still in use) stays charged: leaked */
	budget_sync(x);
	return rc;
}
