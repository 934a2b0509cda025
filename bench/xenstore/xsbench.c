/* SPDX-License-Identifier: MIT */
/*
 * xsbench: throughput and watch latency of a xenstore daemon, next to the
 * cost of a bare Unix-socket round trip measured in the same run.
 *
 *   xsbench SOCKET [SECONDS]
 *
 * Every client is a thread with its own connection speaking xs_wire.h
 * directly (no libxenstore), one request in flight at a time.  The bare
 * round trip is the same 16-byte header + payload echoed by a trivial
 * in-process server, so "daemon cost = op time - bare round trip".
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <xen/io/xs_wire.h>

static const char *xs_path;
static char echo_path[108];
static double seconds = 1.0;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int dial(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die(path);
	return fd;
}

static void full_write(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			die("write");
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void full_read(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r <= 0)
			die("read");
		p = (char *)p + r;
		n -= (size_t)r;
	}
}

/* One message in; returns its type, payload in out (NUL-terminated). */
static uint32_t recv_msg(int fd, char *out)
{
	struct xsd_sockmsg h;

	full_read(fd, &h, sizeof(h));
	if (h.len > XENSTORE_PAYLOAD_MAX)
		die("oversize reply");
	full_read(fd, out, h.len);
	out[h.len] = '\0';
	return h.type;
}

static void send_msg(int fd, uint32_t type, uint32_t tx, const void *p,
		     uint32_t len)
{
	char buf[sizeof(struct xsd_sockmsg) + XENSTORE_PAYLOAD_MAX];
	struct xsd_sockmsg h = { type, 1, tx, len };

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), p, len);
	full_write(fd, buf, sizeof(h) + len);
}

/* A request; returns the reply type (XS_ERROR on error). */
static uint32_t call(int fd, uint32_t type, uint32_t tx, const void *p,
		     uint32_t len, char *out)
{
	uint32_t t;

	send_msg(fd, type, tx, p, len);
	while ((t = recv_msg(fd, out)) == XS_WATCH_EVENT)
		;
	return t;
}

static uint32_t pack2(char *buf, const char *a, const char *b)
{
	size_t la = strlen(a) + 1, lb = strlen(b);
	memcpy(buf, a, la);
	/* a xenstore payload: the value after the path is not NUL-terminated */
	memcpy(buf + la, b, lb);        // NOLINT(bugprone-not-null-terminated-result)
	return (uint32_t)(la + lb);
}

/* ---- the bare round trip: an echo server ---- */

static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[XENSTORE_PAYLOAD_MAX + 1];
	struct xsd_sockmsg h;

	for (;;) {
		if (read(fd, &h, sizeof(h)) != sizeof(h))
			break;
		full_read(fd, buf, h.len);
		full_write(fd, &h, sizeof(h));	/* same size reply */
		full_write(fd, buf, h.len);
	}
	close(fd);
	return NULL;
}

static void *echo_server(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		pthread_t t;
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static void start_echo(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_t t;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(echo_path, sizeof(echo_path), "/tmp/xsbench-echo.%d", (int)getpid());
	strcpy(sa.sun_path, echo_path);
	unlink(echo_path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 16) < 0)
		die("echo server");
	pthread_create(&t, NULL, echo_server, (void *)(intptr_t)fd);
	pthread_detach(t);
}

/* ---- throughput: N client threads for `seconds` ---- */

enum kind { K_RTT, K_READ, K_WRITE, K_TX };

struct worker {
	pthread_t thread;
	enum kind kind;
	int id;
	double deadline;
	long ops, conflicts;
};

static atomic_int ready;

static void one_op(struct worker *w, int fd, const char *node, char *out)
{
	char buf[256];
	uint32_t len, tx;

	switch (w->kind) {
	case K_RTT:
	case K_READ:
		call(fd, XS_READ, 0, node, (uint32_t)strlen(node) + 1, out);
		break;
	case K_WRITE:
		len = pack2(buf, node, "0123456789abcdef");
		if (call(fd, XS_WRITE, 0, buf, len, out) != XS_WRITE)
			die("WRITE failed");
		break;
	case K_TX:
		if (call(fd, XS_TRANSACTION_START, 0, "", 1, out) != XS_TRANSACTION_START)
			die("TRANSACTION_START failed");
		tx = (uint32_t)atoi(out);
		call(fd, XS_READ, tx, node, (uint32_t)strlen(node) + 1, out);
		len = pack2(buf, node, "0123456789abcdef");
		call(fd, XS_WRITE, tx, buf, len, out);
		if (call(fd, XS_TRANSACTION_END, tx, "T", 2, out) != XS_TRANSACTION_END)
			w->conflicts++;
		break;
	}
	w->ops++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char node[64], out[XENSTORE_PAYLOAD_MAX + 1], buf[128];
	int fd = dial(w->kind == K_RTT ? echo_path : xs_path);

	snprintf(node, sizeof(node), "/bench/c%d/k", w->id);
	if (w->kind != K_RTT)
		call(fd, XS_WRITE, 0, buf, pack2(buf, node, "0123456789abcdef"), out);
	atomic_fetch_add(&ready, 1);
	while (now() < w->deadline)
		one_op(w, fd, node, out);
	close(fd);
	return NULL;
}

static double throughput(enum kind kind, int clients, long *conflicts)
{
	struct worker w[64];
	double start = now(), deadline = start + seconds;
	long ops = 0;

	atomic_store(&ready, 0);
	for (int i = 0; i < clients; i++) {
		w[i] = (struct worker){ .kind = kind, .id = i, .deadline = deadline };
		pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
	}
	*conflicts = 0;
	for (int i = 0; i < clients; i++) {
		pthread_join(w[i].thread, NULL);
		ops += w[i].ops;
		*conflicts += w[i].conflicts;
	}
	return ops / (now() - start);
}

/* ---- watch-event latency with 1000 watches ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void watch_latency(int nwatch, double *avg, double *p50, double *p99)
{
	int w = dial(xs_path), c = dial(xs_path);
	char buf[128], out[XENSTORE_PAYLOAD_MAX + 1];
	double *lat = calloc((size_t)nwatch, sizeof(*lat)), sum = 0;

	/* register in batches: each WATCH gives an OK and an initial event */
	for (int i = 0; i < nwatch; i += 100) {
		int batch = nwatch - i < 100 ? nwatch - i : 100;
		for (int j = i; j < i + batch; j++) {
			int n = snprintf(buf, sizeof(buf), "/bench/w/%d%ctok%d", j, 0, j) + 1;
			send_msg(w, XS_WATCH, 0, buf, (uint32_t)n);
		}
		for (int j = 0; j < 2 * batch; j++) {
			uint32_t t = recv_msg(w, out);
			if (t != XS_WATCH && t != XS_WATCH_EVENT)
				die("WATCH failed");
		}
	}
	for (int i = 0; i < nwatch; i++) {
		snprintf(buf, sizeof(buf), "/bench/w/%d", i);
		uint32_t len = pack2(buf, buf, "x");
		double t0 = now();
		send_msg(c, XS_WRITE, 0, buf, len);
		if (recv_msg(w, out) != XS_WATCH_EVENT)
			die("event");
		lat[i] = now() - t0;
		sum += lat[i];
		recv_msg(c, out);
	}
	qsort(lat, (size_t)nwatch, sizeof(*lat), cmp_double);
	*avg = sum / nwatch;
	*p50 = lat[nwatch / 2];
	*p99 = lat[nwatch * 99 / 100];
	free(lat);
	close(w);
	close(c);
}

int main(int argc, char **argv)
{
	static const struct { enum kind kind; const char *name; } kinds[] = {
		{ K_RTT, "bare unix round trip" }, { K_READ, "READ" },
		{ K_WRITE, "WRITE" }, { K_TX, "transaction (START,READ,WRITE,END)" },
	};
	double rtt1 = 0, avg, p50, p99;
	long conflicts;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: xsbench SOCKET [SECONDS]\n");
		return 2;
	}
	xs_path = argv[1];
	if (argc == 3)
		seconds = atof(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	start_echo();
	printf("%-36s %8s %12s %12s\n", "operation", "clients", "ops/s", "us/op");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		for (int clients = 1; clients <= 8; clients += 7) {
			double r = throughput(kinds[k].kind, clients, &conflicts);
			if (k == 0 && clients == 1)
				rtt1 = 1e6 / r;
			printf("%-36s %8d %12.0f %12.1f", kinds[k].name, clients, r,
			       1e6 * clients / r);
			if (kinds[k].kind == K_TX)
				printf("  (%ld EAGAIN)", conflicts);
			printf("\n");
		}
	}
	watch_latency(1000, &avg, &p50, &p99);
	printf("\nwatch event latency, 1000 watches on one connection:\n");
	printf("  WRITE sent -> event received: avg %.1f us, p50 %.1f us, p99 %.1f us\n",
	       avg * 1e6, p50 * 1e6, p99 * 1e6);
	printf("  bare round trip (1 client): %.1f us\n", rtt1);
	unlink(echo_path);
	return 0;
}
