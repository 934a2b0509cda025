/* SPDX-License-Identifier: MIT */
/*
 * backend/ring.c: the only code that touches a shared blkif ring.
 *
 * The wire layouts of both ABIs and the index arithmetic are lib/blkif.h's
 * (shared with the frontend); this file applies them to the backend's side
 * of the ring.  We do not use the ring.h macros to read
 * requests: RING_GET_REQUEST hands out a pointer into the shared page,
 * which invites reading a field twice.  Instead a slot is copied once, a
 * 32-bit volatile load per word (lib/blkif.h xbd_blkif_copy_once, which
 * the frontend uses for responses), into private memory, and decoded
 * from there.
 *
 * Barriers are spelled out with __atomic fences next to the index they
 * order (the xen_rmb/xen_wmb/xen_mb of ring.h).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "backend/ring.h"

/* The wire layouts are lib/blkif.h's.  A request slot is decoded in the
 * x86_64 layout; an x86_32 slot is widened into it on the copy (every
 * field after the first word sits 4 bytes lower, blkif.h asserts it). */
#define X64_REQ_SIZE XBD_BLKIF_X64_ENTRY_SIZE
#define X32_REQ_SIZE XBD_BLKIF_X32_ENTRY_SIZE

/* Response, both ABIs: id@0 (u64), operation@8, pad@9, status@10 (s16);
 * x86_64 pads to 16 bytes (12..15), x86_32 ends at 12. */
#define RSP_OFF_ID offsetof(struct xbd_blkif_x64_rsp, id)
#define RSP_OFF_OP offsetof(struct xbd_blkif_x64_rsp, operation)
#define RSP_OFF_PAD offsetof(struct xbd_blkif_x64_rsp, pad0)
#define RSP_OFF_STATUS offsetof(struct xbd_blkif_x64_rsp, status)
#define RSP_OFF_TAIL offsetof(struct xbd_blkif_x64_rsp, pad1)

/* A slot copied into private memory, then viewed through a layout. */
union slot_copy {
	uint32_t w[X64_REQ_SIZE / 4];
	struct xbd_blkif_x64_req_rw x64_rw;
	struct xbd_blkif_x64_req_discard x64_discard;
	struct xbd_blkif_x64_req_indirect x64_ind;
};
static_assert(sizeof(union slot_copy) == X64_REQ_SIZE, "slot copy");
static_assert(X32_REQ_SIZE % 4 == 0, "x32 slot in words");
static_assert(XBD_BLKIF_X64_PAD_OFFSET == 4 && XBD_BLKIF_X64_PAD_SIZE == 4,
	      "x32 widening: w[1] is the x64 pad word");

/* ---- ABI and geometry --------------------------------------------------- */

int ring_abi_parse(const char *protocol, enum ring_abi *out)
{
	enum xbd_blkif_abi abi;
	int rc = xbd_blkif_abi_parse(protocol, &abi);

	if (!rc)
		*out = (enum ring_abi)abi;
	return rc;
}

const char *ring_abi_name(enum ring_abi abi)
{
	return xbd_blkif_abi_protocol(ring_wire_abi(abi));
}

unsigned int ring_nr_ents(enum ring_abi abi, unsigned int order)
{
	return xbd_blkif_ring_entries(ring_wire_abi(abi), order);
}

/* ---- Shared-memory access ------------------------------------------------ */

static struct xbd_blkif_sring_hdr *hdr(const struct be_ring *r)
{
	return r->sring;
}

/* Ring entry idx; a response sits at the start of its entry, requests
 * and responses share the request's stride (see blkif.h). */
static uint8_t *entry(const struct be_ring *r, RING_IDX idx)
{
	return (uint8_t *)r->sring +
	       xbd_blkif_entry_offset(ring_wire_abi(r->abi), r->nr_ents, idx);
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
	if (!xbd_blkif_idx_between(r->rsp_prod_pvt, req_cons,
				   r->rsp_prod_pvt + r->nr_ents))
		return -EINVAL;
	r->req_cons = req_cons;
	r->unannounced = true;
	return 0;
}

void ring_watch_faults(struct be_ring *r, xbd_domid_t peer)
{
	r->peer = peer;
	r->faults_seen = xbd_fault_count(peer);
	r->watch_faults = true;
}

/* Did the peer truncate a page we had mapped (this one included)?  The
 * fault handler counts during the faulting load, so a check after a load
 * sees the fault of that load. */
bool ring_faulted(struct be_ring *r)
{
	if (!r->faulted && r->watch_faults &&
	    xbd_fault_count(r->peer) != r->faults_seen)
		r->faulted = true;
	return r->faulted;
}

int ring_pending(struct be_ring *r)
{
	RING_IDX prod;

	if (r->broken)
		return -EIO;
	prod = __atomic_load_n(&hdr(r)->req_prod, __ATOMIC_RELAXED);
	/* rmb: read the slots only after req_prod. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (ring_faulted(r))
		return -EFAULT;

	/* Slots the frontend claims to have filled but we have not answered.
	 * More than the ring holds (RING_REQUEST_PROD_OVERFLOW), or fewer
	 * than we already fetched (req_prod moved backwards), is a frontend
	 * bug or an attack: stop using this ring. */
	if (!xbd_blkif_idx_between(r->req_cons, prod, r->rsp_prod_pvt + r->nr_ents)) {
		r->broken = true;
		r->bad_prod = prod;
		return -EIO;
	}
	return (int)(prod - r->req_cons);
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
	unsigned int p = xbd_blkif_indirect_pages(nsegs);

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
		xbd_blkif_copy_once(&c.w[0], slot, 1);
		c.w[1] = 0;
		xbd_blkif_copy_once(&c.w[2], slot + 4, X32_REQ_SIZE / 4 - 1);
	} else {
		xbd_blkif_copy_once(c.w, slot, X64_REQ_SIZE / 4);
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
		xbd_blkif_copy_once((uint32_t *)(void *)(out + (size_t)p * RING_SEGS_PER_INDIRECT_PAGE),
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
	if (r->unannounced) {
		r->unannounced = false;
		return true;
	}
	return xbd_blkif_need_notify(old, new, event);
}
