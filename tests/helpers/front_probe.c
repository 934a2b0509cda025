/* SPDX-License-Identifier: MIT */
/*
 * xbd-test-front-probe: a guest on the real libxbdfront that checks what a
 * backend's answers did to its memory, for tests/system/test_hostile_backend.py.
 *
 *   xbd-test-front-probe -R RUNDIR [options] DOMID VDEV
 *
 * It opens the disk (one queue, direct requests, no persistent grants),
 * then keeps --qd one-page I/Os in flight until --count have completed or
 * --wait ms have passed: I/O i is at byte i * 4096, reads for even i and
 * writes (of pattern()) for odd i.  Each I/O's buffer sits between two
 * guard pages in one arena.  Afterwards it checks, and prints as
 * "key value" lines:
 *   open RC            0, or the -errno xbdfront_open failed with (then exit)
 *   settle-events N    events handled before the first submit (--settle)
 *   ok N / eio N / other N   completions by status
 *   pending N          I/Os still in flight at the deadline
 *   submit-error RC    the first failed submit (0 if none)
 *   bad-data N         OKAY reads whose buffer is not pattern()
 *   touched N          failed reads whose buffer changed anyway
 *   guards-bad N       guard bytes that changed (anywhere in the arena)
 *   after RC           a synchronous read after the run
 *   error RC / reason TEXT   xbdfront_info.error and .reason
 *   close-ms N         how long xbdfront_close took
 * Exit 0 when it ran to the end, 1 on a setup failure, 2 on a usage error;
 * the test judges the numbers.  One thread (the library adds its monitor).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "frontend/xbdfront.h"

#define PAGE 4096u
#define GUARD 0x5a
#define UNREAD 0xee
#define MAX_IOS 4096

struct probe {
	struct xbdfront_opts opts;
	unsigned int domid, qd, count, settle_ms, wait_ms;
	const char *vdev;
	struct xbdfront_dev *dev;
	uint8_t *arena;              /* guard, buffer, guard, buffer, ..., guard */
	int status[MAX_IOS];
	bool done[MAX_IOS];
	unsigned int submitted, completed;
	int submit_error;
};

/* Must match xbd-test-hostile-back's pattern(). */
static uint8_t pattern(uint64_t off)
{
	return (uint8_t)((off >> 9) * 31 + (off & 511) + 1);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint8_t *buf(struct probe *p, unsigned int i)
{
	return p->arena + (size_t)(2 * i + 1) * PAGE;
}

static void prepare(struct probe *p)
{
	size_t len = (size_t)(2 * p->count + 1) * PAGE;

	p->arena = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->arena == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p->arena, GUARD, len);
	for (unsigned int i = 0; i < p->count; i++)
		for (unsigned int k = 0; k < PAGE; k++)
			buf(p, i)[k] = i % 2 ? pattern((uint64_t)i * PAGE + k) : UNREAD;
}

static int submit(struct probe *p, unsigned int i)
{
	struct iovec iov = { buf(p, i), PAGE };
	struct xbdfront_sqe sqe = { .op = i % 2 ? XBDFRONT_WRITE : XBDFRONT_READ, .iovcnt = 1,
				    .offset = (uint64_t)i * PAGE, .len = PAGE, .iov = &iov,
				    .user_data = i };
	int rc = xbdfront_submit(p->dev, 0, &sqe, 1);

	if (rc < 0)
		return rc;
	(void)xbdfront_commit(p->dev, 0);   /* a dead device fails it itself */
	return 0;
}

static void reap(struct probe *p)
{
	struct xbdfront_cqe cqe[64];
	int n = xbdfront_reap(p->dev, 0, cqe, 64);

	for (int k = 0; k < n; k++) {
		uint64_t i = cqe[k].user_data;

		if (i >= p->count || p->done[i]) {
			printf("bogus-completion %" PRIu64 "\n", i);
			continue;
		}
		p->done[i] = true;
		p->status[i] = cqe[k].res;
		p->completed++;
	}
}

/* Handle events for up to ms; returns how many were handled. */
static int pump(struct probe *p, int ms)
{
	struct pollfd pfd = { xbdfront_queue_fd(p->dev, 0), POLLIN, 0 };
	int n = 0;

	if (poll(&pfd, 1, ms) > 0 && xbdfront_process(p->dev, 0) >= 0)
		n = 1;
	reap(p);
	return n;
}

static void run(struct probe *p)
{
	double end = now_ms() + p->wait_ms, settle_end = now_ms() + p->settle_ms;
	int events = 0;

	while (now_ms() < settle_end)
		events += pump(p, 10);
	printf("settle-events %d\n", events);
	while (p->completed < p->count && now_ms() < end) {
		while (!p->submit_error && p->submitted < p->count &&
		       p->submitted - p->completed < p->qd) {
			int rc = submit(p, p->submitted);

			if (rc)
				p->submit_error = rc;
			else
				p->submitted++;
		}
		if (p->submit_error && p->submitted == p->completed)
			break;
		pump(p, 50);
	}
}

static void judge(struct probe *p)
{
	unsigned int ok = 0, eio = 0, other = 0, bad = 0, touched = 0, guards = 0;

	for (unsigned int i = 0; i < p->count; i++) {
		const uint8_t *b = buf(p, i);

		if (p->done[i])
			p->status[i] == 0 ? ok++ : p->status[i] == -EIO ? eio++ : other++;
		for (unsigned int k = 0; k < PAGE; k++) {
			uint8_t want = pattern((uint64_t)i * PAGE + k);

			if (i % 2)                       /* a write's data stays */
				touched += b[k] != want;
			else if (p->done[i] && p->status[i] == 0)
				bad += b[k] != want;
			else
				touched += b[k] != UNREAD;
		}
		for (unsigned int k = 0; k < PAGE; k++)
			guards += (b - PAGE)[k] != GUARD;
	}
	for (unsigned int k = 0; k < PAGE; k++)
		guards += (buf(p, p->count) - PAGE)[k] != GUARD;
	printf("ok %u\neio %u\nother %u\npending %u\nsubmit-error %d\n", ok, eio, other,
	       p->submitted - p->completed, p->submit_error);
	printf("bad-data %u\ntouched %u\nguards-bad %u\n", bad, touched, guards);
}

static void finish(struct probe *p)
{
	struct xbdfront_info info;
	uint8_t one[PAGE];
	double t0;

	/* a backend that never answers holds a synchronous read forever, as
	 * it would on Linux: only ask a device whose I/O all came back */
	if (p->submitted == p->completed)
		printf("after %zd\n", xbdfront_pread(p->dev, one, PAGE, 0));
	if (xbdfront_get_info(p->dev, &info) == 0)
		printf("error %d\nreason %s\n", info.error, info.reason);
	fflush(stdout);
	t0 = now_ms();
	xbdfront_close(p->dev);
	printf("close-ms %.0f\n", now_ms() - t0);
}

static const char usage[] =
"usage: xbd-test-front-probe -R RUNDIR [--qd N] [--count N] [--settle MS]\n"
"                            [--wait MS] DOMID VDEV\n"
"open VDEV of local domain DOMID, run --count one-page I/Os (default 64)\n"
"at --qd in flight (default 4) for at most --wait ms (default 5000) after\n"
"handling events for --settle ms (default 0), then report what the\n"
"backend's answers did to the buffers\n";

static int parse(int argc, char **argv, struct probe *p)
{
	static const struct option lo[] = {
		{ "qd", required_argument, NULL, 'q' },
		{ "count", required_argument, NULL, 'c' },
		{ "settle", required_argument, NULL, 's' },
		{ "wait", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	xbdfront_opts_default(&p->opts);
	p->opts.max_queues = 1;
	p->opts.persistent = false;
	p->opts.max_indirect_segs = 0;
	p->opts.connect_timeout_ms = 5000;
	p->opts.platform = "local";
	p->qd = 4;
	p->count = 64;
	p->wait_ms = 5000;
	while ((c = getopt_long(argc, argv, "R:", lo, NULL)) != -1) {
		switch (c) {
		case 'R': p->opts.rundir = optarg; break;
		case 'q': p->qd = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'c': p->count = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 's': p->settle_ms = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'w': p->wait_ms = (unsigned int)strtoul(optarg, NULL, 10); break;
		default: return -1;
		}
	}
	if (optind != argc - 2 || !p->qd || !p->count || p->count > MAX_IOS)
		return -1;
	p->domid = (unsigned int)strtoul(argv[optind], NULL, 10);
	p->vdev = argv[optind + 1];
	return 0;
}

int main(int argc, char **argv)
{
	static struct probe p;
	int rc;

	if (parse(argc, argv, &p)) {
		fputs(usage, stderr);
		return 2;
	}
	rc = xbdfront_open(p.domid, p.vdev, &p.opts, &p.dev);
	printf("open %d\n", rc);
	fflush(stdout);
	if (rc)
		return 0;
	prepare(&p);
	run(&p);
	judge(&p);
	finish(&p);
	munmap(p.arena, (size_t)(2 * p.count + 1) * PAGE);
	return 0;
}
