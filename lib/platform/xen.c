/* SPDX-License-Identifier: MIT */
/*
 * Xen platform: a thin pass-through to libxengnttab (gnttab and gntshr),
 * libxenevtchn and, for domain queries, libxenctrl.  The libraries are
 * given a logger that drops everything, so this layer logs nothing: errors
 * come back as -errno.
 *
 * Thread rules are the libraries': one handle per thread.  The
 * xc_interface in struct xen_state is only used for domain queries, which
 * libxenctrl allows from several threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <xenctrl.h>
#include <xenevtchn.h>
#include <xengnttab.h>
#include <xenstore.h>
#include <xentoollog.h>

#include "platform/private.h"

static void null_vmessage(struct xentoollog_logger *logger, xentoollog_level level,
			  int errnoval, const char *context, const char *format,
			  va_list al)
{
	(void)logger; (void)level; (void)errnoval; (void)context;
	(void)format; (void)al;
}

static void null_destroy(struct xentoollog_logger *logger)
{
	(void)logger;
}

static struct xentoollog_logger null_logger = {
	.vmessage = null_vmessage,
	.destroy = null_destroy,
};

struct xen_state {
	xc_interface *xc;       /* NULL in a domU without privcmd: no domain queries */
	xbd_domid_t self;       /* the domain this process runs in */
};

const char *xbd_xen_xenbus_path = "/dev/xen/xenbus";

static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

/* Our own domid, from the relative xenstore path "domid" (0 in dom0; a
 * domU reads it through /dev/xen/xenbus).  0 or -errno. */
static int read_self_domid(xbd_domid_t *out)
{
	struct xs_handle *xs;
	unsigned int len = 0;
	unsigned long n;
	char *v, *end;
	int rc = -EPROTO;

	errno = 0;
	xs = xs_open(XS_OPEN_READONLY);
	if (!xs)
		return neg_errno();
	v = xs_read(xs, XBT_NULL, "domid", &len);
	if (!v) {
		rc = neg_errno();
		goto out;
	}
	errno = 0;
	n = strtoul(v, &end, 10);
	if (!errno && end != v && !*end && n <= XBD_DOMID_MAX) {
		*out = (xbd_domid_t)n;
		rc = 0;
	}
	free(v);
out:
	xs_close(xs);
	return rc;
}

static bool is_chardev(const char *path)
{
	struct stat st;

	return path && stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

/*
 * libxenctrl needs privcmd, which an unprivileged domU usually lacks; the
 * guest side (gntshr, evtchn, xenstore through /dev/xen/xenbus) does not
 * need it, so a domU opens without it (found by make check-xen, phase R).
 * Without privcmd and without the xenbus device there is no Xen: -ENODEV.
 * Without privcmd our domid must be readable from xenstore; with it, an
 * unreadable one means dom0 before xenstored, as before.
 */
int xbd_xen_init(struct xbd_platform *p)
{
	struct xen_state *xs = calloc(1, sizeof(*xs));
	int rc, err;

	if (!xs)
		return -ENOMEM;
	errno = 0;
	xs->xc = xc_interface_open(&null_logger, &null_logger, 0);
	err = xs->xc ? 0 : errno ? errno : ENOENT;
	if (err && err != ENOENT) {
		rc = -err;
		goto out;
	}
	if (err && !is_chardev(xbd_xen_xenbus_path)) {
		rc = -ENODEV;
		goto out;
	}
	rc = read_self_domid(&xs->self);
	if (rc && xs->xc)
		rc = 0;             /* dom0: domid 0 */
	if (rc)
		goto out;
	p->impl = xs;
	return 0;
out:
	if (xs->xc)
		xc_interface_close(xs->xc);
	free(xs);
	return rc;
}

static void xen_close(struct xbd_platform *p)
{
	struct xen_state *xs = p->impl;

	if (xs) {
		if (xs->xc)
			xc_interface_close(xs->xc);
		free(xs);
	}
}

/* ---- domains ---- */

static int xen_domain_create(struct xbd_platform *p, xbd_domid_t domid,
			     const char *name, uint64_t mem_bytes)
{
	(void)p; (void)domid; (void)name; (void)mem_bytes;
	return -EOPNOTSUPP;
}

static int xen_domain_destroy(struct xbd_platform *p, xbd_domid_t domid, bool force)
{
	(void)p; (void)domid; (void)force;
	return -EOPNOTSUPP;
}

static int xen_domain_get_info(struct xbd_platform *p, xbd_domid_t domid,
			       struct xbd_domain_info *info)
{
	struct xen_state *xs = p->impl;
	xc_dominfo_t di;
	int n;

	if (domid > XBD_DOMID_MAX)
		return -EINVAL;
	if (!xs->xc)
		return -EOPNOTSUPP;   /* a domU without privcmd */
	errno = 0;
	n = xc_domain_getinfo(xs->xc, domid, 1, &di);
	/* Xen 4.17 answers ESRCH when no domain has an id >= domid (seen on
	 * real Xen by make check-xen): that domain does not exist. */
	if (n < 0 && errno == ESRCH)
		return 0;
	if (n < 0)
		return neg_errno();
	if (n == 0 || di.domid != domid)
		return 0;   /* the next domain up was returned: ours is gone */
	info->exists = true;
	info->dying = di.dying;
	info->memory = (uint64_t)di.nr_pages * XBD_PAGE_SIZE;
	return 0;
}

static int xen_domain_claim(struct xbd_platform *p, xbd_domid_t domid,
			    struct xbd_domain **out)
{
	struct xen_state *xs = p->impl;
	struct xbd_domain *d;

	if (domid > XBD_DOMID_MAX)
		return -EINVAL;
	if (domid != xs->self)
		return -EPERM;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->p = p;
	d->domid = domid;
	*out = d;
	return 0;
}

static void xen_domain_release(struct xbd_domain *d)
{
	free(d);
}

/* ---- grants, grantor side ---- */

struct xen_gntshr {
	struct xbd_gntshr pub;
	xengntshr_handle *h;
};

static int xen_gntshr_open(struct xbd_domain *d, struct xbd_gntshr **out)
{
	struct xen_gntshr *gs = calloc(1, sizeof(*gs));

	if (!gs)
		return -ENOMEM;
	gs->h = xengntshr_open(&null_logger, 0);
	if (!gs->h) {
		int rc = neg_errno();

		free(gs);
		return rc;
	}
	gs->pub.p = d->p;
	*out = &gs->pub;
	return 0;
}

static void xen_gntshr_close(struct xbd_gntshr *pub)
{
	struct xen_gntshr *gs = container_of(pub, struct xen_gntshr, pub);

	xengntshr_close(gs->h);
	free(gs);
}

static int xen_gntshr_share_pages(struct xbd_gntshr *pub, xbd_domid_t remote,
				  unsigned int count, xbd_grant_ref_t *refs,
				  bool writable, void **addr)
{
	struct xen_gntshr *gs = container_of(pub, struct xen_gntshr, pub);
	void *a;

	errno = 0;
	a = xengntshr_share_pages(gs->h, remote, (int)count, refs, writable);
	if (!a)
		return neg_errno();
	*addr = a;
	return 0;
}

static int xen_gntshr_unshare(struct xbd_gntshr *pub, void *addr, unsigned int count)
{
	struct xen_gntshr *gs = container_of(pub, struct xen_gntshr, pub);

	return xengntshr_unshare(gs->h, addr, count) < 0 ? neg_errno() : 0;
}

/* ---- grants, mapper side ---- */

struct xen_gnttab {
	struct xbd_gnttab pub;
	xengnttab_handle *h;
};

static int xen_gnttab_open(struct xbd_platform *p, xbd_domid_t self,
			   struct xbd_gnttab **out)
{
	struct xen_gnttab *gt = calloc(1, sizeof(*gt));

	(void)self;   /* the hypervisor knows who we are */
	if (!gt)
		return -ENOMEM;
	gt->h = xengnttab_open(&null_logger, 0);
	if (!gt->h) {
		int rc = neg_errno();

		free(gt);
		return rc;
	}
	gt->pub.p = p;
	*out = &gt->pub;
	return 0;
}

static void xen_gnttab_close(struct xbd_gnttab *pub)
{
	struct xen_gnttab *gt = container_of(pub, struct xen_gnttab, pub);

	xengnttab_close(gt->h);
	free(gt);
}

static int xen_gnttab_map(struct xbd_gnttab *pub, xbd_domid_t remote,
			  unsigned int count, const xbd_grant_ref_t *refs,
			  int prot, void **addr)
{
	struct xen_gnttab *gt = container_of(pub, struct xen_gnttab, pub);
	uint32_t *copy;
	void *a;

	if (prot != PROT_READ && prot != (PROT_READ | PROT_WRITE))
		return -EINVAL;
	copy = malloc(count * sizeof(*copy));   /* the library wants non-const */
	if (!copy)
		return -ENOMEM;
	memcpy(copy, refs, count * sizeof(*copy));
	errno = 0;
	a = xengnttab_map_domain_grant_refs(gt->h, count, remote, copy, prot);
	free(copy);
	if (!a)
		return neg_errno();
	*addr = a;
	return 0;
}

static int xen_gnttab_unmap(struct xbd_gnttab *pub, void *addr, unsigned int count)
{
	struct xen_gnttab *gt = container_of(pub, struct xen_gnttab, pub);

	return xengnttab_unmap(gt->h, addr, count) < 0 ? neg_errno() : 0;
}

static int16_t gntst_to_errno(int16_t st)
{
	switch (st) {
	case GNTST_okay:              return 0;
	/* What Xen 4.17 answers for a grant whose entry does not permit the
	 * access: written while read-only, or granted to another domain
	 * (seen on real Xen by make check-xen). */
	case GNTST_general_error:     return -EPERM;
	case GNTST_bad_domain:        return -ESRCH;
	case GNTST_bad_gntref:        return -EINVAL;
	case GNTST_permission_denied: return -EPERM;
	case GNTST_bad_page:          return -EFAULT;
	case GNTST_bad_copy_arg:      return -EINVAL;
	case GNTST_eagain:            return -EAGAIN;
	default:                      return -EIO;
	}
}

static int xen_gnttab_copy(struct xbd_gnttab *pub, unsigned int count,
			   struct xbd_gnttab_copy_seg *segs)
{
	struct xen_gnttab *gt = container_of(pub, struct xen_gnttab, pub);
	xengnttab_grant_copy_segment_t *xs;
	int rc = 0;

	if (count == 0)
		return 0;
	xs = calloc(count, sizeof(*xs));
	if (!xs)
		return -ENOMEM;
	for (unsigned int i = 0; i < count; i++) {
		const struct xbd_gnttab_copy_seg *s = &segs[i];

		if (s->flags & XBD_GNTCOPY_source_gref) {
			xs[i].source.foreign.ref = s->source.foreign.ref;
			xs[i].source.foreign.offset = s->source.foreign.offset;
			xs[i].source.foreign.domid = s->source.foreign.domid;
			xs[i].flags |= GNTCOPY_source_gref;
		} else {
			xs[i].source.virt = s->source.virt;
		}
		if (s->flags & XBD_GNTCOPY_dest_gref) {
			xs[i].dest.foreign.ref = s->dest.foreign.ref;
			xs[i].dest.foreign.offset = s->dest.foreign.offset;
			xs[i].dest.foreign.domid = s->dest.foreign.domid;
			xs[i].flags |= GNTCOPY_dest_gref;
		} else {
			xs[i].dest.virt = s->dest.virt;
		}
		xs[i].len = s->len;
	}
	if (xengnttab_grant_copy(gt->h, count, xs) < 0) {
		rc = neg_errno();
		goto out;
	}
	for (unsigned int i = 0; i < count; i++)
		segs[i].status = gntst_to_errno(xs[i].status);
out:
	free(xs);
	return rc;
}

/* ---- event channels ---- */

struct xen_evtchn {
	struct xbd_evtchn pub;
	xenevtchn_handle *h;
};

static xenevtchn_handle *xh(struct xbd_evtchn *pub)
{
	return container_of(pub, struct xen_evtchn, pub)->h;
}

static int xen_evtchn_open(struct xbd_platform *p, xbd_domid_t self,
			   struct xbd_evtchn **out)
{
	struct xen_evtchn *e = calloc(1, sizeof(*e));
	int fl;

	(void)self;
	if (!e)
		return -ENOMEM;
	e->h = xenevtchn_open(&null_logger, 0);
	if (!e->h) {
		int rc = neg_errno();

		free(e);
		return rc;
	}
	/* xenevtchn_pending() read()s the fd, which blocks when nothing is
	 * pending; the interface promises -EAGAIN (found on real Xen by
	 * make check-xen). */
	fl = fcntl(xenevtchn_fd(e->h), F_GETFL);
	if (fl < 0 || fcntl(xenevtchn_fd(e->h), F_SETFL, fl | O_NONBLOCK) < 0) {
		int rc = neg_errno();

		xenevtchn_close(e->h);
		free(e);
		return rc;
	}
	e->pub.p = p;
	*out = &e->pub;
	return 0;
}

static void xen_evtchn_close(struct xbd_evtchn *pub)
{
	xenevtchn_close(xh(pub));
	free(container_of(pub, struct xen_evtchn, pub));
}

static int xen_evtchn_fd(struct xbd_evtchn *pub)
{
	return xenevtchn_fd(xh(pub));
}

static int xen_evtchn_bind_unbound_port(struct xbd_evtchn *pub, xbd_domid_t remote)
{
	xenevtchn_port_or_error_t port = xenevtchn_bind_unbound_port(xh(pub), remote);

	return port < 0 ? neg_errno() : (int)port;
}

static int xen_evtchn_bind_interdomain(struct xbd_evtchn *pub, xbd_domid_t remote,
				       xbd_evtchn_port_t remote_port)
{
	xenevtchn_port_or_error_t port =
		xenevtchn_bind_interdomain(xh(pub), remote, remote_port);

	return port < 0 ? neg_errno() : (int)port;
}

static int xen_evtchn_unbind(struct xbd_evtchn *pub, xbd_evtchn_port_t port)
{
	return xenevtchn_unbind(xh(pub), port) < 0 ? neg_errno() : 0;
}

static int xen_evtchn_notify(struct xbd_evtchn *pub, xbd_evtchn_port_t port)
{
	return xenevtchn_notify(xh(pub), port) < 0 ? neg_errno() : 0;
}

static int xen_evtchn_pending(struct xbd_evtchn *pub)
{
	xenevtchn_port_or_error_t port = xenevtchn_pending(xh(pub));

	return port < 0 ? neg_errno() : (int)port;
}

static int xen_evtchn_unmask(struct xbd_evtchn *pub, xbd_evtchn_port_t port)
{
	return xenevtchn_unmask(xh(pub), port) < 0 ? neg_errno() : 0;
}

const struct platform_ops xbd_xen_ops = {
	.close = xen_close,
	.domain_create = xen_domain_create,
	.domain_destroy = xen_domain_destroy,
	.domain_get_info = xen_domain_get_info,
	.domain_claim = xen_domain_claim,
	.domain_release = xen_domain_release,
	.gntshr_open = xen_gntshr_open,
	.gntshr_close = xen_gntshr_close,
	.gntshr_share_pages = xen_gntshr_share_pages,
	.gntshr_unshare = xen_gntshr_unshare,
	.gnttab_open = xen_gnttab_open,
	.gnttab_close = xen_gnttab_close,
	.gnttab_map = xen_gnttab_map,
	.gnttab_unmap = xen_gnttab_unmap,
	.gnttab_copy = xen_gnttab_copy,
	.evtchn_open = xen_evtchn_open,
	.evtchn_close = xen_evtchn_close,
	.evtchn_fd = xen_evtchn_fd,
	.evtchn_bind_unbound_port = xen_evtchn_bind_unbound_port,
	.evtchn_bind_interdomain = xen_evtchn_bind_interdomain,
	.evtchn_unbind = xen_evtchn_unbind,
	.evtchn_notify = xen_evtchn_notify,
	.evtchn_pending = xen_evtchn_pending,
	.evtchn_unmask = xen_evtchn_unmask,
};
