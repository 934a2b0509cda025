/* SPDX-License-Identifier: MIT */
/*
 * libxbdfront's public calls (xbdfront.h) on top of the queues, and the
 * internal device constructor (device.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "frontend/device.h"
#include "frontend/xenbus.h"

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
	struct xbdfront_dev *dev = arg;
	unsigned int i;

	for (i = 0; i < dev->par.nqueues; i++)
		fe_queue_fail_all(dev->q[i], err, why);
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
	pthread_mutex_init(&dev->buf_lock, NULL);
	pthread_mutex_init(&dev->info_lock, NULL);
	dev->q = calloc(par->nqueues, sizeof(*dev->q));
	if (!dev->q) {
		pthread_mutex_destroy(&dev->buf_lock);
		pthread_mutex_destroy(&dev->info_lock);
		free(dev);
		return -ENOMEM;
	}
	for (i = 0; i < par->nqueues && !rc; i++) {
		struct fe_queue_params qp = {
			.index = i, .backend = par->backend, .order = par->order,
			.abi = par->abi, .persistent = par->persistent,
			.max_pages = par->pool_pages,
		};
		rc = fe_queue_create(plat, dom, &qp, &dev->q[i]);
	}
	if (rc) {
		xbdfront_close(dev);
		return rc;
	}
	for (i = 0; i < par->nqueues; i++) {
		dev->q[i]->on_broken = dev_broken;
		dev->q[i]->on_broken_arg = dev;
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
		rc = fe_queue_connect(dev->q[i], lim);
		if (rc)
			return rc;
	}
	return 0;
}

void fe_dev_set_persistent(struct xbdfront_dev *dev, bool persistent)
{
	unsigned int i;

	for (i = 0; i < dev->par.nqueues; i++)
		(void)fe_queue_set_persistent(dev->q[i], persistent);
	pthread_mutex_lock(&dev->info_lock);
	dev->par.persistent = persistent;
	pthread_mutex_unlock(&dev->info_lock);
}

int fe_dev_reset(struct xbdfront_dev *dev, unsigned int order, enum fe_abi abi)
{
	unsigned int i;
	int rc;

	for (i = 0; i < dev->par.nqueues; i++) {
		rc = fe_queue_reset(dev->q[i], order, abi);
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

struct fe_queue *fe_dev_queue(struct xbdfront_dev *dev, unsigned int i)
{
	return i < dev->par.nqueues ? dev->q[i] : NULL;
}

void fe_dev_set_sectors(struct xbdfront_dev *dev, uint64_t sectors)
{
	unsigned int i;

	for (i = 0; i < dev->par.nqueues; i++)
		fe_queue_set_sectors(dev->q[i], sectors);
	pthread_mutex_lock(&dev->info_lock);
	if (sectors % (dev->lim.sector_size / 512) == 0)
		dev->lim.sectors = sectors;
	pthread_mutex_unlock(&dev->info_lock);
}

void fe_dev_destroy_queues(struct xbdfront_dev *dev)
{
	unsigned int i;

	for (i = 0; dev->q && i < dev->par.nqueues; i++) {
		fe_queue_destroy(dev->q[i]);
		dev->q[i] = NULL;
	}
}

void xbdfront_close(struct xbdfront_dev *dev)
{
	if (!dev)
		return;
	if (dev->xb)
		fe_xb_close(dev->xb, dev);   /* destroys the queues in its order */
	fe_dev_destroy_queues(dev);
	fe_dev_bufs_destroy(dev);
	pthread_mutex_destroy(&dev->buf_lock);
	pthread_mutex_destroy(&dev->info_lock);
	free(dev->q);
	free(dev);
}

unsigned int xbdfront_nr_queues(const struct xbdfront_dev *dev)
{
	return dev->par.nqueues;
}

int xbdfront_get_info(struct xbdfront_dev *dev, struct xbdfront_info *out)
{
	struct fe_queue *q0 = dev->q[0];
	unsigned int i;

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
	/* queue 0's copy: EOPNOTSUPP answers turn features off at run time */
	pthread_mutex_lock(&q0->lock);
	out->flush = q0->lim.flush;
	out->barrier = q0->lim.barrier;
	out->discard = q0->lim.discard;
	out->discard_secure = q0->lim.discard_secure;
	pthread_mutex_unlock(&q0->lock);
	for (i = 0; i < dev->par.nqueues && !out->error; i++) {
		pthread_mutex_lock(&dev->q[i]->lock);
		out->error = dev->q[i]->dead;
		memcpy(out->reason, dev->q[i]->error, sizeof(out->reason));
		pthread_mutex_unlock(&dev->q[i]->lock);
	}
	return 0;
}

static const enum fe_op op_map[] = {
	[XBDFRONT_READ] = FE_OP_READ,
	[XBDFRONT_WRITE] = FE_OP_WRITE,
	[XBDFRONT_FLUSH] = FE_OP_FLUSH,
	[XBDFRONT_BARRIER] = FE_OP_BARRIER,
	[XBDFRONT_DISCARD] = FE_OP_DISCARD,
	[XBDFRONT_SECURE_DISCARD] = FE_OP_SECURE_DISCARD,
};

static int submit(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op,
		  uint64_t offset, uint64_t len, const struct iovec *iov, int iovcnt,
		  xbdfront_cb cb, void *arg, uint64_t user_data)
{
	struct fe_frag *direct;
	unsigned int ndirect;
	int rc;

	if (q >= dev->par.nqueues || (unsigned int)op >= sizeof(op_map) / sizeof(op_map[0]))
		return -EINVAL;
	direct = fe_dev_direct_frags(dev, iov, iovcnt, &ndirect);
	rc = fe_queue_submit(dev->q[q], op_map[op], offset, len, iov, iovcnt, direct, ndirect,
			     cb, arg, user_data);
	free(direct);
	return rc;
}

int xbdfront_submit(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op,
		    uint64_t offset, uint64_t len, const struct iovec *iov, int iovcnt,
		    xbdfront_cb cb, void *arg)
{
	if (!cb)
		return -EINVAL;
	return submit(dev, q, op, offset, len, iov, iovcnt, cb, arg, 0);
}

int xbdfront_submit_cq(struct xbdfront_dev *dev, unsigned int q, enum xbdfront_op op,
		       uint64_t offset, uint64_t len, const struct iovec *iov, int iovcnt,
		       uint64_t user_data)
{
	return submit(dev, q, op, offset, len, iov, iovcnt, NULL, NULL, user_data);
}

int xbdfront_queue_fd(struct xbdfront_dev *dev, unsigned int q)
{
	return q < dev->par.nqueues ? fe_queue_fd(dev->q[q]) : -EINVAL;
}

int xbdfront_process(struct xbdfront_dev *dev, unsigned int q)
{
	return q < dev->par.nqueues ? fe_queue_process(dev->q[q]) : -EINVAL;
}

unsigned int xbdfront_reap(struct xbdfront_dev *dev, unsigned int q,
			   struct xbdfront_cqe *cqe, unsigned int n)
{
	struct fe_cqe c[32];
	unsigned int got = 0, k, i;

	if (q >= dev->par.nqueues)
		return 0;
	while (got < n) {
		k = fe_queue_reap(dev->q[q], c, n - got < 32 ? n - got : 32);
		if (!k)
			break;
		for (i = 0; i < k; i++)
			cqe[got + i] = (struct xbdfront_cqe){ c[i].user_data, c[i].status };
		got += k;
	}
	return got;
}

/* ---- synchronous helpers ------------------------------------------------ */

struct sync_wait {
	int status;
	int done;                     /* set last, with release order */
};

static void sync_cb(void *arg, int status)
{
	struct sync_wait *w = arg;

	w->status = status;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

/* Submit on the calling thread's queue and drive it until this I/O ends.
 * Another thread processing the same queue may deliver the completion;
 * the short poll timeout bounds how late this thread notices. */
static int sync_io(struct xbdfront_dev *dev, enum xbdfront_op op, uint64_t offset,
		   uint64_t len, const struct iovec *iov, int iovcnt)
{
	unsigned int qi = (unsigned int)syscall(SYS_gettid) % dev->par.nqueues;
	struct sync_wait w = { 0, 0 };
	struct pollfd pfd = { .fd = fe_queue_fd(dev->q[qi]), .events = POLLIN };
	int rc;

	rc = submit(dev, qi, op, offset, len, iov, iovcnt, sync_cb, &w, 0);
	if (rc)
		return rc;
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		fe_queue_process(dev->q[qi]);
		if (__atomic_load_n(&w.done, __ATOMIC_ACQUIRE))
			break;
		(void)poll(&pfd, 1, 10);
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
