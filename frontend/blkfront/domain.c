/* SPDX-License-Identifier: MIT */
/* Domain NAME or ID -> domain id (see domain.h). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/blkfront/domain.h"
#include "lib/platform/platform.h"

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

int guest_resolve_domain(struct xbd_platform *p, const char *name, unsigned int *domid)
{
	struct xbd_domain_info info;
	long long id = guest_num(name, 1, XBD_DOMID_MAX);
	struct dirent *e;
	DIR *dir;
	int rc = -ENOENT;

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
