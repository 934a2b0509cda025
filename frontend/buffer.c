/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy buffers (xbdfront_buf_alloc): see buffer.h for the lock-free
 * lookup.  Lifetimes: an area is shared by fe_bufs_alloc and unshared by
 * fe_bufs_free or, at close, fe_bufs_destroy; a slot's grant array is
 * allocated by the first alloc that needs that size in the slot and freed
 * by fe_bufs_destroy.
 */
#include <errno.h>
#include <stdlib.h>

#include "frontend/buffer.h"

void fe_bufs_init(struct fe_bufs *b, struct xbd_domain *dom, xbd_domid_t backend)
{
	pthread_mutex_init(&b->lock, NULL);
	b->dom = dom;
	b->backend = backend;
}

void fe_bufs_destroy(struct fe_bufs *b)
{
	unsigned int i;

	for (i = 0; i < b->used; i++) {
		struct fe_buf_slot *s = &b->slot[i];

		/* one the backend still maps stays with the handle, which
		 * frees it as it closes */
		if (s->addr)
			(void)xbd_gntshr_unshare(b->gs, (void *)s->addr,
						 (unsigned int)(s->len / XBD_PAGE_SIZE));
		free(s->refs);
		*s = (struct fe_buf_slot){ 0 };
	}
	b->used = 0;
	if (b->gs)
		xbd_gntshr_close(b->gs);
	b->gs = NULL;
}

/* A slot for n pages, its grant array big enough; lock held.  NULL with
 * *rc set when none is left or memory is short. */
static struct fe_buf_slot *slot_get(struct fe_bufs *b, unsigned int n, int *rc)
{
	struct fe_buf_slot *s = NULL;
	xbd_grant_ref_t *refs;
	unsigned int i;

	for (i = 0; i < b->used && !s; i++)
		if (!b->slot[i].addr)
			s = &b->slot[i];
	if (!s && b->used < XBDFRONT_MAX_BUFS)
		s = &b->slot[b->used];
	if (!s) {
		*rc = -ENOSPC;
		return NULL;
	}
	if (s->cap < n) {
		/* a free slot: no lookup reads its array (addr is 0) */
		refs = realloc(s->refs, n * sizeof(*refs));
		if (!refs) {
			*rc = -ENOMEM;
			return NULL;
		}
		s->refs = refs;
		s->cap = n;
	}
	return s;
}

void *fe_bufs_alloc(struct fe_bufs *b, size_t len)
{
	unsigned int n = (unsigned int)((len + XBD_PAGE_SIZE - 1) / XBD_PAGE_SIZE);
	struct fe_buf_slot *s = NULL;
	void *addr = NULL;
	int rc = 0;

	if (!len || len > (1u << 30)) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&b->lock);
	if (!b->gs)
		rc = xbd_gntshr_open(b->dom, &b->gs);
	if (!rc)
		s = slot_get(b, n, &rc);
	if (s)
		rc = xbd_gntshr_share_pages(b->gs, b->backend, n, s->refs, true, &addr);
	if (!rc) {
		__atomic_store_n(&s->len, (size_t)n * XBD_PAGE_SIZE, __ATOMIC_RELAXED);
		__atomic_store_n(&s->addr, (uintptr_t)addr, __ATOMIC_RELEASE);
		if (s == &b->slot[b->used])
			__atomic_store_n(&b->used, b->used + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&b->lock);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	return addr;
}

int fe_bufs_free(struct fe_bufs *b, void *addr)
{
	unsigned int i;
	int rc = -EINVAL;

	pthread_mutex_lock(&b->lock);
	for (i = 0; addr && i < b->used; i++) {
		struct fe_buf_slot *s = &b->slot[i];

		if (s->addr != (uintptr_t)addr)
			continue;
		rc = xbd_gntshr_unshare(b->gs, addr, (unsigned int)(s->len / XBD_PAGE_SIZE));
		if (!rc)
			__atomic_store_n(&s->addr, 0, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

/* The slot holding [p, p + len), or NULL; no lock (see buffer.h). */
static const struct fe_buf_slot *find(const struct fe_bufs *b, uintptr_t p, size_t len)
{
	unsigned int n = __atomic_load_n(&b->used, __ATOMIC_ACQUIRE), i;

	for (i = 0; i < n; i++) {
		const struct fe_buf_slot *s = &b->slot[i];
		uintptr_t a = __atomic_load_n(&s->addr, __ATOMIC_ACQUIRE);
		size_t l = __atomic_load_n(&s->len, __ATOMIC_RELAXED);

		if (a && p >= a && len <= l && p - a <= l - len)
			return s;
	}
	return NULL;
}

/* Walk the iovec: fragments into out (may be NULL: only counted). */
static unsigned int walk(const struct fe_bufs *b, const struct iovec *iov, unsigned int iovcnt,
			 unsigned int ss, struct fe_frag *out, unsigned int max)
{
	unsigned int k = 0, i;

	if (!iovcnt || !__atomic_load_n(&b->used, __ATOMIC_ACQUIRE))
		return 0;
	for (i = 0; i < iovcnt; i++) {
		uintptr_t p = (uintptr_t)iov[i].iov_base;
		size_t left = iov[i].iov_len;
		const struct fe_buf_slot *s = find(b, p, left);

		if (!s || !left || (p - s->addr) % ss || left % ss)
			return 0;
		while (left) {
			size_t off = p - s->addr, in = off % XBD_PAGE_SIZE;
			size_t len = XBD_PAGE_SIZE - in < left ? XBD_PAGE_SIZE - in : left;

			if (k == max)
				return 0;
			if (out)
				out[k] = (struct fe_frag){ s->refs[off / XBD_PAGE_SIZE],
							   (uint16_t)in, (uint16_t)len };
			k++;
			p += len;
			left -= len;
		}
	}
	return k;
}

unsigned int fe_bufs_frags(const struct fe_bufs *b, const struct iovec *iov, unsigned int iovcnt,
			   unsigned int sector_size, struct fe_frag *out, unsigned int max)
{
	return walk(b, iov, iovcnt, sector_size, out, max);
}

unsigned int fe_bufs_count(const struct fe_bufs *b, const struct iovec *iov, unsigned int iovcnt,
			   unsigned int sector_size)
{
	return walk(b, iov, iovcnt, sector_size, NULL, UINT32_MAX);
}
