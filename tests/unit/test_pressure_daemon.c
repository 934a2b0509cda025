/* SPDX-License-Identifier: MIT */
/*
 * The page pool and the sysfs-style tree on a real xbd-blkback: the test
 * is the guest (domain 1, one queue, the rings and data pages granted by
 * this process) and the administrator (cat/echo through the FUSE tree).
 *
 *   - the tree and Documentation/ABI/ name the same files;
 *   - max_persistent_grants lowered live: mapped grants fall to it within
 *     the LRU interval;
 *   - a squeeze through the tree: pool pages reach 0 within 100 ms, the
 *     backend's RSS falls, I/O goes on without error and keeps no page
 *     during buffer_squeeze_duration_ms, and pages come back after it;
 *   - real pressure, as the machine has it: with --pressure=auto (the
 *     default) and a child thrashing its page cache, the kernel's PSI
 *     trigger squeezes the pool under running I/O (every layout); with
 *     the backend in a memory-limited cgroup v1 and --pressure
 *     cgroup1:DIR, the v1 event does (skipped without a v1 memory
 *     hierarchy, as on Debian 12: the auto test proves the squeeze).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>

#include "test_pressure_fx.h"

/* ---- the tree against Documentation/ABI ----------------------------------- */

#define MAX_ENTRIES 128
static char abi[MAX_ENTRIES][160];
static unsigned int nabi, abi_hits[MAX_ENTRIES];
static size_t tree_root_len;
static unsigned int tree_files;

static void load_abi(const char *file)
{
	char line[256], *p;
	FILE *f = fopen(file, "re");

	if (!f) {
		fail_msg("%s: %s", file, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "What:", 5) || !(p = strstr(line, "/sys/")))
			continue;
		p[strcspn(p, "\n")] = '\0';
		assert_true(nabi < MAX_ENTRIES);
		snprintf(abi[nabi++], sizeof(abi[0]), "%s", p + 5);
	}
	fclose(f);
}

/* Every file of the tree matches exactly one ABI entry. */
static int tree_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	const char *rel = path + tree_root_len;
	unsigned int hits = 0;

	(void)st, (void)ftw;
	if (flag != FTW_F)
		return 0;
	tree_files++;
	for (unsigned int i = 0; i < nabi; i++)
		if (fnmatch(abi[i], rel, FNM_PATHNAME) == 0) {
			hits++;
			abi_hits[i]++;
		}
	if (hits != 1)
		fail_msg("%s matches %u ABI entries", rel, hits);
	return 0;
}

static void check_abi(struct fx *fx)
{
	char root[200];

	nabi = tree_files = 0;
	memset(abi_hits, 0, sizeof(abi_hits));
	load_abi("Documentation/ABI/testing/sysfs-module-xbd-blkback");
	load_abi("Documentation/ABI/testing/sysfs-bus-xbd-backend");
	snprintf(root, sizeof(root), "%s/sys/", fx->g.rundir);
	tree_root_len = strlen(root);
	assert_int_equal(nftw(root, tree_file, 8, FTW_PHYS), 0);
	for (unsigned int i = 0; i < nabi; i++)
		if (!abi_hits[i])
			fail_msg("ABI entry %s names no file of the tree", abi[i]);
	assert_true(tree_files >= nabi);
}

/* ---- the tests ---------------------------------------------------------------- */

/* statistics/errors counts the answers that were not OKAY: an unknown
 * operation (EOPNOTSUPP) and a read past the end (ERROR) of the 16 MiB
 * disk; the vbd's sum and its queue's file agree. */
static void check_errors(struct fx *fx)
{
	struct vbd *v = &fx->v[0];
	RING_IDX old = v->r.prod;
	uint64_t id;
	int16_t st;

	assert_int_equal(sys_read(fx, VBD "statistics/errors"), 0);
	put_req11(fx, v, 42, 0, 0);
	put_req11(fx, v, BLKIF_OP_READ, (16 << 20) / 512, 0);
	push(&v->r, old);
	get_rsp(&v->r, &id, &st);
	assert_int_equal(st, BLKIF_RSP_EOPNOTSUPP);
	get_rsp(&v->r, &id, &st);
	assert_int_equal(st, BLKIF_RSP_ERROR);
	assert_int_equal(sys_read(fx, VBD "statistics/errors"), 2);
	assert_int_equal(sys_read(fx, VBD "queue-0/errors"), 2);
}

/* Lowering max_persistent_grants live: the mapped grants fall to it
 * within the LRU interval (100 ms, plus the queue's tick). */
static void test_lru_live(void **state)
{
	struct fx *fx = *state;
	uint64_t t0, got;

	start_backend(fx, "--log_stats=N");
	vbd_connect(fx, vbd_attach(fx, NULL, 16 << 20), true);
	check_abi(fx);
	vbd_io(fx, &fx->v[0], 20, BLKIF_OP_WRITE, 0);           /* 220 distinct grants */
	vbd_io(fx, &fx->v[0], 20, BLKIF_OP_READ, 0);
	assert_int_equal(sys_read(fx, VBD "statistics/persistent_grants"), 220);
	assert_int_equal(sys_read(fx, VBD "queue-0/persistent_grants"), 220);
	assert_int_equal(sys_read(fx, VBD "statistics/wr_req"), 20);
	assert_int_equal(sys_read(fx, VBD "statistics/rd_sect"), 20 * SEGS * 8);
	check_errors(fx);
	assert_int_equal(sys_write(fx, PARAM "max_persistent_grants", "100\n"), 0);
	t0 = mono_ms();
	while ((got = sys_read(fx, VBD "statistics/persistent_grants")) > 100 &&
	       mono_ms() - t0 < 2000)
		usleep(5000);
	assert_true(got <= 100);
	/* the LRU interval (100 ms) and the tick's phase, plus scheduling
	 * slack for a loaded machine */
	if (mono_ms() - t0 > 350)
		fail_msg("grants at the cap after %" PRIu64 " ms", mono_ms() - t0);
	fprintf(stderr, "lru: %" PRIu64 " grants after %" PRIu64 " ms\n", got, mono_ms() - t0);
	/* the cap holds under more I/O */
	vbd_io(fx, &fx->v[0], 20, BLKIF_OP_WRITE, 0);
	usleep(250000);
	assert_true(sys_read(fx, VBD "statistics/persistent_grants") <= 100);
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_blkback_log_clean(fx->g.rundir);
}

/* Fill the copy path's pool: 64 requests of 11 pages in flight. */
static uint64_t fill_pool(struct fx *fx)
{
	vbd_io(fx, &fx->v[0], 64, BLKIF_OP_WRITE, 0);
	vbd_io(fx, &fx->v[0], 64, BLKIF_OP_READ, 0);
	return sys_read(fx, VBD "statistics/pool_pages_free");
}

/* Squeeze through the tree with I/O running: pool pages at 0 within
 * 100 ms, RSS down, none kept for the duration, back after it. */
static void test_squeeze_tree(void **state)
{
	struct fx *fx = *state;
	uint64_t t0, free0, n;
	long rss0, rss1;

	start_backend(fx, "--buffer_squeeze_duration_ms=1000");
	vbd_connect(fx, vbd_attach(fx, NULL, 16 << 20), false);
	free0 = fill_pool(fx);
	assert_int_equal(free0, 64 * SEGS);
	rss0 = rss_kb(fx->be);
	assert_int_equal(sys_write(fx, "module/xen_blkback/memory_pressure", "1\n"), 0);
	t0 = mono_ms();
	while ((n = sys_read(fx, VBD "statistics/pool_pages_free")) && mono_ms() - t0 < 2000)
		usleep(2000);
	assert_int_equal(n, 0);
	/* the bound: buffer_squeeze_duration_ms + 100 ms (the tick) */
	if (mono_ms() - t0 > 1000 + 100)
		fail_msg("pool pages at 0 after %" PRIu64 " ms", mono_ms() - t0);
	fprintf(stderr, "squeeze: pool pages at 0 after %" PRIu64 " ms, RSS %ld -> %ld kB\n",
		mono_ms() - t0, rss0, rss_kb(fx->be));
	rss1 = rss_kb(fx->be);
	assert_true(rss0 - rss1 >= (long)(free0 * 4) / 2);
	assert_int_equal(sys_read(fx, "module/xen_blkback/memory_pressure"), 1);
	assert_int_equal(sys_read(fx, VBD "statistics/squeezes"), 1);
	/* I/O during the squeeze: answered, and no page kept */
	while (mono_ms() - t0 < 800) {
		vbd_io(fx, &fx->v[0], 16, BLKIF_OP_WRITE, 0);
		n = sys_read(fx, VBD "statistics/pool_pages_free");
		if (mono_ms() - t0 < 1000)    /* the deadline was set before t0 */
			assert_int_equal(n, 0);
	}
	/* after buffer_squeeze_duration_ms, pages come back under load */
	while (mono_ms() - t0 < 1000 + 50)
		usleep(10000);
	vbd_io(fx, &fx->v[0], 16, BLKIF_OP_WRITE, 0);
	assert_int_equal(sys_read(fx, VBD "statistics/pool_pages_free"), 16 * SEGS);
	assert_int_equal(sys_read(fx, VBD "statistics/inflight"), 0);
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_blkback_log_clean(fx->g.rundir);
}

/* I/O runs until the kernel's event has squeezed the pool to 0 (20 s at
 * most); then the tree counts the report and the squeeze, and with rss0
 * > 0 the backend's RSS is below it.  (Not after a long wait: the I/O
 * loop's own allocations, held by ASan's quarantine, grow the RSS more
 * than the pool's pages; test_squeeze_tree proves the fall.) */
static void io_until_squeezed(struct fx *fx, long rss0, uint64_t reports0,
			      uint64_t squeezes0)
{
	uint64_t t0 = mono_ms(), n = 1;

	while (mono_ms() - t0 < 20000) {
		vbd_io(fx, &fx->v[0], 8, BLKIF_OP_WRITE, 0);
		n = sys_read(fx, VBD "statistics/pool_pages_free");
		if (!n && sys_read(fx, "module/xen_blkback/memory_pressure") > reports0)
			break;
	}
	fprintf(stderr, "squeezed by the kernel after %" PRIu64 " ms\n", mono_ms() - t0);
	assert_int_equal(n, 0);
	assert_true(sys_read(fx, "module/xen_blkback/memory_pressure") > reports0);
	assert_true(sys_read(fx, VBD "statistics/squeezes") > squeezes0);
	if (rss0 > 0)
		assert_true(rss_kb(fx->be) < rss0);
}

/* Real pressure through auto: the backend picks its cgroup v2 group's or
 * the system's PSI (and says which), a child in its cgroup thrashes its
 * page cache, I/O running. */
static void test_squeeze_auto(void **state)
{
	struct fx *fx = *state;
	char path[200], line[512];
	uint64_t reports0, squeezes0;
	bool said = false;
	FILE *f;

	if (access("/proc/pressure/memory", R_OK))
		TEST_SKIP("no /proc/pressure/memory (a kernel without PSI)");
	start_backend(fx, "--pressure=auto");
	vbd_connect(fx, vbd_attach(fx, NULL, 16 << 20), false);
	assert_int_equal(fill_pool(fx), 64 * SEGS);
	snprintf(path, sizeof(path), "%s/blkback.log", fx->g.rundir);
	f = fopen(path, "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "--pressure auto: psi:")) {
			said = true;
			fprintf(stderr, "%s", line);
		}
	fclose(f);
	assert_true(said);
	/* the machine's own stalls (other work on it) may have reported
	 * already: count from here */
	reports0 = sys_read(fx, "module/xen_blkback/memory_pressure");
	squeezes0 = sys_read(fx, VBD "statistics/squeezes");
	fx->thrasher = thrash_start(fx->thrash_file, NULL);
	assert_true(fx->thrasher > 0);
	io_until_squeezed(fx, 0, reports0, squeezes0);
	thrash_stop(&fx->thrasher, fx->thrash_file);
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_blkback_log_clean(fx->g.rundir);
}

/* Real pressure: the backend in a memory-limited cgroup v1, a child of
 * the same group writing page cache, I/O running. */
static void test_squeeze_cgroup1(void **state)
{
	struct fx *fx = *state;
	char arg[200], lim[32], path[200], mnt[100];
	uint64_t usage;
	long rss0;
	FILE *f;

	if (!cg_mount(false, mnt, sizeof(mnt)))
		TEST_SKIP("no cgroup v1 hierarchy with the memory controller (cgroup v2 "
			  "only, as on Debian 12); test_squeeze_auto proves the squeeze "
			  "on real pressure");
	snprintf(fx->cg, sizeof(fx->cg), "%s/xbd-unit-squeeze-%d", mnt, (int)getpid());
	if (mkdir(fx->cg, 0755)) {
		fx->cg[0] = '\0';
		TEST_SKIP("cannot make a cgroup v1 memory group: %s; test_squeeze_auto "
			  "proves the squeeze on real pressure", strerror(errno));
	}
	snprintf(arg, sizeof(arg), "--pressure=cgroup1:%s", fx->cg);
	start_backend(fx, arg);
	vbd_connect(fx, vbd_attach(fx, NULL, 16 << 20), false);
	assert_int_equal(fill_pool(fx), 64 * SEGS);
	rss0 = rss_kb(fx->be);
	/* the limit: what the backend uses now, plus 16 MiB */
	snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", fx->cg);
	f = fopen(path, "re");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%" SCNu64, &usage), 1);
	fclose(f);
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", fx->cg);
	snprintf(lim, sizeof(lim), "%" PRIu64, usage + (16u << 20));
	assert_int_equal(put_file(path, lim), 0);
	assert_int_equal(sys_read(fx, "module/xen_blkback/memory_pressure"), 0);

	fx_start_hog(fx, 512);
	/* I/O runs; the kernel's event must squeeze the pool to 0 */
	io_until_squeezed(fx, rss0, 0, 0);
	kill(fx->hog, SIGKILL);
	waitpid(fx->hog, NULL, 0);
	fx->hog = 0;
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_blkback_log_clean(fx->g.rundir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lru_live, fx_cm_setup, fx_cm_teardown),
		cmocka_unit_test_setup_teardown(test_squeeze_tree, fx_cm_setup, fx_cm_teardown),
		cmocka_unit_test_setup_teardown(test_squeeze_auto, fx_cm_setup, fx_cm_teardown),
		cmocka_unit_test_setup_teardown(test_squeeze_cgroup1, fx_cm_setup, fx_cm_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
