/* SPDX-License-Identifier: MIT */
/*
 * The block-layer rules of libxbdfront: limits, validation, request
 * building.  See request.h.
 */
#include <errno.h>
#include <string.h>

#include "frontend/request.h"

#define SECTOR 512u

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

int fe_limits_check(const struct fe_limits *lim)
{
	if (!is_pow2(lim->sector_size) || lim->sector_size < SECTOR ||
	    lim->sector_size > FE_RING_PAGE_SIZE)
		return -EINVAL;
	if (lim->max_indirect_segs &&
	    (lim->max_indirect_segs <= BLKIF_MAX_SEGMENTS_PER_REQUEST ||
	     lim->max_indirect_segs > FE_MAX_INDIRECT_SEGS))
		return -EINVAL;
	if (lim->sectors % (lim->sector_size / SECTOR))
		return -EINVAL;
	return 0;
}

unsigned int fe_max_segs(const struct fe_limits *lim)
{
	return lim->max_indirect_segs ? lim->max_indirect_segs
				      : BLKIF_MAX_SEGMENTS_PER_REQUEST;
}

/* [offset, offset+len) aligned to the sector size and inside the disk. */
static int range_ok(const struct fe_limits *lim, uint64_t offset, uint64_t len)
{
	uint64_t cap = lim->sectors > UINT64_MAX / SECTOR ? UINT64_MAX
							   : lim->sectors * SECTOR;

	if (!len || offset % lim->sector_size || len % lim->sector_size)
		return -EINVAL;
	if (offset > cap || len > cap - offset)
		return -EINVAL;
	return 0;
}

int fe_op_check(const struct fe_limits *lim, enum xbdfront_op op, uint64_t offset,
		uint64_t len)
{
	switch (op) {
	case XBDFRONT_WRITE:
		if (lim->readonly)
			return -EROFS;
		/* fall through */
	case XBDFRONT_READ:
		return range_ok(lim, offset, len);
	case XBDFRONT_FLUSH:
	case XBDFRONT_BARRIER:
		if (len || offset)
			return -EINVAL;
		if (op == XBDFRONT_BARRIER ? !lim->barrier : !(lim->flush || lim->barrier))
			return -EOPNOTSUPP;
		return 0;
	case XBDFRONT_DISCARD:
	case XBDFRONT_SECURE_DISCARD:
		if (lim->readonly)
			return -EROFS;
		if (!lim->discard || (op == XBDFRONT_SECURE_DISCARD && !lim->discard_secure))
			return -EOPNOTSUPP;
		return range_ok(lim, offset, len);
	}
	return -EINVAL;
}

static void frag_to_seg(const struct fe_frag *f, struct xbd_blkif_seg *s)
{
	s->gref = f->gref;
	s->first_sect = (uint8_t)(f->offset / SECTOR);
	s->last_sect = (uint8_t)((f->offset + f->len) / SECTOR - 1);
	s->pad = 0;
}

static void build_rw(uint8_t op, const struct fe_frag *f, unsigned int count,
		     const struct fe_page *ind, struct fe_req *out)
{
	unsigned int i;

	out->nr_segments = (uint16_t)count;
	if (count <= BLKIF_MAX_SEGMENTS_PER_REQUEST) {
		out->operation = op;
		for (i = 0; i < count; i++)
			frag_to_seg(&f[i], &out->seg[i]);
		return;
	}
	out->operation = BLKIF_OP_INDIRECT;
	out->indirect_op = op;
	for (i = 0; i < count; i++) {
		struct xbd_blkif_seg *page = ind[i / FE_SEGS_PER_INDIRECT_PAGE].addr;

		frag_to_seg(&f[i], &page[i % FE_SEGS_PER_INDIRECT_PAGE]);
	}
	for (i = 0; i * FE_SEGS_PER_INDIRECT_PAGE < count; i++)
		out->indirect_grefs[i] = ind[i].gref;
}

void fe_build_req(const struct fe_limits *lim, enum xbdfront_op op, uint64_t sector,
		  uint64_t nsect, const struct fe_frag *f, unsigned int count, uint64_t id,
		  const struct fe_page *ind, struct fe_req *out)
{
	memset(out, 0, sizeof(*out));
	out->id = id;
	out->handle = lim->handle;
	out->sector_number = sector;
	switch (op) {
	case XBDFRONT_READ:
	case XBDFRONT_WRITE:
		build_rw(op == XBDFRONT_WRITE ? BLKIF_OP_WRITE : BLKIF_OP_READ, f, count, ind, out);
		break;
	case XBDFRONT_FLUSH:
		out->operation = lim->flush ? BLKIF_OP_FLUSH_DISKCACHE : BLKIF_OP_WRITE_BARRIER;
		break;
	case XBDFRONT_BARRIER:
		out->operation = BLKIF_OP_WRITE_BARRIER;
		break;
	case XBDFRONT_DISCARD:
	case XBDFRONT_SECURE_DISCARD:
		out->operation = BLKIF_OP_DISCARD;
		out->discard_flag = op == XBDFRONT_SECURE_DISCARD ? BLKIF_DISCARD_SECURE : 0;
		out->nr_sectors = nsect;
		break;
	}
}

int fe_rsp_status(int16_t status)
{
	switch (status) {
	case BLKIF_RSP_OKAY:
		return 0;
	case BLKIF_RSP_EOPNOTSUPP:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

void fe_limits_drop(struct fe_limits *lim, uint8_t operation)
{
	switch (operation) {
	case BLKIF_OP_FLUSH_DISKCACHE:
		lim->flush = false;
		break;
	case BLKIF_OP_WRITE_BARRIER:
		lim->barrier = false;
		break;
	case BLKIF_OP_DISCARD:
		lim->discard = false;
		lim->discard_secure = false;
		break;
	default:
		break;
	}
}
