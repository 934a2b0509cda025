/* SPDX-License-Identifier: MIT */
/* Domain NAME or ID -> domain id, for xbd-blkfront and the fio engine. */
#ifndef XBD_BLKFRONT_DOMAIN_H
#define XBD_BLKFRONT_DOMAIN_H

struct xbd_platform;

/* A decimal number in [lo, hi], or -1. */
long long guest_num(const char *s, long long lo, long long hi);
/* A decimal id, or the name a local domain was created with (scanning
 * $rundir/dom<N>/).  On the xen platform: the domain this process runs in
 * (name NULL, or its own name from xenstore), or the id as given.
 * 0, -ENOENT (no such domain), -EINVAL (name NULL on the local platform)
 * or -errno. */
int guest_resolve_domain(struct xbd_platform *p, const char *name, unsigned int *domid);

#endif
