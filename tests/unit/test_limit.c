/* SPDX-License-Identifier: MIT */
/*
 * backend/limit: the token-bucket arithmetic of the per-vbd I/O limits,
 * on a simulated clock: the burst, the refill (capped at the burst), the
 * default burst, bytes per second, debts paid in full, two queues with
 * different rhythms sharing one bucket fairly, and a live change that
 * re-charges a held request.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/limit.h"

#define MS 1000000ull
#define S 1000000000ull

static struct be_limit lim;

static int setup(void **state)
{
	(void)state;
	be_limit_init(&lim);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	be_limit_destroy(&lim);
	return 0;
}

/* How many requests go at once at time now (each a new request). */
static unsigned int go_now(bool write, uint64_t bytes, uint64_t now)
{
	struct be_limit_wait w = { 0 };
	unsigned int n = 0;

	while (n < 100000 && !be_limit_hold(&lim, &w, write, bytes, now))
		n++;
	return n;
}

/* Rate k at rate with burst (0: the default), buckets full at time 0. */
static void limit(enum be_limit_key k, uint64_t rate, uint64_t burst)
{
	be_limit_set(&lim, k, rate, 0);
	be_limit_set(&lim, (enum be_limit_key)(k + BE_LIM_RATES), burst, 0);
	be_limit_fill(&lim, 0);
}

static void test_off_by_default(void **state)
{
	(void)state;
	assert_false(be_limit_active(&lim));
	assert_false(be_limit_active(NULL));
	assert_int_equal(be_limit_set(&lim, BE_LIM_READ_IOPS_BURST, 5, 0), 0);
	assert_false(be_limit_active(&lim));    /* a burst alone limits nothing */
	assert_int_equal(be_limit_set(&lim, BE_LIM_READ_IOPS, 100, 0), 0);
	assert_true(be_limit_active(&lim));
	assert_int_equal(be_limit_set(&lim, BE_LIM_READ_IOPS, 0, 0), 0);
	assert_false(be_limit_active(&lim));
	assert_int_equal(be_limit_set(&lim, BE_LIM_WRITE_BPS, BE_LIMIT_MAX + 1, 0), -EINVAL);
	assert_int_equal(be_limit_set(&lim, BE_LIM_COUNT, 1, 0), -EINVAL);
	assert_int_equal(be_limit_get(&lim, BE_LIM_WRITE_BPS), 0);
	assert_int_equal(be_limit_lookup("write_bps_burst"), BE_LIM_WRITE_BPS_BURST);
	assert_int_equal(be_limit_lookup("iops"), -1);
}

/* 100 iops, burst 10: ten go at once, the 11th waits 10 ms; after a long
 * idle the bucket holds its burst, not more. */
static void test_burst_and_refill(void **state)
{
	struct be_limit_wait w = { 0 };

	(void)state;
	limit(BE_LIM_READ_IOPS, 100, 10);
	assert_int_equal(go_now(false, 4096, 0), 10);
	/* go_now's 11th holds the slot at 10 ms: the 12th waits 20 ms */
	assert_true(be_limit_hold(&lim, &w, false, 4096, 0));
	assert_true(be_limit_hold(&lim, &w, false, 4096, 19 * MS));
	assert_false(be_limit_hold(&lim, &w, false, 4096, 21 * MS));
	assert_int_equal(go_now(false, 4096, 100 * S), 10);     /* capped */
	/* writes are not limited by read_iops */
	assert_int_equal(go_now(true, 4096, 100 * S), 100000);
}

/* Burst 0: a tenth of a second at the rate. */
static void test_default_burst(void **state)
{
	(void)state;
	be_limit_set(&lim, BE_LIM_WRITE_IOPS, 1000, 0);
	be_limit_fill(&lim, 0);
	assert_int_equal(go_now(true, 512, 0), 100);
}

/* 1 MiB/s with 64 KiB writes: over 10 s of a queue that always has one,
 * exactly rate * time (+ the burst) goes, whatever the request size. */
static void test_bps_exact_over_time(void **state)
{
	struct be_limit_wait w = { 0 };
	uint64_t bytes = 0;

	(void)state;
	be_limit_set(&lim, BE_LIM_WRITE_BPS, 1 << 20, 0);
	be_limit_fill(&lim, 0);
	for (uint64_t t = 0; t <= 10 * S; t += MS)
		while (!be_limit_hold(&lim, &w, true, 65536, t))
			bytes += 65536;
	/* 10 MiB plus the 0.1 s burst, within one request */
	assert_true(bytes >= 10 * (1 << 20) + (1 << 20) / 10 - 65536);
	assert_true(bytes <= 10 * (1 << 20) + (1 << 20) / 10 + 65536);
}

/* Two queues of one vbd, one polling every 1 ms, one every 7 ms, each
 * always with a request: they share 100 iops evenly. */
static void test_two_queues_fair(void **state)
{
	struct be_limit_wait w[2] = { { 0 }, { 0 } };
	unsigned int done[2] = { 0, 0 };
	const uint64_t period[2] = { 1 * MS, 7 * MS };

	(void)state;
	limit(BE_LIM_READ_IOPS, 100, 1);
	for (uint64_t t = 0; t < 10 * S; t += MS)
		for (int q = 0; q < 2; q++)
			if (t % period[q] == 0)
				while (!be_limit_hold(&lim, &w[q], false, 4096, t))
					done[q]++;
	print_message("fast queue %u, slow queue %u in 10 s at 100 iops\n",
		      done[0], done[1]);
	assert_true(done[0] + done[1] >= 995 && done[0] + done[1] <= 1005);
	assert_true(done[0] >= 450 && done[1] >= 450);
}

/* A request held under 1 iops is charged again when the limit is raised:
 * it goes within the new rate's time, not the old one's. */
static void test_live_change(void **state)
{
	struct be_limit_wait w = { 0 };

	(void)state;
	limit(BE_LIM_READ_IOPS, 1, 1);
	assert_int_equal(go_now(false, 4096, 0), 1);
	assert_true(be_limit_hold(&lim, &w, false, 4096, 0));     /* ~1 s to go */
	assert_true(be_limit_hold(&lim, &w, false, 4096, 10 * MS));
	assert_int_equal(be_limit_timeout_ms(&w, -1, 10 * MS), BE_LIMIT_RECHECK_MS);
	be_limit_set(&lim, BE_LIM_READ_IOPS, 1000, 10 * MS);
	assert_true(be_limit_hold(&lim, &w, false, 4096, 10 * MS));  /* charged anew */
	assert_int_equal(be_limit_timeout_ms(&w, -1, 10 * MS), 2);  /* 1 ms, rounded up */
	assert_int_equal(be_limit_timeout_ms(&w, 0, 10 * MS), 0);
	assert_false(be_limit_hold(&lim, &w, false, 4096, 12 * MS));
	/* removed: a held request goes at once */
	assert_int_equal(go_now(false, 4096, 12 * MS), 1);     /* the burst */
	assert_true(be_limit_hold(&lim, &w, false, 4096, 12 * MS));
	be_limit_set(&lim, BE_LIM_READ_IOPS, 0, 12 * MS);
	assert_false(be_limit_hold(&lim, &w, false, 4096, 12 * MS));
}

/* waits and waited_us count the requests that were held, as they go,
 * and the time they were held; one that goes at once counts nothing. */
static void test_waits_counted(void **state)
{
	struct be_limit_wait w = { 0 };

	(void)state;
	limit(BE_LIM_READ_IOPS, 1, 1);
	/* go_now's second request holds the slot at 1 s: this one 2 s */
	assert_int_equal(go_now(false, 4096, 0), 1);
	assert_int_equal(be_limit_waits(&lim), 0);
	assert_true(be_limit_hold(&lim, &w, false, 4096, 0));
	assert_true(be_limit_hold(&lim, &w, false, 4096, 1500 * MS));
	assert_int_equal(be_limit_waits(&lim), 0);          /* still held */
	assert_false(be_limit_hold(&lim, &w, false, 4096, 2001 * MS));
	assert_int_equal(be_limit_waits(&lim), 1);
	assert_int_equal(be_limit_waited_us(&lim), 2001000);
	/* a live change re-charges a held one: still one wait, from the start */
	assert_true(be_limit_hold(&lim, &w, false, 4096, 2001 * MS));
	be_limit_set(&lim, BE_LIM_READ_IOPS, 1000, 2002 * MS);
	assert_true(be_limit_hold(&lim, &w, false, 4096, 2002 * MS));
	assert_false(be_limit_hold(&lim, &w, false, 4096, 2004 * MS));
	assert_int_equal(be_limit_waits(&lim), 2);
	assert_int_equal(be_limit_waited_us(&lim), 2001000 + 3000);
}

/* A request with no data (a discard, a flush) is one op and no bytes:
 * a debt of bytes does not hold it, an exhausted op bucket does. */
static void test_no_data_is_one_op(void **state)
{
	struct be_limit_wait w = { 0 }, w2 = { 0 }, w3 = { 0 };

	(void)state;
	limit(BE_LIM_WRITE_BPS, 1000, 1000);
	assert_true(be_limit_hold(&lim, &w, true, 3000, 0));    /* 2 s of debt */
	assert_false(be_limit_hold(&lim, &w2, true, 0, 0));     /* another queue's */
	assert_true(be_limit_hold(&lim, &w3, true, 1, 0));      /* data waits */
	w = (struct be_limit_wait){ 0 };
	be_limit_set(&lim, BE_LIM_WRITE_BPS, 0, 0);
	limit(BE_LIM_WRITE_IOPS, 10, 2);
	assert_int_equal(go_now(true, 0, 0), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_off_by_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_burst_and_refill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_burst, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bps_exact_over_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_queues_fair, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waits_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_data_is_one_op, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
