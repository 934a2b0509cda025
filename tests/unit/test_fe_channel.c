/* SPDX-License-Identifier: MIT */
/*
 * frontend/channel + device + gntpool over the real local platform: a
 * guest domain (this process claims domain 1) runs libxbdfront's channels
 * against a small fake backend thread acting as domain 0.  The backend maps the
 * rings and data grants through xbd_gnttab, reads requests with raw byte
 * offsets of either ABI, serves them from a memory disk, and signals
 * through real event channels.  It can turn hostile or vanish.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
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

#include "frontend/device.h"
#include "tests/unit/fe_fakebe.h"

static void fx_open(struct fe_fx *f, unsigned int nq, unsigned int order, enum fe_abi abi,
		    bool persistent, unsigned int max_ind)
{
	fe_fx_open(f, nq, order, abi, persistent, max_ind, 1024);
}

static struct fe_chan_stats chan_stats(struct fe_fx *f, unsigned int q)
{
	struct fe_chan_stats st;

	fe_chan_get_stats(fe_dev_chan(f->dev, q), &st);
	return st;
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

/* ---- tests ------------------------------------------------------------------- */

/* Random-offset writes and reads through the synchronous helpers, verified
 * against the backend's disk, for a matrix of queue/ring/ABI/grant modes. */
static void test_data_matrix(void **state)
{
	static const struct { unsigned int nq, order; enum fe_abi abi; bool pers; unsigned int ind; } m[] = {
		{ 1, 0, FE_ABI_X86_64, true, 0 },
		{ 1, 0, FE_ABI_X86_32, false, 0 },
		{ 2, 1, FE_ABI_X86_64, false, 32 },
		{ 2, 3, FE_ABI_X86_32, true, 256 },
		{ 1, 5, FE_ABI_X86_64, true, 4096 },
	};
	unsigned char *wbuf = malloc(1 << 20), *rbuf = malloc(1 << 20);

	(void)state;
	srandom(42);
	for (size_t c = 0; c < sizeof(m) / sizeof(m[0]); c++) {
		struct fe_fx f;

		print_message("matrix %zu\n", c);
		fx_open(&f, m[c].nq, m[c].order, m[c].abi, m[c].pers, m[c].ind);
		for (unsigned int k = 0; k < 12; k++) {
			size_t len = (size_t)(1 + random() % 256) * 4096 / (k % 2 ? 8 : 1);
			uint64_t off = (uint64_t)(random() % ((DISK_BYTES - len) / 512)) * 512;

			fill(wbuf, len, k + 1);
			assert_int_equal(xbdfront_pwrite(f.dev, wbuf, len, off), (ssize_t)len);
			assert_memory_equal(f.b.disk + off, wbuf, len);
			memset(rbuf, 0xcc, len);
			assert_int_equal(xbdfront_pread(f.dev, rbuf, len, off), (ssize_t)len);
			assert_memory_equal(rbuf, wbuf, len);
		}
		be_halt(&f.b);
		if (m[c].ind)
			assert_true(f.b.indirect > 0 && f.b.max_segs > 11 &&
				    f.b.max_segs <= m[c].ind);
		else
			assert_true(f.b.indirect == 0 && f.b.max_segs <= 11);
		assert_int_equal(f.b.error, 0);
		assert_int_equal(f.b.late, 0);
		for (unsigned int i = 0; i < m[c].nq; i++) {
			struct fe_chan_stats st = chan_stats(&f, i);
			assert_int_equal(st.pool.in_use, 0);
			assert_int_equal(st.pool.leaked, 0);
			if (!m[c].pers)   /* every grant revoked after use */
				assert_int_equal(st.pool.granted, 0);
		}
		fe_fx_close(&f);
	}
	free(wbuf);
	free(rbuf);
}

/* Scatter-gather with odd-sized iovec pieces that straddle pages. */
static void test_scatter_gather(void **state)
{
	struct fe_fx f;
	unsigned char *src = malloc(64 * 1024), *dst = malloc(64 * 1024);
	size_t cuts[] = { 100, 5000, 3, 20000, 41 };
	struct iovec wv[6], rv[6];
	size_t pos = 0;
	int n = 0;

	(void)state;
	fill(src, 64 * 1024, 9);
	memset(dst, 0, 64 * 1024);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++, n++) {
		wv[n] = (struct iovec){ src + pos, cuts[i] };
		rv[n] = (struct iovec){ dst + pos, cuts[i] };
		pos += cuts[i];
	}
	wv[n] = (struct iovec){ src + pos, 64 * 1024 - pos };
	rv[n] = (struct iovec){ dst + pos, 64 * 1024 - pos };
	n++;
	fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0);
	assert_int_equal(xbdfront_pwritev(f.dev, wv, n, 1 << 20), 64 * 1024);
	assert_memory_equal(f.b.disk + (1 << 20), src, 64 * 1024);
	assert_int_equal(xbdfront_preadv(f.dev, rv, n, 1 << 20), 64 * 1024);
	assert_memory_equal(dst, src, 64 * 1024);
	/* argument errors never reach the ring */
	assert_int_equal(xbdfront_pwrite(f.dev, src, 1000, 0), -EINVAL);
	assert_int_equal(xbdfront_pwrite(f.dev, src, 512, 100), -EINVAL);
	assert_int_equal(xbdfront_pread(f.dev, dst, 4096, DISK_BYTES), -EINVAL);
	assert_int_equal(xbdfront_pread(f.dev, dst, 8u << 20, 0), -E2BIG);
	fe_fx_close(&f);
	free(src);
	free(dst);
}

static void test_flush_discard(void **state)
{
	struct fe_fx f;
	unsigned char buf[8192];

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_32, true, 0);
	memset(f.b.disk, 0xab, DISK_BYTES);
	assert_int_equal(xbdfront_flush(f.dev), 0);
	assert_int_equal(xbdfront_discard(f.dev, 4096, 8192, false), 0);
	assert_int_equal(xbdfront_discard(f.dev, 65536, 512, true), 0);
	assert_int_equal(xbdfront_pread(f.dev, buf, 8192, 4096), 8192);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(f.b.disk[4095], 0xab);
	assert_int_equal(f.b.disk[4096 + 8192], 0xab);
	be_halt(&f.b);
	assert_int_equal(f.b.flushes, 1);
	assert_int_equal(f.b.discards, 2);
	assert_int_equal(f.b.secure, 1);
	fe_fx_close(&f);
}

/* Completion-queue mode driven by the queue fd, with many I/Os in flight
 * across a full ring (fewer than the channel's descriptors: entries
 * nobody reaps hold theirs, see test_fe_freelist.c). */
static void test_completion_queue(void **state)
{
	enum { N = 120 };
	struct fe_fx f;
	static unsigned char bufs[N][4096];
	bool seen[N] = { 0 };
	unsigned int got = 0;

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0);
	for (unsigned int i = 0; i < N; i++) {
		struct iovec v = { bufs[i], 4096 };
		fill(bufs[i], 4096, i);
		assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_WRITE, i * 4096ull, 4096, &v, NULL,
					   1000 + i), 0);
	}
	while (got < N) {
		struct pollfd pfd = { .fd = xbdfront_queue_fd(f.dev, 0), .events = POLLIN };
		struct xbdfront_cqe c[16];
		int k;

		/* woken by the backend, or the entries are there already */
		assert_true(poll(&pfd, 1, 5000) == 1 || xbdfront_reap(f.dev, 0, c, 0) >= 0);
		assert_true(xbdfront_process(f.dev, 0) >= 0);
		while ((k = xbdfront_reap(f.dev, 0, c, 16)) > 0) {
			for (int j = 0; j < k; j++) {
				assert_int_equal(c[j].res, 0);
				assert_true(c[j].user_data >= 1000 && c[j].user_data < 1000 + N);
				assert_false(seen[c[j].user_data - 1000]);
				seen[c[j].user_data - 1000] = true;
			}
			got += k;
		}
	}
	for (unsigned int i = 0; i < N; i++)
		assert_memory_equal(f.b.disk + i * 4096ull, bufs[i], 4096);
	fe_fx_close(&f);
}

/* Batch publish: descriptors submitted stay unpublished (the shared
 * req_prod does not move) until xbdfront_commit publishes them all with
 * one index store and one notification; the backend finds them all at
 * once.  One xbdfront_submit of an array does the same as one call per
 * descriptor. */
static void test_batch_publish(void **state)
{
	enum { N = 8 };
	struct fe_fx f;
	static unsigned char bufs[2 * N][4096];
	struct iovec v[2 * N];
	struct xbdfront_sqe sqe[N];
	struct fe_chan_stats st;

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0);
	for (unsigned int i = 0; i < 2 * N; i++) {
		fill(bufs[i], 4096, 50 + i);
		v[i] = (struct iovec){ bufs[i], 4096 };
	}
	for (unsigned int i = 0; i < N; i++) {
		struct xbdfront_sqe one = { .op = XBDFRONT_WRITE, .iovcnt = 1, .offset = i * 4096ull,
					    .len = 4096, .iov = &v[i], .user_data = 700 + i };

		assert_int_equal(xbdfront_submit(f.dev, 0, &one, 1), 1);
	}
	usleep(20 * 1000);
	st = chan_stats(&f, 0);
	assert_true(st.submitted == N && st.notifies == 0 && st.commits == 0);
	be_halt(&f.b);
	assert_int_equal(f.b.reqs, 0);                 /* nothing published */
	be_start(&f.b);
	assert_int_equal(xbdfront_commit(f.dev, 0), 0);
	st = chan_stats(&f, 0);
	assert_int_equal(st.notifies, 1);              /* one kick for the batch */
	assert_int_equal(st.commits, 1);
	assert_int_equal(xbdfront_commit(f.dev, 0), 0);   /* nothing new: no kick */
	assert_int_equal(chan_stats(&f, 0).notifies, 1);
	fe_reap_n(f.dev, 0, N);
	/* an array in one call */
	for (unsigned int i = 0; i < N; i++)
		sqe[i] = (struct xbdfront_sqe){ .op = XBDFRONT_WRITE, .iovcnt = 1,
						.offset = (N + i) * 4096ull, .len = 4096,
						.iov = &v[N + i], .user_data = i };
	assert_int_equal(xbdfront_submit(f.dev, 0, sqe, N), N);
	assert_int_equal(xbdfront_commit(f.dev, 0), 0);
	fe_reap_n(f.dev, 0, N);
	st = chan_stats(&f, 0);
	assert_int_equal(st.commits, 2);
	assert_true(st.notifies <= 2);
	be_halt(&f.b);
	assert_int_equal(f.b.max_batch, N);            /* found as one batch */
	for (unsigned int i = 0; i < 2 * N; i++)
		assert_memory_equal(f.b.disk + i * 4096ull, bufs[i], 4096);
	fe_fx_close(&f);
}

/* Ids come from a LIFO free list: one request at a time always uses id
 * 0, eight at a time ids 0..7; never an id still in flight. */
static void test_id_reuse(void **state)
{
	static unsigned char buf[8 * 4096];
	struct fe_fx f;

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0);
	for (unsigned int i = 0; i < 50; i++)
		assert_int_equal(xbdfront_pread(f.dev, buf, 4096, i * 4096ull), 4096);
	be_halt(&f.b);
	assert_int_equal(f.b.max_id, 0);
	be_start(&f.b);
	for (unsigned int round = 0; round < 20; round++) {
		for (unsigned int i = 0; i < 8; i++) {
			struct iovec v = { buf + i * 4096, 4096 };
			struct xbdfront_sqe s = { .op = XBDFRONT_READ, .iovcnt = 1, .offset = i * 4096ull,
						  .len = 4096, .iov = &v, .user_data = i };

			assert_int_equal(xbdfront_submit(f.dev, 0, &s, 1), 1);
		}
		assert_int_equal(xbdfront_commit(f.dev, 0), 0);
		fe_reap_n(f.dev, 0, 8);
	}
	be_halt(&f.b);
	assert_int_equal(f.b.max_id, 7);
	assert_int_equal(f.b.error, 0);
	fe_fx_close(&f);
}

/* Responses in another order than the requests (the backend answers each
 * batch last first): every I/O gets its own data. */
static void test_responses_out_of_order(void **state)
{
	enum { N = 24 };
	static unsigned char w[N][8192], r[N][8192];
	struct fe_fx f;

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_32, false, 0);
	be_set_mode(&f.b, BE_REVERSE);
	for (unsigned int i = 0; i < N; i++) {
		struct iovec v = { w[i], 8192 };

		fill(w[i], 8192, 300 + i);
		assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_WRITE, i * 8192ull, 8192, &v, NULL, i),
				 0);
	}
	fe_reap_n(f.dev, 0, N);
	for (unsigned int i = 0; i < N; i++) {
		struct iovec v = { r[i], 8192 };
		struct xbdfront_sqe s = { .op = XBDFRONT_READ, .iovcnt = 1, .offset = i * 8192ull,
					  .len = 8192, .iov = &v, .user_data = i };

		assert_int_equal(xbdfront_submit(f.dev, 0, &s, 1), 1);
	}
	assert_int_equal(xbdfront_commit(f.dev, 0), 0);
	fe_reap_n(f.dev, 0, N);
	be_halt(&f.b);
	assert_true(f.b.max_batch > 1);              /* some batches were reversed */
	for (unsigned int i = 0; i < N; i++)
		assert_memory_equal(r[i], w[i], 8192);
	fe_fx_close(&f);
}

struct cb_log {
	int status[8];
	unsigned int n;
};

static void log_cb(const struct xbdfront_cqe *cqe)
{
	struct cb_log *l = (struct cb_log *)(uintptr_t)cqe->user_data;

	l->status[l->n++] = cqe->res;
}

/* A callback submission of iov on queue q; its log is user_data. */
static int submit_cb(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op,
		     uint64_t off, uint64_t len, struct iovec *iov, struct cb_log *log)
{
	return fe_submit(dev, q, op, off, len, iov, log_cb, (uintptr_t)log);
}

/* A backend that breaks the protocol shuts the device down with -EIO and
 * nothing it wrote reaches the application's buffers.  Two reads go out
 * in one batch.  A duplicated answer (the first read's, in place of the
 * second's): the first one was valid and completes its read (as in Linux
 * blkfront), the second, for an id no longer in flight, breaks the ring. */
static void test_hostile_backend(void **state)
{
	static const struct { enum be_mode mode; const char *why; bool first_ok; } cases[] = {
		{ BE_BAD_ID, "out of range", false },
		{ BE_WRONG_OP, "has operation", false },
		{ BE_RUNAWAY, "runs past", false },
		{ BE_DUP_ID, "response id 0 is not in flight", true },
		{ BE_UNKNOWN_ID, "response id 16 is not in flight", false },
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fe_fx f;
		unsigned char buf[2][4096], pattern[4096];
		struct xbdfront_info info;
		struct cb_log log[2] = { { { 0 }, 0 }, { { 0 }, 0 } };
		struct iovec v[2] = { { buf[0], 4096 }, { buf[1], 4096 } };
		struct xbdfront_sqe sqe[2];

		fx_open(&f, 2, 0, FE_ABI_X86_64, true, 0);
		memset(f.b.disk, 0x5a, DISK_BYTES);
		for (int i = 0; i < 3; i++)
			assert_int_equal(xbdfront_pread(f.dev, buf[0], 4096, 0), 4096);
		be_set_mode(&f.b, cases[c].mode);
		memset(buf, 0x11, sizeof(buf));
		memset(pattern, 0x11, sizeof(pattern));
		for (int i = 0; i < 2; i++)
			sqe[i] = (struct xbdfront_sqe){ .op = XBDFRONT_READ, .iovcnt = 1,
							.offset = i * 4096ull, .len = 4096,
							.iov = &v[i], .done = log_cb,
							.user_data = (uintptr_t)&log[i] };
		assert_int_equal(xbdfront_submit(f.dev, 0, sqe, 2), 2);
		assert_int_equal(xbdfront_commit(f.dev, 0), 0);
		while (log[0].n + log[1].n < 2) {
			(void)xbdfront_wait(f.dev, 0, 100, -1);
			(void)xbdfront_reap(f.dev, 0, NULL, 0);
		}
		assert_int_equal(log[0].n, 1);
		assert_int_equal(log[1].n, 1);
		if (cases[c].first_ok) {
			assert_int_equal(log[0].status[0], 0);
			assert_memory_equal(buf[0], f.b.disk, 4096);
		} else {
			assert_int_equal(log[0].status[0], -EIO);
			assert_memory_equal(buf[0], pattern, 4096);
		}
		assert_int_equal(log[1].status[0], -EIO);
		assert_memory_equal(buf[1], pattern, 4096);
		assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
		assert_int_equal(info.error, -EIO);
		print_message("reason: %s\n", info.reason);
		assert_non_null(strstr(info.reason, cases[c].why));
		assert_int_equal(xbdfront_pread(f.dev, buf[0], 4096, 0), -EIO);
		assert_int_equal(xbdfront_process(f.dev, 0), -EIO);
		/* the whole device is down, not only the broken queue */
		assert_int_equal(submit_cb(f.dev, 1, XBDFRONT_READ, 0, 4096, &v[0], &log[0]), -EIO);
		assert_int_equal(xbdfront_process(f.dev, 1), -EIO);
		fe_fx_close(&f);
	}
}

/* The backend vanishes with I/O in flight; the frontend moves to a fresh
 * ring (another order) and a new backend: the I/O finishes without error. */
static void test_recovery(void **state)
{
	enum { N = 40 };
	struct fe_fx f;
	static unsigned char bufs[N][8192];
	struct cb_log logs[N];

	(void)state;
	memset(logs, 0, sizeof(logs));
	fx_open(&f, 2, 0, FE_ABI_X86_64, true, 32);
	be_set_mode(&f.b, BE_SILENT);    /* takes the requests, never answers */
	for (unsigned int i = 0; i < N; i++) {
		struct iovec v = { bufs[i], 8192 };
		fill(bufs[i], 8192, i + 7);
		assert_int_equal(submit_cb(f.dev, i % 2, XBDFRONT_WRITE, i * 8192ull, 8192, &v,
					   &logs[i]), 0);
	}
	usleep(100 * 1000);
	be_stop(&f.b);                   /* gone, requests and all */
	for (unsigned int i = 0; i < N; i++)
		assert_int_equal(logs[i].n, 0);

	assert_int_equal(fe_dev_reset(f.dev, 2, FE_ABI_X86_32), 0);
	f.b.abi = FE_ABI_X86_32;
	be_set_mode(&f.b, BE_NORMAL);
	be_attach(&f.b, f.dev);
	be_start(&f.b);
	f.lim.max_indirect_segs = 0;     /* the new backend offers less */
	assert_int_equal(fe_dev_connect(f.dev, &f.lim, 4096), 0);
	for (unsigned int done = 0; done < N;) {
		done = 0;
		for (unsigned int q = 0; q < 2; q++) {
			struct pollfd pfd = { .fd = xbdfront_queue_fd(f.dev, q), .events = POLLIN };
			poll(&pfd, 1, 50);
			assert_true(xbdfront_process(f.dev, q) >= 0);
		}
		for (unsigned int i = 0; i < N; i++)
			done += logs[i].n;
	}
	for (unsigned int i = 0; i < N; i++) {
		assert_int_equal(logs[i].n, 1);
		assert_int_equal(logs[i].status[0], 0);
		assert_memory_equal(f.b.disk + i * 8192ull, bufs[i], 8192);
	}
	fe_fx_close(&f);
}

/* Closing with I/O pending completes it with -ENODEV. */
static void test_close_pending(void **state)
{
	struct fe_fx f;
	unsigned char buf[4096];
	struct cb_log log = { 0 };
	struct iovec v = { buf, 4096 };

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_64, false, 0);
	be_set_mode(&f.b, BE_SILENT);
	assert_int_equal(submit_cb(f.dev, 0, XBDFRONT_READ, 0, 4096, &v, &log), 0);
	be_stop(&f.b);
	xbdfront_close(f.dev);
	f.dev = NULL;
	assert_int_equal(log.n, 1);
	assert_int_equal(log.status[0], -ENODEV);
	fe_fx_close(&f);
}

/* Buffers from xbdfront_buf_alloc go to the backend as they are: no pool
 * page is granted for them; anything else still bounces. */
static void test_zero_copy(void **state)
{
	struct fe_fx f;
	struct fe_chan_stats st;
	unsigned char *buf, *plain = malloc(65536);
	struct iovec v[2];

	(void)state;
	fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0);
	buf = xbdfront_buf_alloc(f.dev, 256 * 1024);
	assert_non_null(buf);
	assert_int_equal((uintptr_t)buf % 4096, 0);
	fill(buf, 128 * 1024, 77);
	/* two pieces, one not page aligned (sector aligned is enough) */
	v[0] = (struct iovec){ buf, 4096 + 512 };
	v[1] = (struct iovec){ buf + 4096 + 512, 128 * 1024 - 4096 - 512 };
	assert_int_equal(xbdfront_pwritev(f.dev, v, 2, 3 * 4096), 128 * 1024);
	assert_memory_equal(f.b.disk + 3 * 4096, buf, 128 * 1024);
	assert_int_equal(xbdfront_pread(f.dev, buf + 128 * 1024, 128 * 1024, 3 * 4096),
			 128 * 1024);
	assert_memory_equal(buf + 128 * 1024, buf, 128 * 1024);
	st = chan_stats(&f, 0);
	assert_int_equal(st.pool.granted, 0);             /* nothing bounced */

	/* misaligned in the buffer, or plain memory: bounced, still right */
	assert_int_equal(xbdfront_pwrite(f.dev, buf + 100, 4096, 0), 4096);
	assert_memory_equal(f.b.disk, buf + 100, 4096);
	fill(plain, 65536, 5);
	assert_int_equal(xbdfront_pwrite(f.dev, plain, 65536, 1 << 20), 65536);
	assert_memory_equal(f.b.disk + (1 << 20), plain, 65536);
	st = chan_stats(&f, 0);
	assert_true(st.pool.granted > 0);

	assert_int_equal(xbdfront_buf_free(f.dev, plain), -EINVAL);
	assert_int_equal(xbdfront_buf_free(f.dev, buf), 0);
	assert_int_equal(xbdfront_buf_free(f.dev, buf), -EINVAL);
	assert_non_null(xbdfront_buf_alloc(f.dev, 4096));   /* freed at close */
	assert_null(xbdfront_buf_alloc(f.dev, 0));
	assert_int_equal(errno, EINVAL);
	fe_fx_close(&f);
	free(plain);
}

/* XBDFRONT_TEST_EVENTS_ONLY=1: the response is on the ring, but a reap
 * that took no event does not look; after the event (xbdfront_wait)
 * it does. */
static void test_events_only(void **state)
{
	static unsigned char buf[4096];
	struct iovec v = { buf, 4096 };
	struct xbdfront_cqe c[4];
	struct fe_fx f;
	int rc = 0;

	(void)state;
	setenv("XBDFRONT_TEST_EVENTS_ONLY", "1", 1);
	fx_open(&f, 1, 0, FE_ABI_X86_64, true, 0);
	unsetenv("XBDFRONT_TEST_EVENTS_ONLY");
	assert_int_equal(fe_submit(f.dev, 0, XBDFRONT_READ, 0, 4096, &v, NULL, 7), 0);
	usleep(100 * 1000);             /* answered and signalled by now */
	for (int i = 0; i < 5; i++)
		assert_int_equal(xbdfront_reap(f.dev, 0, c, 4), 0);
	for (int i = 0; i < 50 && rc != 1; i++)
		rc = xbdfront_wait(f.dev, 0, 100, -1);
	assert_int_equal(rc, 1);
	assert_int_equal(xbdfront_reap(f.dev, 0, c, 4), 1);
	assert_int_equal(c[0].user_data, 7);
	assert_int_equal(c[0].res, 0);
	assert_int_equal(chan_stats(&f, 0).spins, 0);
	/* rsp_cons moved, nothing in flight, no event: the wait sleeps until
	 * its timeout (it used to return at once for ever after the first
	 * response, so a synchronous I/O never waited for its event) */
	assert_int_equal(xbdfront_wait(f.dev, 0, 50, -1), 0);
	fe_fx_close(&f);
}

struct worker {
	struct xbdfront_dev *dev;
	unsigned int id;
	int failures;
};

/* One thread: write, read back and compare its own 256 KiB region. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned char *wb = malloc(65536), *rb = malloc(65536);

	for (unsigned int k = 0; k < 25; k++) {
		size_t len = 4096u * (1 + (k * 7 + w->id) % 16);
		uint64_t off = w->id * 262144ull + (k % 4) * 4096ull;

		fill(wb, len, w->id * 100 + k);
		if (xbdfront_pwrite(w->dev, wb, len, off) != (ssize_t)len ||
		    xbdfront_pread(w->dev, rb, len, off) != (ssize_t)len || memcmp(rb, wb, len))
			w->failures++;
	}
	free(wb);
	free(rb);
	return NULL;
}

/* Six threads share two queues: completions of one thread's I/O are often
 * delivered by another thread's process call. */
static void test_threads(void **state)
{
	enum { T = 6 };
	struct worker w[T];
	pthread_t th[T];
	struct fe_fx f;

	(void)state;
	fx_open(&f, 2, 1, FE_ABI_X86_64, true, 32);
	for (unsigned int i = 0; i < T; i++) {
		w[i] = (struct worker){ f.dev, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	for (unsigned int q = 0; q < 2; q++) {
		struct fe_chan_stats st = chan_stats(&f, q);
		assert_int_equal(st.completed, st.submitted);
		assert_int_equal(st.errors, 0);
		assert_int_equal(st.pool.in_use, 0);
	}
	fe_fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_matrix),
		cmocka_unit_test(test_scatter_gather),
		cmocka_unit_test(test_flush_discard),
		cmocka_unit_test(test_completion_queue),
		cmocka_unit_test(test_batch_publish),
		cmocka_unit_test(test_id_reuse),
		cmocka_unit_test(test_responses_out_of_order),
		cmocka_unit_test(test_hostile_backend),
		cmocka_unit_test(test_recovery),
		cmocka_unit_test(test_close_pending),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_zero_copy),
		cmocka_unit_test(test_events_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
