/* SPDX-License-Identifier: MIT */
/*
 * xbd-bench-platform: the local platform's costs next to the raw syscalls
 * they are built from, measured in the same run on the same machine.
 *
 * Usage: xbd-bench-platform RUNDIR [SCALE]
 *   RUNDIR  an empty, private directory (the bench creates domain 1 there)
 *   SCALE   iteration multiplier (default 1; 0.1 for a quick smoke run)
 *
 * Event-channel figures use two processes: this one (domain 0, the
 * backend) and a forked child that claims domain 1 (the guest) and opens
 * its own platform handle after the fork.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/cpu.h"
#include "platform/platform.h"

#define BATCH 32

static double scale = 1.0;
static const char *rundir;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long iters(long n)
{
	long v = (long)((double)n * scale);

	return v < 10 ? 10 : v;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "xbd-bench-platform: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* One line: the platform figure (none if platform < 0), then the raw one
 * (none if raw_name is empty). */
static void row(const char *what, double platform, double raw, const char *raw_name,
		const char *unit)
{
	if (platform < 0)
		printf("  %-34s %10s %-6s", what, "", "");
	else
		printf("  %-34s %10.2f %-6s", what, platform, unit);
	if (*raw_name)
		printf("   %-22s %10.2f %s", raw_name, raw, unit);
	printf("\n");
}

/* ---- event channels ---- */

static void wait_port(struct xbd_evtchn *e)
{
	struct pollfd pfd = { .fd = xbd_evtchn_fd(e), .events = POLLIN };
	int port;

	do {
		if (poll(&pfd, 1, 5000) <= 0)
			die("poll (peer gone?)", ETIMEDOUT);
		port = xbd_evtchn_pending(e);
	} while (port < 0);
	xbd_evtchn_unmask(e, (xbd_evtchn_port_t)port);
}

struct evtchn_figures {
	double rt_us;          /* notify round trip */
	double coalesced;      /* notifies/s while the peer does not read */
	double live;           /* notifies/s while the peer consumes */
	double wakes;          /* wake-ups/s the consumer got meanwhile */
};

static void xfer(int fd, void *buf, size_t len, bool out)
{
	if ((out ? write(fd, buf, len) : read(fd, buf, len)) != (ssize_t)len)
		_exit(1);
}

/* Notify n times; returns notifies per second. */
static double flood(struct xbd_evtchn *e, int port, long n)
{
	double t0 = now();

	for (long i = 0; i < n; i++)
		xbd_evtchn_notify(e, (xbd_evtchn_port_t)port);
	return (double)n / (now() - t0);
}

/*
 * The guest: echo `rounds` events back (round trips), then two floods of
 * notifies, each started by a byte on `down` and reported (notifies/s) on
 * `up`: the first while the backend does not read, the second while it
 * consumes.
 */
static void guest(int up, int down, long rounds, long floods)
{
	struct xbd_platform *p;
	struct xbd_domain *d;
	struct xbd_evtchn *e;
	double rate;
	char go;
	int port, rc;

	rc = xbd_platform_open(XBD_PLATFORM_LOCAL, rundir, &p);
	if (!rc)
		rc = xbd_domain_claim(p, 1, &d);
	if (!rc)
		rc = xbd_evtchn_open(p, 1, &e);
	if (rc)
		die("guest setup", rc);
	port = xbd_evtchn_bind_unbound_port(e, 0);
	xfer(up, &port, sizeof(port), true);
	for (long i = 0; i < rounds; i++) {
		wait_port(e);
		xbd_evtchn_notify(e, (xbd_evtchn_port_t)port);
	}
	for (int phase = 0; phase < 2; phase++) {
		xfer(down, &go, 1, false);
		rate = flood(e, port, floods);
		xfer(up, &rate, sizeof(rate), true);
	}
	xfer(down, &go, 1, false);   /* stay bound until the backend is done */
	xbd_evtchn_close(e);
	xbd_domain_release(d);
	xbd_platform_close(p);
	_exit(0);
}

/* Consume events until the guest reports on `up`; returns wake-ups. */
static long consume(struct xbd_evtchn *e, int up, double *rate)
{
	struct pollfd pfd[2] = { { .fd = xbd_evtchn_fd(e), .events = POLLIN },
				 { .fd = up, .events = POLLIN } };
	long wakes = 0;
	int port;

	for (;;) {
		if (poll(pfd, 2, 5000) <= 0)
			die("poll (guest gone?)", ETIMEDOUT);
		if (pfd[0].revents && (port = xbd_evtchn_pending(e)) > 0) {
			wakes++;
			xbd_evtchn_unmask(e, (xbd_evtchn_port_t)port);
		}
		if (pfd[1].revents) {
			xfer(up, rate, sizeof(*rate), false);
			return wakes;
		}
	}
}

static void bench_evtchn(struct xbd_platform *p, struct evtchn_figures *fig)
{
	long rounds = iters(20000), floods = iters(1000000), wakes;
	int up[2], down[2], gport, bport, rc, status = 0;
	struct xbd_evtchn *e;
	char go = 1;
	double t0;
	pid_t pid;

	if (pipe(up) < 0 || pipe(down) < 0)
		die("pipe", errno);
	pid = fork();
	if (pid == 0)
		guest(up[1], down[0], rounds, floods);
	xfer(up[0], &gport, sizeof(gport), false);
	rc = xbd_evtchn_open(p, 0, &e);
	if (rc)
		die("evtchn open", rc);
	bport = xbd_evtchn_bind_interdomain(e, 1, (xbd_evtchn_port_t)gport);
	if (bport < 0)
		die("bind", bport);
	t0 = now();
	for (long i = 0; i < rounds; i++) {
		xbd_evtchn_notify(e, (xbd_evtchn_port_t)bport);
		wait_port(e);
	}
	fig->rt_us = (now() - t0) / (double)rounds * 1e6;
	/* flood 1: we do not read, so all but the first notify coalesce */
	xfer(down[1], &go, 1, true);
	xfer(up[0], &fig->coalesced, sizeof(fig->coalesced), false);
	while (xbd_evtchn_pending(e) > 0)
		xbd_evtchn_unmask(e, (xbd_evtchn_port_t)bport);
	/* flood 2: we consume as fast as we can */
	xfer(down[1], &go, 1, true);
	t0 = now();
	wakes = consume(e, up[0], &fig->live);
	fig->wakes = (double)wakes / (now() - t0);
	xfer(down[1], &go, 1, true);
	waitpid(pid, &status, 0);
	xbd_evtchn_close(e);
	close(up[0]); close(up[1]); close(down[0]); close(down[1]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("guest", EIO);
}

/* Raw round trips: pipe and eventfd ping-pong between two processes. */
static double raw_pingpong(bool use_eventfd)
{
	long rounds = iters(20000);
	int a[2], b[2];
	uint64_t v = 1;
	double t0, t;
	pid_t pid;

	if (use_eventfd) {
		a[0] = a[1] = eventfd(0, 0);
		b[0] = b[1] = eventfd(0, 0);
	} else if (pipe(a) < 0 || pipe(b) < 0) {
		die("pipe", errno);
	}
	pid = fork();
	if (pid == 0) {
		for (long i = 0; i < rounds; i++) {
			if (read(a[0], &v, sizeof(v)) < 0 || write(b[1], &v, sizeof(v)) < 0)
				_exit(1);
		}
		_exit(0);
	}
	t0 = now();
	for (long i = 0; i < rounds; i++) {
		if (write(a[1], &v, sizeof(v)) < 0 || read(b[0], &v, sizeof(v)) < 0)
			die("pingpong", errno);
	}
	t = (now() - t0) / (double)rounds * 1e6;
	waitpid(pid, NULL, 0);
	close(a[0]); close(b[0]);
	if (!use_eventfd) {
		close(a[1]); close(b[1]);
	}
	return t;
}

/* The same handoff by spinning on one shared cache line (what a polling
 * frontend or backend does instead of sleeping): two processes bounce a
 * counter.  Both spin, so this needs two idle cores to mean anything. */
static double raw_spin_pingpong(void)
{
	long rounds = iters(200000);
	volatile uint32_t *line = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	double t0, t;
	pid_t pid;

	if (line == MAP_FAILED)
		die("mmap", errno);
	*line = 0;
	pid = fork();
	if (pid == 0) {
		for (uint32_t i = 1; i <= 2 * (uint32_t)rounds; i += 2) {
			while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != i)
				xbd_cpu_relax();
			__atomic_store_n(line, i + 1, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	t0 = now();
	for (uint32_t i = 0; i < 2 * (uint32_t)rounds; i += 2) {
		__atomic_store_n(line, i + 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != i + 2)
			xbd_cpu_relax();
	}
	t = (now() - t0) / (double)rounds * 1e6;
	waitpid(pid, NULL, 0);
	munmap((void *)line, 4096);
	return t;
}

static double raw_eventfd_writes(void)
{
	long n = iters(1000000);
	int fd = eventfd(0, EFD_NONBLOCK);
	uint64_t one = 1;
	double t0 = now();

	for (long i = 0; i < n; i++) {
		if (write(fd, &one, sizeof(one)) < 0)
			break;
	}
	t0 = now() - t0;
	close(fd);
	return (double)n / t0;
}

/* ---- grants ---- */

struct grant_bench {
	struct xbd_domain *dom;
	struct xbd_gntshr *gs;
	struct xbd_gnttab *gt;
	xbd_grant_ref_t one, scattered[BATCH];
	int mem_fd;
};

static void grant_setup(struct xbd_platform *p, struct grant_bench *g)
{
	xbd_grant_ref_t pair[2];
	char path[4200];
	void *addr;
	int rc;

	rc = xbd_domain_claim(p, 1, &g->dom);
	if (!rc)
		rc = xbd_gntshr_open(g->dom, &g->gs);
	if (!rc)
		rc = xbd_gnttab_open(p, 0, &g->gt);
	if (!rc)
		rc = xbd_gntshr_share_pages(g->gs, 0, 1, &g->one, true, &addr);
	/* two pages per share, keep the second: the frames are not adjacent */
	for (int i = 0; !rc && i < BATCH; i++) {
		rc = xbd_gntshr_share_pages(g->gs, 0, 2, pair, true, &addr);
		g->scattered[i] = pair[1];
	}
	if (rc)
		die("grant setup", rc);
	snprintf(path, sizeof(path), "%s/dom1/memory", rundir);
	g->mem_fd = open(path, O_RDWR);
	if (g->mem_fd < 0)
		die(path, errno);
}

static double map_unmap(struct grant_bench *g, unsigned int count,
			const xbd_grant_ref_t *refs)
{
	long n = iters(200000 / count);
	double t0 = now();
	void *addr;
	int rc;

	for (long i = 0; i < n; i++) {
		rc = xbd_gnttab_map(g->gt, 1, count, refs, PROT_READ | PROT_WRITE, &addr);
		for (unsigned int j = 0; !rc && j < count; j++)
			((volatile char *)addr)[j * 4096] = 1;   /* use the pages */
		if (!rc)
			rc = xbd_gnttab_unmap(g->gt, addr, count);
		if (rc)
			die("map/unmap", rc);
	}
	return (now() - t0) / (double)(n * count) * 1e6;
}

static volatile int spinning;

static void *spin(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&spinning, __ATOMIC_RELAXED))
		;
	return NULL;
}

static double raw_mmap(int fd, bool second_thread)
{
	long n = iters(20000);
	pthread_t th;
	double t0;

	spinning = 1;
	if (second_thread)
		pthread_create(&th, NULL, spin, NULL);
	t0 = now();
	for (long i = 0; i < n; i++) {
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			       (off_t)(i % 64) * 4096);

		if (m == MAP_FAILED)
			die("mmap", errno);
		*(volatile char *)m = 1;   /* use the page, as a mapper does */
		munmap(m, 4096);
	}
	t0 = (now() - t0) / (double)n * 1e6;
	__atomic_store_n(&spinning, 0, __ATOMIC_RELAXED);
	if (second_thread)
		pthread_join(th, NULL);
	return t0;
}

static double grant_copy(struct grant_bench *g, uint8_t *buf)
{
	struct xbd_gnttab_copy_seg segs[BATCH];
	long n = iters(400000 / BATCH);
	double t0;

	for (int i = 0; i < BATCH; i++)
		segs[i] = (struct xbd_gnttab_copy_seg){
			.source.foreign = { g->scattered[i], 0, 1 },
			.dest.virt = buf + i * 4096, .len = 4096,
			.flags = XBD_GNTCOPY_source_gref };
	t0 = now();
	for (long i = 0; i < n; i++) {
		if (xbd_gnttab_copy(g->gt, BATCH, segs) || segs[BATCH - 1].status)
			die("copy", segs[BATCH - 1].status);
	}
	return (now() - t0) / (double)(n * BATCH) * 1e6;
}

static double raw_pread(int fd, uint8_t *buf)
{
	long n = iters(400000);
	double t0 = now();

	for (long i = 0; i < n; i++) {
		if (pread(fd, buf, 4096, (off_t)(i % 64) * 4096) != 4096)
			die("pread", errno);
	}
	return (now() - t0) / (double)n * 1e6;
}

static double raw_memcpy(uint8_t *buf)
{
	long n = iters(2000000);
	double t0 = now();

	for (long i = 0; i < n; i++) {
		memcpy(buf + (i % BATCH) * 4096, buf + ((i + 7) % BATCH) * 4096, 4096);
		__asm__ volatile("" ::: "memory");
	}
	return (now() - t0) / (double)n * 1e6;
}

int main(int argc, char **argv)
{
	struct xbd_platform *p;
	struct grant_bench g = { 0 };
	struct evtchn_figures ev;
	uint8_t *buf;
	int rc;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s RUNDIR [SCALE]\n", argv[0]);
		return 2;
	}
	rundir = argv[1];
	if (argc == 3)
		scale = atof(argv[2]);
	rc = xbd_platform_open(XBD_PLATFORM_LOCAL, rundir, &p);
	if (!rc)
		rc = xbd_domain_create(p, 1, "bench", 64ull << 20);
	if (rc)
		die("setup", rc);
	buf = aligned_alloc(4096, BATCH * 4096);
	memset(buf, 1, BATCH * 4096);

	printf("  %-34s %17s   %s\n", "local platform", "", "raw syscalls, same run");
	bench_evtchn(p, &ev);
	row("notify round trip (2 processes)", ev.rt_us, raw_pingpong(false),
	    "pipe ping-pong", "us");
	row("", -1, raw_pingpong(true), "eventfd ping-pong", "us");
	row("", -1, raw_spin_pingpong(), "spin on a shared line", "us");
	row("notifies/s, peer not reading (M/s)", ev.coalesced / 1e6,
	    raw_eventfd_writes() / 1e6, "eventfd writes (M/s)", "");
	row("notifies/s, peer consuming (M/s)", ev.live / 1e6, 0, "", "");
	row("  wake-ups/s meanwhile (k/s)", ev.wakes / 1e3, 0, "", "");
	grant_setup(p, &g);
	row("map+touch+unmap, 1 grant", map_unmap(&g, 1, &g.one), raw_mmap(g.mem_fd, false),
	    "mmap+touch+munmap", "us");
	row("same, 32 scattered grants, /page", map_unmap(&g, BATCH, g.scattered),
	    raw_mmap(g.mem_fd, true), "same, 2nd thread alive", "us");
	row("grant copy per 4 KiB (batch 32)", grant_copy(&g, buf), raw_pread(g.mem_fd, buf),
	    "pread 4 KiB", "us");
	row("", -1, raw_memcpy(buf), "memcpy 4 KiB", "us");

	close(g.mem_fd);
	xbd_gnttab_close(g.gt);
	xbd_gntshr_close(g.gs);
	xbd_domain_release(g.dom);
	xbd_platform_close(p);
	free(buf);
	return 0;
}
