/* SPDX-License-Identifier: MIT */
/*
 * A real xbd-blkback driven from this process, for the page-pool tests
 * (tests/unit/test_pressure_daemon.c) and benchmark (bench/pool/): the
 * process is xbd-xenstored's and the backend's parent, the guest (domain
 * 1, NPAGES granted pages, one ring per vbd) and the administrator (the
 * sysfs-style tree).  Needs cmocka (the guest helpers assert).
 */
#ifndef XBD_TEST_PRESSURE_FX_H
#define XBD_TEST_PRESSURE_FX_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/ring.h"
#include "xenbus.h"
#include "test_be_guest.h"
#include "test_be_xs.h"
#include "test_pressure_src.h"

#define VBD "bus/xen-backend/devices/vbd-1-51712/"     /* the first vbd */
#define PARAM "module/xen_blkback/parameters/"
#define NPAGES 256
#define SEGS 11
#define MAX_VBDS 16

/* One vbd of domain 1: xvd<'a' + index>, its own file and ring. */
struct vbd {
	unsigned int devid;
	char be[96], fe[96], file[128];
	struct gring r;
	uint64_t next_id;
};

struct fx {
	struct guest g;
	pid_t xsd, be, hog, thrasher;
	char thrash_file[64];       /* the thrasher's (test_pressure_src.h) */
	struct xs_handle *xs;
	struct vbd v[MAX_VBDS];
	unsigned int nvbds;
	char cg[128];
};

static inline uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Write val to path (test_pressure_src.h); 0 or -errno. */
#define put_file src_put

/* ---- the tree ------------------------------------------------------------ */

static inline int sys_write(struct fx *fx, const char *rel, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/sys/%s", fx->g.rundir, rel);
	return put_file(path, val);
}

static inline uint64_t sys_read(struct fx *fx, const char *rel)
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

/* Start xbd-blkback (in the cgroup fx->cg when set) and wait for its tree.
 * No memory-pressure source unless extra names one ("--pressure=..."):
 * a squeeze from some other process's stalls would upset the pool counts
 * the other tests assert. */
static inline void start_backend(struct fx *fx, const char *extra)
{
	char path[PATH_MAX], log[256], procs[200], tree[200];

	xbd_tool(path, sizeof(path), "xbd-blkback");
	snprintf(log, sizeof(log), "%s/blkback.log", fx->g.rundir);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", fx->cg);
	fx->be = fork();
	if (fx->be == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		dup2(fd, 2);
		if (fx->cg[0] && put_file(procs, "0"))
			_exit(126);
		execl(path, path, "-N", "-p", "local", "-R", fx->g.rundir, "-l", "info",
		      "--max_queues=1", "--pressure=none", extra, (char *)NULL);
		_exit(127);
	}
	assert_true(fx->be > 0);
	snprintf(tree, sizeof(tree), "%s/sys/" PARAM "max_queues", fx->g.rundir);
	for (int i = 0; i < 500 && access(tree, R_OK); i++)
		usleep(10000);
	assert_int_equal(access(tree, R_OK), 0);
}

/* Signal the backend and reap it (proc_stop); bench/pool uses it too. */
static inline int stop_backend(struct fx *fx, int sig)
{
	return proc_stop(&fx->be, sig);
}

static inline long rss_kb(pid_t pid)
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

/* Connect vbd v as a single-queue frontend with a 4-page ring. */
static inline void vbd_connect(struct fx *fx, struct vbd *v, bool persistent)
{
	char key[16];

	xbd_xs_printf(fx->xs, XBT_NULL, v->fe, "ring-page-order", "2");
	xbd_xs_write(fx->xs, XBT_NULL, v->fe, "protocol", "x86_64-abi");
	xbd_xs_printf(fx->xs, XBT_NULL, v->fe, "feature-persistent", "%d", persistent);
	gring_share(&fx->g, &v->r, 2, RING_ABI_X86_64);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "ring-ref%d", i);
		xbd_xs_printf(fx->xs, XBT_NULL, v->fe, key, "%u", v->r.refs[i]);
	}
	xbd_xs_printf(fx->xs, XBT_NULL, v->fe, "event-channel", "%d", v->r.port);
	xbd_xs_printf(fx->xs, XBT_NULL, v->fe, "state", "%d", XenbusStateInitialised);
	if (xbd_xenbus_wait_state(fx->xs, v->be, 1u << XenbusStateConnected, 10000, NULL))
		fail_msg("%s not Connected", v->be);
}

/* One request of SEGS full pages, grants first..first+SEGS-1 (mod NPAGES). */
static inline void put_req11(struct fx *fx, struct vbd *v, uint8_t op, uint64_t sector,
		      unsigned int first)
{
	struct gring *r = &v->r;
	uint8_t *s = r->sring + 64 + (r->prod++ & (r->nr_ents - 1)) * 112;
	uint64_t id = v->next_id++;

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
static inline void vbd_io(struct fx *fx, struct vbd *v, unsigned int n, uint8_t op,
		   unsigned int first)
{
	RING_IDX old = v->r.prod;
	uint64_t id;
	int16_t st;

	assert_true(n <= v->r.nr_ents);
	for (unsigned int i = 0; i < n; i++)
		put_req11(fx, v, op, (uint64_t)(i % 128) * SEGS * 8, first + i * SEGS);
	push(&v->r, old);
	for (unsigned int i = 0; i < n; i++) {
		get_rsp(&v->r, &id, &st);
		assert_int_equal(st, BLKIF_RSP_OKAY);
	}
}

/* ---- fixtures ---------------------------------------------------------------- */

/* xbd-xenstored, domain 1 ("guest") claimed by this process with NPAGES
 * granted pages; *out is static.  0 or -1. */
static inline int fx_setup(struct fx **out)
{
	static struct fx fx;
	char sock[160];

	memset(&fx, 0, sizeof(fx));
	strcpy(fx.g.rundir, "/tmp/xbd-be-unit-XXXXXX");
	if (!mkdtemp(fx.g.rundir) || xsd_start(fx.g.rundir, &fx.xsd))
		return -1;
	*out = &fx;
	snprintf(fx.thrash_file, sizeof(fx.thrash_file), "/var/tmp/xbd-unit-thrash-%d",
		 (int)getpid());
	if (xbd_run(fx.g.rundir, "domain-create", "guest", "--memory", "16M") != 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", fx.g.rundir);
	if (xbd_platform_open(XBD_PLATFORM_LOCAL, fx.g.rundir, &fx.g.p) ||
	    xbd_domain_claim(fx.g.p, 1, &fx.g.dom) || xbd_gntshr_open(fx.g.dom, &fx.g.gs) ||
	    xbd_gntshr_share_pages(fx.g.gs, 0, NPAGES, fx.g.rw, true, (void **)&fx.g.rw_mem) ||
	    xbd_xs_open(sock, &fx.xs))
		return -1;
	return 0;
}

/* Undo fx_setup, the backend, the hog and the cgroup. */
static inline void fx_teardown(struct fx *fx)
{
	char cmd[300];

	stop_backend(fx, SIGKILL);
	if (fx->hog > 0) {
		kill(fx->hog, SIGKILL);
		waitpid(fx->hog, NULL, 0);
	}
	thrash_stop(&fx->thrasher, fx->thrash_file);
	if (fx->cg[0]) {
		for (int i = 0; i < 100 && rmdir(fx->cg) && errno == EBUSY; i++)
			usleep(10000);
		if (access(fx->cg, F_OK) == 0)
			fprintf(stderr, "warning: could not remove %s\n", fx->cg);
	}
	snprintf(cmd, sizeof(cmd), "%s/hog.dat", fx->g.rundir);
	unlink(cmd);
	for (unsigned int i = 0; i < fx->nvbds; i++) {
		gring_close(&fx->g, &fx->v[i].r);
		unlink(fx->v[i].file);
	}
	if (fx->xs)
		xs_close(fx->xs);
	xsd_stop(&fx->xsd);
	/* the backend's log, when a backend ran (a test may skip or fail
	 * before it starts one) */
	snprintf(cmd, sizeof(cmd), "%s/blkback.log", fx->g.rundir);
	if (access(cmd, F_OK)) {
		fprintf(stderr, "(no backend log: no backend ran)\n");
	} else {
		snprintf(cmd, sizeof(cmd), "grep -v ' info: ' '%s/blkback.log' >&2", fx->g.rundir);
		if (system(cmd) != 0)
			fprintf(stderr, "(backend log: only info lines)\n");
	}
	/* a killed backend leaves its mount: detach it before removing */
	snprintf(cmd, sizeof(cmd), "%s/sys", fx->g.rundir);
	umount2(cmd, MNT_DETACH);
	guest_down(&fx->g);
}

/* A new vbd xvd<letter> of size bytes (its file in dir, or the rundir),
 * attached with the toolstack (backend in InitWait when this returns). */
static inline struct vbd *vbd_attach(struct fx *fx, const char *dir, uint64_t size)
{
	struct vbd *v = &fx->v[fx->nvbds];
	char spec[200];
	int fd;

	assert_true(fx->nvbds < MAX_VBDS);
	v->devid = 51712 + 16 * fx->nvbds;
	snprintf(v->be, sizeof(v->be), "/local/domain/0/backend/vbd/1/%u", v->devid);
	snprintf(v->fe, sizeof(v->fe), "/local/domain/1/device/vbd/%u", v->devid);
	char where[96];

	snprintf(where, sizeof(where), "%s", dir ? dir : fx->g.rundir);
	snprintf(v->file, sizeof(v->file), "%s/disk%u.img", where, fx->nvbds);
	fd = open(v->file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0 && ftruncate(fd, (off_t)size) == 0);
	close(fd);
	snprintf(spec, sizeof(spec), "%s,raw,xvd%c,w", v->file, 'a' + fx->nvbds);
	fx->nvbds++;
	assert_int_equal(xbd_run(fx->g.rundir, "block-attach", "1", spec, NULL), 0);
	return v;
}

/* A child in the cgroup fx->cg writing page cache (256 MiB, rewritten)
 * to $rundir/hog.dat: megabytes MiB, or until killed when 0.  The kernel
 * must reclaim in the group all along.  fx_teardown kills it. */
static inline void fx_start_hog(struct fx *fx, unsigned int megabytes)
{
	char procs[200], file[200];

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", fx->cg);
	snprintf(file, sizeof(file), "%s/hog.dat", fx->g.rundir);
	fx->hog = fork();
	if (fx->hog == 0) {
		static char buf[1 << 20];
		int fd;

		if (put_file(procs, "0"))
			_exit(2);
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		memset(buf, 0x5a, sizeof(buf));
		for (unsigned int i = 0; fd >= 0 && (!megabytes || i < megabytes); i++)
			if (pwrite(fd, buf, sizeof(buf), (off_t)(i % 256) << 20) != sizeof(buf))
				_exit(3);
		_exit(0);
	}
	assert_true(fx->hog > 0);
}

/* cmocka setup / teardown around fx_setup / fx_teardown. */
static inline int fx_cm_setup(void **state)
{
	struct fx *fx = NULL;
	int rc = fx_setup(&fx);

	*state = fx;
	return rc;
}

static inline int fx_cm_teardown(void **state)
{
	if (*state)
		fx_teardown(*state);
	return 0;
}

#endif
