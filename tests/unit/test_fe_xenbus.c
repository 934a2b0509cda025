/* SPDX-License-Identifier: MIT */
/*
 * frontend/xenbus: xbdfront_open() negotiating through a real
 * xbd-xenstored (started here in a private run directory, from ../bin next
 * to this test or $XBD_XENSTORED) with a scripted backend: a thread acting
 * as domain 0 that advertises features, waits for Initialised, reads the
 * frontend's keys, attaches the fake ring backend of fe_fakebe.c and
 * connects; it can restart.  This proves the handshake against a backend
 * that follows blkif.h; the test against xbd-blkback is a system test.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "frontend/device.h"
#include "lib/xenbus.h"
#include "tests/unit/fe_fakebe.h"

#define GUEST 1
#define DEVID 51712u   /* xvda */
#define FE "/local/domain/1/device/vbd/51712"
#define BE "/local/domain/0/backend/vbd/1/51712"

static char rundir[] = "/tmp/xbd-test-fe-xenbus-XXXXXX";
static pid_t daemon_pid;

/* ---- xbd-xenstored ----------------------------------------------------------- */

/* The daemon binary: $XBD_XENSTORED, or bin/ of the build tree this
 * test runs from ($(O)/tests/../bin). */
static void daemon_binary(char *bin, size_t len)
{
	const char *env = getenv("XBD_XENSTORED");
	char exe[PATH_MAX];
	ssize_t n;

	if (env) {
		snprintf(bin, len, "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(bin, len, "%.*s/../bin/xbd-xenstored",
		 (int)(strrchr(exe, '/') ? strrchr(exe, '/') - exe : 0), exe);
}

/* Start xbd-xenstored on rundir and wait until a client gets an answer. */
static int start_daemon(void **state)
{
	char bin[PATH_MAX], sock[PATH_MAX];
	struct xs_handle *probe = NULL;

	(void)state;
	daemon_binary(bin, sizeof(bin));
	if (!mkdtemp(rundir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", rundir);
	daemon_pid = fork();
	if (daemon_pid == 0) {
		/* a test that crashes takes its daemon along */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execl(bin, bin, "-N", "-R", rundir, (char *)NULL);
		_exit(127);
	}
	for (int tries = 0; tries < 500; tries++) {
		if (access(sock, F_OK) == 0 && xbd_xs_open(sock, &probe) == 0 &&
		    xbd_xs_exists(probe, XBT_NULL, "/", NULL) == 1)
			break;
		if (probe)
			xs_close(probe);
		probe = NULL;
		if (waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid)
			break;
		usleep(10000);
	}
	if (!probe) {
		fprintf(stderr, "%s did not start\n", bin);
		return -1;
	}
	xs_close(probe);
	return 0;
}

static int stop_daemon(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	kill(daemon_pid, SIGTERM);
	waitpid(daemon_pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", rundir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- the scripted backend ------------------------------------------------------ */

struct offer {
	const char *keys[12][2];     /* backend node, value */
};

/* One more backend node, written just before Connected (as Linux
 * xen-blkback writes feature-persistent); fx_setup() hands it to the
 * backend thread.  Test thread only. */
static const char *at_connect[2];

struct sb {
	struct xs_handle *xs;        /* dom0 */
	struct xbd_platform *p;
	struct be b;
	struct offer offer;
	const char *at_connect[2];   /* node, value, or NULL */
	pthread_t th;
	int restart_fd[2];           /* test -> backend: restart now */
	int result;                  /* first failure, 0 */
	unsigned int handshakes;
	unsigned int fe_ready;       /* frontend states to connect in */
	bool refuse_first;           /* say Closed to the first rings (a restart) */
	bool refuse;                 /* refuse the rings: error node and Closing */
	/* what the frontend published, as read by the backend */
	unsigned int nq, order, ind;
	char protocol[32];
};

static int sb_read_queue(struct sb *s, const char *dir, unsigned int i)
{
	xbd_grant_ref_t refs[32];
	unsigned int n = 1u << s->order, port;
	char node[16];
	int rc = 0;

	if (n == 1)
		rc = xbd_xs_read_uint(s->xs, XBT_NULL, dir, "ring-ref", 0, UINT32_MAX, &refs[0]);
	for (unsigned int k = 0; n > 1 && k < n && !rc; k++) {
		snprintf(node, sizeof(node), "ring-ref%u", k);
		rc = xbd_xs_read_uint(s->xs, XBT_NULL, dir, node, 0, UINT32_MAX, &refs[k]);
	}
	if (!rc)
		rc = xbd_xs_read_uint(s->xs, XBT_NULL, dir, "event-channel", 0, 4095, &port);
	if (!rc)
		be_attach_ring(&s->b, i, refs, n, port);
	return rc;
}

/* One handshake from InitWait to Connected. */
static int sb_handshake(struct sb *s)
{
	enum xenbus_state st;
	char dir[128];
	int rc;

	for (size_t i = 0; i < 12 && s->offer.keys[i][0]; i++)
		if ((rc = xbd_xs_write(s->xs, XBT_NULL, BE, s->offer.keys[i][0], s->offer.keys[i][1])))
			return rc;
	if ((rc = xbd_xenbus_set_state(s->xs, BE, XenbusStateInitWait)))
		return rc;
	/* a frontend still Connected is re-attached to (xbd-blkback, Linux) */
	rc = xbd_xenbus_wait_state(s->xs, FE, s->fe_ready, 5000, &st);
	if (rc)
		return rc;
	if (s->refuse_first) {
		/* as a backend that restarted during the handshake: the
		 * rings are its predecessor's, the frontend must start over */
		s->refuse_first = false;
		rc = xbd_xenbus_set_state(s->xs, BE, XenbusStateClosed);
		if (!rc)
			rc = xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateInitialising, 5000, &st);
		return rc ? rc : sb_handshake(s);
	}
	if (xbd_xs_read_uint(s->xs, XBT_NULL, FE, "multi-queue-num-queues", 1, 4, &s->nq))
		s->nq = 1;
	if (xbd_xs_read_uint(s->xs, XBT_NULL, FE, "ring-page-order", 0, 5, &s->order))
		s->order = 0;
	rc = xbd_xs_read_buf(s->xs, XBT_NULL, FE, "protocol", s->protocol, sizeof(s->protocol));
	if (rc)
		return rc;
	s->b.abi = strcmp(s->protocol, "x86_32-abi") ? FE_ABI_X86_64 : FE_ABI_X86_32;
	s->b.nq = 0;
	for (unsigned int i = 0; i < s->nq && !rc; i++) {
		snprintf(dir, sizeof(dir), "%s/queue-%u", FE, i);
		rc = sb_read_queue(s, s->nq == 1 ? FE : dir, i);
	}
	if (rc)
		return rc;
	/* counted before serving: the test may see I/O complete right after */
	__atomic_add_fetch(&s->handshakes, 1, __ATOMIC_SEQ_CST);
	be_start(&s->b);
	rc = xbd_xs_printf(s->xs, XBT_NULL, BE, "sectors", "%u", DISK_BYTES / 512);
	if (!rc)
		rc = xbd_xs_write(s->xs, XBT_NULL, BE, "sector-size", "512");
	if (!rc)
		rc = xbd_xs_write(s->xs, XBT_NULL, BE, "info", "0");
	if (!rc && s->at_connect[0])
		rc = xbd_xs_write(s->xs, XBT_NULL, BE, s->at_connect[0], s->at_connect[1]);
	if (!rc)
		rc = xbd_xenbus_set_state(s->xs, BE, XenbusStateConnected);
	return rc;
}

/* A restart, as the test asks for it:
 *   'r'  re-attach: InitWait, and the still Connected frontend's rings
 *        are mapped again from rsp_prod (xbd-blkback, Linux, QEMU);
 *   'c'  closed: Closed; the frontend says Initialising; InitWait; fresh
 *        rings (the reconnect dance);
 *   'f'  failed: Closing (as after be_fatal); the frontend says Closed;
 *        Closed; the frontend says Initialising; InitWait; fresh rings. */
static int sb_restart(struct sb *s, char how)
{
	enum xenbus_state st;
	int rc = 0;

	be_stop(&s->b);                  /* the old process is gone */
	be_set_mode(&s->b, BE_NORMAL);
	s->fe_ready = 1u << XenbusStateInitialised;
	if (how == 'r')
		s->fe_ready |= 1u << XenbusStateConnected;
	if (how == 'f') {
		rc = xbd_xenbus_set_state(s->xs, BE, XenbusStateClosing);
		if (!rc)
			rc = xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateClosed, 5000, &st);
	}
	if (how != 'r' && !rc) {
		rc = xbd_xenbus_set_state(s->xs, BE, XenbusStateClosed);
		if (!rc)
			rc = xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateInitialising, 5000, &st);
	}
	return rc;
}

/* As xbd-blkback's be_fatal on the frontend's keys: the error node and
 * Closing; then the frontend must say Closed (Linux blkfront_closing)
 * for us to go Closed. */
static int sb_refuse(struct sb *s)
{
	enum xenbus_state st;
	int rc;

	rc = xbd_xenbus_set_state(s->xs, BE, XenbusStateInitWait);
	if (!rc)
		rc = xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateInitialised, 5000, &st);
	if (!rc)
		rc = xbd_xenbus_dev_fatal(s->xs, BE, -EINVAL, "bad ring-page-order (maximum 0)");
	if (!rc)
		rc = xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateClosed, 5000, &st);
	return rc ? rc : xbd_xenbus_set_state(s->xs, BE, XenbusStateClosed);
}

/* After Connected: wait for a restart request or the frontend closing. */
static void *sb_main(void *arg)
{
	struct sb *s = arg;
	enum xenbus_state st;
	char c;

	s->fe_ready = 1u << XenbusStateInitialised;
	if (s->refuse) {
		s->result = sb_refuse(s);
		return NULL;
	}
	for (;;) {
		s->result = sb_handshake(s);
		if (s->result)
			return NULL;
		for (;;) {
			int rc = xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateClosing |
						       1u << XenbusStateClosed, 50, &st);
			if (rc == 0) {             /* frontend closing: disconnect */
				be_stop(&s->b);
				xbd_xenbus_set_state(s->xs, BE, XenbusStateClosing);
				xbd_xenbus_wait_state(s->xs, FE, 1u << XenbusStateClosed, 5000, NULL);
				xbd_xenbus_set_state(s->xs, BE, XenbusStateClosed);
				return NULL;
			}
			if (read(s->restart_fd[0], &c, 1) == 1)
				break;
		}
		s->result = sb_restart(s, c);
		if (s->result)
			return NULL;
	}
}

/* ---- fixture ------------------------------------------------------------------ */

struct fx {
	struct sb s;
	struct xbdfront_dev *dev;
	struct xbdfront_opts opts;
};

static void write_nodes(struct xs_handle *xs)
{
	struct xs_permissions fe_perms[2] = { { GUEST, XS_PERM_NONE }, { 0, XS_PERM_READ } };
	struct xs_permissions be_perms[2] = { { 0, XS_PERM_NONE }, { GUEST, XS_PERM_READ } };

	assert_int_equal(xbd_xs_rm(xs, XBT_NULL, "/local/domain/1", NULL), 0);
	assert_int_equal(xbd_xs_rm(xs, XBT_NULL, "/local/domain/0/backend", NULL), 0);
	assert_int_equal(xbd_xs_mkdir_perms(xs, XBT_NULL, "/local/domain/1", fe_perms, 2), 0);
	assert_int_equal(xbd_xs_mkdir_perms(xs, XBT_NULL, FE, fe_perms, 2), 0);
	assert_int_equal(xbd_xs_mkdir_perms(xs, XBT_NULL, BE, be_perms, 2), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, FE, "backend", BE), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, FE, "backend-id", "0"), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, FE, "virtual-device", "51712"), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, FE, "state", "1"), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, BE, "frontend", FE), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, BE, "frontend-id", "1"), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, BE, "online", "1"), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, BE, "state", "1"), 0);
}

static void fx_setup(struct fx *f, const struct offer *offer, bool start_backend)
{
	char sock[PATH_MAX];

	memset(f, 0, sizeof(*f));
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", rundir);
	assert_int_equal(xbd_xs_open(sock, &f->s.xs), 0);
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, rundir, &f->s.p), 0);
	assert_int_equal(xbd_domain_create(f->s.p, GUEST, "guest", 64u << 20), 0);
	assert_true(xs_introduce_domain(f->s.xs, GUEST, 0, 1));
	write_nodes(f->s.xs);
	f->s.offer = *offer;
	f->s.at_connect[0] = at_connect[0];
	f->s.at_connect[1] = at_connect[1];
	f->s.b.p = f->s.p;
	f->s.b.guest = GUEST;
	f->s.b.disk = calloc(1, DISK_BYTES);
	assert_non_null(f->s.b.disk);
	assert_int_equal(xbd_gnttab_open(f->s.p, 0, &f->s.b.gt), 0);
	assert_int_equal(xbd_evtchn_open(f->s.p, 0, &f->s.b.ev), 0);
	assert_int_equal(pipe2(f->s.restart_fd, O_NONBLOCK | O_CLOEXEC), 0);
	if (start_backend)
		assert_int_equal(pthread_create(&f->s.th, NULL, sb_main, &f->s), 0);
	xbdfront_opts_default(&f->opts);
	f->opts.platform = "local";
	f->opts.rundir = rundir;
	f->opts.connect_timeout_ms = 5000;
}

static void fx_teardown(struct fx *f, bool joined)
{
	xbdfront_close(f->dev);
	if (!joined)
		pthread_join(f->s.th, NULL);
	be_stop(&f->s.b);
	assert_int_equal(f->s.result, 0);
	xbd_evtchn_close(f->s.b.ev);
	xbd_gnttab_close(f->s.b.gt);
	free(f->s.b.disk);
	close(f->s.restart_fd[0]);
	close(f->s.restart_fd[1]);
	assert_true(xs_release_domain(f->s.xs, GUEST));
	assert_int_equal(xbd_domain_destroy(f->s.p, GUEST, true), 0);
	xbd_platform_close(f->s.p);
	xs_close(f->s.xs);
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 37 + i * 11 + (i >> 12));
}

static void rw_check(struct fx *f, uint64_t off, size_t len, unsigned int seed)
{
	unsigned char *w = malloc(len), *r = malloc(len);

	fill(w, len, seed);
	assert_int_equal(xbdfront_pwrite(f->dev, w, len, off), (ssize_t)len);
	assert_int_equal(xbdfront_pread(f->dev, r, len, off), (ssize_t)len);
	assert_memory_equal(r, w, len);
	assert_memory_equal(f->s.b.disk + off, w, len);
	free(w);
	free(r);
}

static unsigned int fe_uint(struct fx *f, const char *node)
{
	unsigned int v = 0;

	assert_int_equal(xbd_xs_read_uint(f->s.xs, XBT_NULL, FE, node, 0, UINT32_MAX, &v), 0);
	return v;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_negotiate_multi_queue(void **state)
{
	const struct offer o = { { { "multi-queue-max-queues", "2" },
				   { "max-ring-page-order", "3" },
				   { "feature-persistent", "1" },
				   { "feature-max-indirect-segments", "64" },
				   { "feature-flush-cache", "1" },
				   { "feature-discard", "1" } } };
	struct xbdfront_info info;
	struct fx f;
	char proto[32];

	(void)state;
	fx_setup(&f, &o, true);
	f.opts.max_ring_page_order = 5;
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), 0);
	assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
	assert_int_equal(info.nr_queues, 2);          /* min(4, 2) */
	assert_int_equal(info.ring_page_order, 3);    /* min(5, 3) */
	assert_int_equal(info.max_indirect_segs, 32); /* min(32, 64) */
	assert_true(info.persistent && info.flush && info.discard);
	assert_false(info.barrier || info.readonly);
	assert_int_equal(info.sectors, DISK_BYTES / 512);
	assert_int_equal(info.sector_size, 512);
	/* what was published, in blkif.h's multi-queue form */
	assert_int_equal(fe_uint(&f, "multi-queue-num-queues"), 2);
	assert_int_equal(fe_uint(&f, "ring-page-order"), 3);
	assert_int_equal(fe_uint(&f, "feature-persistent"), 1);
	assert_int_equal(fe_uint(&f, "state"), XenbusStateConnected);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "ring-ref"), 0);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "event-channel"), 0);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "queue-1/ring-ref7"), 1);
	assert_int_equal(xbd_xs_read_buf(f.s.xs, XBT_NULL, FE, "protocol", proto, sizeof(proto)), 0);
	assert_string_equal(proto, "x86_64-abi");
	assert_int_equal(f.s.nq, 2);
	assert_int_equal(f.s.order, 3);
	rw_check(&f, 1 << 20, 512 * 1024, 1);
	rw_check(&f, 4096, 512, 2);
	/* a zero-copy buffer still allocated at close is released in order */
	unsigned char *zc = xbdfront_buf_alloc(f.dev, 65536);
	assert_non_null(zc);
	fill(zc, 65536, 9);
	assert_int_equal(xbdfront_pwrite(f.dev, zc, 65536, 2 << 20), 65536);
	assert_memory_equal(f.s.b.disk + (2 << 20), zc, 65536);
	assert_int_equal(xbdfront_flush(f.dev), 0);
	xbdfront_close(f.dev);
	f.dev = NULL;
	pthread_join(f.s.th, NULL);
	/* both ends closed in order */
	assert_int_equal(fe_uint(&f, "state"), XenbusStateClosed);
	fx_teardown(&f, true);
}

/* Online resize: the backend writes a new `sectors` and state Connected
 * again in one transaction (Linux xen_vbd_resize); the capacity follows
 * and xbdfront_opts.resized is called once per change. */
static pthread_mutex_t rs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rs_cond = PTHREAD_COND_INITIALIZER;
static unsigned int rs_calls;
static uint64_t rs_sectors;

static void on_resized(void *arg, uint64_t sectors)
{
	(void)arg;
	pthread_mutex_lock(&rs_lock);
	rs_calls++;
	rs_sectors = sectors;
	pthread_cond_broadcast(&rs_cond);
	pthread_mutex_unlock(&rs_lock);
}

static int write_resize(struct xs_handle *xs, xs_transaction_t t, void *arg)
{
	int rc = xbd_xs_printf(xs, t, BE, "sectors", "%llu", *(unsigned long long *)arg);

	return rc ? rc : xbd_xs_printf(xs, t, BE, "state", "%u", XenbusStateConnected);
}

/* Wait up to 5 s for the n-th call; the calls so far. */
static unsigned int rs_wait(unsigned int n)
{
	struct timespec until;
	unsigned int got;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&rs_lock);
	while (rs_calls < n && pthread_cond_timedwait(&rs_cond, &rs_lock, &until) == 0)
		;
	got = rs_calls;
	pthread_mutex_unlock(&rs_lock);
	return got;
}

static void test_online_resize(void **state)
{
	const struct offer o = { { { "feature-flush-cache", "1" } } };
	unsigned long long grown = 3ull * DISK_BYTES / 512, same = grown;
	struct xbdfront_info info;
	struct fx f;

	(void)state;
	rs_calls = 0;
	fx_setup(&f, &o, true);
	f.opts.resized = on_resized;
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), 0);
	assert_int_equal(rs_calls, 0);                 /* not at the first connect */
	assert_int_equal(xbd_xs_transaction(f.s.xs, write_resize, &grown), 0);
	assert_int_equal(rs_wait(1), 1);
	assert_int_equal(rs_sectors, grown);
	assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
	assert_int_equal(info.sectors, grown);
	/* Connected again with the same size (a re-attach's cue): no call */
	assert_int_equal(xbd_xs_transaction(f.s.xs, write_resize, &same), 0);
	usleep(300 * 1000);
	assert_int_equal(rs_wait(1), 1);
	rw_check(&f, 4096, 4096, 3);                   /* the ring still works */
	fx_teardown(&f, false);
}

/* A backend with no multi-queue, no multi-page ring and an x86_32 guest:
 * the single-queue single-page keys. */
static void test_negotiate_legacy_keys(void **state)
{
	const struct offer o = { { { NULL, NULL } } };
	struct xbdfront_info info;
	struct fx f;
	char proto[32];

	(void)state;
	fx_setup(&f, &o, true);
	f.opts.abi = XBDFRONT_ABI_X86_32;
	f.opts.persistent = false;
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), 0);
	assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
	assert_int_equal(info.nr_queues, 1);
	assert_int_equal(info.ring_page_order, 0);
	assert_int_equal(info.max_indirect_segs, 0);
	assert_false(info.persistent || info.flush || info.discard);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "ring-ref"), 1);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "event-channel"), 1);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "ring-page-order"), 0);
	assert_int_equal(xbd_xs_exists(f.s.xs, XBT_NULL, FE, "multi-queue-num-queues"), 0);
	assert_int_equal(xbd_xs_read_buf(f.s.xs, XBT_NULL, FE, "protocol", proto, sizeof(proto)), 0);
	assert_string_equal(proto, "x86_32-abi");
	assert_int_equal(fe_uint(&f, "feature-persistent"), 0);
	rw_check(&f, 0, 100 * 1024, 3);
	assert_int_equal(xbdfront_flush(f.dev), -EOPNOTSUPP);
	fx_teardown(&f, false);
}

/* Linux xen-blkback states feature-persistent only when it connects: we
 * offer ours anyway (as Linux blkfront), and persistent grants follow the
 * backend's word at Connected; without it, each page is revoked after use. */
static void check_persistent_at_connect(const char *value, bool want)
{
	const struct offer o = { { { "multi-queue-max-queues", "1" } } };
	struct xbdfront_info info;
	struct fe_chan_stats st;
	struct fx f;

	at_connect[0] = value ? "feature-persistent" : NULL;
	at_connect[1] = value;
	fx_setup(&f, &o, true);
	at_connect[0] = at_connect[1] = NULL;
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), 0);
	assert_int_equal(fe_uint(&f, "feature-persistent"), 1);
	assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
	assert_int_equal(info.persistent, want);
	rw_check(&f, 4096, 64 * 1024, 4);
	fe_chan_get_stats(fe_dev_chan(f.dev, 0), &st);
	/* persistent: a batch stays granted; not: every page came back */
	assert_int_equal(st.pool.granted >= FE_GNTPOOL_BATCH, want);
	assert_int_equal(st.pool.in_use, 0);
	fx_teardown(&f, false);
}

static void test_persistent_stated_at_connect(void **state)
{
	(void)state;
	check_persistent_at_connect("1", true);
	check_persistent_at_connect(NULL, false);
	check_persistent_at_connect("0", false);
}

/* No backend ever shows up: a clear error, in xenstore too. */
static void test_timeout(void **state)
{
	const struct offer o = { { { NULL, NULL } } };
	struct fx f;
	char err[200], why[160];

	(void)state;
	fx_setup(&f, &o, false);
	f.opts.connect_timeout_ms = 300;
	assert_int_equal(xbdfront_open_why(GUEST, "xvda", &f.opts, &f.dev, why, sizeof(why)),
			 -ETIMEDOUT);
	assert_null(f.dev);
	assert_int_equal(xbd_xs_read_buf(f.s.xs, XBT_NULL, FE, "error", err, sizeof(err)), 0);
	print_message("error node: %s\n", err);
	assert_non_null(strstr(err, "stayed Initialising for 300 ms"));
	/* the caller gets the same words as the error node */
	assert_string_equal(why, "backend " BE " stayed Initialising for 300 ms");
	/* Closing, then Closed: the frontend is gone, the toolstack may retry */
	assert_int_equal(fe_uint(&f, "state"), XenbusStateClosed);
	/* bad arguments never touch xenstore and have nothing to add */
	assert_int_equal(xbdfront_open_why(GUEST, "xvdzzzzzzzzzz9999", &f.opts, &f.dev, why,
					   sizeof(why)), -EINVAL);
	assert_string_equal(why, "");
	assert_int_equal(xbdfront_open(GUEST, "xvdb", &f.opts, &f.dev), -ENOENT);
	f.opts.max_ring_page_order = 6;
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), -EINVAL);
	fx_teardown(&f, true);
}

/* The backend refuses our rings (be_fatal: error node, Closing): the
 * open fails with its reason, and we end Closed so that it can close
 * too (Linux blkfront_closing); the backend thread checks it saw Closed. */
static void test_refused_ends_closed_with_reason(void **state)
{
	const struct offer o = { { { NULL, NULL } } };
	struct fx f;
	char why[160];

	(void)state;
	fx_setup(&f, &o, false);
	f.s.refuse = true;
	assert_int_equal(pthread_create(&f.s.th, NULL, sb_main, &f.s), 0);
	assert_int_equal(xbdfront_open_why(GUEST, "xvda", &f.opts, &f.dev, why, sizeof(why)),
			 -ENODEV);
	assert_null(f.dev);
	assert_string_equal(why, "backend: bad ring-page-order (maximum 0) (Invalid argument)");
	assert_int_equal(fe_uint(&f, "state"), XenbusStateClosed);
	pthread_join(f.s.th, NULL);
	assert_int_equal(f.s.result, 0);
	fx_teardown(&f, true);
}

/* A backend that gave up on the disk before we came (Closing, its error
 * node says why): the open fails at once with that reason, not after
 * the connect timeout, and ends Closed. */
static void test_backend_closing_fails_fast(void **state)
{
	const struct offer o = { { { NULL, NULL } } };
	struct timespec t0, t1;
	struct fx f;
	char why[160];

	(void)state;
	fx_setup(&f, &o, false);
	f.opts.connect_timeout_ms = 5000;
	assert_int_equal(xbd_xenbus_dev_fatal(f.s.xs, BE, -ENOENT, "opening /srv/gone.img"), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(xbdfront_open_why(GUEST, "xvda", &f.opts, &f.dev, why, sizeof(why)),
			 -ENODEV);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 3);
	assert_string_equal(why, "backend: opening /srv/gone.img (No such file or directory)");
	assert_int_equal(fe_uint(&f, "state"), XenbusStateClosed);
	fx_teardown(&f, true);
}

static pid_t claimer(struct fx *f)
{
	struct xbd_domain_info info;

	assert_int_equal(xbd_domain_get_info(f->s.p, GUEST, &info), 0);
	return info.claimed_by;
}

/* The domain handle: its devices share the claim, which lasts until both
 * the handle and the last device are closed; the same disk cannot be
 * opened twice in one domain, nor the domain claimed twice. */
static void test_domain_handle(void **state)
{
	const struct offer o = { { { "multi-queue-max-queues", "2" } } };
	struct xbdfront_domain *d = NULL, *d2 = NULL;
	struct xbdfront_dev *again = NULL;
	struct fx f;

	(void)state;
	fx_setup(&f, &o, true);
	assert_int_equal(xbdfront_domain_open(XBD_DOMID_MAX + 1, &f.opts, &d), -EINVAL);
	assert_int_equal(xbdfront_domain_open(GUEST + 5, &f.opts, &d), -ENOENT);
	assert_null(d);
	assert_int_equal(xbdfront_domain_open(GUEST, &f.opts, &d), 0);
	assert_int_equal(xbdfront_domain_id(d), GUEST);
	assert_int_equal(claimer(&f), getpid());
	assert_int_equal(xbdfront_domain_open(GUEST, &f.opts, &d2), -EBUSY);
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &again), -EBUSY);
	assert_int_equal(xbdfront_open_in(d, "xvdb", &f.opts, &again), -ENOENT);
	assert_int_equal(xbdfront_open_in(d, "xvda", &f.opts, &f.dev), 0);
	assert_int_equal(xbdfront_open_in(d, "xvda", &f.opts, &again), -EBUSY);
	assert_null(again);
	assert_int_equal(fe_uint(&f, "state"), XenbusStateConnected);
	/* the handle goes first: the device keeps the claim and works */
	xbdfront_domain_close(d);
	assert_int_equal(claimer(&f), getpid());
	rw_check(&f, 65536, 65536, 7);
	xbdfront_close(f.dev);
	f.dev = NULL;
	assert_int_equal(claimer(&f), 0);
	assert_int_equal(fe_uint(&f, "state"), XenbusStateClosed);
	fx_teardown(&f, false);
}

/* The backend restarts between our Initialised and its Connected: the
 * open starts over on fresh rings and succeeds. */
static void test_restart_during_handshake(void **state)
{
	const struct offer o = { { { "multi-queue-max-queues", "2" } } };
	struct xbdfront_info info;
	struct fx f;

	(void)state;
	fx_setup(&f, &o, false);
	f.s.refuse_first = true;
	assert_int_equal(pthread_create(&f.s.th, NULL, sb_main, &f.s), 0);
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), 0);
	assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
	assert_int_equal(info.resets, 1);
	assert_int_equal(info.nr_queues, 2);
	assert_int_equal(__atomic_load_n(&f.s.handshakes, __ATOMIC_SEQ_CST), 1);
	rw_check(&f, 4096, 65536, 8);
	fx_teardown(&f, false);
}

struct cb_log {
	int status;
	unsigned int n;
};

static void log_cb(const struct xbdfront_cqe *cqe)
{
	struct cb_log *l = (struct cb_log *)(uintptr_t)cqe->user_data;

	l->status = cqe->res;
	__atomic_add_fetch(&l->n, 1, __ATOMIC_RELEASE);
}

/* The backend restarts with writes in flight; whichever way it comes back,
 * the writes complete without error and with their data. */
static void check_restart(char how, bool fresh_rings)
{
	enum { N = 24 };
	const struct offer o = { { { "multi-queue-max-queues", "2" },
				   { "max-ring-page-order", "1" } } };
	static unsigned char bufs[N][16384];
	struct cb_log logs[N];
	struct fx f;
	struct xbdfront_info info;
	unsigned int done = 0;

	memset(logs, 0, sizeof(logs));
	fx_setup(&f, &o, true);
	f.opts.max_ring_page_order = 1;
	assert_int_equal(xbdfront_open(GUEST, "xvda", &f.opts, &f.dev), 0);
	rw_check(&f, 0, 65536, 4);
	be_set_mode(&f.s.b, BE_SILENT);
	for (unsigned int i = 0; i < N; i++) {
		struct iovec v = { bufs[i], sizeof(bufs[i]) };
		fill(bufs[i], sizeof(bufs[i]), 100 + i + (unsigned int)how);
		assert_int_equal(fe_submit(f.dev, i % 2, XBDFRONT_WRITE, (1u << 20) + i * 16384ull,
					   16384, &v, log_cb, (uintptr_t)&logs[i]), 0);
	}
	usleep(50 * 1000);
	assert_int_equal(write(f.s.restart_fd[1], &how, 1), 1);
	while (done < N) {
		for (unsigned int q = 0; q < 2; q++) {
			struct pollfd pfd = { .fd = xbdfront_queue_fd(f.dev, q), .events = POLLIN };
			poll(&pfd, 1, 20);
			assert_true(xbdfront_process(f.dev, q) >= 0);
		}
		done = 0;
		for (unsigned int i = 0; i < N; i++)
			done += __atomic_load_n(&logs[i].n, __ATOMIC_ACQUIRE);
	}
	for (unsigned int i = 0; i < N; i++) {
		assert_int_equal(logs[i].n, 1);
		assert_int_equal(logs[i].status, 0);
		assert_memory_equal(f.s.b.disk + (1u << 20) + i * 16384ull, bufs[i], 16384);
	}
	assert_int_equal(__atomic_load_n(&f.s.handshakes, __ATOMIC_SEQ_CST), 2);
	for (int i = 0; i < 100 && fe_uint(&f, "state") != XenbusStateConnected; i++)
		usleep(10000);
	assert_int_equal(fe_uint(&f, "state"), XenbusStateConnected);
	assert_int_equal(xbdfront_get_info(f.dev, &info), 0);
	assert_int_equal(info.resets, fresh_rings ? 1 : 0);
	assert_int_equal(info.error, 0);
	rw_check(&f, 8192, 8192, 5);
	fx_teardown(&f, false);
}

static void test_restart_reattach(void **state)
{
	(void)state;
	check_restart('r', false);
}

static void test_restart_after_failure(void **state)
{
	(void)state;
	check_restart('f', true);
}

static void test_restart_via_closed(void **state)
{
	(void)state;
	check_restart('c', true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_negotiate_multi_queue),
		cmocka_unit_test(test_online_resize),
		cmocka_unit_test(test_negotiate_legacy_keys),
		cmocka_unit_test(test_persistent_stated_at_connect),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_refused_ends_closed_with_reason),
		cmocka_unit_test(test_backend_closing_fails_fast),
		cmocka_unit_test(test_domain_handle),
		cmocka_unit_test(test_restart_during_handshake),
		cmocka_unit_test(test_restart_reattach),
		cmocka_unit_test(test_restart_after_failure),
		cmocka_unit_test(test_restart_via_closed),
	};
	return cmocka_run_group_tests(tests, start_daemon, stop_daemon);
}
