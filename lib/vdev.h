/* SPDX-License-Identifier: MIT */
/*
 * Virtual block device names <-> xenstore device ids, as specified by
 * xen-vbd-interface(7) and implemented by libxl (the number libxl writes
 * as `virtual-device` and uses as <devid> in both xenstore paths).
 *
 * Encodings (the integer is written in decimal to xenstore):
 *
 *   1 << 28 | disk << 8 | part   xvd, disk >= 16 or part >= 16
 *                                (disk < 2^20, part <= 255)
 *   202 << 8 | disk << 4 | part  xvd, disk and part <= 15
 *   8 << 8 | disk << 4 | part    sd, disk and part <= 15
 *   3 << 8 | disk << 6 | part    hd, disks 0..1, part <= 63
 *   22 << 8 | (disk-2) << 6 | part  hd, disks 2..3, part <= 63
 *
 * Accepted names:
 *   xvd<letters>[<part>]  letters are bijective base 26 (a=0, z=25, aa=26)
 *   d<disk>[p<part>]      decimal, the xvd bus ("d0" is "d0p0")
 *   sd<a-p>[<part>], hd<a-d>[<part>]
 *   a plain number (hex 0x.., octal 0.., decimal), <= INT_MAX: the legacy
 *   form, used verbatim.
 * Partition numbers are decimal without leading zeros (so "xvda0" is
 * invalid: partition 0 is spelled by omitting it).
 *
 * Pure functions: no allocation, no logging, thread-safe.
 */
#ifndef XBD_VDEV_H
#define XBD_VDEV_H

#include <stddef.h>
#include <stdint.h>

enum xbd_vdev_bus {
	XBD_VDEV_XVD,      /* Xen virtual disk (202<<8 or 1<<28 forms) */
	XBD_VDEV_SD,       /* SCSI (8<<8) */
	XBD_VDEV_HD,       /* IDE (3<<8, 22<<8) */
	XBD_VDEV_LEGACY,   /* a number outside the encodings above */
};

struct xbd_vdev {
	enum xbd_vdev_bus bus;
	uint32_t disk;     /* 0-based disk number (0 for LEGACY) */
	uint32_t part;     /* partition, 0 = whole disk (0 for LEGACY) */
	uint32_t devid;    /* the xenstore device id */
};

#define XBD_VDEV_XVD_MAX_DISK ((1u << 20) - 1)
#define XBD_VDEV_XVD_MAX_PART 255u
#define XBD_VDEV_NAME_MAX 32   /* enough for any name xbd_vdev_name() makes */

/*
 * Parse a vdev name into *out (devid and decoded fields).  Returns 0, or
 * -EINVAL for a malformed name and -ERANGE for a well-formed name whose
 * disk or partition is beyond what its bus can encode (e.g. "sdq", "hda64",
 * "xvda256").
 */
int xbd_vdev_parse(const char *name, struct xbd_vdev *out);

/*
 * Decode a device id (as read from xenstore) into bus, disk and partition.
 * Ids above INT_MAX: -EINVAL.  Every other number outside the encodings
 * (deprecated values, and the reserved range from 2<<28 that libxl still
 * passes through verbatim) decodes as XBD_VDEV_LEGACY.
 */
int xbd_vdev_from_devid(uint32_t devid, struct xbd_vdev *out);

/*
 * The canonical name of a device id: "xvda", "xvdtq37", "sdb3", "hdc2",
 * or the decimal number for legacy ids.  Writes at most len bytes
 * including the NUL.  Returns the string length, -EINVAL for an id above
 * INT_MAX, -ENOSPC if len is too small.
 */
int xbd_vdev_name(uint32_t devid, char *buf, size_t len);

#endif
