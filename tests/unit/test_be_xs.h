/* SPDX-License-Identifier: MIT */
/*
 * Start xbd-xenstored (built next to the tests, or $XBD_XENSTORED) on a
 * given run directory for a backend test, and stop it.
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

#endif
