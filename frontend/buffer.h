/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy buffers of one device (xbdfront_buf_alloc): areas of guest
 * memory granted to the backend for the device's life, and the lookup
 * that turns an iovec lying in them into fragments of their grants.
 *
 * Locking: alloc and free serialise on the registry's lock; the lookup
 * takes none.  Each slot's address and length are atomics that a lookup
 * reads and compares; only a slot that holds the caller's own buffer is
 * read further (its grant references), and that buffer may not be freed
 * while it has I/O (the documented rule), so a lookup never sees freed
 * memory.  A slot's grant array lives until the registry is destroyed
 * or the slot is reused by a later alloc.
 */
#ifndef XBD_FRONTEND_BUFFER_H
#define XBD_FRONTEND_BUFFER_H

#include <pthread.h>
#include <stddef.h>
#include <sys/uio.h>

#include "frontend/request.h"
#include "platform/platform.h"

struct fe_buf_slot {
	uintptr_t addr;               /* 0: free (atomic) */
	size_t len;                   /* bytes, whole pages (atomic) */
	xbd_grant_ref_t *refs;        /* one per page; owned by the slot */
	unsigned int cap;             /* refs allocated */
};

struct fe_bufs {
	pthread_mutex_t lock;         /* alloc, free, gs */
	struct xbd_gntshr *gs;        /* opened at the first alloc, owned */
	struct xbd_domain *dom;       /* the claimed guest, not owned */
	xbd_domid_t backend;
	unsigned int used;            /* slots ever used (atomic; lookups scan these) */
	struct fe_buf_slot slot[XBDFRONT_MAX_BUFS];
};

void fe_bufs_init(struct fe_bufs *b, struct xbd_domain *dom, xbd_domid_t backend);
/* Unshare every buffer, close the handle; idempotent.  Must run while the
 * domain is still claimed. */
void fe_bufs_destroy(struct fe_bufs *b);
void *fe_bufs_alloc(struct fe_bufs *b, size_t len);
int fe_bufs_free(struct fe_bufs *b, void *addr);

/*
 * Fragments for an iovec lying wholly in the buffers, each piece aligned
 * to sector_size: at most max of them into out.  Returns how many, or 0
 * when the I/O must be bounced (not in a buffer, misaligned, too many
 * fragments).  No lock, no allocation.
 */
unsigned int fe_bufs_frags(const struct fe_bufs *b, const struct iovec *iov, unsigned int iovcnt,
			   unsigned int sector_size, struct fe_frag *out, unsigned int max);
/* How many fragments fe_bufs_frags would give, without writing them. */
unsigned int fe_bufs_count(const struct fe_bufs *b, const struct iovec *iov, unsigned int iovcnt,
			   unsigned int sector_size);

#endif
