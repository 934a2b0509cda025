/* SPDX-License-Identifier: MIT */
/*
 * The xenstore nodes of a vbd (what libxl 4.17 writes for a phy disk),
 * their removal, and listing; used by the block-* and domain-* commands.
 */
#ifndef XBD_TOOLS_VBD_H
#define XBD_TOOLS_VBD_H

#include "diskspec.h"
#include "vdev.h"
#include "xbd.h"

struct xbd_vbd_paths {
	char fe[96];      /* /local/domain/<d>/device/vbd/<devid> */
	char be[128];     /* /local/domain/<b>/backend/vbd/<d>/<devid> */
	char libxl[96];   /* /libxl/<d>/device/vbd/<devid> */
};

void xbd_vbd_paths(struct xbd_vbd_paths *p, xbd_domid_t fe, xbd_domid_t be,
		   uint32_t devid);
/* Validate a backend path read from xenstore against the frontend and
 * device it must belong to; -EINVAL otherwise. */
int xbd_vbd_parse_backend_path(const char *path, xbd_domid_t fe, uint32_t devid,
			       xbd_domid_t *be);

/* I/O limits for the backend (its nodes read-iops, ..., read at probe;
 * the backend's limits/ files in the tree once it runs). */
#define XBD_NR_LIMITS 8
extern const char *const xbd_limit_names[XBD_NR_LIMITS];

struct xbd_vbd_attach {
	const struct xbd_disk *disk;
	xbd_domid_t fe, be;
	bool has_limit[XBD_NR_LIMITS];
	uint64_t limit[XBD_NR_LIMITS];
};

/* Parse "KEY=N[,KEY=N...]" into a->limit.  0, or -EINVAL with a message
 * in err. */
int xbd_vbd_parse_limits(const char *arg, struct xbd_vbd_attach *a, char *err,
			 size_t errlen);

/*
 * Write the backend, frontend and libxl directories of a vbd in one
 * transaction, with libxl's permissions.  -EEXIST (nothing written) when
 * any of the three exists, -ESRCH when either domain has gone.
 */
int xbd_vbd_write(struct xs_handle *xs, const struct xbd_vbd_attach *a);

/*
 * Detach one vbd: online=0 and Closing, wait up to timeout_ms for the
 * backend to reach Closed (not at all if no backend picked it up), then
 * remove the three directories and both ends' error nodes, with their
 * parents when left empty.  On a timeout without force the nodes stay
 * and -ETIMEDOUT is returned.  Prints its errors.  -ENOENT when the
 * domain has no such device.
 */
int xbd_vbd_detach(struct xbd_ctx *c, xbd_domid_t domid, uint32_t devid,
		   bool force, int timeout_ms);
/* Device ids of a domain's vbds (frontend dirs), sorted.  *ids malloc'd. */
int xbd_vbd_list(struct xbd_ctx *c, xbd_domid_t domid, uint32_t **ids,
		 unsigned int *n);

#endif
