/* SPDX-License-Identifier: MIT */
/*
 * backend/tunables: Linux names and defaults, parsing, refusals that keep
 * the old value, run-time write protection, and the ABI document listing
 * exactly the table's names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/tunables.h"

static int setup(void **state)
{
	(void)state;
	tun_init();
	return 0;
}

static void test_linux_defaults(void **state)
{
	static const struct { const char *name; uint64_t def; unsigned int mode; } linux_params[] = {
		{ "max_buffer_pages", 1024, 0644 },
		{ "max_persistent_grants", 8192, 0644 },   /* Linux: 1056 (tunables.c) */
		{ "persistent_grant_unused_seconds", 60, 0644 },
		{ "max_ring_page_order", 4, 0444 },
		{ "log_stats", 0, 0644 },
		{ "buffer_squeeze_duration_ms", 10, 0644 },
		{ "feature_persistent", 1, 0644 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(linux_params) / sizeof(linux_params[0]); i++) {
		int id = tun_lookup(linux_params[i].name);
		assert_true(id >= 0);
		assert_true(tun_get(id) == linux_params[i].def);
		assert_int_equal(tun_info(id)->mode, linux_params[i].mode);
	}
	assert_true(tun_get(TUN_MAX_QUEUES) == (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	assert_int_equal(tun_lookup("no_such_knob"), -ENOENT);
}

static void test_set_and_refuse(void **state)
{
	static const struct { enum tun_id id; const char *in; int rc; uint64_t after; } t[] = {
		{ TUN_MAX_PERSISTENT_GRANTS, "100", 0, 100 },
		{ TUN_MAX_PERSISTENT_GRANTS, "200\n", 0, 200 },       /* echo N > file */
		{ TUN_MAX_PERSISTENT_GRANTS, "-1", -EINVAL, 200 },
		{ TUN_MAX_PERSISTENT_GRANTS, " 5", -EINVAL, 200 },
		{ TUN_MAX_PERSISTENT_GRANTS, "", -EINVAL, 200 },
		{ TUN_MAX_PERSISTENT_GRANTS, "12abc", -EINVAL, 200 },
		{ TUN_MAX_PERSISTENT_GRANTS, "99999999999999999999999", -EINVAL, 200 },
		{ TUN_MAX_PERSISTENT_GRANTS, "1048577", -EINVAL, 200 },  /* above max */
		{ TUN_MAX_INDIRECT_SEGMENTS, "512", 0, 512 },
		{ TUN_MAX_INDIRECT_SEGMENTS, "513", -EINVAL, 512 },
		{ TUN_FEATURE_PERSISTENT, "N", 0, 0 },
		{ TUN_FEATURE_PERSISTENT, "y\n", 0, 1 },
		{ TUN_FEATURE_PERSISTENT, "0", 0, 0 },
		{ TUN_FEATURE_PERSISTENT, "yes", -EINVAL, 0 },
		{ TUN_FEATURE_PERSISTENT, "2", -EINVAL, 0 },
		{ TUN_MAX_RING_PAGE_ORDER, "6", -EINVAL, 4 },
		/* a boolean that may be left to the backend */
		{ TUN_SYNC_IO, "n", 0, 0 },
		{ TUN_SYNC_IO, "auto\n", 0, TUN_AUTO_VAL },
		{ TUN_SYNC_IO, "Y", 0, 1 },
		{ TUN_SYNC_IO, "2", -EINVAL, 1 },
		{ TUN_SYNC_IO, "autox", -EINVAL, 1 },
		{ TUN_SYNC_IO, "auto", 0, TUN_AUTO_VAL },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		assert_int_equal(tun_set(t[i].id, t[i].in, false), t[i].rc);
		assert_true(tun_get(t[i].id) == t[i].after);
	}
}

static void test_runtime_readonly(void **state)
{
	(void)state;
	assert_int_equal(tun_set(TUN_MAX_RING_PAGE_ORDER, "2", true), -EPERM);
	assert_true(tun_get(TUN_MAX_RING_PAGE_ORDER) == 4);
	assert_int_equal(tun_set_arg("max_ring_page_order=5"), 0);   /* command line */
	assert_true(tun_get(TUN_MAX_RING_PAGE_ORDER) == 5);
	assert_int_equal(tun_set_arg("max_queues=3"), 0);
	assert_true(tun_get(TUN_MAX_QUEUES) == 3);
	assert_int_equal(tun_set_arg("nope=3"), -ENOENT);
	assert_int_equal(tun_set_arg("=3"), -EINVAL);
	assert_int_equal(tun_set_arg("max_queues"), -EINVAL);
	assert_int_equal(tun_set_arg("max_queues=x"), -EINVAL);
	assert_true(tun_get(TUN_MAX_QUEUES) == 3);
}

static void test_format(void **state)
{
	char buf[32];
	(void)state;
	assert_int_equal(tun_format(TUN_MAX_BUFFER_PAGES, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "1024\n");
	assert_int_equal(tun_format(TUN_FEATURE_PERSISTENT, buf, sizeof(buf)), 2);
	assert_string_equal(buf, "Y\n");
	assert_int_equal(tun_set(TUN_FEATURE_PERSISTENT, "n", true), 0);
	tun_format(TUN_FEATURE_PERSISTENT, buf, sizeof(buf));
	assert_string_equal(buf, "N\n");
	assert_int_equal(tun_format(TUN_SYNC_IO, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "auto\n");
	assert_int_equal(tun_set(TUN_SYNC_IO, "0", true), 0);
	tun_format(TUN_SYNC_IO, buf, sizeof(buf));
	assert_string_equal(buf, "N\n");
}

/* Documentation/ABI/backend-tunables lists exactly the table's names,
 * with the table's defaults for the fixed ones. */
static void test_abi_document(void **state)
{
	FILE *f = fopen("Documentation/ABI/backend-tunables", "re");
	char line[256];
	bool seen[TUN_COUNT] = { false };
	int last = -1;
	(void)state;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		unsigned long long def;

		if (sscanf(line, "What: %63s", name) == 1) {
			last = tun_lookup(name);
			if (last < 0)
				fail_msg("documented tunable %s is not in the table", name);
			assert_false(seen[last]);
			seen[last] = true;
		} else if (last >= 0 && sscanf(line, "Default: %llu", &def) == 1 &&
			   last != TUN_MAX_QUEUES) {
			assert_true(def == tun_info(last)->def);
		}
	}
	fclose(f);
	for (int i = 0; i < TUN_COUNT; i++)
		if (!seen[i])
			fail_msg("tunable %s is not documented", tun_info(i)->name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_linux_defaults, setup),
		cmocka_unit_test_setup(test_set_and_refuse, setup),
		cmocka_unit_test_setup(test_runtime_readonly, setup),
		cmocka_unit_test_setup(test_format, setup),
		cmocka_unit_test_setup(test_abi_document, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
