/* SPDX-License-Identifier: MIT */
/*
 * Disk specifications: Xen's parser (xlu_disk_parse) into libxl's
 * libxl_device_disk, then copied and checked into struct xbd_disk.
 * Nothing here touches xenstore; see diskspec.h.
 */
#include "diskspec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxlutil.h>

#include "vdev.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The message is one line of printable text (diskspec.h): it quotes the
 * spec (a vdev, a script, libxlutil's report), which may hold any byte, so
 * everything else is written as \xNN, cut where err is full. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	char msg[1024];
	size_t n = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!errlen)
		return -EINVAL;
	for (const unsigned char *s = (const unsigned char *)msg; *s; s++) {
		bool plain = *s >= 0x20 && *s < 0x7f;

		if (n + (plain ? 1 : 4) >= errlen)
			break;
		if (plain)
			err[n++] = (char)*s;
		else
			n += (size_t)snprintf(err + n, errlen - n, "\\x%02x", *s);
	}
	err[n] = '\0';
	return -EINVAL;
}

/* Run xlu_disk_parse, capturing its report in err (first line only). */
static int run_parser(int nspecs, const char *const *specs,
		      libxl_device_disk *d, char *err, size_t errlen)
{
	char *report = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&report, &len);
	XLU_Config *cfg;
	int rc;

	if (!f)
		return -ENOMEM;
	cfg = xlu_cfg_init(f, "disk spec");
	if (!cfg) {
		fclose(f);
		free(report);
		return -ENOMEM;
	}
	rc = xlu_disk_parse(cfg, nspecs, specs, d);
	xlu_cfg_destroy(cfg);
	fclose(f);
	if (rc) {
		char *nl = report ? strchr(report, '\n') : NULL;
		if (nl)
			*nl = '\0';
		fail(err, errlen, "%s", report && *report ? report
		     : "unparsable disk specification");
		rc = -EINVAL;
	}
	free(report);
	return rc;
}

static bool defbool(libxl_defbool b, bool dflt)
{
	return libxl_defbool_is_default(b) ? dflt : libxl_defbool_val(b);
}

/* What libxlutil accepts but xbd (a phy-style blkif backend) cannot do. */
static int check_supported(const libxl_device_disk *d, char *err, size_t errlen)
{
	if (d->format != LIBXL_DISK_FORMAT_RAW &&
	    d->format != LIBXL_DISK_FORMAT_QCOW2 &&
	    d->format != LIBXL_DISK_FORMAT_UNKNOWN) {
		if (d->format == LIBXL_DISK_FORMAT_EMPTY)
			return fail(err, errlen, "empty cdrom drives are not supported "
				    "(they need qdisk); give a target");
		return fail(err, errlen, "unsupported format %s (only raw and qcow2)",
			    libxl_disk_format_to_string(d->format));
	}
	if (d->backend != LIBXL_DISK_BACKEND_UNKNOWN &&
	    d->backend != LIBXL_DISK_BACKEND_PHY)
		return fail(err, errlen, "unsupported backendtype=%s (only phy)",
			    libxl_disk_backend_to_string(d->backend));
	if (d->specification == LIBXL_DISK_SPECIFICATION_VIRTIO)
		return fail(err, errlen, "unsupported specification=virtio (only xen)");
	if (defbool(d->colo_enable, false))
		return fail(err, errlen, "COLO disks are not supported");
	if (d->script && strcmp(d->script, "block") != 0 &&
	    strcmp(d->script, XBD_XEN_SCRIPT_DIR "/block") != 0)
		return fail(err, errlen, "unsupported script=%s (xbd runs no "
			    "hotplug scripts; the target must be a path)", d->script);
	if (!d->pdev_path || !*d->pdev_path)
		return fail(err, errlen, "no target given");
	return 0;
}

static int copy_disk(const libxl_device_disk *d, struct xbd_disk *out,
		     char *err, size_t errlen)
{
	struct xbd_vdev v;
	int n, rc;

	/* An NBD URI is the backend's nbd driver's (Documentation/storage.md);
	 * else xl-disk-configuration(5): /dev is prepended to a relative
	 * target. */
	out->uri = !strncmp(d->pdev_path, "nbd://", 6) ||
		   !strncmp(d->pdev_path, "nbd+", 4) ||
		   !strncmp(d->pdev_path, "rbd:", 4);
	out->qcow2 = d->format == LIBXL_DISK_FORMAT_QCOW2;
	if (out->uri && out->qcow2)
		return fail(err, errlen, "format=qcow2 takes an image path, not an NBD URI");
	n = snprintf(out->target, sizeof(out->target), "%s%s",
		     d->pdev_path[0] == '/' || out->uri ? "" : "/dev/", d->pdev_path);
	if (n < 0 || (size_t)n >= sizeof(out->target))
		return fail(err, errlen, "target path too long");
	n = snprintf(out->vdev, sizeof(out->vdev), "%s", d->vdev);
	if (n < 0 || (size_t)n >= sizeof(out->vdev))
		return fail(err, errlen, "vdev too long");
	rc = xbd_vdev_parse(d->vdev, &v);
	if (rc)
		return fail(err, errlen, "invalid virtual disk identifier %s%s",
			    d->vdev, rc == -ERANGE ? " (disk or partition out of range)" : "");
	out->devid = v.devid;
	n = snprintf(out->backend, sizeof(out->backend), "%s",
		     d->backend_domname ? d->backend_domname : "");
	if (n < 0 || (size_t)n >= sizeof(out->backend))
		return fail(err, errlen, "backend domain name too long");
	snprintf(out->script, sizeof(out->script), "%s", XBD_XEN_SCRIPT_DIR "/block");
	out->readwrite = d->readwrite;
	out->cdrom = d->is_cdrom;
	out->removable = d->removable;
	out->discard = defbool(d->discard_enable, out->readwrite);
	out->trusted = defbool(d->trusted, true);
	out->direct_io_safe = d->direct_io_safe;
	return 0;
}

int xbd_diskspec_parse(int nspecs, const char *const *specs,
		       struct xbd_disk *out, char *err, size_t errlen)
{
	libxl_device_disk d;
	int rc;

	memset(out, 0, sizeof(*out));
	/* Xen's scanner (libxlu_disk_l.l) has no rule for some control
	 * characters in some states and then calls exit() ("flex scanner
	 * jammed"): no disk path or option holds one, so refuse them first. */
	for (int i = 0; i < nspecs; i++)
		for (const unsigned char *c = (const unsigned char *)specs[i]; *c; c++)
			if (*c < 0x20 || *c == 0x7f)
				return fail(err, errlen, "control character %c in disk "
					    "specification %d", *c, i + 1);
	libxl_device_disk_init(&d);
	rc = run_parser(nspecs, specs, &d, err, errlen);
	if (rc == 0 && !d.vdev)
		rc = fail(err, errlen, "no vdev specified");
	if (rc == 0)
		rc = check_supported(&d, err, errlen);
	if (rc == 0)
		rc = copy_disk(&d, out, err, errlen);
	libxl_device_disk_dispose(&d);
	return rc;
}
