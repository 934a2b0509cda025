/* SPDX-License-Identifier: MIT */
/*
 * xbd-be-queue-bench: one backend queue (its own thread, io_uring and
 * grant transport) serving an in-process guest on the local platform,
 * with qd requests kept in flight against a file.  Prints requests per
 * second and MB/s.  The guest side is as lean as a frontend can be (no
 * splitting, one page per segment), so the number is the backend's.
 *
 * usage: xbd-be-queue-bench FILE [--bs BYTES] [--qd N] [--seconds S]
 *                           [--requests N] [--write] [--persistent]
 *                           [--order N] [--wait uring|poll]
 *                           [--limit off|idle|high]
 * FILE must exist and be at least 64 MiB; it is read (or written) at
 * random bs-aligned offsets in its first 64 MiB.  --requests N issues
 * exactly N requests (however long they take) instead of running for S
 * seconds: the fixed count of the callgrind measurement (bench/suite/
 * cpucost.py).  --wait sets the queue thread's wait mode (io_uring.h;
 * default: the io_wait_poll tunable, which is Y under valgrind).
 * --limit: the vbd's I/O limits (limit.h): off, none at all (a NULL
 * limiter); idle, a limiter with no limit set, as every vbd without
 * limits (the default); high, read and write IOPS and bps set far above
 * what the queue can do, so every request is charged and none waits.
 * bench/limits/ compares them.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/queue.h"
#include "backend/tunables.h"

#define SPAN (64ull << 20)

struct opts {
	const char *file;
	unsigned int bs, qd, seconds, order;
	unsigned long requests;     /* 0: run for seconds */
	const char *wait_poll;      /* io_wait_poll value, or NULL: default */
	bool write, persistent;
	const char *limit;          /* off, idle, high */
};

struct guest {
	char rundir[64];
	struct xbd_platform *p;
	struct xbd_domain *dom;
	struct xbd_gntshr *gs;
	struct xbd_evtchn *ev;
	int port;
	xbd_grant_ref_t ring_refs[32], data_refs[1024];
	uint8_t *sring, *data;
	unsigned int nr_ents;
	RING_IDX prod, rsp_cons;
	unsigned long issued, to_issue;   /* to_issue: ULONG_MAX when timed */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .bs = 4096, .qd = 32, .seconds = 3, .order = 2 };
	if (argc < 2 || argv[1][0] == '-')
		return -1;
	o->file = argv[1];
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--write"))
			o->write = true;
		else if (!strcmp(argv[i], "--persistent"))
			o->persistent = true;
		else if (i + 1 < argc && !strcmp(argv[i], "--bs"))
			o->bs = (unsigned int)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--qd"))
			o->qd = (unsigned int)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
			o->seconds = (unsigned int)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--order"))
			o->order = (unsigned int)atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--requests"))
			o->requests = strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && !strcmp(argv[i], "--limit") &&
			 (!strcmp(argv[i + 1], "off") || !strcmp(argv[i + 1], "idle") ||
			  !strcmp(argv[i + 1], "high")))
			o->limit = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--wait") &&
			 (!strcmp(argv[i + 1], "uring") || !strcmp(argv[i + 1], "poll")))
			o->wait_poll = !strcmp(argv[++i], "poll") ? "Y" : "N";
		else
			return -1;
	}
	if (o->bs < 512 || o->bs > 11 * 4096 || o->bs % 512 || !o->qd || o->order > 5 ||
	    o->qd > (32u << o->order) || o->qd * ((o->bs + 4095) / 4096) > 1024)
		return -1;
	return 0;
}

static int guest_up(struct guest *g, const struct opts *o)
{
	strcpy(g->rundir, "/tmp/xbd-queue-bench-XXXXXX");
	if (!mkdtemp(g->rundir) ||
	    xbd_platform_open(XBD_PLATFORM_LOCAL, g->rundir, &g->p) ||
	    xbd_domain_create(g->p, 1, "bench", 16u << 20) ||
	    xbd_domain_claim(g->p, 1, &g->dom) || xbd_gntshr_open(g->dom, &g->gs) ||
	    xbd_gntshr_share_pages(g->gs, 0, 1u << o->order, g->ring_refs, true,
				   (void **)&g->sring) ||
	    xbd_gntshr_share_pages(g->gs, 0, 1024, g->data_refs, true, (void **)&g->data) ||
	    xbd_evtchn_open(g->p, 1, &g->ev))
		return -1;
	((uint32_t *)g->sring)[1] = ((uint32_t *)g->sring)[3] = 1;
	g->nr_ents = ring_nr_ents(RING_ABI_X86_64, o->order);
	g->port = xbd_evtchn_bind_unbound_port(g->ev, 0);
	return g->port > 0 ? 0 : -1;
}

/* Queue one request in slot k's pages at a random offset. */
static void put_req(struct guest *g, const struct opts *o, unsigned int k)
{
	struct blkif_request r = { .operation = o->write ? BLKIF_OP_WRITE : BLKIF_OP_READ,
				   .id = k };
	unsigned int pages = (o->bs + 4095) / 4096, left = o->bs / 512;

	r.sector_number = ((uint64_t)rand() % (SPAN / o->bs)) * (o->bs / 512);
	r.nr_segments = (uint8_t)pages;
	for (unsigned int i = 0; i < pages; i++, left -= 8) {
		r.seg[i].gref = g->data_refs[k * pages + i];
		r.seg[i].first_sect = 0;
		r.seg[i].last_sect = (uint8_t)((left < 8 ? left : 8) - 1);
	}
	memcpy(g->sring + 64 + (g->prod++ & (g->nr_ents - 1)) * 112, &r, sizeof(r));
	g->issued++;
}

static void kick(struct guest *g, RING_IDX old)
{
	uint32_t *h = (uint32_t *)g->sring;

	__atomic_store_n(&h[0], g->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if ((RING_IDX)(g->prod - h[1]) < (RING_IDX)(g->prod - old))
		xbd_evtchn_notify(g->ev, (xbd_evtchn_port_t)g->port);
}

/* Reap responses, resubmit each slot at once; returns completions. */
static unsigned long reap(struct guest *g, const struct opts *o, bool resubmit)
{
	uint32_t *h = (uint32_t *)g->sring;
	RING_IDX old = g->prod;
	unsigned long n = 0;

	for (;;) {
		RING_IDX prod = __atomic_load_n(&h[2], __ATOMIC_ACQUIRE);

		for (; g->rsp_cons != prod; g->rsp_cons++, n++) {
			struct blkif_response rsp;

			memcpy(&rsp, g->sring + 64 + (g->rsp_cons & (g->nr_ents - 1)) * 112, 16);
			if (rsp.status != BLKIF_RSP_OKAY) {
				fprintf(stderr, "request failed: %d\n", rsp.status);
				exit(1);
			}
			if (resubmit && g->issued < g->to_issue)
				put_req(g, o, (unsigned int)rsp.id);
		}
		h[3] = g->rsp_cons + 1;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&h[2], __ATOMIC_ACQUIRE) == g->rsp_cons)
			break;
	}
	if (g->prod != old)
		kick(g, old);
	return n;
}

static void wait_event(struct guest *g)
{
	struct pollfd pfd = { xbd_evtchn_fd(g->ev), POLLIN, 0 };
	int port;

	if (poll(&pfd, 1, 1000) > 0 && (port = xbd_evtchn_pending(g->ev)) >= 0)
		xbd_evtchn_unmask(g->ev, (xbd_evtchn_port_t)port);
}

static int run(struct guest *g, const struct opts *o, struct be_queue *q)
{
	unsigned long done = 0;
	double t0, t;

	g->to_issue = o->requests ? o->requests : ULONG_MAX;
	for (unsigned int k = 0; k < o->qd && g->issued < g->to_issue; k++)
		put_req(g, o, k);
	kick(g, 0);
	t0 = t = now_s();
	while (g->issued < g->to_issue && (o->requests || (t = now_s()) - t0 < o->seconds)) {
		done += reap(g, o, true);
		wait_event(g);
	}
	t = now_s();
	while (done < g->issued && now_s() - t < 60) {     /* drain */
		done += reap(g, o, false);
		if (done < g->issued)
			wait_event(g);
	}
	t = now_s() - t0;
	printf("%s bs=%u qd=%u order=%u%s: %.0f requests/s, %.1f MB/s (rd_req %llu wr_req %llu)\n",
	       o->write ? "randwrite" : "randread", o->bs, o->qd, o->order,
	       o->persistent ? " persistent" : "", done / t, done / t * o->bs / 1e6,
	       (unsigned long long)q->stats.rd_req, (unsigned long long)q->stats.wr_req);
	return done == g->issued ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct guest g = { 0 };
	struct storage st = { .fd = -1 };
	struct be_queue q = { 0 };
	struct be_queue_cfg c;
	struct be_limit lim;
	char cmd[96];
	int rc = 1;

	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: %s FILE [--bs BYTES] [--qd N] [--seconds S] "
			"[--requests N] [--write] [--persistent] [--order N] "
			"[--wait uring|poll] [--limit off|idle|high]\n", argv[0]);
		return 2;
	}
	tun_init();
	if (o.wait_poll)
		tun_set(TUN_IO_WAIT_POLL, o.wait_poll, false);
	if (guest_up(&g, &o) || storage_open(o.file, &(struct storage_opts){ 0 }, &st) ||
	    st.size < SPAN) {
		fprintf(stderr, "setup failed (FILE must be >= 64 MiB)\n");
		goto out;
	}
	c = (struct be_queue_cfg){ .plat = g.p, .self = 0, .frontend = 1, .ring_order = o.order,
		.remote_port = (xbd_evtchn_port_t)g.port, .persistent = o.persistent,
		.storage = &st, .limits = { .sectors = st.size >> 9, .sector_size = 512,
					    .flush = true, .barrier = true } };
	memcpy(c.ring_refs, g.ring_refs, sizeof(g.ring_refs));
	be_limit_init(&lim);
	if (o.limit && strcmp(o.limit, "off"))
		c.limit = &lim;
	for (int k = 0; o.limit && !strcmp(o.limit, "high") && k < BE_LIM_RATES; k++)
		be_limit_set(&lim, (enum be_limit_key)k, BE_LIMIT_MAX, 0);
	if (be_queue_start(&q, &c)) {
		fprintf(stderr, "queue start failed\n");
		goto out;
	}
	rc = run(&g, &o, &q);
	be_queue_stop(&q);
	be_limit_destroy(&lim);
out:
	storage_close(&st);
	if (g.ev)
		xbd_evtchn_close(g.ev);
	if (g.gs)
		xbd_gntshr_close(g.gs);
	if (g.dom)
		xbd_domain_release(g.dom);
	if (g.p)
		xbd_platform_close(g.p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g.rundir);
	if (g.rundir[0] && system(cmd))
		fprintf(stderr, "could not remove %s\n", g.rundir);
	return rc;
}
