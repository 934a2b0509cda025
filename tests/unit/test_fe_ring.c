/* SPDX-License-Identifier: MIT */
/*
 * frontend/ring: slot layouts of both ABIs, push/notify, the single read
 * of each response slot, and the index checks against a hostile fake
 * backend (what a response's id and operation may be is the channel's
 * to judge: test_fe_channel.c).
 *
 * The fake backend below decodes requests and encodes responses with raw
 * byte offsets taken from blkif.h and the Linux x86_32 view, not with the
 * structs of lib/blkif.h, so a layout mistake there fails here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/ring.h"
#include "tests/unit/slot_trap.h"

#define HDR 64u

struct fx {
	unsigned int order;
	enum fe_abi abi;
	unsigned char *mem;
	struct fe_ring r;
	uint32_t be_rsp_prod;     /* fake backend's private response producer */
};

static size_t stride(enum fe_abi abi)
{
	return abi == FE_ABI_X86_32 ? 108 : 112;
}

static void fx_init(struct fx *f, unsigned int order, enum fe_abi abi)
{
	memset(f, 0, sizeof(*f));
	f->order = order;
	f->abi = abi;
	f->mem = aligned_alloc(4096, (size_t)4096 << order);
	assert_non_null(f->mem);
	memset(f->mem, 0xa5, (size_t)4096 << order);
	assert_int_equal(fe_ring_init(&f->r, f->mem, order, abi), 0);
}

static void fx_fini(struct fx *f)
{
	fe_ring_destroy(&f->r);
	free(f->mem);
}

static unsigned char *bslot(struct fx *f, uint32_t idx)
{
	return f->mem + HDR + (idx & ((32u << f->order) - 1)) * stride(f->abi);
}

static uint64_t rd(const unsigned char *p, size_t off, size_t len)
{
	uint64_t v = 0;
	memcpy(&v, p + off, len);   /* little endian */
	return v;
}

static void wr(unsigned char *p, size_t off, size_t len, uint64_t v)
{
	memcpy(p + off, &v, len);
}

static uint32_t hdr_get(struct fx *f, size_t off)
{
	return (uint32_t)rd(f->mem, off, 4);
}

static void hdr_set(struct fx *f, size_t off, uint32_t v)
{
	wr(f->mem, off, 4, v);
}

enum { REQ_PROD = 0, REQ_EVENT = 4, RSP_PROD = 8, RSP_EVENT = 12 };

/* Fake backend: write one response at its producer index (not published). */
static void be_put_rsp(struct fx *f, uint64_t id, uint8_t op, int16_t status)
{
	unsigned char *s = bslot(f, f->be_rsp_prod++);

	wr(s, 0, 8, id);
	wr(s, 8, 1, op);
	wr(s, 10, 2, (uint16_t)status);
}

static void be_publish(struct fx *f)
{
	hdr_set(f, RSP_PROD, f->be_rsp_prod);
}

static struct fe_req rw_req(uint64_t id, uint8_t op, unsigned int nsegs)
{
	struct fe_req q = { .operation = op, .nr_segments = nsegs, .id = id,
			    .handle = 0x51, .sector_number = 0x1122334455ull };

	for (unsigned int i = 0; i < nsegs; i++) {
		q.seg[i].gref = 1000 + i;
		q.seg[i].first_sect = i % 8;
		q.seg[i].last_sect = 7;
	}
	return q;
}

/* Issue one request and publish it. */
static void issue(struct fx *f, uint64_t id, uint8_t op)
{
	struct fe_req q = rw_req(id, op, 1);

	assert_int_equal(fe_ring_put_req(&f->r, &q), 0);
	fe_ring_push(&f->r);
}

/* ---- geometry ----------------------------------------------------------- */

static unsigned int rd_pow2(size_t x)
{
	unsigned int p = 1;

	while (p * 2 <= x)
		p *= 2;
	return p;
}

static void test_geometry(void **state)
{
	(void)state;
	for (unsigned int order = 0; order <= FE_RING_MAX_ORDER; order++) {
		for (int abi = FE_ABI_X86_64; abi <= FE_ABI_X86_32; abi++) {
			size_t bytes = (size_t)4096 << order;
			unsigned int want = rd_pow2((bytes - HDR) / stride(abi));
			struct fx f;

			fx_init(&f, order, abi);
			assert_int_equal(f.r.size, want);
			assert_int_equal(fe_ring_entries(order), want);
			assert_int_equal(f.r.stride, stride(abi));
			assert_int_equal(fe_ring_free_slots(&f.r), want);
			/* header reset as SHARED_RING_INIT */
			assert_int_equal(hdr_get(&f, REQ_PROD), 0);
			assert_int_equal(hdr_get(&f, REQ_EVENT), 1);
			assert_int_equal(hdr_get(&f, RSP_PROD), 0);
			assert_int_equal(hdr_get(&f, RSP_EVENT), 1);
			fx_fini(&f);
		}
	}
	struct fe_ring r;
	char page[64];
	assert_int_equal(fe_ring_init(&r, page, 6, FE_ABI_X86_64), -EINVAL);
	assert_int_equal(fe_ring_init(&r, NULL, 0, FE_ABI_X86_64), -EINVAL);
}

static void test_abi_names(void **state)
{
	(void)state;
	assert_string_equal(fe_abi_protocol(FE_ABI_X86_32), "x86_32-abi");
	assert_string_equal(fe_abi_protocol(FE_ABI_X86_64), "x86_64-abi");
}

/* ---- request layouts -------------------------------------------------- */

/* Byte offsets of the request fields, per ABI. */
struct layout {
	size_t id, sector, seg, nr_sectors, ind_handle, ind_grefs;
};

static const struct layout L64 = { 8, 16, 24, 24, 24, 28 };
static const struct layout L32 = { 4, 12, 20, 20, 20, 24 };

static void check_rw_slot(enum fe_abi abi, unsigned int order)
{
	const struct layout *L = abi == FE_ABI_X86_32 ? &L32 : &L64;
	struct fe_req q = rw_req(5, BLKIF_OP_WRITE, BLKIF_MAX_SEGMENTS_PER_REQUEST);
	struct fx f;
	unsigned char *s;

	fx_init(&f, order, abi);
	memset(f.mem + HDR, 0xee, ((size_t)4096 << order) - HDR);
	assert_int_equal(fe_ring_put_req(&f.r, &q), 0);
	s = bslot(&f, 0);
	assert_int_equal(rd(s, 0, 1), BLKIF_OP_WRITE);
	assert_int_equal(rd(s, 1, 1), 11);
	assert_int_equal(rd(s, 2, 2), 0x51);
	if (abi == FE_ABI_X86_64)
		assert_int_equal(rd(s, 4, 4), 0);   /* padding written, no leak */
	assert_int_equal(rd(s, L->id, 8), 5);
	assert_int_equal(rd(s, L->sector, 8), 0x1122334455ull);
	for (unsigned int i = 0; i < 11; i++) {
		const unsigned char *g = s + L->seg + 8 * i;
		assert_int_equal(rd(g, 0, 4), 1000 + i);
		assert_int_equal(rd(g, 4, 1), i % 8);
		assert_int_equal(rd(g, 5, 1), 7);
		assert_int_equal(rd(g, 6, 2), 0);
	}
	/* the next slot is untouched; nothing is visible before the push */
	assert_int_equal(rd(bslot(&f, 1), 0, 1), 0xee);
	assert_int_equal(hdr_get(&f, REQ_PROD), 0);
	fe_ring_push(&f.r);
	assert_int_equal(hdr_get(&f, REQ_PROD), 1);
	fx_fini(&f);
}

static void test_rw_layout(void **state)
{
	(void)state;
	for (unsigned int order = 0; order <= FE_RING_MAX_ORDER; order++) {
		check_rw_slot(FE_ABI_X86_64, order);
		check_rw_slot(FE_ABI_X86_32, order);
	}
}

static void check_discard_indirect(enum fe_abi abi)
{
	const struct layout *L = abi == FE_ABI_X86_32 ? &L32 : &L64;
	struct fe_req d = { .operation = BLKIF_OP_DISCARD, .discard_flag = BLKIF_DISCARD_SECURE,
			    .handle = 7, .id = 1, .sector_number = 4096, .nr_sectors = 1ull << 33 };
	struct fe_req in = { .operation = BLKIF_OP_INDIRECT, .indirect_op = BLKIF_OP_READ,
			     .handle = 9, .id = 2, .sector_number = 77, .nr_segments = 1025 };
	struct fx f;
	unsigned char *s;

	fx_init(&f, 0, abi);
	memset(f.mem + HDR, 0xee, 4096 - HDR);
	for (unsigned int i = 0; i < 8; i++)
		in.indirect_grefs[i] = 500 + i;   /* only 3 pages are in use */
	assert_int_equal(fe_ring_put_req(&f.r, &d), 0);
	assert_int_equal(fe_ring_put_req(&f.r, &in), 0);

	s = bslot(&f, 0);
	assert_int_equal(rd(s, 0, 1), BLKIF_OP_DISCARD);
	assert_int_equal(rd(s, 1, 1), BLKIF_DISCARD_SECURE);
	assert_int_equal(rd(s, 2, 2), 7);
	assert_int_equal(rd(s, L->id, 8), 1);
	assert_int_equal(rd(s, L->sector, 8), 4096);
	assert_int_equal(rd(s, L->nr_sectors, 8), 1ull << 33);

	s = bslot(&f, 1);
	assert_int_equal(rd(s, 0, 1), BLKIF_OP_INDIRECT);
	assert_int_equal(rd(s, 1, 1), BLKIF_OP_READ);
	assert_int_equal(rd(s, 2, 2), 1025);
	assert_int_equal(rd(s, L->id, 8), 2);
	assert_int_equal(rd(s, L->sector, 8), 77);
	assert_int_equal(rd(s, L->ind_handle, 2), 9);
	assert_int_equal(rd(s, L->ind_handle + 2, 2), 0);
	for (unsigned int i = 0; i < 8; i++)
		assert_int_equal(rd(s, L->ind_grefs + 4 * i, 4), i < 3 ? 500 + i : 0);
	/* trailing pad of the 64-byte indirect request is written */
	assert_int_equal(rd(s, 60, 4), 0);
	fx_fini(&f);
}

static void test_discard_indirect_layout(void **state)
{
	(void)state;
	check_discard_indirect(FE_ABI_X86_64);
	check_discard_indirect(FE_ABI_X86_32);
}

static void test_put_rejects(void **state)
{
	struct fe_req bad_read0 = rw_req(0, BLKIF_OP_READ, 0);
	struct fe_req write12 = rw_req(0, BLKIF_OP_WRITE, 11);
	struct fe_req unknown = rw_req(0, BLKIF_OP_RESERVED_1, 1);
	struct fe_req ind_flush = { .operation = BLKIF_OP_INDIRECT,
				    .indirect_op = BLKIF_OP_FLUSH_DISKCACHE, .nr_segments = 1 };
	struct fe_req ind_big = { .operation = BLKIF_OP_INDIRECT, .indirect_op = BLKIF_OP_WRITE,
				  .nr_segments = FE_MAX_INDIRECT_SEGS + 1 };
	struct fe_req ind_zero = { .operation = BLKIF_OP_INDIRECT, .indirect_op = BLKIF_OP_WRITE };
	struct fe_req disc_seg = { .operation = BLKIF_OP_DISCARD, .nr_segments = 1 };
	struct fe_req first_gt_last = rw_req(0, BLKIF_OP_READ, 1);
	struct fe_req last_past = rw_req(0, BLKIF_OP_READ, 1);
	struct fe_req id_big = rw_req(32, BLKIF_OP_READ, 1);
	struct fe_req flush0 = { .operation = BLKIF_OP_FLUSH_DISKCACHE, .id = 3 };
	const struct { struct fe_req *q; int rc; } cases[] = {
		{ &bad_read0, -EINVAL }, { &write12, -EINVAL }, { &unknown, -EINVAL },
		{ &ind_flush, -EINVAL }, { &ind_big, -EINVAL }, { &ind_zero, -EINVAL },
		{ &disc_seg, -EINVAL }, { &first_gt_last, -EINVAL }, { &last_past, -EINVAL },
		{ &id_big, -EINVAL }, { &flush0, 0 },
	};
	struct fx f;

	(void)state;
	write12.nr_segments = 12;
	first_gt_last.seg[0].first_sect = 3;
	first_gt_last.seg[0].last_sect = 2;
	last_past.seg[0].last_sect = 8;
	fx_init(&f, 0, FE_ABI_X86_64);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(fe_ring_put_req(&f.r, cases[i].q), cases[i].rc);
	assert_int_equal(fe_ring_in_flight(&f.r), 1);
	fx_fini(&f);
}

static void test_full_ring(void **state)
{
	struct fx f;

	(void)state;
	fx_init(&f, 1, FE_ABI_X86_32);
	for (uint64_t id = 0; id < 64; id++) {
		struct fe_req q = rw_req(id, BLKIF_OP_READ, 1);
		assert_int_equal(fe_ring_put_req(&f.r, &q), 0);
	}
	assert_int_equal(fe_ring_free_slots(&f.r), 0);
	struct fe_req q = rw_req(0, BLKIF_OP_READ, 1);
	assert_int_equal(fe_ring_put_req(&f.r, &q), -EBUSY);
	fe_ring_push(&f.r);
	/* one answer frees one slot and its id */
	struct fe_rsp rsp;
	be_put_rsp(&f, 17, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	be_publish(&f);
	assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 1);
	assert_int_equal(fe_ring_free_slots(&f.r), 1);
	q = rw_req(17, BLKIF_OP_WRITE, 2);
	assert_int_equal(fe_ring_put_req(&f.r, &q), 0);
	q = rw_req(18, BLKIF_OP_WRITE, 2);
	assert_int_equal(fe_ring_put_req(&f.r, &q), -EBUSY);
	fx_fini(&f);
}

/* ---- push / notify --------------------------------------------------- */

static void test_push_notify(void **state)
{
	/* req_event set by the backend before each push of `count` requests
	 * starting at index `old`: notify iff req_event is in (old, old+count]. */
	static const struct { uint32_t event; unsigned int count; bool notify; } cases[] = {
		{ 1, 1, true },     /* initial req_event: first request */
		{ 1, 2, false },    /* backend still busy (event already passed) */
		{ 4, 2, true },     /* exactly the next index */
		{ 6, 3, true },     /* inside the batch */
		{ 15, 3, false },   /* beyond the batch */
		{ 0, 1, false },    /* far behind */
	};
	struct fx f;
	uint64_t id = 0;

	(void)state;
	fx_init(&f, 0, FE_ABI_X86_64);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hdr_set(&f, REQ_EVENT, cases[i].event);
		for (unsigned int k = 0; k < cases[i].count; k++) {
			struct fe_req q = rw_req(id++, BLKIF_OP_READ, 1);
			assert_int_equal(fe_ring_put_req(&f.r, &q), 0);
		}
		assert_int_equal(fe_ring_push(&f.r), cases[i].notify);
		assert_int_equal(hdr_get(&f, REQ_PROD), f.r.req_prod_pvt);
	}
	/* nothing new: no notify, no change */
	assert_false(fe_ring_push(&f.r));
	fx_fini(&f);
}

/* ---- responses --------------------------------------------------------- */

static void test_responses_out_of_order(void **state)
{
	(void)state;
	for (int abi = FE_ABI_X86_64; abi <= FE_ABI_X86_32; abi++) {
		struct fx f;
		struct fe_rsp rsp;
		struct fe_req in = { .operation = BLKIF_OP_INDIRECT, .indirect_op = BLKIF_OP_WRITE,
				     .id = 9, .nr_segments = 40 };

		fx_init(&f, 0, abi);
		issue(&f, 4, BLKIF_OP_READ);
		issue(&f, 2, BLKIF_OP_WRITE);
		assert_int_equal(fe_ring_put_req(&f.r, &in), 0);
		fe_ring_push(&f.r);
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 0);
		be_put_rsp(&f, 9, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);  /* indirect echoes indirect_op */
		be_put_rsp(&f, 4, BLKIF_OP_READ, BLKIF_RSP_ERROR);
		be_put_rsp(&f, 2, BLKIF_OP_WRITE, BLKIF_RSP_EOPNOTSUPP);
		be_publish(&f);
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 1);
		assert_int_equal(rsp.id, 9);
		assert_int_equal(rsp.operation, BLKIF_OP_WRITE);
		assert_int_equal(rsp.status, BLKIF_RSP_OKAY);
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 1);
		assert_int_equal(rsp.id, 4);
		assert_int_equal(rsp.status, BLKIF_RSP_ERROR);
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 1);
		assert_int_equal(rsp.id, 2);
		assert_int_equal(rsp.status, BLKIF_RSP_EOPNOTSUPP);
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 0);
		assert_int_equal(fe_ring_in_flight(&f.r), 0);
		assert_false(fe_ring_is_broken(&f.r));
		fx_fini(&f);
	}
}

/* Many laps around the ring with 32-bit indexes wrapping through zero. */
static void test_wraparound(void **state)
{
	struct fx f;
	struct fe_rsp rsp;
	const uint32_t start = 0xffffffc0u;

	(void)state;
	fx_init(&f, 0, FE_ABI_X86_32);
	f.r.req_prod_pvt = f.r.req_pushed = f.r.rsp_cons = start;
	f.be_rsp_prod = start;
	hdr_set(&f, REQ_PROD, start);
	hdr_set(&f, RSP_PROD, start);
	for (unsigned int lap = 0; lap < 10; lap++) {
		for (uint64_t id = 0; id < 32; id++)
			issue(&f, id, id & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ);
		assert_int_equal(fe_ring_free_slots(&f.r), 0);
		for (uint64_t id = 0; id < 32; id++)
			be_put_rsp(&f, 31 - id, (31 - id) & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ, 0);
		be_publish(&f);
		for (uint64_t id = 0; id < 32; id++) {
			assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 1);
			assert_int_equal(rsp.id, 31 - id);
		}
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 0);
	}
	assert_int_equal(f.r.rsp_cons, start + 320);
	fx_fini(&f);
}

static void test_final_check(void **state)
{
	struct fx f;
	struct fe_rsp rsp;

	(void)state;
	fx_init(&f, 0, FE_ABI_X86_64);
	issue(&f, 0, BLKIF_OP_READ);
	issue(&f, 1, BLKIF_OP_READ);
	assert_false(fe_ring_final_check(&f.r));
	assert_int_equal(hdr_get(&f, RSP_EVENT), 1);
	be_put_rsp(&f, 1, BLKIF_OP_READ, 0);
	be_publish(&f);
	assert_true(fe_ring_final_check(&f.r));
	assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), 1);
	assert_false(fe_ring_final_check(&f.r));
	assert_int_equal(hdr_get(&f, RSP_EVENT), 2);
	fx_fini(&f);
}

/* ---- hostile backend ---------------------------------------------------- */

enum hostile { RUNAWAY_ONE, RUNAWAY_WRAP, RUNAWAY_NO_REQUESTS };

static void check_hostile(enum hostile kind, enum fe_abi abi, const char *why)
{
	struct fx f;
	struct fe_rsp rsp = { .id = 0xdead };
	struct fe_req in = { .operation = BLKIF_OP_INDIRECT, .indirect_op = BLKIF_OP_READ,
			     .id = 3, .nr_segments = 12 };
	int first = 1;

	fx_init(&f, 0, abi);
	if (kind != RUNAWAY_NO_REQUESTS) {
		issue(&f, 0, BLKIF_OP_READ);
		issue(&f, 1, BLKIF_OP_WRITE);
		assert_int_equal(fe_ring_put_req(&f.r, &in), 0);
		fe_ring_push(&f.r);
	}
	switch (kind) {
	case RUNAWAY_ONE:
		be_put_rsp(&f, 0, BLKIF_OP_READ, 0);
		f.be_rsp_prod += 3;          /* 4 responses for 3 requests */
		first = -EIO;
		break;
	case RUNAWAY_WRAP:
		f.be_rsp_prod = 0xffffffffu;  /* "behind" us: a huge distance */
		first = -EIO;
		break;
	case RUNAWAY_NO_REQUESTS:
		be_put_rsp(&f, 0, BLKIF_OP_READ, 0);
		first = -EIO;
		break;
	}
	be_publish(&f);
	assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), first);
	if (first == 1)
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), -EIO);
	/* latched: nothing more is read or accepted, the reason is kept */
	assert_true(fe_ring_is_broken(&f.r));
	assert_non_null(strstr(fe_ring_error(&f.r), why));
	assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), -EIO);
	assert_int_equal(fe_ring_free_slots(&f.r), 0);
	struct fe_req q = rw_req(5, BLKIF_OP_READ, 1);
	assert_int_equal(fe_ring_put_req(&f.r, &q), -EIO);
	assert_false(fe_ring_final_check(&f.r));
	/* a bad response never reaches the caller */
	assert_true(rsp.id == 0xdead || (kind == RUNAWAY_ONE && rsp.id == 0));
	fx_fini(&f);
}

static void test_hostile_backend(void **state)
{
	static const struct { enum hostile kind; const char *why; } cases[] = {
		{ RUNAWAY_ONE, "runs past the 3 requests" },
		{ RUNAWAY_WRAP, "rsp_prod 4294967295 runs past" },
		{ RUNAWAY_NO_REQUESTS, "runs past the 0 requests" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_hostile(cases[i].kind, FE_ABI_X86_64, cases[i].why);
		check_hostile(cases[i].kind, FE_ABI_X86_32, cases[i].why);
	}
}

/* Responses published but requests written and not pushed do not count:
 * the backend cannot have seen them. */
static void test_runaway_unpushed(void **state)
{
	struct fx f;
	struct fe_rsp rsp;
	struct fe_req q = rw_req(0, BLKIF_OP_READ, 1);

	(void)state;
	fx_init(&f, 0, FE_ABI_X86_64);
	assert_int_equal(fe_ring_put_req(&f.r, &q), 0);
	be_put_rsp(&f, 0, BLKIF_OP_READ, 0);
	be_publish(&f);
	assert_int_equal(fe_ring_fetch_rsp(&f.r, &rsp), -EIO);
	assert_non_null(strstr(fe_ring_error(&f.r), "runs past the 0 requests"));
	fx_fini(&f);
}

/* ---- the single read ---------------------------------------------------- */

/* A response slot that the backend rewrites after every load: the fetch
 * reads each word once (xbd_blkif_copy_once) and decodes what it read
 * first, whatever the slot says afterwards. */
static void test_slot_changes_between_reads(void **state)
{
	(void)state;
	for (int abi = FE_ABI_X86_64; abi <= FE_ABI_X86_32; abi++) {
		size_t len = abi == FE_ABI_X86_32 ? 12 : 16;
		unsigned char before[16];
		struct fe_rsp got;
		struct fx f;

		fx_init(&f, 0, abi);
		issue(&f, 0, BLKIF_OP_READ);
		issue(&f, 1, BLKIF_OP_WRITE);
		be_put_rsp(&f, 1, BLKIF_OP_WRITE, BLKIF_RSP_EOPNOTSUPP);
		be_publish(&f);
		memcpy(before, bslot(&f, 0), len);
		arm_trap(f.mem, bslot(&f, 0), len);
		assert_int_equal(fe_ring_fetch_rsp(&f.r, &got), 1);
		disarm_trap();
		assert_int_equal(got.id, 1);
		assert_int_equal(got.operation, BLKIF_OP_WRITE);
		assert_int_equal(got.status, BLKIF_RSP_EOPNOTSUPP);
		for (size_t i = 0; i < len / 4; i++)
			assert_int_equal(trap.reads[i], 1);
		/* the header (rsp_prod) is read, nothing else of the page */
		assert_int_equal(trap.outside, 1);
		/* and the backend really did change the slot */
		assert_memory_not_equal(before, bslot(&f, 0), len);
		fx_fini(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_abi_names),
		cmocka_unit_test(test_rw_layout),
		cmocka_unit_test(test_discard_indirect_layout),
		cmocka_unit_test(test_put_rejects),
		cmocka_unit_test(test_full_ring),
		cmocka_unit_test(test_push_notify),
		cmocka_unit_test(test_responses_out_of_order),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_final_check),
		cmocka_unit_test(test_hostile_backend),
		cmocka_unit_test(test_runaway_unpushed),
		cmocka_unit_test(test_slot_changes_between_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
