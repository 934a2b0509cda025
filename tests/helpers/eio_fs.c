/* SPDX-License-Identifier: MIT */
/*
 * xbd-test-eio-fs: a FUSE file system with one file, "disk", held in
 * memory, whose reads and writes fail with EIO in chosen byte ranges.
 * tests/system/test_hostile_faults.py puts a disk on it to check that the
 * backend fails exactly the requests that touch a bad range.
 *
 *   xbd-test-eio-fs [-f] MOUNTPOINT --size BYTES
 *                   [--eio-read OFF:LEN]... [--eio-write OFF:LEN]...
 *                   [--delay-ms MS]
 *
 * --delay-ms makes every read and write take MS milliseconds first (slow
 * storage: tests/system/test_hostile_control.py closes a vbd with I/O
 * in flight on it).
 *
 * Runs single-threaded (-s), so the operations need no lock; `umount
 * MOUNTPOINT` ends it with status 0.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse3/fuse.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_RANGES 16

struct range {
	off_t off, len;
};

/* Filled by main() before fuse_main(); then owned by the FUSE loop thread. */
static struct {
	char *data;
	off_t size;
	struct range rd[MAX_RANGES], wr[MAX_RANGES];
	unsigned int nrd, nwr;
	long delay_ms;
} fs;

static void slow_down(void)
{
	struct timespec ts = { fs.delay_ms / 1000, (fs.delay_ms % 1000) * 1000000L };

	while (fs.delay_ms && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static bool hits(const struct range *r, unsigned int n, off_t off, size_t len)
{
	for (unsigned int i = 0; i < n; i++)
		if (off < r[i].off + r[i].len && r[i].off < off + (off_t)len)
			return true;
	return false;
}

static int is_disk(const char *path)
{
	return strcmp(path, "/disk") == 0;
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (is_disk(path)) {
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_size = fs.size;
		st->st_blksize = 4096;
		st->st_blocks = fs.size / 512;
	} else {
		return -ENOENT;
	}
	return 0;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "disk", NULL, 0, 0);
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	if (!is_disk(path))
		return -ENOENT;
	fi->direct_io = 1;          /* every request reaches us: no page cache */
	return 0;
}

/* Reads and writes stop at the end of the file (a disk does not grow). */
static size_t clamp(off_t off, size_t len)
{
	if (off >= fs.size)
		return 0;
	return (off_t)len > fs.size - off ? (size_t)(fs.size - off) : len;
}

static int op_read(const char *path, char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	(void)path, (void)fi;
	if (off < 0)
		return -EINVAL;
	slow_down();
	if (hits(fs.rd, fs.nrd, off, len))
		return -EIO;
	len = clamp(off, len);
	memcpy(buf, fs.data + off, len);
	return (int)len;
}

static int op_write(const char *path, const char *buf, size_t len, off_t off,
		    struct fuse_file_info *fi)
{
	(void)path, (void)fi;
	if (off < 0)
		return -EINVAL;
	slow_down();
	if (hits(fs.wr, fs.nwr, off, len))
		return -EIO;
	if (clamp(off, len) < len)
		return -ENOSPC;
	memcpy(fs.data + off, buf, len);
	return (int)len;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)path, (void)fi;
	return size == fs.size ? 0 : -EPERM;
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path, (void)datasync, (void)fi;
	return 0;
}

static const struct fuse_operations ops = {
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.truncate = op_truncate,
	.fsync = op_fsync,
};

/* "OFF:LEN" (decimal bytes) into r; 0 or -1. */
static int parse_range(const char *s, struct range *r)
{
	char *end;
	long long off = strtoll(s, &end, 10), len;

	if (end == s || *end != ':' || off < 0)
		return -1;
	s = end + 1;
	len = strtoll(s, &end, 10);
	if (end == s || *end || len <= 0)
		return -1;
	r->off = off;
	r->len = len;
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: xbd-test-eio-fs [-f] MOUNTPOINT --size BYTES"
	      " [--eio-read OFF:LEN]... [--eio-write OFF:LEN]... [--delay-ms MS]\n"
	      "Serves one in-memory file, MOUNTPOINT/disk, whose reads and writes\n"
	      "in the given byte ranges fail with EIO.\n", f);
}

int main(int argc, char **argv)
{
	char *fargs[8];
	int nf = 0, rc;

	fargs[nf++] = argv[0];
	fargs[nf++] = "-s";
	fargs[nf++] = "-o";
	fargs[nf++] = "allow_other";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--size") == 0 && v) {
			fs.size = strtoll(v, NULL, 10);
			i++;
		} else if (strcmp(a, "--eio-read") == 0 && v && fs.nrd < MAX_RANGES) {
			if (parse_range(v, &fs.rd[fs.nrd++]))
				goto bad;
			i++;
		} else if (strcmp(a, "--delay-ms") == 0 && v) {
			fs.delay_ms = strtol(v, NULL, 10);
			i++;
		} else if (strcmp(a, "--eio-write") == 0 && v && fs.nwr < MAX_RANGES) {
			if (parse_range(v, &fs.wr[fs.nwr++]))
				goto bad;
			i++;
		} else if ((strcmp(a, "-f") == 0 || a[0] != '-') && nf < 7) {
			fargs[nf++] = argv[i];
		} else {
			goto bad;
		}
	}
	if (fs.size <= 0 || fs.size > (1LL << 30) || nf < 5)
		goto bad;
	fs.data = calloc(1, (size_t)fs.size);
	if (!fs.data) {
		fputs("xbd-test-eio-fs: out of memory\n", stderr);
		return 1;
	}
	fargs[nf] = NULL;
	rc = fuse_main(nf, fargs, &ops, NULL);
	free(fs.data);
	return rc;
bad:
	usage(stderr);
	return 2;
}
