/* SPDX-License-Identifier: MIT */
/* lib/num: what a user may type as a number or a size, and what is refused. */
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

static const struct {
	const char *s;
	unsigned int shift;
	unsigned long long max;
	long long want;              /* -1: refused */
} sizes[] = {
	{ "0", 0, 10, 0 },
	{ "4096", 0, LLONG_MAX, 4096 },
	{ "4k", 0, LLONG_MAX, 4096 },
	{ "4K", 0, LLONG_MAX, 4096 },
	{ "20M", 0, LLONG_MAX, 20 << 20 },
	{ "20m", 0, LLONG_MAX, 20 << 20 },
	{ "3G", 0, LLONG_MAX, 3LL << 30 },
	{ "256", 20, LLONG_MAX, 256 << 20 },      /* MiB by default (xl memory) */
	{ "512k", 20, LLONG_MAX, 512 << 10 },     /* a letter wins over the default */
	{ "1024G", 0, 1LL << 40, 1LL << 40 },     /* exactly max */
	{ "1025G", 0, 1LL << 40, -1 },
	{ "1048577", 20, 1LL << 40, -1 },         /* 1 TiB + 1 MiB */
	{ "8589934591G", 0, LLONG_MAX, LLONG_MAX - ((1LL << 30) - 1) },
	{ "8589934592G", 0, LLONG_MAX, -1 },      /* 2^63: would overflow */
	{ "17179869184G", 0, LLONG_MAX, -1 },     /* 2^64: would wrap to 0 */
	{ "99999999999999999999999", 0, LLONG_MAX, -1 },  /* too many digits */
	{ "1", 62, LLONG_MAX, 1LL << 62 },
	{ "1", 63, LLONG_MAX, -1 },               /* no such unit */
	{ "1", 0, ULLONG_MAX, -1 },               /* max beyond LLONG_MAX */
	{ "", 0, 10, -1 },
	{ "K", 0, LLONG_MAX, -1 },
	{ "-1K", 0, LLONG_MAX, -1 },
	{ "+1K", 0, LLONG_MAX, -1 },
	{ " 1K", 0, LLONG_MAX, -1 },
	{ "1 K", 0, LLONG_MAX, -1 },
	{ "1K ", 0, LLONG_MAX, -1 },
	{ "1KB", 0, LLONG_MAX, -1 },
	{ "1KiB", 0, LLONG_MAX, -1 },
	{ "1T", 0, LLONG_MAX, -1 },
	{ "1x", 0, LLONG_MAX, -1 },
	{ "1.5G", 0, LLONG_MAX, -1 },
	{ "0x10", 0, LLONG_MAX, -1 },
};

static void test_sizes(void **state)
{
	(void)state;
	for (size_t i = 0; i < N(sizes); i++) {
		print_message("size '%s' unit 2^%u max %llu\n", sizes[i].s, sizes[i].shift,
			      sizes[i].max);
		assert_int_equal(xbd_size(sizes[i].s, sizes[i].shift, sizes[i].max),
				 sizes[i].want);
	}
	assert_int_equal(xbd_size(NULL, 0, 10), -1);
	/* a NUL right after the digits is the end, not a unit letter */
	assert_int_equal(xbd_size("12\0K", 0, 100), 12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_sizes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
