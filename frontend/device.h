/* SPDX-License-Identifier: MIT */
/*
 * The device behind the public struct xbdfront_dev: its queues and the
 * limits they were connected with.  Internal to libxbdfront: the xenstore
 * negotiation creates and connects a device through these calls, and the
 * unit tests do the same with a fake backend.
 *
 * Locking: the device fields are written by fe_dev_create/connect/reset,
 * which the owner (negotiation thread) does not run concurrently with I/O
 * calls on the same device except through the queues, which lock
 * themselves.
 */
#ifndef XBD_FRONTEND_DEVICE_H
#define XBD_FRONTEND_DEVICE_H

#include "frontend/queue.h"
#include "frontend/xbdfront.h"

struct fe_dev_params {
	xbd_domid_t backend;
	unsigned int nqueues;         /* 1..16 */
	unsigned int order;           /* ring-page-order */
	enum fe_abi abi;
	bool persistent;
	unsigned int pool_pages;      /* per queue */
};

struct fe_xb;
struct fe_buf;

struct xbdfront_dev {
	struct fe_xb *xb;             /* negotiation state, NULL when built directly */
	struct xbd_domain *dom;       /* the claimed guest domain, not owned */
	pthread_mutex_t buf_lock;     /* protects bufs and buf_gs */
	struct xbd_gntshr *buf_gs;    /* zero-copy buffers' handle, owned */
	struct fe_buf *bufs;          /* xbdfront_buf_alloc() areas */
	struct fe_queue **q;          /* par.nqueues queues, owned; the count is fixed */
	/* info_lock protects what the monitor thread changes while others
	 * read it: lim, physical_sector_size, par.order, par.abi, resets.
	 * The monitor reads them without it (it is the only writer). */
	pthread_mutex_t info_lock;
	struct fe_dev_params par;
	struct fe_limits lim;         /* as last connected */
	unsigned int physical_sector_size;
	unsigned int resets;          /* fe_dev_reset calls that succeeded */
};

#define FE_DEV_MAX_QUEUES 16u

int fe_dev_create(struct xbd_platform *plat, struct xbd_domain *dom,
		  const struct fe_dev_params *par, struct xbdfront_dev **out);
/* The backend is Connected with lim: every queue starts issuing. */
int fe_dev_connect(struct xbdfront_dev *dev, const struct fe_limits *lim,
		   unsigned int physical_sector_size);
/* feature-persistent as negotiated at Connected (both sides offer it):
 * what xbdfront_get_info reports; each queue's pool follows when it still
 * can (fe_queue_set_persistent). */
void fe_dev_set_persistent(struct xbdfront_dev *dev, bool persistent);
/* Recovery: every queue takes its requests back and gets a fresh ring. */
int fe_dev_reset(struct xbdfront_dev *dev, unsigned int order, enum fe_abi abi);
struct fe_queue *fe_dev_queue(struct xbdfront_dev *dev, unsigned int i);
/* Online resize: the new capacity for the device and every queue. */
void fe_dev_set_sectors(struct xbdfront_dev *dev, uint64_t sectors);
/* Destroy the queues (pending I/O fails with -ENODEV); idempotent. */
void fe_dev_destroy_queues(struct xbdfront_dev *dev);

enum fe_abi fe_abi_from_public(enum xbdfront_abi abi);

/* frontend/buffer.c: fragments for an iovec lying wholly in zero-copy
 * buffers, each piece aligned to the logical sector size (malloc'd, *n of
 * them); NULL when the I/O must be bounced. */
struct fe_frag *fe_dev_direct_frags(struct xbdfront_dev *dev, const struct iovec *iov,
				    int iovcnt, unsigned int *n);
/* Unshare every buffer and close their handle; idempotent.  Must run
 * while the domain is still claimed (before fe_xb_close releases it). */
void fe_dev_bufs_destroy(struct xbdfront_dev *dev);

#endif
