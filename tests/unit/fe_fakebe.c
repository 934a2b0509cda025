/* SPDX-License-Identifier: MIT */
/* The fake backend of the frontend unit tests: see fe_fakebe.h. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/unit/fe_fakebe.h"

uint64_t fe_rd(const unsigned char *p, size_t off, size_t len)
{
	uint64_t v = 0;

	memcpy(&v, p + off, len);
	return v;
}

void fe_wr(unsigned char *p, size_t off, size_t len, uint64_t v)
{
	memcpy(p + off, &v, len);
}

static size_t be_stride(const struct be *b)
{
	return b->abi == FE_ABI_X86_32 ? 108 : 112;
}

static size_t x32_id_off(const struct be *b)
{
	return b->abi == FE_ABI_X86_32 ? 4 : 8;
}

static enum be_mode be_mode(struct be *b)
{
	return __atomic_load_n(&b->mode, __ATOMIC_ACQUIRE);
}

void be_set_mode(struct be *b, enum be_mode m)
{
	__atomic_store_n(&b->mode, m, __ATOMIC_RELEASE);
}

static uint32_t *hdr32(struct be_ring *r, size_t off)
{
	return (uint32_t *)(r->ring + off);
}

/* Move data between the disk and one granted segment. */
static int be_seg(struct be *b, uint32_t gref, unsigned int first, unsigned int last,
		  uint64_t byte, bool write)
{
	void *page;
	size_t len = (last - first + 1) * 512u;
	int rc;

	if (first > last || last > 7 || byte + len > DISK_BYTES)
		return -EINVAL;
	rc = xbd_gnttab_map(b->gt, b->guest, 1, &gref, PROT_READ | PROT_WRITE, &page);
	if (rc)
		return rc;
	if (write)
		memcpy(b->disk + byte, (char *)page + first * 512, len);
	else
		memcpy((char *)page + first * 512, b->disk + byte, len);
	return xbd_gnttab_unmap(b->gt, page, 1);
}

/* Segments of an indirect request, read from its mapped indirect pages. */
static int be_indirect(struct be *b, const unsigned char *q, uint64_t sector, bool write)
{
	size_t idoff = b->abi == FE_ABI_X86_32 ? 24 : 28;
	unsigned int nseg = (unsigned int)fe_rd(q, 2, 2), npages = (nseg + 511) / 512, i;
	uint32_t grefs[8];
	unsigned char *segs;
	uint64_t byte = sector * 512;
	int rc = 0;

	if (!nseg || npages > 8)
		return -EINVAL;
	for (i = 0; i < npages; i++)
		grefs[i] = (uint32_t)fe_rd(q, idoff + 4 * i, 4);
	rc = xbd_gnttab_map(b->gt, b->guest, npages, grefs, PROT_READ, (void **)&segs);
	if (rc)
		return rc;
	for (i = 0; i < nseg && !rc; i++) {
		const unsigned char *s = segs + 8 * i;
		rc = be_seg(b, (uint32_t)fe_rd(s, 0, 4), s[4], s[5], byte, write);
		byte += (s[5] - s[4] + 1) * 512u;
	}
	xbd_gnttab_unmap(b->gt, segs, npages);
	b->indirect++;
	if (nseg > b->max_segs)
		b->max_segs = nseg;
	return rc;
}

/* Serve one request (a private copy); returns the BLKIF_RSP_* status. */
static int16_t be_serve(struct be *b, const unsigned char *q, uint8_t *rsp_op)
{
	bool x32 = b->abi == FE_ABI_X86_32;
	uint8_t op = q[0];
	uint64_t sector = fe_rd(q, x32 ? 12 : 16, 8), byte = sector * 512;
	unsigned int nseg = q[1], i;
	int rc = 0;

	*rsp_op = op;
	b->reqs++;
	switch (op) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
		if (!nseg || nseg > 11)
			return BLKIF_RSP_ERROR;
		for (i = 0; i < nseg && !rc; i++) {
			const unsigned char *s = q + (x32 ? 20 : 24) + 8 * i;
			rc = be_seg(b, (uint32_t)fe_rd(s, 0, 4), s[4], s[5], byte, op == BLKIF_OP_WRITE);
			byte += (s[5] - s[4] + 1) * 512u;
		}
		if (nseg > b->max_segs)
			b->max_segs = nseg;
		break;
	case BLKIF_OP_INDIRECT:
		*rsp_op = q[1];
		rc = be_indirect(b, q, sector, q[1] == BLKIF_OP_WRITE);
		break;
	case BLKIF_OP_FLUSH_DISKCACHE:
		b->flushes++;
		break;
	case BLKIF_OP_WRITE_BARRIER:
		b->barriers++;
		break;
	case BLKIF_OP_DISCARD: {
		uint64_t n = fe_rd(q, x32 ? 20 : 24, 8);
		if ((sector + n) * 512 > DISK_BYTES)
			return BLKIF_RSP_ERROR;
		memset(b->disk + byte, 0, n * 512);
		b->discards++;
		b->secure += q[1] & BLKIF_DISCARD_SECURE;
		break;
	}
	default:
		return BLKIF_RSP_ERROR;
	}
	if (rc && !b->error)
		b->error = rc;
	return rc ? BLKIF_RSP_ERROR : BLKIF_RSP_OKAY;
}

/* Write one response at the backend's private producer index. */
static void be_put(struct be *b, struct be_ring *r, uint64_t id, uint8_t op, int16_t status)
{
	unsigned char *slot = r->ring + 64 + (r->rsp_prod++ & (r->size - 1)) * be_stride(b);

	fe_wr(slot, 0, 8, id);
	fe_wr(slot, 8, 1, op);
	fe_wr(slot, 9, 1, 0);
	fe_wr(slot, 10, 2, (uint16_t)status);
}

struct be_done {
	uint64_t id;
	uint8_t op;
	int16_t status;
};

/* Answer the batch as the mode says. */
static void be_answer(struct be *b, struct be_ring *r, struct be_done *d, unsigned int n)
{
	enum be_mode m = be_mode(b);

	for (unsigned int k = 0; k < n; k++) {
		struct be_done *x = &d[m == BE_REVERSE ? n - 1 - k : k];
		uint64_t id = x->id;
		uint8_t op = x->op;

		if (m == BE_BAD_ID)
			id += 1000;
		if (m == BE_UNKNOWN_ID)
			id = (id + 16) % r->size;
		if (m == BE_WRONG_OP)
			op ^= 1;
		if (m == BE_DUP_ID && k == 1)      /* the first one's again */
			be_put(b, r, d[0].id, d[0].op, d[0].status);
		else
			be_put(b, r, id, op, x->status);
	}
}

/* Drain one ring as RING_FINAL_CHECK_FOR_REQUESTS / PUSH_RESPONSES do. */
static bool be_ring_work(struct be *b, struct be_ring *r)
{
	size_t st = be_stride(b);
	bool did = false, notify;
	uint32_t prod, old = r->rsp_prod;
	struct be_done d[1024];
	unsigned int n;

	for (;;) {
		prod = __atomic_load_n(hdr32(r, 0), __ATOMIC_ACQUIRE);
		n = 0;
		while (r->req_cons != prod && n < 1024) {
			unsigned char q[112];

			memcpy(q, r->ring + 64 + (r->req_cons & (r->size - 1)) * st, st);
			r->req_cons++;
			did = true;
			if (be_mode(b) == BE_SILENT)
				continue;
			d[n].id = fe_rd(q, x32_id_off(b), 8);
			if (d[n].id > b->max_id)
				b->max_id = (unsigned int)d[n].id;
			d[n].status = be_serve(b, q, &d[n].op);
			n++;
		}
		if (n > b->max_batch)
			b->max_batch = n;
		be_answer(b, r, d, n);
		__atomic_store_n(hdr32(r, 4), r->req_cons + 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(hdr32(r, 0), __ATOMIC_SEQ_CST) == r->req_cons)
			break;
	}
	if (be_mode(b) == BE_RUNAWAY && r->rsp_prod != old)
		r->rsp_prod += r->size;
	__atomic_store_n(hdr32(r, 8), r->rsp_prod, __ATOMIC_SEQ_CST);
	notify = (uint32_t)(r->rsp_prod - __atomic_load_n(hdr32(r, 12), __ATOMIC_SEQ_CST)) <
		 (uint32_t)(r->rsp_prod - old);
	if (notify)
		xbd_evtchn_notify(b->ev, (xbd_evtchn_port_t)r->port);
	return did;
}

static void *be_main(void *arg)
{
	struct be *b = arg;
	struct pollfd pfd[2] = { { .fd = xbd_evtchn_fd(b->ev), .events = POLLIN },
				 { .fd = b->stop_fd, .events = POLLIN } };

	for (;;) {
		int n = poll(pfd, 2, 500), port;
		bool did = false;

		if (pfd[1].revents)
			break;
		while ((port = xbd_evtchn_pending(b->ev)) >= 0)
			xbd_evtchn_unmask(b->ev, (xbd_evtchn_port_t)port);
		for (unsigned int i = 0; i < b->nq; i++)
			did |= be_ring_work(b, &b->q[i]);
		if (n == 0 && did)
			b->late++;
	}
	return NULL;
}


/* Map a queue's ring and bind its event channel, as a backend does
 * after the frontend is Initialised. */
void be_attach_ring(struct be *b, unsigned int i, const xbd_grant_ref_t *refs,
		    unsigned int n, unsigned int port)
{
	struct be_ring *r = &b->q[i];
	int rc;

	memset(r, 0, sizeof(*r));
	r->order = (unsigned int)__builtin_ctz(n);
	r->size = 32u << r->order;
	assert_int_equal(xbd_gnttab_map(b->gt, b->guest, n, refs, PROT_READ | PROT_WRITE,
					(void **)&r->ring), 0);
	/* live re-attach: start where the responses end (0 on a fresh ring),
	 * so requests a dead predecessor took but never answered run again */
	r->rsp_prod = r->req_cons = __atomic_load_n(hdr32(r, 8), __ATOMIC_ACQUIRE);
	rc = xbd_evtchn_bind_interdomain(b->ev, b->guest, port);
	assert_true(rc >= 0);
	r->port = rc;
	if (i + 1 > b->nq)
		b->nq = i + 1;
	b->attached = true;
}

void be_start(struct be *b)
{
	b->running = true;
	b->stop_fd = eventfd(0, EFD_CLOEXEC);
	assert_true(b->stop_fd >= 0);
	assert_int_equal(pthread_create(&b->th, NULL, be_main, b), 0);
}

/* Stop the thread (its counters are then stable). */
void be_halt(struct be *b)
{
	uint64_t one = 1;

	if (!b->running)
		return;
	b->running = false;
	assert_int_equal(write(b->stop_fd, &one, sizeof(one)), sizeof(one));
	pthread_join(b->th, NULL);
	close(b->stop_fd);
}

/* Stop and let go of the rings: a backend that died. */
void be_stop(struct be *b)
{
	be_halt(b);
	if (!b->attached)
		return;
	b->attached = false;
	for (unsigned int i = 0; i < b->nq; i++) {
		xbd_evtchn_unbind(b->ev, (xbd_evtchn_port_t)b->q[i].port);
		xbd_gnttab_unmap(b->gt, b->q[i].ring, 1u << b->q[i].order);
	}
}

void be_attach(struct be *b, struct xbdfront_dev *dev)
{
	for (unsigned int i = 0; i < xbdfront_nr_queues(dev); i++) {
		struct fe_chan *c = fe_dev_chan(dev, i);
		xbd_grant_ref_t refs[32];
		unsigned int n = fe_chan_ring_refs(c, refs);

		be_attach_ring(b, i, refs, n, (unsigned int)fe_chan_port(c));
	}
}

void fe_fx_open(struct fe_fx *f, unsigned int nq, unsigned int order, enum fe_abi abi,
		bool persistent, unsigned int max_ind, unsigned int pool_pages)
{
	struct fe_dev_params par = { .backend = 0, .nqueues = nq, .order = order, .abi = abi,
				     .persistent = persistent, .pool_pages = pool_pages,
				     .poll_us = XBDFRONT_POLL_DURATION_US_DEFAULT };

	memset(f, 0, sizeof(*f));
	strcpy(f->rundir, "/tmp/xbd-fe-fx-XXXXXX");
	assert_non_null(mkdtemp(f->rundir));
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, f->rundir, &f->p), 0);
	assert_int_equal(xbd_domain_create(f->p, 1, "guest", 64u << 20), 0);
	assert_int_equal(xbd_domain_claim(f->p, 1, &f->dom), 0);
	assert_int_equal(fe_dev_create(f->p, f->dom, &par, &f->dev), 0);
	f->b = (struct be){ .p = f->p, .guest = 1, .abi = abi, .nq = nq };
	f->b.disk = calloc(1, DISK_BYTES);
	assert_non_null(f->b.disk);
	assert_int_equal(xbd_gnttab_open(f->p, 0, &f->b.gt), 0);
	assert_int_equal(xbd_evtchn_open(f->p, 0, &f->b.ev), 0);
	be_attach(&f->b, f->dev);
	be_start(&f->b);
	f->lim = (struct fe_limits){ .handle = 51712, .sector_size = 512,
				     .sectors = DISK_BYTES / 512, .max_indirect_segs = max_ind,
				     .flush = true, .barrier = true, .discard = true,
				     .discard_secure = true };
	assert_int_equal(fe_dev_connect(f->dev, &f->lim, 4096), 0);
}

int fe_submit(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op, uint64_t off,
	      uint64_t len, struct iovec *iov, void (*done)(const struct xbdfront_cqe *),
	      uint64_t ud)
{
	struct xbdfront_sqe sqe = { .op = (uint8_t)op, .iovcnt = iov ? 1 : 0, .offset = off,
				    .len = len, .iov = iov, .user_data = ud, .done = done };
	int rc = xbdfront_submit(dev, q, &sqe, 1);

	if (rc == 1)
		(void)xbdfront_commit(dev, q);
	return rc == 1 ? 0 : rc;
}

void fe_reap_n(struct xbdfront_dev *dev, unsigned int q, unsigned int n)
{
	struct xbdfront_cqe c[64];
	unsigned int got = 0;
	int k;

	while (got < n) {
		assert_true(xbdfront_wait(dev, q, 1000, -1) >= 0);
		while ((k = xbdfront_reap(dev, q, c, 64)) > 0) {
			for (int j = 0; j < k; j++)
				assert_int_equal(c[j].res, 0);
			got += (unsigned int)k;
		}
		assert_true(k >= 0);
	}
	assert_int_equal(got, n);
}

void fe_fx_close(struct fe_fx *f)
{
	char cmd[96];

	be_stop(&f->b);
	xbdfront_close(f->dev);
	xbd_evtchn_close(f->b.ev);
	xbd_gnttab_close(f->b.gt);
	free(f->b.disk);
	xbd_domain_release(f->dom);
	assert_int_equal(xbd_domain_destroy(f->p, f->b.guest, true), 0);
	xbd_platform_close(f->p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->rundir);
	assert_int_equal(system(cmd), 0);
}
