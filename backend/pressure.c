/* SPDX-License-Identifier: MIT */
/* backend/pressure.c: memory-pressure sources.  See pressure.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
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
	char spec[PATH_MAX + 16];     /* what it is armed on, as a --pressure */
	const char *origin;           /* auto's reason for picking it, or NULL */
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
	if (!strcmp(spec, "auto")) {
		free(p);
		return pressure_open_auto("/proc/self/cgroup", "/proc/self/mountinfo",
					  PRESSURE_PSI_DEFAULT, out);
	} else if (!strcmp(spec, "psi")) {
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
	snprintf(p->spec, sizeof(p->spec), "%s", strcmp(spec, "psi") ? spec :
		 "psi:" PRESSURE_PSI_DEFAULT);
	*out = p;
	return 0;
}

/* ---- auto ---------------------------------------------------------------- */

/*
 * Where the hierarchy holding our cgroup is mounted: the mountinfo line
 * of fstype "cgroup2" (v2), or of fstype "cgroup" with "memory" among its
 * super options (v1); out = mount point + our path below the mount's
 * root.  cgroup_line is our /proc/self/cgroup line's path ("/a/b").
 */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

static int cgroup_dir(const char *mountinfo, bool v2, const char *path, char *out,
		      size_t len)
{
	char line[1024], root[512], mnt[512], fstype[64], opts[512];
	FILE *f = fopen(mountinfo, "re");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");
		size_t rlen;

		if (!sep || sscanf(line, "%*s %*s %*s %511s %511s", root, mnt) != 2 ||
		    sscanf(sep + 3, "%63s %*s %511s", fstype, opts) != 2)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") :
			 strcmp(fstype, "cgroup") || !has_word(opts, "memory"))
			continue;
		rlen = strcmp(root, "/") ? strlen(root) : 0;
		if (strncmp(path, root, rlen) || (path[rlen] != '/' && path[rlen]))
			continue;               /* our cgroup is not under this mount */
		if (snprintf(out, len, "%s%s", mnt, path + rlen) < (int)len)
			rc = 0;
	}
	fclose(f);
	return rc;
}

/* Our cgroup's path in /proc/self/cgroup: the "0::" line (v2) or the
 * line whose controllers include memory (v1). */
static int cgroup_path(const char *self_cgroup, bool v2, char *out, size_t len)
{
	char line[1024];
	FILE *f = fopen(self_cgroup, "re");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *path = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!path)
			continue;
		*ctl = *path++ = '\0';     /* line: the id; ctl + 1: controllers */
		path[strcspn(path, "\n")] = '\0';
		if (v2 ? strcmp(line, "0") || ctl[1] : !has_word(ctl + 1, "memory"))
			continue;
		if (snprintf(out, len, "%s", strcmp(path, "/") ? path : "") < (int)len)
			rc = 0;
	}
	fclose(f);
	return rc;
}

int pressure_open_auto(const char *self_cgroup, const char *mountinfo, const char *psi_file,
		       struct pressure **out)
{
	char path[PATH_MAX], dir[PATH_MAX], spec[PATH_MAX + 32];
	int rc = -ENOENT;

	*out = NULL;
	/* 1. the service's own cgroup v2: its stalls, not the machine's */
	if (!cgroup_path(self_cgroup, true, path, sizeof(path)) &&
	    !cgroup_dir(mountinfo, true, path, dir, sizeof(dir))) {
		snprintf(spec, sizeof(spec), "psi:%s/memory.pressure", dir);
		if (!(rc = pressure_open(spec, out))) {
			(*out)->origin = "the service's cgroup v2";
			return 0;
		}
	}
	/* 2. the whole machine's PSI */
	snprintf(spec, sizeof(spec), "psi:%s", psi_file);
	if (!(rc = pressure_open(spec, out))) {
		(*out)->origin = "system-wide PSI";
		return 0;
	}
	/* 3. a kernel without PSI: the cgroup v1 memory controller's event */
	if (!cgroup_path(self_cgroup, false, path, sizeof(path)) &&
	    !cgroup_dir(mountinfo, false, path, dir, sizeof(dir))) {
		snprintf(spec, sizeof(spec), "cgroup1:%s", dir);
		if (!(rc = pressure_open(spec, out))) {
			(*out)->origin = "the service's cgroup v1";
			return 0;
		}
	}
	return rc;
}

const char *pressure_spec(const struct pressure *p)
{
	return p->spec;
}

const char *pressure_origin(const struct pressure *p)
{
	return p->origin;
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
