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

#include <stdlib.h>
#include <liburing.h>

#include "backend/storage/storage.h"

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

struct storage_queue {
	const struct storage *s;
	struct io_uring *uring;
};

static int raw_queue_open(const struct storage *s, unsigned int index,
			  unsigned int depth, const struct storage_loop *loop,
			  struct storage_queue **out)
{
	struct storage_queue *q;

	(void)index;
	(void)depth;
	if (!loop->uring)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->s = s;
	q->uring = loop->uring;
	*out = q;
	return 0;
}

static void raw_queue_close(struct storage_queue *q)
{
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
	.get_size = raw_get_size,
};
