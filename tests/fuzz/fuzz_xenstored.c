/* SPDX-License-Identifier: MIT */
/*
 * fuzz_xenstored: wire messages against the real xbd-xenstored code, in
 * process.
 *
 * The daemon's files (every xenstore/ source but main.c, whose only shared
 * definition, epoll_fd, is given here) are linked as they are.  Each input
 * starts a fresh store (db_init), introduces domain 1 (as the toolstack
 * does before the guest connects) and opens two connections on in-memory
 * socket pairs (below), as accept() would: a privileged one (domain 0)
 * and an unprivileged one (domain 1).  The input is a series of chunks; each
 * is written to one connection's socket and the daemon's own handlers run
 * (conn_handle, conn_run_backlog, conn_reap) as its epoll loop would.  A
 * chunk is either raw bytes (any framing, any header) or one message
 * whose header the harness builds (any type, tx id and payload, correct
 * length).  Connections may be closed and opened again mid-stream.
 *
 * Checked after every chunk, on every byte the daemon sends back: each
 * message has a valid header (type known, len <= 4096), an ERROR carries
 * one of xsd_errors' names, a WATCH_EVENT two strings.  At the end of each
 * input: every node of the store is reachable from "/" through the child
 * lists and no other node exists (the CONTROL "check" invariant), each
 * domain's node count equals the nodes it owns, and everything is freed
 * (LeakSanitizer).
 *
 * Write pacing (XSA-206, quota write-rate) is off: it holds a guest's
 * input back by the wall clock, so with it on the fuzzer would explore
 * the 5 ms sleeps of the bucket rather than the protocol, and an input
 * would not replay the same way twice.  An input may still turn it on
 * (CONTROL quota set write-rate N on the privileged connection); unless
 * it does, no connection may ever be held back.  Pacing itself is tested
 * by tests/system/test_faults_xenstored_writes.py.
 *
 * Input layout: chunks of struct fz_chunk + len payload bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "xenstore/xenstored.h"
#include "log.h"
#include "tests/fuzz/fuzz.h"

/* main.c's one definition the other files use. */
int epoll_fd = -1;

#define FZ_GUEST 1u

struct fz_chunk {
	uint8_t sel;           /* bit0 unprivileged conn, bit1 raw bytes,
				* bit2 do not read replies, bit3 close the
				* connection after the chunk */
	uint8_t type;          /* built messages: XS_* */
	uint8_t tx_id;         /* built messages */
	uint16_t len;          /* payload bytes that follow (% 4200) */
} __attribute__((packed));

struct side {
	struct conn *c;        /* the daemon's end; NULL when closed */
	int peer;              /* our end */
	uint8_t buf[2 * (XS_HDR_SIZE + XS_MAX_PAYLOAD)];
	size_t have;
};

static struct side sides[2];

/*
 * The connections are in-memory sockets (no system call per input for
 * them): a pair of descriptors from a range no real descriptor reaches,
 * each end with an inbox of FZ_SOCK_CAP bytes, and the calls the daemon
 * makes on a connection (conn.c: send, recv, close, epoll_ctl) wrapped
 * (-Wl,--wrap) to serve them with an AF_UNIX stream socket's semantics:
 * a send takes what fits in the peer's inbox (EAGAIN when none does,
 * EPIPE once the peer closed), a recv what is there (0 once the peer
 * closed and the inbox is empty, EAGAIN before), a close ends the peer's
 * stream and drops the descriptor from the epoll set; readiness is level
 * triggered, EPOLLIN for data or a closed peer, EPOLLOUT while the peer's
 * inbox has room, EPOLLHUP once the peer closed.  daemon_turn asks these
 * sockets what is ready, as epoll_wait would.  Every other descriptor
 * (domain 1's listening socket, the fuzzer's own files) goes to the
 * real calls.  The sockets are free at the end of every input (checked).
 */
static char rundir_buf[64];

#define FZ_SOCK_BASE 0x7f000000
#define FZ_SOCKS 16
#define FZ_SOCK_CAP 65536u

struct fsock {
	bool open;
	bool listener;         /* a listening socket: no peer, never ready */
	char path[108];        /* the listener's bound name ("" if none) */
	bool peer_gone;        /* the other end was closed */
	bool registered;       /* in the daemon's epoll set */
	uint32_t events;
	void *ptr;             /* epoll data */
	int peer;              /* index of the other end */
	size_t head, len;      /* inbox: buf[head .. head + len) */
	uint8_t buf[FZ_SOCK_CAP];
};
static struct fsock socks[FZ_SOCKS];

static struct fsock *fsock_of(int fd)
{
	if (fd < FZ_SOCK_BASE || fd >= FZ_SOCK_BASE + FZ_SOCKS)
		return NULL;
	CHECK(socks[fd - FZ_SOCK_BASE].open);     /* no use after close */
	return &socks[fd - FZ_SOCK_BASE];
}

static void fsock_pair(int sv[2])
{
	int n = 0;

	for (int i = 0; i < FZ_SOCKS && n < 2; i++)
		if (!socks[i].open)
			sv[n++] = i;
	CHECK(n == 2);
	for (int k = 0; k < 2; k++) {
		struct fsock *f = &socks[sv[k]];

		f->open = true;
		f->listener = false;
		f->peer_gone = f->registered = false;
		f->head = f->len = 0;
		f->peer = sv[!k];
	}
	sv[0] += FZ_SOCK_BASE;
	sv[1] += FZ_SOCK_BASE;
}

static uint32_t fsock_ready(const struct fsock *f)
{
	uint32_t ev = 0;

	if ((f->events & EPOLLIN) && (f->len || f->peer_gone))
		ev |= EPOLLIN;
	if ((f->events & EPOLLOUT) && (f->peer_gone || socks[f->peer].len < FZ_SOCK_CAP))
		ev |= EPOLLOUT;
	if (f->peer_gone)
		ev |= EPOLLHUP;
	return ev;
}

ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
int __real_close(int fd);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
	struct fsock *f = fsock_of(fd), *p;
	size_t k;

	if (!f)
		return __real_send(fd, buf, len, flags);
	CHECK(flags & MSG_DONTWAIT);   /* nothing may block */
	if (f->peer_gone) {
		errno = EPIPE;
		return -1;
	}
	p = &socks[f->peer];
	if (p->len == FZ_SOCK_CAP) {
		errno = EAGAIN;
		return -1;
	}
	if (p->head + p->len + len > FZ_SOCK_CAP) {
		memmove(p->buf, p->buf + p->head, p->len);
		p->head = 0;
	}
	k = len < FZ_SOCK_CAP - p->len ? len : FZ_SOCK_CAP - p->len;
	memcpy(p->buf + p->head + p->len, buf, k);
	p->len += k;
	return (ssize_t)k;
}

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
	struct fsock *f = fsock_of(fd);
	size_t k;

	if (!f)
		return __real_recv(fd, buf, len, flags);
	CHECK(flags & MSG_DONTWAIT);
	if (!f->len) {
		if (f->peer_gone)
			return 0;
		errno = EAGAIN;
		return -1;
	}
	k = len < f->len ? len : f->len;
	memcpy(buf, f->buf + f->head, k);
	f->head += k;
	f->len -= k;
	if (!f->len)
		f->head = 0;
	return (ssize_t)k;
}

int __wrap_close(int fd)
{
	struct fsock *f = fsock_of(fd);

	if (!f)
		return __real_close(fd);
	f->open = f->registered = false;
	if (!f->listener)
		socks[f->peer].peer_gone = true;
	return 0;
}

/*
 * Domain 1's listening socket (domain.c listener_open/listener_close, per
 * input: the guest's domain is introduced and released by every input) is
 * one too: socket, bind, listen and lchown of its name, and the unlink of
 * the name it was bound to, are answered here; nobody connects to it
 * (the harness opens domain 1's connection as accept would).  The checks
 * before (socket_owner's lstat of the directory, its mkdir) and the
 * removal of a stale name before the bind stay real, and so does every
 * socket past FZ_SOCKS (an input may introduce many domains).
 */
int __real_socket(int domain, int type, int protocol);
int __real_bind(int fd, const struct sockaddr *sa, socklen_t len);
int __real_listen(int fd, int backlog);
int __real_lchown(const char *path, uid_t uid, gid_t gid);
int __real_unlink(const char *path);

int __wrap_socket(int domain, int type, int protocol)
{
	if (domain != AF_UNIX)
		return __real_socket(domain, type, protocol);
	CHECK((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM);
	for (int i = 0; i < FZ_SOCKS; i++) {
		if (socks[i].open)
			continue;
		socks[i].open = socks[i].listener = true;
		socks[i].peer_gone = socks[i].registered = false;
		socks[i].path[0] = 0;
		socks[i].len = socks[i].head = 0;
		socks[i].peer = -1;
		return FZ_SOCK_BASE + i;
	}
	/* More domains than that introduced: real sockets for the rest. */
	return __real_socket(domain, type, protocol);
}

static struct fsock *bound(const char *path)
{
	for (int i = 0; i < FZ_SOCKS; i++)
		if (socks[i].open && socks[i].listener && !strcmp(socks[i].path, path))
			return &socks[i];
	return NULL;
}

int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct fsock *f = fsock_of(fd);
	const struct sockaddr_un *un = (const void *)sa;

	if (!f)
		return __real_bind(fd, sa, len);
	CHECK(f->listener && !f->path[0] && un->sun_family == AF_UNIX);
	CHECK(un->sun_path[0] && strlen(un->sun_path) < sizeof(f->path));
	if (bound(un->sun_path)) {
		errno = EADDRINUSE;
		return -1;
	}
	strcpy(f->path, un->sun_path);
	return 0;
}

int __wrap_listen(int fd, int backlog)
{
	struct fsock *f = fsock_of(fd);

	if (!f)
		return __real_listen(fd, backlog);
	CHECK(f->listener && f->path[0] && backlog > 0);
	return 0;
}

int __wrap_lchown(const char *path, uid_t uid, gid_t gid)
{
	if (!bound(path))
		return __real_lchown(path, uid, gid);
	return 0;
}

/* A socket name in the private run directory that no in-memory bind
 * holds does not exist: the daemon unlinks the stale name before every
 * bind (domain.c listener_open), and no file is ever made there (bind is
 * in memory, only the dom<N> directories are real), so the kernel would
 * say ENOENT after a path walk (4 % of an execution).  Any other path
 * goes to the real call. */
static bool unbound_sock_name(const char *path)
{
	static const char sock[] = "/xenstore.sock";
	size_t l = strlen(rundir_buf), n = strlen(path);

	if (!l || n <= l + sizeof(sock) - 1 || path[l] != '/' ||
	    !fuzz_str_eq(path + n - (sizeof(sock) - 1), sock))
		return false;
	for (size_t i = 0; i < l; i++)     /* not strncmp: see fuzz_str_eq */
		if (path[i] != rundir_buf[i])
			return false;
	return true;
}

int __wrap_unlink(const char *path)
{
	struct fsock *f = bound(path);

	if (f) {
		f->path[0] = 0;
		return 0;
	}
	if (unbound_sock_name(path)) {
		errno = ENOENT;
		return -1;
	}
	return __real_unlink(path);
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct fsock *f = fsock_of(fd);

	if (!f)
		return __real_epoll_ctl(epfd, op, fd, ev);
	CHECK(epfd == epoll_fd);
	if ((op == EPOLL_CTL_ADD) == f->registered) {
		errno = f->registered ? EEXIST : ENOENT;
		return -1;
	}
	f->registered = op != EPOLL_CTL_DEL;
	if (f->registered) {
		f->events = ev->events;
		f->ptr = ev->data.ptr;
	}
	return 0;
}

static struct quotas quota_default;
static struct perm intro_default[8], release_default[8];
static uint32_t nintro_default, nrelease_default;

/* ---- replies ---------------------------------------------------------- */

static bool is_error_name(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(xsd_errors) / sizeof(xsd_errors[0]); i++)
		if (strlen(xsd_errors[i].errstring) + 1 == len &&
		    !memcmp(xsd_errors[i].errstring, s, len))
			return true;
	return false;
}

static void check_msg(const struct xsd_sockmsg *h, const uint8_t *body)
{
	CHECK(h->type < XS_TYPE_COUNT && h->len <= XS_MAX_PAYLOAD);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "reply type %u req %u len %u: %.*s\n", h->type,
			h->req_id, h->len, (int)(h->len > 60 ? 60 : h->len), body);
	if (h->type == XS_ERROR)
		CHECK(is_error_name((const char *)body, h->len));
	if (h->type == XS_WATCH_EVENT) {
		const uint8_t *nul = memchr(body, 0, h->len);

		CHECK(nul && memchr(nul + 1, 0, h->len - (size_t)(nul + 1 - body)));
		CHECK(body[h->len - 1] == 0);
	}
}

/* Read what the daemon sent on this side and check its framing. */
static void drain(struct side *s)
{
	while (fsock_of(s->peer)->len) {
		ssize_t n = recv(s->peer, s->buf + s->have, sizeof(s->buf) - s->have,
				 MSG_DONTWAIT);
		struct xsd_sockmsg h;
		size_t used = 0;

		CHECK(n > 0);
		s->have += (size_t)n;
		while (s->have - used >= XS_HDR_SIZE) {
			memcpy(&h, s->buf + used, XS_HDR_SIZE);
			CHECK(h.len <= XS_MAX_PAYLOAD);
			if (s->have - used < XS_HDR_SIZE + h.len)
				break;
			check_msg(&h, s->buf + used + XS_HDR_SIZE);
			used += XS_HDR_SIZE + h.len;
		}
		memmove(s->buf, s->buf + used, s->have - used);
		s->have -= used;
	}
}

/* ---- connections ------------------------------------------------------ */

static void side_open(struct side *s, bool priv)
{
	int sv[2];

	fsock_pair(sv);
	CHECK(conn_new(sv[0], priv ? 0 : FZ_GUEST, priv) == 0);
	s->c = conns;          /* conn_new puts it at the head */
	CHECK(s->c->fd == sv[0]);
	s->peer = sv[1];
	s->have = 0;
}

static void side_close(struct side *s)
{
	if (s->peer >= 0)
		close(s->peer);
	s->peer = -1;
	s->c = NULL;
}

/* One turn of the daemon's loop for our connections: what its epoll set
 * reports ready (main.c's loop, without the wait: the listener of domain
 * 1's socket may be reported too, and nobody connects to it). */
static void daemon_turn(bool read_replies)
{
	for (int k = 0; k < 4; k++) {
		struct { void *ptr; uint32_t events; } evs[FZ_SOCKS];
		int n = 0;

		for (int j = 0; j < FZ_SOCKS; j++)
			if (socks[j].open && socks[j].registered && fsock_ready(&socks[j]))
				evs[n++] = (typeof(evs[0])){ socks[j].ptr, fsock_ready(&socks[j]) };
		for (int e = 0; e < n; e++)
			for (int i = 0; i < 2; i++)
				if (sides[i].c && evs[e].ptr == sides[i].c)
					conn_handle(sides[i].c, evs[e].events);
		bool more = conn_run_backlog();
		for (int i = 0; i < 2; i++) {
			if (sides[i].c && read_replies)
				drain(&sides[i]);
			if (sides[i].c && sides[i].c->dead)
				side_close(&sides[i]);  /* conn_reap frees it */
		}
		conn_reap();
		if (!more)
			break;
	}
}

/* ---- invariants ------------------------------------------------------- */

static long owned[DOMID_MAX_VALID + 1];
static uint32_t owners[DOMID_MAX_VALID + 1], nowners;   /* d with owned[d] */

static void count_node(void *node, void *arg)
{
	struct node *n = node;
	uint32_t d = n->perms[0].domid;

	(*(size_t *)arg)++;
	if (d <= DOMID_MAX_VALID && !owned[d]++ && d > 64)
		owners[nowners++] = d;
}

static int count_reached(struct node *n, void *arg)
{
	(void)n;
	(*(size_t *)arg)++;
	return 0;
}

static void check_store(void)
{
	size_t total = 0, reached = 0;

	nowners = 0;
	db_foreach(count_node, &total);
	CHECK(db_walk("/", count_reached, &reached) == 0);
	CHECK(total == reached);
	/* Domains owning nodes, and the low ids the seeds use (looking up
	 * all 32k ids per input would cost more than the input). */
	for (uint32_t i = 0; i < 64 + nowners; i++) {
		uint32_t d = i < 64 ? i + 1 : owners[i - 64];
		struct domain *dom = domain_get(d, false);

		CHECK(dom ? dom->nodes == owned[d] : owned[d] == 0);
		owned[d] = 0;
	}
	owned[0] = 0;
}

/* ---- setup and teardown ----------------------------------------------- */

static void cleanup_rundir(void)
{
	fuzz_rm_tree(rundir_buf);
}

static void init_once(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	/* tmpfs if there is one: a domain's socket is made per input */
	snprintf(rundir_buf, sizeof(rundir_buf), "%s/fuzz-xenstored.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	CHECK(mkdtemp(rundir_buf));
	atexit(cleanup_rundir);
	rundir = rundir_buf;
	epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	CHECK(epoll_fd >= 0);
	quota_default = quota;
	quota_default.write_rate = 0;      /* see the file-top comment */
	memcpy(intro_default, special_intro, sizeof(intro_default));
	memcpy(release_default, special_release, sizeof(release_default));
	nintro_default = nspecial_intro;
	nrelease_default = nspecial_release;
	xbd_log_init("fuzz_xenstored", XBD_LOG_ERR, false);
}

static void reset_globals(void)
{
	quota = quota_default;
	memcpy(special_intro, intro_default, sizeof(intro_default));
	memcpy(special_release, release_default, sizeof(release_default));
	nspecial_intro = nintro_default;
	nspecial_release = nrelease_default;
	xbd_log_set_level(XBD_LOG_ERR);
	db_dirty = false;
}

static void send_all(struct side *s, const uint8_t *p, size_t n);

/* A message on the privileged connection, as the toolstack sends it. */
static void toolstack(uint32_t type, const char *payload, uint32_t len)
{
	struct xsd_sockmsg h = { type, 0, 0, len };

	send_all(&sides[0], (const uint8_t *)&h, sizeof(h));
	send_all(&sides[0], (const uint8_t *)payload, len);
	daemon_turn(true);
}

/* A fresh store, domain 1 introduced with its home directory (owned by
 * it, as libxl creates it), and both connections open. */
static void start(void)
{
	static const char home[] = "/local/domain/1";
	static const char perms[] = "/local/domain/1\0n1";

	reset_globals();
	CHECK(db_init(true) == 0);
	CHECK(domain_introduce(FZ_GUEST) == 0);
	side_open(&sides[0], true);
	side_open(&sides[1], false);
	toolstack(XS_MKDIR, home, sizeof(home));
	toolstack(XS_SET_PERMS, perms, sizeof(perms));
}

static void stop(void)
{
	for (int i = 0; i < 2; i++)
		if (sides[i].c)
			drain(&sides[i]);
	conn_shutdown();
	for (int i = 0; i < 2; i++)
		side_close(&sides[i]);
	check_store();
	domain_shutdown();
	db_destroy();
	for (int i = 0; i < FZ_SOCKS; i++)
		CHECK(!socks[i].open);     /* every connection closed */
}

/* ---- one input ---------------------------------------------------------- */

static void send_all(struct side *s, const uint8_t *p, size_t n)
{
	for (int full = 0; n && full < 64;) {
		ssize_t k = send(s->peer, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k <= 0) {
			daemon_turn(true);  /* the socket is full: let it read */
			if (!s->c)
				return;
			full++;
			continue;
		}
		p += k;
		n -= (size_t)k;
	}
}

static void one_chunk(const struct fz_chunk *ch, const uint8_t *payload, size_t len)
{
	struct side *s = &sides[ch->sel & 1];
	static uint32_t req_id;

	if (!s->c) {
		/* The guest can connect only while its domain is introduced. */
		if ((ch->sel & 1) && !domain_get(FZ_GUEST, false)->introduced)
			return;
		side_open(s, !(ch->sel & 1));
	}
	if (ch->sel & 2) {
		send_all(s, payload, len);
	} else {
		struct xsd_sockmsg h = { ch->type, ++req_id, ch->tx_id, (uint32_t)len };
		uint8_t msg[XS_HDR_SIZE + 4200];

		memcpy(msg, &h, XS_HDR_SIZE);
		memcpy(msg + XS_HDR_SIZE, payload, len);
		send_all(s, msg, XS_HDR_SIZE + len);
	}
	if (!s->c)
		return;
	daemon_turn(!(ch->sel & 4));
	/* pacing only when the input set a rate of its own */
	CHECK(quota.write_rate != quota_default.write_rate || conn_throttle_wait() < 0);
	if ((ch->sel & 8) && s->c) {
		/* The client hangs up: the daemon sees EOF. */
		close(s->peer);
		s->peer = -1;
		conn_handle(s->c, EPOLLIN | EPOLLHUP);
		CHECK(s->c->dead);
		s->c = NULL;
		conn_reap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	init_once();
	start();
	for (int n = 0; off < size && n < 512; n++) {
		struct fz_chunk ch = { 0 };
		size_t k = size - off < sizeof(ch) ? size - off : sizeof(ch), len;

		memcpy(&ch, data + off, k);
		off += k;
		len = ch.len % 4200;
		if (len > size - off)
			len = size - off;
		one_chunk(&ch, data + off, len);
		off += len;
	}
	stop();
	return 0;
}
