/* SPDX-License-Identifier: MIT */
/*
 * backend/stats: the latency histogram's buckets (floor(log2(us)), 0
 * below 2 us, everything from 2^23 us in the last bucket), as a table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/stats.h"

static void test_latency_buckets(void **state)
{
	static const struct { uint64_t ns; unsigned int bucket; } t[] = {
		{ 0, 0 },                 /* 0 us */
		{ 999, 0 },
		{ 1000, 0 },              /* 1 us */
		{ 1999, 0 },
		{ 2000, 1 },              /* 2 us */
		{ 3999, 1 },
		{ 4000, 2 },
		{ 1023999, 9 },           /* 1023 us */
		{ 1024000, 10 },          /* 1024 us */
		{ (1ull << 22) * 1000, 22 },
		{ (1ull << 23) * 1000 - 1, 22 },
		{ (1ull << 23) * 1000, 23 },   /* 8.4 s: the last bucket */
		{ (1ull << 40) * 1000, 23 },
		{ UINT64_MAX, BE_LAT_BUCKETS - 1 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (be_stats_lat_bucket(t[i].ns) != t[i].bucket)
			fail_msg("%llu ns: bucket %u, want %u", (unsigned long long)t[i].ns,
				 be_stats_lat_bucket(t[i].ns), t[i].bucket);
}

static void test_record_counts_in_the_bucket(void **state)
{
	struct be_stats s = { 0 };
	(void)state;
	be_stats_record_latency(&s, 5000);       /* 5 us: bucket 2 */
	be_stats_record_latency(&s, 7999);
	be_stats_record_latency(&s, 1);
	assert_true(s.lat[2] == 2 && s.lat[0] == 1);
	assert_true(s.lat[1] == 0 && s.lat[3] == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_latency_buckets),
		cmocka_unit_test(test_record_counts_in_the_bucket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
