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
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->rundir);
	if (g->rundir[0] && system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", g->rundir);
}

static inline uint8_t *guest_page(struct guest *g, unsigned int i)
{
	return g->rw_mem + (size_t)i * 4096;
}

#endif
