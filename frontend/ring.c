/* SPDX-License-Identifier: MIT */
/*
 * Frontend ring: request slot writing, push with notify decision, and the
 * single response fetch with validation.  See ring.h for the rules.
 *
 * Shared-memory access discipline:
 *   - the header indexes are read and written with __atomic relaxed
 *     accesses (never torn, never re-read by the compiler) and ordered with
 *     the explicit fences below, which are the xen_wmb/xen_rmb/xen_mb of
 *     ring.h;
 *   - a request is built in private memory in the x86_64 layout (every
 *     padding byte zero), narrowed for x86_32, and copied into its entry:
 *     the whole entry is written, nothing stale reaches the backend;
 *   - a response slot is read exactly once, by copy_rsp() with
 *     xbd_blkif_copy_once (the backend's single-read helper, lib/blkif.h),
 *     into a local buffer; everything after that works on the copy.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ring.h"

/* Producer: slot contents before the index that publishes them. */
static inline void fe_wmb(void)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Consumer: the index before the slot contents it covers. */
static inline void fe_rmb(void)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
}

/* Full barrier: our index store before the peer's event index load. */
static inline void fe_mb(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline uint32_t shared_load(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void shared_store(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static inline struct xbd_blkif_sring_hdr *hdr(const struct fe_ring *r)
{
	return r->sring;
}

static inline unsigned char *slot(const struct fe_ring *r, uint32_t idx)
{
	return (unsigned char *)r->sring +
	       xbd_blkif_entry_offset(fe_wire_abi(r->abi), r->size, idx);
}

int fe_ring_init(struct fe_ring *r, void *sring, unsigned int order, enum fe_abi abi)
{
	size_t bytes = (size_t)FE_RING_PAGE_SIZE << order;

	memset(r, 0, sizeof(*r));
	if (order > FE_RING_MAX_ORDER || !sring ||
	    (abi != FE_ABI_X86_64 && abi != FE_ABI_X86_32))
		return -EINVAL;
	r->sring = sring;
	r->abi = abi;
	r->order = order;
	r->size = xbd_blkif_ring_entries(fe_wire_abi(abi), order);
	r->stride = xbd_blkif_entry_size(fe_wire_abi(abi));
	/* Fresh ring, as SHARED_RING_INIT: indexes 0, events at the first. */
	memset(sring, 0, bytes);
	hdr(r)->req_event = 1;
	hdr(r)->rsp_event = 1;
	return 0;
}

void fe_ring_destroy(struct fe_ring *r)
{
	r->sring = NULL;
}

unsigned int fe_ring_in_flight(const struct fe_ring *r)
{
	return r->req_prod_pvt - r->rsp_cons;
}

unsigned int fe_ring_free_slots(const struct fe_ring *r)
{
	if (r->broken || !r->sring)
		return 0;
	return r->size - fe_ring_in_flight(r);
}

void fe_ring_break(struct fe_ring *r, const char *fmt, ...)
{
	va_list ap;

	if (r->broken)
		return;
	r->broken = true;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

/* ---- request writing ---------------------------------------------------- */

static bool segs_ok(const struct fe_req *req)
{
	unsigned int i;

	for (i = 0; i < req->nr_segments; i++)
		if (req->seg[i].first_sect > req->seg[i].last_sect ||
		    req->seg[i].last_sect >= FE_RING_PAGE_SIZE / 512)
			return false;
	return true;
}

static bool req_ok(const struct fe_req *req)
{
	switch (req->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
		return req->nr_segments >= 1 &&
		       req->nr_segments <= BLKIF_MAX_SEGMENTS_PER_REQUEST && segs_ok(req);
	case BLKIF_OP_FLUSH_DISKCACHE:
	case BLKIF_OP_WRITE_BARRIER:
		return req->nr_segments <= BLKIF_MAX_SEGMENTS_PER_REQUEST && segs_ok(req);
	case BLKIF_OP_DISCARD:
		return req->nr_segments == 0;
	case BLKIF_OP_INDIRECT:
		return (req->indirect_op == BLKIF_OP_READ ||
			req->indirect_op == BLKIF_OP_WRITE) &&
		       req->nr_segments >= 1 && req->nr_segments <= FE_MAX_INDIRECT_SEGS;
	default:
		return false;
	}
}

/* A request in the x86_64 layout, in private memory. */
union req_image {
	struct xbd_blkif_x64_req_rw rw;
	struct xbd_blkif_x64_req_discard discard;
	struct xbd_blkif_x64_req_indirect ind;
	unsigned char bytes[XBD_BLKIF_X64_ENTRY_SIZE];
};

static void encode(union req_image *img, const struct fe_req *req)
{
	unsigned int i, pages;

	memset(img, 0, sizeof(*img));
	/* The head every layout shares (asserted in lib/blkif.h). */
	img->rw.operation = req->operation;
	img->rw.id = req->id;
	img->rw.sector_number = req->sector_number;
	switch (req->operation) {
	case BLKIF_OP_DISCARD:
		img->discard.flag = req->discard_flag;
		img->discard.handle = req->handle;
		img->discard.nr_sectors = req->nr_sectors;
		break;
	case BLKIF_OP_INDIRECT:
		img->ind.indirect_op = req->indirect_op;
		img->ind.nr_segments = req->nr_segments;
		img->ind.handle = req->handle;
		pages = xbd_blkif_indirect_pages(req->nr_segments);  /* <= 8: req_ok() */
		for (i = 0; i < pages; i++)
			img->ind.indirect_grefs[i] = req->indirect_grefs[i];
		break;
	default:
		img->rw.nr_segments = (uint8_t)req->nr_segments;
		img->rw.handle = req->handle;
		for (i = 0; i < req->nr_segments; i++) {
			img->rw.seg[i].gref = req->seg[i].gref;
			img->rw.seg[i].first_sect = req->seg[i].first_sect;
			img->rw.seg[i].last_sect = req->seg[i].last_sect;
		}
		break;
	}
}

/* Write the whole entry: x86_64 as built, x86_32 without the pad word at
 * offset 4 (every later field sits 4 bytes lower, see lib/blkif.h). */
static void write_req(const struct fe_ring *r, const struct fe_req *req)
{
	union req_image img;
	unsigned char *s = slot(r, r->req_prod_pvt);

	encode(&img, req);
	if (r->abi == FE_ABI_X86_32) {
		memcpy(s, img.bytes, XBD_BLKIF_X64_PAD_OFFSET);
		memcpy(s + XBD_BLKIF_X64_PAD_OFFSET,
		       img.bytes + XBD_BLKIF_X64_PAD_OFFSET + XBD_BLKIF_X64_PAD_SIZE,
		       XBD_BLKIF_X32_ENTRY_SIZE - XBD_BLKIF_X64_PAD_OFFSET);
	} else {
		memcpy(s, img.bytes, XBD_BLKIF_X64_ENTRY_SIZE);
	}
}

int fe_ring_put_req(struct fe_ring *r, const struct fe_req *req)
{
	if (r->broken)
		return -EIO;
	if (!req_ok(req) || req->id >= r->size)
		return -EINVAL;
	if (fe_ring_free_slots(r) == 0)
		return -EBUSY;
	write_req(r, req);
	r->req_prod_pvt++;
	return 0;
}

bool fe_ring_push(struct fe_ring *r)
{
	uint32_t old = r->req_pushed, new = r->req_prod_pvt, event;

	if (old == new)
		return false;
	fe_wmb();       /* backend sees the requests before the new index */
	shared_store(&hdr(r)->req_prod, new);
	fe_mb();        /* the new index before we look at req_event */
	event = shared_load(&hdr(r)->req_event);
	r->req_pushed = new;
	/* notify iff req_event lies in (old, new] */
	return xbd_blkif_need_notify(old, new, event);
}

/* ---- response fetch ------------------------------------------------------ */

/* The one read of a response slot: copy it word by word, each word
 * loaded once, then decode only the copy.  Both layouts put id@0,
 * operation@8 and status@10; x86_64 pads to 16 bytes, x86_32 ends at 12. */
static void copy_rsp(const struct fe_ring *r, uint32_t idx, struct fe_rsp *out)
{
	union {
		uint32_t w[sizeof(struct xbd_blkif_x64_rsp) / 4];
		struct xbd_blkif_x64_rsp x64;
		struct xbd_blkif_x32_rsp x32;
	} c;
	size_t len = r->abi == FE_ABI_X86_32 ? sizeof(c.x32) : sizeof(c.x64);

	static_assert(sizeof(c.x32) % 4 == 0 && sizeof(c) == sizeof(c.x64), "rsp in words");
	xbd_blkif_copy_once(c.w, slot(r, idx), len / 4);
	if (r->abi == FE_ABI_X86_32) {
		out->id = c.x32.id;
		out->operation = c.x32.operation;
		out->status = c.x32.status;
	} else {
		out->id = c.x64.id;
		out->operation = c.x64.operation;
		out->status = c.x64.status;
	}
}

int fe_ring_fetch_rsp(struct fe_ring *r, struct fe_rsp *out)
{
	uint32_t prod, issued = r->req_pushed - r->rsp_cons;

	if (r->broken)
		return -EIO;
	prod = shared_load(&hdr(r)->rsp_prod);
	fe_rmb();       /* rsp_prod before the responses it covers */
	if (!xbd_blkif_idx_between(r->rsp_cons, prod, r->req_pushed)) {
		fe_ring_break(r, "rsp_prod %u runs past the %u requests issued (rsp_cons %u)",
			   prod, issued, r->rsp_cons);
		return -EIO;
	}
	if (prod == r->rsp_cons)
		return 0;
	copy_rsp(r, r->rsp_cons, out);
	r->rsp_cons++;
	return 1;
}

bool fe_ring_final_check(struct fe_ring *r)
{
	if (r->broken)
		return false;
	if (shared_load(&hdr(r)->rsp_prod) != r->rsp_cons)
		return true;
	shared_store(&hdr(r)->rsp_event, r->rsp_cons + 1);
	fe_mb();        /* rsp_event before the second look at rsp_prod */
	return shared_load(&hdr(r)->rsp_prod) != r->rsp_cons;
}

void fe_ring_disarm(struct fe_ring *r)
{
	if (r->sring && !r->broken)
		shared_store(&hdr(r)->rsp_event, r->rsp_cons + 0x80000000u);
}

bool fe_ring_rsp_waiting(const struct fe_ring *r)
{
	return r->sring && !r->broken && shared_load(&hdr(r)->rsp_prod) != r->rsp_cons;
}
