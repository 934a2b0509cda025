/* SPDX-License-Identifier: MIT */
/*
 * The device behind the public struct xbdfront_dev: its channels (one per
 * queue), its zero-copy buffers and the limits it was connected with.
 * Internal to libxbdfront: the xenstore negotiation (xenbus.c) creates,
 * connects, resets and destroys a device through these calls, and the
 * unit tests do the same with a fake backend.  This file never calls
 * into xenbus.c: the dependency goes one way.
 *
 * Locking: info_lock protects what the monitor thread changes while
 * others read it (lim, physical_sector_size, par.order, par.abi,
 * par.persistent, resets); the monitor reads them without it (it is the
 * only writer).  The channels lock themselves; what the device reads of
 * them for xbdfront_get_info (features, errors) are atomics.
 */
#ifndef XBD_FRONTEND_DEVICE_H
#define XBD_FRONTEND_DEVICE_H

#include "frontend/buffer.h"
#include "frontend/channel.h"
#include "frontend/xbdfront.h"

struct fe_dev_params {
	xbd_domid_t backend;
	unsigned int nqueues;         /* 1..16 */
	unsigned int order;           /* ring-page-order */
	enum fe_abi abi;
	bool persistent;
	unsigned int pool_pages;      /* per queue */
	unsigned int poll_us;         /* xbdfront_opts.poll_duration_us */
};

struct fe_xb;

struct xbdfront_dev {
	struct fe_xb *xb;             /* negotiation state (xenbus.c), NULL when built directly */
	struct xbd_domain *dom;       /* the claimed guest domain, not owned */
	struct fe_bufs bufs;          /* zero-copy buffers */
	struct fe_chan **q;           /* par.nqueues channels, owned; the count is fixed */
	pthread_mutex_t info_lock;    /* see above */
	struct fe_dev_params par;
	struct fe_limits lim;         /* as last connected */
	unsigned int physical_sector_size;
	unsigned int resets;          /* fe_dev_reset calls that succeeded */
};

#define FE_DEV_MAX_QUEUES XBDFRONT_MAX_QUEUES

int fe_dev_create(struct xbd_platform *plat, struct xbd_domain *dom,
		  const struct fe_dev_params *par, struct xbdfront_dev **out);
/* The backend is Connected with lim: every channel starts issuing. */
int fe_dev_connect(struct xbdfront_dev *dev, const struct fe_limits *lim,
		   unsigned int physical_sector_size);
/* feature-persistent as negotiated at Connected (both sides offer it):
 * what xbdfront_get_info reports; each channel's pool follows when it
 * still can (fe_chan_set_persistent). */
void fe_dev_set_persistent(struct xbdfront_dev *dev, bool persistent);
/* Recovery: every channel takes its requests back and gets a fresh ring. */
int fe_dev_reset(struct xbdfront_dev *dev, unsigned int order, enum fe_abi abi);
struct fe_chan *fe_dev_chan(struct xbdfront_dev *dev, unsigned int i);
/* Online resize: the new capacity for the device and every channel;
 * then every channel signals the backend (it may have re-attached). */
void fe_dev_set_sectors(struct xbdfront_dev *dev, uint64_t sectors);
/* Every channel fails its I/O with err (a detach, a broken backend). */
void fe_dev_fail(struct xbdfront_dev *dev, int err, const char *why);
/* Destroy the channels (pending I/O fails with -ENODEV) and the buffers;
 * idempotent.  Must run while the domain is still claimed. */
void fe_dev_destroy_queues(struct xbdfront_dev *dev);
/* fe_dev_destroy_queues, then free the device. */
void fe_dev_free(struct xbdfront_dev *dev);

enum fe_abi fe_abi_from_public(enum xbdfront_abi abi);

#endif
