/* SPDX-License-Identifier: MIT */
/*
 * fuzz_disk_spec: `xbd block-attach` disk specifications against the real
 * parsing path of tools/diskspec.c (xbd_diskspec_parse: Xen's libxlutil
 * parser xlu_disk_parse, then check_supported and copy_disk with the
 * real lib/vdev.c).  A specification comes from the command line of a
 * privileged user, so this is not a guest's attack; but xl's syntax is
 * rich (positional and key=value, quoting, several strings for one disk)
 * and whatever the parser hands back is copied into fixed buffers.
 *
 * One input: up to 8 strings separated by NUL bytes, passed as the specs
 * of one disk (as xl passes the arguments after the domain).
 *
 * Checked: the process survives (libxlutil's scanner calls exit() on
 * some control characters); the result is 0 or -EINVAL; on -EINVAL a
 * non-empty message of printable ASCII only; on 0 every string field NUL-terminated in its buffer,
 * the target absolute or an NBD/RBD URI, qcow2 never with a URI, the
 * vdev parses again to the same devid, the script the block script.
 * libxlutil is not instrumented (a Debian library): only xbd's own code
 * guides the fuzzer, helped by a dictionary of the spec's keywords
 * (fuzz_disk_spec.dict).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/diskspec.h"
#include "vdev.h"
#include "tests/fuzz/fuzz.h"

#define FZ_SPECS 8
#define FZ_LEN 4096

static bool terminated(const char *s, size_t n)
{
	return memchr(s, 0, n) != NULL;
}

/* One line of printable ASCII (diskspec.h). */
static bool printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[FZ_SPECS * (FZ_LEN + 1)];
	static struct xbd_disk d;
	const char *specs[FZ_SPECS];
	char err[256];
	struct xbd_vdev v;
	size_t off = 0;
	int n = 0, rc;

	while (n < FZ_SPECS && off < size) {
		const uint8_t *nul = memchr(data + off, 0, size - off);
		size_t len = nul ? (size_t)(nul - data) - off : size - off;
		char *s = buf + (size_t)n * (FZ_LEN + 1);

		if (len > FZ_LEN)
			len = FZ_LEN;
		memcpy(s, data + off, len);
		s[len] = 0;
		specs[n++] = s;
		off += len + 1;
	}
	if (n == 0)
		return 0;
	err[0] = 0;
	rc = xbd_diskspec_parse(n, specs, &d, err, sizeof(err));
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "rc %d: %s | target %s vdev %s devid %u backend %s rw %d\n",
			rc, err, d.target, d.vdev, d.devid, d.backend, d.readwrite);
	if (rc) {
		CHECK(rc == -EINVAL);
		CHECK(err[0] && terminated(err, sizeof(err)) && printable(err));
		return 0;
	}
	CHECK(terminated(d.target, sizeof(d.target)) && terminated(d.vdev, sizeof(d.vdev)) &&
	      terminated(d.backend, sizeof(d.backend)) &&
	      terminated(d.script, sizeof(d.script)));
	CHECK(d.target[0] == '/' || d.uri);
	CHECK(!(d.uri && d.qcow2));
	CHECK(xbd_vdev_parse(d.vdev, &v) == 0 && v.devid == d.devid);
	CHECK(!strcmp(d.script, XBD_XEN_SCRIPT_DIR "/block"));
	return 0;
}
