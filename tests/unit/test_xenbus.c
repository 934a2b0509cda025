/* SPDX-License-Identifier: MIT */
/*
 * lib/xenbus against a real xenstored: the test starts xbd-xenstored
 * (next to this binary: ../bin/, or $XBD_XENSTORED) in a private run
 * directory and talks to it with libxenstore, as every program does.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "xenbus.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static char rundir[] = "/tmp/xbd-test-xenbus-XXXXXX";
static char sock[PATH_MAX];
static pid_t daemon_pid;
static struct xs_handle *xs;

/* ---- the daemon ------------------------------------------------------- */

static void daemon_path(char *buf, size_t len)
{
	const char *env = getenv("XBD_XENSTORED");
	char self[PATH_MAX - 32];
	ssize_t n;

	if (env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	*strrchr(self, '/') = '\0';            /* $(O)/tests */
	snprintf(buf, len, "%s/../bin/xbd-xenstored", self);
}

static int connectable(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (strlen(path) >= sizeof(sa.sun_path))
		return 0;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static int start_daemon(void **state)
{
	char bin[PATH_MAX];
	(void)state;

	daemon_path(bin, sizeof(bin));
	if (!mkdtemp(rundir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", rundir);
	daemon_pid = fork();
	if (daemon_pid == 0) {
		execl(bin, bin, "-N", "-R", rundir, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && !connectable(sock); i++) {
		if (waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid) {
			fprintf(stderr, "%s did not start\n", bin);
			return -1;
		}
		usleep(10000);
	}
	return xbd_xs_open(sock, &xs) == 0 ? 0 : -1;
}

static int stop_daemon(void **state)
{
	char cmd[PATH_MAX + 16];
	int status = 0;
	(void)state;

	if (xs)
		xs_close(xs);
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		waitpid(daemon_pid, &status, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", rundir);
	return system(cmd) == 0 && WIFEXITED(status) ? 0 : -1;
}

static void put(const char *path, const char *value, size_t len)
{
	assert_true(xs_write(xs, XBT_NULL, path, value, (unsigned int)len));
}

static void put_str(const char *path, const char *value)
{
	put(path, value, strlen(value));
}

/* ---- typed reads ------------------------------------------------------ */

static void test_read_numbers(void **state)
{
	static const struct { const char *v; uint64_t min, max; int rc; uint64_t out; } u[] = {
		{ "42", 0, 100, 0, 42 }, { "0", 0, 0, 0, 0 },
		{ "18446744073709551615", 0, UINT64_MAX, 0, UINT64_MAX },
		{ "18446744073709551616", 0, UINT64_MAX, -ERANGE, 0 },
		{ "5", 10, 20, -ERANGE, 0 }, { "21", 10, 20, -ERANGE, 0 },
		{ "", 0, 9, -EINVAL, 0 }, { "+1", 0, 9, -EINVAL, 0 },
		{ " 1", 0, 9, -EINVAL, 0 }, { "1 ", 0, 9, -EINVAL, 0 },
		{ "0x10", 0, 99, -EINVAL, 0 }, { "-1", 0, 9, -EINVAL, 0 },
		{ "1.5", 0, 9, -EINVAL, 0 },
		{ "123456789012345678901234567890", 0, UINT64_MAX, -EINVAL, 0 },
	};
	(void)state;
	for (size_t i = 0; i < N(u); i++) {
		uint64_t out = 7;
		put_str("/t/num", u[i].v);
		int rc = xbd_xs_read_u64(xs, XBT_NULL, "/t", "num", u[i].min, u[i].max, &out);
		if (rc != u[i].rc)
			fail_msg("\"%s\": rc %d, expected %d", u[i].v, rc, u[i].rc);
		assert_true(rc ? out == 7 : out == u[i].out);
	}
	uint64_t v;
	assert_int_equal(xbd_xs_read_u64(xs, XBT_NULL, "/t", "missing", 0, 9, &v), -ENOENT);
	unsigned int ui;
	put_str("/t/num", "4294967295");
	assert_int_equal(xbd_xs_read_uint(xs, XBT_NULL, "/t/num", NULL, 0, UINT_MAX, &ui), 0);
	assert_int_equal(ui, UINT_MAX);
	put_str("/t/num", "4294967296");
	assert_int_equal(xbd_xs_read_uint(xs, XBT_NULL, "/t/num", "", 0, UINT_MAX, &ui), -ERANGE);
}

static void test_read_signed(void **state)
{
	static const struct { const char *v; long long min, max; int rc; long long out; } c[] = {
		{ "-5", -10, 10, 0, -5 }, { "7", -10, 10, 0, 7 },
		{ "-11", -10, 10, -ERANGE, 0 },
		{ "-9223372036854775808", LLONG_MIN, LLONG_MAX, 0, LLONG_MIN },
		{ "9223372036854775808", LLONG_MIN, LLONG_MAX, -ERANGE, 0 },
		{ "-", -10, 10, -EINVAL, 0 }, { "--1", -10, 10, -EINVAL, 0 },
	};
	(void)state;
	for (size_t i = 0; i < N(c); i++) {
		long long out = 99;
		put_str("/t/s", c[i].v);
		int rc = xbd_xs_read_int(xs, XBT_NULL, "/t", "s", c[i].min, c[i].max, &out);
		if (rc != c[i].rc)
			fail_msg("\"%s\": rc %d, expected %d", c[i].v, rc, c[i].rc);
		if (rc == 0)
			assert_true(out == c[i].out);
	}
}

static void test_read_strings(void **state)
{
	char *s = NULL, buf[6];
	(void)state;
	put_str("/t/str", "hello");
	assert_int_equal(xbd_xs_read_str(xs, XBT_NULL, "/t", "str", 5, &s), 0);
	assert_string_equal(s, "hello");
	free(s);
	assert_int_equal(xbd_xs_read_str(xs, XBT_NULL, "/t", "str", 4, &s), -E2BIG);
	assert_int_equal(xbd_xs_read_buf(xs, XBT_NULL, "/t", "str", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "hello");
	assert_int_equal(xbd_xs_read_buf(xs, XBT_NULL, "/t", "str", buf, 5), -E2BIG);
	put("/t/nul", "a\0b", 3);     /* a peer's embedded NUL */
	assert_int_equal(xbd_xs_read_str(xs, XBT_NULL, "/t", "nul", 100, &s), -EINVAL);
	assert_int_equal(xbd_xs_read_str(xs, XBT_NULL, "/t", "none", 100, &s), -ENOENT);
}

/* ---- writes, rm, directory --------------------------------------------- */

static void test_write_rm_directory(void **state)
{
	char buf[32], **kids = NULL;
	unsigned int n = 0;
	(void)state;
	assert_int_equal(xbd_xs_printf(xs, XBT_NULL, "/w/dir", "a", "%d-%s", 7, "x"), 0);
	assert_int_equal(xbd_xs_write(xs, XBT_NULL, "/w/dir/b", NULL, "v"), 0);
	assert_int_equal(xbd_xs_read_buf(xs, XBT_NULL, "/w/dir", "a", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "7-x");
	assert_int_equal(xbd_xs_directory(xs, XBT_NULL, "/w", "dir", &kids, &n), 0);
	assert_int_equal(n, 2);
	free(kids);
	assert_int_equal(xbd_xs_exists(xs, XBT_NULL, "/w/dir", "a"), 1);
	assert_int_equal(xbd_xs_rm(xs, XBT_NULL, "/w", "dir"), 0);
	assert_int_equal(xbd_xs_exists(xs, XBT_NULL, "/w/dir", "a"), 0);
	assert_int_equal(xbd_xs_rm(xs, XBT_NULL, "/w", "dir"), 0);   /* already gone */
	assert_int_equal(xbd_xs_directory(xs, XBT_NULL, "/w", NULL, &kids, &n), 0);
	assert_int_equal(n, 0);
	assert_null(kids);
	assert_int_equal(xbd_xs_directory(xs, XBT_NULL, "/w/none", NULL, &kids, &n), -ENOENT);
}

static void test_perms(void **state)
{
	const struct xs_permissions p[2] = {
		{ .id = 3, .perms = XS_PERM_NONE }, { .id = 0, .perms = XS_PERM_READ },
	};
	struct xs_permissions *got;
	unsigned int n;
	(void)state;
	assert_int_equal(xbd_xs_mkdir_perms(xs, XBT_NULL, "/p/dev", p, 2), 0);
	got = xs_get_permissions(xs, XBT_NULL, "/p/dev", &n);
	assert_non_null(got);
	assert_int_equal(n, 2);
	assert_int_equal(got[0].id, 3);
	assert_int_equal(got[0].perms, XS_PERM_NONE);
	assert_int_equal(got[1].perms, XS_PERM_READ);
	free(got);
	assert_int_equal(xbd_xs_set_perms(xs, XBT_NULL, "/p/dev", p, 0), -EINVAL);
}

/* ---- transactions --------------------------------------------------------- */

struct txn_state {
	int runs;
	int conflicts;     /* runs that make an outside write */
	struct xs_handle *other;
	int ret;
};

static int txn_fn(struct xs_handle *h, xs_transaction_t t, void *arg)
{
	struct txn_state *s = arg;
	unsigned int v = 0;

	s->runs++;
	xbd_xs_read_uint(h, t, "/tx/counter", NULL, 0, UINT_MAX, &v);
	if (s->runs <= s->conflicts)       /* someone else writes meanwhile */
		assert_int_equal(xbd_xs_printf(s->other, XBT_NULL, "/tx/counter", NULL,
					       "%u", v + 100), 0);
	if (s->ret < 0)
		return s->ret;
	assert_int_equal(xbd_xs_printf(h, t, "/tx/counter", NULL, "%u", v + 1), 0);
	return s->ret;
}

static void test_transaction_retry(void **state)
{
	struct txn_state s = { .conflicts = 2, .ret = 5 };
	unsigned int v;
	(void)state;
	assert_int_equal(xbd_xs_open(sock, &s.other), 0);
	put_str("/tx/counter", "0");
	/* Two conflicting runs, then a clean one commits; fn's value returns. */
	assert_int_equal(xbd_xs_transaction(xs, txn_fn, &s), 5);
	assert_int_equal(s.runs, 3);
	assert_int_equal(xbd_xs_read_uint(xs, XBT_NULL, "/tx/counter", NULL, 0, 1000, &v), 0);
	assert_int_equal(v, 201);
	/* Always conflicting: bounded, then -EAGAIN. */
	s = (struct txn_state){ .conflicts = INT_MAX, .ret = 0, .other = s.other };
	assert_int_equal(xbd_xs_transaction(xs, txn_fn, &s), -EAGAIN);
	assert_int_equal(s.runs, XBD_XS_TXN_RETRIES);
	/* An error from fn aborts: nothing of that run is kept. */
	put_str("/tx/counter", "0");
	s = (struct txn_state){ .ret = -EINVAL, .other = s.other };
	assert_int_equal(xbd_xs_transaction(xs, txn_fn, &s), -EINVAL);
	assert_int_equal(s.runs, 1);
	assert_int_equal(xbd_xs_read_uint(xs, XBT_NULL, "/tx/counter", NULL, 0, 1000, &v), 0);
	assert_int_equal(v, 0);
	xs_close(s.other);
}

/* ---- XenbusState and waits --------------------------------------------- */

static void test_state_names(void **state)
{
	static const char *const names[] = {
		"Unknown", "Initialising", "InitWait", "Initialised", "Connected",
		"Closing", "Closed", "Reconfiguring", "Reconfigured",
	};
	(void)state;
	for (int s = 0; s < (int)N(names); s++)
		assert_string_equal(xbd_xenbus_state_name((enum xenbus_state)s), names[s]);
	assert_string_equal(xbd_xenbus_state_name((enum xenbus_state)9), "Invalid");
	assert_string_equal(xbd_xenbus_state_name((enum xenbus_state)-1), "Invalid");
}

static void test_read_state(void **state)
{
	enum xenbus_state s;
	(void)state;
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, "/st/none", &s), 0);
	assert_int_equal(s, XenbusStateUnknown);
	put_str("/st/a/state", "4");
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, "/st/a", &s), 0);
	assert_int_equal(s, XenbusStateConnected);
	put_str("/st/a/state", "9");
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, "/st/a", &s), -EINVAL);
	put_str("/st/a/state", "Connected");
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, "/st/a", &s), -EINVAL);
}

/* Count events on a watch for a short while. */
static int count_events(const char *token, int ms)
{
	char path[256], tok[64];
	int n = 0;
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct timespec ts = { 0, 10 * 1000000 };
		while (xbd_xs_next_event(xs, path, sizeof(path), tok, sizeof(tok)) == 1)
			n += strcmp(tok, token) == 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 +
		    (now.tv_nsec - start.tv_nsec) / 1000000 >= ms)
			return n;
		nanosleep(&ts, NULL);
	}
}

static void test_set_state(void **state)
{
	enum xenbus_state s;
	(void)state;
	/* A removed device is not recreated. */
	assert_int_equal(xbd_xenbus_set_state(xs, "/ss/gone", XenbusStateClosing), -ENOENT);
	assert_int_equal(xbd_xs_exists(xs, XBT_NULL, "/ss/gone", NULL), 0);
	put_str("/ss/dev/state", "2");
	assert_int_equal(xbd_xs_watch(xs, "/ss/dev/state", "ss"), 0);
	assert_int_equal(count_events("ss", 100), 1);          /* the initial event */
	/* No write (so no event) when the state is already the one asked. */
	assert_int_equal(xbd_xenbus_set_state(xs, "/ss/dev", XenbusStateInitWait), 0);
	assert_int_equal(count_events("ss", 100), 0);
	assert_int_equal(xbd_xenbus_set_state(xs, "/ss/dev", XenbusStateConnected), 0);
	assert_int_equal(count_events("ss", 100), 1);
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, "/ss/dev", &s), 0);
	assert_int_equal(s, XenbusStateConnected);
	assert_int_equal(xbd_xenbus_set_state(xs, "/ss/dev", (enum xenbus_state)9), -EINVAL);
	assert_int_equal(xbd_xs_unwatch(xs, "/ss/dev/state", "ss"), 0);
	assert_int_equal(xbd_xs_unwatch(xs, "/ss/dev/state", "ss"), -ENOENT);
}

struct delayed {
	const char *path, *value;
	int delay_ms;
};

static void *delayed_write(void *arg)
{
	const struct delayed *d = arg;
	struct xs_handle *h;
	struct timespec ts = { d->delay_ms / 1000, (d->delay_ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
	if (xbd_xs_open(NULL, &h) == 0) {    /* XENSTORED_PATH is set */
		xbd_xs_write(h, XBT_NULL, d->path, NULL, d->value);
		xs_close(h);
	}
	return NULL;
}

static long elapsed_ms(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

static void test_wait_state(void **state)
{
	struct delayed d = { "/ws/dev/state", "3", 150 };
	enum xenbus_state last;
	struct timespec t0;
	pthread_t th;
	(void)state;
	put_str("/ws/dev/state", "1");
	/* Already there: returns at once. */
	assert_int_equal(xbd_xenbus_wait_state(xs, "/ws/dev", 1u << 1, 5000, &last), 0);
	assert_int_equal(last, XenbusStateInitialising);
	/* A peer moves it after 150 ms (through 3, which is in the mask). */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&th, NULL, delayed_write, &d), 0);
	assert_int_equal(xbd_xenbus_wait_state(xs, "/ws/dev", ~0u << 2, 5000, &last), 0);
	pthread_join(th, NULL);
	assert_int_equal(last, XenbusStateInitialised);
	assert_true(elapsed_ms(&t0) >= 140);
	/* Nobody answers: the timeout, not earlier and not much later. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(xbd_xenbus_wait_state(xs, "/ws/dev", 1u << 6, 200, &last), -ETIMEDOUT);
	assert_true(elapsed_ms(&t0) >= 195 && elapsed_ms(&t0) < 2000);
	assert_int_equal(last, XenbusStateInitialised);
}

/* ---- error nodes ------------------------------------------------------------ */

static void test_error_paths(void **state)
{
	static const struct { const char *dev, *err; int rc; } c[] = {
		{ "/local/domain/0/backend/vbd/1/51712",
		  "/local/domain/0/error/backend/vbd/1/51712", 0 },
		{ "/local/domain/7/device/vbd/51712", "/local/domain/7/error/device/vbd/51712", 0 },
		{ "device/vbd/51712", "error/device/vbd/51712", 0 },
		{ "/local/domain/x/device", "", -EINVAL },
		{ "/local/domain/7", "", -EINVAL }, { "/local/domain/7/", "", -EINVAL },
		{ "/elsewhere/dev", "", -EINVAL },
	};
	char buf[256];
	(void)state;
	for (size_t i = 0; i < N(c); i++) {
		int rc = xbd_xenbus_error_path(c[i].dev, buf, sizeof(buf));
		assert_int_equal(rc, c[i].rc);
		if (rc == 0)
			assert_string_equal(buf, c[i].err);
	}
	assert_int_equal(xbd_xenbus_error_path(c[0].dev, buf, 10), -ENAMETOOLONG);
}

static void test_dev_fatal(void **state)
{
	const char *dev = "/local/domain/0/backend/vbd/1/51712";
	const char *linux_node = "/local/domain/0/error/backend/vbd/1/51712/error";
	char buf[128];
	enum xenbus_state s;
	(void)state;
	put_str("/local/domain/0/backend/vbd/1/51712/state", "4");
	assert_int_equal(xbd_xenbus_dev_fatal(xs, dev, -EINVAL, "bad ring-page-order %u", 9), 0);
	assert_int_equal(xbd_xs_read_buf(xs, XBT_NULL, linux_node, NULL, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "22 bad ring-page-order 9");
	assert_int_equal(xbd_xs_read_buf(xs, XBT_NULL, dev, "error", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "22 bad ring-page-order 9");
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, dev, &s), 0);
	assert_int_equal(s, XenbusStateClosing);
	/* dev_error reports without changing state. */
	assert_int_equal(xbd_xenbus_set_state(xs, dev, XenbusStateConnected), 0);
	assert_int_equal(xbd_xenbus_dev_error(xs, dev, -ENOSPC, "%s", "full"), 0);
	assert_int_equal(xbd_xs_read_buf(xs, XBT_NULL, dev, "error", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "28 full");
	assert_int_equal(xbd_xenbus_read_state(xs, XBT_NULL, dev, &s), 0);
	assert_int_equal(s, XenbusStateConnected);
	assert_int_equal(xbd_xenbus_clear_error(xs, dev), 0);
	assert_int_equal(xbd_xs_exists(xs, XBT_NULL, linux_node, NULL), 0);
	assert_int_equal(xbd_xs_exists(xs, XBT_NULL, dev, "error"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_numbers),
		cmocka_unit_test(test_read_signed),
		cmocka_unit_test(test_read_strings),
		cmocka_unit_test(test_write_rm_directory),
		cmocka_unit_test(test_perms),
		cmocka_unit_test(test_transaction_retry),
		cmocka_unit_test(test_state_names),
		cmocka_unit_test(test_read_state),
		cmocka_unit_test(test_set_state),
		cmocka_unit_test(test_wait_state),
		cmocka_unit_test(test_error_paths),
		cmocka_unit_test(test_dev_fatal),
	};
	return cmocka_run_group_tests(tests, start_daemon, stop_daemon);
}
