/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fe_response: a hostile backend's responses against the frontend's
 * real ring and request layer (frontend/ring.c, frontend/request.c).
 *
 * One input: the limits the backend offered, up to 16 application I/Os
 * (every op), then rounds of responses.  The harness issues the I/Os on
 * the ring with the real fe_io_issue_one (indirect pages from a stub pool
 * that checks every page comes back exactly once), then plays the backend:
 * each round writes responses into the ring slots in the ABI's layout and
 * publishes rsp_prod (or any raw value).  A response names an in-flight id
 * with its operation (what a correct backend sends), or anything (raw id,
 * flipped operation, any status).  The frontend consumes them with
 * fe_ring_fetch_rsp + fe_io_complete; when the ring breaks (or a round
 * asks for it) the harness recovers as a reconnect does
 * (fe_shadow_recover, fresh ring) and issues the requeued I/Os again.
 *
 * Checked: no crash/UB/leak; an I/O's completion is reported once, only
 * when none of its requests is on the ring, with 0, -EIO or -EOPNOTSUPP;
 * the shadow table and the ring agree on what is in flight; every
 * indirect page goes back to the pool; after the final recovery nothing
 * is in flight.
 *
 * Input layout: struct fz_hdr, nios x struct fz_io, then rounds of
 * struct fz_round + nrsp x struct fz_rsp until the input ends.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/request.h"
#include "tests/fuzz/fuzz.h"

#define FZ_IOS 16u
#define FZ_POOL 64u
#define FZ_MAX_FRAGS 512u

struct fz_hdr {
	uint8_t cfg0;          /* bit0 x86_32, bits1-3 order%6, bit4 read-only,
				* bit5 flush, bit6 barrier, bit7 discard */
	uint8_t cfg1;          /* bit0 secure, bits1-2 sector size 512<<n */
	uint16_t max_indirect; /* % (FE_MAX_INDIRECT_SEGS+1); 1..11 -> 0 */
	uint16_t disk_blocks;  /* +1 */
	uint8_t nios;          /* % (FZ_IOS+1) */
} __attribute__((packed));

struct fz_io {
	uint8_t op;            /* % 6: enum fe_op */
	uint16_t block;        /* offset in logical blocks */
	uint16_t nblocks;      /* length in logical blocks (rw: % 512 + 1) */
	uint8_t frag_blocks;   /* blocks per fragment (rw), % per-page + 1 */
} __attribute__((packed));

struct fz_round {
	uint8_t nrsp;          /* responses to write this round */
	uint8_t flags;         /* bit0 rsp_prod = raw_prod, bit1 reconnect after */
	uint32_t raw_prod;     /* added to rsp_cons when bit0 */
} __attribute__((packed));

struct fz_rsp {
	uint8_t mode;          /* bit0 raw id, bit1 leave the slot as it is */
	uint8_t pick;          /* which in-flight id (% in flight) */
	uint8_t op_xor;        /* flips bits of the expected operation */
	int8_t status;
	uint64_t raw_id;
} __attribute__((packed));

/* ---- indirect-page pool stub ---------------------------------------------- */

static uint8_t pool_mem[FZ_POOL][4096] __attribute__((aligned(4096)));
static bool pool_out[FZ_POOL];

static int pool_get(void *ctx, struct fe_page *out)
{
	(void)ctx;
	for (unsigned int i = 0; i < FZ_POOL; i++) {
		if (pool_out[i])
			continue;
		pool_out[i] = true;
		out->addr = pool_mem[i];
		out->gref = 5000 + i;
		return 0;
	}
	return -EAGAIN;
}

static void pool_put(void *ctx, const struct fe_page *pg)
{
	unsigned int i = pg->gref - 5000;

	(void)ctx;
	CHECK(i < FZ_POOL && pg->addr == pool_mem[i] && pool_out[i]);
	pool_out[i] = false;
}

static const struct fe_page_ops pool_ops = { pool_get, pool_put, NULL };

/* ---- the I/Os ----------------------------------------------------------- */

struct app {
	struct fe_io io;
	struct fe_frag frags[FZ_MAX_FRAGS];
	bool valid;            /* fe_io_prepare accepted it */
	bool waiting;          /* has requests to issue */
	unsigned int done;     /* completions reported */
};

static struct app apps[FZ_IOS];
static unsigned int napps;

static void io_done(struct app *a, int status)
{
	CHECK(a->done == 0);
	CHECK(a->io.pending == 0 && a->io.issued_all);
	CHECK(status == 0 || status == -EIO || status == -EOPNOTSUPP);
	a->done++;
	a->waiting = false;
}

static void requeue(struct fe_io *io, void *arg)
{
	struct app *a = (struct app *)io;

	(void)arg;
	CHECK(a->valid && !a->done);
	a->waiting = true;
}

static void setup_io(struct app *a, const struct fz_io *in, const struct fe_limits *lim)
{
	unsigned int ss = lim->sector_size, per_page = 4096 / ss;
	uint64_t len;

	memset(a, 0, sizeof(*a));
	a->io.op = (enum fe_op)(in->op % 6);
	a->io.offset = (uint64_t)in->block * ss;
	if (a->io.op == FE_OP_READ || a->io.op == FE_OP_WRITE) {
		unsigned int fb = in->frag_blocks % per_page + 1;

		len = (uint64_t)(in->nblocks % 512 + 1) * ss;
		a->io.len = len;
		for (uint64_t off = 0; off < len && a->io.nfrags < FZ_MAX_FRAGS;) {
			uint64_t l = len - off < (uint64_t)fb * ss ? len - off : (uint64_t)fb * ss;

			a->frags[a->io.nfrags++] = (struct fe_frag){
				.gref = 100 + a->io.nfrags, .offset = 0, .len = (uint16_t)l };
			off += l;
		}
		a->io.frags = a->frags;
	} else if (a->io.op >= FE_OP_DISCARD) {
		a->io.len = (uint64_t)in->nblocks * ss;
	}
	a->valid = fe_io_prepare(lim, &a->io) == 0;
	a->waiting = a->valid;
}

/* ---- the frontend's side ---------------------------------------------------- */

struct fe_state {
	struct fe_limits lim;
	struct fe_ring ring;
	struct fe_shadow_table t;
	enum fe_abi abi;
	unsigned int order;
	void *sring;
	uint32_t bprod;        /* the fake backend's rsp_prod_pvt */
};

static void check_consistent(const struct fe_state *s)
{
	if (!fe_ring_is_broken(&s->ring))
		CHECK(fe_shadow_in_flight(&s->t) == fe_ring_in_flight(&s->ring));
	for (unsigned int i = 0; i < napps; i++)
		if (apps[i].done)
			CHECK(apps[i].io.pending == 0);
}

/* Issue what can be issued, in order (as the queue's wait list does). */
static void issue_all(struct fe_state *s)
{
	for (unsigned int i = 0; i < napps; i++) {
		struct app *a = &apps[i];
		int rc = 1;

		while (a->waiting && rc == 1)
			rc = fe_io_issue_one(&s->t, &s->lim, &s->ring, &pool_ops, &a->io);
		if (rc == 0) {
			a->waiting = false;
			if (a->io.pending == 0)
				io_done(a, a->io.status);   /* nothing left on the ring */
		}
		if (rc < 0 && rc != -EAGAIN)
			CHECK(rc == -EIO && fe_ring_is_broken(&s->ring));
		if (rc == -EAGAIN || rc == -EIO)
			break;
	}
	fe_ring_push(&s->ring);
	check_consistent(s);
}

static int ring_new(struct fe_state *s)
{
	size_t bytes = (size_t)4096 << s->order;

	free(s->sring);
	fe_ring_destroy(&s->ring);
	if (posix_memalign(&s->sring, 4096, bytes))
		return -ENOMEM;
	memset(s->sring, 0, bytes);
	s->bprod = 0;
	return fe_ring_init(&s->ring, s->sring, s->order, s->abi);
}

/* Write one response where the backend would (entry bprod). */
static void put_rsp(struct fe_state *s, const struct fz_rsp *in)
{
	unsigned int stride = s->abi == FE_ABI_X86_32 ? 108 : 112;
	uint8_t *slot = (uint8_t *)s->sring + 64 + (size_t)(s->bprod & (s->ring.size - 1)) * stride;
	uint32_t inflight[1024], n = 0;
	uint64_t id = in->raw_id;
	uint8_t op = 0;
	int16_t status = in->status;

	s->bprod++;
	if (in->mode & 2)
		return;                 /* a stale slot */
	for (uint32_t i = 0; i < s->t.size && n < 1024; i++)
		if (s->t.ent[i].io)
			inflight[n++] = i;
	if (!(in->mode & 1) && n) {
		id = inflight[in->pick % n];
		op = s->t.ent[id].operation;
	}
	op ^= in->op_xor;
	memcpy(slot, &id, 8);
	slot[8] = op;
	slot[9] = 0;
	memcpy(slot + 10, &status, 2);
}

static void consume(struct fe_state *s)
{
	struct fe_rsp rsp;
	int rc;

	while ((rc = fe_ring_fetch_rsp(&s->ring, &rsp)) == 1) {
		struct fe_io *io = fe_io_complete(&s->t, &s->lim, &pool_ops, &rsp);

		if (io)
			io_done((struct app *)io, io->status);
		check_consistent(s);
	}
	CHECK(rc == 0 || (rc == -EIO && fe_ring_is_broken(&s->ring)));
	/* Re-arm rsp_event, as the queue does before sleeping; a response
	 * that slipped in meanwhile is taken in the next round. */
	if (rc == 0)
		fe_ring_final_check(&s->ring);
}

static void reconnect(struct fe_state *s)
{
	fe_shadow_recover(&s->t, &pool_ops, requeue, NULL);
	CHECK(fe_shadow_in_flight(&s->t) == 0);
	CHECK(ring_new(s) == 0);
}

static bool setup(struct fe_state *s, struct cursor *c)
{
	struct fz_hdr h;

	take(c, &h, sizeof(h));
	memset(s, 0, sizeof(*s));
	s->abi = (h.cfg0 & 1) ? FE_ABI_X86_32 : FE_ABI_X86_64;
	s->order = ((h.cfg0 >> 1) & 7) % (FE_RING_MAX_ORDER + 1);
	s->lim = (struct fe_limits){
		.handle = 0x300,
		.sector_size = 512u << ((h.cfg1 >> 1) & 3),
		.max_indirect_segs = h.max_indirect % (FE_MAX_INDIRECT_SEGS + 1),
		.readonly = h.cfg0 & 0x10,
		.flush = h.cfg0 & 0x20,
		.barrier = h.cfg0 & 0x40,
		.discard = h.cfg0 & 0x80,
		.discard_secure = h.cfg1 & 1,
	};
	if (s->lim.max_indirect_segs <= BLKIF_MAX_SEGMENTS_PER_REQUEST)
		s->lim.max_indirect_segs = 0;
	s->lim.sectors = ((uint64_t)h.disk_blocks + 1) * (s->lim.sector_size / 512);
	CHECK(fe_limits_check(&s->lim) == 0);
	if (ring_new(s) || fe_shadow_init(&s->t, s->ring.size))
		return false;
	napps = h.nios % (FZ_IOS + 1);
	for (unsigned int i = 0; i < napps; i++) {
		struct fz_io in;

		take(c, &in, sizeof(in));
		setup_io(&apps[i], &in, &s->lim);
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct fe_state s;
	struct fz_round round;
	int rounds = 0;

	if (!setup(&s, &c))
		return 0;
	issue_all(&s);
	while (take(&c, &round, sizeof(round)) && rounds++ < 256) {
		for (unsigned int k = 0; k < round.nrsp; k++) {
			struct fz_rsp in;

			take(&c, &in, sizeof(in));
			put_rsp(&s, &in);
		}
		((volatile uint32_t *)s.sring)[2] =
			(round.flags & 1) ? s.ring.rsp_cons + round.raw_prod : s.bprod;
		consume(&s);
		if (fe_ring_is_broken(&s.ring) || (round.flags & 2))
			reconnect(&s);
		issue_all(&s);
	}
	/* The end: whatever is still on the ring is taken back (teardown). */
	reconnect(&s);
	for (unsigned int i = 0; i < FZ_POOL; i++)
		CHECK(!pool_out[i]);
	for (unsigned int i = 0; i < napps; i++)
		CHECK(apps[i].done <= 1 && (apps[i].done || !apps[i].valid ||
					    apps[i].waiting));
	if (getenv("FUZZ_VERBOSE"))
		for (unsigned int i = 0; i < napps; i++)
			fprintf(stderr, "io %u op %d valid %d done %u status %d\n", i,
				apps[i].io.op, apps[i].valid, apps[i].done, apps[i].io.status);
	fe_shadow_destroy(&s.t);
	fe_ring_destroy(&s.ring);
	free(s.sring);
	return 0;
}
