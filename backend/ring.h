/* SPDX-License-Identifier: MIT */
/*
 * The backend's view of one blkif shared ring (one queue).
 *
 * The shared ring is memory the frontend can change at any moment.  This
 * module is the only code in backend/ that reads or writes it:
 *   - ring_pending()/ring_final_check() read the frontend's req_prod once,
 *     check it against what can possibly fit (a frontend that claims more
 *     latches `broken` for good), and set req_event;
 *   - ring_fetch_req() copies one request slot into a private, native
 *     struct ring_req, converting the x86_32 / x86_64 layouts; every byte of
 *     the slot is read exactly once, so nothing checked later can differ
 *     from what is used;
 *   - ring_fetch_indirect_segs() does the same for indirect segment pages;
 *   - ring_put_rsp() writes a response field by field into its slot, padding
 *     zeroed (XSA-216), and ring_push_rsps() publishes them and says whether
 *     the frontend must be notified.
 * Everything after that (validation, I/O) works on the private copies.
 *
 * Threads: a struct be_ring is owned by its queue thread; nothing here
 * locks.  The mapped pages (sring) belong to whoever mapped them (the queue
 * setup code) and must stay mapped while the ring is attached.
 */
#ifndef XBD_BACKEND_RING_H
#define XBD_BACKEND_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/blkif.h"
#include "platform/platform.h"

/* The backend's names for lib/blkif.h's constants (see there). */
#define RING_MAX_ORDER XBD_BLKIF_MAX_RING_ORDER
#define RING_HDR_SIZE XBD_BLKIF_SRING_HDR_SIZE
#define RING_PAGE_SIZE XBD_BLKIF_PAGE_SIZE
#define RING_SEGS_PER_INDIRECT_PAGE XBD_BLKIF_SEGS_PER_INDIRECT_PAGE

/* Request/response layouts: the backend's spelling of enum xbd_blkif_abi,
 * same values (arm-abi and native parse to RING_ABI_X86_64). */
enum ring_abi {
	RING_ABI_X86_64 = XBD_BLKIF_ABI_X86_64,
	RING_ABI_X86_32 = XBD_BLKIF_ABI_X86_32,
};

static inline enum xbd_blkif_abi ring_wire_abi(enum ring_abi abi)
{
	return (enum xbd_blkif_abi)abi;
}

/* The `protocol` key -> layout, as xbd_blkif_abi_parse(): NULL (key
 * absent) is native.  Returns 0 or -EINVAL for any other string. */
int ring_abi_parse(const char *protocol, enum ring_abi *out);
const char *ring_abi_name(enum ring_abi abi);

/* Entries of a ring of 2^order pages in this layout (a power of two), or 0
 * when order > RING_MAX_ORDER. */
unsigned int ring_nr_ents(enum ring_abi abi, unsigned int order);

/*
 * The private, native copy of one request.  Only the fields of the
 * request's operation are filled; the rest are zero.
 */
struct ring_req {
	uint8_t operation;      /* as the frontend wrote it, any value */
	uint8_t indirect_op;    /* BLKIF_OP_INDIRECT only */
	uint8_t discard_flag;   /* BLKIF_OP_DISCARD only */
	uint16_t nr_segments;   /* rw: 0..255; indirect: 0..65535 */
	uint16_t handle;
	uint64_t id;
	uint64_t sector_number; /* 512-byte units */
	uint64_t nr_sectors;    /* BLKIF_OP_DISCARD only */
	/* Entries copied into seg[] (rw) or indirect_grefs[] (indirect):
	 * min(nr_segments, 11) or min(8, pages needed for nr_segments). */
	unsigned int nr_copied;
	union {
		struct blkif_request_segment seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
		grant_ref_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	} u;
};

/* One attached ring.  Owned by its queue thread. */
struct be_ring {
	void *sring;            /* the mapped ring pages (not owned) */
	enum ring_abi abi;
	unsigned int order;
	unsigned int nr_ents;   /* power of two */
	RING_IDX req_cons;      /* next request to fetch; owned by queue thread */
	RING_IDX rsp_prod_pvt;  /* next response slot; owned by queue thread */
	RING_IDX rsp_pushed;    /* rsp_prod at the last notify decision */
	bool unannounced;       /* adopted: rsp_prod may never have been
				 * announced; the next push notifies */
	bool broken;            /* latched by an overrun; never cleared */
	RING_IDX bad_prod;      /* the req_prod that broke the ring */
	bool watch_faults;      /* ring_watch_faults() was called */
	bool faulted;           /* latched: the peer truncated mapped memory */
	xbd_domid_t peer;       /* whose files the faults are counted for */
	uint32_t faults_seen;   /* xbd_fault_count(peer) at ring_watch_faults */
};

/*
 * Stop using the ring (ring_pending() returns -EFAULT, faulted latched)
 * as soon as a fault is counted in peer's files: the local platform
 * replaced a page the peer truncated (lib/platform/platform.h
 * xbd_fault_catch).  Call after ring_attach().
 */
void ring_watch_faults(struct be_ring *r, xbd_domid_t peer);
/* Latch and return faulted (one load when none); ring_pending() checks it
 * after each load of req_prod, the queue after each notify. */
bool ring_faulted(struct be_ring *r);

/*
 * Attach to a mapped ring of 2^order pages.  The backend starts with
 * req_cons = rsp_prod_pvt = the current rsp_prod (0 on a fresh ring),
 * which also allows re-attaching to a live ring after a restart; the
 * frontend's indices are then checked on each ring_pending().
 * Returns 0 or -EINVAL (order out of range, NULL sring).
 */
int ring_attach(struct be_ring *r, void *sring, unsigned int order,
		enum ring_abi abi);

/*
 * Adoption (a restarted backend taking over a live ring, see journal.h):
 * after ring_attach(), resume consuming at req_cons instead of rsp_prod;
 * the req_cons - rsp_prod requests in between are the caller's to answer
 * (it re-runs them from its journal).  0, or -EINVAL when req_cons is more
 * than a ring ahead of rsp_prod.
 * The dead backend may have published responses and died before it
 * notified (issue 20): nothing on an adopted ring counts as announced,
 * so the next ring_push_rsps() says "notify" whatever rsp_event says
 * (the queue notifies at once on adoption, be_io_announce()).
 */
int ring_adopt(struct be_ring *r, RING_IDX req_cons);

/*
 * Requests that can be fetched now: min(req_prod - req_cons, room left for
 * responses), with req_prod read once and a read barrier after it.
 * Returns that count (>= 0) or -EIO when the frontend's req_prod claims
 * more requests than the ring holds (RING_REQUEST_PROD_OVERFLOW): the ring
 * is then broken for good and every later call returns -EIO too.
 */
int ring_pending(struct be_ring *r);

/*
 * RING_FINAL_CHECK_FOR_REQUESTS: when nothing is pending, set req_event to
 * req_cons + 1 (ask for a notification on the next request), full barrier,
 * and look again.  Returns the pending count or -EIO, as ring_pending().
 */
int ring_final_check(struct be_ring *r);

/*
 * Copy the request in slot idx (masked) into *out: each byte of the slot is
 * read exactly once; operation and nr_segments are taken from that single
 * copy, so a frontend changing the slot meanwhile cannot make the copy
 * inconsistent.  For an unknown operation only id is kept (so an error
 * can be answered).  Does not move req_cons.
 */
void ring_fetch_req(const struct be_ring *r, RING_IDX idx, struct ring_req *out);

/*
 * Copy n segments (n <= RING_SEGS_PER_INDIRECT_PAGE * pages) out of
 * mapped indirect pages into out[], each byte read once.  pages[i] is the
 * mapping of indirect page i.  The layout of an indirect segment is the
 * same in every ABI.
 */
void ring_fetch_indirect_segs(void *const *pages, unsigned int n,
			      struct blkif_request_segment *out);

/*
 * Write a response at the start of ring entry rsp_prod_pvt (entries are
 * request-sized: responses share the requests' stride) and advance
 * rsp_prod_pvt.  Each
 * field is stored separately and the padding bytes are stored as zero, so
 * nothing of the backend's memory reaches the frontend.  Not visible to
 * the frontend until ring_push_rsps().
 */
void ring_put_rsp(struct be_ring *r, uint64_t id, uint8_t op, int16_t status);

/*
 * Write barrier, then publish rsp_prod = rsp_prod_pvt, with no notify
 * decision.  The queue loop calls it right after each ring_put_rsp(): a
 * response overwrites the start of its request's entry, and a backend
 * restarted after a crash re-reads every entry from rsp_prod on as a
 * request, so a response must not sit unpublished longer than needed.
 */
void ring_publish_rsps(struct be_ring *r);

/*
 * RING_PUSH_RESPONSES_AND_CHECK_NOTIFY: publish, full barrier, then read
 * rsp_event.  Returns true when the frontend asked to be notified about
 * one of the responses published since the last call, and once after
 * ring_adopt() (see there).
 */
bool ring_push_rsps(struct be_ring *r);

/* Requests fetched but not yet answered (req_cons - rsp_prod_pvt). */
static inline unsigned int ring_outstanding(const struct be_ring *r)
{
	return r->req_cons - r->rsp_prod_pvt;
}

#endif
