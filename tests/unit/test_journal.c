/* SPDX-License-Identifier: MIT */
/*
 * backend/journal: the crash windows of one request's protocol each
 * resolve as journal.h says, and every kind of bad journal is refused
 * (-ESTALE for another connection's, -EBADMSG for a corrupt or
 * inconsistent one) instead of being used.
 *
 * A "crash" is simply stopping the sequence of hook calls where the
 * backend would have died: the file is what a SIGKILL leaves.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/journal.h"

#define NENTS 32u

static char dir[64], path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/xbd-test-journal-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return be_journal_path(path, sizeof(path), dir, 0, 1, 51712, 0);
}

static int teardown(void **state)
{
	char jdir[96];

	(void)state;
	unlink(path);
	snprintf(jdir, sizeof(jdir), "%s/journal", dir);
	rmdir(jdir);
	return rmdir(dir);
}

static struct be_journal_id ident(uint64_t gen)
{
	struct be_journal_id id;

	memset(&id, 0, sizeof(id));
	id.generation = gen;
	id.fe_domid = 1;
	id.devid = 51712;
	id.nr_queues = 1;
	id.order = 0;
	id.remote_port = 7;
	id.ring_refs[0] = 8;
	return id;
}

static struct ring_req rw(uint8_t op, uint64_t id, unsigned int nsegs)
{
	struct ring_req r;

	memset(&r, 0, sizeof(r));
	r.operation = op;
	r.id = id;
	r.nr_segments = (uint16_t)nsegs;
	r.nr_copied = nsegs;
	for (unsigned int i = 0; i < nsegs; i++)
		r.u.seg[i] = (struct blkif_request_segment){ .gref = 100 + i, .last_sect = 7 };
	return r;
}

static struct be_journal *fresh(RING_IDX start)
{
	struct be_journal_id id = ident(42);
	struct be_journal *j = NULL;

	assert_int_equal(be_journal_create(path, &id, NENTS, start, &j), 0);
	return j;
}

static int load(RING_IDX rsp_prod, struct be_replay *plan)
{
	struct be_journal_id id = ident(42);
	struct be_journal *j = NULL;
	int rc = be_journal_load(path, &id, NENTS, rsp_prod, plan, &j);

	be_journal_close(j);
	return rc;
}

/* Four requests; 11 and 13 answered (out of order), 10 and 12 in flight. */
static void test_inflight_requests_are_replayed_in_ring_order(void **state)
{
	struct be_journal *j = fresh(5);
	struct ring_req r[4];
	struct be_replay plan;

	(void)state;
	for (unsigned int i = 0; i < 4; i++) {
		r[i] = rw(i % 2 ? BLKIF_OP_READ : BLKIF_OP_WRITE, 10 + i, 1 + i);
		be_journal_record(j, 3 - i, 5 + i, &r[i]);   /* slots 3,2,1,0 */
	}
	be_journal_answering(j, 2, 5);                 /* request 11 at rsp 5 */
	be_journal_answered(j, 2, 6);
	be_journal_answering(j, 0, 6);                 /* request 13 at rsp 6 */
	be_journal_answered(j, 0, 7);
	be_journal_close(j);

	assert_int_equal(load(7, &plan), 0);
	assert_int_equal(plan.req_cons, 9);
	assert_int_equal(plan.n, 2);
	assert_int_equal(plan.e[0].idx, 5);
	assert_int_equal(plan.e[0].slot, 3);
	assert_int_equal(plan.e[0].req.id, 10);
	assert_int_equal(plan.e[1].idx, 7);
	assert_int_equal(plan.e[1].slot, 1);
	assert_memory_equal(&plan.e[1].req, &r[2], sizeof(r[2]));
	be_replay_free(&plan);
}

/* Died after publishing the response, before clearing the entry: the
 * frontend has its answer, so it is not re-run (no duplicate response). */
static void test_published_answer_is_not_replayed(void **state)
{
	struct be_journal *j = fresh(0);
	struct ring_req r = rw(BLKIF_OP_WRITE, 1, 2);
	struct be_replay plan;

	(void)state;
	be_journal_record(j, 0, 0, &r);
	be_journal_answering(j, 0, 0);
	be_journal_close(j);                           /* rsp_prod 1 published */
	assert_int_equal(load(1, &plan), 0);
	assert_int_equal(plan.n, 0);
	assert_int_equal(plan.req_cons, 1);
	be_replay_free(&plan);
	/* ... and the entry was resolved in the file: loading again agrees. */
	assert_int_equal(load(1, &plan), 0);
	assert_int_equal(plan.n, 0);
	be_replay_free(&plan);
}

/* Died while writing the response, before publishing it: re-run. */
static void test_unpublished_answer_is_replayed(void **state)
{
	struct be_journal *j = fresh(0);
	struct ring_req r = rw(BLKIF_OP_READ, 9, 3);
	struct be_replay plan;

	(void)state;
	be_journal_record(j, 4, 0, &r);
	be_journal_answering(j, 4, 0);
	be_journal_close(j);                           /* rsp_prod still 0 */
	assert_int_equal(load(0, &plan), 0);
	assert_int_equal(plan.n, 1);
	assert_int_equal(plan.e[0].req.id, 9);
	assert_int_equal(plan.req_cons, 1);
	be_replay_free(&plan);
}

/* An idle journal (all answered, or a clean stop): nothing to re-run. */
static void test_idle_journal_resumes_at_rsp_prod(void **state)
{
	struct be_journal *j = fresh(100);
	struct be_replay plan;

	(void)state;
	be_journal_close(j);
	assert_int_equal(load(100, &plan), 0);
	assert_int_equal(plan.n, 0);
	assert_int_equal(plan.req_cons, 100);
	be_replay_free(&plan);
	/* the ring says more responses than the journal ever made */
	assert_int_equal(load(102, &plan), -EBADMSG);
}

static void test_other_connection_is_stale(void **state)
{
	struct be_journal_id id = ident(43);           /* another generation */
	struct be_journal *j = fresh(0), *k = NULL;
	struct be_replay plan;

	(void)state;
	be_journal_close(j);
	assert_int_equal(be_journal_load(path, &id, NENTS, 0, &plan, &k), -ESTALE);
	assert_null(k);
	id = ident(42);
	id.ring_refs[0] = 9;                           /* other ring */
	assert_int_equal(be_journal_load(path, &id, NENTS, 0, &plan, &k), -ESTALE);
	id = ident(42);
	assert_int_equal(be_journal_load(path, &id, NENTS * 2, 0, &plan, &k), -EBADMSG);
	unlink(path);
	assert_int_equal(be_journal_load(path, &id, NENTS, 0, &plan, &k), -ENOENT);
}

/* Overwrite len bytes at off of the file (the journal is input too). */
static void scribble(off_t off, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, p, len, off), (ssize_t)len);
	close(fd);
}

static size_t hdr_size(void)
{
	/* magic, 4 words, the identity, req_cons, rsp_prod */
	return 8 + 16 + sizeof(struct be_journal_id) + 8;
}

static size_t entry_size(void)
{
	return 16 + sizeof(struct ring_req);
}

static void one_inflight(void)
{
	struct be_journal *j = fresh(0);
	struct ring_req r = rw(BLKIF_OP_WRITE, 1, 2);

	be_journal_record(j, 0, 0, &r);
	be_journal_close(j);
}

static void test_corrupt_journals_are_refused(void **state)
{
	size_t e0 = hdr_size();
	uint32_t v;
	struct be_replay plan;

	(void)state;
	one_inflight();
	scribble(0, "garbage!", 8);                   /* magic */
	assert_int_equal(load(0, &plan), -EBADMSG);

	one_inflight();
	v = 3;                                         /* no such state */
	scribble((off_t)e0, &v, 4);
	assert_int_equal(load(0, &plan), -EBADMSG);

	one_inflight();
	v = 0xffff;                                    /* nr_copied past the array */
	scribble((off_t)(e0 + 16 + offsetof(struct ring_req, nr_copied)), &v, 4);
	assert_int_equal(load(0, &plan), -EBADMSG);

	one_inflight();
	v = 1000;                                      /* idx far from req_cons */
	scribble((off_t)(e0 + 4), &v, 4);
	assert_int_equal(load(0, &plan), -EBADMSG);

	one_inflight();                                /* a duplicate entry */
	{
		struct be_journal *j = NULL;
		struct be_journal_id id = ident(42);
		struct ring_req r = rw(BLKIF_OP_READ, 2, 1);

		assert_int_equal(be_journal_load(path, &id, NENTS, 0, &plan, &j), 0);
		be_replay_free(&plan);
		be_journal_record(j, 5, 0, &r);        /* idx 0 again */
		be_journal_close(j);
	}
	assert_int_equal(load(0, &plan), -EBADMSG);

	one_inflight();                                /* in flight, ring says answered */
	assert_int_equal(load(1, &plan), -EBADMSG);

	one_inflight();
	assert_int_equal(truncate(path, (off_t)(e0 + entry_size())), 0);
	assert_int_equal(load(0, &plan), -EBADMSG);
}

/* On Xen nothing creates the rundir: the journal makes it. */
static void test_missing_rundir_is_created(void **state)
{
	struct be_journal_id id = ident(42);
	struct be_journal *j = NULL;
	char run[96], p[160];

	(void)state;
	snprintf(run, sizeof(run), "%s/run", dir);
	assert_int_equal(be_journal_path(p, sizeof(p), run, 0, 1, 51712, 3), 0);
	assert_int_equal(be_journal_create(p, &id, NENTS, 0, &j), 0);
	be_journal_close(j);
	assert_int_equal(access(p, R_OK | W_OK), 0);
	unlink(p);
	snprintf(p, sizeof(p), "%s/journal", run);
	assert_int_equal(rmdir(p), 0);
	assert_int_equal(rmdir(run), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_inflight_requests_are_replayed_in_ring_order,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_published_answer_is_not_replayed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpublished_answer_is_replayed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_journal_resumes_at_rsp_prod,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_connection_is_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_journals_are_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_rundir_is_created,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
