/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront's FUSE transport over io_uring (FUSE_OVER_IO_URING), with
 * /dev/fuse as the fallback.  See fuse_uring.c.
 */
#ifndef XBD_BLKFRONT_FUSE_URING_H
#define XBD_BLKFRONT_FUSE_URING_H

#include <stdbool.h>

struct fuse_session;

/* --fuse-uring: off (always /dev/fuse), auto (io_uring when the kernel
 * offers it, else /dev/fuse), on (io_uring or fail). */
enum fuse_uring_mode { FUSE_URING_OFF, FUSE_URING_AUTO, FUSE_URING_ON };

/* "off", "auto" or "on": 0, or -EINVAL. */
int fuse_uring_mode_parse(const char *s, enum fuse_uring_mode *mode);

/* Install the transport on se, mounted and not yet served: libfuse's
 * reads and writes of /dev/fuse go through it, the INIT answer asks for
 * io_uring (mode permitting) and the ring threads start after it.
 * One session per process.  0 or -errno (logged). */
int fuse_uring_attach(struct fuse_session *se, enum fuse_uring_mode mode);

/* A batch of answers on the calling thread: fuse_uring_batch(false)
 * begins it, fuse_uring_batch(true) ends it (they nest); the answers
 * given in between over the rings are committed together at the end
 * (one io_uring_enter per ring).  Outside a batch each answer is
 * committed at once.  Any thread; a no-op without rings. */
void fuse_uring_batch(bool end);

/* After the loop ended and the session was unmounted: wait (bounded)
 * for the ring threads to see the kernel end their entries, then stop
 * them.  Answers still in flight go to /dev/fuse, where they fail. */
void fuse_uring_stop(void);

/* Once nothing answers any more (after fuse_uring_stop and the drain):
 * free the rings and buffers; logs how many requests the rings served. */
void fuse_uring_release(void);

/* The loop was ended at INIT: --fuse-uring=on and io_uring could not be
 * used, or the kernel took io_uring and the rings did not start. */
bool fuse_uring_failed(void);

#endif
