/* SPDX-License-Identifier: MIT */
/*
 * libxbdfront's public I/O calls (xbdfront.h) on top of the channels,
 * and the internal device constructor (device.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "frontend/device.h"

void xbdfront_opts_default(struct xbdfront_opts *o)
{
	*o = (struct xbdfront_opts){
		.abi = XBDFRONT_ABI_NATIVE,
		.max_queues = 4,
		.max_ring_page_order = 0,
		.max_indirect_segs = 32,
		.persistent = true,
		.pool_pages = 4096,
		.connect_timeout_ms = 10000,
		.platform = "auto",
		.poll_duration_us = XBDFRONT_POLL_DURATION_US_DEFAULT,
	};
}

enum fe_abi fe_abi_from_public(enum xbdfront_abi abi)
{
	return abi == XBDFRONT_ABI_X86_32 ? FE_ABI_X86_32 : FE_ABI_X86_64;
}

/* A backend that breaks one ring is not trusted with the others either
 * (Linux blkfront marks the whole device BLKIF_STATE_ERROR). */
static void dev_broken(void *arg, int err, const char *why)
{
	fe_dev_fail(arg, err, why);
}

int fe_dev_create(struct xbd_platform *plat, struct xbd_domain *dom,
		  const struct fe_dev_params *par, struct xbdfront_dev **out)
{
	struct xbdfront_dev *dev;
	unsigned int i;
	int rc = 0;

	*out = NULL;
	if (!par->nqueues || par->nqueues > FE_DEV_MAX_QUEUES)
		return -EINVAL;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->par = *par;
	dev->dom = dom;
	fe_bufs_init(&dev->bufs, dom, par->backend);
	pthread_mutex_init(&dev->info_lock, NULL);
	dev->q = calloc(par->nqueues, sizeof(*dev->q));
	if (!dev->q)
		rc = -ENOMEM;
	for (i = 0; !rc && i < par->nqueues; i++) {
		struct fe_chan_params cp = {
			.index = i, .backend = par->backend, .order = par->order,
			.abi = par->abi, .persistent = par->persistent,
			.max_pages = par->pool_pages, .poll_us = par->poll_us,
			.bufs = &dev->bufs, .on_broken = dev_broken, .on_broken_arg = dev,
		};
		rc = fe_chan_create(plat, dom, &cp, &dev->q[i]);
	}
	if (rc) {
		fe_dev_free(dev);
		return rc;
	}
	*out = dev;
	return 0;
}

int fe_dev_connect(struct xbdfront_dev *dev, const struct fe_limits *lim,
		   unsigned int physical_sector_size)
{
	unsigned int i;
	int rc;

	rc = fe_limits_check(lim);
	if (rc)
		return rc;
	pthread_mutex_lock(&dev->info_lock);
	dev->lim = *lim;
	dev->physical_sector_size = physical_sector_size;
	pthread_mutex_unlock(&dev->info_lock);
	for (i = 0; i < dev->par.nqueues; i++) {
		rc = fe_chan_connect(dev->q[i], lim);
		if (rc)
			return rc;
	}
	return 0;
}

void fe_dev_set_persistent(struct xbdfront_dev *dev, bool persistent)
{
	unsigned int i;

	for (i = 0; i < dev->par.nqueues; i++)
		(void)fe_chan_set_persistent(dev->q[i], persistent);
	pthread_mutex_lock(&dev->info_lock);
	dev->par.persistent = persistent;
	pthread_mutex_unlock(&dev->info_lock);
}

int fe_dev_reset(struct xbdfront_dev *dev, unsigned int order, enum fe_abi abi)
{
	unsigned int i;
	int rc;

	for (i = 0; i < dev->par.nqueues; i++) {
		rc = fe_chan_reset(dev->q[i], order, abi);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&dev->info_lock);
	dev->par.order = order;
	dev->par.abi = abi;
	dev->resets++;
	pthread_mutex_unlock(&dev->info_lock);
	return 0;
}

struct fe_chan *fe_dev_chan(struct xbdfront_dev *dev, unsigned int i)
{
	return i < dev->par.nqueues ? dev->q[i] : NULL;
}

void fe_dev_set_sectors(struct xbdfront_dev *dev, uint64_t sectors)
{
	unsigned int i;

	for (i = 0; i < dev->par.nqueues; i++)
		fe_chan_set_sectors(dev->q[i], sectors);
	pthread_mutex_lock(&dev->info_lock);
	if (sectors % (dev->lim.sector_size / 512) == 0)
		dev->lim.sectors = sectors;
	pthread_mutex_unlock(&dev->info_lock);
	for (i = 0; i < dev->par.nqueues; i++)
		fe_chan_notify(dev->q[i]);
}

void fe_dev_fail(struct xbdfront_dev *dev, int err, const char *why)
{
	unsigned int i;

	for (i = 0; i < dev->par.nqueues; i++)
		fe_chan_fail(dev->q[i], err, why);
}

void fe_dev_destroy_queues(struct xbdfront_dev *dev)
{
	unsigned int i;

	for (i = 0; dev->q && i < dev->par.nqueues; i++) {
		fe_chan_destroy(dev->q[i]);
		dev->q[i] = NULL;
	}
	fe_bufs_destroy(&dev->bufs);
}

void fe_dev_free(struct xbdfront_dev *dev)
{
	if (!dev)
		return;
	fe_dev_destroy_queues(dev);
	pthread_mutex_destroy(&dev->bufs.lock);
	pthread_mutex_destroy(&dev->info_lock);
	free(dev->q);
	free(dev);
}

/* ---- the public calls ----------------------------------------------------- */

unsigned int xbdfront_nr_queues(const struct xbdfront_dev *dev)
{
	return dev->par.nqueues;
}

int xbdfront_get_info(struct xbdfront_dev *dev, struct xbdfront_info *out)
{
	unsigned int i, f;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&dev->info_lock);
	out->sectors = dev->lim.sectors;
	out->sector_size = dev->lim.sector_size;
	out->physical_sector_size = dev->physical_sector_size;
	out->nr_queues = dev->par.nqueues;
	out->ring_page_order = dev->par.order;
	out->max_indirect_segs = dev->lim.max_indirect_segs;
	out->abi = dev->par.abi == FE_ABI_X86_32 ? XBDFRONT_ABI_X86_32 : XBDFRONT_ABI_X86_64;
	out->persistent = dev->par.persistent;
	out->readonly = dev->lim.readonly;
	out->resets = dev->resets;
	pthread_mutex_unlock(&dev->info_lock);
	/* queue 0's: EOPNOTSUPP answers turn features off at run time */
	f = fe_chan_features(dev->q[0]);
	out->flush = f & FE_FEAT_FLUSH;
	out->barrier = f & FE_FEAT_BARRIER;
	out->discard = f & FE_FEAT_DISCARD;
	out->discard_secure = f & FE_FEAT_SECURE;
	for (i = 0; i < dev->par.nqueues && !out->error; i++)
		out->error = fe_chan_error(dev->q[i], out->reason, sizeof(out->reason));
	return 0;
}

int xbdfront_submit(struct xbdfront_dev *dev, unsigned int q, const struct xbdfront_sqe *sqe,
		    unsigned int n)
{
	if (q >= dev->par.nqueues || (n && !sqe))
		return -EINVAL;
	return fe_chan_submit(dev->q[q], sqe, n);
}

int xbdfront_commit(struct xbdfront_dev *dev, unsigned int q)
{
	return q < dev->par.nqueues ? fe_chan_commit(dev->q[q]) : -EINVAL;
}

int xbdfront_reap(struct xbdfront_dev *dev, unsigned int q, struct xbdfront_cqe *cqe,
		  unsigned int n)
{
	if (q >= dev->par.nqueues || (n && !cqe))
		return -EINVAL;
	return fe_chan_reap(dev->q[q], n ? cqe : NULL, n);
}

int xbdfront_wait(struct xbdfront_dev *dev, unsigned int q, int timeout_ms, int extra_fd)
{
	return q < dev->par.nqueues ? fe_chan_wait(dev->q[q], timeout_ms, extra_fd) : -EINVAL;
}

int xbdfront_queue_stats(struct xbdfront_dev *dev, unsigned int q,
			 struct xbdfront_queue_stats *out)
{
	struct fe_chan_stats st;

	if (q >= dev->par.nqueues)
		return -EINVAL;
	fe_chan_get_stats(dev->q[q], &st);
	*out = (struct xbdfront_queue_stats){
		.submitted = st.submitted, .completed = st.completed, .errors = st.errors,
		.commits = st.commits, .notifies = st.notifies, .events = st.events,
		.polls = st.spins, .poll_hits = st.spin_hits, .waits = st.waits,
	};
	return 0;
}

int xbdfront_queue_fd(struct xbdfront_dev *dev, unsigned int q)
{
	return q < dev->par.nqueues ? fe_chan_fd(dev->q[q]) : -EINVAL;
}

int xbdfront_process(struct xbdfront_dev *dev, unsigned int q)
{
	return q < dev->par.nqueues ? fe_chan_process(dev->q[q]) : -EINVAL;
}

void *xbdfront_buf_alloc(struct xbdfront_dev *dev, size_t len)
{
	return fe_bufs_alloc(&dev->bufs, len);
}

int xbdfront_buf_free(struct xbdfront_dev *dev, void *buf)
{
	return fe_bufs_free(&dev->bufs, buf);
}

/* ---- synchronous helpers ------------------------------------------------ */

struct sync_wait {
	int status;
	int done;                     /* set last, with release order */
};

static void sync_done(const struct xbdfront_cqe *cqe)
{
	struct sync_wait *w = (struct sync_wait *)(uintptr_t)cqe->user_data;

	w->status = cqe->res;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

/* Submit on the calling thread's queue and drive it until this I/O ends.
 * Another thread reaping the same queue may run the callback; the short
 * wait bounds how late this thread notices. */
static int sync_io(struct xbdfront_dev *dev, enum xbdfront_op op, uint64_t offset,
		   uint64_t len, const struct iovec *iov, int iovcnt)
{
	unsigned int qi = (unsigned int)syscall(SYS_gettid) % dev->par.nqueues;
	struct sync_wait w = { 0, 0 };
	struct xbdfront_sqe sqe = {
		.op = (uint8_t)op, .iovcnt = (uint16_t)iovcnt, .offset = offset, .len = len,
		.iov = iov, .user_data = (uintptr_t)&w, .done = sync_done,
	};
	int rc;

	if (iovcnt < 0 || iovcnt > UINT16_MAX)
		return -EINVAL;
	rc = xbdfront_submit(dev, qi, &sqe, 1);
	if (rc < 0)
		return rc;
	(void)xbdfront_commit(dev, qi);
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		(void)xbdfront_reap(dev, qi, NULL, 0);
		if (__atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
			break;
		(void)xbdfront_wait(dev, qi, 10, -1);
	}
	return w.status;
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t sum = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		sum += iov[i].iov_len;
	return sum;
}

ssize_t xbdfront_preadv(struct xbdfront_dev *dev, const struct iovec *iov, int iovcnt,
			uint64_t offset)
{
	size_t len = iov_total(iov, iovcnt);
	int rc = sync_io(dev, XBDFRONT_READ, offset, len, iov, iovcnt);

	return rc ? rc : (ssize_t)len;
}

ssize_t xbdfront_pwritev(struct xbdfront_dev *dev, const struct iovec *iov, int iovcnt,
			 uint64_t offset)
{
	size_t len = iov_total(iov, iovcnt);
	int rc = sync_io(dev, XBDFRONT_WRITE, offset, len, iov, iovcnt);

	return rc ? rc : (ssize_t)len;
}

ssize_t xbdfront_pread(struct xbdfront_dev *dev, void *buf, size_t len, uint64_t offset)
{
	struct iovec iov = { buf, len };

	return xbdfront_preadv(dev, &iov, 1, offset);
}

ssize_t xbdfront_pwrite(struct xbdfront_dev *dev, const void *buf, size_t len,
			uint64_t offset)
{
	struct iovec iov = { (void *)buf, len };

	return xbdfront_pwritev(dev, &iov, 1, offset);
}

int xbdfront_flush(struct xbdfront_dev *dev)
{
	return sync_io(dev, XBDFRONT_FLUSH, 0, 0, NULL, 0);
}

int xbdfront_discard(struct xbdfront_dev *dev, uint64_t offset, uint64_t len, bool secure)
{
	return sync_io(dev, secure ? XBDFRONT_SECURE_DISCARD : XBDFRONT_DISCARD, offset, len,
		       NULL, 0);
}
