/* SPDX-License-Identifier: MIT */
/*
 * A small fake blkif backend for the frontend's unit tests: a thread that
 * acts as domain 0 on the local platform, maps the frontend's rings and
 * data grants through xbd_gnttab, reads requests of either ABI with raw
 * byte offsets (not lib/blkif.h, so layout mistakes show), serves them
 * from a memory disk and signals through real event channels.  It can turn
 * hostile (bad id, wrong op, runaway rsp_prod) or go silent.
 *
 * Threads: the test thread sets up, starts and stops it; while running,
 * only the backend thread touches the rings and counters (mode is atomic).
 */
#ifndef XBD_TESTS_FE_FAKEBE_H
#define XBD_TESTS_FE_FAKEBE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/uio.h>

#include "frontend/device.h"
#include "frontend/ring.h"
#include "platform/platform.h"

#define DISK_BYTES (8u << 20)

/* BE_REVERSE answers each batch of requests it finds last first;
 * BE_DUP_ID answers a batch's first request twice, in place of its second; BE_UNKNOWN_ID answers with an id in
 * range that is not in flight (id + 16, with fewer than 16 in flight). */
enum be_mode { BE_NORMAL, BE_BAD_ID, BE_WRONG_OP, BE_RUNAWAY, BE_SILENT, BE_REVERSE,
	       BE_DUP_ID, BE_UNKNOWN_ID };

struct be_ring {
	unsigned char *ring;
	unsigned int order, size;
	int port;
	uint32_t req_cons, rsp_prod;
};

struct be {
	xbd_domid_t guest;           /* the frontend domain */
	struct xbd_platform *p;
	struct xbd_gnttab *gt;
	struct xbd_evtchn *ev;
	enum fe_abi abi;
	unsigned int nq;
	struct be_ring q[4];
	unsigned char *disk;
	pthread_t th;
	int stop_fd;
	bool running, attached;
	enum be_mode mode;
	/* written by the backend thread, read after join */
	unsigned int reqs, flushes, barriers, discards, secure, indirect, max_segs;
	unsigned int max_id;          /* the largest request id seen */
	unsigned int max_batch;       /* the most requests found at once */
	unsigned int late;            /* requests found only by a timeout */
	int error;                    /* first platform error */
};

uint64_t fe_rd(const unsigned char *p, size_t off, size_t len);
void fe_wr(unsigned char *p, size_t off, size_t len, uint64_t v);
void be_set_mode(struct be *b, enum be_mode m);
void be_attach_ring(struct be *b, unsigned int i, const xbd_grant_ref_t *refs,
		    unsigned int n, unsigned int port);
/* Start serving (rings attached). */
void be_start(struct be *b);
/* Stop the thread; its counters are then stable. */
void be_halt(struct be *b);
/* Halt and let go of every ring and port: a backend that died. */
void be_stop(struct be *b);

/* A frontend device on the local platform served by the fake backend:
 * the fixture of the frontend's queue tests. */
struct fe_fx {
	char rundir[64];
	struct xbd_platform *p;
	struct xbd_domain *dom;
	struct xbdfront_dev *dev;
	struct be b;
	struct fe_limits lim;
};

/* A device of nq queues (ring order, ABI, grant mode, indirect limit,
 * pool pages per queue) on a fresh local platform in a temporary run
 * directory (this process claims domain 1), served by a started fake
 * backend, connected. */
void fe_fx_open(struct fe_fx *f, unsigned int nq, unsigned int order, enum fe_abi abi,
		bool persistent, unsigned int max_ind, unsigned int pool_pages);
/* Attach the fake backend to every queue of dev, as after Initialised. */
void be_attach(struct be *b, struct xbdfront_dev *dev);
/* Stop the backend, close the device, destroy the domain and the run
 * directory. */
void fe_fx_close(struct fe_fx *f);

/* One descriptor on queue q, published: op on [off, off + len) with
 * iov (NULL for none), user_data ud, callback done (NULL: an entry for
 * xbdfront_reap).  What xbdfront_submit returned for it. */
int fe_submit(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op, uint64_t off,
	      uint64_t len, struct iovec *iov, void (*done)(const struct xbdfront_cqe *),
	      uint64_t ud);
/* Wait and reap on queue q until n entries came (each must be 0). */
void fe_reap_n(struct xbdfront_dev *dev, unsigned int q, unsigned int n);

#endif
