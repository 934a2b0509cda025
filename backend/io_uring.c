/* SPDX-License-Identifier: MIT */
/*
 * backend/io_uring.c: the queue loop.  See io_uring.h for the model.
 *
 * Lifetime of a request: a free be_pending slot is taken when the request
 * is fetched (req_cons moves on at once), validated, mapped by the
 * transport, and its SQEs queued; the queue thread then sleeps in
 * io_uring_submit_and_wait.  When its last CQE arrives the transport
 * unmaps, the response is written into the ring and the slot is freed.
 * A rejected request is answered at once and never reaches io_uring.
 * There are as many slots as ring entries and ring_pending() never lets
 * more than that many requests be outstanding, so a slot is always free.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/cpu.h"
#include "backend/io_uring.h"
#include "backend/tunables.h"

/* user_data tags below any pointer; request SQEs carry the be_pending
 * pointer, with bit 0 set on the flush that precedes a write. */
#define UD_EVT   2u
#define UD_STOP  4u
#define UD_SD_IN  8u     /* the storage driver's fd polled for POLLIN */
#define UD_SD_OUT 16u    /* ... and for POLLOUT */
#define UD_TAGS  4096u
#define UD_FLUSH 1u

/*
 * ThreadSanitizer sees neither the mmap nor the munmap of a ring: liburing
 * (2.3, built without libc) makes them as raw system calls.  A queue's new
 * ring may be mapped where a stopped queue's ring was (unmapped on the
 * reaper thread, which the control thread has not joined yet): TSan took
 * the new queue thread's first look at its CQ head for a race with the old
 * thread's last store there.  The kernel orders the munmap before the
 * mmap that reuses the pages; say so to TSan, page by page, with a
 * release on each page of a ring before it is unmapped and an acquire on
 * each page of a ring just mapped (an edge only between the old and new
 * owners of the same page).  gcc defines __SANITIZE_THREAD__.
 */
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>

static void tsan_ring_pages(const struct io_uring *r, void (*edge)(void *))
{
	const struct { void *p; size_t n; } m[] = {
		{ r->sq.ring_ptr, r->sq.ring_sz },
		{ r->cq.ring_ptr, r->cq.ring_sz },   /* the same, one mmap */
		{ r->sq.sqes, r->sq.ring_entries * sizeof(struct io_uring_sqe) },
	};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		for (size_t off = 0; m[i].p && off < m[i].n; off += 4096)
			edge((char *)m[i].p + off);
}
#define TSAN_RING_MAPPED(r)    tsan_ring_pages(r, __tsan_acquire)
#define TSAN_RING_UNMAPPING(r) tsan_ring_pages(r, __tsan_release)
#else
#define TSAN_RING_MAPPED(r)    ((void)(r))
#define TSAN_RING_UNMAPPING(r) ((void)(r))
#endif

/* Not an answer yet: the request is in io_uring, or waits for memory. */
#define IO_SUBMITTED 1
#define IO_WAITING 2
#define IO_THROTTLED 3   /* over the vbd's I/O limit (limit.h) */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Test-only fault injection (Documentation/backend.md, "Restart"):
 * XBD_TEST_KILL_BEFORE_NOTIFY=N makes the queue that reaches its N-th
 * notification raise SIGKILL instead, with the responses published and
 * never announced: the window a restarted backend must close. */
static unsigned int fault_notify_from_env(void)
{
	const char *v = getenv("XBD_TEST_KILL_BEFORE_NOTIFY");
	char *end;
	unsigned long n;

	if (!v || !*v)
		return 0;
	n = strtoul(v, &end, 10);
	return *end || n > UINT_MAX ? 0 : (unsigned int)n;
}

static void fault_before_notify(struct be_io *io)
{
	if (io->fault_notify && !--io->fault_notify)
		raise(SIGKILL);
}

/* Make room for k SQEs.  The SQ has room for every slot's SQEs, so this
 * only fails when io_uring_submit itself fails. */
static int reserve_sqes(struct be_io *io, unsigned int k)
{
	if (io_uring_sq_space_left(&io->uring) >= k)
		return 0;
	int rc = io_uring_submit(&io->uring);
	if (rc < 0)
		return rc;
	return io_uring_sq_space_left(&io->uring) >= k ? 0 : -EBUSY;
}

static int arm_poll_for(struct be_io *io, int fd, uint64_t tag, short events)
{
	int rc = reserve_sqes(io, 1);

	if (rc)
		return rc;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->uring);
	io_uring_prep_poll_add(sqe, fd, (unsigned int)events);
	io_uring_sqe_set_data64(sqe, tag);
	return 0;
}

static int arm_poll(struct be_io *io, int fd, uint64_t tag)
{
	return arm_poll_for(io, fd, tag, POLLIN);
}

/*
 * A driver with a socket (storage.h): poll it for what it wants, one
 * one-shot poll per direction at a time.  A poll armed on a connection
 * the driver has since dropped still ends (the driver shuts the socket
 * down before closing it), and only then is the new one polled.
 */
static int arm_storage(struct be_io *io)
{
	short ev;
	int fd = storage_queue_poll(io->cfg.storage, io->sq, &ev), rc = 0;

	if (fd < 0)
		return 0;
	if ((ev & POLLIN) && !io->sd_in_armed) {
		rc = arm_poll_for(io, fd, UD_SD_IN, POLLIN);
		io->sd_in_armed = !rc;
		io->sd_in_fd = fd;
	}
	if (!rc && (ev & POLLOUT) && !io->sd_out_armed) {
		rc = arm_poll_for(io, fd, UD_SD_OUT, POLLOUT);
		io->sd_out_armed = !rc;
		io->sd_out_fd = fd;
	}
	return rc;
}

/* Bytes of slot_mem per slot: its iovecs, segment cookies and segments. */
static size_t slot_bytes(unsigned int cap)
{
	return cap * (sizeof(struct iovec) + sizeof(void *) +
		      sizeof(struct blkif_request_segment));
}

/* Slot i of a zeroed slot table and slot_mem, as alloc_slots makes it:
 * its arrays carved from its part of slot_mem, chained after slot i - 1
 * (the free list hands out the highest slot first). */
static void slot_setup(struct be_io *io, unsigned int i, unsigned int cap)
{
	char *m = (char *)io->slot_mem + (size_t)i * slot_bytes(cap);
	struct be_pending *p = &io->slots[i];

	p->iov = (struct iovec *)(void *)m;
	m += cap * sizeof(struct iovec);
	p->seg_priv = (void **)(void *)m;
	m += cap * sizeof(void *);
	p->v.segs = (struct blkif_request_segment *)(void *)m;
	p->next = i ? &io->slots[i - 1] : NULL;
}

static int alloc_slots(struct be_io *io)
{
	unsigned int n = io->cfg.ring->nr_ents;
	unsigned int cap = req_seg_capacity(&io->cfg.limits);

	io->slots = calloc(n, sizeof(*io->slots));
	io->slot_mem = calloc(n, slot_bytes(cap));
	if (!io->slots || !io->slot_mem)
		return -ENOMEM;
	io->nr_slots = n;
	io->slot_low = n;
	for (unsigned int i = 0; i < n; i++)
		slot_setup(io, i, cap);
	io->free = n ? &io->slots[n - 1] : NULL;
	return 0;
}

static void handle_cqe(struct be_io *io, uint64_t ud, int res);

/* A completion from a driver that does not post CQEs (storage.h). */
static void loop_complete(void *ctx, uint64_t tag, int res)
{
	handle_cqe(ctx, tag, res);
}

int be_io_init(struct be_io *io, const struct be_io_cfg *cfg)
{
	int rc;

	memset(io, 0, sizeof(*io));
	io->load_fd = -1;
	io->cfg = *cfg;
	io->fault_notify = fault_notify_from_env();
	io->poll_ns = UINT64_MAX;      /* the whole window until it learns */
	/* test only (test_backend_poll.py, test_io_uring.c): spin even on
	 * a machine whose CPUs are all wanted, and on after a preemption,
	 * so that the spin is proven whatever else the machine runs */
	io->poll_any_load = getenv("XBD_TEST_POLL_IGNORE_LOAD") != NULL;
	if (!io->poll_any_load)
		io->load_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	io->nr_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	io->wait_poll = cfg->wait == BE_IO_WAIT_POLL ||
			(cfg->wait == BE_IO_WAIT_TUNABLE && tun_get(TUN_IO_WAIT_POLL));
	if (req_limits_check(&cfg->limits) || cfg->limits.max_indirect_segs > IOV_MAX)
		return -EINVAL;
	rc = alloc_slots(io);
	if (rc)
		goto out;
	/* Worst case: two SQEs (flush + data) per slot and the two polls. */
	rc = io_uring_queue_init(2 * io->nr_slots + 4, &io->uring, 0);
	if (rc)
		goto out;
	TSAN_RING_MAPPED(&io->uring);
	io->uring_ready = true;
	io->loop = (struct storage_loop){ &io->uring, loop_complete, io,
					  &cfg->stats->helper_req };
	rc = storage_queue_open(cfg->storage, cfg->queue_index, io->nr_slots,
				&io->loop, &io->sq);
	if (rc)
		goto out;
	rc = arm_poll(io, cfg->evt_fd, UD_EVT);
	if (!rc && cfg->stop_fd >= 0)
		rc = arm_poll(io, cfg->stop_fd, UD_STOP);
out:
	if (rc)
		be_io_destroy(io);
	return rc;
}

/* ---- Answering ----------------------------------------------------------- */

static unsigned int slot_of(const struct be_io *io, const struct be_pending *p)
{
	return (unsigned int)(p - io->slots);
}

/* The request is over: release its data, answer it, free its slot. */
static void complete(struct be_io *io, struct be_pending *p, int status)
{
	struct be_stats *s = io->cfg.stats;
	RING_IDX at = io->cfg.ring->rsp_prod_pvt;

	if (p->mapped &&
	    io->cfg.xport->unmap(io->cfg.xport_ctx, p, status == BLKIF_RSP_OKAY) &&
	    status == BLKIF_RSP_OKAY)
		status = BLKIF_RSP_ERROR;
	p->mapped = false;
	be_stats_record_latency(s, now_ns() - p->start_ns);
	be_stat_sub(&s->inflight, 1);
	if (status != BLKIF_RSP_OKAY)
		be_stat_add(&s->errors, 1);
	/* The journal brackets the response (journal.h): a crash anywhere in
	 * here is resolved against the published rsp_prod on adoption. */
	be_journal_answering(io->cfg.journal, slot_of(io, p), at);
	ring_put_rsp(io->cfg.ring, p->v.id, p->v.rsp_op, (int16_t)status);
	ring_publish_rsps(io->cfg.ring);     /* see ring.h: restart safety */
	be_journal_answered(io->cfg.journal, slot_of(io, p), at + 1);
	io->rsps_to_push = true;
	p->next = io->free;
	io->free = p;
}

static void push(struct be_io *io)
{
	if (!io->rsps_to_push)
		return;
	io->rsps_to_push = false;
	if (ring_push_rsps(io->cfg.ring)) {
		fault_before_notify(io);
		be_stat_add(&io->cfg.stats->evt_out, 1);
		if (io->cfg.evt->notify(io->cfg.evt_ctx) == -EPROTO)
			io->evt_err = -EPROTO;
	}
}

int be_io_announce(struct be_io *io)
{
	/* ring_push_rsps() clears the ring's unannounced mark; what it
	 * says about rsp_event does not matter here: we notify anyway. */
	(void)ring_push_rsps(io->cfg.ring);
	be_stat_add(&io->cfg.stats->evt_out, 1);
	return io->cfg.evt->notify(io->cfg.evt_ctx);
}

/* ---- Submitting ---------------------------------------------------------- */

static int rsp_status(int rc)
{
	if (rc == -EOPNOTSUPP)
		return BLKIF_RSP_EOPNOTSUPP;
	return rc ? BLKIF_RSP_ERROR : BLKIF_RSP_OKAY;
}

/* Hand one storage request to the driver.  A synchronous answer counts as
 * the request's status; a queued one as a completion still to come. */
static void submit_one(struct be_io *io, struct be_pending *p,
		       const struct storage_req *r)
{
	int rc = storage_submit(io->cfg.storage, io->sq, r);

	if (rc == STORAGE_QUEUED)
		p->cqes_left++;
	else if (rc < 0 && p->status == BLKIF_RSP_OKAY)
		p->status = rsp_status(rc);
}

/* What the driver said at once, or IO_SUBMITTED while some is to come. */
static int submitted(struct be_io *io, struct be_pending *p)
{
	if (!p->cqes_left)
		return p->status;
	io->inflight++;
	return IO_SUBMITTED;
}

static int submit_discard(struct be_io *io, struct be_pending *p)
{
	struct storage_req r = {
		.op = p->v.secure ? STORAGE_DISCARD_SECURE : STORAGE_DISCARD,
		.off = p->v.sector << 9, .len = p->v.nr_sectors << 9,
		.tag = (uintptr_t)p,
	};

	if (!r.len)
		return BLKIF_RSP_OKAY;
	if (reserve_sqes(io, 1))
		return BLKIF_RSP_ERROR;
	submit_one(io, p, &r);
	return submitted(io, p);
}

/* Queue the SQEs of a checked request.  IO_SUBMITTED, or the status to
 * answer with at once. */
static int submit(struct be_io *io, struct be_pending *p)
{
	struct be_stats *s = io->cfg.stats;
	enum vreq_kind k = p->v.kind;
	bool data = p->v.nr_segs > 0, flush = k == VREQ_FLUSH || k == VREQ_BARRIER;
	int st;

	/* One branch when the vbd has no limit.  Every request is one op
	 * (discards and flushes are writes), data bytes count (limit.h).  A
	 * held request has taken nothing yet; on stop it goes, so that it is
	 * answered.  Charged once: a request that then waits for memory
	 * comes back here with p->limited set. */
	if (!p->limited && be_limit_active(io->cfg.limit) && !io->stopping) {
		if (be_limit_hold(io->cfg.limit, &io->limit_wait, k != VREQ_READ,
				  data ? p->v.nr_sectors << 9 : 0, now_ns()))
			return IO_THROTTLED;
		p->limited = true;
	}
	if (k == VREQ_DISCARD)
		return submit_discard(io, p);
	if (reserve_sqes(io, 2))
		return BLKIF_RSP_ERROR;
	if (data) {
		int rc = io->cfg.xport->map(io->cfg.xport_ctx, p);

		if (rc == -EAGAIN)
			return IO_WAITING;        /* over the memory budget */
		if (rc)
			return BLKIF_RSP_ERROR;   /* a grant that does not map */
		p->mapped = true;
	}
	if (flush) {
		struct storage_req f = { .op = STORAGE_FLUSH, .link = data,
					 .tag = (uintptr_t)p | UD_FLUSH };
		submit_one(io, p, &f);
	}
	if (data && p->status == BLKIF_RSP_OKAY) {
		struct storage_req d = {
			.op = k == VREQ_READ ? STORAGE_READ : STORAGE_WRITE,
			.off = p->v.sector << 9, .len = p->v.nr_sectors << 9,
			.iov = p->iov, .iovcnt = p->v.nr_segs, .tag = (uintptr_t)p,
		};
		submit_one(io, p, &d);
	}
	be_stat_add(k == VREQ_READ ? &s->rd_sect : &s->wr_sect, p->v.nr_sectors);
	st = submitted(io, p);
	if (st == IO_SUBMITTED && k == VREQ_BARRIER)
		io->barrier = p;
	return st;
}

static void submit_or_answer(struct be_io *io, struct be_pending *p)
{
	int st = submit(io, p);

	if (st == IO_WAITING) {
		be_stat_add(&io->cfg.stats->mem_waits, 1);
		io->waiting = p;       /* the ring waits behind it */
	} else if (st == IO_THROTTLED) {
		io->waiting = p;       /* so it does, on a timer */
	} else if (st != IO_SUBMITTED) {
		complete(io, p, st);
	}
}

/* ---- Taking requests ----------------------------------------------------- */

static void count_request(struct be_io *io, const struct vreq *v, int status)
{
	struct be_stats *s = io->cfg.stats;

	switch (v->kind) {
	case VREQ_READ:
		be_stat_add(&s->rd_req, 1);
		break;
	case VREQ_WRITE:
		be_stat_add(&s->wr_req, 1);
		break;
	case VREQ_FLUSH:
	case VREQ_BARRIER:
		be_stat_add(&s->f_req, 1);
		break;
	case VREQ_DISCARD:
		if (status != BLKIF_RSP_ERROR)
			be_stat_add(&s->ds_req, 1);
		break;
	default:
		break;
	}
}

/* Copy the segments out of the indirect pages, then check them; IO_WAITING
 * if the pages do not fit the memory budget now (retry_waiting). */
static int fetch_indirect(struct be_io *io, struct be_pending *p)
{
	const struct be_xport_ops *x = io->cfg.xport;
	void *pages[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	unsigned int n = p->v.nr_indirect_pages;
	int rc = x->map_indirect(io->cfg.xport_ctx, p->v.indirect_grefs, n, pages);

	if (rc == -EAGAIN)
		return IO_WAITING;        /* over the memory budget */
	if (rc)
		return BLKIF_RSP_ERROR;
	ring_fetch_indirect_segs(pages, p->v.nr_segs, p->v.segs);
	x->unmap_indirect(io->cfg.xport_ctx, pages, n);
	return req_check_segs(&p->v, &io->cfg.limits);
}

/* A request whose segments are read and checked (st): count it, answer
 * it if it failed, else hold it behind a barrier or submit it. */
static void dispatch_checked(struct be_io *io, struct be_pending *p, int st)
{
	count_request(io, &p->v, st);
	if (st != BLKIF_RSP_OKAY) {
		complete(io, p, st);
		return;
	}
	if (p->v.kind == VREQ_BARRIER && io->inflight) {
		io->held = p;          /* drain first; see handle_cqe() */
		return;
	}
	submit_or_answer(io, p);
}

static void dispatch(struct be_io *io, struct be_pending *p, const struct ring_req *in)
{
	int st = req_parse(in, &io->cfg.limits, &p->v);

	p->status = BLKIF_RSP_OKAY;
	p->mapped = false;
	p->limited = false;
	p->unfetched = false;
	p->cqes_left = 0;
	p->start_ns = now_ns();
	be_stat_add(&io->cfg.stats->inflight, 1);
	if (st == BLKIF_RSP_OKAY && p->v.nr_indirect_pages)
		st = fetch_indirect(io, p);
	if (st == IO_WAITING) {       /* retry_waiting() fetches it again */
		be_stat_add(&io->cfg.stats->mem_waits, 1);
		p->unfetched = true;
		io->waiting = p;
		return;
	}
	dispatch_checked(io, p, st);
}

/* Try the request that waits again (for memory: something completed or
 * a tick passed; for the limiter: its time came).  It is the oldest one
 * taken: it goes first.  One whose indirect pages did not fit is fetched
 * now; one that passed the limiter is not charged again (submit). */
static void retry_waiting(struct be_io *io)
{
	struct be_pending *p = io->waiting;
	int st;

	if (!p)
		return;
	if (p->unfetched) {
		st = fetch_indirect(io, p);
		if (st == IO_WAITING)
			return;
		p->unfetched = false;
		io->waiting = NULL;
		dispatch_checked(io, p, st);
		return;
	}
	st = submit(io, p);
	if (st == IO_WAITING || st == IO_THROTTLED)
		return;
	io->waiting = NULL;
	if (st != IO_SUBMITTED)
		complete(io, p, st);
}

/* Adopted requests first, in ring order, under the same barrier rule. */
static void replay(struct be_io *io)
{
	struct be_replay *rp = &io->replay;

	while (io->replay_next < rp->n && !io->held && !io->barrier && !io->waiting &&
	       !io->stopping) {
		const struct be_replay_ent *e = &rp->e[io->replay_next++];

		be_stat_add(&io->cfg.stats->replayed_req, 1);
		dispatch(io, &io->slots[e->slot], &e->req);
	}
	if (io->replay_next == rp->n && rp->e)
		be_replay_free(rp);
}

int be_io_replay(struct be_io *io, struct be_replay *plan)
{
	struct be_pending **pp;
	bool *taken = calloc(io->nr_slots ? io->nr_slots : 1, sizeof(*taken));

	if (!taken)
		return -ENOMEM;
	for (unsigned int i = 0; i < plan->n; i++) {
		if (plan->e[i].slot >= io->nr_slots || taken[plan->e[i].slot]) {
			free(taken);
			return -EINVAL;
		}
		taken[plan->e[i].slot] = true;
	}
	for (pp = &io->free; *pp;) {          /* unlink the journalled slots */
		if (taken[slot_of(io, *pp)]) {
			if (slot_of(io, *pp) < io->slot_low)
				io->slot_low = slot_of(io, *pp);
			*pp = (*pp)->next;
		} else {
			pp = &(*pp)->next;
		}
	}
	free(taken);
	io->replay = *plan;
	io->replay_next = 0;
	*plan = (struct be_replay){ 0 };
	return 0;
}

/* Online resize: the control thread grew the store (storage_grow);
 * requests from this batch on may reach the new end, as Linux blkback
 * looks at the size once per batch.  The end never moves back. */
static void follow_size(struct be_io *io)
{
	uint64_t sectors = storage_size(io->cfg.storage) >> 9;

	if (sectors > io->cfg.limits.sectors)
		io->cfg.limits.sectors = sectors;
}

/* consume(): the ring is empty (not held back): the caller decides
 * between polling and arming req_event. */
#define RING_DRAINED 1

/* Take what the ring holds, unless a barrier holds us back.  0,
 * RING_DRAINED or -EIO. */
static int consume(struct be_io *io)
{
	struct be_ring *r = io->cfg.ring;
	struct ring_req in;

	follow_size(io);
	replay(io);
	if (io->replay.e)
		return 0;            /* a barrier among them: the rest wait */
	while (!io->held && !io->barrier && !io->waiting && !io->stopping) {
		int n = ring_pending(r);

		if (n == 0)
			return RING_DRAINED;
		if (n < 0)
			return n;
		for (; n > 0 && !io->held && !io->barrier && !io->waiting; n--) {
			struct be_pending *p = io->free;

			if (!p) {
				be_stat_add(&io->cfg.stats->oo_req, 1);
				return 0;
			}
			io->free = p->next;
			if (slot_of(io, p) < io->slot_low)
				io->slot_low = slot_of(io, p);
			ring_fetch_req(r, r->req_cons, &in);
			be_journal_record(io->cfg.journal, slot_of(io, p), r->req_cons, &in);
			/* The consumer index moves before the request's I/O
			 * is submitted: once it is in io_uring its
			 * completion may be answered at any moment, and a
			 * response must never overtake req_cons. */
			r->req_cons++;
			dispatch(io, p, &in);
		}
	}
	return 0;
}

/* consume(), then let the driver serve what it deferred from the batch
 * (storage.h, commit): their answers are in the ring when this returns. */
static int consume_batch(struct be_io *io)
{
	int rc = consume(io);

	storage_queue_commit(io->cfg.storage, io->sq);
	return rc;
}

/* ---- Polling ------------------------------------------------------------- */

/*
 * A sleep on the event channel costs a wake-up round trip (16-29 us on
 * a quiet machine, Documentation/performance.md), a look at the shared
 * ring a fraction of a microsecond.  So when the ring has gone empty and
 * the queue is busy, the thread spins a while on req_prod and on its CQ
 * (completions of the storage driver, a kick, a stop) before it arms
 * req_event and sleeps.
 *
 * The window adapts, as NVMe hybrid polling follows the device's
 * completion time: a spin that finds work after t makes the window at
 * least 2t (it shrinks by an eighth per quicker hit), a spin that finds
 * nothing halves it; below POLL_MIN_NS the queue stops spinning and only
 * probes the whole window once in POLL_PROBE_EVERY decisions, so that it
 * notices when work comes quickly again.  It never exceeds
 * poll_duration_us (the vbd's, or the module parameter).  What a first
 * look finds (the I/O just submitted completed inline) says nothing
 * about the wait and is not learnt from.
 *
 * No spin while the machine has more runnable threads than CPUs
 * (machine_busy), and a spin that finds it lost its CPU (two looks
 * POLL_LOST_CPU_NS apart, where 16 looks take a microsecond or two)
 * stops and leaves the queue probing: a spinner then takes the CPU from
 * a thread that could run, perhaps the frontend it waits for, while a
 * sleeper is the one the scheduler runs first when it wakes.
 *
 * A queue with nothing in flight that has taken and answered nothing
 * since it last ran out of work is idle and never spins: an idle disk
 * burns no CPU, and a burst ends in at most one window of spinning.
 *
 * While it spins req_event stays where the last final check put it,
 * behind req_cons whenever requests were taken since, so the frontend
 * sends no event; the final check (req_event, full barrier, req_prod
 * again) always comes before a sleep, so no request goes unseen.
 */
#define POLL_MIN_NS 2000u
#define POLL_PROBE_EVERY 16u
#define POLL_LOST_CPU_NS 20000u
#define POLL_LOAD_EVERY_NS 10000000u   /* look at the run queues every 10 ms */

/*
 * Is every CPU wanted?  /proc/loadavg's fourth field is the number of
 * threads runnable right now (this one included); with more of them
 * than online CPUs a spinner takes a CPU from a thread that could run,
 * perhaps the very frontend it waits for, so the queue does not spin.
 * Looked at every POLL_LOAD_EVERY_NS at most (a read costs some
 * microseconds); without /proc the machine counts as not busy.
 */
static bool machine_busy(struct be_io *io, uint64_t now)
{
	char buf[128], *slash;
	ssize_t n;

	if (io->load_fd < 0 || now - io->load_ns < POLL_LOAD_EVERY_NS)
		return io->load_busy;
	io->load_ns = now;
	n = pread(io->load_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return io->load_busy = false;
	buf[n] = '\0';
	slash = strchr(buf, '/');
	while (slash && slash > buf && slash[-1] >= '0' && slash[-1] <= '9')
		slash--;
	io->load_busy = slash && strtol(slash, NULL, 10) > io->nr_cpus;
	return io->load_busy;
}

/* The window's bound: the vbd's own poll_duration_us, or the module's. */
static uint64_t poll_max_ns(const struct be_io *io)
{
	int64_t v = io->cfg.poll_us ? __atomic_load_n(io->cfg.poll_us, __ATOMIC_RELAXED) : -1;

	return (v >= 0 ? (uint64_t)v : tun_get(TUN_POLL_DURATION_US)) * 1000u;
}

/* Did the queue take or answer requests since the last decision? */
static bool poll_worked(struct be_io *io)
{
	const struct be_ring *r = io->cfg.ring;
	bool worked = r->req_cons != io->idle_cons || r->rsp_prod_pvt != io->idle_rsp;

	io->idle_cons = r->req_cons;
	io->idle_rsp = r->rsp_prod_pvt;
	return worked;
}

/* The queue ran out of work: how long to spin now (0: not at all). */
static uint64_t poll_window(struct be_io *io, uint64_t max)
{
	bool worked = poll_worked(io);

	if (!max || io->stopping || (!worked && !io->inflight) ||
	    machine_busy(io, now_ns()))
		return 0;
	if (io->poll_ns > max)
		io->poll_ns = max;     /* the tunable went down */
	if (io->poll_ns)
		return io->poll_ns;
	return ++io->poll_skips % POLL_PROBE_EVERY ? 0 : max;
}

/* What a spin of window w found: work after t ns, or nothing (hit false). */
static void poll_learn(struct be_io *io, bool hit, uint64_t t, uint64_t w, uint64_t max)
{
	uint64_t next = io->poll_ns;

	if (hit) {
		next -= next / 8;
		if (next < 2 * t)
			next = 2 * t;
		if (next < POLL_MIN_NS)
			next = POLL_MIN_NS;
	} else {
		next = w / 2 < POLL_MIN_NS ? 0 : w / 2;
	}
	io->poll_ns = next > max ? max : next;
}

/* Spin for work; true when some came (a request, or a CQE to reap). */
static bool poll_spin(struct be_io *io)
{
	struct be_stats *s = io->cfg.stats;
	uint64_t max = poll_max_ns(io);
	uint64_t w = poll_window(io, max), t0, t = 0;
	bool lost = false;
	unsigned int i;

	if (!w)
		return false;
	/* what is queued starts now; errors are the wait's to report */
	if (arm_storage(io) < 0 || io_uring_submit(&io->uring) < 0)
		return false;
	t0 = now_ns();
	for (i = 0;; i++) {
		if (io_uring_cq_ready(&io->uring) || ring_pending(io->cfg.ring))
			break;
		if ((i & 15) == 15) {
			uint64_t prev = t;

			t = now_ns() - t0;
			if (t >= w)
				break;
			if (t - prev > POLL_LOST_CPU_NS && !io->poll_any_load) {
				lost = true;   /* preempted: the CPU is wanted */
				break;
			}
		}
		xbd_cpu_relax();
	}
	be_stat_add(&s->polls, 1);
	if (lost) {
		io->poll_ns = 0;       /* probe again later, not spin now */
		return false;
	}
	if (t >= w) {
		poll_learn(io, false, t, w, max);
		return false;
	}
	be_stat_add(&s->poll_hits, 1);
	if (i)                         /* not found at the first look */
		poll_learn(io, true, now_ns() - t0, w, max);
	return true;
}

/*
 * Take requests until the ring is empty, then (may_spin) poll, and
 * before the ring is left for a sleep arm req_event with a last look
 * (RING_FINAL_CHECK_FOR_REQUESTS).  0 or -EIO.
 */
static int take_requests(struct be_io *io, bool may_spin)
{
	int rc;

	while ((rc = consume_batch(io)) == RING_DRAINED) {
		/* What was answered while taking (a synchronous driver,
		 * a rejection) is announced before the loop spins or
		 * sleeps: no CQE may come to wake it for them. */
		push(io);
		if (may_spin && poll_spin(io)) {
			if (io_uring_cq_ready(&io->uring))
				return 0;        /* completions: reap them now */
			continue;                /* requests */
		}
		rc = ring_final_check(io->cfg.ring);
		if (rc <= 0)
			return rc;
	}
	return rc;
}

/* ---- Completions --------------------------------------------------------- */

static int cqe_status(const struct be_pending *p, uint64_t ud, int res)
{
	int64_t want = 0;

	if (!(ud & UD_FLUSH) && p->v.kind != VREQ_DISCARD)
		want = (int64_t)(p->v.nr_sectors << 9);   /* full transfer */
	if (res == want)
		return BLKIF_RSP_OKAY;
	return res == -EOPNOTSUPP ? BLKIF_RSP_EOPNOTSUPP : BLKIF_RSP_ERROR;
}

/* The driver's socket polled ready (or the poll ended: the connection it
 * was armed on is gone, and the driver's fd is another one now). */
static void storage_fd_ready(struct be_io *io, uint64_t ud, int res)
{
	short ev;
	int fd = storage_queue_poll(io->cfg.storage, io->sq, &ev);
	int armed_fd = ud == UD_SD_IN ? io->sd_in_fd : io->sd_out_fd;

	if (ud == UD_SD_IN)
		io->sd_in_armed = false;
	else
		io->sd_out_armed = false;
	if (res > 0 && fd >= 0 && fd == armed_fd)
		storage_queue_ready(io->cfg.storage, io->sq, (short)res);
}

static void handle_cqe(struct be_io *io, uint64_t ud, int res)
{
	struct be_pending *p;
	int st;

	if (ud < UD_TAGS) {
		if (ud == UD_EVT)
			io->kicked = true;
		else if (ud == UD_STOP)
			io->stopping = true;
		else if (ud == UD_SD_IN || ud == UD_SD_OUT)
			storage_fd_ready(io, ud, res);
		return;
	}
	p = (struct be_pending *)(uintptr_t)(ud & ~(uint64_t)UD_FLUSH);
	st = cqe_status(p, ud, res);
	if (p->status == BLKIF_RSP_OKAY)
		p->status = st;        /* the first failure is the answer */
	if (--p->cqes_left)
		return;
	io->inflight--;
	if (p == io->barrier)
		io->barrier = NULL;
	complete(io, p, p->status);
	if (io->held && !io->inflight) {
		struct be_pending *b = io->held;

		io->held = NULL;       /* drained: the barrier goes now */
		submit_or_answer(io, b);
	}
}

static void reap(struct be_io *io)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	io_uring_for_each_cqe(&io->uring, head, cqe) {
		handle_cqe(io, cqe->user_data, cqe->res);
		n++;
	}
	io_uring_cq_advance(&io->uring, n);
}

/* BE_IO_WAIT_POLL: io_uring_enter only submits (liburing enters only
 * when SQEs are queued or the kernel asks for it), then poll(2) on the
 * io_uring fd, which is readable while the CQ ring holds entries.  A
 * CQE posted by task work (the evt/stop POLL_ADDs) interrupts the poll,
 * the kernel runs the task work and restarts it, and it sees the CQE. */
static int poll_wait(struct be_io *io, int timeout_ms)
{
	struct pollfd pfd = { io->uring.ring_fd, POLLIN, 0 };
	int rc = io_uring_submit(&io->uring);

	if (rc < 0)
		return rc;
	if (timeout_ms == 0 || io_uring_cq_ready(&io->uring))
		return 0;
	if (poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

/* Submit what is queued and wait up to timeout_ms (-1: no limit, 0: not
 * at all) for one CQE.  0 or -errno; a timeout or a signal is 0. */
static int wait_for_cqe(struct be_io *io, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	int rc;

	if (io->wait_poll)
		return poll_wait(io, timeout_ms);
	if (timeout_ms < 0)
		rc = io_uring_submit_and_wait(&io->uring, 1);
	else if (timeout_ms == 0)
		rc = io_uring_submit(&io->uring);
	else {
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ms / 1000,
			.tv_nsec = (timeout_ms % 1000) * 1000000LL,
		};
		rc = io_uring_submit_and_wait_timeout(&io->uring, &cqe, 1, &ts, NULL);
	}
	return rc == -ETIME || rc == -EINTR || rc >= 0 ? 0 : rc;
}

static bool has_tick(const struct be_io *io)
{
	return io->cfg.xport->tick || storage_queue_has_tick(io->cfg.storage);
}

static void tick(struct be_io *io)
{
	uint64_t now;

	if (!has_tick(io))
		return;
	now = now_ns();
	if (now - io->last_tick_ns < BE_IO_TICK_MS * 1000000ull)
		return;
	io->last_tick_ns = now;
	if (io->cfg.xport->tick)
		io->cfg.xport->tick(io->cfg.xport_ctx, now);
	storage_queue_tick(io->cfg.storage, io->sq, now);
}

/* Online resize: the store's size, every size_check_ms (queue 0). */
static void probe_size(struct be_io *io)
{
	uint64_t every = tun_get(TUN_SIZE_CHECK_MS), now, bytes;

	if (!io->cfg.measured_size || !every)
		return;
	now = now_ns();
	if (now - io->last_probe_ns < every * 1000000ull)
		return;
	io->last_probe_ns = now;
	if (!storage_probe_size(io->cfg.storage, &bytes))
		__atomic_store_n(io->cfg.measured_size, bytes, __ATOMIC_RELEASE);
}

/* How long a turn may wait with nothing to do: the tick's period when
 * there is housekeeping (the transport's, the storage's, the size
 * probe), else for ever. */
static int idle_timeout_ms(const struct be_io *io)
{
	return has_tick(io) || io->cfg.measured_size ? BE_IO_TICK_MS : -1;
}

int be_io_run_once(struct be_io *io, int timeout_ms)
{
	int crc = take_requests(io, timeout_ms != 0), rc;

	push(io);      /* as take_requests: before the wait, not after it */

	/* held by the limiter (not by the memory budget): wake to retry */
	if (io->waiting && io->limit_wait.charged && be_limit_active(io->cfg.limit))
		timeout_ms = be_limit_timeout_ms(&io->limit_wait, timeout_ms, now_ns());
	rc = arm_storage(io);
	if (rc < 0)
		return rc;
	/* A broken ring is not waited on: in-flight I/O still completes. */
	rc = wait_for_cqe(io, crc < 0 ? 0 : timeout_ms);
	if (rc < 0)
		return rc;
	reap(io);
	retry_waiting(io);
	/* what the completions let go (a held barrier, a waiting request) */
	storage_queue_commit(io->cfg.storage, io->sq);
	if (io->kicked) {
		io->kicked = false;
		be_stat_add(&io->cfg.stats->evt_in, 1);
		if (io->cfg.evt->ack(io->cfg.evt_ctx) == -EPROTO)
			io->evt_err = -EPROTO;
		rc = arm_poll(io, io->cfg.evt_fd, UD_EVT);
	}
	push(io);
	tick(io);
	probe_size(io);
	if (crc < 0)
		return crc;
	if (io->evt_err)
		return io->evt_err;
	if (ring_faulted(io->cfg.ring))   /* the notify may have faulted */
		return -EFAULT;
	if (rc < 0)
		return rc;
	return io->stopping ? 1 : 0;
}

int be_io_run(struct be_io *io)
{
	int rc;

	/* Wake at least every tick for the transport's housekeeping. */
	while ((rc = be_io_run_once(io, idle_timeout_ms(io))) == 0)
		;
	return rc == 1 ? 0 : rc;
}

int be_io_reset(struct be_io *io, const struct be_io_cfg *cfg)
{
	unsigned int n = io->nr_slots, cap = req_seg_capacity(&io->cfg.limits);
	size_t per = slot_bytes(cap);
	struct be_io old = *io;
	int rc;

	if (!io->uring_ready || io->inflight || io->held || io->barrier || io->waiting ||
	    io->replay.e || io->sd_in_armed || io->sd_out_armed || io->kicked ||
	    io->cfg.journal || cfg->journal)
		return -EBUSY;
	if (cfg->ring->nr_ents != n || req_seg_capacity(&cfg->limits) != cap ||
	    req_limits_check(&cfg->limits) || cfg->evt_fd != io->cfg.evt_fd ||
	    cfg->stop_fd != io->cfg.stop_fd)
		return -EINVAL;
	storage_queue_close(io->cfg.storage, io->sq);
	/* Every slot taken: as alloc_slots made it (its table memory
	 * zeroed, on the free list in the same order); the others are. */
	memset((char *)io->slot_mem + (size_t)io->slot_low * per, 0,
	       (size_t)(n - io->slot_low) * per);
	memset(&io->slots[io->slot_low], 0, (size_t)(n - io->slot_low) * sizeof(*io->slots));
	for (unsigned int i = io->slot_low; i < n; i++)
		slot_setup(io, i, cap);
	/* The rest as be_io_init sets it, with what it made kept. */
	memset(io, 0, sizeof(*io));
	io->cfg = *cfg;
	io->uring = old.uring;
	io->uring_ready = true;
	io->slots = old.slots;
	io->nr_slots = n;
	io->slot_low = n;
	io->slot_mem = old.slot_mem;
	io->free = n ? &io->slots[n - 1] : NULL;
	io->load_fd = old.load_fd;
	io->nr_cpus = old.nr_cpus;
	io->fault_notify = old.fault_notify;
	io->poll_any_load = old.poll_any_load;
	io->poll_ns = UINT64_MAX;
	io->wait_poll = cfg->wait == BE_IO_WAIT_POLL ||
			(cfg->wait == BE_IO_WAIT_TUNABLE && tun_get(TUN_IO_WAIT_POLL));
	io->loop = (struct storage_loop){ &io->uring, loop_complete, io,
					  &cfg->stats->helper_req };
	rc = storage_queue_open(cfg->storage, cfg->queue_index, io->nr_slots,
				&io->loop, &io->sq);
	return rc;
}

void be_io_destroy(struct be_io *io)
{
	if (io->uring_ready) {
		io->stopping = true;
		while (io->inflight || io->waiting) {
			retry_waiting(io);     /* what drained made room */
			storage_queue_commit(io->cfg.storage, io->sq);
			if (!io->inflight && io->waiting) {
				struct be_pending *p = io->waiting;

				io->waiting = NULL;   /* cannot fit: not run */
				complete(io, p, BLKIF_RSP_ERROR);
				break;
			}
			if (arm_storage(io) < 0 ||
			    wait_for_cqe(io, has_tick(io) ? BE_IO_TICK_MS : -1) < 0)
				break;
			reap(io);
			tick(io);
		}
		push(io);
		storage_queue_close(io->cfg.storage, io->sq);
		io->sq = NULL;
		TSAN_RING_UNMAPPING(&io->uring);
		io_uring_queue_exit(&io->uring);
		io->uring_ready = false;
	}
	if (io->load_fd >= 0)
		close(io->load_fd);
	io->load_fd = -1;
	be_replay_free(&io->replay);
	free(io->slots);
	free(io->slot_mem);
	io->slots = NULL;
	io->slot_mem = NULL;
	io->free = NULL;
}
