/* SPDX-License-Identifier: MIT */
/*
 * fuzz_be_request: a hostile frontend's ring against the backend's real
 * queue loop.
 *
 * One input is one burst of requests on one ring: the negotiated limits,
 * the ring header, the ring's slots (either ABI, any order), which grant
 * refs the "guest" granted (and read-only), and the guest pages the
 * grants name (indirect segment pages among them).  The harness attaches
 * the real be_ring to those bytes and runs the real engine of
 * backend/io_uring.c (ring_fetch_req, req_parse, indirect fetch,
 * req_check_segs, the dispatch and submission decisions) with the real
 * grant transport (backend/gnt.c, gntpool.c) on a real io_uring whose
 * storage is a memfd of the disk's size.
 *
 * The stubs are the checkers:
 *   - a fake platform grant table (fuzz_gnt_*) maps only refs the input
 *     granted (writable only if granted writable), into heap memory so
 *     ASan catches any use after the unmap, and keeps every live mapping;
 *     unmapping something never mapped, or a mapping left after
 *     teardown, aborts;
 *   - every SQE the engine submits is inspected before the kernel sees it
 *     (io_uring_submit* are wrapped with -Wl,--wrap): only the disk fd,
 *     only whole logical blocks inside the disk, nothing but reads on a
 *     read-only disk, and every iovec inside one granted page (writable
 *     for a read) or one live bounce page of the transport;
 *   - storage_discard (block-device discard) is a stub with the same
 *     range checks;
 *   - at the end every fetched request has exactly one response, with an
 *     id the frontend sent and a BLKIF_RSP_* status.
 *
 * Input layout (little-endian; missing bytes read as zero): see struct
 * fz_hdr; then u16 ring_len, ring_len bytes copied to the ring after its
 * 64-byte header, then the contents of guest pages 0, 1, ...
 * tests/fuzz/gen_corpus.py writes valid inputs in this layout.
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

#include "backend/gnt.h"
#include "backend/io_uring.h"
#include "backend/tunables.h"
#include "platform/private.h"
#include "tests/fuzz/fuzz.h"

#define FZ_GRANTS 32u
#define FZ_FRONTEND 7
#define FZ_PAGE 4096u
#define FZ_MAX_MAPS 8192u

struct fz_hdr {
	uint8_t cfg0;         /* bit0 x86_32, bits1-3 order%6, bit4 persistent,
			       * bit5 blkdev, bit6 read-only, bit7 flush */
	uint8_t cfg1;         /* bit0 barrier, bit1 discard, bit2 secure,
			       * bits3-4 sector size 512<<n, bits5-6 copy max,
			       * bit7 max_persistent_grants 4 */
	uint16_t max_indirect;/* % 1025 */
	uint16_t disk_blocks; /* +1, logical blocks */
	uint16_t nreq;        /* bit15: raw req_prod delta (may overrun) */
	uint32_t rsp_prod;    /* where the ring starts (index wrap) */
	uint32_t rsp_event;
	uint32_t granted;     /* bitmap over refs 0..31 */
	uint32_t readonly;    /* bitmap: granted read-only */
	uint8_t rounds;       /* % 4: more bursts after the first, each
			       * rewriting the next nreq slots from the
			       * input's ring image (index wrap, reuse of
			       * persistent grants and bounce pages) */
} __attribute__((packed));

/* ---- the guest: granted pages and the stub grant table ------------------ */

static uint8_t guest[FZ_GRANTS][FZ_PAGE] __attribute__((aligned(4096)));
static uint32_t g_granted, g_readonly;

struct fz_map {
	void *addr;
	unsigned int count;
	int prot;
};
static struct fz_map maps[FZ_MAX_MAPS];
static unsigned int nmaps;

static int grant_check(xbd_domid_t remote, xbd_grant_ref_t ref, bool write)
{
	if (remote != FZ_FRONTEND)
		return -EPERM;
	if (ref >= FZ_GRANTS || !(g_granted & (1u << ref)))
		return -EINVAL;
	if (write && (g_readonly & (1u << ref)))
		return -EPERM;
	return 0;
}

static int fz_gnttab_map(struct xbd_gnttab *gt, xbd_domid_t remote,
			 unsigned int count, const xbd_grant_ref_t *refs,
			 int prot, void **addr)
{
	size_t len = (size_t)count * FZ_PAGE;
	uint8_t *m;

	(void)gt;
	CHECK(prot == PROT_READ || prot == (PROT_READ | PROT_WRITE));
	for (unsigned int i = 0; i < count; i++) {
		int rc = grant_check(remote, refs[i], prot & PROT_WRITE);

		if (rc)
			return rc;
	}
	CHECK(nmaps < FZ_MAX_MAPS);
	/* Heap memory: ASan reports any use after the unmap. */
	if (posix_memalign((void **)&m, FZ_PAGE, len))
		return -ENOMEM;
	for (unsigned int i = 0; i < count; i++)
		memcpy(m + (size_t)i * FZ_PAGE, guest[refs[i]], FZ_PAGE);
	maps[nmaps++] = (struct fz_map){ m, count, prot };
	*addr = m;
	return 0;
}

static int fz_gnttab_unmap(struct xbd_gnttab *gt, void *addr, unsigned int count)
{
	(void)gt;
	for (unsigned int i = 0; i < nmaps; i++) {
		if (maps[i].addr != addr)
			continue;
		/* The backend must unmap exactly what it mapped. */
		CHECK(maps[i].count == count);
		free(addr);
		maps[i] = maps[--nmaps];
		return 0;
	}
	CHECK(!"unmap of an area that is not mapped");
	return -EINVAL;
}

static int fz_gnttab_copy(struct xbd_gnttab *gt, unsigned int count,
			  struct xbd_gnttab_copy_seg *segs)
{
	(void)gt;
	for (unsigned int i = 0; i < count; i++) {
		struct xbd_gnttab_copy_seg *s = &segs[i];
		bool to_grant = s->flags == XBD_GNTCOPY_dest_gref;
		const typeof(s->source.foreign) *f = to_grant ? &s->dest.foreign
							       : &s->source.foreign;
		uint8_t *virt = to_grant ? s->source.virt : s->dest.virt;

		CHECK(s->flags == XBD_GNTCOPY_dest_gref ||
		      s->flags == XBD_GNTCOPY_source_gref);
		s->status = (int16_t)grant_check(f->domid, f->ref, to_grant);
		if (!s->status && (uint32_t)f->offset + s->len > FZ_PAGE)
			s->status = -EINVAL;
		if (s->status)
			continue;
		/* The local side is one bounce page of the transport. */
		CHECK(s->len && !__asan_region_is_poisoned(virt, s->len));
		if (to_grant)
			memcpy(guest[f->ref] + f->offset, virt, s->len);
		else
			memcpy(virt, guest[f->ref] + f->offset, s->len);
	}
	return 0;
}

static const struct platform_ops fz_ops = {
	.gnttab_map = fz_gnttab_map,
	.gnttab_unmap = fz_gnttab_unmap,
	.gnttab_copy = fz_gnttab_copy,
};
static struct xbd_platform fz_plat = { .ops = &fz_ops };
static struct xbd_gnttab fz_gt = { .p = &fz_plat };

/* ---- the storage stub and the SQE checker -------------------------------- */

static int disk_fd = -1, evt_fd = -1;
static uint64_t disk_bytes;
static struct req_limits lim;
static bool disk_blkdev;

/* The iovec lies within one page that is a live mapping of the stub
 * (writable when the I/O writes into memory), or within one live heap
 * page (the transport's bounce pages). */
static void check_iov(const struct iovec *v, bool into_memory)
{
	uintptr_t b = (uintptr_t)v->iov_base;

	CHECK(v->iov_len > 0 && v->iov_len % lim.sector_size == 0);
	CHECK((b & (FZ_PAGE - 1)) + v->iov_len <= FZ_PAGE);
	for (unsigned int i = 0; i < nmaps; i++) {
		uintptr_t a = (uintptr_t)maps[i].addr;

		if (b >= a && b < a + (size_t)maps[i].count * FZ_PAGE) {
			CHECK(!into_memory || (maps[i].prot & PROT_WRITE));
			return;
		}
	}
	CHECK(!__asan_region_is_poisoned(v->iov_base, v->iov_len));
}

static void check_extent(uint64_t off, uint64_t len)
{
	CHECK(off % lim.sector_size == 0 && len % lim.sector_size == 0);
	CHECK(off < disk_bytes && len <= disk_bytes - off);
}

static void check_sqe(const struct io_uring_sqe *sqe)
{
	uint64_t total = 0;

	switch (sqe->opcode) {
	case IORING_OP_POLL_ADD:
		CHECK(sqe->fd == evt_fd);
		return;
	case IORING_OP_FSYNC:
		CHECK(sqe->fd == disk_fd && !lim.read_only);
		return;
	case IORING_OP_FALLOCATE:
		CHECK(sqe->fd == disk_fd && !lim.read_only && lim.discard);
		CHECK(sqe->len == STORAGE_PUNCH_MODE);
		check_extent(sqe->off, sqe->addr);
		return;
	case IORING_OP_READV:
	case IORING_OP_WRITEV:
		CHECK(sqe->fd == disk_fd);
		CHECK(sqe->opcode == IORING_OP_READV || !lim.read_only);
		CHECK(sqe->len >= 1 && sqe->len <= 1024);
		for (unsigned int i = 0; i < sqe->len; i++) {
			const struct iovec *v = (const struct iovec *)(uintptr_t)sqe->addr + i;

			check_iov(v, sqe->opcode == IORING_OP_READV);
			total += v->iov_len;
		}
		check_extent(sqe->off, total);
		return;
	default:
		CHECK(!"unexpected io_uring operation");
	}
}

static void check_pending_sqes(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;

	for (unsigned int i = sq->sqe_head; i != sq->sqe_tail; i++)
		check_sqe(&sq->sqes[i & sq->ring_mask]);
}

int __real_io_uring_submit(struct io_uring *ring);
int __real_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr);
int __real_io_uring_submit_and_wait_timeout(struct io_uring *ring,
		struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
		struct __kernel_timespec *ts, sigset_t *sigmask);

int __wrap_io_uring_submit(struct io_uring *ring)
{
	check_pending_sqes(ring);
	return __real_io_uring_submit(ring);
}

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	check_pending_sqes(ring);
	return __real_io_uring_submit_and_wait(ring, wait_nr);
}

int __wrap_io_uring_submit_and_wait_timeout(struct io_uring *ring,
		struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
		struct __kernel_timespec *ts, sigset_t *sigmask)
{
	check_pending_sqes(ring);
	return __real_io_uring_submit_and_wait_timeout(ring, cqe_ptr, wait_nr, ts, sigmask);
}

/* ---- event channel stub ------------------------------------------------- */

static int evt_ack(void *ctx)
{
	uint64_t v;

	(void)ctx;
	if (read(evt_fd, &v, sizeof(v)) != sizeof(v))
		return 0;       /* nothing pending: not an error here */
	return 0;
}

static int evt_notify(void *ctx)
{
	(void)ctx;
	return 0;
}

static const struct be_evt_ops fz_evt = { .ack = evt_ack, .notify = evt_notify };

/* ---- one input ------------------------------------------------------------ */

static uint8_t ring_mem[FZ_PAGE << RING_MAX_ORDER] __attribute__((aligned(4096)));
static uint8_t ring_in[FZ_PAGE << RING_MAX_ORDER];  /* the input's ring image */

static void set_tunables(uint8_t cfg1)
{
	static const char *const copy_max[] = { NULL, "0", "4096", "45056" };

	tun_init();
	if (copy_max[(cfg1 >> 5) & 3])
		CHECK(!tun_set(TUN_GRANT_COPY_MAX_BYTES, copy_max[(cfg1 >> 5) & 3], true));
	if (cfg1 & 0x80)
		CHECK(!tun_set(TUN_MAX_PERSISTENT_GRANTS, "4", true));
}

/* The id the frontend wrote in slot idx (same offset for every op). */
static uint64_t slot_id(const uint8_t *ring_in, enum ring_abi abi, unsigned int nr_ents,
			RING_IDX idx)
{
	size_t sz = abi == RING_ABI_X86_32 ? 108 : 112, off = abi == RING_ABI_X86_32 ? 4 : 8;
	uint64_t id;

	memcpy(&id, ring_in + RING_HDR_SIZE + (idx & (nr_ents - 1)) * sz + off, 8);
	return id;
}

/* Every fetched request answered once, with one of its ids. */
static void check_responses(const uint8_t *ring_in, const struct be_ring *r,
			    RING_IDX start)
{
	const struct blkif_sring *s = (const void *)ring_mem;
	unsigned int n = r->req_cons - start;
	size_t rsz = r->abi == RING_ABI_X86_32 ? 108 : 112;   /* entry stride */
	static bool used[1024];

	CHECK(s->rsp_prod == r->req_cons && r->rsp_prod_pvt == r->req_cons);
	CHECK(n <= r->nr_ents);
	memset(used, 0, sizeof(used));
	for (unsigned int i = 0; i < n; i++) {
		const uint8_t *rsp = ring_mem + RING_HDR_SIZE +
				     ((start + i) & (r->nr_ents - 1)) * rsz;
		uint64_t id;
		int16_t status;
		unsigned int j;

		memcpy(&id, rsp, 8);
		memcpy(&status, rsp + 10, 2);
		CHECK(status == BLKIF_RSP_OKAY || status == BLKIF_RSP_ERROR ||
		      status == BLKIF_RSP_EOPNOTSUPP);
		CHECK(rsp[9] == 0);
		for (j = 0; j < n; j++)
			if (!used[j] && slot_id(ring_in, r->abi, r->nr_ents, start + j) == id)
				break;
		CHECK(j < n);
		used[j] = true;
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "response id %llu op %u status %d\n",
				(unsigned long long)id, rsp[8], status);
	}
}

/* One burst: take everything, then let the I/O finish.  A request held
 * behind a barrier must be released once the drain is over. */
static void burst(struct be_io *io, struct be_ring *r)
{
	int rc = be_io_run_once(io, 0);

	for (int turns = 0; turns < 10000 && rc >= 0 &&
	     (io->inflight || io->held || ring_pending(r) > 0); turns++)
		rc = be_io_run_once(io, 100);
	for (int turns = 0; turns < 10000 && io->inflight; turns++)
		be_io_run_once(io, 100);
	CHECK(rc == 0 || (rc == -EIO && r->broken));
	CHECK(!io->inflight && !io->held && (r->broken || ring_pending(r) == 0));
}

/* Write requests [from, from + n) again from the input's ring image. */
static void refill(const uint8_t *ring_in, enum ring_abi abi, unsigned int nr_ents,
		   RING_IDX from, unsigned int n)
{
	size_t sz = abi == RING_ABI_X86_32 ? 108 : 112;

	for (unsigned int i = 0; i < n; i++) {
		size_t off = RING_HDR_SIZE + ((from + i) & (nr_ents - 1)) * sz;

		memcpy(ring_mem + off, ring_in + off, sz);
	}
}

static void init_once(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	disk_fd = memfd_create("fuzz-disk", MFD_CLOEXEC);
	evt_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK(disk_fd >= 0 && evt_fd >= 0);
}

/* The negotiated limits and the guest's grants, from the header. */
static void set_limits(const struct fz_hdr *h)
{
	lim = (struct req_limits){
		.sector_size = 512u << ((h->cfg1 >> 3) & 3),
		.read_only = h->cfg0 & 0x40,
		.flush = h->cfg0 & 0x80,
		.barrier = h->cfg1 & 1,
		.discard = h->cfg1 & 2,
		.discard_secure = h->cfg1 & 4,
		.max_indirect_segs = h->max_indirect % 1025u,
	};
	lim.sectors = ((uint64_t)h->disk_blocks + 1) * (lim.sector_size >> 9);
	disk_bytes = lim.sectors << 9;
	disk_blkdev = h->cfg0 & 0x20;
	g_granted = h->granted;
	g_readonly = h->readonly;
	set_tunables(h->cfg1);
	CHECK(ftruncate(disk_fd, 0) == 0 && ftruncate(disk_fd, (off_t)disk_bytes) == 0);
}

/* The ring (header from the input, then its slots; a copy kept in
 * ring_in), then the guest pages. */
static void load_ring(struct cursor *c, const struct fz_hdr *h, enum ring_abi abi,
		      unsigned int order)
{
	struct blkif_sring *s = (void *)ring_mem;
	size_t ring_bytes = (size_t)FZ_PAGE << order;
	unsigned int ents = ring_nr_ents(abi, order);
	uint16_t ring_len;

	memset(ring_mem, 0, ring_bytes);
	take(c, &ring_len, sizeof(ring_len));
	if (ring_len > ring_bytes - RING_HDR_SIZE)
		ring_len = (uint16_t)(ring_bytes - RING_HDR_SIZE);
	take(c, ring_mem + RING_HDR_SIZE, ring_len);
	s->rsp_prod = h->rsp_prod;
	s->rsp_event = h->rsp_event;
	s->req_prod = h->rsp_prod + ((h->nreq & 0x8000) ? (h->nreq & 0x7fffu)
							: h->nreq % (ents + 1));
	memcpy(ring_in, ring_mem, ring_bytes);
	for (unsigned int i = 0; i < FZ_GRANTS; i++)
		take(c, guest[i], FZ_PAGE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct fz_hdr h;
	struct blkif_sring *s = (void *)ring_mem;
	enum ring_abi abi;
	unsigned int order;
	struct be_ring r;
	struct gnt_xport x;
	struct be_stats stats = { 0 };
	struct be_io io;
	struct storage st;
	RING_IDX start;

	init_once();
	take(&c, &h, sizeof(h));
	abi = (h.cfg0 & 1) ? RING_ABI_X86_32 : RING_ABI_X86_64;
	order = ((h.cfg0 >> 1) & 7) % (RING_MAX_ORDER + 1);
	set_limits(&h);
	load_ring(&c, &h, abi, order);
	st = (struct storage){ .drv = &storage_raw_driver,
			       .fd = disk_fd, .is_blkdev = disk_blkdev,
			       .read_only = lim.read_only, .size = disk_bytes,
			       .logical_block = lim.sector_size,
			       .physical_block = lim.sector_size,
			       .discard = lim.discard, .discard_secure = lim.discard_secure };
	CHECK(ring_attach(&r, ring_mem, order, abi) == 0);
	start = r.req_cons;
	gnt_xport_init(&x, &fz_gt, FZ_FRONTEND, h.cfg0 & 0x10);
	struct be_io_cfg cfg = {
		.ring = &r, .storage = &st, .limits = lim,
		.xport = &gnt_xport_ops, .xport_ctx = &x,
		.evt = &fz_evt, .evt_ctx = NULL, .evt_fd = evt_fd, .stop_fd = -1,
		.stats = &stats,
	};
	CHECK(be_io_init(&io, &cfg) == 0);
	for (unsigned int round = 0; round <= h.rounds % 4u && !r.broken; round++) {
		if (round) {
			/* The frontend refills the slots the responses used. */
			RING_IDX prod = s->req_prod, n = s->req_prod - start;

			refill(ring_in, abi, r.nr_ents, prod, n);
			start = prod;
			__atomic_store_n(&s->req_prod, prod + n, __ATOMIC_RELEASE);
		}
		burst(&io, &r);
		check_responses(ring_in, &r, start);
	}
	be_io_destroy(&io);
	CHECK(gnt_xport_destroy(&x) == 0);
	CHECK(nmaps == 0);            /* every grant mapping was given back */
	CHECK(stats.inflight == 0);
	return 0;
}
