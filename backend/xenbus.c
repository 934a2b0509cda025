/* SPDX-License-Identifier: MIT */
/*
 * backend/xenbus.c: probe, negotiation and the XenbusState machine of a
 * vbd, on the control thread.  See backend/xenbus.h.
 *
 * Everything read from xenstore is copied once into our memory by the
 * lib/xenbus typed readers and checked against its range there; a value
 * out of range ends in be_fatal() with a message naming the key.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/random.h>

#include "backend/journal.h"
#include "backend/tunables.h"
#include "backend/xenbus.h"
#include "log.h"

/* ---- small helpers ---------------------------------------------------- */

static int connect_rings(struct backend_dev *d, bool adopt);
static int opener_fd(const struct backend_dev *d);
static void opened(struct backend_dev *d);

static void set_state(struct backend_dev *d, enum xenbus_state s)
{
	/* -ENOENT: our directory is gone; the next event removes us. */
	if (xbd_xenbus_set_state(d->ctx->xs, d->be_path, s) == 0)
		d->state = s;
}

static bool online(const struct backend_dev *d)
{
	unsigned int v = 0;

	return xbd_xs_read_uint(d->ctx->xs, XBT_NULL, d->be_path, "online", 0, 1, &v) == 0 &&
	       v == 1;
}

static int journal_path(const struct backend_dev *d, unsigned int q, char *buf, size_t len)
{
	return be_journal_path(buf, len, xbd_platform_rundir(d->ctx->plat), d->ctx->self,
			       d->fe_domid, d->devid, q);
}

/* Stop the queues; their journals stay (a restart adopts the rings). */
static void stop_queues(struct backend_dev *d)
{
	for (unsigned int i = 0; d->queues && i < d->nr_queues; i++)
		be_queue_stop(&d->queues[i]);
	free(d->queues);
	d->queues = NULL;
	d->nr_queues = 0;
}

static void unlink_journals(const struct backend_dev *d, unsigned int nr_queues)
{
	unsigned int n = nr_queues > d->max_queues ? nr_queues : d->max_queues;
	char path[4096];

	for (unsigned int q = 0; q < n; q++)
		if (!journal_path(d, q, path, sizeof(path)))
			(void)unlink(path);
}

/* ---- asynchronous teardown ------------------------------------------------ */

/*
 * A vbd whose storage is slow (or stuck) drains its in-flight I/O for as
 * long as the storage takes; the control thread serves every guest and
 * must not wait for it.  So the queues of a connection that is over go
 * to a reaper thread, which stops them all (in parallel: each drains on
 * its own thread) and joins them; the control thread polls the reaper's
 * eventfd (be_dev_reap_fd), and meanwhile the device only waits: its
 * state is looked at again, as it is then, once the queues are stopped
 * (be_dev_reaped).  Past BE_TEARDOWN_DEADLINE_MS the wait is reported
 * (log and error node) and goes on: memory the kernel may still write
 * into cannot be freed earlier.
 */
#define BE_TEARDOWN_DEADLINE_MS 10000u

struct be_reap {
	struct be_queue *queues;
	unsigned int nr;
	int fd;                          /* eventfd: the queues are stopped */
	pthread_t thread;
	uint64_t deadline_ns;
	bool late;                       /* the deadline passed (reported) */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A helper thread (the reaper, the opener): *fd, an eventfd it writes
 * once its work is over, then the thread running fn(arg), which may read
 * *fd at once.  false, with nothing left open, when either cannot be had
 * (the caller then does the work inline). */
static bool helper_start(pthread_t *thread, int *fd, void *(*fn)(void *), void *arg)
{
	*fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (*fd < 0)
		return false;
	if (pthread_create(thread, NULL, fn, arg)) {
		close(*fd);
		*fd = -1;
		return false;
	}
	return true;
}

/* The reaper thread: it owns r->queues until it writes r->fd. */
static void *reap_main(void *arg)
{
	struct be_reap *r = arg;
	uint64_t one = 1;

	for (unsigned int i = 0; i < r->nr; i++)      /* all drain at once */
		if (r->queues[i].thread_up &&
		    write(r->queues[i].stop_fd, &one, sizeof(one)) != sizeof(one))
			log_warn("queue %u: cannot signal stop", i);
	for (unsigned int i = 0; i < r->nr; i++)
		be_queue_stop(&r->queues[i]);
	if (write(r->fd, &one, sizeof(one)) != sizeof(one))
		log_warn("reaper: cannot report the end of a teardown");
	return NULL;
}

/* Hand the queues to a reaper thread.  false: not asked for (inline
 * teardown), nothing to stop, or no thread: the caller stops inline. */
static bool reap_start(struct backend_dev *d)
{
	struct be_reap *r;

	if (!d->ctx->async_teardown || !d->queues || !d->nr_queues)
		return false;
	r = calloc(1, sizeof(*r));
	if (!r)
		return false;
	r->queues = d->queues;
	r->nr = d->nr_queues;
	r->deadline_ns = mono_ns() + BE_TEARDOWN_DEADLINE_MS * 1000000ull;
	if (!helper_start(&r->thread, &r->fd, reap_main, r)) {
		free(r);
		return false;
	}
	d->queues = NULL;     /* nothing of the control thread sees them now */
	d->nr_queues = 0;
	d->reap = r;
	return true;
}

/* Wait for the reaper (at once when its fd fired) and clean up after it. */
static void reap_join(struct backend_dev *d)
{
	struct be_reap *r = d->reap;

	if (!r)
		return;
	pthread_join(r->thread, NULL);
	unlink_journals(d, r->nr);
	free(r->queues);
	close(r->fd);
	free(r);
	d->reap = NULL;
}

int be_dev_reap_fd(const struct backend_dev *d)
{
	if (d->opening)
		return opener_fd(d);
	return d->reap ? d->reap->fd : -1;
}

int be_dev_reaped(struct backend_dev *d)
{
	if (d->opening) {
		opened(d);
		return be_dev_changed(d);
	}
	if (d->reap && d->reap->late)
		log_info("%s: queues stopped after the deadline", d->be_path);
	reap_join(d);
	return be_dev_changed(d);
}

/*
 * The connection is over: stop the queues and remove their journals.
 * true: done.  false: a reaper thread is stopping them (async_teardown);
 * the caller does nothing more now: the device's state is acted on again
 * once they are stopped (be_dev_reaped), as it is then.
 */
static bool disconnect(struct backend_dev *d)
{
	unsigned int nr = d->nr_queues;

	if (d->reap || reap_start(d))
		return false;
	stop_queues(d);
	unlink_journals(d, nr);
	return true;
}

/* ---- connects per domain --------------------------------------------------- */

/* GCRA: connects of domain dom go at most max_connects_per_second, with a
 * burst of as many.  true: go now; false: *retry_ns is when it may. */
static bool connect_allowed(const struct be_ctx *ctx, xbd_domid_t dom, uint64_t now,
			    uint64_t *retry_ns)
{
	uint64_t rate = tun_get(TUN_MAX_CONNECTS_PER_SECOND), t, burst;
	struct be_rates *rs = ctx->rates;
	struct be_rate *e = NULL;

	if (!rs || !rate)
		return true;
	t = 1000000000ull / rate;
	burst = (rate - 1) * t;
	for (unsigned int i = 0; i < rs->n; i++) {
		if (rs->e[i].dom == dom)
			e = &rs->e[i];
		else if (rs->e[i].tat_ns < now)
			rs->e[i--] = rs->e[--rs->n];    /* idle: forget it */
	}
	if (!e) {
		if (rs->n == rs->cap) {
			unsigned int cap = rs->cap ? 2 * rs->cap : 16;
			struct be_rate *v = realloc(rs->e, cap * sizeof(*v));

			if (!v)
				return true;
			rs->e = v;
			rs->cap = cap;
		}
		e = &rs->e[rs->n++];
		*e = (struct be_rate){ .dom = dom, .tat_ns = now };
	}
	if (e->tat_ns < now)
		e->tat_ns = now;
	if (e->tat_ns - now > burst) {
		*retry_ns = e->tat_ns - burst;
		return false;
	}
	e->tat_ns += t;
	return true;
}

int be_dev_timeout_ms(const struct backend_dev *d, uint64_t now)
{
	uint64_t at = d->retry_ns;

	if (d->reap && !d->reap->late && (!at || d->reap->deadline_ns < at))
		at = d->reap->deadline_ns;
	if (!at)
		return -1;
	return at <= now ? 0 : (int)((at - now + 999999) / 1000000);
}

bool be_dev_timer(struct backend_dev *d, uint64_t now)
{
	struct be_reap *r = d->reap;

	if (r && !r->late && now >= r->deadline_ns) {
		r->late = true;
		log_warn("%s: the storage has not finished its I/O %u ms after the "
			 "disconnect; still waiting", d->be_path, BE_TEARDOWN_DEADLINE_MS);
		xbd_xs_printf(d->ctx->xs, XBT_NULL, d->be_path, "error",
			      "%d teardown exceeded %u ms: storage I/O still in flight",
			      ETIMEDOUT, BE_TEARDOWN_DEADLINE_MS);
	}
	if (!d->retry_ns || now < d->retry_ns)
		return false;
	d->retry_ns = 0;
	return true;          /* a deferred connect: look at the state again */
}

void be_fatal(struct backend_dev *d, int neg_errno, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Writes "<errno> <msg>" to both error nodes and switches to
	 * Closing; logs the message. */
	xbd_xenbus_dev_fatal(d->ctx->xs, d->be_path, neg_errno, "%s", msg);
	d->fatal = true;
	d->state = XenbusStateClosing;
	(void)disconnect(d);  /* the reaper's end brings us back (Closing) */
}

/* ---- probe -------------------------------------------------------------- */

static int parse_be_path(struct backend_dev *d, const char *path)
{
	unsigned int self, fe, devid;
	int end = 0;

	if (strlen(path) >= sizeof(d->be_path) ||
	    sscanf(path, "/local/domain/%u/backend/vbd/%u/%u%n", &self, &fe, &devid,
		   &end) != 3 || path[end] || fe > XBD_DOMID_MAX)
		return -EINVAL;
	strcpy(d->be_path, path);
	d->fe_domid = (xbd_domid_t)fe;
	d->devid = devid;
	return 0;
}

/* The storage to open: physical-device (a hotplug script's "maj:min", hex,
 * as Linux reads it) when present, else params. */
static int read_target(struct backend_dev *d, char *target, size_t len)
{
	struct xs_handle *xs = d->ctx->xs;
	char pdev[32];
	unsigned int maj, min;
	int end = 0, rc;

	rc = xbd_xs_read_buf(xs, XBT_NULL, d->be_path, "physical-device", pdev, sizeof(pdev));
	if (rc == 0) {
		if (sscanf(pdev, "%x:%x%n", &maj, &min, &end) != 2 || pdev[end])
			return -EINVAL;
		snprintf(target, len, "/dev/block/%u:%u", maj, min);
		return 0;
	}
	return rc == -ENOENT ? xbd_xs_read_buf(xs, XBT_NULL, d->be_path, "params", target, len)
			     : rc;
}

static int read_toolstack(struct backend_dev *d, char *target, size_t len)
{
	struct xs_handle *xs = d->ctx->xs;
	char mode[8];
	unsigned int feid;
	int rc;

	rc = xbd_xs_read_buf(xs, XBT_NULL, d->be_path, "frontend", d->fe_path,
			     sizeof(d->fe_path));
	if (rc) {
		be_fatal(d, rc, "reading %s/frontend", d->be_path);
		return rc;
	}
	rc = xbd_xs_read_uint(xs, XBT_NULL, d->be_path, "frontend-id", 0, XBD_DOMID_MAX, &feid);
	if (!rc && feid != d->fe_domid)
		rc = -EINVAL;
	if (rc) {
		be_fatal(d, rc, "frontend-id does not match the path");
		return rc;
	}
	rc = xbd_xs_read_buf(xs, XBT_NULL, d->be_path, "mode", mode, sizeof(mode));
	if (rc) {
		be_fatal(d, rc, "reading mode");
		return rc;
	}
	d->read_only = !strchr(mode, 'w');       /* Linux: no 'w' -> read-only */
	rc = read_target(d, target, len);
	if (rc)
		be_fatal(d, rc, "reading the storage (params or physical-device)");
	return rc;
}

struct features {
	struct backend_dev *d;
	bool discard;
};

static int write_features(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	const struct features *f = arg;
	const struct backend_dev *d = f->d;
	const char *p = d->be_path;
	int rc = 0;

	if (d->max_indirect)
		rc = xbd_xs_printf(xs, t, p, "feature-max-indirect-segments", "%u",
				   d->max_indirect);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "multi-queue-max-queues", "%u", d->max_queues);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "max-ring-page-order", "%u", d->max_order);
	rc = rc ? rc : xbd_xs_write(xs, t, p, "feature-flush-cache", "1");
	rc = rc ? rc : xbd_xs_write(xs, t, p, "feature-barrier", "1");
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "feature-persistent", "%d", d->offer_persistent);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "feature-discard", "%d", f->discard);
	/* xbd only: which driver serves the disk, for xbd block-list */
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "xbd-storage", "%s:%s", d->st.driver,
				     d->st.target);
	if (f->discard) {
		rc = rc ? rc : xbd_xs_printf(xs, t, p, "discard-granularity", "%u",
					     d->st.discard_granularity);
		rc = rc ? rc : xbd_xs_printf(xs, t, p, "discard-alignment", "%u",
					     d->st.discard_alignment);
		rc = rc ? rc : xbd_xs_printf(xs, t, p, "discard-secure", "%d",
					     d->st.discard_secure);
	}
	return rc;
}

/* Discard offered: the storage can, and the toolstack did not turn it off
 * with discard-enable=0 (absent means on). */
static bool discard_offered(const struct backend_dev *d)
{
	unsigned int en = 1;
	int rc = xbd_xs_read_uint(d->ctx->xs, XBT_NULL, d->be_path, "discard-enable", 0, 1, &en);

	return d->st.discard && (rc == -ENOENT || (rc == 0 && en));
}

/* The vbd's I/O limits: the backend's defaults, unless the toolstack
 * wrote its own nodes (xbd block-attach --limit).  A node that does not
 * parse is ignored with a warning: the disk still attaches. */
static void read_limits(struct backend_dev *d)
{
	uint64_t now = mono_ns();

	for (int k = 0; k < BE_LIM_COUNT; k++) {
		uint64_t v = tun_get((enum tun_id)(TUN_DEFAULT_READ_IOPS + k));
		int rc = xbd_xs_read_u64(d->ctx->xs, XBT_NULL, d->be_path,
					 be_limit_nodes[k], 0, BE_LIMIT_MAX, &v);

		if (rc && rc != -ENOENT)
			log_warn("%s/%s: not a limit (0..2^48), using %" PRIu64,
				 d->be_path, be_limit_nodes[k], v);
		be_limit_set(&d->limit, (enum be_limit_key)k, v, now);
	}
	be_limit_fill(&d->limit, now);
}

static void snapshot_offer(struct backend_dev *d)
{
	d->max_queues = (unsigned int)tun_get(TUN_MAX_QUEUES);
	d->max_order = (unsigned int)tun_get(TUN_MAX_RING_PAGE_ORDER);
	d->max_indirect = (unsigned int)tun_get(TUN_MAX_INDIRECT_SEGMENTS);
	d->offer_persistent = tun_get(TUN_FEATURE_PERSISTENT) != 0;
	if (!d->max_queues)
		d->max_queues = 1;
}

/*
 * Adoption: both ends Connected when we probe means a backend died under a
 * working frontend and we are its restart.  Take the rings over as they
 * are (the Linux xen-blkfront closes the disk on a backend Closed): read
 * and check the frontend's keys as on a first connect, then each queue
 * maps its ring, binds its port again and resumes from its journal,
 * re-running the requests the dead backend took but never answered
 * (journal.h says why the ring alone cannot tell which those are).
 * 0: adopted, the state stays Connected.  Else -errno: no journal, or
 * another connection's (xbd-generation, refs, ports...), or one that does
 * not match the ring; everything started is stopped again.
 */
static int adopt(struct backend_dev *d)
{
	uint64_t gen;
	int rc;

	if (xbd_xs_read_u64(d->ctx->xs, XBT_NULL, d->be_path, "xbd-generation", 0,
			    UINT64_MAX, &gen))
		return -ENOENT;       /* connected by a backend without journals */
	d->generation = gen;
	rc = connect_rings(d, true);
	if (rc && !d->fatal)
		stop_queues(d);
	return rc;
}

/*
 * What to do with a frontend that is already past Initialising when we
 * probe (we are a restart).  Both Connected, or the frontend Initialised
 * and the backend Connected (killed before the frontend saw it): adopt.
 * The frontend Initialised and the backend not yet Connected: nothing was
 * ever put on those rings (a frontend waits for Connected), so say
 * InitWait and connect them fresh (be_dev_changed follows the probe and
 * sees Initialised); Linux xen-blkfront would close the disk for good on
 * a Closed here.  Closing: Closing (its Closed comes through the watch);
 * Closed and detached (online 0): Closed.  When adoption
 * fails, or the frontend is Connected to a backend that was not, its
 * rings cannot be taken over, so say Closed (online stays 1) and the
 * frontend starts over on fresh rings (libxbdfront re-issues what it had
 * in flight; the Linux driver closes the disk).  Returns the state to
 * write, or XenbusStateConnected when adopted (already written).
 */
static enum xenbus_state restart_state(struct backend_dev *d, enum xenbus_state be)
{
	enum xenbus_state fe = XenbusStateUnknown;
	bool live;
	int rc;

	if (xbd_xenbus_read_state(d->ctx->xs, XBT_NULL, d->fe_path, &fe))
		fe = XenbusStateUnknown;
	live = fe == XenbusStateConnected || fe == XenbusStateInitialised;
	if (live && be == XenbusStateConnected) {
		rc = adopt(d);
		if (!rc) {
			log_info("%s: adopted %u queue(s) of a live frontend", d->be_path,
				 d->nr_queues);
			return XenbusStateConnected;
		}
		if (d->fatal)
			return XenbusStateClosing;
		log_warn("%s: cannot adopt the rings (%s): closing them", d->be_path,
			 strerror(-rc));
	}
	(void)disconnect(d);  /* no queues here: done at once */
	switch (fe) {
	case XenbusStateInitialised:
		return be == XenbusStateConnected ? XenbusStateClosed : XenbusStateInitWait;
	case XenbusStateConnected:
		return XenbusStateClosed;
	case XenbusStateClosing:
		return XenbusStateClosing;   /* not an InitWait under its close */
	case XenbusStateClosed:          /* detached: no InitWait on the way out */
		return online(d) ? XenbusStateInitWait : XenbusStateClosed;
	default:
		return XenbusStateInitWait;
	}
}

/* ---- opening the storage ------------------------------------------------ */

/*
 * Opening a network store connects to it: an NBD server, a Ceph monitor
 * (and its OSDs), a qemu-storage-daemon starting up.  Each is bounded
 * (10 s), but the control thread serves every guest and must not wait
 * that long for one: with the device table (ctx->async_teardown) those
 * opens run on a helper thread of their own.  Meanwhile the device only
 * waits (be_dev_changed does nothing); the opener's eventfd is polled as
 * be_dev_reap_fd, and when it fires the probe goes on (probe_finish) and
 * the device's state is acted on as it is then.  The raw driver opens a
 * local file or device and stays inline.
 */
struct be_open {
	char params[1024];
	char driver[STORAGE_DRIVER_MAX];
	struct storage_opts o;
	struct storage st;               /* the thread's until it writes fd */
	int rc;
	char err[256];                   /* storage_error() of the thread */
	enum xenbus_state be;            /* our state at probe (restart_state) */
	int fd;                          /* eventfd: the open is over */
	pthread_t thread;
};

/* The platform's run directory (it outlives every device), for the
 * storage drivers' private files. */
static const char *be_rundir(const struct backend_dev *d)
{
	return d->ctx->plat ? xbd_platform_rundir(d->ctx->plat) : NULL;
}

static int opener_fd(const struct backend_dev *d)
{
	return d->opening->fd;
}

static void *open_main(void *arg)
{
	struct be_open *op = arg;
	const char *target;
	uint64_t one = 1;

	storage_parse_params(op->params, op->driver, &target);
	op->o.driver = op->driver;
	op->rc = storage_open(target, &op->o, &op->st);
	snprintf(op->err, sizeof(op->err), "%s", op->rc ? storage_error() : "");
	if (write(op->fd, &one, sizeof(one)) != sizeof(one))
		log_warn("opener: cannot report the end of an open");
	return NULL;
}

/* The open's outcome: an error node with the driver's one-line reason,
 * or the store the device keeps. */
static int open_done(struct backend_dev *d, const char *params, int rc, const char *why)
{
	if (rc) {
		if (why[0])
			be_fatal(d, rc, "opening %s: %s", params, why);
		else
			be_fatal(d, rc, "opening %s", params);
		return rc;
	}
	if (d->st.max_queues && d->max_queues > d->st.max_queues)
		d->max_queues = d->st.max_queues;
	return 0;
}

/* Adopted: the frontend knows the `sectors` the backend we replace
 * wrote.  A store that grew while no backend ran is announced at the
 * next size check (be_dev_check_size); one that shrank cannot be
 * undone: the requests past its end fail as the store answers them. */
static void adopted_size(struct backend_dev *d)
{
	uint64_t sectors;

	if (xbd_xs_read_u64(d->ctx->xs, XBT_NULL, d->be_path, "sectors", 0, UINT64_MAX,
			    &sectors))
		return;
	if (sectors < d->st.size >> 9)
		d->size_unannounced = true;
	else if (sectors > d->st.size >> 9)
		log_warn("%s: %s shrank to %" PRIu64 " bytes while no backend ran; the "
			 "frontend still has %" PRIu64 " sectors", d->be_path, d->st.target,
			 d->st.size, sectors);
}

/* Open on a helper thread.  false: not asked for (inline control, a raw
 * store) or no thread: the caller opens inline. */
static bool open_start(struct backend_dev *d, const char *params, enum xenbus_state be)
{
	char driver[STORAGE_DRIVER_MAX];
	const char *target;
	struct be_open *op;

	storage_parse_params(params, driver, &target);
	if (!d->ctx->async_teardown || !strcmp(driver, "raw"))
		return false;
	op = calloc(1, sizeof(*op));
	if (!op)
		return false;
	snprintf(op->params, sizeof(op->params), "%s", params);
	op->o = (struct storage_opts){
		.read_only = d->read_only,
		.outage_ms = tun_get(TUN_STORAGE_OUTAGE_MS),
		.rundir = be_rundir(d),
	};
	op->be = be;
	if (!helper_start(&op->thread, &op->fd, open_main, op)) {
		free(op);
		return false;
	}
	d->opening = op;
	return true;
}

/* What an open that is over leaves for the probe to go on with. */
struct be_opened {
	char params[sizeof(((struct be_open *)0)->params)];
	char err[sizeof(((struct be_open *)0)->err)];
	int rc;
	enum xenbus_state be;
};

/* Wait for the opener (at once when its fd fired) and free it; its store
 * is the device's from here, *out its outcome. */
static void open_join(struct backend_dev *d, struct be_opened *out)
{
	struct be_open *op = d->opening;

	pthread_join(op->thread, NULL);
	d->st = op->st;
	snprintf(out->params, sizeof(out->params), "%s", op->params);
	snprintf(out->err, sizeof(out->err), "%s", op->err);
	out->rc = op->rc;
	out->be = op->be;
	close(op->fd);
	free(op);
	d->opening = NULL;
}

/* params names the driver and target (storage_parse_params).  A store
 * that will not open is an error node with the driver's one-line reason. */
static int open_storage(struct backend_dev *d, const char *params)
{
	struct storage_opts o = {
		.read_only = d->read_only,
		.outage_ms = tun_get(TUN_STORAGE_OUTAGE_MS),
		.sync_io = (uint8_t)tun_get(TUN_SYNC_IO),
		.rundir = be_rundir(d),
	};
	char driver[STORAGE_DRIVER_MAX];
	const char *target;

	storage_parse_params(params, driver, &target);
	o.driver = driver;
	return open_done(d, params, storage_open(target, &o, &d->st), storage_error());
}

/* The probe once the store is open: advertise, and take the state the
 * previous backend (if any) left. */
static int probe_finish(struct backend_dev *d, enum xenbus_state be)
{
	struct features f = { .d = d };
	enum xenbus_state next;
	int rc;

	f.discard = discard_offered(d);
	rc = xbd_xs_transaction(d->ctx->xs, write_features, &f);
	if (rc) {
		be_fatal(d, rc, "writing features");
		return rc;
	}
	next = restart_state(d, be);
	if (d->fatal)
		return -EIO;
	if (next == XenbusStateConnected) {
		d->state = next;      /* already written by the backend we replace */
		adopted_size(d);
	} else {
		set_state(d, next);
	}
	return 0;
}

/* Is the directory still the one we probed: there, and naming the same
 * store?  (A detach, maybe with a new attach of the vdev, during the
 * open.) */
static bool still_ours(struct backend_dev *d, const char *params)
{
	char now[sizeof(((struct be_opened *)0)->params)];

	return xbd_xs_exists(d->ctx->xs, XBT_NULL, d->be_path, "state") == 1 &&
	       !read_target(d, now, sizeof(now)) && !strcmp(now, params);
}

/* The opener's fd fired: finish the probe, unless the device was
 * detached meanwhile: then nothing is written (its nodes are gone, or a
 * new attach's), and be_dev_changed (next) lets it go. */
static void opened(struct backend_dev *d)
{
	struct be_opened o;

	open_join(d, &o);
	if (!still_ours(d, o.params)) {
		log_warn("%s: detached while its store was opening", d->be_path);
		storage_close(&d->st);
		d->stale = true;
		return;
	}
	if (!open_done(d, o.params, o.rc, o.err))
		(void)probe_finish(d, o.be);
}

int be_dev_probe(const struct be_ctx *ctx, const char *be_path, struct backend_dev **out)
{
	struct backend_dev *d = calloc(1, sizeof(*d));
	enum xenbus_state be = XenbusStateUnknown;
	char target[1024];
	int rc;

	if (!d)
		return -ENOMEM;
	d->refs = 1;                  /* the device table's; dropped in be_dev_remove */
	d->ctx = ctx;
	d->st.fd = -1;
	d->state = XenbusStateInitialising;
	rc = parse_be_path(d, be_path);
	if (rc) {
		free(d);
		return rc;
	}
	be_limit_init(&d->limit);
	d->poll_us = -1;
	*out = d;
	/* Our state as the previous backend (if any) left it. */
	(void)xbd_xenbus_read_state(ctx->xs, XBT_NULL, d->be_path, &be);
	snapshot_offer(d);
	read_limits(d);
	rc = read_toolstack(d, target, sizeof(target));
	if (rc)
		return rc;
	if (open_start(d, target, be))
		return 0;             /* opened() goes on */
	rc = open_storage(d, target);
	if (rc)
		return rc;
	return probe_finish(d, be);
}

/* ---- negotiation -------------------------------------------------------- */

/* The frontend's common keys: protocol, feature-persistent, queues, order. */
static int read_fe_common(struct backend_dev *d)
{
	struct xs_handle *xs = d->ctx->xs;
	char proto[32], shown[XBD_LOG_ESC_SIZE];
	unsigned int v = 0;
	int rc;

	rc = xbd_xs_read_buf(xs, XBT_NULL, d->fe_path, "protocol", proto, sizeof(proto));
	if (rc == -ENOENT) {
		d->abi = RING_ABI_X86_64;            /* absent: native */
	} else if (rc || ring_abi_parse(proto, &d->abi)) {
		if (rc)
			snprintf(proto, sizeof(proto), "(unreadable)");
		/* The guest wrote it: escaped for the log and the error node. */
		be_fatal(d, -ENOSYS, "unknown fe protocol %s",
			 xbd_log_escape(shown, sizeof(shown), proto));
		return -ENOSYS;
	}
	rc = xbd_xs_read_uint(xs, XBT_NULL, d->fe_path, "feature-persistent", 0, 1, &v);
	d->persistent = d->offer_persistent && rc == 0 && v;
	rc = xbd_xs_read_uint(xs, XBT_NULL, d->fe_path, "multi-queue-num-queues", 1,
			      d->max_queues, &d->nr_queues);
	if (rc == -ENOENT)
		d->nr_queues = 1, rc = 0;
	if (rc) {
		be_fatal(d, -EINVAL, "guest requested a bad multi-queue-num-queues (maximum %u)",
			 d->max_queues);
		return -EINVAL;
	}
	rc = xbd_xs_read_uint(xs, XBT_NULL, d->fe_path, "ring-page-order", 0, d->max_order,
			      &d->order);
	if (rc == -ENOENT)
		d->order = 0, rc = 0;
	if (rc)
		be_fatal(d, -EINVAL, "bad ring-page-order (maximum %u)", d->max_order);
	return rc ? -EINVAL : 0;
}

/* ring-ref (one page, legacy) or ring-ref0..N-1, and event-channel, of
 * one queue's directory. */
static int read_queue_keys(struct backend_dev *d, const char *dir, struct be_queue_cfg *c)
{
	struct xs_handle *xs = d->ctx->xs;
	unsigned int n = 1u << d->order, port;
	char key[24];
	int rc;

	for (unsigned int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "ring-ref%u", i);
		rc = xbd_xs_read_uint(xs, XBT_NULL, dir, key, 0, UINT32_MAX, &c->ring_refs[i]);
		if (rc == -ENOENT && n == 1)
			rc = xbd_xs_read_uint(xs, XBT_NULL, dir, "ring-ref", 0, UINT32_MAX,
					      &c->ring_refs[0]);
		if (rc) {
			be_fatal(d, rc, "reading %s/%s", dir, n == 1 ? "ring-ref" : key);
			return rc;
		}
	}
	rc = xbd_xs_read_uint(xs, XBT_NULL, dir, "event-channel", 1, UINT32_MAX - 1, &port);
	if (rc) {
		be_fatal(d, rc, "reading %s/event-channel", dir);
		return rc;
	}
	c->remote_port = port;
	return 0;
}

static void queue_cfg(struct backend_dev *d, unsigned int i, struct be_queue_cfg *c)
{
	*c = (struct be_queue_cfg){
		.plat = d->ctx->plat, .self = d->ctx->self, .frontend = d->fe_domid,
		.index = i, .ring_order = d->order, .abi = d->abi,
		.persistent = d->persistent, .storage = &d->st, .budget = &d->mem,
		.limit = &d->limit, .poll_us = &d->poll_us,
		.measured_size = i == 0 ? &d->measured_size : NULL,
		.limits = {
			.sectors = d->st.size >> 9, .sector_size = d->st.logical_block,
			.read_only = d->read_only, .flush = true, .barrier = true,
			.discard = discard_offered(d), .discard_secure = d->st.discard_secure,
			.max_indirect_segs = d->max_indirect,
		},
		.generation = d->generation, .devid = d->devid, .nr_queues = d->nr_queues,
	};
}

/* Read the frontend's keys and start every queue: on fresh rings, or
 * (adopt) taking over the live rings of a dead backend.  0 or -errno;
 * a failure to adopt is returned without be_fatal (the caller falls
 * back), every other failure is reported through be_fatal. */
static int connect_rings(struct backend_dev *d, bool adopt)
{
	char dir[BE_PATH_MAX + 24], jpath[4096];
	int rc = read_fe_common(d);

	if (rc)
		return rc;
	d->queues = calloc(d->nr_queues, sizeof(*d->queues));
	if (!d->queues) {
		be_fatal(d, -ENOMEM, "allocating %u queues", d->nr_queues);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < d->nr_queues; i++) {
		struct be_queue_cfg c;

		if (d->nr_queues == 1)
			snprintf(dir, sizeof(dir), "%s", d->fe_path);
		else
			snprintf(dir, sizeof(dir), "%s/queue-%u", d->fe_path, i);
		queue_cfg(d, i, &c);
		rc = read_queue_keys(d, dir, &c);
		if (rc)
			return rc;
		c.journal_path = journal_path(d, i, jpath, sizeof(jpath)) ? NULL : jpath;
		c.adopt = adopt;
		rc = be_queue_start(&d->queues[i], &c);
		if (rc && adopt) {
			log_warn("%s: queue %u: no journal to adopt its ring with (%s)",
				 d->be_path, i, strerror(-rc));
			return rc;
		}
		if (rc) {
			be_fatal(d, rc, "mapping ring of queue %u or binding port %u",
				 i, c.remote_port);
			return rc;
		}
	}
	return 0;
}

static int write_disk(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	const struct backend_dev *d = arg;
	const char *p = d->be_path;
	int rc;

	rc = xbd_xs_printf(xs, t, p, "sectors", "%llu", (unsigned long long)(d->st.size >> 9));
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "xbd-generation", "%llu",
				     (unsigned long long)d->generation);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "info", "%u", d->read_only ? VDISK_READONLY : 0);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "sector-size", "%u", d->st.logical_block);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "physical-sector-size", "%u",
				     d->st.physical_block);
	return rc;
}

/* A fresh connection: a new generation names its journals. */
static void connect_dev(struct backend_dev *d)
{
	uint64_t gen = 0;
	int rc;

	if (getrandom(&gen, sizeof(gen), 0) != sizeof(gen))
		gen = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
	d->generation = gen >> 1;      /* below 2^63: xenstore readers parse it */
	if (connect_rings(d, false))
		return;
	rc = xbd_xs_transaction(d->ctx->xs, write_disk, d);
	if (rc) {
		be_fatal(d, rc, "writing the disk's properties");
		return;
	}
	set_state(d, XenbusStateConnected);
}

/* ---- the state machine --------------------------------------------------- */

/* One switch per frontend transition (Linux frontend_changed). */
static int on_peer_state(struct backend_dev *d, enum xenbus_state fe)
{
	switch (fe) {
	case XenbusStateInitialising:
		/* A store that never opened (probe's error node): nothing to
		 * start over with.  The error stays until the disk is
		 * detached; without this, a frontend still Initialising turned
		 * the probe's Closing into Closed and then InitWait, the error
		 * node cleared, and the toolstack saw a disk that attached. */
		if (d->fatal && !storage_is_open(&d->st))
			return 0;
		/* Closing when the frontend already starts over: its Closed
		 * came and went between two reads of its state (watch events
		 * carry no value), so close now as if we had seen it. */
		if (d->state == XenbusStateClosing && online(d)) {
			if (!disconnect(d))
				return 0;
			set_state(d, XenbusStateClosed);
		}
		/* Closed while the frontend starts over: it reconnects. */
		if (d->state == XenbusStateClosed) {
			xbd_xenbus_clear_error(d->ctx->xs, d->be_path);
			d->fatal = false;
			set_state(d, XenbusStateInitWait);
		}
		return 0;
	case XenbusStateInitialised:
	case XenbusStateConnected:
		/* A second watch event for the same transition, a frontend
		 * that goes on after we reported an error, or one whose rings
		 * a dead backend left (we said Closed: it must start over). */
		if (d->state == XenbusStateConnected || d->state == XenbusStateClosing ||
		    d->state == XenbusStateClosed || d->fatal || !storage_is_open(&d->st))
			return 0;
		if (!disconnect(d))   /* precondition: idempotent */
			return 0;
		if (!connect_allowed(d->ctx, d->fe_domid, mono_ns(), &d->retry_ns))
			return 0;     /* be_dev_timer brings us back */
		connect_dev(d);
		return 0;
	case XenbusStateClosing:
		set_state(d, XenbusStateClosing);
		return 0;
	case XenbusStateClosed:
		if (!disconnect(d))
			return 0;
		set_state(d, XenbusStateClosed);
		return online(d) ? 0 : BE_DEV_REMOVE;
	case XenbusStateUnknown:
		/* The frontend's directory is gone. */
		if (!disconnect(d))
			return 0;
		set_state(d, XenbusStateClosed);
		return BE_DEV_REMOVE;
	default:
		return 0;             /* InitWait, Reconfiguring: not for blkif */
	}
}

int be_dev_changed(struct backend_dev *d)
{
	struct xs_handle *xs = d->ctx->xs;
	enum xenbus_state fe = XenbusStateUnknown;
	enum xenbus_state be = XenbusStateUnknown;
	int rc;

	if (d->reap || d->opening)
		return 0;      /* be_dev_reaped() calls us again, state as it is then */
	if (d->stale)
		return BE_DEV_REMOVE;  /* detached during its open: probe again */
	if (xbd_xs_exists(xs, XBT_NULL, d->be_path, "state") != 1) {
		if (!disconnect(d))
			return 0;
		return BE_DEV_REMOVE;            /* our directory was removed */
	}
	/* Only the toolstack writes Initialising, and only into a new
	 * directory: a detach and a new attach of the same vdev happened
	 * before we saw the removal.  Let this device go without writing
	 * anything (the nodes are the new device's); the caller probes. */
	if (!xbd_xenbus_read_state(xs, XBT_NULL, d->be_path, &be) &&
	    be == XenbusStateInitialising && d->state != XenbusStateInitialising) {
		if (!disconnect(d))
			return 0;
		log_info("%s: replaced by a new attach", d->be_path);
		return BE_DEV_REMOVE;
	}
	if (xbd_xenbus_read_state(xs, XBT_NULL, d->fe_path, &fe))
		fe = XenbusStateUnknown;         /* garbage reads as gone */
	rc = on_peer_state(d, fe);
	if (rc)
		return rc;
	/* Detach with no frontend using the device: nobody will close it
	 * for us, so close now (QEMU does the same). */
	if (!online(d) && fe != XenbusStateInitialised && fe != XenbusStateConnected &&
	    fe != XenbusStateClosing) {
		if (!disconnect(d))
			return 0;
		set_state(d, XenbusStateClosed);
		return BE_DEV_REMOVE;
	}
	return 0;
}

void be_dev_storage_event(struct backend_dev *d)
{
	int rc = storage_watch(&d->st);

	if (rc && !d->fatal)
		be_fatal(d, rc, "%s", storage_error());
}

/* ---- online resize ---------------------------------------------------- */

static int write_resize(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	const struct backend_dev *d = arg;
	int rc;

	rc = xbd_xs_printf(xs, t, d->be_path, "sectors", "%llu",
			   (unsigned long long)(d->st.size >> 9));
	/* the same state again: the frontend's cue to read sectors */
	return rc ? rc : xbd_xs_printf(xs, t, d->be_path, "state", "%u",
				       (unsigned int)XenbusStateConnected);
}

void be_dev_check_size(struct backend_dev *d)
{
	uint64_t bytes, old = d->st.size;
	int rc;

	if (d->state != XenbusStateConnected || d->fatal || d->reap ||
	    !storage_is_open(&d->st) || !d->nr_queues)
		return;
	bytes = __atomic_load_n(&d->measured_size, __ATOMIC_ACQUIRE);
	if (!bytes)
		return;                       /* queue 0 has not looked yet */
	if (bytes < old) {
		if (bytes != d->refused_size)
			log_warn("%s: %s shrank from %" PRIu64 " to %" PRIu64 " bytes: "
				 "refused, the disk keeps its size (a disk in use "
				 "cannot shrink)", d->be_path, d->st.target, old, bytes);
		d->refused_size = bytes;
		return;
	}
	if (bytes == old && !d->size_unannounced)
		return;
	if (bytes > old && storage_grow(&d->st, bytes))
		return;
	rc = xbd_xs_transaction(d->ctx->xs, write_resize, d);
	d->size_unannounced = rc != 0;
	if (rc)
		log_warn("%s: announcing the new size: %s", d->be_path, strerror(-rc));
	else
		log_info("%s: resized from %" PRIu64 " to %" PRIu64 " bytes",
			 d->be_path, old, bytes);
}

void be_dev_queue_done(struct backend_dev *d, unsigned int q)
{
	const struct be_queue *bq;
	uint64_t n;

	if (q >= d->nr_queues)
		return;
	bq = &d->queues[q];
	/* Consume the queue thread's report before reading what it wrote
	 * (ring.broken, ring.faulted, result): this read of done_fd pairs
	 * with the thread's write, the eventfd orders the two.  poll()'s
	 * POLLIN alone orders nothing (ThreadSanitizer reported the race).
	 * Nothing to read: the thread has not reported, nothing to do. */
	if (read(bq->done_fd, &n, sizeof(n)) != sizeof(n))
		return;
	if (bq->ring.broken)
		be_fatal(d, -EIO, "queue %u: frontend overran its ring (req_prod %u)", q,
			 bq->ring.bad_prod);
	else if (bq->ring.faulted)
		be_fatal(d, -EFAULT, "queue %u: the guest truncated memory, grant table "
			 "or event channels the backend had mapped", q);
	else
		be_fatal(d, -EIO, "queue %u stopped: %s", q, strerror(-bq->result));
}

void be_dev_remove(struct backend_dev *d)
{
	if (d->opening) {     /* stopping: wait for the opener (bounded) */
		struct be_opened o;

		open_join(d, &o);
	}
	reap_join(d);         /* stopping (devtab_stop): wait for the reaper */
	/* Still Connected: we are stopping (SIGTERM), not the connection;
	 * keep the journals so that our restart adopts the rings. */
	if (d->state == XenbusStateConnected && !d->fatal) {
		stop_queues(d);
	} else {
		unsigned int nr = d->nr_queues;

		stop_queues(d);
		unlink_journals(d, nr);
	}
	storage_close(&d->st);
	dev_put(d);                           /* the table's, from be_dev_probe */
}

void be_dev_free(struct backend_dev *d)
{
	be_limit_destroy(&d->limit);
	free(d);
}
