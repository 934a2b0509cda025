/* SPDX-License-Identifier: MIT */
/*
 * xbd block-attach / block-detach / block-list: the arguments of xl's
 * commands of the same names, and the same xenstore effects (vbd.c).
 *
 * Attach waits, like libxl__wait_device_connection, up to the timeout for
 * the backend to leave Initialising.  If no backend answers in time the
 * nodes stay (as libxl leaves them), so a backend started later still
 * picks the disk up; `block-detach` removes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vbd.h"

/* ---- block-attach ------------------------------------------------------ */

/* 1 if the target cannot be written, 0 if it can, -errno to report. */
static int target_read_only(const char *path, const struct stat *st, int rdfd)
{
	int ro = 0, fd;

	if (S_ISREG(st->st_mode) && !(st->st_mode & 0222))
		return 1;           /* even root honours the file's mode here */
	if (S_ISBLK(st->st_mode) && ioctl(rdfd, BLKROGET, &ro) == 0 && ro)
		return 1;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == EACCES || errno == EPERM || errno == EROFS)
		return 1;
	return -errno;
}

/* Missing, unreadable, of the wrong type, or read-only but asked rw. */
static int check_target(const struct xbd_disk *d)
{
	struct stat st;
	int fd, rc;

	if (d->uri)
		return 0;     /* the backend connects, and says why it cannot */
	if (stat(d->target, &st) < 0) {
		if (errno == ENOENT)
			xbd_err("target %s does not exist", d->target);
		else
			xbd_err("cannot stat target %s: %s", d->target, strerror(errno));
		return -ENOENT;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		xbd_err("target %s is not a regular file or a block device", d->target);
		return -EINVAL;
	}
	fd = open(d->target, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		xbd_err("cannot read target %s: %s", d->target, strerror(errno));
		return -EACCES;
	}
	rc = d->readwrite ? target_read_only(d->target, &st, fd) : 0;
	close(fd);
	if (rc == 1)
		xbd_err("target %s is read-only but access is rw; attach it with "
			"access=ro", d->target);
	else if (rc < 0)
		xbd_err("cannot open target %s for writing: %s", d->target, strerror(-rc));
	return rc ? -EROFS : 0;
}

/* The backend's reason for closing, from its error node(s). */
static void backend_error(struct xbd_ctx *c, const char *be, char *buf, size_t len)
{
	char epath[XBD_XS_PATH_MAX];

	if (xbd_xs_read_buf(c->xs, XBT_NULL, be, "error", buf, len) == 0)
		return;
	if (xbd_xenbus_error_path(be, epath, sizeof(epath)) == 0 &&
	    xbd_xs_read_buf(c->xs, XBT_NULL, epath, "error", buf, len) == 0)
		return;
	snprintf(buf, len, "no error node");
}

struct attach_wait {
	const char *be;
	enum xenbus_state s;
};

/* Done once the backend left Initialising; -ENODEV if the device was
 * removed meanwhile (someone detached it). */
static int attach_cond(struct xs_handle *xs, void *arg)
{
	struct attach_wait *w = arg;
	int rc = xbd_xs_exists(xs, XBT_NULL, w->be, NULL);

	if (rc <= 0)
		return rc < 0 ? rc : -ENODEV;
	rc = xbd_xenbus_read_state(xs, XBT_NULL, w->be, &w->s);
	if (rc == -EINVAL)
		return 0;               /* garbage in state: not an answer */
	return rc ? rc : w->s >= XenbusStateInitWait;
}

/* Wait for the backend to leave Initialising; report the outcome. */
static int wait_backend(struct xbd_ctx *c, const struct xbd_vbd_attach *a,
			int timeout_ms)
{
	struct xbd_vbd_paths p;
	struct attach_wait w = { .be = p.be, .s = XenbusStateUnknown };
	const char *vdev = a->disk->vdev;
	char msg[512];
	int rc;

	xbd_vbd_paths(&p, a->fe, a->be, a->disk->devid);
	rc = xbd_xs_wait(c->xs, p.be, timeout_ms, attach_cond, &w);
	if (rc == -ETIMEDOUT)
		xbd_err("no backend in domain %u answered for %s within %.1f s (state %s); "
			"the nodes stay for a backend that starts later, "
			"'xbd block-detach %u %s' removes them", a->be, vdev,
			timeout_ms / 1000.0, xbd_xenbus_state_name(w.s), a->fe, vdev);
	else if (rc == -ENODEV)
		xbd_err("%s was removed while waiting for its backend", vdev);
	else if (rc)
		xbd_err("waiting for the backend of %s: %s", vdev, strerror(-rc));
	if (rc || w.s < XenbusStateClosing)
		return rc;
	backend_error(c, p.be, msg, sizeof(msg));
	xbd_err("backend closed %s (%s): %s; 'xbd block-detach %u %s' removes it",
		vdev, xbd_xenbus_state_name(w.s), msg, a->fe, vdev);
	return -EIO;
}

static int write_nodes(struct xbd_ctx *c, const struct xbd_vbd_attach *a)
{
	int rc = xbd_vbd_write(c->xs, a);

	if (rc == -EEXIST)
		xbd_err("vdev %s (device %u) is already in use by domain %u",
			a->disk->vdev, a->disk->devid, a->fe);
	else if (rc == -ESRCH)
		xbd_err("domain %u or %u went away", a->fe, a->be);
	else if (rc)
		xbd_err("cannot write the nodes of %s: %s", a->disk->vdev, strerror(-rc));
	return rc;
}

int cmd_block_attach(struct xbd_ctx *c, int argc, char **argv)
{
	struct xbd_disk disk;
	struct xbd_vbd_attach a = { .disk = &disk };
	struct xbd_opts o;
	char err[512];
	int i = xbd_parse_opts(argc, argv, XBD_OPT_TIMEOUT | XBD_OPT_LIMIT, 2, -1, &o);

	if (i < 0)
		return i == -2 ? 0 : 2;
	for (unsigned int k = 0; k < o.nlimit; k++)
		if (xbd_vbd_parse_limits(o.limit[k], &a, err, sizeof(err))) {
			xbd_err("%s", err);
			return 2;
		}
	if (xbd_ctx_open(c) || xbd_resolve_domain(c, argv[i], &a.fe))
		return 1;
	if (xbd_diskspec_parse(argc - i - 1, (const char *const *)argv + i + 1,
			       &disk, err, sizeof(err))) {
		xbd_err("%s", err);
		return 1;
	}
	if (xbd_resolve_domain(c, disk.backend[0] ? disk.backend : "0", &a.be))
		return 1;
	if (check_target(&disk) || write_nodes(c, &a))
		return 1;
	if (o.timeout_ms > 0 && wait_backend(c, &a, o.timeout_ms))
		return 1;
	return 0;
}

/* ---- block-detach -------------------------------------------------------- */

int cmd_block_detach(struct xbd_ctx *c, int argc, char **argv)
{
	struct xbd_opts o;
	struct xbd_vdev v;
	xbd_domid_t domid;
	int i = xbd_parse_opts(argc, argv, XBD_OPT_TIMEOUT | XBD_OPT_FORCE, 2, 2, &o);

	if (i < 0)
		return i == -2 ? 0 : 2;
	if (xbd_vdev_parse(argv[i + 1], &v)) {
		xbd_err("invalid virtual disk identifier '%s'", argv[i + 1]);
		return 1;
	}
	if (xbd_ctx_open(c) || xbd_resolve_domain(c, argv[i], &domid))
		return 1;
	return xbd_vbd_detach(c, domid, v.devid, o.force, o.timeout_ms) ? 1 : 0;
}

/* ---- block-list ------------------------------------------------------------ */

/* Append node's value (or "-1") to buf, comma-separated. */
static void append_value(struct xbd_ctx *c, const char *dir, const char *node,
			 const char *alt, char *buf, size_t len)
{
	unsigned int v;
	size_t used = strlen(buf);
	int rc = xbd_xs_read_uint(c->xs, XBT_NULL, dir, node, 0, UINT32_MAX, &v);

	if (rc && alt)
		rc = xbd_xs_read_uint(c->xs, XBT_NULL, dir, alt, 0, UINT32_MAX, &v);
	snprintf(buf + used, len - used, rc ? "%s-1" : "%s%u", used ? "," : "", v);
}

/* Event channels and first ring refs, one per queue. */
static void queue_columns(struct xbd_ctx *c, const char *fe, char *evt, char *ref,
			  size_t len)
{
	unsigned int nq = 1;
	char q[XBD_XS_PATH_MAX];

	evt[0] = ref[0] = '\0';
	if (xbd_xs_read_uint(c->xs, XBT_NULL, fe, "multi-queue-num-queues", 1, 256, &nq))
		nq = 1;
	for (unsigned int k = 0; k < nq; k++) {
		if (nq > 1)
			snprintf(q, sizeof(q), "%s/queue-%u", fe, k);
		else
			snprintf(q, sizeof(q), "%s", fe);
		append_value(c, q, "event-channel", NULL, evt, len);
		append_value(c, q, "ring-ref", "ring-ref0", ref, len);
	}
}

static void list_vbd(struct xbd_ctx *c, xbd_domid_t domid, uint32_t devid)
{
	struct xbd_vbd_paths p;
	char be[XBD_XS_PATH_MAX], evt[256], ref[256], st[1100];
	xbd_domid_t be_id = 0;
	enum xenbus_state s;
	int be_ok;

	xbd_vbd_paths(&p, domid, 0, devid);
	be_ok = xbd_xs_read_buf(c->xs, XBT_NULL, p.libxl, "backend", be, sizeof(be)) == 0 ||
		xbd_xs_read_buf(c->xs, XBT_NULL, p.fe, "backend", be, sizeof(be)) == 0;
	if (!be_ok || xbd_vbd_parse_backend_path(be, domid, devid, &be_id))
		snprintf(be, sizeof(be), "-");
	if (xbd_xenbus_read_state(c->xs, XBT_NULL, p.fe, &s))
		s = XenbusStateUnknown;
	queue_columns(c, p.fe, evt, ref, sizeof(evt));
	/* xbd's column: the driver and target the backend opened */
	if (!be_ok || xbd_xs_read_buf(c->xs, XBT_NULL, be, "xbd-storage", st, sizeof(st)))
		snprintf(st, sizeof(st), "-");
	printf("%-5u %-3u %-6u %-5d %-6s %-8s %-30s %s\n", devid, be_id, domid, (int)s,
	       evt, ref, be, st);
}

int cmd_block_list(struct xbd_ctx *c, int argc, char **argv)
{
	struct xbd_opts o;
	int i = xbd_parse_opts(argc, argv, 0, 1, -1, &o), status = 0;

	if (i < 0)
		return i == -2 ? 0 : 2;
	if (xbd_ctx_open(c))
		return 1;
	printf("%-5s %-3s %-6s %-5s %-6s %-8s %-30s %s\n", "Vdev", "BE", "handle",
	       "state", "evt-ch", "ring-ref", "BE-path", "storage");
	for (; i < argc; i++) {
		uint32_t *ids = NULL;
		unsigned int n = 0;
		xbd_domid_t domid;

		if (xbd_resolve_domain(c, argv[i], &domid) ||
		    xbd_vbd_list(c, domid, &ids, &n)) {
			status = 1;
			continue;
		}
		for (unsigned int k = 0; k < n; k++)
			list_vbd(c, domid, ids[k]);
		free(ids);
	}
	return status;
}
