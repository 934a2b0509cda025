/* SPDX-License-Identifier: MIT */
/*
 * backend/gnt: the grant transport under the queue loop, on the real
 * local platform and a real file: persistent grants (mapped once, reused,
 * purged), grant copy for small requests, batch maps for large ones, and
 * every grant that cannot be used answered BLKIF_RSP_ERROR.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "backend/gnt.h"
#include "backend/tunables.h"
#include "test_be_front.h"
#include "test_be_guest.h"
#include "test_be_loop.h"

struct fx {
	struct guest g;
	char file[64];
	int fd, evfd;
	struct storage st;
	void *sring;
	struct be_ring ring;
	struct gnt_xport x;
	bool x_up, io_up;
	struct be_io io;
	struct be_stats stats;
	struct fe fe;
	const struct be_xport_ops *ops;   /* NULL: gnt_xport_ops itself */
};

static int e_ack(void *ctx)
{
	uint64_t v;

	return read(((struct fx *)ctx)->evfd, &v, sizeof(v)) == sizeof(v) ? 0 : -errno;
}

static int e_notify(void *ctx)
{
	(void)ctx;
	return 0;
}

static const struct be_evt_ops evt = { e_ack, e_notify };

static int start(struct fx *fx, bool persistent)
{
	struct be_io_cfg cfg = {
		.ring = &fx->ring, .storage = &fx->st,
		.xport = fx->ops ? fx->ops : &gnt_xport_ops,
		.xport_ctx = &fx->x, .evt = &evt, .evt_ctx = fx, .evt_fd = fx->evfd,
		.stop_fd = -1, .stats = &fx->stats,
		.limits = { .sectors = 8192, .sector_size = 512, .flush = true,
			    .barrier = true, .max_indirect_segs = 256 },
	};
	int rc = gnt_xport_init(&fx->x, fx->g.gt, 1, persistent);

	fx->x_up = !rc;
	if (!rc)
		rc = be_io_init(&fx->io, &cfg);
	fx->io_up = !rc;
	fe_init(&fx->fe, fx->sring, &fx->ring, fx->evfd, &fx->io);
	return rc;
}

static int setup(void **state)
{
	static struct fx fx;

	memset(&fx, 0, sizeof(fx));
	tun_init();
	fx.st.fd = -1;
	if (guest_up(&fx.g))
		return -1;
	fx.fd = tmp_backing_file(fx.file, 4u << 20);
	fx.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fx.sring = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (fx.fd < 0 || fx.evfd < 0 || fx.sring == MAP_FAILED ||
	    storage_open(fx.file, &(struct storage_opts){ 0 }, &fx.st) ||
	    ring_attach(&fx.ring, fx.sring, 0, RING_ABI_X86_64))
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	if (fx->io_up)
		be_io_destroy(&fx->io);
	if (fx->x_up)
		assert_int_equal(gnt_xport_destroy(&fx->x), 0);   /* nothing left in use */
	storage_close(&fx->st);
	munmap(fx->sring, 4096);
	close(fx->evfd);
	close(fx->fd);
	unlink(fx->file);
	guest_down(&fx->g);
	return 0;
}

/* n full-page segments on writable grants first.. */
static void segs_of(struct fx *fx, unsigned int first, unsigned int n,
		    struct blkif_request_segment *s)
{
	for (unsigned int i = 0; i < n; i++)
		s[i] = (struct blkif_request_segment){ fx->g.rw[first + i], 0, 7 };
}

/* Write pages [w, w+n) at sector, read them back into [r, r+n), compare
 * the file and the guest's pages. */
static void write_read(struct fx *fx, unsigned int w, unsigned int r, unsigned int n,
		       uint64_t sector, uint64_t id)
{
	struct blkif_request_segment s[11];
	uint8_t got[4096];

	for (unsigned int i = 0; i < n; i++)
		fill(guest_page(&fx->g, w + i), 4096, (unsigned int)id + i);
	segs_of(fx, w, n, s);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, id, sector, n, s);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, id, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	segs_of(fx, r, n, s);
	fe_rw(&fx->fe, BLKIF_OP_READ, id + 1, sector, n, s);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, id + 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(pread(fx->fd, got, 4096, (off_t)(sector + 8 * i) * 512), 4096);
		assert_memory_equal(got, guest_page(&fx->g, w + i), 4096);
		assert_memory_equal(guest_page(&fx->g, r + i), got, 4096);
	}
}

static void test_persistent(void **state)
{
	struct fx *fx = *state;

	assert_int_equal(start(fx, true), 0);
	write_read(fx, 0, 20, 3, 0, 10);
	assert_int_equal(fx->x.pool.count, 6);
	assert_true(fx->x.pool.stats.misses == 6 && fx->x.pool.stats.hits == 0);
	write_read(fx, 0, 20, 3, 64, 20);               /* the same pages again */
	assert_int_equal(fx->x.pool.count, 6);
	assert_true(fx->x.pool.stats.hits == 6);
	assert_int_equal(fx->x.pool.in_use, 0);
	assert_true(fx->x.stats.persistent == 4 && fx->x.stats.mapped == 0);
	/* a read-only grant cannot serve a persistent connection */
	struct blkif_request_segment ro = { fx->g.ro[0], 0, 7 };
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 30, 0, 1, &ro);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 30, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	/* the purge runs from the loop: idle grants go after the timeout */
	assert_int_equal(tun_set(TUN_PERSISTENT_GRANT_UNUSED_SECONDS, "1", true), 0);
	gnt_xport_ops.tick(&fx->x, UINT64_MAX / 2);
	assert_int_equal(fx->x.pool.count, 0);
}

/* Persistent mode, pool full: a request with grants the pool cannot take
 * is copied, not mapped one-off page by page. */
static void test_persistent_overflow_copies(void **state)
{
	struct fx *fx = *state;

	assert_int_equal(start(fx, true), 0);
	assert_int_equal(tun_set(TUN_MAX_PERSISTENT_GRANTS, "3", true), 0);
	write_read(fx, 0, 20, 3, 0, 10);        /* write fills the pool; read copies */
	assert_int_equal(fx->x.pool.count, 3);
	assert_true(fx->x.stats.persistent == 1 && fx->x.stats.copied == 1);
	assert_true(fx->x.stats.mapped == 0 && fx->x.pool.overflow);
	write_read(fx, 0, 0, 3, 64, 20);        /* cached grants stay persistent */
	assert_true(fx->x.stats.persistent == 3 && fx->x.stats.copied == 1);
	assert_int_equal(fx->x.pool.in_use, 0);
	assert_int_equal(fx->x.pages_out, 0);
}

/* The ring bounds the pool below max_persistent_grants: what the ring
 * cannot have in flight at once, the queue does not keep mapped; and the
 * tunable still bounds a ring that could hold more. */
static void test_pool_bounded_by_ring(void **state)
{
	struct fx *fx = *state;

	assert_int_equal(start(fx, true), 0);
	assert_int_equal(tun_set(TUN_MAX_PERSISTENT_GRANTS, "5", true), 0);
	gnt_xport_bound(&fx->x, 3);
	assert_int_equal(gnt_xport_pool_cap(&fx->x), 3);
	write_read(fx, 0, 20, 3, 0, 10);        /* write fills the pool; read copies */
	assert_int_equal(fx->x.pool.count, 3);
	assert_true(fx->x.stats.persistent == 1 && fx->x.stats.copied == 1);
	gnt_xport_bound(&fx->x, 64);            /* a larger ring: the tunable's 5 */
	assert_int_equal(gnt_xport_pool_cap(&fx->x), 5);
	gnt_xport_bound(&fx->x, 0);
	assert_int_equal(gnt_xport_pool_cap(&fx->x), 5);
	assert_int_equal(fx->x.pool.in_use, 0);
}

static void test_copy_small_map_large(void **state)
{
	struct fx *fx = *state;

	assert_int_equal(start(fx, false), 0);
	assert_int_equal(tun_set(TUN_GRANT_COPY_MAX_BYTES, "8192", true), 0);
	write_read(fx, 0, 20, 2, 0, 10);                /* 8 KiB: copied */
	assert_true(fx->x.stats.copied == 2 && fx->x.stats.mapped == 0);
	write_read(fx, 40, 60, 11, 128, 20);            /* 44 KiB: mapped */
	assert_true(fx->x.stats.mapped == 2);
	assert_int_equal(fx->x.pool.count, 0);          /* nothing persistent */
	/* pages used for copies stay in the buffer pool, up to the tunable */
	assert_true(fx->x.nr_free == 2);
	/* the trim spares pages used since the last tick (a busy queue would
	 * need them again at once), then frees those idle for a whole tick */
	assert_int_equal(tun_set(TUN_MAX_BUFFER_PAGES, "0", true), 0);
	gnt_xport_ops.tick(&fx->x, UINT64_MAX / 2);
	assert_int_equal(fx->x.nr_free, 2);
	gnt_xport_ops.tick(&fx->x, UINT64_MAX / 2);
	assert_int_equal(fx->x.nr_free, 0);
	/* 0 bytes copied at most: everything is mapped */
	assert_int_equal(tun_set(TUN_GRANT_COPY_MAX_BYTES, "0", true), 0);
	write_read(fx, 0, 20, 1, 256, 30);
	assert_true(fx->x.stats.mapped == 4 && fx->x.stats.copied == 2);
}

static void test_unusable_grants(void **state)
{
	struct fx *fx = *state;
	struct blkif_request_segment ro = { fx->g.ro[1], 0, 7 },
		bogus = { 100000, 0, 7 }, ro_big[4];

	assert_int_equal(start(fx, false), 0);
	for (unsigned int i = 0; i < 4; i++)
		ro_big[i] = (struct blkif_request_segment){ fx->g.ro[i], 0, 7 };
	memset(fx->g.ro_mem, 0x33, 4096);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 1, 0, 1, &ro);       /* copy from RO: fine */
	fe_rw(&fx->fe, BLKIF_OP_READ, 2, 0, 1, &ro);        /* copy into RO: no */
	fe_rw(&fx->fe, BLKIF_OP_READ, 3, 0, 4, ro_big);     /* map RO for read: no */
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 4, 0, 4, ro_big);    /* map RO for write: fine */
	fe_rw(&fx->fe, BLKIF_OP_READ, 5, 0, 1, &bogus);     /* no such grant */
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 6, 0, 4, (struct blkif_request_segment[4]){
		{ fx->g.rw[0], 0, 7 }, { fx->g.rw[1], 0, 7 }, { 100000, 0, 7 },
		{ fx->g.rw[2], 0, 7 } });                  /* one bad in a batch */
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 6);
	check_id(&fx->fe, 1, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 2, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 3, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 4, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 5, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 6, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	for (unsigned int i = 0; i < 4096; i++)
		assert_int_equal(fx->g.ro_mem[i], 0x33);    /* never written */
}

static void test_indirect_over_grants(void **state)
{
	struct fx *fx = *state;
	struct blkif_request_segment s[40];
	uint8_t got[4096];

	assert_int_equal(start(fx, true), 0);
	for (unsigned int i = 0; i < 40; i++) {
		fill(guest_page(&fx->g, 100 + i), 4096, 7 * i);
		s[i] = (struct blkif_request_segment){ fx->g.rw[100 + i], 0, 7 };
	}
	/* the indirect page is a (read-only) grant of its own */
	fe_indirect(&fx->fe, BLKIF_OP_WRITE, 1, 800, 40, fx->g.ro[7],
		    fx->g.ro_mem + 7 * 4096, s);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 1, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	for (unsigned int i = 0; i < 40; i += 13) {
		assert_int_equal(pread(fx->fd, got, 4096, (800 + 8 * i) * 512), 4096);
		assert_memory_equal(got, guest_page(&fx->g, 100 + i), 4096);
	}
	/* an indirect page that does not map */
	fe_indirect(&fx->fe, BLKIF_OP_READ, 2, 800, 1, 100000, guest_page(&fx->g, 299), s);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 2, BLKIF_OP_READ, BLKIF_RSP_ERROR);
}

/* Five 256-page indirect reads in one push: n fit the budget, the rest
 * wait on the ring (nothing more is taken) and go once pages come back;
 * every one succeeds, and everything charged is given back. */
static void five_big_reads(struct fx *fx, uint64_t id)
{
	struct blkif_request_segment s[256];

	for (unsigned int i = 0; i < 256; i++)
		s[i] = (struct blkif_request_segment){ fx->g.rw[i], 0, 7 };
	for (unsigned int i = 0; i < 5; i++)
		fe_indirect(&fx->fe, BLKIF_OP_READ, id + i, 0, 256, fx->g.ro[0],
			    fx->g.ro_mem, s);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 5);
	for (unsigned int i = 0; i < 5; i++)
		check_id(&fx->fe, id + i, BLKIF_OP_READ, BLKIF_RSP_OKAY);
}

static void test_budget_waits_not_fails(void **state)
{
	struct fx *fx = *state;
	struct gnt_budget vbd = { 0 };

	assert_int_equal(start(fx, false), 0);           /* 256 segments: mapped */
	gnt_xport_budget(&fx->x, &vbd);
	/* the queue's own budget: four requests' pages, the fifth waits */
	assert_int_equal(tun_set(TUN_MAX_QUEUE_PAGES, "1024", true), 0);
	five_big_reads(fx, 10);
	assert_true(fx->stats.mem_waits >= 1 && fx->x.stats.budget_waits >= 1);
	assert_true(fx->x.stats.mapped == 5 && fx->x.maps_out == 0);
	assert_true(fx->x.charged == 0 && vbd.pages == 0 && gnt_budget_total() == 0);
	/* the vbd's budget: the same, and the other queues are squeezed */
	uint64_t sq = gnt_squeeze_until(), waits = fx->stats.mem_waits;
	assert_int_equal(tun_set(TUN_MAX_QUEUE_PAGES, "16384", true), 0);
	assert_int_equal(tun_set(TUN_MAX_VBD_PAGES, "1024", true), 0);
	five_big_reads(fx, 20);
	assert_true(fx->stats.mem_waits > waits && gnt_squeeze_until() > sq);
	assert_true(fx->x.charged == 0 && vbd.pages == 0 && gnt_budget_total() == 0);
	/* below every limit nothing waits */
	assert_int_equal(tun_set(TUN_MAX_VBD_PAGES, "32768", true), 0);
	waits = fx->stats.mem_waits;
	five_big_reads(fx, 30);
	assert_true(fx->stats.mem_waits == waits);
}

/* gnt_xport_ops, with the most pages the queue had mapped when it mapped
 * a request's indirect pages (counted here, by the test, whatever the
 * transport charges). */
static unsigned int peak_at_indirect;

static int peak_map_ind(void *ctx, const grant_ref_t *refs, unsigned int n, void **pages)
{
	const struct gnt_xport *x = ctx;
	int rc = gnt_xport_ops.map_indirect(ctx, refs, n, pages);
	unsigned int mapped = x->nr_free + x->pages_out + x->maps_out + x->pool.count + n;

	if (!rc && mapped > peak_at_indirect)
		peak_at_indirect = mapped;
	return rc;
}

/* Issue 18 item 1: indirect pages are pages the guest makes the backend
 * map.  Four 256-page reads fill max_queue_pages=1024; the fifth one's
 * indirect page must wait like its data (without the charge it was
 * mapped over the budget: 1025 pages). */
static void test_budget_counts_indirect_pages(void **state)
{
	struct fx *fx = *state;
	static struct be_xport_ops ops;

	ops = gnt_xport_ops;
	ops.map_indirect = peak_map_ind;
	fx->ops = &ops;
	peak_at_indirect = 0;
	assert_int_equal(start(fx, false), 0);
	assert_int_equal(tun_set(TUN_MAX_QUEUE_PAGES, "1024", true), 0);
	five_big_reads(fx, 10);
	print_message("most pages mapped at an indirect fetch: %u (budget 1024)\n",
		      peak_at_indirect);
	assert_true(peak_at_indirect >= 257 && peak_at_indirect <= 1024);
	assert_true(fx->stats.mem_waits >= 1);
	assert_true(fx->x.ind_out == 0 && fx->x.charged == 0 && gnt_budget_total() == 0);
	assert_int_equal(tun_set(TUN_MAX_QUEUE_PAGES, "16384", true), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_persistent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persistent_overflow_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_bounded_by_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_small_map_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unusable_grants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_over_grants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_waits_not_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_counts_indirect_pages, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
