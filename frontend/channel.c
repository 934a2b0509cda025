/* SPDX-License-Identifier: MIT */
/*
 * One queue's channel: ring, request table, descriptors, grant pool and
 * limits in one object.  See channel.h for the rules.
 *
 * A descriptor (struct fe_io) is one application request.  Its states:
 *   free      on c->free;
 *   queued    on the FIFO c->wait (not fully on the ring): it has its
 *             bounce pages (have_pages) or waits for them (FIFO order:
 *             nobody jumps a request that waits for pages);
 *   staged    taken off the FIFO by a thread that got it its pages under
 *             the lock: that thread copies the write's data in after the
 *             lock and puts it back at the FIFO's head;
 *   issued    every piece on the ring: only the request table knows it;
 *   done      finished (status set), on a thread's local work list: its
 *             read data is copied out after the lock, then under the lock
 *             its pages go back and it becomes free (callback) or an
 *             entry of the completion queue c->cq, free once reaped.
 * Recovery and death take every issued request back to the FIFO first,
 * so each descriptor is always in exactly one place.
 *
 * Lock rounds: submit takes one to get descriptors and pages, one to
 * queue them (the copies happen between); commit one; a reap one to take
 * responses and one more, after copies and before callbacks, to give
 * pages and descriptors back.  A zero-copy request copies nothing.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/cpu.h"
#include "frontend/channel.h"

#define NR_IOS_MIN 128u           /* descriptors per channel, at least */
#define IO_INLINE_IOV 4u
#define IO_INLINE_FRAGS 16u       /* 64 KiB bounced, or 16 pieces in place */
#define IO_MAX_DIRECT_FRAGS 4096u /* more pieces than this are bounced */
#define SUBMIT_BATCH 16u
#define DONE_BATCH 32u
#define SPIN_MIN_NS 2000u         /* an adapted spin is never shorter */
/* Spin only with at most this many requests on the ring: with more, the
 * backend is busy, its responses come in batches (a wake-up per batch,
 * not per request) and a spinning frontend takes a CPU it needs
 * (measured: Documentation/performance.md, "Polling"). */
#define SPIN_MAX_INFLIGHT 8u

struct fe_io {
	/* the descriptor as submitted */
	enum xbdfront_op op;
	uint64_t offset, len, user_data;
	void (*done)(const struct xbdfront_cqe *cqe);
	/* the data: in place (frags of the caller's grants, npages 0) or
	 * bounced (one frag per page; iov is the caller's array, copied) */
	struct iovec *iov;
	unsigned int iovcnt;
	struct fe_frag *frags;
	unsigned int nfrags;
	struct fe_page *pages;
	unsigned int npages;
	bool have_pages;
	bool copied;                  /* a read's data is out */
	/* issuing (under the lock) */
	unsigned int next_frag;       /* first fragment not yet on the ring */
	uint64_t next_sector;         /* its 512-byte sector */
	bool issued_all, waiting, requeued;
	unsigned int pending;         /* ring requests unanswered */
	int status;                   /* first error, 0 so far */
	struct fe_io *next;           /* free list, FIFO, cq or a work list */
	/* storage: inline, or grown once for a larger request and kept */
	unsigned int cap_iov, cap_frags;
	struct iovec iov_in[IO_INLINE_IOV];
	struct fe_frag frags_in[IO_INLINE_FRAGS];
	struct fe_page pages_in[IO_INLINE_FRAGS];
};

/* One entry of the request table per ring id (Linux blkfront's shadow). */
struct fe_rq {
	struct fe_io *io;             /* NULL while the id is free */
	uint8_t op;                   /* what its response must carry (BLKIF_OP_*) */
	uint32_t nsect;               /* 512-byte sectors carried */
	unsigned int n_ind;
	struct fe_page ind[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint32_t next_free;
};

#define RQ_NONE UINT32_MAX

struct fe_chan {
	/* set at create, then read-only */
	unsigned int index;
	xbd_domid_t backend;
	unsigned int pages_cap;       /* bounce pages one request may take */
	unsigned int poll_ns_max;     /* 0: never spin */
	const struct fe_bufs *bufs;
	struct xbd_gntshr *gs;        /* owned */
	struct xbd_evtchn *evt;       /* owned */
	int wake_fd;                  /* eventfd, owned: failures, freed descriptors */
	void (*on_broken)(void *arg, int err, const char *why);
	void *on_broken_arg;
	struct fe_io *ios;            /* nr_ios descriptors, owned */
	unsigned int nr_ios;
	/* Test only (XBDFRONT_TEST_EVENTS_ONLY=1, Documentation/frontend.md):
	 * look at the ring only after taking an event, as Linux xen-blkfront
	 * does (no poll, no re-check on a timeout), so that a notification a
	 * backend forgot hangs instead of costing a timeout. */
	bool events_only;

	/* atomics, read without the lock (written under it) */
	int dead;                     /* 0, or -errno: the channel refuses everything */
	char error[160];              /* why: written once, before dead (release) */
	unsigned int features;        /* FE_FEAT_* */
	unsigned int sector_size;     /* for the zero-copy lookup; 0 before connect */
	unsigned int inflight;        /* ring requests unanswered */
	unsigned int cq_len;          /* entries on cq */
	bool need_unmask;             /* an event was taken: unmask once drained */
	unsigned int waiters;         /* submitters waiting for a descriptor */
	/* the spin (fe_chan_wait): where to look, who looks; see ring_setup */
	const uint32_t *spin_prod;    /* the live ring's rsp_prod, or &spin_idle */
	uint32_t spin_idle;
	uint32_t spin_cons;           /* rsp_cons after the last reap */
	unsigned int spinners;
	unsigned int spin_ns;         /* the adaptive window (a heuristic: racy) */
	unsigned int spin_skips;
	uint64_t nspins, nspin_hits, nevents, nwaits;   /* statistics */

	pthread_mutex_t lock;         /* protects everything below */
	enum fe_abi abi;
	unsigned int order;
	bool persistent;
	void *ring_mem;               /* 2^order shared pages */
	xbd_grant_ref_t ring_refs[1u << FE_RING_MAX_ORDER];
	int port;                     /* local event-channel port, -1 when none */
	struct fe_ring ring;
	struct fe_rq *rq;             /* ring.size entries */
	uint32_t rq_free;             /* LIFO of free ids */
	unsigned int rq_nfree;
	struct fe_limits lim;
	struct fe_gntpool *pool;
	bool connected;
	unsigned int sleepers;        /* fe_chan_wait callers asleep on the event channel */
	bool disarmed;                /* a poller moved rsp_event away (fe_ring_disarm) */
	struct fe_io *free;           /* free descriptors (LIFO) */
	unsigned int nfree;
	struct fe_io *wait_head, *wait_tail;
	unsigned int need_pages;      /* queued requests without their pages */
	struct fe_io *cq_head, *cq_tail;
	struct fe_chan_stats stats;
	/* used since create or fe_chan_recycle: ids below rq_high, the
	 * descriptors below io_high (both stacks hand out from the bottom) */
	uint32_t rq_high;
	unsigned int io_high;
};

/* What a lock holder leaves for after the lock (see the file top). */
struct work {
	struct fe_io *done_head, *done_tail;
	struct fe_io *staged;
	struct xbdfront_cqe *cqe;     /* the caller's entries, may be NULL */
	unsigned int ncqe, maxcqe;
	unsigned int delivered;       /* callbacks run + entries queued */
	unsigned int ncb;
	struct {
		void (*fn)(const struct xbdfront_cqe *cqe);
		struct xbdfront_cqe e;
	} cb[DONE_BATCH];
	bool notify;                  /* the backend asked for an event */
	int port;
};

static bool is_rw(enum xbdfront_op op)
{
	return op == XBDFRONT_READ || op == XBDFRONT_WRITE;
}

/* ---- the request table -------------------------------------------------- */

static int rq_alloc(struct fe_chan *c, unsigned int size)
{
	unsigned int i;

	free(c->rq);
	c->rq = calloc(size, sizeof(*c->rq));
	if (!c->rq)
		return -ENOMEM;
	for (i = 0; i < size; i++)
		c->rq[i].next_free = i + 1 < size ? i + 1 : RQ_NONE;
	c->rq_free = 0;     /* id 0 first */
	c->rq_nfree = size;
	c->rq_high = 0;
	return 0;
}

static uint32_t rq_get(struct fe_chan *c)
{
	uint32_t id = c->rq_free;

	c->rq_free = c->rq[id].next_free;
	c->rq[id].next_free = RQ_NONE;
	c->rq_nfree--;
	if (id >= c->rq_high)
		c->rq_high = id + 1;
	return id;
}

static void rq_put(struct fe_chan *c, uint32_t id)
{
	struct fe_rq *r = &c->rq[id];

	while (r->n_ind)
		fe_gntpool_put(c->pool, &r->ind[--r->n_ind]);
	r->io = NULL;
	r->next_free = c->rq_free;
	c->rq_free = id;
	c->rq_nfree++;
	__atomic_store_n(&c->inflight, c->inflight - 1, __ATOMIC_RELAXED);
}

/* ---- ring and event channel ---------------------------------------------- */

/* Share 2^order fresh pages, attach the ring, make its request table,
 * bind a fresh port; the spin looks at the new rsp_prod from now on. */
static int ring_setup(struct fe_chan *c, unsigned int order, enum fe_abi abi)
{
	int rc;

	rc = xbd_gntshr_share_pages(c->gs, c->backend, 1u << order, c->ring_refs, true,
				    &c->ring_mem);
	if (rc)
		return rc;
	c->order = order;
	c->abi = abi;
	rc = fe_ring_init(&c->ring, c->ring_mem, order, abi);
	if (!rc)
		rc = rq_alloc(c, c->ring.size);
	if (rc)
		return rc;
	rc = xbd_evtchn_bind_unbound_port(c->evt, c->backend);
	if (rc < 0)
		return rc;
	c->port = rc;
	c->disarmed = false;          /* a fresh ring is armed (rsp_event 1) */
	__atomic_store_n(&c->spin_cons, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->spin_prod, &((struct xbd_blkif_sring_hdr *)c->ring_mem)->rsp_prod,
			 __ATOMIC_SEQ_CST);
	return 0;
}

/* Undo ring_setup.  Spinners are sent to spin_idle and waited out (a
 * spin is bounded) before the pages go; a ring the backend still maps
 * stays with the sharing handle (freed when it closes), never reused. */
static void ring_teardown(struct fe_chan *c)
{
	__atomic_store_n(&c->spin_prod, &c->spin_idle, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&c->spinners, __ATOMIC_SEQ_CST))
		xbd_cpu_relax();
	fe_ring_destroy(&c->ring);
	if (c->port >= 0)
		(void)xbd_evtchn_unbind(c->evt, (xbd_evtchn_port_t)c->port);
	c->port = -1;
	if (c->ring_mem)
		(void)xbd_gntshr_unshare(c->gs, c->ring_mem, 1u << c->order);
	c->ring_mem = NULL;
}

/* ---- descriptors ------------------------------------------------------------ */

static struct fe_io *io_pop(struct fe_chan *c)
{
	struct fe_io *io = c->free;

	if (io) {
		c->free = io->next;
		c->nfree--;
		if ((unsigned int)(io - c->ios) >= c->io_high)
			c->io_high = (unsigned int)(io - c->ios) + 1;
	}
	return io;
}

static void io_push(struct fe_chan *c, struct fe_io *io)
{
	io->next = c->free;
	c->free = io;
	c->nfree++;
}

/* Room for nfrags fragments (and as many pages) and iovcnt pieces: the
 * inline arrays, or arrays grown once and kept with the descriptor. */
static int io_room(struct fe_chan *c, struct fe_io *io, unsigned int nfrags, unsigned int iovcnt)
{
	if (nfrags > io->cap_frags) {
		struct fe_frag *f = malloc(nfrags * sizeof(*f));
		struct fe_page *p = malloc(nfrags * sizeof(*p));

		if (!f || !p) {
			free(f);
			free(p);
			return -ENOMEM;
		}
		if (io->frags != io->frags_in) {
			free(io->frags);
			free(io->pages);
		}
		io->frags = f;
		io->pages = p;
		io->cap_frags = nfrags;
		c->stats.grows++;
	}
	if (iovcnt > io->cap_iov) {
		struct iovec *v = malloc(iovcnt * sizeof(*v));

		if (!v)
			return -ENOMEM;
		if (io->iov != io->iov_in)
			free(io->iov);
		io->iov = v;
		io->cap_iov = iovcnt;
		c->stats.grows++;
	}
	return 0;
}

static void io_free_storage(struct fe_io *io)
{
	if (io->frags != io->frags_in) {
		free(io->frags);
		free(io->pages);
	}
	if (io->iov != io->iov_in)
		free(io->iov);
}

/* A zeroed descriptor as ios_create makes it: inline arrays. */
static void io_init(struct fe_io *io)
{
	io->frags = io->frags_in;
	io->pages = io->pages_in;
	io->iov = io->iov_in;
	io->cap_frags = IO_INLINE_FRAGS;
	io->cap_iov = IO_INLINE_IOV;
}

static int ios_create(struct fe_chan *c, unsigned int n)
{
	unsigned int i;

	c->ios = calloc(n, sizeof(*c->ios));
	if (!c->ios)
		return -ENOMEM;
	c->nr_ios = n;
	for (i = n; i-- > 0;) {
		io_init(&c->ios[i]);
		io_push(c, &c->ios[i]);
	}
	return 0;
}

/* ---- bounce pages ------------------------------------------------------------ */

/* Copy between the caller's iovec and the bounce pages (no lock). */
static void bounce(struct fe_io *io, bool to_pages)
{
	uint64_t left = io->len;
	size_t pg = 0, pgoff = 0, v = 0, voff = 0;

	while (left) {
		size_t n = XBD_PAGE_SIZE - pgoff;
		char *page = (char *)io->pages[pg].addr + pgoff;
		char *user = (char *)io->iov[v].iov_base + voff;

		if (n > io->iov[v].iov_len - voff)
			n = io->iov[v].iov_len - voff;
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
		if (voff == io->iov[v].iov_len) {
			v++;
			voff = 0;
		}
	}
}

/* Every page of io or none, keeping the indirect reserve so the FIFO's
 * head can always be issued once the ring drains.  Lock held. */
static int pages_get(struct fe_chan *c, struct fe_io *io)
{
	unsigned int i;

	if (fe_gntpool_available(c->pool) < io->npages + BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST)
		return -EAGAIN;
	for (i = 0; i < io->npages; i++) {
		if (fe_gntpool_get(c->pool, &io->pages[i])) {
			while (i--)
				fe_gntpool_put(c->pool, &io->pages[i]);
			return -EAGAIN;
		}
		io->frags[i].gref = io->pages[i].gref;
	}
	io->have_pages = true;
	return 0;
}

static void pages_put(struct fe_chan *c, struct fe_io *io)
{
	unsigned int i;

	if (!io->have_pages)
		return;
	for (i = 0; i < io->npages; i++)
		fe_gntpool_put(c->pool, &io->pages[i]);
	io->have_pages = false;
}

/* ---- the FIFO and the work lists ----------------------------------------- */

static bool lacks_pages(const struct fe_io *io)
{
	return io->npages && !io->have_pages;
}

static void wait_append(struct fe_chan *c, struct fe_io *io)
{
	io->next = NULL;
	io->waiting = true;
	c->need_pages += lacks_pages(io);
	if (c->wait_tail)
		c->wait_tail->next = io;
	else
		c->wait_head = io;
	c->wait_tail = io;
}

static void wait_push_front(struct fe_chan *c, struct fe_io *io)
{
	io->waiting = true;
	c->need_pages += lacks_pages(io);
	io->next = c->wait_head;
	c->wait_head = io;
	if (!c->wait_tail)
		c->wait_tail = io;
}

static void wait_pop(struct fe_chan *c)
{
	struct fe_io *io = c->wait_head;

	c->wait_head = io->next;
	if (!c->wait_head)
		c->wait_tail = NULL;
	io->next = NULL;
	io->waiting = false;
	c->need_pages -= lacks_pages(io);
}

static void done_add(struct work *w, struct fe_io *io, int status)
{
	if (status && !io->status)
		io->status = status;
	io->next = NULL;
	if (w->done_tail)
		w->done_tail->next = io;
	else
		w->done_head = io;
	w->done_tail = io;
}

/* ---- issuing ------------------------------------------------------------------- */

/*
 * Put the next piece of io on the ring (unpublished).  1: a request went
 * on; 0: io has nothing more to issue (a flush or discard whose feature
 * went away fails here); -EAGAIN: ring, ids or indirect pages short;
 * -EIO: the ring is broken.  Lock held.
 */
static int issue_one(struct fe_chan *c, struct fe_io *io)
{
	struct fe_page ind[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	unsigned int count = 0, n_ind = 0, i;
	uint64_t nsect = 0;
	struct fe_req req;
	struct fe_rq *r;
	uint32_t id;
	int rc;

	if (fe_ring_is_broken(&c->ring))
		return -EIO;
	if (io->issued_all || io->status) {
		io->issued_all = true;
		return 0;
	}
	if (!is_rw(io->op) && (rc = fe_op_check(&c->lim, io->op, io->offset, io->len))) {
		io->status = rc;
		io->issued_all = true;
		return 0;
	}
	if (!fe_ring_free_slots(&c->ring) || !c->rq_nfree)
		return -EAGAIN;
	if (is_rw(io->op)) {
		count = io->nfrags - io->next_frag;
		if (count > fe_max_segs(&c->lim))
			count = fe_max_segs(&c->lim);
		for (i = 0; i < count; i++)
			nsect += io->frags[io->next_frag + i].len / 512;
	} else if (io->op == XBDFRONT_DISCARD || io->op == XBDFRONT_SECURE_DISCARD) {
		nsect = io->len / 512;
	}
	if (count > BLKIF_MAX_SEGMENTS_PER_REQUEST) {
		n_ind = xbd_blkif_indirect_pages(count);
		for (i = 0; i < n_ind; i++) {
			if (fe_gntpool_get(c->pool, &ind[i])) {
				while (i--)
					fe_gntpool_put(c->pool, &ind[i]);
				return -EAGAIN;
			}
		}
	}
	id = rq_get(c);
	fe_build_req(&c->lim, io->op, io->next_sector, nsect, io->frags + io->next_frag, count,
		     id, ind, &req);
	rc = fe_ring_put_req(&c->ring, &req);
	r = &c->rq[id];
	r->io = io;             /* so rq_put gives the pages back on failure */
	r->n_ind = n_ind;
	memcpy(r->ind, ind, n_ind * sizeof(ind[0]));
	__atomic_store_n(&c->inflight, c->inflight + 1, __ATOMIC_RELAXED);
	if (rc) {
		rq_put(c, id);
		return rc == -EBUSY ? -EAGAIN : rc;
	}
	r->op = req.operation == BLKIF_OP_INDIRECT ? req.indirect_op : req.operation;
	r->nsect = (uint32_t)nsect;
	io->pending++;
	io->next_frag += count;
	if (is_rw(io->op))
		io->next_sector += nsect;
	io->issued_all = !is_rw(io->op) || io->next_frag == io->nfrags;
	return 1;
}

/* Put as much of the FIFO on the ring as fits, unpublished.  A request
 * that now gets its pages and is a write is staged (its data is copied
 * after the lock); one that fails here is done.  Lock held. */
static void fill(struct fe_chan *c, struct work *w)
{
	struct fe_io *io;
	int rc;

	while ((io = c->wait_head)) {
		if (c->dead) {
			wait_pop(c);
			done_add(w, io, c->dead);
			continue;
		}
		if (!c->connected)
			return;
		if (lacks_pages(io)) {
			if (pages_get(c, io))
				return;       /* FIFO: the rest waits behind it */
			c->need_pages--;
			if (io->op == XBDFRONT_WRITE) {
				wait_pop(c);
				io->next = w->staged;
				w->staged = io;
				continue;
			}
		}
		rc = issue_one(c, io);
		if (rc == 1)
			continue;
		if (rc < 0)
			return;       /* -EAGAIN: wait for completions; -EIO: broken */
		wait_pop(c);
		if (io->pending == 0)
			done_add(w, io, 0);
	}
}

/* Publish what is on the ring; the notification goes after the lock.
 * Lock held. */
static void push(struct fe_chan *c, struct work *w)
{
	if (!c->connected || c->dead)
		return;
	if (c->ring.req_prod_pvt != c->ring.req_pushed)
		c->stats.commits++;
	if (fe_ring_push(&c->ring)) {
		c->stats.notifies++;
		w->notify = true;
		w->port = c->port;
	}
}

/* ---- completion ------------------------------------------------------------- */

/* Whether rsp may be used: its id in range and in flight, its operation
 * the one issued (Linux blkfront's checks since XSA-376/391).  A bad
 * one breaks the ring.  Lock held. */
static bool rsp_ok(struct fe_chan *c, const struct fe_rsp *rsp)
{
	if (rsp->id >= c->ring.size) {
		fe_ring_break(&c->ring, "response id %llu out of range (ring size %u)",
			      (unsigned long long)rsp->id, c->ring.size);
		return false;
	}
	if (!c->rq[rsp->id].io) {
		fe_ring_break(&c->ring, "response id %llu is not in flight",
			      (unsigned long long)rsp->id);
		return false;
	}
	if (c->rq[rsp->id].op != rsp->operation) {
		fe_ring_break(&c->ring, "response id %llu has operation %u, request was %u",
			      (unsigned long long)rsp->id, rsp->operation, c->rq[rsp->id].op);
		return false;
	}
	return true;
}

static void features_publish(struct fe_chan *c)
{
	unsigned int f = (c->lim.flush ? FE_FEAT_FLUSH : 0) | (c->lim.barrier ? FE_FEAT_BARRIER : 0) |
			 (c->lim.discard ? FE_FEAT_DISCARD : 0) |
			 (c->lim.discard_secure ? FE_FEAT_SECURE : 0);

	__atomic_store_n(&c->features, f, __ATOMIC_RELAXED);
}

/* Account one valid response.  Lock held. */
static void complete_one(struct fe_chan *c, const struct fe_rsp *rsp, struct work *w)
{
	struct fe_rq *r = &c->rq[rsp->id];
	struct fe_io *io = r->io;
	int st = fe_rsp_status(rsp->status);

	if (st == -EOPNOTSUPP) {
		fe_limits_drop(&c->lim, r->op);
		features_publish(c);
	}
	if (st && !io->status)
		io->status = st;
	rq_put(c, (uint32_t)rsp->id);
	io->pending--;
	if (io->pending == 0 && io->issued_all && !io->waiting)
		done_add(w, io, 0);
}

/* Consume every response; -EIO when the ring broke.  *n counts them.
 * Lock held. */
static int take_responses(struct fe_chan *c, struct work *w, unsigned int *n)
{
	struct fe_rsp rsp;
	int rc;

	do {
		while ((rc = fe_ring_fetch_rsp(&c->ring, &rsp)) == 1) {
			if (!rsp_ok(c, &rsp))
				return -EIO;
			complete_one(c, &rsp, w);
			(*n)++;
		}
		if (rc < 0)
			return rc;
		/* a poller disarmed rsp_event: it arms it again itself */
	} while (c->disarmed ? fe_ring_rsp_waiting(&c->ring) : fe_ring_final_check(&c->ring));
	__atomic_store_n(&c->spin_cons, c->ring.rsp_cons, __ATOMIC_RELAXED);
	return 0;
}

/* Move completion-queue entries to the caller's array.  Lock held. */
static void cq_take(struct fe_chan *c, struct work *w)
{
	unsigned int got = 0;

	while (w->ncqe < w->maxcqe && c->cq_head) {
		struct fe_io *io = c->cq_head;

		c->cq_head = io->next;
		if (!c->cq_head)
			c->cq_tail = NULL;
		w->cqe[w->ncqe++] = (struct xbdfront_cqe){ io->user_data, io->status };
		io_push(c, io);
		got++;
	}
	if (got)
		__atomic_store_n(&c->cq_len, c->cq_len - got, __ATOMIC_RELEASE);
}

static void cq_append(struct fe_chan *c, struct fe_io *io)
{
	io->next = NULL;
	if (c->cq_tail)
		c->cq_tail->next = io;
	else
		c->cq_head = io;
	c->cq_tail = io;
	__atomic_store_n(&c->cq_len, c->cq_len + 1, __ATOMIC_RELEASE);
}

/*
 * The lock round after the copies: staged writes back to the FIFO's
 * head, finished requests give their pages back and become callbacks to
 * run (their descriptors free at once) or completion-queue entries;
 * entries go to the caller; then fill and publish again.  Lock held.
 */
static void settle(struct fe_chan *c, struct work *w)
{
	unsigned int freed = c->nfree;
	struct fe_io *io;

	while ((io = w->staged)) {
		w->staged = io->next;
		wait_push_front(c, io);
	}
	while (w->ncb < DONE_BATCH && (io = w->done_head)) {
		w->done_head = io->next;
		if (!w->done_head)
			w->done_tail = NULL;
		pages_put(c, io);
		c->stats.completed++;
		c->stats.errors += io->status != 0;
		w->delivered++;
		if (io->done) {
			w->cb[w->ncb].fn = io->done;
			w->cb[w->ncb++].e = (struct xbdfront_cqe){ io->user_data, io->status };
			io_push(c, io);
		} else {
			cq_append(c, io);
		}
	}
	cq_take(c, w);
	fill(c, w);
	push(c, w);
	if (c->nfree > freed && __atomic_load_n(&c->waiters, __ATOMIC_RELAXED)) {
		uint64_t one = 1;

		if (write(c->wake_fd, &one, sizeof(one)) < 0) {
			/* an eventfd below its maximum does not fail */
		}
	}
}

/* What a lock holder left: notify, copy, settle, run callbacks, until
 * nothing is left.  Lock not held. */
static void finish_work(struct fe_chan *c, struct work *w)
{
	struct fe_io *io;
	unsigned int i;

	for (;;) {
		if (w->notify) {
			(void)xbd_evtchn_notify(c->evt, (xbd_evtchn_port_t)w->port);
			w->notify = false;
		}
		for (i = 0; i < w->ncb; i++)
			w->cb[i].fn(&w->cb[i].e);
		w->ncb = 0;
		if (!w->done_head && !w->staged)
			return;
		for (io = w->done_head; io; io = io->next)
			if (!io->copied && !io->status && io->op == XBDFRONT_READ && io->npages) {
				bounce(io, false);
				io->copied = true;
			}
		for (io = w->staged; io; io = io->next)
			bounce(io, true);
		pthread_mutex_lock(&c->lock);
		settle(c, w);
		pthread_mutex_unlock(&c->lock);
	}
}

/* ---- recovery and death ---------------------------------------------------- */

/* Every issued request comes off the ring: ids and indirect pages free,
 * each descriptor rewound once and back at the FIFO's head.  Lock held. */
static void recover(struct fe_chan *c)
{
	unsigned int id;

	for (id = 0; c->rq && id < c->ring.size; id++) {
		struct fe_io *io = c->rq[id].io;

		if (!io)
			continue;
		rq_put(c, id);
		if (io->requeued)
			continue;
		io->requeued = true;
		io->next_frag = 0;
		io->next_sector = io->offset / 512;
		io->issued_all = false;
		io->pending = 0;
		io->status = 0;
		if (!io->waiting)
			wait_push_front(c, io);
	}
	for (struct fe_io *io = c->wait_head; io; io = io->next)
		io->requeued = false;
}

static void __attribute__((format(printf, 4, 5)))
die_locked(struct fe_chan *c, int err, struct work *w, const char *fmt, ...)
{
	uint64_t one = 1;
	va_list ap;

	if (!c->dead) {
		va_start(ap, fmt);
		vsnprintf(c->error, sizeof(c->error), fmt, ap);
		va_end(ap);
		__atomic_store_n(&c->dead, err, __ATOMIC_RELEASE);
		if (write(c->wake_fd, &one, sizeof(one)) < 0) {
			/* an eventfd below its maximum does not fail */
		}
	}
	recover(c);
	fill(c, w);             /* dead: every queued request is done */
}

void fe_chan_fail(struct fe_chan *c, int err, const char *why)
{
	struct work w = { 0 };

	pthread_mutex_lock(&c->lock);
	die_locked(c, err, &w, "%s", why);
	pthread_mutex_unlock(&c->lock);
	finish_work(c, &w);
}

int fe_chan_error(struct fe_chan *c, char *why, size_t len)
{
	int err = __atomic_load_n(&c->dead, __ATOMIC_ACQUIRE);

	if (why && len)
		snprintf(why, len, "%s", err ? c->error : "");
	return err;
}

unsigned int fe_chan_features(const struct fe_chan *c)
{
	return __atomic_load_n(&c->features, __ATOMIC_RELAXED);
}

/* ---- create / connect / reset / destroy ------------------------------------ */

/* XBDFRONT_TEST_EVENTS_ONLY=1 (tests only): see events_only. */
static bool events_only_from_env(void)
{
	const char *v = getenv("XBDFRONT_TEST_EVENTS_ONLY");

	return v && !strcmp(v, "1");
}

int fe_chan_create(struct xbd_platform *plat, struct xbd_domain *dom,
		   const struct fe_chan_params *par, struct fe_chan **out)
{
	struct fe_chan *c;
	int rc;

	*out = NULL;
	if (par->order > FE_RING_MAX_ORDER ||
	    par->max_pages <= 2 * BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST ||
	    par->poll_us > XBDFRONT_POLL_DURATION_US_MAX || !par->bufs)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->index = par->index;
	c->backend = par->backend;
	c->persistent = par->persistent;
	c->pages_cap = par->max_pages - BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST;
	c->poll_ns_max = par->poll_us * 1000u;
	c->spin_ns = c->poll_ns_max;
	c->spin_prod = &c->spin_idle;
	c->bufs = par->bufs;
	c->on_broken = par->on_broken;
	c->on_broken_arg = par->on_broken_arg;
	c->port = -1;
	c->events_only = events_only_from_env();
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = c->wake_fd < 0 ? -errno : 0;
	if (!rc)
		rc = xbd_gntshr_open(dom, &c->gs);
	if (!rc)
		rc = xbd_evtchn_open(plat, xbd_domain_id(dom), &c->evt);
	if (!rc)
		rc = fe_gntpool_create(c->gs, c->backend, par->persistent, par->max_pages, &c->pool);
	if (!rc)
		rc = ring_setup(c, par->order, par->abi);
	if (!rc)
		rc = ios_create(c, c->ring.size * 4 > NR_IOS_MIN ? c->ring.size * 4 : NR_IOS_MIN);
	if (rc) {
		fe_chan_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Every I/O the channel holds ends with -ENODEV, reaped or not. */
static void close_ios(struct fe_chan *c)
{
	struct work w = { 0 };

	fe_chan_fail(c, -ENODEV, "queue closed");
	pthread_mutex_lock(&c->lock);
	while (c->cq_head) {            /* nobody will reap them now */
		struct xbdfront_cqe e;

		w.cqe = &e;
		w.maxcqe = 1;
		w.ncqe = 0;
		cq_take(c, &w);
	}
	pthread_mutex_unlock(&c->lock);
}

int fe_chan_recycle(struct fe_chan *c, const struct fe_chan_params *par)
{
	struct fe_gntpool *pool;
	unsigned int i;
	int rc;

	if (par->order != c->order || par->abi != c->abi || par->backend != c->backend ||
	    par->index != c->index || par->bufs != c->bufs || par->on_broken != c->on_broken ||
	    par->on_broken_arg != c->on_broken_arg || par->poll_us * 1000u != c->poll_ns_max ||
	    par->max_pages - BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST != c->pages_cap ||
	    par->max_pages <= 2 * BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST)
		return -EINVAL;
	if (__atomic_load_n(&c->spinners, __ATOMIC_SEQ_CST) || c->sleepers || c->waiters)
		return -EBUSY;
	close_ios(c);
	/* the failure's wake-up, which a fresh channel has not had */
	if (read(c->wake_fd, &(uint64_t){ 0 }, sizeof(uint64_t)) < 0) {
		/* EAGAIN: nothing to take */
	}
	rc = fe_gntpool_create(c->gs, c->backend, par->persistent, par->max_pages, &pool);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	fe_gntpool_destroy(c->pool);    /* every page back: nothing in flight */
	c->pool = pool;
	c->persistent = par->persistent;
	/* the descriptors used, as ios_create made them, the rest untouched
	 * (still chained in order at the bottom of the stack) */
	for (i = c->io_high; i-- > 0;) {
		struct fe_io *io = &c->ios[i];

		io_free_storage(io);
		memset(io, 0, sizeof(*io));
		io_init(io);
		io->next = i + 1 < c->nr_ios ? &c->ios[i + 1] : NULL;
	}
	c->free = c->nr_ios ? &c->ios[0] : NULL;
	c->nfree = c->nr_ios;
	c->io_high = 0;
	for (i = 0; i < c->rq_high; i++) {
		memset(&c->rq[i], 0, sizeof(c->rq[i]));
		c->rq[i].next_free = i + 1 < c->ring.size ? i + 1 : RQ_NONE;
	}
	c->rq_free = 0;
	c->rq_nfree = c->ring.size;
	c->rq_high = 0;
	rc = fe_ring_init(&c->ring, c->ring_mem, c->order, c->abi);
	c->disarmed = false;
	c->connected = false;
	memset(&c->lim, 0, sizeof(c->lim));
	c->wait_head = c->wait_tail = c->cq_head = c->cq_tail = NULL;
	c->need_pages = 0;
	memset(&c->stats, 0, sizeof(c->stats));
	c->error[0] = '\0';
	c->features = 0;
	c->sector_size = 0;
	c->inflight = 0;
	c->cq_len = 0;
	c->need_unmask = false;
	c->spin_cons = 0;
	c->spin_ns = c->poll_ns_max;
	c->spin_skips = 0;
	c->nspins = c->nspin_hits = c->nevents = c->nwaits = 0;
	__atomic_store_n(&c->dead, rc, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void fe_chan_destroy(struct fe_chan *c)
{
	unsigned int i;

	if (!c)
		return;
	if (c->ios)
		close_ios(c);
	for (i = 0; i < c->nr_ios; i++)
		io_free_storage(&c->ios[i]);
	free(c->ios);
	fe_gntpool_destroy(c->pool);
	if (c->evt)
		ring_teardown(c);
	free(c->rq);
	xbd_evtchn_close(c->evt);
	if (c->gs)
		xbd_gntshr_close(c->gs);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

unsigned int fe_chan_ring_refs(struct fe_chan *c, xbd_grant_ref_t *refs)
{
	unsigned int n;

	pthread_mutex_lock(&c->lock);
	n = 1u << c->order;
	memcpy(refs, c->ring_refs, n * sizeof(*refs));
	pthread_mutex_unlock(&c->lock);
	return n;
}

int fe_chan_port(struct fe_chan *c)
{
	int port;

	pthread_mutex_lock(&c->lock);
	port = c->port;
	pthread_mutex_unlock(&c->lock);
	return port;
}

int fe_chan_fd(struct fe_chan *c)
{
	return xbd_evtchn_fd(c->evt);
}

int fe_chan_connect(struct fe_chan *c, const struct fe_limits *lim)
{
	struct work w = { 0 };
	int rc;

	rc = fe_limits_check(lim);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = c->dead;
	if (!rc) {
		recover(c);
		c->lim = *lim;
		features_publish(c);
		__atomic_store_n(&c->sector_size, lim->sector_size, __ATOMIC_RELAXED);
		c->connected = true;
		fill(c, &w);
		push(c, &w);
	}
	pthread_mutex_unlock(&c->lock);
	finish_work(c, &w);
	return rc;
}

int fe_chan_set_persistent(struct fe_chan *c, bool persistent)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = fe_gntpool_set_persistent(c->pool, persistent);
	if (!rc)
		c->persistent = persistent;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int fe_chan_reset(struct fe_chan *c, unsigned int order, enum fe_abi abi)
{
	struct work w = { 0 };
	int rc;

	if (order > FE_RING_MAX_ORDER)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	rc = c->dead;
	if (!rc) {
		recover(c);
		c->connected = false;
		ring_teardown(c);
		rc = ring_setup(c, order, abi);
		if (rc)
			die_locked(c, rc, &w, "queue %u: cannot set up a new ring: %s", c->index,
				   strerror(-rc));
	}
	pthread_mutex_unlock(&c->lock);
	finish_work(c, &w);
	return rc;
}

/* ---- submit / commit ---------------------------------------------------------- */

/* What a descriptor asks, checked without the lock: 0 or -errno; *direct
 * gets the number of in-place fragments (0: bounced), *npages the
 * bounce pages. */
static int classify(struct fe_chan *c, const struct xbdfront_sqe *s, unsigned int *direct,
		    unsigned int *npages)
{
	unsigned int ss = __atomic_load_n(&c->sector_size, __ATOMIC_RELAXED);
	uint64_t sum = 0;
	unsigned int i;

	*direct = *npages = 0;
	if (s->op > XBDFRONT_SECURE_DISCARD || s->flags)
		return -EINVAL;
	if (!is_rw(s->op))
		return s->iovcnt ? -EINVAL : 0;
	if (!s->iovcnt || s->iovcnt > IOV_MAX || !s->iov)
		return -EINVAL;
	for (i = 0; i < s->iovcnt; i++)
		sum += s->iov[i].iov_len;
	if (sum != s->len)
		return -EINVAL;
	if (ss)
		*direct = fe_bufs_count(c->bufs, s->iov, s->iovcnt, ss);
	if (*direct > IO_MAX_DIRECT_FRAGS)
		*direct = 0;
	if (!*direct) {
		if (s->len / XBD_PAGE_SIZE + 1 > c->pages_cap)
			return -E2BIG;
		*npages = (unsigned int)((s->len + XBD_PAGE_SIZE - 1) / XBD_PAGE_SIZE);
	}
	return 0;
}

/* Take a descriptor for s and, when it can have them now, its pages.
 * Lock held.  NULL with *rc set: refused (-errno) or no descriptor (0). */
static struct fe_io *take(struct fe_chan *c, const struct xbdfront_sqe *s, unsigned int direct,
			  unsigned int npages, int *rc)
{
	struct fe_io *io;

	*rc = c->dead;
	if (!*rc && !c->lim.sector_size)
		*rc = -ENOTCONN;
	if (!*rc)
		*rc = fe_op_check(&c->lim, s->op, s->offset, s->len);
	if (*rc || !(io = io_pop(c)))
		return NULL;
	*rc = io_room(c, io, direct ? direct : npages, direct ? 0 : s->iovcnt);
	if (*rc) {
		io_push(c, io);
		return NULL;
	}
	io->op = s->op;
	io->offset = s->offset;
	io->len = s->len;
	io->user_data = s->user_data;
	io->done = s->done;
	io->nfrags = direct ? direct : npages;
	io->npages = npages;
	io->iovcnt = direct ? 0 : s->iovcnt;
	io->have_pages = io->copied = io->issued_all = io->requeued = false;
	io->next_frag = 0;
	io->next_sector = s->offset / 512;
	io->pending = 0;
	io->status = 0;
	if (npages && !c->need_pages)
		(void)pages_get(c, io);
	c->stats.submitted++;
	return io;
}

/* The data of a taken descriptor, outside the lock: the fragments, the
 * iovec copy and a write's bounce copy. */
static void prepare(struct fe_chan *c, struct fe_io *io, const struct xbdfront_sqe *s)
{
	unsigned int i;

	if (!is_rw(io->op)) {
		io->nfrags = 0;
		return;
	}
	if (!io->npages) {
		unsigned int ss = __atomic_load_n(&c->sector_size, __ATOMIC_RELAXED);

		/* the buffers moved under us (freed with I/O: the caller's bug) */
		if (fe_bufs_frags(c->bufs, s->iov, s->iovcnt, ss, io->frags, io->nfrags) !=
		    io->nfrags)
			io->status = -EINVAL;
		return;
	}
	memcpy(io->iov, s->iov, s->iovcnt * sizeof(*s->iov));
	for (i = 0; i < io->npages; i++) {
		uint64_t left = io->len - (uint64_t)i * XBD_PAGE_SIZE;

		io->frags[i].offset = 0;
		io->frags[i].len = (uint16_t)(left < XBD_PAGE_SIZE ? left : XBD_PAGE_SIZE);
		if (io->have_pages)
			io->frags[i].gref = io->pages[i].gref;
	}
	if (io->have_pages && io->op == XBDFRONT_WRITE)
		bounce(io, true);
}

/* Wait until a descriptor is free, driving the ring meanwhile (the
 * requests that hold them may need this thread to reap).  0, or -EBUSY
 * when they are all completion entries nobody reaped, or the death. */
static int wait_free(struct fe_chan *c)
{
	int rc = 0;

	__atomic_add_fetch(&c->nwaits, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->waiters, 1, __ATOMIC_RELAXED);
	while (!rc) {
		pthread_mutex_lock(&c->lock);
		if (c->nfree)
			rc = 1;
		else if (c->dead)
			rc = c->dead;
		else if (c->cq_head && !c->wait_head && !c->inflight)
			rc = -EBUSY;
		pthread_mutex_unlock(&c->lock);
		if (!rc && fe_chan_wait(c, 10, -1) >= 0)
			(void)fe_chan_reap(c, NULL, 0);
	}
	__atomic_sub_fetch(&c->waiters, 1, __ATOMIC_RELAXED);
	return rc < 0 ? rc : 0;
}

/* One batch of at most SUBMIT_BATCH: returns how many were taken (each
 * will complete) and, in *rc, why the next one was not (0: no descriptor). */
static unsigned int submit_batch(struct fe_chan *c, const struct xbdfront_sqe *s, unsigned int n,
				 int *rc)
{
	unsigned int direct[SUBMIT_BATCH], npages[SUBMIT_BATCH], k, got = 0, i;
	struct fe_io *io[SUBMIT_BATCH];
	struct work w = { 0 };

	*rc = 0;
	for (k = 0; k < n && !*rc; k++)
		*rc = classify(c, &s[k], &direct[k], &npages[k]);
	if (*rc)
		k--;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < k; i++) {
		int r;

		io[got] = take(c, &s[i], direct[i], npages[i], &r);
		if (!io[got]) {
			*rc = r;
			break;
		}
		got++;
	}
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < got; i++)
		prepare(c, io[i], &s[i]);
	if (!got)
		return 0;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < got; i++)
		wait_append(c, io[i]);
	fill(c, &w);
	pthread_mutex_unlock(&c->lock);
	finish_work(c, &w);
	return got;
}

int fe_chan_submit(struct fe_chan *c, const struct xbdfront_sqe *sqe, unsigned int n)
{
	unsigned int done = 0, k, got;
	int rc = 0;

	while (done < n) {
		k = n - done < SUBMIT_BATCH ? n - done : SUBMIT_BATCH;
		got = submit_batch(c, sqe + done, k, &rc);
		done += got;
		if (rc)
			break;
		if (got < k) {
			/* out of descriptors: what is queued goes out first */
			(void)fe_chan_commit(c);
			rc = wait_free(c);
			if (rc)
				break;
		}
	}
	return done ? (int)done : rc;
}

int fe_chan_commit(struct fe_chan *c)
{
	struct work w = { 0 };
	int rc;

	pthread_mutex_lock(&c->lock);
	push(c, &w);
	rc = c->dead;
	pthread_mutex_unlock(&c->lock);
	finish_work(c, &w);
	return rc;
}

/* ---- reap / wait / process --------------------------------------------------- */

static int reap(struct fe_chan *c, struct xbdfront_cqe *cqe, unsigned int n, unsigned int events)
{
	struct work w = { .cqe = cqe, .maxcqe = cqe ? n : 0 };
	unsigned int rsps = 0;
	bool broke = false, unmask, look;
	char why[sizeof(c->error)];
	int port, rc;

	__atomic_add_fetch(&c->nevents, events, __ATOMIC_RELAXED);
	unmask = __atomic_exchange_n(&c->need_unmask, false, __ATOMIC_RELAXED);
	/* events_only (tests): no event taken, no look at the ring */
	look = !c->events_only || events || unmask;
	pthread_mutex_lock(&c->lock);
	if (c->connected && !c->dead) {
		if (look && take_responses(c, &w, &rsps) < 0) {
			die_locked(c, -EIO, &w, "queue %u: backend broke the ring: %s", c->index,
				   fe_ring_error(&c->ring));
			memcpy(why, c->error, sizeof(why));
			broke = true;
		}
		fill(c, &w);
		push(c, &w);
	}
	unmask = unmask || events;
	/* XSA-391: count events that brought nothing */
	if (unmask && !rsps)
		c->stats.spurious++;
	cq_take(c, &w);
	port = c->port;
	rc = c->dead;
	pthread_mutex_unlock(&c->lock);
	/* late EOI: unmask only once drained, never for a broken ring */
	if (unmask && !rc && port >= 0)
		(void)xbd_evtchn_unmask(c->evt, (xbd_evtchn_port_t)port);
	finish_work(c, &w);
	if (broke && c->on_broken)
		c->on_broken(c->on_broken_arg, -EIO, why);
	if (!cqe)
		return rc && !w.delivered ? rc : (int)w.delivered;
	return w.ncqe || !rc ? (int)w.ncqe : rc;
}

int fe_chan_reap(struct fe_chan *c, struct xbdfront_cqe *cqe, unsigned int n)
{
	return reap(c, cqe, n, 0);
}

/* Take the event channel's kicks; the port stays masked until the ring
 * is drained (reap).  Returns how many. */
static unsigned int take_events(struct fe_chan *c)
{
	unsigned int n = 0;

	while (xbd_evtchn_pending(c->evt) >= 0)
		n++;
	if (n)
		__atomic_store_n(&c->need_unmask, true, __ATOMIC_RELAXED);
	return n;
}

int fe_chan_process(struct fe_chan *c)
{
	return reap(c, NULL, 0, take_events(c));
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether there is something to reap, looking at the ring without the
 * lock: spinners are counted, so a reset waits for them before the ring
 * pages go (ring_teardown). */
static bool ready(struct fe_chan *c, uint64_t budget_ns, uint64_t *spent)
{
	uint64_t t0 = budget_ns ? now_ns() : 0;
	const uint32_t *prod;
	bool hit = false;

	__atomic_add_fetch(&c->spinners, 1, __ATOMIC_SEQ_CST);
	/* events_only (tests): the ring is looked at only after an event.
	 * spin_cons stands in for rsp_prod (spin_idle would differ from it
	 * once rsp_cons moved: a hit for ever, and no wait on the event). */
	prod = c->events_only ? &c->spin_cons : __atomic_load_n(&c->spin_prod, __ATOMIC_SEQ_CST);
	for (unsigned int i = 0;; i++) {
		if (__atomic_load_n(prod, __ATOMIC_RELAXED) !=
		    __atomic_load_n(&c->spin_cons, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&c->cq_len, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&c->dead, __ATOMIC_RELAXED)) {
			hit = true;
			break;
		}
		if (!budget_ns || ((i & 15) == 15 && now_ns() - t0 >= budget_ns))
			break;
		xbd_cpu_relax();
	}
	__atomic_sub_fetch(&c->spinners, 1, __ATOMIC_SEQ_CST);
	if (spent)
		*spent = budget_ns ? now_ns() - t0 : 0;
	return hit;
}

/* While this thread polls, the backend need not signal: rsp_event goes
 * out of its way, unless another thread sleeps on the event channel and
 * needs the signal.  Lock held. */
static void disarm(struct fe_chan *c)
{
	if (!c->sleepers && c->connected && !c->dead) {
		fe_ring_disarm(&c->ring);
		c->disarmed = true;
	}
}

/* Arm rsp_event again (RING_FINAL_CHECK_FOR_RESPONSES) after polling or
 * before sleeping: true when responses are waiting.  Lock held. */
static bool rearm(struct fe_chan *c)
{
	c->disarmed = false;
	return c->connected && !c->dead && fe_ring_final_check(&c->ring);
}

/*
 * The adaptive spin: only while 1..SPIN_MAX_INFLIGHT requests are in
 * flight, for at most the window spin_ns (<= poll_duration_us).  A hit after t sets the window to
 * 2t (at least SPIN_MIN_NS): it follows the backend's service time, as
 * NVMe hybrid polling does; a miss halves it, down to 0, after which one
 * wait in 16 probes with a quarter of the maximum.  An idle queue (no
 * request in flight) never spins.  While it spins the backend is asked
 * not to signal (disarm), and rsp_event is armed again before the
 * caller can sleep.
 */
static bool spin(struct fe_chan *c)
{
	unsigned int budget = __atomic_load_n(&c->spin_ns, __ATOMIC_RELAXED);
	unsigned int inflight = __atomic_load_n(&c->inflight, __ATOMIC_RELAXED);
	uint64_t spent, next;
	bool hit;

	if (!c->poll_ns_max || c->events_only || !inflight || inflight > SPIN_MAX_INFLIGHT)
		return false;
	if (!budget) {
		if (__atomic_add_fetch(&c->spin_skips, 1, __ATOMIC_RELAXED) % 16)
			return false;
		budget = c->poll_ns_max / 4;
	}
	pthread_mutex_lock(&c->lock);
	disarm(c);
	pthread_mutex_unlock(&c->lock);
	hit = ready(c, budget, &spent);
	pthread_mutex_lock(&c->lock);
	if (c->disarmed && rearm(c))
		hit = true;
	pthread_mutex_unlock(&c->lock);
	next = hit ? 2 * spent : budget / 2;
	if (hit && next < SPIN_MIN_NS)
		next = SPIN_MIN_NS;
	if (next > c->poll_ns_max)
		next = c->poll_ns_max;
	if (!hit && next < SPIN_MIN_NS / 2)
		next = 0;
	__atomic_store_n(&c->spin_ns, (unsigned int)next, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->nspins, 1, __ATOMIC_RELAXED);
	if (hit)
		__atomic_add_fetch(&c->nspin_hits, 1, __ATOMIC_RELAXED);
	return hit;
}

/* Going to sleep: count as a sleeper (so no poller disarms meanwhile)
 * with rsp_event armed; false when responses came, no sleep then. */
static bool sleep_begin(struct fe_chan *c)
{
	bool pending;

	pthread_mutex_lock(&c->lock);
	pending = c->disarmed ? rearm(c) : false;
	if (!pending)
		c->sleepers++;
	pthread_mutex_unlock(&c->lock);
	return !pending;
}

static void sleep_end(struct fe_chan *c)
{
	pthread_mutex_lock(&c->lock);
	c->sleepers--;
	pthread_mutex_unlock(&c->lock);
}

int fe_chan_wait(struct fe_chan *c, int timeout_ms, int extra_fd)
{
	struct pollfd p[3] = {
		{ .fd = xbd_evtchn_fd(c->evt), .events = POLLIN },
		{ .fd = c->wake_fd, .events = POLLIN },
		{ .fd = extra_fd, .events = POLLIN },
	};
	uint64_t drain;
	unsigned int ev;
	int rc;

	if (ready(c, 0, NULL) || spin(c) || !sleep_begin(c))
		return 1;
	rc = poll(p, extra_fd >= 0 ? 3 : 2, timeout_ms);
	sleep_end(c);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	if (p[0].revents) {
		ev = take_events(c);
		__atomic_add_fetch(&c->nevents, ev, __ATOMIC_RELAXED);
		return 1;
	}
	if (p[1].revents) {
		if (read(c->wake_fd, &drain, sizeof(drain)) < 0 && errno != EAGAIN)
			return -errno;
		return 1;
	}
	return rc && p[2].revents ? 2 : 0;
}

/* ---- the rest ----------------------------------------------------------------- */

void fe_chan_notify(struct fe_chan *c)
{
	int port;

	pthread_mutex_lock(&c->lock);
	port = c->connected && !c->dead ? c->port : -1;
	pthread_mutex_unlock(&c->lock);
	if (port >= 0)
		(void)xbd_evtchn_notify(c->evt, (xbd_evtchn_port_t)port);
}

void fe_chan_set_sectors(struct fe_chan *c, uint64_t sectors)
{
	pthread_mutex_lock(&c->lock);
	if (c->lim.sector_size && sectors % (c->lim.sector_size / 512) == 0)
		c->lim.sectors = sectors;
	pthread_mutex_unlock(&c->lock);
}

void fe_chan_get_stats(struct fe_chan *c, struct fe_chan_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->stats;
	out->spins = __atomic_load_n(&c->nspins, __ATOMIC_RELAXED);
	out->spin_hits = __atomic_load_n(&c->nspin_hits, __ATOMIC_RELAXED);
	out->events = __atomic_load_n(&c->nevents, __ATOMIC_RELAXED);
	out->waits = __atomic_load_n(&c->nwaits, __ATOMIC_RELAXED);
	out->nr_ios = c->nr_ios;
	out->ios_free = c->nfree;
	fe_gntpool_get_stats(c->pool, &out->pool);
	pthread_mutex_unlock(&c->lock);
}
