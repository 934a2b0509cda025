/* SPDX-License-Identifier: MIT */
/*
 * Disk specifications as `xl block-attach` takes them (xl-disk-configuration(5)),
 * parsed by Xen's own parser, libxlutil's xlu_disk_parse(), then checked
 * against what xbd supports and copied into a plain struct.
 */
#ifndef XBD_TOOLS_DISKSPEC_H
#define XBD_TOOLS_DISKSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XBD_XEN_SCRIPT_DIR "/etc/xen/scripts"

struct xbd_disk {
	char target[4096];      /* absolute path ("/dev/" prepended if relative),
				 * or an NBD URI (nbd://..., nbd+unix://...) */
	bool qcow2;             /* format=qcow2: target is a qcow2 image */
	bool uri;               /* target is an NBD URI, not a path */
	char vdev[64];          /* as given: written to the backend's "dev" */
	uint32_t devid;         /* from vdev (lib/vdev) */
	char backend[64];       /* backend=DOMAIN as given, "" for domain 0 */
	char script[4200];      /* absolute hotplug script path (libxl's "script") */
	bool readwrite;
	bool cdrom;
	bool removable;
	bool discard;           /* discard-enable (default: readwrite) */
	bool trusted;           /* default true */
	bool direct_io_safe;
};

/*
 * Parse nspecs strings that together describe one disk (as xl does with
 * the arguments after the domain).  Returns 0, or -EINVAL with a one-line
 * message in err[errlen] naming the problem: libxlutil's own message for a
 * syntax error, or what xbd does not support (formats other than raw and
 * qcow2, a qcow2 NBD URI,
 * backendtype other than phy, specification=virtio, COLO, empty cdroms,
 * hotplug scripts other than "block"), or a bad vdev.
 */
int xbd_diskspec_parse(int nspecs, const char *const *specs,
		       struct xbd_disk *out, char *err, size_t errlen);

#endif
