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
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/queue.h"
#include "backend/tunables.h"
#include "test_be_guest.h"
#include "test_be_loop.h"

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
	tun_init();              /* the memory budget's limits, among others */
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
		gring_close(&fx->g, &fx->gr[i]);
	}
	storage_close(&fx->st);
	close(fx->fd);
	unlink(fx->file);
	guest_down(&fx->g);
	return 0;
}

/* Guest: share the ring, bind a port; backend: start the queue. */
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

	gring_share(&fx->g, r, order, abi);
	memcpy(c.ring_refs, r->refs, sizeof(r->refs));
	c.remote_port = (xbd_evtchn_port_t)r->port;
	return be_queue_start(&fx->q[i], &c);
}

static void roundtrip(struct fx *fx, int i, uint64_t sector, unsigned int wpage,
		      unsigned int rpage)
{
	gring_roundtrip(&fx->g, &fx->gr[i], sector, wpage, rpage);
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
			/* the queue thread still runs: read its counters as any
			 * other reader does (stats.h), not with plain loads */
			struct be_stats st = { 0 };

			be_stats_add_to(&st, &fx->q[0].stats);
			assert_true(st.wr_req == 40 && st.rd_req == 40);
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
