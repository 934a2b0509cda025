/* SPDX-License-Identifier: MIT */
/*
 * The I/O engine of one queue: one thread, one io_uring, one ring.
 *
 * be_io_run_once() is the whole queue loop: take requests off the shared
 * ring (ring_fetch_req), validate the private copy (request.c), make the
 * data addressable through the transport (grants: map, persistent cache or
 * copy), submit reads/writes/flushes/discards through the storage driver
 * (storage/storage.h: the raw driver's are SQEs in this io_uring, a socket
 * driver's fd is polled here too), and turn completions into responses.  The thread sleeps in exactly one
 * place, with the event-channel fd and the stop fd polled through the same
 * io_uring (IORING_OP_POLL_ADD), so a kick, a stop and a completion all
 * end the sleep as a CQE.  Where it sleeps is the wait mode:
 *   BE_IO_WAIT_URING  in io_uring_enter(2) (io_uring_submit_and_wait):
 *                     one syscall submits and waits;
 *   BE_IO_WAIT_POLL   io_uring_enter(2) only submits, then poll(2) on the
 *                     io_uring fd, which is readable while CQEs wait.
 *                     For tools that cannot follow a thread blocked in
 *                     io_uring_enter: valgrind 3.19 runs it as a
 *                     non-blocking syscall and every other thread of the
 *                     process stops (Documentation/performance.md, "CPU
 *                     cost").  Everything else (ring, grants, requests,
 *                     SQEs, completions) is the same code in both modes.
 *
 * Polling: when the ring has gone empty and the queue is not idle (it has
 * I/O in flight, or took or answered requests since its last decision),
 * the thread first spins a short, adaptive time (at most
 * poll_duration_us, never while every CPU is wanted) watching req_prod
 * and its CQ, then sets req_event and looks at the ring once more
 * (RING_FINAL_CHECK_FOR_REQUESTS) before it sleeps.  While it spins
 * req_event stays where the last final check put it, behind req_cons
 * once requests were taken, so a frontend that pushes requests sends no
 * event.  An idle queue never spins.
 *
 * Ordering rules:
 *   FLUSH_DISKCACHE   fdatasync, then the data (linked SQEs), as Linux's
 *                     PREFLUSH write;
 *   WRITE_BARRIER     stop taking requests, wait until nothing is in
 *                     flight (drain), fdatasync, then the data; requests
 *                     after it are taken once it has completed;
 *   DISCARD           files: fallocate(PUNCH_HOLE|KEEP_SIZE) on io_uring;
 *                     block devices: BLKDISCARD/BLKSECDISCARD inline (as
 *                     Linux issues it from its ring thread).
 *
 * Threads: a struct be_io and everything it points to is owned by its
 * queue thread from be_io_init() to be_io_destroy(); nothing here locks.
 * The storage is shared read-only between the queues of a vbd.
 */
#ifndef XBD_BACKEND_IO_URING_H
#define XBD_BACKEND_IO_URING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <liburing.h>

#include "backend/journal.h"
#include "backend/limit.h"
#include "backend/request.h"
#include "backend/ring.h"
#include "backend/stats.h"
#include "backend/storage/storage.h"

/* One request between the ring and its response.  Owned by the queue;
 * the transport may keep per-request state in xport_priv between its
 * map() and unmap(). */
struct be_pending {
	struct vreq v;              /* v.segs points into this slot's memory */
	struct iovec *iov;          /* one per segment, filled by map() */
	void **seg_priv;            /* one per segment, for the transport */
	void *xport_priv;           /* for the transport */
	unsigned int xport_mode;    /* for the transport */
	bool mapped;                /* map() succeeded: unmap() owed */
	bool limited;               /* charged to the I/O limits (limit.h) */
	bool unfetched;             /* its indirect pages did not fit yet */
	unsigned int cqes_left;     /* completions still to come */
	int status;                 /* BLKIF_RSP_*, worst so far */
	uint64_t start_ns;
	struct be_pending *next;    /* free list */
};

/* How a request's segments become memory the I/O can use. */
struct be_xport_ops {
	/* Fill p->iov[0..p->v.nr_segs) for the segments of p->v.  For writes
	 * the data must be readable there on return.  0 or -errno (the
	 * request is then answered BLKIF_RSP_ERROR, with no I/O); -EAGAIN:
	 * it does not fit the memory budget now (gnt.h): nothing is taken,
	 * the engine keeps the request, takes nothing more from the ring and
	 * calls map() again after each completion and at each tick. */
	int (*map)(void *ctx, struct be_pending *p);
	/* The I/O is over (ok: it succeeded).  Deliver read data (bounce
	 * transports) and release what map() took.  0 or -errno. */
	int (*unmap)(void *ctx, struct be_pending *p, bool ok);
	/* Map n indirect pages read-only into pages[] / release them.
	 * -EAGAIN: as map() (the request waits, its segments not read). */
	int (*map_indirect)(void *ctx, const grant_ref_t *refs, unsigned int n,
			    void **pages);
	void (*unmap_indirect)(void *ctx, void **pages, unsigned int n);
	/* Optional: housekeeping, called from the queue loop at least every
	 * BE_IO_TICK_MS while it runs (persistent-grant purge, pool trim). */
	void (*tick)(void *ctx, uint64_t now_ns);
};

#define BE_IO_TICK_MS 100

/* The queue's event channel. */
struct be_evt_ops {
	int (*ack)(void *ctx);      /* consume a kick and unmask; 0 or -errno */
	int (*notify)(void *ctx);   /* kick the frontend; 0 or -errno */
};
/* Either returning -EPROTO (a peer rewriting the event channel's words
 * non-stop, lib/platform/platform.h) stops the queue with that error. */

/* Where the queue thread sleeps (see the top of this file). */
enum be_io_wait {
	BE_IO_WAIT_TUNABLE,         /* the io_wait_poll tunable, read at init */
	BE_IO_WAIT_URING,
	BE_IO_WAIT_POLL,
};

struct be_io_cfg {
	struct be_ring *ring;       /* attached; owned by the caller */
	const struct storage *storage;
	struct req_limits limits;   /* snapshot; max_indirect_segs <= 1024 */
	const struct be_xport_ops *xport;
	void *xport_ctx;
	const struct be_evt_ops *evt;
	void *evt_ctx;
	int evt_fd;                 /* readable when the frontend kicked */
	int stop_fd;                /* readable when the queue must stop; -1: none */
	struct be_stats *stats;     /* owned by the caller, written here */
	struct be_journal *journal; /* in-flight journal (journal.h); NULL: none */
	enum be_io_wait wait;       /* 0: as the io_wait_poll tunable says */
	struct be_limit *limit;     /* the vbd's I/O limits (limit.h); NULL: none */
	/* the vbd's poll_duration_us, read at every decision: -1 (or a
	 * NULL pointer) follows the module parameter */
	const int64_t *poll_us;
	/* Online resize: every size_check_ms this queue asks the store for
	 * its size (storage_probe_size; here, so that a store slow to
	 * answer stalls only its own vbd, as Linux blkback's per-vbd
	 * thread does) and stores it (atomic) for the control thread.
	 * NULL: not this queue's job. */
	uint64_t *measured_size;
	unsigned int queue_index;   /* for the storage driver (connections) */
};

struct be_io {
	struct be_io_cfg cfg;
	struct io_uring uring;
	bool uring_ready;
	struct storage_loop loop;   /* what the storage driver sees of us */
	struct storage_queue *sq;   /* this queue's side of the storage */
	bool sd_in_armed, sd_out_armed;  /* driver fd polls in io_uring */
	int sd_in_fd, sd_out_fd;    /* the fd each was armed on */
	bool wait_poll;             /* BE_IO_WAIT_POLL, resolved at init */
	struct be_pending *slots;   /* ring->nr_ents of them */
	unsigned int nr_slots;
	void *slot_mem;             /* segs + iovecs of every slot */
	struct be_pending *free;
	unsigned int inflight;      /* requests with SQEs outstanding */
	struct be_pending *held;    /* barrier waiting for the drain */
	struct be_pending *barrier; /* barrier in flight */
	struct be_pending *waiting; /* map() said -EAGAIN, or over the I/O
	                             * limit: retried, in order */
	struct be_limit_wait limit_wait;   /* the charge of that request */
	bool kicked;                /* evt poll fired: ack and re-arm */
	bool stopping;
	bool rsps_to_push;
	int evt_err;                /* -EPROTO: the peer fought our event words */
	uint64_t last_tick_ns;
	uint64_t last_probe_ns;     /* measured_size's last probe */
	unsigned int fault_notify;  /* test only: SIGKILL at this notify (io_uring.c) */
	struct be_replay replay;    /* adopted requests to re-run, then the ring */
	unsigned int replay_next;
	/* Polling (poll_duration_us; io_uring.c, "Polling"): where the ring
	 * and the responses stood at the last decision, the adaptive
	 * window (0: not spinning, probing), decisions since */
	RING_IDX idle_cons, idle_rsp;
	uint64_t poll_ns;
	int load_fd;                /* /proc/loadavg, or -1 */
	long nr_cpus;
	uint64_t load_ns;           /* when it was last read */
	bool load_busy;             /* more threads runnable than CPUs then */
	bool poll_any_load;         /* test only: spin whatever the load */
	unsigned int poll_skips;
	unsigned int slot_low;      /* lowest slot taken since init/reset
	                             * (nr_slots: none); be_io_reset */
};

/* 0 or -errno (-EINVAL for bad limits, io_uring setup errors, -ENOMEM). */
int be_io_init(struct be_io *io, const struct be_io_cfg *cfg);

/*
 * Adoption: re-run plan's requests (their slots are taken as journalled)
 * before anything new from the ring, in ring order.  Takes plan->e (the
 * plan is left empty).  Call after be_io_init() and before the loop runs.
 * 0, or -EINVAL for a slot out of range or used twice (nothing taken).
 */
int be_io_replay(struct be_io *io, struct be_replay *plan);

/*
 * Adoption: notify the frontend once, whatever its rsp_event says.  The
 * backend that died may have published responses and never announced
 * them (responses are published one by one, the notify decision comes
 * once per turn of the loop); a frontend that looks at its ring only on
 * an event (Linux xen-blkfront) would wait for them forever.  Call it
 * after be_io_init() and before the loop runs, so that it is the
 * queue's first act on the ring.  Counted in evt_out.  0 or -errno.
 */
int be_io_announce(struct be_io *io);

/*
 * One turn of the queue loop: take what the ring holds, submit, wait up to
 * timeout_ms (-1: forever; 0: not at all) for a completion or a kick,
 * handle every completion, publish responses and notify.
 * Returns 0, 1 once the stop fd fired, -EIO when the frontend broke the
 * ring (the caller reports it through be_fatal; in-flight I/O still
 * completes), or another -errno from io_uring.
 */
int be_io_run_once(struct be_io *io, int timeout_ms);

/* Run until stopped (returns 0) or broken / failed (-errno). */
int be_io_run(struct be_io *io);

/*
 * The queue as be_io_init(io, cfg) leaves it, keeping its slot tables and
 * its io_uring: what a harness that runs one queue across many inputs
 * calls between them (tests/fuzz/fuzz_be_request.c; not used by the
 * daemon, whose queues live one connection each).  Only what the queue's
 * last life touched is cleared: the slots it took (the free list is a
 * stack, so they are the top slot_low.. nr_slots - 1 of it) and the
 * scalar state; the storage queue is closed and opened again on
 * cfg->storage.  The previous life must have ended quiet: nothing in
 * flight, held, waiting or replayed, no driver fd polled, the event (and
 * stop) poll armed as any be_io_run_once() that returned >= 0 or -EIO
 * leaves it; cfg must name the same ring size, segment capacity, event
 * and stop fds and no journal.  0; -EBUSY or -EINVAL when it does not
 * apply (the queue is unchanged: destroy it and init a fresh one), or
 * storage_queue_open()'s error (the queue must then be destroyed).
 */
int be_io_reset(struct be_io *io, const struct be_io_cfg *cfg);

/* Wait for in-flight I/O, answer it, and free everything.  Idempotent;
 * safe after a failed be_io_init(). */
void be_io_destroy(struct be_io *io);

#endif
