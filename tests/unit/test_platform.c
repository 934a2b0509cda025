/* SPDX-License-Identifier: MIT */
/*
 * lib/platform: kind parsing, the auto choice, opening, and the local
 * implementation's grant and event-channel rules inside one process (the
 * cross-process behaviour is in tests/system/test_platform_*.py).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include <unistd.h>
#include <stdint.h>
#include <cmocka.h>
#include <xen/grant_table.h>

#include "platform/platform.h"

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
	/* this machine has no /dev/xen: auto opens the local platform */
	assert_int_equal(xbd_platform_kind_detect(XBD_XEN_GNTDEV_PATH, XBD_XEN_EVTCHN_PATH),
			 XBD_PLATFORM_LOCAL);
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
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_AUTO, NULL, &p), 0);
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
	uint8_t *grw, *gro, buf[XBD_PAGE_SIZE], out[16];
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
	assert_int_equal(xbd_domain_create(f->p, 2, "two", 0), -EINVAL);
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
		cmocka_unit_test_setup_teardown(test_domain_rules, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
