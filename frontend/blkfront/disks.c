/* SPDX-License-Identifier: MIT */
/*
 * The disk table of xbd-blkfront and its watcher thread (see disks.h).
 *
 * Watcher: one thread with its own xenstore connection as the guest.  It
 * watches device/vbd and, on each event (and every RESCAN_MS, because the
 * backend's online node lives outside our tree), compares what xenstore
 * says with the table: new vbds are opened, vbds that went away (removed,
 * backend online=0) are unlinked and closed once unused.
 *
 * Completion threads ("reapers"): one per queue of each disk, started by
 * the watcher when it opens the disk and joined by it before the close.
 * A reaper waits in xbdfront_wait() (the library's short poll of the
 * ring while requests are in flight, then its sleep on the queue's event
 * channel and on the disk's stop eventfd) and runs xbdfront_reap() when
 * there is something: the callbacks of fs.c answer the FUSE requests
 * from there, between the calls of disks_set_reap_batch()'s hook.
 * The reapers inherit the watcher's signal mask (the stop signals
 * blocked: they are main's).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "frontend/blkfront/disks.h"
#include "lib/log.h"
#include "lib/vdev.h"
#include "lib/xenbus.h"

#define RESCAN_MS 200
#define RETRY_MS 1000       /* a vbd that failed to open is tried again after */
#define MAX_FAILED 64

struct failed {
	uint32_t devid;
	struct timespec when;
};

struct disks {
	unsigned int domid;
	struct xbdfront_domain *dom;  /* not owned: main opens and closes it */
	struct xbdfront_opts opts;
	char base[64];                /* /local/domain/<N>/device/vbd */
	struct xs_handle *xs;         /* the watcher's */
	pthread_t thread;             /* the watcher */
	bool running;
	int stop_fd;                  /* eventfd: disks_stop() -> watcher */
	/* lock: the list and every disk's refs; cond: a ref dropped. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct disk *list;
	struct failed failed[MAX_FAILED];   /* watcher only */
	unsigned int nfailed;
	uint64_t serial;              /* watcher only: the last disk's serial */
	void (*write_back)(void *arg, const char *name);   /* atomic */
	void *write_back_arg;
	void (*resized)(void *arg, const char *name, uint64_t bytes);   /* atomic */
	void *resized_arg;
	void (*reap_batch)(bool end); /* atomic */
};

void disks_set_write_back(struct disks *t, void (*fn)(void *arg, const char *name),
			  void *arg)
{
	t->write_back_arg = arg;
	__atomic_store_n(&t->write_back, fn, __ATOMIC_RELEASE);
}

void disks_set_resized(struct disks *t, void (*fn)(void *arg, const char *name,
						    uint64_t bytes), void *arg)
{
	t->resized_arg = arg;
	__atomic_store_n(&t->resized, fn, __ATOMIC_RELEASE);
}

void disks_set_reap_batch(struct disks *t, void (*fn)(bool end))
{
	__atomic_store_n(&t->reap_batch, fn, __ATOMIC_RELEASE);
}

/* The disk's size becomes bytes if that is larger (it never shrinks
 * under its users: a smaller size from the backend is ignored); true
 * when it grew. */
static bool disk_grow(struct disk *d, uint64_t bytes)
{
	uint64_t old = disk_size(d);

	while (bytes > old)
		if (__atomic_compare_exchange_n(&d->size, &old, bytes, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return true;
	return false;
}

/* libxbdfront's resize hook (xbdfront_opts.resized), monitor thread. */
static void disk_resized(void *arg, uint64_t sectors)
{
	struct disk *d = arg;
	void (*fn)(void *, const char *, uint64_t);

	if (sectors > (uint64_t)INT64_MAX / 512) {      /* no file can be that big */
		log_warn("%s: the backend announced %" PRIu64 " sectors: ignored", d->name,
			 sectors);
		return;
	}
	if (!disk_grow(d, sectors * 512)) {
		log_warn("%s: the backend announced %" PRIu64 " bytes, below the disk's "
			 "%" PRIu64 ": the file keeps its size", d->name, sectors * 512,
			 disk_size(d));
		return;
	}
	log_info("%s resized: %" PRIu64 " bytes", d->name, sectors * 512);
	fn = __atomic_load_n(&d->table->resized, __ATOMIC_ACQUIRE);
	if (fn)
		fn(d->table->resized_arg, d->name, sectors * 512);
}

/* libxbdfront's detach hook (xbdfront_opts.detaching): write the disk
 * back while the watcher keeps it (see still_attached). */
static void disk_detaching(void *arg)
{
	struct disk *d = arg;
	void (*fn)(void *, const char *) = __atomic_load_n(&d->table->write_back,
							    __ATOMIC_ACQUIRE);

	if (!fn)
		return;
	__atomic_store_n(&d->writing_back, true, __ATOMIC_RELEASE);
	log_info("%s detached: writing it back and flushing it", d->name);
	fn(d->table->write_back_arg, d->name);
	__atomic_store_n(&d->writing_back, false, __ATOMIC_RELEASE);
}

struct disk *disks_get(struct disks *t, const char *name)
{
	struct disk *d;

	pthread_mutex_lock(&t->lock);
	for (d = t->list; d && strcmp(d->name, name); d = d->next)
		;
	if (d)
		d->refs++;            /* dropped by disks_put() */
	pthread_mutex_unlock(&t->lock);
	return d;
}

struct disk *disks_get_id(struct disks *t, uint32_t devid)
{
	struct disk *d;

	pthread_mutex_lock(&t->lock);
	for (d = t->list; d && d->devid != devid; d = d->next)
		;
	if (d)
		d->refs++;            /* dropped by disks_put() */
	pthread_mutex_unlock(&t->lock);
	return d;
}

void disks_put(struct disks *t, struct disk *d)
{
	pthread_mutex_lock(&t->lock);
	if (--d->refs == 0)
		pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

void disks_each(struct disks *t, void (*fn)(void *arg, const struct disk *d), void *arg)
{
	struct disk *d;

	pthread_mutex_lock(&t->lock);
	for (d = t->list; d; d = d->next)
		fn(arg, d);
	pthread_mutex_unlock(&t->lock);
}

/* A completion thread: queue q of disk d (see the top of the file).  A
 * queue that died (xbdfront_reap < 0: the device shut down, its I/O
 * failed) is not waited on again; the thread then waits for the stop. */
struct reaper_arg {
	struct disk *d;
	unsigned int q;
};

static void *reaper(void *arg)
{
	struct reaper_arg a = *(struct reaper_arg *)arg;
	struct pollfd stop = { .fd = a.d->stop_fd, .events = POLLIN };
	int rc;

	free(arg);
	for (;;) {
		/* the library polls the ring while requests are in flight,
		 * then sleeps on the event channel and on our stop fd */
		rc = xbdfront_wait(a.d->dev, a.q, -1, a.d->stop_fd);
		if (rc == 2 || (rc < 0 && rc != -EINTR))
			break;
		if (rc == 1) {
			void (*batch)(bool) = __atomic_load_n(&a.d->table->reap_batch,
							      __ATOMIC_ACQUIRE);
			int n;

			if (batch)
				batch(false);
			n = xbdfront_reap(a.d->dev, a.q, NULL, 0);
			if (batch)
				batch(true);
			if (n < 0)
				break;
		}
	}
	while (rc != 2 && poll(&stop, 1, -1) < 0 && errno == EINTR)
		;            /* dead: its I/O failed; wait for the stop */
	return NULL;
}

/* Join the completion threads that run; safe on a disk that has none. */
static void reapers_stop(struct disk *d)
{
	uint64_t one = 1;
	unsigned int i;

	if (d->nreapers && write(d->stop_fd, &one, sizeof(one)) == sizeof(one))
		for (i = 0; i < d->nreapers; i++)
			pthread_join(d->reapers[i], NULL);
	d->nreapers = 0;
	free(d->reapers);
	d->reapers = NULL;
	if (d->stop_fd >= 0)
		close(d->stop_fd);
	d->stop_fd = -1;
}

/* One completion thread per queue of d, or -errno (none left running). */
static int reapers_start(struct disk *d)
{
	struct reaper_arg *a;
	unsigned int i;
	int rc = 0;

	d->stop_fd = eventfd(0, EFD_CLOEXEC);
	d->reapers = calloc(d->nq, sizeof(*d->reapers));
	if (d->stop_fd < 0 || !d->reapers)
		rc = d->stop_fd < 0 ? -errno : -ENOMEM;
	for (i = 0; !rc && i < d->nq; i++) {
		a = malloc(sizeof(*a));
		if (!a) {
			rc = -ENOMEM;
			break;
		}
		*a = (struct reaper_arg){ d, i };   /* freed by the thread */
		rc = -pthread_create(&d->reapers[i], NULL, reaper, a);
		if (rc)
			free(a);
		else
			d->nreapers++;
	}
	if (rc)
		reapers_stop(d);
	return rc;
}

/* Close a disk already unlinked from the list: wait for the FUSE
 * operations that hold it (the library fails what the backend does not
 * answer, so they end), then close. */
static void disk_close(struct disks *t, struct disk *d)
{
	pthread_mutex_lock(&t->lock);
	while (d->refs)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
	reapers_stop(d);
	xbdfront_close(d->dev);
	log_info("%s closed", d->name);
	free(d);
}

static long ms_since(const struct timespec *then)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - then->tv_sec) * 1000 + (now.tv_nsec - then->tv_nsec) / 1000000;
}

/* Whether devid failed to open less than RETRY_MS ago. */
static bool recently_failed(struct disks *t, uint32_t devid)
{
	for (unsigned int i = 0; i < t->nfailed; i++)
		if (t->failed[i].devid == devid)
			return ms_since(&t->failed[i].when) < RETRY_MS;
	return false;
}

static void note_failed(struct disks *t, uint32_t devid)
{
	unsigned int i;

	for (i = 0; i < t->nfailed && t->failed[i].devid != devid; i++)
		;
	if (i == t->nfailed) {
		if (t->nfailed == MAX_FAILED)
			i = 0;               /* forget the oldest slot */
		else
			t->nfailed++;
	}
	t->failed[i].devid = devid;
	clock_gettime(CLOCK_MONOTONIC, &t->failed[i].when);
}

static int disk_open(struct disks *t, uint32_t devid)
{
	struct xbdfront_info info;
	struct xbdfront_opts opts = t->opts;
	char id[16], why[sizeof(info.reason)];
	struct disk *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	d->devid = devid;
	d->table = t;
	opts.detaching = disk_detaching;     /* d outlives the device */
	opts.detaching_arg = d;
	opts.resized = disk_resized;         /* d outlives the device */
	opts.resized_arg = d;
	d->stop_fd = -1;
	if (xbd_vdev_name(devid, d->name, sizeof(d->name)) < 0)
		snprintf(d->name, sizeof(d->name), "%" PRIu32, devid);
	snprintf(id, sizeof(id), "%" PRIu32, devid);
	rc = xbdfront_open_in_why(t->dom, id, &opts, &d->dev, why, sizeof(why));
	if (rc) {
		log_err("cannot connect %s: %s%s%s", d->name, strerror(-rc), why[0] ? "; " : "",
			why);
		free(d);
		return rc;
	}
	xbdfront_get_info(d->dev, &info);
	d->nq = info.nr_queues;
	d->serial = ++t->serial;
	rc = reapers_start(d);
	if (rc) {
		log_err("%s: cannot start its completion threads: %s", d->name, strerror(-rc));
		xbdfront_close(d->dev);
		free(d);
		return rc;
	}
	(void)disk_grow(d, info.sectors * 512);    /* a resize may have come first */
	d->sector_size = info.sector_size;
	d->readonly = info.readonly;
	d->discard = info.discard;
	d->flush = info.flush || info.barrier;
	log_info("%s connected: %" PRIu64 " bytes, %u queue(s), %s", d->name, disk_size(d),
		 info.nr_queues, d->readonly ? "read-only" : "read-write");
	pthread_mutex_lock(&t->lock);
	d->next = t->list;
	t->list = d;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* Whether the vbd devid (listed under device/vbd) is still attached:
 * the backend's online node says 1.  A device that died (its backend
 * broke the protocol) stays in the table, its file failing every call
 * with EIO, until the toolstack detaches it, as a Linux guest keeps the
 * disk of a blkfront in error: no reconnect against that backend, and
 * no file vanishing under its users. */
static bool still_attached(struct disks *t, const struct disk *d)
{
	char fe[96], be[256];
	unsigned int online;

	if (__atomic_load_n(&d->writing_back, __ATOMIC_ACQUIRE))
		return true;         /* detached, but its cache goes out first */
	snprintf(fe, sizeof(fe), "%s/%" PRIu32, t->base, d->devid);
	return !xbd_xs_read_buf(t->xs, XBT_NULL, fe, "backend", be, sizeof(be)) &&
	       !xbd_xs_read_uint(t->xs, XBT_NULL, be, "online", 0, 1, &online) && online;
}

static bool listed(char **names, unsigned int n, uint32_t devid)
{
	char id[16];

	snprintf(id, sizeof(id), "%" PRIu32, devid);
	for (unsigned int i = 0; i < n; i++)
		if (!strcmp(names[i], id))
			return true;
	return false;
}

/* Unlink and close every disk that went away. */
static void reap_gone(struct disks *t, char **names, unsigned int n)
{
	struct disk **pp, *d, *gone;

	for (;;) {
		gone = NULL;
		pthread_mutex_lock(&t->lock);
		for (pp = &t->list; (d = *pp); pp = &d->next) {
			if (!listed(names, n, d->devid) || !still_attached(t, d)) {
				*pp = d->next;
				gone = d;
				break;
			}
		}
		pthread_mutex_unlock(&t->lock);
		if (!gone)
			return;
		log_info("%s detached", gone->name);
		disk_close(t, gone);
	}
}

static bool in_table(struct disks *t, uint32_t devid)
{
	struct disk *d;

	pthread_mutex_lock(&t->lock);
	for (d = t->list; d && d->devid != devid; d = d->next)
		;
	pthread_mutex_unlock(&t->lock);
	return d != NULL;
}

/* Open every listed vbd not in the table whose backend is online. */
static void open_new(struct disks *t, char **names, unsigned int n)
{
	char fe[96], be[256];
	unsigned int online;
	uint32_t devid;
	char *end;

	for (unsigned int i = 0; i < n; i++) {
		unsigned long v = strtoul(names[i], &end, 10);

		if (*end || end == names[i] || v > INT32_MAX)
			continue;            /* not a device id: not ours to judge */
		devid = (uint32_t)v;
		if (in_table(t, devid) || recently_failed(t, devid))
			continue;
		snprintf(fe, sizeof(fe), "%s/%s", t->base, names[i]);
		if (xbd_xs_read_buf(t->xs, XBT_NULL, fe, "backend", be, sizeof(be)) ||
		    xbd_xs_read_uint(t->xs, XBT_NULL, be, "online", 0, 1, &online) || !online)
			continue;            /* being detached or half written */
		if (disk_open(t, devid))
			note_failed(t, devid);
	}
}

static void rescan(struct disks *t)
{
	char **names = NULL;
	unsigned int n = 0;
	int rc = xbd_xs_directory(t->xs, XBT_NULL, t->base, NULL, &names, &n);

	if (rc && rc != -ENOENT) {
		log_warn("cannot list %s: %s", t->base, strerror(-rc));
		return;
	}
	reap_gone(t, names, n);
	open_new(t, names, n);
	free(names);
}

/* The watcher thread. */
static void *watcher(void *arg)
{
	struct disks *t = arg;
	struct pollfd p[2] = {
		{ .fd = t->stop_fd, .events = POLLIN },
		{ .fd = xbd_xs_watch_fd(t->xs), .events = POLLIN },
	};
	char path[256], token[16];

	for (;;) {
		rescan(t);
		if (poll(p, 2, RESCAN_MS) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		while (xbd_xs_next_event(t->xs, path, sizeof(path), token, sizeof(token)) > 0)
			;
	}
	return NULL;
}

int disks_start(struct xbdfront_domain *dom, const struct xbdfront_opts *opts,
		struct disks **out)
{
	unsigned int domid = xbdfront_domain_id(dom);
	char sock[4096];
	const char *rundir = opts->rundir ? opts->rundir : getenv("XBD_RUNDIR");
	struct disks *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->domid = domid;
	t->dom = dom;
	t->opts = *opts;
	t->stop_fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	snprintf(t->base, sizeof(t->base), "/local/domain/%u/device/vbd", domid);
	if (opts->platform && !strcmp(opts->platform, "xen"))
		rc = xbd_xs_open(NULL, &t->xs);
	else if (snprintf(sock, sizeof(sock), "%s/dom%u/xenstore.sock",
			  rundir ? rundir : "/run/xbd", domid) >= (int)sizeof(sock))
		rc = -ENAMETOOLONG;
	else
		rc = xbd_xs_open(sock, &t->xs);
	if (!rc)
		rc = xbd_xs_watch(t->xs, t->base, "vbd");
	if (!rc && (t->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0)
		rc = -errno;
	if (!rc)
		rc = -pthread_create(&t->thread, NULL, watcher, t);
	if (rc) {
		disks_stop(t);
		return rc;
	}
	t->running = true;
	*out = t;
	return 0;
}

void disks_stop(struct disks *t)
{
	uint64_t one = 1;
	struct disk *d;

	if (!t)
		return;
	if (t->running && write(t->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(t->thread, NULL);
	for (;;) {
		pthread_mutex_lock(&t->lock);
		d = t->list;
		if (d)
			t->list = d->next;
		pthread_mutex_unlock(&t->lock);
		if (!d)
			break;
		disk_close(t, d);
	}
	if (t->stop_fd >= 0)
		close(t->stop_fd);
	if (t->xs)
		xs_close(t->xs);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	free(t);
}
