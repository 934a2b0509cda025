/* SPDX-License-Identifier: MIT */
/*
 * xbd block-resize DOMAIN VDEV SIZE: grow a file-backed disk while its
 * guest runs.
 *
 * The backend serves what its store measures: it asks the store for its
 * size every size_check_ms and announces a larger one to the frontend
 * (backend/xenbus.c, be_dev_check_size).  So growing the disk is growing
 * its file; this command does that for a raw file (the driver and target
 * the backend opened, its xbd-storage node), refuses what it cannot do
 * itself (a block device, an RBD image, an NBD export: grow those with
 * their own tools, the backend notices the first two), refuses to
 * shrink, and waits (--timeout) until the backend announced the new
 * `sectors`.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vbd.h"

#define RESIZE_MAX (UINT64_C(1) << 60)   /* bytes: far above any file system */

/* The file behind the backend's vbd at be: the backend's xbd-storage
 * ("raw:/path"), else a params that is a plain path (a backend that
 * writes no xbd-storage, as Linux blkback).  Prints the error. */
static int backing_file(struct xbd_ctx *c, const char *be, const char *vdev, char *path,
			size_t len)
{
	char st[1100];

	if (xbd_xs_read_buf(c->xs, XBT_NULL, be, "xbd-storage", st, sizeof(st)) == 0) {
		if (strncmp(st, "raw:", 4)) {
			xbd_err("%s is served by the %.*s driver: block-resize grows files; "
				"grow the store itself (the backend notices an RBD image)",
				vdev, (int)strcspn(st, ":"), st);
			return -EOPNOTSUPP;
		}
		snprintf(path, len, "%s", st + 4);
		return 0;
	}
	if (xbd_xs_read_buf(c->xs, XBT_NULL, be, "params", path, len) || path[0] != '/') {
		xbd_err("%s: the backend has not opened a file for it", vdev);
		return -ENOENT;
	}
	return 0;
}

struct size_wait {
	const char *be;
	uint64_t sectors;
};

static int announced(struct xs_handle *xs, void *arg)
{
	const struct size_wait *w = arg;
	uint64_t v;
	int rc = xbd_xs_read_u64(xs, XBT_NULL, w->be, "sectors", 0, UINT64_MAX, &v);

	if (rc == -ENOENT && xbd_xs_exists(xs, XBT_NULL, w->be, NULL) != 1)
		return -ENODEV;
	return rc == 0 && v >= w->sectors;
}

/* Grow the regular file path to size bytes: 0, or 1 after the message. */
static int grow(const char *path, const char *vdev, uint64_t size)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0 || fstat(fd, &st)) {
		xbd_err("cannot open %s (the file of %s): %s", path, vdev, strerror(errno));
		rc = 1;
	} else if (!S_ISREG(st.st_mode)) {
		xbd_err("%s (the store of %s) is not a regular file: grow the device "
			"itself, the backend notices", path, vdev);
		rc = 1;
	} else if (size < (uint64_t)st.st_size) {
		xbd_err("refusing to shrink %s from %lld to %" PRIu64 " bytes: a disk "
			"in use cannot shrink", vdev, (long long)st.st_size, size);
		rc = 1;
	} else if (size > (uint64_t)st.st_size && ftruncate(fd, (off_t)size)) {
		xbd_err("cannot grow %s to %" PRIu64 " bytes: %s", path, size, strerror(errno));
		rc = 1;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

int cmd_block_resize(struct xbd_ctx *c, int argc, char **argv)
{
	struct xbd_vbd_paths p;
	struct xbd_opts o;
	struct xbd_vdev v;
	struct size_wait w;
	char be[XBD_XS_PATH_MAX], path[1100];
	xbd_domid_t domid, be_id;
	uint64_t size;
	int i = xbd_parse_opts(argc, argv, XBD_OPT_TIMEOUT, 3, 3, &o), rc;

	if (i < 0)
		return i == -2 ? 0 : 2;
	if (xbd_parse_size(argv[i + 2], RESIZE_MAX, &size) || !size || size % 512) {
		xbd_err("invalid size '%s': bytes, or a number with K, M or G (x1024), "
			"a multiple of 512", argv[i + 2]);
		return 2;
	}
	if (xbd_vdev_parse(argv[i + 1], &v)) {
		xbd_err("invalid virtual disk identifier '%s'", argv[i + 1]);
		return 1;
	}
	if (xbd_ctx_open(c) || xbd_resolve_domain(c, argv[i], &domid))
		return 1;
	xbd_vbd_paths(&p, domid, 0, v.devid);
	if ((xbd_xs_read_buf(c->xs, XBT_NULL, p.libxl, "backend", be, sizeof(be)) &&
	     xbd_xs_read_buf(c->xs, XBT_NULL, p.fe, "backend", be, sizeof(be))) ||
	    xbd_vbd_parse_backend_path(be, domid, v.devid, &be_id)) {
		xbd_err("domain %s has no disk %s", argv[i], argv[i + 1]);
		return 1;
	}
	if (backing_file(c, be, argv[i + 1], path, sizeof(path)) ||
	    grow(path, argv[i + 1], size))
		return 1;
	if (o.timeout_ms <= 0)
		return 0;
	w = (struct size_wait){ .be = be, .sectors = size / 512 };
	rc = xbd_xs_wait(c->xs, be, o.timeout_ms, announced, &w);
	if (rc == -ETIMEDOUT)
		xbd_err("%s grew to %" PRIu64 " bytes, but its backend did not announce "
			"it within %.1f s (is it running, is size_check_ms 0?)", path, size,
			o.timeout_ms / 1000.0);
	else if (rc)
		xbd_err("waiting for the backend of %s: %s", argv[i + 1], strerror(-rc));
	return rc ? 1 : 0;
}
