/* SPDX-License-Identifier: MIT */
/*
 * The queue's free list of I/O structures (frontend/queue.c): after the
 * first round at a given depth no I/O allocates; what the free list keeps
 * is bounded by the ring's entries (also across a reset to a smaller
 * ring); I/Os too large for a cached structure get one of their own; a
 * queue closed with I/O on the ring, waiting and unreaped frees all of it
 * (the ASan build's leak check runs at exit).  Real queues on the local
 * platform against the fake backend of fe_fakebe.c.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "frontend/device.h"
#include "tests/unit/fe_fakebe.h"

#define GUEST 1

static void attach_all(struct fe_fx *f)
{
	struct fe_queue *q = fe_dev_queue(f->dev, 0);
	xbd_grant_ref_t refs[32];
	unsigned int n = fe_queue_ring_refs(q, refs);

	be_attach_ring(&f->b, 0, refs, n, (unsigned int)fe_queue_port(q));
}

/* One queue of ring order `order` (32 << order entries), connected. */
static void open_fx(struct fe_fx *f, unsigned int order)
{
	struct fe_dev_params par = { .backend = 0, .nqueues = 1, .order = order,
				     .abi = FE_ABI_X86_64, .persistent = true,
				     .pool_pages = 1024 };

	memset(f, 0, sizeof(*f));
	strcpy(f->rundir, "/tmp/xbd-fe-freelist-XXXXXX");
	assert_non_null(mkdtemp(f->rundir));
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, f->rundir, &f->p), 0);
	assert_int_equal(xbd_domain_create(f->p, GUEST, "guest", 64u << 20), 0);
	assert_int_equal(xbd_domain_claim(f->p, GUEST, &f->dom), 0);
	assert_int_equal(fe_dev_create(f->p, f->dom, &par, &f->dev), 0);
	f->b = (struct be){ .p = f->p, .guest = GUEST, .abi = FE_ABI_X86_64, .nq = 1 };
	f->b.disk = calloc(1, DISK_BYTES);
	assert_non_null(f->b.disk);
	assert_int_equal(xbd_gnttab_open(f->p, 0, &f->b.gt), 0);
	assert_int_equal(xbd_evtchn_open(f->p, 0, &f->b.ev), 0);
	attach_all(f);
	be_start(&f->b);
	f->lim = (struct fe_limits){ .handle = 51712, .sector_size = 512,
				     .sectors = DISK_BYTES / 512, .max_indirect_segs = 32 };
	assert_int_equal(fe_dev_connect(f->dev, &f->lim, 4096), 0);
}

static struct fe_queue_stats stats(struct fe_fx *f)
{
	struct fe_queue_stats st;

	fe_queue_get_stats(fe_dev_queue(f->dev, 0), &st);
	return st;
}

/* Submit n completion-queue I/Os of len bytes (reads, or writes of
 * bufs) at distinct offsets. */
static void submit_n(struct fe_fx *f, unsigned int n, size_t len, unsigned char *buf, bool write)
{
	for (unsigned int i = 0; i < n; i++) {
		struct iovec v = { buf + (size_t)i * len, len };

		assert_int_equal(xbdfront_submit_cq(f->dev, 0, write ? XBDFRONT_WRITE :
						    XBDFRONT_READ, i * (uint64_t)len, len, &v, 1,
						    i), 0);
	}
}

/* Drive the queue until n completions were reaped, all successful. */
static void reap_n(struct fe_fx *f, unsigned int n)
{
	struct xbdfront_cqe c[64];
	unsigned int got = 0, k;

	while (got < n) {
		struct pollfd pfd = { .fd = xbdfront_queue_fd(f->dev, 0), .events = POLLIN };

		(void)poll(&pfd, 1, 100);
		assert_true(xbdfront_process(f->dev, 0) >= 0);
		while ((k = xbdfront_reap(f->dev, 0, c, 64)) > 0) {
			for (unsigned int j = 0; j < k; j++)
				assert_int_equal(c[j].status, 0);
			got += k;
		}
	}
	assert_int_equal(got, n);
}

/* Steady state: 8 in flight, 50 rounds: 8 structures allocated in all,
 * then every I/O (completion queue or callback) reuses them. */
static void test_reuse(void **state)
{
	static unsigned char buf[16 * 4096];
	struct fe_queue_stats st;
	struct fe_fx f;

	(void)state;
	open_fx(&f, 0);
	for (unsigned int r = 0; r < 50; r++) {
		submit_n(&f, 8, 4096, buf, r % 2);
		reap_n(&f, 8);
	}
	st = stats(&f);
	assert_int_equal(st.completed, 400);
	assert_int_equal(st.io_allocs, 8);
	assert_int_equal(st.io_cached, 8);
	/* the synchronous helpers (callbacks) take and give back one */
	for (unsigned int i = 0; i < 20; i++)
		assert_int_equal(xbdfront_pread(f.dev, buf, 4096, i * 4096ull), 4096);
	st = stats(&f);
	assert_int_equal(st.io_allocs, 8);
	assert_int_equal(st.io_cached, 8);
	/* 64 KiB in 4 iovec pieces still fits a cached structure */
	struct iovec v4[4];
	for (unsigned int i = 0; i < 4; i++)
		v4[i] = (struct iovec){ buf + i * 16384, 16384 };
	assert_int_equal(xbdfront_preadv(f.dev, v4, 4, 0), 65536);
	assert_int_equal(stats(&f).io_allocs, 8);
	fe_fx_close(&f);
}

/* Beyond the free list: more I/Os than the ring holds each get a
 * structure, and only ring-size many are kept afterwards; an I/O larger
 * than the inline arrays gets its own and is never kept. */
static void test_bound(void **state)
{
	enum { N = 100 };
	static unsigned char buf[N * 4096];
	static unsigned char big[256 * 1024];
	struct fe_queue_stats st;
	struct fe_fx f;

	(void)state;
	open_fx(&f, 0);                 /* 32 entries */
	submit_n(&f, N, 4096, buf, true);
	reap_n(&f, N);
	st = stats(&f);
	assert_int_equal(st.io_allocs, N);
	assert_int_equal(st.io_cached, 32);
	submit_n(&f, N, 4096, buf, false);
	reap_n(&f, N);
	st = stats(&f);
	assert_int_equal(st.io_allocs, N + (N - 32));
	assert_int_equal(st.io_cached, 32);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(xbdfront_pwrite(f.dev, big, sizeof(big), 0), (ssize_t)sizeof(big));
	st = stats(&f);
	assert_int_equal(st.io_allocs, N + (N - 32) + 3);
	assert_int_equal(st.io_cached, 32);
	assert_int_equal(st.pool.in_use, 0);
	fe_fx_close(&f);
}

/* A reset to a smaller ring trims the free list to the new ring's size. */
static void test_reset_trims(void **state)
{
	static unsigned char buf[64 * 4096];
	struct fe_fx f;

	(void)state;
	open_fx(&f, 1);                 /* 64 entries */
	submit_n(&f, 64, 4096, buf, false);
	reap_n(&f, 64);
	assert_int_equal(stats(&f).io_cached, 64);
	be_stop(&f.b);
	assert_int_equal(fe_dev_reset(f.dev, 0, FE_ABI_X86_64), 0);
	assert_int_equal(stats(&f).io_cached, 32);
	attach_all(&f);
	be_start(&f.b);
	assert_int_equal(fe_dev_connect(f.dev, &f.lim, 4096), 0);
	submit_n(&f, 40, 4096, buf, false);
	reap_n(&f, 40);
	assert_int_equal(stats(&f).io_allocs, 64 + 8);
	assert_int_equal(stats(&f).io_cached, 32);
	fe_fx_close(&f);
}

static void count_cb(void *arg, int status)
{
	int *n = arg;

	assert_int_equal(status, -ENODEV);
	(*n)++;
}

/* Closed with I/O on the ring (the backend never answers), I/O waiting
 * for ring space, large I/O, and completion-queue entries never reaped:
 * every callback runs once and nothing leaks (ASan's leak check). */
static void test_teardown_in_flight(void **state)
{
	static unsigned char buf[80 * 4096];
	static unsigned char big[128 * 1024];
	struct iovec v = { big, sizeof(big) };
	int cbs = 0;
	struct fe_fx f;

	(void)state;
	open_fx(&f, 0);
	submit_n(&f, 8, 4096, buf, false);
	reap_n(&f, 8);                  /* the free list holds 8 */
	be_set_mode(&f.b, BE_SILENT);
	submit_n(&f, 70, 4096, buf, false);   /* 32 on the ring, the rest waiting */
	for (unsigned int i = 0; i < 5; i++) {
		struct iovec s = { buf + i * 4096, 4096 };

		assert_int_equal(xbdfront_submit(f.dev, 0, XBDFRONT_WRITE, i * 4096ull, 4096,
						 &s, 1, count_cb, &cbs), 0);
	}
	assert_int_equal(xbdfront_submit(f.dev, 0, XBDFRONT_READ, 0, sizeof(big), &v, 1,
					 count_cb, &cbs), 0);
	usleep(50 * 1000);
	assert_true(stats(&f).io_allocs >= 70);
	be_stop(&f.b);
	xbdfront_close(f.dev);          /* fails all with -ENODEV, reaps, frees */
	f.dev = NULL;
	assert_int_equal(cbs, 6);
	fe_fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_reset_trims),
		cmocka_unit_test(test_teardown_in_flight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
