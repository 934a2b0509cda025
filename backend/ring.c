/* SPDX-License-Identifier: MIT */
/*
 * backend/ring.c: the only code that touches a shared blkif ring.
 *
 * The wire layouts of both ABIs are written out here with their exact
 * sizes and offsets (checked by static_assert against blkif.h where the
 * layout is the native one).  We do not use the ring.h macros to read
 * requests: RING_GET_REQUEST hands out a pointer into the shared page,
 * which invites reading a field twice.  Instead a slot is copied once, a
 * 32-bit volatile load per word, into private memory, and decoded from
 * there.
 *
 * Barriers are spelled out with __atomic fences next to the index they
 * order (the xen_rmb/xen_wmb/xen_mb of ring.h).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "backend/ring.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	      "the x86 and arm blkif layouts are little-endian");

/* ---- Shared ring header ------------------------------------------------ */

struct sring_hdr {
	RING_IDX req_prod, req_event;
	RING_IDX rsp_prod, rsp_event;
	uint8_t pvt[4];
	uint8_t pad[44];
};
static_assert(sizeof(struct sring_hdr) == RING_HDR_SIZE, "sring header");
static_assert(offsetof(struct blkif_sring, ring) == RING_HDR_SIZE,
	      "blkif.h sring header");

/* ---- x86_64 layout (also arm-abi and native on x86_64) ----------------- */

struct x64_req_rw {
	uint8_t operation;
	uint8_t nr_segments;
	uint16_t handle;
	uint32_t pad;
	uint64_t id;
	uint64_t sector_number;
	struct blkif_request_segment seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
} __attribute__((packed));

struct x64_req_discard {
	uint8_t operation;
	uint8_t flag;
	uint16_t handle;
	uint32_t pad;
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;
} __attribute__((packed));

struct x64_req_indirect {
	uint8_t operation;
	uint8_t indirect_op;
	uint16_t nr_segments;
	uint32_t pad1;
	uint64_t id;
	uint64_t sector_number;
	uint16_t handle;
	uint16_t pad2;
	grant_ref_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint32_t pad3;
} __attribute__((packed));

#define X64_REQ_SIZE 112u          /* also the x86_64 entry stride */
#define X64_RSP_SIZE 16u

static_assert(sizeof(struct blkif_request_segment) == 8, "segment");
static_assert(sizeof(struct x64_req_rw) == X64_REQ_SIZE, "x64 rw");
static_assert(sizeof(struct x64_req_discard) == 32, "x64 discard");
static_assert(sizeof(struct x64_req_indirect) == 64, "x64 indirect");
static_assert(offsetof(struct x64_req_rw, id) == 8, "x64 rw id");
static_assert(offsetof(struct x64_req_rw, sector_number) == 16, "x64 rw sector");
static_assert(offsetof(struct x64_req_rw, seg) == 24, "x64 rw seg");
static_assert(offsetof(struct x64_req_discard, nr_sectors) == 24, "x64 nr_sectors");
static_assert(offsetof(struct x64_req_indirect, handle) == 24, "x64 ind handle");
static_assert(offsetof(struct x64_req_indirect, indirect_grefs) == 28, "x64 grefs");
#if defined(__x86_64__) || defined(__aarch64__)
/* Cross-check against the installed native blkif.h. */
static_assert(sizeof(struct blkif_request) == X64_REQ_SIZE, "native req");
static_assert(sizeof(struct blkif_response) == X64_RSP_SIZE, "native rsp");
static_assert(offsetof(struct blkif_request, id) == offsetof(struct x64_req_rw, id), "id");
static_assert(offsetof(struct blkif_request, seg) == offsetof(struct x64_req_rw, seg), "seg");
static_assert(sizeof(struct blkif_request_indirect) == 64, "native indirect");
static_assert(offsetof(struct blkif_request_indirect, indirect_grefs) ==
	      offsetof(struct x64_req_indirect, indirect_grefs), "grefs");
static_assert(offsetof(struct blkif_request_discard, nr_sectors) ==
	      offsetof(struct x64_req_discard, nr_sectors), "nr_sectors");
static_assert(offsetof(struct blkif_response, status) == 10, "rsp status");
static_assert(sizeof(union blkif_sring_entry) == X64_REQ_SIZE, "entry stride");
#endif

/* ---- x86_32 layout: uint64_t aligned to 4, so no pad before id --------- */

struct x32_req_rw {
	uint8_t operation;
	uint8_t nr_segments;
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number;
	struct blkif_request_segment seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
} __attribute__((packed));

struct x32_req_discard {
	uint8_t operation;
	uint8_t flag;
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number;
	uint64_t nr_sectors;
} __attribute__((packed));

struct x32_req_indirect {
	uint8_t operation;
	uint8_t indirect_op;
	uint16_t nr_segments;
	uint64_t id;
	uint64_t sector_number;
	uint16_t handle;
	uint16_t pad1;
	grant_ref_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint64_t pad2;          /* the i386 header pads it to 64 bytes */
} __attribute__((packed));

#define X32_REQ_SIZE 108u          /* also the x86_32 entry stride */
#define X32_RSP_SIZE 12u

static_assert(sizeof(struct x32_req_rw) == X32_REQ_SIZE, "x32 rw");
static_assert(sizeof(struct x32_req_discard) == 28, "x32 discard");
static_assert(sizeof(struct x32_req_indirect) == 64, "x32 indirect");
static_assert(offsetof(struct x32_req_rw, id) == 4, "x32 rw id");
static_assert(offsetof(struct x32_req_rw, sector_number) == 12, "x32 rw sector");
static_assert(offsetof(struct x32_req_rw, seg) == 20, "x32 rw seg");
static_assert(offsetof(struct x32_req_discard, nr_sectors) == 20, "x32 nr_sectors");
static_assert(offsetof(struct x32_req_indirect, handle) == 20, "x32 ind handle");
static_assert(offsetof(struct x32_req_indirect, indirect_grefs) == 24, "x32 grefs");
/* Everything after the first word sits 4 bytes lower than in x86_64: this
 * is what lets ring_fetch_req() widen an x86_32 slot into the x86_64 one. */
#define X32_SHIFTED(t32, t64, f) \
	static_assert(offsetof(struct t32, f) + 4 == offsetof(struct t64, f), #f)
X32_SHIFTED(x32_req_rw, x64_req_rw, id);
X32_SHIFTED(x32_req_rw, x64_req_rw, sector_number);
X32_SHIFTED(x32_req_rw, x64_req_rw, seg);
X32_SHIFTED(x32_req_discard, x64_req_discard, id);
X32_SHIFTED(x32_req_discard, x64_req_discard, sector_number);
X32_SHIFTED(x32_req_discard, x64_req_discard, nr_sectors);
X32_SHIFTED(x32_req_indirect, x64_req_indirect, id);
X32_SHIFTED(x32_req_indirect, x64_req_indirect, sector_number);
X32_SHIFTED(x32_req_indirect, x64_req_indirect, handle);
X32_SHIFTED(x32_req_indirect, x64_req_indirect, indirect_grefs);

/* Response, both ABIs: id@0 (u64), operation@8, pad@9, status@10 (s16);
 * x86_64 pads to 16 bytes (12..15), x86_32 ends at 12. */
#define RSP_OFF_ID 0
#define RSP_OFF_OP 8
#define RSP_OFF_PAD 9
#define RSP_OFF_STATUS 10
#define RSP_OFF_TAIL 12

/* A slot copied into private memory, then viewed through a layout. */
union slot_copy {
	uint32_t w[X64_REQ_SIZE / 4];
	struct x64_req_rw x64_rw;
	struct x64_req_discard x64_discard;
	struct x64_req_indirect x64_ind;
};
static_assert(sizeof(union slot_copy) == X64_REQ_SIZE, "slot copy");
static_assert(X32_REQ_SIZE % 4 == 0, "x32 slot in words");

static size_t req_size(enum ring_abi abi)
{
	return abi == RING_ABI_X86_32 ? X32_REQ_SIZE : X64_REQ_SIZE;
}


/* ---- ABI and geometry --------------------------------------------------- */

int ring_abi_parse(const char *protocol, enum ring_abi *out)
{
	if (!protocol || !strcmp(protocol, XEN_IO_PROTO_ABI_X86_64) ||
	    !strcmp(protocol, XEN_IO_PROTO_ABI_ARM)) {
		*out = RING_ABI_X86_64;
		return 0;
	}
	if (!strcmp(protocol, XEN_IO_PROTO_ABI_X86_32)) {
		*out = RING_ABI_X86_32;
		return 0;
	}
	return -EINVAL;
}

const char *ring_abi_name(enum ring_abi abi)
{
	return abi == RING_ABI_X86_32 ? XEN_IO_PROTO_ABI_X86_32
				      : XEN_IO_PROTO_ABI_X86_64;
}

unsigned int ring_nr_ents(enum ring_abi abi, unsigned int order)
{
	if (order > RING_MAX_ORDER)
		return 0;
	size_t fit = ((size_t)RING_PAGE_SIZE << order) - RING_HDR_SIZE;
	unsigned int n = (unsigned int)(fit / req_size(abi));
	/* round down to a power of two, as __RD32 does */
	while (n & (n - 1))
		n &= n - 1;
	return n;
}

/* ---- Shared-memory access ------------------------------------------------ */

static struct sring_hdr *hdr(const struct be_ring *r)
{
	return r->sring;
}

/* Copy words 32-bit words from shared memory, each read exactly once. */
static void copy_once(uint32_t *dst, const void *src, size_t words)
{
	const volatile uint32_t *s = src;

	/* Unrolled: a 112-byte slot costs 56 instructions, not 168. */
#pragma GCC unroll 4
	for (size_t i = 0; i < words; i++)
		dst[i] = s[i];
}

/* Ring entry idx.  An entry is the union of a request and a response
 * (ring.h's __name##_sring_entry), so requests and responses share the
 * stride of the larger, the request: 112 bytes (x86_64), 108 (x86_32).
 * A response sits at the start of its entry. */
static uint8_t *entry(const struct be_ring *r, RING_IDX idx)
{
	return (uint8_t *)r->sring + RING_HDR_SIZE +
	       (size_t)(idx & (r->nr_ents - 1)) * req_size(r->abi);
}

int ring_attach(struct be_ring *r, void *sring, unsigned int order,
		enum ring_abi abi)
{
	unsigned int n = ring_nr_ents(abi, order);

	if (!sring || !n)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->sring = sring;
	r->abi = abi;
	r->order = order;
	r->nr_ents = n;
	/* Start where the frontend's responses end (0 on a fresh ring).
	 * req_prod is checked against this on every ring_pending(). */
	r->rsp_pushed = __atomic_load_n(&hdr(r)->rsp_prod, __ATOMIC_RELAXED);
	r->rsp_prod_pvt = r->rsp_pushed;
	r->req_cons = r->rsp_pushed;
	return 0;
}

int ring_adopt(struct be_ring *r, RING_IDX req_cons)
{
	if ((RING_IDX)(req_cons - r->rsp_prod_pvt) > r->nr_ents)
		return -EINVAL;
	r->req_cons = req_cons;
	return 0;
}

int ring_pending(struct be_ring *r)
{
	RING_IDX prod, avail, outstanding;

	if (r->broken)
		return -EIO;
	prod = __atomic_load_n(&hdr(r)->req_prod, __ATOMIC_RELAXED);
	/* rmb: read the slots only after req_prod. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);

	/* Slots the frontend claims to have filled but we have not answered.
	 * More than the ring holds (RING_REQUEST_PROD_OVERFLOW), or fewer
	 * than we already fetched (req_prod moved backwards), is a frontend
	 * bug or an attack: stop using this ring. */
	avail = prod - r->rsp_prod_pvt;
	outstanding = r->req_cons - r->rsp_prod_pvt;
	if (avail > r->nr_ents || avail < outstanding) {
		r->broken = true;
		r->bad_prod = prod;
		return -EIO;
	}
	return (int)(avail - outstanding);
}

int ring_final_check(struct be_ring *r)
{
	int n = ring_pending(r);

	if (n != 0)
		return n;
	__atomic_store_n(&hdr(r)->req_event, r->req_cons + 1, __ATOMIC_RELAXED);
	/* mb: req_event must be visible before we look at req_prod again,
	 * or a request produced in between would send no event. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return ring_pending(r);
}

/* ---- Requests ------------------------------------------------------------ */

static unsigned int indirect_pages(unsigned int nsegs)
{
	unsigned int p = (nsegs + RING_SEGS_PER_INDIRECT_PAGE - 1) /
			 RING_SEGS_PER_INDIRECT_PAGE;

	return p < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST ?
	       p : BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST;
}

/* Decode a slot in the x86_64 layout (x86_32 slots are widened to it). */
static void decode(const union slot_copy *c, struct ring_req *out)
{
	out->operation = c->x64_rw.operation;
	switch (out->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
	case BLKIF_OP_WRITE_BARRIER:
	case BLKIF_OP_FLUSH_DISKCACHE:
		out->nr_segments = c->x64_rw.nr_segments;
		out->handle = c->x64_rw.handle;
		out->id = c->x64_rw.id;
		out->sector_number = c->x64_rw.sector_number;
		out->nr_copied = out->nr_segments < BLKIF_MAX_SEGMENTS_PER_REQUEST ?
				 out->nr_segments : BLKIF_MAX_SEGMENTS_PER_REQUEST;
		memcpy(out->u.seg, c->x64_rw.seg, out->nr_copied * sizeof(out->u.seg[0]));
		break;
	case BLKIF_OP_DISCARD:
		out->discard_flag = c->x64_discard.flag;
		out->handle = c->x64_discard.handle;
		out->id = c->x64_discard.id;
		out->sector_number = c->x64_discard.sector_number;
		out->nr_sectors = c->x64_discard.nr_sectors;
		break;
	case BLKIF_OP_INDIRECT:
		out->indirect_op = c->x64_ind.indirect_op;
		out->nr_segments = c->x64_ind.nr_segments;
		out->handle = c->x64_ind.handle;
		out->id = c->x64_ind.id;
		out->sector_number = c->x64_ind.sector_number;
		out->nr_copied = indirect_pages(out->nr_segments);
		memcpy(out->u.indirect_grefs, c->x64_ind.indirect_grefs,
		       out->nr_copied * sizeof(grant_ref_t));
		break;
	default:
		out->id = c->x64_rw.id;
		break;
	}
}

void ring_fetch_req(const struct be_ring *r, RING_IDX idx, struct ring_req *out)
{
	union slot_copy c;
	const uint8_t *slot = entry(r, idx);

	/* The one read of the shared slot.  An x86_32 slot lands at the
	 * x86_64 offsets: its first word (op, nr_segments/flag/indirect_op,
	 * handle or nr_segments) stays, the rest moves up by the pad word. */
	if (r->abi == RING_ABI_X86_32) {
		copy_once(&c.w[0], slot, 1);
		c.w[1] = 0;
		copy_once(&c.w[2], slot + 4, X32_REQ_SIZE / 4 - 1);
	} else {
		copy_once(c.w, slot, X64_REQ_SIZE / 4);
	}
	memset(out, 0, sizeof(*out));
	decode(&c, out);
}

void ring_fetch_indirect_segs(void *const *pages, unsigned int n,
			      struct blkif_request_segment *out)
{
	for (unsigned int p = 0; n; p++) {
		unsigned int k = n < RING_SEGS_PER_INDIRECT_PAGE ?
				 n : RING_SEGS_PER_INDIRECT_PAGE;

		static_assert(sizeof(*out) == 8, "two words per segment");
		copy_once((uint32_t *)(void *)(out + (size_t)p * RING_SEGS_PER_INDIRECT_PAGE),
			  pages[p], (size_t)k * 2);
		n -= k;
	}
}

/* ---- Responses ----------------------------------------------------------- */

void ring_put_rsp(struct be_ring *r, uint64_t id, uint8_t op, int16_t status)
{
	uint8_t *slot = entry(r, r->rsp_prod_pvt);
	volatile uint32_t *id_words = (volatile uint32_t *)(void *)(slot + RSP_OFF_ID);

	/* x86_32 slots are only 4-byte aligned: store id as two words. */
	id_words[0] = (uint32_t)id;
	id_words[1] = (uint32_t)(id >> 32);
	*(volatile uint8_t *)(slot + RSP_OFF_OP) = op;
	*(volatile uint8_t *)(slot + RSP_OFF_PAD) = 0;
	*(volatile int16_t *)(void *)(slot + RSP_OFF_STATUS) = status;
	if (r->abi == RING_ABI_X86_64)
		*(volatile uint32_t *)(void *)(slot + RSP_OFF_TAIL) = 0;
	r->rsp_prod_pvt++;
}

void ring_publish_rsps(struct be_ring *r)
{
	/* wmb: the frontend sees the responses before the new rsp_prod. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&hdr(r)->rsp_prod, r->rsp_prod_pvt, __ATOMIC_RELAXED);
}

bool ring_push_rsps(struct be_ring *r)
{
	RING_IDX old = r->rsp_pushed, new = r->rsp_prod_pvt, event;

	ring_publish_rsps(r);
	r->rsp_pushed = new;
	/* mb: rsp_prod is visible before we read rsp_event, so a frontend
	 * that sets rsp_event after checking rsp_prod cannot be missed. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	event = __atomic_load_n(&hdr(r)->rsp_event, __ATOMIC_RELAXED);
	return (RING_IDX)(new - event) < (RING_IDX)(new - old);
}
