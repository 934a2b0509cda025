/* SPDX-License-Identifier: MIT */
/*
 * backend/storage/nbd.c: the nbd driver, an NBD export through libnbd.
 *
 * The target is an NBD URI as libnbd takes it (nbd://HOST[:PORT]/EXPORT,
 * nbd+unix:///EXPORT?socket=PATH).  storage_open() connects once on the
 * control thread (bounded by the connect timeout) to learn the geometry
 * and whether the server offers multi-conn, then hangs up.  Each queue
 * then has its own connection, made asynchronously by its own loop:
 * libnbd's non-blocking API (nbd_aio_connect_uri, nbd_aio_pread/pwrite/
 * flush/trim) with the socket polled by the queue's io_uring
 * (nbd_aio_get_fd / nbd_aio_get_direction) and nbd_aio_notify_read/write
 * on readiness.  A server without multi-conn gets one queue (max_queues
 * 1): flushes on one connection would not cover writes on another.
 *
 * Commands: one per request part (a flush, the data, a discard); the data
 * of a request with several segments goes through a per-command bounce
 * buffer (libnbd 1.14 takes one buffer per command).  libnbd's completion
 * callback only records the result; the queue delivers it to the loop
 * after the libnbd call returned, so the loop never re-enters libnbd from
 * inside it.  One readiness of the socket takes every reply already in it
 * (drain_replies), so the loop answers them in one batch.  A flush with
 * link holds back the command after it until it completed.
 *
 * Lost connections: the commands the dead connection had in flight, and
 * everything submitted while it is down, wait; the queue reconnects every
 * RETRY_MS and re-issues them in order.  When the outage lasts longer
 * than opts->outage_ms they fail with -EIO, as does anything submitted
 * until a connection is back (the storage_outage_ms tunable, read when
 * the vbd is opened).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <libnbd.h>

#include "backend/storage/storage.h"
#include "log.h"

#define RETRY_MS        100
#define CONNECT_MAX_MS  10000   /* one attempt, open and reconnect */

struct nbd_vbd {
	char uri[STORAGE_TARGET_MAX];
	uint64_t outage_ns;
	bool lost;                    /* atomic: storage_nbd_lost() */
};

enum cmd_state { CMD_FREE, CMD_WAITING, CMD_ISSUED, CMD_DONE };

struct cmd {
	struct storage_queue *q;
	struct storage_req r;
	enum cmd_state state;
	int err;                      /* errno from libnbd's callback */
	void *bounce;                 /* multi-segment data */
	size_t bounce_cap;
	struct cmd *next;             /* free, waiting or done list */
};

struct cmd_list {
	struct cmd *head, *tail;
};

enum q_state { Q_DOWN, Q_CONNECTING, Q_READY };

struct storage_queue {
	bool flush;                   /* the export can flush */
	const struct nbd_vbd *v;
	struct storage_loop loop;
	unsigned int index;
	struct nbd_handle *h;
	enum q_state st;
	uint64_t connect_start, down_since, next_retry;
	bool failing;                 /* outage past the limit */
	struct cmd *cmds;
	unsigned int ncmds, busy;     /* busy: not CMD_FREE */
	struct cmd *free;
	struct cmd_list waiting, done;
	struct cmd *link;             /* a linked flush in flight */
	bool in_deliver;
	uint64_t replies;             /* completions libnbd gave cmd_cb */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void list_add(struct cmd_list *l, struct cmd *c)
{
	c->next = NULL;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
}

static struct cmd *list_pop(struct cmd_list *l)
{
	struct cmd *c = l->head;

	if (c) {
		l->head = c->next;
		if (!l->head)
			l->tail = NULL;
	}
	return c;
}

static bool dead(struct nbd_handle *h)
{
	return nbd_aio_is_dead(h) == 1 || nbd_aio_is_closed(h) == 1;
}

/* ---- connecting ------------------------------------------------------ */

/* Start a connection: a new handle, the connect under way.  0 or -errno. */
static int start_connect(const char *uri, struct nbd_handle **out)
{
	struct nbd_handle *h = nbd_create();

	*out = NULL;
	if (!h)
		return -ENOMEM;
	if (nbd_aio_connect_uri(h, uri) == -1) {
		int e = nbd_get_errno();

		storage_set_error("nbd: %s", nbd_get_error());
		nbd_close(h);
		return e ? -e : -EIO;
	}
	*out = h;
	return 0;
}

static short poll_events(struct nbd_handle *h)
{
	unsigned int dir = nbd_aio_get_direction(h);
	short ev = 0;

	if (dir & LIBNBD_AIO_DIRECTION_READ)
		ev |= POLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		ev |= POLLOUT;
	return ev;
}

/*
 * Whether a read of the socket would not block: a byte waits, the peer
 * closed it (0) or it has an error.  libnbd 1.14 must never be told the
 * socket is readable when it is empty: its REPLY.START takes the EAGAIN
 * and stays there, and there it issues none of the commands queued since
 * (nor the rest of one it paused to read) until the server sends, which
 * it never does once it answered everything it got.  A readiness can be
 * stale by the time it is handled: the socket was drained in between.
 */
static bool readable(struct nbd_handle *h)
{
	int fd = nbd_aio_get_fd(h);
	char b;

	if (fd < 0)
		return false;
	if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
	    (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		return true;
	return false;
}

/* Tell libnbd what the socket is ready for, but only what it waits for. */
static void notify(struct nbd_handle *h, short revents)
{
	unsigned int dir = nbd_aio_get_direction(h);

	if (revents & (POLLOUT | POLLERR | POLLHUP) && dir & LIBNBD_AIO_DIRECTION_WRITE)
		nbd_aio_notify_write(h);
	dir = nbd_aio_get_direction(h);
	if (revents & (POLLIN | POLLERR | POLLHUP) && dir & LIBNBD_AIO_DIRECTION_READ &&
	    readable(h))
		nbd_aio_notify_read(h);
}

/* The control thread's blocking connect, bounded by CONNECT_MAX_MS. */
static int connect_wait(const char *uri, struct nbd_handle **out)
{
	uint64_t deadline = now_ns() + CONNECT_MAX_MS * 1000000ull;
	struct nbd_handle *h;
	int rc = start_connect(uri, &h);

	while (!rc && nbd_aio_is_ready(h) != 1) {
		struct pollfd p = { nbd_aio_get_fd(h), 0, 0 };
		uint64_t now = now_ns();

		if (dead(h)) {
			storage_set_error("nbd: %s: %s", uri, nbd_get_error() ?
					  nbd_get_error() : "connection failed");
			rc = -ECONNREFUSED;
			break;
		}
		if (now >= deadline) {
			storage_set_error("nbd: %s: no answer in %u ms", uri, CONNECT_MAX_MS);
			rc = -ETIMEDOUT;
			break;
		}
		p.events = poll_events(h);
		if (p.fd < 0 || poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) < 0) {
			rc = -errno ? -errno : -EIO;
			break;
		}
		if (p.revents)
			notify(h, p.revents);
	}
	if (rc && h)
		nbd_close(h);
	*out = rc ? NULL : h;
	return rc;
}

/* ---- the vbd ------------------------------------------------------------ */

static uint32_t clamp_block(int64_t v, uint32_t lo)
{
	if (v <= lo || v > 4096 || (v & (v - 1)))
		return lo;
	return (uint32_t)v;
}

int storage_nbd_open(struct storage *s, const char *uri, const struct storage_opts *o)
{
	struct nbd_vbd *v = calloc(1, sizeof(*v));
	struct nbd_handle *h;
	int64_t size;
	int rc;

	if (!v)
		return -ENOMEM;
	if (strlen(uri) >= sizeof(v->uri)) {
		free(v);
		return -EINVAL;
	}
	strcpy(v->uri, uri);
	v->outage_ns = o->outage_ms * 1000000ull;
	rc = connect_wait(uri, &h);
	if (rc) {
		free(v);
		return rc;
	}
	size = nbd_get_size(h);
	if (size < 0) {
		storage_set_error("nbd: %s: %s", uri, nbd_get_error());
		rc = -EIO;
		goto out;
	}
	if (!s->read_only && nbd_is_read_only(h) == 1) {
		storage_set_error("nbd: %s is a read-only export; attach it with access=ro",
				  uri);
		rc = -EROFS;
		goto out;
	}
	s->size = (uint64_t)size;
	s->logical_block = o->sector_size ? o->sector_size :
			   clamp_block(nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM), 512);
	s->physical_block = clamp_block(nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED),
					s->logical_block);
	s->flush = nbd_can_flush(h) == 1;
	s->discard = !s->read_only && nbd_can_trim(h) == 1;
	s->discard_granularity = s->discard ? s->physical_block : 0;
	s->max_queues = nbd_can_multi_conn(h) == 1 ? 0 : 1;
	s->priv = v;
out:
	nbd_shutdown(h, 0);
	nbd_close(h);
	if (rc)
		free(v);
	return rc;
}

void storage_nbd_lost(void *nbd_priv)
{
	struct nbd_vbd *v = nbd_priv;

	__atomic_store_n(&v->lost, true, __ATOMIC_RELEASE);
}

void storage_nbd_close(struct storage *s)
{
	free(s->priv);
	s->priv = NULL;
}

static int nbd_open(struct storage *s, const struct storage_opts *o)
{
	return storage_nbd_open(s, s->target, o);
}

/* ---- a queue's connection ------------------------------------------- */

static int cmd_cb(void *user_data, int *error)
{
	struct cmd *c = user_data;

	c->err = *error;
	c->state = CMD_DONE;
	c->q->replies++;
	list_add(&c->q->done, c);
	return 1;                     /* retire the command */
}

static int issue(struct storage_queue *q, struct cmd *c)
{
	nbd_completion_callback cb = { .callback = cmd_cb, .user_data = c };
	const struct storage_req *r = &c->r;
	void *buf = r->iovcnt == 1 ? r->iov[0].iov_base : c->bounce;
	int64_t ck;

	if (r->op == STORAGE_WRITE && r->iovcnt > 1) {
		char *p = c->bounce;

		for (unsigned int i = 0; i < r->iovcnt; i++) {
			memcpy(p, r->iov[i].iov_base, r->iov[i].iov_len);
			p += r->iov[i].iov_len;
		}
	}
	c->state = CMD_ISSUED;
	switch (r->op) {
	case STORAGE_READ:
		ck = nbd_aio_pread(q->h, buf, r->len, r->off, cb, 0);
		break;
	case STORAGE_WRITE:
		ck = nbd_aio_pwrite(q->h, buf, r->len, r->off, cb, 0);
		break;
	case STORAGE_FLUSH:
		ck = nbd_aio_flush(q->h, cb, 0);
		break;
	default:
		ck = nbd_aio_trim(q->h, r->len, r->off, cb, 0);
		break;
	}
	if (ck == -1) {
		c->state = CMD_WAITING;
		return dead(q->h) ? -ENOTCONN : -(nbd_get_errno() ? nbd_get_errno() : EIO);
	}
	if (r->op == STORAGE_FLUSH && r->link)
		q->link = c;
	return 0;
}

static void finish(struct storage_queue *q, struct cmd *c, int res)
{
	uint64_t tag = c->r.tag;

	if (q->link == c)
		q->link = NULL;
	c->state = CMD_FREE;
	c->next = q->free;
	q->free = c;
	q->busy--;
	q->loop.complete(q->loop.ctx, tag, res);
}

/* Drop the connection.  A socket still alive (a connect that takes too
 * long) is shut down first, so that the loop's polls on it end. */
static void go_down(struct storage_queue *q)
{
	if (q->h) {
		int fd = dead(q->h) ? -1 : nbd_aio_get_fd(q->h);

		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
		nbd_close(q->h);
		q->h = NULL;
	}
	/* What the connection had in flight and libnbd did not retire
	 * (or retired into q->done, handled by the caller): wait again. */
	for (unsigned int i = 0; i < q->ncmds; i++) {
		struct cmd *c = &q->cmds[i];

		if (c->state == CMD_ISSUED) {
			c->state = CMD_DONE;
			c->err = ENOTCONN;
			list_add(&q->done, c);
		}
	}
	if (q->st == Q_READY)
		log_warn("nbd: %s: queue %u lost its connection: reconnecting",
			 q->v->uri, q->index);
	if (q->st != Q_DOWN && !q->down_since)
		q->down_since = now_ns();
	q->st = Q_DOWN;
	q->link = NULL;
}

/* Issue what waits, in order, unless a linked flush holds it back. */
static void issue_waiting(struct storage_queue *q)
{
	struct cmd *c;

	while (q->st == Q_READY && !q->link && (c = q->waiting.head)) {
		int rc = issue(q, c);

		if (rc == -ENOTCONN) {
			go_down(q);
			return;
		}
		list_pop(&q->waiting);
		if (rc)
			finish(q, c, rc);
	}
}

/* After any libnbd call: notice state changes, re-queue what a lost
 * connection had in flight, deliver the rest, issue what waits. */
static void progress(struct storage_queue *q)
{
	struct cmd_list lost = { 0 };
	struct cmd *c;

	if (q->in_deliver)
		return;
	q->in_deliver = true;
	for (;;) {
		if (q->st == Q_CONNECTING && nbd_aio_is_ready(q->h) == 1) {
			if (q->down_since)
				log_info("nbd: %s: queue %u connected again after %llu ms",
					 q->v->uri, q->index, (unsigned long long)
					 ((now_ns() - q->down_since) / 1000000u));
			q->st = Q_READY;
			q->down_since = 0;
			q->failing = false;
		}
		if (q->st != Q_DOWN && dead(q->h))
			go_down(q);
		while ((c = list_pop(&q->done))) {
			if (c->err && (q->st == Q_DOWN || c->err == ENOTCONN ||
				       c->err == ESHUTDOWN)) {
				c->state = CMD_WAITING;
				list_add(&lost, c);     /* re-issued on reconnect */
				continue;
			}
			if (!c->err && c->r.op == STORAGE_READ && c->r.iovcnt > 1) {
				const char *p = c->bounce;

				for (unsigned int i = 0; i < c->r.iovcnt; i++) {
					memcpy(c->r.iov[i].iov_base, p, c->r.iov[i].iov_len);
					p += c->r.iov[i].iov_len;
				}
			}
			finish(q, c, c->err ? -c->err :
			       c->r.op <= STORAGE_WRITE ? (int)c->r.len : 0);
		}
		if (lost.head) {              /* ahead of what waited */
			lost.tail->next = q->waiting.head;
			if (!q->waiting.head)
				q->waiting.tail = lost.tail;
			q->waiting.head = lost.head;
			lost.head = lost.tail = NULL;
		}
		issue_waiting(q);
		if (!q->done.head)
			break;
	}
	q->in_deliver = false;
}

static void reconnect(struct storage_queue *q, uint64_t now)
{
	q->next_retry = now + RETRY_MS * 1000000ull;
	if (start_connect(q->v->uri, &q->h))
		return;
	q->st = Q_CONNECTING;
	q->connect_start = now;
	progress(q);
}

int nbdq_open(const struct storage *s, unsigned int index, unsigned int depth,
		     const struct storage_loop *loop, struct storage_queue **out)
{
	struct storage_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->flush = s->flush;
	q->v = s->priv;
	q->loop = *loop;
	q->index = index;
	q->ncmds = 2 * depth;         /* a flush and the data per request */
	q->cmds = calloc(q->ncmds, sizeof(*q->cmds));
	if (!q->cmds) {
		free(q);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < q->ncmds; i++) {
		q->cmds[i].q = q;
		q->cmds[i].next = q->free;
		q->free = &q->cmds[i];
	}
	q->st = Q_DOWN;
	q->down_since = now_ns();     /* not up yet: the outage clock runs */
	reconnect(q, q->down_since);       /* the loop drives it from here */
	*out = q;
	return 0;
}

void nbdq_close(struct storage_queue *q)
{
	if (q->h) {
		if (q->st == Q_READY)
			nbd_shutdown(q->h, 0);
		nbd_close(q->h);
	}
	for (unsigned int i = 0; i < q->ncmds; i++)
		free(q->cmds[i].bounce);
	free(q->cmds);
	free(q);
}

int nbdq_submit(struct storage_queue *q, const struct storage_req *r)
{
	struct cmd *c;

	if (r->op == STORAGE_DISCARD_SECURE)
		return -EOPNOTSUPP;
	if (r->op == STORAGE_FLUSH && !q->flush)
		return 0;                 /* nothing cached to flush */
	if (q->failing)
		return -EIO;              /* an outage past the limit */
	c = q->free;
	if (!c)
		return -EBUSY;
	if ((r->op == STORAGE_READ || r->op == STORAGE_WRITE) && r->iovcnt > 1 &&
	    c->bounce_cap < r->len) {
		void *b = realloc(c->bounce, r->len);

		if (!b)
			return -ENOMEM;
		c->bounce = b;
		c->bounce_cap = r->len;
	}
	q->free = c->next;
	q->busy++;
	c->r = *r;
	c->err = 0;
	c->state = CMD_WAITING;
	list_add(&q->waiting, c);
	if (q->st == Q_READY)
		progress(q);
	return STORAGE_QUEUED;
}

int nbdq_poll(struct storage_queue *q, short *events)
{
	if (q->st == Q_DOWN || !q->h)
		return -1;
	*events = poll_events(q->h);
	return nbd_aio_get_fd(q->h);
}

/*
 * libnbd reads at most one reply per nbd_aio_notify_read (its READY state
 * goes back to waiting after each), so one poll would cost a wake-up, an
 * io_uring round trip and a re-armed poll per reply.  Read on while each
 * call finished a reply and the socket holds more (readable()): every reply
 * already there is taken in this one readiness, and the loop answers them
 * together (one push, one event-channel notify).  Never a notify_read on
 * an empty socket (readable()).  Bounded by what can be in flight.
 */
static void drain_replies(struct storage_queue *q)
{
	for (unsigned int n = 0; n < q->ncmds; n++) {
		uint64_t before = q->replies;

		if (!q->h || dead(q->h) ||
		    !(nbd_aio_get_direction(q->h) & LIBNBD_AIO_DIRECTION_READ) ||
		    !readable(q->h) || nbd_aio_notify_read(q->h) == -1 ||
		    q->replies == before)
			return;
	}
}

void nbdq_ready(struct storage_queue *q, short revents)
{
	uint64_t before = q->replies;

	if (q->st == Q_DOWN || !q->h)
		return;
	notify(q->h, revents);
	if (q->st == Q_READY && q->replies != before)
		drain_replies(q);
	progress(q);
}

/* Fail what waits: the outage is longer than the limit. */
static void fail_waiting(struct storage_queue *q)
{
	struct cmd *c;

	if (!__atomic_load_n(&q->v->lost, __ATOMIC_ACQUIRE))
		log_warn("nbd: %s: queue %u down for more than %llu ms: failing its I/O",
			 q->v->uri, q->index,
			 (unsigned long long)(q->v->outage_ns / 1000000u));
	q->failing = true;
	while ((c = list_pop(&q->waiting)))
		finish(q, c, -EIO);
}

void nbdq_tick(struct storage_queue *q, uint64_t now)
{
	if (__atomic_load_n(&q->v->lost, __ATOMIC_ACQUIRE)) {
		if (!q->failing) {
			go_down(q);
			progress(q);         /* what was in flight waits now */
			fail_waiting(q);
		}
		return;                  /* no reconnects to a store that is gone */
	}
	if (q->st == Q_CONNECTING &&
	    now - q->connect_start > CONNECT_MAX_MS * 1000000ull) {
		go_down(q);
		progress(q);
	}
	if (q->st == Q_DOWN) {
		if (q->down_since && !q->failing &&
		    now - q->down_since > q->v->outage_ns)
			fail_waiting(q);
		if (now >= q->next_retry)
			reconnect(q, now);
	}
}

static void nbd_close_vbd(struct storage *s)
{
	storage_nbd_close(s);
}

const struct storage_driver storage_nbd_driver = {
	.name = "nbd",
	.open = nbd_open,
	.close = nbd_close_vbd,
	.queue_open = nbdq_open,
	.queue_close = nbdq_close,
	.submit = nbdq_submit,
	.poll = nbdq_poll,
	.ready = nbdq_ready,
	.tick = nbdq_tick,
};
