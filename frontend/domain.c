/* SPDX-License-Identifier: MIT */
/*
 * Domains by name, and a disk's size without opening it: the lookups a
 * guest program makes before it becomes the domain (xbdfront.h
 * xbdfront_domain_resolve, xbdfront_peek_sectors).  No state.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/xbdfront.h"
#include "lib/num.h"
#include "lib/platform/platform.h"
#include "lib/vdev.h"
#include "lib/xenbus.h"

/*
 * On Xen a frontend can only be the domain it runs in: its id and name are
 * the relative xenstore nodes "domid" and "name" (our own domain's, read
 * through /dev/xen/xenbus in a domU).  name NULL, our id or our name ->
 * our id; another id is returned as given (the claim refuses it, naming
 * ours); another name -> -ENOENT, since a domU cannot list the others.
 */
static int xen_resolve(const char *name, unsigned int *domid)
{
	struct xs_handle *xs = NULL;
	char own[128] = "";
	unsigned int self;
	long long id = name ? xbd_num_in(name, 0, XBD_DOMID_MAX) : -1;
	int rc;

	if (id >= 0) {
		*domid = (unsigned int)id;
		return 0;
	}
	rc = xbd_xs_open(NULL, &xs);
	if (rc)
		return rc;
	rc = xbd_xs_read_uint(xs, XBT_NULL, "domid", NULL, 0, XBD_DOMID_MAX, &self);
	if (rc)
		goto out;
	/* a domain without a name node (dom0 before xl sets it) is only
	 * reachable by id or by leaving the name out */
	if (name && (xbd_xs_read_buf(xs, XBT_NULL, "name", NULL, own, sizeof(own)) ||
		     strcmp(own, name))) {
		rc = -ENOENT;
		goto out;
	}
	*domid = self;
out:
	xs_close(xs);
	return rc;
}

/* A local domain by id or by the name it was created with (scanning
 * $rundir/dom<N>/). */
static int local_resolve(struct xbd_platform *p, const char *name, unsigned int *domid)
{
	struct xbd_domain_info info;
	struct dirent *e;
	long long id;
	DIR *dir;
	int rc = -ENOENT;

	if (!name)
		return -EINVAL;      /* a local process is no domain by itself */
	id = xbd_num_in(name, 1, XBD_DOMID_MAX);
	if (id > 0) {
		*domid = (unsigned int)id;
		return 0;
	}
	dir = opendir(xbd_platform_rundir(p));
	if (!dir)
		return -errno;
	while (rc && (e = readdir(dir))) {
		if (strncmp(e->d_name, "dom", 3) ||
		    (id = xbd_num_in(e->d_name + 3, 1, XBD_DOMID_MAX)) < 0)
			continue;
		if (!xbd_domain_get_info(p, (xbd_domid_t)id, &info) && info.exists &&
		    !strcmp(info.name, name)) {
			*domid = (unsigned int)id;
			rc = 0;
		}
	}
	closedir(dir);
	return rc;
}

static int platform_of(const struct xbdfront_opts *o, struct xbd_platform **out)
{
	enum xbd_platform_kind kind;
	int rc = xbd_platform_kind_parse(o && o->platform ? o->platform : "auto", &kind);

	return rc ? rc : xbd_platform_open(kind, o ? o->rundir : NULL, out);
}

int xbdfront_domain_resolve(const char *name, const struct xbdfront_opts *opts,
			    unsigned int *domid, int *claimer)
{
	struct xbd_domain_info info = { 0 };
	struct xbd_platform *p = NULL;
	int rc = platform_of(opts, &p);

	if (claimer)
		*claimer = 0;
	if (!rc)
		rc = xbd_platform_get_kind(p) == XBD_PLATFORM_XEN ? xen_resolve(name, domid)
								   : local_resolve(p, name, domid);
	if (!rc && claimer && !xbd_domain_get_info(p, (xbd_domid_t)*domid, &info))
		*claimer = (int)info.claimed_by;
	xbd_platform_close(p);
	return rc;
}

int xbdfront_peek_sectors(unsigned int domid, const char *vdev,
			  const struct xbdfront_opts *opts, uint64_t *sectors)
{
	struct xbd_platform *p = NULL;
	struct xs_handle *xs = NULL;
	char sock[4096], fe[96], be[256];
	struct xbd_vdev v;
	int rc = vdev ? xbd_vdev_parse(vdev, &v) : -EINVAL;

	if (rc || domid > XBD_DOMID_MAX)
		return -EINVAL;
	rc = platform_of(opts, &p);
	if (!rc && xbd_platform_get_kind(p) == XBD_PLATFORM_XEN)
		rc = xbd_xs_open(NULL, &xs);
	else if (!rc && snprintf(sock, sizeof(sock), "%s/dom%u/xenstore.sock",
				 xbd_platform_rundir(p), domid) >= (int)sizeof(sock))
		rc = -ENAMETOOLONG;
	else if (!rc)
		rc = xbd_xs_open(sock, &xs);
	snprintf(fe, sizeof(fe), "/local/domain/%u/device/vbd/%u", domid, v.devid);
	if (!rc)
		rc = xbd_xs_read_buf(xs, XBT_NULL, fe, "backend", be, sizeof(be));
	if (!rc)
		rc = xbd_xs_read_u64(xs, XBT_NULL, be, "sectors", 0, UINT64_MAX / 512, sectors);
	if (xs)
		xs_close(xs);
	xbd_platform_close(p);
	return rc;
}
