/* SPDX-License-Identifier: MIT */
/*
 * backend/xenbus: probe, negotiation and the XenbusState machine against a
 * real xbd-xenstored and the real local platform.  The test process is
 * the toolstack (it writes the nodes libxl writes) and the guest (it
 * grants rings, binds event channels, writes the frontend's keys and
 * moves the frontend's state), and drives the backend's control side by
 * calling be_dev_changed() after each change, as the watch would.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/tunables.h"
#include "backend/xenbus.h"
#include "test_be_guest.h"
#include "test_be_loop.h"
#include "test_be_xs.h"

#define BE1 "/local/domain/0/backend/vbd/1/51712"
#define FE1 "/local/domain/1/device/vbd/51712"
#define BE2 "/local/domain/0/backend/vbd/1/51728"
#define FE2 "/local/domain/1/device/vbd/51728"

struct fx {
	struct guest g;
	pid_t xsd;
	struct xs_handle *xs;
	struct be_ctx ctx;
	char file[64];
	int fd;
	struct gring gr[3];
};

static void put(struct fx *fx, const char *dir, const char *key, const char *val)
{
	assert_int_equal(xbd_xs_write(fx->xs, XBT_NULL, dir, key, val), 0);
}

static void putu(struct fx *fx, const char *dir, const char *key, unsigned int v)
{
	assert_int_equal(xbd_xs_printf(fx->xs, XBT_NULL, dir, key, "%u", v), 0);
}

static unsigned int getu(struct fx *fx, const char *dir, const char *key)
{
	unsigned int v = 0;

	assert_int_equal(xbd_xs_read_uint(fx->xs, XBT_NULL, dir, key, 0, UINT32_MAX, &v), 0);
	return v;
}

static void fe_state(struct fx *fx, const char *fe, enum xenbus_state s)
{
	putu(fx, fe, "state", s);
}

/* What `xbd block-attach 1 <file>,w,xvda` (libxl) writes. */
static void toolstack_attach(struct fx *fx, const char *be, const char *fe, const char *mode)
{
	put(fx, be, "frontend", fe);
	put(fx, be, "frontend-id", "1");
	put(fx, be, "params", fx->file);
	put(fx, be, "type", "phy");
	put(fx, be, "mode", mode);
	put(fx, be, "online", "1");
	put(fx, be, "discard-enable", "1");
	putu(fx, be, "state", XenbusStateInitialising);
	put(fx, fe, "backend", be);
	put(fx, fe, "backend-id", "0");
	putu(fx, fe, "state", XenbusStateInitialising);
}

static int setup(void **state)
{
	static struct fx fx;
	char sock[128];

	memset(&fx, 0, sizeof(fx));
	tun_init();
	if (guest_up(&fx.g) || xsd_start(fx.g.rundir, &fx.xsd))
		return -1;
	snprintf(sock, sizeof(sock), "%s/xenstored.sock", fx.g.rundir);
	if (xbd_xs_open(sock, &fx.xs))
		return -1;
	fx.ctx = (struct be_ctx){ .xs = fx.xs, .plat = fx.g.p, .self = 0 };
	fx.fd = tmp_backing_file(fx.file, 4u << 20);
	*state = &fx;
	return fx.fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	for (int i = 0; i < 3; i++)
		gring_close(&fx->g, &fx->gr[i]);
	xs_close(fx->xs);
	xsd_stop(&fx->xsd);
	close(fx->fd);
	unlink(fx->file);
	guest_down(&fx->g);
	return 0;
}

/* The guest's keys for one queue in dir (legacy names when order 0). */
static void write_queue(struct fx *fx, const char *dir, struct gring *r, bool legacy)
{
	char key[24];

	if (legacy) {
		putu(fx, dir, "ring-ref", r->refs[0]);
	} else {
		for (unsigned int i = 0; i < (1u << r->order); i++) {
			snprintf(key, sizeof(key), "ring-ref%u", i);
			putu(fx, dir, key, r->refs[i]);
		}
	}
	putu(fx, dir, "event-channel", (unsigned int)r->port);
}

static enum xenbus_state be_state(struct fx *fx, const char *be)
{
	return (enum xenbus_state)getu(fx, be, "state");
}

static void test_probe_connect_close(void **state)
{
	struct fx *fx = *state;
	struct backend_dev *d;
	char buf[64];

	toolstack_attach(fx, BE1, FE1, "w");
	assert_int_equal(be_dev_probe(&fx->ctx, BE1, &d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateInitWait);
	assert_int_equal(getu(fx, BE1, "feature-flush-cache"), 1);
	assert_int_equal(getu(fx, BE1, "feature-barrier"), 1);
	assert_int_equal(getu(fx, BE1, "feature-persistent"), 1);
	assert_int_equal(getu(fx, BE1, "feature-discard"), 1);
	assert_true(getu(fx, BE1, "discard-granularity") >= 512);
	assert_int_equal(getu(fx, BE1, "discard-secure"), 0);
	assert_int_equal(getu(fx, BE1, "feature-max-indirect-segments"), 256);
	assert_int_equal(getu(fx, BE1, "max-ring-page-order"), 4);
	assert_int_equal(getu(fx, BE1, "multi-queue-max-queues"), tun_get(TUN_MAX_QUEUES));

	/* two queues of two pages, persistent grants */
	gring_share(&fx->g, &fx->gr[0], 1, RING_ABI_X86_64);
	gring_share(&fx->g, &fx->gr[1], 1, RING_ABI_X86_64);
	putu(fx, FE1, "multi-queue-num-queues", 2);
	putu(fx, FE1, "ring-page-order", 1);
	write_queue(fx, FE1 "/queue-0", &fx->gr[0], false);
	write_queue(fx, FE1 "/queue-1", &fx->gr[1], false);
	put(fx, FE1, "protocol", "x86_64-abi");
	put(fx, FE1, "feature-persistent", "1");
	fe_state(fx, FE1, XenbusStateInitialised);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	assert_int_equal(getu(fx, BE1, "sectors"), 8192);
	assert_int_equal(getu(fx, BE1, "sector-size"), 512);
	assert_int_equal(getu(fx, BE1, "info"), 0);
	assert_true(getu(fx, BE1, "physical-sector-size") >= 512);
	assert_true(d->nr_queues == 2 && d->persistent && d->order == 1);
	gring_roundtrip(&fx->g, &fx->gr[0], 0, 0, 1);
	gring_roundtrip(&fx->g, &fx->gr[1], 64, 2, 3);
	assert_int_equal(be_dev_changed(d), 0);          /* a second event: no change */
	assert_int_equal(d->nr_queues, 2);

	/* the frontend closes, then comes back as a legacy single queue */
	fe_state(fx, FE1, XenbusStateClosing);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosing);
	fe_state(fx, FE1, XenbusStateClosed);
	assert_int_equal(be_dev_changed(d), 0);          /* online: stays */
	assert_int_equal(be_state(fx, BE1), XenbusStateClosed);
	assert_null(d->queues);
	gring_close(&fx->g, &fx->gr[0]);                 /* unmapped by the backend */
	gring_close(&fx->g, &fx->gr[1]);
	assert_null(fx->gr[0].sring);
	fe_state(fx, FE1, XenbusStateInitialising);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateInitWait);
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, FE1, "multi-queue-num-queues"), 0);
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, FE1, "ring-page-order"), 0);
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, FE1, "protocol"), 0);
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, FE1, "feature-persistent"), 0);
	gring_share(&fx->g, &fx->gr[0], 0, RING_ABI_X86_64);
	write_queue(fx, FE1, &fx->gr[0], true);
	fe_state(fx, FE1, XenbusStateInitialised);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	assert_true(d->nr_queues == 1 && !d->persistent && d->order == 0);
	gring_roundtrip(&fx->g, &fx->gr[0], 128, 4, 5);

	/* xbd block-detach: online=0, Closing; the frontend closes */
	put(fx, BE1, "online", "0");
	putu(fx, BE1, "state", XenbusStateClosing);
	fe_state(fx, FE1, XenbusStateClosing);
	assert_int_equal(be_dev_changed(d), 0);
	fe_state(fx, FE1, XenbusStateClosed);
	assert_int_equal(be_dev_changed(d), BE_DEV_REMOVE);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosed);
	be_dev_remove(d);
	assert_int_equal(xbd_xs_read_buf(fx->xs, XBT_NULL, BE1, "error", buf, sizeof(buf)),
			 -ENOENT);
}

/* A request of one page at sector: its status. */
static int16_t one_write(struct fx *fx, struct gring *r, uint64_t sector)
{
	RING_IDX old = r->prod;
	uint64_t id;
	int16_t st;

	put_req(r, BLKIF_OP_WRITE, 3000 + sector, sector, fx->g.rw[0]);
	push(r, old);
	get_rsp(r, &id, &st);
	assert_true(id == 3000 + sector);
	return st;
}

/* Connect (or be deferred) on a fresh one-page ring. */
static void fe_connect(struct fx *fx, struct backend_dev *d)
{
	gring_close(&fx->g, &fx->gr[0]);
	gring_share(&fx->g, &fx->gr[0], 0, RING_ABI_X86_64);
	write_queue(fx, FE1, &fx->gr[0], true);
	fe_state(fx, FE1, XenbusStateInitialised);
	assert_int_equal(be_dev_changed(d), 0);
}

/* BE1, writable, probed, and its frontend FE1 connecting on one queue
 * of one page (Connected, or deferred by a connect rate). */
static struct backend_dev *attach_connect(struct fx *fx)
{
	struct backend_dev *d;

	toolstack_attach(fx, BE1, FE1, "w");
	assert_int_equal(be_dev_probe(&fx->ctx, BE1, &d), 0);
	fe_connect(fx, d);
	return d;
}

/* Wait (3 s at most) until queue 0 has measured bytes (it looks every
 * size_check_ms), then the control thread's check. */
static void check_when_measured(struct backend_dev *d, uint64_t bytes)
{
	for (int i = 0; i < 300 && __atomic_load_n(&d->measured_size, __ATOMIC_ACQUIRE) != bytes;
	     i++)
		usleep(10000);
	assert_true(__atomic_load_n(&d->measured_size, __ATOMIC_ACQUIRE) == bytes);
	be_dev_check_size(d);
}

/* Online resize (be_dev_check_size): a grown file is announced (sectors,
 * state Connected again) and the queue takes the new end; a shrunk one
 * is refused and changes nothing. */
static void test_online_resize(void **state)
{
	struct fx *fx = *state;
	struct backend_dev *d = attach_connect(fx);
	const uint64_t new_end = (8u << 20) / 512 - 8;    /* the last page */

	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	assert_int_equal(getu(fx, BE1, "sectors"), 8192);
	check_when_measured(d, 4u << 20);                  /* unchanged: nothing */
	assert_int_equal(getu(fx, BE1, "sectors"), 8192);

	assert_int_equal(ftruncate(fx->fd, 8u << 20), 0);
	assert_int_equal(one_write(fx, &fx->gr[0], new_end), BLKIF_RSP_ERROR);  /* not yet */
	put(fx, BE1, "state", "1");              /* to see that it is written again */
	check_when_measured(d, 8u << 20);
	assert_int_equal(getu(fx, BE1, "sectors"), 16384);
	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	assert_int_equal(one_write(fx, &fx->gr[0], new_end), BLKIF_RSP_OKAY);
	gring_roundtrip(&fx->g, &fx->gr[0], new_end, 1, 2);

	assert_int_equal(ftruncate(fx->fd, 2u << 20), 0);  /* shrunk: refused */
	check_when_measured(d, 2u << 20);
	be_dev_check_size(d);
	assert_int_equal(getu(fx, BE1, "sectors"), 16384);
	assert_true(d->st.size == 8u << 20 && d->refused_size == 2u << 20);

	put(fx, BE1, "online", "0");
	fe_state(fx, FE1, XenbusStateClosed);
	assert_int_equal(be_dev_changed(d), BE_DEV_REMOVE);
	be_dev_remove(d);
}

struct bad_key {
	const char *key, *value;     /* value NULL: remove the key */
	const char *error;           /* start of the error node */
};

/* A good single-queue set of keys, then one bad key; the backend must end
 * in Closing with the error, and recover when the frontend starts over. */
static void test_bad_frontend_keys(void **state)
{
	static const struct bad_key cases[] = {
		{ "protocol", "x86_16-abi", "38 unknown fe protocol x86_16-abi" },
		{ "protocol", "", "38 unknown fe protocol" },
		{ "multi-queue-num-queues", "0", "22 guest requested a bad multi-queue-num-queues" },
		{ "multi-queue-num-queues", "1000", "22 guest requested a bad" },
		{ "multi-queue-num-queues", "two", "22 guest requested a bad" },
		{ "ring-page-order", "9", "22 bad ring-page-order (maximum 4)" },
		{ "ring-page-order", "-1", "22 bad ring-page-order" },
		{ "ring-ref", NULL, "2 reading " FE1 "/ring-ref" },
		{ "ring-ref", "abc", "22 reading " FE1 "/ring-ref" },
		{ "ring-ref", "99999999999", "34 reading" },
		{ "event-channel", "0", "34 reading " FE1 "/event-channel" },
		{ "event-channel", NULL, "2 reading " FE1 "/event-channel" },
		{ "ring-ref", "100000", "22 mapping ring of queue 0" },    /* not a grant */
		{ "event-channel", "4000", "22 mapping ring of queue 0 or binding port 4000" },
	};
	struct fx *fx = *state;
	struct backend_dev *d, *d2;
	char err[160];

	/* a second disk of the same guest keeps serving throughout */
	toolstack_attach(fx, BE2, FE2, "w");
	assert_int_equal(be_dev_probe(&fx->ctx, BE2, &d2), 0);
	gring_share(&fx->g, &fx->gr[2], 0, RING_ABI_X86_32);
	write_queue(fx, FE2, &fx->gr[2], true);
	put(fx, FE2, "protocol", "x86_32-abi");
	fe_state(fx, FE2, XenbusStateInitialised);
	assert_int_equal(be_dev_changed(d2), 0);
	assert_int_equal(be_state(fx, BE2), XenbusStateConnected);

	toolstack_attach(fx, BE1, FE1, "w");
	assert_int_equal(be_dev_probe(&fx->ctx, BE1, &d), 0);
	gring_share(&fx->g, &fx->gr[0], 0, RING_ABI_X86_64);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_queue(fx, FE1, &fx->gr[0], true);
		put(fx, FE1, "protocol", "x86_64-abi");
		xbd_xs_rm(fx->xs, XBT_NULL, FE1, "multi-queue-num-queues");
		xbd_xs_rm(fx->xs, XBT_NULL, FE1, "ring-page-order");
		if (cases[i].value)
			put(fx, FE1, cases[i].key, cases[i].value);
		else
			assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, FE1, cases[i].key), 0);
		fe_state(fx, FE1, XenbusStateInitialised);
		assert_int_equal(be_dev_changed(d), 0);
		assert_int_equal(be_state(fx, BE1), XenbusStateClosing);
		assert_int_equal(xbd_xs_read_buf(fx->xs, XBT_NULL, BE1, "error", err,
						 sizeof(err)), 0);
		if (strncmp(err, cases[i].error, strlen(cases[i].error)))
			fail_msg("%s=%s: error \"%s\", want \"%s...\"", cases[i].key,
				 cases[i].value ? cases[i].value : "(none)", err, cases[i].error);
		assert_null(d->queues);
		/* the frontend gives up and starts over: InitWait, error gone */
		fe_state(fx, FE1, XenbusStateClosed);
		assert_int_equal(be_dev_changed(d), 0);
		fe_state(fx, FE1, XenbusStateInitialising);
		assert_int_equal(be_dev_changed(d), 0);
		assert_int_equal(be_state(fx, BE1), XenbusStateInitWait);
		assert_int_equal(xbd_xs_exists(fx->xs, XBT_NULL, BE1, "error"), 0);
		gring_roundtrip(&fx->g, &fx->gr[2], 8 * i, 10, 11);
	}
	/* and with good keys it connects */
	write_queue(fx, FE1, &fx->gr[0], true);
	put(fx, FE1, "protocol", "x86_64-abi");
	fe_state(fx, FE1, XenbusStateConnected);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	gring_roundtrip(&fx->g, &fx->gr[0], 512, 12, 13);
	be_dev_remove(d);
	be_dev_remove(d2);
}

static void test_probe_failures_and_read_only(void **state)
{
	struct fx *fx = *state;
	struct backend_dev *d;
	char err[160];

	assert_int_equal(be_dev_probe(&fx->ctx, "/local/domain/0/backend/vif/1/0", &d), -EINVAL);
	assert_int_equal(be_dev_probe(&fx->ctx, BE1 "/extra", &d), -EINVAL);

	toolstack_attach(fx, BE1, FE1, "w");
	put(fx, BE1, "params", "/nonexistent/disk.img");
	assert_int_equal(be_dev_probe(&fx->ctx, BE1, &d), -ENOENT);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosing);
	assert_int_equal(xbd_xs_read_buf(fx->xs, XBT_NULL, BE1, "error", err, sizeof(err)), 0);
	assert_string_equal(err, "2 opening /nonexistent/disk.img");
	/* a frontend that goes on anyway gets nothing */
	fe_state(fx, FE1, XenbusStateInitialised);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosing);
	/* the toolstack removes the device */
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, BE1, NULL), 0);
	assert_int_equal(be_dev_changed(d), BE_DEV_REMOVE);
	be_dev_remove(d);

	toolstack_attach(fx, BE1, FE1, "r");
	put(fx, BE1, "frontend-id", "2");
	assert_int_equal(be_dev_probe(&fx->ctx, BE1, &d), -EINVAL);
	be_dev_remove(d);
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, BE1, NULL), 0);

	/* read-only: info says so, no discard, writes refused by the ring */
	toolstack_attach(fx, BE1, FE1, "r");
	assert_int_equal(be_dev_probe(&fx->ctx, BE1, &d), 0);
	assert_int_equal(getu(fx, BE1, "feature-discard"), 0);
	gring_share(&fx->g, &fx->gr[0], 0, RING_ABI_X86_64);
	write_queue(fx, FE1, &fx->gr[0], true);
	fe_state(fx, FE1, XenbusStateInitialised);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(getu(fx, BE1, "info"), VDISK_READONLY);
	/* detach with no frontend using it: closed and removed at once */
	fe_state(fx, FE1, XenbusStateClosed);
	assert_int_equal(be_dev_changed(d), 0);
	put(fx, BE1, "online", "0");
	assert_int_equal(be_dev_changed(d), BE_DEV_REMOVE);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosed);
	be_dev_remove(d);
}

static void test_overrun_is_fatal_for_that_disk(void **state)
{
	struct fx *fx = *state;
	struct backend_dev *d = attach_connect(fx);
	struct pollfd pfd;
	char err[160];

	fx->gr[0].prod += 40;
	push(&fx->gr[0], fx->gr[0].prod - 40);
	pfd = (struct pollfd){ d->queues[0].done_fd, POLLIN, 0 };
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	be_dev_queue_done(d, 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosing);
	assert_int_equal(xbd_xs_read_buf(fx->xs, XBT_NULL, BE1, "error", err, sizeof(err)), 0);
	assert_string_equal(err, "5 queue 0: frontend overran its ring (req_prod 40)");
	assert_null(d->queues);
	be_dev_remove(d);
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait (bounded) for the reaper's eventfd, then let the device act. */
static int reaped(struct backend_dev *d)
{
	struct pollfd pfd = { be_dev_reap_fd(d), POLLIN, 0 };

	assert_true(pfd.fd >= 0);
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	return be_dev_reaped(d);
}

/* The daemon's control plane: queues stopped on a reaper thread (the
 * device waits, says Closed only once they are), and connects of one
 * domain rate-limited (deferred with a timer, not refused). */
static void test_async_teardown_and_connect_rate(void **state)
{
	struct fx *fx = *state;
	struct be_rates rates = { 0 };
	struct backend_dev *d;
	uint64_t at;

	fx->ctx.async_teardown = true;
	fx->ctx.rates = &rates;
	assert_int_equal(tun_set(TUN_MAX_CONNECTS_PER_SECOND, "1", true), 0);
	d = attach_connect(fx);
	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	gring_roundtrip(&fx->g, &fx->gr[0], 0, 0, 1);

	fe_state(fx, FE1, XenbusStateClosed);
	assert_int_equal(be_dev_changed(d), 0);          /* the reaper runs */
	assert_null(d->queues);
	assert_int_equal(be_dev_changed(d), 0);          /* waits: no change */
	assert_int_equal(reaped(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateClosed);
	assert_int_equal(be_dev_reap_fd(d), -1);

	/* a second connect within the second: deferred, with a timer */
	fe_state(fx, FE1, XenbusStateInitialising);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(be_state(fx, BE1), XenbusStateInitWait);
	fe_connect(fx, d);
	assert_int_equal(be_state(fx, BE1), XenbusStateInitWait);
	assert_true(d->retry_ns != 0);
	at = d->retry_ns;
	assert_true(be_dev_timeout_ms(d, at - 1000000) > 0);
	assert_false(be_dev_timer(d, at - 1));
	for (int ms; (ms = be_dev_timeout_ms(d, mono_now())) > 0;)
		usleep((useconds_t)ms * 1000);               /* at most a second */
	assert_true(be_dev_timer(d, mono_now()));
	assert_int_equal(be_dev_changed(d), 0);          /* the bucket allows */
	assert_int_equal(be_state(fx, BE1), XenbusStateConnected);
	gring_roundtrip(&fx->g, &fx->gr[0], 64, 2, 3);

	/* removal with queues: the reaper first, then the device goes */
	assert_int_equal(xbd_xs_rm(fx->xs, XBT_NULL, BE1, NULL), 0);
	assert_int_equal(be_dev_changed(d), 0);
	assert_int_equal(reaped(d), BE_DEV_REMOVE);
	be_dev_remove(d);
	free(rates.e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_probe_connect_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_frontend_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_online_resize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_failures_and_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overrun_is_fatal_for_that_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_async_teardown_and_connect_rate, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
