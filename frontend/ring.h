/* SPDX-License-Identifier: MIT */
/*
 * The frontend side of one blkif shared ring (one queue).
 *
 * The ring occupies 2^order pages (order 0..5) of memory granted to the
 * backend; it holds 32 << order entries in either ABI (112-byte entries for
 * x86_64-abi, 108-byte entries for x86_32-abi).
 *
 * Requests are described ABI-neutrally (struct fe_req) and written into the
 * slot field by field, every padding byte set, so no stale private memory
 * reaches the backend.  fe_ring_push() publishes them with the barriers of
 * RING_PUSH_REQUESTS_AND_CHECK_NOTIFY and says whether to notify.
 *
 * Responses: fe_ring_fetch_rsp() is the only function that reads a response
 * slot.  It checks the index first (rsp_prod may not run past the requests
 * pushed: a runaway producer), then copies the slot out once, a 32-bit
 * volatile load per word (xbd_blkif_copy_once), and hands back the copy.
 * What the copy says (is the id in flight, is the operation the one
 * issued) is for the owner of the request table to judge: the queue's
 * channel (frontend/channel.c), the one place that knows each id's state
 * (XSA-155 and the XSA-376/391 hardening of Linux blkfront).  A bad index
 * latches the ring as broken, and so does fe_ring_break() on the
 * channel's word: every later call fails with -EIO and the reason stays
 * readable through fe_ring_error().  Nothing of a bad response is used.
 *
 * Locking: a struct fe_ring has no lock of its own.  Every call must be
 * made under the owning channel's lock (frontend/channel.c); the backend is the
 * only other party and touches only the shared pages.
 */
#ifndef XBD_FRONTEND_RING_H
#define XBD_FRONTEND_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/blkif.h"

/* The frontend's names for lib/blkif.h's constants (see there). */
#define FE_RING_MAX_ORDER XBD_BLKIF_MAX_RING_ORDER
#define FE_RING_PAGE_SIZE XBD_BLKIF_PAGE_SIZE
#define FE_SEGS_PER_INDIRECT_PAGE XBD_BLKIF_SEGS_PER_INDIRECT_PAGE
#define FE_MAX_INDIRECT_SEGS XBD_BLKIF_MAX_INDIRECT_SEGS

/* The frontend's spelling of enum xbd_blkif_abi, same values. */
enum fe_abi {
	FE_ABI_X86_64 = XBD_BLKIF_ABI_X86_64,
	FE_ABI_X86_32 = XBD_BLKIF_ABI_X86_32,
};

static inline enum xbd_blkif_abi fe_wire_abi(enum fe_abi abi)
{
	return (enum xbd_blkif_abi)abi;
}

/* The `protocol` value the frontend writes for an ABI. */
static inline const char *fe_abi_protocol(enum fe_abi abi)
{
	return xbd_blkif_abi_protocol(fe_wire_abi(abi));
}

/* An ABI-neutral request as the frontend issues it. */
struct fe_req {
	uint8_t operation;        /* BLKIF_OP_* */
	uint8_t indirect_op;      /* BLKIF_OP_READ/WRITE when operation is INDIRECT */
	uint8_t discard_flag;     /* BLKIF_DISCARD_SECURE or 0 */
	uint16_t handle;
	uint16_t nr_segments;     /* direct: 0..11; indirect: 1..FE_MAX_INDIRECT_SEGS */
	uint64_t id;
	uint64_t sector_number;   /* 512-byte units */
	uint64_t nr_sectors;      /* discard only */
	/* direct segments (operation READ, WRITE, FLUSH, BARRIER) */
	struct xbd_blkif_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
	/* indirect pages, ceil(nr_segments / 512) of them */
	uint32_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
};

/* A response after fe_ring_fetch_rsp() copied and checked it. */
struct fe_rsp {
	uint64_t id;
	uint8_t operation;
	int16_t status;           /* BLKIF_RSP_* as sent; callers map unknown values to errors */
};

struct fe_ring {
	void *sring;              /* shared pages: header then entries (not owned) */
	enum fe_abi abi;
	unsigned int order;
	unsigned int size;        /* entries: 32 << order */
	unsigned int stride;      /* bytes per entry: 112 or 108 */
	uint32_t req_prod_pvt;    /* requests written, not all pushed yet */
	uint32_t req_pushed;      /* req_prod as last published */
	uint32_t rsp_cons;        /* responses consumed */
	bool broken;
	char error[128];          /* why the ring broke, "" while healthy */
};

/* Number of entries of a ring of 2^order pages (order <= FE_RING_MAX_ORDER;
 * the same for both ABIs). */
static inline unsigned int fe_ring_entries(unsigned int order)
{
	return xbd_blkif_ring_entries(XBD_BLKIF_ABI_X86_64, order);
}

/*
 * Attach to 2^order pages at sring (page aligned, already shared with the
 * backend) as a fresh ring: the header is reset (indexes 0, events 1).
 * Returns 0, or -EINVAL for a bad order/ABI.
 */
int fe_ring_init(struct fe_ring *r, void *sring, unsigned int order, enum fe_abi abi);
/* Forget the pages; safe on a zeroed or destroyed ring. */
void fe_ring_destroy(struct fe_ring *r);

/* Slots free for fe_ring_put_req (0 when full or broken). */
unsigned int fe_ring_free_slots(const struct fe_ring *r);
/* Requests issued and not yet answered. */
unsigned int fe_ring_in_flight(const struct fe_ring *r);

/*
 * Write req into the next slot (not yet visible to the backend).
 * -EIO if broken, -EBUSY if full, -EINVAL if req is malformed (bad op,
 * segment count, id out of range).  Whether the id is free is the
 * request table's business (frontend/channel.c).
 */
int fe_ring_put_req(struct fe_ring *r, const struct fe_req *req);

/*
 * Publish the written requests.  Returns true when the backend must be
 * notified (it asked for an event at an index now passed).
 */
bool fe_ring_push(struct fe_ring *r);

/*
 * Take the next response: its slot copied once, nothing of it checked but
 * that it lies in the range of requests pushed.  Returns 1 with *out
 * filled, 0 when none is pending, -EIO when the ring is (or just became)
 * broken.
 */
int fe_ring_fetch_rsp(struct fe_ring *r, struct fe_rsp *out);

/* The owner of the request table found a response unacceptable: latch the
 * ring as broken with the reason (the first reason stays). */
void fe_ring_break(struct fe_ring *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * No response pending: ask for an event at the next one (rsp_event), then
 * look again.  Returns true when responses arrived meanwhile (the caller
 * loops instead of sleeping), as RING_FINAL_CHECK_FOR_RESPONSES.
 */
bool fe_ring_final_check(struct fe_ring *r);

/*
 * A polling consumer needs no event: move rsp_event half the index space
 * ahead, so the backend's push sees it outside any range it publishes
 * and does not notify (Linux's poll queues run with interrupts off).
 * fe_ring_final_check() arms it again; call it before sleeping.
 */
void fe_ring_disarm(struct fe_ring *r);

/* Whether the backend published responses we have not consumed: one load
 * of rsp_prod, nothing validated (fe_ring_fetch_rsp does that). */
bool fe_ring_rsp_waiting(const struct fe_ring *r);

static inline bool fe_ring_is_broken(const struct fe_ring *r)
{
	return r->broken;
}

static inline const char *fe_ring_error(const struct fe_ring *r)
{
	return r->error;
}

#endif
