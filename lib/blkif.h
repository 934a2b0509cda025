/* SPDX-License-Identifier: MIT */
/*
 * lib/blkif: the blkif wire layouts and ring arithmetic shared by both ends.
 *
 * <xen/io/blkif.h> describes the build machine's native layout only, and
 * its ring macros hand out pointers into the shared page (CONTRIBUTING.md,
 * "Tables, not token pasting").  Both ends of xbd speak x86_64-abi and x86_32-abi, so
 * the two layouts are written out here, once, with every padding byte
 * named and every size and offset checked by static_assert (against
 * blkif.h too where the layout is the native one).  The constants
 * (BLKIF_OP_*, BLKIF_RSP_*, BLKIF_MAX_*) come from blkif.h itself.
 *
 * The ring arithmetic is here too: entries per ring order, where entry idx
 * sits, and the checks on free-running 32-bit indices that both ends
 * apply to what the peer publishes.
 *
 * And the one way either end reads what its peer wrote into a slot:
 * xbd_blkif_copy_once(), a 32-bit volatile load per word into private
 * memory, so no field is ever read twice from the shared page.
 *
 * What is NOT here: knowing where slots are in a live ring, and
 * validating what the peer wrote.  backend/ring.c (requests in,
 * responses out) and frontend/ring.c (requests out, responses in) each
 * stay the only code of their end that touches a ring, copying every slot
 * once (with xbd_blkif_copy_once) before use; the backend validates
 * requests in backend/request.c, the frontend validates responses in
 * frontend/ring.c (indices) and frontend/channel.c (ids, operations).
 *
 * No state, no locks: every function is pure and may be called from any
 * thread.  (Not to be confused with backend/blkif.h, the backend's
 * struct backend_dev.)
 */
#ifndef XBD_LIB_BLKIF_H
#define XBD_LIB_BLKIF_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xen/xen.h>
#include <xen/grant_table.h>
#include <xen/io/blkif.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	      "the x86 and arm blkif layouts are little-endian");

#define XBD_BLKIF_PAGE_SIZE 4096u
/* Ring page orders xbd accepts and offers (32 pages, as FreeBSD; Linux
 * stops at 4). */
#define XBD_BLKIF_MAX_RING_ORDER 5u
/* req_prod, req_event, rsp_prod, rsp_event, pvt[4], pad[44]. */
#define XBD_BLKIF_SRING_HDR_SIZE 64u
/* Entries of one indirect page: 4096 / sizeof(struct xbd_blkif_seg). */
#define XBD_BLKIF_SEGS_PER_INDIRECT_PAGE 512u
/* Protocol ceiling on the segments of one indirect request. */
#define XBD_BLKIF_MAX_INDIRECT_SEGS \
	(BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * XBD_BLKIF_SEGS_PER_INDIRECT_PAGE)

/*
 * The two request/response layouts.  arm-abi has the x86_64 layout for
 * blkif (uint64_t aligned to 8), and so has "native" on x86_64 and arm64.
 * The values are stored in the backend's journal files: never renumber.
 */
enum xbd_blkif_abi {
	XBD_BLKIF_ABI_X86_64 = 0,
	XBD_BLKIF_ABI_X86_32 = 1,
};

/* ---- Wire structs -------------------------------------------------------- */

/* The shared ring header (struct blkif_sring without its entries). */
struct xbd_blkif_sring_hdr {
	RING_IDX req_prod, req_event;
	RING_IDX rsp_prod, rsp_event;
	uint8_t pvt[4];
	uint8_t pad[44];
};

/* One segment: the same in both ABIs, and the entry of indirect pages. */
struct xbd_blkif_seg {
	uint32_t gref;
	uint8_t first_sect;
	uint8_t last_sect;
	uint16_t pad;
};

/* x86_64-abi: natural alignment. */
struct xbd_blkif_x64_req_rw {
	uint8_t operation;
	uint8_t nr_segments;
	uint16_t handle;
	uint32_t pad;
	uint64_t id;
	uint64_t sector_number;
	struct xbd_blkif_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};

struct xbd_blkif_x64_req_discard {
	uint8_t operation;
	uint8_t flag;                   /* BLKIF_DISCARD_SECURE or 0 */
	uint16_t handle;
	uint32_t pad;
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;
};

struct xbd_blkif_x64_req_indirect {
	uint8_t operation;
	uint8_t indirect_op;
	uint16_t nr_segments;
	uint32_t pad0;
	uint64_t id;
	uint64_t sector_number;
	uint16_t handle;
	uint16_t pad1;
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint32_t pad2;
};

struct xbd_blkif_x64_rsp {
	uint64_t id;
	uint8_t operation;
	uint8_t pad0;
	int16_t status;
	uint32_t pad1;
};

/* x86_32-abi: 64-bit fields aligned to 4 (i386 rules), so no pad word
 * before id. */
struct __attribute__((packed, aligned(4))) xbd_blkif_x32_req_rw {
	uint8_t operation;
	uint8_t nr_segments;
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number;
	struct xbd_blkif_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};

struct __attribute__((packed, aligned(4))) xbd_blkif_x32_req_discard {
	uint8_t operation;
	uint8_t flag;
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;
};

struct __attribute__((packed, aligned(4))) xbd_blkif_x32_req_indirect {
	uint8_t operation;
	uint8_t indirect_op;
	uint16_t nr_segments;
	uint64_t id;
	uint64_t sector_number;
	uint16_t handle;
	uint16_t pad1;
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint64_t pad2;                  /* the i386 header pads it to 64 bytes */
};

struct __attribute__((packed, aligned(4))) xbd_blkif_x32_rsp {
	uint64_t id;
	uint8_t operation;
	uint8_t pad0;
	int16_t status;
};

/* ---- Layout checks ------------------------------------------------------- */

#define XBD_BLKIF_X64_ENTRY_SIZE 112u
#define XBD_BLKIF_X32_ENTRY_SIZE 108u

static_assert(sizeof(struct xbd_blkif_sring_hdr) == XBD_BLKIF_SRING_HDR_SIZE, "sring header");
static_assert(sizeof(struct xbd_blkif_seg) == 8, "segment");
static_assert(sizeof(struct blkif_request_segment) == 8, "blkif.h segment");
static_assert(XBD_BLKIF_SEGS_PER_INDIRECT_PAGE * sizeof(struct xbd_blkif_seg) ==
	      XBD_BLKIF_PAGE_SIZE, "segments per indirect page");

static_assert(sizeof(struct xbd_blkif_x64_req_rw) == XBD_BLKIF_X64_ENTRY_SIZE, "x64 rw");
static_assert(offsetof(struct xbd_blkif_x64_req_rw, id) == 8, "x64 rw id");
static_assert(offsetof(struct xbd_blkif_x64_req_rw, sector_number) == 16, "x64 rw sector");
static_assert(offsetof(struct xbd_blkif_x64_req_rw, seg) == 24, "x64 rw seg");
static_assert(sizeof(struct xbd_blkif_x64_req_discard) == 32, "x64 discard");
static_assert(offsetof(struct xbd_blkif_x64_req_discard, nr_sectors) == 24, "x64 nr_sectors");
static_assert(sizeof(struct xbd_blkif_x64_req_indirect) == 64, "x64 indirect");
static_assert(offsetof(struct xbd_blkif_x64_req_indirect, handle) == 24, "x64 ind handle");
static_assert(offsetof(struct xbd_blkif_x64_req_indirect, indirect_grefs) == 28, "x64 grefs");
static_assert(sizeof(struct xbd_blkif_x64_rsp) == 16, "x64 response");
static_assert(offsetof(struct xbd_blkif_x64_rsp, operation) == 8, "x64 rsp op");
static_assert(offsetof(struct xbd_blkif_x64_rsp, status) == 10, "x64 rsp status");

static_assert(sizeof(struct xbd_blkif_x32_req_rw) == XBD_BLKIF_X32_ENTRY_SIZE, "x32 rw");
static_assert(offsetof(struct xbd_blkif_x32_req_rw, id) == 4, "x32 rw id");
static_assert(offsetof(struct xbd_blkif_x32_req_rw, sector_number) == 12, "x32 rw sector");
static_assert(offsetof(struct xbd_blkif_x32_req_rw, seg) == 20, "x32 rw seg");
static_assert(sizeof(struct xbd_blkif_x32_req_discard) == 28, "x32 discard");
static_assert(offsetof(struct xbd_blkif_x32_req_discard, nr_sectors) == 20, "x32 nr_sectors");
static_assert(sizeof(struct xbd_blkif_x32_req_indirect) == 64, "x32 indirect");
static_assert(offsetof(struct xbd_blkif_x32_req_indirect, handle) == 20, "x32 ind handle");
static_assert(offsetof(struct xbd_blkif_x32_req_indirect, indirect_grefs) == 24, "x32 grefs");
static_assert(sizeof(struct xbd_blkif_x32_rsp) == 12, "x32 response");
static_assert(offsetof(struct xbd_blkif_x32_rsp, operation) == 8, "x32 rsp op");
static_assert(offsetof(struct xbd_blkif_x32_rsp, status) == 10, "x32 rsp status");

/*
 * Everything after the first word of a request sits 4 bytes lower in
 * x86_32 than in x86_64 (there is no pad word at offset 4), and the first
 * word is the same.  Both ends rely on it: the backend widens an x86_32
 * slot into the x86_64 struct, the frontend narrows an x86_64 image into
 * an x86_32 slot.  Responses have the same offsets in both ABIs; x86_64
 * only adds 4 bytes of tail padding.
 */
#define XBD_BLKIF_X64_PAD_OFFSET 4u      /* the word x86_32 has not: */
#define XBD_BLKIF_X64_PAD_SIZE 4u        /* bytes 4..7 of x86_64 */
static_assert(offsetof(struct xbd_blkif_x64_req_rw, pad) == XBD_BLKIF_X64_PAD_OFFSET &&
	      sizeof(((struct xbd_blkif_x64_req_rw *)0)->pad) == XBD_BLKIF_X64_PAD_SIZE,
	      "x64 pad word");
static_assert(XBD_BLKIF_X64_ENTRY_SIZE - XBD_BLKIF_X64_PAD_SIZE == XBD_BLKIF_X32_ENTRY_SIZE,
	      "x32 entry = x64 entry without the pad word");
#define XBD_BLKIF_X32_SHIFTED(op, f)                                          \
	static_assert(offsetof(struct xbd_blkif_x32_req_##op, f) +               \
		      XBD_BLKIF_X64_PAD_SIZE ==                                    \
		      offsetof(struct xbd_blkif_x64_req_##op, f), #op " " #f)
XBD_BLKIF_X32_SHIFTED(rw, id);
XBD_BLKIF_X32_SHIFTED(rw, sector_number);
XBD_BLKIF_X32_SHIFTED(rw, seg);
XBD_BLKIF_X32_SHIFTED(discard, id);
XBD_BLKIF_X32_SHIFTED(discard, sector_number);
XBD_BLKIF_X32_SHIFTED(discard, nr_sectors);
XBD_BLKIF_X32_SHIFTED(indirect, id);
XBD_BLKIF_X32_SHIFTED(indirect, sector_number);
XBD_BLKIF_X32_SHIFTED(indirect, handle);
XBD_BLKIF_X32_SHIFTED(indirect, indirect_grefs);
#undef XBD_BLKIF_X32_SHIFTED
/* The head of every request: operation, id and sector_number sit at the
 * same offsets in the rw, discard and indirect layouts of an ABI (the
 * members of blkif.h's union), so code may set or read them through the
 * rw view whatever the operation. */
#define XBD_BLKIF_HEAD(abi, op, f)                                            \
	static_assert(offsetof(struct xbd_blkif_##abi##_req_##op, f) ==          \
		      offsetof(struct xbd_blkif_##abi##_req_rw, f), #abi " " #op " " #f)
XBD_BLKIF_HEAD(x64, discard, id);
XBD_BLKIF_HEAD(x64, discard, sector_number);
XBD_BLKIF_HEAD(x64, indirect, id);
XBD_BLKIF_HEAD(x64, indirect, sector_number);
XBD_BLKIF_HEAD(x32, discard, id);
XBD_BLKIF_HEAD(x32, discard, sector_number);
XBD_BLKIF_HEAD(x32, indirect, id);
XBD_BLKIF_HEAD(x32, indirect, sector_number);
#undef XBD_BLKIF_HEAD
static_assert(offsetof(struct xbd_blkif_x32_rsp, status) ==
	      offsetof(struct xbd_blkif_x64_rsp, status), "rsp status in both ABIs");

#if defined(__x86_64__) || defined(__aarch64__)
/* The installed native blkif.h must be exactly our x86_64 layout. */
static_assert(sizeof(struct blkif_request) == XBD_BLKIF_X64_ENTRY_SIZE, "native req");
static_assert(offsetof(struct blkif_request, id) ==
	      offsetof(struct xbd_blkif_x64_req_rw, id), "native id");
static_assert(offsetof(struct blkif_request, seg) ==
	      offsetof(struct xbd_blkif_x64_req_rw, seg), "native seg");
static_assert(sizeof(struct blkif_request_indirect) == 64, "native indirect");
static_assert(offsetof(struct blkif_request_indirect, indirect_grefs) ==
	      offsetof(struct xbd_blkif_x64_req_indirect, indirect_grefs), "native grefs");
static_assert(offsetof(struct blkif_request_discard, nr_sectors) ==
	      offsetof(struct xbd_blkif_x64_req_discard, nr_sectors), "native nr_sectors");
static_assert(sizeof(struct blkif_response) == sizeof(struct xbd_blkif_x64_rsp), "native rsp");
static_assert(offsetof(struct blkif_response, status) ==
	      offsetof(struct xbd_blkif_x64_rsp, status), "native status");
static_assert(offsetof(struct blkif_sring, ring) == XBD_BLKIF_SRING_HDR_SIZE, "native sring");
static_assert(sizeof(union blkif_sring_entry) == XBD_BLKIF_X64_ENTRY_SIZE, "native stride");
#endif

/* ---- ABI names ----------------------------------------------------------- */

/*
 * The `protocol` key -> layout.  NULL (key absent) means native, as the
 * blkif.h text, QEMU and FreeBSD say (Linux blkback assumes x86_32 on x86;
 * Linux blkfront always writes the key).  "arm-abi" is the x86_64 layout.
 * Returns 0, or -EINVAL for any other string (*out untouched).
 */
int xbd_blkif_abi_parse(const char *protocol, enum xbd_blkif_abi *out);

/* The `protocol` value of an ABI: "x86_64-abi" or "x86_32-abi". */
const char *xbd_blkif_abi_protocol(enum xbd_blkif_abi abi);

/* ---- Ring geometry ------------------------------------------------------- */

/*
 * Bytes per ring entry.  An entry is the union of a request and a
 * response (ring.h's sring_entry), so both share the request's stride:
 * 112 (x86_64), 108 (x86_32).  A response sits at the start of its entry.
 */
static inline size_t xbd_blkif_entry_size(enum xbd_blkif_abi abi)
{
	return abi == XBD_BLKIF_ABI_X86_32 ? XBD_BLKIF_X32_ENTRY_SIZE
					   : XBD_BLKIF_X64_ENTRY_SIZE;
}

/*
 * Entries of a ring of 2^order pages: what fits after the header, rounded
 * down to a power of two (__RING_SIZE).  That is 32 << order for every
 * order 0..5 in both ABIs.  0 when order > XBD_BLKIF_MAX_RING_ORDER.
 */
unsigned int xbd_blkif_ring_entries(enum xbd_blkif_abi abi, unsigned int order);

/* Byte offset from the start of the ring of the entry of free-running
 * index idx, in a ring of nr_ents (a power of two) entries. */
static inline size_t xbd_blkif_entry_offset(enum xbd_blkif_abi abi,
					    unsigned int nr_ents, RING_IDX idx)
{
	return XBD_BLKIF_SRING_HDR_SIZE +
	       (size_t)(idx & (nr_ents - 1)) * xbd_blkif_entry_size(abi);
}

/* Indirect pages that nr_segments segments fill (not capped). */
static inline unsigned int xbd_blkif_indirect_pages(unsigned int nr_segments)
{
	return (nr_segments + XBD_BLKIF_SEGS_PER_INDIRECT_PAGE - 1) /
	       XBD_BLKIF_SEGS_PER_INDIRECT_PAGE;
}

/* ---- Reading the peer's words ------------------------------------------ */

/*
 * Copy words 32-bit words from shared memory src (4-byte aligned) to
 * private memory dst, each read exactly once: a volatile load per word,
 * so the compiler may neither re-read a word nor merge or split loads.
 * Whatever the peer writes meanwhile, the copy is one snapshot per word
 * and everything after works on the copy (tests/unit/test_ring.c and
 * test_fe_ring.c trap every load of a slot to prove it).
 */
static inline void xbd_blkif_copy_once(uint32_t *dst, const void *src, size_t words)
{
	const volatile uint32_t *s = src;

	/* Unrolled: a 112-byte slot costs 56 instructions, not 168. */
#pragma GCC unroll 4
	for (size_t i = 0; i < words; i++)
		dst[i] = s[i];
}

/* ---- Free-running indices ------------------------------------------------ */

/*
 * Ring indices run freely through 2^32 and wrap; only differences mean
 * something.  Whether idx lies in [lo, hi], walking forward from lo (so
 * lo = 0xfffffffe, hi = 2 holds 0xffffffff, 0, 1 and 2).  This is the
 * check on every index a peer publishes: a producer index outside
 * [what we consumed, what can possibly be there] is a broken or hostile
 * peer (RING_REQUEST_PROD_OVERFLOW, XSA-155).
 */
static inline bool xbd_blkif_idx_between(RING_IDX lo, RING_IDX idx, RING_IDX hi)
{
	return (RING_IDX)(idx - lo) <= (RING_IDX)(hi - lo);
}

/*
 * After publishing a producer index moving from old to new, whether the
 * peer's event index (req_event / rsp_event) asks for a notification:
 * event lies in (old, new] (RING_PUSH_*_AND_CHECK_NOTIFY).
 */
static inline bool xbd_blkif_need_notify(RING_IDX old, RING_IDX new, RING_IDX event)
{
	return (RING_IDX)(new - event) < (RING_IDX)(new - old);
}

#endif
