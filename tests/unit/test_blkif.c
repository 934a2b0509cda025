/* SPDX-License-Identifier: MIT */
/*
 * lib/blkif: the wire layouts of the three ABIs (x86_64, x86_32, and the
 * build's native blkif.h), ring sizes per order, entry positions, and the
 * free-running index checks across the 2^32 wrap.
 *
 * The expected offsets are written out from blkif.h and the i386 rules
 * (uint64_t aligned to 4), not taken from lib/blkif.h, so a wrong struct
 * there fails here; the native column is read off <xen/io/blkif.h>.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/blkif.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* blkif.h's native layout is x86_64's where we build (x86_64, arm64). */
#if defined(__x86_64__) || defined(__aarch64__)
#define NATIVE_IS_X64 1
#else
#define NATIVE_IS_X64 0
#endif

/* One field of one request/response type: its offset and size per ABI. */
struct field {
	const char *name;
	size_t x64_off, x32_off, native_off;
	size_t got_x64, got_x32;        /* offsetof in lib/blkif.h's structs */
};

#define F(t, f) offsetof(struct xbd_blkif_x64_##t, f), offsetof(struct xbd_blkif_x32_##t, f)

static void check_fields(const struct field *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		print_message("%s\n", v[i].name);
		assert_int_equal(v[i].got_x64, v[i].x64_off);
		assert_int_equal(v[i].got_x32, v[i].x32_off);
		if (NATIVE_IS_X64)
			assert_int_equal(v[i].native_off, v[i].x64_off);
		/* after the first word, x86_32 is x86_64 minus the pad word */
		if (v[i].x64_off >= 8)
			assert_int_equal(v[i].x32_off + 4, v[i].x64_off);
		else
			assert_int_equal(v[i].x32_off, v[i].x64_off);
	}
}

static void test_rw_layout(void **state)
{
	const struct field v[] = {
		{ "operation", 0, 0, offsetof(struct blkif_request, operation), F(req_rw, operation) },
		{ "nr_segments", 1, 1, offsetof(struct blkif_request, nr_segments), F(req_rw, nr_segments) },
		{ "handle", 2, 2, offsetof(struct blkif_request, handle), F(req_rw, handle) },
		{ "id", 8, 4, offsetof(struct blkif_request, id), F(req_rw, id) },
		{ "sector", 16, 12, offsetof(struct blkif_request, sector_number),
		  F(req_rw, sector_number) },
		{ "seg", 24, 20, offsetof(struct blkif_request, seg), F(req_rw, seg) },
	};

	(void)state;
	check_fields(v, N(v));
	assert_int_equal(sizeof(struct xbd_blkif_x64_req_rw), 112);
	assert_int_equal(sizeof(struct xbd_blkif_x32_req_rw), 108);
	if (NATIVE_IS_X64)
		assert_int_equal(sizeof(struct blkif_request), 112);
}

static void test_discard_indirect_layout(void **state)
{
	const struct field d[] = {
		{ "flag", 1, 1, offsetof(struct blkif_request_discard, flag), F(req_discard, flag) },
		{ "id", 8, 4, offsetof(struct blkif_request_discard, id), F(req_discard, id) },
		{ "sector", 16, 12, offsetof(struct blkif_request_discard, sector_number),
		  F(req_discard, sector_number) },
		{ "nr_sectors", 24, 20, offsetof(struct blkif_request_discard, nr_sectors),
		  F(req_discard, nr_sectors) },
	};
	const struct field in[] = {
		{ "indirect_op", 1, 1, offsetof(struct blkif_request_indirect, indirect_op),
		  F(req_indirect, indirect_op) },
		{ "nr_segments", 2, 2, offsetof(struct blkif_request_indirect, nr_segments),
		  F(req_indirect, nr_segments) },
		{ "id", 8, 4, offsetof(struct blkif_request_indirect, id), F(req_indirect, id) },
		{ "sector", 16, 12, offsetof(struct blkif_request_indirect, sector_number),
		  F(req_indirect, sector_number) },
		{ "handle", 24, 20, offsetof(struct blkif_request_indirect, handle),
		  F(req_indirect, handle) },
		{ "grefs", 28, 24, offsetof(struct blkif_request_indirect, indirect_grefs),
		  F(req_indirect, indirect_grefs) },
	};

	(void)state;
	check_fields(d, N(d));
	check_fields(in, N(in));
	assert_int_equal(sizeof(struct xbd_blkif_x64_req_discard), 32);
	assert_int_equal(sizeof(struct xbd_blkif_x32_req_discard), 28);
	/* both indirect layouts are padded to 64 bytes */
	assert_int_equal(sizeof(struct xbd_blkif_x64_req_indirect), 64);
	assert_int_equal(sizeof(struct xbd_blkif_x32_req_indirect), 64);
	assert_int_equal(sizeof(struct blkif_request_indirect), 64);
}

static void test_rsp_seg_hdr_layout(void **state)
{
	const struct field r[] = {
		{ "id", 0, 0, offsetof(struct blkif_response, id), F(rsp, id) },
		{ "operation", 8, 8, offsetof(struct blkif_response, operation), F(rsp, operation) },
		{ "status", 10, 10, offsetof(struct blkif_response, status), F(rsp, status) },
	};

	(void)state;
	for (size_t i = 0; i < N(r); i++) {
		assert_int_equal(r[i].got_x64, r[i].x64_off);
		assert_int_equal(r[i].got_x32, r[i].x32_off);
		if (NATIVE_IS_X64)
			assert_int_equal(r[i].native_off, r[i].x64_off);
	}
	assert_int_equal(sizeof(struct xbd_blkif_x64_rsp), 16);
	assert_int_equal(sizeof(struct xbd_blkif_x32_rsp), 12);
	if (NATIVE_IS_X64)
		assert_int_equal(sizeof(struct blkif_response), 16);

	assert_int_equal(sizeof(struct xbd_blkif_seg), sizeof(struct blkif_request_segment));
	assert_int_equal(offsetof(struct xbd_blkif_seg, first_sect),
			 offsetof(struct blkif_request_segment, first_sect));
	assert_int_equal(offsetof(struct xbd_blkif_seg, last_sect),
			 offsetof(struct blkif_request_segment, last_sect));
	assert_int_equal(XBD_BLKIF_SEGS_PER_INDIRECT_PAGE * sizeof(struct xbd_blkif_seg), 4096);
	assert_int_equal(XBD_BLKIF_MAX_INDIRECT_SEGS, 8 * 512);

	assert_int_equal(offsetof(struct xbd_blkif_sring_hdr, req_prod), offsetof(struct blkif_sring, req_prod));
	assert_int_equal(offsetof(struct xbd_blkif_sring_hdr, req_event), offsetof(struct blkif_sring, req_event));
	assert_int_equal(offsetof(struct xbd_blkif_sring_hdr, rsp_prod), offsetof(struct blkif_sring, rsp_prod));
	assert_int_equal(offsetof(struct xbd_blkif_sring_hdr, rsp_event), offsetof(struct blkif_sring, rsp_event));
	assert_int_equal(sizeof(struct xbd_blkif_sring_hdr), offsetof(struct blkif_sring, ring));
}

static unsigned int rd_pow2(size_t x)
{
	unsigned int p = 1;

	while ((size_t)p * 2 <= x)
		p *= 2;
	return p;
}

static void test_ring_entries(void **state)
{
	static const enum xbd_blkif_abi abis[] = { XBD_BLKIF_ABI_X86_64, XBD_BLKIF_ABI_X86_32 };

	(void)state;
	assert_int_equal(xbd_blkif_entry_size(XBD_BLKIF_ABI_X86_64), 112);
	assert_int_equal(xbd_blkif_entry_size(XBD_BLKIF_ABI_X86_32), 108);
	for (size_t a = 0; a < N(abis); a++) {
		for (unsigned int o = 0; o <= XBD_BLKIF_MAX_RING_ORDER; o++) {
			size_t room = ((size_t)4096 << o) - 64;
			unsigned int n = xbd_blkif_ring_entries(abis[a], o);

			assert_int_equal(n, rd_pow2(room / xbd_blkif_entry_size(abis[a])));
			assert_int_equal(n, 32u << o);
			/* the last entry ends inside the ring pages */
			assert_true(xbd_blkif_entry_offset(abis[a], n, n - 1) +
				    xbd_blkif_entry_size(abis[a]) <= (size_t)4096 << o);
		}
		assert_int_equal(xbd_blkif_ring_entries(abis[a], 6), 0);
		assert_int_equal(xbd_blkif_ring_entries(abis[a], 99), 0);
	}
	/* the installed header agrees for the native single-page ring */
	assert_int_equal(__CONST_RING_SIZE(blkif, 4096), xbd_blkif_ring_entries(XBD_BLKIF_ABI_X86_64, 0));
}

static void test_entry_offset(void **state)
{
	(void)state;
	assert_int_equal(xbd_blkif_entry_offset(XBD_BLKIF_ABI_X86_64, 32, 0), 64);
	assert_int_equal(xbd_blkif_entry_offset(XBD_BLKIF_ABI_X86_64, 32, 1), 64 + 112);
	assert_int_equal(xbd_blkif_entry_offset(XBD_BLKIF_ABI_X86_32, 32, 3), 64 + 3 * 108);
	/* free-running: index 32 is entry 0 again, 0xffffffff is entry 31 */
	assert_int_equal(xbd_blkif_entry_offset(XBD_BLKIF_ABI_X86_64, 32, 32), 64);
	assert_int_equal(xbd_blkif_entry_offset(XBD_BLKIF_ABI_X86_32, 32, 0xffffffffu), 64 + 31 * 108);
	assert_int_equal(xbd_blkif_entry_offset(XBD_BLKIF_ABI_X86_64, 1024, 0x401), 64 + 112);
}

static void test_indirect_pages(void **state)
{
	(void)state;
	assert_int_equal(xbd_blkif_indirect_pages(0), 0);
	assert_int_equal(xbd_blkif_indirect_pages(1), 1);
	assert_int_equal(xbd_blkif_indirect_pages(512), 1);
	assert_int_equal(xbd_blkif_indirect_pages(513), 2);
	assert_int_equal(xbd_blkif_indirect_pages(XBD_BLKIF_MAX_INDIRECT_SEGS), 8);
	assert_int_equal(xbd_blkif_indirect_pages(65535), 128);      /* not capped */
}

static void test_idx_between(void **state)
{
	static const struct { RING_IDX lo, idx, hi; bool in; } v[] = {
		{ 0, 0, 0, true },
		{ 0, 1, 0, false },
		{ 10, 10, 42, true },
		{ 10, 42, 42, true },
		{ 10, 43, 42, false },
		{ 10, 9, 42, false },                    /* moved backwards */
		/* across the wrap */
		{ 0xfffffffe, 0xfffffffe, 2, true },
		{ 0xfffffffe, 0xffffffff, 2, true },
		{ 0xfffffffe, 0, 2, true },
		{ 0xfffffffe, 2, 2, true },
		{ 0xfffffffe, 3, 2, false },
		{ 0xfffffffe, 0xfffffffd, 2, false },
		{ 0xffffffe0, 0x00000000, 0x00000000, true },
		/* a peer claiming 2^31 more is far outside */
		{ 5, 0x80000005, 5 + 32, false },
	};

	(void)state;
	for (size_t i = 0; i < N(v); i++) {
		print_message("[%#x, %#x] holds %#x: %d\n", v[i].lo, v[i].hi, v[i].idx, v[i].in);
		assert_int_equal(xbd_blkif_idx_between(v[i].lo, v[i].idx, v[i].hi), v[i].in);
	}
}

static void test_need_notify(void **state)
{
	static const struct { RING_IDX old, new, event; bool notify; } v[] = {
		{ 0, 1, 1, true },                       /* fresh ring: event = 1 */
		{ 1, 5, 2, true },
		{ 1, 5, 5, true },
		{ 1, 5, 1, false },                      /* already passed */
		{ 1, 5, 6, false },                      /* not reached yet */
		{ 5, 5, 5, false },                      /* nothing published */
		/* across the wrap */
		{ 0xfffffffe, 2, 0xffffffff, true },
		{ 0xfffffffe, 2, 0, true },
		{ 0xfffffffe, 2, 2, true },
		{ 0xfffffffe, 2, 0xfffffffe, false },
		{ 0xfffffffe, 2, 3, false },
	};

	(void)state;
	for (size_t i = 0; i < N(v); i++) {
		print_message("%#x -> %#x, event %#x\n", v[i].old, v[i].new, v[i].event);
		assert_int_equal(xbd_blkif_need_notify(v[i].old, v[i].new, v[i].event), v[i].notify);
	}
}

static void test_abi_names(void **state)
{
	static const struct { const char *in; int rc; enum xbd_blkif_abi abi; } v[] = {
		{ NULL, 0, XBD_BLKIF_ABI_X86_64 },       /* key absent: native */
		{ "x86_64-abi", 0, XBD_BLKIF_ABI_X86_64 },
		{ "arm-abi", 0, XBD_BLKIF_ABI_X86_64 },
		{ "x86_32-abi", 0, XBD_BLKIF_ABI_X86_32 },
		{ "", -EINVAL, 0 },
		{ "native", -EINVAL, 0 },
		{ "x86_32-abi ", -EINVAL, 0 },
		{ "X86_32-ABI", -EINVAL, 0 },
	};

	(void)state;
	for (size_t i = 0; i < N(v); i++) {
		enum xbd_blkif_abi abi = (enum xbd_blkif_abi)77;

		assert_int_equal(xbd_blkif_abi_parse(v[i].in, &abi), v[i].rc);
		assert_int_equal(abi, v[i].rc ? 77 : (int)v[i].abi);
	}
	assert_string_equal(xbd_blkif_abi_protocol(XBD_BLKIF_ABI_X86_64), "x86_64-abi");
	assert_string_equal(xbd_blkif_abi_protocol(XBD_BLKIF_ABI_X86_32), "x86_32-abi");
	/* journal files store the values */
	assert_int_equal(XBD_BLKIF_ABI_X86_64, 0);
	assert_int_equal(XBD_BLKIF_ABI_X86_32, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rw_layout),
		cmocka_unit_test(test_discard_indirect_layout),
		cmocka_unit_test(test_rsp_seg_hdr_layout),
		cmocka_unit_test(test_ring_entries),
		cmocka_unit_test(test_entry_offset),
		cmocka_unit_test(test_indirect_pages),
		cmocka_unit_test(test_idx_between),
		cmocka_unit_test(test_need_notify),
		cmocka_unit_test(test_abi_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
