/* SPDX-License-Identifier: MIT */
/*
 * The xenstore side of a vbd: the nodes libxl 4.17 writes for a phy disk
 * (device_disk_add + libxl__device_generic_add), their removal
 * (libxl__initiate_device_generic_remove + libxl__device_destroy), and
 * listing.
 *
 *   backend  /local/domain/<b>/backend/vbd/<d>/<devid>   n<b> r<d>
 *     frontend params script frontend-id online removable bootable state
 *     dev type mode device-type [direct-io-safe] discard-enable specification
 *   frontend /local/domain/<d>/device/vbd/<devid>        n<d> r<b>
 *     backend backend-id state virtual-device device-type trusted protocol
 *   libxl    /libxl/<d>/device/vbd/<devid>               n0
 *     frontend backend + a copy of the backend's entries
 */
#include "vbd.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xen/io/protocols.h>

#include "num.h"

int xbd_parse_timeout(const char *s, int *ms)
{
	double v;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || v < 0 || v > 86400)
		return -EINVAL;
	*ms = (int)(v * 1000 + 0.5);
	return 0;
}

void xbd_vbd_paths(struct xbd_vbd_paths *p, xbd_domid_t fe, xbd_domid_t be,
		   uint32_t devid)
{
	*p = (struct xbd_vbd_paths){ 0 };   /* every byte defined, whatever fits */
	snprintf(p->fe, sizeof(p->fe), "/local/domain/%u/device/vbd/%u", fe, devid);
	snprintf(p->be, sizeof(p->be), "/local/domain/%u/backend/vbd/%u/%u",
		 be, fe, devid);
	snprintf(p->libxl, sizeof(p->libxl), "/libxl/%u/device/vbd/%u", fe, devid);
}

/* "/local/domain/<b>/backend/vbd/<fe>/<devid>" exactly; -EINVAL else. */
int xbd_vbd_parse_backend_path(const char *path, xbd_domid_t fe, uint32_t devid,
			       xbd_domid_t *be)
{
	unsigned int b, f, d;
	int n = -1;

	if (sscanf(path, "/local/domain/%5u/backend/vbd/%5u/%10u%n", &b, &f, &d, &n) != 3 ||
	    n < 0 || path[n] != '\0' || b > XBD_DOMID_MAX || f != fe || d != devid)
		return -EINVAL;
	*be = (xbd_domid_t)b;
	return 0;
}

/* ---- attach ----------------------------------------------------------- */

/* The backend's names (backend/limit.c), tree and xenstore spellings. */
const char *const xbd_limit_names[XBD_NR_LIMITS] = {
	"read_iops", "write_iops", "read_bps", "write_bps",
	"read_iops_burst", "write_iops_burst", "read_bps_burst", "write_bps_burst",
};
static const char *const limit_nodes[XBD_NR_LIMITS] = {
	"read-iops", "write-iops", "read-bps", "write-bps",
	"read-iops-burst", "write-iops-burst", "read-bps-burst", "write-bps-burst",
};
#define XBD_LIMIT_MAX (UINT64_C(1) << 48)   /* as the backend takes */

/* N, or N with K, M or G (x1024), at most max: lib/num.h, as every size
 * xbd takes (I/O limits here, `xbd block-resize`). */
int xbd_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	long long v = xbd_size(s, 0, max > LLONG_MAX ? LLONG_MAX : max);

	if (v < 0)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

int xbd_vbd_parse_limits(const char *arg, struct xbd_vbd_attach *a, char *err,
			 size_t errlen)
{
	char buf[512], *save = NULL, *item;

	if (snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf)) {
		snprintf(err, errlen, "--limit: too long");
		return -EINVAL;
	}
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		unsigned int i;

		if (eq)
			*eq = '\0';
		for (i = 0; i < XBD_NR_LIMITS && strcmp(xbd_limit_names[i], item); i++)
			;
		if (!eq || i == XBD_NR_LIMITS) {
			snprintf(err, errlen, "--limit: '%s' is not KEY=N with KEY one of "
				 "read_iops, write_iops, read_bps, write_bps and their "
				 "_burst", item);
			return -EINVAL;
		}
		if (xbd_parse_size(eq + 1, XBD_LIMIT_MAX, &a->limit[i])) {
			snprintf(err, errlen, "--limit: %s=%s: not a number up to 2^48 "
				 "(K, M, G: x1024)", item, eq + 1);
			return -EINVAL;
		}
		a->has_limit[i] = true;
	}
	return 0;
}

struct kv {
	const char *key;
	char val[4200];
};

/* The backend entries in libxl's order; returns how many. */
static unsigned int backend_entries(const struct xbd_vbd_attach *a, struct kv *kv)
{
	const struct xbd_disk *d = a->disk;
	unsigned int n = 0;

#define KV(k, ...) do { kv[n].key = (k); \
	snprintf(kv[n].val, sizeof(kv[n].val), __VA_ARGS__); n++; } while (0)
	/* libxl's FORMAT:PATH for a qcow2 image; a URI or path as it is. */
	KV("params", "%s%s", d->qcow2 ? "qcow2:" : "", d->target);
	KV("script", "%s", d->script);
	KV("frontend-id", "%u", a->fe);
	KV("online", "1");
	KV("removable", "%d", d->removable ? 1 : 0);
	KV("bootable", "1");
	KV("state", "%d", XenbusStateInitialising);
	KV("dev", "%s", d->vdev);
	KV("type", "phy");
	KV("mode", "%s", d->readwrite ? "w" : "r");
	KV("device-type", "%s", d->cdrom ? "cdrom" : "disk");
	if (d->direct_io_safe)
		KV("direct-io-safe", "1");
	KV("discard-enable", "%d", d->discard ? 1 : 0);
	KV("specification", "xen");
	for (unsigned int i = 0; i < XBD_NR_LIMITS; i++)
		if (a->has_limit[i])
			KV(limit_nodes[i], "%" PRIu64, a->limit[i]);
#undef KV
	return n;
}

static int write_kvs(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		     const struct kv *kv, unsigned int n)
{
	int rc = 0;

	for (unsigned int i = 0; i < n && rc == 0; i++)
		rc = xbd_xs_write(xs, t, dir, kv[i].key, kv[i].val);
	return rc;
}

static int mkdir_owned(struct xs_handle *xs, xs_transaction_t t, const char *path,
		       xbd_domid_t owner, xbd_domid_t reader, unsigned int nperms)
{
	const struct xs_permissions p[2] = {
		{ .id = owner, .perms = XS_PERM_NONE },
		{ .id = reader, .perms = XS_PERM_READ },
	};

	return xbd_xs_mkdir_perms(xs, t, path, p, nperms);
}

/* -EEXIST if any of the three directories exists. */
static int check_free(struct xs_handle *xs, xs_transaction_t t,
		      const struct xbd_vbd_paths *p)
{
	const char *dirs[] = { p->fe, p->be, p->libxl };

	for (size_t i = 0; i < 3; i++) {
		int rc = xbd_xs_exists(xs, t, dirs[i], NULL);
		if (rc)
			return rc < 0 ? rc : -EEXIST;
	}
	return 0;
}

static int attach_txn(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	const struct xbd_vbd_attach *a = arg;
	struct xbd_vbd_paths p;
	static struct kv kv[24];       /* single-threaded tool; too big for the stack */
	char dom[64];
	unsigned int n;
	int rc;

	xbd_vbd_paths(&p, a->fe, a->be, a->disk->devid);
	/* Both domains must still be there when the transaction commits. */
	snprintf(dom, sizeof(dom), "/local/domain/%u", a->fe);
	rc = xbd_xs_exists(xs, t, dom, NULL);
	snprintf(dom, sizeof(dom), "/local/domain/%u", a->be);
	if (rc == 1)
		rc = xbd_xs_exists(xs, t, dom, NULL);
	if (rc != 1)
		return rc < 0 ? rc : -ESRCH;
	rc = check_free(xs, t, &p);
	if (rc)
		return rc;
	n = backend_entries(a, kv);
	rc = mkdir_owned(xs, t, p.libxl, 0, 0, 1);
	rc = rc ? rc : xbd_xs_write(xs, t, p.libxl, "frontend", p.fe);
	rc = rc ? rc : xbd_xs_write(xs, t, p.libxl, "backend", p.be);
	rc = rc ? rc : mkdir_owned(xs, t, p.be, a->be, a->fe, 2);
	rc = rc ? rc : xbd_xs_write(xs, t, p.be, "frontend", p.fe);
	rc = rc ? rc : write_kvs(xs, t, p.be, kv, n);
	rc = rc ? rc : write_kvs(xs, t, p.libxl, kv, n);
	rc = rc ? rc : mkdir_owned(xs, t, p.fe, a->fe, a->be, 2);
	rc = rc ? rc : xbd_xs_write(xs, t, p.fe, "backend", p.be);
	rc = rc ? rc : xbd_xs_printf(xs, t, p.fe, "backend-id", "%u", a->be);
	rc = rc ? rc : xbd_xs_printf(xs, t, p.fe, "state", "%d", XenbusStateInitialising);
	rc = rc ? rc : xbd_xs_printf(xs, t, p.fe, "virtual-device", "%u", a->disk->devid);
	rc = rc ? rc : xbd_xs_write(xs, t, p.fe, "device-type",
				    a->disk->cdrom ? "cdrom" : "disk");
	rc = rc ? rc : xbd_xs_write(xs, t, p.fe, "trusted", a->disk->trusted ? "1" : "0");
	/* A local domain is a PV guest of this host's ABI. */
	rc = rc ? rc : xbd_xs_write(xs, t, p.fe, "protocol", XEN_IO_PROTO_ABI_NATIVE);
	return rc;
}

int xbd_vbd_write(struct xs_handle *xs, const struct xbd_vbd_attach *a)
{
	return xbd_xs_transaction(xs, attach_txn, (void *)a);
}

/* ---- removal ------------------------------------------------------------ */

/* Remove path, then its parents while they are empty, stopping below
 * stop_depth path components (libxl__xs_path_cleanup, bounded so that
 * what domain-create made stays). */
static int rm_and_prune(struct xs_handle *xs, xs_transaction_t t,
			const char *path, int stop_depth)
{
	char p[XBD_XS_PATH_MAX];
	int rc = xbd_xs_rm(xs, t, path, NULL);

	snprintf(p, sizeof(p), "%s", path);
	for (;;) {
		char *slash = strrchr(p, '/'), **kids = NULL;
		unsigned int n = 0, depth = 0;

		if (rc || !slash || slash == p)
			return rc;
		*slash = '\0';
		for (char *c = p; *c; c++)
			depth += *c == '/';
		if ((int)depth <= stop_depth)
			return 0;
		rc = xbd_xs_directory(xs, t, p, NULL, &kids, &n);
		free(kids);
		if (rc == -ENOENT)
			return 0;
		if (rc || n)
			return rc;
		rc = xbd_xs_rm(xs, t, p, NULL);
	}
}

struct remove_arg {
	struct xbd_vbd_paths p;
	xbd_domid_t fe, be;
	bool have_be;     /* p.be is the validated backend path */
};

static int remove_txn(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	const struct remove_arg *a = arg;
	char fe_err[XBD_XS_PATH_MAX], be_err[XBD_XS_PATH_MAX];
	int rc;

	/* Depths: /local/domain/<b>/backend is 4, /local/domain/<d>/device 4,
	 * /local/domain/<d>/error 4, /libxl/<d>/device 3. */
	rc = a->have_be ? rm_and_prune(xs, t, a->p.be, 3) : 0;
	rc = rc ? rc : rm_and_prune(xs, t, a->p.fe, 4);
	rc = rc ? rc : rm_and_prune(xs, t, a->p.libxl, 3);
	/* The Linux-style error nodes of both ends (xbd_xenbus_dev_error). */
	if (rc == 0 && xbd_xenbus_error_path(a->p.fe, fe_err, sizeof(fe_err)) == 0)
		rc = rm_and_prune(xs, t, fe_err, 4);
	if (rc == 0 && a->have_be &&
	    xbd_xenbus_error_path(a->p.be, be_err, sizeof(be_err)) == 0)
		rc = rm_and_prune(xs, t, be_err, 4);
	return rc;
}

static int close_txn(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	const struct remove_arg *a = arg;
	enum xenbus_state s;
	int rc = a->have_be ? xbd_xs_exists(xs, t, a->p.be, NULL) : 0;

	if (rc <= 0)
		return rc;
	rc = xbd_xenbus_read_state(xs, t, a->p.be, &s);
	if (rc == 0 && s == XenbusStateClosed)
		return 0;
	rc = xbd_xs_write(xs, t, a->p.be, "online", "0");
	return rc ? rc : xbd_xs_printf(xs, t, a->p.be, "state", "%d", XenbusStateClosing);
}

/* Where the vbd's backend is: the libxl copy first (trusted), else the
 * frontend's "backend" node, validated either way. */
static int find_backend(struct xbd_ctx *c, struct remove_arg *a, uint32_t devid)
{
	char be[XBD_XS_PATH_MAX];
	int rc;

	xbd_vbd_paths(&a->p, a->fe, 0, devid);
	rc = xbd_xs_read_buf(c->xs, XBT_NULL, a->p.libxl, "backend", be, sizeof(be));
	if (rc == -ENOENT)
		rc = xbd_xs_read_buf(c->xs, XBT_NULL, a->p.fe, "backend", be, sizeof(be));
	/* A frontend dir without a backend path is a broken device. */
	if (rc == -ENOENT && xbd_xs_exists(c->xs, XBT_NULL, a->p.fe, NULL) == 1)
		rc = -EINVAL;
	if (rc == 0)
		rc = xbd_vbd_parse_backend_path(be, a->fe, devid, &a->be);
	if (rc == -EINVAL || rc == -E2BIG)
		return -EINVAL;
	if (rc)
		return rc;
	xbd_vbd_paths(&a->p, a->fe, a->be, devid);
	a->have_be = true;
	return 0;
}

static const char *vdev_label(uint32_t devid, char *buf, size_t len)
{
	if (xbd_vdev_name(devid, buf, len) < 0)
		snprintf(buf, len, "%u", devid);
	return buf;
}

int xbd_vbd_detach(struct xbd_ctx *c, xbd_domid_t domid, uint32_t devid,
		   bool force, int timeout_ms)
{
	struct remove_arg a = { .fe = domid };
	enum xenbus_state s = XenbusStateUnknown;
	char name[XBD_VDEV_NAME_MAX];
	int rc = find_backend(c, &a, devid);

	vdev_label(devid, name, sizeof(name));
	if (rc == -ENOENT) {
		xbd_err("domain %u has no disk %s", domid, name);
		return -ENOENT;
	}
	if (rc == -EINVAL && !force) {
		xbd_err("disk %s of domain %u has an invalid backend path; use --force", name, domid);
		return rc;
	}
	if (rc && rc != -EINVAL) {
		xbd_err("cannot read disk %s of domain %u: %s", name, domid, strerror(-rc));
		return rc;
	}
	if (rc == 0) {
		rc = xbd_xenbus_read_state(c->xs, XBT_NULL, a.p.be, &s);
		rc = rc ? rc : xbd_xs_transaction(c->xs, close_txn, &a);
	}
	/* A backend that never picked the device up (Initialising) has
	 * nothing to close: no wait. */
	if (rc == 0 && timeout_ms > 0 && s != XenbusStateInitialising &&
	    s != XenbusStateUnknown)
		rc = xbd_xenbus_wait_state(c->xs, a.p.be, 1u << XenbusStateClosed,
					   timeout_ms, &s);
	if (rc && !force) {
		xbd_err("backend of disk %s (domain %u) did not close within %.1f s "
			"(state %s); 'block-detach --force' removes it anyway",
			name, domid, timeout_ms / 1000.0, xbd_xenbus_state_name(s));
		return rc;
	}
	rc = xbd_xs_transaction(c->xs, remove_txn, &a);
	if (rc)
		xbd_err("cannot remove disk %s of domain %u: %s", name, domid, strerror(-rc));
	return rc;
}

/* ---- listing -------------------------------------------------------------- */

int xbd_vbd_list(struct xbd_ctx *c, xbd_domid_t domid, uint32_t **ids,
		 unsigned int *n)
{
	char dir[64], **names = NULL;
	unsigned int count = 0, k = 0;
	uint32_t *out;
	int rc;

	snprintf(dir, sizeof(dir), "/local/domain/%u/device/vbd", domid);
	rc = xbd_xs_directory(c->xs, XBT_NULL, dir, NULL, &names, &count);
	if (rc == -ENOENT) {
		rc = 0;
		count = 0;
	}
	if (rc)
		return rc;
	out = calloc(count ? count : 1, sizeof(*out));
	if (!out) {
		free(names);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < count; i++) {
		const char *id = names[i];
		struct xbd_vdev v;
		/* Only canonical decimal ids name vbds. */
		if (strspn(id, "0123456789") == strlen(id) &&
		    (id[0] != '0' || id[1] == '\0') && xbd_vdev_parse(id, &v) == 0)
			out[k++] = v.devid;
	}
	free(names);
	qsort(out, k, sizeof(*out), xbd_cmp_u32);
	*ids = out;
	*n = k;
	return 0;
}
