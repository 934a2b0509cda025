/* SPDX-License-Identifier: MIT */
/*
 * tools/diskspec: disk specifications through Xen's parser (libxlutil).
 * The accepted cases are the examples of xl-disk-configuration(5) (each
 * group there is "equivalent", so each group expects the same result);
 * the rejected cases are what libxlutil refuses and what xbd does not
 * support, each with the message it must print.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tools/diskspec.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct good {
	const char *specs[4];       /* NULL-terminated */
	const char *target, *vdev;
	uint32_t devid;
	bool rw, cdrom, discard, trusted, dio;
	const char *backend;
};

static const struct good good[] = {
	/* "For example, these strings are equivalent:" */
	{ { "/dev/vg/guest-volume,,hda" }, "/dev/vg/guest-volume", "hda", 768,
	  true, false, true, true, false, "" },
	{ { "/dev/vg/guest-volume,raw,hda,rw" }, "/dev/vg/guest-volume", "hda", 768,
	  true, false, true, true, false, "" },
	{ { "format=raw, vdev=hda, access=rw, target=/dev/vg/guest-volume" },
	  "/dev/vg/guest-volume", "hda", 768, true, false, true, true, false, "" },
	{ { "raw:/dev/vg/guest-volume,hda,w" }, "/dev/vg/guest-volume", "hda", 768,
	  true, false, true, true, false, "" },
	/* "As are these:" (cdrom, read-only, so discard defaults off) */
	{ { "/root/image.iso,,hdc,cdrom" }, "/root/image.iso", "hdc", 5632,
	  false, true, false, true, false, "" },
	{ { "/root/image.iso,,hdc,,cdrom" }, "/root/image.iso", "hdc", 5632,
	  false, true, false, true, false, "" },
	{ { "/root/image.iso,raw,hdc,devtype=cdrom" }, "/root/image.iso", "hdc", 5632,
	  false, true, false, true, false, "" },
	{ { "format=raw, vdev=hdc, access=ro, devtype=cdrom, target=/root/image.iso" },
	  "/root/image.iso", "hdc", 5632, false, true, false, true, false, "" },
	{ { "raw:/root/image.iso,hdc:cdrom,ro" }, "/root/image.iso", "hdc", 5632,
	  false, true, false, true, false, "" },
	/* "/dev will be prepended if the path doesn't start with a '/'" */
	{ { "vg/guest-volume,,xvdb" }, "/dev/vg/guest-volume", "xvdb", 51728,
	  true, false, true, true, false, "" },
	/* Deprecated prefixes that are stripped and ignored. */
	{ { "phy:/dev/sdz,xvdb,w" }, "/dev/sdz", "xvdb", 51728,
	  true, false, true, true, false, "" },
	{ { "tap:aio:/img,xvdc,r" }, "/img", "xvdc", 51744,
	  false, false, false, true, false, "" },
	{ { "file:/img,xvdq,w" }, "/img", "xvdq", 268439552,
	  true, false, true, true, false, "" },
	/* target= consumes the rest, commas included. */
	{ { "vdev=xvdb, target=/srv/a,b c" }, "/srv/a,b c", "xvdb", 51728,
	  true, false, true, true, false, "" },
	/* Flags and keys. */
	{ { "/img,raw,xvdb,rw,no-discard,direct-io-safe,backendtype=phy" },
	  "/img", "xvdb", 51728, true, false, false, true, true, "" },
	{ { "backend=driverdom,/img,,d1p2" },
	  "/img", "d1p2", 51730, true, false, true, true, false, "driverdom" },
	{ { "discard,/img,,xvdb,r" }, "/img", "xvdb", 51728,
	  false, false, true, true, false, "" },
	{ { "script=block,/img,,xvdb" }, "/img", "xvdb", 51728,
	  true, false, true, true, false, "" },
	/* Several strings describing one disk, as `xl block-attach d a b c`. */
	{ { "vdev=xvde", "access=ro", "target=/img" }, "/img", "xvde", 51776,
	  false, false, false, true, false, "" },
	{ { "/img", "raw", "xvdb", "w" }, "/img", "xvdb", 51728,
	  true, false, true, true, false, "" },
};

static int count(const char *const *specs)
{
	int n = 0;
	while (n < 4 && specs[n])
		n++;
	return n;
}

static void test_man_page_examples(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(good); i++) {
		const struct good *g = &good[i];
		struct xbd_disk d;
		char err[256] = "";
		int rc = xbd_diskspec_parse(count(g->specs), g->specs, &d, err, sizeof(err));

		if (rc != 0)
			fail_msg("%s: rc %d: %s", g->specs[0], rc, err);
		assert_string_equal(d.target, g->target);
		assert_string_equal(d.vdev, g->vdev);
		assert_int_equal(d.devid, g->devid);
		assert_int_equal(d.readwrite, g->rw);
		assert_int_equal(d.cdrom, g->cdrom);
		assert_int_equal(d.removable, g->cdrom);
		assert_int_equal(d.discard, g->discard);
		assert_int_equal(d.trusted, g->trusted);
		assert_int_equal(d.direct_io_safe, g->dio);
		assert_string_equal(d.backend, g->backend);
		assert_string_equal(d.script, "/etc/xen/scripts/block");
	}
}

static void test_rejected(void **state)
{
	static const struct { const char *spec, *msg; } bad[] = {
		/* libxlutil's own messages */
		{ "bogus=1,/x,,xvdb", "unknown parameter" },
		{ "/x", "no vdev specified" },
		{ "/x,raw,xvdb,r,target=/y", "target respecified" },
		{ "/x,,xvdb,maybe", "unknown value for access" },
		/* what xbd does not support */
		{ "/x,qcow,xvdb", "unsupported format qcow (only raw and qcow2)" },
		{ "/x,vhd,xvdb", "unsupported format vhd (only raw and qcow2)" },
		{ "/x,,xvdb,backendtype=qdisk", "unsupported backendtype=qdisk (only phy)" },
		{ "/x,,xvdb,backendtype=tap", "unsupported backendtype=tap (only phy)" },
		{ "/x,,xvdb,specification=virtio", "unsupported specification=virtio" },
		{ ",hdc:cdrom,r", "empty cdrom drives are not supported" },
		{ "nbd:host:1234,xvdb", "unsupported script=block-nbd" },
		{ "vdev=xvdb", "no target specified" },
		/* vdevs that xen-vbd-interface(7) does not allow */
		{ "/x,,xvda0", "invalid virtual disk identifier xvda0" },
		{ "/x,,hde", "invalid virtual disk identifier hde (disk or partition out of range)" },
		{ "/x,,xvda256", "invalid virtual disk identifier xvda256" },
		{ "/x,,floppy", "invalid virtual disk identifier floppy" },
		/* libxlutil's scanner calls exit() on some control characters
		 * ("flex scanner jammed"): refused before it runs (found by
		 * fuzz_disk_spec: tests/fuzz/corpus/disk_spec/crash-lexer-exit) */
		{ "b,,d2p[vdev=\n", "control character \\x0a in disk specification 1" },
		{ "/x,,xvdb\033[2J", "control character \\x1b" },
		/* one line of printable text whatever the spec holds (found by
		 * fuzz_disk_spec: tests/fuzz/corpus/disk_spec/crash-vdev-newline) */
		{ "/x,,d\n0p2", "control character \\x0a" },
		{ "/x,,xvdb\xc3\xa9", "invalid virtual disk identifier xvdb\\xc3\\xa9" },
		{ "script=/a\xff/b,/x,,xvdb", "unsupported script=/a\\xff/b" },
	};
	(void)state;
	for (size_t i = 0; i < N(bad); i++) {
		struct xbd_disk d;
		char err[256] = "";
		const char *spec = bad[i].spec;
		int rc = xbd_diskspec_parse(1, &spec, &d, err, sizeof(err));

		if (rc != -EINVAL || !strstr(err, bad[i].msg))
			fail_msg("%s: rc %d, message \"%s\", expected \"%s\"",
				 spec, rc, err, bad[i].msg);
		assert_null(strchr(err, '\n'));
	}
}

static void test_no_specs(void **state)
{
	struct xbd_disk d;
	char err[256] = "";
	(void)state;
	assert_int_equal(xbd_diskspec_parse(0, NULL, &d, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no vdev"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_man_page_examples),
		cmocka_unit_test(test_rejected),
		cmocka_unit_test(test_no_specs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
