/* SPDX-License-Identifier: MIT */
/*
 * The platform layer's front door: kind parsing, the auto choice, and the
 * dispatch of every call to the implementation the handle was opened from
 * (local.c / local_grant.c / local_evtchn.c, or xen.c).  Nothing here logs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/private.h"

static const char *const kind_names[] = {
	[XBD_PLATFORM_AUTO] = "auto",
	[XBD_PLATFORM_LOCAL] = "local",
	[XBD_PLATFORM_XEN] = "xen",
};

int xbd_platform_kind_parse(const char *s, enum xbd_platform_kind *out)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
		if (strcmp(s, kind_names[i]) == 0) {
			*out = (enum xbd_platform_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *xbd_platform_kind_name(enum xbd_platform_kind kind)
{
	if ((unsigned int)kind >= sizeof(kind_names) / sizeof(kind_names[0]))
		return "unknown";
	return kind_names[kind];
}

static bool is_chardev(const char *path)
{
	struct stat st;

	return path && stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

enum xbd_platform_kind xbd_platform_kind_detect(const char *gntdev_path,
						const char *evtchn_path)
{
	if (is_chardev(gntdev_path) && is_chardev(evtchn_path))
		return XBD_PLATFORM_XEN;
	return XBD_PLATFORM_LOCAL;
}

int xbd_platform_open(enum xbd_platform_kind kind, const char *rundir,
		      struct xbd_platform **out)
{
	struct xbd_platform *p = NULL;
	int rc;

	if (kind == XBD_PLATFORM_AUTO)
		kind = xbd_platform_kind_detect(XBD_XEN_GNTDEV_PATH, XBD_XEN_EVTCHN_PATH);
	if (kind != XBD_PLATFORM_LOCAL && kind != XBD_PLATFORM_XEN)
		return -EINVAL;
	if (!rundir)
		rundir = getenv("XBD_RUNDIR");
	if (!rundir || !*rundir)
		rundir = XBD_DEFAULT_RUNDIR;
	if (strlen(rundir) >= sizeof(p->rundir))
		return -ENAMETOOLONG;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->kind = kind;
	strcpy(p->rundir, rundir);
	if (kind == XBD_PLATFORM_LOCAL) {
		p->ops = &xbd_local_ops;
		rc = xbd_local_prepare_rundir(p->rundir);
	} else {
		p->ops = &xbd_xen_ops;
		rc = xbd_xen_init(p);
	}
	if (rc < 0)
		goto out;
	*out = p;
	return 0;
out:
	free(p);
	return rc;
}

void xbd_platform_close(struct xbd_platform *p)
{
	if (!p)
		return;
	if (p->ops->close)
		p->ops->close(p);
	free(p);
}

enum xbd_platform_kind xbd_platform_get_kind(const struct xbd_platform *p)
{
	return p->kind;
}

int xbd_rundir_check(const char *dir, char *why, size_t len)
{
	struct stat st;

	if (lstat(dir, &st) < 0) {
		snprintf(why, len, "run directory %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, len, "run directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(why, len, "run directory %s is owned by uid %u, not root: "
			 "refusing it", dir, (unsigned int)st.st_uid);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, len, "run directory %s is writable by group or others "
			 "(mode %04o): refusing it", dir,
			 (unsigned int)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

const char *xbd_platform_rundir(const struct xbd_platform *p)
{
	return p->rundir;
}

/* ---- domains ---- */

int xbd_domain_create(struct xbd_platform *p, xbd_domid_t domid,
		      const char *name, uint64_t mem_bytes)
{
	return p->ops->domain_create(p, domid, name, mem_bytes);
}

int xbd_domain_set_owner(struct xbd_platform *p, xbd_domid_t domid,
			 uid_t uid, gid_t gid)
{
	if (xbd_platform_get_kind(p) != XBD_PLATFORM_LOCAL)
		return -EOPNOTSUPP;
	return local_domain_set_owner(p, domid, uid, gid);
}

int xbd_domain_destroy(struct xbd_platform *p, xbd_domid_t domid, bool force)
{
	return p->ops->domain_destroy(p, domid, force);
}

int xbd_domain_get_info(struct xbd_platform *p, xbd_domid_t domid,
			struct xbd_domain_info *info)
{
	memset(info, 0, sizeof(*info));
	info->domid = domid;
	return p->ops->domain_get_info(p, domid, info);
}

int xbd_domain_claim(struct xbd_platform *p, xbd_domid_t domid,
		     struct xbd_domain **out)
{
	return p->ops->domain_claim(p, domid, out);
}

void xbd_domain_release(struct xbd_domain *d)
{
	if (d)
		d->p->ops->domain_release(d);
}

xbd_domid_t xbd_domain_id(const struct xbd_domain *d)
{
	return d->domid;
}

/* ---- grants, grantor side ---- */

int xbd_gntshr_open(struct xbd_domain *d, struct xbd_gntshr **out)
{
	return d->p->ops->gntshr_open(d, out);
}

void xbd_gntshr_close(struct xbd_gntshr *gs)
{
	if (gs)
		gs->p->ops->gntshr_close(gs);
}

int xbd_gntshr_share_pages(struct xbd_gntshr *gs, xbd_domid_t remote,
			   unsigned int count, xbd_grant_ref_t *refs,
			   bool writable, void **addr)
{
	if (count == 0 || !refs || !addr)
		return -EINVAL;
	return gs->p->ops->gntshr_share_pages(gs, remote, count, refs, writable, addr);
}

int xbd_gntshr_unshare(struct xbd_gntshr *gs, void *addr, unsigned int count)
{
	if (count == 0 || !addr)
		return -EINVAL;
	return gs->p->ops->gntshr_unshare(gs, addr, count);
}

/* ---- grants, mapper side ---- */

int xbd_gnttab_open(struct xbd_platform *p, xbd_domid_t self,
		    struct xbd_gnttab **out)
{
	return p->ops->gnttab_open(p, self, out);
}

void xbd_gnttab_close(struct xbd_gnttab *gt)
{
	if (gt)
		gt->p->ops->gnttab_close(gt);
}

int xbd_gnttab_map(struct xbd_gnttab *gt, xbd_domid_t remote, unsigned int count,
		   const xbd_grant_ref_t *refs, int prot, void **addr)
{
	if (count == 0 || !refs || !addr)
		return -EINVAL;
	return gt->p->ops->gnttab_map(gt, remote, count, refs, prot, addr);
}

int xbd_gnttab_unmap(struct xbd_gnttab *gt, void *addr, unsigned int count)
{
	if (count == 0 || !addr)
		return -EINVAL;
	return gt->p->ops->gnttab_unmap(gt, addr, count);
}

int xbd_gnttab_copy(struct xbd_gnttab *gt, unsigned int count,
		    struct xbd_gnttab_copy_seg *segs)
{
	if (count && !segs)
		return -EINVAL;
	return gt->p->ops->gnttab_copy(gt, count, segs);
}

/* ---- event channels ---- */

int xbd_evtchn_open(struct xbd_platform *p, xbd_domid_t self,
		    struct xbd_evtchn **out)
{
	return p->ops->evtchn_open(p, self, out);
}

void xbd_evtchn_close(struct xbd_evtchn *e)
{
	if (e)
		e->p->ops->evtchn_close(e);
}

int xbd_evtchn_fd(struct xbd_evtchn *e)
{
	return e->p->ops->evtchn_fd(e);
}

int xbd_evtchn_bind_unbound_port(struct xbd_evtchn *e, xbd_domid_t remote)
{
	return e->p->ops->evtchn_bind_unbound_port(e, remote);
}

int xbd_evtchn_bind_interdomain(struct xbd_evtchn *e, xbd_domid_t remote,
				xbd_evtchn_port_t remote_port)
{
	return e->p->ops->evtchn_bind_interdomain(e, remote, remote_port);
}

int xbd_evtchn_unbind(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	return e->p->ops->evtchn_unbind(e, port);
}

int xbd_evtchn_notify(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	return e->p->ops->evtchn_notify(e, port);
}

int xbd_evtchn_pending(struct xbd_evtchn *e)
{
	return e->p->ops->evtchn_pending(e);
}

int xbd_evtchn_unmask(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	return e->p->ops->evtchn_unmask(e, port);
}
