/* SPDX-License-Identifier: MIT */
/*
 * What the backend's queue set-up asks the machine (not the peer), asked
 * once per process instead of once per input (linked by targets whose
 * .deps add -Wl,--wrap=sysconf -Wl,--wrap=open).
 *
 * be_io_init (backend/io_uring.c) opens /proc/loadavg for its spin
 * decisions and asks sysconf for the online CPUs, and tun_init
 * (backend/tunables.c) asks for them too: a path walk through /proc or
 * /sys, a read and a close per queue, which is per input in a harness
 * that starts a queue per input (a tenth of be_request's execution, by
 * profile).  Here the CPU count is read once, and /proc/loadavg is opened
 * once and handed out as a duplicate (the queue reads it with pread at
 * offset 0 and closes it as before: the same file, the same answers).
 * Every other open and sysconf goes to the real call; a file an open
 * creates is reported to the harness if it defines fuzz_created (weak),
 * and a harness that keeps some files in memory answers their opens in
 * fuzz_open_mem (weak: a descriptor, -1 with errno, or -2 for a path
 * that is not one of them).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

long __real_sysconf(int name);
void fuzz_created(const char *path) __attribute__((weak));
int fuzz_open_mem(const char *path, int flags) __attribute__((weak));
int __real_open(const char *path, int flags, ...);

long __wrap_sysconf(int name)
{
	static long cpus = -1;

	if (name != _SC_NPROCESSORS_ONLN)
		return __real_sysconf(name);
	if (cpus < 0)
		cpus = __real_sysconf(name);
	return cpus;
}

int __wrap_open(const char *path, int flags, ...)
{
	static int loadavg = -1;
	mode_t mode = 0;

	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (flags == (O_RDONLY | O_CLOEXEC) && fuzz_str_eq(path, "/proc/loadavg")) {
		if (loadavg < 0)
			loadavg = __real_open(path, flags);
		return loadavg < 0 ? -1 : fcntl(loadavg, F_DUPFD_CLOEXEC, 0);
	}
	if (fuzz_open_mem) {
		int fd = fuzz_open_mem(path, flags);

		if (fd != -2)
			return fd;
	}
	if (!(flags & O_CREAT) || !fuzz_created)
		return __real_open(path, flags, mode);
	int fd = __real_open(path, flags, mode);

	if (fd >= 0)
		fuzz_created(path);
	return fd;
}
