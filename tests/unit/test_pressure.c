/* SPDX-License-Identifier: MIT */
/*
 * backend/pressure.c: the --pressure specs, auto's choice (on made-up
 * /proc/self/cgroup and mountinfo files, and on this machine), the
 * squeeze deadline, and real memory pressure detected by each kernel
 * source the machine has:
 *   - system-wide PSI (every layout): a child thrashing its page cache
 *     (test_pressure_src.h) fires the /proc/pressure/memory trigger;
 *   - a cgroup v2 group's memory.pressure (needs a writable v2 hierarchy):
 *     the same child in the group fires the group's trigger;
 *   - the cgroup v1 memory.pressure_level event (needs a v1 memory
 *     hierarchy, the development machines' hybrid layout): a child
 *     writing a file under a 24 MiB limit makes the kernel reclaim.
 * A test whose source the machine lacks is skipped with the reason; the
 * system-wide PSI test proves the same path on every machine.  Every
 * cgroup made here is removed at teardown.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/gnt.h"
#include "backend/pressure.h"
#include "backend/tunables.h"
#include "test_pressure_src.h"

static char v1dir[600], v2dir[600], file[128], thrash_file[128];
static pid_t hog, thrasher;
static const char *v1_missing, *v2_missing;    /* why there is no group */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int put(const char *dir, const char *name, const char *val)
{
	char path[256];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = write(fd, val, strlen(val)) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static void test_specs(void **state)
{
	static const char *const bad[] = { "", "foo", "psi:", "cgroup1:", "PSI", "cgroup1" };
	struct pressure *p = (void *)1;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(pressure_open(bad[i], &p), -EINVAL);
		assert_null(p);
	}
	assert_int_equal(pressure_open("psi:/nonexistent/memory.pressure", &p), -ENOENT);
	assert_int_equal(pressure_open("cgroup1:/nonexistent", &p), -ENOENT);
	/* not a pressure file: the kernel refuses the trigger */
	assert_int_equal(pressure_open("psi:/proc/self/stat", &p) < 0, 1);
	assert_int_equal(pressure_open("none", &p), -EINVAL);   /* main's, not ours */
	assert_int_equal(pressure_open("psi", &p), 0);
	assert_true(pressure_fd(p) >= 0);
	assert_int_equal(pressure_events(p), POLLPRI);
	assert_string_equal(pressure_spec(p), "psi:" PRESSURE_PSI_DEFAULT);
	assert_null(pressure_origin(p));
	pressure_close(p);
}

/* ---- auto's choice -------------------------------------------------------- */

static char tmp[64];

static void put_text(const char *rel, const char *text)
{
	char path[200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "we");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void mkdir_in(const char *rel)
{
	char path[200];

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

/* auto on cgroup/mountinfo text, the system PSI file psi (relative to
 * tmp): the spec and origin it picked, or NULL. */
static const char *pick(const char *cgroup, const char *mountinfo, const char *psi,
			const char **origin)
{
	static char spec[400];
	char cg[200], mi[200], ps[200];
	struct pressure *p;

	put_text("cgroup", cgroup);
	put_text("mountinfo", mountinfo);
	snprintf(cg, sizeof(cg), "%s/cgroup", tmp);
	snprintf(mi, sizeof(mi), "%s/mountinfo", tmp);
	snprintf(ps, sizeof(ps), "%s/%s", tmp, psi);
	if (pressure_open_auto(cg, mi, ps, &p)) {
		assert_null(p);
		return NULL;
	}
	snprintf(spec, sizeof(spec), "%s", pressure_spec(p) + strlen(tmp) +
		 (strncmp(pressure_spec(p), "psi:", 4) ? 8 : 4));
	*origin = pressure_origin(p);
	pressure_close(p);
	return spec;
}

/*
 * The order: the service's own cgroup v2 memory.pressure, else the
 * system's PSI, else the v1 memory group.  Made-up trees (regular files
 * take the trigger's write, so they arm): a Debian 12 machine (v2 only),
 * the hybrid layout (v1 controllers, v2 at unified/), a mount whose root
 * is not the hierarchy's, and a machine with none of them.
 */
static void test_auto_choice(void **state)
{
	char mi[1024];
	const char *o = NULL;

	(void)state;
	strcpy(tmp, "/tmp/xbd-unit-auto-XXXXXX");
	assert_non_null(mkdtemp(tmp));
	mkdir_in("v2");
	mkdir_in("v2/system.slice");
	mkdir_in("v2/system.slice/xbd-blkback.service");
	put_text("v2/system.slice/xbd-blkback.service/memory.pressure", "");
	put_text("v2/memory.pressure", "");
	put_text("psi", "");
	mkdir_in("v1");
	mkdir_in("v1/grp");
	put_text("v1/grp/memory.pressure_level", "");
	put_text("v1/grp/cgroup.event_control", "");

	/* Debian 12: cgroup2 at /sys/fs/cgroup, a systemd service */
	snprintf(mi, sizeof(mi),
		 "25 30 0:23 / /sys rw,nosuid - sysfs sysfs rw\n"
		 "26 25 0:24 / %s/v2 rw,nosuid - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
		 tmp);
	assert_string_equal(pick("0::/system.slice/xbd-blkback.service\n", mi, "psi", &o),
			    "/v2/system.slice/xbd-blkback.service/memory.pressure");
	assert_string_equal(o, "the service's cgroup v2");
	/* the root cgroup: its memory.pressure is the machine's */
	assert_string_equal(pick("0::/\n", mi, "psi", &o), "/v2/memory.pressure");
	/* a group without the file (gone, or no PSI): the system's PSI */
	assert_string_equal(pick("0::/gone.scope\n", mi, "psi", &o), "/psi");
	assert_string_equal(o, "system-wide PSI");

	/* hybrid: v1 memory controller, v2 at unified/ (the v2 group found
	 * through the "0::" line, whatever the v1 lines say) */
	snprintf(mi, sizeof(mi),
		 "35 31 0:32 / %s/v1 rw,relatime - cgroup cgroup rw,memory\n"
		 "36 31 0:33 / %s/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
		 "41 31 0:38 / %s/v2 rw,relatime - cgroup2 cgroup2 rw\n", tmp, tmp, tmp);
	assert_string_equal(pick("4:memory:/grp\n1:cpu,cpuacct:/\n0::/system.slice/"
				 "xbd-blkback.service\n", mi, "psi", &o),
			    "/v2/system.slice/xbd-blkback.service/memory.pressure");
	/* no PSI at all (psi=0 on the kernel's command line): the v1 event */
	assert_string_equal(pick("4:memory:/grp\n0::/gone.scope\n", mi, "nopsi", &o),
			    "/v1/grp");
	assert_string_equal(o, "the service's cgroup v1");
	/* v1 only, memory among other controllers on one hierarchy */
	snprintf(mi, sizeof(mi), "35 31 0:32 / %s/v1 rw - cgroup cgroup rw,cpu,memory\n", tmp);
	assert_string_equal(pick("3:cpu,memory:/grp\n", mi, "nopsi", &o), "/v1/grp");
	/* a "memory_recursiveprot"-like word is not the memory controller */
	snprintf(mi, sizeof(mi), "35 31 0:32 / %s/v1 rw - cgroup cgroup rw,memoryx\n", tmp);
	assert_null(pick("3:memoryx:/grp\n", mi, "nopsi", &o));

	/* a mount of a subtree (a container's view): its root is stripped */
	snprintf(mi, sizeof(mi), "26 25 0:24 /system.slice %s/v2 rw - cgroup2 cgroup2 rw\n", tmp);
	mkdir_in("v2/sub");
	put_text("v2/sub/memory.pressure", "");
	assert_string_equal(pick("0::/system.slice/sub\n", mi, "psi", &o), "/v2/sub/memory.pressure");
	/* ... and a cgroup outside it is not looked for under it */
	assert_string_equal(pick("0::/user.slice/sub\n", mi, "psi", &o), "/psi");

	/* nothing at all */
	assert_null(pick("", "", "nopsi", &o));
	snprintf(mi, sizeof(mi), "rm -rf '%s'", tmp);
	assert_int_equal(system(mi), 0);
}

/* auto on this machine: the own v2 group's file when it exists, else the
 * system's PSI (which both layouts have). */
static void test_auto_here(void **state)
{
	char mnt[512], line[600], want[1300] = "psi:" PRESSURE_PSI_DEFAULT;
	const char *origin = "system-wide PSI";
	struct pressure *p;
	FILE *f;

	(void)state;
	f = fopen("/proc/self/cgroup", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3) && cg_mount(true, mnt, sizeof(mnt))) {
			char file[1200];

			line[strcspn(line, "\n")] = '\0';
			snprintf(file, sizeof(file), "%s%s/memory.pressure", mnt,
				 strcmp(line + 3, "/") ? line + 3 : "");
			if (access(file, W_OK) == 0) {
				snprintf(want, sizeof(want), "psi:%s", file);
				origin = "the service's cgroup v2";
			}
		}
	fclose(f);
	assert_int_equal(pressure_open("auto", &p), 0);
	fprintf(stderr, "auto here: %s (%s)\n", pressure_spec(p), pressure_origin(p));
	assert_string_equal(pressure_spec(p), want);
	assert_string_equal(pressure_origin(p), origin);
	assert_int_equal(pressure_events(p), POLLPRI);
	pressure_close(p);
}

static void test_fire(void **state)
{
	uint64_t before = pressure_count(), now;

	(void)state;
	tun_init();
	assert_int_equal(tun_set(TUN_BUFFER_SQUEEZE_DURATION_MS, "500", true), 0);
	now = mono_ns();
	pressure_fire();
	assert_int_equal(pressure_count(), before + 1);
	assert_true(gnt_squeeze_until() >= now + 500000000ull);
	assert_true(gnt_squeeze_until() < mono_ns() + 500000000ull + 1);
	/* a shorter squeeze never cuts a longer one short */
	assert_int_equal(tun_set(TUN_BUFFER_SQUEEZE_DURATION_MS, "100", true), 0);
	pressure_fire();
	assert_true(gnt_squeeze_until() >= now + 500000000ull);
	/* 0 ms: counted, nothing squeezed (the deadline does not move) */
	now = gnt_squeeze_until();
	assert_int_equal(tun_set(TUN_BUFFER_SQUEEZE_DURATION_MS, "0", true), 0);
	pressure_fire();
	assert_int_equal(pressure_count(), before + 3);
	assert_true(gnt_squeeze_until() == now);
}

/* ---- real pressure ------------------------------------------------------ */

/* Make the groups the machine allows; a missing one is a reason, and the
 * tests that need it skip with it. */
static int setup_cgroups(void **state)
{
	char mnt[512], lim[32];

	(void)state;
	v1dir[0] = v2dir[0] = '\0';
	v1_missing = v2_missing = NULL;
	snprintf(file, sizeof(file), "/var/tmp/xbd-unit-pressure-%d", (int)getpid());
	snprintf(thrash_file, sizeof(thrash_file), "/var/tmp/xbd-unit-thrash-%d", (int)getpid());
	snprintf(lim, sizeof(lim), "%d", 24 << 20);
	if (!cg_mount(false, mnt, sizeof(mnt))) {
		v1_missing = "no cgroup v1 hierarchy with the memory controller "
			     "(cgroup v2 only, as on Debian 12)";
	} else {
		snprintf(v1dir, sizeof(v1dir), "%s/xbd-unit-pressure-%d", mnt, (int)getpid());
		if (mkdir(v1dir, 0755)) {
			v1dir[0] = '\0';
			v1_missing = "cannot make a cgroup v1 memory group (not delegated to us)";
		} else if (put(v1dir, "memory.limit_in_bytes", lim)) {
			return -1;
		}
	}
	if (!cg_mount(true, mnt, sizeof(mnt))) {
		v2_missing = "no cgroup v2 hierarchy mounted";
	} else {
		snprintf(v2dir, sizeof(v2dir), "%s/xbd-unit-pressure-%d", mnt, (int)getpid());
		if (mkdir(v2dir, 0755)) {
			v2dir[0] = '\0';
			v2_missing = "cannot make a cgroup v2 group (subtree not delegated to us)";
		}
	}
	return 0;
}

static int teardown_cgroups(void **state)
{
	(void)state;
	if (hog > 0) {
		kill(hog, SIGKILL);
		waitpid(hog, NULL, 0);
	}
	hog = 0;
	thrash_stop(&thrasher, thrash_file);
	unlink(file);
	/* the children are gone: the groups are empty and can go */
	for (int i = 0; v1dir[0] && i < 100 && (rmdir(v1dir) && errno == EBUSY); i++)
		usleep(10000);
	for (int i = 0; v2dir[0] && i < 100 && (rmdir(v2dir) && errno == EBUSY); i++)
		usleep(10000);
	return 0;
}

/* A child in the v1 group (and the v2 group when there is one) writing
 * 256 MiB of page cache through a 24 MiB limit: the kernel must reclaim
 * (and stall on writeback) all along. */
static void start_hog(void)
{
	hog = fork();
	if (hog == 0) {
		static char buf[1 << 20];
		int fd;

		if (put(v1dir, "cgroup.procs", "0") ||
		    (v2dir[0] && put(v2dir, "cgroup.procs", "0")))
			_exit(2);
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		memset(buf, 0x5a, sizeof(buf));
		for (int i = 0; fd >= 0 && i < 256; i++)
			if (write(fd, buf, sizeof(buf)) != sizeof(buf))
				_exit(3);
		fsync(fd);
		_exit(0);
	}
	assert_true(hog > 0);
}

/* Poll p (up to 20 s) until it reports pressure; handle it.  A hog that
 * wrote its file through is started again. */
static void expect_pressure(struct pressure *p)
{
	uint64_t before = pressure_count();
	struct pollfd pfd = { pressure_fd(p), pressure_events(p), 0 };
	int rc = 0;

	for (int i = 0; i < 200 && rc != 1; i++) {
		if (poll(&pfd, 1, 100) > 0)
			rc = pressure_handle(p, pfd.revents);
		assert_true(rc >= 0);
		if (hog > 0 && rc != 1 && i % 50 == 49 && waitpid(hog, NULL, WNOHANG) == hog)
			start_hog();                  /* written through: go again */
		if (thrasher > 0 && waitpid(thrasher, NULL, WNOHANG) == thrasher)
			fail_msg("the thrasher died");
	}
	assert_int_equal(rc, 1);
	assert_int_equal(pressure_count(), before + 1);
	assert_true(gnt_squeeze_until() > 0);
}

static void test_cgroup1_event(void **state)
{
	char spec[700];
	struct pressure *p;

	(void)state;
	if (v1_missing)
		TEST_SKIP("%s; test_psi_system_event proves the squeeze on real "
			  "pressure instead", v1_missing);
	snprintf(spec, sizeof(spec), "cgroup1:%s", v1dir);
	assert_int_equal(pressure_open(spec, &p), 0);
	assert_int_equal(pressure_events(p), POLLIN);
	/* quiet group: nothing to report */
	assert_int_equal(pressure_handle(p, 0), 0);
	start_hog();
	expect_pressure(p);
	pressure_close(p);
}

/* The system-wide PSI trigger (what auto falls back to, and what every
 * layout has): real stalls from the thrasher fire it. */
static void test_psi_system_event(void **state)
{
	struct pressure *p;

	(void)state;
	if (access(PRESSURE_PSI_DEFAULT, R_OK))
		TEST_SKIP("no %s (a kernel without PSI)", PRESSURE_PSI_DEFAULT);
	assert_int_equal(pressure_open("psi", &p), 0);
	thrasher = thrash_start(thrash_file, NULL);
	assert_true(thrasher > 0);
	expect_pressure(p);
	pressure_close(p);
}

/*
 * A PSI trigger on a real cgroup v2 group's memory.pressure: the kernel
 * accepts it, a quiet group reports nothing, and the thrasher in the
 * group fires it (PSI counts a v2 group's stalls with or without the
 * memory controller).  A trigger on a file that is not a pressure file
 * is refused.
 */
static void test_psi_cgroup2(void **state)
{
	char spec[700], procs[700];
	struct pressure *p;
	struct pollfd pfd;

	(void)state;
	if (v2_missing)
		TEST_SKIP("%s; test_psi_system_event proves the PSI trigger instead",
			  v2_missing);
	snprintf(spec, sizeof(spec), "psi:%s/memory.pressure", v2dir);
	assert_int_equal(pressure_open(spec, &p), 0);
	assert_int_equal(pressure_events(p), POLLPRI);
	pfd = (struct pollfd){ pressure_fd(p), pressure_events(p), 0 };
	assert_true(pfd.fd >= 0);
	assert_int_equal(poll(&pfd, 1, 200), 0);       /* quiet: no event */
	assert_int_equal(pressure_handle(p, 0), 0);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", v2dir);
	thrasher = thrash_start(thrash_file, procs);
	assert_true(thrasher > 0);
	expect_pressure(p);
	pressure_close(p);
	snprintf(spec, sizeof(spec), "psi:%s/cgroup.procs", v2dir);
	assert_true(pressure_open(spec, &p) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_specs),
		cmocka_unit_test(test_fire),
		cmocka_unit_test(test_auto_choice),
		cmocka_unit_test(test_auto_here),
		cmocka_unit_test_setup_teardown(test_cgroup1_event, setup_cgroups, teardown_cgroups),
		cmocka_unit_test_setup_teardown(test_psi_system_event, setup_cgroups,
						teardown_cgroups),
		cmocka_unit_test_setup_teardown(test_psi_cgroup2, setup_cgroups, teardown_cgroups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
