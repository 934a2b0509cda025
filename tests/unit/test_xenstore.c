/* SPDX-License-Identifier: MIT */
/*
 * xenstore/: the daemon's pieces without main.c.  Paths, permissions, the
 * hash map, and whole requests through a real connection on a socketpair
 * (framing, transactions as in transaction.c's worked examples,
 * DIRECTORY_PART, persistence round trip and corrupt stores).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "xenstore/xenstored.h"

int epoll_fd = -1;	/* main.c's, which this test does not link */

/* ---- pure helpers ---- */

static void test_path_valid(void **state)
{
	static const struct { const char *p; bool special, ok; } cases[] = {
		{ "/", false, true }, { "/a/b-c_d@e", false, true },
		{ "", false, false }, { "a", false, false }, { "/a/", false, false },
		{ "/a//b", false, false }, { "/a b", false, false },
		{ "/a\x01", false, false }, { "/a.b", false, false },
		{ "@foo", false, false }, { "@foo", true, true },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(path_valid(cases[i].p, cases[i].special), cases[i].ok);
}

static void test_path_length(void **state)
{
	char p[2100 + 32];
	(void)state;
	memset(p, 'x', sizeof(p));
	p[0] = '/';
	p[2048] = '\0';			/* 2048 characters in all */
	assert_true(path_valid(p, false));
	p[2048] = 'x';
	p[2049] = '\0';
	assert_false(path_valid(p, false));
	/* below /local/domain/N/ the prefix does not count */
	strcpy(p, "/local/domain/12/");
	memset(p + 17, 'y', 2048);
	p[17 + 2048] = '\0';
	assert_true(path_valid(p, false));
}

static void test_perm_parse(void **state)
{
	static const struct { const char *s; int rc; uint32_t id; uint8_t acc; } cases[] = {
		{ "n0", 0, 0, PERM_NONE }, { "r5", 0, 5, PERM_READ },
		{ "w7", 0, 7, PERM_WRITE }, { "b0x10", 0, 16, PERM_READ | PERM_WRITE },
		{ "r", -EINVAL, 0, 0 }, { "rabc", -EINVAL, 0, 0 },
		{ "x1", -EINVAL, 0, 0 }, { "", -EINVAL, 0, 0 }, { "r1 ", -EINVAL, 0, 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct perm p;
		assert_int_equal(perm_parse(cases[i].s, &p), cases[i].rc);
		if (!cases[i].rc) {
			assert_int_equal(p.domid, cases[i].id);
			assert_int_equal(p.access, cases[i].acc);
		}
	}
}

static void test_perm_for(void **state)
{
	const struct perm p[] = { { 3, PERM_READ }, { 5, PERM_NONE }, { 6, PERM_WRITE } };
	const unsigned all = PERM_READ | PERM_WRITE | PERM_OWNER;
	(void)state;
	assert_int_equal(perm_for(0, true, -1, p, 3), all);	/* privileged */
	assert_int_equal(perm_for(3, false, -1, p, 3), all);	/* owner */
	assert_int_equal(perm_for(5, false, -1, p, 3), PERM_NONE);
	assert_int_equal(perm_for(6, false, -1, p, 3), PERM_WRITE);
	assert_int_equal(perm_for(9, false, -1, p, 3), PERM_READ);	/* default */
	assert_int_equal(perm_for(9, false, 3, p, 3), all);	/* target owns */
	assert_int_equal(perm_for(9, false, 6, p, 3), PERM_WRITE);
}

static void test_path_helpers(void **state)
{
	struct arena a = { 0 };
	(void)state;
	assert_null(path_parent(&a, "/"));
	assert_string_equal(path_parent(&a, "/a"), "/");
	assert_string_equal(path_parent(&a, "/a/b"), "/a");
	assert_string_equal(path_basename("/a/b"), "b");
	assert_true(path_is_child("/a/b", "/a"));
	assert_true(path_is_child("/a", "/a"));
	assert_false(path_is_child("/ab", "/a"));
	assert_true(path_is_child("/x", "/"));
	assert_false(path_is_child("@x", "/"));
	assert_string_equal(path_child(&a, "/", "x"), "/x");
	assert_string_equal(path_child(&a, "/a", "x"), "/a/x");
	arena_release(&a);
}

static void test_hash(void **state)
{
	struct hash h;
	static char keys[1000][8];
	(void)state;
	assert_int_equal(hash_init(&h), 0);
	for (int i = 0; i < 1000; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		assert_int_equal(hash_put(&h, keys[i], &keys[i], NULL), 0);
	}
	assert_int_equal(h.count, 1000);
	for (int i = 0; i < 1000; i++)
		assert_ptr_equal(hash_get(&h, keys[i]), &keys[i]);
	void *old = NULL;
	assert_int_equal(hash_put(&h, keys[7], &keys[8], &old), 0);
	assert_ptr_equal(old, &keys[7]);
	assert_ptr_equal(hash_del(&h, keys[7]), &keys[8]);
	assert_null(hash_get(&h, keys[7]));
	assert_null(hash_del(&h, "nope"));
	assert_int_equal(h.count, 999);
	hash_destroy(&h);
}

/* ---- whole requests through a connection ---- */

struct peer {
	int fd;			/* the client's end */
	struct conn *conn;	/* the daemon's end */
};

static int setup_store(void **state)
{
	(void)state;
	if (epoll_fd < 0)
		epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	rundir = "/nonexistent";
	return db_init(true);
}

static int teardown_store(void **state)
{
	(void)state;
	conn_shutdown();
	domain_shutdown();
	db_destroy();
	return 0;
}

static struct peer peer_new(bool priv, uint32_t domid)
{
	int sv[2];
	struct peer p;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(conn_new(sv[0], domid, priv), 0);
	p.fd = sv[1];
	p.conn = conns;		/* conn_new() pushes at the head */
	return p;
}

/* Send one request, run the daemon side, return the reply payload. */
static uint32_t request(struct peer *p, uint32_t type, uint32_t tx,
			const void *payload, uint32_t len, char *out)
{
	struct xsd_sockmsg h = { type, 42, tx, len }, r;

	assert_int_equal(write(p->fd, &h, sizeof(h)), sizeof(h));
	if (len)
		assert_int_equal(write(p->fd, payload, len), len);
	conn_handle(p->conn, EPOLLIN);
	for (;;) {
		assert_int_equal(read(p->fd, &r, sizeof(r)), sizeof(r));
		assert_true(r.len <= XS_MAX_PAYLOAD);
		if (r.len)
			assert_int_equal(read(p->fd, out, r.len), r.len);
		out[r.len] = '\0';
		if (r.type != XS_WATCH_EVENT)
			break;
	}
	assert_int_equal(r.req_id, 42);
	assert_int_equal(r.tx_id, tx);
	if (r.type == XS_ERROR)
		return 0xffffffff;
	assert_int_equal(r.type, type);
	return r.len;
}

/* "OK" or the error string. */
static const char *op(struct peer *p, uint32_t type, uint32_t tx,
		      const char *a, const char *b)
{
	static char out[XS_MAX_PAYLOAD + 1];
	char buf[XS_MAX_PAYLOAD];
	size_t la = strlen(a) + 1, lb = b ? strlen(b) : 0;

	memcpy(buf, a, la);
	if (b)
		/* WRITE: the raw value after the path, not NUL-terminated */
		memcpy(buf + la, b, lb);        // NOLINT(bugprone-not-null-terminated-result)
	request(p, type, tx, buf, (uint32_t)(la + lb), out);
	return out;
}

static uint32_t tx_start(struct peer *p)
{
	return (uint32_t)atoi(op(p, XS_TRANSACTION_START, 0, "", NULL));
}

/* transaction.c example 1 (isolation) and 2 (conflict). */
static void test_tx_isolation_and_conflict(void **state)
{
	struct peer a = peer_new(true, 0), b = peer_new(true, 0);
	uint32_t t;
	(void)state;

	assert_string_equal(op(&a, XS_WRITE, 0, "/a", "a"), "OK");
	t = tx_start(&a);
	assert_true(t != 0);
	assert_string_equal(op(&a, XS_READ, t, "/a", NULL), "a");
	assert_string_equal(op(&a, XS_WRITE, t, "/a", "b"), "OK");
	assert_string_equal(op(&b, XS_READ, 0, "/a", NULL), "a");
	assert_string_equal(op(&a, XS_TRANSACTION_END, t, "T", NULL), "OK");
	assert_string_equal(op(&b, XS_READ, 0, "/a", NULL), "b");

	t = tx_start(&a);
	assert_string_equal(op(&a, XS_READ, t, "/a", NULL), "b");
	assert_string_equal(op(&b, XS_WRITE, 0, "/a", "c"), "OK");
	assert_string_equal(op(&a, XS_READ, t, "/a", NULL), "b");
	assert_string_equal(op(&a, XS_WRITE, t, "/a", "d"), "OK");
	assert_string_equal(op(&a, XS_TRANSACTION_END, t, "T", NULL), "EAGAIN");
	assert_string_equal(op(&b, XS_READ, 0, "/a", NULL), "c");
	assert_string_equal(op(&a, XS_TRANSACTION_END, t, "T", NULL), "ENOENT");
	close(a.fd);
	close(b.fd);
}

/* Examples 3 (absent nodes), 4 (two deleters) and 5 (create+delete). */
static void test_tx_absent_deleters_create_delete(void **state)
{
	struct peer a = peer_new(true, 0), b = peer_new(true, 0);
	uint32_t t1, t2;
	(void)state;

	t1 = tx_start(&a);
	assert_string_equal(op(&a, XS_READ, t1, "/x", NULL), "ENOENT");
	assert_string_equal(op(&b, XS_WRITE, 0, "/x", "1"), "OK");
	assert_string_equal(op(&a, XS_TRANSACTION_END, t1, "T", NULL), "EAGAIN");

	assert_string_equal(op(&a, XS_WRITE, 0, "/d/e/f", ""), "OK");
	t1 = tx_start(&a);
	t2 = tx_start(&b);
	assert_string_equal(op(&a, XS_RM, t1, "/d", NULL), "OK");
	assert_string_equal(op(&b, XS_RM, t2, "/d", NULL), "OK");
	assert_string_equal(op(&a, XS_TRANSACTION_END, t1, "T", NULL), "OK");
	assert_string_equal(op(&b, XS_TRANSACTION_END, t2, "T", NULL), "EAGAIN");
	assert_null(db_get("/d/e"));

	size_t before = db_count();
	t1 = tx_start(&a);
	assert_string_equal(op(&a, XS_WRITE, t1, "/n/m", "v"), "OK");
	assert_string_equal(op(&a, XS_RM, t1, "/n", NULL), "OK");
	assert_string_equal(op(&a, XS_TRANSACTION_END, t1, "T", NULL), "OK");
	assert_int_equal(db_count(), before);
	assert_string_equal(op(&a, XS_CONTROL, 0, "check", NULL), "OK");
	close(a.fd);
	close(b.fd);
}

static void test_directory_part_chunks(void **state)
{
	struct peer a = peer_new(true, 0);
	char name[64], out[XS_MAX_PAYLOAD + 1];
	unsigned total = 0, off = 0;
	(void)state;

	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "/dp/child-number-%03d", i);
		assert_string_equal(op(&a, XS_WRITE, 0, name, ""), "OK");
	}
	assert_string_equal(op(&a, XS_DIRECTORY, 0, "/dp", NULL), "E2BIG");
	for (;;) {
		char req[32];
		int n = snprintf(req, sizeof(req), "/dp%c%u", 0, off) + 1;
		uint32_t len = request(&a, XS_DIRECTORY_PART, 0, req, (uint32_t)n, out);
		size_t genlen = strlen(out) + 1;
		bool last = out[len - 1] == '\0' && out[len - 2] == '\0';
		for (size_t p = genlen; p < len && out[p]; p += strlen(out + p) + 1)
			total++;
		off += (unsigned)(len - genlen - (last ? 1 : 0));
		if (last)
			break;
	}
	assert_int_equal(total, 400);
	close(a.fd);
}

static void test_unprivileged_quota_and_perms(void **state)
{
	struct peer d0 = peer_new(true, 0), d5;
	(void)state;

	assert_string_equal(op(&d0, XS_WRITE, 0, "/local/domain/5", ""), "OK");
	assert_int_equal(request(&d0, XS_SET_PERMS, 0, "/local/domain/5\0n5", 19,
				 (char[8]){ 0 }), 3);
	d5 = peer_new(false, 5);
	quota.nodes = 3;
	assert_string_equal(op(&d5, XS_WRITE, 0, "a", "1"), "OK");
	assert_string_equal(op(&d5, XS_WRITE, 0, "b", "1"), "OK");
	assert_string_equal(op(&d5, XS_WRITE, 0, "c", "1"), "ENOSPC");
	quota.nodes = 1000;
	assert_string_equal(op(&d5, XS_READ, 0, "/tool/xenstored", NULL), "EACCES");
	assert_string_equal(op(&d5, XS_READ, 0, "/tool/nope", NULL), "EACCES");
	assert_string_equal(op(&d5, XS_READ, 0, "nope", NULL), "ENOENT");
	assert_string_equal(op(&d5, XS_INTRODUCE, 0, "6", NULL), "EACCES");
	close(d0.fd);
	close(d5.fd);
}

static void test_persist_round_trip_and_corruption(void **state)
{
	struct peer a = peer_new(true, 0);
	char file[] = "/tmp/xbd-xs-unit-XXXXXX";
	int fd = mkstemp(file);
	(void)state;

	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(op(&a, XS_WRITE, 0, "/keep/x", "value"), "OK");
	assert_int_equal(persist_save(file), 0);
	conn_shutdown();
	db_destroy();
	assert_int_equal(db_init(false), 0);
	assert_int_equal(persist_load(file), 0);
	assert_non_null(db_get("/keep/x"));
	assert_memory_equal(db_get("/keep/x")->value, "value", 5);
	assert_non_null(db_get("/tool/xenstored"));

	/* flip one byte in the middle: the checksum refuses it */
	FILE *f = fopen(file, "r+b");
	assert_non_null(f);
	fseek(f, 20, SEEK_SET);
	int ch = fgetc(f);
	fseek(f, 20, SEEK_SET);
	fputc(ch ^ 0x40, f);
	fclose(f);
	db_destroy();
	assert_int_equal(db_init(false), 0);
	assert_int_equal(persist_load(file), -EINVAL);
	assert_int_equal(truncate(file, 9), 0);
	assert_int_equal(persist_load(file), -EINVAL);
	unlink(file);
	assert_int_equal(persist_load(file), -ENOENT);
}

/* CONTROL check finds a counter that disagrees with the store, for a
 * domain with an entry and for a node owner above every domain's id
 * (the recount stops at the highest domid it can meet, not at 32k). */
static void test_check_finds_bad_accounting(void **state)
{
	struct peer a = peer_new(true, 0);
	struct domain *d;
	struct node *n;
	char *reply, out[XS_MAX_PAYLOAD + 1];

	(void)state;
	assert_string_equal(op(&a, XS_WRITE, 0, "/acct", "v"), "OK");
	assert_int_equal(request(&a, XS_SET_PERMS, 0, "/acct\0n3", 9, out), 3);
	assert_string_equal(op(&a, XS_CONTROL, 0, "check", NULL), "OK");
	d = domain_get(3, false);
	assert_non_null(d);
	d->nodes++;
	reply = strdup(op(&a, XS_CONTROL, 0, "check", NULL));
	assert_non_null(strstr(reply, "inconsistent: domain 3 "));
	free(reply);
	d->nodes--;
	assert_string_equal(op(&a, XS_CONTROL, 0, "check", NULL), "OK");
	n = db_get("/acct");
	assert_non_null(n);
	n->perms[0].domid = 30000;     /* an owner with no struct domain */
	reply = strdup(op(&a, XS_CONTROL, 0, "check", NULL));
	assert_non_null(strstr(reply, "inconsistent: domain 3 "));
	free(reply);
	d->nodes--;
	d->memory = 0;
	reply = strdup(op(&a, XS_CONTROL, 0, "check", NULL));
	assert_non_null(strstr(reply, "inconsistent: domain 30000 "));
	free(reply);
	close(a.fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_valid),
		cmocka_unit_test(test_path_length),
		cmocka_unit_test(test_perm_parse),
		cmocka_unit_test(test_perm_for),
		cmocka_unit_test(test_path_helpers),
		cmocka_unit_test(test_hash),
		cmocka_unit_test_setup_teardown(test_tx_isolation_and_conflict,
						setup_store, teardown_store),
		cmocka_unit_test_setup_teardown(test_tx_absent_deleters_create_delete,
						setup_store, teardown_store),
		cmocka_unit_test_setup_teardown(test_directory_part_chunks,
						setup_store, teardown_store),
		cmocka_unit_test_setup_teardown(test_unprivileged_quota_and_perms,
						setup_store, teardown_store),
		cmocka_unit_test_setup_teardown(test_persist_round_trip_and_corruption,
						setup_store, teardown_store),
		cmocka_unit_test_setup_teardown(test_check_finds_bad_accounting,
						setup_store, teardown_store),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (epoll_fd >= 0)
		close(epoll_fd);
	return rc;
}
