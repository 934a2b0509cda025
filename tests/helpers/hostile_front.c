/* SPDX-License-Identifier: MIT */
/*
 * xbd-test-hostile-front: a frontend that does not play by the rules, for
 * tests/system/test_hostile_*.py.
 *
 * It claims a local domain, shares a one-page ring (x86_64 ABI, one queue,
 * no persistent grants) and negotiates with the real xbd-blkback through
 * xenstore like a frontend; then a scenario writes straight into the
 * shared ring, the grant table and xenstore.  Results are printed on
 * stdout as "key value" lines for the test to parse; the exit status is 0
 * when the scenario's own checks passed, 1 when one failed (with a line
 * on stderr), 2 on a usage error.
 *
 * Threads: the main thread does everything except in the double-fetch
 * scenario, where a mutator thread rewrites the request slot while the
 * main thread waits for the response (they share only the slot, the
 * `armed` flag and the version table, handed over with atomics).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stdint.h>
#include <xen/grant_table.h>

#include "platform/platform.h"
#include "xenbus.h"

#define NDATA   64                  /* writable data pages granted to the backend */
#define NRO     4                   /* read-only pages */
#define STRIDE  112                 /* x86_64 request/response entry */
#define RSP_OKAY 0
#define RSP_ERROR (-1)
#define OP_READ 0
#define OP_WRITE 1

struct front {
	const char *rundir;
	xbd_domid_t domid;
	unsigned int vdev;
	char fe[96], be[96];
	struct xbd_platform *p;
	struct xbd_domain *dom;
	struct xbd_gntshr *gs;
	struct xs_handle *xs;
	struct xbd_evtchn *ev;
	int port;
	xbd_grant_ref_t ring_ref, data[NDATA], ro[NRO];
	uint8_t *sring, *mem, *ro_mem;
	unsigned int nr_ents;
	uint32_t prod, rsp_cons;
	const char *disk;           /* --disk: the backing file, for checks */
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("xbd-test-hostile-front: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t *hdr(struct front *f)
{
	return (uint32_t *)f->sring;        /* req_prod, req_event, rsp_prod, rsp_event */
}

static uint8_t *slot(struct front *f, uint32_t idx)
{
	return f->sring + 64 + (idx & (f->nr_ents - 1)) * STRIDE;
}

static uint8_t *page(struct front *f, unsigned int i)
{
	return f->mem + (size_t)i * XBD_PAGE_SIZE;
}

/* Build a request image (STRIDE bytes) in buf. */
static void build(uint8_t *buf, uint8_t op, uint8_t nseg, uint64_t id, uint64_t sector,
		  const xbd_grant_ref_t *refs, uint8_t first, uint8_t last)
{
	memset(buf, 0, STRIDE);
	buf[0] = op;
	buf[1] = nseg;
	memcpy(buf + 8, &id, 8);
	memcpy(buf + 16, &sector, 8);
	for (unsigned int i = 0; i < nseg && i < 11; i++) {
		memcpy(buf + 24 + 8 * i, &refs[i], 4);
		buf[24 + 8 * i + 4] = first;
		buf[24 + 8 * i + 5] = last;
	}
}

/* Publish req_prod = prod and notify (unconditionally: a hostile frontend
 * does not care about req_event). */
static void push(struct front *f)
{
	__atomic_store_n(&hdr(f)[0], f->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	xbd_evtchn_notify(f->ev, (xbd_evtchn_port_t)f->port);
}

/* Wait up to timeout_ms for the next response; copies its 16 bytes and
 * returns a pointer to its slot, or NULL on timeout. */
static uint8_t *get_rsp(struct front *f, uint8_t rsp[16], int timeout_ms)
{
	double end = now() + timeout_ms / 1000.0;

	while (now() < end) {
		if (__atomic_load_n(&hdr(f)[2], __ATOMIC_ACQUIRE) != f->rsp_cons) {
			uint8_t *s = slot(f, f->rsp_cons++);

			memcpy(rsp, s, 16);
			return s;
		}
		hdr(f)[3] = f->rsp_cons + 1;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&hdr(f)[2], __ATOMIC_ACQUIRE) != f->rsp_cons)
			continue;
		struct pollfd pfd = { xbd_evtchn_fd(f->ev), POLLIN, 0 };
		if (poll(&pfd, 1, 20) > 0) {
			int port = xbd_evtchn_pending(f->ev);
			if (port > 0)
				xbd_evtchn_unmask(f->ev, (xbd_evtchn_port_t)port);
		}
	}
	return NULL;
}

static int16_t rsp_status(const uint8_t rsp[16])
{
	int16_t st;

	memcpy(&st, rsp + 10, 2);
	return st;
}

static uint64_t rsp_id(const uint8_t rsp[16])
{
	uint64_t id;

	memcpy(&id, rsp, 8);
	return id;
}

/* One request (built in buf), waited for; its status. */
static int16_t roundtrip(struct front *f, const uint8_t *buf)
{
	uint8_t rsp[16];
	uint64_t id;

	memcpy(&id, buf + 8, 8);
	memcpy(slot(f, f->prod++), buf, STRIDE);
	push(f);
	if (!get_rsp(f, rsp, 10000))
		die("no response to request %llu", (unsigned long long)id);
	if (rsp_id(rsp) != id)
		die("response id %llu, want %llu", (unsigned long long)rsp_id(rsp),
		    (unsigned long long)id);
	return rsp_status(rsp);
}

/* ---- setup ------------------------------------------------------------- */

static void setup(struct front *f)
{
	char sock[256];
	int rc;

	snprintf(f->fe, sizeof(f->fe), "/local/domain/%u/device/vbd/%u", f->domid, f->vdev);
	snprintf(f->be, sizeof(f->be), "/local/domain/0/backend/vbd/%u/%u", f->domid, f->vdev);
	if ((rc = xbd_platform_open(XBD_PLATFORM_LOCAL, f->rundir, &f->p)) ||
	    (rc = xbd_domain_claim(f->p, f->domid, &f->dom)) ||
	    (rc = xbd_gntshr_open(f->dom, &f->gs)) ||
	    (rc = xbd_gntshr_share_pages(f->gs, 0, 1, &f->ring_ref, true, (void **)&f->sring)) ||
	    (rc = xbd_gntshr_share_pages(f->gs, 0, NDATA, f->data, true, (void **)&f->mem)) ||
	    (rc = xbd_gntshr_share_pages(f->gs, 0, NRO, f->ro, false, (void **)&f->ro_mem)) ||
	    (rc = xbd_evtchn_open(f->p, f->domid, &f->ev)))
		die("platform setup: %s", strerror(-rc));
	f->port = xbd_evtchn_bind_unbound_port(f->ev, 0);
	if (f->port < 0)
		die("bind: %s", strerror(-f->port));
	f->nr_ents = 32;                              /* __RING_SIZE, one page, x86_64 */
	hdr(f)[1] = 1;
	hdr(f)[3] = 1;
	if ((rc = xbd_xs_local_socket(f->rundir, sock, sizeof(sock))) ||
	    (rc = xbd_xs_open(sock, &f->xs)))
		die("xenstore: %s", strerror(-rc));
}

static void write_keys(struct front *f)
{
	if (xbd_xs_printf(f->xs, XBT_NULL, f->fe, "ring-ref", "%u", f->ring_ref) ||
	    xbd_xs_printf(f->xs, XBT_NULL, f->fe, "event-channel", "%d", f->port) ||
	    xbd_xs_write(f->xs, XBT_NULL, f->fe, "protocol", "x86_64-abi"))
		die("writing the frontend keys");
}

static void wait_be(struct front *f, enum xenbus_state s)
{
	enum xenbus_state last = XenbusStateUnknown;

	if (xbd_xenbus_wait_state(f->xs, f->be, 1u << s, 10000, &last))
		die("backend state %s, want %s", xbd_xenbus_state_name(last),
		    xbd_xenbus_state_name(s));
}

/* A previous frontend process of this domain left the device connected to
 * its ring: close and start over, as a rebooted guest's frontend does. */
static void reconnect(struct front *f)
{
	enum xenbus_state s = XenbusStateUnknown;

	if (xbd_xenbus_read_state(f->xs, XBT_NULL, f->be, &s))
		die("no backend at %s", f->be);
	if (s == XenbusStateInitWait)
		return;
	xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateClosing);
	xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateClosed);
	wait_be(f, XenbusStateClosed);
	xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateInitialising);
	wait_be(f, XenbusStateInitWait);
}

static void connect_front(struct front *f)
{
	reconnect(f);
	write_keys(f);
	if (xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateInitialised))
		die("writing state");
	wait_be(f, XenbusStateConnected);
	printf("connected 1\n");
	fflush(stdout);
}

static void fill(uint8_t *p, unsigned int seed)
{
	for (unsigned int i = 0; i < XBD_PAGE_SIZE; i++)
		p[i] = (uint8_t)(seed * 167 + i * 13 + (i >> 8) + 1);
}

/* ---- scenarios ---------------------------------------------------------- */

/* io OP SECTOR COUNT: COUNT one-page requests from SECTOR on, one at a
 * time; prints "ok N" and "error N" (and the first failing sector). */
static int sc_io(struct front *f, int argc, char **argv)
{
	uint8_t buf[STRIDE];
	unsigned int ok = 0, err = 0;
	long long first_err = -1;

	if (argc != 3)
		return 2;
	uint8_t op = strcmp(argv[0], "write") == 0 ? OP_WRITE : OP_READ;
	uint64_t sector = strtoull(argv[1], NULL, 0);
	unsigned int count = (unsigned int)strtoul(argv[2], NULL, 0);

	connect_front(f);
	for (unsigned int i = 0; i < count; i++) {
		uint64_t s = sector + 8ull * i;

		fill(page(f, i % NDATA), (unsigned int)s);
		build(buf, op, 1, s, s, &f->data[i % NDATA], 0, 7);
		if (roundtrip(f, buf) == RSP_OKAY) {
			ok++;
		} else {
			err++;
			if (first_err < 0)
				first_err = (long long)s;
		}
	}
	printf("ok %u\nerror %u\nfirst_error %lld\n", ok, err, first_err);
	return 0;
}

/* latency N: N write+read round trips of one page; prints the worst and
 * mean latency in microseconds; fails on a mismatch or an error. */
static int sc_latency_connected(struct front *f, int argc, char **argv);

static int sc_latency(struct front *f, int argc, char **argv)
{
	if (argc != 1)
		return 2;
	connect_front(f);
	return sc_latency_connected(f, argc, argv);
}

static int sc_latency_connected(struct front *f, int argc, char **argv)
{
	uint8_t buf[STRIDE];
	double worst = 0, total = 0;
	unsigned int n = (unsigned int)strtoul(argv[0], NULL, 0);

	(void)argc;
	for (unsigned int i = 0; i < n; i++) {
		uint64_t s = 8ull * (i % 512);
		double t0 = now(), dt;

		fill(page(f, 0), i);
		build(buf, OP_WRITE, 1, 2 * i, s, &f->data[0], 0, 7);
		if (roundtrip(f, buf) != RSP_OKAY)
			die("write %u failed", i);
		memset(page(f, 1), 0, XBD_PAGE_SIZE);
		build(buf, OP_READ, 1, 2 * i + 1, s, &f->data[1], 0, 7);
		if (roundtrip(f, buf) != RSP_OKAY)
			die("read %u failed", i);
		if (memcmp(page(f, 0), page(f, 1), XBD_PAGE_SIZE))
			die("read %u returned other bytes", i);
		dt = (now() - t0) * 1e6;
		total += dt;
		if (dt > worst)
			worst = dt;
	}
	printf("roundtrips %u\nworst_us %.0f\nmean_us %.0f\n", n, worst, n ? total / n : 0);
	return 0;
}

/* ---- double fetch (XSA-155) --------------------------------------------- */

/* Each 512-byte sector of a data page carries (seed, sector index) in its
 * first five bytes and a pattern derived from them, so any sector on disk
 * can be checked to be zero or an exact sector some request could send. */
static void fill_sectors(uint8_t *p, uint32_t seed)
{
	for (unsigned int k = 0; k < 8; k++) {
		uint8_t *s = p + 512 * k;

		memcpy(s, &seed, 4);
		s[4] = (uint8_t)k;
		for (unsigned int i = 5; i < 512; i++)
			s[i] = (uint8_t)(seed * 31 + k * 7 + i * 3 + 1);
	}
}

static bool sector_valid(const uint8_t *s, uint32_t max_seed)
{
	uint8_t want[4096];
	uint32_t seed;
	unsigned int i;

	for (i = 0; i < 512 && !s[i]; i++)
		;
	if (i == 512)
		return true;                 /* never written */
	memcpy(&seed, s, 4);
	if (seed >= max_seed || s[4] > 7)
		return false;
	fill_sectors(want, seed);
	return memcmp(s, want + 512 * s[4], 512) == 0;
}

#define BAD_REF 0xfffffff0u          /* out of any grant table */
#define NVER 7

struct mutator {
	pthread_t tid;
	pthread_barrier_t start, end;
	uint8_t *slot;
	const uint32_t *rsp_prod;        /* stop once the response is being written */
	uint32_t rsp_old;
	uint8_t ver[NVER][STRIDE];
	int stop, quit;                  /* atomics */
	unsigned long rewrites;
};

static void *mutate(void *arg)
{
	struct mutator *m = arg;

	for (;;) {
		pthread_barrier_wait(&m->start);
		if (__atomic_load_n(&m->quit, __ATOMIC_ACQUIRE))
			break;
		/* The response overwrites the request's slot: stop rewriting
		 * when rsp_prod moves (a rewrite may still race with the
		 * response; the main thread counts such responses apart). */
		for (unsigned int k = 0; !__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE) &&
		     __atomic_load_n(m->rsp_prod, __ATOMIC_ACQUIRE) == m->rsp_old; k++) {
			const uint8_t *v = m->ver[k % NVER];

			if (k & 1) {
				memcpy(m->slot, v, STRIDE);
			} else {        /* one field at a time: torn mixes */
				m->slot[0] = v[0];
				m->slot[1] = v[1];
				memcpy(m->slot + 16, v + 16, 8);
				memcpy(m->slot + 24, v + 24, 8 * 11);
			}
			__atomic_store_n(&m->rewrites, m->rewrites + 1, __ATOMIC_RELAXED);
		}
		pthread_barrier_wait(&m->end);
	}
	return NULL;
}

/* Versions of request i: two valid ones, the rest invalid in one way each. */
static void versions(struct front *f, struct mutator *m, unsigned int i, uint64_t sectors)
{
	xbd_grant_ref_t a[11], b[11], many[11];
	unsigned int pa = 2 * (i % 20), pb = pa + 1;

	for (unsigned int k = 0; k < 11; k++) {
		a[k] = b[k] = BAD_REF;
		many[k] = f->data[40 + k];
	}
	a[0] = f->data[pa];
	b[0] = f->data[pb];
	fill_sectors(page(f, pa), 2 * i + 1);
	fill_sectors(page(f, pb), 2 * i + 2);
	build(m->ver[0], OP_WRITE, 1, i, 16ull * i, a, 0, 7);          /* valid */
	build(m->ver[1], OP_WRITE, 1, i, 16ull * i + 8, b, 0, 7);      /* valid */
	build(m->ver[2], OP_WRITE, 11, i, sectors - 8, many, 0, 7);    /* crosses the end */
	build(m->ver[3], OP_WRITE, 1, i, sectors * 4 + 8, a, 0, 7);    /* far outside */
	build(m->ver[4], 0x55, 200, i, 16ull * i, a, 0, 7);            /* bad op, count */
	build(m->ver[5], OP_WRITE, 1, i, 16ull * i, a, 7, 0);          /* bad segment */
	build(m->ver[6], OP_WRITE, 1, i, 16ull * i, a, 0, 9);          /* past the page */
	/* the unused segments of every version carry BAD_REF, not zero */
	for (unsigned int v = 0; v < NVER; v++)
		for (unsigned int k = m->ver[v][1] > 11 ? 11 : m->ver[v][1]; k < 11; k++)
			memcpy(m->ver[v] + 24 + 8 * k, &(uint32_t){ BAD_REF }, 4);
}

/* doublefetch N SECONDS: up to N requests (or SECONDS), each rewritten by
 * the mutator while in flight; then every sector of the disk is checked. */
static int sc_doublefetch(struct front *f, int argc, char **argv)
{
	struct mutator m = { 0 };
	unsigned int n, ok = 0, err = 0, clobbered = 0, i, bad = 0;
	uint64_t sectors;
	double end;
	int fd;

	if (argc != 2 || !f->disk)
		return 2;
	n = (unsigned int)strtoul(argv[0], NULL, 0);
	end = now() + strtod(argv[1], NULL);
	connect_front(f);
	if (xbd_xs_read_u64(f->xs, XBT_NULL, f->be, "sectors", 64, UINT32_MAX, &sectors))
		die("no sectors node");
	if (n > sectors / 16 - 8)
		n = (unsigned int)(sectors / 16 - 8);
	for (i = 0; i < 11; i++)
		fill_sectors(page(f, 40 + i), 100000 + i);
	pthread_barrier_init(&m.start, NULL, 2);
	pthread_barrier_init(&m.end, NULL, 2);
	if (pthread_create(&m.tid, NULL, mutate, &m))
		die("pthread_create");
	for (i = 0; i < n && now() < end; i++) {
		uint8_t rsp[16];

		versions(f, &m, i, sectors);
		m.slot = slot(f, f->prod);
		m.rsp_prod = &hdr(f)[2];
		m.rsp_old = f->rsp_cons;
		memcpy(m.slot, m.ver[0], STRIDE);
		f->prod++;
		__atomic_store_n(&m.stop, 0, __ATOMIC_RELEASE);
		pthread_barrier_wait(&m.start);
		/* publish only once the slot is churning */
		for (unsigned long r0 = __atomic_load_n(&m.rewrites, __ATOMIC_RELAXED);
		     __atomic_load_n(&m.rewrites, __ATOMIC_RELAXED) - r0 < 64;)
			;
		push(f);
		if (!get_rsp(f, rsp, 10000))
			die("no response to request %u", i);
		__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
		pthread_barrier_wait(&m.end);
		if (rsp_id(rsp) != i)
			clobbered++;            /* our own rewrite hit the response */
		else if (rsp_status(rsp) == RSP_OKAY)
			ok++;
		else
			err++;
	}
	__atomic_store_n(&m.quit, 1, __ATOMIC_RELEASE);
	pthread_barrier_wait(&m.start);
	pthread_join(m.tid, NULL);

	fd = open(f->disk, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("%s: %s", f->disk, strerror(errno));
	for (uint64_t s = 0; s < sectors; s++) {
		uint8_t buf[512];

		if (pread(fd, buf, 512, (off_t)s * 512) != 512)
			die("short read of the disk at sector %llu", (unsigned long long)s);
		if (!sector_valid(buf, 200000) && bad++ < 5)
			fprintf(stderr, "sector %llu holds bytes no request sent\n",
				(unsigned long long)s);
	}
	close(fd);
	printf("requests %u\nok %u\nerror %u\nclobbered %u\nrewrites %lu\nbad_sectors %u\n",
	       i, ok, err, clobbered, m.rewrites, bad);
	return bad ? 1 : 0;
}

/* ---- no stale bytes in responses (XSA-216) ------------------------------ */

/* leak ROUNDS: fill the ring with a pattern, submit a full ring of valid
 * and invalid requests, then check that each response wrote zero padding
 * and left the rest of its entry exactly as the frontend wrote it. */
static int sc_leak(struct front *f, int argc, char **argv)
{
	static uint8_t img[32][STRIDE];
	unsigned int rounds, checked = 0, bad = 0;

	if (argc != 1)
		return 2;
	rounds = (unsigned int)strtoul(argv[0], NULL, 0);
	connect_front(f);
	for (unsigned int r = 0; r < rounds; r++) {
		uint32_t base = f->prod;

		for (unsigned int j = 0; j < f->nr_ents; j++) {
			xbd_grant_ref_t ref[11];
			uint8_t *s = img[j];

			/* the request's id covers the response's padding (bytes 9
			 * and 12-15): give it a pattern there too */
			uint64_t id = 0xa5a5a5a5a5a5a500ull | j;

			for (unsigned int k = 0; k < 11; k++)
				ref[k] = f->data[(j + k) % NDATA];
			switch (j % 4) {
			case 0:  build(s, OP_WRITE, 2, id, 16 * j, ref, 0, 7); break;
			case 1:  build(s, 0x55, 1, id, 0, ref, 0, 7); break;      /* unknown op */
			case 2:  build(s, OP_READ, 0, id, 0, ref, 0, 7); break;   /* no segment */
			default: build(s, OP_READ, 1, id, ~0ull - 4, ref, 0, 7); break;
			}
			/* the frontend's own pattern everywhere the request has no field */
			memset(s + 2, 0xa5, 6);
			for (unsigned int o = 24 + 8 * (s[1] > 11 ? 11 : s[1]); o < STRIDE; o++)
				s[o] = (uint8_t)(0xa5 ^ o ^ r);
			memcpy(slot(f, f->prod++), s, STRIDE);
		}
		uint64_t seen = 0;

		push(f);
		for (unsigned int j = 0; j < f->nr_ents; j++) {
			uint8_t rsp[16], *s = get_rsp(f, rsp, 10000);
			const uint8_t *want = img[(f->rsp_cons - 1 - base) % 32];

			if (!s)
				die("no response %u of round %u", j, r);
			checked++;
			/* responses come in any order: each id of the round once */
			uint64_t id = rsp_id(rsp);
			if ((id & ~31ull) != 0xa5a5a5a5a5a5a500ull || (seen >> (id & 31)) & 1)
				die("response %u has id %#llx", j, (unsigned long long)id);
			seen |= 1ull << (id & 31);
			if (s[9] || s[12] || s[13] || s[14] || s[15] ||
			    memcmp(s + 16, want + 16, STRIDE - 16)) {
				if (bad++ < 5)
					fprintf(stderr, "slot %u: response wrote outside its fields\n",
						(f->rsp_cons - 1) % 32);
			}
		}
	}
	printf("slots_checked %u\nbad_slots %u\n", checked, bad);
	return bad ? 1 : 0;
}

/* ---- event-channel storm (XSA-332/391) ---------------------------------- */

/* storm SECONDS: notify as fast as possible, and re-publish req_prod. */
static int sc_storm(struct front *f, int argc, char **argv)
{
	unsigned long n = 0;
	double end;

	if (argc != 1)
		return 2;
	connect_front(f);
	end = now() + strtod(argv[0], NULL);
	while (now() < end) {
		for (int k = 0; k < 256; k++, n++) {
			__atomic_store_n(&hdr(f)[0], f->prod, __ATOMIC_RELEASE);
			xbd_evtchn_notify(f->ev, (xbd_evtchn_port_t)f->port);
		}
	}
	printf("notifies %lu\n", n);
	return 0;
}

/* ---- grant-map failures (XSA-361/362/365/371) --------------------------- */

/* The pin count of a ref in the local grant table ("hypervisor" state). */
static uint64_t pins(struct front *f, xbd_grant_ref_t ref, uint64_t *entry)
{
	char path[512];
	uint64_t v = ~0ull;
	int fd;

	snprintf(path, sizeof(path), "%s/dom%u/active", f->rundir, f->domid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, &v, 8, (off_t)ref * 8) != 8)
		die("%s: cannot read", path);
	close(fd);
	snprintf(path, sizeof(path), "%s/dom%u/gnttab", f->rundir, f->domid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, entry, 8, (off_t)ref * 8) != 8)
		die("%s: cannot read", path);
	close(fd);
	return v;
}

struct gcase {
	const char *name;
	uint8_t op;
	unsigned int nseg;
	int want;
	xbd_grant_ref_t ref[11];
};

static int sc_badgrant(struct front *f, int argc, char **argv)
{
	xbd_grant_ref_t revoked, foreign;
	void *rv, *fa;
	unsigned int failed = 0;
	int rc;

	(void)argv;
	if (argc != 0)
		return 2;
	if ((rc = xbd_gntshr_share_pages(f->gs, 0, 1, &revoked, true, &rv)) ||
	    (rc = xbd_gntshr_unshare(f->gs, rv, 1)) ||
	    (rc = xbd_gntshr_share_pages(f->gs, (xbd_domid_t)(f->domid + 1), 1, &foreign,
					 true, &fa)))
		die("grant setup: %s", strerror(-rc));
	connect_front(f);
	xbd_grant_ref_t *d = f->data;
	struct gcase cases[] = {
		{ "all-valid",        OP_WRITE, 3, RSP_OKAY,  { d[0], d[1], d[2] } },
		{ "write-from-ro",    OP_WRITE, 2, RSP_OKAY,  { f->ro[0], d[3] } },
		{ "invalid-middle",   OP_WRITE, 3, RSP_ERROR, { d[0], BAD_REF, d[2] } },
		{ "revoked-last",     OP_WRITE, 3, RSP_ERROR, { d[0], d[1], revoked } },
		{ "foreign-first",    OP_WRITE, 2, RSP_ERROR, { foreign, d[0] } },
		{ "read-into-ro",     OP_READ,  2, RSP_ERROR, { d[4], f->ro[1] } },
		{ "read-into-ro-11",  OP_READ,  11, RSP_ERROR, { d[5], d[6], d[7], d[8], d[9], d[10],
							   d[11], d[12], d[13], d[14], f->ro[2] } },
		{ "write-revoked-11", OP_WRITE, 11, RSP_ERROR, { d[5], d[6], d[7], d[8], d[9], d[10],
							   d[11], d[12], d[13], revoked, d[14] } },
		{ "same-ref-twice",   OP_READ,  2, RSP_OKAY,  { d[15], d[15] } },
	};
	for (unsigned int c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint8_t buf[STRIDE];
		int16_t st;

		build(buf, cases[c].op, (uint8_t)cases[c].nseg, c, 64, cases[c].ref, 0, 7);
		st = roundtrip(f, buf);
		printf("case %s %d\n", cases[c].name, st);
		if (st != cases[c].want) {
			fprintf(stderr, "%s: status %d, want %d\n", cases[c].name, st, cases[c].want);
			failed++;
		}
	}
	/* Nothing of ours stays mapped: no pin, no GTF_reading/writing. */
	unsigned int pinned = 0;
	for (unsigned int i = 0; i < NDATA + NRO + 1; i++) {
		xbd_grant_ref_t ref = i < NDATA ? d[i] : i < NDATA + NRO ? f->ro[i - NDATA] : foreign;
		uint64_t e, p = pins(f, ref, &e);

		if (p || (e & (GTF_reading | GTF_writing))) {
			fprintf(stderr, "ref %u still pinned (%llu, flags %#llx)\n", ref,
				(unsigned long long)p, (unsigned long long)(e & 0xffff));
			pinned++;
		}
	}
	printf("pinned %u\n", pinned);
	/* and the guest can revoke everything at once */
	rc = xbd_gntshr_unshare(f->gs, f->mem, NDATA);
	int rc2 = xbd_gntshr_unshare(f->gs, f->ro_mem, NRO);
	int rc3 = xbd_gntshr_unshare(f->gs, fa, 1);
	printf("revoke %d %d %d\n", rc, rc2, rc3);
	f->mem = f->ro_mem = NULL;
	return failed || pinned || rc || rc2 || rc3 ? 1 : 0;
}

/* ---- ring overrun -------------------------------------------------------- */

static int sc_overrun(struct front *f, int argc, char **argv)
{
	char err[256] = "";

	(void)argv;
	if (argc != 0)
		return 2;
	connect_front(f);
	__atomic_store_n(&hdr(f)[0], hdr(f)[2] + 1000, __ATOMIC_RELEASE);
	xbd_evtchn_notify(f->ev, (xbd_evtchn_port_t)f->port);
	wait_be(f, XenbusStateClosing);
	xbd_xs_read_buf(f->xs, XBT_NULL, f->be, "error", err, sizeof(err));
	printf("be_state closing\nerror %s\n", err);
	return err[0] ? 0 : 1;
}

/* ---- rapid state flipping (XSA-350) -------------------------------------- */

static int sc_flip(struct front *f, int argc, char **argv)
{
	static const int seq[] = { XenbusStateInitialising, XenbusStateInitialised,
				   XenbusStateConnected, XenbusStateClosing,
				   XenbusStateClosed, XenbusStateInitialised,
				   XenbusStateClosed, 7 /* Reconfiguring */ };
	unsigned long n, i;

	if (argc != 1)
		return 2;
	n = strtoul(argv[0], NULL, 0);
	write_keys(f);
	for (i = 0; i < n; i++) {
		int s = seq[i % (sizeof(seq) / sizeof(seq[0]))];
		if (xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", s))
			break;
	}
	xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateClosed);
	printf("flips %lu\n", i);
	return 0;
}

/* ---- watch-event flood (XSA-349) ---------------------------------------- */

/* flood N: N writes of our (unchanged) state, each one a watch event for
 * the backend, as fast as xenstored takes them; then prove the device
 * still serves with checked round trips. */
static int sc_flood(struct front *f, int argc, char **argv)
{
	unsigned long n, i;

	if (argc != 1)
		return 2;
	n = strtoul(argv[0], NULL, 0);
	connect_front(f);
	for (i = 0; i < n; i++)
		if (xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateConnected))
			die("write %lu failed", i);
	printf("writes %lu\n", i);
	char *one[] = { "8" };
	return sc_latency_connected(f, 1, one);
}

/* ---- abandon: close with I/O in flight ------------------------------------ */

/* abandon N: N one-page writes pushed at once, then Closing and Closed
 * without waiting for a response (a guest that shuts down, or one that
 * wants the backend's teardown to wait on slow storage). */
static int sc_abandon(struct front *f, int argc, char **argv)
{
	unsigned int n;

	if (argc != 1)
		return 2;
	n = (unsigned int)strtoul(argv[0], NULL, 0);
	if (n > f->nr_ents)
		n = f->nr_ents;
	connect_front(f);
	for (unsigned int i = 0; i < n; i++) {
		uint8_t buf[STRIDE];

		build(buf, OP_WRITE, 1, i, 8ull * i, &f->data[i % NDATA], 0, 7);
		memcpy(slot(f, f->prod++), buf, STRIDE);
	}
	push(f);
	usleep(100 * 1000);           /* let the backend take them */
	xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateClosing);
	xbd_xs_printf(f->xs, XBT_NULL, f->fe, "state", "%d", XenbusStateClosed);
	printf("abandoned %u\n", n);
	return 0;
}

/* ---- bloat: the memory attack of issue 18 (XSA-392 class) ----------------- */

#define OP_INDIRECT 6
#define BLOAT_SEGS 256

/* One indirect read of BLOAT_SEGS whole pages at sector 0, its segments
 * cycling over every data page; the segment list is the read-only page
 * ro[0] (the backend copies it out once per request, so all share it). */
static void build_bloat(uint8_t *buf, uint64_t id, xbd_grant_ref_t ind)
{
	uint16_t nseg = BLOAT_SEGS;

	memset(buf, 0, STRIDE);
	buf[0] = OP_INDIRECT;
	buf[1] = OP_READ;
	memcpy(buf + 2, &nseg, 2);
	memcpy(buf + 8, &id, 8);
	memcpy(buf + 28, &ind, 4);
}

/* bloat SECONDS: persistent grants negotiated, then a ring kept full of
 * 256-segment (1 MiB) indirect reads for SECONDS, on more grants than
 * the backend's pool holds (the test lowers max_persistent_grants), so
 * each one is bounce-copied.  Prints "ready 1" once the first responses
 * came back, then "requests N", "ok N", "error N"; fails on an error
 * status, a response that never comes or a wrong id. */
static int sc_bloat(struct front *f, int argc, char **argv)
{
	uint8_t buf[STRIDE], rsp[16];
	unsigned long sent = 0, ok = 0, err = 0;
	unsigned int inflight = 0;
	double end;

	if (argc != 1)
		return 2;
	end = now() + strtod(argv[0], NULL);
	for (unsigned int i = 0; i < BLOAT_SEGS; i++) {      /* the segment list */
		uint8_t *seg = f->ro_mem + 8 * i;
		xbd_grant_ref_t ref = f->data[i % NDATA];

		memcpy(seg, &ref, 4);
		seg[4] = 0;
		seg[5] = 7;
	}
	if (xbd_xs_write(f->xs, XBT_NULL, f->fe, "feature-persistent", "1"))
		die("writing feature-persistent");
	connect_front(f);
	for (;;) {
		while (inflight < f->nr_ents && now() < end) {
			build_bloat(buf, sent++, f->ro[0]);
			memcpy(slot(f, f->prod++), buf, STRIDE);
			inflight++;
		}
		push(f);
		if (!inflight)
			break;
		if (!get_rsp(f, rsp, 20000))
			die("no response after %lu requests (%u in flight)", ok + err, inflight);
		inflight--;
		if (rsp_status(rsp) == RSP_OKAY)
			ok++;
		else
			err++;
		if (ok + err == 1) {
			printf("ready 1\n");
			fflush(stdout);
		}
	}
	printf("requests %lu\nok %lu\nerror %lu\n", sent, ok, err);
	return err || ok != sent ? 1 : 0;
}

/* ---- busy: I/O until killed ---------------------------------------------- */

static int sc_busy(struct front *f, int argc, char **argv)
{
	double end;

	if (argc != 1)
		return 2;
	end = now() + strtod(argv[0], NULL);
	connect_front(f);
	for (unsigned long b = 0; now() < end; b++) {
		for (unsigned int j = 0; j < 8; j++) {
			uint8_t buf[STRIDE];

			build(buf, j & 1 ? OP_READ : OP_WRITE, 4, j, 64ull * j,
			      &f->data[4 * j], 0, 7);
			memcpy(slot(f, f->prod++), buf, STRIDE);
		}
		push(f);
		for (unsigned int j = 0; j < 8; j++) {
			uint8_t rsp[16];
			if (!get_rsp(f, rsp, 10000))
				die("no response");
		}
		if (b == 0) {
			printf("ready 1\n");
			fflush(stdout);
		}
	}
	return 0;
}

/* ---- truncating our own files (issue 18 item 2) ---------------------------- */

/*
 * truncate memory|gnttab|evtchn: serve a few round trips, then stage an
 * 11-segment write and cut the file to 0 bytes at the moment the backend
 * will next touch it: memory (ring and data pages) before the notify,
 * gnttab (the request's grants are mapped on arrival) before the notify,
 * evtchn (the backend raises our port with its response) right after.
 * From then on we touch nothing of ours but xenstore (we would get the
 * SIGBUS ourselves), wait for the backend to close the disk, print its
 * error and leave with _exit (our cleanup would touch the files).
 */
static int sc_truncate(struct front *f, int argc, char **argv)
{
	char path[512], err[256] = "";
	uint8_t buf[STRIDE];
	int fd;

	if (argc != 1 || (strcmp(argv[0], "memory") && strcmp(argv[0], "gnttab") &&
			  strcmp(argv[0], "evtchn")))
		return 2;
	snprintf(path, sizeof(path), "%s/dom%u/%s", f->rundir, f->domid, argv[0]);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	connect_front(f);
	for (unsigned int i = 0; i < 4; i++) {
		build(buf, OP_WRITE, 1, i, 8ull * i, &f->data[i], 0, 7);
		if (roundtrip(f, buf) != RSP_OKAY)
			die("round trip %u failed", i);
	}
	build(buf, OP_WRITE, 11, 99, 0, &f->data[8], 0, 7);
	memcpy(slot(f, f->prod++), buf, STRIDE);
	hdr(f)[3] = f->rsp_cons + 1;          /* rsp_event: notify us for it */
	__atomic_store_n(&hdr(f)[0], f->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (strcmp(argv[0], "evtchn") == 0) {
		xbd_evtchn_notify(f->ev, (xbd_evtchn_port_t)f->port);
		if (ftruncate(fd, 0) < 0)
			die("ftruncate: %s", strerror(errno));
	} else {
		if (ftruncate(fd, 0) < 0)
			die("ftruncate: %s", strerror(errno));
		xbd_evtchn_notify(f->ev, (xbd_evtchn_port_t)f->port);
	}
	printf("truncated %s\n", argv[0]);
	fflush(stdout);
	wait_be(f, XenbusStateClosing);
	xbd_xs_read_buf(f->xs, XBT_NULL, f->be, "error", err, sizeof(err));
	printf("be_state closing\nerror %s\n", err);
	fflush(stdout);
	_exit(err[0] ? 0 : 1);
}

/* ---- main ---------------------------------------------------------------- */

static const char usage[] =
	"usage: xbd-test-hostile-front -R RUNDIR -d DOMID [-v VDEV] [--disk FILE] SCENARIO [ARGS]\n"
	"A hostile frontend for domain DOMID's vbd VDEV (default 51712, xvda):\n"
	"  io read|write SECTOR COUNT  one-page requests, one at a time\n"
	"  latency N                   N checked write+read round trips\n"
	"  doublefetch N SECONDS       requests rewritten while in flight (needs --disk)\n"
	"  leak ROUNDS                 response slots hold no stale backend bytes\n"
	"  storm SECONDS               notify in a tight loop\n"
	"  badgrant                    requests with partly unmappable grants\n"
	"  overrun                     req_prod far beyond the ring\n"
	"  flip N                      cycle the frontend state N times\n"
	"  flood N                     N watch events for the backend, then 8 round trips\n"
	"  busy SECONDS                I/O in a loop (prints 'ready 1' once serving)\n"
	"  abandon N                   N writes in flight, then Closed at once\n"
	"  bloat SECONDS               a full ring of 1 MiB indirect reads (persistent)\n"
	"  truncate memory|gnttab|evtchn  cut our own file under the backend's I/O\n";

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "disk", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct { const char *name; int (*fn)(struct front *, int, char **); } sc[] = {
		{ "io", sc_io }, { "latency", sc_latency }, { "doublefetch", sc_doublefetch },
		{ "leak", sc_leak }, { "storm", sc_storm }, { "badgrant", sc_badgrant },
		{ "overrun", sc_overrun }, { "flip", sc_flip }, { "busy", sc_busy },
		{ "flood", sc_flood }, { "bloat", sc_bloat },
		{ "abandon", sc_abandon }, { "truncate", sc_truncate },
	};
	struct front f = { .vdev = 51712 };
	int c, rc = 2;

	while ((c = getopt_long(argc, argv, "+R:d:v:h", opts, NULL)) != -1) {
		switch (c) {
		case 'R': f.rundir = optarg; break;
		case 'd': f.domid = (xbd_domid_t)strtoul(optarg, NULL, 0); break;
		case 'v': f.vdev = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'D': f.disk = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (!f.rundir || !f.domid || optind >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++) {
		if (strcmp(argv[optind], sc[i].name))
			continue;
		setup(&f);
		rc = sc[i].fn(&f, argc - optind - 1, argv + optind + 1);
		break;
	}
	if (rc == 2)
		fputs(usage, stderr);
	if (f.xs)
		xs_close(f.xs);
	if (f.ev)
		xbd_evtchn_close(f.ev);
	if (f.gs)
		xbd_gntshr_close(f.gs);
	if (f.dom)
		xbd_domain_release(f.dom);
	if (f.p)
		xbd_platform_close(f.p);
	return rc;
}
