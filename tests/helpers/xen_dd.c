/* SPDX-License-Identifier: MIT */
/*
 * xbd-test-xen-dd: dd-like steps through libxbdfront on ONE connection,
 * for phase R of make check-xen (tests/xen/guest/domr-init runs it in a
 * PV domU against the kernel's xen-blkback) and tests/system.
 *
 *   xbd-test-xen-dd [options] DOMID VDEV STEP...
 *
 * Steps, run in order; each prints one "STEP key=value..." line on
 * stdout, the first failure ends the run (exit 1, reason on stderr):
 *   info              what was negotiated
 *   write=FILE        FILE's bytes to the disk from offset 0 (--bs I/Os)
 *   read=FILE         the whole disk into FILE (--bs I/Os)
 *   flush             one cache flush
 *   discard=OFF:LEN   discard LEN bytes at OFF
 *   zero=OFF:LEN      read OFF:LEN back and check it is all zeroes
 *   sleep=MS          keep the connection open (a peer samples it)
 *   hold=MS           keep it until the device dies (detached by the
 *                     toolstack) or MS pass (-ETIMEDOUT)
 * One thread, the synchronous helpers: one I/O in flight, as dd.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frontend/xbdfront.h"
#include "lib/log.h"
#include "lib/num.h"

static const char usage[] =
"usage: xbd-test-xen-dd [options] DOMID VDEV STEP...\n"
"open VDEV of domain DOMID once with libxbdfront and run the steps:\n"
"  info  write=FILE  read=FILE  flush  discard=OFF:LEN  zero=OFF:LEN  sleep=MS\n"
"  hold=MS (until the device is detached, at most MS)\n"
"options:\n"
"  --platform P    auto, local or xen (default auto)\n"
"  --rundir DIR    the local machine's directory (default $XBD_RUNDIR)\n"
"  --queues N      queues to ask for (default 4)\n"
"  --ring-order N  ring-page-order to ask for, 0..5 (default 0)\n"
"  --pool N        granted pages per queue (default 4096)\n"
"  --timeout MS    wait for the backend to connect (default 10000)\n"
"  --bs N          bytes per I/O for read and write (default 1048576)\n";

enum { O_PLATFORM = 256, O_RUNDIR, O_QUEUES, O_ORDER, O_POOL, O_TIMEOUT, O_BS };

static const struct option longopts[] = {
	{ "platform", required_argument, NULL, O_PLATFORM },
	{ "rundir", required_argument, NULL, O_RUNDIR },
	{ "queues", required_argument, NULL, O_QUEUES },
	{ "ring-order", required_argument, NULL, O_ORDER },
	{ "pool", required_argument, NULL, O_POOL },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "bs", required_argument, NULL, O_BS },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* The device and what the steps share; owned by main. */
struct run {
	struct xbdfront_dev *dev;
	struct xbdfront_info info;
	size_t bs;
	unsigned char *buf;       /* bs bytes */
};

/* "OFF:LEN" -> two numbers; -EINVAL when malformed. */
static int range(const char *s, uint64_t *off, uint64_t *len)
{
	char copy[64], *colon;
	long long a, b;

	if (strlen(s) >= sizeof(copy))
		return -EINVAL;
	strcpy(copy, s);
	colon = strchr(copy, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	a = xbd_num(copy, 1ull << 60);
	b = xbd_num(colon + 1, 1ull << 60);
	if (a < 0 || b < 0)
		return -EINVAL;
	*off = (uint64_t)a;
	*len = (uint64_t)b;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void step_info(struct run *r)
{
	const struct xbdfront_info *i = &r->info;

	printf("info sectors=%" PRIu64 " sector-size=%u queues=%u ring-page-order=%u "
	       "indirect=%u persistent=%d flush=%d barrier=%d discard=%d protocol=%s\n",
	       i->sectors, i->sector_size, i->nr_queues, i->ring_page_order,
	       i->max_indirect_segs, i->persistent, i->flush, i->barrier, i->discard,
	       i->abi == XBDFRONT_ABI_X86_32 ? "x86_32-abi" : "x86_64-abi");
}

/* FILE -> disk from offset 0; the last piece is padded to a sector. */
static int step_write(struct run *r, const char *file)
{
	uint64_t off = 0, disk = r->info.sectors * 512;
	double t0 = now_s();
	int fd = open(file, O_RDONLY | O_CLOEXEC), rc = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, r->buf, r->bs)) > 0) {
		size_t len = ((size_t)n + r->info.sector_size - 1) / r->info.sector_size *
			     r->info.sector_size;

		if (off + len > disk) {
			rc = -EFBIG;
			goto out;
		}
		memset(r->buf + n, 0, len - (size_t)n);
		n = xbdfront_pwrite(r->dev, r->buf, len, off);
		if (n != (ssize_t)len) {
			rc = n < 0 ? (int)n : -EIO;
			goto out;
		}
		off += len;
	}
	if (n < 0)
		rc = -errno;
	else
		printf("write bytes=%" PRIu64 " secs=%.3f\n", off, now_s() - t0);
out:
	close(fd);
	return rc;
}

/* The whole disk -> FILE. */
static int step_read(struct run *r, const char *file)
{
	uint64_t off = 0, disk = r->info.sectors * 512;
	double t0 = now_s();
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), rc = 0;

	if (fd < 0)
		return -errno;
	while (off < disk) {
		size_t len = disk - off < r->bs ? (size_t)(disk - off) : r->bs;
		ssize_t n = xbdfront_pread(r->dev, r->buf, len, off);

		if (n != (ssize_t)len) {
			rc = n < 0 ? (int)n : -EIO;
			goto out;
		}
		if (write(fd, r->buf, len) != (ssize_t)len) {
			rc = -EIO;
			goto out;
		}
		off += len;
	}
	printf("read bytes=%" PRIu64 " secs=%.3f\n", off, now_s() - t0);
out:
	close(fd);
	return rc;
}

/* OFF:LEN reads back as zeroes. */
static int step_zero(struct run *r, const char *arg)
{
	uint64_t off, len, end;
	int rc = range(arg, &off, &len);

	if (rc)
		return rc;
	for (end = off + len; off < end; ) {
		size_t n = end - off < r->bs ? (size_t)(end - off) : r->bs;
		ssize_t got = xbdfront_pread(r->dev, r->buf, n, off);

		if (got != (ssize_t)n)
			return got < 0 ? (int)got : -EIO;
		for (size_t i = 0; i < n; i++) {
			if (r->buf[i]) {
				printf("zero bad=%" PRIu64 "\n", off + i);
				return -EILSEQ;
			}
		}
		off += n;
	}
	printf("zero ok=%" PRIu64 "\n", len);
	return 0;
}

/* Until the device dies (a detach) or ms pass. */
static int step_hold(struct run *r, long long ms)
{
	struct xbdfront_info i;
	double t0 = now_s();

	while ((now_s() - t0) * 1000 < (double)ms) {
		if (xbdfront_get_info(r->dev, &i) == 0 && i.error) {
			printf("hold secs=%.3f error=%d\n", now_s() - t0, i.error);
			return 0;
		}
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

static int step(struct run *r, const char *s)
{
	uint64_t off, len;
	long long ms;
	int rc;

	if (!strcmp(s, "info")) {
		step_info(r);
		return 0;
	}
	if (!strncmp(s, "write=", 6))
		return step_write(r, s + 6);
	if (!strncmp(s, "read=", 5))
		return step_read(r, s + 5);
	if (!strncmp(s, "zero=", 5))
		return step_zero(r, s + 5);
	if (!strcmp(s, "flush")) {
		rc = xbdfront_flush(r->dev);
		if (!rc)
			printf("flush ok\n");
		return rc;
	}
	if (!strncmp(s, "discard=", 8)) {
		rc = range(s + 8, &off, &len);
		if (!rc)
			rc = xbdfront_discard(r->dev, off, len, false);
		if (!rc)
			printf("discard off=%" PRIu64 " len=%" PRIu64 "\n", off, len);
		return rc;
	}
	if (!strncmp(s, "sleep=", 6) && (ms = xbd_num(s + 6, 600000)) >= 0) {
		usleep((useconds_t)ms * 1000);
		printf("sleep ms=%lld\n", ms);
		return 0;
	}
	if (!strncmp(s, "hold=", 5) && (ms = xbd_num(s + 5, 3600000)) >= 0)
		return step_hold(r, ms);
	return -EINVAL;
}

/* Options into opts and *bs; the index of DOMID, or -1 for a usage error. */
static int parse(int argc, char **argv, struct xbdfront_opts *opts, size_t *bs)
{
	long long n;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		n = 0;
		switch (c) {
		case O_PLATFORM: opts->platform = optarg; break;
		case O_RUNDIR: opts->rundir = optarg; break;
		case O_QUEUES: n = xbd_num(optarg, 64); opts->max_queues = (unsigned int)n; break;
		case O_ORDER: n = xbd_num(optarg, 5); opts->max_ring_page_order = (unsigned int)n; break;
		case O_POOL: n = xbd_num(optarg, 1u << 20); opts->pool_pages = (unsigned int)n; break;
		case O_TIMEOUT: n = xbd_num(optarg, 3600000); opts->connect_timeout_ms = (unsigned int)n; break;
		case O_BS: n = xbd_num(optarg, 16u << 20); *bs = (size_t)n; n = n ? n : -1; break;
		default: return -1;
		}
		if (n < 0)
			return -1;
	}
	if (argc - optind < 3 || xbd_num(argv[optind], 0x7fef) < 0)
		return -1;
	return optind;
}

int main(int argc, char **argv)
{
	struct xbdfront_opts opts;
	struct run r = { .bs = 1u << 20 };
	int i, rc;

	xbd_log_init("xbd-test-xen-dd", XBD_LOG_WARN, false);
	setvbuf(stdout, NULL, _IOLBF, 0);
	xbdfront_opts_default(&opts);
	i = parse(argc, argv, &opts, &r.bs);
	if (i < 0) {
		fputs(usage, stderr);
		return 2;
	}
	rc = xbdfront_open_why((unsigned int)xbd_num(argv[i], 0x7fef), argv[i + 1], &opts, &r.dev,
			       r.info.reason, sizeof(r.info.reason));
	if (rc) {
		fprintf(stderr, "xbd-test-xen-dd: cannot open %s: %s%s%s\n", argv[i + 1],
			strerror(-rc), r.info.reason[0] ? "; " : "", r.info.reason);
		return 1;
	}
	xbdfront_get_info(r.dev, &r.info);
	r.buf = aligned_alloc(4096, (r.bs + 4095) / 4096 * 4096);
	rc = r.buf ? 0 : -ENOMEM;
	if (!rc && r.bs % r.info.sector_size)
		rc = -EINVAL;
	for (i += 2; !rc && i < argc; i++) {
		rc = step(&r, argv[i]);
		if (rc)
			fprintf(stderr, "xbd-test-xen-dd: %s: %s\n", argv[i], strerror(-rc));
	}
	if (rc && xbdfront_get_info(r.dev, &r.info) == 0 && r.info.error)
		fprintf(stderr, "xbd-test-xen-dd: device shut down: %s\n", r.info.reason);
	free(r.buf);
	xbdfront_close(r.dev);
	return rc ? 1 : 0;
}
