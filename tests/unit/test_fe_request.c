/* SPDX-License-Identifier: MIT */
/*
 * frontend/request: the stateless block-layer rules: the limits a backend
 * may give, what a request may ask under them, how fragments become
 * direct or indirect segments, flush/barrier/discard requests, status
 * mapping and the EOPNOTSUPP feature drop.  (Splitting, the request
 * table and completion are the channel's: test_fe_channel.c.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/request.h"

static void test_limits_check(void **state)
{
	static const struct { unsigned int ss; uint64_t sectors; unsigned int ind; int rc; } cases[] = {
		{ 512, 100, 0, 0 }, { 4096, 800, 0, 0 }, { 1024, 2, 32, 0 },
		{ 4096, 801, 0, -EINVAL },  /* capacity not a whole logical block */
		{ 256, 8, 0, -EINVAL }, { 768, 6, 0, -EINVAL }, { 8192, 16, 0, -EINVAL },
		{ 512, 8, 11, -EINVAL }, { 512, 8, 12, 0 }, { 512, 8, 4096, 0 },
		{ 512, 8, 4097, -EINVAL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fe_limits lim = { .sector_size = cases[i].ss, .sectors = cases[i].sectors,
					 .max_indirect_segs = cases[i].ind };
		assert_int_equal(fe_limits_check(&lim), cases[i].rc);
	}
}

static void test_op_check(void **state)
{
	const struct {
		enum xbdfront_op op; uint64_t off, len;
		unsigned int ss; bool ro, flush, barrier, discard, secure; int rc;
	} cases[] = {
		{ XBDFRONT_READ, 0, 8192, 512, 0, 0, 0, 0, 0, 0 },
		{ XBDFRONT_READ, 0, 8192, 4096, 0, 0, 0, 0, 0, 0 },
		{ XBDFRONT_WRITE, 512, 1024, 512, 0, 0, 0, 0, 0, 0 },
		{ XBDFRONT_WRITE, 512, 1024, 4096, 0, 0, 0, 0, 0, -EINVAL },  /* offset */
		{ XBDFRONT_WRITE, 0, 8192, 512, 1, 0, 0, 0, 0, -EROFS },
		{ XBDFRONT_READ, 0, 8192, 512, 1, 0, 0, 0, 0, 0 },
		{ XBDFRONT_READ, 0, 0, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ XBDFRONT_READ, (1u << 20) * 512ull - 4096, 8192, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ XBDFRONT_READ, (1u << 20) * 512ull - 8192, 8192, 512, 0, 0, 0, 0, 0, 0 },
		{ XBDFRONT_READ, UINT64_MAX - 511, 8192, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ XBDFRONT_FLUSH, 0, 0, 512, 0, 1, 0, 0, 0, 0 },
		{ XBDFRONT_FLUSH, 0, 0, 512, 0, 0, 1, 0, 0, 0 },
		{ XBDFRONT_FLUSH, 0, 0, 512, 0, 0, 0, 0, 0, -EOPNOTSUPP },
		{ XBDFRONT_FLUSH, 0, 4096, 512, 0, 1, 0, 0, 0, -EINVAL },
		{ XBDFRONT_BARRIER, 0, 0, 512, 0, 1, 0, 0, 0, -EOPNOTSUPP },
		{ XBDFRONT_BARRIER, 0, 0, 512, 0, 0, 1, 0, 0, 0 },
		{ XBDFRONT_DISCARD, 4096, 1 << 20, 4096, 0, 0, 0, 1, 0, 0 },
		{ XBDFRONT_DISCARD, 4096, 1 << 20, 4096, 0, 0, 0, 0, 0, -EOPNOTSUPP },
		{ XBDFRONT_DISCARD, 4096, 1 << 20, 4096, 1, 0, 0, 1, 0, -EROFS },
		{ XBDFRONT_DISCARD, 512, 4096, 4096, 0, 0, 0, 1, 0, -EINVAL },
		{ XBDFRONT_DISCARD, 0, 0, 512, 0, 0, 0, 1, 0, -EINVAL },
		{ XBDFRONT_SECURE_DISCARD, 0, 512, 512, 0, 0, 0, 1, 0, -EOPNOTSUPP },
		{ XBDFRONT_SECURE_DISCARD, 0, 512, 512, 0, 0, 0, 1, 1, 0 },
		{ (enum xbdfront_op)99, 0, 512, 512, 0, 0, 0, 1, 1, -EINVAL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fe_limits lim = { .sector_size = cases[i].ss, .sectors = 1u << 20,
					 .readonly = cases[i].ro, .flush = cases[i].flush,
					 .barrier = cases[i].barrier, .discard = cases[i].discard,
					 .discard_secure = cases[i].secure };
		print_message("case %zu\n", i);
		assert_int_equal(fe_op_check(&lim, cases[i].op, cases[i].off, cases[i].len),
				 cases[i].rc);
	}
}

/* ---- segments ------------------------------------------------------------- */

static void test_segments(void **state)
{
	static const struct { uint16_t off, len; uint8_t first, last; } cases[] = {
		{ 0, 4096, 0, 7 }, { 0, 512, 0, 0 }, { 3584, 512, 7, 7 },
		{ 1024, 2048, 2, 5 }, { 512, 3584, 1, 7 },
	};
	struct fe_limits lim = { .handle = 5, .sector_size = 512, .sectors = 1 << 20 };
	struct fe_frag fr[sizeof(cases) / sizeof(cases[0])];
	struct fe_req q;

	(void)state;
	for (size_t i = 0; i < 5; i++)
		fr[i] = (struct fe_frag){ .gref = 40 + i, .offset = cases[i].off, .len = cases[i].len };
	fe_build_req(&lim, XBDFRONT_WRITE, 1234, 0, fr, 5, 17, NULL, &q);
	assert_int_equal(q.operation, BLKIF_OP_WRITE);
	assert_int_equal(q.nr_segments, 5);
	assert_int_equal(q.id, 17);
	assert_int_equal(q.handle, 5);
	assert_int_equal(q.sector_number, 1234);
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(q.seg[i].gref, 40 + i);
		assert_int_equal(q.seg[i].first_sect, cases[i].first);
		assert_int_equal(q.seg[i].last_sect, cases[i].last);
	}
}


/* More than 11 fragments: BLKIF_OP_INDIRECT, the segments in the
 * indirect pages, their grants in the request, the rest zero. */
static void test_indirect(void **state)
{
	enum { N = 700 };
	struct fe_limits lim = { .handle = 9, .sector_size = 512, .sectors = 1 << 20,
				 .max_indirect_segs = 1024 };
	static struct fe_frag fr[N];
	struct fe_page ind[2];
	struct fe_req q;

	(void)state;
	for (unsigned int i = 0; i < 2; i++) {
		ind[i].addr = calloc(1, 4096);
		ind[i].gref = 500 + i;
	}
	for (unsigned int i = 0; i < N; i++)
		fr[i] = (struct fe_frag){ .gref = 1000 + i, .offset = (uint16_t)(i % 8 * 512),
					  .len = 512 };
	fe_build_req(&lim, XBDFRONT_READ, 77, 0, fr, N, 3, ind, &q);
	assert_int_equal(q.operation, BLKIF_OP_INDIRECT);
	assert_int_equal(q.indirect_op, BLKIF_OP_READ);
	assert_int_equal(q.nr_segments, N);
	assert_int_equal(q.indirect_grefs[0], 500);
	assert_int_equal(q.indirect_grefs[1], 501);
	for (unsigned int i = 2; i < 8; i++)
		assert_int_equal(q.indirect_grefs[i], 0);
	for (unsigned int i = 0; i < N; i++) {
		const struct xbd_blkif_seg *s = (const struct xbd_blkif_seg *)ind[i / 512].addr +
						i % 512;

		assert_int_equal(s->gref, 1000 + i);
		assert_int_equal(s->first_sect, i % 8);
		assert_int_equal(s->last_sect, i % 8);
	}
	free(ind[0].addr);
	free(ind[1].addr);
}

static void test_special_ops(void **state)
{
	struct fe_limits lim = { .handle = 3, .sector_size = 4096, .sectors = 1 << 20,
				 .flush = true, .barrier = true, .discard = true };
	struct fe_req q;

	(void)state;
	fe_build_req(&lim, XBDFRONT_FLUSH, 0, 0, NULL, 0, 4, NULL, &q);
	assert_int_equal(q.operation, BLKIF_OP_FLUSH_DISKCACHE);
	assert_int_equal(q.nr_segments, 0);
	lim.flush = false;              /* a barrier-only backend (Linux) */
	fe_build_req(&lim, XBDFRONT_FLUSH, 0, 0, NULL, 0, 4, NULL, &q);
	assert_int_equal(q.operation, BLKIF_OP_WRITE_BARRIER);
	fe_build_req(&lim, XBDFRONT_BARRIER, 0, 0, NULL, 0, 5, NULL, &q);
	assert_int_equal(q.operation, BLKIF_OP_WRITE_BARRIER);
	fe_build_req(&lim, XBDFRONT_SECURE_DISCARD, 64, 128, NULL, 0, 6, NULL, &q);
	assert_int_equal(q.operation, BLKIF_OP_DISCARD);
	assert_int_equal(q.discard_flag, BLKIF_DISCARD_SECURE);
	assert_int_equal(q.sector_number, 64);
	assert_int_equal(q.nr_sectors, 128);
	assert_int_equal(q.handle, 3);
	assert_int_equal(q.id, 6);
	fe_build_req(&lim, XBDFRONT_DISCARD, 8, 8, NULL, 0, 7, NULL, &q);
	assert_int_equal(q.discard_flag, 0);
}

static void test_status_and_drop(void **state)
{
	struct fe_limits lim = { .flush = true, .barrier = true, .discard = true,
				 .discard_secure = true };

	(void)state;
	assert_int_equal(fe_rsp_status(BLKIF_RSP_OKAY), 0);
	assert_int_equal(fe_rsp_status(BLKIF_RSP_EOPNOTSUPP), -EOPNOTSUPP);
	assert_int_equal(fe_rsp_status(BLKIF_RSP_ERROR), -EIO);
	assert_int_equal(fe_rsp_status(7), -EIO);        /* unknown: an error */
	assert_int_equal(fe_rsp_status(-32768), -EIO);
	fe_limits_drop(&lim, BLKIF_OP_READ);
	assert_true(lim.flush && lim.barrier && lim.discard);
	fe_limits_drop(&lim, BLKIF_OP_FLUSH_DISKCACHE);
	assert_false(lim.flush);
	assert_true(lim.barrier);
	fe_limits_drop(&lim, BLKIF_OP_DISCARD);
	assert_false(lim.discard || lim.discard_secure);
	fe_limits_drop(&lim, BLKIF_OP_WRITE_BARRIER);
	assert_false(lim.barrier);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limits_check),
		cmocka_unit_test(test_op_check),
		cmocka_unit_test(test_segments),
		cmocka_unit_test(test_indirect),
		cmocka_unit_test(test_special_ops),
		cmocka_unit_test(test_status_and_drop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
