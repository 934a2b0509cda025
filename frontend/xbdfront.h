/* SPDX-License-Identifier: MIT */
/*
 * libxbdfront: the blkif frontend a guest process links.  This header is
 * the library's whole interface: xbd-blkfront, the fio engine and
 * xbdfront-io use nothing else of it.
 *
 * A device (struct xbdfront_dev) is one virtual disk with 1..N queues.
 * Each queue is one channel: a blkif ring with its own event channel,
 * request table, granted pages and lock; queues share nothing, so one
 * thread per queue scales.
 *
 * I/O model (as io_uring's):
 *   - A request is a descriptor (struct xbdfront_sqe: operation, byte
 *     offset and length, the data as an iovec, user data, and an optional
 *     completion callback).  xbdfront_submit() queues an array of them on
 *     a queue's ring, unpublished; xbdfront_commit() publishes everything
 *     queued with one index store and at most one notification.
 *   - Completions: xbdfront_reap() takes the backend's responses off the
 *     ring and hands back up to n completion entries at once (struct
 *     xbdfront_cqe: user data, result); descriptors that named a callback
 *     are completed by calling it instead, in the thread that reaps,
 *     without any library lock held (it may submit again).
 *     xbdfront_wait() blocks until there is something to reap: it polls
 *     the ring for a short, bounded, adaptive time while requests are in
 *     flight (xbdfront_opts.poll_duration_us), then sleeps on the queue's
 *     event channel; an idle queue never spins.
 *   - Zero copy: buffers from xbdfront_buf_alloc() are memory granted to
 *     the backend; a read or write whose iovec lies in them, each piece
 *     aligned to the logical sector size, is done in place.  Any other
 *     memory is bounced through pages granted for that purpose (the
 *     application's own memory is never granted).
 *   - Large I/O is split to the negotiated segment limits (11 per
 *     request, or the indirect-descriptor limit).
 *   - Offsets and lengths are bytes and must be multiples of the logical
 *     sector size (xbdfront_info.sector_size).
 *   - Synchronous helpers (xbdfront_pread ...) submit on the calling
 *     thread's queue and drive it until done.
 * No memory is allocated per request in steady state: descriptors and
 * bounce pages come from per-queue free lists.  When they run out a
 * request waits for them (it does not fail).
 * Thread safety: every call may be made from any thread; calls on one
 * queue serialise on its lock, and no data is copied under it.
 * xbdfront_close() must not race with other calls on the device.  I/O
 * failed by a detach or a broken backend completes on the thread that
 * noticed it, which may be the domain's monitor thread: a callback must
 * not open or close devices or domains.
 *
 * Errors: 0 or a negative errno.  A backend that breaks the protocol
 * (bad response id, operation or index) shuts the device down: every
 * pending I/O completes with -EIO and later calls fail with -EIO; the
 * reason is in xbdfront_info.error.  Nothing the backend writes reaches
 * the application's buffers unless the response was valid and OKAY.
 *
 * Opening: a domain handle (xbdfront_domain_open) claims the domain on
 * the platform, connects to its xenstore and starts the domain's monitor
 * thread; xbdfront_open_in(domain, vdev) negotiates one disk with its
 * backend and returns a connected device, which the monitor then follows
 * (resize, restart with re-issue of in-flight I/O, detach).  Any number
 * of devices share one domain handle.  xbdfront_open(domid, vdev) does
 * both for a process that uses a single disk.
 */
#ifndef XBDFRONT_H
#define XBDFRONT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

enum xbdfront_abi {
	XBDFRONT_ABI_NATIVE,          /* x86_64-abi on this build */
	XBDFRONT_ABI_X86_64,
	XBDFRONT_ABI_X86_32,          /* 108-byte requests, 12-byte responses */
};

/* The most queues a disk has: a larger max_queues is capped to it. */
#define XBDFRONT_MAX_QUEUES 16u

/* What the frontend asks for; the backend's limits cap each value. */
struct xbdfront_opts {
	enum xbdfront_abi abi;
	unsigned int max_queues;          /* default 4 (Linux blkfront), at most
					     XBDFRONT_MAX_QUEUES */
	unsigned int max_ring_page_order; /* default 0 (Linux), at most 5 */
	unsigned int max_indirect_segs;   /* default 32 (Linux); 0 = direct only */
	bool persistent;                  /* feature-persistent, default true */
	unsigned int pool_pages;          /* granted pages per queue, default 4096 */
	unsigned int connect_timeout_ms;  /* default 10000 */
	const char *platform;             /* "auto" (default), "local" or "xen" */
	const char *rundir;               /* local platform dir; NULL: $XBD_RUNDIR */
	bool no_recover;                  /* Linux-like: a backend that closes (not a
					   * detach) closes the disk, no reconnect */
	unsigned int poll_duration_us;    /* xbdfront_wait spins at most this long on a
					   * ring with requests in flight before it
					   * sleeps; 0: never (default
					   * XBDFRONT_POLL_DURATION_US_DEFAULT) */
	/* Called when the toolstack detaches the disk (the backend Closing
	 * with online=0), before its pending I/O fails and the frontend
	 * says Closing: the ring still works, so the caller writes back
	 * what it caches of the disk and flushes it (xbd-blkfront fsyncs
	 * the disk's file), as Linux writes back a block device before
	 * letting it go.  Runs on the domain's monitor thread (or on the
	 * thread in xbdfront_open_in, for a disk detached while it opens),
	 * may do I/O on the device from other threads and wait for it, and
	 * must not open or close devices.  NULL: none. */
	void (*detaching)(void *arg);
	void *detaching_arg;
	/* Called after an online resize (the backend announced a new
	 * `sectors` while connected, as Linux xen-blkfront's
	 * blkfront_connect takes it): the device's capacity is sectors
	 * (512-byte units) from now on, as xbdfront_get_info reports.
	 * Runs on the domain's monitor thread; must not open or close
	 * devices nor wait for I/O on this device.  NULL: none. */
	void (*resized)(void *arg, uint64_t sectors);
	void *resized_arg;
};

#define XBDFRONT_POLL_DURATION_US_DEFAULT 50
#define XBDFRONT_POLL_DURATION_US_MAX 1000

void xbdfront_opts_default(struct xbdfront_opts *o);

struct xbdfront_info {
	uint64_t sectors;                 /* capacity, 512-byte units */
	unsigned int sector_size;         /* logical block size */
	unsigned int physical_sector_size;
	unsigned int nr_queues;
	unsigned int ring_page_order;
	unsigned int max_indirect_segs;   /* 0 when direct only */
	enum xbdfront_abi abi;
	bool persistent, readonly, flush, barrier, discard, discard_secure;
	unsigned int resets;              /* times fresh rings were negotiated (recovery) */
	int error;                        /* 0, or the -errno the device died with */
	char reason[160];                 /* why it died */
};

enum xbdfront_op {
	XBDFRONT_READ,
	XBDFRONT_WRITE,
	XBDFRONT_FLUSH,           /* write cache flush (barrier on barrier-only backends) */
	XBDFRONT_BARRIER,
	XBDFRONT_DISCARD,
	XBDFRONT_SECURE_DISCARD,
};

struct xbdfront_dev;
struct xbdfront_domain;

/*
 * Become domain domid: open the platform (opts->platform, opts->rundir;
 * the other fields are not used), claim the domain, connect to its
 * xenstore and start the monitor thread that follows the backends of its
 * devices.  Call before starting threads that use libxenstore (the local
 * platform's xenstore socket is chosen through XENSTORED_PATH).  The
 * claim, the xenstore connection and the monitor are shared by every
 * device opened in the handle; each queue keeps its own event-channel
 * handle (one pollable fd per queue).  The handle lives until
 * xbdfront_domain_close() and the close of its last device, whichever
 * comes last.  Errors: -EINVAL (domid, opts), -ENOENT (no such domain),
 * -EBUSY (another process is the domain), platform errors.
 */
int xbdfront_domain_open(unsigned int domid, const struct xbdfront_opts *opts,
			 struct xbdfront_domain **out);
/* Drop the caller's reference; devices still open keep the domain (and
 * the claim) until they are closed.  Safe with NULL. */
void xbdfront_domain_close(struct xbdfront_domain *d);
unsigned int xbdfront_domain_id(const struct xbdfront_domain *d);

/*
 * The domain named name, on the platform of opts (platform, rundir): a
 * decimal id, or the name a local domain was created with.  On the xen
 * platform: the domain this process runs in (name NULL, or its own name),
 * or the id as given.  *claimer (may be NULL) gets the pid of the process
 * that is the domain now (local platform), 0 for none.  0, -ENOENT (no
 * such domain), -EINVAL (name NULL on the local platform) or -errno.
 */
int xbdfront_domain_resolve(const char *name, const struct xbdfront_opts *opts,
			    unsigned int *domid, int *claimer);

/*
 * The capacity of disk vdev of domain domid as its backend publishes it
 * (`sectors`, 512-byte units), read through the domain's xenstore without
 * claiming the domain or opening the disk.  -ENOENT while the backend has
 * not published it (not yet connected).
 */
int xbdfront_peek_sectors(unsigned int domid, const char *vdev,
			  const struct xbdfront_opts *opts, uint64_t *sectors);

/*
 * Open virtual disk vdev of the domain d: negotiate, wait for the backend
 * to connect.  opts->platform and opts->rundir are the domain's and are
 * not used here.  May be called from any thread, concurrently for
 * different disks.  Errors: -EINVAL (vdev, opts), -ENOENT (no such device
 * in xenstore), -EBUSY (this disk is already open in d), -ETIMEDOUT
 * (backend did not connect), -ENODEV (backend closing, or refusing the
 * disk), -EPROTO (backend values out of range); failures after the
 * handshake started are also written to the device's `error` node, with
 * state Closing, then Closed once the backend let go (as Linux blkfront).
 */
int xbdfront_open_in(struct xbdfront_domain *d, const char *vdev,
		     const struct xbdfront_opts *opts, struct xbdfront_dev **out);

/*
 * Open virtual disk vdev ("xvda", "d0p1", "51712"...) of domain domid in a
 * domain handle of its own: xbdfront_domain_open + xbdfront_open_in +
 * xbdfront_domain_close, so the device holds the claim until it is
 * closed.  A process using several disks of one domain opens the domain
 * once and uses xbdfront_open_in (a second xbdfront_open of the same
 * domain fails with -EBUSY: the claim is taken).  Errors: those of both.
 */
int xbdfront_open(unsigned int domid, const char *vdev, const struct xbdfront_opts *opts,
		  struct xbdfront_dev **out);

/*
 * xbdfront_open_in() and xbdfront_open() that also say why they failed:
 * on an error, why (len bytes, always NUL-terminated; may be NULL) gets
 * the reason when there is more to say than the errno: the backend's own
 * error text when it refused the disk ("backend: opening /srv/d.img (No
 * such file or directory)", from its `error` node), else the message the
 * frontend wrote to its own `error` node ("backend did not connect within
 * 10000 ms (state InitWait)").  "" for bad arguments and a missing disk.
 */
int xbdfront_open_in_why(struct xbdfront_domain *d, const char *vdev,
			 const struct xbdfront_opts *opts, struct xbdfront_dev **out,
			 char *why, size_t len);
int xbdfront_open_why(unsigned int domid, const char *vdev, const struct xbdfront_opts *opts,
		      struct xbdfront_dev **out, char *why, size_t len);

struct xbdfront_cqe {
	uint64_t user_data;               /* the descriptor's */
	int res;                          /* 0 or -errno */
};

/* A request descriptor.  Zero it, then fill what the operation needs. */
struct xbdfront_sqe {
	uint8_t op;                       /* enum xbdfront_op */
	uint8_t flags;                    /* none defined yet: 0 */
	uint16_t iovcnt;                  /* reads and writes: pieces of iov */
	uint64_t offset;                  /* bytes (0 for flush/barrier) */
	uint64_t len;                     /* bytes: the sum of iov for reads and
					   * writes, the range for discards, 0
					   * for flush/barrier */
	const struct iovec *iov;          /* the data; the array is read at
					   * submit, the buffers must stay
					   * valid until completion */
	uint64_t user_data;               /* handed back in the completion */
	/* NULL: the completion is an entry for xbdfront_reap(); else it is
	 * this call, in the thread that reaps (or fails) it. */
	void (*done)(const struct xbdfront_cqe *cqe);
};

int xbdfront_get_info(struct xbdfront_dev *dev, struct xbdfront_info *out);
unsigned int xbdfront_nr_queues(const struct xbdfront_dev *dev);

/*
 * Queue n descriptors on queue q (0..nr_queues-1), in order, unpublished
 * (xbdfront_commit publishes them; so does a descriptor shortage, which
 * publishes what is queued before it waits).  A write's data may have
 * been read when this returns.  Returns how many were taken (each
 * completes exactly once), or, when the first one is refused, -errno:
 * -EINVAL (bad descriptor, misaligned, beyond the disk), -EROFS,
 * -EOPNOTSUPP, -E2BIG (larger than the queue's pool), -ENOTCONN, -EBUSY
 * (every descriptor is a completion not yet reaped: reap first),
 * -EIO/-ENODEV when the device is dead.  A count below n means sqe[count]
 * was refused: submit it again to learn why.
 */
int xbdfront_submit(struct xbdfront_dev *dev, unsigned int q, const struct xbdfront_sqe *sqe,
		    unsigned int n);
/* Publish what was queued on q: one index store, at most one
 * notification.  0, or the -errno the device died with. */
int xbdfront_commit(struct xbdfront_dev *dev, unsigned int q);
/*
 * Take the responses waiting on queue q's ring (no system call, unless
 * xbdfront_wait saw an event: then the event channel is unmasked once
 * the ring is drained), issue what waited for room, run the callbacks of
 * what completed and hand back up to n completion entries.  Returns how
 * many entries are in cqe (n may be 0 to run callbacks only), or, when
 * there is none to give and the device is dead, its -errno.
 */
int xbdfront_reap(struct xbdfront_dev *dev, unsigned int q, struct xbdfront_cqe *cqe,
		  unsigned int n);
/*
 * Block until queue q has something to reap, at most timeout_ms (-1:
 * no limit): while requests are in flight it polls the ring (see
 * poll_duration_us), then sleeps on the event channel, the queue's own
 * wake-up (a failure, a freed descriptor) and extra_fd (when >= 0, for
 * the caller's own wake-ups, POLLIN).  Returns 1 (reap now), 2 (extra_fd
 * is readable; it is not read), 0 (timeout) or -errno.  After 1, call
 * xbdfront_reap: an event seen here is acknowledged there (late EOI).
 */
int xbdfront_wait(struct xbdfront_dev *dev, unsigned int q, int timeout_ms, int extra_fd);
/* What queue q did so far (for tests, benchmarks and tools). */
struct xbdfront_queue_stats {
	uint64_t submitted, completed, errors;
	uint64_t commits;                 /* publishes that moved req_prod */
	uint64_t notifies;                /* of them, those that signalled the backend */
	uint64_t events;                  /* signals taken from the backend */
	uint64_t polls, poll_hits;        /* xbdfront_wait spins, and those that found one */
	uint64_t waits;                   /* submissions that waited for a descriptor */
};
int xbdfront_queue_stats(struct xbdfront_dev *dev, unsigned int q,
			 struct xbdfront_queue_stats *out);

/* The fd to poll (POLLIN) for queue q, for callers with their own
 * event loop; call xbdfront_process() when it is readable. */
int xbdfront_queue_fd(struct xbdfront_dev *dev, unsigned int q);
/* After POLLIN on xbdfront_queue_fd: take the event and reap, running
 * callbacks (entries stay queued for xbdfront_reap).  Returns the
 * completions delivered, or -errno once the device is dead. */
int xbdfront_process(struct xbdfront_dev *dev, unsigned int q);

/*
 * Zero-copy buffers: len bytes (rounded up to pages) of memory granted to
 * the backend, page aligned.  Reads and writes whose iovec lies entirely in
 * such buffers, each piece aligned to the logical sector size, use them
 * in place instead of bouncing (other I/O is still bounced); finding
 * them takes no lock.  The backend can read and write this memory at any
 * time: keep nothing else in it.  At most XBDFRONT_MAX_BUFS per device.
 * Returns NULL with errno set (ENOSPC beyond that).  Free only with no
 * I/O pending on it; xbdfront_buf_free returns -EBUSY (and keeps the
 * buffer) while the backend still maps it, -EINVAL for an address that
 * is not a buffer.
 */
#define XBDFRONT_MAX_BUFS 64
void *xbdfront_buf_alloc(struct xbdfront_dev *dev, size_t len);
int xbdfront_buf_free(struct xbdfront_dev *dev, void *buf);

/* Synchronous helpers: whole-length transfer or -errno. */
ssize_t xbdfront_preadv(struct xbdfront_dev *dev, const struct iovec *iov, int iovcnt,
			uint64_t offset);
ssize_t xbdfront_pwritev(struct xbdfront_dev *dev, const struct iovec *iov, int iovcnt,
			 uint64_t offset);
ssize_t xbdfront_pread(struct xbdfront_dev *dev, void *buf, size_t len, uint64_t offset);
ssize_t xbdfront_pwrite(struct xbdfront_dev *dev, const void *buf, size_t len,
			uint64_t offset);
int xbdfront_flush(struct xbdfront_dev *dev);
int xbdfront_discard(struct xbdfront_dev *dev, uint64_t offset, uint64_t len, bool secure);

/* Fail what is pending with -ENODEV, tell the backend (Closing, then
 * Closed once it let go of the rings), free everything and drop the
 * device's reference to its domain.  Safe with NULL. */
void xbdfront_close(struct xbdfront_dev *dev);

#endif
