/* SPDX-License-Identifier: MIT */
/* backend/devtab.c: devices of the control thread.  See devtab.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/devtab.h"
#include "backend/tunables.h"
#include "backend/xenbus.h"
#include "log.h"

#define TOKEN_BE "be"
#define TOKEN_FE "fe"

static struct backend_dev *find_be(const struct devtab *t, const char *be_path)
{
	for (unsigned int i = 0; i < t->n; i++)
		if (!strcmp(t->dev[i]->be_path, be_path))
			return t->dev[i];
	return NULL;
}

static struct backend_dev *find_fe(const struct devtab *t, const char *path)
{
	for (unsigned int i = 0; i < t->n; i++) {
		size_t l = strlen(t->dev[i]->fe_path);

		if (l && !strncmp(t->dev[i]->fe_path, path, l) &&
		    (path[l] == '/' || !path[l]))
			return t->dev[i];
	}
	return NULL;
}

static int add(struct devtab *t, struct backend_dev *d)
{
	char w[BE_PATH_MAX + 8];

	if (t->n == t->cap) {
		unsigned int cap = t->cap ? 2 * t->cap : 16;
		struct backend_dev **v = realloc(t->dev, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->dev = v;
		t->cap = cap;
	}
	t->dev[t->n++] = d;
	if (d->fe_path[0]) {
		snprintf(w, sizeof(w), "%s/state", d->fe_path);
		xbd_xs_watch(t->ctx.xs, w, TOKEN_FE);
	}
	return 0;
}

static void drop(struct devtab *t, struct backend_dev *d)
{
	char w[BE_PATH_MAX + 8];

	for (unsigned int i = 0; i < t->n; i++) {
		if (t->dev[i] != d)
			continue;
		t->dev[i] = t->dev[--t->n];
		if (d->fe_path[0]) {
			snprintf(w, sizeof(w), "%s/state", d->fe_path);
			xbd_xs_unwatch(t->ctx.xs, w, TOKEN_FE);
		}
		log_info("%s: removed", d->be_path);
		be_dev_remove(d);             /* drops the table's reference */
		return;
	}
}

/* Start-up: a device the toolstack detached (online 0) while no backend
 * ran, or under a backend that died before it said Closed: the
 * toolstack waits for that Closed (libxl: 10 s), so it is probed and
 * follows its frontend to Closed, then goes. */
static bool detaching(enum xenbus_state s)
{
	return s > XenbusStateInitialising && s < XenbusStateClosed;
}

/* A device directory appeared or changed.  adopt: probe whatever its
 * state (start-up); else only a new device (state Initialising). */
static void touch(struct devtab *t, const char *be_path, bool adopt)
{
	struct backend_dev *d = find_be(t, be_path);
	enum xenbus_state s = XenbusStateUnknown;
	unsigned int online = 0;

	if (d) {
		if (be_dev_changed(d) != BE_DEV_REMOVE)
			return;
		drop(t, d);   /* removed, or replaced by a new attach: probe */
	}
	if (xbd_xs_read_uint(t->ctx.xs, XBT_NULL, be_path, "online", 0, 1, &online) ||
	    xbd_xenbus_read_state(t->ctx.xs, XBT_NULL, be_path, &s) ||
	    (!online && !(adopt && detaching(s))) ||
	    (!adopt && s != XenbusStateInitialising) ||
	    xbd_xs_exists(t->ctx.xs, XBT_NULL, be_path, "frontend") != 1)
		return;                       /* not (or no longer) ours to serve */
	d = NULL;
	be_dev_probe(&t->ctx, be_path, &d);   /* failures end in an error node */
	if (!d)
		return;
	log_info("%s: probed", be_path);
	if (add(t, d)) {
		be_dev_remove(d);
		return;
	}
	if (be_dev_changed(d) == BE_DEV_REMOVE)   /* the frontend may be ahead */
		drop(t, d);
}

/* ".../backend/vbd/<fe>/<devid>[/...]" -> the device path, or -1. */
static int device_path(const struct devtab *t, const char *path, char *out, size_t len)
{
	size_t bl = strlen(t->base);
	unsigned int fe, devid;
	int end = 0;

	if (strncmp(path, t->base, bl) || path[bl] != '/' ||
	    sscanf(path + bl, "/%u/%u%n", &fe, &devid, &end) != 2 ||
	    (path[bl + end] && path[bl + end] != '/'))
		return -1;
	snprintf(out, len, "%.*s", (int)(bl + end), path);
	return 0;
}

static void adopt_all(struct devtab *t)
{
	char **fes = NULL, **ids = NULL, dir[BE_PATH_MAX], dev[BE_PATH_MAX + 16];
	char checked[BE_PATH_MAX + 16];
	unsigned int nf = 0, ni = 0;

	if (xbd_xs_directory(t->ctx.xs, XBT_NULL, t->base, NULL, &fes, &nf))
		return;
	for (unsigned int i = 0; i < nf; i++) {
		snprintf(dir, sizeof(dir), "%s/%s", t->base, fes[i]);
		if (xbd_xs_directory(t->ctx.xs, XBT_NULL, dir, NULL, &ids, &ni))
			continue;
		for (unsigned int j = 0; j < ni; j++) {
			snprintf(dev, sizeof(dev), "%s/%s", dir, ids[j]);
			if (device_path(t, dev, checked, sizeof(checked)) == 0 &&
			    !strcmp(dev, checked))
				touch(t, dev, true);
		}
		free(ids);
	}
	free(fes);
}

int devtab_start(struct devtab *t, const struct be_ctx *ctx)
{
	memset(t, 0, sizeof(*t));
	t->ctx = *ctx;
	t->ctx.rates = &t->rates;
	snprintf(t->base, sizeof(t->base), "/local/domain/%u/backend/vbd", ctx->self);
	int rc = xbd_xs_watch(ctx->xs, t->base, TOKEN_BE);
	if (rc)
		return rc;
	adopt_all(t);
	return 0;
}

/* Paths of new devices named by the events of one pass, each once. */
struct touched {
	char (*path)[BE_PATH_MAX];
	unsigned int n, cap;
};

static void touched_add(struct touched *tp, const char *dev)
{
	for (unsigned int i = 0; i < tp->n; i++)
		if (!strcmp(tp->path[i], dev))
			return;
	if (tp->n == tp->cap) {
		unsigned int cap = tp->cap ? 2 * tp->cap : 8;
		char (*v)[BE_PATH_MAX] = realloc(tp->path, cap * sizeof(*v));

		if (!v)
			return;           /* its next event probes it */
		tp->path = v;
		tp->cap = cap;
	}
	snprintf(tp->path[tp->n++], BE_PATH_MAX, "%s", dev);
}

/* Act once on every device marked dirty, on its state as it is now. */
static void act_on_dirty(struct devtab *t)
{
	char dev[BE_PATH_MAX];

	for (unsigned int i = 0; i < t->n;) {
		struct backend_dev *d = t->dev[i];

		if (!d->dirty) {
			i++;
			continue;
		}
		d->dirty = false;
		if (be_dev_changed(d) != BE_DEV_REMOVE) {
			i++;
			continue;
		}
		snprintf(dev, sizeof(dev), "%s", d->be_path);
		drop(t, d);               /* the last device moved to i */
		touch(t, dev, false);     /* a new attach, if any (added clean) */
	}
}

int devtab_events(struct devtab *t)
{
	char path[XBD_XS_PATH_MAX], token[16], dev[BE_PATH_MAX];
	struct touched tp = { 0 };
	int rc;

	/* First read everything queued: a device's events collapse into
	 * one mark, a new device's into one probe. */
	while ((rc = xbd_xs_next_event(t->ctx.xs, path, sizeof(path), token, sizeof(token))) == 1) {
		struct backend_dev *d = NULL;

		if (!strcmp(token, TOKEN_FE))
			d = find_fe(t, path);
		else if (device_path(t, path, dev, sizeof(dev)) == 0 && !(d = find_be(t, dev)))
			touched_add(&tp, dev);
		if (d)
			d->dirty = true;
	}
	act_on_dirty(t);
	for (unsigned int i = 0; i < tp.n; i++)
		touch(t, tp.path[i], false);
	free(tp.path);
	return rc;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ms until the next online-resize check is due; -1: checks are off. */
static int size_check_ms(const struct devtab *t, uint64_t now)
{
	uint64_t every = tun_get(TUN_SIZE_CHECK_MS), left;

	if (!every)
		return -1;
	if (t->size_check_ns <= now)
		return 0;
	left = (t->size_check_ns - now + 999999) / 1000000;
	return (int)(left < every ? left : every);   /* the tunable may have shrunk */
}

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	return b >= 0 && b < a ? b : a;
}

/* Online resize: every size_check_ms, each device's store is asked. */
static void check_sizes(struct devtab *t, uint64_t now)
{
	uint64_t every = tun_get(TUN_SIZE_CHECK_MS);

	if (!every || size_check_ms(t, now) > 0)
		return;
	t->size_check_ns = now + every * 1000000;
	for (unsigned int i = 0; i < t->n; i++)
		be_dev_check_size(t->dev[i]);
}

int devtab_timeout_ms(const struct devtab *t)
{
	uint64_t now = mono_ns();
	int best = -1;

	for (unsigned int i = 0; i < t->n; i++) {
		int ms = be_dev_timeout_ms(t->dev[i], now);

		if (ms >= 0 && (best < 0 || ms < best))
			best = ms;
	}
	return t->n ? min_timeout(best, size_check_ms(t, now)) : best;
}

void devtab_timers(struct devtab *t)
{
	uint64_t now = mono_ns();
	bool any = false;

	check_sizes(t, now);
	for (unsigned int i = 0; i < t->n; i++)
		if (be_dev_timer(t->dev[i], now))
			any = t->dev[i]->dirty = true;
	if (any)
		act_on_dirty(t);
}

unsigned int devtab_pollfds(struct devtab *t, struct pollfd *fds, unsigned int max)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < t->n; i++) {
		int rfd = be_dev_reap_fd(t->dev[i]);

		if (rfd >= 0 && k < max)
			fds[k++] = (struct pollfd){ rfd, POLLIN, 0 };
		int sfd = storage_watch_fd(&t->dev[i]->st);

		if (sfd >= 0 && k < max)
			fds[k++] = (struct pollfd){ sfd, POLLIN, 0 };
		for (unsigned int q = 0; q < t->dev[i]->nr_queues && k < max; q++)
			fds[k++] = (struct pollfd){ t->dev[i]->queues[q].done_fd, POLLIN, 0 };
	}
	return k;
}

void devtab_queue_done(struct devtab *t, int fd)
{
	char dev[BE_PATH_MAX];

	for (unsigned int i = 0; i < t->n; i++) {
		struct backend_dev *d = t->dev[i];

		if (be_dev_reap_fd(d) != fd)
			continue;
		if (be_dev_reaped(d) == BE_DEV_REMOVE) {
			snprintf(dev, sizeof(dev), "%s", d->be_path);
			drop(t, d);
			touch(t, dev, false);
		}
		return;
	}
	for (unsigned int i = 0; i < t->n; i++) {
		if (storage_watch_fd(&t->dev[i]->st) == fd) {
			be_dev_storage_event(t->dev[i]);
			return;
		}
		for (unsigned int q = 0; q < t->dev[i]->nr_queues; q++)
			if (t->dev[i]->queues[q].done_fd == fd) {
				be_dev_queue_done(t->dev[i], q);
				return;
			}
	}
}

void devtab_gather(const struct backend_dev *d, int q, struct be_stats *s,
		   struct gnt_pool_view *v)
{
	memset(s, 0, sizeof(*s));
	memset(v, 0, sizeof(*v));
	for (unsigned int i = 0; d->queues && i < d->nr_queues; i++) {
		struct gnt_pool_view one;

		if (q >= 0 && i != (unsigned int)q)
			continue;
		be_stats_add_to(s, &d->queues[i].stats);
		gnt_xport_pool(&d->queues[i].xport, &one);
		v->pages_free += one.pages_free;
		v->pages_in_use += one.pages_in_use;
		v->grants_mapped += one.grants_mapped;
		v->squeezes += one.squeezes;
		v->budget_pages += one.budget_pages;
	}
}

void devtab_dump_stats(const struct devtab *t, FILE *f)
{
	for (unsigned int i = 0; i < t->n; i++) {
		const struct backend_dev *d = t->dev[i];
		struct be_stats s;
		struct gnt_pool_view v;

		devtab_gather(d, -1, &s, &v);
		fprintf(f, "vbd-%u-%u: queues %u oo_req %" PRIu64 " rd_req %" PRIu64
			" wr_req %" PRIu64 " f_req %" PRIu64 " ds_req %" PRIu64
			" rd_sect %" PRIu64 " wr_sect %" PRIu64 " inflight %" PRIu64
			" adopted %" PRIu64 " replayed_req %" PRIu64
			" pool_pages_free %" PRIu64 " pool_pages_in_use %" PRIu64
			" persistent_grants %" PRIu64 " squeezes %" PRIu64
			" evt_in %" PRIu64 " evt_out %" PRIu64
			" mem_waits %" PRIu64 " budget_pages %" PRIu64
			" errors %" PRIu64 " polls %" PRIu64 " poll_hits %" PRIu64
			" helper_req %" PRIu64,
			d->fe_domid, d->devid, d->nr_queues, s.oo_req, s.rd_req, s.wr_req,
			s.f_req, s.ds_req, s.rd_sect, s.wr_sect, s.inflight, s.adopted,
			s.replayed_req, v.pages_free, v.pages_in_use, v.grants_mapped,
			v.squeezes, s.evt_in, s.evt_out, s.mem_waits, v.budget_pages,
			s.errors, s.polls, s.poll_hits, s.helper_req);
		/* latency histogram: "lat_us <from>:<count> ..." for non-empty
		 * buckets; bucket b holds [2^b, 2^(b+1)) us, bucket 0 below 2 us */
		fprintf(f, " lat_us");
		for (unsigned int b = 0; b < BE_LAT_BUCKETS; b++)
			if (s.lat[b])
				fprintf(f, " %u:%" PRIu64, b ? 1u << b : 0, s.lat[b]);
		fputc('\n', f);
	}
}

void devtab_stop(struct devtab *t)
{
	while (t->n) {
		struct backend_dev *d = t->dev[--t->n];

		be_dev_remove(d);             /* drops the table's reference */
	}
	free(t->dev);
	t->dev = NULL;
	t->cap = 0;
	free(t->rates.e);
	t->rates = (struct be_rates){ 0 };
}
