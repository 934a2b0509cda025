/* SPDX-License-Identifier: MIT */
/* Domain NAME or ID -> domain id (see domain.h). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/blkfront/domain.h"
#include "lib/platform/platform.h"
#include "lib/xenbus.h"

long long guest_num(const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return v;
}

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
	long long id = name ? guest_num(name, 0, XBD_DOMID_MAX) : -1;
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
	 * reachable by id or by leaving --domain out */
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

int guest_resolve_domain(struct xbd_platform *p, const char *name, unsigned int *domid)
{
	struct xbd_domain_info info;
	long long id;
	struct dirent *e;
	DIR *dir;
	int rc = -ENOENT;

	if (xbd_platform_get_kind(p) == XBD_PLATFORM_XEN)
		return xen_resolve(name, domid);
	if (!name)
		return -EINVAL;      /* a local process is no domain by itself */
	id = guest_num(name, 1, XBD_DOMID_MAX);
	if (id > 0) {
		*domid = (unsigned int)id;
		return 0;
	}
	dir = opendir(xbd_platform_rundir(p));
	if (!dir)
		return -errno;
	while (rc && (e = readdir(dir))) {
		if (strncmp(e->d_name, "dom", 3) ||
		    (id = guest_num(e->d_name + 3, 1, XBD_DOMID_MAX)) < 0)
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
