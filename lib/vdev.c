/* SPDX-License-Identifier: MIT */
/* vdev names <-> device ids (xen-vbd-interface(7)); see vdev.h. */
#include "vdev.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XVD_MAJOR   202u
#define SD_MAJOR    8u
#define HD01_MAJOR  3u
#define HD23_MAJOR  22u
#define EXT_FLAG    (1u << 28)
#define RESERVED    (2u << 28)

/*
 * Parse a decimal number without sign, spaces or leading zeros ("0" alone
 * is fine) from s up to end-of-string.  Returns 0, -EINVAL (not such a
 * number) or -ERANGE (above max).
 */
static int parse_dec(const char *s, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] != '\0'))
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > max)
			return -ERANGE;
	}
	*out = (uint32_t)v;
	return 0;
}

/*
 * "<prefix><letters>[<part>]": letters are bijective base 26 (a=0, z=25,
 * aa=26, ...).  Returns 0 with disk/part set, -EINVAL if name does not have
 * this shape, -ERANGE if disk or partition exceed the limits.
 */
static int parse_lettered(const char *name, const char *prefix,
			  uint32_t max_disk, uint32_t max_part,
			  uint32_t *disk, uint32_t *part)
{
	size_t plen = strlen(prefix);
	const char *p = name + plen;
	uint64_t d = 0;
	bool too_big = false;

	if (strncmp(name, prefix, plen) != 0 || *p < 'a' || *p > 'z')
		return -EINVAL;
	for (; *p >= 'a' && *p <= 'z'; p++) {
		d = d * 26 + (uint64_t)(*p - 'a' + 1);
		if (d > (uint64_t)max_disk + 1) {
			too_big = true;
			d = (uint64_t)max_disk + 2;
		}
	}
	*part = 0;
	if (*p == '0')          /* "xvda0": partition 0 is spelled "xvda" */
		return -EINVAL;
	if (*p) {
		int rc = parse_dec(p, max_part, part);
		if (rc)
			return rc;
	}
	if (too_big)
		return -ERANGE;
	*disk = (uint32_t)(d - 1);
	return 0;
}

/* "d<disk>[p<part>]", decimal, the xvd bus. */
static int parse_dp(const char *name, uint32_t *disk, uint32_t *part)
{
	char buf[24];
	const char *p;
	size_t n;
	int rc;

	if (name[0] != 'd')
		return -EINVAL;
	p = strchr(name + 1, 'p');
	n = p ? (size_t)(p - (name + 1)) : strlen(name + 1);
	if (n == 0 || n >= sizeof(buf))
		return n == 0 ? -EINVAL : -ERANGE;
	memcpy(buf, name + 1, n);
	buf[n] = '\0';
	rc = parse_dec(buf, XBD_VDEV_XVD_MAX_DISK, disk);
	if (rc)
		return rc;
	*part = 0;
	if (p)
		return parse_dec(p + 1, XBD_VDEV_XVD_MAX_PART, part);
	return 0;
}

/* The legacy form: one number in hex, octal or decimal, <= INT_MAX. */
static int parse_number(const char *name, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (name[0] < '0' || name[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(name, &end, 0);
	if (end == name || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v > INT_MAX)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}

static uint32_t xvd_devid(uint32_t disk, uint32_t part)
{
	if (disk <= 15 && part <= 15)
		return XVD_MAJOR << 8 | disk << 4 | part;
	return EXT_FLAG | disk << 8 | part;
}

/* Remember the most specific error across the forms a name might be. */
static int worse(int a, int b)
{
	return (a == -ERANGE || b == -ERANGE) ? -ERANGE : -EINVAL;
}

int xbd_vdev_parse(const char *name, struct xbd_vdev *out)
{
	struct xbd_vdev v = { .bus = XBD_VDEV_XVD };
	int rc, err = -EINVAL;

	if (!name || !*name)
		return -EINVAL;
	/* Same order as libxl: d*p* and xvd*, then a number, then hd*, sd*. */
	rc = parse_dp(name, &v.disk, &v.part);
	if (rc) {
		err = worse(err, rc);
		rc = parse_lettered(name, "xvd", XBD_VDEV_XVD_MAX_DISK,
				    XBD_VDEV_XVD_MAX_PART, &v.disk, &v.part);
	}
	if (rc == 0) {
		v.devid = xvd_devid(v.disk, v.part);
		*out = v;
		return 0;
	}
	err = worse(err, rc);
	rc = parse_number(name, &v.devid);
	if (rc == 0)
		return xbd_vdev_from_devid(v.devid, out);
	err = worse(err, rc);
	rc = parse_lettered(name, "hd", 3, 63, &v.disk, &v.part);
	if (rc == 0) {
		v.bus = XBD_VDEV_HD;
		v.devid = (v.disk < 2 ? HD01_MAJOR : HD23_MAJOR) << 8 |
			  (v.disk & 1) << 6 | v.part;
		*out = v;
		return 0;
	}
	err = worse(err, rc);
	rc = parse_lettered(name, "sd", 15, 15, &v.disk, &v.part);
	if (rc == 0) {
		v.bus = XBD_VDEV_SD;
		v.devid = SD_MAJOR << 8 | v.disk << 4 | v.part;
		*out = v;
		return 0;
	}
	return worse(err, rc);
}

int xbd_vdev_from_devid(uint32_t devid, struct xbd_vdev *out)
{
	struct xbd_vdev v = { .bus = XBD_VDEV_LEGACY, .devid = devid };
	uint32_t major = devid >> 8, minor = devid & 0xff;

	if (devid > INT_MAX)
		return -EINVAL;
	if (devid >= EXT_FLAG && devid < RESERVED) {
		v.bus = XBD_VDEV_XVD;
		v.disk = (devid & ~EXT_FLAG) >> 8;
		v.part = devid & 0xff;
	} else if (major == XVD_MAJOR || major == SD_MAJOR) {
		v.bus = major == XVD_MAJOR ? XBD_VDEV_XVD : XBD_VDEV_SD;
		v.disk = minor >> 4;
		v.part = minor & 0xf;
	} else if (major == HD01_MAJOR || major == HD23_MAJOR) {
		v.bus = XBD_VDEV_HD;
		v.disk = (major == HD23_MAJOR ? 2 : 0) + (minor >> 6);
		v.part = minor & 0x3f;
	}
	*out = v;
	return 0;
}

/* Bijective base 26: 0 -> "a", 25 -> "z", 26 -> "aa". */
static size_t disk_letters(uint32_t disk, char *buf)
{
	char rev[8];
	size_t n = 0;
	uint64_t d = (uint64_t)disk + 1;

	while (d > 0) {
		d -= 1;
		rev[n++] = (char)('a' + d % 26);
		d /= 26;
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = rev[n - 1 - i];
	buf[n] = '\0';
	return n;
}

int xbd_vdev_name(uint32_t devid, char *buf, size_t len)
{
	static const char *const prefix[] = {
		[XBD_VDEV_XVD] = "xvd", [XBD_VDEV_SD] = "sd", [XBD_VDEV_HD] = "hd",
	};
	struct xbd_vdev v;
	char letters[8];
	int n, rc;

	rc = xbd_vdev_from_devid(devid, &v);
	if (rc)
		return rc;
	if (v.bus == XBD_VDEV_LEGACY) {
		n = snprintf(buf, len, "%u", devid);
	} else {
		disk_letters(v.disk, letters);
		if (v.part)
			n = snprintf(buf, len, "%s%s%u", prefix[v.bus], letters, v.part);
		else
			n = snprintf(buf, len, "%s%s", prefix[v.bus], letters);
	}
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	return n;
}
