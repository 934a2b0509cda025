/* SPDX-License-Identifier: MIT */
/*
 * backend/io_uring: the queue loop end to end on real storage.  The test
 * plays the frontend: it writes requests into a shared ring in memory,
 * kicks an eventfd standing in for the event channel, and checks the
 * responses and the bytes on disk (a file on /tmp, opened O_DIRECT, and a
 * loop device that the teardown always detaches).  The data transport is
 * "guest memory" in this process: grant ref N is page N of an array.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <cmocka.h>

#include "backend/io_uring.h"
#include "backend/tunables.h"
#include "test_be_front.h"
#include "test_be_loop.h"

#define NPAGES   64
#define DISK     (4u << 20)
#define ORDER    1

struct fx {
	char file[64], dev[32];
	int fd, evfd, stopfd;
	struct storage st;
	void *sring;
	struct be_ring ring;
	uint8_t *mem;                /* NPAGES of guest memory */
	struct be_io io;
	enum be_io_wait wait;        /* the wait mode start_io() asks for */
	bool io_up;
	struct be_stats stats;
	struct be_limit lim;         /* the vbd's I/O limits: none unless set */
	unsigned int eagain;         /* map() says -EAGAIN this many times */
	unsigned int notifies, acks;
	struct fe fe;
};

/* ---- transport and event channel over test memory ---------------------- */

static int x_map(void *ctx, struct be_pending *p)
{
	struct fx *fx = ctx;

	if (fx->eagain) {
		fx->eagain--;
		return -EAGAIN;            /* over the memory budget: retried */
	}
	for (unsigned int i = 0; i < p->v.nr_segs; i++) {
		const struct blkif_request_segment *s = &p->v.segs[i];
		if (s->gref >= NPAGES)
			return -EPERM;             /* a grant that does not map */
		p->iov[i].iov_base = fx->mem + (size_t)s->gref * 4096 + req_seg_offset(s);
		p->iov[i].iov_len = req_seg_len(s);
	}
	return 0;
}

static int x_unmap(void *ctx, struct be_pending *p, bool ok)
{
	(void)ctx; (void)p; (void)ok;
	return 0;
}

static int x_map_ind(void *ctx, const grant_ref_t *refs, unsigned int n, void **pages)
{
	struct fx *fx = ctx;

	for (unsigned int i = 0; i < n; i++) {
		if (refs[i] >= NPAGES)
			return -EPERM;
		pages[i] = fx->mem + (size_t)refs[i] * 4096;
	}
	return 0;
}

static void x_unmap_ind(void *ctx, void **pages, unsigned int n)
{
	(void)ctx; (void)pages; (void)n;
}

static const struct be_xport_ops xport = { x_map, x_unmap, x_map_ind, x_unmap_ind, NULL };

static int e_ack(void *ctx)
{
	struct fx *fx = ctx;
	uint64_t v;

	fx->acks++;
	return read(fx->evfd, &v, sizeof(v)) == sizeof(v) ? 0 : -errno;
}

static int e_notify(void *ctx)
{
	((struct fx *)ctx)->notifies++;
	return 0;
}

static const struct be_evt_ops evt = { e_ack, e_notify };

/* ---- fixture --------------------------------------------------------------- */

static int start_io(struct fx *fx, const struct storage_opts *so, const char *target,
		    unsigned int max_ind)
{
	struct be_io_cfg cfg = {
		.ring = &fx->ring, .storage = &fx->st, .xport = &xport, .xport_ctx = fx,
		.evt = &evt, .evt_ctx = fx, .evt_fd = fx->evfd, .stop_fd = fx->stopfd,
		.stats = &fx->stats, .wait = fx->wait, .limit = &fx->lim,
	};
	int rc = storage_open(target, so, &fx->st);

	if (rc)
		return rc;
	cfg.limits = (struct req_limits){
		.sectors = fx->st.size >> 9, .sector_size = fx->st.logical_block,
		.read_only = fx->st.read_only, .flush = true, .barrier = true,
		.discard = fx->st.discard, .discard_secure = fx->st.discard_secure,
		.max_indirect_segs = max_ind,
	};
	rc = be_io_init(&fx->io, &cfg);
	fx->io_up = !rc;
	fe_init(&fx->fe, fx->sring, &fx->ring, fx->evfd, &fx->io);
	return rc;
}

static int setup(void **state)
{
	static struct fx fx;

	memset(&fx, 0, sizeof(fx));
	fx.fd = tmp_backing_file(fx.file, DISK);
	fx.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fx.stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fx.sring = mmap(NULL, 4096u << ORDER, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	fx.mem = mmap(NULL, NPAGES * 4096, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	fx.st.fd = -1;
	be_limit_init(&fx.lim);
	if (fx.fd < 0 || fx.evfd < 0 || fx.stopfd < 0 || fx.sring == MAP_FAILED ||
	    fx.mem == MAP_FAILED)
		return -1;
	((uint32_t *)fx.sring)[1] = 1;   /* SHARED_RING_INIT: req_event = rsp_event = 1 */
	((uint32_t *)fx.sring)[3] = 1;
	if (ring_attach(&fx.ring, fx.sring, ORDER, RING_ABI_X86_64))
		return -1;
	*state = &fx;
	return 0;
}

/* The same fixture with the queue thread sleeping in poll(2). */
static int setup_poll(void **state)
{
	int rc = setup(state);

	((struct fx *)*state)->wait = BE_IO_WAIT_POLL;
	return rc;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	if (fx->io_up)
		be_io_destroy(&fx->io);
	storage_close(&fx->st);
	loop_detach(fx->dev);
	be_limit_destroy(&fx->lim);
	munmap(fx->sring, 4096u << ORDER);
	munmap(fx->mem, NPAGES * 4096);
	close(fx->evfd);
	close(fx->stopfd);
	close(fx->fd);
	unlink(fx->file);
	return 0;
}

static uint8_t *page(struct fx *fx, unsigned int g)
{
	return fx->mem + (size_t)g * 4096;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_write_then_read(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment w[3] = {
		{ 0, 0, 7 }, { 1, 2, 5 }, { 2, 0, 3 } }, r[3] = {
		{ 10, 0, 7 }, { 11, 2, 5 }, { 12, 0, 3 } };
	uint8_t want[8192], got[8192];

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 512), 0);
	assert_true(fx->st.direct);
	for (unsigned int g = 0; g < 3; g++)
		fill(page(fx, g), 4096, g + 1);
	memcpy(want, page(fx, 0), 4096);
	memcpy(want + 4096, page(fx, 1) + 1024, 2048);
	memcpy(want + 6144, page(fx, 2), 2048);

	fe_rw(&fx->fe, BLKIF_OP_WRITE, 7, 8, 3, w);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 7, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_true(fx->notifies >= 1);
	assert_int_equal(pread(fx->fd, got, sizeof(got), 8 * 512), (ssize_t)sizeof(got));
	assert_memory_equal(got, want, sizeof(got));

	fe_rw(&fx->fe, BLKIF_OP_READ, 8, 8, 3, r);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 8, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_memory_equal(page(fx, 10), want, 4096);
	assert_memory_equal(page(fx, 11) + 1024, want + 4096, 2048);
	assert_memory_equal(page(fx, 12), want + 6144, 2048);
	assert_true(fx->stats.wr_req == 1 && fx->stats.rd_req == 1);
	assert_true(fx->stats.wr_sect == 16 && fx->stats.rd_sect == 16);
	assert_true(fx->stats.inflight == 0 && fx->stats.errors == 0);
	assert_true(fx->acks >= 1);   /* the kicks came through the io_uring poll */
	/* the statistics count every kick taken and every notification sent */
	assert_true(fx->stats.evt_in == fx->acks && fx->stats.evt_out == fx->notifies);
}

static void test_indirect_write(void **state)
{
	struct fx *fx = *state;
	static struct blkif_request_segment segs[512];
	uint8_t got[4096];

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 512), 0);
	for (unsigned int g = 20; g < 28; g++)
		fill(page(fx, g), 4096, g);
	for (unsigned int k = 0; k < 300; k++)
		segs[k] = (struct blkif_request_segment){ 20 + k % 8, 0, 7 };
	fe_indirect(&fx->fe, BLKIF_OP_WRITE, 99, 1000, 300, 5, page(fx, 5), segs);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 99, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	for (unsigned int k = 0; k < 300; k += 37) {
		assert_int_equal(pread(fx->fd, got, 4096, (1000 + 8 * k) * 512), 4096);
		assert_memory_equal(got, page(fx, 20 + k % 8), 4096);
	}
	assert_true(fx->stats.wr_sect == 2400);
	/* read it back into other pages, through an indirect request */
	for (unsigned int k = 0; k < 8; k++)
		segs[k] = (struct blkif_request_segment){ 30 + k, 0, 7 };
	fe_indirect(&fx->fe, BLKIF_OP_READ, 100, 1000, 8, 6, page(fx, 6), segs);
	/* more segments than we offered: ERROR, echoing indirect_op */
	fe_indirect(&fx->fe, BLKIF_OP_READ, 101, 0, 513, 5, page(fx, 5), segs);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 2);
	check_id(&fx->fe, 100, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 101, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	for (unsigned int k = 0; k < 8; k++)
		assert_memory_equal(page(fx, 30 + k), page(fx, 20 + k), 4096);
}

static void test_barrier_drains(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment s0[1] = { { 0, 0, 7 } },
		s1[1] = { { 1, 0, 7 } }, s2[1] = { { 2, 0, 7 } };
	uint8_t got[4096];

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	for (unsigned int g = 0; g < 3; g++)
		fill(page(fx, g), 4096, 40 + g);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 1, 0, 1, s0);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 2, 8, 1, s1);
	fe_rw(&fx->fe, BLKIF_OP_WRITE_BARRIER, 3, 0, 0, NULL);
	fe_rw(&fx->fe, BLKIF_OP_FLUSH_DISKCACHE, 4, 16, 1, s2);
	fe_push(&fx->fe);
	assert_int_equal(be_io_run_once(&fx->io, 0), 0);
	/* the barrier holds the ring back until the writes are done */
	assert_int_equal(fx->ring.req_cons, 3);
	fe_wait(&fx->fe, 4);
	/* writes (either order), then the barrier, then the flush */
	assert_true(fx->fe.rsp[0].id + fx->fe.rsp[1].id == 3);
	check_rsp(&fx->fe, 2, 3, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_OKAY);
	check_rsp(&fx->fe, 3, 4, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_RSP_OKAY);
	assert_int_equal(pread(fx->fd, got, 4096, 16 * 512), 4096);
	assert_memory_equal(got, page(fx, 2), 4096);  /* the flush's data */
	assert_true(fx->stats.f_req == 2 && fx->stats.wr_req == 2);
	assert_true(fx->stats.wr_sect == 24);
}

static void test_discard_file(void **state)
{
	struct fx *fx = *state;
	static uint8_t buf[65536], got[65536];
	struct stat before, after;

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	assert_true(fx->st.discard);
	fill(buf, sizeof(buf), 9);
	assert_int_equal(pwrite(fx->fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(fsync(fx->fd), 0);
	assert_int_equal(fstat(fx->fd, &before), 0);
	fe_discard(&fx->fe, 5, 16, 64);          /* bytes 8 KiB .. 40 KiB */
	fe_discard(&fx->fe, 6, DISK / 512 - 8, 9);   /* past the end */
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 2);
	check_id(&fx->fe, 5, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 6, BLKIF_OP_DISCARD, BLKIF_RSP_ERROR);
	assert_int_equal(pread(fx->fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
	assert_memory_equal(got, buf, 8192);
	for (size_t i = 8192; i < 40960; i++)
		assert_int_equal(got[i], 0);
	assert_memory_equal(got + 40960, buf + 40960, sizeof(got) - 40960);
	assert_int_equal(fstat(fx->fd, &after), 0);
	assert_true(after.st_blocks < before.st_blocks);   /* really a hole */
	assert_true(fx->stats.ds_req == 1);
}

static void test_rejections(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment ok[1] = { { 0, 0, 7 } },
		bad_gref[1] = { { NPAGES + 5, 0, 7 } };
	uint8_t got[4096];

	assert_int_equal(start_io(fx, &(struct storage_opts){ .read_only = true },
				  fx->file, 512), 0);
	fill(page(fx, 0), 4096, 77);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 1, 0, 1, ok);                  /* read-only */
	fe_rw(&fx->fe, BLKIF_OP_READ, 2, DISK / 512 - 7, 1, ok);      /* past the end */
	fe_rw(&fx->fe, BLKIF_OP_READ, 3, 0, 1, bad_gref);             /* does not map */
	fe_rw(&fx->fe, 42, 4, 0, 1, ok);                              /* unknown op */
	fe_discard(&fx->fe, 5, 0, 8);                                 /* read-only */
	fe_rw(&fx->fe, BLKIF_OP_READ, 6, 0, 1, ok);                   /* fine */
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 6);
	check_id(&fx->fe, 1, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 2, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 3, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 4, 42, BLKIF_RSP_EOPNOTSUPP);
	check_id(&fx->fe, 5, BLKIF_OP_DISCARD, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 6, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(pread(fx->fd, got, 4096, 0), 4096);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(got[i], 0);       /* nothing was written */
	assert_true(fx->stats.rd_sect == 8);   /* only the good read did I/O */
	assert_true(fx->stats.rd_req == 3 && fx->stats.wr_req == 1);
	assert_true(fx->stats.inflight == 0);
	assert_int_equal(fx->stats.errors, 5);  /* every answer but the good read */
}

static void test_overrun_breaks_ring(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment ok[1] = { { 0, 0, 7 } };

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	fe_rw(&fx->fe, BLKIF_OP_READ, 1, 0, 1, ok);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	fx->fe.prod += fx->ring.nr_ents + 1;  /* claims more than the ring holds */
	fe_push(&fx->fe);
	assert_int_equal(be_io_run_once(&fx->io, 0), -EIO);
	assert_true(fx->ring.broken);
	assert_int_equal(be_io_run_once(&fx->io, 0), -EIO);
	assert_int_equal(__atomic_load_n((uint32_t *)fx->sring + 2, __ATOMIC_RELAXED), 1);
}

static void test_stop_and_wait_for_kick(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment ok[1] = { { 0, 0, 7 } };
	uint64_t one = 1;

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	/* idle: the loop asks for an event on the next request */
	assert_int_equal(be_io_run_once(&fx->io, 0), 0);
	assert_int_equal(((uint32_t *)fx->sring)[1], 1);
	/* a kick alone wakes a waiting loop through the io_uring poll */
	assert_int_equal(write(fx->evfd, &one, sizeof(one)), sizeof(one));
	assert_int_equal(be_io_run_once(&fx->io, 2000), 0);
	assert_int_equal(fx->acks, 1);
	fe_rw(&fx->fe, BLKIF_OP_READ, 1, 0, 1, ok);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	assert_int_equal(fx->acks, 2);         /* re-armed after the first */
	assert_int_equal(((uint32_t *)fx->sring)[1], 2);
	assert_int_equal(write(fx->stopfd, &one, sizeof(one)), sizeof(one));
	assert_int_equal(be_io_run(&fx->io), 0);
}

static void test_loop_device_io(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment w[2] = { { 3, 0, 7 }, { 4, 0, 7 } };
	uint8_t got[8192];

	assert_int_equal(loop_attach(fx->file, fx->dev), 0);
	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->dev, 512), 0);
	assert_true(fx->st.is_blkdev && fx->st.direct);
	fill(page(fx, 3), 4096, 1);
	fill(page(fx, 4), 4096, 2);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 1, 64, 2, w);
	fe_rw(&fx->fe, BLKIF_OP_FLUSH_DISKCACHE, 2, 0, 0, NULL);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 2);
	check_id(&fx->fe, 1, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 2, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_RSP_OKAY);
	assert_int_equal(pread(fx->fd, got, 8192, 64 * 512), 8192);
	assert_memory_equal(got, page(fx, 3), 4096);
	assert_memory_equal(got + 4096, page(fx, 4), 4096);
	/* BLKDISCARD through the loop device punches the backing file */
	fe_discard(&fx->fe, 3, 64, 8);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 3, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	assert_int_equal(pread(fx->fd, got, 8192, 64 * 512), 8192);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(got[i], 0);
	assert_memory_equal(got + 4096, page(fx, 4), 4096);
}

static void test_4k_sectors(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment full[1] = { { 0, 0, 7 } },
		half[1] = { { 0, 0, 3 } };
	uint8_t got[4096];

	assert_int_equal(start_io(fx, &(struct storage_opts){ .sector_size = 4096 },
				  fx->file, 0), 0);
	fill(page(fx, 0), 4096, 3);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 1, 8, 1, full);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 2, 4, 1, full);    /* sector not 4k aligned */
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 3, 16, 1, half);   /* half a block */
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 3);
	check_id(&fx->fe, 1, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 2, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	check_id(&fx->fe, 3, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	assert_int_equal(pread(fx->fd, got, 4096, 4096), 4096);   /* sector 8 = byte 4096 */
	assert_memory_equal(got, page(fx, 0), 4096);
}

/*
 * Adoption: a dead backend took requests 1 and 2 off the ring and never
 * answered them (its journal says so); request 3 is still on the ring.
 * The engine re-runs 1 and 2 from the journal in their journalled slots,
 * then takes 3, and the journal ends up empty.
 */
static void test_replay_from_journal(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment s[3] = {
		{ 0, 0, 7 }, { 1, 0, 7 }, { 2, 0, 7 } };
	struct be_journal_id id = { .generation = 1, .fe_domid = 1 };
	struct be_journal *j = NULL;
	struct be_replay plan;
	struct ring_req rq;
	char path[96];
	uint8_t got[4096];

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	for (unsigned int g = 0; g < 3; g++) {
		fill(page(fx, g), 4096, g + 20);
		fe_rw(&fx->fe, BLKIF_OP_WRITE, g + 1, 8 * g, 1, &s[g]);
	}
	snprintf(path, sizeof(path), "%s.journal", fx->file);
	assert_int_equal(be_journal_create(path, &id, fx->ring.nr_ents, 0, &j), 0);
	for (unsigned int i = 0; i < 2; i++) {      /* what the dead one took */
		ring_fetch_req(&fx->ring, i, &rq);
		be_journal_record(j, 5 - i, i, &rq);
	}
	be_journal_close(j);

	assert_int_equal(be_journal_load(path, &id, fx->ring.nr_ents, 0, &plan, &j), 0);
	assert_int_equal(plan.n, 2);
	assert_int_equal(ring_adopt(&fx->ring, plan.req_cons), 0);
	/* the first act on an adopted ring: one notification (issue 20) */
	assert_int_equal(be_io_announce(&fx->io), 0);
	assert_int_equal(fx->notifies, 1);
	assert_int_equal(fx->stats.evt_out, 1);
	assert_int_equal(be_io_replay(&fx->io, &plan), 0);
	fx->io.cfg.journal = j;
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 3);
	for (unsigned int g = 0; g < 3; g++) {
		check_id(&fx->fe, g + 1, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
		assert_int_equal(pread(fx->fd, got, 4096, 4096 * g), 4096);
		assert_memory_equal(got, page(fx, g), 4096);
	}
	assert_int_equal(fx->stats.replayed_req, 2);
	assert_int_equal(fx->stats.wr_req, 3);
	be_io_destroy(&fx->io);
	fx->io_up = false;
	be_journal_close(j);
	/* every answer published and cleared: nothing left to re-run */
	assert_int_equal(be_journal_load(path, &id, fx->ring.nr_ents, 3, &plan, &j), 0);
	assert_int_equal(plan.n, 0);
	assert_int_equal(plan.req_cons, 3);
	be_replay_free(&plan);
	be_journal_close(j);
	unlink(path);
}

/* A journalled request is validated again when it is re-run: one past
 * the end of the disk is answered ERROR, with no I/O. */
static void test_replayed_request_is_validated_again(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment s = { 0, 0, 7 };
	struct be_replay plan = { .req_cons = 1, .n = 1 };
	struct be_replay_ent e = { .slot = 0, .idx = 0 };

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	fe_rw(&fx->fe, BLKIF_OP_WRITE, 77, DISK / 512, 1, &s);   /* the slot */
	ring_fetch_req(&fx->ring, 0, &e.req);
	plan.e = malloc(sizeof(e));
	assert_non_null(plan.e);
	*plan.e = e;
	assert_int_equal(ring_adopt(&fx->ring, plan.req_cons), 0);
	assert_int_equal(be_io_replay(&fx->io, &plan), 0);
	assert_null(plan.e);                           /* the engine owns it */
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 77, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	assert_int_equal(fx->stats.replayed_req, 1);
	assert_int_equal(fx->stats.wr_sect, 0);
}

/* ---- where the queue thread sleeps ----------------------------------------- */

/* A watcher thread reads the syscall the loop's thread sleeps in from
 * /proc (the same number for 50 ms in a row: blocked, not passing by),
 * then kicks the event channel to wake it. */
struct watch {
	pid_t tid;
	int evfd;
	long nr;                     /* the syscall, -1: never seen blocked */
};

/* Polling (io_uring.c "Polling"): a busy queue spins before it sleeps,
 * arms req_event (req_cons + 1) before every sleep, and an idle queue
 * does not spin at all. */
static void test_poll_spins_then_arms_and_idles(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment r[1] = { { 0, 0, 7 } };
	uint64_t polls;

	setenv("XBD_TEST_POLL_IGNORE_LOAD", "1", 1);   /* whatever the load */
	assert_int_equal(tun_set(TUN_POLL_DURATION_US, "200", false), 0);
	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	fe_rw(&fx->fe, BLKIF_OP_READ, 1, 0, 1, r);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_true(fx->stats.polls >= 1);   /* it spun while it worked */
	/* nothing comes: one more spin (it just worked), then armed */
	polls = fx->stats.polls;
	assert_int_equal(be_io_run_once(&fx->io, 1), 0);
	assert_true(fx->stats.polls == polls + 1);
	assert_int_equal(((uint32_t *)fx->sring)[1], fx->ring.req_cons + 1);
	/* idle now: no spin, whatever the window */
	for (int i = 0; i < 3; i++)
		assert_int_equal(be_io_run_once(&fx->io, 1), 0);
	assert_true(fx->stats.polls == polls + 1);
	/* a request on the armed ring: kicked, taken, spun after again */
	fe_rw(&fx->fe, BLKIF_OP_READ, 2, 8, 1, r);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 2, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_true(fx->stats.polls > polls + 1);
	assert_true(fx->stats.poll_hits <= fx->stats.polls);
	assert_int_equal(tun_set(TUN_POLL_DURATION_US, "0", false), 0);
	unsetenv("XBD_TEST_POLL_IGNORE_LOAD");
}

/* poll_duration_us 0: never a spin. */
static void test_poll_off_never_spins(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment r[1] = { { 0, 0, 7 } };

	assert_int_equal(tun_set(TUN_POLL_DURATION_US, "0", false), 0);
	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	for (unsigned int i = 0; i < 4; i++) {
		fe_rw(&fx->fe, BLKIF_OP_READ, i, 8 * i, 1, r);
		fe_push(&fx->fe);
		fe_wait(&fx->fe, 1);
	}
	assert_int_equal(be_io_run_once(&fx->io, 1), 0);
	assert_true(fx->stats.polls == 0 && fx->stats.poll_hits == 0);
	assert_int_equal(((uint32_t *)fx->sring)[1], fx->ring.req_cons + 1);
}

static long blocked_in(pid_t tid)
{
	char path[64], buf[256];
	FILE *f;
	long nr = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld", &nr) != 1)
		nr = -1;                 /* "running" */
	fclose(f);
	return nr;
}

static void *watcher(void *arg)
{
	struct watch *w = arg;
	const struct timespec ms = { 0, 1000000 };
	long last = -1;
	uint64_t one = 1;

	for (int i = 0, same = 0; i < 3000 && same < 50; i++) {
		long nr = blocked_in(w->tid);

		same = nr >= 0 && nr == last ? same + 1 : 0;
		last = nr;
		nanosleep(&ms, NULL);
	}
	w->nr = last;
	if (write(w->evfd, &one, sizeof(one)) != sizeof(one))
		w->nr = -2;
	return NULL;
}

/* want[]: the syscalls that count as sleeping in the mode's place. */
static void sleeps_in(struct fx *fx, enum be_io_wait mode, const long *want, size_t n)
{
	struct watch w = { (pid_t)syscall(SYS_gettid), fx->evfd, -1 };
	pthread_t t;

	fx->wait = mode;
	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	assert_int_equal(be_io_run_once(&fx->io, 0), 0);    /* submit the polls */
	assert_int_equal(be_io_run_once(&fx->io, 20), 0);   /* a timeout is quiet */
	assert_int_equal(fx->acks, 0);
	assert_int_equal(pthread_create(&t, NULL, watcher, &w), 0);
	assert_int_equal(be_io_run_once(&fx->io, 10000), 0);  /* the kick wakes it */
	pthread_join(t, NULL);
	assert_int_equal(fx->acks, 1);
	for (size_t i = 0; w.nr != want[i]; i++)
		if (i + 1 == n)
			fail_msg("the queue loop slept in syscall %ld, expected %ld", w.nr, want[0]);
	be_io_destroy(&fx->io);
	fx->io_up = false;
	storage_close(&fx->st);
}

static void test_wait_mode_decides_where_it_sleeps(void **state)
{
	struct fx *fx = *state;
	static const long uring[] = { SYS_io_uring_enter };
	/* a poll that task work interrupted goes on as restart_syscall */
	static const long poll[] = { SYS_poll, SYS_ppoll, SYS_restart_syscall };

	sleeps_in(fx, BE_IO_WAIT_URING, uring, 1);
	fx->acks = 0;
	sleeps_in(fx, BE_IO_WAIT_POLL, poll, 3);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Tokens left in bucket k (the test reads the limiter's own state). */
static double tokens(struct fx *fx, enum be_limit_key k)
{
	return fx->lim.b[k].level;
}

/* Under read_iops / write_iops of 1 per second with a burst of 10 (so
 * nothing waits and the refill during the test is < 1 token): a read
 * that waits three times for the memory budget is charged one op, not
 * one per retry; a discard and a flush without data are one write op
 * each and take nothing from write_bps (no data); a write one op. */
static void test_limits_charge_each_request_once(void **state)
{
	struct fx *fx = *state;
	static const struct blkif_request_segment r[1] = { { 10, 0, 7 } };
	uint64_t now = mono_ns();

	assert_int_equal(start_io(fx, &(struct storage_opts){ 0 }, fx->file, 0), 0);
	be_limit_set(&fx->lim, BE_LIM_READ_IOPS, 1, now);
	be_limit_set(&fx->lim, BE_LIM_WRITE_IOPS, 1, now);
	be_limit_set(&fx->lim, BE_LIM_READ_IOPS_BURST, 10, now);
	be_limit_set(&fx->lim, BE_LIM_WRITE_IOPS_BURST, 10, now);
	be_limit_set(&fx->lim, BE_LIM_WRITE_BPS, 1 << 20, now);
	be_limit_set(&fx->lim, BE_LIM_WRITE_BPS_BURST, 1 << 20, now);
	be_limit_fill(&fx->lim, now);

	fx->eagain = 3;
	fe_rw(&fx->fe, BLKIF_OP_READ, 1, 0, 1, r);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 1);
	check_id(&fx->fe, 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(fx->eagain, 0);
	assert_true(fx->stats.mem_waits == 1);
	print_message("read_iops tokens after one read with 3 retries: %.2f of 10\n",
		      tokens(fx, BE_LIM_READ_IOPS));
	assert_true(tokens(fx, BE_LIM_READ_IOPS) > 8.5 &&
		    tokens(fx, BE_LIM_READ_IOPS) < 9.9);

	fe_discard(&fx->fe, 2, 16, 64);
	fe_rw(&fx->fe, BLKIF_OP_FLUSH_DISKCACHE, 3, 0, 0, NULL);
	fe_push(&fx->fe);
	fe_wait(&fx->fe, 2);
	check_id(&fx->fe, 2, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	check_id(&fx->fe, 3, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_RSP_OKAY);
	print_message("write_iops tokens after a discard and a flush: %.2f of 10\n",
		      tokens(fx, BE_LIM_WRITE_IOPS));
	assert_true(tokens(fx, BE_LIM_WRITE_IOPS) > 7.5 &&
		    tokens(fx, BE_LIM_WRITE_IOPS) < 8.9);
	assert_true(tokens(fx, BE_LIM_WRITE_BPS) == (double)(1 << 20));
	assert_true(tokens(fx, BE_LIM_READ_IOPS) > 8.5);     /* writes only */
	assert_true(be_limit_waits(&fx->lim) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_then_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_barrier_drains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discard_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rejections, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits_charge_each_request_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_overrun_breaks_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_and_wait_for_kick, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_device_io, setup, teardown),
		cmocka_unit_test_setup_teardown(test_4k_sectors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_from_journal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replayed_request_is_validated_again, setup,
						teardown),
		/* BE_IO_WAIT_POLL: the same I/O, kicks and stop through poll(2) */
		cmocka_unit_test_setup_teardown(test_write_then_read, setup_poll, teardown),
		cmocka_unit_test_setup_teardown(test_barrier_drains, setup_poll, teardown),
		cmocka_unit_test_setup_teardown(test_stop_and_wait_for_kick, setup_poll, teardown),
		cmocka_unit_test_setup_teardown(test_poll_spins_then_arms_and_idles, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_poll_spins_then_arms_and_idles, setup_poll,
						teardown),
		cmocka_unit_test_setup_teardown(test_poll_off_never_spins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_mode_decides_where_it_sleeps, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
