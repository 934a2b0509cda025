/* SPDX-License-Identifier: MIT */
/*
 * backend/storage/raw.c: the raw driver, a regular file or a block device.
 *
 * The target is opened once, with O_DIRECT when it allows it at the
 * advertised logical block size (falling back to the page cache
 * otherwise), read-only for mode "r", and O_EXCL for block devices (a
 * mounted or otherwise claimed device is refused with -EBUSY, as Linux
 * blkback claims its bdev).  Discard is punch-hole for files, BLKDISCARD /
 * BLKSECDISCARD for block devices.
 *
 * The data path (readv, writev, fdatasync, punch-hole) is SQEs on the
 * queue's own io_uring, tagged with the request's tag, so their CQEs are
 * the loop's; a flush with link set is linked (IOSQE_IO_LINK) to the data
 * that follows.  Only block-device discard is synchronous (as Linux issues
 * it from its ring thread).  The fd is shared by every queue of the vbd.
 *
 * Files in memory (tmpfs, ramfs, hugetlbfs; fstatfs's magic) are the
 * exception (the sync_io tunable, default auto): io_uring cannot read them
 * without blocking (shmem has no FMODE_NOWAIT), so it hands every read to
 * an io-wq worker and the queue thread waits for a context switch there
 * and back, which costs more than the copy.  Their data path is preadv,
 * pwritev and fallocate on the queue thread, answered before raw_submit
 * returns, like block-device discard; a flush is answered at once (their
 * fsync is noop_fsync).  A page of such a file that is in swap stalls the
 * queue (only it) while it is read back.  sync_io=1 does the same for any
 * raw target, with the same bound: the queue waits for every request.
 *
 * One queue thread is then one CPU's worth of copies, so each sync_io
 * queue has one helper thread ("Deep batches" below): when the loop
 * takes at least sync_io_batch reads and writes in one go, those from
 * the sync_io_batch-th on are offered to the helper as they come and
 * shared by the two threads, each taking the next in ring order, once
 * the loop has taken what its ring held (commit); the queue thread
 * answers them in ring order once both are done.  The reads and writes
 * before are done at once, as are all of a smaller batch (QD1), and
 * every one while the machine has no CPU to spare (spare_cpu).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <linux/fs.h>
#include <linux/magic.h>

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <liburing.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "lib/cpu.h"
#include "backend/storage/storage.h"
#include "backend/tunables.h"

/* A decimal number from /sys/dev/block/M:m/<name>; 0 when unreadable. */
static uint64_t sysfs_u64(dev_t rdev, const char *name)
{
	char path[96], buf[32];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s",
		 major(rdev), minor(rdev), name);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static int open_target(const char *path, const struct storage_opts *o,
		       bool blkdev, bool direct)
{
	int flags = (o->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;

	if (blkdev)
		flags |= O_EXCL;
	if (direct)
		flags |= O_DIRECT;
	int fd = open(path, flags);
	return fd < 0 ? -errno : fd;
}

static int probe_blkdev(struct storage *s, const struct storage_opts *o)
{
	int lbs = 0;
	unsigned int pbs = 0;
	uint64_t bytes = 0, range[2];

	if (ioctl(s->fd, BLKGETSIZE64, &bytes) || ioctl(s->fd, BLKSSZGET, &lbs) ||
	    ioctl(s->fd, BLKPBSZGET, &pbs))
		return -errno;
	if (o->sector_size && o->sector_size < (uint32_t)lbs)
		return -EINVAL;
	s->logical_block = o->sector_size ? o->sector_size : (uint32_t)lbs;
	s->physical_block = pbs > s->logical_block ? pbs : s->logical_block;
	s->size = bytes;
	if (s->read_only)
		return 0;
	s->discard = sysfs_u64(s->rdev, "queue/discard_max_bytes") > 0;
	s->discard_granularity = (uint32_t)sysfs_u64(s->rdev, "queue/discard_granularity");
	s->discard_alignment = (uint32_t)sysfs_u64(s->rdev, "discard_alignment");
	/* Secure erase has no sysfs file: ask the ioctl about a range past
	 * the end.  The kernel answers EOPNOTSUPP before looking at the
	 * range when the device cannot do it, EINVAL (and does nothing)
	 * when it can. */
	range[0] = bytes;
	range[1] = 512;
	s->discard_secure = s->discard && ioctl(s->fd, BLKSECDISCARD, range) &&
			    errno == EINVAL;
	return 0;
}

static int probe_file(struct storage *s, const struct storage_opts *o,
		      const struct stat *st)
{
	s->logical_block = o->sector_size ? o->sector_size : 512;
	s->physical_block = st->st_blksize > s->logical_block &&
			    st->st_blksize <= 4096 ? (uint32_t)st->st_blksize
						   : s->logical_block;
	s->size = (uint64_t)st->st_size;
	if (s->read_only)
		return 0;
	/* Punching past the end of the file changes nothing and tells
	 * whether the file system can punch holes at all. */
	if (fallocate(s->fd, STORAGE_PUNCH_MODE, st->st_size, 4096) == 0) {
		s->discard = true;
		s->discard_granularity = (uint32_t)st->st_blksize;
	}
	return 0;
}

/* O_DIRECT needs file offsets and buffers aligned to what statx reports;
 * our segments are aligned to the logical block, so that must be enough. */
static bool direct_fits(int fd, uint32_t lbs)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) ||
	    !(sx.stx_mask & STATX_DIOALIGN) || !sx.stx_dio_offset_align)
		return false;
	return sx.stx_dio_offset_align <= lbs && sx.stx_dio_mem_align <= lbs;
}

/* Reopen fd with O_DIRECT when the target supports it at our block size. */
static void try_direct(struct storage *s, const char *path,
		       const struct storage_opts *o)
{
	int fd;

	if (o->no_direct || !direct_fits(s->fd, s->logical_block))
		return;
	fd = open_target(path, o, false, true);
	if (fd < 0)
		return;        /* page cache it is */
	close(s->fd);
	s->fd = fd;
	s->direct = true;
}

/* A file whose pages live in memory only: its reads never wait for a
 * device, and io_uring cannot do them without blocking.  (A block
 * device's fd reports the file system of its /dev node: not asked.) */
static bool in_memory(int fd)
{
	struct statfs f;

	if (fstatfs(fd, &f))
		return false;
	return f.f_type == TMPFS_MAGIC || f.f_type == RAMFS_MAGIC ||
	       f.f_type == HUGETLBFS_MAGIC;
}

/* Online resize: a file's length or a block device's size now. */
static int raw_get_size(const struct storage *s, uint64_t *bytes)
{
	struct stat st;

	if (s->is_blkdev)
		return ioctl(s->fd, BLKGETSIZE64, bytes) ? -errno : 0;
	if (fstat(s->fd, &st))
		return -errno;
	*bytes = (uint64_t)st.st_size;
	return 0;
}

static void raw_close(struct storage *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

static int raw_open(struct storage *s, const struct storage_opts *o)
{
	const char *path = s->target;
	struct stat st;
	int rc;

	s->fd = -1;
	if (stat(path, &st))
		return -errno;
	s->is_blkdev = S_ISBLK(st.st_mode);
	if (!s->is_blkdev && !S_ISREG(st.st_mode)) {
		storage_set_error("raw: %s is neither a regular file nor a block device",
				  path);
		return -EINVAL;
	}
	/* Block devices: O_DIRECT straight away (they take any multiple of
	 * their logical block); files first without, then see. */
	rc = open_target(path, o, s->is_blkdev, s->is_blkdev && !o->no_direct);
	if (rc < 0)
		goto out;
	s->fd = rc;
	s->direct = s->is_blkdev && !o->no_direct;
	s->flush = true;
	if (s->is_blkdev) {
		s->rdev = st.st_rdev;
		rc = probe_blkdev(s, o);
	} else {
		rc = probe_file(s, o, &st);
		if (!rc)
			try_direct(s, path, o);
		s->mem_fs = in_memory(s->fd);
	}
	s->sync_io = o->sync_io == STORAGE_SYNC_YES ||
		     (o->sync_io == STORAGE_SYNC_AUTO && s->mem_fs);
out:
	if (rc)
		raw_close(s);
	return rc;
}

int storage_discard(const struct storage *s, uint64_t off, uint64_t len,
		    bool secure)
{
	uint64_t range[2] = { off, len };

	if (s->drv != &storage_raw_driver || !s->is_blkdev)
		return -EOPNOTSUPP;
	if (!s->discard || (secure && !s->discard_secure))
		return -EOPNOTSUPP;
	if (ioctl(s->fd, secure ? BLKSECDISCARD : BLKDISCARD, range))
		return -errno;
	return 0;
}

/* ---- queue side ---------------------------------------------------------- */

/*
 * Deep batches (sync_io): the queue's helper thread.
 *
 * Only reads and writes of a deep batch are deferred: from the
 * sync_io_batch-th taken since the last commit on, while a CPU is spare
 * (spare_cpu); the ones before are done at once, so their answers go out
 * at once, and a shallow batch (QD1) is served as without a helper.
 * Deferred requests are numbered (seq, 32 bits, wrapping); item
 * seq % depth holds one.  Three counters order the sharing:
 *   published  items [.., published) are filled in (queue thread only);
 *   offered    the helper may take items below it (queue thread, stored
 *              after each item is filled: equal to published);
 *   claimed    the next item to serve: either thread takes item c by
 *              moving claimed from c to c + 1 (compare-and-swap), the
 *              helper only while c < offered, the queue thread while
 *              c < published; the counters only grow, so a stale c fails.
 * The helper counts what it finished in hdone (release); at commit the
 * queue thread serves items until none is left, waits until hdone has
 * every item the helper took (spinning briefly, then on the futex),
 * then answers the batch in ring order.  Only then is an item's slot
 * filled again, so the two never touch one item at once: the helper
 * reads the request and writes res of the items it took, the queue
 * thread everything else.
 *
 * The helper sleeps on the futex wake (sleeping set) and the queue
 * thread wakes it when it offers items (one futex_wake per sleep);
 * after serving, it spins up to HELPER_SPIN_NS on offered (the next
 * batch of a busy queue comes within a few microseconds), then sleeps;
 * it ends when stop is set (queue_close, nothing in flight).
 *
 * Lifetimes: the helper is made by queue_open (be_io_init, on the
 * control thread before the queue thread starts) and joined by
 * queue_close (be_io_destroy, control thread, nothing in flight: after
 * it joined the queue thread, or when be_io_init failed); items and counters live in the struct
 * storage_queue, which outlives it.  The spare-CPU fields are the queue
 * thread's.
 */
#define HELPER_SPIN_NS 20000u
#define JOIN_SPIN_NS 10000u

struct sync_item {                /* a deferred read or write */
	const struct iovec *iov;
	unsigned int iovcnt;
	bool write;
	uint64_t off, tag;
	int res;                  /* bytes moved or -errno; by its server */
};

struct storage_queue {
	const struct storage *s;
	struct io_uring *uring;
	struct storage_loop loop;
	/* sync_io only (items NULL otherwise) */
	struct sync_item *items;
	unsigned int depth;
	uint32_t start;           /* queue thread: the batch's first item */
	uint32_t published;       /* queue thread only */
	uint32_t mine;            /* queue thread: items it served, ever */
	uint32_t taken;           /* queue thread: reads and writes since commit */
	bool helper_up;
	pthread_t helper;
	/* the spare-CPU rule (spare_cpu): queue thread only */
	int stat_fd;              /* /proc/stat, or -1 */
	clockid_t helper_clock;   /* the helper's CPU time */
	uint64_t win_ns, win_idle_ns, win_helper_ns;
	bool spare;               /* offer to the helper in this window */
	/* shared (atomics; see above), a cache line per writer */
	_Alignas(64) uint32_t offered;   /* queue thread */
	uint32_t stop;
	_Alignas(64) uint32_t claimed;   /* both */
	_Alignas(64) uint32_t hdone;     /* helper */
	uint32_t sleeping;               /* helper sets, queue thread clears */
	uint32_t wake, joining;
};

static uint32_t ld(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void futex_wait(uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t sync_rw(int fd, bool write, const struct iovec *iov,
		       unsigned int n, uint64_t off);

/* Take the next item if it is below limit: true, and *c is it. */
static bool claim(struct storage_queue *q, uint32_t limit, uint32_t *c)
{
	*c = ld(&q->claimed);
	do {
		if ((int32_t)(limit - *c) <= 0)
			return false;
	} while (!__atomic_compare_exchange_n(&q->claimed, c, *c + 1, false,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	return true;
}

static void serve(struct storage_queue *q, uint32_t c)
{
	struct sync_item *it = &q->items[c % q->depth];
	int64_t res = sync_rw(q->s->fd, it->write, it->iov, it->iovcnt, it->off);

	it->res = res > INT_MAX ? -EIO : (int)res;
}

static bool helper_has_work(struct storage_queue *q)
{
	return (int32_t)(ld(&q->offered) - ld(&q->claimed)) > 0;
}

static void *helper_main(void *arg)
{
	struct storage_queue *q = arg;
	uint32_t c;

	while (!ld(&q->stop)) {
		if (claim(q, ld(&q->offered), &c)) {
			serve(q, c);
			__atomic_fetch_add(&q->hdone, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&q->joining, __ATOMIC_SEQ_CST))
				futex_wake(&q->hdone);
			continue;
		}
		uint64_t t0 = mono_ns();
		unsigned int i = 0;
		while (!helper_has_work(q) && !ld(&q->stop) &&
		       ((++i & 63) || mono_ns() - t0 < HELPER_SPIN_NS))
			xbd_cpu_relax();
		if (helper_has_work(q))
			continue;
		uint32_t w = ld(&q->wake);
		__atomic_store_n(&q->sleeping, 1, __ATOMIC_SEQ_CST);
		if (!helper_has_work(q) && !__atomic_load_n(&q->stop, __ATOMIC_SEQ_CST))
			futex_wait(&q->wake, w);
		__atomic_store_n(&q->sleeping, 0, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void wake_helper(struct storage_queue *q)
{
	if (__atomic_load_n(&q->sleeping, __ATOMIC_SEQ_CST) &&
	    __atomic_exchange_n(&q->sleeping, 0, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_add(&q->wake, 1, __ATOMIC_SEQ_CST);
		futex_wake(&q->wake);
	}
}

/* The queue thread waits until the helper finished the n it took: it is
 * in one request at most, a few microseconds unless it lost its CPU. */
static void join_helper(struct storage_queue *q, uint32_t n)
{
	uint64_t t0 = 0;
	uint32_t v;

	for (unsigned int i = 1; (v = ld(&q->hdone)) != n; i++) {
		if (i & 63) {
			xbd_cpu_relax();
			continue;
		}
		if (!t0)
			t0 = mono_ns();
		if (mono_ns() - t0 < JOIN_SPIN_NS)
			continue;
		__atomic_store_n(&q->joining, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&q->hdone, __ATOMIC_SEQ_CST) != n)
			futex_wait(&q->hdone, v);
		__atomic_store_n(&q->joining, 0, __ATOMIC_SEQ_CST);
	}
}

static int start_helper(struct storage_queue *q, unsigned int depth)
{
	q->items = calloc(depth, sizeof(*q->items));
	if (!q->items)
		return -ENOMEM;
	q->depth = depth;
	/* test only (test_sync_io.py): the helper whatever the machine
	 * runs, so that its share is proven on a busy machine too */
	if (!getenv("XBD_TEST_HELPER_IGNORE_LOAD"))
		q->stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	q->spare = q->stat_fd < 0;
	if (pthread_create(&q->helper, NULL, helper_main, q)) {
		free(q->items);       /* no helper: the queue thread does all */
		q->items = NULL;
		return 0;
	}
	q->helper_up = true;
	if (pthread_getcpuclockid(q->helper, &q->helper_clock))
		q->helper_clock = (clockid_t)-1;
	return 0;
}

static void stop_helper(struct storage_queue *q)
{
	if (q->helper_up) {
		__atomic_store_n(&q->stop, 1, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&q->wake, 1, __ATOMIC_SEQ_CST);
		futex_wake(&q->wake);
		pthread_join(q->helper, NULL);
	}
	q->helper_up = false;
	free(q->items);
	q->items = NULL;
	if (q->stat_fd >= 0)
		close(q->stat_fd);
	q->stat_fd = -1;
}

/* The machine's idle time (idle + iowait of /proc/stat's cpu line), ns. */
static uint64_t machine_idle_ns(int fd)
{
	char buf[256];
	unsigned long long v[5] = { 0 };
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	static long hz;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		   &v[3], &v[4]) != 5)
		return 0;
	if (!hz)
		hz = sysconf(_SC_CLK_TCK);
	return (v[3] + v[4]) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
}

static uint64_t helper_cpu_ns(const struct storage_queue *q)
{
	struct timespec ts;

	if (q->helper_clock == (clockid_t)-1 || clock_gettime(q->helper_clock, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Is there a CPU for the helper?  Every SPARE_WINDOW_NS the queue thread
 * looks at how much of the last window the machine was idle, plus what
 * the helper itself ran (its spin and its share would otherwise count
 * against it): at least half a CPU, and the next window offers deep
 * batches to the helper; less (every CPU wanted by other work), and the
 * queue thread serves them alone, as a helper that loses its CPU in the
 * middle of a request stalls the whole batch.  The first window offers
 * nothing.  Without /proc/stat: always.
 */
#define SPARE_WINDOW_NS 100000000u

static bool spare_cpu(struct storage_queue *q)
{
	uint64_t now = mono_ns(), idle, hcpu;

	if (q->stat_fd < 0)
		return true;
	if (now - q->win_ns < SPARE_WINDOW_NS)
		return q->spare;
	idle = machine_idle_ns(q->stat_fd);
	hcpu = helper_cpu_ns(q);
	if (q->win_ns)
		q->spare = (idle - q->win_idle_ns) + (hcpu - q->win_helper_ns) >=
			   (now - q->win_ns) / 2;
	q->win_ns = now;
	q->win_idle_ns = idle;
	q->win_helper_ns = hcpu;
	return q->spare;
}

/* Defer a read or write of a deep batch and offer it to the helper
 * (queue thread). */
static int defer_rw(struct storage_queue *q, const struct storage_req *r)
{
	struct sync_item *it = &q->items[q->published % q->depth];

	*it = (struct sync_item){ r->iov, r->iovcnt, r->op == STORAGE_WRITE,
				  r->off, r->tag, 0 };
	q->published++;
	__atomic_store_n(&q->offered, q->published, __ATOMIC_SEQ_CST);
	wake_helper(q);
	return STORAGE_QUEUED;
}

/* The sync_io_batch-th read or write since the last commit, and those
 * after it, go to the helper's batch while a CPU is spare; the ones
 * before it are done at once, as are all of a shallow batch. */
static bool deep(struct storage_queue *q)
{
	uint64_t batch = tun_get(TUN_SYNC_IO_BATCH);

	q->taken++;
	return batch && q->spare && q->taken >= batch;
}

/* Serve the deferred batch and answer it in ring order; again while
 * answering let more come (a barrier that waited for the drain). */
static void raw_commit(struct storage_queue *q)
{
	uint32_t c, n, helped;

	if (q->items && q->taken >= 2)
		(void)spare_cpu(q);   /* for the next batches */
	q->taken = 0;
	while (q->items && q->published != q->start) {
		uint32_t from = q->start, to = q->published;

		n = 0;
		while (claim(q, to, &c)) {
			serve(q, c);
			n++;
		}
		q->mine += n;
		helped = (to - from) - n;
		/* every item up to 'to' is claimed: the helper's are its
		 * total so far, all of them counted in hdone when done */
		join_helper(q, to - q->mine);
		q->start = to;
		if (helped && q->loop.helped)
			__atomic_store_n(q->loop.helped,
					 __atomic_load_n(q->loop.helped, __ATOMIC_RELAXED) + helped,
					 __ATOMIC_RELAXED);
		for (uint32_t i = from; i != to; i++) {
			const struct sync_item *it = &q->items[i % q->depth];

			q->loop.complete(q->loop.ctx, it->tag, it->res);
		}
	}
}

static int raw_queue_open(const struct storage *s, unsigned int index,
			  unsigned int depth, const struct storage_loop *loop,
			  struct storage_queue **out)
{
	struct storage_queue *q;
	int rc = 0;

	(void)index;
	if (!loop->uring)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->s = s;
	q->uring = loop->uring;
	q->loop = *loop;
	q->stat_fd = -1;
	if (s->sync_io && depth)
		rc = start_helper(q, depth);
	if (rc) {
		free(q);
		return rc;
	}
	*out = q;
	return 0;
}

static void raw_queue_close(struct storage_queue *q)
{
	stop_helper(q);
	free(q);
}

/* preadv / pwritev of the whole request from the queue thread: again on
 * what a short transfer left (a signal, a partial page), until all of it
 * moved or the file ended (0 bytes: the answer is then short, as
 * io_uring's would be).  The bytes moved, or -errno. */
static int64_t sync_rw(int fd, bool write, const struct iovec *iov,
		       unsigned int n, uint64_t off)
{
	uint64_t done = 0;
	unsigned int i = 0;
	size_t in = 0;        /* bytes of iov[i] already moved */

	while (i < n) {
		ssize_t k;

		if (in) {         /* the rest of a segment, then the others */
			char *b = (char *)iov[i].iov_base + in;
			size_t l = iov[i].iov_len - in;

			k = write ? pwrite(fd, b, l, (off_t)(off + done))
				  : pread(fd, b, l, (off_t)(off + done));
		} else {
			k = write ? pwritev(fd, iov + i, (int)(n - i), (off_t)(off + done))
				  : preadv(fd, iov + i, (int)(n - i), (off_t)(off + done));
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		done += (uint64_t)k;
		for (size_t left = (size_t)k; left && i < n;) {
			size_t rest = iov[i].iov_len - in;

			if (left < rest) {
				in += left;
				left = 0;
			} else {
				left -= rest;
				in = 0;
				i++;
			}
		}
	}
	return (int64_t)done;
}

/* The sync_io data path: the request is done when this returns.  0, or
 * -errno (-EIO for a transfer that came short, as a short CQE fails). */
static int sync_submit(const struct storage *s, const struct storage_req *r)
{
	int64_t res;

	switch (r->op) {
	case STORAGE_READ:
	case STORAGE_WRITE:
		res = sync_rw(s->fd, r->op == STORAGE_WRITE, r->iov, r->iovcnt, r->off);
		if (res < 0)
			return (int)res;
		return (uint64_t)res == r->len ? 0 : -EIO;
	case STORAGE_FLUSH:      /* done before the data: the link holds */
		if (s->mem_fs)
			return 0;    /* noop_fsync: nothing to write back */
		return fdatasync(s->fd) ? -errno : 0;
	default:
		return fallocate(s->fd, STORAGE_PUNCH_MODE, (off_t)r->off,
				 (off_t)r->len) ? -errno : 0;
	}
}

/* The loop reserved the SQEs (two per request: flush + data). */
static int raw_submit(struct storage_queue *q, const struct storage_req *r)
{
	const struct storage *s = q->s;
	struct io_uring_sqe *sqe;

	if ((r->op == STORAGE_DISCARD || r->op == STORAGE_DISCARD_SECURE) &&
	    s->is_blkdev)
		return storage_discard(s, r->off, r->len, r->op == STORAGE_DISCARD_SECURE);
	if (r->op == STORAGE_DISCARD_SECURE)
		return -EOPNOTSUPP;
	if (s->sync_io && q->items && (r->op == STORAGE_READ || r->op == STORAGE_WRITE) &&
	    deep(q))
		return defer_rw(q, r);
	if (s->sync_io)
		return sync_submit(s, r);
	sqe = io_uring_get_sqe(q->uring);
	if (!sqe)
		return -EBUSY;
	switch (r->op) {
	case STORAGE_READ:
		io_uring_prep_readv(sqe, s->fd, r->iov, r->iovcnt, (off_t)r->off);
		break;
	case STORAGE_WRITE:
		io_uring_prep_writev(sqe, s->fd, r->iov, r->iovcnt, (off_t)r->off);
		break;
	case STORAGE_FLUSH:
		io_uring_prep_fsync(sqe, s->fd, IORING_FSYNC_DATASYNC);
		if (r->link)
			sqe->flags |= IOSQE_IO_LINK;   /* the data goes after it */
		break;
	default:
		io_uring_prep_fallocate(sqe, s->fd, STORAGE_PUNCH_MODE,
					(off_t)r->off, (off_t)r->len);
		break;
	}
	io_uring_sqe_set_data64(sqe, r->tag);
	return STORAGE_QUEUED;
}

const struct storage_driver storage_raw_driver = {
	.name = "raw",
	.open = raw_open,
	.close = raw_close,
	.queue_open = raw_queue_open,
	.queue_close = raw_queue_close,
	.submit = raw_submit,
	.commit = raw_commit,
	.get_size = raw_get_size,
};
