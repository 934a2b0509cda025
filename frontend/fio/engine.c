/* SPDX-License-Identifier: MIT */
/*
 * xbd-fio.so: a fio external ioengine in which the fio process itself is
 * the guest.  `ioengine=external:PATH/xbd-fio.so xbd_domain=NAME
 * xbd_vdev=xvdb size=...` opens the disk with libxbdfront (claiming the
 * domain) and drives it asynchronously.
 *
 * Built against the installed fio's own headers (fio.h, ioengines.h from
 * Debian's source package of exactly the installed version, unpacked by
 * scripts/fio-src.sh): thread_data, io_u and fio_file are fio's own
 * structures, FIO_IOOPS_VERSION is fio's, and at load the engine checks
 * that the fio running it is the version its headers came from.
 *
 * I/O: queue() only notes the io_u; commit() turns fio's batch into
 * descriptors and submits them with one xbdfront_submit() and one
 * xbdfront_commit() (one publish, at most one notification);
 * getevents(min, max, t) reaps completion entries in batches and, while
 * it has fewer than min, waits in xbdfront_wait() (a short adaptive poll
 * of the ring, then the event channel) until t; event() hands them out.
 *
 * Jobs and queues: one domain handle per domain and one device per disk
 * in each fio process, shared by the job threads (--thread) that use
 * them and opened by the first job's init; jobs may name different disks
 * (xbd_vdev per job) of the same domain.  Among the jobs of one disk,
 * job k drives queue k % nr_queues, as blk-mq maps CPUs to hardware
 * queues; a job that reaps another's completion hands it to that job
 * (route()).  A domain has a single claimer, so jobs run as processes
 * (fio's default) cannot share a domain: the second one fails its init
 * with a one-line message naming the claimer and --thread.
 *
 * Zero copy: fio's I/O buffers come from the engine (iomem_alloc), in
 * memory granted to the backend (xbdfront_buf_alloc), so requests carry
 * fio's own pages and libxbdfront bounces nothing.
 *
 * Locks: engine_lock guards the domain, device and job tables; each job
 * (struct job) is used only by its own fio thread, but for done[]
 * (done_lock), where other jobs of its queue route its completions.
 * Lifetime: a job is created by whichever of iomem_alloc and init runs
 * first (iomem_alloc, in fio 3.33); its buffers go at iomem_free or, at
 * the latest, at cleanup; a device is closed when the last job using it
 * is cleaned up, its domain when its last device is.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* fio's own headers (their directory comes first on the include path) */
#include "fio.h"
#include "ioengines.h"
#include "optgroup.h"

#include "frontend/xbdfront.h"
#include "lib/log.h"
#include "lib/num.h"

#if FIO_IOOPS_VERSION != 31
#error "frontend/fio/engine.c is written for FIO_IOOPS_VERSION 31 (fio 3.33)"
#endif

/* The engine's option struct (td->eo).  Offset 0 is unused because fio
 * treats off1 == 0 as "not stored". */
struct xbd_eo {
	void *pad;
	char *domain, *vdev, *rundir, *queues, *ring_order, *indirect, *persistent,
	     *timeout, *platform, *zero_copy, *stats, *poll;
};

struct shared_dom {
	char key[256];                  /* domain, rundir and platform */
	struct xbdfront_domain *dom;
	unsigned int users;             /* shared_devs on it */
	struct shared_dom *next;
};

struct shared_dev {
	char key[256];                  /* domain, vdev and options */
	struct shared_dom *sdom;        /* one user of it */
	struct xbdfront_dev *dev;
	unsigned int users, next_queue;
	struct shared_dev *next;
};

struct job {
	struct thread_data *td;
	struct shared_dev *sd;
	unsigned int q;
	unsigned int inflight;          /* queued, not yet handed to fio */
	/* queue(): io_us noted for the next commit(), at most iodepth */
	struct io_u **pending;
	struct xbdfront_sqe *sqe;
	struct iovec *iov;
	unsigned int npending, cap;
	struct io_u **events;           /* for event(): this getevents' batch */
	unsigned int nevents;
	/* done_lock: done[], the job's completions reaped by any job sharing
	 * its queue (another job's getevents may reap ours). */
	pthread_mutex_t done_lock;
	int wake_fd;                    /* eventfd: another job routed to done[] */
	struct io_u **done;
	unsigned int ndone;
	/* fio's I/O buffers (iomem_alloc), NULL when fio has none from us;
	 * granted: from xbdfront_buf_alloc (zero copy), else aligned_alloc. */
	void *buf;
	size_t buf_len;
	bool granted, zero_copy, print_stats;
	uint64_t nr_direct, nr_bounced;  /* reads and writes queued, by path */
	char vdev[32];                  /* for xbd_stats */
	struct job *next;
};

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_dom *domains;      /* under engine_lock */
static struct shared_dev *devices;      /* under engine_lock */
static struct job *jobs;                /* under engine_lock */

/* ---- options ------------------------------------------------------------- */

#define STR_OPT(n, field, h, d) { .name = (n), .lname = (n), .type = FIO_OPT_STR_STORE, \
	.off1 = offsetof(struct xbd_eo, field), .help = (h), .def = (d), \
	.category = FIO_OPT_C_ENGINE, .group = FIO_OPT_G_INVALID }

static struct fio_option options[] = {
	STR_OPT("xbd_domain", domain, "Local domain (name or id) this fio process becomes", NULL),
	STR_OPT("xbd_vdev", vdev, "Virtual disk of the domain (xvdb, 51728...), per job", NULL),
	STR_OPT("xbd_rundir", rundir, "The local machine's directory ($XBD_RUNDIR)", NULL),
	STR_OPT("xbd_platform", platform, "auto, local or xen", "auto"),
	STR_OPT("xbd_max_queues", queues, "Queues to ask for (max_queues)", "4"),
	STR_OPT("xbd_max_ring_page_order", ring_order, "Ring pages 2^N per queue", "0"),
	STR_OPT("xbd_max_indirect_segments", indirect, "Indirect segments, 0 = off", "256"),
	STR_OPT("xbd_feature_persistent", persistent, "Offer persistent grants (0/1)", "1"),
	STR_OPT("xbd_timeout", timeout, "Milliseconds to wait for the backend", "10000"),
	STR_OPT("xbd_poll_duration_us", poll, "Spin at most this long on a ring with I/O in "
		"flight before sleeping (0 = never)", "50"),
	STR_OPT("xbd_zero_copy", zero_copy, "fio's buffers in memory granted to the backend: "
		"no bounce copy (0/1)", "1"),
	STR_OPT("xbd_stats", stats, "At the end, print each job's zero-copy and bounced "
		"request counts and its queue's counters (0/1)", "0"),
	{ .name = NULL },
};

/* Parse the string options into libxbdfront's; -EINVAL with a message. */
static int opts_from(const struct xbd_eo *eo, struct xbdfront_opts *o)
{
	long long q, r, i, p, t, u;

	xbdfront_opts_default(o);
	if (!eo->domain || !eo->vdev) {
		fprintf(stderr, "xbd: xbd_domain= and xbd_vdev= are required\n");
		return -EINVAL;
	}
	q = xbd_num_in(eo->queues, 1, 64);
	r = xbd_num_in(eo->ring_order, 0, 5);
	i = xbd_num_in(eo->indirect, 0, 4096);
	p = xbd_num_in(eo->persistent, 0, 1);
	t = xbd_num_in(eo->timeout, 1, 3600000);
	u = xbd_num_in(eo->poll, 0, XBDFRONT_POLL_DURATION_US_MAX);
	if (q < 0 || r < 0 || i < 0 || p < 0 || t < 0 || u < 0) {
		fprintf(stderr, "xbd: bad xbd_max_queues, xbd_max_ring_page_order, "
			"xbd_max_indirect_segments, xbd_feature_persistent, xbd_timeout or "
			"xbd_poll_duration_us\n");
		return -EINVAL;
	}
	if (q > XBDFRONT_MAX_QUEUES) {
		fprintf(stderr, "xbd: xbd_max_queues=%lld capped at %u, the most queues a "
			"disk has\n", (long long)q, XBDFRONT_MAX_QUEUES);
		q = XBDFRONT_MAX_QUEUES;
	}
	o->max_queues = (unsigned int)q;
	o->max_ring_page_order = (unsigned int)r;
	o->max_indirect_segs = (unsigned int)i;
	o->persistent = p == 1;
	o->connect_timeout_ms = (unsigned int)t;
	o->poll_duration_us = (unsigned int)u;
	o->platform = eo->platform;
	o->rundir = eo->rundir;
	return 0;
}

/* ---- the shared device ------------------------------------------------------ */

/* The domain handle for eo, claimed on first use; engine_lock held. */
static int domain_get(const struct xbd_eo *eo, const struct xbdfront_opts *o,
		      struct shared_dom **out)
{
	struct shared_dom *sd;
	unsigned int domid = 0;
	int claimer = 0, rc;
	char key[256];

	snprintf(key, sizeof(key), "%s|%s|%s", eo->domain, eo->rundir ? eo->rundir : "",
		 o->platform ? o->platform : "");
	for (sd = domains; sd && strcmp(sd->key, key); sd = sd->next)
		;
	if (sd)
		goto found;
	rc = xbdfront_domain_resolve(eo->domain, o, &domid, &claimer);
	if (rc) {
		fprintf(stderr, "xbd: domain %s: %s\n", eo->domain, strerror(-rc));
		return rc;
	}
	sd = calloc(1, sizeof(*sd));
	if (!sd)
		return -ENOMEM;
	rc = xbdfront_domain_open(domid, o, &sd->dom);
	if (rc == -EBUSY)
		fprintf(stderr, "xbd: domain %s is claimed by process %d: jobs of one fio run "
			"sharing a domain must be threads (add --thread)\n", eo->domain, claimer);
	else if (rc)
		fprintf(stderr, "xbd: cannot claim domain %s: %s\n", eo->domain, strerror(-rc));
	if (rc) {
		free(sd);
		return rc;
	}
	snprintf(sd->key, sizeof(sd->key), "%s", key);
	sd->next = domains;
	domains = sd;
found:
	sd->users++;                    /* dropped by domain_put() */
	*out = sd;
	return 0;
}

/* engine_lock held. */
static void domain_put(struct shared_dom *sd)
{
	struct shared_dom **pp;

	if (--sd->users)
		return;
	for (pp = &domains; *pp != sd; pp = &(*pp)->next)
		;
	*pp = sd->next;
	xbdfront_domain_close(sd->dom);
	free(sd);
}

/* The device for eo, opened on first use; engine_lock held. */
static int device_get(const struct xbd_eo *eo, struct shared_dev **out)
{
	struct xbdfront_opts o;
	struct shared_dev *sd;
	char key[256];
	int rc = opts_from(eo, &o);

	if (rc)
		return rc;
	snprintf(key, sizeof(key), "%s|%s|%s|%u|%u|%u|%d|%u", eo->domain, eo->vdev,
		 eo->rundir ? eo->rundir : "", o.max_queues, o.max_ring_page_order,
		 o.max_indirect_segs, o.persistent, o.poll_duration_us);
	for (sd = devices; sd; sd = sd->next)
		if (!strcmp(sd->key, key))
			goto found;
	sd = calloc(1, sizeof(*sd));
	if (!sd)
		return -ENOMEM;
	rc = domain_get(eo, &o, &sd->sdom);
	if (rc) {
		free(sd);
		return rc;
	}
	rc = xbdfront_open_in(sd->sdom->dom, eo->vdev, &o, &sd->dev);
	if (rc) {
		fprintf(stderr, "xbd: cannot open %s of domain %s: %s%s\n", eo->vdev, eo->domain,
			strerror(-rc), rc == -EBUSY ? " (jobs of one disk need the same "
			"xbd_max_*, xbd_feature_persistent and xbd_poll_duration_us options)" : "");
		domain_put(sd->sdom);
		free(sd);
		return rc;
	}
	snprintf(sd->key, sizeof(sd->key), "%s", key);
	sd->next = devices;
	devices = sd;
found:
	sd->users++;                    /* dropped by device_put() */
	*out = sd;
	return 0;
}

/* engine_lock held. */
static void device_put(struct shared_dev *sd)
{
	struct shared_dev **pp;

	if (--sd->users)
		return;
	for (pp = &devices; *pp != sd; pp = &(*pp)->next)
		;
	*pp = sd->next;
	xbdfront_close(sd->dev);
	domain_put(sd->sdom);
	free(sd);
}

/* The calling fio thread's job, found once: queue(), commit(),
 * getevents() and event() run per request, and a lookup under
 * engine_lock each time cost a tenth of the engine's CPU.  Only a job's
 * own thread uses it, and xbd_cleanup (in that thread) forgets it. */
static __thread struct job *my_job;

static struct job *job_of(struct thread_data *td)
{
	struct job *j;

	if (my_job && my_job->td == td)
		return my_job;
	pthread_mutex_lock(&engine_lock);
	for (j = jobs; j && j->td != td; j = j->next)
		;
	pthread_mutex_unlock(&engine_lock);
	my_job = j;
	return j;
}

/* ---- engine hooks ------------------------------------------------------------ */

/* The job's per-job options and its arrays for iodepth requests; -errno
 * with a message. */
static int job_setup(const struct xbd_eo *eo, struct thread_data *td, struct job *j)
{
	long long z = xbd_num_in(eo->zero_copy, 0, 1), st = xbd_num_in(eo->stats, 0, 1);
	unsigned int n = td->o.iodepth ? td->o.iodepth : 1;

	if (z < 0 || st < 0) {
		fprintf(stderr, "xbd: bad xbd_zero_copy or xbd_stats (0 or 1)\n");
		return -EINVAL;
	}
	j->zero_copy = z == 1;
	j->print_stats = st == 1;
	snprintf(j->vdev, sizeof(j->vdev), "%s", eo->vdev ? eo->vdev : "");
	j->cap = n;
	j->pending = calloc(n, sizeof(*j->pending));
	j->sqe = calloc(n, sizeof(*j->sqe));
	j->iov = calloc(n, sizeof(*j->iov));
	j->events = calloc(n, sizeof(*j->events));
	j->done = calloc(n, sizeof(*j->done));
	if (!j->pending || !j->sqe || !j->iov || !j->events || !j->done)
		return -ENOMEM;
	return 0;
}

static void job_free(struct job *j)
{
	pthread_mutex_destroy(&j->done_lock);
	if (j->wake_fd >= 0)
		close(j->wake_fd);
	free(j->pending);
	free(j->sqe);
	free(j->iov);
	free(j->events);
	free(j->done);
	free(j);
}

/*
 * The calling thread's job, opening (or sharing) its device: by init(),
 * or earlier by iomem_alloc(), which fio 3.33 calls first (init_io_u()
 * allocates the buffers before td_io_init()).  NULL after a message.
 */
static struct job *job_attach(struct thread_data *td)
{
	struct xbd_eo *eo = td->eo;
	struct job *j;
	int rc;

	if (!eo)
		return NULL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->td = td;
	pthread_mutex_init(&j->done_lock, NULL);
	j->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = j->wake_fd < 0 ? -errno : job_setup(eo, td, j);
	pthread_mutex_lock(&engine_lock);
	rc = rc ? rc : device_get(eo, &j->sd);
	if (!rc) {
		j->q = j->sd->next_queue++ % xbdfront_nr_queues(j->sd->dev);
		j->next = jobs;
		jobs = j;
	}
	pthread_mutex_unlock(&engine_lock);
	if (rc) {
		job_free(j);
		return NULL;
	}
	my_job = j;
	return j;
}

static int xbd_init(struct thread_data *td)
{
	return job_of(td) || job_attach(td) ? 0 : 1;
}

/* Give back the job's I/O buffers.  A granted buffer the backend still
 * maps (persistent grants) stays registered with the device, which frees
 * it when it closes (xbdfront_buf_free's -EBUSY). */
static void buf_release(struct job *j)
{
	if (!j->buf)
		return;
	if (j->granted)
		(void)xbdfront_buf_free(j->sd->dev, j->buf);
	else
		free(j->buf);
	j->buf = NULL;
	j->granted = false;
}

/* xbd_stats=1: the job's request paths and its queue's counters. */
static void print_stats(struct job *j)
{
	struct xbdfront_queue_stats st = { 0 };

	(void)xbdfront_queue_stats(j->sd->dev, j->q, &st);
	fprintf(stderr, "xbd: %s queue %u: %llu requests zero-copy, %llu bounced; "
		"%llu commits, %llu notifies, %llu events, %llu polls, %llu poll hits\n",
		j->vdev, j->q, (unsigned long long)j->nr_direct,
		(unsigned long long)j->nr_bounced, (unsigned long long)st.commits,
		(unsigned long long)st.notifies, (unsigned long long)st.events,
		(unsigned long long)st.polls, (unsigned long long)st.poll_hits);
}

static void xbd_cleanup(struct thread_data *td)
{
	struct job **pp, *j;

	pthread_mutex_lock(&engine_lock);
	for (pp = &jobs; (j = *pp) && j->td != td; pp = &j->next)
		;
	if (j) {
		*pp = j->next;
		if (j->print_stats)
			print_stats(j);
		buf_release(j);         /* fio 3.33 called iomem_free already */
		device_put(j->sd);
	}
	pthread_mutex_unlock(&engine_lock);
	if (my_job == j)
		my_job = NULL;
	if (j)
		job_free(j);
}

/*
 * fio's buffers for every io_u of the job (iodepth x max bs, plus
 * alignment): with xbd_zero_copy=1 (the default) memory granted to the
 * backend (xbdfront_buf_alloc), so reads land in fio's buffers and writes
 * leave from them with no bounce copy; otherwise, or when the grant
 * fails (a message says why), plain page-aligned memory.
 */
static int xbd_iomem_alloc(struct thread_data *td, size_t total)
{
	struct job *j = job_of(td);
	void *buf = NULL;

	if (!j && !(j = job_attach(td)))
		return EINVAL;
	buf_release(j);
	if (j->zero_copy) {
		buf = xbdfront_buf_alloc(j->sd->dev, total);
		if (!buf)
			fprintf(stderr, "xbd: cannot grant fio's %zu bytes of buffers (%s): "
				"I/O is bounced\n", total, strerror(errno));
	}
	j->granted = buf != NULL;
	if (!buf)
		buf = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	if (!buf)
		return ENOMEM;
	j->buf = buf;
	j->buf_len = total;
	td->orig_buffer = buf;
	return 0;
}

/* fio clears td->orig_buffer itself after this. */
static void xbd_iomem_free(struct thread_data *td)
{
	struct job *j = job_of(td);

	if (j)
		buf_release(j);
}

static const uint8_t ddir_op[] = {
	[DDIR_READ] = XBDFRONT_READ,
	[DDIR_WRITE] = XBDFRONT_WRITE,
	[DDIR_TRIM] = XBDFRONT_DISCARD,
	[DDIR_SYNC] = XBDFRONT_FLUSH,
	[DDIR_DATASYNC] = XBDFRONT_FLUSH,
};

/* Hand one completion to the job that queued it (io_u->engine_data);
 * self is the job reaping. */
static void route(struct job *self, struct io_u *u, int status)
{
	struct job *owner = u->engine_data;
	uint64_t one = 1;
	bool wake;

	u->error = status < 0 ? -status : 0;
	u->resid = u->error ? u->xfer_buflen : 0;
	pthread_mutex_lock(&owner->done_lock);
	/* One wake-up per batch: the owner sleeps only after its reap() left
	 * done[] empty, so only the first completion added after that needs to
	 * wake it; later ones are taken by the same reap.  done[] holds the
	 * owner's iodepth: it cannot overflow. */
	wake = owner != self && owner->ndone == 0;
	owner->done[owner->ndone++] = u;
	pthread_mutex_unlock(&owner->done_lock);
	if (wake && write(owner->wake_fd, &one, sizeof(one)) < 0)
		abort();                /* an eventfd below its maximum cannot fail */
}

/* The descriptor for io_u u (its iovec in iov). */
static void describe(struct job *j, struct io_u *u, struct xbdfront_sqe *s, struct iovec *iov)
{
	bool rw = u->ddir == DDIR_READ || u->ddir == DDIR_WRITE;
	bool trim = u->ddir == DDIR_TRIM;
	const char *b = j->buf;

	*iov = (struct iovec){ u->xfer_buf, u->xfer_buflen };
	*s = (struct xbdfront_sqe){ .op = ddir_op[u->ddir], .iovcnt = rw, .iov = rw ? iov : NULL,
				    .offset = rw || trim ? u->offset : 0,
				    .len = rw || trim ? u->xfer_buflen : 0,
				    .user_data = (uintptr_t)u };
	if (!rw)
		return;
	if (j->granted && (const char *)u->xfer_buf >= b &&
	    (const char *)u->xfer_buf + u->xfer_buflen <= b + j->buf_len)
		j->nr_direct++;
	else
		j->nr_bounced++;
}

/* fio's batch is noted here; commit() sends it. */
static enum fio_q_status xbd_queue(struct thread_data *td, struct io_u *u)
{
	struct job *j = job_of(td);

	if (!j || u->ddir > DDIR_DATASYNC || j->npending == j->cap) {
		u->error = EINVAL;
		return FIO_Q_COMPLETED;
	}
	u->engine_data = j;             /* route() gives the completion back to us */
	j->pending[j->npending++] = u;
	j->inflight++;
	return FIO_Q_QUEUED;
}

static void route_all(struct job *j);

/* The batch as descriptors: one submit, one publish.  A refused
 * descriptor completes with its error through done[]; when every
 * descriptor of the queue is a completion entry not reaped yet (an
 * iodepth above the queue's descriptors), they are routed first. */
static int xbd_commit(struct thread_data *td)
{
	struct job *j = job_of(td);
	unsigned int i, done = 0;
	int rc;

	if (!j || !j->npending)
		return 0;
	for (i = 0; i < j->npending; i++)
		describe(j, j->pending[i], &j->sqe[i], &j->iov[i]);
	while (done < j->npending) {
		rc = xbdfront_submit(j->sd->dev, j->q, j->sqe + done, j->npending - done);
		if (rc > 0)
			done += (unsigned int)rc;
		else if (rc == -EBUSY)
			route_all(j);
		else
			route(j, j->pending[done++], rc ? rc : -EIO);
	}
	j->npending = 0;
	rc = xbdfront_commit(j->sd->dev, j->q);
	return rc == -ENODEV || rc == -EIO ? 0 : rc;   /* dead: the requests fail themselves */
}

/* Route every completion waiting in the job's queue to its job; the
 * last reap's result (< 0: the device died). */
static int route_all_rc(struct job *j)
{
	struct xbdfront_cqe cqe[64];
	unsigned int i;
	int n;

	while ((n = xbdfront_reap(j->sd->dev, j->q, cqe, 64)) > 0)
		for (i = 0; i < (unsigned int)n; i++)
			route(j, (struct io_u *)(uintptr_t)cqe[i].user_data, cqe[i].res);
	return n;
}

static void route_all(struct job *j)
{
	(void)route_all_rc(j);
}

/* Route every completion waiting in the job's queue, then move up to max
 * of the job's own into j->events. */
static int reap(struct job *j, unsigned int max)
{
	unsigned int take;
	int n = route_all_rc(j);

	pthread_mutex_lock(&j->done_lock);
	take = j->ndone < max - j->nevents ? j->ndone : max - j->nevents;
	if (take) {
		memcpy(j->events + j->nevents, j->done, take * sizeof(*j->done));
		memmove(j->done, j->done + take, (j->ndone - take) * sizeof(*j->done));
		j->ndone -= take;
	}
	pthread_mutex_unlock(&j->done_lock);
	j->nevents += take;
	j->inflight -= take;
	return n < 0 ? n : 0;
}

static long ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* At least min completions (fewer only once t passed or nothing more is
 * in flight), at most max. */
static int xbd_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			 const struct timespec *t)
{
	struct job *j = job_of(td);
	struct timespec deadline;
	uint64_t drain;
	long left = 100;
	int rc;

	if (!j)
		return -EINVAL;
	if (max > j->cap)
		max = j->cap;
	(void)xbd_commit(td);
	j->nevents = 0;
	if (t) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += t->tv_sec;
		deadline.tv_nsec += t->tv_nsec;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	}
	for (;;) {
		rc = reap(j, max);
		if (rc < 0 && !j->nevents && !min)
			return rc;
		if (j->nevents >= min || j->nevents == max || !j->inflight)
			break;
		if (t && (left = ms_left(&deadline)) <= 0)
			break;
		rc = xbdfront_wait(j->sd->dev, j->q, t ? (int)left : 100, j->wake_fd);
		if (rc == 2 && read(j->wake_fd, &drain, sizeof(drain)) < 0 && errno != EAGAIN)
			return -errno;
	}
	return (int)j->nevents;
}

static struct io_u *xbd_event(struct thread_data *td, int i)
{
	struct job *j = job_of(td);

	return j && i >= 0 && (unsigned int)i < j->nevents ? j->events[i] : NULL;
}

/* A backend publishes sectors only once connected: open the disk for a
 * moment (fio asks in its main process, before the jobs that claim the
 * domain start), and close it so a job process can claim it. */
static int disk_bytes_by_open(const struct xbd_eo *eo, uint64_t *out)
{
	struct shared_dev *sd;
	struct xbdfront_info info;
	int rc;

	pthread_mutex_lock(&engine_lock);
	rc = device_get(eo, &sd);
	if (!rc) {
		xbdfront_get_info(sd->dev, &info);
		*out = info.sectors * 512;
		device_put(sd);
	}
	pthread_mutex_unlock(&engine_lock);
	return rc;
}

/*
 * The disk's size, for fio's file size (so offset= and offset_increment=
 * work as on a block device).  fio may ask before init() and in a process
 * that will not do the I/O, so this reads the backend's sectors node
 * without opening the disk (xbdfront_peek_sectors).  fio asks once, in
 * setup_files(), and sizes the job's region and random map from it: a
 * later online grow is not followed (no resized callback; Documentation/
 * guest.md, "An online resize is not followed by a running job").
 */
static int xbd_get_file_size(struct thread_data *td, struct fio_file *f)
{
	struct xbd_eo *eo = td->eo;
	struct xbdfront_opts o;
	unsigned int domid;
	uint64_t sectors = 0, bytes = 0;
	int rc;

	if (!eo || !eo->domain || !eo->vdev || opts_from(eo, &o))
		return 0;               /* init() reports what is wrong */
	rc = xbdfront_domain_resolve(eo->domain, &o, &domid, NULL);
	if (!rc)
		rc = xbdfront_peek_sectors(domid, eo->vdev, &o, &sectors);
	bytes = sectors * 512;
	if (rc == -ENOENT)
		rc = disk_bytes_by_open(eo, &bytes);
	if (rc) {
		fprintf(stderr, "xbd: size of %s of domain %s: %s\n", eo->vdev, eo->domain,
			strerror(-rc));
		return 1;
	}
	f->real_file_size = bytes;
	fio_file_set_size_known(f);
	return 0;
}

/* No file descriptors: the disk is the device libxbdfront opened. */
static int xbd_open_file(struct thread_data *td, struct fio_file *f)
{
	(void)td; (void)f;
	return 0;
}

static int xbd_close_file(struct thread_data *td, struct fio_file *f)
{
	(void)td; (void)f;
	return 0;
}

static struct ioengine_ops ops = {
	.name = "xbd",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL,
	.init = xbd_init,
	.queue = xbd_queue,
	.commit = xbd_commit,
	.getevents = xbd_getevents,
	.event = xbd_event,
	.cleanup = xbd_cleanup,
	.open_file = xbd_open_file,
	.close_file = xbd_close_file,
	.get_file_size = xbd_get_file_size,
	.iomem_alloc = xbd_iomem_alloc,
	.iomem_free = xbd_iomem_free,
	.option_struct_size = sizeof(struct xbd_eo),
	.options = options,
};

/* The version string of the fio running us (exported by the fio binary;
 * weak, so the .so still loads, and refuses, outside fio). */
extern const char fio_version_string[] __attribute__((weak));

/* The symbol fio looks up in an external engine. */
void get_ioengine(struct ioengine_ops **out);
void get_ioengine(struct ioengine_ops **out)
{
	if (!fio_version_string || strcmp(fio_version_string, XBD_FIO_VERSION)) {
		fprintf(stderr, "xbd: built for %s, running in %s: rebuild xbd-fio.so "
			"(make) against this fio's source\n", XBD_FIO_VERSION,
			fio_version_string ? fio_version_string : "not fio");
		ops.version = -1;       /* fio refuses it with "bad ioops version" */
	}
	xbd_log_init("xbd-fio", XBD_LOG_WARN, false);
	*out = &ops;
}
