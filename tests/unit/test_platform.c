/* SPDX-License-Identifier: MIT */
/*
 * lib/platform: kind parsing, the auto choice, opening, and the local
 * implementation's grant and event-channel rules inside one process (the
 * cross-process behaviour is in tests/system/test_platform_*.py).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>
#include <cmocka.h>
#include <xen/grant_table.h>

#include "platform/platform.h"
#include "platform/local.h"
#include "tests/unit/slot_trap.h"

#define MiB (1ull << 20)

struct fixture {
	char rundir[64];
	struct xbd_platform *p;
	struct xbd_domain *dom;      /* domain 1, claimed */
	struct xbd_gntshr *gs;
	struct xbd_gnttab *gt;       /* as domain 0 */
};

static void rm_rf(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	strcpy(f->rundir, "/tmp/xbd-unit-XXXXXX");
	assert_non_null(mkdtemp(f->rundir));
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, f->rundir, &f->p), 0);
	assert_int_equal(xbd_domain_create(f->p, 1, "guest", 4 * MiB), 0);
	assert_int_equal(xbd_domain_claim(f->p, 1, &f->dom), 0);
	assert_int_equal(xbd_gntshr_open(f->dom, &f->gs), 0);
	assert_int_equal(xbd_gnttab_open(f->p, 0, &f->gt), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	xbd_gnttab_close(f->gt);
	xbd_gntshr_close(f->gs);
	xbd_domain_release(f->dom);
	xbd_platform_close(f->p);
	rm_rf(f->rundir);
	free(f);
	return 0;
}

static void test_kind_parse(void **state)
{
	static const struct { const char *in; int rc; enum xbd_platform_kind k; } cases[] = {
		{ "auto", 0, XBD_PLATFORM_AUTO }, { "local", 0, XBD_PLATFORM_LOCAL },
		{ "xen", 0, XBD_PLATFORM_XEN }, { "Xen", -EINVAL, 0 },
		{ "", -EINVAL, 0 }, { NULL, -EINVAL, 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum xbd_platform_kind k = 99;

		assert_int_equal(xbd_platform_kind_parse(cases[i].in, &k), cases[i].rc);
		if (cases[i].rc == 0) {
			assert_int_equal(k, cases[i].k);
			assert_string_equal(xbd_platform_kind_name(k), cases[i].in);
		}
	}
	assert_string_equal(xbd_platform_kind_name((enum xbd_platform_kind)7), "unknown");
}

static void test_auto_detect(void **state)
{
	char file[] = "/tmp/xbd-unit-detect-XXXXXX";
	int fd = mkstemp(file);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	/* character devices at both paths: xen; anything else: local */
	assert_int_equal(xbd_platform_kind_detect("/dev/null", "/dev/zero"), XBD_PLATFORM_XEN);
	assert_int_equal(xbd_platform_kind_detect("/dev/null", "/nonexistent"), XBD_PLATFORM_LOCAL);
	assert_int_equal(xbd_platform_kind_detect("/nonexistent", "/dev/null"), XBD_PLATFORM_LOCAL);
	assert_int_equal(xbd_platform_kind_detect(file, "/dev/null"), XBD_PLATFORM_LOCAL);
	assert_int_equal(xbd_platform_kind_detect("/dev", "/dev/null"), XBD_PLATFORM_LOCAL);
	/* the real paths: xen exactly when both devices are there */
	assert_int_equal(xbd_platform_kind_detect(XBD_XEN_GNTDEV_PATH, XBD_XEN_EVTCHN_PATH),
			 access(XBD_XEN_GNTDEV_PATH, F_OK) == 0 &&
			 access(XBD_XEN_EVTCHN_PATH, F_OK) == 0 ?
			 XBD_PLATFORM_XEN : XBD_PLATFORM_LOCAL);
	unlink(file);
}

static void test_open_rundir(void **state)
{
	char dir[] = "/tmp/xbd-unit-open-XXXXXX", path[128], longpath[5000];
	struct xbd_platform *p = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* NULL: $XBD_RUNDIR, created one level deep */
	snprintf(path, sizeof(path), "%s/machine", dir);
	setenv("XBD_RUNDIR", path, 1);
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, NULL, &p), 0);
	assert_int_equal(xbd_platform_get_kind(p), XBD_PLATFORM_LOCAL);
	assert_string_equal(xbd_platform_rundir(p), path);
	assert_int_equal(access(path, W_OK), 0);
	xbd_platform_close(p);
	unsetenv("XBD_RUNDIR");

	snprintf(path, sizeof(path), "%s/no/such", dir);
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, path, &p), -ENOENT);
	snprintf(path, sizeof(path), "%s/file", dir);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, path, &p), -ENOTDIR);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_LOCAL, longpath, &p), -ENAMETOOLONG);
	assert_int_equal(xbd_platform_open((enum xbd_platform_kind)9, dir, &p), -EINVAL);
	rm_rf(dir);
}

/* Without a hypervisor the xen platform fails cleanly, and silently. */
static void test_xen_without_hypervisor(void **state)
{
	struct xbd_platform *p = NULL;
	int fds[2], saved = dup(STDERR_FILENO), rc;
	char buf[256];

	(void)state;
	if (access("/dev/xen/privcmd", F_OK) == 0 || access("/proc/xen/privcmd", F_OK) == 0) {
		close(saved);
		return;   /* a Xen host: test_platform_xen covers the pass-through */
	}
	assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
	dup2(fds[1], STDERR_FILENO);
	rc = xbd_platform_open(XBD_PLATFORM_XEN, "/tmp", &p);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	assert_int_equal(rc, -ENODEV);
	assert_int_equal(read(fds[0], buf, sizeof(buf)), 0);   /* nothing logged */
	close(fds[0]);
}

/* The raw grant entry, read from the guest's table file. */
static grant_entry_v1_t entry(struct fixture *f, xbd_grant_ref_t ref)
{
	grant_entry_v1_t e;
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/dom1/gnttab", f->rundir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &e, sizeof(e), (off_t)ref * sizeof(e)), sizeof(e));
	close(fd);
	return e;
}

static void test_grant_entry_flags(void **state)
{
	struct fixture *f = *state;
	xbd_grant_ref_t refs[2];
	void *addr, *m1, *m2;

	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, refs, false, &addr), 0);
	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, refs + 1, true, &addr), 0);
	assert_int_equal(entry(f, refs[0]).flags, GTF_permit_access | GTF_readonly);
	assert_int_equal(entry(f, refs[0]).domid, 0);
	assert_int_equal(entry(f, refs[1]).flags, GTF_permit_access);

	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, refs, PROT_READ, &m1), 0);
	assert_int_equal(entry(f, refs[0]).flags,
			 GTF_permit_access | GTF_readonly | GTF_reading);
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, refs + 1, PROT_READ | PROT_WRITE, &m2), 0);
	assert_int_equal(entry(f, refs[1]).flags,
			 GTF_permit_access | GTF_reading | GTF_writing);
	assert_int_equal(xbd_gnttab_unmap(f->gt, m1, 1), 0);
	assert_int_equal(xbd_gnttab_unmap(f->gt, m2, 1), 0);
	assert_int_equal(entry(f, refs[0]).flags, GTF_permit_access | GTF_readonly);
	assert_int_equal(entry(f, refs[1]).flags, GTF_permit_access);
}

static void test_map_unmap_revoke(void **state)
{
	struct fixture *f = *state;
	xbd_grant_ref_t refs[4];
	uint8_t *g, *m;

	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 4, refs, true, (void **)&g), 0);
	for (int i = 0; i < 4; i++)
		g[i * XBD_PAGE_SIZE] = (uint8_t)(i + 1);
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 4, refs, PROT_READ | PROT_WRITE, (void **)&m), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(m[i * XBD_PAGE_SIZE], i + 1);
	m[5] = 0x42;
	assert_int_equal(g[5], 0x42);
	assert_int_equal(xbd_gntshr_unshare(f->gs, g, 4), -EBUSY);
	assert_int_equal(xbd_gntshr_unshare(f->gs, g, 3), -EINVAL);   /* not an area */
	assert_int_equal(xbd_gnttab_unmap(f->gt, m, 3), -EINVAL);
	assert_int_equal(xbd_gnttab_unmap(f->gt, m, 4), 0);
	assert_int_equal(xbd_gnttab_unmap(f->gt, m, 4), -EINVAL);     /* double unmap */
	assert_int_equal(xbd_gntshr_unshare(f->gs, g, 4), 0);
	assert_int_equal(entry(f, refs[0]).flags, 0);
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, refs, PROT_READ, (void **)&m), -EINVAL);
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, refs, PROT_WRITE, (void **)&m), -EINVAL);
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 0, refs, PROT_READ, (void **)&m), -EINVAL);
}

static void test_readonly_map_faults(void **state)
{
	struct fixture *f = *state;
	xbd_grant_ref_t ref;
	uint8_t *g, *m;
	int status;
	pid_t pid;

	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, &ref, false, (void **)&g), 0);
	g[0] = 9;
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, &ref, PROT_READ | PROT_WRITE, (void **)&m), -EPERM);
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, &ref, PROT_READ, (void **)&m), 0);
	assert_int_equal(m[0], 9);
	pid = fork();
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = SIG_DFL };
		struct rlimit nocore = { 0, 0 };

		setrlimit(RLIMIT_CORE, &nocore);
		sigaction(SIGSEGV, &sa, NULL);
		*(volatile uint8_t *)m = 1;
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGSEGV);
	assert_int_equal(g[0], 9);
	assert_int_equal(xbd_gnttab_unmap(f->gt, m, 1), 0);
}

static void test_copy_batch(void **state)
{
	struct fixture *f = *state;
	xbd_grant_ref_t rw, ro;
	uint8_t *grw, *gro, buf[XBD_PAGE_SIZE], out[16] = { 0 };
	struct xbd_gnttab_copy_seg segs[6] = { 0 };

	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, &rw, true, (void **)&grw), 0);
	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, &ro, false, (void **)&gro), 0);
	memset(gro, 0x33, XBD_PAGE_SIZE);
	memset(buf, 0x77, sizeof(buf));
	/* 0: read the ro grant; 1: write the rw grant; 2: write the ro grant;
	 * 3: crosses the page end; 4: foreign to foreign; 5: bad flags */
	segs[0] = (struct xbd_gnttab_copy_seg){ .source.foreign = { ro, 8, 1 },
		.dest.virt = out, .len = sizeof(out), .flags = XBD_GNTCOPY_source_gref };
	segs[1] = (struct xbd_gnttab_copy_seg){ .source.virt = buf,
		.dest.foreign = { rw, 4000, 1 }, .len = 96, .flags = XBD_GNTCOPY_dest_gref };
	segs[2] = (struct xbd_gnttab_copy_seg){ .source.virt = buf,
		.dest.foreign = { ro, 0, 1 }, .len = 1, .flags = XBD_GNTCOPY_dest_gref };
	segs[3] = (struct xbd_gnttab_copy_seg){ .source.foreign = { rw, 4000, 1 },
		.dest.virt = out, .len = 97, .flags = XBD_GNTCOPY_source_gref };
	segs[4] = (struct xbd_gnttab_copy_seg){ .source.foreign = { ro, 0, 1 },
		.dest.foreign = { rw, 0, 1 }, .len = 10,
		.flags = XBD_GNTCOPY_source_gref | XBD_GNTCOPY_dest_gref };
	segs[5] = (struct xbd_gnttab_copy_seg){ .source.virt = buf, .dest.virt = out,
		.len = 1, .flags = 4 };
	assert_int_equal(xbd_gnttab_copy(f->gt, 6, segs), 0);
	assert_int_equal(segs[0].status, 0);
	assert_int_equal(out[15], 0x33);
	assert_int_equal(segs[1].status, 0);
	assert_int_equal(grw[4000], 0x77);
	assert_int_equal(grw[4095], 0x77);
	assert_int_equal(segs[2].status, -EPERM);
	assert_int_equal(gro[0], 0x33);
	assert_int_equal(segs[3].status, -EINVAL);
	assert_int_equal(segs[4].status, 0);
	assert_int_equal(grw[9], 0x33);
	assert_int_equal(grw[10], 0);
	assert_int_equal(segs[5].status, -EINVAL);
}

/* Many notifies while pending put one port number in the FIFO: the rest
 * cost no syscall. */
static void test_evtchn_coalescing(void **state)
{
	struct fixture *f = *state;
	struct xbd_evtchn *g, *b;
	int gport, bport, queued = -1;
	struct pollfd pfd;

	assert_int_equal(xbd_evtchn_open(f->p, 1, &g), 0);
	assert_int_equal(xbd_evtchn_open(f->p, 0, &b), 0);
	gport = xbd_evtchn_bind_unbound_port(g, 0);
	assert_true(gport > 0);
	bport = xbd_evtchn_bind_interdomain(b, 1, (xbd_evtchn_port_t)gport);
	assert_true(bport > 0);
	assert_int_equal(xbd_evtchn_pending(b), -EAGAIN);
	for (int i = 0; i < 100; i++)
		assert_int_equal(xbd_evtchn_notify(g, (xbd_evtchn_port_t)gport), 0);
	assert_int_equal(ioctl(xbd_evtchn_fd(b), FIONREAD, &queued), 0);
	assert_int_equal(queued, (int)sizeof(uint32_t));
	pfd = (struct pollfd){ .fd = xbd_evtchn_fd(b), .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 1);
	assert_int_equal(xbd_evtchn_pending(b), bport);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	/* masked until unmask: notifies still cost nothing */
	for (int i = 0; i < 10; i++)
		assert_int_equal(xbd_evtchn_notify(g, (xbd_evtchn_port_t)gport), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(xbd_evtchn_unmask(b, (xbd_evtchn_port_t)bport), 0);
	assert_int_equal(poll(&pfd, 1, 0), 1);
	assert_int_equal(xbd_evtchn_pending(b), bport);
	assert_int_equal(xbd_evtchn_unmask(b, (xbd_evtchn_port_t)bport), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	/* a second handle of the same domain gets its own fd */
	assert_int_equal(xbd_evtchn_unbind(g, (xbd_evtchn_port_t)gport), 0);
	assert_int_equal(xbd_evtchn_notify(b, (xbd_evtchn_port_t)bport), 0);   /* dropped */
	assert_int_equal(xbd_evtchn_unbind(g, (xbd_evtchn_port_t)gport), -EINVAL);
	xbd_evtchn_close(g);
	xbd_evtchn_close(b);
}

/* A channel between two ports of one domain (and one handle), as Xen
 * allows: each end wakes the same fd with its own port. */
static void test_evtchn_loopback(void **state)
{
	struct fixture *f = *state;
	struct xbd_evtchn *e;
	int a, b;

	assert_int_equal(xbd_evtchn_open(f->p, 1, &e), 0);
	a = xbd_evtchn_bind_unbound_port(e, 1);
	assert_true(a > 0);
	b = xbd_evtchn_bind_interdomain(e, 1, (xbd_evtchn_port_t)a);
	assert_true(b > 0 && b != a);
	assert_int_equal(xbd_evtchn_notify(e, (xbd_evtchn_port_t)a), 0);
	assert_int_equal(xbd_evtchn_pending(e), b);
	assert_int_equal(xbd_evtchn_notify(e, (xbd_evtchn_port_t)b), 0);
	assert_int_equal(xbd_evtchn_pending(e), a);
	assert_int_equal(xbd_evtchn_pending(e), -EAGAIN);
	assert_int_equal(xbd_evtchn_unbind(e, (xbd_evtchn_port_t)b), 0);
	assert_int_equal(xbd_evtchn_notify(e, (xbd_evtchn_port_t)a), 0);   /* dropped */
	assert_int_equal(xbd_evtchn_pending(e), -EAGAIN);
	assert_true(xbd_evtchn_bind_interdomain(e, 1, (xbd_evtchn_port_t)a) > 0);   /* a is unbound again */
	xbd_evtchn_close(e);
}

/* A 4-page domain: freed holes are found again (the search wraps), and
 * exhaustion is -ENOMEM with nothing leaked. */
static void test_allocator(void **state)
{
	struct fixture *f = *state;
	struct xbd_domain *d;
	struct xbd_gntshr *gs;
	xbd_grant_ref_t refs[4];
	uint8_t *pages[4], *two;

	assert_int_equal(xbd_domain_create(f->p, 2, "small", 4 * XBD_PAGE_SIZE), 0);
	assert_int_equal(xbd_domain_claim(f->p, 2, &d), 0);
	assert_int_equal(xbd_gntshr_open(d, &gs), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(xbd_gntshr_share_pages(gs, 0, 1, &refs[i], true,
							(void **)&pages[i]), 0);
	assert_int_equal(xbd_gntshr_share_pages(gs, 0, 1, refs, true, (void **)&two), -ENOMEM);
	assert_int_equal(xbd_gntshr_unshare(gs, pages[1], 1), 0);
	assert_int_equal(xbd_gntshr_unshare(gs, pages[2], 1), 0);
	pages[1][0] = 0x5a;   /* freed pages come back zeroed */
	assert_int_equal(xbd_gntshr_share_pages(gs, 0, 2, refs, true, (void **)&two), 0);
	assert_ptr_equal(two, pages[1]);
	assert_int_equal(two[0], 0);
	assert_int_equal(xbd_gntshr_share_pages(gs, 0, 1, refs, true, (void **)&two), -ENOMEM);
	xbd_gntshr_close(gs);
	xbd_domain_release(d);
}

/*
 * Revoke against map, concurrently, in two processes.  The guest shares a
 * page, writes a generation number into it, publishes {ref, gen} and
 * revokes until it succeeds; the backend maps whatever is published and,
 * while it holds the mapping, advertises the generation it sees.  A
 * successful revoke while the backend holds that generation would be a
 * revoke of a mapped grant.
 */
struct race {
	uint32_t ref, gen;   /* published by the guest */
	uint32_t held;       /* generation the backend has mapped, 0 if none */
	uint32_t stop, maps;
};



static void race_backend(const char *rundir, struct race *r)
{
	struct xbd_platform *p;
	struct xbd_gnttab *gt;

	if (xbd_platform_open(XBD_PLATFORM_LOCAL, rundir, &p) ||
	    xbd_gnttab_open(p, 0, &gt))
		_exit(2);
	while (!__atomic_load_n(&r->stop, __ATOMIC_SEQ_CST)) {
		xbd_grant_ref_t ref = __atomic_load_n(&r->ref, __ATOMIC_SEQ_CST);
		volatile uint32_t *page;

		if (xbd_gnttab_map(gt, 1, 1, &ref, PROT_READ, (void **)&page))
			continue;
		__atomic_store_n(&r->held, page[0], __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&r->maps, 1, __ATOMIC_SEQ_CST);
		for (int i = 0; i < 20; i++)   /* hold it a while */
			sched_yield();
		__atomic_store_n(&r->held, 0, __ATOMIC_SEQ_CST);
		if (xbd_gnttab_unmap(gt, (void *)page, 1))
			_exit(3);
	}
	xbd_gnttab_close(gt);
	xbd_platform_close(p);
	_exit(0);
}

static void test_revoke_races_map(void **state)
{
	struct fixture *f = *state;
	struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned int busy = 0, violations = 0;
	int status;
	pid_t pid;

	assert_true(r != MAP_FAILED);
	pid = fork();
	if (pid == 0)
		race_backend(f->rundir, r);
	/* 500 rounds in which the backend mapped 200 times, or 2 s at most */
	time_t deadline = time(NULL) + 2;

	for (uint32_t gen = 1; time(NULL) < deadline &&
	     (gen <= 500 || __atomic_load_n(&r->maps, __ATOMIC_RELAXED) < 200); gen++) {
		xbd_grant_ref_t ref;
		uint32_t *page;
		int rc;

		assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, &ref, true, (void **)&page), 0);
		page[0] = gen;
		__atomic_store_n(&r->ref, ref, __ATOMIC_SEQ_CST);
		/* give the backend the chance to map this generation */
		for (int i = 0; i < 200 && __atomic_load_n(&r->held, __ATOMIC_SEQ_CST) != gen; i++)
			sched_yield();
		while ((rc = xbd_gntshr_unshare(f->gs, page, 1)) == -EBUSY)
			busy++;
		assert_int_equal(rc, 0);
		if (__atomic_load_n(&r->held, __ATOMIC_SEQ_CST) == gen)
			violations++;
	}
	__atomic_store_n(&r->stop, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(violations, 0);
	assert_true(r->maps > 0);   /* the race was actually run */
	print_message("revoke vs map: %u maps, %u revokes refused\n", r->maps, busy);
	munmap(r, sizeof(*r));
}

/*
 * No lost wake-up, in lock step: a guest process publishes i, notifies,
 * and waits until the backend has consumed i.  The backend takes the event,
 * consumes, yields (so the next notify lands while the port is masked) and
 * only then unmasks: unmask must deliver that notify again, or both sides
 * wait for ever (the backend's poll times out).
 */
struct lockstep { uint32_t produced, consumed; };

#define LOCKSTEP_ROUNDS 2000u

static void evtchn_producer(const char *rundir, int ready_fd, struct lockstep *ls)
{
	struct xbd_platform *p;
	struct xbd_evtchn *e;
	struct pollfd pfd;
	int port;

	if (xbd_platform_open(XBD_PLATFORM_LOCAL, rundir, &p) || xbd_evtchn_open(p, 1, &e))
		_exit(2);
	port = xbd_evtchn_bind_unbound_port(e, 0);
	if (port < 0 || write(ready_fd, &port, sizeof(port)) != sizeof(port))
		_exit(3);
	/* the backend's first notify says it is connected */
	pfd = (struct pollfd){ .fd = xbd_evtchn_fd(e), .events = POLLIN };
	if (poll(&pfd, 1, 5000) != 1 || xbd_evtchn_pending(e) != port)
		_exit(4);
	for (uint32_t i = 1; i <= LOCKSTEP_ROUNDS; i++) {
		time_t deadline = time(NULL) + 5;

		__atomic_store_n(&ls->produced, i, __ATOMIC_SEQ_CST);
		if (xbd_evtchn_notify(e, (xbd_evtchn_port_t)port))
			_exit(5);
		while (__atomic_load_n(&ls->consumed, __ATOMIC_SEQ_CST) < i) {
			if (time(NULL) > deadline)
				_exit(6);
			sched_yield();
		}
	}
	xbd_evtchn_close(e);
	xbd_platform_close(p);
	_exit(0);
}

static void test_evtchn_no_lost_wakeup(void **state)
{
	struct fixture *f = *state;
	struct lockstep *ls = mmap(NULL, sizeof(*ls), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint32_t seen = 0, wakes = 0;
	struct xbd_evtchn *e;
	int ready[2], gport, bport, status;
	struct pollfd pfd;
	pid_t pid;

	assert_true(ls != MAP_FAILED);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	if (pid == 0)
		evtchn_producer(f->rundir, ready[1], ls);
	assert_int_equal(read(ready[0], &gport, sizeof(gport)), sizeof(gport));
	assert_int_equal(xbd_evtchn_open(f->p, 0, &e), 0);
	bport = xbd_evtchn_bind_interdomain(e, 1, (xbd_evtchn_port_t)gport);
	assert_true(bport > 0);
	assert_int_equal(xbd_evtchn_notify(e, (xbd_evtchn_port_t)bport), 0);
	pfd = (struct pollfd){ .fd = xbd_evtchn_fd(e), .events = POLLIN };
	while (seen < LOCKSTEP_ROUNDS) {
		assert_int_equal(poll(&pfd, 1, 5000), 1);   /* 0 = a lost wake-up */
		if (xbd_evtchn_pending(e) != bport)
			continue;
		wakes++;
		seen = __atomic_load_n(&ls->produced, __ATOMIC_SEQ_CST);
		__atomic_store_n(&ls->consumed, seen, __ATOMIC_SEQ_CST);
		sched_yield();   /* the next notify likely lands while masked */
		assert_int_equal(xbd_evtchn_unmask(e, (xbd_evtchn_port_t)bport), 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	print_message("%u lock-step rounds, %u wake-ups\n", LOCKSTEP_ROUNDS, wakes);
	xbd_evtchn_close(e);
	close(ready[0]);
	close(ready[1]);
	munmap(ls, sizeof(*ls));
}

/* gntshr handles keep their domain: release first, close later. */
static void test_release_before_gntshr_close(void **state)
{
	struct fixture *f = *state;
	struct xbd_domain_info info;
	struct xbd_domain *d;
	xbd_grant_ref_t ref;
	void *addr;

	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, &ref, true, &addr), 0);
	xbd_domain_release(f->dom);
	f->dom = NULL;
	assert_int_equal(xbd_domain_get_info(f->p, 1, &info), 0);
	assert_int_equal(info.claimed_by, getpid());   /* the handle keeps it */
	assert_int_equal(xbd_gntshr_unshare(f->gs, addr, 1), 0);
	xbd_gntshr_close(f->gs);
	f->gs = NULL;
	assert_int_equal(xbd_domain_get_info(f->p, 1, &info), 0);
	assert_int_equal(info.claimed_by, 0);
	assert_int_equal(xbd_domain_claim(f->p, 1, &d), 0);
	xbd_domain_release(d);
}

/* Two threads, one gntshr handle each, sharing and revoking at once: no
 * page or ref is ever handed to both. */
struct sharer { struct xbd_domain *dom; uint32_t id; int errors; };

static void *sharer_thread(void *arg)
{
	struct sharer *sh = arg;
	struct xbd_gntshr *gs;

	if (xbd_gntshr_open(sh->dom, &gs)) {
		sh->errors++;
		return NULL;
	}
	for (int i = 0; i < 2000; i++) {
		xbd_grant_ref_t refs[3];
		volatile uint32_t *pg;

		if (xbd_gntshr_share_pages(gs, 0, 3, refs, true, (void **)&pg)) {
			sh->errors++;
			continue;
		}
		pg[0] = sh->id;
		pg[2048] = sh->id;
		sched_yield();
		if (pg[0] != sh->id || pg[2048] != sh->id || xbd_gntshr_unshare(gs, (void *)pg, 3))
			sh->errors++;
	}
	xbd_gntshr_close(gs);
	return NULL;
}

static void test_gntshr_threads(void **state)
{
	struct fixture *f = *state;
	struct sharer sh[2] = { { f->dom, 1, 0 }, { f->dom, 2, 0 } };
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, sharer_thread, &sh[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(sh[i].errors, 0);
	}
}

/* xorshift64: a fixed-seed generator, so a failure reproduces. */
static uint64_t rnd(uint64_t *st)
{
	*st ^= *st << 13;
	*st ^= *st >> 7;
	*st ^= *st << 17;
	return *st;
}

/* Fill dom1/<file> with random bytes, a quarter of the 8-byte words made
 * to look like grants to domain 0 (so validation is exercised deeper). */
static void scribble(struct fixture *f, const char *file, size_t len, uint64_t *st)
{
	uint64_t *words = malloc(len);
	char path[128];
	int fd;

	for (size_t i = 0; i < len / 8; i++) {
		words[i] = rnd(st);
		if (i % 4 == 0)   /* flags = permit (+ random subflags), domid 0 */
			words[i] = (words[i] & 0xffffffff00000000ull & 0x000003ff00000000ull) |
				   ((words[i] & 0x1c) | GTF_permit_access);
	}
	snprintf(path, sizeof(path), "%s/dom1/%s", f->rundir, file);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, words, len, 0), (ssize_t)len);
	close(fd);
	free(words);
}

static bool one_of(int rc, int a, int b, int c)
{
	return rc == a || rc == b || rc == c;
}

/* A guest that writes garbage into its grant table and port table: every
 * backend call returns a listed error or works on the guest's memory. */
static void test_hostile_tables(void **state)
{
	struct fixture *f = *state;
	uint64_t st = 0x9e3779b97f4a7c15ull;
	struct xbd_evtchn *e;
	int mapped = 0;

	scribble(f, "gnttab", 32768 * 8, &st);
	for (xbd_grant_ref_t ref = 0; ref < 32768; ref += 3) {
		xbd_grant_ref_t batch[3] = { ref, (xbd_grant_ref_t)rnd(&st) % 40000, ref + 4 };
		struct xbd_gnttab_copy_seg seg = {
			.source.foreign = { ref, (uint16_t)(rnd(&st) % 4096), 1 },
			.dest.virt = &st, .len = 8, .flags = XBD_GNTCOPY_source_gref };
		volatile uint8_t *m;
		int rc = xbd_gnttab_map(f->gt, 1, 1, &ref, PROT_READ, (void **)&m);

		assert_true(one_of(rc, 0, -EINVAL, -EPERM));
		if (rc == 0) {
			(void)m[4095];   /* inside the guest's memory: no fault */
			assert_int_equal(xbd_gnttab_unmap(f->gt, (void *)m, 1), 0);
			mapped++;
		}
		rc = xbd_gnttab_map(f->gt, 1, 3, batch, PROT_READ | PROT_WRITE, (void **)&m);
		assert_true(one_of(rc, 0, -EINVAL, -EPERM));
		if (rc == 0) {
			m[0] = m[2 * 4096 + 4095];
			assert_int_equal(xbd_gnttab_unmap(f->gt, (void *)m, 3), 0);
		}
		assert_int_equal(xbd_gnttab_copy(f->gt, 1, &seg), 0);
		assert_true(one_of(seg.status, 0, -EINVAL, -EPERM));
	}
	assert_true(mapped > 0);   /* some garbage did look like a grant */

	scribble(f, "evtchn", 4096 * 32, &st);
	assert_int_equal(xbd_evtchn_open(f->p, 0, &e), 0);
	for (int i = 0; i < 4096; i++) {
		int port = xbd_evtchn_bind_interdomain(e, 1, (xbd_evtchn_port_t)(rnd(&st) % 4200));

		assert_true(port > 0 || one_of(port, -EINVAL, -EPERM, -ENOSPC));
		if (port > 0) {
			assert_int_equal(xbd_evtchn_notify(e, (xbd_evtchn_port_t)port), 0);
			assert_int_equal(xbd_evtchn_unbind(e, (xbd_evtchn_port_t)port), 0);
		}
	}
	while (xbd_evtchn_pending(e) != -EAGAIN)
		;
	xbd_evtchn_close(e);
}

/* Start addresses of this process's mappings of path, into out (max n). */
static int maps_of(const char *path, uintptr_t *out, int n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int k = 0;

	assert_non_null(f);
	while (k < n && fgets(line, sizeof(line), f)) {
		char *name = strchr(line, '/');

		if (name && strncmp(name, path, strlen(path)) == 0 &&
		    name[strlen(path)] == '\n')
			out[k++] = (uintptr_t)strtoull(line, NULL, 16);
	}
	fclose(f);
	return k;
}

/* Issue 18 item 8: a guest that rewrites its port's flags between every
 * load and CAS of ours (slot_trap: each access is single-stepped and the
 * word flipped after it) gets -EPROTO after a bounded number of tries;
 * before, notify spun for ever. */
static void test_evtchn_cas_bounded(void **state)
{
	struct fixture *f = *state;
	uintptr_t before[8], after[8], mine = 0;
	struct xbd_evtchn *g, *b;
	char path[128];
	int gport, bport, nb, na, rc;

	snprintf(path, sizeof(path), "%s/dom1/evtchn", f->rundir);
	assert_int_equal(xbd_evtchn_open(f->p, 1, &g), 0);
	gport = xbd_evtchn_bind_unbound_port(g, 0);
	assert_true(gport > 0);
	nb = maps_of(path, before, 8);
	assert_int_equal(xbd_evtchn_open(f->p, 0, &b), 0);
	bport = xbd_evtchn_bind_interdomain(b, 1, (xbd_evtchn_port_t)gport);
	assert_true(bport > 0);
	na = maps_of(path, after, 8);
	for (int i = 0; i < na; i++) {
		bool old = false;

		for (int j = 0; j < nb; j++)
			old |= after[i] == before[j];
		if (!old)
			mine = after[i];   /* the backend handle's view of dom1 */
	}
	assert_true(mine != 0);
	uint8_t *slot = (uint8_t *)mine + (size_t)gport * sizeof(struct local_port) +
			offsetof(struct local_port, flags);
	uint8_t *page = (uint8_t *)((uintptr_t)slot & ~(uintptr_t)4095);

	arm_trap(page, slot, 4);
	rc = xbd_evtchn_notify(b, (xbd_evtchn_port_t)bport);
	disarm_trap();
	assert_int_equal(rc, -EPROTO);
	assert_true(trap.reads[0] >= LOCAL_CAS_TRIES);
	assert_true(trap.reads[0] <= LOCAL_CAS_TRIES + 2);
	/* the guest stopped fighting: events flow again */
	*(uint32_t *)(void *)slot = 0;
	assert_int_equal(xbd_evtchn_notify(b, (xbd_evtchn_port_t)bport), 0);
	assert_int_equal(xbd_evtchn_pending(g), gport);
	xbd_evtchn_close(b);
	xbd_evtchn_close(g);
}

struct flipper {
	uint32_t *word;
	uint32_t a, b;
	bool stop;                    /* atomic: set by the test, read by the flipper */
	unsigned long flips;
};

static void *flip_main(void *arg)
{
	struct flipper *fl = arg;

	while (!__atomic_load_n(&fl->stop, __ATOMIC_RELAXED)) {
		__atomic_store_n(fl->word, fl->a, __ATOMIC_RELAXED);
		__atomic_store_n(fl->word, fl->b, __ATOMIC_RELAXED);
		__atomic_fetch_add(&fl->flips, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The same with a real thread flipping the word as fast as it can: every
 * notify and unmask returns, 0 or -EPROTO, and nothing spins. */
static void test_evtchn_cas_flipper(void **state)
{
	struct fixture *f = *state;
	struct xbd_evtchn *g, *b;
	struct local_port *gports, *bports;
	struct flipper fl = { 0 };
	pthread_t t;
	int gport, bport, fd, hostile = 0;
	char path[128];

	assert_int_equal(xbd_evtchn_open(f->p, 1, &g), 0);
	assert_int_equal(xbd_evtchn_open(f->p, 0, &b), 0);
	gport = xbd_evtchn_bind_unbound_port(g, 0);
	bport = xbd_evtchn_bind_interdomain(b, 1, (xbd_evtchn_port_t)gport);
	assert_true(gport > 0 && bport > 0);
	snprintf(path, sizeof(path), "%s/dom1/evtchn", f->rundir);
	fd = open(path, O_RDWR);
	gports = mmap(NULL, LOCAL_NR_PORTS * sizeof(*gports), PROT_READ | PROT_WRITE,
		      MAP_SHARED, fd, 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/dom0/evtchn", f->rundir);
	fd = open(path, O_RDWR);
	bports = mmap(NULL, LOCAL_NR_PORTS * sizeof(*bports), PROT_READ | PROT_WRITE,
		      MAP_SHARED, fd, 0);
	close(fd);
	assert_true(gports != MAP_FAILED && bports != MAP_FAILED);

	/* never pending, so every notify must CAS */
	fl = (struct flipper){ .word = &gports[gport].flags, .a = 0x100, .b = 0x200 };
	assert_int_equal(pthread_create(&t, NULL, flip_main, &fl), 0);
	while (__atomic_load_n(&fl.flips, __ATOMIC_RELAXED) == 0)
		sched_yield();
	for (int i = 0; i < 20000; i++) {
		int rc = xbd_evtchn_notify(b, (xbd_evtchn_port_t)bport);

		assert_true(rc == 0 || rc == -EPROTO);
		hostile += rc == -EPROTO;
	}
	__atomic_store_n(&fl.stop, true, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	print_message("notify: %d of 20000 gave up (%lu flips)\n", hostile, fl.flips);

	/* always masked, never pending, so every unmask must CAS */
	hostile = 0;
	fl = (struct flipper){ .word = &bports[bport].flags,
			       .a = PORT_MASKED | 0x100, .b = PORT_MASKED | 0x200 };
	assert_int_equal(pthread_create(&t, NULL, flip_main, &fl), 0);
	while (__atomic_load_n(&fl.flips, __ATOMIC_RELAXED) == 0)
		sched_yield();
	for (int i = 0; i < 20000; i++) {
		int rc = xbd_evtchn_unmask(b, (xbd_evtchn_port_t)bport);

		assert_true(rc == 0 || rc == -EPROTO);
		hostile += rc == -EPROTO;
	}
	__atomic_store_n(&fl.stop, true, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	print_message("unmask: %d of 20000 gave up (%lu flips)\n", hostile, fl.flips);
	munmap(gports, LOCAL_NR_PORTS * sizeof(*gports));
	munmap(bports, LOCAL_NR_PORTS * sizeof(*bports));
	while (xbd_evtchn_pending(g) != -EAGAIN)
		;
	while (xbd_evtchn_pending(b) != -EAGAIN)
		;
	xbd_evtchn_close(b);
	xbd_evtchn_close(g);
}

/* Issue 18 item 2: the guest truncates its memory under a backend's
 * mapping; with xbd_fault_catch() the access completes on a zero page and
 * is counted for the guest's domain instead of killing the process. */
static void test_truncated_memory_is_caught(void **state)
{
	struct fixture *f = *state;
	volatile uint8_t *m;
	xbd_grant_ref_t ref;
	char path[128];
	uint8_t *g;
	uint32_t before;

	assert_int_equal(xbd_fault_catch(f->rundir), 0);
	assert_int_equal(xbd_gntshr_share_pages(f->gs, 0, 1, &ref, true, (void **)&g), 0);
	g[100] = 0x5a;
	assert_int_equal(xbd_gnttab_map(f->gt, 1, 1, &ref, PROT_READ | PROT_WRITE,
					(void **)&m), 0);
	assert_int_equal(m[100], 0x5a);
	before = xbd_fault_count(1);
	snprintf(path, sizeof(path), "%s/dom1/memory", f->rundir);
	assert_int_equal(truncate(path, 0), 0);
	assert_int_equal(m[100], 0);          /* SIGBUS without the catch */
	m[200] = 7;                            /* the same private page now */
	assert_int_equal(m[200], 7);
	assert_int_equal(xbd_fault_count(1), before + 1);
	assert_int_equal(xbd_fault_count(2), 0);
	assert_int_equal(xbd_gnttab_unmap(f->gt, (void *)m, 1), 0);
	signal(SIGBUS, SIG_DFL);
}

static void test_domain_rules(void **state)
{
	struct fixture *f = *state;
	struct xbd_domain_info info;
	struct xbd_domain *d;

	assert_int_equal(xbd_domain_claim(f->p, 1, &d), -EBUSY);     /* our own claim */
	assert_int_equal(xbd_domain_get_info(f->p, 1, &info), 0);
	assert_true(info.exists);
	assert_int_equal(info.claimed_by, getpid());
	assert_int_equal(info.memory, 4 * MiB);
	assert_string_equal(info.name, "guest");
	assert_int_equal(xbd_domain_get_info(f->p, 0, &info), 0);
	assert_true(info.exists);
	assert_int_equal(info.memory, 0);
	assert_int_equal(xbd_domain_get_info(f->p, XBD_DOMID_MAX + 1, &info), -EINVAL);
	assert_int_equal(xbd_domain_destroy(f->p, 1, false), -EBUSY);
	assert_int_equal(xbd_domain_create(f->p, 3, "dflt", 0), 0);   /* 0: default */
	assert_int_equal(xbd_domain_get_info(f->p, 3, &info), 0);
	assert_int_equal(info.memory, XBD_DEFAULT_MEMORY);
	assert_int_equal(xbd_domain_create(f->p, 3, "dflt", 0), -EEXIST);
	assert_int_equal(xbd_domain_create(f->p, 2, "two", 3000), -EINVAL);
	assert_int_equal(xbd_domain_create(f->p, 2, "", MiB), -EINVAL);
	assert_int_equal(xbd_domain_create(f->p, 2, NULL, MiB), -EINVAL);
	assert_int_equal(xbd_domain_create(f->p, 2, "two", MiB), 0);
	assert_int_equal(xbd_domain_destroy(f->p, 2, false), 0);
	assert_int_equal(xbd_domain_destroy(f->p, 2, false), -ENOENT);
	assert_int_equal(xbd_domain_get_info(f->p, 2, &info), 0);
	assert_false(info.exists);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kind_parse),
		cmocka_unit_test(test_auto_detect),
		cmocka_unit_test(test_open_rundir),
		cmocka_unit_test(test_xen_without_hypervisor),
		cmocka_unit_test_setup_teardown(test_grant_entry_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_unmap_revoke, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readonly_map_faults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evtchn_coalescing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evtchn_loopback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allocator, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_races_map, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evtchn_no_lost_wakeup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_before_gntshr_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gntshr_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(test_domain_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evtchn_cas_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_memory_is_caught, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evtchn_cas_flipper, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
