/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront's FUSE side: one regular file per connected vbd, served
 * with libfuse's low-level API and asynchronous replies.
 *
 * Inodes: the root directory is FUSE_ROOT_ID; the file of vbd devid is
 * inode devid + 2.  open() stores the disk's serial in fi->fh, so a file
 * opened before a detach fails with EIO afterwards, even when the same
 * vbd is attached again (a new disk to it).
 *
 * Threads: libfuse's worker threads (fuse_session_loop_mt) and, over
 * io_uring, the ring threads (fuse_uring.c) run the handlers.  A read, write, fsync or fallocate handler only submits: it
 * takes a reference on the disk, puts the request on one of the disk's
 * queues (round robin, as blk-mq spreads CPUs over hardware queues) with
 * xbdfront_submit() and xbdfront_commit() and returns.  The answer (fuse_reply_*) comes from
 * io_done(), the completion callback, on the disk's completion thread of
 * that queue (disks.c) or on the thread that failed the I/O.  So the
 * kernel's queue depth (FS_MAX_BACKGROUND requests of asynchronous
 * direct I/O) becomes the ring's, with a few worker threads.
 * Lifetime: a struct fs_io and the disk reference it holds live from the
 * handler to io_done(); blkfront_fs_serve() waits for every answer
 * (fs_pending) before it unmounts and frees the session.
 * Page cache: buffered I/O goes through the kernel's page cache (FUSE
 * writeback cache, fs_init), so the reads and writes that reach us are
 * the kernel's read-ahead and write-back (up to max_write) and O_DIRECT
 * requests; fsync reaches us after the kernel wrote the file back.  A
 * stop signal and a detach write every file back first (the stopper
 * thread, write_back()).  Documentation/guest.md has the rules.
 * Lock: fs_rmw_lock: writes that do not cover whole sectors are
 * read-modify-write, serialised per process; they wait for their two
 * steps in the worker thread (a rare path: dd of odd sizes).
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "frontend/blkfront/disks.h"
#include "frontend/blkfront/fs.h"
#include "lib/log.h"

/* Requests of asynchronous direct I/O the kernel keeps in flight towards
 * us (fuse_conn_info.max_background; the kernel's default is 12). */
#define FS_MAX_BACKGROUND 256
/* Worker threads: the handlers never wait for I/O except the
 * read-modify-write path, so a few serve any queue depth. */
#define FS_MAX_THREADS 4

/* Seconds the kernel keeps a disk's attributes.  The size changes only
 * by an online resize, which tells the kernel itself (grow_file), and
 * with the writeback cache the kernel would ask again before every
 * write(2) once they expired. */
#define FS_ATTR_TIMEOUT 3600.0
/* Read-ahead of a disk file (the bdi's read_ahead_kb), one largest FUSE
 * request: sequential buffered reads reach the ring as 1 MiB reads. */
#define FS_READ_AHEAD_KB 1024

/*
 * The statistics tree: DIR/.statistics/<vdev>/{inflight,max_inflight},
 * read-only decimal text, one value per file as in sysfs
 * (Documentation/guest.md).  Not extended attributes of the disk file:
 * a FUSE server that answers GETXATTR is asked for security.capability
 * before every write(2) (file_remove_privs; FUSE clears SB_NOSEC unless
 * the server handles killpriv v2, which libfuse 3.14 cannot ask for),
 * one synchronous round trip per 4 KiB of a buffered dd.  With no
 * getxattr or listxattr handler libfuse answers ENOSYS, and the kernel
 * asks this mount no more (every xattr call then fails EOPNOTSUPP).
 * Inodes: kind << INO_KIND_SHIFT | devid; a disk file's (devid + 2) and
 * the root's are kind 0.
 */
#define STATS_DIR ".statistics"
#define INO_KIND_SHIFT 40
enum ino_kind {
	INO_FILE = 0,                 /* the root and the disk files */
	INO_STATS_ROOT = 1,           /* DIR/.statistics */
	INO_STATS_DISK = 2,           /* DIR/.statistics/<vdev> */
	INO_STAT = 3,                 /* + k: DIR/.statistics/<vdev>/stat_names[k] */
};
#define STATS_ROOT_INO ((fuse_ino_t)INO_STATS_ROOT << INO_KIND_SHIFT)
static const char *const stat_names[] = { "inflight", "max_inflight" };
#define N_STATS (sizeof(stat_names) / sizeof(stat_names[0]))

static pthread_mutex_t fs_rmw_lock = PTHREAD_MUTEX_INITIALIZER;
/* Requests submitted and not answered, over every disk (atomic): the
 * session must outlive their answers. */
static unsigned long fs_pending;

static struct disks *table(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static fuse_ino_t ino_of(const struct disk *d)
{
	return (fuse_ino_t)d->devid + 2;
}

static unsigned int ino_kind(fuse_ino_t ino)
{
	return (unsigned int)(ino >> INO_KIND_SHIFT);
}

static fuse_ino_t stats_ino(unsigned int kind, uint32_t devid)
{
	return (fuse_ino_t)kind << INO_KIND_SHIFT | devid;
}

/* Whether ino names a node of the statistics tree (one stats_ino made). */
static bool is_stats(fuse_ino_t ino)
{
	unsigned int kind = ino_kind(ino);

	if (kind == INO_STATS_ROOT)
		return ino == STATS_ROOT_INO;
	return kind > INO_STATS_ROOT && kind < INO_STAT + N_STATS &&
	       ino == stats_ino(kind, (uint32_t)ino);
}

/* The disk of inode ino, referenced, or NULL; with fi, also NULL when
 * the file was opened on an earlier connection of the vbd. */
static struct disk *disk_of(fuse_req_t req, fuse_ino_t ino, const struct fuse_file_info *fi)
{
	struct disk *d;

	if (ino < 2 || ino - 2 > UINT32_MAX)
		return NULL;
	d = disks_get_id(table(req), (uint32_t)(ino - 2));
	if (d && fi && fi->fh != d->serial) {
		disks_put(table(req), d);
		return NULL;
	}
	return d;
}

/* Statistic k of d (stat_names[k]). */
static unsigned long stat_value(const struct disk *d, unsigned int k)
{
	return __atomic_load_n(k ? &d->max_inflight : &d->inflight, __ATOMIC_RELAXED);
}

/* The disk of a statistics node below .statistics/<vdev>, as disk_of. */
static struct disk *stats_disk_of(fuse_req_t req, fuse_ino_t ino,
				  const struct fuse_file_info *fi)
{
	if (!is_stats(ino) || ino_kind(ino) == INO_STATS_ROOT)
		return NULL;
	return disk_of(req, (ino & UINT32_MAX) + 2, fi);
}

static void disk_stat(const struct disk *d, struct stat *st)
{
	uint64_t size = disk_size(d);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino_of(d);
	st->st_mode = S_IFREG | (d->readonly ? 0444 : 0644);
	st->st_nlink = 1;
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)(size / 512);
}

/* The sector-aligned span [*a, *a + *alen) covering [off, off + len). */
static void align_span(const struct disk *d, uint64_t off, size_t len, uint64_t *a, size_t *alen)
{
	uint64_t s = d->sector_size;

	*a = off / s * s;
	*alen = (size_t)(((off + len + s - 1) / s * s) - *a);
}

static int reply_errno(int rc)
{
	return rc == -ENODEV ? EIO : -rc;    /* detached meanwhile */
}

/* ---- asynchronous I/O ------------------------------------------------------ */

enum fs_io_kind { FS_READ, FS_WRITE, FS_STATUS };

/* One FUSE request in flight on a disk (see the file-top lifetime). */
struct fs_io {
	fuse_req_t req;
	struct disks *t;
	struct disk *d;               /* referenced until io_done */
	enum fs_io_kind kind;
	size_t len;                   /* read, write: bytes to answer */
	size_t skip;                  /* read: where the answer starts in data */
	char data[];                  /* read: the aligned span; write: a copy */
};

static void inflight_add(struct disk *d)
{
	unsigned long n = __atomic_add_fetch(&d->inflight, 1, __ATOMIC_RELAXED);
	unsigned long max = __atomic_load_n(&d->max_inflight, __ATOMIC_RELAXED);

	__atomic_add_fetch(&fs_pending, 1, __ATOMIC_RELAXED);
	while (n > max && !__atomic_compare_exchange_n(&d->max_inflight, &max, n, true,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void inflight_sub(struct disk *d)
{
	__atomic_sub_fetch(&d->inflight, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&fs_pending, 1, __ATOMIC_RELEASE);
}

/* Wait until every request is answered (the backend answers, or a
 * detach fails what it does not); polled: this runs once, at the end. */
static void drain(void)
{
	const struct timespec ms = { 0, 1000000 };

	while (__atomic_load_n(&fs_pending, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
}

/* The I/O of a request to d (whose reference it takes over), or NULL
 * after answering ENOMEM and dropping the reference. */
static struct fs_io *io_new(fuse_req_t req, struct disk *d, enum fs_io_kind kind,
			    size_t datalen)
{
	struct fs_io *io = malloc(sizeof(*io) + datalen);

	if (!io) {
		fuse_reply_err(req, ENOMEM);
		disks_put(table(req), d);
		return NULL;
	}
	*io = (struct fs_io){ .req = req, .t = table(req), .d = d, .kind = kind };
	inflight_add(d);
	return io;
}

/* The completion (through io_cqe): answer, drop the reference. */
static void io_done(void *arg, int status)
{
	struct fs_io *io = arg;

	if (status)
		fuse_reply_err(io->req, reply_errno(status));
	else if (io->kind == FS_READ)
		fuse_reply_buf(io->req, io->data + io->skip, io->len);
	else if (io->kind == FS_WRITE)
		fuse_reply_write(io->req, io->len);
	else
		fuse_reply_err(io->req, 0);
	inflight_sub(io->d);
	disks_put(io->t, io->d);        /* the reference of disk_of() */
	free(io);
}

/* The descriptor's completion (the disk's completion thread). */
static void io_cqe(const struct xbdfront_cqe *cqe)
{
	io_done((void *)(uintptr_t)cqe->user_data, cqe->res);
}

/* Submit and publish one request on the disk's next queue: buf (len
 * bytes, NULL for flush) at off; done gets cqe->user_data = arg.
 * Returns 0 (done will run) or -errno (it will not). */
static int submit_one(struct disk *d, enum xbdfront_op op, void *buf, uint64_t off,
		      uint64_t len, void (*done)(const struct xbdfront_cqe *), void *arg)
{
	struct iovec v = { buf, (size_t)len };
	unsigned int q = __atomic_fetch_add(&d->rr, 1, __ATOMIC_RELAXED) % d->nq;
	struct xbdfront_sqe sqe = { .op = (uint8_t)op, .iovcnt = buf ? 1 : 0, .offset = off,
				    .len = len, .iov = buf ? &v : NULL,
				    .user_data = (uintptr_t)arg, .done = done };
	int rc = xbdfront_submit(d->dev, q, &sqe, 1);

	if (rc < 0)
		return rc;
	(void)xbdfront_commit(d->dev, q);    /* a dead device fails the request itself */
	return 0;
}

/* Submit op on the disk's next queue; len bytes of io->data for reads
 * and writes.  io_done answers in every case. */
static void io_submit(struct fs_io *io, enum xbdfront_op op, uint64_t off, uint64_t len)
{
	int rc = submit_one(io->d, op, io->kind != FS_STATUS ? io->data : NULL, off, len, io_cqe,
			    io);

	if (rc)
		io_done(io, rc);
}

/* ---- synchronous I/O (read-modify-write) --------------------------------- */

struct fs_wait {
	pthread_mutex_t lock;         /* done, status */
	pthread_cond_t cond;
	bool done;
	int status;
};

static void wait_done(const struct xbdfront_cqe *cqe)
{
	struct fs_wait *w = (void *)(uintptr_t)cqe->user_data;

	pthread_mutex_lock(&w->lock);
	w->status = cqe->res;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* One read or write of buf, waited for (a completion thread answers). */
static int sync_io(struct disk *d, enum xbdfront_op op, void *buf, size_t len, uint64_t off)
{
	struct fs_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	int rc = submit_one(d, op, buf, off, len, wait_done, &w);

	pthread_mutex_lock(&w.lock);
	while (!rc && !w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cond);
	return rc ? rc : w.status;
}

/* A write that does not cover whole sectors: read the covering sectors,
 * patch, write back, under fs_rmw_lock.  Returns len or -errno. */
static int write_rmw(struct disk *d, const char *buf, size_t len, uint64_t off)
{
	uint64_t a;
	size_t alen;
	char *bounce;
	int rc;

	align_span(d, off, len, &a, &alen);
	bounce = malloc(alen);
	if (!bounce)
		return -ENOMEM;
	pthread_mutex_lock(&fs_rmw_lock);
	rc = sync_io(d, XBDFRONT_READ, bounce, alen, a);
	if (!rc) {
		memcpy(bounce + (off - a), buf, len);
		rc = sync_io(d, XBDFRONT_WRITE, bounce, alen, a);
	}
	pthread_mutex_unlock(&fs_rmw_lock);
	free(bounce);
	return rc ? rc : (int)len;
}

/* ---- I/O handlers ------------------------------------------------------------ */

/* A statistics file's text: its value in decimal and a newline. */
static void stats_read(fuse_req_t req, fuse_ino_t ino, size_t len, off_t off,
		       const struct fuse_file_info *fi)
{
	struct disk *d = stats_disk_of(req, ino, fi);
	char val[32];
	int n;

	if (!d) {
		fuse_reply_err(req, EIO);       /* detached under an open file */
		return;
	}
	n = snprintf(val, sizeof(val), "%lu\n", stat_value(d, ino_kind(ino) - INO_STAT));
	disks_put(table(req), d);
	if (off < 0 || off >= n)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, val + off, len < (size_t)(n - off) ? len : (size_t)(n - off));
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t len, off_t off,
		    struct fuse_file_info *fi)
{
	struct disk *d = disk_of(req, ino, fi);
	struct fs_io *io;
	uint64_t a, size;
	size_t alen;

	if (!d && is_stats(ino) && ino_kind(ino) >= INO_STAT) {
		stats_read(req, ino, len, off, fi);
		return;
	}
	if (!d) {
		fuse_reply_err(req, EIO);       /* detached under an open file */
		return;
	}
	size = disk_size(d);
	if (off < 0 || (uint64_t)off >= size || !len) {
		disks_put(table(req), d);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (len > size - (uint64_t)off)
		len = (size_t)(size - (uint64_t)off);
	align_span(d, (uint64_t)off, len, &a, &alen);
	io = io_new(req, d, FS_READ, alen);
	if (!io)
		return;
	io->len = len;
	io->skip = (size_t)((uint64_t)off - a);
	io_submit(io, XBDFRONT_READ, a, alen);
}

/* The part of [off, off + *len) that fits the disk: 0, or an errno to
 * answer.  Lengths past the end are cut, as on a block device. */
static int write_check(const struct disk *d, off_t off, size_t *len)
{
	uint64_t size = disk_size(d);

	if (d->readonly)
		return EROFS;
	if (off < 0)
		return EINVAL;
	if ((uint64_t)off >= size)
		return ENOSPC;          /* the end of a block device */
	if (*len > size - (uint64_t)off)
		*len = (size_t)(size - (uint64_t)off);
	return 0;
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t len,
		     off_t off, struct fuse_file_info *fi)
{
	struct disk *d = disk_of(req, ino, fi);
	struct fs_io *io;
	uint64_t a;
	size_t alen;
	int rc;

	if (!d) {
		fuse_reply_err(req, EIO);
		return;
	}
	rc = len ? write_check(d, off, &len) : 0;
	if (rc || !len) {
		disks_put(table(req), d);
		rc ? fuse_reply_err(req, rc) : fuse_reply_write(req, 0);
		return;
	}
	align_span(d, (uint64_t)off, len, &a, &alen);
	if (a != (uint64_t)off || alen != len) {
		inflight_add(d);
		rc = write_rmw(d, buf, len, (uint64_t)off);
		inflight_sub(d);
		disks_put(table(req), d);
		rc < 0 ? fuse_reply_err(req, reply_errno(rc)) : fuse_reply_write(req, len);
		return;
	}
	/* the request's buffer is libfuse's, reused when we return: copy */
	io = io_new(req, d, FS_WRITE, len);
	if (!io)
		return;
	io->len = len;
	memcpy(io->data, buf, len);
	io_submit(io, XBDFRONT_WRITE, (uint64_t)off, len);
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct disk *d = disk_of(req, ino, fi);
	struct fs_io *io;

	(void)datasync;
	if (!d) {
		fuse_reply_err(req, is_stats(ino) ? 0 : EIO);   /* nothing to write back */
		return;
	}
	if (!d->flush || d->readonly) {
		disks_put(table(req), d);
		fuse_reply_err(req, 0);
		return;
	}
	io = io_new(req, d, FS_STATUS, 0);
	if (io)
		io_submit(io, XBDFRONT_FLUSH, 0, 0);
}

/* PUNCH_HOLE (with KEEP_SIZE, as fallocate(2) requires) is a discard of
 * whole sectors; nothing else is supported, as on a block device. */
static int fallocate_check(const struct disk *d, int mode, off_t off, off_t len)
{
	uint64_t size = disk_size(d);

	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		return EOPNOTSUPP;
	if (d->readonly)
		return EROFS;
	if (!d->discard)
		return EOPNOTSUPP;
	if (off < 0 || len <= 0 || (uint64_t)off % d->sector_size ||
	    (uint64_t)len % d->sector_size || (uint64_t)off > size ||
	    (uint64_t)len > size - (uint64_t)off)
		return EINVAL;
	return 0;
}

static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct disk *d = disk_of(req, ino, fi);
	struct fs_io *io;
	int rc;

	if (!d) {
		fuse_reply_err(req, EIO);
		return;
	}
	rc = fallocate_check(d, mode, off, len);
	if (rc) {
		disks_put(table(req), d);
		fuse_reply_err(req, rc);
		return;
	}
	io = io_new(req, d, FS_STATUS, 0);
	if (io)
		io_submit(io, XBDFRONT_DISCARD, (uint64_t)off, (uint64_t)len);
}

/* ---- the mount's bdi ---------------------------------------------------------- */

/* The mount's device number (set once mounted, before the loop) */
static unsigned int fs_dev_major, fs_dev_minor;
static bool fs_dev_known;
static pthread_once_t fs_bdi_once = PTHREAD_ONCE_INIT;

/* One attribute of the mount's bdi (/sys/class/bdi/MAJ:MIN/name), best
 * effort: root only, a failure is logged at debug level. */
static void bdi_set(const char *name, int val)
{
	char path[128];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/%s", fs_dev_major, fs_dev_minor,
		 name);
	f = fopen(path, "w");
	ok = f && fprintf(f, "%d\n", val) > 0;
	if (f && fclose(f))
		ok = 0;
	if (!ok)
		log_debug("%s: cannot set it to %d: %s", path, val, strerror(errno));
}

/*
 * Make the mount's bdi what a block device's is.  The kernel gives a
 * FUSE mount a read-ahead the server may only lower (128 KiB; we want
 * FS_READ_AHEAD_KB) and, to protect memory from a server that never
 * answers, a strict dirty limit of 1% of the machine's dirty
 * threshold, which throttles the seed's dd to a trickle of write-back.
 * A block device (the loop device the dd is measured against) has
 * neither: it may use the whole dirty threshold.  Once, from the first
 * lookup or getattr: the kernel sends them after it took the INIT
 * answer (which sets the read-ahead to at most the answer's), and every
 * file is reached through one.  No request of ours waits on the mount:
 * a thread of ours waiting for an answer could hold the stop for ever.
 */
static void tune_bdi(void)
{
	if (!fs_dev_known)
		return;
	bdi_set("read_ahead_kb", FS_READ_AHEAD_KB);
	bdi_set("strict_limit", 0);
	bdi_set("max_ratio", 100);
}

/* The mount's device number, from the kernel's cached attributes
 * (AT_STATX_DONT_SYNC: no FUSE request). */
static void note_dev(const char *dir)
{
	struct statx st;

	if (statx(AT_FDCWD, dir, AT_STATX_DONT_SYNC, STATX_TYPE, &st) < 0) {
		log_debug("%s: no device number (%s), the bdi keeps FUSE's defaults", dir,
			  strerror(errno));
		return;
	}
	fs_dev_major = st.stx_dev_major;
	fs_dev_minor = st.stx_dev_minor;
	fs_dev_known = true;
}

/* ---- names, attributes, statistics ------------------------------------------ */

/* The inode of name in directory parent, or 0. */
static fuse_ino_t child_ino(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct disk *d;
	fuse_ino_t ino = 0;

	if (parent == FUSE_ROOT_ID && !strcmp(name, STATS_DIR))
		return STATS_ROOT_INO;
	if (is_stats(parent) && ino_kind(parent) == INO_STATS_DISK) {
		for (unsigned int k = 0; k < N_STATS; k++)
			if (!strcmp(name, stat_names[k]))
				return stats_ino(INO_STAT + k, (uint32_t)parent);
		return 0;
	}
	if (parent != FUSE_ROOT_ID && parent != STATS_ROOT_INO)
		return 0;
	d = disks_get(table(req), name);
	if (d) {
		ino = parent == FUSE_ROOT_ID ? ino_of(d) : stats_ino(INO_STATS_DISK, d->devid);
		disks_put(table(req), d);
	}
	return ino;
}

/* The attributes of inode ino and in *gen its generation (the disk's
 * serial, 0 for the two fixed directories): 0, or ENOENT. */
static int node_attr(fuse_req_t req, fuse_ino_t ino, struct stat *st, uint64_t *gen)
{
	struct disk *d = NULL;

	memset(st, 0, sizeof(*st));
	*gen = 0;
	if (ino == FUSE_ROOT_ID || ino == STATS_ROOT_INO) {
		st->st_mode = S_IFDIR | (ino == FUSE_ROOT_ID ? 0755 : 0555);
		st->st_nlink = ino == FUSE_ROOT_ID ? 3 : 2;
	} else if (ino_kind(ino) == INO_FILE) {
		d = disk_of(req, ino, NULL);
		if (d)
			disk_stat(d, st);
	} else {
		d = stats_disk_of(req, ino, NULL);
		st->st_mode = ino_kind(ino) == INO_STATS_DISK ? S_IFDIR | 0555 : S_IFREG | 0444;
		st->st_nlink = ino_kind(ino) == INO_STATS_DISK ? 2 : 1;
		st->st_size = ino_kind(ino) == INO_STATS_DISK ? 0 : 4096;   /* as sysfs */
	}
	if (!d && ino != FUSE_ROOT_ID && ino != STATS_ROOT_INO)
		return ENOENT;
	st->st_ino = ino;
	if (d) {
		*gen = d->serial;
		disks_put(table(req), d);
	}
	return 0;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	/* entry timeout 0: attach/detach show at once */
	struct fuse_entry_param e = { .attr_timeout = FS_ATTR_TIMEOUT };
	uint64_t gen;

	(void)pthread_once(&fs_bdi_once, tune_bdi);
	e.ino = child_ino(req, parent, name);
	if (!e.ino || node_attr(req, e.ino, &e.attr, &gen)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.generation = gen;
	fuse_reply_entry(req, &e);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	uint64_t gen;

	(void)fi;
	(void)pthread_once(&fs_bdi_once, tune_bdi);
	if (node_attr(req, ino, &st, &gen))
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, FS_ATTR_TIMEOUT);
}

/* truncate(2) only to the disk's own size (a no-op: the size is the
 * backend's; after an online resize, grow_file's way of telling the
 * kernel the new size), and to 0 without a file (what an O_TRUNC open sends; also
 * truncate(2) to 0, which cannot be told apart): ignored, as a block
 * device ignores O_TRUNC, and answered with the disk's size, which the
 * kernel then keeps.  Times are accepted and not kept; no chmod or
 * chown. */
static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct disk *d = disk_of(req, ino, NULL);
	struct stat st;
	int rc = 0;

	(void)fi;
	if (!d) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID || is_stats(ino) ? EPERM : ENOENT);
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		rc = EPERM;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && d->readonly)
		rc = EROFS;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != disk_size(d) &&
		 (fi || attr->st_size != 0))
		rc = EINVAL;
	disk_stat(d, &st);
	disks_put(table(req), d);
	rc ? fuse_reply_err(req, rc) : fuse_reply_attr(req, &st, FS_ATTR_TIMEOUT);
}

/* A statistics file: read only (also for root, as sysfs), every read
 * reaching us (direct_io: no cache of a value that changes). */
static void stats_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct disk *d = stats_disk_of(req, ino, NULL);

	if (!d) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fi->direct_io = 1;
	fi->fh = d->serial;
	disks_put(table(req), d);
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		fuse_reply_err(req, EACCES);
	else
		fuse_reply_open(req, fi);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct disk *d = disk_of(req, ino, NULL);
	int rc = 0;

	if (!d && is_stats(ino)) {
		stats_open(req, ino, fi);
		return;
	}
	if (!d) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (d->readonly && (fi->flags & O_ACCMODE) != O_RDONLY)
		rc = EROFS;
	/* The page cache is the disk's, as a Linux block device's: kept
	 * across opens (only this guest writes the disk).  O_DIRECT opens
	 * get no FOPEN_DIRECT_IO: the kernel's own O_DIRECT path bypasses
	 * the cache and keeps it coherent (writes back dirty pages of the
	 * range first, drops the cached range after a direct write), which
	 * FOPEN_DIRECT_IO does not do. */
	fi->keep_cache = 1;
	fi->fh = d->serial;
	disks_put(table(req), d);
	rc ? fuse_reply_err(req, rc) : fuse_reply_open(req, fi);
}

/* readdir: entry i (from 0: ".", "..", then the disks) has offset i + 1. */
struct dir_fill {
	fuse_req_t req;
	char *buf;
	size_t size, pos;
	off_t off, i;
	bool full;
	unsigned int kind;            /* the disks' entries: INO_FILE or INO_STATS_DISK */
};

static void dir_add(struct dir_fill *f, const char *name, fuse_ino_t ino, mode_t mode)
{
	struct stat st = { .st_ino = ino, .st_mode = mode };
	size_t n;

	if (f->full || f->i++ < f->off)
		return;
	n = fuse_add_direntry(f->req, f->buf + f->pos, f->size - f->pos, name, &st, f->i);
	if (n > f->size - f->pos)
		f->full = true;
	else
		f->pos += n;
}

static void dir_add_disk(void *arg, const struct disk *d)
{
	struct dir_fill *f = arg;

	if (f->kind == INO_FILE)
		dir_add(f, d->name, ino_of(d), S_IFREG);
	else
		dir_add(f, d->name, stats_ino(INO_STATS_DISK, d->devid), S_IFDIR);
}

/* The entries after "." and "..": the statistics root and the disk
 * files in the root, a directory per disk in the statistics root, the
 * statistics in a disk's. */
static void dir_fill_entries(fuse_req_t req, fuse_ino_t ino, struct dir_fill *f)
{
	struct disk *d;

	if (ino == FUSE_ROOT_ID)
		dir_add(f, STATS_DIR, STATS_ROOT_INO, S_IFDIR);
	if (ino == FUSE_ROOT_ID || ino == STATS_ROOT_INO) {
		f->kind = ino == FUSE_ROOT_ID ? INO_FILE : INO_STATS_DISK;
		disks_each(table(req), dir_add_disk, f);
		return;
	}
	d = stats_disk_of(req, ino, NULL);
	for (unsigned int k = 0; d && k < N_STATS; k++)
		dir_add(f, stat_names[k], stats_ino(INO_STAT + k, d->devid), S_IFREG);
	if (d)
		disks_put(table(req), d);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dir_fill f = { .req = req, .size = size, .off = off };

	(void)fi;
	if (ino != FUSE_ROOT_ID && (!is_stats(ino) || ino_kind(ino) >= INO_STAT)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	f.buf = malloc(size ? size : 1);
	if (!f.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	dir_add(&f, ".", ino, S_IFDIR);
	dir_add(&f, "..", ino == FUSE_ROOT_ID || ino == STATS_ROOT_INO ? FUSE_ROOT_ID
								       : STATS_ROOT_INO, S_IFDIR);
	dir_fill_entries(req, ino, &f);
	fuse_reply_buf(req, f.buf, f.pos);
	free(f.buf);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = 1u << 20;          /* libfuse makes max_pages of it */
	/* Buffered I/O goes through the kernel's page cache, written back
	 * in requests of up to max_write (the seed's 4 KiB dd becomes 1 MiB
	 * writes on the ring); fsync writes back, then asks us to flush. */
	if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	conn->max_background = FS_MAX_BACKGROUND;
	conn->congestion_threshold = FS_MAX_BACKGROUND * 3 / 4;
	/* libaio/io_uring direct I/O stays asynchronous in the kernel */
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* No FUSE_CAP_ATOMIC_O_TRUNC: with the writeback cache the kernel
	 * would set its own size to 0 at an O_TRUNC open and trust it from
	 * then on.  Without it an O_TRUNC open is a setattr to size 0,
	 * which fs_setattr ignores, as a block device ignores O_TRUNC. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.fsync = fs_fsync,
	.fallocate = fs_fallocate,
	/* no getxattr, listxattr: see STATS_DIR */
};

/* ---- the stop: write back, flush, end the loop -------------------------------- */

/*
 * SIGTERM, SIGINT and SIGHUP are blocked in every thread; the stopper
 * thread takes them with sigwait().  Before the loop ends, while the
 * workers still serve, it writes back what the page cache holds of each
 * disk and flushes it (open + fsync of each file: the kernel sends the
 * dirty pages, then FUSE_FSYNC, our flush), so a stopped guest leaves its
 * disks as a Linux guest's shutdown leaves them.  Then it ends the loop:
 * fuse_session_exit() and FS_WAKE_SIGNAL at the thread that runs the
 * loop (its sem_wait returns EINTR; repeated until the loop is seen to
 * return, in case the signal came before the wait).
 */
#define FS_WAKE_SIGNAL SIGUSR2

struct stopper {
	struct fuse_session *se;
	struct disks *t;
	const char *dir;
	sigset_t sigs;                /* the stop signals */
	pthread_t loop;               /* the thread that runs the loop */
	bool loop_done;               /* atomic: the loop returned */
};

static void wake_handler(int sig)
{
	(void)sig;                    /* only to interrupt the loop's wait */
}

struct names {
	char (*name)[sizeof(((struct disk *)0)->name)];
	size_t n, cap;
};

static void add_name(void *arg, const struct disk *d)
{
	struct names *ns = arg;
	void *p;

	if (ns->n == ns->cap) {
		p = realloc(ns->name, (ns->cap * 2 + 4) * sizeof(*ns->name));
		if (!p)
			return;              /* that disk is not written back */
		ns->name = p;
		ns->cap = ns->cap * 2 + 4;
	}
	memcpy(ns->name[ns->n++], d->name, sizeof(d->name));
}

/* How long a write-back may take before a stop or a detach goes on
 * without it: a backend that died without a word answers nothing, and
 * the thread that waits (the stopper, libxbdfront's monitor) is the one
 * that would fail that I/O. */
#define FS_WRITE_BACK_TIMEOUT_S 10

/* One write-back in a thread of its own (see write_back).  Lifetime:
 * freed by the last of the thread and the waiter (refs, under lock). */
struct wb_job {
	pthread_mutex_t lock;         /* done, refs */
	pthread_cond_t cond;
	bool done;
	unsigned int refs;
	char path[4096 + 40];
	char name[32];
};

static void wb_put(struct wb_job *j)
{
	bool last;

	pthread_mutex_lock(&j->lock);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (last) {
		pthread_mutex_destroy(&j->lock);
		pthread_cond_destroy(&j->cond);
		free(j);
	}
}

static void *wb_main(void *arg)
{
	struct wb_job *j = arg;
	int fd = open(j->path, O_RDONLY | O_CLOEXEC);

	/* fd < 0: gone meanwhile, nothing cached is reachable any more */
	if (fd >= 0) {
		if (fsync(fd) < 0)
			log_warn("%s: writing back: %s", j->name, strerror(errno));
		close(fd);
	}
	pthread_mutex_lock(&j->lock);
	j->done = true;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->lock);
	wb_put(j);
	return NULL;
}

/* Write back the file name under dir (the mount point) and flush it:
 * open + fsync (the kernel sends the dirty pages and waits for them,
 * then FUSE_FSYNC, our flush), waited for at most
 * FS_WRITE_BACK_TIMEOUT_S; a write-back still running then ends with
 * the I/O the detach or the close fails. */
static void write_back(void *dir, const char *name)
{
	struct timespec until;
	struct wb_job *j = calloc(1, sizeof(*j));
	pthread_attr_t attr;
	pthread_t th;
	int rc = ENOMEM;

	if (!j)
		goto out;
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	j->refs = 2;
	snprintf(j->path, sizeof(j->path), "%s/%s", (const char *)dir, name);
	snprintf(j->name, sizeof(j->name), "%s", name);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, wb_main, j);
	pthread_attr_destroy(&attr);
	if (rc) {
		j->refs = 1;
		wb_put(j);
		goto out;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += FS_WRITE_BACK_TIMEOUT_S;
	pthread_mutex_lock(&j->lock);
	while (!j->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&j->cond, &j->lock, &until);
	if (j->done)
		rc = 0;
	pthread_mutex_unlock(&j->lock);
	wb_put(j);
out:
	if (rc)
		log_warn("%s: write-back not done: %s", name, strerror(rc));
}

/*
 * Online resize.  With the writeback cache the kernel keeps its own size
 * of a regular file and ignores the size getattr answers (its
 * fuse_change_attributes trusts the cached i_size), so a grown disk is
 * shown the one way the kernel takes a size from us: a truncate(2) of
 * the file to its new size, which fs_setattr accepts (the disk's own
 * size now) and whose answer the kernel keeps; reads and writes past the
 * old end then reach us.  In a thread of its own: the truncate waits
 * for the file's writes in flight, which the caller (libxbdfront's
 * monitor thread) may be the one to recover.  Lifetime: the thread owns
 * its job and frees it.  EINVAL: a later resize grew the disk further
 * (its own job sets that size); ENOENT: the disk went.
 */
struct grow_job {
	char path[4096 + 40];
	char name[32];
	uint64_t bytes;
};

/* Jobs running (atomic): a backend announcing size after size (hostile,
 * or a store growing in many small steps) gets at most this many
 * threads; the next announce after they finished shows the latest. */
#define FS_MAX_GROW_JOBS 8
static unsigned int fs_grow_jobs;

static void *grow_main(void *arg)
{
	struct grow_job *j = arg;

	if (truncate(j->path, (off_t)j->bytes) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("%s: showing the new size %" PRIu64 ": %s", j->name, j->bytes,
			 strerror(errno));
	free(j);
	__atomic_sub_fetch(&fs_grow_jobs, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void grow_file(void *dir, const char *name, uint64_t bytes)
{
	struct grow_job *j = NULL;
	pthread_attr_t attr;
	pthread_t th;
	int rc = EAGAIN;

	if (__atomic_add_fetch(&fs_grow_jobs, 1, __ATOMIC_ACQUIRE) <= FS_MAX_GROW_JOBS) {
		j = calloc(1, sizeof(*j));
		rc = ENOMEM;
	}
	if (j) {
		snprintf(j->path, sizeof(j->path), "%s/%s", (const char *)dir, name);
		snprintf(j->name, sizeof(j->name), "%s", name);
		j->bytes = bytes;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&th, &attr, grow_main, j);
		pthread_attr_destroy(&attr);
		if (rc)
			free(j);
	}
	if (rc) {
		__atomic_sub_fetch(&fs_grow_jobs, 1, __ATOMIC_RELEASE);
		log_warn("%s: the file keeps its old size until re-attached: %s", name,
			 strerror(rc));
	}
}

/* Write back and flush every disk's file under dir (see above). */
static void write_back_all(struct disks *t, const char *dir)
{
	struct names ns = { 0 };

	disks_each(t, add_name, &ns);
	for (size_t i = 0; i < ns.n; i++)
		write_back((void *)dir, ns.name[i]);
	free(ns.name);
}

static void *stopper(void *arg)
{
	const struct timespec tick = { 0, 20 * 1000000 };
	struct stopper *s = arg;
	int sig;

	while (sigwait(&s->sigs, &sig))
		;
	if (__atomic_load_n(&s->loop_done, __ATOMIC_ACQUIRE))
		return NULL;                 /* the loop ended by itself (unmount) */
	log_info("signal %d: writing back and flushing the disks", sig);
	write_back_all(s->t, s->dir);
	fuse_session_exit(s->se);
	while (!__atomic_load_n(&s->loop_done, __ATOMIC_ACQUIRE)) {
		pthread_kill(s->loop, FS_WAKE_SIGNAL);
		nanosleep(&tick, NULL);
	}
	return NULL;
}

/*
 * The loop has ended and the stopper is gone: a stop signal still pending
 * (a second one of another kind, SIGINT after SIGTERM, or one that came
 * with an unmount) would kill the process as soon as the mask is restored
 * and skip the Closing of every disk.  We are stopping already: take them.
 */
static void drain_stop_signals(const sigset_t *sigs)
{
	const struct timespec now = { 0, 0 };
	int sig;

	while ((sig = sigtimedwait(sigs, NULL, &now)) > 0)
		log_info("signal %d: already stopping", sig);
}

/* Run the loop on a mounted session until a stop signal or an unmount. */
static int run(struct fuse_session *se, struct disks *t, const char *dir)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	struct sigaction wake = { .sa_handler = wake_handler };   /* no SA_RESTART */
	struct stopper s = { .se = se, .t = t, .dir = dir, .loop = pthread_self() };
	sigset_t old;
	pthread_t th;
	int rc = -ENOMEM;

	if (!cfg)
		return rc;
	fuse_loop_cfg_set_max_threads(cfg, FS_MAX_THREADS);
	fuse_loop_cfg_set_idle_threads(cfg, FS_MAX_THREADS);
	sigemptyset(&s.sigs);
	sigaddset(&s.sigs, SIGTERM);
	sigaddset(&s.sigs, SIGINT);
	sigaddset(&s.sigs, SIGHUP);
	/* the workers, made by the loop, inherit the blocked stop signals */
	pthread_sigmask(SIG_BLOCK, &s.sigs, &old);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&wake.sa_mask);
	rc = sigaction(FS_WAKE_SIGNAL, &wake, NULL) ? -errno : 0;
	if (!rc)
		rc = -pthread_create(&th, NULL, stopper, &s);
	if (!rc) {
		/* a detach writes the disk back through the mount while the
		 * loop serves it (disks.h) */
		disks_set_write_back(t, write_back, (void *)dir);
		disks_set_resized(t, grow_file, (void *)dir);
		/* the answers of one reap go to the kernel together */
		disks_set_reap_batch(t, fuse_uring_batch);
		/* 0: unmounted or stopped by a signal, < 0: error */
		rc = fuse_session_loop_mt(se, cfg) < 0 ? -EIO : 0;
		disks_set_reap_batch(t, NULL);
		disks_set_resized(t, NULL, NULL);
		disks_set_write_back(t, NULL, NULL);
		__atomic_store_n(&s.loop_done, true, __ATOMIC_RELEASE);
		/* a stopper still waiting returns: SIGTERM is blocked in every
		 * thread and taken by the stopper's sigwait, it ends no thread */
		pthread_kill(th, SIGTERM);   // NOLINT(bugprone-bad-signal-to-kill-thread,cert-pos44-c)
		pthread_join(th, NULL);
		drain_stop_signals(&s.sigs);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

int blkfront_fs_serve(struct disks *t, const char *dir, enum fuse_uring_mode transport)
{
	char *fargv[] = { "xbd-blkfront", "-o", "fsname=xbd,subtype=xbd,default_permissions", NULL };
	struct fuse_args fa = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&fa, &fs_ops, sizeof(fs_ops), t);
	int rc = -EIO;

	if (!se)
		goto out;
	if (fuse_session_mount(se, dir)) {
		log_err("cannot mount %s", dir);
		goto out;
	}
	rc = fuse_uring_attach(se, transport);
	if (rc) {
		fuse_session_unmount(se);
		goto out;
	}
	note_dev(dir);
	log_info("serving %s", dir);
	rc = run(se, t, dir);
	if (!rc && fuse_uring_failed())
		rc = -EOPNOTSUPP;
	/* the workers are gone; answer what is in flight before the
	 * session (which the answers use) goes.  The ring threads serve
	 * until the unmount ends their entries; then what they took is
	 * answered too, before their rings go. */
	drain();
	fuse_session_unmount(se);
	fuse_uring_stop();
	drain();
	fuse_uring_release();
out:
	if (se)
		fuse_session_destroy(se);
	fuse_opt_free_args(&fa);     /* fuse_session_new may have added to them */
	return rc;
}
