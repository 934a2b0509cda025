/* SPDX-License-Identifier: MIT */
/*
 * Per-queue pool of pages granted to the backend, for data (bounce
 * buffers) and indirect segment lists.
 *
 * Two modes, chosen at creation and final once a page was handed out
 * (the negotiated feature-persistent; fe_gntpool_set_persistent):
 *   persistent      pages are granted in batches of FE_GNTPOOL_BATCH and
 *                   stay granted until the pool is destroyed; free pages
 *                   are reused LIFO so the backend's persistent-grant
 *                   cache keeps hitting the same grants (blkif.h note 8);
 *   not persistent  a page is granted when handed out and its grant is
 *                   revoked when it comes back, as Linux blkfront ends
 *                   foreign access per request.  A revoke the platform
 *                   refuses because the backend still maps the page is
 *                   never retried into reuse: the page is parked on a
 *                   leaked list (XSA-396) and revoked again at destroy.
 * Pages always come zero-filled from the platform (XSA-403): no unrelated
 * guest memory is ever shared.
 *
 * Data pages are granted writable (a read's data is written by the
 * backend); Linux grants persistent pages writable even for writes, and so
 * do we in both modes, so a page can serve any request.
 *
 * Locking: none inside; a pool belongs to one queue's channel and is used
 * under the channel's lock.  The sharing handle is the queue's.
 */
#ifndef XBD_FRONTEND_GNTPOOL_H
#define XBD_FRONTEND_GNTPOOL_H

#include <stdbool.h>

#include "frontend/request.h"
#include "platform/platform.h"

#define FE_GNTPOOL_BATCH 32u

struct fe_gntpool_stats {
	unsigned int granted;     /* pages currently granted (free + in use + leaked) */
	unsigned int in_use;      /* handed out, not yet returned */
	unsigned int leaked;      /* revoke refused: parked, never reused */
};

struct fe_gntpool;

/*
 * gs: the queue's sharing handle (not owned).  remote: the backend domain.
 * max_pages: cap on granted pages (get fails with -EAGAIN beyond it).
 * Returns 0, -EINVAL, -ENOMEM.
 */
int fe_gntpool_create(struct xbd_gntshr *gs, xbd_domid_t remote, bool persistent,
		      unsigned int max_pages, struct fe_gntpool **out);
/*
 * Revoke and free every page.  Pages still in use are a caller bug
 * (asserted).  Pages the backend still maps stay with the sharing handle,
 * which frees them when it is closed.  Safe with NULL.
 */
void fe_gntpool_destroy(struct fe_gntpool *p);

/*
 * Change the mode before any page was granted: Linux xen-blkback states
 * its feature-persistent only when it connects, after the pool was made.
 * 0, or -EBUSY once pages were granted in the other mode (the pool keeps
 * it: bounce pages that stay granted are safe with any backend).
 */
int fe_gntpool_set_persistent(struct fe_gntpool *p, bool persistent);

/* One page: 0, -EAGAIN at the cap, or the platform's -ENOMEM. */
int fe_gntpool_get(struct fe_gntpool *p, struct fe_page *out);
/* Give back a page from fe_gntpool_get. */
void fe_gntpool_put(struct fe_gntpool *p, const struct fe_page *pg);

void fe_gntpool_get_stats(const struct fe_gntpool *p, struct fe_gntpool_stats *out);
/* Pages fe_gntpool_get can hand out now without the platform failing:
 * free ones plus what the cap still allows. */
unsigned int fe_gntpool_available(const struct fe_gntpool *p);

#endif
