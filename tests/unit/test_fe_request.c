/* SPDX-License-Identifier: MIT */
/*
 * frontend/request: validation, segment building, splitting by the
 * negotiated segment limits, flush/barrier/discard, the shadow table and
 * free-id list, completion accounting and recovery.  Requests go through
 * the real frontend/ring onto a ring in private memory, where a fake
 * backend reads them back in the x86_64 layout.
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

/* ---- fakes ---------------------------------------------------------------- */

#define NPAGES 16

struct pool {
	unsigned char *mem;
	bool used[NPAGES];
	unsigned int in_use, gets;
	unsigned int limit;           /* pages get may hand out */
};

static int pool_get(void *ctx, struct fe_page *out)
{
	struct pool *p = ctx;

	if (p->in_use >= p->limit)
		return -EAGAIN;
	for (unsigned int i = 0; i < NPAGES; i++) {
		if (!p->used[i]) {
			p->used[i] = true;
			p->in_use++;
			p->gets++;
			out->addr = p->mem + (size_t)i * 4096;
			out->gref = 9000 + i;
			return 0;
		}
	}
	return -EAGAIN;
}

static void pool_put(void *ctx, const struct fe_page *pg)
{
	struct pool *p = ctx;
	unsigned int i = pg->gref - 9000;

	assert_true(i < NPAGES && p->used[i]);
	assert_ptr_equal(pg->addr, p->mem + (size_t)i * 4096);
	p->used[i] = false;
	p->in_use--;
}

struct fx {
	unsigned char *ringmem;
	struct fe_ring ring;
	struct fe_shadow_table t;
	struct fe_limits lim;
	struct pool pool;
	struct fe_page_ops ops;
	uint32_t be_cons, be_prod;    /* fake backend's indexes */
	unsigned char (*copies)[112]; /* requests as the backend copied them */
};

#define NCOPIES 8192u

static void fx_init(struct fx *f, unsigned int order)
{
	memset(f, 0, sizeof(*f));
	f->ringmem = aligned_alloc(4096, (size_t)4096 << order);
	f->pool.mem = aligned_alloc(4096, (size_t)4096 * NPAGES);
	assert_non_null(f->ringmem);
	assert_non_null(f->pool.mem);
	f->pool.limit = NPAGES;
	f->copies = calloc(NCOPIES, sizeof(*f->copies));
	assert_non_null(f->copies);
	f->ops = (struct fe_page_ops){ pool_get, pool_put, &f->pool };
	assert_int_equal(fe_ring_init(&f->ring, f->ringmem, order, FE_ABI_X86_64), 0);
	assert_int_equal(fe_shadow_init(&f->t, f->ring.size), 0);
	f->lim = (struct fe_limits){ .handle = 768, .sector_size = 512, .sectors = 1u << 20,
				     .flush = true, .barrier = true, .discard = true };
}

static void fx_fini(struct fx *f)
{
	assert_int_equal(f->pool.in_use, 0);
	fe_shadow_destroy(&f->t);
	fe_ring_destroy(&f->ring);
	free(f->ringmem);
	free(f->pool.mem);
	free(f->copies);
}

/* Fake backend: copy every published request out of the ring (responses
 * reuse the slots), then return the copy of request idx. */
static const struct xbd_blkif_x64_req_rw *be_req(struct fx *f, uint32_t idx)
{
	uint32_t prod = ((struct xbd_blkif_sring_hdr *)f->ringmem)->req_prod;

	for (; f->be_cons != prod; f->be_cons++)
		memcpy(f->copies[f->be_cons % NCOPIES],
		       f->ringmem + 64 + (f->be_cons & (f->ring.size - 1)) * 112, 112);
	assert_true(idx < f->be_cons);
	return (const void *)f->copies[idx % NCOPIES];
}

/* Fake backend: answer request idx (in ring order) with status. */
static void be_answer(struct fx *f, uint32_t idx, int16_t status)
{
	const struct xbd_blkif_x64_req_rw *q = be_req(f, idx);
	uint8_t op = q->operation;
	struct xbd_blkif_x64_rsp *r = (void *)(f->ringmem + 64 + (f->be_prod++ & (f->ring.size - 1)) * 112);
	uint64_t id = q->id;

	if (op == BLKIF_OP_INDIRECT)
		op = ((const struct xbd_blkif_x64_req_indirect *)q)->indirect_op;
	r->id = id;
	r->operation = op;
	r->status = status;
	((struct xbd_blkif_sring_hdr *)f->ringmem)->rsp_prod = f->be_prod;
}

struct done_log {
	unsigned int calls;
	int status;
};

static void on_done(struct fe_io *io, int status)
{
	struct done_log *d = io->priv;

	d->calls++;
	d->status = status;
}

/* Fetch every response and complete; returns how many I/Os finished. */
static unsigned int drain(struct fx *f)
{
	struct fe_rsp rsp;
	unsigned int n = 0;
	int rc;

	while ((rc = fe_ring_fetch_rsp(&f->ring, &rsp)) == 1) {
		struct fe_io *io = fe_io_complete(&f->t, &f->lim, &f->ops, &rsp);
		if (io) {
			io->done(io, io->status);
			n++;
		}
	}
	assert_int_equal(rc, 0);
	return n;
}

/* Issue io until done or stuck; returns requests put. */
static unsigned int issue_all(struct fx *f, struct fe_io *io, int *last)
{
	unsigned int n = 0;
	int rc;

	while ((rc = fe_io_issue_one(&f->t, &f->lim, &f->ring, &f->ops, io)) == 1)
		n++;
	fe_ring_push(&f->ring);
	if (last)
		*last = rc;
	return n;
}

static struct fe_frag *page_frags(unsigned int n, uint16_t len)
{
	struct fe_frag *fr = calloc(n, sizeof(*fr));

	assert_non_null(fr);
	for (unsigned int i = 0; i < n; i++)
		fr[i] = (struct fe_frag){ .gref = 100 + i, .offset = 0, .len = len };
	return fr;
}

/* ---- limits and validation ------------------------------------------- */

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

static void test_prepare(void **state)
{
	static const struct fe_frag f4k[2] = { { 1, 0, 4096 }, { 2, 0, 4096 } };
	static const struct fe_frag f512[2] = { { 1, 512, 512 }, { 2, 3584, 512 } };
	static const struct fe_frag fpast[1] = { { 1, 3584, 1024 } };
	static const struct fe_frag fodd[1] = { { 1, 100, 512 } };
	static const struct fe_frag fzero[2] = { { 1, 0, 0 }, { 2, 0, 1024 } };
	const struct {
		enum fe_op op; uint64_t off, len; const struct fe_frag *fr; unsigned int n;
		unsigned int ss; bool ro, flush, barrier, discard, secure; int rc;
	} cases[] = {
		{ FE_OP_READ, 0, 8192, f4k, 2, 512, 0, 0, 0, 0, 0, 0 },
		{ FE_OP_READ, 0, 8192, f4k, 2, 4096, 0, 0, 0, 0, 0, 0 },
		{ FE_OP_WRITE, 512, 1024, f512, 2, 512, 0, 0, 0, 0, 0, 0 },
		{ FE_OP_WRITE, 512, 1024, f512, 2, 4096, 0, 0, 0, 0, 0, -EINVAL },  /* offset */
		{ FE_OP_WRITE, 4096, 1024, f512, 2, 1024, 0, 0, 0, 0, 0, -EINVAL }, /* frag offset */
		{ FE_OP_WRITE, 0, 8192, f4k, 2, 512, 1, 0, 0, 0, 0, -EROFS },
		{ FE_OP_READ, 0, 8192, f4k, 2, 512, 1, 0, 0, 0, 0, 0 },
		{ FE_OP_READ, 0, 4096, f4k, 2, 512, 0, 0, 0, 0, 0, -EINVAL },     /* sum != len */
		{ FE_OP_READ, 0, 0, f4k, 0, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ FE_OP_READ, 0, 1024, fpast, 1, 512, 0, 0, 0, 0, 0, -EINVAL },   /* crosses page */
		{ FE_OP_READ, 0, 512, fodd, 1, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ FE_OP_READ, 0, 1024, fzero, 2, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ FE_OP_READ, (1u << 20) * 512ull - 4096, 8192, f4k, 2, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ FE_OP_READ, (1u << 20) * 512ull - 8192, 8192, f4k, 2, 512, 0, 0, 0, 0, 0, 0 },
		{ FE_OP_READ, UINT64_MAX - 511, 8192, f4k, 2, 512, 0, 0, 0, 0, 0, -EINVAL },
		{ FE_OP_FLUSH, 0, 0, NULL, 0, 512, 0, 1, 0, 0, 0, 0 },
		{ FE_OP_FLUSH, 0, 0, NULL, 0, 512, 0, 0, 1, 0, 0, 0 },
		{ FE_OP_FLUSH, 0, 0, NULL, 0, 512, 0, 0, 0, 0, 0, -EOPNOTSUPP },
		{ FE_OP_FLUSH, 0, 4096, NULL, 0, 512, 0, 1, 0, 0, 0, -EINVAL },
		{ FE_OP_BARRIER, 0, 0, NULL, 0, 512, 0, 1, 0, 0, 0, -EOPNOTSUPP },
		{ FE_OP_BARRIER, 0, 0, NULL, 0, 512, 0, 0, 1, 0, 0, 0 },
		{ FE_OP_DISCARD, 4096, 1 << 20, NULL, 0, 4096, 0, 0, 0, 1, 0, 0 },
		{ FE_OP_DISCARD, 4096, 1 << 20, NULL, 0, 4096, 0, 0, 0, 0, 0, -EOPNOTSUPP },
		{ FE_OP_DISCARD, 4096, 1 << 20, NULL, 0, 4096, 1, 0, 0, 1, 0, -EROFS },
		{ FE_OP_DISCARD, 512, 4096, NULL, 0, 4096, 0, 0, 0, 1, 0, -EINVAL },
		{ FE_OP_DISCARD, 0, 0, NULL, 0, 512, 0, 0, 0, 1, 0, -EINVAL },
		{ FE_OP_SECURE_DISCARD, 0, 512, NULL, 0, 512, 0, 0, 0, 1, 0, -EOPNOTSUPP },
		{ FE_OP_SECURE_DISCARD, 0, 512, NULL, 0, 512, 0, 0, 0, 1, 1, 0 },
		{ (enum fe_op)99, 0, 512, NULL, 0, 512, 0, 0, 0, 1, 1, -EINVAL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fe_limits lim = { .sector_size = cases[i].ss, .sectors = 1u << 20,
					 .readonly = cases[i].ro, .flush = cases[i].flush,
					 .barrier = cases[i].barrier, .discard = cases[i].discard,
					 .discard_secure = cases[i].secure };
		struct fe_io io = { .op = cases[i].op, .offset = cases[i].off, .len = cases[i].len,
				    .frags = cases[i].fr, .nfrags = cases[i].n, .status = 5 };
		print_message("case %zu\n", i);
		assert_int_equal(fe_io_prepare(&lim, &io), cases[i].rc);
		assert_int_equal(io.status, 0);
		assert_int_equal(io.next_sector, cases[i].off / 512);
	}
}

/* ---- segments and splitting ------------------------------------------------ */

static void test_segments(void **state)
{
	static const struct { uint16_t off, len; uint8_t first, last; } cases[] = {
		{ 0, 4096, 0, 7 }, { 0, 512, 0, 0 }, { 3584, 512, 7, 7 },
		{ 1024, 2048, 2, 5 }, { 512, 3584, 1, 7 },
	};
	struct fe_limits lim = { .handle = 5, .sector_size = 512, .sectors = 1 << 20 };
	struct fe_frag fr[sizeof(cases) / sizeof(cases[0])];
	struct fe_io io = { .op = FE_OP_WRITE, .frags = fr, .nfrags = 5 };
	struct fe_req q;

	(void)state;
	for (size_t i = 0; i < 5; i++)
		fr[i] = (struct fe_frag){ .gref = 40 + i, .offset = cases[i].off, .len = cases[i].len };
	fe_build_rw(&lim, &io, 0, 5, 1234, 17, NULL, &q);
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

/* Read back request idx from the ring: operation, segments (expanded from
 * indirect pages), sector.  Checks the segments against io's fragments. */
static unsigned int check_req(struct fx *f, uint32_t idx, const struct fe_io *io,
			      unsigned int first_frag, uint64_t sector, bool *indirect,
			      unsigned int *npages)
{
	const struct xbd_blkif_x64_req_rw *q = be_req(f, idx);
	const struct xbd_blkif_x64_req_indirect *in = (const void *)q;
	unsigned int n;

	*indirect = q->operation == BLKIF_OP_INDIRECT;
	*npages = 0;
	if (!*indirect) {
		assert_int_equal(q->sector_number, sector);
		for (unsigned int i = 0; i < q->nr_segments; i++)
			assert_int_equal(q->seg[i].gref, io->frags[first_frag + i].gref);
		return q->nr_segments;
	}
	n = in->nr_segments;
	assert_int_equal(in->indirect_op, io->op == FE_OP_WRITE ? BLKIF_OP_WRITE : BLKIF_OP_READ);
	assert_int_equal(in->sector_number, sector);
	assert_int_equal(in->handle, f->lim.handle);
	for (unsigned int i = 0; i < n; i++) {
		unsigned int pg = in->indirect_grefs[i / 512] - 9000;
		const struct xbd_blkif_seg *s = (const void *)(f->pool.mem + (size_t)pg * 4096);
		assert_int_equal(s[i % 512].gref, io->frags[first_frag + i].gref);
		assert_int_equal(s[i % 512].first_sect, io->frags[first_frag + i].offset / 512);
		assert_int_equal(s[i % 512].last_sect,
				 (io->frags[first_frag + i].offset + io->frags[first_frag + i].len) / 512 - 1);
	}
	*npages = (n + 511) / 512;
	for (unsigned int i = *npages; i < 8; i++)
		assert_int_equal(in->indirect_grefs[i], 0);
	return n;
}

static void test_split(void **state)
{
	static const struct {
		unsigned int nfrags, max_ind; unsigned int nreq; unsigned int first_segs;
		bool indirect; unsigned int pages;
	} cases[] = {
		{ 1, 0, 1, 1, false, 0 },
		{ 11, 0, 1, 11, false, 0 },
		{ 12, 0, 2, 11, false, 0 },
		{ 100, 0, 10, 11, false, 0 },
		{ 11, 32, 1, 11, false, 0 },        /* fits direct: no indirect page */
		{ 12, 32, 1, 12, true, 1 },
		{ 100, 32, 4, 32, true, 1 },
		{ 1024, 512, 2, 512, true, 1 },
		{ 1025, 4096, 1, 1025, true, 3 },
		{ 4096, 4096, 1, 4096, true, 8 },
		{ 4097, 4096, 2, 4096, true, 8 },
	};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fe_frag *fr = page_frags(cases[c].nfrags, 4096);
		struct done_log d = { 0 };
		struct fe_io io = { .op = c % 2 ? FE_OP_WRITE : FE_OP_READ, .offset = 65536,
				    .len = cases[c].nfrags * 4096ull, .frags = fr,
				    .nfrags = cases[c].nfrags, .done = on_done, .priv = &d };
		struct fx f;
		unsigned int got = 0, req = 0;
		uint64_t sector = 128;
		int last;

		print_message("case %zu\n", c);
		fx_init(&f, 5);
		f.lim.max_indirect_segs = cases[c].max_ind;
		f.lim.sectors = 1u << 24;
		assert_int_equal(fe_io_prepare(&f.lim, &io), 0);
		assert_int_equal(issue_all(&f, &io, &last), cases[c].nreq);
		assert_int_equal(last, 0);
		assert_true(io.issued_all);
		assert_int_equal(io.pending, cases[c].nreq);
		while (got < cases[c].nfrags) {
			bool ind;
			unsigned int pages, n = check_req(&f, req, &io, got, sector, &ind, &pages);
			if (req == 0) {
				assert_int_equal(n, cases[c].first_segs);
				assert_int_equal(ind, cases[c].indirect);
				assert_int_equal(pages, cases[c].pages);
			}
			got += n;
			sector += n * 8;
			req++;
		}
		assert_int_equal(got, cases[c].nfrags);
		assert_int_equal(req, cases[c].nreq);
		/* answer in reverse: the I/O completes with the last answer only */
		for (unsigned int i = req; i-- > 0;) {
			assert_int_equal(d.calls, 0);
			be_answer(&f, i, BLKIF_RSP_OKAY);
			drain(&f);
		}
		assert_int_equal(d.calls, 1);
		assert_int_equal(d.status, 0);
		assert_int_equal(fe_shadow_in_flight(&f.t), 0);
		fx_fini(&f);
		free(fr);
	}
}

static void test_large_sector_units(void **state)
{
	struct fe_frag fr[3] = { { 7, 0, 4096 }, { 8, 0, 4096 }, { 9, 0, 4096 } };
	struct done_log d = { 0 };
	struct fe_io io = { .op = FE_OP_READ, .offset = 3 * 4096, .len = 3 * 4096,
			    .frags = fr, .nfrags = 3, .done = on_done, .priv = &d };
	struct fx f;

	(void)state;
	fx_init(&f, 0);
	f.lim.sector_size = 4096;
	assert_int_equal(fe_io_prepare(&f.lim, &io), 0);
	assert_int_equal(issue_all(&f, &io, NULL), 1);
	/* sector_number and first/last_sect stay in 512-byte units */
	assert_int_equal(be_req(&f, 0)->sector_number, 24);
	assert_int_equal(be_req(&f, 0)->seg[2].first_sect, 0);
	assert_int_equal(be_req(&f, 0)->seg[2].last_sect, 7);
	be_answer(&f, 0, 0);
	assert_int_equal(drain(&f), 1);
	fx_fini(&f);
}

/* ---- flush, barrier, discard ----------------------------------------------- */

static void test_special_ops(void **state)
{
	static const struct {
		enum fe_op op; bool flush, barrier, secure; uint8_t wire_op, flag;
	} cases[] = {
		{ FE_OP_FLUSH, true, true, false, BLKIF_OP_FLUSH_DISKCACHE, 0 },
		{ FE_OP_FLUSH, false, true, false, BLKIF_OP_WRITE_BARRIER, 0 },
		{ FE_OP_BARRIER, true, true, false, BLKIF_OP_WRITE_BARRIER, 0 },
		{ FE_OP_DISCARD, false, false, false, BLKIF_OP_DISCARD, 0 },
		{ FE_OP_SECURE_DISCARD, false, false, true, BLKIF_OP_DISCARD, BLKIF_DISCARD_SECURE },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool disc = cases[i].wire_op == BLKIF_OP_DISCARD;
		struct done_log d = { 0 };
		struct fe_io io = { .op = cases[i].op, .offset = disc ? 8192 : 0,
				    .len = disc ? 1 << 20 : 0, .done = on_done, .priv = &d };
		struct fx f;

		fx_init(&f, 0);
		f.lim.flush = cases[i].flush;
		f.lim.barrier = cases[i].barrier;
		f.lim.discard_secure = cases[i].secure;
		assert_int_equal(fe_io_prepare(&f.lim, &io), 0);
		assert_int_equal(issue_all(&f, &io, NULL), 1);
		const struct xbd_blkif_x64_req_discard *q = (const void *)be_req(&f, 0);
		assert_int_equal(q->operation, cases[i].wire_op);
		if (disc) {
			assert_int_equal(q->flag, cases[i].flag);
			assert_int_equal(q->sector_number, 16);
			assert_int_equal(q->nr_sectors, 2048);
			assert_int_equal(q->handle, 768);
		} else {
			assert_int_equal(be_req(&f, 0)->nr_segments, 0);
		}
		be_answer(&f, 0, BLKIF_RSP_OKAY);
		assert_int_equal(drain(&f), 1);
		assert_int_equal(d.status, 0);
		fx_fini(&f);
	}
}

/* EOPNOTSUPP fails the I/O and turns the feature off (Linux blkfront); a
 * second flush already prepared then fails without reaching the ring. */
static void test_eopnotsupp_drops_feature(void **state)
{
	struct done_log d1 = { 0 }, d2 = { 0 };
	struct fe_io a = { .op = FE_OP_FLUSH, .done = on_done, .priv = &d1 };
	struct fe_io b = { .op = FE_OP_FLUSH, .done = on_done, .priv = &d2 };
	struct fe_io disc = { .op = FE_OP_DISCARD, .offset = 0, .len = 4096, .done = on_done,
			      .priv = &d2 };
	struct fx f;

	(void)state;
	fx_init(&f, 0);
	f.lim.barrier = false;
	assert_int_equal(fe_io_prepare(&f.lim, &a), 0);
	assert_int_equal(fe_io_prepare(&f.lim, &b), 0);
	assert_int_equal(issue_all(&f, &a, NULL), 1);
	be_answer(&f, 0, BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(drain(&f), 1);
	assert_int_equal(d1.status, -EOPNOTSUPP);
	assert_false(f.lim.flush);
	assert_int_equal(issue_all(&f, &b, NULL), 0);
	assert_int_equal(b.pending, 0);
	assert_int_equal(b.status, -EOPNOTSUPP);
	assert_int_equal(fe_io_prepare(&f.lim, &b), -EOPNOTSUPP);
	/* discard likewise */
	assert_int_equal(fe_io_prepare(&f.lim, &disc), 0);
	assert_int_equal(issue_all(&f, &disc, NULL), 1);
	be_answer(&f, 1, BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(drain(&f), 1);
	assert_false(f.lim.discard);
	fx_fini(&f);
}

static void test_status_mapping(void **state)
{
	static const struct { int16_t st; int rc; } cases[] = {
		{ BLKIF_RSP_OKAY, 0 }, { BLKIF_RSP_ERROR, -EIO }, { BLKIF_RSP_EOPNOTSUPP, -EOPNOTSUPP },
		{ 1, -EIO }, { -3, -EIO }, { INT16_MIN, -EIO },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(fe_rsp_status(cases[i].st), cases[i].rc);
}

/* The first error wins; the I/O still waits for all its requests. */
static void test_partial_error(void **state)
{
	struct fe_frag *fr = page_frags(30, 4096);
	struct done_log d = { 0 };
	struct fe_io io = { .op = FE_OP_WRITE, .len = 30 * 4096, .frags = fr, .nfrags = 30,
			    .done = on_done, .priv = &d };
	struct fx f;

	(void)state;
	fx_init(&f, 0);
	assert_int_equal(fe_io_prepare(&f.lim, &io), 0);
	assert_int_equal(issue_all(&f, &io, NULL), 3);
	be_answer(&f, 1, BLKIF_RSP_ERROR);
	be_answer(&f, 0, BLKIF_RSP_OKAY);
	assert_int_equal(drain(&f), 0);
	be_answer(&f, 2, 77);
	assert_int_equal(drain(&f), 1);
	assert_int_equal(d.status, -EIO);
	fx_fini(&f);
	free(fr);
}

/* ---- resources: ids, ring slots, indirect pages -------------------------- */

static void test_exhaustion(void **state)
{
	struct fe_frag *fr = page_frags(40 * 11, 4096);
	struct done_log d = { 0 };
	struct fe_io io = { .op = FE_OP_READ, .len = 40 * 11 * 4096ull, .frags = fr,
			    .nfrags = 40 * 11, .done = on_done, .priv = &d };
	struct fx f;
	int last;

	(void)state;
	fx_init(&f, 0);   /* 32 slots */
	assert_int_equal(fe_io_prepare(&f.lim, &io), 0);
	assert_int_equal(issue_all(&f, &io, &last), 32);
	assert_int_equal(last, -EAGAIN);
	assert_false(io.issued_all);
	assert_int_equal(io.next_frag, 32 * 11);
	assert_int_equal(io.next_sector, 32 * 11 * 8);
	/* LIFO: the id freed last is reused first */
	be_answer(&f, 5, 0);
	be_answer(&f, 9, 0);
	assert_int_equal(drain(&f), 0);
	assert_int_equal(issue_all(&f, &io, &last), 2);
	assert_int_equal(be_req(&f, 32)->id, 9);
	assert_int_equal(be_req(&f, 33)->id, 5);
	for (uint32_t i = 0; i < 34; i++)
		if (i != 5 && i != 9)
			be_answer(&f, i, 0);
	drain(&f);
	assert_int_equal(issue_all(&f, &io, &last), 6);
	assert_int_equal(last, 0);
	for (uint32_t i = 34; i < 40; i++)
		be_answer(&f, i, 0);
	assert_int_equal(drain(&f), 1);
	assert_int_equal(d.calls, 1);
	fx_fini(&f);
	free(fr);
}

static void test_indirect_pages_exhausted(void **state)
{
	struct fe_frag *fr = page_frags(64, 4096);
	struct done_log d = { 0 };
	struct fe_io io = { .op = FE_OP_WRITE, .len = 64 * 4096, .frags = fr, .nfrags = 64,
			    .done = on_done, .priv = &d };
	struct fx f;
	int last;

	(void)state;
	fx_init(&f, 0);
	f.lim.max_indirect_segs = 16;
	f.pool.limit = 2;
	assert_int_equal(fe_io_prepare(&f.lim, &io), 0);
	assert_int_equal(issue_all(&f, &io, &last), 2);
	assert_int_equal(last, -EAGAIN);
	assert_int_equal(fe_shadow_in_flight(&f.t), 2);
	be_answer(&f, 0, 0);
	drain(&f);
	assert_int_equal(f.pool.in_use, 1);
	assert_int_equal(issue_all(&f, &io, &last), 1);
	assert_int_equal(last, -EAGAIN);
	for (uint32_t i = 1; i < 3; i++)
		be_answer(&f, i, 0);
	drain(&f);
	assert_int_equal(issue_all(&f, &io, &last), 1);
	be_answer(&f, 3, 0);
	assert_int_equal(drain(&f), 1);
	assert_int_equal(d.calls, 1);
	fx_fini(&f);
	free(fr);
}

static void test_shadow_init_bounds(void **state)
{
	struct fe_shadow_table t;

	(void)state;
	assert_int_equal(fe_shadow_init(&t, 0), -EINVAL);
	assert_int_equal(fe_shadow_init(&t, 1025), -EINVAL);
	assert_int_equal(fe_shadow_init(&t, 1024), 0);
	assert_int_equal(t.nfree, 1024);
	fe_shadow_destroy(&t);
}

/* ---- recovery ---------------------------------------------------------- */

struct requeue_log {
	struct fe_io *ios[8];
	unsigned int n;
};

static void on_requeue(struct fe_io *io, void *arg)
{
	struct requeue_log *l = arg;

	l->ios[l->n++] = io;
}

static void test_recover(void **state)
{
	struct fe_frag *fr = page_frags(100, 4096);
	struct done_log da = { 0 }, db = { 0 }, dc = { 0 };
	struct fe_io a = { .op = FE_OP_WRITE, .offset = 0, .len = 100 * 4096, .frags = fr,
			   .nfrags = 100, .done = on_done, .priv = &da };
	struct fe_io b = { .op = FE_OP_FLUSH, .done = on_done, .priv = &db };
	struct fe_io c = { .op = FE_OP_READ, .offset = 4096, .len = 4096, .frags = fr,
			   .nfrags = 1, .done = on_done, .priv = &dc };
	struct requeue_log log = { 0 };
	struct fx f;

	(void)state;
	fx_init(&f, 0);
	f.lim.max_indirect_segs = 32;
	assert_int_equal(fe_io_prepare(&f.lim, &a), 0);
	assert_int_equal(fe_io_prepare(&f.lim, &b), 0);
	assert_int_equal(fe_io_prepare(&f.lim, &c), 0);
	assert_int_equal(issue_all(&f, &a, NULL), 4);
	assert_int_equal(issue_all(&f, &b, NULL), 1);
	assert_int_equal(issue_all(&f, &c, NULL), 1);
	be_answer(&f, 0, 0);      /* part of a done, c done */
	be_answer(&f, 5, 0);
	assert_int_equal(drain(&f), 1);
	assert_int_equal(dc.calls, 1);
	assert_int_equal(f.pool.in_use, 2);

	/* the backend goes away: everything still on the ring comes back */
	assert_int_equal(fe_shadow_recover(&f.t, &f.ops, on_requeue, &log), 2);
	assert_int_equal(log.n, 2);
	assert_ptr_equal(log.ios[0], &a);
	assert_ptr_equal(log.ios[1], &b);
	assert_int_equal(fe_shadow_in_flight(&f.t), 0);
	assert_int_equal(f.pool.in_use, 0);
	assert_int_equal(a.pending, 0);
	assert_int_equal(a.next_frag, 0);
	assert_false(a.issued_all);
	assert_int_equal(da.calls + db.calls, 0);

	/* a new ring with new limits: direct only now, the whole I/O again */
	fe_shadow_destroy(&f.t);
	fe_ring_destroy(&f.ring);
	assert_int_equal(fe_ring_init(&f.ring, f.ringmem, 0, FE_ABI_X86_64), 0);
	assert_int_equal(fe_shadow_init(&f.t, f.ring.size), 0);
	f.be_prod = f.be_cons = 0;
	f.lim.max_indirect_segs = 0;
	assert_int_equal(issue_all(&f, &a, NULL), 10);
	assert_int_equal(issue_all(&f, &b, NULL), 1);
	for (uint32_t i = 0; i < 11; i++)
		be_answer(&f, i, 0);
	assert_int_equal(drain(&f), 2);
	assert_int_equal(da.calls, 1);
	assert_int_equal(da.status, 0);
	assert_int_equal(db.calls, 1);
	fx_fini(&f);
	free(fr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limits_check),
		cmocka_unit_test(test_prepare),
		cmocka_unit_test(test_segments),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_large_sector_units),
		cmocka_unit_test(test_special_ops),
		cmocka_unit_test(test_eopnotsupp_drops_feature),
		cmocka_unit_test(test_status_mapping),
		cmocka_unit_test(test_partial_error),
		cmocka_unit_test(test_exhaustion),
		cmocka_unit_test(test_indirect_pages_exhausted),
		cmocka_unit_test(test_shadow_init_bounds),
		cmocka_unit_test(test_recover),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
