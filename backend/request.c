/* SPDX-License-Identifier: MIT */
/*
 * backend/request.c: validation of the private copy of a request.  See
 * request.h for the rules and their statuses.  Nothing here reads shared
 * memory: the input is ring_fetch_req()'s copy, and indirect segments are
 * copied by ring_fetch_indirect_segs() before req_check_segs() sees them.
 */
#include <errno.h>
#include <string.h>

#include "backend/request.h"

#define SECTORS_PER_PAGE (RING_PAGE_SIZE >> 9)

int req_limits_check(const struct req_limits *lim)
{
	uint32_t ss = lim->sector_size;

	if (ss < 512 || ss > RING_PAGE_SIZE || (ss & (ss - 1)))
		return -EINVAL;
	if (lim->max_indirect_segs > REQ_MAX_INDIRECT_SEGS)
		return -EINVAL;
	return 0;
}

static enum vreq_kind kind_of(uint8_t op)
{
	switch (op) {
	case BLKIF_OP_READ:
		return VREQ_READ;
	case BLKIF_OP_WRITE:
		return VREQ_WRITE;
	case BLKIF_OP_FLUSH_DISKCACHE:
		return VREQ_FLUSH;
	case BLKIF_OP_WRITE_BARRIER:
		return VREQ_BARRIER;
	case BLKIF_OP_DISCARD:
		return VREQ_DISCARD;
	default:
		return VREQ_INVALID;
	}
}

/* [sector, sector + n) lies on the disk (n == 0 always does). */
static bool in_range(uint64_t sector, uint64_t n, const struct req_limits *lim)
{
	uint64_t end = sector + n;

	if (!n)
		return true;
	return end > sector && end <= lim->sectors;
}

/* Range, read-only, alignment and support of a request whose sectors are
 * known: the part of the checks shared by rw and discard. */
static int check_extent(const struct vreq *v, const struct req_limits *lim)
{
	uint64_t mask = (lim->sector_size >> 9) - 1;

	if (lim->read_only && v->kind != VREQ_READ)
		return BLKIF_RSP_ERROR;
	if (!in_range(v->sector, v->nr_sectors, lim))
		return BLKIF_RSP_ERROR;
	/* A flush without data has no extent: its sector_number is unused. */
	if (v->nr_sectors && ((v->sector | v->nr_sectors) & mask))
		return BLKIF_RSP_ERROR;
	switch (v->kind) {
	case VREQ_FLUSH:
		return lim->flush ? BLKIF_RSP_OKAY : BLKIF_RSP_EOPNOTSUPP;
	case VREQ_BARRIER:
		return lim->barrier ? BLKIF_RSP_OKAY : BLKIF_RSP_EOPNOTSUPP;
	case VREQ_DISCARD:
		return lim->discard ? BLKIF_RSP_OKAY : BLKIF_RSP_EOPNOTSUPP;
	default:
		return BLKIF_RSP_OKAY;
	}
}

int req_check_segs(struct vreq *v, const struct req_limits *lim)
{
	unsigned int mask = (lim->sector_size >> 9) - 1;

	v->nr_sectors = 0;
	for (unsigned int i = 0; i < v->nr_segs; i++) {
		const struct blkif_request_segment *s = &v->segs[i];
		unsigned int nsec = (unsigned int)s->last_sect - s->first_sect + 1;

		if (s->last_sect >= SECTORS_PER_PAGE || s->last_sect < s->first_sect)
			return BLKIF_RSP_ERROR;
		/* Each segment must start and end on a logical block: the
		 * storage may be opened O_DIRECT with that block size. */
		if ((s->first_sect | nsec) & mask)
			return BLKIF_RSP_ERROR;
		v->nr_sectors += nsec;
	}
	return check_extent(v, lim);
}

static int parse_discard(const struct ring_req *in, const struct req_limits *lim,
			 struct vreq *v)
{
	v->sector = in->sector_number;
	v->nr_sectors = in->nr_sectors;
	/* BLKIF_DISCARD_SECURE is ignored unless we offered discard-secure. */
	v->secure = (in->discard_flag & BLKIF_DISCARD_SECURE) && lim->discard_secure;
	return check_extent(v, lim);
}

/* Segment count rules shared by direct and indirect requests. */
static bool nsegs_ok(const struct vreq *v, const struct req_limits *lim)
{
	if (v->nr_segs == 0)
		return v->kind == VREQ_FLUSH || v->kind == VREQ_BARRIER;
	if (v->indirect)
		return v->nr_segs <= lim->max_indirect_segs;
	return v->nr_segs <= BLKIF_MAX_SEGMENTS_PER_REQUEST;
}

int req_parse(const struct ring_req *in, const struct req_limits *lim,
	      struct vreq *v)
{
	struct blkif_request_segment *segs = v->segs;

	memset(v, 0, sizeof(*v));
	v->segs = segs;
	v->id = in->id;
	v->rsp_op = in->operation;
	v->sector = in->sector_number;
	v->nr_segs = in->nr_segments;

	if (in->operation == BLKIF_OP_INDIRECT) {
		/* The response echoes indirect_op: blkfront checks it. */
		v->indirect = true;
		v->rsp_op = in->indirect_op;
		if (!lim->max_indirect_segs)
			return BLKIF_RSP_EOPNOTSUPP;
		if (in->indirect_op != BLKIF_OP_READ && in->indirect_op != BLKIF_OP_WRITE)
			return BLKIF_RSP_ERROR;
	}
	v->kind = kind_of(v->rsp_op);
	if (v->kind == VREQ_INVALID)
		return BLKIF_RSP_EOPNOTSUPP;
	if (v->kind == VREQ_DISCARD) {
		v->nr_segs = 0;
		return parse_discard(in, lim, v);
	}
	if (!nsegs_ok(v, lim))
		return BLKIF_RSP_ERROR;
	if (v->indirect) {
		/* nr_segs <= max_indirect_segs <= 4096: at most 8 pages. */
		v->nr_indirect_pages = in->nr_copied;
		memcpy(v->indirect_grefs, in->u.indirect_grefs,
		       in->nr_copied * sizeof(grant_ref_t));
		return BLKIF_RSP_OKAY;
	}
	memcpy(v->segs, in->u.seg, v->nr_segs * sizeof(v->segs[0]));
	return req_check_segs(v, lim);
}
