/* SPDX-License-Identifier: MIT */
/*
 * xbd-pool-bench: the seed's two experiments ("xen/blkback: Squeeze page
 * pools if a memory pressure is detected") against a real xbd-blkback,
 * this process being the guest.  CSV lines go to $XBD_POOL_OUT (default
 * stdout); bench/pool/report.py turns them into the statistics and plot.
 *
 *   dd        XBD_POOL_RUNS (5) runs of XBD_POOL_COUNT (131072) sequential
 *             4 KiB writes at queue depth 1 (dd bs=4k count=131072
 *             oflag=direct) on a vbd backed by a file in /dev/shm (the
 *             seed's ramdisk), alternating max_buffer_pages 0 and 1024:
 *             "dd,<max_buffer_pages>,<run>,<MB/s>"
 *   pressure  XBD_POOL_VBDS (8) vbds with I/O running in a memory-limited
 *             cgroup v1 with --pressure cgroup1 and a child writing page
 *             cache, XBD_POOL_SECONDS (8) with the squeeze on
 *             (buffer_squeeze_duration_ms 10) then off (0), sampled
 *             every 100 ms: "pressure,<on|off>,<ms>,<pool pages free>,
 *             <backend RSS kB>,<backend majflt>,<pswpin>,<pswpout>,<reports>"
 *
 * Both run as a cmocka group so that teardown (the backend, the hog, the
 * cgroup, the files) runs whatever happens.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_pressure_fx.h"

static FILE *out;

static unsigned int env_uint(const char *name, unsigned int def)
{
	const char *s = getenv(name);

	return s && *s ? (unsigned int)strtoul(s, NULL, 10) : def;
}

/* One 4 KiB write at QD 1, as dd does with oflag=direct. */
static void write_one(struct vbd *v, struct guest *g, uint64_t sector)
{
	RING_IDX old = v->r.prod;
	uint64_t id;
	int16_t st;

	put_req(&v->r, BLKIF_OP_WRITE, sector, sector, g->rw[sector / 8 % NPAGES]);
	push(&v->r, old);
	get_rsp(&v->r, &id, &st);
	assert_int_equal(st, BLKIF_RSP_OKAY);
}

static void bench_dd(void **state)
{
	struct fx *fx = *state;
	unsigned int runs = env_uint("XBD_POOL_RUNS", 5), count = env_uint("XBD_POOL_COUNT", 131072);
	struct vbd *v;

	start_backend(fx, "--log-level=warn");
	v = vbd_attach(fx, "/dev/shm", (uint64_t)count * 4096);
	vbd_connect(fx, v, false);
	for (unsigned int r = 0; r < 2 * runs; r++) {
		const char *pages = r % 2 ? "1024" : "0";
		struct timespec a, b;
		double s;

		assert_int_equal(sys_write(fx, PARAM "max_buffer_pages", pages), 0);
		usleep(200000);                       /* the trim runs */
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (unsigned int i = 0; i < count; i++)
			write_one(v, &fx->g, (uint64_t)i * 8);
		clock_gettime(CLOCK_MONOTONIC, &b);
		s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
		fprintf(out, "dd,%s,%u,%.1f\n", pages, r / 2, (double)count * 4096 / 1e6 / s);
		fflush(out);
	}
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
}

static uint64_t field(const char *file, const char *key)
{
	char line[256], k[64];
	unsigned long long v;
	FILE *f = fopen(file, "re");
	uint64_t r = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %llu", k, &v) == 2 && !strcmp(k, key))
			r = v;
	if (f)
		fclose(f);
	return r;
}

static uint64_t majflt(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (f && fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %llu", &v);
	if (f)
		fclose(f);
	return v;
}

static void phase(struct fx *fx, const char *name, unsigned int seconds)
{
	char rel[160];
	uint64_t t0 = mono_ms();

	assert_int_equal(sys_write(fx, PARAM "buffer_squeeze_duration_ms",
				   strcmp(name, "on") ? "0" : "10"), 0);
	for (unsigned int i = 0; i < fx->nvbds; i++)
		vbd_io(fx, &fx->v[i], 64, BLKIF_OP_WRITE, 0);     /* fill the pools */
	fx_start_hog(fx, 0);
	for (unsigned int tick = 0; tick < seconds * 10; tick++) {
		uint64_t pool = 0;

		for (unsigned int i = 0; i < fx->nvbds; i++) {
			vbd_io(fx, &fx->v[i], 4, BLKIF_OP_WRITE, 0);
			snprintf(rel, sizeof(rel), "bus/xen-backend/devices/vbd-1-%u/statistics/"
				 "pool_pages_free", fx->v[i].devid);
			pool += sys_read(fx, rel);
		}
		fprintf(out, "pressure,%s,%" PRIu64 ",%" PRIu64 ",%ld,%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%" PRIu64 "\n", name, mono_ms() - t0, pool, rss_kb(fx->be),
			majflt(fx->be), field("/proc/vmstat", "pswpin"),
			field("/proc/vmstat", "pswpout"),
			sys_read(fx, "module/xen_blkback/memory_pressure"));
		while (mono_ms() - t0 < (tick + 1) * 100ull)
			usleep(5000);
	}
	kill(fx->hog, SIGKILL);
	waitpid(fx->hog, NULL, 0);
	fx->hog = 0;
}

static void bench_pressure(void **state)
{
	struct fx *fx = *state;
	unsigned int n = env_uint("XBD_POOL_VBDS", 8), secs = env_uint("XBD_POOL_SECONDS", 8);
	char arg[200], path[200], lim[32], mnt[100];
	uint64_t usage = 0;
	FILE *f;

	assert_true(n >= 1 && n <= MAX_VBDS);
	if (!cg_mount(false, mnt, sizeof(mnt)))
		TEST_SKIP("no cgroup v1 hierarchy with the memory controller (cgroup v2 "
			  "only, as on Debian 12): the pressure experiment needs a v1 "
			  "memory limit");
	snprintf(fx->cg, sizeof(fx->cg), "%s/xbd-pool-bench-%d", mnt, (int)getpid());
	assert_int_equal(mkdir(fx->cg, 0755), 0);
	snprintf(arg, sizeof(arg), "--pressure=cgroup1:%s", fx->cg);
	start_backend(fx, arg);
	for (unsigned int i = 0; i < n; i++)
		vbd_connect(fx, vbd_attach(fx, NULL, 16 << 20), false);
	for (unsigned int i = 0; i < n; i++)
		vbd_io(fx, &fx->v[i], 64, BLKIF_OP_WRITE, 0);
	snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", fx->cg);
	f = fopen(path, "re");
	assert_true(f && fscanf(f, "%" SCNu64, &usage) == 1);
	fclose(f);
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", fx->cg);
	snprintf(lim, sizeof(lim), "%" PRIu64, usage + (32u << 20));
	assert_int_equal(put_file(path, lim), 0);
	phase(fx, "on", secs);
	phase(fx, "off", secs);
	assert_int_equal(stop_backend(fx, SIGTERM), 0);
}

int main(int argc, char **argv)
{
	const char *file = getenv("XBD_POOL_OUT");
	struct CMUnitTest tests[2];
	unsigned int n = 0;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "dd"))
			tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
				bench_dd, fx_cm_setup, fx_cm_teardown);
		else if (!strcmp(argv[i], "pressure"))
			tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
				bench_pressure, fx_cm_setup, fx_cm_teardown);
		if (n == 2)
			break;
	}
	if (!n) {
		fprintf(stderr, "usage: xbd-pool-bench dd|pressure... (see bench/pool/run.sh)\n");
		return 2;
	}
	out = file ? fopen(file, "we") : stdout;
	if (!out)
		return 1;
	rc = _cmocka_run_group_tests("pool", tests, n, NULL, NULL);
	if (out != stdout)
		fclose(out);
	return rc ? 1 : 0;
}
