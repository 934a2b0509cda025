/* SPDX-License-Identifier: MIT */
/*
 * What the pressure tests need from the machine, found rather than
 * assumed (a Debian 12 machine has cgroup v2 only, the development
 * machines a hybrid layout with v1 controllers), and a real source of
 * memory stalls that needs no cgroup at all.
 *
 *   TEST_SKIP(fmt, ...)   skip the running cmocka test, printing
 *                         "skip: <test>: <reason>" (scripts/
 *                         run-unit-tests.sh counts and lists them)
 *   cg_mount(v2, ...)     where the cgroup v2 hierarchy, or the v1
 *                         hierarchy with the memory controller, is mounted
 *   thrash_start(...)     a child thrashing its own page cache: it reads
 *                         a 32 MiB file through a mapping and pages it out
 *                         again (MADV_PAGEOUT), over and over; every
 *                         re-read is a refault of a working-set page,
 *                         which the kernel counts as a memory stall in
 *                         /proc/pressure/memory and in the child's cgroup
 *                         v2 memory.pressure (about 280 ms of stall per
 *                         second on the development machine, 2 Dec 2026;
 *                         the triggers want 50 ms)
 */
#ifndef XBD_TEST_PRESSURE_SRC_H
#define XBD_TEST_PRESSURE_SRC_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <unistd.h>

#define TEST_SKIP(...) do {							\
	fprintf(stderr, "skip: %s: ", __func__);				\
	fprintf(stderr, __VA_ARGS__);						\
	fputc('\n', stderr);							\
	skip();									\
} while (0)

/* The mount point of the cgroup v2 hierarchy (v2) or of the v1 hierarchy
 * holding the memory controller; false when there is none. */
static inline bool cg_mount(bool v2, char *out, size_t len)
{
	char line[1024], mnt[512], fstype[64], opts[512];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %511s", fstype, opts) != 2)
			continue;
		if (v2 ? !strcmp(fstype, "cgroup2") :
			 !strcmp(fstype, "cgroup") && (strstr(opts, ",memory") ||
						       !strncmp(opts, "memory", 6)))
			found = snprintf(out, len, "%s", mnt) < (int)len;
	}
	fclose(f);
	return found;
}

/* Write val to file; 0 or -errno. */
static inline int src_put(const char *file, const char *val)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = write(fd, val, strlen(val)) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* Fork the thrasher, first joining the cgroup whose cgroup.procs is
 * procs (NULL: stay).  Its file (on disk: a tmpfs page cannot be paged
 * out) is file, removed by thrash_stop.  The child's pid, or -1. */
static inline pid_t thrash_start(const char *file, const char *procs)
{
	pid_t pid = fork();

	if (pid == 0) {
		static char buf[1 << 20];
		size_t sz = 32u << 20;
		volatile char sum = 0;
		char *m;
		int fd;

		if (procs && src_put(procs, "0"))
			_exit(2);
		fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		memset(buf, 0x5a, sizeof(buf));
		for (size_t off = 0; fd >= 0 && off < sz; off += sizeof(buf))
			if (pwrite(fd, buf, sizeof(buf), (off_t)off) != sizeof(buf))
				_exit(3);
		if (fd < 0 || fsync(fd))
			_exit(3);
		m = mmap(NULL, sz, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			_exit(4);
		for (;;) {
			for (size_t off = 0; off < sz; off += 4096)
				sum += m[off];
			if (madvise(m, sz, MADV_PAGEOUT))
				_exit(5);     /* a kernel before 5.4 */
		}
	}
	return pid;
}

static inline void thrash_stop(pid_t *pid, const char *file)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
	unlink(file);
}

#endif
