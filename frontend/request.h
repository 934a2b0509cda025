/* SPDX-License-Identifier: MIT */
/*
 * The block layer of libxbdfront: application I/Os to blkif requests.
 *
 * An I/O (struct fe_io) is an operation on a byte range of the disk with,
 * for reads and writes, its data as a list of fragments of granted 4 KiB
 * pages.  Each fragment becomes one segment (first_sect/last_sect in
 * 512-byte units within its page).  An I/O with more fragments than one
 * request may carry is split: up to 11 segments per direct request, or, when
 * indirect descriptors were negotiated, up to the negotiated limit per
 * BLKIF_OP_INDIRECT request, whose segment lists live in indirect pages
 * (512 segments each, at most BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST).
 * Every request starts and ends on a logical-sector boundary because every
 * fragment is a whole number of logical sectors.
 *
 * Each request on the ring has an id; the shadow table maps the id to the
 * I/O it belongs to and the indirect pages it holds, and keeps the free ids
 * (LIFO).  An I/O completes, through its callback, when its last request is
 * answered; its status is that of the first failed request.
 *
 * Units: sector numbers and `sectors` in 512-byte units; `sector_size` is
 * the logical block size (512..4096) and every offset and length must be a
 * multiple of it (the Xen 4.20 rule, as Linux blkfront and blkback).
 *
 * Locking: a shadow table belongs to one queue and is used under that
 * queue's lock, like its ring.  io->done is not called by this module;
 * fe_io_complete() hands the finished I/O back so the caller can run the
 * callback after dropping the lock.
 */
#ifndef XBD_FRONTEND_REQUEST_H
#define XBD_FRONTEND_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/ring.h"

/* A piece of one granted page: offset and len are multiples of the logical
 * sector size and offset + len <= 4096. */
struct fe_frag {
	uint32_t gref;
	uint16_t offset;
	uint16_t len;
};

/* What the backend offers and we chose, snapshot at connect.  The EOPNOTSUPP
 * handling clears flush/barrier/discard at run time, as Linux blkfront. */
struct fe_limits {
	uint16_t handle;              /* the virtual-device number */
	unsigned int sector_size;     /* logical block size, 512..4096, power of two */
	uint64_t sectors;             /* capacity in 512-byte units */
	unsigned int max_indirect_segs; /* 0: direct only; else 12..FE_MAX_INDIRECT_SEGS */
	bool readonly;
	bool flush;                   /* feature-flush-cache */
	bool barrier;                 /* feature-barrier */
	bool discard;                 /* feature-discard */
	bool discard_secure;          /* discard-secure */
};

enum fe_op {
	FE_OP_READ,
	FE_OP_WRITE,
	FE_OP_FLUSH,          /* FLUSH_DISKCACHE, or WRITE_BARRIER on a barrier-only backend */
	FE_OP_BARRIER,        /* WRITE_BARRIER */
	FE_OP_DISCARD,
	FE_OP_SECURE_DISCARD,
};

struct fe_io;
/* Called once per I/O with 0 or -errno (-EIO, -EOPNOTSUPP, -ENODEV...). */
typedef void (*fe_io_done_fn)(struct fe_io *io, int status);

struct fe_io {
	/* set by the submitter */
	enum fe_op op;
	uint64_t offset;              /* bytes */
	uint64_t len;                 /* bytes */
	const struct fe_frag *frags;  /* read/write only; must live until done */
	unsigned int nfrags;
	fe_io_done_fn done;
	void *priv;
	/* private to the request layer (under the queue lock) */
	unsigned int next_frag;       /* first fragment not yet issued */
	uint64_t next_sector;         /* its sector (512-byte units) */
	bool issued_all;
	unsigned int pending;         /* requests on the ring */
	int status;                   /* first error, 0 so far */
	bool requeued;                /* set by fe_shadow_recover, cleared on issue */
	/* for the queue layer's lists (frontend/queue.c), under its lock */
	struct fe_io *next;
	bool waiting;
};

/* A granted page usable as an indirect page. */
struct fe_page {
	void *addr;
	uint32_t gref;
};

/* Where indirect pages come from (the queue's grant pool).  get returns 0
 * or -EAGAIN/-ENOMEM; put takes back a page get handed out. */
struct fe_page_ops {
	int (*get)(void *ctx, struct fe_page *out);
	void (*put)(void *ctx, const struct fe_page *pg);
	void *ctx;
};

#define FE_ID_NONE UINT32_MAX

struct fe_shadow {
	struct fe_io *io;             /* NULL while the id is free */
	uint8_t operation;            /* BLKIF_OP_* as issued (indirect: indirect_op) */
	uint32_t nsect;               /* 512-byte sectors carried */
	unsigned int n_ind;
	struct fe_page ind[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	uint32_t next_free;
};

struct fe_shadow_table {
	unsigned int size;            /* = ring entries: ids are 0..size-1 */
	struct fe_shadow *ent;
	uint32_t free_head;
	unsigned int nfree;
};

/* Limits a backend could give us: 0 or -EINVAL. */
int fe_limits_check(const struct fe_limits *lim);
/* Segments one request may carry under lim (11, or the indirect limit). */
unsigned int fe_max_segs(const struct fe_limits *lim);

/*
 * Validate io against lim before anything is issued: -EINVAL (alignment,
 * bounds, fragments that do not add up), -EROFS (write/discard on a
 * read-only disk), -EOPNOTSUPP (flush/barrier/discard not offered).
 * Resets the private fields.
 */
int fe_io_prepare(const struct fe_limits *lim, struct fe_io *io);

/*
 * Build the blkif request carrying fragments [first, first+count) of io
 * starting at 512-byte sector `sector`, with the given id.  For more than
 * 11 segments the segment list is written into ind[0..] (each page must be
 * zeroed or ours) and the request is BLKIF_OP_INDIRECT.  Pure: exposed for
 * tests and for re-issue.
 */
void fe_build_rw(const struct fe_limits *lim, const struct fe_io *io,
		 unsigned int first, unsigned int count, uint64_t sector,
		 uint64_t id, const struct fe_page *ind, struct fe_req *out);

int fe_shadow_init(struct fe_shadow_table *t, unsigned int size);
/* Frees the table; asserts nothing is in flight (callers recover first). */
void fe_shadow_destroy(struct fe_shadow_table *t);
static inline unsigned int fe_shadow_in_flight(const struct fe_shadow_table *t)
{
	return t->size - t->nfree;
}

/*
 * Put the next request of io on ring r.  Returns 1 when a request was
 * written (not yet pushed), 0 when io has nothing more to issue (it is
 * finished, with io->status, once io->pending is 0; an I/O that already
 * failed, or a flush/discard whose feature went away, stops here), -EAGAIN
 * when the ring, the ids or the indirect pages are exhausted (io keeps its
 * place; try again after completions), -EIO when the ring is broken.
 */
int fe_io_issue_one(struct fe_shadow_table *t, const struct fe_limits *lim,
		    struct fe_ring *r, const struct fe_page_ops *pages, struct fe_io *io);

/* BLKIF_RSP_* to 0 / -errno (unknown values are errors, as Linux). */
int fe_rsp_status(int16_t status);

/*
 * Account a response fe_ring_fetch_rsp() validated.  Frees its id and
 * indirect pages.  On EOPNOTSUPP for flush/barrier/discard the feature is
 * cleared in lim.  Returns the I/O when this was its last request (the
 * caller runs io->done(io, io->status) outside its lock), else NULL.
 */
struct fe_io *fe_io_complete(struct fe_shadow_table *t, struct fe_limits *lim,
			     const struct fe_page_ops *pages, const struct fe_rsp *rsp);

/*
 * Recovery: the ring is gone with requests on it.  Frees every id and
 * indirect page, rewinds every affected I/O to its start (it will be issued
 * whole again, as Linux blkfront requeues whole requests) and hands each
 * such I/O once to requeue.  Returns the number of I/Os requeued.
 */
unsigned int fe_shadow_recover(struct fe_shadow_table *t, const struct fe_page_ops *pages,
			       void (*requeue)(struct fe_io *io, void *arg), void *arg);

#endif
