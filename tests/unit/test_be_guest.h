/* SPDX-License-Identifier: MIT */
/*
 * A guest on the real local platform for backend tests: a private rundir,
 * domain 1 claimed by this process with NPAGES pages shared to domain 0
 * (writable ones, then read-only ones), and a gnttab handle acting as the
 * backend (domain 0).  Everything is undone by guest_down().
 */
#ifndef XBD_TEST_BE_GUEST_H
#define XBD_TEST_BE_GUEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "platform/platform.h"

#define GUEST_RW 300                 /* writable grants */
#define GUEST_RO 8                   /* read-only grants */

struct guest {
	char rundir[64];
	struct xbd_platform *p;
	struct xbd_domain *dom;
	struct xbd_gntshr *gs;
	struct xbd_gnttab *gt;           /* the backend's handle */
	xbd_grant_ref_t rw[GUEST_RW], ro[GUEST_RO];
	uint8_t *rw_mem, *ro_mem;        /* the guest's view of those pages */
};

static inline int guest_up(struct guest *g)
{
	memset(g, 0, sizeof(*g));
	strcpy(g->rundir, "/tmp/xbd-be-unit-XXXXXX");
	if (!mkdtemp(g->rundir) ||
	    xbd_platform_open(XBD_PLATFORM_LOCAL, g->rundir, &g->p) ||
	    xbd_domain_create(g->p, 1, "guest", 4u << 20) ||
	    xbd_domain_claim(g->p, 1, &g->dom) ||
	    xbd_gntshr_open(g->dom, &g->gs) ||
	    xbd_gntshr_share_pages(g->gs, 0, GUEST_RW, g->rw, true, (void **)&g->rw_mem) ||
	    xbd_gntshr_share_pages(g->gs, 0, GUEST_RO, g->ro, false, (void **)&g->ro_mem) ||
	    xbd_gnttab_open(g->p, 0, &g->gt))
		return -1;
	return 0;
}

static inline void guest_down(struct guest *g)
{
	char cmd[96];

	if (g->gt)
		xbd_gnttab_close(g->gt);
	if (g->gs)
		xbd_gntshr_close(g->gs);
	if (g->dom)
		xbd_domain_release(g->dom);
	if (g->p)
		xbd_platform_close(g->p);
	/* A backend SIGKILLed by a failing test leaves its sysfs-style tree
	 * mounted (ENOTCONN) at $rundir/sys: detach it so rm can remove the
	 * rundir and no mount outlives the test. */
	snprintf(cmd, sizeof(cmd), "%s/sys", g->rundir);
	if (g->rundir[0])
		(void)umount2(cmd, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->rundir);
	if (g->rundir[0] && system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", g->rundir);
}

static inline uint8_t *guest_page(struct guest *g, unsigned int i)
{
	return g->rw_mem + (size_t)i * 4096;
}

/* ---- the guest's side of one ring (needs cmocka and backend/ring.h) ---- */
#ifdef XBD_BACKEND_RING_H
#include <poll.h>

struct gring {                       /* the guest's side of one queue */
	xbd_grant_ref_t refs[32];
	uint8_t *sring;
	unsigned int order, nr_ents;
	enum ring_abi abi;
	struct xbd_evtchn *ev;
	int port;
	RING_IDX prod, rsp_cons;
};

/* Share a ring of 2^order pages to domain 0 (SHARED_RING_INIT) and bind
 * an unbound event channel for it. */
static inline void gring_share(struct guest *g, struct gring *r, unsigned int order,
			       enum ring_abi abi)
{
	memset(r, 0, sizeof(*r));
	r->order = order;
	r->abi = abi;
	r->nr_ents = ring_nr_ents(abi, order);
	assert_int_equal(xbd_gntshr_share_pages(g->gs, 0, 1u << order, r->refs, true,
						(void **)&r->sring), 0);
	((uint32_t *)r->sring)[1] = 1;                /* req_event */
	((uint32_t *)r->sring)[3] = 1;                /* rsp_event */
	assert_int_equal(xbd_evtchn_open(g->p, 1, &r->ev), 0);
	r->port = xbd_evtchn_bind_unbound_port(r->ev, 0);
	assert_true(r->port > 0);
}

static inline void gring_close(struct guest *g, struct gring *r)
{
	if (r->ev)
		xbd_evtchn_close(r->ev);
	r->ev = NULL;
	if (r->sring)
		xbd_gntshr_unshare(g->gs, r->sring, 1u << r->order);
	r->sring = NULL;
}

/* One read or write of a full granted page, in the ring's ABI. */
static inline void put_req(struct gring *r, uint8_t op, uint64_t id, uint64_t sector,
		    xbd_grant_ref_t gref)
{
	size_t stride = r->abi == RING_ABI_X86_32 ? 108 : 112;
	size_t idoff = r->abi == RING_ABI_X86_32 ? 4 : 8;
	uint8_t *s = r->sring + 64 + (r->prod++ & (r->nr_ents - 1)) * stride;
	uint8_t seg[8] = { 0, 0, 0, 0, 0, 7, 0, 0 };

	memset(s, 0, stride);
	s[0] = op;
	s[1] = 1;
	memcpy(s + idoff, &id, 8);
	memcpy(s + idoff + 8, &sector, 8);
	memcpy(seg, &gref, 4);
	memcpy(s + idoff + 16, seg, 8);
}

/* RING_PUSH_REQUESTS_AND_CHECK_NOTIFY */
static inline void push(struct gring *r, RING_IDX old)
{
	uint32_t *h = (uint32_t *)r->sring;

	__atomic_store_n(&h[0], r->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if ((RING_IDX)(r->prod - h[1]) < (RING_IDX)(r->prod - old))
		assert_int_equal(xbd_evtchn_notify(r->ev, (xbd_evtchn_port_t)r->port), 0);
}

/* Wait (on the event channel, bounded) for the next response. */
static inline void get_rsp(struct gring *r, uint64_t *id, int16_t *status)
{
	uint32_t *h = (uint32_t *)r->sring;
	size_t stride = r->abi == RING_ABI_X86_32 ? 108 : 112;   /* entry stride */

	/* fail_msg() below does not return, but gcc -O2 cannot tell */
	*id = UINT64_MAX;
	*status = INT16_MIN;
	for (int tries = 0; tries < 50; tries++) {
		if (__atomic_load_n(&h[2], __ATOMIC_ACQUIRE) != r->rsp_cons) {
			uint8_t *s = r->sring + 64 + (r->rsp_cons++ & (r->nr_ents - 1)) * stride;
			memcpy(id, s, 8);
			memcpy(status, s + 10, 2);
			return;
		}
		h[3] = r->rsp_cons + 1;               /* RING_FINAL_CHECK_FOR_RESPONSES */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_load_n(&h[2], __ATOMIC_ACQUIRE) != r->rsp_cons)
			continue;
		struct pollfd pfd = { xbd_evtchn_fd(r->ev), POLLIN, 0 };
		if (poll(&pfd, 1, 100) > 0) {
			int port = xbd_evtchn_pending(r->ev);
			if (port >= 0)
				xbd_evtchn_unmask(r->ev, (xbd_evtchn_port_t)port);
		}
	}
	fail_msg("no response from the backend");
}

/* Write page wpage at sector, read it back into rpage, compare. */
static inline void gring_roundtrip(struct guest *g, struct gring *r, uint64_t sector,
				   unsigned int wpage, unsigned int rpage)
{
	uint64_t id = 0;    /* fail_msg() does not return; -O1 cannot tell */
	int16_t st = 0;
	RING_IDX old = r->prod;

	for (size_t k = 0; k < 4096; k++)
		guest_page(g, wpage)[k] = (uint8_t)(k * 3 + sector + wpage);
	put_req(r, BLKIF_OP_WRITE, 1000 + sector, sector, g->rw[wpage]);
	push(r, old);
	get_rsp(r, &id, &st);
	assert_true(id == 1000 + sector && st == BLKIF_RSP_OKAY);
	old = r->prod;
	put_req(r, BLKIF_OP_READ, 2000 + sector, sector, g->rw[rpage]);
	push(r, old);
	get_rsp(r, &id, &st);
	assert_true(id == 2000 + sector && st == BLKIF_RSP_OKAY);
	assert_memory_equal(guest_page(g, rpage), guest_page(g, wpage), 4096);
}

#endif

#endif
