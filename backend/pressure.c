/* SPDX-License-Identifier: MIT */
/* backend/pressure.c: memory-pressure sources.  See pressure.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "backend/gnt.h"
#include "backend/pressure.h"
#include "backend/tunables.h"
#include "log.h"

enum pressure_kind { PRESSURE_PSI, PRESSURE_CGROUP1 };

struct pressure {
	enum pressure_kind kind;
	int fd;            /* psi: the trigger file; cgroup1: the eventfd */
	int level_fd;      /* cgroup1: memory.pressure_level, held open */
};

static uint64_t fired;     /* relaxed atomic: pressure reports */

static int open_psi(struct pressure *p, const char *file)
{
	/* some <stall us> <window us>; the second is the unprivileged form */
	static const char *const triggers[] = { "some 50000 1000000", "some 100000 2000000" };
	int rc = -EINVAL;

	p->fd = open(file, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (p->fd < 0)
		return -errno;
	for (size_t i = 0; i < 2 && rc; i++)
		rc = write(p->fd, triggers[i], strlen(triggers[i]) + 1) < 0 ? -errno : 0;
	return rc;
}

static int open_cgroup1(struct pressure *p, const char *dir)
{
	char path[512], line[64];
	int ctl, rc = 0;

	if (snprintf(path, sizeof(path), "%s/memory.pressure_level", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	p->level_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (p->level_fd < 0)
		return -errno;
	p->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->fd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/cgroup.event_control", dir);
	ctl = open(path, O_WRONLY | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	snprintf(line, sizeof(line), "%d %d low", p->fd, p->level_fd);
	if (write(ctl, line, strlen(line)) < 0)
		rc = -errno;
	close(ctl);
	return rc;
}

int pressure_open(const char *spec, struct pressure **out)
{
	struct pressure *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->fd = p->level_fd = -1;
	if (!strcmp(spec, "psi")) {
		p->kind = PRESSURE_PSI;
		rc = open_psi(p, PRESSURE_PSI_DEFAULT);
	} else if (!strncmp(spec, "psi:", 4) && spec[4]) {
		p->kind = PRESSURE_PSI;
		rc = open_psi(p, spec + 4);
	} else if (!strncmp(spec, "cgroup1:", 8) && spec[8]) {
		p->kind = PRESSURE_CGROUP1;
		rc = open_cgroup1(p, spec + 8);
	} else {
		rc = -EINVAL;
	}
	if (rc) {
		pressure_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

void pressure_close(struct pressure *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->level_fd >= 0)
		close(p->level_fd);
	free(p);
}

int pressure_fd(const struct pressure *p)
{
	return p->fd;
}

short pressure_events(const struct pressure *p)
{
	return p->kind == PRESSURE_PSI ? POLLPRI : POLLIN;
}

int pressure_handle(struct pressure *p, short revents)
{
	uint64_t n;

	if (revents & (POLLERR | POLLNVAL | POLLHUP))
		return -ENODEV;
	if (p->kind == PRESSURE_CGROUP1) {
		if (read(p->fd, &n, sizeof(n)) != sizeof(n))
			return 0;           /* nothing pending (EAGAIN) */
	} else if (!(revents & POLLPRI)) {
		return 0;
	}
	pressure_fire();
	return 1;
}

void pressure_fire(void)
{
	struct timespec ts;
	uint64_t now, ms = tun_get(TUN_BUFFER_SQUEEZE_DURATION_MS);

	__atomic_add_fetch(&fired, 1, __ATOMIC_RELAXED);
	if (!ms)
		return;         /* as Linux: a squeeze of 0 ms squeezes nothing */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	gnt_squeeze_all(now + ms * 1000000ull);
	log_info("memory pressure: squeezing page pools for %llu ms", (unsigned long long)ms);
}

uint64_t pressure_count(void)
{
	return __atomic_load_n(&fired, __ATOMIC_RELAXED);
}
