/* SPDX-License-Identifier: MIT */
/*
 * xbd-fio.so: a fio external ioengine in which the fio process itself is
 * the guest.  `ioengine=external:PATH/xbd-fio.so xbd_domain=NAME
 * xbd_vdev=xvdb size=...` opens the disk with libxbdfront (claiming the
 * domain) and drives it asynchronously through the queue layer
 * (frontend/queue.h): queue() puts the request on the ring unpublished,
 * commit() publishes fio's batch with one index store and at most one
 * notification, getevents() reaps what is on the ring and sleeps in poll()
 * on the queue's event channel only when nothing is, event() hands the
 * completions back.  Nothing is synchronous behind fio's back; the
 * in-flight depth is fio's iodepth.
 *
 * Jobs and queues: one domain handle per domain and one device per disk
 * in each fio process, shared by the job threads (--thread) that use
 * them and opened by the first job's init; jobs may name different disks
 * (xbd_vdev per job) of the same domain.  Among the jobs of one disk,
 * job k drives queue k % nr_queues, as blk-mq maps CPUs to hardware
 * queues.  A domain has a single claimer, so jobs run as processes (fio's
 * default) cannot share a domain: the second one fails its init with a
 * one-line message naming the claimer and --thread.
 *
 * Zero copy: fio's I/O buffers come from the engine (iomem_alloc), in
 * memory granted to the backend (xbdfront_buf_alloc), so requests carry
 * fio's own pages and libxbdfront bounces nothing.
 *
 * Locks: engine_lock guards the domain, device and job tables; each job
 * (struct job) is used only by its own fio thread.
 * Lifetime: a job is created by whichever of iomem_alloc and init runs
 * first (iomem_alloc, in fio 3.33); its buffers go at iomem_free or, at
 * the latest, at cleanup; a device is closed when the last job using it
 * is cleaned up, its domain when its last device is.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frontend/blkfront/domain.h"
#include "frontend/device.h"
#include "frontend/fio/fio_abi.h"
#include "frontend/xbdfront.h"
#include "lib/log.h"
#include "lib/platform/platform.h"
#include "lib/vdev.h"
#include "lib/xenbus.h"

#define XBD_COOKIE 0x58424446u          /* "XBDF": finds our options in td */
#define XBD_COOKIE_STR "1480737862"
_Static_assert(XBD_COOKIE == 1480737862u, "cookie and its string agree");

/* The engine's option struct (td->eo).  Offset 0 is unused because fio
 * treats off1 == 0 as "not stored". */
struct xbd_eo {
	void *pad;
	unsigned int cookie;
	char *domain, *vdev, *rundir, *queues, *ring_order, *indirect, *persistent,
	     *timeout, *platform, *zero_copy, *stats;
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
	int fd;                         /* the queue's event fd */
	unsigned int inflight;          /* queued, not yet handed to fio */
	bool uncommitted;               /* queued since the last commit() */
	struct io_u **events;           /* for event(): this getevents' batch */
	unsigned int nevents, cap;
	/* done_lock: done[], the job's completions reaped by any job sharing
	 * its queue (another job's getevents may reap ours). */
	pthread_mutex_t done_lock;
	int wake_fd;                    /* eventfd: another job routed to done[] */
	struct io_u **done;
	unsigned int ndone, done_cap;
	/* fio's I/O buffers (iomem_alloc), NULL when fio has none from us;
	 * granted: from xbdfront_buf_alloc (zero copy), else aligned_alloc. */
	void *buf;
	bool granted, zero_copy, print_stats;
	uint64_t nr_direct, nr_bounced;  /* reads and writes queued, by path */
	char vdev[32];                  /* for xbd_stats */
	struct job *next;
};

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_dom *domains;      /* under engine_lock */
static struct shared_dev *devices;      /* under engine_lock */
static struct job *jobs;                /* under engine_lock */

/* ---- finding our options in fio's thread_data -------------------------- */

/* Read len bytes at addr without faulting: 0, or -1 when unmapped. */
static int peek(const void *addr, void *out, size_t len)
{
	struct iovec local = { out, len }, remote = { (void *)addr, len };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/*
 * td->eo, found by content: fio stores the pointer to our option struct
 * in thread_data right after the (large, version-dependent) job options.
 * We scan td's words for a pointer to memory that carries our cookie
 * (set by the hidden option xbd_cookie's default), reading through peek()
 * so a stray value cannot fault.  Clones (numjobs) get their own copy of
 * the struct, with the cookie, which is why a cookie and not an address.
 */
static struct xbd_eo *find_eo(struct thread_data *td)
{
	uintptr_t words[512];
	unsigned int cookie;

	for (size_t base = 0; base < (256u << 10); base += sizeof(words)) {
		if (peek((char *)td + base, words, sizeof(words)))
			return NULL;
		for (size_t i = 0; i < 512; i++) {
			uintptr_t w = words[i];

			if (w < 4096 || w % 8)
				continue;
			if (!peek((void *)(w + offsetof(struct xbd_eo, cookie)), &cookie,
				  sizeof(cookie)) && cookie == XBD_COOKIE)
				return (struct xbd_eo *)w;
		}
	}
	return NULL;
}

/* ---- options ------------------------------------------------------------- */

#define STR_OPT(n, field, h, d) { .name = n, .lname = n, .type = FIO_OPT_STR_STORE, \
	.off1 = offsetof(struct xbd_eo, field), .help = h, .def = d, \
	.category = FIO_OPT_C_ENGINE }

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
	STR_OPT("xbd_zero_copy", zero_copy, "fio's buffers in memory granted to the backend: "
		"no bounce copy (0/1)", "1"),
	STR_OPT("xbd_stats", stats, "At the end, print each job's zero-copy and bounced "
		"request counts (0/1)", "0"),
	{ .name = "xbd_cookie", .lname = "xbd_cookie", .type = FIO_OPT_INT,
	  .off1 = offsetof(struct xbd_eo, cookie), .def = XBD_COOKIE_STR,
	  .help = "Internal: marks the engine's options (leave alone)",
	  .category = FIO_OPT_C_ENGINE },
	{ .name = NULL },
};

/* Parse the string options into libxbdfront's; -EINVAL with a message. */
static int opts_from(const struct xbd_eo *eo, struct xbdfront_opts *o)
{
	long long q, r, i, p, t;

	xbdfront_opts_default(o);
	if (!eo->domain || !eo->vdev) {
		fprintf(stderr, "xbd: xbd_domain= and xbd_vdev= are required\n");
		return -EINVAL;
	}
	q = guest_num(eo->queues, 1, 64);
	r = guest_num(eo->ring_order, 0, 5);
	i = guest_num(eo->indirect, 0, 4096);
	p = guest_num(eo->persistent, 0, 1);
	t = guest_num(eo->timeout, 1, 3600000);
	if (q < 0 || r < 0 || i < 0 || p < 0 || t < 0) {
		fprintf(stderr, "xbd: bad xbd_max_queues, xbd_max_ring_page_order, "
			"xbd_max_indirect_segments, xbd_feature_persistent or xbd_timeout\n");
		return -EINVAL;
	}
	o->max_queues = (unsigned int)q;
	o->max_ring_page_order = (unsigned int)r;
	o->max_indirect_segs = (unsigned int)i;
	o->persistent = p == 1;
	o->connect_timeout_ms = (unsigned int)t;
	o->platform = eo->platform;
	o->rundir = eo->rundir;
	return 0;
}

/* ---- the shared device ------------------------------------------------------ */

/* The domain named by eo, resolved: 0 or -errno with a message. */
static int resolve(const struct xbd_eo *eo, const struct xbdfront_opts *o, unsigned int *domid,
		   pid_t *claimer)
{
	struct xbd_platform *plat = NULL;
	struct xbd_domain_info info = { 0 };
	enum xbd_platform_kind kind;
	int rc;

	rc = xbd_platform_kind_parse(o->platform ? o->platform : "auto", &kind);
	rc = rc ? rc : xbd_platform_open(kind, o->rundir, &plat);
	rc = rc ? rc : guest_resolve_domain(plat, eo->domain, domid);
	if (!rc && !xbd_domain_get_info(plat, (xbd_domid_t)*domid, &info))
		*claimer = info.claimed_by;
	xbd_platform_close(plat);
	if (rc)
		fprintf(stderr, "xbd: domain %s: %s\n", eo->domain, strerror(-rc));
	return rc;
}

/* The domain handle for eo, claimed on first use; engine_lock held. */
static int domain_get(const struct xbd_eo *eo, const struct xbdfront_opts *o,
		      struct shared_dom **out)
{
	struct shared_dom *sd;
	unsigned int domid = 0;
	pid_t claimer = 0;
	char key[256];
	int rc;

	snprintf(key, sizeof(key), "%s|%s|%s", eo->domain, eo->rundir ? eo->rundir : "",
		 o->platform ? o->platform : "");
	for (sd = domains; sd && strcmp(sd->key, key); sd = sd->next)
		;
	if (sd)
		goto found;
	rc = resolve(eo, o, &domid, &claimer);
	if (rc)
		return rc;
	sd = calloc(1, sizeof(*sd));
	if (!sd)
		return -ENOMEM;
	rc = xbdfront_domain_open(domid, o, &sd->dom);
	if (rc == -EBUSY)
		fprintf(stderr, "xbd: domain %s is claimed by process %d: jobs of one fio run "
			"sharing a domain must be threads (add --thread)\n", eo->domain,
			(int)claimer);
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
	snprintf(key, sizeof(key), "%s|%s|%s|%u|%u|%u|%d", eo->domain, eo->vdev,
		 eo->rundir ? eo->rundir : "", o.max_queues, o.max_ring_page_order,
		 o.max_indirect_segs, o.persistent);
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
			"xbd_max_* and xbd_feature_persistent options)" : "");
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

/* The job's per-job options (xbd_zero_copy, xbd_stats); -EINVAL with a
 * message. */
static int job_opts(const struct xbd_eo *eo, struct job *j)
{
	long long z = guest_num(eo->zero_copy, 0, 1), st = guest_num(eo->stats, 0, 1);

	if (z < 0 || st < 0) {
		fprintf(stderr, "xbd: bad xbd_zero_copy or xbd_stats (0 or 1)\n");
		return -EINVAL;
	}
	j->zero_copy = z == 1;
	j->print_stats = st == 1;
	snprintf(j->vdev, sizeof(j->vdev), "%s", eo->vdev ? eo->vdev : "");
	return 0;
}

/*
 * The calling thread's job, opening (or sharing) its device: by init(),
 * or earlier by iomem_alloc(), which fio 3.33 calls first (init_io_u()
 * allocates the buffers before td_io_init()).  NULL after a message.
 */
static struct job *job_attach(struct thread_data *td)
{
	struct xbd_eo *eo = find_eo(td);
	struct job *j;
	int rc;

	if (!eo) {
		fprintf(stderr, "xbd: cannot find the engine's options in fio's job "
			"(is this fio 3.33?)\n");
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->td = td;
	pthread_mutex_init(&j->done_lock, NULL);
	j->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	rc = j->wake_fd < 0 ? -errno : job_opts(eo, j);
	pthread_mutex_lock(&engine_lock);
	rc = rc ? rc : device_get(eo, &j->sd);
	if (!rc) {
		j->q = j->sd->next_queue++ % xbdfront_nr_queues(j->sd->dev);
		j->fd = xbdfront_queue_fd(j->sd->dev, j->q);
		j->next = jobs;
		jobs = j;
	}
	pthread_mutex_unlock(&engine_lock);
	if (rc) {
		pthread_mutex_destroy(&j->done_lock);
		if (j->wake_fd >= 0)
			close(j->wake_fd);
		free(j);
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

static void xbd_cleanup(struct thread_data *td)
{
	struct job **pp, *j;

	pthread_mutex_lock(&engine_lock);
	for (pp = &jobs; (j = *pp) && j->td != td; pp = &j->next)
		;
	if (j) {
		*pp = j->next;
		if (j->print_stats)
			fprintf(stderr, "xbd: %s queue %u: %llu requests zero-copy, %llu bounced\n",
				j->vdev, j->q,
				(unsigned long long)j->nr_direct,
				(unsigned long long)j->nr_bounced);
		buf_release(j);         /* fio 3.33 called iomem_free already */
		device_put(j->sd);
	}
	pthread_mutex_unlock(&engine_lock);
	if (my_job == j)
		my_job = NULL;
	if (j) {
		pthread_mutex_destroy(&j->done_lock);
		close(j->wake_fd);
		free(j->done);
		free(j->events);
		free(j);
	}
}

/* ---- fio's I/O buffers in granted memory ---------------------------------- */

static int xbd_iomem_alloc(struct thread_data *td, size_t total);

/* fio's thread_data has the layout of fio_abi.h where iomem_alloc
 * writes: td->io_ops is an engine whose iomem_alloc is ours, and fio has
 * no buffer yet, of at most total bytes. */
static bool td_buffer_fields_ok(struct thread_data *td, size_t total)
{
	const char *t = (const char *)td;
	const struct ioengine_ops *io_ops;
	int (*hook)(struct thread_data *, size_t);
	void *orig;
	size_t size;

	return !peek(t + FIO_TD_IO_OPS_OFF, &io_ops, sizeof(io_ops)) && io_ops &&
	       !peek(&io_ops->iomem_alloc, &hook, sizeof(hook)) && hook == xbd_iomem_alloc &&
	       !peek(t + FIO_TD_ORIG_BUFFER_OFF, &orig, sizeof(orig)) && !orig &&
	       !peek(t + FIO_TD_ORIG_BUFFER_SIZE_OFF, &size, sizeof(size)) &&
	       size && size <= total;
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
	if (!td_buffer_fields_ok(td, total)) {
		fprintf(stderr, "xbd: fio's thread_data is not laid out as fio 3.33's; "
			"run with --xbd_zero_copy=0 --mem=malloc\n");
		return EINVAL;
	}
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
	*(void **)((char *)td + FIO_TD_ORIG_BUFFER_OFF) = buf;
	return 0;
}

/* fio clears td->orig_buffer itself after this. */
static void xbd_iomem_free(struct thread_data *td)
{
	struct job *j = job_of(td);

	if (j)
		buf_release(j);
}

/* fio allocated the io_u with a buffer in place: a layout check. */
static bool io_u_sane(const struct io_u *u)
{
	return u->ddir >= DDIR_READ && u->ddir <= DDIR_WAIT &&
	       (u->ddir > DDIR_WRITE || (u->xfer_buf == u->buf && u->xfer_buflen == u->buflen));
}

static const enum fe_op ddir_op[] = {
	[DDIR_READ] = FE_OP_READ,
	[DDIR_WRITE] = FE_OP_WRITE,
	[DDIR_TRIM] = FE_OP_DISCARD,
	[DDIR_SYNC] = FE_OP_FLUSH,
	[DDIR_DATASYNC] = FE_OP_FLUSH,
};

/*
 * The request goes on the ring unpublished; commit() publishes the batch
 * fio queued with one index store and at most one notification, so the
 * backend wakes once per batch, not once per request.
 */
static enum fio_q_status xbd_queue(struct thread_data *td, struct io_u *u)
{
	struct job *j = job_of(td);
	struct iovec iov = { u->xfer_buf, u->xfer_buflen };
	struct fe_frag *direct = NULL;
	unsigned int ndirect = 0;
	bool rw = u->ddir == DDIR_READ || u->ddir == DDIR_WRITE;
	bool flush = u->ddir == DDIR_SYNC || u->ddir == DDIR_DATASYNC;
	int rc;

	if (!j || !io_u_sane(u) || u->ddir > DDIR_DATASYNC) {
		u->error = EINVAL;
		return FIO_Q_COMPLETED;
	}
	u->engine_data = j;             /* route() gives the completion back to us */
	if (rw) {
		direct = fe_dev_direct_frags(j->sd->dev, &iov, 1, &ndirect);
		if (direct)
			j->nr_direct++;
		else
			j->nr_bounced++;
	}
	rc = fe_queue_submit_deferred(fe_dev_queue(j->sd->dev, j->q), ddir_op[u->ddir],
				      flush ? 0 : u->offset, flush ? 0 : u->xfer_buflen,
				      rw ? &iov : NULL, rw, direct, ndirect,
				      (uint64_t)(uintptr_t)u);
	free(direct);
	if (rc) {
		u->error = (unsigned int)-rc;
		return FIO_Q_COMPLETED;
	}
	j->inflight++;
	j->uncommitted = true;
	return FIO_Q_QUEUED;
}

static int xbd_commit(struct thread_data *td)
{
	struct job *j = job_of(td);

	if (j && j->uncommitted) {
		fe_queue_commit(fe_dev_queue(j->sd->dev, j->q));
		j->uncommitted = false;
	}
	return 0;
}

/* Hand one completion to the job that queued it (io_u->engine_data);
 * self is the job reaping. */
static void route(struct job *self, struct io_u *u, int status)
{
	struct job *owner = u->engine_data;
	uint64_t one = 1;
	struct io_u **d;
	bool wake;

	u->error = status < 0 ? (unsigned int)-status : 0;
	u->resid = u->error ? u->xfer_buflen : 0;
	pthread_mutex_lock(&owner->done_lock);
	if (owner->ndone == owner->done_cap) {
		/* at most the owner's iodepth; grows a few times at start */
		d = realloc(owner->done, (owner->done_cap * 2 + 64) * sizeof(*d));
		if (!d)
			abort();        /* a completion must never be lost */
		owner->done = d;
		owner->done_cap = owner->done_cap * 2 + 64;
	}
	/* One wake-up per batch: the owner sleeps only after its reap() left
	 * done[] empty, so only the first completion added after that needs to
	 * wake it; later ones are taken by the same reap. */
	wake = owner != self && owner->ndone == 0;
	owner->done[owner->ndone++] = u;
	pthread_mutex_unlock(&owner->done_lock);
	if (wake && write(owner->wake_fd, &one, sizeof(one)) < 0)
		abort();                /* an eventfd below its maximum cannot fail */
}

/* Route every completion waiting in the job's queue, then move up to max
 * of the job's own into j->events. */
static void reap(struct job *j, unsigned int max)
{
	struct xbdfront_cqe cqe[64];
	unsigned int n, i, take;

	while ((n = xbdfront_reap(j->sd->dev, j->q, cqe, 64)))
		for (i = 0; i < n; i++)
			route(j, (struct io_u *)(uintptr_t)cqe[i].user_data, cqe[i].status);
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
}

static long ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

static int xbd_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			 const struct timespec *t)
{
	struct job *j = job_of(td);
	struct timespec deadline;
	struct pollfd pfd[2];
	struct fe_queue *q;
	bool signalled = false;
	uint64_t drain;
	long left = -1;

	if (!j)
		return -EINVAL;
	q = fe_dev_queue(j->sd->dev, j->q);
	if (max > j->cap) {
		struct io_u **e = realloc(j->events, max * sizeof(*e));

		if (!e)
			return -ENOMEM;
		j->events = e;
		j->cap = max;
	}
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
	pfd[0] = (struct pollfd){ .fd = j->fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = j->wake_fd, .events = POLLIN };
	for (;;) {
		/* the event channel is only touched after poll() said it fired:
		 * responses already on the ring cost no syscall */
		int rc = fe_queue_process_polled(q, signalled);

		signalled = false;
		reap(j, max);
		if (rc < 0 && !j->nevents && !min)
			return rc;
		if (j->nevents >= min || (!j->inflight && j->nevents))
			break;
		if (t && (left = ms_left(&deadline)) <= 0)
			break;
		(void)poll(pfd, 2, t ? (int)left : 100);
		signalled = pfd[0].revents & POLLIN;
		if (pfd[1].revents && read(j->wake_fd, &drain, sizeof(drain)) < 0)
			return -errno;
	}
	return (int)j->nevents;
}

static struct io_u *xbd_event(struct thread_data *td, int i)
{
	struct job *j = job_of(td);

	return j && i >= 0 && (unsigned int)i < j->nevents ? j->events[i] : NULL;
}

/*
 * The disk's size, for fio's file size (so offset= and offset_increment=
 * work as on a block device).  fio may ask before init() and in a process
 * that will not do the I/O, so this reads the backend's sectors node
 * through the domain's xenstore connection instead of opening the disk.
 */
static int disk_bytes(const struct xbd_eo *eo, uint64_t *out)
{
	struct xbd_platform *plat = NULL;
	enum xbd_platform_kind kind;
	struct xs_handle *xs = NULL;
	struct xbd_vdev v;
	unsigned int domid = 0;
	char sock[4096], fe[96], be[256];
	uint64_t sectors;
	int rc = xbd_vdev_parse(eo->vdev, &v);

	if (rc)
		return rc;
	rc = xbd_platform_kind_parse(eo->platform ? eo->platform : "auto", &kind);
	rc = rc ? rc : xbd_platform_open(kind, eo->rundir, &plat);
	rc = rc ? rc : guest_resolve_domain(plat, eo->domain, &domid);
	if (!rc && kind == XBD_PLATFORM_XEN)
		rc = xbd_xs_open(NULL, &xs);
	else if (!rc) {
		snprintf(sock, sizeof(sock), "%s/dom%u/xenstore.sock", xbd_platform_rundir(plat), domid);
		rc = xbd_xs_open(sock, &xs);
	}
	snprintf(fe, sizeof(fe), "/local/domain/%u/device/vbd/%u", domid, v.devid);
	rc = rc ? rc : xbd_xs_read_buf(xs, XBT_NULL, fe, "backend", be, sizeof(be));
	rc = rc ? rc : xbd_xs_read_u64(xs, XBT_NULL, be, "sectors", 0, UINT64_MAX / 512, &sectors);
	if (!rc)
		*out = sectors * 512;
	if (xs)
		xs_close(xs);
	xbd_platform_close(plat);
	return rc;
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

static int xbd_get_file_size(struct thread_data *td, struct fio_file *f)
{
	struct xbd_eo *eo = find_eo(td);
	uint64_t bytes;
	int rc;

	if (!eo || !eo->domain || !eo->vdev)
		return 0;               /* init() reports what is missing */
	rc = disk_bytes(eo, &bytes);
	if (rc == -ENOENT)
		rc = disk_bytes_by_open(eo, &bytes);
	if (rc) {
		fprintf(stderr, "xbd: size of %s of domain %s: %s\n", eo->vdev, eo->domain,
			strerror(-rc));
		return 1;
	}
	*(uint64_t *)((char *)f + FIO_FILE_REAL_SIZE_OFF) = bytes;
	*(unsigned int *)((char *)f + FIO_FILE_FLAGS_OFF) |= FIO_FILE_SIZE_KNOWN;
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

/*
 * fio's own option table (exported by the fio binary) must have the
 * layout of struct fio_option: its first two entries are "description"
 * and "name", both FIO_OPT_STR_STORE with help texts.  Weak, so the .so
 * still loads (and refuses) outside fio.
 */
extern const struct fio_option fio_options[] __attribute__((weak));

static bool abi_matches(void)
{
	if (!fio_options)
		return false;
	return fio_options[0].name && !strcmp(fio_options[0].name, "description") &&
	       fio_options[0].type == FIO_OPT_STR_STORE && fio_options[0].help &&
	       fio_options[1].name && !strcmp(fio_options[1].name, "name") &&
	       fio_options[1].type == FIO_OPT_STR_STORE && fio_options[1].help;
}

/* Whether code holds the x86-64 encoding of an instruction addressing
 * disp(%rbx): prefix bytes, then disp as 32 bits little endian. */
static bool code_has(const unsigned char *code, size_t len, const unsigned char *prefix,
		     size_t plen, uint32_t disp)
{
	unsigned char insn[8];

	memcpy(insn, prefix, plen);
	for (size_t i = 0; i < 4; i++)
		insn[plen + i] = (unsigned char)(disp >> (8 * i));
	return memmem(code, len, insn, plen + 4) != NULL;
}

/*
 * The thread_data offsets of fio_abi.h, checked in this fio's own code:
 * its exported free_io_mem() loads td->io_ops (mov IO_OPS(%rbx),%rax)
 * and, after calling iomem_free, clears orig_buffer and orig_buffer_size
 * (movq $0,OFF(%rbx)), all within its first 128 bytes.
 */
static bool td_layout_matches(void)
{
	static const unsigned char mov_rax[] = { 0x48, 0x8b, 0x83 }, movq_0[] = { 0x48, 0xc7, 0x83 };
	void *fn = dlsym(RTLD_DEFAULT, "free_io_mem");
	unsigned char code[128];

	return fn && !peek(fn, code, sizeof(code)) &&
	       code_has(code, sizeof(code), mov_rax, 3, FIO_TD_IO_OPS_OFF) &&
	       code_has(code, sizeof(code), movq_0, 3, FIO_TD_ORIG_BUFFER_OFF) &&
	       code_has(code, sizeof(code), movq_0, 3, FIO_TD_ORIG_BUFFER_SIZE_OFF);
}

/* The symbol fio looks up in an external engine. */
void get_ioengine(struct ioengine_ops **out);
void get_ioengine(struct ioengine_ops **out)
{
	if (!abi_matches()) {
		fprintf(stderr, "xbd: this fio's engine ABI is not fio 3.33's; not loading\n");
		ops.version = -1;       /* fio refuses it with "bad ioops version" */
	} else if (!td_layout_matches()) {
		/* fio keeps allocating the buffers itself: I/O is bounced */
		fprintf(stderr, "xbd: fio's thread_data is not fio 3.33's: no zero copy\n");
		ops.iomem_alloc = NULL;
		ops.iomem_free = NULL;
	}
	xbd_log_init("xbd-fio", XBD_LOG_WARN, false);
	*out = &ops;
}
