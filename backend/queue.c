/* SPDX-License-Identifier: MIT */
/* backend/queue.c: one queue's setup, thread and teardown.  See queue.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "backend/queue.h"
#include "log.h"

/* ---- event channel, as the engine sees it (queue thread) -------------- */

/* Late EOI in spirit (XSA-332): the port stays masked from delivery until
 * the loop has handled the kick; one poll is armed at a time, so a flood
 * of notifications costs at most one wake-up per turn of the loop.
 * Called only after the fd polled readable, and the handle has a single
 * port, so one pending() is exactly right (and never blocks, even where
 * xenevtchn_pending() would block on an empty fd). */
static int ev_ack(void *ctx)
{
	struct be_queue *q = ctx;
	int port = xbd_evtchn_pending(q->ev);

	if (port < 0)
		return port == -EAGAIN ? 0 : port;
	return xbd_evtchn_unmask(q->ev, (xbd_evtchn_port_t)port);
}

static int ev_notify(void *ctx)
{
	struct be_queue *q = ctx;

	return xbd_evtchn_notify(q->ev, (xbd_evtchn_port_t)q->local_port);
}

static const struct be_evt_ops ev_ops = { ev_ack, ev_notify };

/* ---- the thread ------------------------------------------------------------ */

static void *queue_main(void *arg)
{
	struct be_queue *q = arg;
	uint64_t one = 1;

	q->result = be_io_run(&q->io);
	/* Tell the control thread (it joins us when it stops the queue). */
	if (write(q->done_fd, &one, sizeof(one)) != sizeof(one))
		q->result = q->result ? q->result : -EIO;
	return NULL;
}

/* ---- setup ---------------------------------------------------------------- */

static int map_ring(struct be_queue *q)
{
	const struct be_queue_cfg *c = &q->cfg;
	unsigned int n = 1u << c->ring_order;
	int rc;

	rc = xbd_gnttab_map(q->gt, c->frontend, n, c->ring_refs,
			    PROT_READ | PROT_WRITE, &q->sring);
	if (rc)
		return rc;
	rc = ring_attach(&q->ring, q->sring, c->ring_order, c->abi);
	if (!rc)
		ring_watch_faults(&q->ring, c->frontend);
	return rc;
}

static int open_handles(struct be_queue *q)
{
	const struct be_queue_cfg *c = &q->cfg;
	int rc;

	rc = xbd_gnttab_open(c->plat, c->self, &q->gt);
	if (!rc)
		rc = xbd_evtchn_open(c->plat, c->self, &q->ev);
	if (rc)
		return rc;
	q->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	q->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return q->stop_fd < 0 || q->done_fd < 0 ? -errno : 0;
}

/* ---- journal and adoption ----------------------------------------------- */

static void journal_id(const struct be_queue_cfg *c, struct be_journal_id *id)
{
	memset(id, 0, sizeof(*id));
	id->generation = c->generation;
	id->fe_domid = c->frontend;
	id->devid = c->devid;
	id->queue = c->index;
	id->nr_queues = c->nr_queues;
	id->order = c->ring_order;
	id->abi = c->abi;
	id->persistent = c->persistent;
	id->remote_port = c->remote_port;
	for (unsigned int i = 0; i < 1u << c->ring_order; i++)
		id->ring_refs[i] = c->ring_refs[i];
}

/* Fresh ring: a fresh journal (a failure only costs adoption later). */
static void journal_create(struct be_queue *q)
{
	struct be_journal_id id;
	int rc;

	if (!q->cfg.journal_path)
		return;
	journal_id(&q->cfg, &id);
	rc = be_journal_create(q->cfg.journal_path, &id, q->ring.nr_ents,
			       q->ring.rsp_prod_pvt, &q->jr);
	if (rc)
		log_warn("%s: no journal (%s): a restart will reset this ring",
			 q->cfg.journal_path, strerror(-rc));
}

/* Live ring: load the dead backend's journal and resume from it. */
static int journal_adopt(struct be_queue *q, struct be_replay *plan)
{
	struct be_journal_id id;
	int rc;

	if (!q->cfg.journal_path)
		return -ENOENT;
	journal_id(&q->cfg, &id);
	rc = be_journal_load(q->cfg.journal_path, &id, q->ring.nr_ents,
			     q->ring.rsp_prod_pvt, plan, &q->jr);
	if (!rc && ring_adopt(&q->ring, plan->req_cons))
		rc = -EBADMSG;
	return rc;
}

static int start_engine(struct be_queue *q, struct be_replay *plan)
{
	struct be_io_cfg io = {
		.ring = &q->ring, .storage = q->cfg.storage, .limits = q->cfg.limits,
		.xport = &gnt_xport_ops, .xport_ctx = &q->xport,
		.evt = &ev_ops, .evt_ctx = q, .evt_fd = xbd_evtchn_fd(q->ev),
		.stop_fd = q->stop_fd, .stats = &q->stats, .journal = q->jr,
		.limit = q->cfg.limit, .poll_us = q->cfg.poll_us,
		.measured_size = q->cfg.measured_size,
		.queue_index = q->cfg.index,
	};
	int rc;

	rc = gnt_xport_init(&q->xport, q->gt, q->cfg.frontend, q->cfg.persistent);
	if (rc)
		return rc;
	/* the pool holds at most what the ring can have in flight */
	gnt_xport_bound(&q->xport, q->ring.nr_ents * req_seg_capacity(&q->cfg.limits));
	gnt_xport_budget(&q->xport, q->cfg.budget);
	q->xport_up = true;
	rc = be_io_init(&q->io, &io);
	q->io_up = !rc;
	if (!rc && q->cfg.adopt) {
		/* First act on an adopted ring: announce what the dead
		 * backend may have published without a notify (issue 20).
		 * Our port is bound; the frontend's events to the dead one
		 * are lost, so the loop looks at req_prod before any wait. */
		rc = be_io_announce(&q->io);
		if (!rc)
			log_info("queue %u: adopted at rsp_prod %u req_cons %u: frontend notified",
				 q->cfg.index, q->ring.rsp_prod_pvt, plan->req_cons);
	}
	if (!rc && q->cfg.adopt) {
		rc = be_io_replay(&q->io, plan);
		be_stat_add(&q->stats.adopted, 1);
	}
	return rc;
}

int be_queue_start(struct be_queue *q, const struct be_queue_cfg *cfg)
{
	struct be_replay plan = { 0 };
	int rc;

	memset(q, 0, sizeof(*q));
	q->cfg = *cfg;
	q->local_port = -1;
	q->stop_fd = q->done_fd = -1;
	if (cfg->ring_order > RING_MAX_ORDER)
		return -EINVAL;
	rc = open_handles(q);
	if (!rc)
		rc = map_ring(q);
	if (!rc) {
		rc = xbd_evtchn_bind_interdomain(q->ev, cfg->frontend, cfg->remote_port);
		q->local_port = rc;
		rc = rc < 0 ? rc : 0;
	}
	if (!rc && cfg->adopt)
		rc = journal_adopt(q, &plan);
	else if (!rc)
		journal_create(q);
	if (!rc)
		rc = start_engine(q, &plan);
	be_replay_free(&plan);
	if (!rc) {
		rc = -pthread_create(&q->thread, NULL, queue_main, q);
		q->thread_up = !rc;
	}
	if (rc)
		be_queue_stop(q);
	return rc;
}

/* ---- teardown ----------------------------------------------------------- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int be_queue_stop(struct be_queue *q)
{
	uint64_t one = 1;
	int rc = 0;

	if (!q->cfg.plat)
		return 0;        /* never started (all zero): nothing to undo */
	if (q->thread_up) {
		if (write(q->stop_fd, &one, sizeof(one)) != sizeof(one))
			rc = -errno;
		pthread_join(q->thread, NULL);   /* the thread's handles are ours again */
		q->thread_up = false;
		rc = q->result;
	}
	if (q->io_up)
		be_io_destroy(&q->io);   /* drains in-flight I/O first */
	q->io_up = false;
	if (q->xport_up && gnt_xport_destroy(&q->xport) && !rc)
		rc = -EBUSY;
	q->xport_up = false;
	be_journal_close(q->jr);      /* the file stays: the caller decides */
	q->jr = NULL;
	if (q->ev && q->local_port >= 0)
		xbd_evtchn_unbind(q->ev, (xbd_evtchn_port_t)q->local_port);
	q->local_port = -1;
	if (q->sring)
		xbd_gnttab_unmap(q->gt, q->sring, 1u << q->cfg.ring_order);
	q->sring = NULL;
	if (q->ev)
		xbd_evtchn_close(q->ev);
	q->ev = NULL;
	if (q->gt)
		xbd_gnttab_close(q->gt);
	q->gt = NULL;
	close_fd(&q->stop_fd);
	close_fd(&q->done_fd);
	return rc;
}
