/* SPDX-License-Identifier: MIT */
/*
 * backend/gntpool: persistent grants on the real local platform: hits and
 * misses, the cap and one-off mappings, Linux's purge arithmetic in LRU
 * order, the idle timeout, grants in use left alone, and teardown.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/gntpool.h"
#include "test_be_guest.h"

#define SEC 1000000000ull

struct fx {
	struct guest g;
	struct gntpool gp;
};

static int setup(void **state)
{
	static struct fx fx;

	if (guest_up(&fx.g))
		return -1;
	gntpool_init(&fx.gp, fx.g.gt, 1);
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	gntpool_destroy(&fx->gp);
	guest_down(&fx->g);
	return 0;
}

/* get + put of rw grant i at time t; returns the entry. */
static struct pgnt *use(struct fx *fx, unsigned int i, unsigned int max, uint64_t t)
{
	struct pgnt *e;
	void *addr;

	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[i], max, &e, &addr), 0);
	gntpool_put(&fx->gp, e, addr, t);
	return e;
}

static void test_hit_and_miss(void **state)
{
	struct fx *fx = *state;
	struct pgnt *e1, *e2;
	void *a1, *a2;

	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[0], 10, &e1, &a1), 0);
	assert_non_null(e1);
	memcpy(a1, "backend", 8);                       /* writable, and it is */
	assert_memory_equal(guest_page(&fx->g, 0), "backend", 8);  /* the guest's page */
	gntpool_put(&fx->gp, e1, a1, 1);
	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[0], 10, &e2, &a2), 0);
	assert_ptr_equal(e1, e2);
	assert_ptr_equal(a1, a2);                       /* no new mapping */
	gntpool_put(&fx->gp, e2, a2, 2);
	assert_true(fx->gp.stats.hits == 1 && fx->gp.stats.misses == 1);
	assert_int_equal(fx->gp.count, 1);
	assert_int_equal(fx->gp.in_use, 0);
	/* a grant of another domain's table entry that does not exist */
	assert_true(gntpool_get(&fx->gp, 100000, 10, &e1, &a1) < 0);
	/* a read-only grant cannot be mapped persistently (writable) */
	assert_int_equal(gntpool_get(&fx->gp, fx->g.ro[0], 10, &e1, &a1), -EPERM);
	assert_int_equal(fx->gp.count, 1);
}

static void test_cap_gives_one_off_mappings(void **state)
{
	struct fx *fx = *state;
	struct pgnt *e;
	void *addr;

	for (unsigned int i = 0; i < 3; i++)
		assert_non_null(use(fx, i, 3, i));
	assert_false(fx->gp.overflow);
	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[3], 3, &e, &addr), 0);
	assert_null(e);                                 /* pool full */
	assert_true(fx->gp.overflow);
	memcpy(addr, "oneoff", 7);
	assert_memory_equal(guest_page(&fx->g, 3), "oneoff", 7);
	gntpool_put(&fx->gp, NULL, addr, 5);            /* unmaps it */
	assert_int_equal(xbd_gnttab_unmap(fx->g.gt, addr, 1), -EINVAL);
	assert_int_equal(fx->gp.count, 3);
	assert_true(fx->gp.stats.transient == 1);
}

static void test_purge_lru_linux_arithmetic(void **state)
{
	struct fx *fx = *state;
	struct pgnt *busy, *e;
	void *busy_addr, *addr;

	/* 200 grants used in order 0..199; grant 0 stays in use */
	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[0], 200, &busy, &busy_addr), 0);
	for (unsigned int i = 1; i < 200; i++)
		use(fx, i, 200, i * SEC);
	use(fx, 5, 200, 500 * SEC);                     /* 5 is now recent */
	/* at the cap without overflow: nothing to clean */
	assert_int_equal(gntpool_purge(&fx->gp, 501 * SEC, 200, 0), 0);
	/* one grant found it full: clean 200 - 200 + (200 / 100) * 5 = 10 */
	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[250], 200, &e, &addr), 0);
	assert_null(e);
	gntpool_put(&fx->gp, NULL, addr, 502 * SEC);
	assert_int_equal(gntpool_purge(&fx->gp, 503 * SEC, 200, 0), 10);
	assert_int_equal(fx->gp.count, 190);
	assert_false(fx->gp.overflow);
	/* the least recently used unused ones went: 1..4, 6..11 (0 busy, 5 recent) */
	uint64_t misses = fx->gp.stats.misses;
	static const unsigned int gone[] = { 1, 2, 3, 4, 6, 7, 8, 9, 10, 11 };
	static const unsigned int kept[] = { 0, 5, 12, 13, 199 };
	for (size_t i = 0; i < 5; i++) {
		use(fx, kept[i], 1000, 600 * SEC);
		assert_true(fx->gp.stats.misses == misses);
	}
	for (size_t i = 0; i < 10; i++)
		use(fx, gone[i], 1000, 600 * SEC);
	assert_true(fx->gp.stats.misses == misses + 10);
	gntpool_put(&fx->gp, busy, busy_addr, 600 * SEC);
}

static void test_purge_over_cap_and_idle(void **state)
{
	struct fx *fx = *state;

	for (unsigned int i = 0; i < 20; i++)
		use(fx, i, 100, 10 * SEC);
	/* max lowered to 10: the excess goes (10 + 10/100*5 = 10) */
	assert_int_equal(gntpool_purge(&fx->gp, 11 * SEC, 10, 0), 10);
	assert_int_equal(fx->gp.count, 10);
	/* idle timeout: 60 s after the last use, not before */
	assert_int_equal(gntpool_purge(&fx->gp, 69 * SEC, 100, 60), 0);
	use(fx, 19, 100, 50 * SEC);                     /* still fresh at 100 s */
	assert_int_equal(gntpool_purge(&fx->gp, 100 * SEC, 100, 60), 9);
	assert_int_equal(fx->gp.count, 1);
	/* 0 seconds: kept forever */
	assert_int_equal(gntpool_purge(&fx->gp, 100000 * SEC, 100, 0), 0);
	assert_int_equal(fx->gp.count, 1);
}

static void test_destroy_leaves_busy_grants(void **state)
{
	struct fx *fx = *state;
	struct pgnt *e;
	void *addr;

	use(fx, 0, 10, 1);
	assert_int_equal(gntpool_get(&fx->gp, fx->g.rw[1], 10, &e, &addr), 0);
	assert_int_equal(gntpool_destroy(&fx->gp), -EBUSY);
	assert_int_equal(fx->gp.count, 1);              /* only the busy one */
	memcpy(addr, "still", 6);                       /* and still mapped */
	gntpool_put(&fx->gp, e, addr, 2);
	assert_int_equal(gntpool_destroy(&fx->gp), 0);
	assert_int_equal(fx->gp.count, 0);
	assert_int_equal(xbd_gnttab_unmap(fx->g.gt, addr, 1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hit_and_miss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cap_gives_one_off_mappings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purge_lru_linux_arithmetic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purge_over_cap_and_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_leaves_busy_grants, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
