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

/* Drain one ring as RING_FINAL_CHECK_FOR_REQUESTS / PUSH_RESPONSES do. */
static bool be_ring_work(struct be *b, struct be_ring *r)
{
	size_t st = be_stride(b);
	bool did = false, notify;
	uint32_t prod, old = r->rsp_prod;

	for (;;) {
		prod = __atomic_load_n(hdr32(r, 0), __ATOMIC_ACQUIRE);
		while (r->req_cons != prod) {
			unsigned char q[112], *slot;
			uint8_t op;
			uint64_t id;
			int16_t status;

			memcpy(q, r->ring + 64 + (r->req_cons & (r->size - 1)) * st, st);
			r->req_cons++;
			did = true;
			if (be_mode(b) == BE_SILENT)
				continue;
			id = fe_rd(q, x32_id_off(b), 8);
			status = be_serve(b, q, &op);
			if (be_mode(b) == BE_BAD_ID)
				id += 1000;
			if (be_mode(b) == BE_WRONG_OP)
				op ^= 1;
			slot = r->ring + 64 + (r->rsp_prod++ & (r->size - 1)) * st;
			fe_wr(slot, 0, 8, id);
			fe_wr(slot, 8, 1, op);
			fe_wr(slot, 9, 1, 0);
			fe_wr(slot, 10, 2, (uint16_t)status);
		}
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
