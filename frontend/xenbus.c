/* SPDX-License-Identifier: MIT */
/*
 * xenbus handshake of the frontend: the domain handle and its monitor
 * thread, xbdfront_open_in() and xb_close().  See xenbus.h for the
 * sequence and the transitions.
 *
 * Threads:
 *   - the opener: xbdfront_open_in() runs the first handshake on the
 *     caller's thread, waiting for the backend through the domain's event
 *     generation (dom_wait_state), never by reading watch events itself;
 *   - the domain's monitor thread: the only reader of the shared xenstore
 *     connection's watch events.  For each event it bumps the generation
 *     (waking openers and closers) and, for a live device whose token
 *     came, calls fe_xb_on_peer_state() with the backend's state;
 *   - the closer: xb_close() takes its device out of the monitor's
 *     hands (live = false under dispatch_lock) before its own waits.
 * The phase of a device is written by its opener until it is live, by the
 * monitor while it is live, by its closer afterwards.  Requests on the
 * shared xs handle may come from any of them (libxenstore serialises).
 * The queues lock themselves, so the monitor may reset and reconnect them
 * while application threads do I/O.
 *
 * Locks (order: dispatch_lock, then lock):
 *   dom->dispatch_lock  held by the monitor while it dispatches; taken by
 *                       whoever adds or unlinks a device or ends its life;
 *   dom->lock           refs, devs, gen, every xb->pending and xb->live.
 * Lifetime: the domain holds one reference per open device plus the
 * opener's; the last xbdfront_domain_close()/device close stops the
 * monitor and releases the xenstore connection, the claim and the
 * platform, in that order.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "frontend/device.h"
#include "frontend/xenbus.h"
#include "lib/vdev.h"
#include "lib/xenbus.h"

#define CLOSE_WAIT_MS 2000
#define TOKEN_PREFIX "xbdfront-"

enum fe_phase {
	PH_INITIALISED,   /* rings published, waiting for Connected */
	PH_CONNECTED,
	PH_WAITING,       /* backend away, online: waiting for it to probe again */
	PH_CLOSED,        /* detached or failed: nothing more to do */
};

struct fe_xb;

/* The public struct xbdfront_domain: one claimed domain of this process. */
struct xbdfront_domain {
	pthread_mutex_t dispatch_lock;  /* see the lock order above */
	pthread_mutex_t lock;
	pthread_cond_t cond;            /* broadcast when gen moves (CLOCK_MONOTONIC) */
	unsigned int refs;              /* opener + devices, under lock */
	uint64_t gen;                   /* watch events seen, under lock */
	struct fe_xb *devs;             /* devices with a watch, under both locks */
	struct xbd_platform *plat;      /* owned */
	struct xbd_domain *claim;       /* owned */
	xbd_domid_t domid;
	struct xs_handle *xs;           /* owned; watch events: the monitor's */
	pthread_t monitor;
	bool monitoring;
	int stop_fd;                    /* eventfd: last put -> monitor */
};

struct fe_xb {
	struct xbdfront_domain *d;    /* referenced until xb_close */
	struct xs_handle *xs;         /* d->xs */
	struct xbd_platform *plat;    /* d->plat */
	struct xbd_domain *dom;       /* d->claim */
	xbd_domid_t domid, be_domid;
	uint32_t devid;
	char fe[96], be[160], token[32];
	struct xbdfront_opts opts;
	enum fe_abi abi;
	struct xbdfront_dev *dev;
	enum fe_phase phase;
	bool watching;                /* d->devs holds us and be is watched */
	bool live;                    /* the monitor dispatches to us (d->lock) */
	bool pending;                 /* our token came since the last dispatch */
	unsigned int reconnects;
	bool asked_probe;             /* PH_WAITING: we said Initialising */
	bool failed;                  /* fatal() said Closing; xb_close says Closed */
	char why[200];                /* the first failure's reason, "" before */
	struct fe_xb *next;           /* d->devs */
};

static void xb_close(struct fe_xb *xb, struct xbdfront_dev *dev);

struct offer {
	unsigned int max_queues, max_order;
};

static unsigned int umin(unsigned int a, unsigned int b)
{
	return a < b ? a : b;
}

/* An optional number the backend wrote: absent or garbage reads as def
 * (as Linux xenbus_read_unsigned), then clamped to [min, max]. */
static unsigned int read_opt(struct fe_xb *xb, const char *node, unsigned int def,
			     unsigned int min, unsigned int max)
{
	unsigned int v;

	if (xbd_xs_read_uint(xb->xs, XBT_NULL, xb->be, node, 0, UINT32_MAX, &v))
		v = def;
	return v < min ? min : v > max ? max : v;
}

/* Our error node and Closing (xenbus_dev_fatal); the device is done.
 * The first reason is kept for xbdfront_open_in_why(); Closed follows
 * in xb_close(), once the backend let go. */
static int __attribute__((format(printf, 3, 4)))
fatal(struct fe_xb *xb, int err, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)xbd_xenbus_dev_fatal(xb->xs, xb->fe, err, "%s", msg);
	if (!xb->why[0])
		snprintf(xb->why, sizeof(xb->why), "%s", msg);
	xb->phase = PH_CLOSED;
	xb->failed = true;
	return err;
}

/*
 * The backend refused the disk (Closing): keep its reason, the text of
 * its <be>/error node ("<errno> <message>", xbd_xenbus_dev_error), as
 * "backend: <message> (<strerror>)".  Linux xen-blkback writes only the
 * node under its own home, which the guest cannot read: then nothing.
 */
static void backend_reason(struct fe_xb *xb)
{
	char text[128], *msg;
	long no;

	if (xbd_xs_read_buf(xb->xs, XBT_NULL, xb->be, "error", text, sizeof(text)) ||
	    !text[0])
		return;
	no = strtol(text, &msg, 10);
	if (msg == text || no <= 0 || no > 4095 || *msg != ' ')
		snprintf(xb->why, sizeof(xb->why), "backend: %s", text);
	else
		snprintf(xb->why, sizeof(xb->why), "backend: %s (%s)", msg + 1,
			 strerror((int)no));
}

/* <fe>/backend must name this very device's backend directory. */
static int locate(struct fe_xb *xb)
{
	char want[sizeof(xb->be)];
	unsigned int id;
	int rc;

	rc = xbd_xs_read_buf(xb->xs, XBT_NULL, xb->fe, "backend", xb->be, sizeof(xb->be));
	if (!rc)
		rc = xbd_xs_read_uint(xb->xs, XBT_NULL, xb->fe, "backend-id", 0, XBD_DOMID_MAX, &id);
	if (rc)
		return rc;
	snprintf(want, sizeof(want), "/local/domain/%u/backend/vbd/%u/%u", id, xb->domid,
		 xb->devid);
	if (strcmp(want, xb->be))
		return -EPROTO;
	xb->be_domid = (xbd_domid_t)id;
	return 0;
}

static void read_offer(struct fe_xb *xb, struct offer *o)
{
	unsigned int pages;

	o->max_queues = read_opt(xb, "multi-queue-max-queues", 1, 1, FE_DEV_MAX_QUEUES);
	o->max_order = read_opt(xb, "max-ring-page-order", 0, 0, FE_RING_MAX_ORDER);
	/* the deprecated max-ring-pages scheme (blkif.h note 3) */
	pages = read_opt(xb, "max-ring-pages", 1, 1, 1u << FE_RING_MAX_ORDER);
	if ((unsigned int)__builtin_ctz(pages) > o->max_order && !(pages & (pages - 1)))
		o->max_order = (unsigned int)__builtin_ctz(pages);
}

/* ---- publishing ---------------------------------------------------------- */

/* Remove keys of an earlier connection that the new one may not write. */
static int clean_keys(struct xs_handle *xs, xs_transaction_t t, const char *fe)
{
	char **names;
	unsigned int n, i;
	int rc;

	rc = xbd_xs_directory(xs, t, fe, NULL, &names, &n);
	if (rc)
		return rc;
	for (i = 0; i < n && !rc; i++)
		if (!strncmp(names[i], "ring-ref", 8) || !strncmp(names[i], "queue-", 6) ||
		    !strcmp(names[i], "event-channel") || !strcmp(names[i], "ring-page-order") ||
		    !strcmp(names[i], "multi-queue-num-queues"))
			rc = xbd_xs_rm(xs, t, fe, names[i]);
	free(names);
	return rc;
}

static int write_queue(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		       struct fe_chan *c)
{
	xbd_grant_ref_t refs[1u << FE_RING_MAX_ORDER];
	unsigned int n = fe_chan_ring_refs(c, refs), k;
	char node[16];
	int rc = 0;

	if (n == 1)
		rc = xbd_xs_printf(xs, t, dir, "ring-ref", "%u", refs[0]);
	for (k = 0; n > 1 && k < n && !rc; k++) {
		snprintf(node, sizeof(node), "ring-ref%u", k);
		rc = xbd_xs_printf(xs, t, dir, node, "%u", refs[k]);
	}
	return rc ? rc : xbd_xs_printf(xs, t, dir, "event-channel", "%d", fe_chan_port(c));
}

static int publish_txn(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	struct fe_xb *xb = arg;
	struct xbdfront_dev *dev = xb->dev;
	char dir[sizeof(xb->fe) + 24];
	unsigned int i;
	int rc;

	rc = clean_keys(xs, t, xb->fe);
	if (!rc && dev->par.order)
		rc = xbd_xs_printf(xs, t, xb->fe, "ring-page-order", "%u", dev->par.order);
	if (!rc && dev->par.nqueues == 1)
		rc = write_queue(xs, t, xb->fe, fe_dev_chan(dev, 0));
	if (!rc && dev->par.nqueues > 1)
		rc = xbd_xs_printf(xs, t, xb->fe, "multi-queue-num-queues", "%u",
				   dev->par.nqueues);
	for (i = 0; dev->par.nqueues > 1 && i < dev->par.nqueues && !rc; i++) {
		snprintf(dir, sizeof(dir), "%s/queue-%u", xb->fe, i);
		rc = write_queue(xs, t, dir, fe_dev_chan(dev, i));
	}
	if (!rc)
		rc = xbd_xs_write(xs, t, xb->fe, "protocol", fe_abi_protocol(dev->par.abi));
	if (!rc)
		rc = xbd_xs_printf(xs, t, xb->fe, "feature-persistent", "%u", xb->opts.persistent);
	return rc;
}

/* Rings granted: publish them and say Initialised. */
static int initialise(struct fe_xb *xb)
{
	int rc = xbd_xs_transaction(xb->xs, publish_txn, xb);

	if (rc)
		return fatal(xb, rc, "writing ring references and event channels");
	rc = xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateInitialised);
	if (rc)
		return fatal(xb, rc, "switching to Initialised");
	xb->phase = PH_INITIALISED;
	return 0;
}

/* ---- connecting ---------------------------------------------------------- */

static int read_props(struct fe_xb *xb, struct fe_limits *lim, unsigned int *pss)
{
	unsigned int info, ss, ind;
	uint64_t sectors;
	int rc;

	rc = xbd_xs_read_u64(xb->xs, XBT_NULL, xb->be, "sectors", 0, UINT64_MAX / 512, &sectors);
	if (!rc)
		rc = xbd_xs_read_uint(xb->xs, XBT_NULL, xb->be, "info", 0, UINT32_MAX, &info);
	if (!rc)
		rc = xbd_xs_read_uint(xb->xs, XBT_NULL, xb->be, "sector-size", 512, 4096, &ss);
	if (rc)
		return fatal(xb, -EPROTO, "reading sectors, info and sector-size of %s", xb->be);
	ind = read_opt(xb, "feature-max-indirect-segments", 0, 0, FE_MAX_INDIRECT_SEGS);
	ind = umin(ind, xb->opts.max_indirect_segs);
	*lim = (struct fe_limits){
		.handle = (uint16_t)xb->devid, .sector_size = ss, .sectors = sectors,
		.max_indirect_segs = ind > BLKIF_MAX_SEGMENTS_PER_REQUEST ? ind : 0,
		.readonly = info & VDISK_READONLY,
		.flush = read_opt(xb, "feature-flush-cache", 0, 0, 1),
		.barrier = read_opt(xb, "feature-barrier", 0, 0, 1),
		.discard = read_opt(xb, "feature-discard", 0, 0, 1),
	};
	lim->discard_secure = lim->discard && read_opt(xb, "discard-secure", 0, 0, 1);
	*pss = read_opt(xb, "physical-sector-size", ss, ss, 1u << 30);
	if (fe_limits_check(lim))
		return fatal(xb, -EPROTO, "unusable sector-size %u / sectors %llu", ss,
			     (unsigned long long)sectors);
	return 0;
}

/* The application's resize hook, when the capacity is no longer
 * before (an online resize, or a restarted backend whose store grew). */
static void tell_resized(struct fe_xb *xb, uint64_t before)
{
	struct xbdfront_info now;

	xbdfront_get_info(xb->dev, &now);
	if (now.sectors != before && xb->opts.resized)
		xb->opts.resized(xb->opts.resized_arg, now.sectors);
}

/* The backend is Connected: read the disk, start the queues, Connected. */
static int finish(struct fe_xb *xb)
{
	struct xbdfront_info before = { 0 };
	struct fe_limits lim;
	unsigned int pss = 0;
	int rc;

	if (xb->reconnects)          /* fresh rings after a restart: compare */
		xbdfront_get_info(xb->dev, &before);
	rc = read_props(xb, &lim, &pss);
	if (rc)
		return rc;
	fe_dev_set_persistent(xb->dev, xb->opts.persistent &&
			      read_opt(xb, "feature-persistent", 0, 0, 1));
	rc = fe_dev_connect(xb->dev, &lim, pss);
	if (rc)
		return fatal(xb, rc, "connecting the queues");
	rc = xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateConnected);
	if (rc)
		return fatal(xb, rc, "switching to Connected");
	xb->phase = PH_CONNECTED;
	if (xb->reconnects)          /* not the first connect: the open reports that */
		tell_resized(xb, before.sectors);
	return 0;
}

/* Detached (or gone): pending I/O fails, we are Closed. */
static void detach(struct fe_xb *xb, const char *why)
{
	fe_dev_fail(xb->dev, -ENODEV, why);
	(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosing);
	(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosed);
	xb->phase = PH_CLOSED;
}

/* Backend restarted: requests back from the old rings, fresh rings out. */
static void recover(struct fe_xb *xb)
{
	struct offer o;
	int rc;

	read_offer(xb, &o);
	xb->reconnects++;
	if (o.max_queues < xb->dev->par.nqueues) {
		detach(xb, "restarted backend offers fewer queues");
		fatal(xb, -EPROTO, "restarted backend offers %u queues, %u in use",
		      o.max_queues, xb->dev->par.nqueues);
		return;
	}
	rc = fe_dev_reset(xb->dev, umin(xb->dev->par.order, o.max_order), xb->dev->par.abi);
	if (rc) {
		fatal(xb, rc, "new rings for the restarted backend");
		return;
	}
	(void)initialise(xb);
}

/* Backend Connected again: only the capacity may have changed (online
 * resize).  Requests pushed while a restarting backend had no port were
 * not signalled: signal every queue once. */
static void resize(struct fe_xb *xb)
{
	struct xbdfront_info before;
	uint64_t sectors;

	if (xbd_xs_read_u64(xb->xs, XBT_NULL, xb->be, "sectors", 0, UINT64_MAX / 512, &sectors))
		return;
	xbdfront_get_info(xb->dev, &before);
	fe_dev_set_sectors(xb->dev, sectors);    /* and signals every queue */
	tell_resized(xb, before.sectors);
}

void fe_xb_on_peer_state(struct fe_xb *xb, enum xenbus_state state)
{
	unsigned int online;

	if (xb->phase == PH_CLOSED)
		return;
	switch (state) {
	case XenbusStateInitialising:
	case XenbusStateInitWait:
		/* Seeing us Connected, a restarted backend re-attaches to the
		 * rings we published (xbd-blkback, Linux and QEMU map the
		 * current keys, from rsp_prod): nothing to do.  After our
		 * Initialising (PH_WAITING) it waits for fresh rings.
		 * Already published (PH_INITIALISED): a repeated event. */
		if (xb->phase == PH_WAITING)
			recover(xb);
		break;
	case XenbusStateInitialised:
		break;
	case XenbusStateConnected:
		if (xb->phase == PH_INITIALISED)
			(void)finish(xb);
		else if (xb->phase == PH_WAITING)
			recover(xb);     /* reconnected without us: give it new rings */
		else
			resize(xb);      /* and, after a re-attach, wake the backend */
		break;
	case XenbusStateClosing:
	case XenbusStateClosed:
		/* online=0 is the toolstack detaching.  Otherwise the backend
		 * gave up on this connection (an error, a restart) and I/O
		 * waits: Closed from us lets it disconnect, then Initialising
		 * from us, once it is Closed, makes it probe again. */
		if (xbd_xs_read_uint(xb->xs, XBT_NULL, xb->be, "online", 0, 1, &online) ||
		    !online) {
			if (xb->opts.detaching)   /* write back, flush: the ring still works */
				xb->opts.detaching(xb->opts.detaching_arg);
			detach(xb, "backend detached");
			break;
		}
		if (xb->opts.no_recover) {     /* what Linux blkfront_closing does */
			detach(xb, "backend closed (no-recover)");
			break;
		}
		if (xb->phase != PH_WAITING) {
			xb->phase = PH_WAITING;
			xb->asked_probe = false;
			(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosed);
		}
		if (state == XenbusStateClosed && !xb->asked_probe) {
			xb->asked_probe = true;
			(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateInitialising);
		}
		break;
	default:
		detach(xb, "backend removed");
		break;
	}
}

/* ---- the domain's monitor thread -------------------------------------------- */

/* Mark the device whose token this is; d->lock held. */
static void mark_pending(struct xbdfront_domain *d, const char *token)
{
	struct fe_xb *xb;

	for (xb = d->devs; xb; xb = xb->next)
		if (!strcmp(xb->token, token))
			xb->pending = true;
}

/* Call fe_xb_on_peer_state() for every live device whose token came:
 * level-triggered, with the backend's state as it is now. */
static void dispatch(struct xbdfront_domain *d)
{
	enum xenbus_state st;
	struct fe_xb *xb;
	bool go;

	pthread_mutex_lock(&d->dispatch_lock);   /* devs cannot change under us */
	for (xb = d->devs; xb; xb = xb->next) {
		pthread_mutex_lock(&d->lock);
		go = xb->live && xb->pending;
		xb->pending = false;
		pthread_mutex_unlock(&d->lock);
		if (go && xbd_xenbus_read_state(xb->xs, XBT_NULL, xb->be, &st) == 0)
			fe_xb_on_peer_state(xb, st);
	}
	pthread_mutex_unlock(&d->dispatch_lock);
}

static void *monitor_main(void *arg)
{
	struct xbdfront_domain *d = arg;
	struct pollfd pfd[2] = { { .fd = xbd_xs_watch_fd(d->xs), .events = POLLIN },
				 { .fd = d->stop_fd, .events = POLLIN } };
	char path[256], token[32];
	int rc;

	for (;;) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		pthread_mutex_lock(&d->lock);
		while ((rc = xbd_xs_next_event(d->xs, path, sizeof(path), token,
					       sizeof(token))) > 0)
			mark_pending(d, token);
		d->gen++;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		if (rc < 0)
			break;       /* the connection broke: openers time out */
		dispatch(d);
	}
	return NULL;
}

/*
 * Wait up to timeout_ms for the backend's state to be one of mask (bits
 * 1 << state); *last (may be NULL) gets the last state seen.  The monitor
 * thread reads the watch events; we only follow its generation, read
 * before the state so no event is missed.  0, -ETIMEDOUT or -errno.
 */
static int dom_wait_state(struct fe_xb *xb, unsigned int mask, int timeout_ms,
			  enum xenbus_state *last)
{
	struct xbdfront_domain *d = xb->d;
	enum xenbus_state st = XenbusStateUnknown;
	struct timespec deadline;
	uint64_t gen;
	int rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}
	for (;;) {
		pthread_mutex_lock(&d->lock);
		gen = d->gen;
		pthread_mutex_unlock(&d->lock);
		rc = xbd_xenbus_read_state(xb->xs, XBT_NULL, xb->be, &st);
		if (rc || mask & (1u << st))
			break;
		pthread_mutex_lock(&d->lock);
		while (d->gen == gen && !rc)
			rc = -pthread_cond_timedwait(&d->cond, &d->lock, &deadline);
		pthread_mutex_unlock(&d->lock);
		if (rc)
			break;
	}
	if (last)
		*last = st;
	return rc;
}

/* ---- the domain handle ------------------------------------------------------ */

/* Platform, domain claim and xenstore connection of the guest. */
static int attach_platform(struct xbdfront_domain *d, const struct xbdfront_opts *o)
{
	enum xbd_platform_kind kind;
	char sock[4096];
	int rc;

	rc = xbd_platform_kind_parse(o->platform ? o->platform : "auto", &kind);
	if (!rc)
		rc = xbd_platform_open(kind, o->rundir, &d->plat);
	if (!rc)
		rc = xbd_domain_claim(d->plat, d->domid, &d->claim);
	if (rc)
		return rc;
	if (xbd_platform_get_kind(d->plat) == XBD_PLATFORM_XEN)
		return xbd_xs_open(NULL, &d->xs);
	if (snprintf(sock, sizeof(sock), "%s/dom%u/xenstore.sock",
		     xbd_platform_rundir(d->plat), d->domid) >= (int)sizeof(sock))
		return -ENAMETOOLONG;
	return xbd_xs_open(sock, &d->xs);
}

static int monitor_start(struct xbdfront_domain *d)
{
	if (xbd_xs_watch_fd(d->xs) < 0)
		return -EIO;
	d->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (d->stop_fd < 0)
		return -errno;
	if (pthread_create(&d->monitor, NULL, monitor_main, d))
		return -EAGAIN;
	d->monitoring = true;
	return 0;
}

/* The last reference went: stop the monitor, then let go of xenstore,
 * the claim and the platform.  Accepts a partly built domain. */
static void domain_free(struct xbdfront_domain *d)
{
	uint64_t one = 1;

	if (d->monitoring && write(d->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(d->monitor, NULL);
	if (d->stop_fd >= 0)
		close(d->stop_fd);
	if (d->xs)
		xs_close(d->xs);
	xbd_domain_release(d->claim);
	xbd_platform_close(d->plat);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->dispatch_lock);
	free(d);
}

static void domain_get(struct xbdfront_domain *d)
{
	pthread_mutex_lock(&d->lock);
	d->refs++;
	pthread_mutex_unlock(&d->lock);
}

static void domain_put(struct xbdfront_domain *d)
{
	unsigned int left;

	pthread_mutex_lock(&d->lock);
	left = --d->refs;
	pthread_mutex_unlock(&d->lock);
	if (!left)
		domain_free(d);
}

int xbdfront_domain_open(unsigned int domid, const struct xbdfront_opts *opts,
			 struct xbdfront_domain **out)
{
	struct xbdfront_opts def;
	struct xbdfront_domain *d;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!opts) {
		xbdfront_opts_default(&def);
		opts = &def;
	}
	if (domid > XBD_DOMID_MAX)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->domid = (xbd_domid_t)domid;
	d->refs = 1;                     /* the opener's: xbdfront_domain_close() */
	d->stop_fd = -1;
	pthread_mutex_init(&d->dispatch_lock, NULL);
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = attach_platform(d, opts);
	if (!rc)
		rc = monitor_start(d);
	if (rc) {
		domain_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void xbdfront_domain_close(struct xbdfront_domain *d)
{
	if (d)
		domain_put(d);           /* the opener's reference */
}

unsigned int xbdfront_domain_id(const struct xbdfront_domain *d)
{
	return d->domid;
}

/* Put xb in the domain's list and watch its backend (token names it). */
static int watch_backend(struct fe_xb *xb)
{
	struct xbdfront_domain *d = xb->d;
	struct fe_xb *o;
	int rc = 0;

	pthread_mutex_lock(&d->dispatch_lock);
	pthread_mutex_lock(&d->lock);
	for (o = d->devs; o && o->devid != xb->devid; o = o->next)
		;
	if (o)
		rc = -EBUSY;             /* the same disk twice in one domain */
	else {
		xb->next = d->devs;
		d->devs = xb;
	}
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_unlock(&d->dispatch_lock);
	if (rc)
		return rc;
	xb->watching = true;
	return xbd_xs_watch(xb->xs, xb->be, xb->token);
}

/* Undo watch_backend(); the monitor no longer sees xb afterwards. */
static void unwatch_backend(struct fe_xb *xb)
{
	struct xbdfront_domain *d = xb->d;
	struct fe_xb **pp;

	if (!xb->watching)
		return;
	(void)xbd_xs_unwatch(xb->xs, xb->be, xb->token);
	pthread_mutex_lock(&d->dispatch_lock);
	pthread_mutex_lock(&d->lock);
	for (pp = &d->devs; *pp && *pp != xb; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = xb->next;
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_unlock(&d->dispatch_lock);
	xb->watching = false;
}

/* Hand xb to the monitor, catching up on the backend's state now (an
 * event may have come between our last look and this). */
static void go_live(struct fe_xb *xb)
{
	enum xenbus_state st;

	pthread_mutex_lock(&xb->d->dispatch_lock);
	pthread_mutex_lock(&xb->d->lock);
	xb->live = true;
	xb->pending = false;
	pthread_mutex_unlock(&xb->d->lock);
	if (xbd_xenbus_read_state(xb->xs, XBT_NULL, xb->be, &st) == 0)
		fe_xb_on_peer_state(xb, st);
	pthread_mutex_unlock(&xb->d->dispatch_lock);
}

/* Take xb back from the monitor: once this returns, the monitor is not
 * inside fe_xb_on_peer_state(xb) and will not enter it again. */
static void stop_live(struct fe_xb *xb)
{
	pthread_mutex_lock(&xb->d->dispatch_lock);
	pthread_mutex_lock(&xb->d->lock);
	xb->live = false;
	pthread_mutex_unlock(&xb->d->lock);
	pthread_mutex_unlock(&xb->d->dispatch_lock);
}

/* ---- open / close ------------------------------------------------------------ */

/*
 * A device a previous frontend used (a process that exited or crashed):
 * the backend may still be connected to rings that are gone.  Say Closed
 * so it lets go, then Initialising so it probes again (the reconnect rule
 * of Linux and xbd-blkback).  A fresh device (Initialising) needs nothing.
 */
static int take_over(struct fe_xb *xb)
{
	enum xenbus_state ours = XenbusStateUnknown, st;
	int rc;

	(void)xbd_xenbus_read_state(xb->xs, XBT_NULL, xb->fe, &ours);
	(void)xbd_xenbus_clear_error(xb->xs, xb->fe);
	if (ours == XenbusStateInitialising || ours == XenbusStateUnknown)
		return 0;
	rc = xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosed);
	if (!rc)
		rc = dom_wait_state(xb, 1u << XenbusStateClosed | 1u << XenbusStateUnknown,
				    (int)xb->opts.connect_timeout_ms, &st);
	if (rc == -ETIMEDOUT)
		return fatal(xb, rc, "backend %s stayed %s for %u ms after Closed", xb->be,
			     xbd_xenbus_state_name(st), xb->opts.connect_timeout_ms);
	return rc ? rc : xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateInitialising);
}

/* Steps 2-4 of xenbus.h: the backend's offer, our choice, the queues. */
static int create_queues(struct fe_xb *xb)
{
	enum xenbus_state st;
	struct offer o;
	struct fe_dev_params par;
	int rc;

	rc = dom_wait_state(xb, 1u << XenbusStateInitWait | 1u << XenbusStateInitialised |
			    1u << XenbusStateConnected | 1u << XenbusStateClosing,
			    (int)xb->opts.connect_timeout_ms, &st);
	if (rc == -ETIMEDOUT)
		return fatal(xb, rc, "backend %s stayed %s for %u ms", xb->be,
			     xbd_xenbus_state_name(st), xb->opts.connect_timeout_ms);
	if (rc)
		return rc;
	if (st == XenbusStateClosing) {
		/* the backend gave up on this disk before we came (it
		 * could not open the storage): no use waiting for it */
		backend_reason(xb);
		return fatal(xb, -ENODEV, "backend %s is Closing", xb->be);
	}
	read_offer(xb, &o);
	par = (struct fe_dev_params){
		.backend = xb->be_domid,
		.nqueues = umin(umin(xb->opts.max_queues, o.max_queues), FE_DEV_MAX_QUEUES),
		.order = umin(xb->opts.max_ring_page_order, o.max_order),
		.abi = xb->abi,
		/* Linux xen-blkback writes feature-persistent only when it
		 * connects (found on real Xen by make check-xen, phase R):
		 * offer ours as Linux blkfront does, decide in finish() */
		.persistent = xb->opts.persistent,
		.pool_pages = xb->opts.pool_pages,
		.poll_us = xb->opts.poll_duration_us,
	};
	if (!par.nqueues)
		par.nqueues = 1;
	rc = fe_dev_create(xb->plat, xb->dom, &par, &xb->dev);
	return rc ? fatal(xb, rc, "allocating %u rings of order %u", par.nqueues, par.order) : 0;
}

/*
 * The backend said Closed to rings we published during the handshake,
 * still online: a backend that restarted under us (a new one finds rings
 * of its predecessor and makes the frontend start over), not a detach.
 * Start over as recovery does: Closed, its Closed, Initialising, its
 * InitWait, fresh rings.  0, or why not.
 */
static int renegotiate(struct fe_xb *xb)
{
	int timeout = (int)xb->opts.connect_timeout_ms;
	enum xenbus_state st;
	unsigned int online;
	struct offer o;
	int rc;

	if (xbd_xs_read_uint(xb->xs, XBT_NULL, xb->be, "online", 0, 1, &online) || !online)
		return -ENODEV;
	rc = xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosed);
	if (!rc)
		rc = dom_wait_state(xb, 1u << XenbusStateClosed | 1u << XenbusStateUnknown,
				    timeout, &st);
	if (!rc)
		rc = xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateInitialising);
	if (!rc)
		rc = dom_wait_state(xb, 1u << XenbusStateInitWait | 1u << XenbusStateInitialised |
				    1u << XenbusStateConnected, timeout, &st);
	if (rc)
		return rc;
	read_offer(xb, &o);
	if (o.max_queues < xb->dev->par.nqueues)
		return -EPROTO;
	return fe_dev_reset(xb->dev, umin(xb->dev->par.order, o.max_order), xb->dev->par.abi);
}

#define HANDSHAKE_TRIES 3

/* Steps 5-7: publish, wait for Connected, read the disk. */
static int handshake(struct fe_xb *xb)
{
	enum xenbus_state st;
	unsigned int mask = 1u << XenbusStateConnected | 1u << XenbusStateClosing |
			    1u << XenbusStateClosed;
	int rc;

	for (unsigned int tries = 1;; tries++) {
		rc = initialise(xb);
		if (rc)
			return rc;
		rc = dom_wait_state(xb, mask, (int)xb->opts.connect_timeout_ms, &st);
		if (rc == -ETIMEDOUT)
			return fatal(xb, rc, "backend did not connect within %u ms (state %s)",
				     xb->opts.connect_timeout_ms, xbd_xenbus_state_name(st));
		if (rc)
			return rc;
		if (st == XenbusStateConnected)
			return finish(xb);
		/* Closing is the backend refusing us (its error node says
		 * why); Closed may be a restart: start over, a few times,
		 * unless we behave as Linux blkfront does (no_recover). */
		if (st != XenbusStateClosed || xb->opts.no_recover ||
		    tries == HANDSHAKE_TRIES || renegotiate(xb)) {
			backend_reason(xb);
			return fatal(xb, -ENODEV, "backend went %s instead of Connected",
				     xbd_xenbus_state_name(st));
		}
	}
}

static int opts_ok(const struct xbdfront_opts *o)
{
	if (!o->max_queues || o->max_ring_page_order > FE_RING_MAX_ORDER ||
	    o->max_indirect_segs > FE_MAX_INDIRECT_SEGS || o->abi > XBDFRONT_ABI_X86_32 ||
	    o->pool_pages <= 2 * BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST ||
	    o->poll_duration_us > XBDFRONT_POLL_DURATION_US_MAX)
		return -EINVAL;
	return 0;
}

/* A device record of domain d for vdev v, holding a domain reference. */
static struct fe_xb *xb_new(struct xbdfront_domain *d, const struct xbd_vdev *v,
			    const struct xbdfront_opts *opts)
{
	struct fe_xb *xb = calloc(1, sizeof(*xb));

	if (!xb)
		return NULL;
	domain_get(d);                   /* dropped by xb_close() */
	xb->d = d;
	xb->xs = d->xs;
	xb->plat = d->plat;
	xb->dom = d->claim;
	xb->domid = d->domid;
	xb->devid = v->devid;
	xb->opts = *opts;
	xb->abi = fe_abi_from_public(opts->abi);
	snprintf(xb->fe, sizeof(xb->fe), "/local/domain/%u/device/vbd/%" PRIu32, d->domid,
		 v->devid);
	snprintf(xb->token, sizeof(xb->token), TOKEN_PREFIX "%" PRIu32, v->devid);
	return xb;
}

/* What every open does first: no device and no reason yet; the
 * options, or the defaults (in *def) when there are none. */
static const struct xbdfront_opts *open_begin(struct xbdfront_dev **out, char *why, size_t len,
					      const struct xbdfront_opts *opts,
					      struct xbdfront_opts *def)
{
	*out = NULL;
	if (why && len)
		why[0] = '\0';
	if (opts)
		return opts;
	xbdfront_opts_default(def);
	return def;
}

int xbdfront_open_in_why(struct xbdfront_domain *d, const char *vdev,
			 const struct xbdfront_opts *opts, struct xbdfront_dev **out,
			 char *why, size_t len)
{
	struct xbdfront_opts def;
	struct xbd_vdev v;
	struct fe_xb *xb;
	int rc;

	opts = open_begin(out, why, len, opts, &def);
	if (!d || !vdev || xbd_vdev_parse(vdev, &v) || opts_ok(opts))
		return -EINVAL;
	xb = xb_new(d, &v, opts);
	if (!xb)
		return -ENOMEM;
	rc = locate(xb);
	if (!rc)
		rc = watch_backend(xb);
	if (!rc)
		rc = take_over(xb);
	if (!rc)
		rc = create_queues(xb);
	if (!rc) {
		xb->dev->xb = xb;
		rc = handshake(xb);
	}
	if (rc) {
		if (why && len)
			snprintf(why, len, "%s", xb->why);
		if (xb->dev)
			xbdfront_close(xb->dev);
		else
			xb_close(xb, NULL);
		return rc;
	}
	go_live(xb);
	*out = xb->dev;
	return 0;
}

int xbdfront_open_in(struct xbdfront_domain *d, const char *vdev,
		     const struct xbdfront_opts *opts, struct xbdfront_dev **out)
{
	return xbdfront_open_in_why(d, vdev, opts, out, NULL, 0);
}

int xbdfront_open(unsigned int domid, const char *vdev, const struct xbdfront_opts *opts,
		  struct xbdfront_dev **out)
{
	return xbdfront_open_why(domid, vdev, opts, out, NULL, 0);
}

int xbdfront_open_why(unsigned int domid, const char *vdev, const struct xbdfront_opts *opts,
		      struct xbdfront_dev **out, char *why, size_t len)
{
	struct xbdfront_opts def;
	struct xbdfront_domain *d;
	struct xbd_vdev v;
	int rc;

	opts = open_begin(out, why, len, opts, &def);
	if (domid > XBD_DOMID_MAX || !vdev || xbd_vdev_parse(vdev, &v) || opts_ok(opts))
		return -EINVAL;
	rc = xbdfront_domain_open(domid, opts, &d);
	if (rc)
		return rc;
	rc = xbdfront_open_in_why(d, vdev, opts, out, why, len);
	xbdfront_domain_close(d);        /* the device keeps its own reference */
	return rc;
}

/* Wait (bounded) for the backend to reach one of mask. */
static void wait_backend(struct fe_xb *xb, unsigned int mask)
{
	(void)dom_wait_state(xb, mask | 1u << XenbusStateUnknown, CLOSE_WAIT_MS, NULL);
}

/* Take the device from the monitor, say Closing/Closed to the backend,
 * destroy the device's channels (after the backend let go of them) and
 * drop the device's domain reference (the last one releases the xenstore
 * connection, the claim and the platform). */
static void xb_close(struct fe_xb *xb, struct xbdfront_dev *dev)
{
	stop_live(xb);
	if (dev && xb->phase != PH_CLOSED) {
		/* Linux order: Closing, the backend disconnects (unmaps our
		 * rings and grants), then Closed, then our pages go. */
		(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosing);
		wait_backend(xb, 1u << XenbusStateClosing | 1u << XenbusStateClosed);
		(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosed);
		wait_backend(xb, 1u << XenbusStateClosed);
	} else if (xb->failed) {
		/* fatal() said Closing (the backend refused us, or we it).
		 * As Linux blkfront_closing: once the backend let go of our
		 * rings (Closing or Closed; nothing to let go of without a
		 * device), Closed, so the toolstack can tear down or retry. */
		if (dev)
			wait_backend(xb, 1u << XenbusStateClosing | 1u << XenbusStateClosed);
		(void)xbd_xenbus_set_state(xb->xs, xb->fe, XenbusStateClosed);
		if (dev)
			wait_backend(xb, 1u << XenbusStateClosed);
	} else if (dev) {
		/* Detached: we said Closed already; the backend
		 * unmaps before it says Closed, and grants revoked after that
		 * are freed now instead of staying reserved while the domain
		 * (shared by other disks) stays claimed. */
		wait_backend(xb, 1u << XenbusStateClosed);
	}
	unwatch_backend(xb);
	if (dev) {
		fe_dev_destroy_queues(dev);  /* and the buffers: before the claim can go */
		dev->xb = NULL;
	}
	domain_put(xb->d);               /* xb_new()'s reference */
	free(xb);
}

void xbdfront_close(struct xbdfront_dev *dev)
{
	if (!dev)
		return;
	if (dev->xb)
		xb_close(dev->xb, dev);      /* destroys the channels in its order */
	fe_dev_free(dev);
}
