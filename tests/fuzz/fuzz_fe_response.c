/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fe_response: a hostile backend's responses against the frontend's
 * real channel (frontend/channel.c with ring.c, request.c, gntpool.c) on
 * the real local platform (a private run directory on /dev/shm; this
 * process is the guest, domain 1, and maps the rings as domain 0).
 *
 * One input: the limits the backend offered, up to 16 application I/Os
 * (every op, data as iovecs cut in pieces), then rounds of responses.
 * The harness submits the I/Os on a fresh channel (bounce and indirect
 * pages from its grant pool), then plays the backend: it copies every
 * request published, and each round writes responses into the ring slots
 * in the ABI's layout and publishes rsp_prod (or any raw value).  A
 * response names an unanswered request's id with its operation (what a
 * correct backend sends), or anything (raw id, flipped operation, any
 * status).  The channel takes them in xbdfront_reap's path (fe_chan_reap);
 * a round may ask for a reconnect (fe_chan_reset: fresh ring, requests
 * taken back and issued again).  A broken ring kills the channel, as in
 * the library; the input then ends.
 *
 * Checked: no crash/UB/leak; every accepted I/O completes exactly once,
 * with 0, -EIO, -EOPNOTSUPP or -ENODEV (the final teardown); refused ones
 * never; once the channel is gone every pool page came back (the pool
 * asserts it).
 *
 * Input layout: struct fz_hdr, nios x struct fz_io, then rounds of
 * struct fz_round + nrsp x struct fz_rsp until the input ends.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sanitizer/asan_interface.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "frontend/channel.h"
#include "platform/private.h"
#include "tests/fuzz/fuzz.h"

#define FZ_IOS 16u
#define FZ_POOL 4096u          /* pages: more than 16 I/Os of 256 KiB */
#define FZ_MAX_PIECES 64u
#define FZ_DATA (16u * 512 * 4096)

struct fz_hdr {
	uint8_t cfg0;          /* bit0 x86_32, bits1-3 order%6, bit4 read-only,
				* bit5 flush, bit6 barrier, bit7 discard */
	uint8_t cfg1;          /* bit0 secure, bits1-2 sector size 512<<n */
	uint16_t max_indirect; /* % (FE_MAX_INDIRECT_SEGS+1); 1..11 -> 0 */
	uint16_t disk_blocks;  /* +1 */
	uint8_t nios;          /* % (FZ_IOS+1) */
} __attribute__((packed));

struct fz_io {
	uint8_t op;            /* % 6: enum xbdfront_op */
	uint16_t block;        /* offset in logical blocks */
	uint16_t nblocks;      /* length in logical blocks (rw: % 512 + 1) */
	uint8_t frag_blocks;   /* blocks per iovec piece (rw), % per-page + 1 */
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

/* ---- the machine: a fake platform, in process ------------------------------ */

/*
 * The frontend's grant sharing and event channel are the platform's
 * (lib/platform/private.h ops), replaced here by an in-memory one: no
 * files, no mmap, no system call per input.  Shared pages come from a
 * bump arena that is poisoned for ASan from the unshare on (a use after
 * the unshare is reported) and rewound when an input has ended and
 * nothing is shared.  Grant refs are handed out in order per input; the
 * backend side of the harness finds a ref's page in the table (what a
 * grant map would give it) and checks the ring is one contiguous share.
 */
#define FZ_PAGE 4096u
#define FZ_ARENA_PAGES 32768u           /* 128 MiB of address space */
#define FZ_REFS 32768u
#define FZ_SHARES 8192u

struct fz_share {
	struct xbd_gntshr *gs;
	uint8_t *addr;
	unsigned int count;
	xbd_grant_ref_t first;
};

static struct {
	struct xbd_platform plat;
	struct xbd_domain dom;
	struct fe_bufs bufs;            /* none: every I/O is bounced */
	uint8_t *arena;
	size_t arena_next;
	uint8_t *ref_page[FZ_REFS];
	xbd_grant_ref_t next_ref;
	struct fz_share shares[FZ_SHARES];
	unsigned int nshares;
	unsigned int handles;           /* gntshr + evtchn open */
	int evt_fd;
} M;

static void observe(uint64_t a, uint64_t b);

static int fz_gntshr_open(struct xbd_domain *d, struct xbd_gntshr **out)
{
	struct xbd_gntshr *gs = malloc(sizeof(*gs));

	CHECK(d == &M.dom);
	if (!gs)
		return -ENOMEM;
	gs->p = &M.plat;
	M.handles++;
	*out = gs;
	return 0;
}

static void drop_share(unsigned int i)
{
	struct fz_share *sh = &M.shares[i];

	ASAN_POISON_MEMORY_REGION(sh->addr, (size_t)sh->count * FZ_PAGE);
	for (unsigned int k = 0; k < sh->count; k++)
		M.ref_page[sh->first + k] = NULL;
	M.shares[i] = M.shares[--M.nshares];
}

static void fz_gntshr_close(struct xbd_gntshr *gs)
{
	/* What is still shared goes with the handle (the pool's leaked
	 * pages: the backend had them mapped). */
	for (unsigned int i = M.nshares; i-- > 0;)
		if (M.shares[i].gs == gs)
			drop_share(i);
	M.handles--;
	free(gs);
}

static int fz_gntshr_share_pages(struct xbd_gntshr *gs, xbd_domid_t remote,
				 unsigned int count, xbd_grant_ref_t *refs,
				 bool writable, void **addr)
{
	uint8_t *m;

	CHECK(remote == 0 && writable);
	if (M.arena_next + count > FZ_ARENA_PAGES || M.next_ref + count > FZ_REFS ||
	    M.nshares == FZ_SHARES)
		return -ENOSPC;             /* the grant table is full */
	m = M.arena + M.arena_next * FZ_PAGE;
	M.arena_next += count;
	/* Not zeroed: shared pages hold whatever the guest had there (the
	 * local platform's come from the domain's memory, Xen's from the
	 * guest's heap), and the channel clears its ring itself (ring.c).
	 * Clearing every bounce and indirect page shared was a fifth of an
	 * execution. */
	ASAN_UNPOISON_MEMORY_REGION(m, (size_t)count * FZ_PAGE);
	M.shares[M.nshares++] = (struct fz_share){ gs, m, count, M.next_ref };
	for (unsigned int k = 0; k < count; k++) {
		refs[k] = M.next_ref;
		M.ref_page[M.next_ref++] = m + (size_t)k * FZ_PAGE;
	}
	*addr = m;
	observe(1, (uint64_t)count << 32 | refs[0]);
	return 0;
}

static int fz_gntshr_unshare(struct xbd_gntshr *gs, void *addr, unsigned int count)
{
	for (unsigned int i = 0; i < M.nshares; i++) {
		if (M.shares[i].addr != addr)
			continue;
		CHECK(M.shares[i].gs == gs && M.shares[i].count == count);
		observe(2, (uint64_t)count << 32 | M.shares[i].first);
		drop_share(i);
		return 0;
	}
	CHECK(!"unshare of pages that are not shared");
	return -EINVAL;
}

static int fz_evtchn_open(struct xbd_platform *p, xbd_domid_t self, struct xbd_evtchn **out)
{
	struct xbd_evtchn *e = malloc(sizeof(*e));

	CHECK(p == &M.plat && self == 1);
	if (!e)
		return -ENOMEM;
	e->p = p;
	M.handles++;
	*out = e;
	return 0;
}

static void fz_evtchn_close(struct xbd_evtchn *e)
{
	M.handles--;
	free(e);
}

static int fz_evtchn_fd(struct xbd_evtchn *e)
{
	(void)e;
	return M.evt_fd;
}

static int fz_evtchn_bind(struct xbd_evtchn *e, xbd_domid_t remote)
{
	(void)e;
	CHECK(remote == 0);
	return 7;
}

static int fz_evtchn_port_op(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	(void)e;
	CHECK(port == 7);
	return 0;
}

static int fz_evtchn_pending(struct xbd_evtchn *e)
{
	(void)e;
	return -EAGAIN;                 /* the harness never kicks: it reaps */
}

static const struct platform_ops fz_ops = {
	.gntshr_open = fz_gntshr_open,
	.gntshr_close = fz_gntshr_close,
	.gntshr_share_pages = fz_gntshr_share_pages,
	.gntshr_unshare = fz_gntshr_unshare,
	.evtchn_open = fz_evtchn_open,
	.evtchn_close = fz_evtchn_close,
	.evtchn_fd = fz_evtchn_fd,
	.evtchn_bind_unbound_port = fz_evtchn_bind,
	.evtchn_unbind = fz_evtchn_port_op,
	.evtchn_notify = fz_evtchn_port_op,
	.evtchn_pending = fz_evtchn_pending,
	.evtchn_unmask = fz_evtchn_port_op,
};

static void machine_up(void)
{
	if (M.arena)
		return;
	M.plat.ops = &fz_ops;
	M.plat.kind = XBD_PLATFORM_LOCAL;
	M.dom = (struct xbd_domain){ &M.plat, 1 };
	M.arena = mmap(NULL, (size_t)FZ_ARENA_PAGES * FZ_PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(M.arena != MAP_FAILED);
	ASAN_POISON_MEMORY_REGION(M.arena, (size_t)FZ_ARENA_PAGES * FZ_PAGE);
	M.evt_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK(M.evt_fd >= 0);
	fe_bufs_init(&M.bufs, &M.dom, 0);
}

/* The end of an input: nothing may be shared or open any more, or (a
 * channel kept for the next input, fe_chan_recycle) only its two handles
 * and its ring, the first share an input makes: what is after it goes. */
static void machine_rewind(bool kept)
{
	if (!kept) {
		CHECK(M.nshares == 0 && M.handles == 0);
		M.arena_next = 0;
		M.next_ref = 0;
		return;
	}
	CHECK(M.nshares == 1 && M.handles == 2 && M.shares[0].first == 0 &&
	      M.shares[0].addr == M.arena);
	M.arena_next = M.shares[0].count;
	M.next_ref = M.shares[0].count;
}

static uint8_t data[FZ_DATA] __attribute__((aligned(4096)));

/* ---- the I/Os ----------------------------------------------------------- */

struct app {
	struct xbdfront_sqe sqe;
	struct iovec iov[FZ_MAX_PIECES];
	bool accepted;                 /* fe_chan_submit took it */
	unsigned int done;             /* completions reported */
	int status;
};

static struct app apps[FZ_IOS];
static unsigned int napps;

static void io_done(const struct xbdfront_cqe *cqe)
{
	struct app *a = &apps[cqe->user_data];

	CHECK(cqe->user_data < napps && a->accepted);
	CHECK(a->done == 0);
	CHECK(cqe->res == 0 || cqe->res == -EIO || cqe->res == -EOPNOTSUPP ||
	      cqe->res == -ENODEV);
	a->done++;
	a->status = cqe->res;
}

/*
 * Bytes of read and write data one input may have: every byte is bounced
 * through the grant pool once (channel.c bounce), which was a quarter of
 * an execution when each of 16 I/Os could carry 2 MiB.  One I/O can still
 * be as large as the header allows (2 MiB: more than one 256-segment
 * request); the I/Os after it get what is left, one block at least.
 */
#define FZ_DATA_BUDGET (2u << 20)
static uint64_t data_left;

static void setup_io(unsigned int i, const struct fz_io *in, unsigned int ss)
{
	struct app *a = &apps[i];
	unsigned int per_page = 4096 / ss, n = 0;
	uint64_t len = 0, piece, off;

	memset(a, 0, sizeof(*a));
	a->sqe.op = in->op % 6;
	a->sqe.offset = (uint64_t)in->block * ss;
	a->sqe.user_data = i;
	a->sqe.done = io_done;
	if (a->sqe.op == XBDFRONT_READ || a->sqe.op == XBDFRONT_WRITE) {
		len = (uint64_t)(in->nblocks % 512 + 1) * ss;
		if (len > data_left)
			len = data_left >= ss ? data_left / ss * ss : ss;
		data_left -= len < data_left ? len : data_left;
		piece = (uint64_t)(in->frag_blocks % per_page + 1) * ss;
		for (off = 0; off < len && n < FZ_MAX_PIECES; n++) {
			uint64_t l = len - off < piece || n == FZ_MAX_PIECES - 1 ? len - off : piece;

			a->iov[n] = (struct iovec){ data + (size_t)i * 512 * 4096 + off, l };
			off += l;
		}
		a->sqe.iov = a->iov;
		a->sqe.iovcnt = (uint16_t)n;
	} else if (a->sqe.op >= XBDFRONT_DISCARD) {
		len = (uint64_t)in->nblocks * ss;
	} else {
		a->sqe.offset = 0;
	}
	a->sqe.len = len;
}

/* ---- the backend's side ------------------------------------------------------ */

struct be_state {
	struct fe_chan *c;
	enum fe_abi abi;
	unsigned int order, size;
	uint8_t *sring;                 /* mapped as domain 0 */
	uint32_t seen;                  /* requests copied */
	uint32_t bprod;                 /* responses written */
	uint8_t op[1024];               /* per id: the op its answer carries, 0xff none */
};

static uint8_t *slot(struct be_state *b, uint32_t idx)
{
	unsigned int stride = b->abi == FE_ABI_X86_32 ? 108 : 112;

	return b->sring + 64 + (size_t)(idx & (b->size - 1)) * stride;
}

/* Copy every request published since the last look. */
static void take_requests(struct be_state *b)
{
	uint32_t prod = __atomic_load_n((uint32_t *)b->sring, __ATOMIC_ACQUIRE);

	for (; b->seen != prod; b->seen++) {
		const uint8_t *q = slot(b, b->seen);
		uint64_t id = 0;

		memcpy(&id, q + (b->abi == FE_ABI_X86_32 ? 4 : 8), 8);
		CHECK(id < b->size && b->op[id] == 0xff);     /* the frontend's ids are sane */
		observe(3, b->seen);
		for (unsigned int k = 0; k < (b->abi == FE_ABI_X86_32 ? 108u : 112u); k += 8) {
			uint64_t w;

			memcpy(&w, q + k, 8);
			observe(4, w);
		}
		b->op[id] = q[0] == BLKIF_OP_INDIRECT ? q[1] : q[0];
	}
}

static void ring_map(struct be_state *b)
{
	xbd_grant_ref_t refs[32];
	unsigned int n = fe_chan_ring_refs(b->c, refs);

	/* The backend's map of the ring: the refs' pages, one contiguous
	 * share of 1 << order pages. */
	CHECK(n == 1u << b->order && refs[0] < FZ_REFS && M.ref_page[refs[0]]);
	b->sring = M.ref_page[refs[0]];
	for (unsigned int i = 1; i < n; i++)
		CHECK(refs[i] < FZ_REFS && M.ref_page[refs[i]] == b->sring + (size_t)i * FZ_PAGE);
	b->size = 32u << b->order;
	b->seen = b->bprod = 0;
	memset(b->op, 0xff, sizeof(b->op));
}

static void ring_unmap(struct be_state *b)
{
	b->sring = NULL;
}

/* Write one response where the backend would (entry bprod). */
static void put_rsp(struct be_state *b, const struct fz_rsp *in)
{
	uint32_t open[1024], n = 0;
	uint64_t id = in->raw_id;
	uint8_t op = 0, *s = slot(b, b->bprod);
	/* sign-extended on purpose: blkif statuses are small negatives */
	int16_t status = in->status;    // NOLINT(bugprone-signed-char-misuse,cert-str34-c)

	b->bprod++;
	if (in->mode & 2)
		return;                 /* a stale slot */
	for (uint32_t i = 0; i < b->size; i++)
		if (b->op[i] != 0xff)
			open[n++] = i;
	if (!(in->mode & 1) && n) {
		id = open[in->pick % n];
		op = b->op[id];
	}
	op ^= in->op_xor;
	if (id < b->size && b->op[id] == op)
		b->op[id] = 0xff;       /* a valid answer: that request is done */
	memcpy(s, &id, 8);
	s[8] = op;
	s[9] = 0;
	memcpy(s + 10, &status, 2);
}

/*
 * One channel across inputs.  A channel per input (fe_chan_create: its
 * descriptor and request tables, hundreds of KiB zeroed, the grant
 * pool's stacks, the ring's share) was most of an execution's fixed
 * cost.  At an input's end the channel is recycled (fe_chan_recycle,
 * frontend/channel.c: every I/O ends with -ENODEV as in fe_chan_destroy,
 * the state back to just created) and kept for the next input if that
 * one asks for the same ring; an input that reconnected (a second ring
 * share) ends with a destroy as before.
 *
 * FUZZ_RESET_CHECK=1 proves recycled == fresh: every input runs twice, on
 * the kept channel and on a fresh one, and aborts unless both runs made
 * the same shares and unshares, published the same request slots byte
 * for byte, completed the same I/Os with the same status, and ended with
 * the same counters (fe_chan_get_stats), features and error.
 */
static struct fe_chan *kept;
static struct fe_chan_params cur_par, kept_par;   /* this input's; the kept one's */
static bool fresh;
static unsigned int recycled, checked, checked_recycled;

struct fz_obs {
	uint64_t digest;
	unsigned int events;
	uint8_t stats[sizeof(struct fe_chan_stats)];   /* as bytes: zeroed, then copied */
	unsigned int features;
	int error;
	struct { bool accepted; unsigned int done; int status; } apps[FZ_IOS];
};
static struct fz_obs *obs_now, *obs_next;   /* observing; from after the set-up */

static void observe(uint64_t a, uint64_t b)
{
	if (!obs_now)
		return;
	obs_now->digest = (obs_now->digest ^ a) * 0x100000001b3ull + b;
	obs_now->events++;
}

static bool setup(struct be_state *b, struct cursor *c, struct fe_limits *lim)
{
	struct fe_chan_params par = { .backend = 0, .persistent = true, .max_pages = FZ_POOL,
				      .bufs = &M.bufs };
	struct fz_hdr h;

	take(c, &h, sizeof(h));
	memset(b, 0, sizeof(*b));
	b->abi = (h.cfg0 & 1) ? FE_ABI_X86_32 : FE_ABI_X86_64;
	b->order = ((h.cfg0 >> 1) & 7) % (FE_RING_MAX_ORDER + 1);
	*lim = (struct fe_limits){
		.handle = 0x300,
		.sector_size = 512u << ((h.cfg1 >> 1) & 3),
		.max_indirect_segs = h.max_indirect % (FE_MAX_INDIRECT_SEGS + 1),
		.readonly = h.cfg0 & 0x10,
		.flush = h.cfg0 & 0x20,
		.barrier = h.cfg0 & 0x40,
		.discard = h.cfg0 & 0x80,
		.discard_secure = h.cfg1 & 1,
	};
	if (lim->max_indirect_segs <= BLKIF_MAX_SEGMENTS_PER_REQUEST)
		lim->max_indirect_segs = 0;
	lim->sectors = ((uint64_t)h.disk_blocks + 1) * (lim->sector_size / 512);
	CHECK(fe_limits_check(lim) == 0);
	par.order = b->order;
	par.abi = b->abi;
	cur_par = par;
	if (kept && (fresh || kept_par.order != par.order || kept_par.abi != par.abi)) {
		fe_chan_destroy(kept);
		kept = NULL;
		machine_rewind(false);
	}
	if (kept) {
		b->c = kept;             /* recycled at the last input's end */
		kept = NULL;
		recycled++;
	} else if (fe_chan_create(&M.plat, &M.dom, &par, &b->c)) {
		machine_rewind(false);
		return false;
	}
	ring_map(b);
	CHECK(fe_chan_connect(b->c, lim) == 0);
	napps = h.nios % (FZ_IOS + 1);
	data_left = FZ_DATA_BUDGET;
	for (unsigned int i = 0; i < napps; i++) {
		struct fz_io in;

		take(c, &in, sizeof(in));
		setup_io(i, &in, lim->sector_size);
	}
	return true;
}

static void submit_all(struct be_state *b)
{
	for (unsigned int i = 0; i < napps; i++)
		apps[i].accepted = fe_chan_submit(b->c, &apps[i].sqe, 1) == 1;
	CHECK(fe_chan_commit(b->c) == 0);
	take_requests(b);
}

/* A reconnect: the backend lets go, the frontend gets a fresh ring and
 * takes every request back onto it. */
static void reconnect(struct be_state *b, const struct fe_limits *lim)
{
	ring_unmap(b);
	CHECK(fe_chan_reset(b->c, b->order, b->abi) == 0);
	ring_map(b);
	CHECK(fe_chan_connect(b->c, lim) == 0);
	take_requests(b);
}

static void run_input(const uint8_t *in, size_t size)
{
	struct cursor c = { in, size };
	struct fe_limits lim;
	struct be_state b;
	struct fz_round round;
	int rounds = 0;

	bool reconnected = false;

	machine_up();
	obs_now = NULL;                 /* a fresh channel's first share is the ring */
	if (!setup(&b, &c, &lim))
		return;
	obs_now = obs_next;
	if (obs_now) {
		xbd_grant_ref_t refs[32];
		unsigned int n = fe_chan_ring_refs(b.c, refs);

		for (unsigned int i = 0; i < n; i++)
			observe(5, refs[i]);
	}
	submit_all(&b);
	while (take(&c, &round, sizeof(round)) && rounds++ < 256) {
		uint32_t prod = b.bprod;

		for (unsigned int k = 0; k < round.nrsp; k++) {
			struct fz_rsp r;

			take(&c, &r, sizeof(r));
			put_rsp(&b, &r);
		}
		__atomic_store_n((uint32_t *)(b.sring + 8),
				 (round.flags & 1) ? prod + round.raw_prod : b.bprod,
				 __ATOMIC_RELEASE);
		CHECK(fe_chan_reap(b.c, NULL, 0) >= 0 || fe_chan_error(b.c, NULL, 0) == -EIO);
		if (fe_chan_error(b.c, NULL, 0))
			break;          /* broken: the device is dead, as in the library */
		take_requests(&b);
		if (round.flags & 2) {
			reconnect(&b, &lim);
			reconnected = true;
		}
	}
	/* The end: the backend goes, the channel fails what is left. */
	ring_unmap(&b);
	if (obs_now) {
		struct fe_chan_stats st;

		memset(&st, 0, sizeof(st));
		fe_chan_get_stats(b.c, &st);
		memcpy(obs_now->stats, &st, sizeof(st));
		obs_now->features = fe_chan_features(b.c);
		obs_now->error = fe_chan_error(b.c, NULL, 0);
	}
	if (!reconnected && !fe_chan_recycle(b.c, &cur_par)) {
		kept = b.c;
		kept_par = cur_par;
		machine_rewind(true);
	} else {
		fe_chan_destroy(b.c);
		machine_rewind(false);
	}
	for (unsigned int i = 0; obs_now && i < napps; i++) {
		obs_now->apps[i].accepted = apps[i].accepted;
		obs_now->apps[i].done = apps[i].done;
		obs_now->apps[i].status = apps[i].status;
	}
	for (unsigned int i = 0; i < napps; i++)
		CHECK(apps[i].done == (apps[i].accepted ? 1u : 0u));
	if (getenv("FUZZ_VERBOSE"))
		for (unsigned int i = 0; i < napps; i++)
			fprintf(stderr, "io %u op %d accepted %d done %u status %d\n", i,
				apps[i].sqe.op, apps[i].accepted, apps[i].done, apps[i].status);
}

static void report_resets(void)
{
	fprintf(stderr, "fuzz fe_response: reset check: %u inputs compared, %u after a recycle\n",
		checked, checked_recycled);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	static struct fz_obs o[2];
	unsigned int before = recycled;

	if (!fuzz_reset_check(report_resets)) {
		run_input(in, size);
		return 0;
	}
	memset(o, 0, sizeof(o));
	obs_next = &o[0];
	run_input(in, size);
	obs_next = &o[1];
	fresh = true;
	run_input(in, size);
	fresh = false;
	obs_now = obs_next = NULL;
	checked++;
	checked_recycled += recycled != before;
	CHECK(o[0].events == o[1].events && o[0].digest == o[1].digest);
	CHECK(!memcmp(o[0].stats, o[1].stats, sizeof(o[0].stats)));
	CHECK(o[0].features == o[1].features && o[0].error == o[1].error);
	for (unsigned int i = 0; i < FZ_IOS; i++)
		CHECK(o[0].apps[i].accepted == o[1].apps[i].accepted &&
		      o[0].apps[i].done == o[1].apps[i].done &&
		      o[0].apps[i].status == o[1].apps[i].status);
	return 0;
}
