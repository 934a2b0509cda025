/* SPDX-License-Identifier: MIT */
/*
 * xbdfront-io: a guest program on libxbdfront, for tests and by hand.
 *
 *   xbdfront-io [options] DOMID VDEV info     open, print what was negotiated
 *   xbdfront-io [options] DOMID VDEV verify   write patterns at random
 *                                             offsets, read them back, compare
 *
 * One thread; the synchronous helpers drive the queues.  Exit status: 0
 * done, 1 failure (message on stderr), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/xbdfront.h"
#include "lib/log.h"

static const char usage[] =
"usage: xbdfront-io [options] DOMID VDEV info|verify\n"
"open virtual disk VDEV of local domain DOMID with libxbdfront and\n"
"  info     print what was negotiated with the backend\n"
"  verify   write patterns at random offsets, read back and compare\n"
"\n"
"options:\n"
"  --rundir DIR        the local machine's directory (default $XBD_RUNDIR)\n"
"  --platform P        auto, local or xen (default auto)\n"
"  --timeout MS        wait for the backend to connect (default 10000)\n"
"  --queues N          queues to ask for (default 4)\n"
"  --ring-order N      ring-page-order to ask for, 0..5 (default 0)\n"
"  --indirect N        indirect segments to ask for, 0 = off (default 32)\n"
"  --no-persistent     do not offer feature-persistent\n"
"  --abi x86_64|x86_32 ring layout (default native)\n"
"  --bytes N           verify: bytes to write in all (default 4194304)\n"
"  --seed N            verify: pattern and offset seed (default 1)\n"
"  -v                  log debug messages\n";

struct args {
	struct xbdfront_opts opts;
	unsigned int domid;
	const char *vdev, *cmd;
	uint64_t bytes;
	unsigned int seed;
};

enum { O_RUNDIR = 256, O_PLATFORM, O_TIMEOUT, O_QUEUES, O_ORDER, O_INDIRECT,
       O_NOPERS, O_ABI, O_BYTES, O_SEED };

static const struct option longopts[] = {
	{ "rundir", required_argument, NULL, O_RUNDIR },
	{ "platform", required_argument, NULL, O_PLATFORM },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "queues", required_argument, NULL, O_QUEUES },
	{ "ring-order", required_argument, NULL, O_ORDER },
	{ "indirect", required_argument, NULL, O_INDIRECT },
	{ "no-persistent", no_argument, NULL, O_NOPERS },
	{ "abi", required_argument, NULL, O_ABI },
	{ "bytes", required_argument, NULL, O_BYTES },
	{ "seed", required_argument, NULL, O_SEED },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* A decimal number in [0, max] or -1. */
static long long num(const char *s, unsigned long long max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return -1;
	return (long long)v;
}

static int set_opt(struct args *a, int c, const char *v)
{
	long long n = 0;

	switch (c) {
	case O_RUNDIR: a->opts.rundir = v; return 0;
	case O_PLATFORM: a->opts.platform = v; return 0;
	case O_NOPERS: a->opts.persistent = false; return 0;
	case O_ABI:
		if (!strcmp(v, "x86_64"))
			a->opts.abi = XBDFRONT_ABI_X86_64;
		else if (!strcmp(v, "x86_32"))
			a->opts.abi = XBDFRONT_ABI_X86_32;
		else
			return -1;
		return 0;
	case O_TIMEOUT: n = num(v, 3600000); a->opts.connect_timeout_ms = (unsigned int)n; break;
	case O_QUEUES: n = num(v, 64); a->opts.max_queues = (unsigned int)n; break;
	case O_ORDER: n = num(v, 5); a->opts.max_ring_page_order = (unsigned int)n; break;
	case O_INDIRECT: n = num(v, 4096); a->opts.max_indirect_segs = (unsigned int)n; break;
	case O_BYTES: n = num(v, 1ull << 40); a->bytes = (uint64_t)n; break;
	case O_SEED: n = num(v, UINT32_MAX); a->seed = (unsigned int)n; break;
	default: return -1;
	}
	return n < 0 ? -1 : 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	long long d;
	int c;

	xbdfront_opts_default(&a->opts);
	a->bytes = 4u << 20;
	a->seed = 1;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		if (c == 'v')
			xbd_log_set_level(XBD_LOG_DEBUG);
		else if (c == 'h' || set_opt(a, c, optarg))
			return -1;
	}
	if (argc - optind != 3 || (d = num(argv[optind], 0x7fef)) < 0)
		return -1;
	a->domid = (unsigned int)d;
	a->vdev = argv[optind + 1];
	a->cmd = argv[optind + 2];
	return strcmp(a->cmd, "info") && strcmp(a->cmd, "verify") ? -1 : 0;
}

static void print_info(const struct xbdfront_info *i)
{
	printf("sectors %" PRIu64 "\nsector-size %u\nphysical-sector-size %u\n"
	       "queues %u\nring-page-order %u\nindirect-segments %u\nprotocol %s\n"
	       "persistent %d\nreadonly %d\nflush %d\nbarrier %d\ndiscard %d\n",
	       i->sectors, i->sector_size, i->physical_sector_size, i->nr_queues,
	       i->ring_page_order, i->max_indirect_segs,
	       i->abi == XBDFRONT_ABI_X86_32 ? "x86_32-abi" : "x86_64-abi",
	       i->persistent, i->readonly, i->flush, i->barrier, i->discard);
}

static void pattern(unsigned char *buf, size_t len, uint64_t off, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)((off + i) * 2654435761u >> 13 ^ seed);
}

/* Random aligned extents up to 1 MiB, written then read back. */
static int verify(struct xbdfront_dev *dev, const struct xbdfront_info *info,
		  const struct args *a)
{
	uint64_t disk = info->sectors * 512, done = 0, unit = info->sector_size;
	size_t max = 1u << 20;
	unsigned char *w = malloc(max), *r = malloc(max);
	unsigned int state = a->seed;
	int rc = 0;

	if (!w || !r || disk < unit)
		rc = -ENOMEM;
	while (!rc && done < a->bytes) {
		size_t len = (size_t)unit * (1 + rand_r(&state) % (max / unit));
		uint64_t off;

		if (len > disk)
			len = (size_t)disk;
		off = (uint64_t)rand_r(&state) % ((disk - len) / unit + 1) * unit;
		ssize_t n;

		pattern(w, len, off, a->seed);
		n = xbdfront_pwrite(dev, w, len, off);
		if (n == (ssize_t)len)
			n = xbdfront_pread(dev, r, len, off);
		if (n != (ssize_t)len)
			rc = n < 0 ? (int)n : -EIO;
		else if (memcmp(w, r, len))
			rc = -EILSEQ;
		if (rc)
			fprintf(stderr, "xbdfront-io: %s at offset %" PRIu64 " length %zu\n",
				rc == -EILSEQ ? "data mismatch" : strerror(-rc), off, len);
		done += len;
	}
	if (!rc)
		printf("verified %" PRIu64 " bytes\n", done);
	free(w);
	free(r);
	return rc;
}

int main(int argc, char **argv)
{
	struct xbdfront_dev *dev;
	struct xbdfront_info info;
	struct args a;
	int rc;

	xbd_log_init("xbdfront-io", XBD_LOG_WARN, false);
	if (parse(argc, argv, &a)) {
		fputs(usage, stderr);
		return 2;
	}
	rc = xbdfront_open(a.domid, a.vdev, &a.opts, &dev);
	if (rc) {
		fprintf(stderr, "xbdfront-io: cannot open %s of domain %u: %s\n", a.vdev,
			a.domid, strerror(-rc));
		return 1;
	}
	xbdfront_get_info(dev, &info);
	if (!strcmp(a.cmd, "info"))
		print_info(&info);
	else
		rc = verify(dev, &info, &a);
	if (rc && xbdfront_get_info(dev, &info) == 0 && info.error)
		fprintf(stderr, "xbdfront-io: device shut down: %s\n", info.reason);
	xbdfront_close(dev);
	return rc ? 1 : 0;
}
