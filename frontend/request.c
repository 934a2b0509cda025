/* SPDX-License-Identifier: MIT */
/*
 * The block layer of libxbdfront: validation, splitting, segment building,
 * the shadow table and completion accounting.  See request.h.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
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

static int frags_ok(const struct fe_limits *lim, const struct fe_io *io)
{
	uint64_t sum = 0;
	unsigned int i;

	if (!io->frags || !io->nfrags)
		return -EINVAL;
	for (i = 0; i < io->nfrags; i++) {
		const struct fe_frag *f = &io->frags[i];

		if (!f->len || f->offset % lim->sector_size || f->len % lim->sector_size ||
		    (unsigned int)f->offset + f->len > FE_RING_PAGE_SIZE)
			return -EINVAL;
		sum += f->len;
	}
	return sum == io->len ? 0 : -EINVAL;
}

static void io_rewind(struct fe_io *io)
{
	io->next_frag = 0;
	io->next_sector = io->offset / SECTOR;
	io->issued_all = false;
	io->pending = 0;
	io->status = 0;
}

int fe_io_prepare(const struct fe_limits *lim, struct fe_io *io)
{
	int rc;

	io_rewind(io);
	io->requeued = false;
	switch (io->op) {
	case FE_OP_WRITE:
		if (lim->readonly)
			return -EROFS;
		/* fall through */
	case FE_OP_READ:
		rc = range_ok(lim, io->offset, io->len);
		return rc ? rc : frags_ok(lim, io);
	case FE_OP_FLUSH:
	case FE_OP_BARRIER:
		if (io->len || io->nfrags)
			return -EINVAL;
		if (io->op == FE_OP_BARRIER ? !lim->barrier : !(lim->flush || lim->barrier))
			return -EOPNOTSUPP;
		return 0;
	case FE_OP_DISCARD:
	case FE_OP_SECURE_DISCARD:
		if (lim->readonly)
			return -EROFS;
		if (!lim->discard || (io->op == FE_OP_SECURE_DISCARD && !lim->discard_secure))
			return -EOPNOTSUPP;
		if (io->nfrags)
			return -EINVAL;
		return range_ok(lim, io->offset, io->len);
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

void fe_build_rw(const struct fe_limits *lim, const struct fe_io *io,
		 unsigned int first, unsigned int count, uint64_t sector,
		 uint64_t id, const struct fe_page *ind, struct fe_req *out)
{
	uint8_t op = io->op == FE_OP_WRITE ? BLKIF_OP_WRITE : BLKIF_OP_READ;
	unsigned int i;

	memset(out, 0, sizeof(*out));
	out->id = id;
	out->handle = lim->handle;
	out->sector_number = sector;
	out->nr_segments = (uint16_t)count;
	if (count <= BLKIF_MAX_SEGMENTS_PER_REQUEST) {
		out->operation = op;
		for (i = 0; i < count; i++)
			frag_to_seg(&io->frags[first + i], &out->seg[i]);
		return;
	}
	out->operation = BLKIF_OP_INDIRECT;
	out->indirect_op = op;
	for (i = 0; i < count; i++) {
		struct xbd_blkif_seg *page = ind[i / FE_SEGS_PER_INDIRECT_PAGE].addr;

		frag_to_seg(&io->frags[first + i], &page[i % FE_SEGS_PER_INDIRECT_PAGE]);
	}
	for (i = 0; i * FE_SEGS_PER_INDIRECT_PAGE < count; i++)
		out->indirect_grefs[i] = ind[i].gref;
}

/* ---- shadow table ------------------------------------------------------- */

int fe_shadow_init(struct fe_shadow_table *t, unsigned int size)
{
	unsigned int i;

	memset(t, 0, sizeof(*t));
	if (!size || size > fe_ring_entries(FE_RING_MAX_ORDER))
		return -EINVAL;
	t->ent = calloc(size, sizeof(*t->ent));
	if (!t->ent)
		return -ENOMEM;
	t->size = size;
	/* LIFO free list: id 0 first */
	for (i = 0; i < size; i++)
		t->ent[i].next_free = i + 1 < size ? i + 1 : FE_ID_NONE;
	t->free_head = 0;
	t->nfree = size;
	return 0;
}

void fe_shadow_destroy(struct fe_shadow_table *t)
{
	assert(!t->ent || t->nfree == t->size);
	free(t->ent);
	t->ent = NULL;
	t->size = t->nfree = 0;
}

static uint32_t id_get(struct fe_shadow_table *t)
{
	uint32_t id = t->free_head;

	t->free_head = t->ent[id].next_free;
	t->ent[id].next_free = FE_ID_NONE;
	t->nfree--;
	return id;
}

static void id_put(struct fe_shadow_table *t, uint32_t id)
{
	t->ent[id].io = NULL;
	t->ent[id].n_ind = 0;
	t->ent[id].next_free = t->free_head;
	t->free_head = id;
	t->nfree++;
}

static void pages_put(const struct fe_page_ops *pages, struct fe_page *pg, unsigned int n)
{
	while (n--)
		pages->put(pages->ctx, &pg[n]);
}

static int pages_get(const struct fe_page_ops *pages, struct fe_page *pg, unsigned int n)
{
	unsigned int i;
	int rc;

	for (i = 0; i < n; i++) {
		rc = pages->get(pages->ctx, &pg[i]);
		if (rc) {
			pages_put(pages, pg, i);
			return rc;
		}
	}
	return 0;
}

/* The request carrying the next piece of io; *nind indirect pages needed. */
static int next_req(const struct fe_limits *lim, struct fe_io *io, struct fe_req *q,
		    unsigned int *count, uint32_t *nsect)
{
	unsigned int i;

	memset(q, 0, sizeof(*q));
	q->handle = lim->handle;
	q->sector_number = io->next_sector;
	*count = 0;
	*nsect = 0;
	switch (io->op) {
	case FE_OP_READ:
	case FE_OP_WRITE:
		*count = io->nfrags - io->next_frag;
		if (*count > fe_max_segs(lim))
			*count = fe_max_segs(lim);
		for (i = 0; i < *count; i++)
			*nsect += io->frags[io->next_frag + i].len / SECTOR;
		return 0;
	case FE_OP_FLUSH:
		if (!lim->flush && !lim->barrier)
			return -EOPNOTSUPP;
		q->operation = lim->flush ? BLKIF_OP_FLUSH_DISKCACHE : BLKIF_OP_WRITE_BARRIER;
		return 0;
	case FE_OP_BARRIER:
		if (!lim->barrier)
			return -EOPNOTSUPP;
		q->operation = BLKIF_OP_WRITE_BARRIER;
		return 0;
	case FE_OP_DISCARD:
	case FE_OP_SECURE_DISCARD:
		if (!lim->discard || (io->op == FE_OP_SECURE_DISCARD && !lim->discard_secure))
			return -EOPNOTSUPP;
		q->operation = BLKIF_OP_DISCARD;
		q->discard_flag = io->op == FE_OP_SECURE_DISCARD ? BLKIF_DISCARD_SECURE : 0;
		q->nr_sectors = io->len / SECTOR;
		return 0;
	}
	return -EINVAL;
}

static void advance(struct fe_io *io, unsigned int count, uint32_t nsect)
{
	io->next_frag += count;
	io->next_sector += nsect;
	if (io->op != FE_OP_READ && io->op != FE_OP_WRITE)
		io->issued_all = true;
	else
		io->issued_all = io->next_frag == io->nfrags;
}

int fe_io_issue_one(struct fe_shadow_table *t, const struct fe_limits *lim,
		    struct fe_ring *r, const struct fe_page_ops *pages, struct fe_io *io)
{
	struct fe_page ind[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	unsigned int count, n_ind = 0;
	struct fe_req q;
	uint32_t nsect, id;
	int rc;

	if (fe_ring_is_broken(r))
		return -EIO;
	io->requeued = false;
	if (io->issued_all || io->status) {
		io->issued_all = true;
		return 0;
	}
	rc = next_req(lim, io, &q, &count, &nsect);
	if (rc) {
		io->status = rc;
		io->issued_all = true;
		return 0;
	}
	if (!fe_ring_free_slots(r) || !t->nfree)
		return -EAGAIN;
	if (count > BLKIF_MAX_SEGMENTS_PER_REQUEST) {
		n_ind = (count + FE_SEGS_PER_INDIRECT_PAGE - 1) / FE_SEGS_PER_INDIRECT_PAGE;
		if (pages_get(pages, ind, n_ind))
			return -EAGAIN;
	}
	id = id_get(t);
	if (count)
		fe_build_rw(lim, io, io->next_frag, count, io->next_sector, id, ind, &q);
	else
		q.id = id;
	rc = fe_ring_put_req(r, &q);
	if (rc) {
		id_put(t, id);
		pages_put(pages, ind, n_ind);
		return rc == -EBUSY ? -EAGAIN : rc;
	}
	t->ent[id].io = io;
	t->ent[id].operation = q.operation == BLKIF_OP_INDIRECT ? q.indirect_op : q.operation;
	t->ent[id].nsect = nsect;
	t->ent[id].n_ind = n_ind;
	memcpy(t->ent[id].ind, ind, n_ind * sizeof(ind[0]));
	io->pending++;
	advance(io, count, nsect);
	return 1;
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

/* The backend refused an optional operation: stop using it (Linux). */
static void drop_feature(struct fe_limits *lim, uint8_t operation)
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

struct fe_io *fe_io_complete(struct fe_shadow_table *t, struct fe_limits *lim,
			     const struct fe_page_ops *pages, const struct fe_rsp *rsp)
{
	struct fe_shadow *s;
	struct fe_io *io;
	int st;

	/* The ring validated id and operation; this is an internal invariant. */
	assert(rsp->id < t->size && t->ent[rsp->id].io);
	if (rsp->id >= t->size || !t->ent[rsp->id].io)
		return NULL;
	s = &t->ent[rsp->id];
	io = s->io;
	st = fe_rsp_status(rsp->status);
	if (st == -EOPNOTSUPP)
		drop_feature(lim, s->operation);
	if (st && !io->status)
		io->status = st;
	pages_put(pages, s->ind, s->n_ind);
	id_put(t, (uint32_t)rsp->id);
	io->pending--;
	return io->pending == 0 && io->issued_all ? io : NULL;
}

unsigned int fe_shadow_recover(struct fe_shadow_table *t, const struct fe_page_ops *pages,
			       void (*requeue)(struct fe_io *io, void *arg), void *arg)
{
	unsigned int id, n = 0;

	for (id = 0; id < t->size; id++) {
		struct fe_shadow *s = &t->ent[id];
		struct fe_io *io = s->io;

		if (!io)
			continue;
		pages_put(pages, s->ind, s->n_ind);
		id_put(t, id);
		if (io->requeued)
			continue;
		io_rewind(io);
		io->requeued = true;
		requeue(io, arg);
		n++;
	}
	return n;
}
