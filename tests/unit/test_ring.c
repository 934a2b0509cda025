/* SPDX-License-Identifier: MIT */
/*
 * backend/ring: geometry, the one-copy request fetch in both ABIs, the
 * overrun latch, response layout and the notify/final-check rules.
 *
 * The wire offsets below are written out independently of backend/ring.c
 * (from blkif.h and the i386 layout), so a wrong struct there fails here.
 *
 * test_slot_changes_between_reads runs ring_fetch_req() on a ring page
 * that is PROT_NONE: every access faults, the handler lets that one
 * instruction run (x86 trap flag) and then the "frontend" rewrites every
 * word of the slot that has already been read.  A second read of any
 * byte would therefore see different data; the parse must equal the one
 * of the original slot, and every word must have been read exactly once.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <cmocka.h>

#include "backend/ring.h"
#include "tests/unit/slot_trap.h"

struct layout {
	size_t req, rsp;        /* slot sizes */
	size_t id, sector, seg; /* rw */
	size_t nr_sectors;      /* discard */
	size_t ind_handle, ind_grefs;
};
static const struct layout L64 = { 112, 16, 8, 16, 24, 24, 24, 28 };
static const struct layout L32 = { 108, 12, 4, 12, 20, 20, 20, 24 };

static const struct layout *lay(enum ring_abi abi)
{
	return abi == RING_ABI_X86_32 ? &L32 : &L64;
}

static void *ring_mem(unsigned int order)
{
	void *p = mmap(NULL, 4096u << order, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	return p;
}

static uint8_t *slot_of(const struct be_ring *r, RING_IDX i)
{
	return (uint8_t *)r->sring + 64 + (i & (r->nr_ents - 1)) * lay(r->abi)->req;
}

static void put(uint8_t *p, size_t off, uint64_t v, size_t len)
{
	memcpy(p + off, &v, len);   /* little-endian host */
}

static uint32_t *hdr_word(const struct be_ring *r, unsigned int i)
{
	return (uint32_t *)r->sring + i;  /* req_prod, req_event, rsp_prod, rsp_event */
}

/* The fields every request starts with; the rest of the slot is 0xcc. */
static uint8_t *write_head(const struct be_ring *r, RING_IDX i, uint8_t op,
			   uint8_t byte1, uint16_t word1, uint64_t id, uint64_t sector)
{
	const struct layout *l = lay(r->abi);
	uint8_t *s = slot_of(r, i);

	memset(s, 0xcc, l->req);
	put(s, 0, op, 1);
	put(s, 1, byte1, 1);
	put(s, 2, word1, 2);
	put(s, l->id, id, 8);
	put(s, l->sector, sector, 8);
	return s;
}

static void write_rw(const struct be_ring *r, RING_IDX i, uint8_t op,
		     uint8_t nseg, uint64_t id, uint64_t sector)
{
	const struct layout *l = lay(r->abi);
	uint8_t *s = write_head(r, i, op, nseg, 0x0ca1, id, sector);

	for (unsigned int k = 0; k < 11; k++) {
		put(s, l->seg + 8 * k, 1000 + k, 4);
		put(s, l->seg + 8 * k + 4, k % 8, 1);
		put(s, l->seg + 8 * k + 5, 7, 1);
	}
}

static void write_indirect(const struct be_ring *r, RING_IDX i, uint8_t iop,
			   uint16_t nseg, uint64_t id, uint64_t sector)
{
	const struct layout *l = lay(r->abi);
	uint8_t *s = write_head(r, i, BLKIF_OP_INDIRECT, iop, nseg, id, sector);

	put(s, l->ind_handle, 0x0ca2, 2);
	for (unsigned int k = 0; k < 8; k++)
		put(s, l->ind_grefs + 4 * k, 2000 + k, 4);
}

static void write_discard(const struct be_ring *r, RING_IDX i, uint8_t flag,
			  uint64_t id, uint64_t sector, uint64_t n)
{
	const struct layout *l = lay(r->abi);
	uint8_t *s = write_head(r, i, BLKIF_OP_DISCARD, flag, 0x0ca3, id, sector);

	put(s, l->nr_sectors, n, 8);
}

static void test_geometry(void **state)
{
	(void)state;
	for (unsigned int o = 0; o <= 5; o++) {
		assert_int_equal(ring_nr_ents(RING_ABI_X86_64, o), 32u << o);
		assert_int_equal(ring_nr_ents(RING_ABI_X86_32, o), 32u << o);
	}
	assert_int_equal(ring_nr_ents(RING_ABI_X86_64, 6), 0);
	assert_int_equal(ring_nr_ents(RING_ABI_X86_32, 99), 0);
	/* the installed header agrees for the native single-page ring */
	assert_int_equal(__CONST_RING_SIZE(blkif, 4096), 32);
}

static void test_abi_parse(void **state)
{
	static const struct { const char *in; int rc; enum ring_abi abi; } cases[] = {
		{ NULL, 0, RING_ABI_X86_64 },
		{ "x86_64-abi", 0, RING_ABI_X86_64 },
		{ "arm-abi", 0, RING_ABI_X86_64 },
		{ "x86_32-abi", 0, RING_ABI_X86_32 },
		{ "", -EINVAL, 0 }, { "native", -EINVAL, 0 },
		{ "x86_32-abi ", -EINVAL, 0 }, { "X86_64-ABI", -EINVAL, 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ring_abi abi = 77;
		assert_int_equal(ring_abi_parse(cases[i].in, &abi), cases[i].rc);
		if (!cases[i].rc)
			assert_int_equal(abi, cases[i].abi);
	}
	assert_string_equal(ring_abi_name(RING_ABI_X86_32), "x86_32-abi");
}

static void test_attach(void **state)
{
	struct be_ring r;
	void *m = ring_mem(0);
	(void)state;
	assert_int_equal(ring_attach(&r, m, 6, RING_ABI_X86_64), -EINVAL);
	assert_int_equal(ring_attach(&r, NULL, 0, RING_ABI_X86_64), -EINVAL);
	/* re-attach to a live ring: start at the frontend's rsp_prod */
	((uint32_t *)m)[2] = 100;
	((uint32_t *)m)[0] = 103;
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_64), 0);
	assert_int_equal(r.req_cons, 100);
	assert_int_equal(r.rsp_prod_pvt, 100);
	assert_int_equal(ring_pending(&r), 3);
	munmap(m, 4096);
}

static void check_rw(const struct ring_req *q, uint8_t op, unsigned int nseg,
		     uint64_t id, uint64_t sector)
{
	assert_int_equal(q->operation, op);
	assert_int_equal(q->nr_segments, nseg);
	assert_int_equal(q->handle, 0x0ca1);
	assert_true(q->id == id);
	assert_true(q->sector_number == sector);
	assert_int_equal(q->nr_copied, nseg < 11 ? nseg : 11);
	for (unsigned int k = 0; k < q->nr_copied; k++) {
		assert_int_equal(q->u.seg[k].gref, 1000 + k);
		assert_int_equal(q->u.seg[k].first_sect, k % 8);
		assert_int_equal(q->u.seg[k].last_sect, 7);
	}
	for (unsigned int k = q->nr_copied; k < 11; k++)
		assert_int_equal(q->u.seg[k].gref, 0);   /* not copied */
}

/* Every order, both ABIs: the last slot and a wrapped index. */
static void test_fetch_rw_every_order(void **state)
{
	(void)state;
	for (int abi = 0; abi <= 1; abi++) {
		for (unsigned int o = 0; o <= RING_MAX_ORDER; o++) {
			struct be_ring r;
			struct ring_req q;
			void *m = ring_mem(o);

			assert_int_equal(ring_attach(&r, m, o, abi), 0);
			RING_IDX last = r.nr_ents - 1, wrap = r.nr_ents + 2;
			write_rw(&r, last, BLKIF_OP_WRITE, 11, 0x1122334455667788ull, 1ull << 40);
			write_rw(&r, wrap, BLKIF_OP_READ, 3, 42, 7);
			ring_fetch_req(&r, last, &q);
			check_rw(&q, BLKIF_OP_WRITE, 11, 0x1122334455667788ull, 1ull << 40);
			ring_fetch_req(&r, wrap, &q);
			check_rw(&q, BLKIF_OP_READ, 3, 42, 7);
			ring_fetch_req(&r, 2, &q);  /* same slot as wrap */
			check_rw(&q, BLKIF_OP_READ, 3, 42, 7);
			munmap(m, 4096u << o);
		}
	}
}

static void test_fetch_ops(void **state)
{
	(void)state;
	for (int abi = 0; abi <= 1; abi++) {
		struct be_ring r;
		struct ring_req q;
		void *m = ring_mem(1);

		assert_int_equal(ring_attach(&r, m, 1, abi), 0);
		/* nr_segments above 11: kept as written, only 11 copied */
		write_rw(&r, 0, BLKIF_OP_FLUSH_DISKCACHE, 255, 1, 2);
		ring_fetch_req(&r, 0, &q);
		check_rw(&q, BLKIF_OP_FLUSH_DISKCACHE, 255, 1, 2);
		write_rw(&r, 1, BLKIF_OP_WRITE_BARRIER, 0, 3, 4);
		ring_fetch_req(&r, 1, &q);
		check_rw(&q, BLKIF_OP_WRITE_BARRIER, 0, 3, 4);

		write_discard(&r, 2, BLKIF_DISCARD_SECURE, 9, 1ull << 33, 12345678901ull);
		ring_fetch_req(&r, 2, &q);
		assert_int_equal(q.operation, BLKIF_OP_DISCARD);
		assert_int_equal(q.discard_flag, BLKIF_DISCARD_SECURE);
		assert_int_equal(q.handle, 0x0ca3);
		assert_true(q.id == 9 && q.sector_number == 1ull << 33);
		assert_true(q.nr_sectors == 12345678901ull);
		assert_int_equal(q.nr_copied, 0);

		/* unknown operations: only id, so an error can be answered */
		for (unsigned int op = BLKIF_OP_RESERVED_1; op < 256; op += 41) {
			if (op == BLKIF_OP_DISCARD || op == BLKIF_OP_INDIRECT)
				continue;
			write_rw(&r, 3, op, 11, 0xabcdef, 5);
			ring_fetch_req(&r, 3, &q);
			struct ring_req want = { .operation = op, .id = 0xabcdef };
			assert_memory_equal(&q, &want, sizeof(q));
		}
		munmap(m, 8192);
	}
}

static void test_fetch_indirect(void **state)
{
	static const struct { uint16_t nseg; unsigned int pages; } cases[] = {
		{ 0, 0 }, { 1, 1 }, { 512, 1 }, { 513, 2 }, { 4096, 8 },
		{ 4097, 8 }, { 65535, 8 },
	};
	(void)state;
	for (int abi = 0; abi <= 1; abi++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct be_ring r;
			struct ring_req q;
			void *m = ring_mem(0);

			assert_int_equal(ring_attach(&r, m, 0, abi), 0);
			write_indirect(&r, 31, BLKIF_OP_WRITE, cases[i].nseg, 77, 88);
			ring_fetch_req(&r, 31, &q);
			assert_int_equal(q.operation, BLKIF_OP_INDIRECT);
			assert_int_equal(q.indirect_op, BLKIF_OP_WRITE);
			assert_int_equal(q.nr_segments, cases[i].nseg);
			assert_int_equal(q.handle, 0x0ca2);
			assert_true(q.id == 77 && q.sector_number == 88);
			assert_int_equal(q.nr_copied, cases[i].pages);
			for (unsigned int k = 0; k < 8; k++)
				assert_int_equal(q.u.indirect_grefs[k],
						 k < cases[i].pages ? 2000 + k : 0);
			munmap(m, 4096);
		}
	}
}

static void test_fetch_indirect_segs(void **state)
{
	uint8_t *p0 = ring_mem(0), *p1 = ring_mem(0);
	void *pages[2] = { p0, p1 };
	struct blkif_request_segment out[1024];
	(void)state;
	for (unsigned int k = 0; k < 512; k++) {
		put(p0, 8 * k, 10 + k, 4); put(p0, 8 * k + 4, 1, 1); put(p0, 8 * k + 5, 6, 1);
		put(p1, 8 * k, 5000 + k, 4); put(p1, 8 * k + 4, 0, 1); put(p1, 8 * k + 5, 7, 1);
	}
	memset(out, 0xee, sizeof(out));
	ring_fetch_indirect_segs(pages, 700, out);
	for (unsigned int k = 0; k < 700; k++) {
		assert_int_equal(out[k].gref, k < 512 ? 10 + k : 5000 + k - 512);
		assert_int_equal(out[k].first_sect, k < 512 ? 1 : 0);
		assert_int_equal(out[k].last_sect, k < 512 ? 6 : 7);
	}
	assert_int_equal(out[700].gref, 0xeeeeeeee);  /* nothing past n */
	munmap(p0, 4096);
	munmap(p1, 4096);
}

static void test_pending_and_overrun(void **state)
{
	(void)state;
	for (int abi = 0; abi <= 1; abi++) {
		for (unsigned int o = 0; o <= RING_MAX_ORDER; o++) {
			struct be_ring r;
			void *m = ring_mem(o);

			assert_int_equal(ring_attach(&r, m, o, abi), 0);
			unsigned int n = r.nr_ents;
			assert_int_equal(ring_pending(&r), 0);
			*hdr_word(&r, 0) = 5;
			assert_int_equal(ring_pending(&r), 5);
			r.req_cons += 3;
			assert_int_equal(ring_pending(&r), 2);
			/* a full ring of unanswered requests is legal */
			*hdr_word(&r, 0) = n;
			r.req_cons = n;
			assert_int_equal(ring_pending(&r), 0);
			ring_put_rsp(&r, 1, 0, 0);
			ring_put_rsp(&r, 2, 0, 0);
			*hdr_word(&r, 0) = n + 2;
			assert_int_equal(ring_pending(&r), 2);
			assert_false(r.broken);
			/* one more than fits: broken, and it stays broken */
			*hdr_word(&r, 0) = n + 3;
			assert_int_equal(ring_pending(&r), -EIO);
			assert_true(r.broken);
			assert_int_equal(r.bad_prod, n + 3);
			*hdr_word(&r, 0) = n + 2;
			assert_int_equal(ring_pending(&r), -EIO);
			assert_int_equal(ring_final_check(&r), -EIO);
			munmap(m, 4096u << o);
		}
	}
}

static void test_prod_backwards_and_wrap(void **state)
{
	struct be_ring r;
	void *m = ring_mem(0);
	(void)state;
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_64), 0);
	*hdr_word(&r, 0) = 5;
	r.req_cons = 5;
	*hdr_word(&r, 0) = 3;           /* moved back behind what we fetched */
	assert_int_equal(ring_pending(&r), -EIO);

	/* indices wrap at 2^32 without tripping the check */
	((uint32_t *)m)[2] = 0xfffffffe;
	((uint32_t *)m)[0] = 0xfffffffe;
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_64), 0);
	*hdr_word(&r, 0) = 3;           /* 5 requests across the wrap */
	assert_int_equal(ring_pending(&r), 5);
	*hdr_word(&r, 0) = 31;          /* 33: one too many */
	assert_int_equal(ring_pending(&r), -EIO);
	munmap(m, 4096);
}

static void test_final_check(void **state)
{
	struct be_ring r;
	void *m = ring_mem(0);
	(void)state;
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_32), 0);
	*hdr_word(&r, 0) = 4;
	r.req_cons = 4;
	*hdr_word(&r, 1) = 1;
	assert_int_equal(ring_final_check(&r), 0);
	assert_int_equal(*hdr_word(&r, 1), 5);   /* req_event = req_cons + 1 */
	*hdr_word(&r, 0) = 6;
	*hdr_word(&r, 1) = 77;
	assert_int_equal(ring_final_check(&r), 2);
	assert_int_equal(*hdr_word(&r, 1), 77);  /* work pending: untouched */
	munmap(m, 4096);
}

static void test_push_notify(void **state)
{
	struct be_ring r;
	void *m = ring_mem(0);
	(void)state;
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_64), 0);
	*hdr_word(&r, 3) = 1;                    /* SHARED_RING_INIT: rsp_event 1 */
	ring_put_rsp(&r, 1, 0, 0);
	assert_int_equal(*hdr_word(&r, 2), 0);   /* not visible before push */
	assert_true(ring_push_rsps(&r));
	assert_int_equal(*hdr_word(&r, 2), 1);
	ring_put_rsp(&r, 2, 0, 0);
	assert_false(ring_push_rsps(&r));        /* frontend did not re-arm */
	*hdr_word(&r, 3) = 3;
	ring_put_rsp(&r, 3, 0, 0);
	ring_put_rsp(&r, 4, 0, 0);
	assert_true(ring_push_rsps(&r));         /* 3 is among the new ones */
	*hdr_word(&r, 3) = 10;
	ring_put_rsp(&r, 5, 0, 0);
	assert_false(ring_push_rsps(&r));        /* asked for a later one */
	/* published at once, the notify decision still covers it later */
	*hdr_word(&r, 3) = 6;
	ring_put_rsp(&r, 6, 0, 0);
	ring_publish_rsps(&r);
	assert_int_equal(*hdr_word(&r, 2), 6);
	ring_put_rsp(&r, 7, 0, 0);
	assert_true(ring_push_rsps(&r));         /* 6 was asked for */
	assert_int_equal(*hdr_word(&r, 2), 7);
	assert_false(ring_push_rsps(&r));        /* nothing new */
	munmap(m, 4096);
}

/*
 * Issue 20: a backend died between publishing responses 1..5 and
 * notifying; the frontend asked at 3.  Its restart attaches at rsp_prod 5
 * and adopts: the next push notifies although rsp_event (3) is behind
 * everything it publishes, and after that the usual rule applies.
 */
static void test_adopted_ring_owes_a_notify(void **state)
{
	struct be_ring r;
	void *m = ring_mem(0);
	(void)state;
	*hdr_word(&(struct be_ring){ .sring = m }, 2) = 5;   /* rsp_prod */
	*hdr_word(&(struct be_ring){ .sring = m }, 3) = 3;   /* rsp_event */
	*hdr_word(&(struct be_ring){ .sring = m }, 0) = 5;   /* req_prod */
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_64), 0);
	assert_false(r.unannounced);
	assert_int_equal(ring_adopt(&r, 5), 0);
	assert_true(r.unannounced);
	assert_true(ring_push_rsps(&r));         /* nothing new: notify anyway */
	assert_false(r.unannounced);
	assert_false(ring_push_rsps(&r));        /* once only */
	*hdr_word(&r, 3) = 6;                    /* the frontend re-armed */
	ring_put_rsp(&r, 6, 0, 0);
	assert_true(ring_push_rsps(&r));
	ring_put_rsp(&r, 7, 0, 0);
	assert_false(ring_push_rsps(&r));
	/* a plain attach (no adoption) owes nothing */
	assert_int_equal(ring_attach(&r, m, 0, RING_ABI_X86_64), 0);
	assert_false(ring_push_rsps(&r));
	munmap(m, 4096);
}

static void test_rsp_layout(void **state)
{
	(void)state;
	for (int abi = 0; abi <= 1; abi++) {
		struct be_ring r;
		uint8_t *m = ring_mem(0);
		size_t sz = lay(abi)->rsp, stride = lay(abi)->req;

		memset(m + 64, 0xaa, 4096 - 64);
		assert_int_equal(ring_attach(&r, m, 0, abi), 0);
		r.rsp_prod_pvt = r.req_cons = 33;     /* entry 1, wrapped */
		ring_put_rsp(&r, 0x1122334455667788ull, BLKIF_OP_WRITE, BLKIF_RSP_EOPNOTSUPP);
		const uint8_t want[16] = { 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
					   BLKIF_OP_WRITE, 0, 0xfe, 0xff, 0, 0, 0, 0 };
		/* a response sits at the start of its request-sized entry */
		uint8_t *s = m + 64 + stride;
		if (abi == RING_ABI_X86_64)     /* where ring.h's union puts it */
			assert_ptr_equal(s, &((struct blkif_sring *)(void *)m)->ring[1].rsp);
		assert_memory_equal(s, want, sz);
		for (size_t i = 0; i < stride; i++)
			assert_int_equal(m[64 + i], 0xaa);          /* entry 0 */
		for (size_t i = sz; i < stride + 16; i++)
			assert_int_equal(s[i], 0xaa);               /* rest, entry 2 */
		assert_int_equal(r.rsp_prod_pvt, 34);
		munmap(m, 4096);
	}
}

/* ---- The slot that changes between reads (tests/unit/slot_trap.h) ------ */

/* A deliberately bad fetch: reads the first word twice. */
static __attribute__((noinline)) uint32_t double_read(const void *slot)
{
	const volatile uint32_t *w = slot;
	uint32_t a = w[0];

	return a + w[0];
}

static void test_trap_sees_double_read(void **state)
{
	uint8_t *m = ring_mem(0);
	(void)state;
	arm_trap(m, m + 64, 112);
	(void)double_read(m + 64);
	disarm_trap();
	assert_int_equal(trap.reads[0], 2);
	munmap(m, 4096);
}

static void test_slot_changes_between_reads(void **state)
{
	(void)state;
	for (int abi = 0; abi <= 1; abi++) {
		for (int kind = 0; kind < 3; kind++) {
			struct be_ring r;
			struct ring_req want, got;
			uint8_t *m = ring_mem(0), before[112];
			size_t len = lay(abi)->req;

			assert_int_equal(ring_attach(&r, m, 0, abi), 0);
			if (kind == 0)
				write_rw(&r, 5, BLKIF_OP_WRITE, 11, 0x0102030405060708ull, 99);
			else if (kind == 1)
				write_indirect(&r, 5, BLKIF_OP_READ, 4096, 0x1111, 1ull << 35);
			else
				write_discard(&r, 5, 1, 0x2222, 1000, 1ull << 20);
			ring_fetch_req(&r, 5, &want);
			memcpy(before, slot_of(&r, 5), len);

			arm_trap(m, slot_of(&r, 5), len);
			ring_fetch_req(&r, 5, &got);
			disarm_trap();

			assert_memory_equal(&got, &want, sizeof(got));
			for (size_t i = 0; i < len / 4; i++)
				assert_int_equal(trap.reads[i], 1);
			assert_int_equal(trap.outside, 0);
			/* and the frontend really did change the slot */
			assert_memory_not_equal(before, slot_of(&r, 5), len);
			munmap(m, 4096);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_abi_parse),
		cmocka_unit_test(test_attach),
		cmocka_unit_test(test_fetch_rw_every_order),
		cmocka_unit_test(test_fetch_ops),
		cmocka_unit_test(test_fetch_indirect),
		cmocka_unit_test(test_fetch_indirect_segs),
		cmocka_unit_test(test_pending_and_overrun),
		cmocka_unit_test(test_prod_backwards_and_wrap),
		cmocka_unit_test(test_final_check),
		cmocka_unit_test(test_push_notify),
		cmocka_unit_test(test_adopted_ring_owes_a_notify),
		cmocka_unit_test(test_rsp_layout),
		cmocka_unit_test(test_trap_sees_double_read),
		cmocka_unit_test(test_slot_changes_between_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
