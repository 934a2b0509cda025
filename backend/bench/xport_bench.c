/* SPDX-License-Identifier: MIT */
/*
 * xbd-be-xport-bench: what one request's data transport costs, per way
 * (grant copy into pool pages, batch map + unmap, persistent grants) and
 * per request size, on the local platform.  It measures map() + unmap()
 * of the backend's grant transport only, no storage I/O: the number that
 * decides grant_copy_max_bytes.
 *
 * usage: xbd-be-xport-bench [iterations]     (default 20000)
 * Prints one line per size: ns per request for copy-write, copy-read,
 * map-write, map-read and persistent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/gnt.h"
#include "backend/tunables.h"

static uint64_t now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct env {
	char rundir[64];
	struct xbd_platform *p;
	struct xbd_domain *dom;
	struct xbd_gntshr *gs;
	struct xbd_gnttab *gt;
	xbd_grant_ref_t refs[11];
	void *mem;
};

static int env_up(struct env *e)
{
	strcpy(e->rundir, "/tmp/xbd-xport-bench-XXXXXX");
	if (!mkdtemp(e->rundir))
		return -1;
	if (xbd_platform_open(XBD_PLATFORM_LOCAL, e->rundir, &e->p) ||
	    xbd_domain_create(e->p, 1, "bench", 1u << 20) ||
	    xbd_domain_claim(e->p, 1, &e->dom) || xbd_gntshr_open(e->dom, &e->gs) ||
	    xbd_gntshr_share_pages(e->gs, 0, 11, e->refs, true, &e->mem) ||
	    xbd_gnttab_open(e->p, 0, &e->gt))
		return -1;
	return 0;
}

static void env_down(struct env *e)
{
	char cmd[96];

	xbd_gnttab_close(e->gt);
	xbd_gntshr_close(e->gs);
	xbd_domain_release(e->dom);
	xbd_platform_close(e->p);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->rundir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", e->rundir);
}

/* ns per map()+unmap() of a request of `sectors` 512-byte sectors. */
static double run(struct env *e, bool persistent, const char *copy_max,
		  enum vreq_kind kind, unsigned int sectors, unsigned int iters)
{
	struct blkif_request_segment segs[11];
	struct iovec iov[11];
	void *priv[11];
	struct be_pending p = { .iov = iov, .seg_priv = priv };
	struct gnt_xport x;
	unsigned int n = (sectors + 7) / 8;
	uint64_t t0;

	tun_set(TUN_GRANT_COPY_MAX_BYTES, copy_max, false);
	gnt_xport_init(&x, e->gt, 1, persistent);
	for (unsigned int i = 0; i < n; i++) {
		unsigned int left = sectors - 8 * i;
		segs[i] = (struct blkif_request_segment){ e->refs[i], 0,
			(uint8_t)((left < 8 ? left : 8) - 1) };
	}
	p.v = (struct vreq){ .kind = kind, .nr_segs = n, .nr_sectors = sectors, .segs = segs };
	t0 = now();
	for (unsigned int k = 0; k < iters; k++) {
		if (gnt_xport_ops.map(&x, &p) || gnt_xport_ops.unmap(&x, &p, true)) {
			fprintf(stderr, "transport failed\n");
			exit(1);
		}
	}
	t0 = now() - t0;
	gnt_xport_destroy(&x);
	return (double)t0 / iters;
}

int main(int argc, char **argv)
{
	static const unsigned int sizes[] = { 1, 8, 16, 32, 64, 88 };  /* sectors */
	unsigned int iters = argc > 1 ? (unsigned int)atoi(argv[1]) : 20000;
	struct env e = { 0 };

	if (iters == 0 || env_up(&e)) {
		fprintf(stderr, "usage: %s [iterations]  (needs a writable /tmp)\n", argv[0]);
		return 1;
	}
	tun_init();
	printf("%8s %10s %10s %10s %10s %10s   (ns per request, %u iterations)\n",
	       "bytes", "copy-wr", "copy-rd", "map-wr", "map-rd", "persist", iters);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned int s = sizes[i];

		printf("%8u %10.0f %10.0f %10.0f %10.0f %10.0f\n", s * 512,
		       run(&e, false, "45056", VREQ_WRITE, s, iters),
		       run(&e, false, "45056", VREQ_READ, s, iters),
		       run(&e, false, "0", VREQ_WRITE, s, iters),
		       run(&e, false, "0", VREQ_READ, s, iters),
		       run(&e, true, "0", VREQ_READ, s, iters));
	}
	env_down(&e);
	return 0;
}
