/* SPDX-License-Identifier: MIT */
/*
 * xbd-test-hostile-back: a backend that does not play by the rules, for
 * tests/system/test_hostile_backend.py (the mirror of
 * xbd-test-hostile-front).
 *
 *   xbd-test-hostile-back -R RUNDIR -d DOMID -v DEVID [options] SCENARIO
 *
 * It acts as domain 0's backend of vbd DEVID of domain DOMID, whose nodes
 * `xbd block-attach --timeout 0` wrote (no xbd-blkback runs): it writes
 * the disk's nodes, goes InitWait, maps the frontend's one-page ring
 * (x86_64 ABI, one queue, no indirect, no persistent grants), binds its
 * event channel and goes Connected.  Then it serves requests: a read gets
 * pattern(offset) in every byte (tests/system/test_hostile_backend.py and
 * xbd-test-front-probe compute the same bytes), a write or flush is
 * acknowledged.  After --after good answers, SCENARIO attacks:
 *
 *   good        never attacks
 *   dup-id      answers a request, then again with the same id
 *   unknown-id  answers with an id in range that is not in flight
 *   bad-id      answers with an id far beyond the ring
 *   wrong-op    answers a request with another operation
 *   bad-status  answers with status 7 (not a BLKIF_RSP_* value)
 *   runaway     moves rsp_prod 1000 past what it answered
 *   backwards   moves rsp_prod behind what it answered before
 *   torn        publishes a response slot it has not written (0xa5 bytes)
 *   early       publishes a response before any request (at connect)
 *   never-map   goes Connected without mapping the ring; never answers
 *   hold-grants maps every data grant, never answers, never unmaps, and
 *               ignores the frontend's Closing
 *
 * Before an attack (but early and never-map) it holds the requests it
 * gets until the ring has been quiet for 100 ms (and, for dup-id, it
 * holds two), so the set in flight is exactly the set it holds.  --key NODE=VALUE writes VALUE into the
 * backend node NODE instead of (or besides) the defaults: a bogus
 * sectors, sector-size or feature value.
 *
 * Output (stdout, "key value" lines): "connected 1", "attack NAME",
 * "requests N" (requests seen), "frontend-state N" (the state that ended
 * the run).  It ends when the frontend reaches Closed (answering Closing
 * and Closed as a backend does) or on SIGTERM; exit 0, 1 on a setup
 * failure, 2 on a usage error.
 *
 * One thread.  Mappings: the ring (one map, unmapped at disconnect) and,
 * per request, each data grant mapped, filled or read, unmapped before
 * the response (hold-grants keeps them until exit).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"
#include "xenbus.h"

#define STRIDE   112               /* x86_64 request/response entry */
#define NR_ENTS  32                /* __RING_SIZE of one page, x86_64 */
#define MAX_SEG  11
#define MAX_HELD 4096              /* hold-grants: mappings kept */
#define MAX_KEYS 16

enum scenario { S_GOOD, S_DUP, S_UNKNOWN, S_BADID, S_WRONGOP, S_BADSTATUS, S_RUNAWAY,
		S_BACKWARDS, S_TORN, S_EARLY, S_NEVERMAP, S_HOLD };

static const char *const names[] = {
	"good", "dup-id", "unknown-id", "bad-id", "wrong-op", "bad-status", "runaway",
	"backwards", "torn", "early", "never-map", "hold-grants",
};

/* A request as copied out of the ring (copied once, then used). */
struct req {
	uint8_t op, nseg;
	uint64_t id, sector;
	struct { uint32_t gref; uint8_t first, last; } seg[MAX_SEG];
};

struct back {
	const char *rundir;
	xbd_domid_t domid;
	unsigned int devid, after;
	enum scenario sc;
	const char *keys[MAX_KEYS];
	unsigned int nkeys;
	char be[96], fe[96];
	struct xbd_platform *p;
	struct xbd_gnttab *gt;
	struct xbd_evtchn *ev;
	struct xs_handle *xs;
	int lport;
	uint8_t *sring;
	uint32_t req_cons, rsp_pvt;
	unsigned int seen, answered;
	bool attacked;
	struct req held[NR_ENTS];
	unsigned int nheld;
	void *maps[MAX_HELD];
	unsigned int nmaps;
};

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("xbd-test-hostile-back: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void say(const char *key, unsigned long long v)
{
	printf("%s %llu\n", key, v);
	fflush(stdout);
}

/* The byte a read of disk offset off returns (xbd-test-front-probe checks). */
static uint8_t pattern(uint64_t off)
{
	return (uint8_t)((off >> 9) * 31 + (off & 511) + 1);
}

static uint32_t *hdr(struct back *b)
{
	return (uint32_t *)b->sring;   /* req_prod, req_event, rsp_prod, rsp_event */
}

static uint8_t *slot(struct back *b, uint32_t idx)
{
	return b->sring + 64 + (idx % NR_ENTS) * STRIDE;
}

/* ---- xenstore ------------------------------------------------------------ */

static void write_node(struct back *b, const char *node, const char *value)
{
	if (xbd_xs_write(b->xs, XBT_NULL, b->be, node, value))
		die("writing %s/%s", b->be, node);
}

/* The disk's nodes: 8 MiB of 512-byte sectors, flush; then --key. */
static void advertise(struct back *b)
{
	write_node(b, "sectors", "16384");
	write_node(b, "info", "0");
	write_node(b, "sector-size", "512");
	write_node(b, "physical-sector-size", "512");
	write_node(b, "feature-flush-cache", "1");
	write_node(b, "feature-persistent", "0");
	for (unsigned int i = 0; i < b->nkeys; i++) {
		char node[64];
		const char *eq = strchr(b->keys[i], '=');

		snprintf(node, sizeof(node), "%.*s", (int)(eq - b->keys[i]), b->keys[i]);
		write_node(b, node, eq + 1);
	}
	write_node(b, "state", "2");
}

static enum xenbus_state fe_state(struct back *b)
{
	enum xenbus_state s = XenbusStateUnknown;

	(void)xbd_xenbus_read_state(b->xs, XBT_NULL, b->fe, &s);
	return s;
}

/* Wait for the frontend's Initialised (1) or anything at or past Closing
 * (0: it gave up); bounded at 20 s. */
static int wait_initialised(struct back *b)
{
	for (int i = 0; i < 2000 && !stop; i++) {
		enum xenbus_state s = fe_state(b);

		if (s == XenbusStateInitialised || s == XenbusStateConnected)
			return 1;
		if (s >= XenbusStateClosing)
			return 0;
		usleep(10000);
	}
	return 0;
}

static void connect_ring(struct back *b)
{
	unsigned int ref, port;
	int rc;

	if (xbd_xs_read_uint(b->xs, XBT_NULL, b->fe, "ring-ref", 0, UINT32_MAX, &ref) ||
	    xbd_xs_read_uint(b->xs, XBT_NULL, b->fe, "event-channel", 0, UINT32_MAX, &port))
		die("the frontend wrote no single-page ring-ref / event-channel");
	b->lport = xbd_evtchn_bind_interdomain(b->ev, b->domid, port);
	if (b->lport < 0)
		die("binding port %u: %s", port, strerror(-b->lport));
	if (b->sc == S_NEVERMAP)
		return;
	rc = xbd_gnttab_map(b->gt, b->domid, 1, &ref, PROT_READ | PROT_WRITE,
			    (void **)&b->sring);
	if (rc)
		die("mapping ring-ref %u: %s", ref, strerror(-rc));
}

static void disconnect(struct back *b)
{
	if (b->sring)
		(void)xbd_gnttab_unmap(b->gt, b->sring, 1);
	b->sring = NULL;
	if (b->lport > 0)
		(void)xbd_evtchn_unbind(b->ev, (xbd_evtchn_port_t)b->lport);
	b->lport = -1;
}

/* ---- the ring -------------------------------------------------------------- */

static void fetch(struct back *b, uint32_t idx, struct req *r)
{
	uint8_t c[STRIDE];

	memcpy(c, slot(b, idx), STRIDE);       /* the one read of the slot */
	memset(r, 0, sizeof(*r));
	r->op = c[0];
	r->nseg = c[1] > MAX_SEG ? MAX_SEG : c[1];
	memcpy(&r->id, c + 8, 8);
	memcpy(&r->sector, c + 16, 8);
	for (unsigned int i = 0; i < r->nseg; i++) {
		memcpy(&r->seg[i].gref, c + 24 + 8 * i, 4);
		r->seg[i].first = c[24 + 8 * i + 4];
		r->seg[i].last = c[24 + 8 * i + 5];
	}
}

/* Write one response slot (not yet published). */
static void put_rsp(struct back *b, uint64_t id, uint8_t op, int16_t status)
{
	uint8_t *s = slot(b, b->rsp_pvt++);

	memset(s, 0, 16);
	memcpy(s, &id, 8);
	s[8] = op;
	memcpy(s + 10, &status, 2);
}

static void publish(struct back *b, uint32_t rsp_prod)
{
	__atomic_store_n(&hdr(b)[2], rsp_prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	xbd_evtchn_notify(b->ev, (xbd_evtchn_port_t)b->lport);
}

/* Do the data transfer of r (reads get the pattern); 0 or -1. */
static int16_t transfer(struct back *b, const struct req *r, bool keep)
{
	uint64_t off = r->sector * 512;

	for (unsigned int i = 0; i < r->nseg; i++) {
		uint8_t *pg;
		int prot = r->op == 0 ? PROT_READ | PROT_WRITE : PROT_READ;

		if (r->seg[i].first > r->seg[i].last || r->seg[i].last > 7 ||
		    xbd_gnttab_map(b->gt, b->domid, 1, &r->seg[i].gref, prot, (void **)&pg))
			return -1;
		for (unsigned int s = r->seg[i].first; r->op == 0 && s <= r->seg[i].last; s++)
			for (unsigned int k = 0; k < 512; k++, off++)
				pg[s * 512 + k] = pattern(off);
		if (keep && b->nmaps < MAX_HELD)
			b->maps[b->nmaps++] = pg;
		else
			(void)xbd_gnttab_unmap(b->gt, pg, 1);
	}
	return 0;
}

static void answer(struct back *b, const struct req *r)
{
	put_rsp(b, r->id, r->op, transfer(b, r, false));
	b->answered++;
}

/* A free id: in range, not held (the frontend has nothing else in flight). */
static uint64_t free_id(struct back *b)
{
	for (uint64_t id = 0; id < NR_ENTS; id++) {
		bool used = false;

		for (unsigned int i = 0; i < b->nheld; i++)
			used |= b->held[i].id == id;
		if (!used)
			return id;
	}
	return 0;
}

/* The attack, on the held requests (at least one). */
static void attack(struct back *b)
{
	const struct req *r = &b->held[0];
	uint32_t before = b->rsp_pvt;

	printf("attack %s\n", names[b->sc]);
	fflush(stdout);
	b->attacked = true;
	switch (b->sc) {
	case S_DUP: answer(b, r); put_rsp(b, r->id, r->op, 0); break;
	case S_UNKNOWN: put_rsp(b, free_id(b), r->op, 0); break;
	case S_BADID: put_rsp(b, r->id | 1ull << 40, r->op, 0); break;
	case S_WRONGOP: put_rsp(b, r->id, r->op == 0 ? 1 : 0, 0); break;
	case S_BADSTATUS: transfer(b, r, false); put_rsp(b, r->id, r->op, 7); break;
	case S_RUNAWAY: answer(b, r); publish(b, b->rsp_pvt + 1000); return;
	case S_BACKWARDS: answer(b, r); publish(b, before - 3); return;
	case S_TORN: memset(slot(b, b->rsp_pvt++), 0xa5, STRIDE); break;
	default: return;
	}
	/* The others get good answers (a frontend that missed the attack
	 * would go on), but for the duplicate's: as many responses as
	 * requests, so only the id check can catch it. */
	for (unsigned int i = 1; i < b->nheld - (b->sc == S_DUP); i++)
		answer(b, &b->held[i]);
	publish(b, b->rsp_pvt);
}

/* Take every request the frontend published; answer, hold or attack. */
static void drain(struct back *b)
{
	uint32_t prod = __atomic_load_n(&hdr(b)[0], __ATOMIC_ACQUIRE);
	bool answered = false;

	if (prod - b->req_cons > NR_ENTS)
		die("req_prod %u runs past the ring (req_cons %u)", prod, b->req_cons);
	while (b->req_cons != prod) {
		struct req r;

		fetch(b, b->req_cons++, &r);
		b->seen++;
		if (b->sc == S_HOLD) {
			transfer(b, &r, true);
		} else if (b->sc == S_GOOD || b->attacked || b->answered < b->after) {
			answer(b, &r);
			answered = true;
		} else if (b->nheld < NR_ENTS) {
			b->held[b->nheld++] = r;
		}
	}
	hdr(b)[1] = b->req_cons + 1;           /* req_event */
	if (answered)
		publish(b, b->rsp_pvt);
}

/* Wait for an event or 100 ms; returns true if the ring had news. */
static bool wait_event(struct back *b)
{
	struct pollfd pfd = { xbd_evtchn_fd(b->ev), POLLIN, 0 };
	int port;

	if (poll(&pfd, 1, 100) <= 0)
		return false;
	while ((port = xbd_evtchn_pending(b->ev)) > 0)
		xbd_evtchn_unmask(b->ev, (xbd_evtchn_port_t)port);
	return true;
}

/* Serve until the frontend closes (Closing: disconnect, Closed: done). */
static void serve(struct back *b)
{
	enum xenbus_state s = XenbusStateConnected;
	bool quiet;

	if (b->sc == S_EARLY) {
		b->attacked = true;
		printf("attack early\n");
		put_rsp(b, 0, 0, 0);
		publish(b, b->rsp_pvt);
	}
	while (!stop) {
		quiet = !wait_event(b);
		if (b->sring)
			drain(b);
		/* a duplicate needs a second request in flight to stand for */
		if (quiet && b->nheld >= (b->sc == S_DUP ? 2u : 1u) && !b->attacked)
			attack(b);
		s = fe_state(b);
		if (s >= XenbusStateClosing && b->sc != S_HOLD && b->lport > 0) {
			disconnect(b);
			write_node(b, "state", "5");
		}
		if (s == XenbusStateClosed || s == XenbusStateUnknown)
			break;
	}
	say("requests", b->seen);
	say("frontend-state", s);
}

/* ---- main -------------------------------------------------------------------- */

static const char usage[] =
"usage: xbd-test-hostile-back -R RUNDIR -d DOMID -v DEVID [--after N]\n"
"                             [--key NODE=VALUE]... SCENARIO\n"
"play domain 0's backend of vbd DEVID of domain DOMID and attack its\n"
"frontend after N good answers (default 1); SCENARIO is one of good,\n"
"dup-id, unknown-id, bad-id, wrong-op, bad-status, runaway, backwards,\n"
"torn, early, never-map, hold-grants\n";

static int parse(int argc, char **argv, struct back *b)
{
	static const struct option lo[] = {
		{ "after", required_argument, NULL, 'a' },
		{ "key", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	b->after = 1;
	while ((c = getopt_long(argc, argv, "R:d:v:", lo, NULL)) != -1) {
		switch (c) {
		case 'R': b->rundir = optarg; break;
		case 'd': b->domid = (xbd_domid_t)strtoul(optarg, NULL, 10); break;
		case 'v': b->devid = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'a': b->after = (unsigned int)strtoul(optarg, NULL, 10); break;
		case 'k':
			if (b->nkeys == MAX_KEYS || !strchr(optarg, '=') ||
			    strchr(optarg, '=') == optarg || strchr(optarg, '/'))
				return -1;
			b->keys[b->nkeys++] = optarg;
			break;
		default: return -1;
		}
	}
	if (optind != argc - 1 || !b->rundir || !b->domid)
		return -1;
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(argv[optind], names[i])) {
			b->sc = (enum scenario)i;
			return 0;
		}
	return -1;
}

static void setup(struct back *b)
{
	char sock[256];
	int rc;

	snprintf(b->be, sizeof(b->be), "/local/domain/0/backend/vbd/%u/%u", b->domid, b->devid);
	snprintf(b->fe, sizeof(b->fe), "/local/domain/%u/device/vbd/%u", b->domid, b->devid);
	if ((rc = xbd_platform_open(XBD_PLATFORM_LOCAL, b->rundir, &b->p)) ||
	    (rc = xbd_gnttab_open(b->p, 0, &b->gt)) ||
	    (rc = xbd_evtchn_open(b->p, 0, &b->ev)) ||
	    (rc = xbd_xs_local_socket(b->rundir, sock, sizeof(sock))) ||
	    (rc = xbd_xs_open(sock, &b->xs)))
		die("setup: %s", strerror(-rc));
	b->lport = -1;
}

int main(int argc, char **argv)
{
	static struct back b;
	struct sigaction sa = { .sa_handler = on_term };

	if (parse(argc, argv, &b)) {
		fputs(usage, stderr);
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	setup(&b);
	advertise(&b);
	if (wait_initialised(&b)) {
		connect_ring(&b);
		write_node(&b, "state", "4");
		say("connected", 1);
		serve(&b);
	} else {
		say("frontend-state", fe_state(&b));
	}
	disconnect(&b);
	if (fe_state(&b) >= XenbusStateClosing)
		write_node(&b, "state", "6");
	for (unsigned int i = 0; i < b.nmaps; i++)
		(void)xbd_gnttab_unmap(b.gt, b.maps[i], 1);
	xs_close(b.xs);
	xbd_evtchn_close(b.ev);
	xbd_gnttab_close(b.gt);
	xbd_platform_close(b.p);
	return 0;
}
