/* SPDX-License-Identifier: MIT */
/*
 * lib/platform/xen.c against fake Xen libraries.  This machine has no
 * hypervisor, so the test binary defines the libxenctrl, libxenstore,
 * libxengnttab and libxenevtchn entry points xen.c calls; definitions in
 * the executable take precedence over the shared libraries'.  Each fake
 * records its arguments, and the tests check that the pass-through hands
 * them over unchanged and turns failures into -errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <cmocka.h>

#include <xenctrl.h>
#include <xenevtchn.h>
#include <xengnttab.h>
#include <xenstore.h>

#include "platform/platform.h"
#include "platform/private.h"

static struct {
	void *logger;               /* what the library was opened with */
	uint32_t domid, count;
	uint32_t refs[8];
	int prot;
	int fail_errno;             /* next call fails with this errno */
	xengnttab_grant_copy_segment_t segs[4];
	xc_dominfo_t info;
	int ninfo;
	char buf[64];
} fake;

static int handle_token;   /* fake handles point here */

static int fake_fail(void)
{
	if (!fake.fail_errno)
		return 0;
	errno = fake.fail_errno;
	fake.fail_errno = 0;
	return -1;
}

/* ---- libxenctrl / libxenstore ---- */
xc_interface *xc_interface_open(xentoollog_logger *logger, xentoollog_logger *dombuild,
				unsigned open_flags)
{
	(void)dombuild; (void)open_flags;
	fake.logger = logger;
	return fake_fail() ? NULL : (xc_interface *)&handle_token;
}
int xc_interface_close(xc_interface *xch) { (void)xch; return 0; }
int xc_domain_getinfo(xc_interface *xch, uint32_t first, unsigned int max, xc_dominfo_t *info)
{
	(void)xch; (void)max;
	fake.domid = first;
	if (fake_fail())
		return -1;
	*info = fake.info;
	return fake.ninfo;
}
struct xs_handle *xs_open(unsigned long flags) { (void)flags; return (struct xs_handle *)&handle_token; }
void xs_close(struct xs_handle *xs) { (void)xs; }
void *xs_read(struct xs_handle *h, xs_transaction_t t, const char *path, unsigned int *len)
{
	(void)h; (void)t;
	assert_string_equal(path, "domid");
	*len = 1;
	return strdup("3");
}

/* ---- libxengnttab ---- */
xengnttab_handle *xengnttab_open(struct xentoollog_logger *logger, unsigned flags)
{
	(void)flags;
	fake.logger = logger;
	return fake_fail() ? NULL : (xengnttab_handle *)&handle_token;
}
int xengnttab_close(xengnttab_handle *xgt) { (void)xgt; return 0; }
void *xengnttab_map_domain_grant_refs(xengnttab_handle *xgt, uint32_t count, uint32_t domid,
				      uint32_t *refs, int prot)
{
	(void)xgt;
	fake.count = count;
	fake.domid = domid;
	fake.prot = prot;
	memcpy(fake.refs, refs, count * sizeof(*refs));
	return fake_fail() ? NULL : fake.buf;
}
int xengnttab_unmap(xengnttab_handle *xgt, void *start, uint32_t count)
{
	(void)xgt;
	fake.count = count;
	return start == fake.buf ? fake_fail() : (errno = EINVAL, -1);
}
int xengnttab_grant_copy(xengnttab_handle *xgt, uint32_t count,
			 xengnttab_grant_copy_segment_t *segs)
{
	(void)xgt;
	fake.count = count;
	memcpy(fake.segs, segs, count * sizeof(*segs));
	segs[0].status = GNTST_okay;
	segs[1].status = GNTST_permission_denied;
	return fake_fail();
}
xengntshr_handle *xengntshr_open(struct xentoollog_logger *logger, unsigned flags)
{
	(void)flags;
	fake.logger = logger;
	return fake_fail() ? NULL : (xengntshr_handle *)&handle_token;
}
int xengntshr_close(xengntshr_handle *xgs) { (void)xgs; return 0; }
void *xengntshr_share_pages(xengntshr_handle *xgs, uint32_t domid, int count,
			    uint32_t *refs, int writable)
{
	(void)xgs;
	fake.domid = domid;
	fake.count = (uint32_t)count;
	fake.prot = writable;
	for (int i = 0; i < count; i++)
		refs[i] = 100u + (uint32_t)i;
	return fake_fail() ? NULL : fake.buf;
}
int xengntshr_unshare(xengntshr_handle *xgs, void *start, uint32_t count)
{
	(void)xgs; (void)start;
	fake.count = count;
	return fake_fail();
}

/* ---- libxenevtchn ---- */
xenevtchn_handle *xenevtchn_open(struct xentoollog_logger *logger, unsigned open_flags)
{
	(void)open_flags;
	fake.logger = logger;
	return fake_fail() ? NULL : (xenevtchn_handle *)&handle_token;
}
int xenevtchn_close(xenevtchn_handle *xce) { (void)xce; return 0; }
/* A real descriptor (a pipe's read end): the platform makes it non-blocking. */
static int fake_evtchn_pipe[2] = { -1, -1 };
int xenevtchn_fd(xenevtchn_handle *xce)
{
	(void)xce;
	if (fake_evtchn_pipe[0] < 0 && pipe(fake_evtchn_pipe) < 0)
		return -1;
	return fake_evtchn_pipe[0];
}
int xenevtchn_notify(xenevtchn_handle *xce, evtchn_port_t port)
{
	(void)xce;
	fake.refs[0] = port;
	return fake_fail();
}
xenevtchn_port_or_error_t xenevtchn_bind_unbound_port(xenevtchn_handle *xce, uint32_t domid)
{
	(void)xce;
	fake.domid = domid;
	return fake_fail() ? -1 : 17;
}
xenevtchn_port_or_error_t xenevtchn_bind_interdomain(xenevtchn_handle *xce, uint32_t domid,
						     evtchn_port_t remote_port)
{
	(void)xce;
	fake.domid = domid;
	fake.refs[0] = remote_port;
	return fake_fail() ? -1 : 18;
}
int xenevtchn_unbind(xenevtchn_handle *xce, evtchn_port_t port)
{
	(void)xce;
	fake.refs[0] = port;
	return fake_fail();
}
xenevtchn_port_or_error_t xenevtchn_pending(xenevtchn_handle *xce)
{
	(void)xce;
	return fake_fail() ? -1 : 19;
}
int xenevtchn_unmask(xenevtchn_handle *xce, evtchn_port_t port)
{
	(void)xce;
	fake.refs[0] = port;
	return fake_fail();
}

/* ---- tests ---- */

static int setup(void **state)
{
	struct xbd_platform *p;

	memset(&fake, 0, sizeof(fake));
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_XEN, NULL, &p), 0);
	assert_non_null(fake.logger);   /* never the libraries' stderr logger */
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	xbd_platform_close(*state);
	return 0;
}

static void test_open_failure(void **state)
{
	struct xbd_platform *p;

	(void)state;
	fake.fail_errno = EACCES;
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_XEN, NULL, &p), -EACCES);
	fake.fail_errno = ENOENT;   /* no privcmd and no xenbus: no hypervisor */
	xbd_xen_xenbus_path = "/nonexistent/xenbus";
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_XEN, NULL, &p), -ENODEV);
	xbd_xen_xenbus_path = "/dev/xen/xenbus";
}

/* An unprivileged domU: no privcmd, but the xenbus device (a character
 * device; /dev/null stands in).  The guest side works, domain queries
 * are not supported, and our domid comes from xenstore. */
static void test_open_domu_without_privcmd(void **state)
{
	struct xbd_platform *p;
	struct xbd_domain_info info;
	struct xbd_domain *d;

	(void)state;
	xbd_xen_xenbus_path = "/dev/null";
	fake.fail_errno = ENOENT;
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_XEN, NULL, &p), 0);
	xbd_xen_xenbus_path = "/dev/xen/xenbus";
	assert_int_equal(xbd_domain_get_info(p, 0, &info), -EOPNOTSUPP);
	assert_int_equal(xbd_domain_claim(p, 0, &d), -EPERM);
	assert_int_equal(xbd_domain_claim(p, 3, &d), 0);
	xbd_domain_release(d);
	xbd_platform_close(p);
	/* a directory is not the xenbus device */
	xbd_xen_xenbus_path = "/dev";
	fake.fail_errno = ENOENT;
	assert_int_equal(xbd_platform_open(XBD_PLATFORM_XEN, NULL, &p), -ENODEV);
	xbd_xen_xenbus_path = "/dev/xen/xenbus";
}

static void test_domains(void **state)
{
	struct xbd_platform *p = *state;
	struct xbd_domain_info info;
	struct xbd_domain *d;

	assert_int_equal(xbd_domain_create(p, 5, "x", 1 << 20), -EOPNOTSUPP);
	assert_int_equal(xbd_domain_destroy(p, 5, true), -EOPNOTSUPP);
	/* the domain we run in (xenstore "domid" = 3) may be claimed, no other */
	assert_int_equal(xbd_domain_claim(p, 0, &d), -EPERM);
	assert_int_equal(xbd_domain_claim(p, 3, &d), 0);
	assert_int_equal(xbd_domain_id(d), 3);
	xbd_domain_release(d);

	fake.info = (xc_dominfo_t){ .domid = 7, .dying = 1, .nr_pages = 10 };
	fake.ninfo = 1;
	assert_int_equal(xbd_domain_get_info(p, 7, &info), 0);
	assert_int_equal(fake.domid, 7);
	assert_true(info.exists);
	assert_true(info.dying);
	assert_int_equal(info.memory, 10 * XBD_PAGE_SIZE);
	/* getinfo returns the next domain up when ours is gone */
	assert_int_equal(xbd_domain_get_info(p, 6, &info), 0);
	assert_false(info.exists);
	fake.fail_errno = EPERM;
	assert_int_equal(xbd_domain_get_info(p, 6, &info), -EPERM);
	assert_int_equal(xbd_domain_get_info(p, XBD_DOMID_MAX + 1, &info), -EINVAL);
}

static void test_gnttab(void **state)
{
	struct xbd_platform *p = *state;
	const xbd_grant_ref_t refs[3] = { 8, 9, 30000 };
	struct xbd_gnttab_copy_seg segs[2] = {
		{ .source.foreign = { 8, 16, 4 }, .dest.virt = fake.buf, .len = 32,
		  .flags = XBD_GNTCOPY_source_gref },
		{ .source.virt = fake.buf, .dest.foreign = { 9, 0, 4 }, .len = 8,
		  .flags = XBD_GNTCOPY_dest_gref },
	};
	struct xbd_gnttab *gt;
	void *addr;

	assert_int_equal(xbd_gnttab_open(p, 0, &gt), 0);
	assert_int_equal(xbd_gnttab_map(gt, 4, 3, refs, PROT_READ, &addr), 0);
	assert_ptr_equal(addr, fake.buf);
	assert_int_equal(fake.count, 3);
	assert_int_equal(fake.domid, 4);
	assert_int_equal(fake.prot, PROT_READ);
	assert_memory_equal(fake.refs, refs, sizeof(refs));
	assert_int_equal(xbd_gnttab_map(gt, 4, 1, refs, PROT_WRITE, &addr), -EINVAL);
	fake.fail_errno = EFAULT;
	assert_int_equal(xbd_gnttab_map(gt, 4, 1, refs, PROT_READ | PROT_WRITE, &addr), -EFAULT);
	assert_int_equal(xbd_gnttab_unmap(gt, fake.buf, 3), 0);
	assert_int_equal(xbd_gnttab_unmap(gt, fake.buf + 1, 3), -EINVAL);

	assert_int_equal(xbd_gnttab_copy(gt, 2, segs), 0);
	assert_int_equal(fake.count, 2);
	assert_int_equal(fake.segs[0].flags, GNTCOPY_source_gref);
	assert_int_equal(fake.segs[0].source.foreign.ref, 8);
	assert_int_equal(fake.segs[0].source.foreign.offset, 16);
	assert_int_equal(fake.segs[0].source.foreign.domid, 4);
	assert_ptr_equal(fake.segs[0].dest.virt, fake.buf);
	assert_int_equal(fake.segs[0].len, 32);
	assert_int_equal(fake.segs[1].flags, GNTCOPY_dest_gref);
	assert_int_equal(fake.segs[1].dest.foreign.ref, 9);
	assert_int_equal(segs[0].status, 0);
	assert_int_equal(segs[1].status, -EPERM);
	fake.fail_errno = ENOMEM;
	assert_int_equal(xbd_gnttab_copy(gt, 2, segs), -ENOMEM);
	xbd_gnttab_close(gt);
}

static void test_gntshr(void **state)
{
	struct xbd_platform *p = *state;
	struct xbd_domain *d;
	struct xbd_gntshr *gs;
	xbd_grant_ref_t refs[2];
	void *addr;

	assert_int_equal(xbd_domain_claim(p, 3, &d), 0);
	assert_int_equal(xbd_gntshr_open(d, &gs), 0);
	assert_int_equal(xbd_gntshr_share_pages(gs, 0, 2, refs, true, &addr), 0);
	assert_ptr_equal(addr, fake.buf);
	assert_int_equal(fake.domid, 0);
	assert_int_equal(fake.prot, 1);
	assert_int_equal(refs[1], 101);
	assert_int_equal(xbd_gntshr_unshare(gs, addr, 2), 0);
	assert_int_equal(fake.count, 2);
	fake.fail_errno = ENOSPC;
	assert_int_equal(xbd_gntshr_share_pages(gs, 0, 2, refs, false, &addr), -ENOSPC);
	xbd_gntshr_close(gs);
	xbd_domain_release(d);
}

static void test_evtchn(void **state)
{
	struct xbd_platform *p = *state;
	struct xbd_evtchn *e;

	fake.fail_errno = EMFILE;
	assert_int_equal(xbd_evtchn_open(p, 0, &e), -EMFILE);
	assert_int_equal(xbd_evtchn_open(p, 0, &e), 0);
	assert_int_equal(xbd_evtchn_fd(e), fake_evtchn_pipe[0]);
	assert_true(fcntl(xbd_evtchn_fd(e), F_GETFL) & O_NONBLOCK);
	assert_int_equal(xbd_evtchn_bind_unbound_port(e, 6), 17);
	assert_int_equal(fake.domid, 6);
	assert_int_equal(xbd_evtchn_bind_interdomain(e, 6, 5), 18);
	assert_int_equal(fake.refs[0], 5);
	assert_int_equal(xbd_evtchn_notify(e, 18), 0);
	assert_int_equal(fake.refs[0], 18);
	assert_int_equal(xbd_evtchn_pending(e), 19);
	fake.fail_errno = EAGAIN;
	assert_int_equal(xbd_evtchn_pending(e), -EAGAIN);
	assert_int_equal(xbd_evtchn_unmask(e, 19), 0);
	fake.fail_errno = EINVAL;
	assert_int_equal(xbd_evtchn_unbind(e, 99), -EINVAL);
	fake.fail_errno = ESRCH;
	assert_int_equal(xbd_evtchn_bind_interdomain(e, 6, 5), -ESRCH);
	xbd_evtchn_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_failure),
		cmocka_unit_test(test_open_domu_without_privcmd),
		cmocka_unit_test_setup_teardown(test_domains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gnttab, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gntshr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evtchn, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
