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
 *   - real pressure: the backend runs in a memory-limited cgroup v1 with
 *     --pressure cgroup1:DIR while a child of the same group writes page
 *     cache; the kernel's event squeezes the pool under running I/O.
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

#include "backend/ring.h"
#include "xenbus.h"
#include "test_be_guest.h"
#include "test_be_xs.h"

#define BE "/local/domain/0/backend/vbd/1/51712"
#define FE "/local/domain/1/device/vbd/51712"
#define VBD "bus/xen-backend/devices/vbd-1-51712/"
#define PARAM "module/xen_blkback/parameters/"
#define NPAGES 256
#define SEGS 11

struct fx {
	struct guest g;
	pid_t xsd, be, hog;
	struct xs_handle *xs;
	struct gring r;
	char file[128], cg[128];
	uint64_t next_id;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void bin(char *buf, size_t len, const char *name)
{
	char xsd[PATH_MAX];

	xsd_binary(xsd, sizeof(xsd));
	*strrchr(xsd, '/') = '\0';
	snprintf(buf, len, "%.*s/%s", (int)(len - 64), xsd, name);
}

static int run_xbd(struct fx *fx, const char *a1, const char *a2, const char *a3,
		   const char *a4)
{
	char path[PATH_MAX];
	int status;
	pid_t pid;

	bin(path, sizeof(path), "xbd");
	pid = fork();
	if (pid == 0) {
		execl(path, path, "--rundir", fx->g.rundir, a1, a2, a3, a4, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int put_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = write(fd, val, strlen(val)) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* ---- the tree ------------------------------------------------------------ */

static int sys_write(struct fx *fx, const char *rel, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/sys/%s", fx->g.rundir, rel);
	return put_file(path, val);
}

static uint64_t sys_read(struct fx *fx, const char *rel)
{
	char path[256], buf[64] = "";
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/sys/%s", fx->g.rundir, rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	return strtoull(buf, NULL, 10);
}

/* ---- the backend ------------------------------------------------------------ */

/* Start xbd-blkback (in the cgroup fx->cg when set) and wait for its tree. */
static void start_backend(struct fx *fx, const char *extra)
{
	char path[PATH_MAX], log[256], procs[200], tree[200];

	bin(path, sizeof(path), "xbd-blkback");
	snprintf(log, sizeof(log), "%s/blkback.log", fx->g.rundir);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", fx->cg);
	fx->be = fork();
	if (fx->be == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		dup2(fd, 2);
		if (fx->cg[0] && put_file(procs, "0"))
			_exit(126);
		execl(path, path, "-N", "-p", "local", "-R", fx->g.rundir, "-l", "info",
		      "--max_queues=1", extra, (char *)NULL);
		_exit(127);
	}
	assert_true(fx->be > 0);
	snprintf(tree, sizeof(tree), "%s/sys/" PARAM "max_queues", fx->g.rundir);
	for (int i = 0; i < 500 && access(tree, R_OK); i++)
		usleep(10000);
	assert_int_equal(access(tree, R_OK), 0);
}

static int stop_backend(struct fx *fx, int sig)
{
	int status = 0;

	if (fx->be <= 0)
		return -1;
	kill(fx->be, sig);
	waitpid(fx->be, &status, 0);
	fx->be = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static long rss_kb(pid_t pid)
{
	char path[64], line[128];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* ---- the guest ------------------------------------------------------------- */

static void frontend_connect(struct fx *fx, bool persistent)
{
	char key[16];

	xbd_xs_printf(fx->xs, XBT_NULL, FE, "ring-page-order", "2");
	xbd_xs_write(fx->xs, XBT_NULL, FE, "protocol", "x86_64-abi");
	xbd_xs_printf(fx->xs, XBT_NULL, FE, "feature-persistent", "%d", persistent);
	gring_share(&fx->g, &fx->r, 2, RING_ABI_X86_64);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "ring-ref%d", i);
		xbd_xs_printf(fx->xs, XBT_NULL, FE, key, "%u", fx->r.refs[i]);
	}
	xbd_xs_printf(fx->xs, XBT_NULL, FE, "event-channel", "%d", fx->r.port);
	xbd_xs_printf(fx->xs, XBT_NULL, FE, "state", "%d", XenbusStateInitialised);
	if (xbd_xenbus_wait_state(fx->xs, BE, 1u << XenbusStateConnected, 10000, NULL))
		fail_msg("backend not Connected");
}

/* One request of SEGS full pages, grants first..first+SEGS-1 (mod NPAGES). */
static void put_req11(struct fx *fx, uint8_t op, uint64_t sector, unsigned int first)
{
	struct gring *r = &fx->r;
	uint8_t *s = r->sring + 64 + (r->prod++ & (r->nr_ents - 1)) * 112;
	uint64_t id = fx->next_id++;

	memset(s, 0, 112);
	s[0] = op;
	s[1] = SEGS;
	memcpy(s + 8, &id, 8);
	memcpy(s + 16, &sector, 8);
	for (unsigned int i = 0; i < SEGS; i++) {
		uint8_t seg[8] = { 0, 0, 0, 0, 0, 7, 0, 0 };

		memcpy(seg, &fx->g.rw[(first + i) % NPAGES], 4);
		memcpy(s + 24 + 8 * i, seg, 8);
	}
}

/* n requests in flight at once (writes, then reads of the same sectors
 * when reads), every one answered OKAY. */
static void io_batch(struct fx *fx, unsigned int n, uint8_t op, unsigned int first)
{
	RING_IDX old = fx->r.prod;
	uint64_t id;
	int16_t st;

	assert_true(n <= fx->r.nr_ents);
	for (unsigned int i = 0; i < n; i++)
		put_req11(fx, op, (uint64_t)(i % 128) * SEGS * 8, first + i * SEGS);
	push(&fx->r, old);
	for (unsigned int i = 0; i < n; i++) {
		get_rsp(&fx->r, &id, &st);
		assert_int_equal(st, BLKIF_RSP_OKAY);
	}
}

/* ---- fixtures ---------------------------------------------------------------- */

static int setup(void **state)
{
	static struct fx fx;
	char sock[160];
	int fd;

	memset(&fx, 0, sizeof(fx));
	strcpy(fx.g.rundir, "/tmp/xbd-be-unit-XXXXXX");
	if (!mkdtemp(fx.g.rundir) || xsd_start(fx.g.rundir, &fx.xsd))
		return -1;
	*state = &fx;
	if (run_xbd(&fx, "domain-create", "guest", "--memory", "16M") != 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", fx.g.rundir);
	snprintf(fx.file, sizeof(fx.file), "%s/disk.img", fx.g.rundir);
	fd = open(fx.file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 16 << 20))
		return -1;
	close(fd);
	if (xbd_platform_open(XBD_PLATFORM_LOCAL, fx.g.rundir, &fx.g.p) ||
	    xbd_domain_claim(fx.g.p, 1, &fx.g.dom) || xbd_gntshr_open(fx.g.dom, &fx.g.gs) ||
	    xbd_gntshr_share_pages(fx.g.gs, 0, NPAGES, fx.g.rw, true, (void **)&fx.g.rw_mem) ||
	    xbd_xs_open(sock, &fx.xs))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;
	char cmd[300];

	stop_backend(fx, SIGKILL);
	if (fx->hog > 0) {
		kill(fx->hog, SIGKILL);
		waitpid(fx->hog, NULL, 0);
	}
	if (fx->cg[0]) {
		for (int i = 0; i < 100 && rmdir(fx->cg) && errno == EBUSY; i++)
			usleep(10000);
		if (access(fx->cg, F_OK) == 0)
			fprintf(stderr, "warning: could not remove %s\n", fx->cg);
	}
	snprintf(cmd, sizeof(cmd), "%s/hog.dat", fx->g.rundir);
	unlink(cmd);
	gring_close(&fx->g, &fx->r);
	if (fx->xs)
		xs_close(fx->xs);
	xsd_stop(&fx->xsd);
	snprintf(cmd, sizeof(cmd), "grep -v ' info: ' '%s/blkback.log' >&2", fx->g.rundir);
	if (system(cmd) != 0)
		fprintf(stderr, "(backend log: only info lines)\n");
	/* a killed backend leaves its mount: detach it before removing */
	snprintf(cmd, sizeof(cmd), "%s/sys", fx->g.rundir);
	umount2(cmd, MNT_DETACH);
	guest_down(&fx->g);
	return 0;
}

static void attach(struct fx *fx)
{
	char spec[200];

	snprintf(spec, sizeof(spec), "%s,raw,xvda,w", fx->file);
	assert_int_equal(run_xbd(fx, "block-attach", "1", spec, NULL), 0);
}

static void assert_log_clean(struct fx *fx)
{
	static const char *bad[] = { "AddressSanitizer", "LeakSanitizer", "runtime error:",
				     "Assertion", "assertion" };
	char path[200], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/blkback.log", fx->g.rundir);
	f = fopen(path, "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strstr(line, bad[i]))
				fail_msg("backend log: %s", line);
	fclose(f);
}

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

	if (!f)
		fail_msg("%s: %s", file, strerror(errno));
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

/* Lowering max_persistent_grants live: the mapped grants fall to it
 * within the LRU interval (100 ms, plus the queue's tick). */
static void test_lru_live(void **state)
{
	struct fx *fx = *state;
	uint64_t t0, got;

	start_backend(fx, "--log_stats=N");
	attach(fx);
	frontend_connect(fx, true);
	check_abi(fx);
	io_batch(fx, 20, BLKIF_OP_WRITE, 0);           /* 220 distinct grants */
	io_batch(fx, 20, BLKIF_OP_READ, 0);
	assert_int_equal(sys_read(fx, VBD "statistics/persistent_grants"), 220);
	assert_int_equal(sys_read(fx, VBD "queue-0/persistent_grants"), 220);
	assert_int_equal(sys_read(fx, VBD "statistics/wr_req"), 20);
	assert_int_equal(sys_read(fx, VBD "statistics/rd_sect"), 20 * SEGS * 8);
	assert_int_equal(sys_write(fx, PARAM "max_persistent_grants", "100\n"), 0);
	t0 = mono_ms();
	while ((got = sys_read(fx, VBD "statistics/persistent_grants")) > 100 &&
	       mono_ms() - t0 < 2000)
		usleep(5000);
	assert_true(got <= 100);
	assert_true(mono_ms() - t0 <= 250);
	/* the cap holds under more I/O */
	io_batch(fx, 20, BLKIF_OP_WRITE, 0);
	usleep(250000);
	assert_true(sys_read(fx, VBD "statistics/persistent_grants") <= 100);
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_log_clean(fx);
}

/* Fill the copy path's pool: 64 requests of 11 pages in flight. */
static uint64_t fill_pool(struct fx *fx)
{
	io_batch(fx, 64, BLKIF_OP_WRITE, 0);
	io_batch(fx, 64, BLKIF_OP_READ, 0);
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
	attach(fx);
	frontend_connect(fx, false);
	free0 = fill_pool(fx);
	assert_int_equal(free0, 64 * SEGS);
	rss0 = rss_kb(fx->be);
	assert_int_equal(sys_write(fx, "module/xen_blkback/memory_pressure", "1\n"), 0);
	t0 = mono_ms();
	while ((n = sys_read(fx, VBD "statistics/pool_pages_free")) && mono_ms() - t0 < 2000)
		usleep(2000);
	assert_int_equal(n, 0);
	/* the issue's bound: buffer_squeeze_duration_ms + 100 ms (the tick) */
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
		io_batch(fx, 16, BLKIF_OP_WRITE, 0);
		assert_int_equal(sys_read(fx, VBD "statistics/pool_pages_free"), 0);
	}
	/* after buffer_squeeze_duration_ms, pages come back under load */
	while (mono_ms() - t0 < 1000 + 50)
		usleep(10000);
	io_batch(fx, 16, BLKIF_OP_WRITE, 0);
	assert_int_equal(sys_read(fx, VBD "statistics/pool_pages_free"), 16 * SEGS);
	assert_int_equal(sys_read(fx, VBD "statistics/inflight"), 0);
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_log_clean(fx);
}

/* Real pressure: the backend in a memory-limited cgroup v1, a child of
 * the same group writing page cache, I/O running. */
static void test_squeeze_cgroup1(void **state)
{
	struct fx *fx = *state;
	char arg[200], lim[32], path[200], hogfile[200];
	uint64_t t0, n = 1, usage;
	long rss0;
	FILE *f;

	snprintf(fx->cg, sizeof(fx->cg), "/sys/fs/cgroup/memory/xbd-unit-squeeze-%d",
		 (int)getpid());
	assert_int_equal(mkdir(fx->cg, 0755), 0);
	snprintf(arg, sizeof(arg), "--pressure=cgroup1:%s", fx->cg);
	start_backend(fx, arg);
	attach(fx);
	frontend_connect(fx, false);
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

	snprintf(hogfile, sizeof(hogfile), "%s/hog.dat", fx->g.rundir);
	snprintf(path, sizeof(path), "%s/cgroup.procs", fx->cg);
	fx->hog = fork();
	if (fx->hog == 0) {
		static char buf[1 << 20];
		int fd;

		if (put_file(path, "0"))
			_exit(2);
		fd = open(hogfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		memset(buf, 0x5a, sizeof(buf));
		for (int i = 0; fd >= 0 && i < 512; i++)
			if (pwrite(fd, buf, sizeof(buf), (off_t)(i % 256) << 20) != sizeof(buf))
				_exit(3);
		_exit(0);
	}
	/* I/O runs; the kernel's event must squeeze the pool to 0 */
	t0 = mono_ms();
	while (mono_ms() - t0 < 20000) {
		io_batch(fx, 8, BLKIF_OP_WRITE, 0);
		n = sys_read(fx, VBD "statistics/pool_pages_free");
		if (!n && sys_read(fx, "module/xen_blkback/memory_pressure"))
			break;
	}
	assert_int_equal(n, 0);
	assert_true(sys_read(fx, "module/xen_blkback/memory_pressure") >= 1);
	assert_true(sys_read(fx, VBD "statistics/squeezes") >= 1);
	assert_true(rss_kb(fx->be) < rss0);
	kill(fx->hog, SIGKILL);
	waitpid(fx->hog, NULL, 0);
	fx->hog = 0;
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
	assert_log_clean(fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lru_live, setup, teardown),
		cmocka_unit_test_setup_teardown(test_squeeze_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_squeeze_cgroup1, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
