/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy buffers (xbdfront_buf_alloc): areas of the guest's memory
 * granted to the backend for the device's whole life, handed to the
 * application.  An I/O whose iovec lies in them is described by fragments
 * of their grants and needs no bounce copy.
 *
 * Lifetimes: an area is shared by xbdfront_buf_alloc and unshared by
 * xbdfront_buf_free or, at close, fe_dev_bufs_destroy.  The registry and
 * its sharing handle are protected by dev->buf_lock; lookups copy the
 * grant references out under it, so a later free cannot race with them
 * (freeing a buffer with I/O pending is the caller's error, documented).
 */
#include <errno.h>
#include <stdlib.h>

#include "frontend/device.h"

struct fe_buf {
	char *addr;
	unsigned int npages;
	struct fe_buf *next;
	xbd_grant_ref_t refs[];
};

void *xbdfront_buf_alloc(struct xbdfront_dev *dev, size_t len)
{
	unsigned int n = (unsigned int)((len + XBD_PAGE_SIZE - 1) / XBD_PAGE_SIZE);
	struct fe_buf *b;
	void *addr = NULL;
	int rc = 0;

	if (!len || len > (1u << 30))
		rc = -EINVAL;
	b = rc ? NULL : calloc(1, sizeof(*b) + n * sizeof(b->refs[0]));
	if (!rc && !b)
		rc = -ENOMEM;
	pthread_mutex_lock(&dev->buf_lock);
	if (!rc && !dev->buf_gs)
		rc = xbd_gntshr_open(dev->dom, &dev->buf_gs);
	if (!rc)
		rc = xbd_gntshr_share_pages(dev->buf_gs, dev->par.backend, n, b->refs, true, &addr);
	if (!rc) {
		*b = (struct fe_buf){ .addr = addr, .npages = n, .next = dev->bufs };
		dev->bufs = b;
	}
	pthread_mutex_unlock(&dev->buf_lock);
	if (rc) {
		free(b);
		errno = -rc;
		return NULL;
	}
	return addr;
}

int xbdfront_buf_free(struct xbdfront_dev *dev, void *buf)
{
	struct fe_buf **pp, *b;
	int rc = -EINVAL;

	pthread_mutex_lock(&dev->buf_lock);
	for (pp = &dev->bufs; (b = *pp); pp = &b->next) {
		if (b->addr != buf)
			continue;
		rc = xbd_gntshr_unshare(dev->buf_gs, b->addr, b->npages);
		if (!rc) {
			*pp = b->next;
			free(b);
		}
		break;
	}
	pthread_mutex_unlock(&dev->buf_lock);
	return rc;
}

/* Close: every buffer goes (one the backend still maps stays with the
 * handle, which frees it as it closes). */
void fe_dev_bufs_destroy(struct xbdfront_dev *dev)
{
	struct fe_buf *b, *next;

	for (b = dev->bufs; b; b = next) {
		next = b->next;
		(void)xbd_gntshr_unshare(dev->buf_gs, b->addr, b->npages);
		free(b);
	}
	dev->bufs = NULL;
	if (dev->buf_gs)
		xbd_gntshr_close(dev->buf_gs);
	dev->buf_gs = NULL;
}

static const struct fe_buf *buf_find(const struct xbdfront_dev *dev, const char *p, size_t len)
{
	const struct fe_buf *b;

	for (b = dev->bufs; b; b = b->next)
		if (p >= b->addr && len <= (size_t)b->npages * XBD_PAGE_SIZE - (size_t)(p - b->addr))
			return b;
	return NULL;
}

/* Fragments for an iovec lying wholly in zero-copy buffers, each piece
 * aligned to the sector size; NULL (bounce) otherwise. */
struct fe_frag *fe_dev_direct_frags(struct xbdfront_dev *dev, const struct iovec *iov,
				    int iovcnt, unsigned int *n)
{
	unsigned int ss, k = 0;
	struct fe_frag *fr = NULL;
	size_t total = 0;
	int i;

	*n = 0;
	if (iovcnt <= 0 || !dev->bufs)
		return NULL;
	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len / XBD_PAGE_SIZE + 2;
	fr = total < (1u << 20) ? calloc(total, sizeof(*fr)) : NULL;
	pthread_mutex_lock(&dev->info_lock);
	ss = dev->lim.sector_size ? dev->lim.sector_size : 512;
	pthread_mutex_unlock(&dev->info_lock);
	pthread_mutex_lock(&dev->buf_lock);
	for (i = 0; fr && i < iovcnt; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;
		const struct fe_buf *b = buf_find(dev, p, left);

		if (!b || !left || (size_t)(p - b->addr) % ss || left % ss) {
			free(fr);
			fr = NULL;
			break;
		}
		while (left) {
			size_t off = (size_t)(p - b->addr), in = off % XBD_PAGE_SIZE;
			size_t len = XBD_PAGE_SIZE - in < left ? XBD_PAGE_SIZE - in : left;

			fr[k++] = (struct fe_frag){ b->refs[off / XBD_PAGE_SIZE], (uint16_t)in,
						    (uint16_t)len };
			p += len;
			left -= len;
		}
	}
	pthread_mutex_unlock(&dev->buf_lock);
	*n = fr ? k : 0;
	return fr;
}
