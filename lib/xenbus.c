/* SPDX-License-Identifier: MIT */
/* xenbus helpers on libxenstore; see xenbus.h. */
#include "xenbus.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define DEFAULT_RUNDIR "/run/xbd"
#define MSG_MAX 1024     /* longest error message written (Linux: 1024) */

/* libxenstore reports failures through errno; never return 0 for one. */
static int xs_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

int xbd_xs_path(char *buf, size_t len, const char *dir, const char *node)
{
	int n;

	if (node && *node)
		n = snprintf(buf, len, "%s/%s", dir, node);
	else
		n = snprintf(buf, len, "%s", dir);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int xbd_xs_local_socket(const char *rundir, char *buf, size_t len)
{
	int n;

	if (!rundir)
		rundir = getenv("XBD_RUNDIR");
	if (!rundir || !*rundir)
		rundir = DEFAULT_RUNDIR;
	n = snprintf(buf, len, "%s/xenstored.sock", rundir);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int xbd_xs_open(const char *socket_path, struct xs_handle **out)
{
	struct xs_handle *xs;

	if (socket_path && setenv("XENSTORED_PATH", socket_path, 1) < 0)
		return -errno;
	xs = xs_open(0);
	if (!xs)
		return xs_errno();
	*out = xs;
	return 0;
}

/* ---- reads -------------------------------------------------------- */

/* Read dir/node into a fresh NUL-terminated buffer; *len without the NUL. */
static int read_raw(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, char **out, unsigned int *len)
{
	char path[XBD_XS_PATH_MAX];
	int rc = xbd_xs_path(path, sizeof(path), dir, node);

	if (rc)
		return rc;
	*out = xs_read(xs, t, path, len);
	return *out ? 0 : xs_errno();
}

int xbd_xs_read_str(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, size_t maxlen, char **out)
{
	unsigned int len;
	char *v;
	int rc = read_raw(xs, t, dir, node, &v, &len);

	if (rc)
		return rc;
	if (len > maxlen)
		rc = -E2BIG;
	else if (memchr(v, '\0', len))
		rc = -EINVAL;
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	return 0;
}

int xbd_xs_read_buf(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, char *buf, size_t len)
{
	char *v;
	int rc;

	if (len == 0)
		return -EINVAL;
	rc = xbd_xs_read_str(xs, t, dir, node, len - 1, &v);
	if (rc)
		return rc;
	memcpy(buf, v, strlen(v) + 1);
	free(v);
	return 0;
}

/* Digits only, optionally one leading '-' when allow_neg. */
static int parse_decimal(const char *s, bool allow_neg, bool *neg, uint64_t *mag)
{
	uint64_t v = 0;

	*neg = false;
	if (allow_neg && *s == '-') {
		*neg = true;
		s++;
	}
	if (*s == '\0')
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*mag = v;
	return 0;
}

/* A number is at most 20 digits and a sign; longer values are not one. */
#define NUM_MAX 24

static int read_number(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		       const char *node, bool allow_neg, bool *neg, uint64_t *mag)
{
	char buf[NUM_MAX];
	int rc = xbd_xs_read_buf(xs, t, dir, node, buf, sizeof(buf));

	if (rc == -E2BIG)
		return -EINVAL;
	if (rc)
		return rc;
	return parse_decimal(buf, allow_neg, neg, mag);
}

int xbd_xs_read_u64(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	bool neg;
	int rc = read_number(xs, t, dir, node, false, &neg, &v);

	if (rc)
		return rc;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int xbd_xs_read_uint(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		     const char *node, unsigned int min, unsigned int max,
		     unsigned int *out)
{
	uint64_t v;
	int rc = xbd_xs_read_u64(xs, t, dir, node, min, max, &v);

	if (rc == 0)
		*out = (unsigned int)v;
	return rc;
}

int xbd_xs_read_int(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		    const char *node, long long min, long long max,
		    long long *out)
{
	uint64_t mag;
	long long v;
	bool neg;
	int rc = read_number(xs, t, dir, node, true, &neg, &mag);

	if (rc)
		return rc;
	if (mag > (uint64_t)LLONG_MAX + (neg ? 1 : 0))
		return -ERANGE;
	if (neg)
		v = mag == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag;
	else
		v = (long long)mag;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int xbd_xs_exists(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		  const char *node)
{
	unsigned int len;
	char *v;
	int rc = read_raw(xs, t, dir, node, &v, &len);

	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	free(v);
	return 1;
}

int xbd_xs_directory(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		     const char *node, char ***out, unsigned int *n)
{
	char path[XBD_XS_PATH_MAX];
	char **list;
	int rc = xbd_xs_path(path, sizeof(path), dir, node);

	if (rc)
		return rc;
	list = xs_directory(xs, t, path, n);
	if (!list)
		return xs_errno();
	if (*n == 0) {
		free(list);
		list = NULL;
	}
	*out = list;
	return 0;
}

/* ---- writes ------------------------------------------------------- */

int xbd_xs_write(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		 const char *node, const char *value)
{
	char path[XBD_XS_PATH_MAX];
	int rc = xbd_xs_path(path, sizeof(path), dir, node);

	if (rc)
		return rc;
	return xs_write(xs, t, path, value, strlen(value)) ? 0 : xs_errno();
}

int xbd_xs_printf(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		  const char *node, const char *fmt, ...)
{
	va_list ap;
	char *value;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&value, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -ENOMEM;
	rc = xbd_xs_write(xs, t, dir, node, value);
	free(value);
	return rc;
}

int xbd_xs_rm(struct xs_handle *xs, xs_transaction_t t, const char *dir,
	      const char *node)
{
	char path[XBD_XS_PATH_MAX];
	int rc = xbd_xs_path(path, sizeof(path), dir, node);

	if (rc)
		return rc;
	if (xs_rm(xs, t, path))
		return 0;
	rc = xs_errno();
	return rc == -ENOENT ? 0 : rc;
}

int xbd_xs_set_perms(struct xs_handle *xs, xs_transaction_t t,
		     const char *path, const struct xs_permissions *perms,
		     unsigned int n)
{
	/* xs_set_permissions takes a non-const array it does not modify. */
	struct xs_permissions copy[8];

	if (n == 0 || n > sizeof(copy) / sizeof(copy[0]))
		return -EINVAL;
	memcpy(copy, perms, n * sizeof(*perms));
	return xs_set_permissions(xs, t, path, copy, n) ? 0 : xs_errno();
}

int xbd_xs_mkdir_perms(struct xs_handle *xs, xs_transaction_t t,
		       const char *path, const struct xs_permissions *perms,
		       unsigned int n)
{
	if (!xs_mkdir(xs, t, path))
		return xs_errno();
	return xbd_xs_set_perms(xs, t, path, perms, n);
}

/* ---- transactions ------------------------------------------------- */

int xbd_xs_transaction(struct xs_handle *xs, xbd_xs_txn_fn fn, void *arg)
{
	int rc = -EAGAIN;

	for (int i = 0; i < XBD_XS_TXN_RETRIES && rc == -EAGAIN; i++) {
		xs_transaction_t t = xs_transaction_start(xs);

		if (t == XBT_NULL)
			return xs_errno();
		rc = fn(xs, t, arg);
		if (rc < 0) {
			/* Abort; its own failure changes nothing for us. */
			xs_transaction_end(xs, t, true);
			continue;
		}
		if (!xs_transaction_end(xs, t, false)) {
			int err = xs_errno();
			if (err != -EAGAIN)
				return err;
			rc = -EAGAIN;
		}
	}
	return rc;
}

/* ---- watches ------------------------------------------------------ */

int xbd_xs_watch(struct xs_handle *xs, const char *path, const char *token)
{
	return xs_watch(xs, path, token) ? 0 : xs_errno();
}

int xbd_xs_unwatch(struct xs_handle *xs, const char *path, const char *token)
{
	return xs_unwatch(xs, path, token) ? 0 : xs_errno();
}

int xbd_xs_watch_fd(struct xs_handle *xs)
{
	int fd = xs_fileno(xs);

	return fd >= 0 ? fd : xs_errno();
}

static void copy_trunc(char *dst, size_t len, const char *src)
{
	if (len == 0)
		return;
	snprintf(dst, len, "%s", src);
}

int xbd_xs_next_event(struct xs_handle *xs, char *path, size_t plen,
		      char *token, size_t tlen)
{
	char **ev = xs_check_watch(xs);

	if (!ev) {
		int rc = xs_errno();
		return rc == -EAGAIN ? 0 : rc;
	}
	copy_trunc(path, plen, ev[XS_WATCH_PATH]);
	copy_trunc(token, tlen, ev[XS_WATCH_TOKEN]);
	free(ev);
	return 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Poll the watch fd until readable or the deadline (-1: none). */
static int wait_readable(int fd, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int timeout = -1, n;

	if (deadline >= 0) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		timeout = left > INT_MAX ? INT_MAX : (int)left;
	}
	n = poll(&pfd, 1, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

/* Drain pending events; 1 if one carried our token. */
static int drain_events(struct xs_handle *xs, const char *token)
{
	char path[XBD_XS_PATH_MAX], tok[64];
	int ours = 0, rc;

	while ((rc = xbd_xs_next_event(xs, path, sizeof(path), tok, sizeof(tok))) == 1)
		if (strcmp(tok, token) == 0)
			ours = 1;
	return rc < 0 ? rc : ours;
}

int xbd_xs_wait(struct xs_handle *xs, const char *path, int timeout_ms,
		xbd_xs_cond_fn cond, void *arg)
{
	static unsigned int seq;      /* unique tokens across waits */
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	char token[64];
	int fd, rc;

	snprintf(token, sizeof(token), "xbd-wait-%u-%p",
		 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED), (void *)&token);
	fd = xbd_xs_watch_fd(xs);
	if (fd < 0)
		return fd;
	rc = xbd_xs_watch(xs, path, token);
	if (rc)
		return rc;
	for (;;) {
		rc = cond(xs, arg);
		if (rc != 0)
			break;
		do {
			rc = wait_readable(fd, deadline);
			if (rc == 0)
				rc = drain_events(xs, token);
		} while (rc == 0);
		if (rc < 0)
			break;
	}
	xbd_xs_unwatch(xs, path, token);
	return rc < 0 ? rc : 0;
}

/* ---- XenbusState ---------------------------------------------------- */

const char *xbd_xenbus_state_name(enum xenbus_state s)
{
	static const char *const names[] = {
		[XenbusStateUnknown] = "Unknown",
		[XenbusStateInitialising] = "Initialising",
		[XenbusStateInitWait] = "InitWait",
		[XenbusStateInitialised] = "Initialised",
		[XenbusStateConnected] = "Connected",
		[XenbusStateClosing] = "Closing",
		[XenbusStateClosed] = "Closed",
		[XenbusStateReconfiguring] = "Reconfiguring",
		[XenbusStateReconfigured] = "Reconfigured",
	};

	if ((unsigned int)s >= sizeof(names) / sizeof(names[0]))
		return "Invalid";
	return names[s];
}

int xbd_xenbus_read_state(struct xs_handle *xs, xs_transaction_t t,
			  const char *dir, enum xenbus_state *out)
{
	unsigned int v;
	int rc = xbd_xs_read_uint(xs, t, dir, "state", 0, XBD_XENBUS_STATE_MAX, &v);

	if (rc == -ENOENT) {
		*out = XenbusStateUnknown;
		return 0;
	}
	if (rc == -ERANGE)
		rc = -EINVAL;
	if (rc == 0)
		*out = (enum xenbus_state)v;
	return rc;
}

struct set_state_arg {
	const char *dir;
	enum xenbus_state s;
};

static int set_state_txn(struct xs_handle *xs, xs_transaction_t t, void *p)
{
	const struct set_state_arg *a = p;
	unsigned int cur;
	int rc = xbd_xs_read_uint(xs, t, a->dir, "state", 0, UINT_MAX, &cur);

	if (rc == -EINVAL || rc == -ERANGE)
		cur = UINT_MAX;         /* garbage: overwrite it */
	else if (rc)
		return rc;              /* -ENOENT: device gone, create nothing */
	if (cur == (unsigned int)a->s)
		return 0;
	return xbd_xs_printf(xs, t, a->dir, "state", "%d", (int)a->s);
}

int xbd_xenbus_set_state(struct xs_handle *xs, const char *dir,
			 enum xenbus_state s)
{
	struct set_state_arg a = { dir, s };

	if ((unsigned int)s > XBD_XENBUS_STATE_MAX)
		return -EINVAL;
	return xbd_xs_transaction(xs, set_state_txn, &a);
}

struct wait_state_arg {
	const char *dir;
	unsigned int mask;
	enum xenbus_state last;
};

static int wait_state_cond(struct xs_handle *xs, void *p)
{
	struct wait_state_arg *a = p;
	enum xenbus_state s;
	int rc = xbd_xenbus_read_state(xs, XBT_NULL, a->dir, &s);

	if (rc == -EINVAL)
		return 0;               /* a peer's garbage: keep waiting */
	if (rc)
		return rc;
	a->last = s;
	return (a->mask >> s) & 1;
}

int xbd_xenbus_wait_state(struct xs_handle *xs, const char *dir,
			  unsigned int mask, int timeout_ms,
			  enum xenbus_state *last)
{
	char path[XBD_XS_PATH_MAX];
	struct wait_state_arg a = { dir, mask, XenbusStateUnknown };
	int rc = xbd_xs_path(path, sizeof(path), dir, "state");

	if (rc)
		return rc;
	rc = xbd_xs_wait(xs, path, timeout_ms, wait_state_cond, &a);
	if (last)
		*last = a.last;
	return rc;
}

/* ---- errors --------------------------------------------------------- */

int xbd_xenbus_error_path(const char *devpath, char *buf, size_t len)
{
	static const char prefix[] = "/local/domain/";
	const char *p = devpath;
	int n;

	if (devpath[0] != '/') {
		n = snprintf(buf, len, "error/%s", devpath);
	} else {
		if (strncmp(p, prefix, sizeof(prefix) - 1) != 0)
			return -EINVAL;
		p += sizeof(prefix) - 1;
		p += strspn(p, "0123456789");
		if (p == devpath + sizeof(prefix) - 1 || *p != '/' || p[1] == '\0')
			return -EINVAL;
		n = snprintf(buf, len, "%.*s/error%s", (int)(p - devpath),
			     devpath, p);
	}
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

static int dev_verror(struct xs_handle *xs, const char *devpath, int err,
		      const char *fmt, va_list ap)
{
	char msg[MSG_MAX], epath[XBD_XS_PATH_MAX];
	int n, rc, rc2;

	n = snprintf(msg, sizeof(msg), "%d ", -err);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	log_err("%s: %s", devpath, msg);
	rc = xbd_xenbus_error_path(devpath, epath, sizeof(epath));
	if (rc == 0)
		rc = xbd_xs_write(xs, XBT_NULL, epath, "error", msg);
	rc2 = xbd_xs_write(xs, XBT_NULL, devpath, "error", msg);
	return rc ? rc : rc2;
}

int xbd_xenbus_dev_error(struct xs_handle *xs, const char *devpath, int err,
			 const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = dev_verror(xs, devpath, err, fmt, ap);
	va_end(ap);
	return rc;
}

int xbd_xenbus_dev_fatal(struct xs_handle *xs, const char *devpath, int err,
			 const char *fmt, ...)
{
	va_list ap;
	int rc, rc2;

	va_start(ap, fmt);
	rc = dev_verror(xs, devpath, err, fmt, ap);
	va_end(ap);
	rc2 = xbd_xenbus_set_state(xs, devpath, XenbusStateClosing);
	return rc ? rc : rc2;
}

int xbd_xenbus_clear_error(struct xs_handle *xs, const char *devpath)
{
	char epath[XBD_XS_PATH_MAX];
	int rc = xbd_xenbus_error_path(devpath, epath, sizeof(epath));
	int rc2 = xbd_xs_rm(xs, XBT_NULL, devpath, "error");

	if (rc == 0)
		rc = xbd_xs_rm(xs, XBT_NULL, epath, NULL);
	return rc ? rc : rc2;
}
