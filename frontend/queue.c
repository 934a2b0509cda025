/* SPDX-License-Identifier: MIT */
/*
 * One frontend queue.  See queue.h for the threading rules.
 *
 * Life of an application I/O (struct fe_app_io, owned by the queue):
 *   submit    validated under the lock, appended to the wait list;
 *   kick      the wait list head gets its pool pages (a write's data is
 *             copied in), then its requests go on the ring; fully issued,
 *             it leaves the wait list;
 *   complete  its last response arrives: a read's data is copied out, the
 *             pages go back to the pool, and it moves to the local `done`
 *             list of the thread that processed it (or to the queue's
 *             completion queue);
 *   deliver   that thread, without the lock, calls the callback, then
 *             gives the I/O back (completion-queue entries are given back
 *             by fe_queue_reap).
 * Memory: an I/O of up to APP_INLINE_IOV iovec pieces and APP_INLINE_PAGES
 * pages (64 KiB) lives in one struct fe_app_io taken from the queue's free
 * list (q->free_ios, under the lock) and given back to it, so the steady
 * state calls malloc and free for none of them; larger I/Os get one
 * allocation each, sized for their arrays.  The free list keeps at most
 * ring.size structures (what the ring can hold in flight).
 * Recovery (fe_queue_reset) and death (fe_queue_fail_all) move in-flight
 * I/Os back to the wait list first, so every I/O ends in exactly one place.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/queue.h"

#define APP_INLINE_IOV 4u
#define APP_INLINE_PAGES 16u

struct fe_app_io {
	struct fe_io io;              /* first: the request layer's view */
	fe_app_cb cb;
	void *arg;
	uint64_t user_data;
	int result;                   /* final status */
	bool cached;                  /* inline arrays only: goes back to the free list */
	struct iovec *iov;            /* copy of the caller's array */
	int iovcnt;
	unsigned int npages;
	bool have_pages;
	struct fe_page *pages;        /* npages bounce pages */
	struct fe_frag *frags;        /* npages fragments, one per page */
	struct fe_app_io *done_next;  /* done list, completion queue or free list */
	/* everything above is reset for each I/O; the arrays below are
	 * written before use (larger I/Os have theirs after the struct) */
	struct iovec iov_in[APP_INLINE_IOV];
	struct fe_page pages_in[APP_INLINE_PAGES];
	struct fe_frag frags_in[APP_INLINE_PAGES];
};

/* Finished I/Os collected under the lock, delivered after it. */
struct done_list {
	struct fe_app_io *head, *tail;
	int n;
};

static struct fe_app_io *app_of(struct fe_io *io)
{
	return (struct fe_app_io *)io;
}

/* ---- ring and event channel ---------------------------------------------- */

/* Share 2^order fresh pages and attach the ring; bind a fresh port. */
static int ring_setup(struct fe_queue *q, unsigned int order, enum fe_abi abi)
{
	int rc;

	rc = xbd_gntshr_share_pages(q->gs, q->backend, 1u << order, q->ring_refs, true,
				    &q->ring_mem);
	if (rc)
		return rc;
	q->order = order;
	q->abi = abi;
	rc = fe_ring_init(&q->ring, q->ring_mem, order, abi);
	if (rc)
		return rc;
	rc = xbd_evtchn_bind_unbound_port(q->evt, q->backend);
	if (rc < 0)
		return rc;
	q->port = rc;
	return 0;
}

/* Undo ring_setup.  A ring the backend still maps stays with the sharing
 * handle (freed when it closes); it is never reused. */
static void ring_teardown(struct fe_queue *q)
{
	fe_ring_destroy(&q->ring);
	if (q->port >= 0)
		(void)xbd_evtchn_unbind(q->evt, (xbd_evtchn_port_t)q->port);
	q->port = -1;
	if (q->ring_mem)
		(void)xbd_gntshr_unshare(q->gs, q->ring_mem, 1u << q->order);
	q->ring_mem = NULL;
}

int fe_queue_create(struct xbd_platform *plat, struct xbd_domain *dom,
		    const struct fe_queue_params *par, struct fe_queue **out)
{
	struct fe_queue *q;
	int rc;

	*out = NULL;
	if (par->order > FE_RING_MAX_ORDER || par->max_pages <= BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	q->index = par->index;
	q->backend = par->backend;
	q->persistent = par->persistent;
	q->pages_cap = par->max_pages - BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST;
	q->port = -1;
	rc = xbd_gntshr_open(dom, &q->gs);
	if (!rc)
		rc = xbd_evtchn_open(plat, xbd_domain_id(dom), &q->evt);
	if (!rc)
		rc = fe_gntpool_create(q->gs, q->backend, par->persistent, par->max_pages, &q->pool);
	if (!rc)
		rc = ring_setup(q, par->order, par->abi);
	if (rc) {
		fe_queue_destroy(q);
		return rc;
	}
	q->pages = fe_gntpool_ops(q->pool);
	*out = q;
	return 0;
}

unsigned int fe_queue_ring_refs(struct fe_queue *q, xbd_grant_ref_t *refs)
{
	unsigned int n;

	pthread_mutex_lock(&q->lock);
	n = 1u << q->order;
	memcpy(refs, q->ring_refs, n * sizeof(*refs));
	pthread_mutex_unlock(&q->lock);
	return n;
}

int fe_queue_port(struct fe_queue *q)
{
	int port;

	pthread_mutex_lock(&q->lock);
	port = q->port;
	pthread_mutex_unlock(&q->lock);
	return port;
}

int fe_queue_fd(struct fe_queue *q)
{
	return xbd_evtchn_fd(q->evt);
}

/* ---- bounce pages ---------------------------------------------------------- */

/* Copy between the caller's iovec and the bounce pages. */
static void bounce(struct fe_app_io *a, bool to_pages)
{
	uint64_t left = a->io.len;
	size_t pg = 0, pgoff = 0, v = 0, voff = 0;

	while (left) {
		size_t n = XBD_PAGE_SIZE - pgoff;
		char *page = (char *)a->pages[pg].addr + pgoff;
		char *user = (char *)a->iov[v].iov_base + voff;

		if (n > a->iov[v].iov_len - voff)
			n = a->iov[v].iov_len - voff;
		if (n > left)
			n = left;
		if (to_pages)
			memcpy(page, user, n);
		else
			memcpy(user, page, n);
		left -= n;
		pgoff += n;
		voff += n;
		if (pgoff == XBD_PAGE_SIZE) {
			pg++;
			pgoff = 0;
		}
		if (voff == a->iov[v].iov_len) {
			v++;
			voff = 0;
		}
	}
}

static void pages_release(struct fe_queue *q, struct fe_app_io *a)
{
	unsigned int i;

	if (!a->have_pages)
		return;
	for (i = 0; i < a->npages; i++)
		fe_gntpool_put(q->pool, &a->pages[i]);
	a->have_pages = false;
}

/* All pages or none; -EAGAIN leaves the I/O waiting for completions. */
static int pages_acquire(struct fe_queue *q, struct fe_app_io *a)
{
	unsigned int i;
	int rc;

	for (i = 0; i < a->npages; i++) {
		rc = fe_gntpool_get(q->pool, &a->pages[i]);
		if (rc) {
			while (i--)
				fe_gntpool_put(q->pool, &a->pages[i]);
			return rc;
		}
		a->frags[i].gref = a->pages[i].gref;
	}
	a->have_pages = true;
	if (a->io.op == FE_OP_WRITE)
		bounce(a, true);
	return 0;
}

/* ---- I/O structures ------------------------------------------------------------ */

/* An I/O structure with room for iovcnt pieces, npages bounce pages and
 * nfrags fragments, header zeroed: from the free list when the inline
 * arrays suffice, else malloc.  Lock held (the free list). */
static struct fe_app_io *app_get(struct fe_queue *q, int iovcnt, unsigned int npages,
				 unsigned int nfrags)
{
	bool small = (unsigned int)iovcnt <= APP_INLINE_IOV && npages <= APP_INLINE_PAGES &&
		     nfrags <= APP_INLINE_PAGES;
	struct fe_app_io *a = small ? q->free_ios : NULL;
	size_t extra = 0;

	if (a) {
		q->free_ios = a->done_next;
		q->nfree_ios--;
	} else {
		if (!small)
			extra = (size_t)iovcnt * sizeof(struct iovec) +
				npages * sizeof(struct fe_page) + nfrags * sizeof(struct fe_frag);
		a = malloc(sizeof(*a) + extra);
		if (!a)
			return NULL;
		q->stats.io_allocs++;
	}
	memset(a, 0, offsetof(struct fe_app_io, iov_in));
	a->cached = small;
	if (small) {
		a->iov = a->iov_in;
		a->pages = a->pages_in;
		a->frags = a->frags_in;
	} else {
		a->iov = (struct iovec *)(a + 1);
		a->pages = (struct fe_page *)(a->iov + iovcnt);
		a->frags = (struct fe_frag *)(a->pages + npages);
	}
	return a;
}

/* Give an I/O structure back: to the free list while it holds fewer than
 * the ring's entries, else to free().  Lock held. */
static void app_put(struct fe_queue *q, struct fe_app_io *a)
{
	if (a->cached && q->nfree_ios < q->ring.size) {
		a->done_next = q->free_ios;
		q->free_ios = a;
		q->nfree_ios++;
		return;
	}
	free(a);
}

/* Free the free list down to keep entries.  Lock held. */
static void app_trim(struct fe_queue *q, unsigned int keep)
{
	struct fe_app_io *a;

	while (q->nfree_ios > keep) {
		a = q->free_ios;
		q->free_ios = a->done_next;
		q->nfree_ios--;
		free(a);
	}
}

/* ---- completion -------------------------------------------------------------- */

static void done_push(struct done_list *d, struct fe_app_io *a)
{
	a->done_next = NULL;
	if (d->tail)
		d->tail->done_next = a;
	else
		d->head = a;
	d->tail = a;
	d->n++;
}

/* The I/O is over (status set): copy out, release pages, queue delivery. */
static void finish(struct fe_queue *q, struct fe_app_io *a, int status, struct done_list *d)
{
	a->result = status;
	if (status == 0 && a->io.op == FE_OP_READ && a->npages)
		bounce(a, false);
	pages_release(q, a);
	q->stats.completed++;
	if (status)
		q->stats.errors++;
	if (a->cb) {
		done_push(d, a);
		return;
	}
	a->done_next = NULL;
	if (q->cq_tail)
		q->cq_tail->done_next = a;
	else
		q->cq_head = a;
	q->cq_tail = a;
	__atomic_store_n(&q->cq_len, q->cq_len + 1, __ATOMIC_RELEASE);
	d->n++;
}

/* Run the callbacks of d (lock not held), then give the I/Os back with one
 * lock round.  A callback does not close the queue (queue.h). */
static void deliver(struct fe_queue *q, struct done_list *d)
{
	struct fe_app_io *a, *next;

	if (!d->head)
		return;
	for (a = d->head; a; a = a->done_next)
		a->cb(a->arg, a->result);
	pthread_mutex_lock(&q->lock);
	for (a = d->head; a; a = next) {
		next = a->done_next;
		app_put(q, a);
	}
	pthread_mutex_unlock(&q->lock);
	d->head = d->tail = NULL;
}

unsigned int fe_queue_reap(struct fe_queue *q, struct fe_cqe *cqe, unsigned int n)
{
	unsigned int got = 0;

	if (!n || !__atomic_load_n(&q->cq_len, __ATOMIC_ACQUIRE))
		return 0;       /* no lock round for the caller's last, empty call */
	pthread_mutex_lock(&q->lock);
	while (got < n && q->cq_head) {
		struct fe_app_io *a = q->cq_head;

		q->cq_head = a->done_next;
		if (!q->cq_head)
			q->cq_tail = NULL;
		cqe[got++] = (struct fe_cqe){ a->user_data, a->result };
		app_put(q, a);
	}
	__atomic_store_n(&q->cq_len, q->cq_len - got, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->lock);
	return got;
}

/* ---- wait list and issuing ------------------------------------------------ */

static void wait_append(struct fe_queue *q, struct fe_io *io)
{
	io->next = NULL;
	io->waiting = true;
	if (q->wait_tail)
		q->wait_tail->next = io;
	else
		q->wait_head = io;
	q->wait_tail = io;
}

static void wait_pop(struct fe_queue *q)
{
	struct fe_io *io = q->wait_head;

	q->wait_head = io->next;
	if (!q->wait_head)
		q->wait_tail = NULL;
	io->next = NULL;
	io->waiting = false;
}

/* fe_shadow_recover callback: an in-flight I/O goes back to the front. */
static void requeue_front(struct fe_io *io, void *arg)
{
	struct fe_queue *q = arg;

	if (io->waiting)
		return;   /* partly issued: already on the list, now rewound */
	io->waiting = true;
	io->next = q->wait_head;
	q->wait_head = io;
	if (!q->wait_tail)
		q->wait_tail = io;
}

/* Publish what kick() put on the ring; notify if the backend asked.
 * Lock held. */
static void push(struct fe_queue *q)
{
	if (q->connected && !q->dead && fe_ring_push(&q->ring)) {
		q->stats.notifies++;
		(void)xbd_evtchn_notify(q->evt, (xbd_evtchn_port_t)q->port);
	}
}

/* Put as much waiting I/O on the ring as fits, unpublished.  Called with
 * the lock held. */
static void fill(struct fe_queue *q, struct done_list *d)
{
	struct fe_io *io;
	int rc;

	if (!q->connected || q->dead)
		return;
	while ((io = q->wait_head)) {
		struct fe_app_io *a = app_of(io);

		if (a->npages && !a->have_pages && pages_acquire(q, a))
			break;
		rc = fe_io_issue_one(&q->shadow, &q->lim, &q->ring, &q->pages, io);
		if (rc == 1)
			continue;
		if (rc < 0)
			break;    /* -EAGAIN: wait for completions; -EIO: ring broken */
		wait_pop(q);
		if (io->pending == 0)
			finish(q, a, io->status, d);
	}
}

/* fill() and push(): the immediate path.  Lock held. */
static void kick(struct fe_queue *q, struct done_list *d)
{
	fill(q, d);
	push(q);
}

/* Every in-flight and waiting I/O ends with err.  Lock held. */
static void fail_locked(struct fe_queue *q, int err, struct done_list *d)
{
	struct fe_io *io;

	if (q->shadow.ent)
		fe_shadow_recover(&q->shadow, &q->pages, requeue_front, q);
	while ((io = q->wait_head)) {
		wait_pop(q);
		finish(q, app_of(io), err, d);
	}
}

static void __attribute__((format(printf, 4, 5)))
die_locked(struct fe_queue *q, int err, struct done_list *d, const char *fmt, ...)
{
	va_list ap;

	if (!q->dead) {
		q->dead = err;
		va_start(ap, fmt);
		vsnprintf(q->error, sizeof(q->error), fmt, ap);
		va_end(ap);
	}
	fail_locked(q, q->dead, d);
}

void fe_queue_fail_all(struct fe_queue *q, int err, const char *why)
{
	struct done_list d = { 0 };

	pthread_mutex_lock(&q->lock);
	die_locked(q, err, &d, "%s", why);
	pthread_mutex_unlock(&q->lock);
	deliver(q, &d);
}

/* ---- connect / reset ---------------------------------------------------------- */

int fe_queue_connect(struct fe_queue *q, const struct fe_limits *lim)
{
	struct done_list d = { 0 };
	int rc;

	rc = fe_limits_check(lim);
	if (rc)
		return rc;
	pthread_mutex_lock(&q->lock);
	if (q->dead) {
		rc = q->dead;
		goto out;
	}
	if (q->shadow.ent)
		fe_shadow_recover(&q->shadow, &q->pages, requeue_front, q);
	fe_shadow_destroy(&q->shadow);
	rc = fe_shadow_init(&q->shadow, q->ring.size);
	if (rc)
		goto out;
	q->lim = *lim;
	q->connected = true;
	kick(q, &d);
out:
	pthread_mutex_unlock(&q->lock);
	deliver(q, &d);
	return rc;
}

int fe_queue_reset(struct fe_queue *q, unsigned int order, enum fe_abi abi)
{
	struct done_list d = { 0 };
	int rc;

	if (order > FE_RING_MAX_ORDER)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	rc = q->dead;
	if (rc)
		goto out;
	if (q->shadow.ent)
		fe_shadow_recover(&q->shadow, &q->pages, requeue_front, q);
	fe_shadow_destroy(&q->shadow);
	q->connected = false;
	ring_teardown(q);
	rc = ring_setup(q, order, abi);
	if (rc)
		die_locked(q, rc, &d, "queue %u: cannot set up a new ring: %s", q->index,
			   strerror(-rc));
	app_trim(q, q->ring.size);      /* a smaller ring keeps fewer */
out:
	pthread_mutex_unlock(&q->lock);
	deliver(q, &d);
	return rc;
}

void fe_queue_destroy(struct fe_queue *q)
{
	struct fe_cqe c;

	if (!q)
		return;
	fe_queue_fail_all(q, -ENODEV, "queue closed");
	while (fe_queue_reap(q, &c, 1))
		;
	app_trim(q, 0);
	fe_shadow_destroy(&q->shadow);
	fe_gntpool_destroy(q->pool);
	if (q->evt)
		ring_teardown(q);
	xbd_evtchn_close(q->evt);
	if (q->gs)
		xbd_gntshr_close(q->gs);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* ---- submit / process ------------------------------------------------------------ */

/* The I/O structure for a submission, its arrays filled in (lock held):
 * the iovec copy and, for a bounced read or write, one fragment per bounce
 * page; direct: fragments of caller buffers already granted (no bounce). */
static struct fe_app_io *app_make(struct fe_queue *q, enum fe_op op, uint64_t offset,
				  uint64_t len, const struct iovec *iov, int iovcnt,
				  const struct fe_frag *direct, unsigned int ndirect)
{
	bool rw = op == FE_OP_READ || op == FE_OP_WRITE;
	unsigned int npages = rw && !direct ?
			      (unsigned int)((len + XBD_PAGE_SIZE - 1) / XBD_PAGE_SIZE) : 0;
	unsigned int nfrags = direct ? ndirect : npages, i;
	struct fe_app_io *a = app_get(q, iovcnt, npages, nfrags);

	if (!a)
		return NULL;
	if (iovcnt)
		memcpy(a->iov, iov, (size_t)iovcnt * sizeof(*iov));
	a->iovcnt = iovcnt;
	a->npages = npages;
	if (direct)
		memcpy(a->frags, direct, nfrags * sizeof(*direct));
	for (i = 0; i < npages; i++) {
		uint64_t left = len - (uint64_t)i * XBD_PAGE_SIZE;

		a->frags[i] = (struct fe_frag){ .len = (uint16_t)(left < XBD_PAGE_SIZE ?
								   left : XBD_PAGE_SIZE) };
	}
	a->io = (struct fe_io){ .op = op, .offset = offset, .len = len,
				.frags = nfrags ? a->frags : NULL, .nfrags = nfrags };
	return a;
}

/* Arguments that do not depend on the negotiated limits. */
static int args_ok(struct fe_queue *q, enum fe_op op, uint64_t len,
		   const struct iovec *iov, int iovcnt, bool direct)
{
	bool rw = op == FE_OP_READ || op == FE_OP_WRITE;
	uint64_t sum = 0;
	int i;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov) || (!rw && iovcnt))
		return -EINVAL;
	for (i = 0; i < iovcnt; i++)
		sum += iov[i].iov_len;
	if (rw && sum != len)
		return -EINVAL;
	/* keep room for the indirect pages of the I/O's own requests */
	if (rw && !direct && len / XBD_PAGE_SIZE + 1 > q->pages_cap)
		return -E2BIG;
	return 0;
}

/* fe_queue_submit and fe_queue_submit_deferred (now: push at once). */
static int submit(struct fe_queue *q, enum fe_op op, uint64_t offset, uint64_t len,
		  const struct iovec *iov, int iovcnt, const struct fe_frag *direct,
		  unsigned int ndirect, fe_app_cb cb, void *arg, uint64_t user_data, bool now)
{
	struct done_list d = { 0 };
	struct fe_app_io *a = NULL;
	int rc;

	rc = args_ok(q, op, len, iov, iovcnt, direct != NULL);
	if (rc)
		return rc;
	pthread_mutex_lock(&q->lock);
	if (q->dead)
		rc = q->dead;
	else if (!q->lim.sector_size)
		rc = -ENOTCONN;
	else if (!(a = app_make(q, op, offset, len, iov, iovcnt, direct, ndirect)))
		rc = -ENOMEM;
	else
		rc = fe_io_prepare(&q->lim, &a->io);
	if (rc)
		goto out;
	a->cb = cb;
	a->arg = arg;
	a->user_data = user_data;
	q->stats.submitted++;
	wait_append(q, &a->io);
	fill(q, &d);
	if (now)
		push(q);
out:
	if (rc && a)
		app_put(q, a);
	pthread_mutex_unlock(&q->lock);
	deliver(q, &d);
	return rc;
}

int fe_queue_submit(struct fe_queue *q, enum fe_op op, uint64_t offset, uint64_t len,
		    const struct iovec *iov, int iovcnt, const struct fe_frag *direct,
		    unsigned int ndirect, fe_app_cb cb, void *arg, uint64_t user_data)
{
	return submit(q, op, offset, len, iov, iovcnt, direct, ndirect, cb, arg, user_data,
		      true);
}

int fe_queue_submit_deferred(struct fe_queue *q, enum fe_op op, uint64_t offset,
			     uint64_t len, const struct iovec *iov, int iovcnt,
			     const struct fe_frag *direct, unsigned int ndirect,
			     uint64_t user_data)
{
	return submit(q, op, offset, len, iov, iovcnt, direct, ndirect, NULL, NULL, user_data,
		      false);
}

void fe_queue_commit(struct fe_queue *q)
{
	pthread_mutex_lock(&q->lock);
	push(q);
	pthread_mutex_unlock(&q->lock);
}

/* Consume every response; false when the ring broke. Lock held.
 * *n counts the responses. */
static bool reap_ring(struct fe_queue *q, struct done_list *d, unsigned int *n)
{
	struct fe_rsp rsp;
	struct fe_io *io;
	int rc;

	do {
		while ((rc = fe_ring_fetch_rsp(&q->ring, &rsp)) == 1) {
			(*n)++;
			io = fe_io_complete(&q->shadow, &q->lim, &q->pages, &rsp);
			if (io)
				finish(q, app_of(io), io->status, d);
		}
		if (rc < 0)
			return false;
	} while (fe_ring_final_check(&q->ring));
	return true;
}

int fe_queue_process(struct fe_queue *q)
{
	return fe_queue_process_polled(q, true);
}

bool fe_queue_rsp_waiting(struct fe_queue *q)
{
	bool r;

	pthread_mutex_lock(&q->lock);   /* a reset may replace the ring */
	r = q->connected && !q->dead && fe_ring_rsp_waiting(&q->ring);
	pthread_mutex_unlock(&q->lock);
	return r;
}

int fe_queue_process_polled(struct fe_queue *q, bool signalled)
{
	struct done_list d = { 0 };
	unsigned int events = 0, rsps = 0;
	bool broke = false;
	char why[sizeof(q->error)];
	int rc;

	while (signalled && xbd_evtchn_pending(q->evt) >= 0)
		events++;
	pthread_mutex_lock(&q->lock);
	q->stats.events += events;
	if (!q->dead && q->connected) {
		if (reap_ring(q, &d, &rsps))
			kick(q, &d);
		/* XSA-391: count events that brought nothing */
		if (events && !rsps)
			q->stats.spurious++;
		broke = fe_ring_is_broken(&q->ring);
		if (broke) {
			die_locked(q, -EIO, &d, "queue %u: backend broke the ring: %s",
				   q->index, fe_ring_error(&q->ring));
			memcpy(why, q->error, sizeof(why));
		}
	}
	/* late EOI: unmask only once drained, never for a broken ring */
	if (events && !q->dead && q->port >= 0)
		(void)xbd_evtchn_unmask(q->evt, (xbd_evtchn_port_t)q->port);
	rc = q->dead ? q->dead : d.n;
	pthread_mutex_unlock(&q->lock);
	deliver(q, &d);
	if (broke && q->on_broken)
		q->on_broken(q->on_broken_arg, -EIO, why);
	return rc;
}

void fe_queue_get_stats(struct fe_queue *q, struct fe_queue_stats *out)
{
	pthread_mutex_lock(&q->lock);
	*out = q->stats;
	out->io_cached = q->nfree_ios;
	fe_gntpool_get_stats(q->pool, &out->pool);
	pthread_mutex_unlock(&q->lock);
}

void fe_queue_set_sectors(struct fe_queue *q, uint64_t sectors)
{
	pthread_mutex_lock(&q->lock);
	if (sectors % (q->lim.sector_size / 512) == 0)
		q->lim.sectors = sectors;
	pthread_mutex_unlock(&q->lock);
}

void fe_queue_notify(struct fe_queue *q)
{
	pthread_mutex_lock(&q->lock);
	if (q->connected && !q->dead && q->port >= 0)
		(void)xbd_evtchn_notify(q->evt, (xbd_evtchn_port_t)q->port);
	pthread_mutex_unlock(&q->lock);
}

int fe_queue_set_persistent(struct fe_queue *q, bool persistent)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = fe_gntpool_set_persistent(q->pool, persistent);
	if (!rc)
		q->persistent = persistent;
	pthread_mutex_unlock(&q->lock);
	return rc;
}
