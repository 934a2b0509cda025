/* SPDX-License-Identifier: MIT */
/*
 * lib/vdev: names <-> device ids.  The first table is every example of
 * xen-vbd-interface(7) ("Configuration file syntax") plus the numbers of
 * the encodings it specifies; the rest are boundaries and bad names.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vdev.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct good {
	const char *name;
	uint32_t devid;
	enum xbd_vdev_bus bus;
	uint32_t disk, part;
	const char *canonical;   /* xbd_vdev_name(devid) */
};

/* The examples of xen-vbd-interface(7), with their encoded numbers. */
static const struct good man_examples[] = {
	/* d0 d0p0 xvda: Xen virtual disk 0 partition 0 (whole disk) */
	{ "d0",      202 << 8 | 0 << 4 | 0, XBD_VDEV_XVD, 0, 0, "xvda" },
	{ "d0p0",    202 << 8 | 0 << 4 | 0, XBD_VDEV_XVD, 0, 0, "xvda" },
	{ "xvda",    51712,                 XBD_VDEV_XVD, 0, 0, "xvda" },
	/* d1p2 xvdb2: Xen virtual disk 1 partition 2 */
	{ "d1p2",    202 << 8 | 1 << 4 | 2, XBD_VDEV_XVD, 1, 2, "xvdb2" },
	{ "xvdb2",   51730,                 XBD_VDEV_XVD, 1, 2, "xvdb2" },
	/* d536p37 xvdtq37: Xen virtual disk 536 partition 37 (1<<28 form) */
	{ "d536p37", 1u << 28 | 536 << 8 | 37, XBD_VDEV_XVD, 536, 37, "xvdtq37" },
	{ "xvdtq37", 268572709,             XBD_VDEV_XVD, 536, 37, "xvdtq37" },
	/* sdb3: SCSI disk 1 partition 3 */
	{ "sdb3",    8 << 8 | 1 << 4 | 3,   XBD_VDEV_SD, 1, 3, "sdb3" },
	/* hdc2: IDE disk 2 partition 2 (22<<8 | (disk-2)<<6 | part) */
	{ "hdc2",    22 << 8 | 0 << 6 | 2,  XBD_VDEV_HD, 2, 2, "hdc2" },
};

/* The encodings' edges, and the values in blkif-libxl.md §4.4. */
static const struct good edges[] = {
	{ "xvda1",   51713,     XBD_VDEV_XVD, 0, 1, "xvda1" },
	{ "xvdb",    51728,     XBD_VDEV_XVD, 1, 0, "xvdb" },
	{ "xvdp",    51952,     XBD_VDEV_XVD, 15, 0, "xvdp" },
	{ "xvdp15",  51967,     XBD_VDEV_XVD, 15, 15, "xvdp15" },
	/* disk 16: the extended scheme */
	{ "xvdq",    268439552, XBD_VDEV_XVD, 16, 0, "xvdq" },
	{ "xvda16",  1u << 28 | 0 << 8 | 16, XBD_VDEV_XVD, 0, 16, "xvda16" },
	{ "xvdz",    1u << 28 | 25 << 8, XBD_VDEV_XVD, 25, 0, "xvdz" },
	{ "xvdaa",   1u << 28 | 26 << 8, XBD_VDEV_XVD, 26, 0, "xvdaa" },
	{ "xvdzz",   1u << 28 | 701 << 8, XBD_VDEV_XVD, 701, 0, "xvdzz" },
	{ "xvdaaa",  1u << 28 | 702 << 8, XBD_VDEV_XVD, 702, 0, "xvdaaa" },
	{ "xvda255", 1u << 28 | 255, XBD_VDEV_XVD, 0, 255, "xvda255" },
	{ "d1048575p255", 1u << 28 | 0xfffff << 8 | 255, XBD_VDEV_XVD,
	  1048575, 255, "xvdbgqcv255" },
	{ "d15p15",  51967,     XBD_VDEV_XVD, 15, 15, "xvdp15" },
	{ "d16",     268439552, XBD_VDEV_XVD, 16, 0, "xvdq" },
	{ "hda",     768,       XBD_VDEV_HD, 0, 0, "hda" },
	{ "hdb",     832,       XBD_VDEV_HD, 1, 0, "hdb" },
	{ "hdc",     5632,      XBD_VDEV_HD, 2, 0, "hdc" },
	{ "hdd",     5696,      XBD_VDEV_HD, 3, 0, "hdd" },
	{ "hdd63",   5696 + 63, XBD_VDEV_HD, 3, 63, "hdd63" },
	{ "sda",     2048,      XBD_VDEV_SD, 0, 0, "sda" },
	{ "sdb1",    2065,      XBD_VDEV_SD, 1, 1, "sdb1" },
	{ "sdp15",   8 << 8 | 15 << 4 | 15, XBD_VDEV_SD, 15, 15, "sdp15" },
	/* Plain numbers (hex, decimal, octal) are written verbatim. */
	{ "51712",   51712,     XBD_VDEV_XVD, 0, 0, "xvda" },
	{ "0xca10",  51728,     XBD_VDEV_XVD, 1, 0, "xvdb" },
	{ "0145000", 51712,     XBD_VDEV_XVD, 0, 0, "xvda" },
	{ "0",       0,         XBD_VDEV_LEGACY, 0, 0, "0" },
	{ "12345",   12345,     XBD_VDEV_LEGACY, 0, 0, "12345" },
	{ "2147483647", INT_MAX, XBD_VDEV_LEGACY, 0, 0, "2147483647" },
};

static void check_good(const struct good *g)
{
	struct xbd_vdev v;
	char buf[XBD_VDEV_NAME_MAX];
	int rc = xbd_vdev_parse(g->name, &v);

	if (rc != 0)
		fail_msg("%s: parse returned %d", g->name, rc);
	if (v.devid != g->devid)
		fail_msg("%s: devid %u, expected %u", g->name, v.devid, g->devid);
	assert_int_equal(v.bus, g->bus);
	assert_int_equal(v.disk, g->disk);
	assert_int_equal(v.part, g->part);
	rc = xbd_vdev_name(g->devid, buf, sizeof(buf));
	assert_int_equal(rc, (int)strlen(g->canonical));
	if (strcmp(buf, g->canonical) != 0)
		fail_msg("%u: name %s, expected %s", g->devid, buf, g->canonical);
	/* The canonical name maps back to the same id. */
	assert_int_equal(xbd_vdev_parse(buf, &v), 0);
	assert_int_equal(v.devid, g->devid);
}

static void test_man_page_examples(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(man_examples); i++)
		check_good(&man_examples[i]);
}

static void test_edges(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(edges); i++)
		check_good(&edges[i]);
}

static void test_bad_names(void **state)
{
	static const struct { const char *name; int rc; } bad[] = {
		{ "", -EINVAL }, { "xvd", -EINVAL }, { "xvdA", -EINVAL },
		{ "xvda0", -EINVAL },        /* partition 0 is spelled "xvda" */
		{ "xvda01", -EINVAL },       /* leading zero */
		{ "xvda1x", -EINVAL }, { "xvd1", -EINVAL }, { "vda", -EINVAL },
		{ "xvda256", -ERANGE },      /* partition > 255 */
		{ "d1048576", -ERANGE },     /* disk >= 2^20 */
		{ "d0p256", -ERANGE }, { "d01", -EINVAL }, { "d0p01", -EINVAL },
		{ "d", -EINVAL }, { "dp1", -EINVAL }, { "d1p", -EINVAL },
		{ "d-1", -EINVAL }, { "d1p2p3", -EINVAL },
		{ "hde", -ERANGE },          /* IDE disks 0..3 */
		{ "hda64", -ERANGE }, { "hd", -EINVAL },
		{ "sdq", -ERANGE },          /* SCSI disks 0..15 */
		{ "sda16", -ERANGE }, { "sd", -EINVAL }, { "sda0", -EINVAL },
		{ "2147483648", -ERANGE },   /* > INT_MAX */
		{ "0x", -EINVAL }, { "-1", -EINVAL }, { " 5", -EINVAL },
		{ "+5", -EINVAL }, { "5 ", -EINVAL }, { "08", -EINVAL },
		{ "xvdb ", -EINVAL }, { "XVDA", -EINVAL },
		{ "xvdzzzzzzzzzzzzzzzzzzzzz", -ERANGE },
	};
	(void)state;
	for (size_t i = 0; i < N(bad); i++) {
		struct xbd_vdev v = { 0 };
		int rc = xbd_vdev_parse(bad[i].name, &v);
		if (rc != bad[i].rc)
			fail_msg("\"%s\": got %d, expected %d", bad[i].name, rc, bad[i].rc);
	}
	assert_int_equal(xbd_vdev_parse(NULL, NULL), -EINVAL);
}

static void test_devid_decode(void **state)
{
	struct xbd_vdev v;
	char buf[XBD_VDEV_NAME_MAX];
	(void)state;
	/* Reserved range (2<<28 ..): libxl still passes numbers through. */
	assert_int_equal(xbd_vdev_from_devid(2u << 28, &v), 0);
	assert_int_equal(v.bus, XBD_VDEV_LEGACY);
	assert_int_equal(xbd_vdev_from_devid((uint32_t)INT_MAX + 1, &v), -EINVAL);
	assert_int_equal(xbd_vdev_name(0x80000000u, buf, sizeof(buf)), -EINVAL);
	/* Too small a buffer. */
	assert_int_equal(xbd_vdev_name(51712, buf, 4), -ENOSPC);
	assert_int_equal(xbd_vdev_name(51712, buf, 5), 4);
	assert_string_equal(buf, "xvda");
}

/* Every xvd id in the 202<<8 range and a sweep of the extended range
 * round-trips through its name. */
static void test_round_trip(void **state)
{
	char buf[XBD_VDEV_NAME_MAX];
	struct xbd_vdev v;
	(void)state;
	for (uint32_t d = 0; d < (1u << 20); d += (d < 1000 ? 1 : 997)) {
		for (uint32_t p = 0; p <= 255; p += (p < 20 ? 1 : 47)) {
			uint32_t id = (d <= 15 && p <= 15) ? (202u << 8 | d << 4 | p)
							 : (1u << 28 | d << 8 | p);
			assert_true(xbd_vdev_name(id, buf, sizeof(buf)) > 0);
			assert_int_equal(xbd_vdev_parse(buf, &v), 0);
			assert_int_equal(v.devid, id);
			assert_int_equal(v.disk, d);
			assert_int_equal(v.part, p);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_man_page_examples),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_devid_decode),
		cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
