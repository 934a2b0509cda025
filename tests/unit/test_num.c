/* SPDX-License-Identifier: MIT */
/* lib/num: what a user may type as a number, and what is refused. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "num.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
	const char *s;
	unsigned long long max;
	long long want;              /* -1: refused */
} cases[] = {
	{ "0", 0, 0 },
	{ "7", 10, 7 },
	{ "10", 10, 10 },
	{ "11", 10, -1 },            /* above max */
	{ "007", 10, 7 },            /* leading zeros are decimal, not octal */
	{ "4096", 4096, 4096 },
	{ "9223372036854775807", LLONG_MAX, LLONG_MAX },
	{ "9223372036854775808", LLONG_MAX, -1 },
	{ "99999999999999999999", ULLONG_MAX, -1 },  /* max beyond LLONG_MAX */
	{ "99999999999999999999", LLONG_MAX, -1 },   /* ERANGE */
	{ "", 10, -1 },
	{ "-1", 10, -1 },            /* strtoull would wrap it */
	{ "+1", 10, -1 },
	{ " 1", 10, -1 },
	{ "1 ", 10, -1 },
	{ "2x", 10, -1 },
	{ "0x10", 100, -1 },
	{ "1e3", 10000, -1 },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(cases); i++) {
		print_message("'%s' max %llu\n", cases[i].s, cases[i].max);
		assert_int_equal(xbd_num(cases[i].s, cases[i].max), cases[i].want);
	}
	assert_int_equal(xbd_num(NULL, 10), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
