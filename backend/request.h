/* SPDX-License-Identifier: MIT */
/*
 * Validation of a request's private copy (struct ring_req) into a checked
 * request (struct vreq) that the I/O code can use without further checks.
 *
 * The rules and the status of each rejection follow Linux xen-blkback:
 *   unknown operation                         -> BLKIF_RSP_EOPNOTSUPP
 *   INDIRECT when we did not offer it         -> BLKIF_RSP_EOPNOTSUPP
 *   INDIRECT with indirect_op not READ/WRITE  -> BLKIF_RSP_ERROR
 *   nr_segments 0 (except flush, barrier), above 11 (direct) or above the
 *   negotiated feature-max-indirect-segments  -> BLKIF_RSP_ERROR
 *   last_sect > 7 or last_sect < first_sect   -> BLKIF_RSP_ERROR
 *   anything but READ on a read-only disk     -> BLKIF_RSP_ERROR
 *   sector range wrapping or past the end     -> BLKIF_RSP_ERROR
 *   sector_number, a segment's first sector or length not a multiple of
 *   sector-size                               -> BLKIF_RSP_ERROR
 *   flush / barrier / discard the storage cannot do (checked last, where
 *   Linux learns it from the device)          -> BLKIF_RSP_EOPNOTSUPP
 * Sector numbers are 512-byte units whatever sector-size is (Xen 4.20).
 *
 * Pure functions: no shared memory, no I/O, no locks.
 */
#ifndef XBD_BACKEND_REQUEST_H
#define XBD_BACKEND_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/ring.h"

/* The protocol's ceiling for one INDIRECT request (8 pages of 512). */
#define REQ_MAX_INDIRECT_SEGS \
	(BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * RING_SEGS_PER_INDIRECT_PAGE)

/* What the frontend may do with this disk.  Snapshot at connect time. */
struct req_limits {
	uint64_t sectors;          /* disk size in 512-byte units */
	uint32_t sector_size;      /* logical block size: 512..4096, power of 2 */
	bool read_only;
	bool flush;                /* FLUSH_DISKCACHE can be honoured */
	bool barrier;              /* WRITE_BARRIER can be honoured */
	bool discard;              /* the storage can discard */
	bool discard_secure;       /* ... and securely */
	unsigned int max_indirect_segs;  /* 0: INDIRECT not offered */
};

enum vreq_kind {
	VREQ_INVALID,              /* unknown op or bad indirect_op */
	VREQ_READ,
	VREQ_WRITE,
	VREQ_FLUSH,                /* may carry data: flush, then write */
	VREQ_BARRIER,              /* drain, flush, then write any data */
	VREQ_DISCARD,
};

/* A checked request.  segs points to caller memory of
 * req_seg_capacity(lim) entries (a pending-request slot owns it). */
struct vreq {
	uint64_t id;
	uint8_t rsp_op;            /* echoed: indirect_op for INDIRECT (Linux) */
	enum vreq_kind kind;
	bool indirect;
	bool secure;               /* DISCARD with discard-secure honoured */
	uint64_t sector;           /* 512-byte units */
	uint64_t nr_sectors;       /* sum of the segments, or the discard size */
	unsigned int nr_segs;
	/* INDIRECT: pages to map before req_check_segs() */
	unsigned int nr_indirect_pages;
	grant_ref_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	struct blkif_request_segment *segs;
};

/* Checks a limits snapshot (power-of-two sector size 512..4096,
 * max_indirect_segs <= REQ_MAX_INDIRECT_SEGS).  0 or -EINVAL. */
int req_limits_check(const struct req_limits *lim);

static inline unsigned int req_seg_capacity(const struct req_limits *lim)
{
	return lim->max_indirect_segs > BLKIF_MAX_SEGMENTS_PER_REQUEST ?
	       lim->max_indirect_segs : BLKIF_MAX_SEGMENTS_PER_REQUEST;
}

/*
 * Check the header of *in (and, for direct requests, its segments).
 * Always fills v->id, v->rsp_op and v->kind, so the caller can answer.
 * Returns BLKIF_RSP_OKAY or the status to answer with.  OKAY with
 * v->nr_indirect_pages > 0 means: map v->indirect_grefs, copy
 * v->nr_segs segments into v->segs (ring_fetch_indirect_segs), then call
 * req_check_segs().
 */
int req_parse(const struct ring_req *in, const struct req_limits *lim,
	      struct vreq *v);

/* Check v->segs[0..nr_segs) and everything that depends on them (range,
 * read-only, alignment, support).  BLKIF_RSP_OKAY or the status. */
int req_check_segs(struct vreq *v, const struct req_limits *lim);

/* Byte offset and length of a checked segment within its page. */
static inline unsigned int req_seg_offset(const struct blkif_request_segment *s)
{
	return (unsigned int)s->first_sect << 9;
}

static inline unsigned int req_seg_len(const struct blkif_request_segment *s)
{
	return ((unsigned int)s->last_sect - s->first_sect + 1) << 9;
}

#endif
