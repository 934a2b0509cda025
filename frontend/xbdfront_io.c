/* SPDX-License-Identifier: MIT */
/*
 * xbdfront-io: a guest program on libxbdfront, for tests and by hand.
 *
 *   xbdfront-io [options] DOMID VDEV info     open, print what was negotiated
 *                                             (--wait-sectors: then follow an
 *                                             online resize)
 *   xbdfront-io [options] DOMID VDEV verify   write patterns at random
 *                                             offsets, read them back, compare
 *   xbdfront-io [options] DOMID VDEV bench    timed I/O at a queue depth
 *   xbdfront-io [options] DOMID VDEV flush    one FLUSH_DISKCACHE
 *   xbdfront-io [options] DOMID VDEV discard  discard --offset/--length
 *
 * One thread: verify uses the synchronous helpers; bench keeps --qd I/Os
 * in flight with descriptors and completion entries over every queue
 * (one commit per queue per round).  Exit status:
 * 0 done, 1 failure (message on stderr), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/xbdfront.h"
#include "lib/log.h"
#include "lib/num.h"

static const char usage[] =
"usage: xbdfront-io [options] DOMID VDEV info|verify|bench|flush|discard\n"
"open virtual disk VDEV of local domain DOMID with libxbdfront and\n"
"  info     print what was negotiated with the backend; with --wait-sectors,\n"
"           stay open and print \"resized N\" at each online resize\n"
"  verify   write patterns at random offsets, read back and compare\n"
"  bench    keep --qd I/Os of --bs bytes in flight for --seconds; print\n"
"           iops and MiB/s\n"
"  flush    send one cache flush and wait for it\n"
"  discard  discard --length bytes at --offset and wait for it\n"
"\n"
"options:\n"
"  --rundir DIR        the local machine's directory (default $XBD_RUNDIR)\n"
"  --platform P        auto, local or xen (default auto)\n"
"  --timeout MS        wait for the backend to connect (default 10000)\n"
"  --queues N          queues to ask for (default 4)\n"
"  --ring-order N      ring-page-order to ask for, 0..5 (default 0)\n"
"  --indirect N        indirect segments to ask for, 0 = off (default 32)\n"
"  --no-persistent     do not offer feature-persistent\n"
"  --no-recover        close the disk when the backend closes, as Linux\n"
"                      xen-blkfront does (no reconnect on fresh rings)\n"
"  --abi x86_64|x86_32 ring layout (default native)\n"
"  --poll-duration-us N  spin at most N us on a ring with I/O in flight before\n"
"                      sleeping (default 50, 0 = never)\n"
"  --bytes N           verify: bytes to write in all (default 4194304)\n"
"  --seed N            verify: pattern and offset seed (default 1)\n"
"  --rw MODE           bench: read, write, randread, randwrite (default randread)\n"
"  --bs N              bench: bytes per I/O (default 4096)\n"
"  --qd N              bench: I/Os in flight (default 32)\n"
"  --seconds N         bench: duration (default 5)\n"
"  --zero-copy         bench: buffers from xbdfront_buf_alloc (no bounce)\n"
"  --wait-sectors N    info: then wait up to --seconds for the capacity to\n"
"                      reach N sectors (online resize); 1 if it does not\n"
"  --offset N          discard: first byte (default 0)\n"
"  --length N          discard: bytes (default 0: to the end of the disk)\n"
"  --secure            discard: secure discard\n"
"  -v                  log debug messages\n";

struct args {
	struct xbdfront_opts opts;
	unsigned int domid;
	const char *vdev, *cmd;
	uint64_t bytes;
	unsigned int seed;
	const char *rw;
	unsigned int bs, qd, seconds;
	bool zero_copy;
	uint64_t offset, length;
	bool secure;
	uint64_t wait_sectors;
};

enum { O_RUNDIR = 256, O_PLATFORM, O_TIMEOUT, O_QUEUES, O_ORDER, O_INDIRECT,
       O_NOPERS, O_ABI, O_BYTES, O_SEED, O_RW, O_BS, O_QD, O_SECONDS, O_ZC,
       O_OFFSET, O_LENGTH, O_SECURE, O_NORECOVER, O_POLL, O_WAITSECT };

static const struct option longopts[] = {
	{ "rundir", required_argument, NULL, O_RUNDIR },
	{ "platform", required_argument, NULL, O_PLATFORM },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "queues", required_argument, NULL, O_QUEUES },
	{ "ring-order", required_argument, NULL, O_ORDER },
	{ "indirect", required_argument, NULL, O_INDIRECT },
	{ "no-persistent", no_argument, NULL, O_NOPERS },
	{ "no-recover", no_argument, NULL, O_NORECOVER },
	{ "abi", required_argument, NULL, O_ABI },
	{ "bytes", required_argument, NULL, O_BYTES },
	{ "seed", required_argument, NULL, O_SEED },
	{ "rw", required_argument, NULL, O_RW },
	{ "bs", required_argument, NULL, O_BS },
	{ "qd", required_argument, NULL, O_QD },
	{ "seconds", required_argument, NULL, O_SECONDS },
	{ "zero-copy", no_argument, NULL, O_ZC },
	{ "offset", required_argument, NULL, O_OFFSET },
	{ "length", required_argument, NULL, O_LENGTH },
	{ "secure", no_argument, NULL, O_SECURE },
	{ "poll-duration-us", required_argument, NULL, O_POLL },
	{ "wait-sectors", required_argument, NULL, O_WAITSECT },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int set_opt(struct args *a, int c, const char *v)
{
	long long n = 0;

	switch (c) {
	case O_RUNDIR: a->opts.rundir = v; return 0;
	case O_PLATFORM: a->opts.platform = v; return 0;
	case O_NOPERS: a->opts.persistent = false; return 0;
	case O_NORECOVER: a->opts.no_recover = true; return 0;
	case O_ZC: a->zero_copy = true; return 0;
	case O_SECURE: a->secure = true; return 0;
	case O_RW:
		a->rw = v;
		return strcmp(v, "read") && strcmp(v, "write") && strcmp(v, "randread") &&
		       strcmp(v, "randwrite") ? -1 : 0;
	case O_ABI:
		if (!strcmp(v, "x86_64"))
			a->opts.abi = XBDFRONT_ABI_X86_64;
		else if (!strcmp(v, "x86_32"))
			a->opts.abi = XBDFRONT_ABI_X86_32;
		else
			return -1;
		return 0;
	case O_TIMEOUT: n = xbd_num(v, 3600000); a->opts.connect_timeout_ms = (unsigned int)n; break;
	case O_QUEUES:
		n = xbd_num(v, 64);
		if (n > XBDFRONT_MAX_QUEUES) {
			fprintf(stderr, "xbdfront-io: --queues %lld capped at %u, the most "
				"queues a disk has\n", n, XBDFRONT_MAX_QUEUES);
			n = XBDFRONT_MAX_QUEUES;
		}
		a->opts.max_queues = (unsigned int)n;
		break;
	case O_ORDER: n = xbd_num(v, 5); a->opts.max_ring_page_order = (unsigned int)n; break;
	case O_INDIRECT: n = xbd_num(v, 4096); a->opts.max_indirect_segs = (unsigned int)n; break;
	case O_POLL:
		n = xbd_num(v, XBDFRONT_POLL_DURATION_US_MAX);
		a->opts.poll_duration_us = (unsigned int)n;
		break;
	case O_BYTES: n = xbd_num(v, 1ull << 40); a->bytes = (uint64_t)n; break;
	case O_SEED: n = xbd_num(v, UINT32_MAX); a->seed = (unsigned int)n; break;
	case O_BS: n = xbd_num(v, 16u << 20); a->bs = (unsigned int)n; n = n ? n : -1; break;
	case O_QD: n = xbd_num(v, 4096); a->qd = (unsigned int)n; n = n ? n : -1; break;
	case O_SECONDS: n = xbd_num(v, 3600); a->seconds = (unsigned int)n; break;
	case O_OFFSET: n = xbd_num(v, 1ull << 60); a->offset = (uint64_t)n; break;
	case O_LENGTH: n = xbd_num(v, 1ull << 60); a->length = (uint64_t)n; break;
	case O_WAITSECT: n = xbd_num(v, 1ull << 60); a->wait_sectors = (uint64_t)n; break;
	default: return -1;
	}
	return n < 0 ? -1 : 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	long long d;
	int c;

	/* every field: --offset, --length, --secure and --zero-copy are
	 * optional, and main's struct is not zeroed */
	*a = (struct args){ .bytes = 4u << 20, .seed = 1, .rw = "randread", .bs = 4096,
			    .qd = 32, .seconds = 5 };
	xbdfront_opts_default(&a->opts);
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		if (c == 'v')
			xbd_log_set_level(XBD_LOG_DEBUG);
		else if (c == 'h' || set_opt(a, c, optarg))
			return -1;
	}
	if (argc - optind != 3 || (d = xbd_num(argv[optind], 0x7fef)) < 0)
		return -1;
	a->domid = (unsigned int)d;
	a->vdev = argv[optind + 1];
	a->cmd = argv[optind + 2];
	return strcmp(a->cmd, "info") && strcmp(a->cmd, "verify") &&
	       strcmp(a->cmd, "bench") && strcmp(a->cmd, "flush") &&
	       strcmp(a->cmd, "discard") ? -1 : 0;
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

/* Online resize: xbdfront_opts.resized, on the monitor thread, records
 * the capacity for follow_resize (under resize_lock). */
static pthread_mutex_t resize_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t resize_cond = PTHREAD_COND_INITIALIZER;
static uint64_t resized_to;

static void on_resized(void *arg, uint64_t sectors)
{
	(void)arg;
	printf("resized %" PRIu64 "\n", sectors);
	fflush(stdout);
	pthread_mutex_lock(&resize_lock);
	resized_to = sectors;
	pthread_cond_broadcast(&resize_cond);
	pthread_mutex_unlock(&resize_lock);
}

/* info --wait-sectors: wait up to --seconds for the capacity to reach
 * a->wait_sectors; then print what xbdfront_get_info says. */
static int follow_resize(struct xbdfront_dev *dev, const struct args *a)
{
	struct xbdfront_info info;
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += a->seconds;
	pthread_mutex_lock(&resize_lock);
	while (resized_to < a->wait_sectors && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&resize_cond, &resize_lock, &until);
	pthread_mutex_unlock(&resize_lock);
	xbdfront_get_info(dev, &info);
	printf("sectors-now %" PRIu64 "\n", info.sectors);
	if (info.sectors >= a->wait_sectors)
		return 0;
	fprintf(stderr, "xbdfront-io: the capacity stayed %" PRIu64 " sectors for %u s "
		"(waited for %" PRIu64 ")\n", info.sectors, a->seconds, a->wait_sectors);
	return -ETIMEDOUT;
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

/* flush or discard: one request, waited for; the library checks the
 * range and whether the backend offers the feature. */
static int flush_or_discard(struct xbdfront_dev *dev, const struct xbdfront_info *info,
			    const struct args *a)
{
	uint64_t disk = info->sectors * 512, len = a->length;
	int rc;

	if (!strcmp(a->cmd, "flush")) {
		rc = xbdfront_flush(dev);
		if (!rc)
			printf("flushed\n");
	} else {
		if (!len && a->offset < disk)
			len = disk - a->offset;
		rc = xbdfront_discard(dev, a->offset, len, a->secure);
		if (!rc)
			printf("discarded %" PRIu64 " bytes at %" PRIu64 "\n", len, a->offset);
	}
	if (rc)
		fprintf(stderr, "xbdfront-io: %s: %s\n", a->cmd, strerror(-rc));
	return rc;
}

/* ---- bench ------------------------------------------------------------- */

struct bench {
	struct xbdfront_dev *dev;
	const struct args *a;
	uint64_t disk, next;          /* capacity; next sequential offset */
	unsigned char *bufs;          /* qd buffers of bs bytes */
	struct iovec *iov;            /* qd descriptors' data */
	unsigned int state, nq;
	bool write, random;
};

/* Queue the I/O of slot (on queue slot % nq); committed by the caller. */
static int bench_submit(struct bench *b, unsigned int slot)
{
	uint64_t off, blocks = b->disk / b->a->bs;
	struct iovec *v = &b->iov[slot];
	struct xbdfront_sqe sqe = { .op = b->write ? XBDFRONT_WRITE : XBDFRONT_READ,
				    .iovcnt = 1, .len = b->a->bs, .iov = v, .user_data = slot };
	int rc;

	*v = (struct iovec){ b->bufs + (size_t)slot * b->a->bs, b->a->bs };
	if (b->random) {
		off = ((uint64_t)rand_r(&b->state) << 31 | (uint64_t)rand_r(&b->state)) % blocks;
		off *= b->a->bs;
	} else {
		off = b->next;
		b->next = b->next + b->a->bs + b->a->bs > b->disk ? 0 : b->next + b->a->bs;
	}
	sqe.offset = off;
	rc = xbdfront_submit(b->dev, slot % b->nq, &sqe, 1);
	return rc < 0 ? rc : 0;
}

/* Reap every queue; resubmit while running, one commit per queue.
 * Returns completions or -errno. */
static int bench_reap(struct bench *b, bool resubmit, uint64_t *inflight)
{
	struct xbdfront_cqe c[64];
	unsigned int q, i;
	int n = 0, k, rc;

	for (q = 0; q < b->nq; q++) {
		while ((k = xbdfront_reap(b->dev, q, c, 64)) > 0) {
			for (i = 0; i < (unsigned int)k; i++) {
				if (c[i].res)
					return c[i].res;
				n++;
				(*inflight)--;
				if (resubmit && (rc = bench_submit(b, (unsigned int)c[i].user_data)))
					return rc;
				*inflight += resubmit;
			}
		}
		if (k < 0)
			return k;
		if (resubmit && (rc = xbdfront_commit(b->dev, q)))
			return rc;
	}
	return n;
}

/* Until something completes: the library's wait (its poll, then the
 * event channel) with one queue, poll(2) over the queues' fds with more. */
static void bench_wait(struct bench *b, struct pollfd *pfd)
{
	unsigned int q, n = b->nq < 16 ? b->nq : 16;

	if (b->nq == 1) {
		(void)xbdfront_wait(b->dev, 0, 100, -1);
		return;
	}
	if (poll(pfd, n, 100) <= 0)
		return;
	for (q = 0; q < n; q++)
		if (pfd[q].revents)
			(void)xbdfront_process(b->dev, q);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int bench(struct xbdfront_dev *dev, const struct xbdfront_info *info,
		 const struct args *a)
{
	struct bench b = { .dev = dev, .a = a, .disk = info->sectors * 512, .state = a->seed,
			   .nq = info->nr_queues, .write = strstr(a->rw, "write") != NULL,
			   .random = !strncmp(a->rw, "rand", 4) };
	size_t total = (size_t)a->qd * a->bs;
	uint64_t done = 0, inflight = 0;
	struct pollfd pfd[16];
	double t0, t;
	int rc = 0;

	if (a->bs % info->sector_size || a->bs > b.disk)
		return -EINVAL;
	b.bufs = a->zero_copy ? xbdfront_buf_alloc(dev, total) : aligned_alloc(4096, total);
	if (!b.bufs)
		return -ENOMEM;
	memset(b.bufs, 0x5a, total);
	b.iov = calloc(a->qd, sizeof(*b.iov));
	if (!b.iov)
		rc = -ENOMEM;
	for (unsigned int q = 0; q < b.nq && q < 16; q++)
		pfd[q] = (struct pollfd){ .fd = xbdfront_queue_fd(dev, q), .events = POLLIN };
	t0 = now_s();
	for (unsigned int s = 0; s < a->qd && !rc; s++, inflight++)
		rc = bench_submit(&b, s);
	for (unsigned int q = 0; q < b.nq && !rc; q++)
		rc = xbdfront_commit(dev, q);
	while (!rc && (t = now_s()) - t0 < a->seconds) {
		bench_wait(&b, pfd);
		rc = bench_reap(&b, true, &inflight);
		done += rc > 0 ? (uint64_t)rc : 0;
		rc = rc < 0 ? rc : 0;
	}
	t = now_s() - t0;
	while (!rc && inflight) {          /* drain, not counted */
		bench_wait(&b, pfd);
		rc = bench_reap(&b, false, &inflight);
		rc = rc < 0 ? rc : 0;
	}
	free(b.iov);
	if (!rc)
		printf("%s bs %u qd %u: %.0f iops, %.1f MiB/s\n", a->rw, a->bs, a->qd,
		       done / t, done * (double)a->bs / t / (1 << 20));
	else
		fprintf(stderr, "xbdfront-io: bench: %s\n", strerror(-rc));
	if (a->zero_copy)
		xbdfront_buf_free(dev, b.bufs);
	else
		free(b.bufs);
	return rc;
}

int main(int argc, char **argv)
{
	struct xbdfront_dev *dev;
	struct xbdfront_info info;
	char why[sizeof(info.reason)];
	struct args a;
	int rc;

	xbd_log_init("xbdfront-io", XBD_LOG_WARN, false);
	if (parse(argc, argv, &a)) {
		fputs(usage, stderr);
		return 2;
	}
	a.opts.resized = on_resized;
	rc = xbdfront_open_why(a.domid, a.vdev, &a.opts, &dev, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "xbdfront-io: cannot open %s of domain %u: %s%s%s\n", a.vdev,
			a.domid, strerror(-rc), why[0] ? "; " : "", why);
		return 1;
	}
	xbdfront_get_info(dev, &info);
	if (!strcmp(a.cmd, "info")) {
		print_info(&info);
		fflush(stdout);
		if (a.wait_sectors)
			rc = follow_resize(dev, &a);
	}
	else if (!strcmp(a.cmd, "verify"))
		rc = verify(dev, &info, &a);
	else if (!strcmp(a.cmd, "bench"))
		rc = bench(dev, &info, &a);
	else
		rc = flush_or_discard(dev, &info, &a);
	if (rc && xbdfront_get_info(dev, &info) == 0 && info.error)
		fprintf(stderr, "xbdfront-io: device shut down: %s\n", info.reason);
	xbdfront_close(dev);
	return rc ? 1 : 0;
}
