/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront's FUSE side: one regular file per connected vbd.
 *
 * Threads: libfuse's worker threads call these operations concurrently.
 * Each one looks its disk up by path and holds a reference for the call
 * only, so a detach never waits for a file to be closed: later calls on a
 * vanished disk fail with EIO (ENOENT for lookups).  The I/O goes through
 * libxbdfront's synchronous helpers, which submit on a queue chosen by the
 * calling thread (thread id modulo queues, as blk-mq maps CPUs to hardware
 * queues), so FUSE threads spread over the device's queues.
 * Lock: disk->rmw under fs_rmw_lock: writes that do not cover whole
 * sectors are read-modify-write, serialised per process.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/blkfront/disks.h"
#include "frontend/blkfront/fs.h"

static pthread_mutex_t fs_rmw_lock = PTHREAD_MUTEX_INITIALIZER;

static struct disks *table(void)
{
	return fuse_get_context()->private_data;
}

/* The disk of "/<name>", referenced, or NULL. */
static struct disk *lookup(const char *path)
{
	if (path[0] != '/' || !path[1] || strchr(path + 1, '/'))
		return NULL;
	return disks_get(table(), path + 1);
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->direct_io = 1;          /* no page cache: every read reaches the disk */
	cfg->attr_timeout = 0;       /* size and presence follow attach/detach */
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->use_ino = 0;
	conn->max_write = 1u << 20;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;   /* O_TRUNC is ignored, as on a block device */
	return fuse_get_context()->private_data;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct disk *d;

	(void)fi;
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	d = lookup(path);
	if (!d)
		return -ENOENT;
	st->st_mode = S_IFREG | (d->readonly ? 0444 : 0644);
	st->st_nlink = 1;
	st->st_size = (off_t)d->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)(d->size / 512);
	disks_put(table(), d);
	return 0;
}

struct fill {
	void *buf;
	fuse_fill_dir_t filler;
};

static void fill_one(void *arg, const struct disk *d)
{
	struct fill *f = arg;

	f->filler(f->buf, d->name, NULL, 0, 0);
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct fill f = { buf, filler };

	(void)off; (void)fi; (void)flags;
	if (strcmp(path, "/"))
		return -ENOTDIR;
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	disks_each(table(), fill_one, &f);
	return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);
	int rc = 0;

	if (!d)
		return -ENOENT;
	if (d->readonly && (fi->flags & O_ACCMODE) != O_RDONLY)
		rc = -EROFS;
	fi->direct_io = 1;
	disks_put(table(), d);
	return rc;
}

/* The sector-aligned span [*a, *a + *alen) covering [off, off + len). */
static void align_span(const struct disk *d, uint64_t off, size_t len, uint64_t *a, size_t *alen)
{
	uint64_t s = d->sector_size;

	*a = off / s * s;
	*alen = (size_t)(((off + len + s - 1) / s * s) - *a);
}

static int do_read(struct disk *d, char *buf, size_t len, uint64_t off)
{
	uint64_t a;
	size_t alen;
	char *bounce;
	ssize_t n;

	align_span(d, off, len, &a, &alen);
	if (a == off && alen == len) {
		n = xbdfront_pread(d->dev, buf, len, off);
		return n < 0 ? (int)n : (int)len;
	}
	bounce = aligned_alloc(4096, (alen + 4095) / 4096 * 4096);
	if (!bounce)
		return -ENOMEM;
	n = xbdfront_pread(d->dev, bounce, alen, a);
	if (n >= 0)
		memcpy(buf, bounce + (off - a), len);
	free(bounce);
	return n < 0 ? (int)n : (int)len;
}

static int fs_read(const char *path, char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);
	int rc;

	(void)fi;
	if (!d)
		return -EIO;             /* detached under an open file */
	if ((uint64_t)off >= d->size)
		rc = 0;
	else {
		if (len > d->size - (uint64_t)off)
			len = (size_t)(d->size - (uint64_t)off);
		rc = do_read(d, buf, len, (uint64_t)off);
	}
	disks_put(table(), d);
	return rc == -ENODEV ? -EIO : rc;
}

/* A write that does not cover whole sectors: read the covering sectors,
 * patch, write back, under fs_rmw_lock. */
static int write_rmw(struct disk *d, const char *buf, size_t len, uint64_t off)
{
	uint64_t a;
	size_t alen;
	char *bounce;
	ssize_t n;

	align_span(d, off, len, &a, &alen);
	bounce = aligned_alloc(4096, (alen + 4095) / 4096 * 4096);
	if (!bounce)
		return -ENOMEM;
	pthread_mutex_lock(&fs_rmw_lock);
	n = xbdfront_pread(d->dev, bounce, alen, a);
	if (n >= 0) {
		memcpy(bounce + (off - a), buf, len);
		n = xbdfront_pwrite(d->dev, bounce, alen, a);
	}
	pthread_mutex_unlock(&fs_rmw_lock);
	free(bounce);
	return n < 0 ? (int)n : (int)len;
}

static int fs_write(const char *path, const char *buf, size_t len, off_t off,
		    struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);
	uint64_t a;
	size_t alen;
	ssize_t n;
	int rc;

	(void)fi;
	if (!d)
		return -EIO;
	if (d->readonly)
		rc = -EROFS;
	else if ((uint64_t)off >= d->size)
		rc = len ? -ENOSPC : 0;  /* the end of a block device */
	else {
		if (len > d->size - (uint64_t)off)
			len = (size_t)(d->size - (uint64_t)off);
		align_span(d, (uint64_t)off, len, &a, &alen);
		if (a == (uint64_t)off && alen == len) {
			n = xbdfront_pwrite(d->dev, buf, len, (uint64_t)off);
			rc = n < 0 ? (int)n : (int)len;
		} else {
			rc = write_rmw(d, buf, len, (uint64_t)off);
		}
	}
	disks_put(table(), d);
	return rc == -ENODEV ? -EIO : rc;   /* detached meanwhile */
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);
	int rc = 0;

	(void)datasync; (void)fi;
	if (!d)
		return -EIO;
	if (d->flush && !d->readonly)
		rc = xbdfront_flush(d->dev);
	disks_put(table(), d);
	return rc;
}

/* PUNCH_HOLE (with KEEP_SIZE, as fallocate(2) requires) is a discard of
 * whole sectors; nothing else is supported, as on a block device. */
static int fs_fallocate(const char *path, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);
	int rc;

	(void)fi;
	if (!d)
		return -EIO;
	if (mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		rc = -EOPNOTSUPP;
	else if (d->readonly)
		rc = -EROFS;
	else if (!d->discard)
		rc = -EOPNOTSUPP;
	else if (off < 0 || len <= 0 || (uint64_t)off % d->sector_size ||
		 (uint64_t)len % d->sector_size || (uint64_t)off > d->size ||
		 (uint64_t)len > d->size - (uint64_t)off)
		rc = -EINVAL;
	else
		rc = xbdfront_discard(d->dev, (uint64_t)off, (uint64_t)len, false);
	disks_put(table(), d);
	return rc;
}

/* truncate(2) on a disk: only to its own size (a no-op), as the size is
 * the backend's. */
static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);
	int rc;

	(void)fi;
	if (!d)
		return -ENOENT;
	rc = d->readonly ? -EROFS : (uint64_t)size == d->size ? 0 : -EINVAL;
	disks_put(table(), d);
	return rc;
}

static int fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct disk *d = lookup(path);

	(void)tv; (void)fi;
	if (!d)
		return -ENOENT;
	disks_put(table(), d);
	return 0;
}

const struct fuse_operations blkfront_fs_ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.fsync = fs_fsync,
	.fallocate = fs_fallocate,
	.truncate = fs_truncate,
	.utimens = fs_utimens,
};
