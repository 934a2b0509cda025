/* SPDX-License-Identifier: MIT */
/*
 * backend/request: every acceptance and rejection rule, one table row
 * each, with the exact status Linux xen-blkback answers and the operation
 * echoed in the response.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "backend/request.h"

#define OK   BLKIF_RSP_OKAY
#define ERR  BLKIF_RSP_ERROR
#define NSUP BLKIF_RSP_EOPNOTSUPP

#define R    BLKIF_OP_READ
#define W    BLKIF_OP_WRITE
#define BAR  BLKIF_OP_WRITE_BARRIER
#define FL   BLKIF_OP_FLUSH_DISKCACHE
#define DIS  BLKIF_OP_DISCARD
#define IND  BLKIF_OP_INDIRECT

#define DISK (1ull << 20)   /* sectors: 512 MiB */

enum lim_kind { L_RW, L_RO, L_4K, L_1K, L_NOFEAT, L_NOIND, L_IND4096, L_NOSEC };

static struct req_limits limits(enum lim_kind k)
{
	struct req_limits l = {
		.sectors = DISK, .sector_size = 512, .flush = true,
		.barrier = true, .discard = true, .discard_secure = true,
		.max_indirect_segs = 512,
	};
	switch (k) {
	case L_RO: l.read_only = true; break;
	case L_4K: l.sector_size = 4096; break;
	case L_1K: l.sector_size = 1024; break;
	case L_NOFEAT: l.flush = l.barrier = l.discard = l.discard_secure = false; break;
	case L_NOIND: l.max_indirect_segs = 0; break;
	case L_IND4096: l.max_indirect_segs = 4096; break;
	case L_NOSEC: l.discard_secure = false; break;
	default: break;
	}
	return l;
}

struct rcase {
	const char *name;
	uint8_t op, iop;          /* operation, indirect_op */
	uint16_t nseg;
	uint64_t sector;
	uint8_t first, last;      /* every segment */
	int16_t bad_seg;          /* >= 0: that segment gets first 6, last 5 */
	uint64_t nr_sectors;      /* discard: request; else expected total */
	uint8_t flag;             /* discard flag */
	enum lim_kind lim;
	int status;
	uint8_t rsp_op;
	unsigned int pages;       /* expected indirect pages */
};

static const struct rcase cases[] = {
	/* name                          op  iop nseg sector      f  l bad  nsec   flag lim     status rsp pages */
	{ "read one page",               R,   0,  1,  0,          0, 7, -1, 8,     0, L_RW,     OK,  R, 0 },
	{ "write 11 pages",              W,   0, 11,  100,        0, 7, -1, 88,    0, L_RW,     OK,  W, 0 },
	{ "write partial sectors",       W,   0,  2,  3,          2, 4, -1, 6,     0, L_RW,     OK,  W, 0 },
	{ "reserved op 4",               4,   0,  1,  0,          0, 7, -1, 0,     0, L_RW,     NSUP, 4, 0 },
	{ "unknown op 7",                7,   0,  1,  0,          0, 7, -1, 0,     0, L_RW,     NSUP, 7, 0 },
	{ "unknown op 255",              255, 0,  1,  0,          0, 7, -1, 0,     0, L_RW,     NSUP, 255, 0 },
	{ "read without segments",       R,   0,  0,  0,          0, 7, -1, 0,     0, L_RW,     ERR, R, 0 },
	{ "write without segments",      W,   0,  0,  0,          0, 7, -1, 0,     0, L_RW,     ERR, W, 0 },
	{ "write 12 segments",           W,   0, 12,  0,          0, 7, -1, 0,     0, L_RW,     ERR, W, 0 },
	{ "read 255 segments",           R,   0, 255, 0,          0, 7, -1, 0,     0, L_RW,     ERR, R, 0 },
	{ "flush without data",          FL,  0,  0,  12345,      0, 7, -1, 0,     0, L_RW,     OK,  FL, 0 },
	{ "flush with data",             FL,  0,  2,  8,          0, 7, -1, 16,    0, L_RW,     OK,  FL, 0 },
	{ "barrier without data",        BAR, 0,  0,  0,          0, 7, -1, 0,     0, L_RW,     OK,  BAR, 0 },
	{ "barrier with data",           BAR, 0,  1,  8,          0, 7, -1, 8,     0, L_RW,     OK,  BAR, 0 },
	{ "last_sect past the page",     R,   0,  1,  0,          0, 8, -1, 0,     0, L_RW,     ERR, R, 0 },
	{ "last_sect 255",               R,   0,  1,  0,          0, 255, -1, 0,   0, L_RW,     ERR, R, 0 },
	{ "first_sect > last_sect",      W,   0,  3,  0,          0, 7,  1, 0,     0, L_RW,     ERR, W, 0 },
	{ "last segment bad",            W,   0, 11,  0,          0, 7, 10, 0,     0, L_RW,     ERR, W, 0 },
	{ "ends at the disk end",        R,   0,  1,  DISK - 8,   0, 7, -1, 8,     0, L_RW,     OK,  R, 0 },
	{ "one sector past the end",     R,   0,  1,  DISK - 7,   0, 7, -1, 0,     0, L_RW,     ERR, R, 0 },
	{ "starts past the end",         W,   0,  1,  DISK,       0, 0, -1, 0,     0, L_RW,     ERR, W, 0 },
	{ "sector wraps around",         R,   0,  1,  UINT64_MAX - 3, 0, 7, -1, 0, 0, L_RW,     ERR, R, 0 },
	{ "read on read-only",           R,   0,  1,  0,          0, 7, -1, 8,     0, L_RO,     OK,  R, 0 },
	{ "write on read-only",          W,   0,  1,  0,          0, 7, -1, 0,     0, L_RO,     ERR, W, 0 },
	{ "flush on read-only",          FL,  0,  0,  0,          0, 7, -1, 0,     0, L_RO,     ERR, FL, 0 },
	{ "barrier on read-only",        BAR, 0,  0,  0,          0, 7, -1, 0,     0, L_RO,     ERR, BAR, 0 },
	{ "discard on read-only",        DIS, 0,  0,  0,          0, 0, -1, 8,     0, L_RO,     ERR, DIS, 0 },
	{ "4k: aligned page",            R,   0,  1,  8,          0, 7, -1, 8,     0, L_4K,     OK,  R, 0 },
	{ "4k: sector not aligned",      R,   0,  1,  1,          0, 7, -1, 0,     0, L_4K,     ERR, R, 0 },
	{ "4k: half page",               W,   0,  1,  0,          0, 3, -1, 0,     0, L_4K,     ERR, W, 0 },
	{ "4k: second half page",        W,   0,  1,  0,          4, 7, -1, 0,     0, L_4K,     ERR, W, 0 },
	{ "1k: odd first sector",        R,   0,  1,  0,          1, 2, -1, 0,     0, L_1K,     ERR, R, 0 },
	{ "1k: aligned 1k",              R,   0,  1,  2,          2, 3, -1, 2,     0, L_1K,     OK,  R, 0 },
	{ "flush not supported",         FL,  0,  0,  0,          0, 7, -1, 0,     0, L_NOFEAT, NSUP, FL, 0 },
	{ "flush n/s, bad segment",      FL,  0,  1,  0,          0, 9, -1, 0,     0, L_NOFEAT, ERR, FL, 0 },
	{ "barrier not supported",       BAR, 0,  0,  0,          0, 7, -1, 0,     0, L_NOFEAT, NSUP, BAR, 0 },
	{ "discard not supported",       DIS, 0,  0,  0,          0, 0, -1, 8,     0, L_NOFEAT, NSUP, DIS, 0 },
	{ "discard",                     DIS, 0,  0,  16,         0, 0, -1, 2048,  0, L_RW,     OK,  DIS, 0 },
	{ "discard nothing",             DIS, 0,  0,  DISK + 1,   0, 0, -1, 0,     0, L_RW,     OK,  DIS, 0 },
	{ "discard to the end",          DIS, 0,  0,  DISK - 8,   0, 0, -1, 8,     0, L_RW,     OK,  DIS, 0 },
	{ "discard past the end",        DIS, 0,  0,  DISK - 8,   0, 0, -1, 9,     0, L_RW,     ERR, DIS, 0 },
	{ "discard wraps around",        DIS, 0,  0,  8,          0, 0, -1, UINT64_MAX - 4, 0, L_RW, ERR, DIS, 0 },
	{ "4k: discard misaligned",      DIS, 0,  0,  8,          0, 0, -1, 4,     0, L_4K,     ERR, DIS, 0 },
	{ "secure discard",              DIS, 0,  0,  0,          0, 0, -1, 8,     1, L_RW,     OK,  DIS, 0 },
	{ "secure discard, no secure",   DIS, 0,  0,  0,          0, 0, -1, 8,     1, L_NOSEC,  OK,  DIS, 0 },
	{ "indirect read 1 segment",     IND, R,  1,  0,          0, 7, -1, 8,     0, L_RW,     OK,  R, 1 },
	{ "indirect write 512",          IND, W, 512, 0,          0, 7, -1, 4096,  0, L_RW,     OK,  W, 1 },
	{ "indirect 513 over the limit", IND, W, 513, 0,          0, 7, -1, 0,     0, L_RW,     ERR, W, 0 },
	{ "indirect 4096, 8 pages",      IND, R, 4096, 0,         0, 7, -1, 32768, 0, L_IND4096, OK, R, 8 },
	{ "indirect 1025, 3 pages",      IND, R, 1025, 0,         0, 7, -1, 8200,  0, L_IND4096, OK, R, 3 },
	{ "indirect 65535",              IND, R, 65535, 0,        0, 7, -1, 0,     0, L_IND4096, ERR, R, 0 },
	{ "indirect without segments",   IND, R,  0,  0,          0, 7, -1, 0,     0, L_RW,     ERR, R, 0 },
	{ "indirect flush",              IND, FL, 1,  0,          0, 7, -1, 0,     0, L_RW,     ERR, FL, 0 },
	{ "indirect discard",            IND, DIS, 1, 0,          0, 7, -1, 0,     0, L_RW,     ERR, DIS, 0 },
	{ "indirect op 200",             IND, 200, 1, 0,          0, 7, -1, 0,     0, L_RW,     ERR, 200, 0 },
	{ "indirect not offered",        IND, R,  1,  0,          0, 7, -1, 0,     0, L_NOIND,  NSUP, R, 0 },
	{ "indirect bad segment",        IND, W, 300, 0,          0, 7, 299, 0,    0, L_RW,     ERR, W, 1 },
	{ "indirect past the end",       IND, R, 100, DISK - 799, 0, 7, -1, 0,     0, L_RW,     ERR, R, 1 },
	{ "indirect write on read-only", IND, W,  1,  0,          0, 7, -1, 0,     0, L_RO,     ERR, W, 1 },
	{ "indirect 4k misaligned",      IND, R,  2,  0,          0, 3, -1, 0,     0, L_4K,     ERR, R, 1 },
};

static void fill_segs(const struct rcase *c, struct blkif_request_segment *s,
		      unsigned int n)
{
	for (unsigned int k = 0; k < n; k++) {
		s[k].gref = 100 + k;
		s[k].first_sect = c->first;
		s[k].last_sect = c->last;
		if ((int)k == c->bad_seg) {
			s[k].first_sect = 6;
			s[k].last_sect = 5;
		}
	}
}

static void build(const struct rcase *c, struct ring_req *in)
{
	memset(in, 0, sizeof(*in));
	in->operation = c->op;
	in->id = 0xfeedull << 32 | c->nseg;
	in->sector_number = c->sector;
	in->nr_segments = c->nseg;
	if (c->op == IND) {
		in->indirect_op = c->iop;
		in->nr_copied = (c->nseg + 511) / 512 > 8 ? 8 : (c->nseg + 511) / 512;
		for (unsigned int k = 0; k < in->nr_copied; k++)
			in->u.indirect_grefs[k] = 9000 + k;
	} else if (c->op == DIS) {
		in->nr_sectors = c->nr_sectors;
		in->discard_flag = c->flag;
	} else {
		in->nr_copied = c->nseg < 11 ? c->nseg : 11;
		fill_segs(c, in->u.seg, in->nr_copied);
	}
}

/* Run one case the way the queue thread does: parse, then (indirect)
 * copy the segments and check them. */
static int run(const struct rcase *c, struct vreq *v, struct blkif_request_segment *segs)
{
	struct req_limits lim = limits(c->lim);
	struct ring_req in;
	int st;

	assert_int_equal(req_limits_check(&lim), 0);
	build(c, &in);
	v->segs = segs;
	st = req_parse(&in, &lim, v);
	if (st != OK || !v->nr_indirect_pages)
		return st;
	assert_int_equal(v->nr_indirect_pages, c->pages);
	for (unsigned int k = 0; k < v->nr_indirect_pages; k++)
		assert_int_equal(v->indirect_grefs[k], 9000 + k);
	assert_true(v->nr_segs <= req_seg_capacity(&lim));
	fill_segs(c, v->segs, v->nr_segs);
	return req_check_segs(v, &lim);
}

static void test_table(void **state)
{
	static struct blkif_request_segment segs[REQ_MAX_INDIRECT_SEGS];
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rcase *c = &cases[i];
		struct vreq v;
		int st = run(c, &v, segs);

		if (st != c->status || v.rsp_op != c->rsp_op)
			fail_msg("case '%s': status %d op %u, want %d op %u", c->name,
				 st, v.rsp_op, c->status, c->rsp_op);
		assert_true(v.id == (0xfeedull << 32 | c->nseg));
		if (st != OK)
			continue;
		if (v.nr_sectors != c->nr_sectors)
			fail_msg("case '%s': %llu sectors, want %llu", c->name,
				 (unsigned long long)v.nr_sectors,
				 (unsigned long long)c->nr_sectors);
		assert_int_equal(v.indirect, c->op == IND);
		if (c->op != DIS)
			assert_int_equal(v.nr_segs, c->nseg);
	}
}

static void test_discard_secure_flag(void **state)
{
	static struct blkif_request_segment segs[11];
	struct vreq v;
	(void)state;
	assert_int_equal(run(&(struct rcase){ .op = DIS, .sector = 0, .nr_sectors = 8,
				.flag = 1, .lim = L_RW, .bad_seg = -1 }, &v, segs), OK);
	assert_true(v.secure);
	assert_int_equal(v.kind, VREQ_DISCARD);
	assert_int_equal(run(&(struct rcase){ .op = DIS, .nr_sectors = 8, .flag = 1,
				.lim = L_NOSEC, .bad_seg = -1 }, &v, segs), OK);
	assert_false(v.secure);
	assert_int_equal(run(&(struct rcase){ .op = DIS, .nr_sectors = 8, .flag = 0,
				.lim = L_RW, .bad_seg = -1 }, &v, segs), OK);
	assert_false(v.secure);
}

static void test_kinds_and_offsets(void **state)
{
	static struct blkif_request_segment segs[11];
	struct vreq v;
	(void)state;
	assert_int_equal(run(&(struct rcase){ .op = FL, .nseg = 1, .first = 2, .last = 5,
				.bad_seg = -1, .lim = L_RW }, &v, segs), OK);
	assert_int_equal(v.kind, VREQ_FLUSH);
	assert_int_equal(req_seg_offset(&v.segs[0]), 1024);
	assert_int_equal(req_seg_len(&v.segs[0]), 2048);
	assert_int_equal(run(&(struct rcase){ .op = BAR, .bad_seg = -1, .lim = L_RW }, &v, segs), OK);
	assert_int_equal(v.kind, VREQ_BARRIER);
	assert_int_equal(run(&(struct rcase){ .op = 9, .bad_seg = -1, .lim = L_RW }, &v, segs), NSUP);
	assert_int_equal(v.kind, VREQ_INVALID);
}

static void test_limits_check(void **state)
{
	struct req_limits l = limits(L_RW);
	(void)state;
	static const struct { uint32_t ss; unsigned int ind; int rc; } t[] = {
		{ 512, 0, 0 }, { 4096, 4096, 0 }, { 2048, 11, 0 }, { 256, 0, -EINVAL },
		{ 8192, 0, -EINVAL }, { 1536, 0, -EINVAL }, { 0, 0, -EINVAL },
		{ 512, 4097, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		l.sector_size = t[i].ss;
		l.max_indirect_segs = t[i].ind;
		assert_int_equal(req_limits_check(&l), t[i].rc);
	}
	l.max_indirect_segs = 0;
	assert_int_equal(req_seg_capacity(&l), 11);
	l.max_indirect_segs = 512;
	assert_int_equal(req_seg_capacity(&l), 512);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_discard_secure_flag),
		cmocka_unit_test(test_kinds_and_offsets),
		cmocka_unit_test(test_limits_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
