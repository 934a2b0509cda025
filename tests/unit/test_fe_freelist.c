/* SPDX-License-Identifier: MIT */
/*
 * The channel's free lists (frontend/channel.c): descriptors made when
 * the channel is created and bounce pages from its grant pool.  In the
 * steady state nothing is allocated per request (a descriptor grows its
 * arrays once for a larger request and keeps them); running out of
 * descriptors or pages makes a request wait, never fail; a channel closed
 * with requests on the ring, waiting and unreaped frees all of it (the
 * ASan build's leak check runs at exit).  Real channels on the local
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

static struct fe_chan_stats stats(struct fe_fx *f)
{
	struct fe_chan_stats st;

	fe_chan_get_stats(fe_dev_chan(f->dev, 0), &st);
	return st;
}

/* Queue n completion-entry requests of len bytes (reads, or writes of
 * buf) at distinct offsets, published. */
static void submit_n(struct fe_fx *f, unsigned int n, size_t len, unsigned char *buf, bool write)
{
	for (unsigned int i = 0; i < n; i++) {
		struct iovec v = { buf + (size_t)i * len, len };

		assert_int_equal(fe_submit(f->dev, 0, write ? XBDFRONT_WRITE : XBDFRONT_READ,
					   i * (uint64_t)len, len, &v, NULL, i), 0);
	}
}

static void count_ok(const struct xbdfront_cqe *cqe)
{
	unsigned int *n = (unsigned int *)(uintptr_t)cqe->user_data;

	assert_int_equal(cqe->res, 0);
	__atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
}

/* Steady state: 8 in flight, 50 rounds of 64 KiB (the inline size) and
 * 1 MiB (grown once): the descriptors grow a bounded number of times,
 * then every request reuses them; all are free at the end. */
static void test_reuse(void **state)
{
	static unsigned char buf[8 << 20];
	struct fe_chan_stats st;
	struct fe_fx f;
	uint64_t grows;

	(void)state;
	fe_fx_open(&f, 1, 0, FE_ABI_X86_64, true, 32, 4096);
	for (unsigned int r = 0; r < 50; r++) {
		submit_n(&f, 8, 65536, buf, r % 2);
		fe_reap_n(f.dev, 0, 8);
	}
	st = stats(&f);
	assert_int_equal(st.grows, 0);
	assert_int_equal(st.ios_free, st.nr_ios);
	assert_true(st.nr_ios >= 128);
	submit_n(&f, 2, 1 << 20, buf, false);
	fe_reap_n(f.dev, 0, 2);
	grows = stats(&f).grows;
	assert_true(grows > 0 && grows <= 4);
	for (unsigned int r = 0; r < 20; r++) {
		submit_n(&f, 2, 1 << 20, buf, r % 2);
		fe_reap_n(f.dev, 0, 2);
	}
	st = stats(&f);
	assert_int_equal(st.grows, grows);            /* kept: no allocation */
	assert_int_equal(st.pool.in_use, 0);
	assert_int_equal(st.ios_free, st.nr_ios);
	fe_fx_close(&f);
}

/* More requests than descriptors, submitted from one thread with
 * callbacks: submit waits for descriptors (reaping meanwhile) instead of
 * failing, and every request completes once with its data. */
static void test_descriptors_exhausted_wait(void **state)
{
	enum { N = 600 };
	static unsigned char buf[N * 4096];
	unsigned int done = 0;
	struct fe_chan_stats st;
	struct fe_fx f;

	(void)state;
	fe_fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0, 1024);
	for (unsigned int i = 0; i < N; i++)
		memset(buf + i * 4096, (int)(i % 251), 4096);
	for (unsigned int i = 0; i < N; i++) {
		struct iovec v = { buf + i * 4096, 4096 };

		assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_WRITE, (i % 2048) * 4096ull, 4096, &v,
					   count_ok, (uintptr_t)&done), 0);
	}
	while (__atomic_load_n(&done, __ATOMIC_RELAXED) < N) {
		(void)xbdfront_wait(f.dev, 0, 100, -1);
		assert_true(xbdfront_reap(f.dev, 0, NULL, 0) >= 0);
	}
	st = stats(&f);
	assert_true(st.nr_ios < N);
	assert_true(st.waits > 0);                    /* it did run out */
	assert_int_equal(st.completed, N);
	assert_int_equal(st.errors, 0);
	for (unsigned int i = 0; i < N; i++)
		assert_memory_equal(f.b.disk + (i % 2048) * 4096ull, buf + i * 4096, 4096);
	fe_fx_close(&f);
}

/* Every descriptor a completion entry nobody reaped: -EBUSY (as io_uring
 * with a full completion queue), until the caller reaps. */
static void test_unreaped_is_busy(void **state)
{
	static unsigned char buf[4096];
	struct iovec v = { buf, 4096 };
	unsigned int n = 0;
	struct fe_fx f;
	int rc;

	(void)state;
	fe_fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0, 1024);
	while ((rc = fe_submit(f.dev, 0, XBDFRONT_READ, 0, 4096, &v, NULL, n)) == 0)
		n++;
	assert_int_equal(rc, -EBUSY);
	assert_int_equal(n, stats(&f).nr_ios);
	fe_reap_n(f.dev, 0, n);
	assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_READ, 0, 4096, &v, NULL, 0), 0);
	fe_reap_n(f.dev, 0, 1);
	fe_fx_close(&f);
}

/* A pool of 48 pages and 64 writes of 16 KiB in flight: most wait for
 * pages (in FIFO order), none fails, all land. */
static void test_pages_exhausted_wait(void **state)
{
	enum { N = 64 };
	static unsigned char buf[N * 16384];
	struct fe_fx f;

	(void)state;
	fe_fx_open(&f, 1, 0, FE_ABI_X86_64, false, 0, 48);
	for (unsigned int i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + i / 4096);
	submit_n(&f, N, 16384, buf, true);
	fe_reap_n(f.dev, 0, N);
	assert_memory_equal(f.b.disk, buf, sizeof(buf));
	assert_int_equal(stats(&f).pool.in_use, 0);
	assert_int_equal(stats(&f).pool.granted, 0);  /* not persistent: all revoked */
	fe_fx_close(&f);
}

static void count_cb(const struct xbdfront_cqe *cqe)
{
	int *n = (int *)(uintptr_t)cqe->user_data;

	assert_int_equal(cqe->res, -ENODEV);
	(*n)++;
}

/* Closed with requests on the ring (the backend never answers), waiting
 * for ring space, a large one, and completion entries never reaped:
 * every callback runs once and nothing leaks (ASan's leak check). */
static void test_teardown_in_flight(void **state)
{
	static unsigned char buf[80 * 4096];
	static unsigned char big[128 * 1024];
	struct iovec v = { big, sizeof(big) };
	int cbs = 0;
	struct fe_fx f;

	(void)state;
	fe_fx_open(&f, 1, 0, FE_ABI_X86_64, true, 32, 1024);
	submit_n(&f, 8, 4096, buf, false);
	fe_reap_n(f.dev, 0, 8);
	be_set_mode(&f.b, BE_SILENT);
	submit_n(&f, 70, 4096, buf, false);   /* 32 on the ring, the rest waiting */
	for (unsigned int i = 0; i < 5; i++) {
		struct iovec s = { buf + i * 4096, 4096 };

		assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_WRITE, i * 4096ull, 4096, &s, count_cb,
					   (uintptr_t)&cbs), 0);
	}
	assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_READ, 0, sizeof(big), &v, count_cb,
				   (uintptr_t)&cbs), 0);
	usleep(50 * 1000);
	be_stop(&f.b);
	xbdfront_close(f.dev);          /* fails all with -ENODEV, frees */
	f.dev = NULL;
	assert_int_equal(cbs, 6);
	fe_fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_descriptors_exhausted_wait),
		cmocka_unit_test(test_unreaped_is_busy),
		cmocka_unit_test(test_pages_exhausted_wait),
		cmocka_unit_test(test_teardown_in_flight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
