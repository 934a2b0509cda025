/* SPDX-License-Identifier: MIT */
/*
 * backend/queue: a queue thread serving a frontend on the real local
 * platform.  The test process is also the guest (domain 1): it grants the
 * ring pages and data pages, binds an event channel, writes requests in
 * either ABI with the ring.h notification hold-off (so a backend that
 * forgot req_event would hang the test and fail it), and waits on its
 * event channel for the responses.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/queue.h"
#include "test_be_guest.h"
#include "test_be_loop.h"

struct gring {                       /* the guest's side of one queue */
	xbd_grant_ref_t refs[32];
	uint8_t *sring;
	unsigned int order, nr_ents;
	enum ring_abi abi;
	struct xbd_evtchn *ev;
	int port;
	RING_IDX prod, rsp_cons;
};

struct fx {
	struct guest g;
	char file[64];
	int fd;
	struct storage st;
	struct be_queue q[2];
	struct gring gr[2];
};

static int setup(void **state)
{
	static struct fx fx;

	memset(&fx, 0, sizeof(fx));
	fx.st.fd = -1;
	if (guest_up(&fx.g))
		return -1;
	fx.fd = tmp_backing_file(fx.file, 4u << 20);
	if (fx.fd < 0 || storage_open(fx.file, &(struct storage_opts){ 0 }, &fx.st))
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	for (int i = 0; i < 2; i++) {
		be_queue_stop(&fx->q[i]);
		if (fx->gr[i].ev)
			xbd_evtchn_close(fx->gr[i].ev);
		if (fx->gr[i].sring)
			xbd_gntshr_unshare(fx->g.gs, fx->gr[i].sring, 1u << fx->gr[i].order);
	}
	storage_close(&fx->st);
	close(fx->fd);
	unlink(fx->file);
	guest_down(&fx->g);
	return 0;
}

/* Guest: share the ring, SHARED_RING_INIT, bind a port; backend: start. */
static int connect_queue(struct fx *fx, int i, unsigned int order, enum ring_abi abi,
			 bool persistent)
{
	struct gring *r = &fx->gr[i];
	struct be_queue_cfg c = {
		.plat = fx->g.p, .self = 0, .frontend = 1, .index = (unsigned int)i,
		.ring_order = order, .abi = abi, .persistent = persistent,
		.storage = &fx->st,
		.limits = { .sectors = fx->st.size >> 9, .sector_size = 512,
			    .flush = true, .barrier = true, .max_indirect_segs = 32 },
	};

	memset(r, 0, sizeof(*r));
	r->order = order;
	r->abi = abi;
	r->nr_ents = ring_nr_ents(abi, order);
	assert_int_equal(xbd_gntshr_share_pages(fx->g.gs, 0, 1u << order, r->refs, true,
						(void **)&r->sring), 0);
	((uint32_t *)r->sring)[1] = 1;                /* req_event */
	((uint32_t *)r->sring)[3] = 1;                /* rsp_event */
	assert_int_equal(xbd_evtchn_open(fx->g.p, 1, &r->ev), 0);
	r->port = xbd_evtchn_bind_unbound_port(r->ev, 0);
	assert_true(r->port > 0);
	memcpy(c.ring_refs, r->refs, sizeof(r->refs));
	c.remote_port = (xbd_evtchn_port_t)r->port;
	return be_queue_start(&fx->q[i], &c);
}

/* One read or write of a full granted page, in the ring's ABI. */
static void put_req(struct gring *r, uint8_t op, uint64_t id, uint64_t sector,
		    xbd_grant_ref_t gref)
{
	size_t stride = r->abi == RING_ABI_X86_32 ? 108 : 112;
	size_t idoff = r->abi == RING_ABI_X86_32 ? 4 : 8;
	uint8_t *s = r->sring + 64 + (r->prod++ & (r->nr_ents - 1)) * stride;
	uint8_t seg[8] = { 0, 0, 0, 0, 0, 7, 0, 0 };

	memset(s, 0, stride);
	s[0] = op;
	s[1] = 1;
	memcpy(s + idoff, &id, 8);
	memcpy(s + idoff + 8, &sector, 8);
	memcpy(seg, &gref, 4);
	memcpy(s + idoff + 16, seg, 8);
}

/* RING_PUSH_REQUESTS_AND_CHECK_NOTIFY */
static void push(struct gring *r, RING_IDX old)
{
	uint32_t *h = (uint32_t *)r->sring;

	__atomic_store_n(&h[0], r->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if ((RING_IDX)(r->prod - h[1]) < (RING_IDX)(r->prod - old))
		assert_int_equal(xbd_evtchn_notify(r->ev, (xbd_evtchn_port_t)r->port), 0);
}

/* Wait (on the event channel, bounded) for the next response. */
static void get_rsp(struct gring *r, uint64_t *id, int16_t *status)
{
	uint32_t *h = (uint32_t *)r->sring;
	size_t stride = r->abi == RING_ABI_X86_32 ? 108 : 112;  /* entry size */

	for (int tries = 0; tries < 50; tries++) {
		if (__atomic_load_n(&h[2], __ATOMIC_ACQUIRE) != r->rsp_cons) {
			uint8_t *s = r->sring + 64 + (r->rsp_cons++ & (r->nr_ents - 1)) * stride;
			memcpy(id, s, 8);
			memcpy(status, s + 10, 2);
			return;
		}
		h[3] = r->rsp_cons + 1;               /* RING_FINAL_CHECK_FOR_RESPONSES */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&h[2], __ATOMIC_ACQUIRE) != r->rsp_cons)
			continue;
		struct pollfd pfd = { xbd_evtchn_fd(r->ev), POLLIN, 0 };
		if (poll(&pfd, 1, 100) > 0) {
			int port = xbd_evtchn_pending(r->ev);
			if (port >= 0)
				xbd_evtchn_unmask(r->ev, (xbd_evtchn_port_t)port);
		}
	}
	fail_msg("no response from the backend");
}

static void roundtrip(struct fx *fx, int i, uint64_t sector, unsigned int wpage,
		      unsigned int rpage)
{
	struct gring *r = &fx->gr[i];
	uint64_t id;
	int16_t st;
	RING_IDX old = r->prod;

	for (size_t k = 0; k < 4096; k++)
		guest_page(&fx->g, wpage)[k] = (uint8_t)(k * 3 + sector + wpage);
	put_req(r, BLKIF_OP_WRITE, 1000 + sector, sector, fx->g.rw[wpage]);
	push(r, old);
	get_rsp(r, &id, &st);
	assert_true(id == 1000 + sector && st == BLKIF_RSP_OKAY);
	old = r->prod;
	put_req(r, BLKIF_OP_READ, 2000 + sector, sector, fx->g.rw[rpage]);
	push(r, old);
	get_rsp(r, &id, &st);
	assert_true(id == 2000 + sector && st == BLKIF_RSP_OKAY);
	assert_memory_equal(guest_page(&fx->g, rpage), guest_page(&fx->g, wpage), 4096);
}

static void test_every_order_both_abis(void **state)
{
	struct fx *fx = *state;

	for (int abi = 0; abi <= 1; abi++) {
		for (unsigned int o = 0; o <= RING_MAX_ORDER; o++) {
			assert_int_equal(connect_queue(fx, 0, o, abi, o % 2), 0);
			/* more requests than one page of ring holds, to wrap */
			for (unsigned int k = 0; k < 40; k++)
				roundtrip(fx, 0, 8 * (o * 40 + k), k % 10, 10 + k % 10);
			assert_true(fx->q[0].stats.wr_req == 40 && fx->q[0].stats.rd_req == 40);
			assert_int_equal(be_queue_stop(&fx->q[0]), 0);
			xbd_evtchn_close(fx->gr[0].ev);
			fx->gr[0].ev = NULL;
			assert_int_equal(xbd_gntshr_unshare(fx->g.gs, fx->gr[0].sring, 1u << o), 0);
			fx->gr[0].sring = NULL;               /* really unmapped by the backend */
		}
	}
}

static void test_broken_ring_spares_the_other_queue(void **state)
{
	struct fx *fx = *state;
	struct pollfd pfd;
	uint64_t v;

	assert_int_equal(connect_queue(fx, 0, 0, RING_ABI_X86_64, false), 0);
	assert_int_equal(connect_queue(fx, 1, 1, RING_ABI_X86_64, true), 0);
	roundtrip(fx, 0, 0, 0, 1);
	/* queue 0's frontend claims 33 requests on a 32-entry ring */
	fx->gr[0].prod += 33;
	push(&fx->gr[0], fx->gr[0].prod - 33);
	pfd = (struct pollfd){ fx->q[0].done_fd, POLLIN, 0 };
	assert_int_equal(poll(&pfd, 1, 5000), 1);       /* the thread reports it */
	assert_int_equal(read(fx->q[0].done_fd, &v, sizeof(v)), sizeof(v));
	assert_int_equal(fx->q[0].result, -EIO);
	/* queue 1 is untouched */
	roundtrip(fx, 1, 64, 2, 3);
	assert_int_equal(be_queue_stop(&fx->q[0]), -EIO);
	roundtrip(fx, 1, 128, 4, 5);
	assert_int_equal(be_queue_stop(&fx->q[1]), 0);
}

static void test_bad_setup_leaves_nothing(void **state)
{
	struct fx *fx = *state;
	struct be_queue_cfg c = {
		.plat = fx->g.p, .self = 0, .frontend = 1, .ring_order = 0,
		.storage = &fx->st,
		.limits = { .sectors = 8, .sector_size = 512 },
		.ring_refs = { 100000 }, .remote_port = 1,
	};

	assert_true(be_queue_start(&fx->q[0], &c) < 0);  /* ring ref does not map */
	assert_false(fx->q[0].thread_up);
	assert_null(fx->q[0].gt);
	c.ring_order = 6;
	assert_int_equal(be_queue_start(&fx->q[0], &c), -EINVAL);
	c.ring_order = 0;
	c.ring_refs[0] = fx->g.rw[299];
	c.remote_port = 4000;                              /* no such port */
	assert_true(be_queue_start(&fx->q[0], &c) < 0);
	assert_null(fx->q[0].sring);
	assert_null(fx->q[0].ev);
	assert_int_equal(fx->q[0].stop_fd, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_order_both_abis, setup, teardown),
		cmocka_unit_test_setup_teardown(test_broken_ring_spares_the_other_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_setup_leaves_nothing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
