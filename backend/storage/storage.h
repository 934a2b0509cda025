/* SPDX-License-Identifier: MIT */
/*
 * The storage of a vbd, behind one driver interface.
 *
 * A driver serves one kind of store; the queue loop (io_uring.c), the
 * control plane (xenbus.c) and the tree (sysfs.c) see only this header and
 * never which driver serves a vbd.  One file per driver:
 *   raw.c    a regular file or a block device, through the queue's io_uring
 *            (a file in memory: system calls on the queue thread, sync_io)
 *   nbd.c    an NBD export, through libnbd's asynchronous API
 *   qcow2.c  a qcow2 image: a qemu-storage-daemon child exports it over NBD
 *            on a private Unix socket, served by the nbd driver
 *   rbd.c    a Ceph RBD image through librbd
 * Documentation/storage.md describes each, its spec and its failures.
 *
 * Two objects, two owners:
 *   struct storage        the vbd's: opened at probe (storage_open; by
 *                         the control thread for raw, by a helper thread of
 *                         the probe for network stores, then moved into the
 *                         device), read-only while queues run, closed by
 *                         the control thread at removal (storage_close).  It holds what blkback
 *                         advertises (geometry) and the driver's vbd state.
 *   struct storage_queue  one per queue thread: made by that queue's loop
 *                         (storage_queue_open), used and closed only by it.
 *                         Requests go in with storage_submit(); their
 *                         completions come back in the queue's own loop:
 *                           - drivers that use the queue's io_uring queue
 *                             SQEs whose user_data is the request's tag;
 *                             the loop reaps them as its own CQEs;
 *                           - drivers with a socket expose it
 *                             (storage_queue_poll) for the loop to poll
 *                             through the same io_uring, and on readiness
 *                             (storage_queue_ready) or a tick deliver each
 *                             completion through loop->complete().
 *                         No thread is started per request; the one
 *                         exception per queue is raw sync_io's helper
 *                         (raw.c), made by queue_open, joined by
 *                         queue_close.
 *
 * A completion's result is what io_uring would say: the bytes moved for a
 * read or write, 0 for a flush or discard, or -errno.
 */
#ifndef XBD_BACKEND_STORAGE_H
#define XBD_BACKEND_STORAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <linux/falloc.h>

struct io_uring;

#define STORAGE_DRIVER_MAX 16
#define STORAGE_TARGET_MAX 1024

struct storage_opts {
	/* "raw" (the default for NULL or ""), "nbd" or "qcow2". */
	const char *driver;
	bool read_only;         /* mode "r" */
	bool no_direct;         /* raw: never use O_DIRECT */
	/* raw: serve the data path on the queue thread (preadv, pwritev;
	 * the sync_io tunable): STORAGE_SYNC_NO (0, the zero default),
	 * STORAGE_SYNC_YES, or STORAGE_SYNC_AUTO (files in memory only). */
	uint8_t sync_io;
	/* Logical block size to advertise, 512..4096, power of two.  0: the
	 * store's own (a block device's, 512 for files and exports).  A
	 * block device refuses a size below its own (-EINVAL). */
	uint32_t sector_size;
	/* nbd, qcow2: how long a lost store may stall I/O before it fails
	 * (the storage_outage_ms tunable). */
	uint64_t outage_ms;
	/* qcow2: the backend's trusted run directory (XBD_RUNDIR), where its
	 * daemons' private socket directories go; NULL: /run/xbd. */
	const char *rundir;
};

enum { STORAGE_SYNC_NO, STORAGE_SYNC_YES, STORAGE_SYNC_AUTO };

struct storage_driver;

struct storage {
	const struct storage_driver *drv;   /* NULL: closed */
	void *priv;                         /* the driver's vbd state */
	char driver[STORAGE_DRIVER_MAX];    /* drv's name, for the tree */
	char target[STORAGE_TARGET_MAX];    /* as given to storage_open */
	/* Geometry: what the backend advertises. */
	bool read_only;
	/* bytes, a multiple of logical_block.  Grows online (storage_grow,
	 * control thread, atomic store); the queue threads read it with
	 * storage_size(). */
	uint64_t size;
	uint32_t logical_block; /* sector-size */
	uint32_t physical_block;/* physical-sector-size (>= logical_block) */
	bool flush;             /* the store has a cache to flush */
	bool discard;           /* feature-discard */
	bool discard_secure;    /* discard-secure */
	uint32_t discard_granularity;  /* bytes */
	uint32_t discard_alignment;    /* bytes */
	dev_t rdev;             /* physical-device: 0 unless a block device */
	unsigned int max_queues;/* 0: any number; 1: the store wants one */
	/* raw driver's own (raw.c); unused by the others */
	int fd;                 /* -1 when closed */
	bool is_blkdev;
	bool direct;            /* fd is O_DIRECT */
	/* Reads, writes, flushes and punch-holes are system calls on the
	 * queue thread, answered before storage_submit returns (raw.c);
	 * mem_fs: the file is in memory (tmpfs, ramfs, hugetlbfs), whose
	 * fsync does nothing. */
	bool sync_io;
	bool mem_fs;
};

/* What the queue loop gives a driver. */
struct storage_loop {
	struct io_uring *uring;        /* the queue's; for drivers that use it */
	/* A completion that did not come as a CQE (tag as submitted). */
	void (*complete)(void *ctx, uint64_t tag, int res);
	void *ctx;
	/* The queue's count of requests whose I/O another thread of the
	 * driver did (raw sync_io: the queue's helper); the queue thread
	 * adds to it.  NULL: not counted. */
	uint64_t *helped;
};

enum storage_op {
	STORAGE_READ,
	STORAGE_WRITE,
	STORAGE_FLUSH,
	STORAGE_DISCARD,
	STORAGE_DISCARD_SECURE,
};

struct storage_req {
	enum storage_op op;
	uint64_t off, len;             /* bytes; len 0 for a flush */
	const struct iovec *iov;       /* READ/WRITE: stays valid until done */
	unsigned int iovcnt;
	uint64_t tag;                  /* handed back at completion; never 0 */
	/* FLUSH only: the next storage_submit() on this queue must not start
	 * before this flush has completed (a PREFLUSH write). */
	bool link;
};

/* storage_submit(): the request is under way, its completion will come. */
#define STORAGE_QUEUED 1

struct storage_queue;

struct storage_driver {
	const char *name;
	/* Fill s's geometry (s->target, s->read_only already set).  It may
	 * run on a helper thread (storage_set_error is per thread), and the
	 * caller may move *s afterwards (before any queue opens): nothing in
	 * priv may point into *s. */
	int (*open)(struct storage *s, const struct storage_opts *o);
	void (*close)(struct storage *s);
	int (*queue_open)(const struct storage *s, unsigned int index, unsigned int depth,
			  const struct storage_loop *loop, struct storage_queue **q);
	/* Only with nothing in flight (the loop drains first). */
	void (*queue_close)(struct storage_queue *q);
	int (*submit)(struct storage_queue *q, const struct storage_req *r);
	/* Optional: submit() may defer requests (STORAGE_QUEUED) to serve
	 * them together; the loop calls commit() once it has taken what it
	 * could and before it answers, spins or sleeps, and every deferred
	 * request's completion has come through loop->complete() when it
	 * returns (raw sync_io: a deep batch is shared with a helper). */
	void (*commit)(struct storage_queue *q);
	/* Optional (socket drivers): the fd to poll and for what (POLLIN /
	 * POLLOUT), or -1 for none just now. */
	int (*poll)(struct storage_queue *q, short *events);
	void (*ready)(struct storage_queue *q, short revents);
	/* Optional: timers (reconnects, outage limits); every few 100 ms. */
	void (*tick)(struct storage_queue *q, uint64_t now_ns);
	/* Optional, control thread: an fd that is readable when something the
	 * vbd depends on went away (qcow2: its daemon exited), or -1; and
	 * what to do then: 0, or -errno when the store is lost for good
	 * (storage_error() says why; the queues fail what they hold). */
	int (*watch_fd)(const struct storage *s);
	int (*watch)(struct storage *s);
	/* Optional, queue 0's thread (it may wait on a slow store, which
	 * must stall only its own vbd): the store's size now, in bytes
	 * (raw: fstat or BLKGETSIZE64; rbd: rbd_get_size).  Without it the
	 * size is the one found at open (nbd: the protocol sends it once). */
	int (*get_size)(const struct storage *s, uint64_t *bytes);
};

/* 0 or -errno (-ENOENT, -EACCES, -EBUSY, -EINVAL for a bad sector_size,
 * an unknown driver or a target the driver cannot take, -ENOSPC for an
 * empty target, -ECONNREFUSED / -EHOSTUNREACH etc. for a store that does
 * not answer).  On error *s is closed; storage_error() says why. */
int storage_open(const char *target, const struct storage_opts *opts,
		 struct storage *s);
/*
 * The driver and target named by a backend's params node: "nbd://..."
 * and "nbd+unix://..." (any "nbd" URI scheme) are nbd; "qcow2:PATH" is
 * qcow2 and "raw:PATH" raw (libxl's FORMAT:PATH for qdisk); "rbd:SPEC" is
 * rbd (QEMU's spelling); anything else is a raw path.  *target points
 * into params.
 */
void storage_parse_params(const char *params, char driver[STORAGE_DRIVER_MAX],
			  const char **target);

/* Idempotent: safe on a closed, failed or all-zero storage. */
void storage_close(struct storage *s);

static inline bool storage_is_open(const struct storage *s)
{
	return s->drv != NULL;
}

/* A one-line reason for the last failed storage_open() on this thread,
 * when the driver knows more than the errno ("" when not):
 * "nbd: nbd://h/x: ...", "qcow2: qemu-storage-daemon exited: ...". */
const char *storage_error(void);

/* Queue side, on the queue thread.  depth: requests in flight at most. */
int storage_queue_open(const struct storage *s, unsigned int index, unsigned int depth,
		       const struct storage_loop *loop, struct storage_queue **q);
void storage_queue_close(const struct storage *s, struct storage_queue *q);
/* STORAGE_QUEUED, 0 (done now, successfully) or -errno (failed now). */
int storage_submit(const struct storage *s, struct storage_queue *q,
		   const struct storage_req *r);
/* The loop took what it could: serve what submit() deferred (above). */
void storage_queue_commit(const struct storage *s, struct storage_queue *q);
int storage_queue_poll(const struct storage *s, struct storage_queue *q,
		       short *events);
void storage_queue_ready(const struct storage *s, struct storage_queue *q,
			 short revents);
void storage_queue_tick(const struct storage *s, struct storage_queue *q,
			uint64_t now_ns);
bool storage_queue_has_tick(const struct storage *s);

/* Control thread: the driver's watch (see struct storage_driver); -1 /
 * 0 for drivers without. */
int storage_watch_fd(const struct storage *s);
int storage_watch(struct storage *s);

/*
 * Online resize, queue 0's thread: what the store measures now, rounded
 * down to the logical block (*bytes), or -EOPNOTSUPP for a driver that
 * cannot tell (nbd, qcow2).
 */
int storage_probe_size(const struct storage *s, uint64_t *bytes);
/* Take a larger size (never a smaller one: -EINVAL); the queue threads
 * see it at their next batch (storage_size). */
int storage_grow(struct storage *s, uint64_t bytes);
/* Any thread: the current size in bytes. */
static inline uint64_t storage_size(const struct storage *s)
{
	return __atomic_load_n(&s->size, __ATOMIC_ACQUIRE);
}

/* For drivers: record the reason of a failing open (printf style). */
void storage_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The drivers (one file each). */
extern const struct storage_driver storage_raw_driver;
extern const struct storage_driver storage_nbd_driver;
extern const struct storage_driver storage_qcow2_driver;
extern const struct storage_driver storage_rbd_driver;

/* nbd.c, for qcow2.c: open an NBD URI as the nbd driver, with priv owned
 * by the caller's driver afterwards (storage_nbd_close to release). */
int storage_nbd_open(struct storage *s, const char *uri, const struct storage_opts *o);
void storage_nbd_close(struct storage *s);
/* Any thread: the store is gone for good; the queues fail what they hold
 * and whatever comes, at their next tick. */
void storage_nbd_lost(void *nbd_priv);
/* The nbd driver's queue side, which qcow2 serves its queues with. */
int nbdq_open(const struct storage *s, unsigned int index, unsigned int depth,
	      const struct storage_loop *loop, struct storage_queue **q);
void nbdq_close(struct storage_queue *q);
int nbdq_submit(struct storage_queue *q, const struct storage_req *r);
int nbdq_poll(struct storage_queue *q, short *events);
void nbdq_ready(struct storage_queue *q, short revents);
void nbdq_tick(struct storage_queue *q, uint64_t now_ns);

/* raw.c: fallocate() mode that discards a file range. */
#define STORAGE_PUNCH_MODE (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)

/* raw.c: synchronous discard of [off, off + len) bytes on a block device
 * (BLKSECDISCARD when secure); -EOPNOTSUPP for files. */
int storage_discard(const struct storage *s, uint64_t off, uint64_t len,
		    bool secure);

#endif
