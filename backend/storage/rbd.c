/* SPDX-License-Identifier: MIT */
/*
 * backend/storage/rbd.c: the rbd driver, a Ceph RBD image through librbd.
 *
 * Target (QEMU's spelling, which libxl passes through for qdisk):
 *   rbd:POOL/IMAGE[@SNAP][:conf=PATH][:id=USER][:KEY=VALUE]...
 * conf is the ceph.conf to read (default: librados' search), id the
 * client name without "client." (default admin), any other KEY=VALUE a
 * librados option (rados_conf_set).  A snapshot is read-only: asked rw it
 * is refused (-EROFS).
 *
 * The control thread connects and opens the image at probe, with the
 * monitor and OSD timeouts bounded (a missing monitor is an error within
 * the attach timeout, not a hang); the OSD operation timeout is the
 * storage_outage_ms tunable, so an OSD outage shorter than that is a stall
 * and a longer one BLKIF_RSP_ERROR.
 *
 * Completions: the image's notification eventfd (rbd_set_image_notification)
 * is polled by the queue's io_uring; when it fires the queue reads it and
 * takes every finished completion with rbd_poll_io_events(), on the queue
 * thread.  Completions have no callback, so librbd's threads never touch
 * our state.  One image handle serves the vbd, so the vbd gets one queue
 * (max_queues 1): two handles of one image in one process would fight over
 * its exclusive lock, and two queues over one handle's events.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "backend/storage/storage.h"
#include "log.h"

#define MON_TIMEOUT_S "10"

struct rbd_vbd {
	rados_t cluster;
	rados_ioctx_t io;
	rbd_image_t image;
	int efd;                     /* the image's notification eventfd */
	const char *name;            /* the target, for logs */
	bool queue_taken;            /* the one queue of this vbd */
};

/* What a completion's arg points to.  librbd's return value is the bytes
 * read for a read and 0 (or a length) for the rest; the loop wants what
 * io_uring says: the bytes moved for reads and writes, 0 for the rest. */
struct rbd_cmd {
	uint64_t tag;
	enum storage_op op;
	uint64_t len;
	struct rbd_cmd *next;
};

struct storage_queue {
	struct rbd_vbd *v;
	struct storage_loop loop;
	struct rbd_cmd *cmds, *free;
};

/* The spec, split in place: pool, image, snap and the options. */
struct rbd_spec {
	char buf[STORAGE_TARGET_MAX];
	char *pool, *image, *snap, *conf, *id;
	char *keys[16], *vals[16];
	unsigned int nkv;
};

static int parse_spec(const char *target, struct rbd_spec *sp)
{
	char *opt, *next;

	memset(sp, 0, sizeof(*sp));
	if (strlen(target) >= sizeof(sp->buf))
		return -EINVAL;
	strcpy(sp->buf, target);
	next = strchr(sp->buf, ':');
	if (next)
		*next++ = '\0';
	sp->pool = sp->buf;
	sp->image = strchr(sp->buf, '/');
	if (!sp->image || sp->image == sp->pool)
		return -EINVAL;
	*sp->image++ = '\0';
	sp->snap = strchr(sp->image, '@');
	if (sp->snap)
		*sp->snap++ = '\0';
	if (!*sp->image || (sp->snap && !*sp->snap))
		return -EINVAL;
	while ((opt = next)) {
		char *eq;

		next = strchr(opt, ':');
		if (next)
			*next++ = '\0';
		eq = strchr(opt, '=');
		if (!eq || eq == opt)
			return -EINVAL;
		*eq++ = '\0';
		if (!strcmp(opt, "conf"))
			sp->conf = eq;
		else if (!strcmp(opt, "id"))
			sp->id = eq;
		else if (sp->nkv < sizeof(sp->keys) / sizeof(sp->keys[0])) {
			sp->keys[sp->nkv] = opt;
			sp->vals[sp->nkv++] = eq;
		} else
			return -EINVAL;
	}
	return 0;
}

/* Online resize: librbd refreshes the image header when another client
 * (rbd resize) changes it, so this is the image's size now. */
static int rbd_get_size_vbd(const struct storage *s, uint64_t *bytes)
{
	const struct rbd_vbd *v = s->priv;

	return rbd_get_size(v->image, bytes);
}

static void rbd_close_vbd(struct storage *s)
{
	struct rbd_vbd *v = s->priv;

	if (!v)
		return;
	if (v->image)
		rbd_close(v->image);
	if (v->io)
		rados_ioctx_destroy(v->io);
	if (v->cluster)
		rados_shutdown(v->cluster);
	if (v->efd >= 0)
		close(v->efd);
	free(v);
	s->priv = NULL;
}

static int connect_cluster(struct rbd_vbd *v, const struct rbd_spec *sp,
			   const struct storage_opts *o)
{
	char osd_timeout[32];
	int rc;

	rc = rados_create(&v->cluster, sp->id);
	if (rc)
		return rc;
	rc = sp->conf ? rados_conf_read_file(v->cluster, sp->conf) :
			rados_conf_read_file(v->cluster, NULL);
	if (rc && sp->conf) {
		storage_set_error("rbd: cannot read %s: %s", sp->conf, strerror(-rc));
		return rc;
	}
	snprintf(osd_timeout, sizeof(osd_timeout), "%llu",
		 (unsigned long long)((o->outage_ms + 999) / 1000));
	rados_conf_set(v->cluster, "client_mount_timeout", MON_TIMEOUT_S);
	rados_conf_set(v->cluster, "rados_mon_op_timeout", MON_TIMEOUT_S);
	if (o->outage_ms)
		rados_conf_set(v->cluster, "rados_osd_op_timeout", osd_timeout);
	for (unsigned int i = 0; i < sp->nkv; i++) {
		rc = rados_conf_set(v->cluster, sp->keys[i], sp->vals[i]);
		if (rc) {
			storage_set_error("rbd: bad option %s=%s: %s", sp->keys[i],
					  sp->vals[i], strerror(-rc));
			return rc;
		}
	}
	rc = rados_connect(v->cluster);
	if (rc) {
		storage_set_error("rbd: cannot reach the cluster: %s", strerror(-rc));
		return rc;
	}
	rc = rados_ioctx_create(v->cluster, sp->pool, &v->io);
	if (rc) {
		storage_set_error("rbd: pool %s: %s", sp->pool, strerror(-rc));
		v->io = NULL;
	}
	return rc;
}

static int rbd_open_vbd(struct storage *s, const struct storage_opts *o)
{
	struct rbd_vbd *v = calloc(1, sizeof(*v));
	struct rbd_spec *sp = calloc(1, sizeof(*sp));
	rbd_image_info_t info;
	uint64_t size;
	int rc;

	if (!v || !sp) {
		free(v);
		free(sp);
		return -ENOMEM;
	}
	v->efd = -1;
	v->name = s->target;
	s->priv = v;
	rc = parse_spec(s->target, sp);
	if (rc) {
		storage_set_error("rbd: bad target (want POOL/IMAGE[@SNAP][:conf=PATH]"
				  "[:id=USER])");
		goto out;
	}
	if (sp->snap && !s->read_only) {
		storage_set_error("rbd: snapshot %s is read-only; attach it with access=ro",
				  sp->snap);
		rc = -EROFS;
		goto out;
	}
	rc = connect_cluster(v, sp, o);
	if (rc)
		goto out;
	rc = s->read_only ? rbd_open_read_only(v->io, sp->image, &v->image, sp->snap) :
			    rbd_open(v->io, sp->image, &v->image, NULL);
	if (rc) {
		storage_set_error("rbd: image %s/%s%s%s: %s", sp->pool, sp->image,
				  sp->snap ? "@" : "", sp->snap ? sp->snap : "",
				  strerror(-rc));
		v->image = NULL;
		goto out;
	}
	rc = rbd_get_size(v->image, &size);
	if (!rc)
		rc = rbd_stat(v->image, &info, sizeof(info));
	if (rc)
		goto out;
	v->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->efd < 0) {
		rc = -errno;
		goto out;
	}
	rc = rbd_set_image_notification(v->image, v->efd, EVENT_TYPE_EVENTFD);
	if (rc)
		goto out;
	s->size = size;
	s->logical_block = o->sector_size ? o->sector_size : 512;
	s->physical_block = 4096 > s->logical_block ? 4096 : s->logical_block;
	s->flush = true;
	s->discard = !s->read_only;
	s->discard_granularity = s->discard ? s->physical_block : 0;
	s->max_queues = 1;
out:
	free(sp);
	if (rc)
		rbd_close_vbd(s);
	return rc;
}

/* ---- the queue ---------------------------------------------------------- */

static int rbdq_open(const struct storage *s, unsigned int index, unsigned int depth,
		     const struct storage_loop *loop, struct storage_queue **out)
{
	struct rbd_vbd *v = s->priv;
	struct storage_queue *q;

	if (index > 0 || __atomic_exchange_n(&v->queue_taken, true, __ATOMIC_ACQ_REL))
		return -EBUSY;        /* max_queues is 1 */
	q = calloc(1, sizeof(*q));
	if (q)
		q->cmds = calloc(2 * depth, sizeof(*q->cmds));
	if (!q || !q->cmds) {
		free(q);
		__atomic_store_n(&v->queue_taken, false, __ATOMIC_RELEASE);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < 2 * depth; i++) {
		q->cmds[i].next = q->free;
		q->free = &q->cmds[i];
	}
	q->v = v;
	q->loop = *loop;
	*out = q;
	return 0;
}

static void rbdq_close(struct storage_queue *q)
{
	__atomic_store_n(&q->v->queue_taken, false, __ATOMIC_RELEASE);
	free(q->cmds);
	free(q);
}

static int rbdq_submit(struct storage_queue *q, const struct storage_req *r)
{
	struct rbd_cmd *cmd = q->free;
	rbd_completion_t c;
	int rc;

	if (r->op == STORAGE_DISCARD_SECURE)
		return -EOPNOTSUPP;
	if (!cmd)
		return -EBUSY;
	rc = rbd_aio_create_completion(cmd, NULL, &c);
	if (rc)
		return rc;
	q->free = cmd->next;
	cmd->tag = r->tag;
	cmd->op = r->op;
	cmd->len = r->len;
	/* A flush's link needs nothing more: librbd's flush completes after
	 * every write before it, and the data is submitted after it. */
	switch (r->op) {
	case STORAGE_READ:
		rc = rbd_aio_readv(q->v->image, r->iov, (int)r->iovcnt, r->off, c);
		break;
	case STORAGE_WRITE:
		rc = rbd_aio_writev(q->v->image, r->iov, (int)r->iovcnt, r->off, c);
		break;
	case STORAGE_FLUSH:
		rc = rbd_aio_flush(q->v->image, c);
		break;
	default:
		rc = rbd_aio_discard(q->v->image, r->off, r->len, c);
		break;
	}
	if (rc < 0) {
		rbd_aio_release(c);
		cmd->next = q->free;
		q->free = cmd;
		return rc;
	}
	return STORAGE_QUEUED;
}

static int rbdq_poll(struct storage_queue *q, short *events)
{
	*events = POLLIN;
	return q->v->efd;
}

/* Reset the eventfd first: a completion that lands after it wrote it
 * again, so none is missed between the read and the poll. */
static void rbdq_ready(struct storage_queue *q, short revents)
{
	rbd_completion_t comps[32];
	uint64_t n;
	int k;

	(void)revents;
	if (read(q->v->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	while ((k = rbd_poll_io_events(q->v->image, comps, 32)) > 0) {
		for (int i = 0; i < k; i++) {
			struct rbd_cmd *cmd = rbd_aio_get_arg(comps[i]);
			ssize_t res = rbd_aio_get_return_value(comps[i]);
			uint64_t tag = cmd->tag;

			rbd_aio_release(comps[i]);
			if (res >= 0 && cmd->op == STORAGE_WRITE)
				res = (ssize_t)cmd->len;
			else if (res > 0 && cmd->op != STORAGE_READ)
				res = 0;
			if (res < 0)
				log_warn("rbd: %s: a request failed: %s", q->v->name,
					 strerror((int)-res));
			cmd->next = q->free;
			q->free = cmd;
			q->loop.complete(q->loop.ctx, tag, res > INT32_MAX ? -EIO : (int)res);
		}
	}
}

const struct storage_driver storage_rbd_driver = {
	.name = "rbd",
	.open = rbd_open_vbd,
	.close = rbd_close_vbd,
	.queue_open = rbdq_open,
	.queue_close = rbdq_close,
	.submit = rbdq_submit,
	.poll = rbdq_poll,
	.ready = rbdq_ready,
	.get_size = rbd_get_size_vbd,
};
