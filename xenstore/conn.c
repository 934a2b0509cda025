/* SPDX-License-Identifier: MIT */
/*
 * Connections: framing, bounded input, non-blocking output queues.
 *
 * Input: bytes are read into a per-connection buffer and complete
 * messages are parsed from its front, so byte-at-a-time and pipelined
 * clients look the same.  A header announcing more than 4096 bytes drops
 * the connection without a reply (cxenstored: "Client tried to feed us").
 * A connection with quota.outstanding unread replies (privileged:
 * quota.priv_outstanding) is not read until it catches up, and no
 * connection gets more than IN_BUDGET requests per loop turn (fairness).
 * Writes of unprivileged domains are paced (XSA-206, see wrl_take()).
 *
 * Output: replies and events are queued per connection and written with
 * non-blocking sends; a client that never reads only fills its own queue.
 * Events beyond quota.events (privileged: quota.priv_events) are dropped
 * and logged; an identical event still unsent is not queued twice.  A
 * queued event of an unprivileged connection is charged to its domain's
 * memory quota until it is sent or dropped, and an event that would take
 * the domain past the quota is dropped (cxenstored since XSA-326): a
 * domain that watches much and reads nothing costs us at most its quota.
 *
 * Lifetime: conn_kill() closes the socket and drops watches,
 * transactions and queues at once, but the struct stays on the list
 * (marked dead) until conn_reap() at the end of the loop turn.
 */
#include "xenstored.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IN_CAP ((XS_HDR_SIZE + XS_MAX_PAYLOAD) * 4)
#define IN_BUDGET 64

struct outmsg {
	struct outmsg *next;
	bool event;
	time_t when;		/* CLOCK_MONOTONIC seconds at queueing */
	uint32_t len;		/* header + payload */
	uint32_t charge;	/* bytes charged to the conn's domain memory */
	uint8_t data[];
};

long conn_charged(const struct conn *c)
{
	long sum = txn_charged(c);

	for (const struct outmsg *m = c->out_head; m; m = m->next)
		sum += m->charge;
	return sum;
}

/* Free m, giving back what it cost its connection's domain. */
static void msg_free(struct conn *c, struct outmsg *m)
{
	if (m->charge) {
		struct domain *d = domain_get(c->domid, false);

		if (d)
			d->memory -= (long)m->charge;
	}
	free(m);
}

struct conn *conns;
static unsigned next_conn_id;

static time_t now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static struct domain *conn_domain(const struct conn *c)
{
	return c->priv ? NULL : domain_get(c->domid, false);
}

int64_t conn_target(const struct conn *c)
{
	struct domain *d = conn_domain(c);
	return d ? d->target : -1;
}

int conn_new(int fd, uint32_t domid, bool priv)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct epoll_event ev = { .events = EPOLLIN };

	if (!c || !(c->in = malloc(IN_CAP))) {
		free(c);
		close(fd);
		return -ENOMEM;
	}
	c->kind = POLL_CONN;
	c->fd = fd;
	c->domid = domid;
	c->priv = priv;
	c->id = ++next_conn_id;
	c->events_mask = EPOLLIN;
	ev.data.ptr = c;
	if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = -errno;
		free(c->in);
		free(c);
		close(fd);
		return err;
	}
	c->next = conns;
	conns = c;
	log_debug("connection %u: domain %u%s", c->id, domid,
		  priv ? " (privileged)" : "");
	return 0;
}

unsigned conn_count(uint32_t domid)
{
	unsigned n = 0;

	for (struct conn *c = conns; c; c = c->next)
		if (!c->dead && !c->priv && c->domid == domid)
			n++;
	return n;
}

static void out_free_all(struct conn *c)
{
	while (c->out_head) {
		struct outmsg *m = c->out_head;
		c->out_head = m->next;
		msg_free(c, m);
	}
	c->out_tail = NULL;
	c->out_off = 0;
	c->out_replies = c->out_events = 0;
}

void conn_kill(struct conn *c, const char *why)
{
	if (c->dead)
		return;
	log_debug("connection %u: closed (%s)", c->id, why);
	c->dead = true;
	epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	txn_abort_all(c);
	watch_reset(c);
	out_free_all(c);
	free(c->in);
	c->in = NULL;
	c->in_have = 0;
}

void conn_reap(void)
{
	struct conn **pp = &conns;

	while (*pp) {
		struct conn *c = *pp;
		if (c->dead) {
			*pp = c->next;
			free(c);
		} else {
			pp = &c->next;
		}
	}
}

void conn_shutdown(void)
{
	for (struct conn *c = conns; c; c = c->next)
		conn_kill(c, "shutdown");
	conn_reap();
}

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static bool can_take_request(const struct conn *c)
{
	unsigned limit = c->priv ? quota.priv_outstanding : quota.outstanding;
	return !c->dead && c->out_replies < limit &&
	       !(c->throttle_until && mono_ms() < c->throttle_until);
}

/*
 * XSA-206: a domain rewriting nodes as fast as it can would make every
 * other client's transaction fail with EAGAIN, again and again.  So the
 * writes (WRITE, MKDIR, RM, SET_PERMS) of an unprivileged domain, over all
 * its connections, draw on a token bucket: quota.write_rate per second,
 * quota.write_burst at most at once (cxenstored's defaults: 200/s, 10).
 * Out of credit, the connection's input waits (not read, not processed,
 * no error) until one write's worth has accrued; the main loop sleeps no
 * longer than that (conn_throttle_wait()).
 * Example, rate 200 and burst 10: ten writes at once pass, the eleventh
 * waits 5 ms, and a steady flood gets one write every 5 ms.
 */
static bool is_write(uint32_t type)
{
	return type == XS_WRITE || type == XS_MKDIR || type == XS_RM || type == XS_SET_PERMS;
}

static bool wrl_take(struct conn *c)
{
	long long now, cap, rate = quota.write_rate;
	struct domain *d;

	if (c->priv || !rate || !(d = domain_get(c->domid, true)))
		return true;
	now = mono_ms();
	cap = 1000LL * (quota.write_burst ? quota.write_burst : 1);
	d->wrl_credit = d->wrl_last ? d->wrl_credit + (now - d->wrl_last) * rate : cap;
	if (d->wrl_credit > cap)
		d->wrl_credit = cap;
	d->wrl_last = now;
	if (d->wrl_credit >= 1000) {
		d->wrl_credit -= 1000;
		c->throttle_until = 0;
		return true;
	}
	c->throttle_until = now + (1000 - d->wrl_credit + rate - 1) / rate;
	return false;
}

int conn_throttle_wait(void)
{
	long long now = mono_ms(), first = -1;

	for (struct conn *c = conns; c; c = c->next)
		if (!c->dead && c->throttle_until &&
		    (first < 0 || c->throttle_until < first))
			first = c->throttle_until;
	return first < 0 ? -1 : first <= now ? 0 : (int)(first - now);
}

void conn_update_events(struct conn *c)
{
	uint32_t mask = 0;
	struct epoll_event ev;

	if (c->dead)
		return;
	if (c->in_have < IN_CAP && can_take_request(c))
		mask |= EPOLLIN;
	if (c->out_head)
		mask |= EPOLLOUT;
	if (mask == c->events_mask)
		return;
	ev.events = mask;
	ev.data.ptr = c;
	if (epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->events_mask = mask;
}

static void conn_flush(struct conn *c)
{
	while (!c->dead && c->out_head) {
		struct outmsg *m = c->out_head;
		ssize_t n = send(c->fd, m->data + c->out_off, m->len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_kill(c, "write error");
			return;
		}
		c->out_off += (size_t)n;
		if (c->out_off < m->len)
			break;
		c->out_head = m->next;
		if (!c->out_head)
			c->out_tail = NULL;
		c->out_off = 0;
		if (m->event)
			c->out_events--;
		else
			c->out_replies--;
		msg_free(c, m);
	}
}

static int queue_msg(struct conn *c, struct outmsg *m)
{
	bool was_empty = !c->out_head;

	if (c->out_tail)
		c->out_tail->next = m;
	else
		c->out_head = m;
	c->out_tail = m;
	if (m->event)
		c->out_events++;
	else
		c->out_replies++;
	if (was_empty)
		conn_flush(c);
	conn_update_events(c);
	return 0;
}

static struct outmsg *msg_new(uint32_t type, uint32_t req_id, uint32_t tx_id,
			      const void *data, uint32_t len, bool event)
{
	struct xsd_sockmsg hdr = { type, req_id, tx_id, len };
	struct outmsg *m = malloc(sizeof(*m) + XS_HDR_SIZE + len);

	if (!m)
		return NULL;
	m->next = NULL;
	m->event = event;
	m->charge = 0;
	m->when = now_sec();
	m->len = XS_HDR_SIZE + len;
	memcpy(m->data, &hdr, XS_HDR_SIZE);
	if (len)
		memcpy(m->data + XS_HDR_SIZE, data, len);
	return m;
}

int conn_send(struct conn *c, uint32_t type, uint32_t req_id, uint32_t tx_id,
	      const void *data, uint32_t len)
{
	struct outmsg *m;

	if (c->dead)
		return -EPIPE;
	m = msg_new(type, req_id, tx_id, data, len, false);
	if (!m) {
		conn_kill(c, "out of memory");
		return -ENOMEM;
	}
	trace_msg(c, "OUT", (const struct xsd_sockmsg *)m->data,
		  m->data + XS_HDR_SIZE);
	return queue_msg(c, m);
}

/* An identical event queued and not yet (partly) sent makes this one
 * redundant. */
static bool event_queued(const struct conn *c, const uint8_t *data,
			 uint32_t len)
{
	for (struct outmsg *m = c->out_head; m; m = m->next) {
		if (!m->event || (m == c->out_head && c->out_off))
			continue;
		if (m->len == XS_HDR_SIZE + len &&
		    memcmp(m->data + XS_HDR_SIZE, data, len) == 0)
			return true;
	}
	return false;
}

int conn_send_event(struct conn *c, const char *path, const char *token)
{
	size_t plen = strlen(path) + 1, tlen = strlen(token) + 1;
	unsigned limit = c->priv ? quota.priv_events : quota.events;
	uint8_t buf[XS_MAX_PAYLOAD];
	struct domain *d;
	struct outmsg *m;
	long cost;

	if (c->dead || plen + tlen > XS_MAX_PAYLOAD)
		return -E2BIG;	/* XSA-324: never send an oversize event */
	memcpy(buf, path, plen);
	memcpy(buf + plen, token, tlen);
	if (event_queued(c, buf, (uint32_t)(plen + tlen)))
		return 0;
	if (c->out_events >= limit) {
		if (!c->event_drop_logged)
			log_warn("connection %u (domain %u): %u unread watch events, dropping new ones",
				 c->id, c->domid, c->out_events);
		c->event_drop_logged = true;
		return -ENOSPC;
	}
	cost = (long)(sizeof(*m) + XS_HDR_SIZE + plen + tlen);
	d = c->priv ? NULL : domain_get(c->domid, true);
	if (!c->priv && (!d || d->memory + cost > (long)quota.memory)) {
		if (!c->event_drop_logged)
			log_warn("connection %u (domain %u): watch events would pass "
				 "the memory quota, dropping new ones", c->id, c->domid);
		c->event_drop_logged = true;
		return -ENOMEM;
	}
	m = msg_new(XS_WATCH_EVENT, 0, 0, buf, (uint32_t)(plen + tlen), true);
	if (!m)
		return -ENOMEM;
	if (d) {
		d->memory += cost;
		m->charge = (uint32_t)cost;
	}
	c->event_drop_logged = false;
	trace_msg(c, "EVT", (const struct xsd_sockmsg *)m->data,
		  m->data + XS_HDR_SIZE);
	return queue_msg(c, m);
}

/* cxenstored drops events an unprivileged domain left unread too long. */
void conn_expire_events(void)
{
	time_t limit;

	if (!quota.event_timeout)
		return;
	limit = now_sec() - (time_t)quota.event_timeout;
	for (struct conn *c = conns; c; c = c->next) {
		if (c->dead || c->priv)
			continue;
		struct outmsg **pp = &c->out_head, *prev = NULL;
		while (*pp) {
			struct outmsg *m = *pp;
			bool busy = m == c->out_head && c->out_off;
			if (m->event && !busy && m->when < limit) {
				*pp = m->next;
				c->out_events--;
				msg_free(c, m);
				continue;
			}
			prev = m;
			pp = &m->next;
		}
		c->out_tail = prev;
		conn_update_events(c);
	}
}

/* Parse and run complete messages from the front of the input buffer. */
static void conn_process_input(struct conn *c)
{
	struct xsd_sockmsg hdr;
	size_t used = 0;

	for (int budget = IN_BUDGET; budget > 0 && can_take_request(c); budget--) {
		if (c->in_have - used < XS_HDR_SIZE)
			break;
		memcpy(&hdr, c->in + used, XS_HDR_SIZE);
		if (hdr.len > XS_MAX_PAYLOAD) {
			log_warn("connection %u: client tried to feed us %u bytes",
				 c->id, hdr.len);
			conn_kill(c, "oversize message");
			return;
		}
		if (c->in_have - used < XS_HDR_SIZE + hdr.len)
			break;
		if (is_write(hdr.type) && !wrl_take(c))
			break;
		ops_process(c, &hdr, c->in + used + XS_HDR_SIZE);
		if (c->dead)
			return;
		used += XS_HDR_SIZE + hdr.len;
	}
	if (used) {
		memmove(c->in, c->in + used, c->in_have - used);
		c->in_have -= used;
	}
}

static bool has_backlog(const struct conn *c)
{
	struct xsd_sockmsg hdr;

	if (c->dead || c->in_have < XS_HDR_SIZE || !can_take_request(c))
		return false;
	memcpy(&hdr, c->in, XS_HDR_SIZE);
	return hdr.len > XS_MAX_PAYLOAD || c->in_have >= XS_HDR_SIZE + hdr.len;
}

bool conn_run_backlog(void)
{
	bool more = false;

	for (struct conn *c = conns; c; c = c->next) {
		if (c->throttle_until && mono_ms() >= c->throttle_until) {
			c->throttle_until = 0;        /* credit again: read it */
			conn_update_events(c);
		}
		if (!has_backlog(c))
			continue;
		conn_process_input(c);
		conn_update_events(c);
		more |= has_backlog(c);
	}
	return more;
}

static void conn_read(struct conn *c)
{
	ssize_t n;

	if (c->in_have >= IN_CAP)
		return;
	n = recv(c->fd, c->in + c->in_have, IN_CAP - c->in_have, MSG_DONTWAIT);
	if (n == 0) {
		conn_kill(c, "client closed");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_kill(c, "read error");
		return;
	}
	c->in_have += (size_t)n;
	conn_process_input(c);
}

void conn_handle(struct conn *c, uint32_t events)
{
	if (c->dead)
		return;
	if (events & EPOLLOUT)
		conn_flush(c);
	if (!c->dead && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_read(c);
	if (!c->dead && (events & (EPOLLHUP | EPOLLERR)) &&
	    !(events & EPOLLIN))
		conn_kill(c, "hang-up");
	conn_update_events(c);
}
