/* SPDX-License-Identifier: MIT */
/*
 * The programs of a backend test as processes: start xbd-xenstored (built
 * next to the tests, or $XBD_XENSTORED) on a given run directory and stop
 * it, find the other programs of the same build, run the xbd toolstack,
 * stop a daemon, and scan xbd-blkback's log.  Include after <cmocka.h>.
 */
#ifndef XBD_TEST_BE_XS_H
#define XBD_TEST_BE_XS_H

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* $XBD_XENSTORED, else bin/xbd-xenstored of the build tree this test
 * binary lives in ($(O)/tests/<name>). */
static inline void xsd_binary(char *buf, size_t len)
{
	const char *env = getenv("XBD_XENSTORED");
	char exe[PATH_MAX];
	char *slash;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	if (!realpath("/proc/self/exe", exe))
		strcpy(exe, "./tests/x");
	slash = strrchr(exe, '/');
	*slash = '\0';
	snprintf(buf, len, "%.*s/../bin/xbd-xenstored", (int)(len - 32), exe);
}

static inline bool xsd_up(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (strlen(sock) >= sizeof(sa.sun_path)) {
		close(fd);
		return false;
	}
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Start the daemon on rundir; *pid receives it.  0 or -1. */
static inline int xsd_start(const char *rundir, pid_t *pid)
{
	char bin[PATH_MAX], sock[PATH_MAX];

	xsd_binary(bin, sizeof(bin));
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", rundir);
	*pid = fork();
	if (*pid == 0) {
		execl(bin, bin, "-N", "-R", rundir, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && !xsd_up(sock); i++) {
		if (waitpid(*pid, NULL, WNOHANG) == *pid) {
			fprintf(stderr, "%s did not start\n", bin);
			*pid = 0;
			return -1;
		}
		usleep(10000);
	}
	return xsd_up(sock) ? 0 : -1;
}

static inline void xsd_stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGTERM);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

/* Program name of the same build as xbd-xenstored (bin/<name>). */
static inline void xbd_tool(char *buf, size_t len, const char *name)
{
	char xsd[PATH_MAX];

	xsd_binary(xsd, sizeof(xsd));            /* .../bin/xbd-xenstored */
	*strrchr(xsd, '/') = '\0';
	snprintf(buf, len, "%.*s/%s", (int)(len - 64), xsd, name);
}

/* Run the xbd toolstack on rundir (up to four arguments, NULL ends);
 * its exit status, 128 when it did not exit. */
static inline int xbd_run(const char *rundir, const char *a1, const char *a2,
			  const char *a3, const char *a4)
{
	char path[PATH_MAX];
	int status;
	pid_t pid;

	xbd_tool(path, sizeof(path), "xbd");
	pid = fork();
	if (pid == 0) {
		execl(path, path, "--rundir", rundir, a1, a2, a3, a4, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Signal a daemon we started and reap it: its exit status, or 128 +
 * the signal that ended it; -1 when none runs.  *pid becomes 0. */
static inline int proc_stop(pid_t *pid, int sig)
{
	int status = 0;

	if (*pid <= 0)
		return -1;
	kill(*pid, sig);
	waitpid(*pid, &status, 0);
	*pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Our dmesg scan: no sanitizer report or failed assertion in
 * $rundir/blkback.log, where the tests send xbd-blkback's stderr. */
static inline void assert_blkback_log_clean(const char *rundir)
{
	static const char *bad[] = { "AddressSanitizer", "LeakSanitizer", "runtime error:",
				     "Assertion", "assertion" };
	char path[PATH_MAX], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/blkback.log", rundir);
	f = fopen(path, "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strstr(line, bad[i]))
				fail_msg("backend log: %s", line);
	fclose(f);
}

#endif
