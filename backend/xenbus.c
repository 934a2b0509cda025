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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/tunables.h"
#include "backend/xenbus.h"

/* ---- small helpers ---------------------------------------------------- */

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

static void disconnect(struct backend_dev *d)
{
	for (unsigned int i = 0; d->queues && i < d->nr_queues; i++)
		be_queue_stop(&d->queues[i]);
	free(d->queues);
	d->queues = NULL;
	d->nr_queues = 0;
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
	disconnect(d);
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
 * A frontend already Initialised or Connected when we probe means a
 * backend died under it (we are its restart).  Its rings cannot be taken
 * over: responses are produced in completion order, so rsp_prod says
 * nothing about which requests the dead backend finished, and a response
 * it wrote but did not publish may have overwritten a request slot.  Only
 * the frontend knows what is in flight, so say Closed (online stays 1):
 * the frontend answers Closed, then Initialising on fresh rings, and
 * re-issues everything it had in flight (libxbdfront's recovery).
 */
static bool adopting_live_rings(const struct backend_dev *d)
{
	enum xenbus_state fe = XenbusStateUnknown;

	if (xbd_xenbus_read_state(d->ctx->xs, XBT_NULL, d->fe_path, &fe))
		return false;
	return fe == XenbusStateInitialised || fe == XenbusStateConnected;
}

int be_dev_probe(const struct be_ctx *ctx, const char *be_path, struct backend_dev **out)
{
	struct backend_dev *d = calloc(1, sizeof(*d));
	struct features f = { .d = d };
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
	*out = d;
	snapshot_offer(d);
	rc = read_toolstack(d, target, sizeof(target));
	if (rc)
		return rc;
	rc = storage_open(target, &(struct storage_opts){ .read_only = d->read_only }, &d->st);
	if (rc) {
		be_fatal(d, rc, "opening %s", target);
		return rc;
	}
	f.discard = discard_offered(d);
	rc = xbd_xs_transaction(ctx->xs, write_features, &f);
	if (rc) {
		be_fatal(d, rc, "writing features");
		return rc;
	}
	set_state(d, adopting_live_rings(d) ? XenbusStateClosed : XenbusStateInitWait);
	return 0;
}

/* ---- negotiation -------------------------------------------------------- */

/* The frontend's common keys: protocol, feature-persistent, queues, order. */
static int read_fe_common(struct backend_dev *d)
{
	struct xs_handle *xs = d->ctx->xs;
	char proto[32];
	unsigned int v = 0;
	int rc;

	rc = xbd_xs_read_buf(xs, XBT_NULL, d->fe_path, "protocol", proto, sizeof(proto));
	if (rc == -ENOENT) {
		d->abi = RING_ABI_X86_64;            /* absent: native */
	} else if (rc || ring_abi_parse(proto, &d->abi)) {
		if (rc)
			snprintf(proto, sizeof(proto), "(unreadable)");
		be_fatal(d, -ENOSYS, "unknown fe protocol %s", proto);
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

static void queue_cfg(const struct backend_dev *d, unsigned int i, struct be_queue_cfg *c)
{
	*c = (struct be_queue_cfg){
		.plat = d->ctx->plat, .self = d->ctx->self, .frontend = d->fe_domid,
		.index = i, .ring_order = d->order, .abi = d->abi,
		.persistent = d->persistent, .storage = &d->st,
		.limits = {
			.sectors = d->st.size >> 9, .sector_size = d->st.logical_block,
			.read_only = d->read_only, .flush = true, .barrier = true,
			.discard = discard_offered(d), .discard_secure = d->st.discard_secure,
			.max_indirect_segs = d->max_indirect,
		},
	};
}

static int connect_rings(struct backend_dev *d)
{
	char dir[BE_PATH_MAX + 24];
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
		rc = be_queue_start(&d->queues[i], &c);
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
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "info", "%u", d->read_only ? VDISK_READONLY : 0);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "sector-size", "%u", d->st.logical_block);
	rc = rc ? rc : xbd_xs_printf(xs, t, p, "physical-sector-size", "%u",
				     d->st.physical_block);
	return rc;
}

static void connect_dev(struct backend_dev *d)
{
	int rc;

	if (connect_rings(d))
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
		/* Closing when the frontend already starts over: its Closed
		 * came and went between two reads of its state (watch events
		 * carry no value), so close now as if we had seen it. */
		if (d->state == XenbusStateClosing && online(d)) {
			disconnect(d);
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
		    d->state == XenbusStateClosed || d->fatal || d->st.fd < 0)
			return 0;
		disconnect(d);        /* precondition: idempotent */
		connect_dev(d);
		return 0;
	case XenbusStateClosing:
		set_state(d, XenbusStateClosing);
		return 0;
	case XenbusStateClosed:
		disconnect(d);
		set_state(d, XenbusStateClosed);
		return online(d) ? 0 : BE_DEV_REMOVE;
	case XenbusStateUnknown:
		/* The frontend's directory is gone. */
		disconnect(d);
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
	int rc;

	if (xbd_xs_exists(xs, XBT_NULL, d->be_path, "state") != 1)
		return BE_DEV_REMOVE;            /* our directory was removed */
	if (xbd_xenbus_read_state(xs, XBT_NULL, d->fe_path, &fe))
		fe = XenbusStateUnknown;         /* garbage reads as gone */
	rc = on_peer_state(d, fe);
	if (rc)
		return rc;
	/* Detach with no frontend using the device: nobody will close it
	 * for us, so close now (QEMU does the same). */
	if (!online(d) && fe != XenbusStateInitialised && fe != XenbusStateConnected &&
	    fe != XenbusStateClosing) {
		disconnect(d);
		set_state(d, XenbusStateClosed);
		return BE_DEV_REMOVE;
	}
	return 0;
}

void be_dev_queue_done(struct backend_dev *d, unsigned int q)
{
	const struct be_queue *bq;

	if (q >= d->nr_queues)
		return;
	bq = &d->queues[q];
	if (bq->ring.broken)
		be_fatal(d, -EIO, "queue %u: frontend overran its ring (req_prod %u)", q,
			 bq->ring.bad_prod);
	else
		be_fatal(d, -EIO, "queue %u stopped: %s", q, strerror(-bq->result));
}

void be_dev_remove(struct backend_dev *d)
{
	disconnect(d);
	storage_close(&d->st);
	dev_put(d);                           /* the table's, from be_dev_probe */
}

void be_dev_free(struct backend_dev *d)
{
	free(d);
}
