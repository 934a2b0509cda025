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
 * grant transport (backend/gnt.c, gntpool.c) and the real raw storage
 * driver (backend/storage/raw.c), all in process: the io_uring is a fake
 * that completes every SQE inline (below), so no input enters the kernel.
 *
 * The stubs are the checkers:
 *   - a fake platform grant table (fz_gnttab_*) maps only refs the input
 *     granted (writable only if granted writable), into an arena that is
 *     poisoned from the unmap on so ASan catches any use after it, and
 *     keeps every live mapping; unmapping something never mapped, or a
 *     mapping left after teardown, aborts;
 *   - every SQE the engine submits is checked at the fake submit: only
 *     the disk fd, only whole logical blocks inside the disk, nothing but
 *     reads on a read-only disk, and every iovec inside one granted page
 *     (writable for a read) or one live bounce page of the transport;
 *   - block-device discard (ioctl, wrapped) gets the same range checks;
 *   - at the end every fetched request has exactly one response, with an
 *     id the frontend sent and a BLKIF_RSP_* status.
 *
 * The queue is kept across inputs and reset between them (be_io_reset;
 * see "One queue across inputs" below, and FUZZ_RESET_CHECK).
 *
 * Input layout (little-endian; missing bytes read as zero): see struct
 * fz_hdr; then u16 ring_len, ring_len bytes copied to the ring after its
 * 64-byte header, then the contents of guest pages 0, 1, ...
 * tests/fuzz/gen_corpus.py writes valid inputs in this layout.
 */
#include <errno.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
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
/* Slots x segments per slot at most: be_io_init allocates that many
 * segment/iovec entries up front (32 bytes each), and under ASan a 32 MiB
 * allocation per input (1024 slots x 1024 segments) costs a millisecond
 * of mmap and shadow faults, 1 MiB still a tenth of that.  A ring of 32
 * slots (order 0) keeps the full 1024 indirect segments; a bigger ring
 * gets FZ_SLOT_SEGS / slots (an order-5 ring of 1024 slots: 11, direct
 * requests only), which keeps the allocation in ASan's size classes.  The
 * per-slot logic is the same whatever the ring's size. */
#define FZ_SLOT_SEGS 4096u

struct fz_hdr {
	uint8_t cfg0;         /* bit0 x86_32, bits1-3 order%6, bit4 persistent,
			       * bit5 blkdev, bit6 read-only, bit7 flush */
	uint8_t cfg1;         /* bit0 barrier, bit1 discard, bit2 secure,
			       * bits3-4 sector size 512<<n, bits5-6 copy max,
			       * bit7 max_persistent_grants 4 */
	uint16_t max_indirect;/* bits 0-13 % 1025, at most FZ_SLOT_SEGS /
			       * ring slots; bit14 the file is in memory
			       * (mem_fs), bit15 sync_io (raw.c's system
			       * calls on the queue thread, below) */
	uint16_t disk_blocks; /* +1, logical blocks */
	uint16_t nreq;        /* % (slots + 1), at most the slots written + 1;
			       * bit15: raw req_prod delta (may overrun) */
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
static void observe(uint64_t a, uint64_t b);
static bool live_bounce(const void *p, size_t len);
static uint32_t g_granted, g_readonly;
static uint32_t g_dirty;      /* pages not all zero: cleared before reuse */

/*
 * Where grant mappings and bounce pages live: a bump allocator over one
 * arena made once.  Within an input nothing is handed out twice, and a
 * range is poisoned for ASan from its unmap on, so any use after an
 * unmap is reported; at the end of the input (nothing is live then) the
 * cursor goes back to the start.  No malloc, no page fault, no system
 * call per page.  Past the arena: the heap.
 */
#define FZ_PAGES_ARENA 16384u
static uint8_t *pages_arena;
static size_t pages_next;

static void *pages_alloc(size_t n)
{
	void *m;

	if (!pages_arena) {
		pages_arena = mmap(NULL, (size_t)FZ_PAGES_ARENA * FZ_PAGE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		CHECK(pages_arena != MAP_FAILED);
		ASAN_POISON_MEMORY_REGION(pages_arena, (size_t)FZ_PAGES_ARENA * FZ_PAGE);
	}
	if (pages_next + n <= FZ_PAGES_ARENA) {
		m = pages_arena + pages_next * FZ_PAGE;
		pages_next += n;
		ASAN_UNPOISON_MEMORY_REGION(m, n * FZ_PAGE);
		return m;
	}
	return posix_memalign(&m, FZ_PAGE, n * FZ_PAGE) ? NULL : m;
}

static void pages_free(void *m, size_t n)
{
	if ((uint8_t *)m >= pages_arena &&
	    (uint8_t *)m < pages_arena + (size_t)FZ_PAGES_ARENA * FZ_PAGE)
		ASAN_POISON_MEMORY_REGION(m, n * FZ_PAGE);
	else
		free(m);
}

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
	if (!(m = pages_alloc(count)))
		return -ENOMEM;
	for (unsigned int i = 0; i < count; i++) {
		memcpy(m + (size_t)i * FZ_PAGE, guest[refs[i]], FZ_PAGE);
		observe(1, (uint64_t)refs[i] << 8 | (unsigned int)prot);
	}
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
		pages_free(addr, count);
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
		observe(2, (uint64_t)f->ref << 40 | (uint64_t)f->offset << 24 |
			   (uint64_t)s->len << 8 | (uint64_t)to_grant << 1 | !s->status);
		if (s->status)
			continue;
		/* The local side is one bounce page of the transport. */
		CHECK(s->len && live_bounce(virt, s->len));
		if (to_grant) {
			memcpy(guest[f->ref] + f->offset, virt, s->len);
			g_dirty |= 1u << f->ref;
		}
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

/* ---- the disk and the SQE checker ---------------------------------------- */

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
	CHECK(live_bounce(v->iov_base, v->iov_len));
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


/*
 * The fake io_uring: io_uring_queue_init/exit and io_uring_submit* are
 * wrapped (-Wl,--wrap), so the engine's liburing inlines (get_sqe, the
 * prep helpers, for_each_cqe, cq_advance, sq_space_left) run on rings in
 * heap memory and every SQE completes inline at submission, with no
 * kernel round trip.  The storage is not kept: a read fills its iovecs
 * with a pattern (ASan checks each byte is writable), a write, flush or
 * punch succeeds with the size the kernel would report.  Bits 2-7 of
 * fz_hdr.rounds fail data CQEs with -EIO (k-th data SQE fails when bit
 * k % 6 is set), and a failed link cancels the rest of its chain, as the
 * kernel does.  The evt POLL_ADD completes when the harness kicks.
 */
struct fake_uring {
	unsigned int sq_head, cq_head, cq_tail, zero;
	unsigned int entries, cq_entries;
	bool live;
	bool evt_armed;
	uint64_t evt_ud;
};
static struct fake_uring fu;
#define FZ_SQES 4096u               /* 2 x 1024 slots + 4, rounded up */
static struct io_uring_sqe fu_sqes[FZ_SQES];
static struct io_uring_cqe fu_cqes[2 * FZ_SQES];
static bool kick_pending;
static unsigned int io_fail_bits, data_sqes;

int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	unsigned int n = 1;

	CHECK(flags == 0 && !fu.live);
	while (n < entries)
		n <<= 1;
	CHECK(n <= FZ_SQES);
	memset(ring, 0, sizeof(*ring));
	memset(&fu, 0, sizeof(fu));
	fu.live = true;
	fu.entries = n;
	fu.cq_entries = 2 * n;
	ring->sq.khead = &fu.sq_head;
	ring->sq.ktail = &fu.sq_head;      /* liburing writes it at submit only */
	ring->sq.kflags = &fu.zero;
	ring->sq.kdropped = &fu.zero;
	ring->sq.sqes = fu_sqes;
	ring->sq.ring_mask = n - 1;
	ring->sq.ring_entries = n;
	ring->cq.khead = &fu.cq_head;
	ring->cq.ktail = &fu.cq_tail;
	ring->cq.kflags = &fu.zero;
	ring->cq.koverflow = &fu.zero;
	ring->cq.cqes = fu_cqes;
	ring->cq.ring_mask = fu.cq_entries - 1;
	ring->cq.ring_entries = fu.cq_entries;
	ring->ring_fd = ring->enter_ring_fd = -1;
	return 0;
}

void __wrap_io_uring_queue_exit(struct io_uring *ring)
{
	CHECK(fu.live && ring->sq.sqes == fu_sqes);
	memset(&fu, 0, sizeof(fu));
}

static void post_cqe(uint64_t ud, int res)
{
	CHECK(fu.cq_tail - fu.cq_head < fu.cq_entries);   /* no overflow */
	fu_cqes[fu.cq_tail & (fu.cq_entries - 1)] =
		(struct io_uring_cqe){ .user_data = ud, .res = res };
	fu.cq_tail++;
}

/* Run one SQE; its result. */
static int run_sqe(const struct io_uring_sqe *sqe)
{
	const struct iovec *v = (const struct iovec *)(uintptr_t)sqe->addr;
	int64_t total = 0;

	check_sqe(sqe);
	observe(3, (uint64_t)sqe->opcode << 56 ^ sqe->off ^ (uint64_t)sqe->len << 32 ^ sqe->flags);
	if (sqe->opcode == IORING_OP_POLL_ADD)
		return 0;
	if (io_fail_bits & (1u << (data_sqes++ % 6)))
		return -EIO;
	if (sqe->opcode == IORING_OP_READV || sqe->opcode == IORING_OP_WRITEV) {
		for (unsigned int i = 0; i < sqe->len; i++) {
			/* ASan checks both ends (check_iov the rest) */
			if (sqe->opcode == IORING_OP_READV) {
				((volatile uint8_t *)v[i].iov_base)[0] = 0xd5;
				((volatile uint8_t *)v[i].iov_base)[v[i].iov_len - 1] = 0xd5;
			}
			total += (int64_t)v[i].iov_len;
		}
	}
	return (int)total;
}

static void fake_submit(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;
	bool cancel = false;

	for (; sq->sqe_head != sq->sqe_tail; sq->sqe_head++) {
		const struct io_uring_sqe *sqe = &sq->sqes[sq->sqe_head & sq->ring_mask];
		int res;

		if (sqe->opcode == IORING_OP_POLL_ADD && sqe->fd == evt_fd) {
			CHECK(!fu.evt_armed);
			check_sqe(sqe);
			fu.evt_armed = true;
			fu.evt_ud = sqe->user_data;
			continue;
		}
		res = cancel ? -ECANCELED : run_sqe(sqe);
		post_cqe(sqe->user_data, res);
		cancel = (sqe->flags & IOSQE_IO_LINK) && res < 0;
	}
	CHECK(!cancel);                    /* a chain ends within one submit */
	fu.sq_head = sq->sqe_tail;
	if (kick_pending && fu.evt_armed) {
		kick_pending = fu.evt_armed = false;
		post_cqe(fu.evt_ud, POLLIN);
	}
}

int __wrap_io_uring_submit(struct io_uring *ring)
{
	unsigned int n = ring->sq.sqe_tail - ring->sq.sqe_head;

	fake_submit(ring);
	return (int)n;
}

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	int n = __wrap_io_uring_submit(ring);

	/* Everything completes at once: waiting for more would hang. */
	CHECK(fu.cq_tail - fu.cq_head >= wait_nr);
	return n;
}

int __wrap_io_uring_submit_and_wait_timeout(struct io_uring *ring,
		struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
		struct __kernel_timespec *ts, sigset_t *sigmask)
{
	(void)ts;
	(void)sigmask;
	__wrap_io_uring_submit(ring);
	if (fu.cq_tail - fu.cq_head < wait_nr)
		return -ETIME;             /* the timeout, without the wait */
	*cqe_ptr = &fu_cqes[fu.cq_head & (fu.cq_entries - 1)];
	return 0;
}

/*
 * The transport's bounce pages (backend/gnt.c page_get/page_put) are
 * mmap'ed one by one; mmap and munmap are wrapped so that an anonymous
 * page comes from ASan's heap instead: no system call per page, and a
 * use of a page after its munmap is reported (the quarantine) where the
 * kernel would only have reused the address.  Anything else goes to the
 * real calls.
 */
#define FZ_MAX_BOUNCE 16384u
static void *bounce[FZ_MAX_BOUNCE];
static unsigned int nbounce;
/* Per arena page: its place in bounce[] + 1 (0: not a bounce page), so
 * that a munmap finds its page at once (the search through every live
 * page was 4 % of an execution). */
static unsigned int bounce_at[FZ_PAGES_ARENA];

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);

static bool in_arena(const void *p)
{
	return pages_arena && (const uint8_t *)p >= pages_arena &&
	       (const uint8_t *)p < pages_arena + (size_t)FZ_PAGES_ARENA * FZ_PAGE;
}

static void bounce_drop(unsigned int i)
{
	if (in_arena(bounce[i]))
		bounce_at[((uint8_t *)bounce[i] - pages_arena) / FZ_PAGE] = 0;
	bounce[i] = bounce[--nbounce];
	if (i < nbounce && in_arena(bounce[i]))
		bounce_at[((uint8_t *)bounce[i] - pages_arena) / FZ_PAGE] = i + 1;
}

/* [p, p + len) lies in one live bounce page.  In the arena that is what
 * bounce_at says (a page is unpoisoned whole when handed out and poisoned
 * whole when given back, so this is ASan's answer, without scanning the
 * shadow: the scans were 8 % of an execution); past it, ASan's. */
static bool live_bounce(const void *p, size_t len)
{
	if (!in_arena(p))
		return !__asan_region_is_poisoned((void *)(uintptr_t)p, len);
	return bounce_at[((const uint8_t *)p - pages_arena) / FZ_PAGE] &&
	       ((uintptr_t)p & (FZ_PAGE - 1)) + len <= FZ_PAGE;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *pg;

	if (addr || len != FZ_PAGE || fd != -1 ||
	    flags != (MAP_PRIVATE | MAP_ANONYMOUS) || prot != (PROT_READ | PROT_WRITE))
		return __real_mmap(addr, len, prot, flags, fd, off);
	CHECK(nbounce < FZ_MAX_BOUNCE);
	if (!(pg = pages_alloc(1)))
		return MAP_FAILED;
	memset(pg, 0, FZ_PAGE);
	observe(8, nbounce);
	if (in_arena(pg))
		bounce_at[((uint8_t *)pg - pages_arena) / FZ_PAGE] = nbounce + 1;
	bounce[nbounce++] = pg;
	return pg;
}

int __wrap_munmap(void *addr, size_t len)
{
	if (in_arena(addr)) {
		unsigned int at = bounce_at[((uint8_t *)addr - pages_arena) / FZ_PAGE];

		/* In the arena: one of ours (grant maps are not munmapped). */
		CHECK(at && bounce[at - 1] == addr && len == FZ_PAGE);
		pages_free(addr, 1);
		bounce_drop(at - 1);
		return 0;
	}
	for (unsigned int i = nbounce; i-- > 0;) {
		if (bounce[i] != addr)
			continue;
		CHECK(len == FZ_PAGE);
		pages_free(addr, 1);
		bounce_drop(i);
		return 0;
	}
	return __real_munmap(addr, len);
}

/* Block-device discard (raw.c storage_discard, synchronous in the
 * backend) ends in ioctl(BLKDISCARD / BLKSECDISCARD): wrapped, with the
 * same range checks, and nothing else may reach an ioctl. */
int __real_ioctl(int fd, unsigned long req, ...);
static unsigned int blk_discards;     /* ioctls checked, this burst */

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	const uint64_t *range;

	va_start(ap, req);
	range = va_arg(ap, const uint64_t *);
	va_end(ap);
	CHECK(fd == disk_fd && disk_blkdev && lim.discard && !lim.read_only);
	CHECK(req == BLKDISCARD || (req == BLKSECDISCARD && lim.discard_secure));
	check_extent(range[0], range[1]);
	observe(4, range[0] ^ range[1] << 20 ^ req);
	blk_discards++;
	return 0;
}

/*
 * raw.c's sync_io path (a file in memory: preadv/pwritev, fdatasync and
 * fallocate on the queue thread, answered before storage_submit returns)
 * ends in these calls, wrapped with the SQE checks: only the disk fd,
 * whole blocks inside the disk for the request (a call continuing a short
 * transfer may start mid-block), every iovec in a granted page or a live
 * bounce page.  The data calls share the SQEs' failure bits: a set bit
 * makes a call move half of what it asked (at least a byte), so
 * sync_rw's continuation of a short transfer (mid-segment too) runs; two
 * set bits in a row at a call that continues one end it at the file's
 * end (0 bytes: the request is answered -EIO).
 */
static bool sync_cont;               /* the last data call came short */

static ssize_t sync_data(const struct iovec *v, int n, off_t off, bool into_memory)
{
	uint64_t total = 0;
	unsigned int k;

	CHECK(lim.sector_size && n >= 1 && n <= 1024);
	CHECK(into_memory || !lim.read_only);
	for (int i = 0; i < n; i++) {
		if (sync_cont) {       /* may start inside a segment */
			CHECK(v[i].iov_len > 0);
			CHECK(!__asan_region_is_poisoned(v[i].iov_base, v[i].iov_len));
		} else {
			check_iov(&v[i], into_memory);
		}
		if (into_memory) {
			((volatile uint8_t *)v[i].iov_base)[0] = 0xd5;
			((volatile uint8_t *)v[i].iov_base)[v[i].iov_len - 1] = 0xd5;
		}
		total += v[i].iov_len;
	}
	CHECK(off >= 0 && (uint64_t)off < disk_bytes && total <= disk_bytes - (uint64_t)off);
	if (!sync_cont)
		check_extent((uint64_t)off, total);
	observe(5, (uint64_t)off ^ total << 24 ^ (uint64_t)n << 56 ^ into_memory);
	k = data_sqes++ % 6;
	if (!(io_fail_bits & (1u << k))) {
		sync_cont = false;
		return (ssize_t)total;
	}
	if (sync_cont && (io_fail_bits & (1u << ((k + 1) % 6)))) {
		sync_cont = false;
		return 0;
	}
	sync_cont = total > 1;
	return (ssize_t)(total > 1 ? total / 2 : total);
}

/* Other descriptors (the queue's /proc/loadavg, io_uring.c machine_busy)
 * go to the real calls. */
ssize_t __real_preadv(int fd, const struct iovec *v, int n, off_t off);
ssize_t __real_pwritev(int fd, const struct iovec *v, int n, off_t off);
ssize_t __real_pread(int fd, void *b, size_t len, off_t off);
ssize_t __real_pwrite(int fd, const void *b, size_t len, off_t off);
int __real_fdatasync(int fd);
int __real_fallocate(int fd, int mode, off_t off, off_t len);

ssize_t __wrap_preadv(int fd, const struct iovec *v, int n, off_t off)
{
	if (fd != disk_fd)
		return __real_preadv(fd, v, n, off);
	return sync_data(v, n, off, true);
}

ssize_t __wrap_pwritev(int fd, const struct iovec *v, int n, off_t off)
{
	if (fd != disk_fd)
		return __real_pwritev(fd, v, n, off);
	return sync_data(v, n, off, false);
}

ssize_t __wrap_pread(int fd, void *b, size_t len, off_t off)
{
	struct iovec v = { b, len };

	if (fd != disk_fd)
		return __real_pread(fd, b, len, off);
	CHECK(sync_cont);            /* only the rest of a segment */
	return sync_data(&v, 1, off, true);
}

ssize_t __wrap_pwrite(int fd, const void *b, size_t len, off_t off)
{
	struct iovec v = { (void *)b, len };

	if (fd != disk_fd)
		return __real_pwrite(fd, b, len, off);
	CHECK(sync_cont);
	return sync_data(&v, 1, off, false);
}

static bool disk_mem_fs;

int __wrap_fdatasync(int fd)
{
	if (fd != disk_fd)
		return __real_fdatasync(fd);
	observe(6, 0);
	/* noop_fsync: raw.c must not call it for a file in memory */
	CHECK(!lim.read_only && !disk_mem_fs);
	return 0;
}

int __wrap_fallocate(int fd, int mode, off_t off, off_t len)
{
	if (fd != disk_fd)
		return __real_fallocate(fd, mode, off, len);
	CHECK(!lim.read_only && lim.discard && !disk_blkdev);
	CHECK(mode == STORAGE_PUNCH_MODE && off >= 0 && len >= 0);
	check_extent((uint64_t)off, (uint64_t)len);
	observe(7, (uint64_t)off ^ (uint64_t)len << 24);
	return 0;
}

/*
 * No thread per input: the only thread the engine starts is raw.c's
 * sync_io helper (queue_open, inside be_io_init), which sync_io_batch 0
 * (set_tunables) leaves idle anyway.  While be_io_init runs,
 * pthread_create fails with EAGAIN, so raw.c takes its own path for a
 * helper that cannot be made (the queue thread does all); libFuzzer's
 * own threads are made outside it.
 */
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
static bool in_io_init;

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	if (in_io_init)
		return EAGAIN;
	return __real_pthread_create(t, a, fn, arg);
}

/* ---- event channel stub ------------------------------------------------- */

static unsigned int acks;

static int evt_ack(void *ctx)
{
	(void)ctx;
	acks++;
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

/* tun_init() once (it reads /sys for the CPU count); after that each
 * input sets the two tunables it may change, to its value or the
 * default. */
static void set_tunables(uint8_t cfg1)
{
	static const char *const copy_max[] = { NULL, "0", "4096", "45056" };
	static char def_copy[24], def_pers[24];

	if (!def_copy[0]) {
		tun_init();
		/* raw.c's sync_io helper thread is offered work only while
		 * the machine has a CPU to spare (/proc/stat): another
		 * thread in the wrapped calls, and an input that would not
		 * replay the same way.  Off: the queue thread does all
		 * (test_sync_io.py tests the helper). */
		CHECK(!tun_set(TUN_SYNC_IO_BATCH, "0", true));
		/* FUZZ_RESET_CHECK: no spin before a sleep.  Whether one
		 * runs and what it finds follows the clock and the
		 * machine's load (io_uring.c poll_spin), and a spin that
		 * found work skips the final check that writes req_event:
		 * two runs of one input would differ there for no fault of
		 * the reset.  What the spin keeps (poll_ns, poll_skips, the
		 * idle and load fields) is still compared after the reset. */
		if (getenv("FUZZ_RESET_CHECK"))
			CHECK(!tun_set(TUN_POLL_DURATION_US, "0", true));
		snprintf(def_copy, sizeof(def_copy), "%llu",
			 (unsigned long long)tun_get(TUN_GRANT_COPY_MAX_BYTES));
		snprintf(def_pers, sizeof(def_pers), "%llu",
			 (unsigned long long)tun_get(TUN_MAX_PERSISTENT_GRANTS));
	}
	CHECK(!tun_set(TUN_GRANT_COPY_MAX_BYTES, copy_max[(cfg1 >> 5) & 3] ?
		       copy_max[(cfg1 >> 5) & 3] : def_copy, true));
	CHECK(!tun_set(TUN_MAX_PERSISTENT_GRANTS, cfg1 & 0x80 ? "4" : def_pers, true));
}

static size_t slot_size(enum ring_abi abi)
{
	return abi == RING_ABI_X86_32 ? 108 : 112;
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every fetched request answered once, with one of its ids: the ids of
 * the responses, sorted, are the ids of the requests, sorted. */
static void check_responses(const uint8_t *ring_in, const struct be_ring *r,
			    RING_IDX start)
{
	const struct blkif_sring *s = (const void *)ring_mem;
	unsigned int n = r->req_cons - start;
	size_t rsz = r->abi == RING_ABI_X86_32 ? 108 : 112;   /* entry stride */
	static uint64_t want[1024], got[1024];
	static int verbose = -1;
	unsigned int discards_ok = 0;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	CHECK(s->rsp_prod == r->req_cons && r->rsp_prod_pvt == r->req_cons);
	CHECK(n <= r->nr_ents);
	for (unsigned int i = 0; i < n; i++) {
		const uint8_t *rsp = ring_mem + RING_HDR_SIZE +
				     ((start + i) & (r->nr_ents - 1)) * rsz;
		int16_t status;

		memcpy(&got[i], rsp, 8);
		memcpy(&status, rsp + 10, 2);
		CHECK(status == BLKIF_RSP_OKAY || status == BLKIF_RSP_ERROR ||
		      status == BLKIF_RSP_EOPNOTSUPP);
		CHECK(rsp[9] == 0);
		discards_ok += rsp[8] == BLKIF_OP_DISCARD && status == BLKIF_RSP_OKAY;
		want[i] = slot_id(ring_in, r->abi, r->nr_ents, start + i);
		if (verbose)
			fprintf(stderr, "response id %llu op %u status %d\n",
				(unsigned long long)got[i], rsp[8], status);
	}
	/* On a block device a discard reaches the disk only through the
	 * checked ioctl (raw.c storage_discard), one per discard answered
	 * OKAY (an empty one is answered OKAY without it); on a file it is
	 * a checked FALLOCATE SQE. */
	if (disk_blkdev)
		CHECK(blk_discards <= discards_ok);
	else
		CHECK(blk_discards == 0);
	blk_discards = 0;
	qsort(want, n, sizeof(want[0]), cmp_u64);
	qsort(got, n, sizeof(got[0]), cmp_u64);
	CHECK(!memcmp(want, got, n * sizeof(got[0])));
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
	/* Only the fd numbers matter: no I/O reaches them. */
	disk_fd = memfd_create("fuzz-disk", MFD_CLOEXEC);
	evt_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK(disk_fd >= 0 && evt_fd >= 0);
}

/* The negotiated limits and the guest's grants, from the header. */
static void set_limits(const struct fz_hdr *h, unsigned int nr_ents)
{
	lim = (struct req_limits){
		.sector_size = 512u << ((h->cfg1 >> 3) & 3),
		.read_only = h->cfg0 & 0x40,
		.flush = h->cfg0 & 0x80,
		.barrier = h->cfg1 & 1,
		.discard = h->cfg1 & 2,
		.discard_secure = h->cfg1 & 4,
		.max_indirect_segs = (h->max_indirect & 0x3fffu) % 1025u,
	};
	if (nr_ents > 32 && lim.max_indirect_segs > FZ_SLOT_SEGS / nr_ents)
		lim.max_indirect_segs = FZ_SLOT_SEGS / nr_ents;
	lim.sectors = ((uint64_t)h->disk_blocks + 1) * (lim.sector_size >> 9);
	disk_bytes = lim.sectors << 9;
	disk_blkdev = h->cfg0 & 0x20;
	disk_mem_fs = h->max_indirect & 0x4000;
	sync_cont = false;
	g_granted = h->granted;
	g_readonly = h->readonly;
	set_tunables(h->cfg1);
	io_fail_bits = h->rounds >> 2;
	data_sqes = 0;
}

/*
 * An execution costs microseconds, so the harness does not clear 256 KiB
 * of ring and guest memory per input: it clears only the pages the last
 * input or the backend wrote (ring_dirty, g_dirty; ring_in_len).
 */
static uint32_t ring_dirty;
static size_t ring_in_len;

static void mark_ring(size_t off, size_t len)
{
	for (size_t pg = off / FZ_PAGE; len && pg <= (off + len - 1) / FZ_PAGE; pg++)
		ring_dirty |= 1u << pg;
}

/* Slots [lo, lo + n) were written (requests refilled, responses). */
static void mark_slots(enum ring_abi abi, unsigned int nr_ents, RING_IDX lo, uint32_t n)
{
	size_t sz = abi == RING_ABI_X86_32 ? 108 : 112;
	unsigned int first = lo & (nr_ents - 1);

	if (n >= nr_ents) {
		mark_ring(0, RING_HDR_SIZE + nr_ents * sz);
		return;
	}
	if (first + n <= nr_ents) {
		mark_ring(RING_HDR_SIZE + first * sz, n * sz);
	} else {
		mark_ring(RING_HDR_SIZE + first * sz, (nr_ents - first) * sz);
		mark_ring(RING_HDR_SIZE, (first + n - nr_ents) * sz);
	}
}

/* take() of one guest page that is all zero unless dirty. */
static void take_page(struct cursor *c, unsigned int i)
{
	size_t k = c->left < FZ_PAGE ? c->left : FZ_PAGE;

	memcpy(guest[i], c->p, k);
	if (g_dirty & (1u << i))
		memset(guest[i] + k, 0, FZ_PAGE - k);
	c->p += k;
	c->left -= k;
	g_dirty = (g_dirty & ~(1u << i)) | (k ? 1u << i : 0);
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

	for (unsigned int pg = 0; pg < 32; pg++)
		if (ring_dirty & (1u << pg))
			memset(ring_mem + (size_t)pg * FZ_PAGE, 0, FZ_PAGE);
	ring_dirty = 1;               /* the header: indexes, events */
	take(c, &ring_len, sizeof(ring_len));
	if (ring_len > ring_bytes - RING_HDR_SIZE)
		ring_len = (uint16_t)(ring_bytes - RING_HDR_SIZE);
	take(c, ring_mem + RING_HDR_SIZE, ring_len);
	mark_ring(RING_HDR_SIZE, ring_len);
	s->rsp_prod = h->rsp_prod;
	s->rsp_event = h->rsp_event;
	/* At most the slots the input wrote and one more (all-zero slots
	 * after the first are the same request again: time, no coverage);
	 * bit 15 publishes any raw count (overruns). */
	unsigned int n = h->nreq % (ents + 1),
		     wrote = (ring_len + slot_size(abi) - 1) / slot_size(abi) + 1;

	if (n > wrote)
		n = wrote;
	s->req_prod = h->rsp_prod + ((h->nreq & 0x8000) ? (h->nreq & 0x7fffu) : n);
	memcpy(ring_in, ring_mem, RING_HDR_SIZE + ring_len);
	if (ring_in_len > RING_HDR_SIZE + ring_len)
		memset(ring_in + RING_HDR_SIZE + ring_len, 0,
		       ring_in_len - RING_HDR_SIZE - ring_len);
	ring_in_len = RING_HDR_SIZE + ring_len;
	for (unsigned int i = 0; i < FZ_GRANTS; i++)
		take_page(c, i);
}

/*
 * A structure-aware mutator (libFuzzer's LLVMFuzzerCustomMutator): half of
 * the mutations are libFuzzer's own byte-level ones (with the blkif
 * dictionary), the other half rewrite one field of one request slot in
 * the input's ring image, or one header field, with a value from the
 * places where validation decides: an operation (valid, indirect,
 * unknown), a segment count at a limit (0, 11, 12, 255; indirect 256 ...
 * 65535), a segment naming a granted or ungranted ref and any first/last
 * sector, a sector at the disk's end or past it, an indirect page ref, a
 * copy of another slot (duplicate ids), the published count.  Growing
 * the ring image moves the guest pages behind it.  Replays (make check)
 * never call it: it only chooses what to try.
 */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint32_t mut_rand(unsigned int *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return *seed >> 8;
}

/* Make the ring image at least len bytes (zero-filled); the new size. */
static size_t ring_grow(uint8_t *d, size_t size, size_t max, size_t len)
{
	const size_t at = sizeof(struct fz_hdr);
	uint16_t rl;
	size_t add;

	memcpy(&rl, d + at, 2);
	if (at + 2 + (size_t)rl > size) {
		/* Cut short: the harness reads the rest as zeros; so do we. */
		rl = (uint16_t)(size - at - 2);
		memcpy(d + at, &rl, 2);
	}
	if (rl >= len)
		return size;
	add = len - rl;
	if (size + add > max)
		return size;
	memmove(d + at + 2 + len, d + at + 2 + rl, size - at - 2 - rl);
	memset(d + at + 2 + rl, 0, add);
	rl = (uint16_t)len;
	memcpy(d + at, &rl, 2);
	return size + add;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	static const uint16_t nsegs_ind[] = { 0, 1, 11, 12, 255, 256, 257, 511, 512,
					      513, 1024, 1025, 4096, 65535 };
	static const uint8_t ops[] = { 0, 1, 2, 3, 5, 6, 6, 4, 9, 0xff };
	const size_t at = sizeof(struct fz_hdr) + 2;
	struct fz_hdr h;
	size_t ssz, nslots, off;
	uint16_t rl;
	uint32_t r = mut_rand(&seed);
	uint8_t *q;

	if ((r & 1) || size < at || max_size < at + 112)
		return LLVMFuzzerMutate(data, size, max_size);
	memcpy(&h, data, sizeof(h));
	ssz = (h.cfg0 & 1) ? 108 : 112;
	memcpy(&rl, data + sizeof(h), 2);
	nslots = rl / ssz;
	off = (size_t)(mut_rand(&seed) % (nslots + 1));   /* one past: a new slot */
	if (off > 16)
		off = mut_rand(&seed) % 16;
	size = ring_grow(data, size, max_size, (off + 1) * ssz);
	memcpy(&rl, data + sizeof(h), 2);
	if (rl < (off + 1) * ssz)
		return LLVMFuzzerMutate(data, size, max_size);
	nslots = rl / ssz;              /* now all inside the input */
	q = data + at + off * ssz;
	switch (mut_rand(&seed) % 9) {
	case 0:                 /* the operation */
		q[0] = ops[mut_rand(&seed) % sizeof(ops)];
		break;
	case 1: {               /* the segment count */
		uint16_t n = nsegs_ind[mut_rand(&seed) % (sizeof(nsegs_ind) / 2)];

		if (q[0] == BLKIF_OP_INDIRECT)
			memcpy(q + 2, &n, 2);
		else
			q[1] = (uint8_t)n;
		break;
	}
	case 2: {               /* a direct segment */
		size_t seg = (ssz == 108 ? 20 : 24) + (mut_rand(&seed) % 11) * 8;
		uint32_t gref = mut_rand(&seed) % (FZ_GRANTS + 2);

		memcpy(q + seg, &gref, 4);
		q[seg + 4] = (uint8_t)(mut_rand(&seed) % 9);
		q[seg + 5] = (uint8_t)(mut_rand(&seed) % 9);
		break;
	}
	case 3: {               /* the sector, around the disk's end */
		uint64_t blocks = (uint64_t)h.disk_blocks + 1, ss = 512u << ((h.cfg1 >> 3) & 3);
		uint64_t sec = blocks * (ss >> 9) - (mut_rand(&seed) % 16);

		if (mut_rand(&seed) & 1)
			sec = ~0ull - (mut_rand(&seed) % 16);
		/* the same place in a direct and an indirect request */
		memcpy(q + (ssz == 108 ? 12 : 16), &sec, 8);
		break;
	}
	case 4: {               /* an indirect page */
		uint32_t gref = mut_rand(&seed) % (FZ_GRANTS + 2);

		q[0] = BLKIF_OP_INDIRECT;
		q[1] = (uint8_t)(mut_rand(&seed) % 4);
		memcpy(q + (ssz == 108 ? 24 : 28) + (mut_rand(&seed) % 8) * 4, &gref, 4);
		break;
	}
	case 5:                 /* a copy of another slot: same id, same pages */
		if (nslots)
			memmove(q, data + at + (mut_rand(&seed) % nslots) * ssz, ssz);
		break;
	case 6:                 /* how many are published */
		h.nreq = (uint16_t)(mut_rand(&seed) % (off + 3));
		break;
	case 7:                 /* a grant given or taken, writable or not */
		h.granted ^= 1u << (mut_rand(&seed) % FZ_GRANTS);
		if (mut_rand(&seed) & 1)
			h.readonly ^= 1u << (mut_rand(&seed) % FZ_GRANTS);
		break;
	default:                /* the limits */
		h.cfg0 ^= (uint8_t)(1u << (1 + mut_rand(&seed) % 7));
		h.cfg1 ^= (uint8_t)(1u << (mut_rand(&seed) % 8));
		h.max_indirect = nsegs_ind[mut_rand(&seed) % (sizeof(nsegs_ind) / 2)];
		break;
	}
	memcpy(data, &h, sizeof(h));
	return size;
}

/*
 * One queue across inputs.  Connecting a queue per input (be_io_init's
 * slot tables: up to a MiB zeroed, the io_uring, the storage queue) was
 * most of an execution's fixed cost; be_io_reset (backend/io_uring.c)
 * returns the queue to its just-connected state, clearing only the slots
 * the last input took.  An input whose ring size or segment capacity
 * differs from the kept queue's, or that left it not quiet, gets a fresh
 * queue (the kept one destroyed).
 *
 * FUZZ_RESET_CHECK=1 proves reset == fresh: every input runs twice, on
 * the kept queue after a reset and then on a fresh queue, and aborts
 * unless both saw the same thing: the queue's state right after the
 * reset / the init (every scalar, every slot, every byte of the slot
 * tables; pointers as offsets), then everything running the input
 * produced (the ring with its responses, the counters, a digest of every
 * SQE, system call, grant map and copy the engine made).  At exit it says
 * how many of the comparisons followed a real reset
 * (tests/fuzz/Makefile.fuzz `replay` runs it over the corpus).
 */
static struct be_io io;
static bool io_live;
static struct be_ring r;
static struct gnt_xport x;
static struct storage st;
static struct be_stats stats;

/* The queue's structs as bytes (padding included: be_io_init and
 * be_io_reset both start from a memset). */
struct fz_obs {
	uint8_t io[sizeof(struct be_io)];   /* pointers cleared */
	unsigned int free_idx;        /* the free list's head, + 1 */
	struct be_stats stats;        /* lat cleared (time) */
	uint64_t digest;
	unsigned int events;
	unsigned int acks;
	size_t slots_len, mem_len;
	uint8_t slots[1024 * sizeof(struct be_pending)];
	uint8_t ring[FZ_PAGE << RING_MAX_ORDER];
	uint8_t *mem;                 /* a copy of the slot tables */
};
static struct fz_obs *obs_now;    /* what this run observes, or NULL */
static unsigned int resets, checked, checked_resets;

static void observe_queue(struct fz_obs *o)
{
	unsigned int n = io.nr_slots, cap = req_seg_capacity(&io.cfg.limits);
	size_t per = cap * (sizeof(struct iovec) + sizeof(void *) +
			    sizeof(struct blkif_request_segment));
	uintptr_t base = (uintptr_t)io.slot_mem;
	struct be_io t;

	memcpy(&t, &io, sizeof(t));
	memset(&t.cfg, 0, sizeof(t.cfg));
	memset(&t.uring, 0, sizeof(t.uring));
	memset(&t.loop, 0, sizeof(t.loop));
	t.sq = NULL;
	t.slots = NULL;
	t.slot_mem = NULL;
	t.free = NULL;
	t.load_fd = io.load_fd >= 0;
	memcpy(o->io, &t, sizeof(t));
	o->free_idx = io.free ? (unsigned int)(io.free - io.slots) + 1 : 0;
	CHECK(n <= 1024);
	o->slots_len = n * sizeof(struct be_pending);
	for (unsigned int i = 0; i < n; i++) {
		struct be_pending q;

		memcpy(&q, &io.slots[i], sizeof(q));
		q.iov = (void *)((uintptr_t)q.iov - base);
		q.seg_priv = (void *)((uintptr_t)q.seg_priv - base);
		q.v.segs = (void *)((uintptr_t)q.v.segs - base);
		q.next = (void *)(q.next ? (uintptr_t)(q.next - io.slots) + 1 : 0);
		memcpy(o->slots + i * sizeof(q), &q, sizeof(q));
	}
	o->mem_len = n * per;
	free(o->mem);
	CHECK((o->mem = malloc(o->mem_len ? o->mem_len : 1)));
	memcpy(o->mem, io.slot_mem, o->mem_len);
}

/* Everything the engine does to the outside, digested. */
static void observe(uint64_t a, uint64_t b)
{
	if (!obs_now)
		return;
	obs_now->digest = (obs_now->digest ^ a) * 0x100000001b3ull + b;
	obs_now->events++;
}

static void run_input(const uint8_t *data, size_t size, bool fresh)
{
	struct cursor c = { data, size };
	struct fz_hdr h;
	struct blkif_sring *s = (void *)ring_mem;
	enum ring_abi abi;
	unsigned int order;
	RING_IDX start;
	int rc;

	init_once();
	take(&c, &h, sizeof(h));
	abi = (h.cfg0 & 1) ? RING_ABI_X86_32 : RING_ABI_X86_64;
	order = ((h.cfg0 >> 1) & 7) % (RING_MAX_ORDER + 1);
	set_limits(&h, ring_nr_ents(abi, order));
	load_ring(&c, &h, abi, order);
	st = (struct storage){ .drv = &storage_raw_driver, .fd = disk_fd, .is_blkdev = disk_blkdev,
			       .read_only = lim.read_only, .size = disk_bytes,
			       .logical_block = lim.sector_size,
			       .physical_block = lim.sector_size,
			       .discard = lim.discard, .discard_secure = lim.discard_secure,
			       .sync_io = h.max_indirect & 0x8000, .mem_fs = disk_mem_fs };
	CHECK(ring_attach(&r, ring_mem, order, abi) == 0);
	start = r.req_cons;
	gnt_xport_init(&x, &fz_gt, FZ_FRONTEND, h.cfg0 & 0x10);
	memset(&stats, 0, sizeof(stats));
	struct be_io_cfg cfg = {
		.ring = &r, .storage = &st, .limits = lim,
		.xport = &gnt_xport_ops, .xport_ctx = &x,
		.evt = &fz_evt, .evt_ctx = NULL, .evt_fd = evt_fd, .stop_fd = -1,
		.stats = &stats, .wait = BE_IO_WAIT_URING,
	};
	RING_IDX written = h.rsp_prod;     /* slots written up to here */

	in_io_init = true;
	rc = -EINVAL;
	if (io_live && !fresh) {
		rc = be_io_reset(&io, &cfg);
		CHECK(rc == 0 || rc == -EINVAL);
		resets += !rc;
	}
	if (rc) {
		be_io_destroy(&io);
		CHECK(be_io_init(&io, &cfg) == 0);
		io_live = true;
	}
	in_io_init = false;
	/* The event poll armed, or queued (a fresh queue), not both. */
	unsigned int queued = io.uring.sq.sqe_tail - io.uring.sq.sqe_head;

	CHECK(fu.evt_armed ? queued == 0 :
	      queued == 1 && fu_sqes[io.uring.sq.sqe_head & io.uring.sq.ring_mask].opcode ==
			     IORING_OP_POLL_ADD);
	if (obs_now)
		observe_queue(obs_now);
	acks = 0;
	for (unsigned int round = 0; round <= h.rounds % 4u && !r.broken; round++) {
		if (round) {
			/* The frontend refills the slots the responses used. */
			RING_IDX prod = s->req_prod, n = s->req_prod - start;

			refill(ring_in, abi, r.nr_ents, prod, n);
			written = prod + n;
			start = prod;
			__atomic_store_n(&s->req_prod, prod + n, __ATOMIC_RELEASE);
		}
		kick_pending = true;           /* the frontend's notify */
		burst(&io, &r);
		check_responses(ring_in, &r, start);
	}
	/* Kept for the next input if it ended quiet (be_io_reset). */
	if (io.waiting || io.inflight || io.held || io.rsps_to_push || io.kicked) {
		be_io_destroy(&io);
		io_live = false;
	}
	kick_pending = false;
	if ((int32_t)(r.rsp_prod_pvt - written) > 0)
		written = r.rsp_prod_pvt;
	if (obs_now) {
		obs_now->stats = stats;
		/* The clock's: latencies (and spins, none here: see
		 * set_tunables). */
		memset(obs_now->stats.lat, 0, sizeof(stats.lat));
		obs_now->stats.polls = obs_now->stats.poll_hits = 0;
		obs_now->acks = acks;
		memcpy(obs_now->ring, ring_mem, (size_t)FZ_PAGE << order);
	}
	mark_slots(abi, r.nr_ents, h.rsp_prod, written - h.rsp_prod);
	CHECK(gnt_xport_destroy(&x) == 0);
	CHECK(nmaps == 0);            /* every grant mapping was given back */
	CHECK(nbounce == 0);          /* and every bounce page */
	pages_next = 0;
	CHECK(stats.inflight == 0);
}

static void report_resets(void)
{
	fprintf(stderr, "fuzz be_request: reset check: %u inputs compared, %u after a reset\n",
		checked, checked_resets);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_obs o[2];
	unsigned int before;

	if (!fuzz_reset_check(report_resets)) {
		run_input(data, size, false);
		return 0;
	}
	for (int k = 0; k < 2; k++) {
		uint8_t *mem = o[k].mem;

		memset(&o[k], 0, sizeof(o[k]));
		o[k].mem = mem;
	}
	before = resets;
	obs_now = &o[0];
	run_input(data, size, false);
	obs_now = &o[1];
	run_input(data, size, true);
	obs_now = NULL;
	checked++;
	checked_resets += resets != before;
	CHECK(!memcmp(o[0].io, o[1].io, sizeof(o[0].io)));
	CHECK(o[0].free_idx == o[1].free_idx);
	CHECK(o[0].slots_len == o[1].slots_len && o[0].mem_len == o[1].mem_len);
	CHECK(!memcmp(o[0].slots, o[1].slots, o[0].slots_len));
	CHECK(!memcmp(o[0].mem, o[1].mem, o[0].mem_len));
	CHECK(!memcmp(&o[0].stats, &o[1].stats, sizeof(o[0].stats)));
	CHECK(o[0].acks == o[1].acks);
	CHECK(o[0].events == o[1].events && o[0].digest == o[1].digest);
	for (size_t i = 0; i < sizeof(o[0].ring); i++)
		if (o[0].ring[i] != o[1].ring[i]) {
			fprintf(stderr, "ring byte %zu: %#x after a reset, %#x fresh\n", i,
				o[0].ring[i], o[1].ring[i]);
			break;
		}
	CHECK(!memcmp(o[0].ring, o[1].ring, sizeof(o[0].ring)));
	return 0;
}
