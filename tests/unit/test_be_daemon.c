/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkback as a real process: xbd-xenstored, the xbd toolstack
 * (domain-create, block-attach, block-detach) and the daemon run as
 * programs; the test process is the guest (it claims domain 1, grants the
 * rings, writes the frontend's keys) and checks bytes on disk, the
 * statistics dump, the state machine through detach, a SIGKILL and
 * restart under a connected frontend (the new backend says Closed rather
 * than trusting the dead one's rings; the frontend reconnects on fresh
 * rings and is served), and a clean SIGTERM with a clean log.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend/ring.h"
#include "xenbus.h"
#include "test_be_guest.h"
#include "test_be_xs.h"

#define BE "/local/domain/0/backend/vbd/1/51712"
#define FE "/local/domain/1/device/vbd/51712"

struct fx {
	struct guest g;               /* g.p, g.dom, g.gs used; rw/ro shared below */
	pid_t xsd, be;
	struct xs_handle *xs;
	char file[128];
	int fd;
	struct gring gr[2];
};

static void start_backend(struct fx *fx)
{
	char path[PATH_MAX], log[256];

	xbd_tool(path, sizeof(path), "xbd-blkback");
	snprintf(log, sizeof(log), "%s/blkback.log", fx->g.rundir);
	fx->be = fork();
	if (fx->be == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		dup2(fd, 2);
		execl(path, path, "-N", "-p", "local", "-R", fx->g.rundir, "-l", "info",
		      "--max_queues=2", (char *)NULL);
		_exit(127);
	}
	assert_true(fx->be > 0);
}

static int setup(void **state)
{
	static struct fx fx;
	char sock[160];

	memset(&fx, 0, sizeof(fx));
	strcpy(fx.g.rundir, "/tmp/xbd-be-unit-XXXXXX");
	if (!mkdtemp(fx.g.rundir) || xsd_start(fx.g.rundir, &fx.xsd))
		return -1;
	*state = &fx;
	if (xbd_run(fx.g.rundir, "domain-create", "guest", "--memory", "16M") != 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", fx.g.rundir);
	snprintf(fx.file, sizeof(fx.file), "%s/disk.img", fx.g.rundir);
	fx.fd = open(fx.file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fx.fd < 0 || ftruncate(fx.fd, 8 << 20) ||
	    xbd_platform_open(XBD_PLATFORM_LOCAL, fx.g.rundir, &fx.g.p) ||
	    xbd_domain_claim(fx.g.p, 1, &fx.g.dom) || xbd_gntshr_open(fx.g.dom, &fx.g.gs) ||
	    xbd_gntshr_share_pages(fx.g.gs, 0, 32, fx.g.rw, true, (void **)&fx.g.rw_mem) ||
	    xbd_xs_open(sock, &fx.xs))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;
	char log[256], cmd[300];

	proc_stop(&fx->be, SIGKILL);
	for (int i = 0; i < 2; i++)
		gring_close(&fx->g, &fx->gr[i]);
	if (fx->xs)
		xs_close(fx->xs);
	xsd_stop(&fx->xsd);
	if (fx->fd >= 0)
		close(fx->fd);
	snprintf(log, sizeof(log), "%s/blkback.log", fx->g.rundir);
	snprintf(cmd, sizeof(cmd), "cat '%s' >&2", log);
	if (system(cmd) != 0)
		fprintf(stderr, "(no backend log)\n");
	guest_down(&fx->g);                  /* closes the platform, removes rundir */
	return 0;
}

static unsigned int wait_be(struct fx *fx, enum xenbus_state s)
{
	enum xenbus_state last = XenbusStateUnknown;

	if (xbd_xenbus_wait_state(fx->xs, BE, 1u << s, 10000, &last))
		fail_msg("backend state %s, want %s", xbd_xenbus_state_name(last),
			 xbd_xenbus_state_name(s));
	return last;
}

static void frontend_connect(struct fx *fx)
{
	char dir[96], key[16];

	xbd_xs_printf(fx->xs, XBT_NULL, FE, "multi-queue-num-queues", "2");
	xbd_xs_printf(fx->xs, XBT_NULL, FE, "ring-page-order", "2");
	xbd_xs_write(fx->xs, XBT_NULL, FE, "protocol", "x86_64-abi");
	xbd_xs_write(fx->xs, XBT_NULL, FE, "feature-persistent", "1");
	for (int q = 0; q < 2; q++) {
		gring_share(&fx->g, &fx->gr[q], 2, RING_ABI_X86_64);
		snprintf(dir, sizeof(dir), "%s/queue-%d", FE, q);
		for (int i = 0; i < 4; i++) {
			snprintf(key, sizeof(key), "ring-ref%d", i);
			xbd_xs_printf(fx->xs, XBT_NULL, dir, key, "%u", fx->gr[q].refs[i]);
		}
		xbd_xs_printf(fx->xs, XBT_NULL, dir, "event-channel", "%d", fx->gr[q].port);
	}
	assert_int_equal(xbd_xs_printf(fx->xs, XBT_NULL, FE, "state", "%d",
				       XenbusStateInitialised), 0);
	wait_be(fx, XenbusStateConnected);
}

static void check_disk(struct fx *fx, unsigned int page, uint64_t sector)
{
	uint8_t got[4096];

	assert_int_equal(pread(fx->fd, got, 4096, (off_t)sector * 512), 4096);
	assert_memory_equal(got, guest_page(&fx->g, page), 4096);
}

static void test_serve_detach_restart(void **state)
{
	struct fx *fx = *state;
	char spec[200], stats[512] = "", path[200];
	unsigned int v = 0;
	FILE *f;

	start_backend(fx);
	snprintf(spec, sizeof(spec), "%s,raw,xvda,w", fx->file);
	assert_int_equal(xbd_run(fx->g.rundir, "block-attach", "1", spec, NULL), 0);  /* InitWait seen */
	assert_int_equal(xbd_xs_read_uint(fx->xs, XBT_NULL, BE, "feature-persistent", 0, 1, &v), 0);
	assert_int_equal(v, 1);
	frontend_connect(fx);
	assert_int_equal(xbd_xs_read_uint(fx->xs, XBT_NULL, BE, "sectors", 0, UINT32_MAX, &v), 0);
	assert_int_equal(v, 16384);
	gring_roundtrip(&fx->g, &fx->gr[0], 0, 0, 1);
	gring_roundtrip(&fx->g, &fx->gr[1], 8, 2, 3);
	check_disk(fx, 0, 0);
	check_disk(fx, 2, 8);

	/* statistics on SIGUSR1 */
	snprintf(path, sizeof(path), "%s/xbd-blkback.stats", fx->g.rundir);
	unlink(path);
	kill(fx->be, SIGUSR1);
	for (int i = 0; i < 200 && access(path, R_OK); i++)
		usleep(10000);
	f = fopen(path, "re");
	assert_non_null(f);
	assert_non_null(fgets(stats, sizeof(stats), f));
	fclose(f);
	assert_non_null(strstr(stats, "vbd-1-51712: queues 2 oo_req 0 rd_req 2 wr_req 2 "));
	assert_non_null(strstr(stats, "rd_sect 16 wr_sect 16 inflight 0 adopted 0 replayed_req 0 "));
	assert_non_null(strstr(stats, " squeezes 0 evt_in "));
	assert_non_null(strstr(stats, " lat_us "));

	/* SIGKILL the backend under a connected frontend and restart it: the
	 * frontend is Initialised and the backend was Connected, so the
	 * restart adopts the dead backend's rings (issue 20) and serves them
	 * again on the same grants, with no state change the frontend sees */
	assert_int_equal(proc_stop(&fx->be, SIGKILL), 128 + SIGKILL);
	start_backend(fx);
	wait_be(fx, XenbusStateConnected);
	gring_roundtrip(&fx->g, &fx->gr[0], 64, 4, 5);
	gring_roundtrip(&fx->g, &fx->gr[1], 72, 6, 7);
	check_disk(fx, 4, 64);

	/* the frontend closes; the toolstack detaches */
	xbd_xs_printf(fx->xs, XBT_NULL, FE, "state", "%d", XenbusStateClosing);
	wait_be(fx, XenbusStateClosing);
	xbd_xs_printf(fx->xs, XBT_NULL, FE, "state", "%d", XenbusStateClosed);
	wait_be(fx, XenbusStateClosed);
	assert_int_equal(xbd_run(fx->g.rundir, "block-detach", "1", "xvda", NULL), 0);
	assert_int_equal(xbd_xs_exists(fx->xs, XBT_NULL, BE, NULL), 0);
	assert_int_equal(proc_stop(&fx->be, SIGTERM), 0);
	assert_blkback_log_clean(fx->g.rundir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_serve_detach_restart, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
