/* SPDX-License-Identifier: MIT */
/*
 * The block-layer rules of libxbdfront, as pure functions: the limits a
 * backend may give, what a request may ask under them, and how a run of
 * fragments becomes one blkif request.  No state: the request table,
 * splitting and completion accounting live in the queue's channel
 * (frontend/channel.c), which calls these.
 *
 * Units: sector numbers and `sectors` in 512-byte units; `sector_size` is
 * the logical block size (512..4096) and every offset and length must be a
 * multiple of it (the Xen 4.20 rule, as Linux blkfront and blkback).
 */
#ifndef XBD_FRONTEND_REQUEST_H
#define XBD_FRONTEND_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/ring.h"
#include "frontend/xbdfront.h"

/* A piece of one granted page: offset and len are multiples of the logical
 * sector size and offset + len <= 4096.  Each becomes one segment. */
struct fe_frag {
	uint32_t gref;
	uint16_t offset;
	uint16_t len;
};

/* A granted page: a bounce page or an indirect page. */
struct fe_page {
	void *addr;
	uint32_t gref;
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

/* Limits a backend could give us: 0 or -EINVAL. */
int fe_limits_check(const struct fe_limits *lim);
/* Segments one request may carry under lim (11, or the indirect limit). */
unsigned int fe_max_segs(const struct fe_limits *lim);

/*
 * Whether op on [offset, offset + len) may be asked under lim: 0, -EINVAL (alignment,
 * bounds, a length where none belongs), -EROFS (write/discard on a
 * read-only disk), -EOPNOTSUPP (flush/barrier/discard not offered).
 */
int fe_op_check(const struct fe_limits *lim, enum xbdfront_op op, uint64_t offset,
		uint64_t len);

/*
 * The blkif request for a piece of an I/O: flush, barrier and discard in
 * one request (`sector`, `nsect` for discards); reads and writes carry
 * fragments f[0..count), written into the request (<= 11) or into the
 * indirect pages ind[] (each zeroed or ours), as BLKIF_OP_INDIRECT.  The
 * flush of a barrier-only backend is a WRITE_BARRIER.  Pure.
 */
void fe_build_req(const struct fe_limits *lim, enum xbdfront_op op, uint64_t sector,
		  uint64_t nsect, const struct fe_frag *f, unsigned int count, uint64_t id,
		  const struct fe_page *ind, struct fe_req *out);

/* BLKIF_RSP_* to 0 / -errno (unknown values are errors, as Linux). */
int fe_rsp_status(int16_t status);

/* The backend answered EOPNOTSUPP to operation (BLKIF_OP_*): stop asking
 * for it (Linux blkfront turns the feature off). */
void fe_limits_drop(struct fe_limits *lim, uint8_t operation);

#endif
