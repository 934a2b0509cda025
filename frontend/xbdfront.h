/* SPDX-License-Identifier: MIT */
/*
 * libxbdfront: the blkif frontend a guest process links.
 *
 * A device (struct xbdfront_dev) is one virtual disk with 1..N queues.
 * Each queue is a blkif ring with its own event channel, grant pool and
 * lock; queues share nothing, so one thread per queue scales.
 *
 * I/O model
 *   - Asynchronous: xbdfront_submit() with a callback, or
 *     xbdfront_submit_cq() whose completion lands in the queue's completion
 *     queue (xbdfront_reap()).  Completions are produced by
 *     xbdfront_process(), which the application calls when the queue's fd
 *     (xbdfront_queue_fd(), poll for POLLIN) is readable; callbacks run in
 *     that thread, without any library lock held, and may submit again.
 *     I/O failed by a detach or a broken backend completes on the thread
 *     that noticed it, which may be the domain's monitor thread: a
 *     callback must not open or close devices or domains.
 *   - Synchronous: xbdfront_pread/pwrite/preadv/pwritev/flush/discard
 *     submit on the calling thread's queue and drive it until done.
 *   - Scatter-gather: any iovec; the data is bounced through pages granted
 *     to the backend (the application's memory is never granted).  Large
 *     I/O is split to the negotiated segment limits (11 per request, or
 *     the indirect-descriptor limit).
 *   - Offsets and lengths are bytes and must be multiples of the logical
 *     sector size (xbdfront_info.sector_size).
 * Thread safety: every call may be made from any thread; calls on one
 * queue serialise on its lock.  xbdfront_close() must not race with other
 * calls on the device.
 *
 * Errors: 0 or a negative errno.  A backend that breaks the protocol
 * (bad response id, operation or count) shuts the device down: every
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

/* What the frontend asks for; the backend's limits cap each value. */
struct xbdfront_opts {
	enum xbdfront_abi abi;
	unsigned int max_queues;          /* default 4 (Linux blkfront) */
	unsigned int max_ring_page_order; /* default 0 (Linux), at most 5 */
	unsigned int max_indirect_segs;   /* default 32 (Linux); 0 = direct only */
	bool persistent;                  /* feature-persistent, default true */
	unsigned int pool_pages;          /* granted pages per queue, default 4096 */
	unsigned int connect_timeout_ms;  /* default 10000 */
	const char *platform;             /* "auto" (default), "local" or "xen" */
	const char *rundir;               /* local platform dir; NULL: $XBD_RUNDIR */
	bool no_recover;                  /* Linux-like: a backend that closes (not a
					   * detach) closes the disk, no reconnect */
};

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

typedef void (*xbdfront_cb)(void *arg, int status);

struct xbdfront_cqe {
	uint64_t user_data;
	int status;                       /* 0 or -errno */
};

int xbdfront_get_info(struct xbdfront_dev *dev, struct xbdfront_info *out);
unsigned int xbdfront_nr_queues(const struct xbdfront_dev *dev);

/*
 * Submit on queue q (0..nr_queues-1).  len: bytes (0 for flush/barrier);
 * iov: the data of reads and writes (the array is copied; the buffers must
 * stay valid until completion; a write's data may be read after the call
 * returns).  Returns 0 when cb will be called exactly once, else -errno
 * (-EINVAL, -EROFS, -EOPNOTSUPP, -E2BIG above the pool, -EIO/-ENODEV when
 * the device is dead) and cb is never called.
 */
int xbdfront_submit(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op,
		    uint64_t offset, uint64_t len, const struct iovec *iov, int iovcnt,
		    xbdfront_cb cb, void *arg);
/* Same, with the completion going to queue q's completion queue. */
int xbdfront_submit_cq(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op,
		       uint64_t offset, uint64_t len, const struct iovec *iov, int iovcnt,
		       uint64_t user_data);
/* The fd to poll (POLLIN) for queue q. */
int xbdfront_queue_fd(struct xbdfront_dev *dev, unsigned int q);
/* Handle queue q's events; returns completions delivered or -errno. */
int xbdfront_process(struct xbdfront_dev *dev, unsigned int q);
/* Up to n completion-queue entries of queue q; returns how many. */
unsigned int xbdfront_reap(struct xbdfront_dev *dev, unsigned int q,
			   struct xbdfront_cqe *cqe, unsigned int n);

/*
 * Zero-copy buffers: len bytes (rounded up to pages) of memory granted to
 * the backend, page aligned.  Reads and writes whose iovec lies entirely in
 * such buffers, each piece aligned to the logical sector size, use them
 * directly instead of bouncing (other I/O is still bounced).  The backend
 * can read and write this memory at any time: keep nothing else in it.
 * Returns NULL with errno set.  Free only with no I/O pending on it;
 * xbdfront_buf_free returns -EBUSY (and keeps the buffer) while the backend
 * still maps it, -EINVAL for an address that is not a buffer.
 */
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
