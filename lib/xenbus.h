/* SPDX-License-Identifier: MIT */
/*
 * xenbus helpers on libxenstore: typed reads and writes, transactions that
 * retry on EAGAIN, watch waits, the XenbusState machine and `error` nodes.
 *
 * They work the same against the real xenstored (on a Xen host) and
 * against xbd-xenstored (the local platform): the only difference is the
 * socket xbd_xs_open() connects to.
 *
 * Conventions for every call:
 *   - returns 0 (or a documented non-negative value) or -errno, with the
 *     errno libxenstore reported (ENOENT, EACCES, EAGAIN, ...);
 *   - nodes are named by (dir, node): the path is "dir/node", or dir alone
 *     when node is NULL or "" (as Linux xenbus_read(t, dir, node));
 *   - t is a transaction from xbd_xs_transaction() or XBT_NULL;
 *   - values read are copied once into caller memory, then validated;
 *   - nothing logs, except xbd_xenbus_dev_error()/_fatal() which say so.
 * A handle may be shared between threads (libxenstore serialises requests);
 * xbd_xs_wait() consumes watch events, so only one thread may wait on a
 * handle at a time.
 */
#ifndef XBD_XENBUS_H
#define XBD_XENBUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xenstore.h>
#include <xen/io/xenbus.h>

/* Retries of a transaction that keeps failing with EAGAIN (libxl retries
 * without bound; test-xenstore flags 100 as pathological). */
#define XBD_XS_TXN_RETRIES 64

/* Longest path a helper builds (XENSTORE_ABS_PATH_MAX). */
#define XBD_XS_PATH_MAX 3072

/*
 * Connect to xenstored.  socket_path: the daemon's Unix socket (e.g.
 * "$XBD_RUNDIR/xenstored.sock"), or NULL for libxenstore's default (the
 * real xenstored, or $XENSTORED_PATH).  A non-NULL path is exported as
 * XENSTORED_PATH, so call this before starting threads.
 */
int xbd_xs_open(const char *socket_path, struct xs_handle **out);
/* Form "<rundir>/xenstored.sock"; rundir NULL means $XBD_RUNDIR or
 * /run/xbd.  -ENAMETOOLONG if it does not fit in len. */
int xbd_xs_local_socket(const char *rundir, char *buf, size_t len);

/* "dir/node" (or dir) into buf; -ENAMETOOLONG if it does not fit. */
int xbd_xs_path(char *buf, size_t len, const char *dir, const char *node);

/* ---- reads -------------------------------------------------------- */

/*
 * Read a decimal unsigned number in [min, max].  The value must be digits
 * only ("+1", " 1", "1x", "" and hex are -EINVAL); -ERANGE outside the
 * bounds; -ENOENT if the node is missing.
 */
int xbd_xs_read_u64(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, uint64_t min, uint64_t max, uint64_t *out);
int xbd_xs_read_uint(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		     const char *node, unsigned int min, unsigned int max,
		     unsigned int *out);
/* Signed decimal ("-5" allowed) in [min, max]; same errors. */
int xbd_xs_read_int(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, long long min, long long max,
		    long long *out);
/*
 * Read a string of at most maxlen bytes into a new malloc'd buffer (*out,
 * NUL-terminated; free() it).  -E2BIG if longer, -EINVAL if it contains a
 * NUL byte, -ENOENT if missing.
 */
int xbd_xs_read_str(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, size_t maxlen, char **out);
/* As xbd_xs_read_str into buf[len] (maxlen = len - 1). */
int xbd_xs_read_buf(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, char *buf, size_t len);
/* 1 if the node exists, 0 if not, -errno on other errors. */
int xbd_xs_exists(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		  const char *node);
/* The children of a node: *out is a malloc'd array of *n names (one free()),
 * or NULL with *n = 0 when it has none.  -ENOENT if missing. */
int xbd_xs_directory(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		     const char *node, char ***out, unsigned int *n);

/* ---- writes ------------------------------------------------------- */

int xbd_xs_write(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		 const char *node, const char *value);
int xbd_xs_printf(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		  const char *node, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Remove a subtree; a node already gone is not an error. */
int xbd_xs_rm(struct xs_handle *xs, xs_transaction_t t, const char *dir,
	      const char *node);
/* mkdir, then set perms (owner first, as xs_set_permissions). */
int xbd_xs_mkdir_perms(struct xs_handle *xs, xs_transaction_t t,
		       const char *path, const struct xs_permissions *perms,
		       unsigned int n);
int xbd_xs_set_perms(struct xs_handle *xs, xs_transaction_t t,
		     const char *path, const struct xs_permissions *perms,
		     unsigned int n);

/* ---- transactions ------------------------------------------------- */

/*
 * fn runs inside a transaction: it returns >= 0 to commit (the value is
 * returned by xbd_xs_transaction), -EAGAIN to abort and run again, or any
 * other -errno to abort and fail with it.  fn must be safe to run several
 * times (keep side effects out of it, or reset them at its start).  A
 * commit that fails with EAGAIN runs fn again, at most XBD_XS_TXN_RETRIES
 * times in all; then -EAGAIN.
 */
typedef int (*xbd_xs_txn_fn)(struct xs_handle *xs, xs_transaction_t t, void *arg);
int xbd_xs_transaction(struct xs_handle *xs, xbd_xs_txn_fn fn, void *arg);

/* ---- watches ------------------------------------------------------ */

int xbd_xs_watch(struct xs_handle *xs, const char *path, const char *token);
/* Removing a watch that is not there: -ENOENT. */
int xbd_xs_unwatch(struct xs_handle *xs, const char *path, const char *token);
/* The fd to poll() for watch events (xs_fileno). */
int xbd_xs_watch_fd(struct xs_handle *xs);
/*
 * Take one pending watch event without blocking: returns 1 and copies the
 * path and token (truncated to the buffers' sizes, NUL-terminated), 0 if
 * none is pending, -errno on a broken connection.
 */
int xbd_xs_next_event(struct xs_handle *xs, char *path, size_t plen,
		      char *token, size_t tlen);

/*
 * Wait until cond() says done: watch path with a private token, call cond
 * once at once and again after each event on that watch, up to timeout_ms
 * (< 0: forever).  cond returns 1 (done), 0 (keep waiting) or -errno
 * (stop).  Returns 0, -ETIMEDOUT, or cond's error.  Events for other
 * tokens that arrive meanwhile are dropped.
 */
typedef int (*xbd_xs_cond_fn)(struct xs_handle *xs, void *arg);
int xbd_xs_wait(struct xs_handle *xs, const char *path, int timeout_ms,
		xbd_xs_cond_fn cond, void *arg);

/* ---- XenbusState ---------------------------------------------------- */

#define XBD_XENBUS_STATE_MAX XenbusStateReconfigured

/* "Unknown", "Initialising", "InitWait", "Initialised", "Connected",
 * "Closing", "Closed", "Reconfiguring", "Reconfigured"; "Invalid" else. */
const char *xbd_xenbus_state_name(enum xenbus_state s);
/*
 * Read dir/state.  A missing node reads as XenbusStateUnknown (as Linux
 * xenbus_read_driver_state); a value that is not 0..8: -EINVAL.
 */
int xbd_xenbus_read_state(struct xs_handle *xs, xs_transaction_t t,
			  const char *dir, enum xenbus_state *out);
/*
 * Switch dir/state to s in a transaction, like Linux xenbus_switch_state:
 * no write when the state already is s, and -ENOENT (nothing created)
 * when dir/state has disappeared, i.e. the device was removed.
 */
int xbd_xenbus_set_state(struct xs_handle *xs, const char *dir,
			 enum xenbus_state s);
/* Wait up to timeout_ms for dir/state to be one of the states in mask
 * (bit 1 << state).  *last (may be NULL) receives the last state seen.
 * Returns 0 or -ETIMEDOUT (or a read error). */
int xbd_xenbus_wait_state(struct xs_handle *xs, const char *dir,
			  unsigned int mask, int timeout_ms,
			  enum xenbus_state *last);

/* ---- errors --------------------------------------------------------- */

/*
 * Report a device error, as Linux xenbus_dev_error: the message
 * "<errno> <text>" (errno positive, e.g. "22 bad ring-page-order 9") is
 * written to
 *   - <home>/error/<devpath relative to home>/error, Linux's node, where
 *     home is the /local/domain/<N> devpath lies under (or the caller's
 *     home, when devpath is relative);
 *   - <devpath>/error, the node the xbd design adds under the device.
 * err is a negative errno.  Logs the message at error level.  Returns 0 or
 * the first write's -errno.
 */
int xbd_xenbus_dev_error(struct xs_handle *xs, const char *devpath, int err,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* xbd_xenbus_dev_error(), then state Closing (xenbus_dev_fatal). */
int xbd_xenbus_dev_fatal(struct xs_handle *xs, const char *devpath, int err,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Remove both error nodes of a device (before a reconnect). */
int xbd_xenbus_clear_error(struct xs_handle *xs, const char *devpath);
/* Where Linux's error node of devpath lives ("<home>/error/<rel>"). */
int xbd_xenbus_error_path(const char *devpath, char *buf, size_t len);

#endif
