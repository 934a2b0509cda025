/* SPDX-License-Identifier: MIT */
/*
 * bench/fuse/fuse_floor.c: the FUSE transport's floor on this kernel.
 *
 *     xbd-bench-fuse-floor [--fuse-uring=M] MOUNTPOINT SIZE_MIB
 *
 * Serves one file, MOUNTPOINT/disk of SIZE_MIB MiB, whose reads are
 * answered at once from a static zeroed buffer and whose writes are
 * dropped: no ring, no backend, no storage.  The connection is set up as
 * xbd-blkfront sets up its disk files (frontend/blkfront/fs.c: the
 * low-level API, max_write 1 MiB, asynchronous direct I/O, the same
 * max_background and worker threads over /dev/fuse), so fio on this file
 * measures what the kernel's FUSE channel alone costs per request, the
 * bound no FUSE daemon can pass.  --fuse-uring (off, auto or on; default
 * off) serves it over xbd-blkfront's own io_uring transport
 * (frontend/blkfront/fuse_uring.c) instead, for that transport's floor;
 * the answers are given in the handler, so no drain is needed at the
 * end.  SIGTERM, SIGINT or SIGHUP (libfuse's
 * handlers) or an unmount end it.  A benchmark helper, not installed.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/blkfront/fuse_uring.h"
#include "lib/log.h"

/* As xbd-blkfront's FS_MAX_BACKGROUND and FS_MAX_THREADS (fs.c) */
#define FLOOR_MAX_BACKGROUND 256
#define FLOOR_MAX_THREADS 4
#define FLOOR_MAX_IO (1u << 20)
#define FLOOR_INO 2

static off_t floor_size;
static char floor_zeros[FLOOR_MAX_IO];

static void floor_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_size = floor_size;
		st->st_blksize = 4096;
		st->st_blocks = floor_size / 512;
	}
}

static void floor_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = FLOOR_MAX_IO;
	conn->max_background = FLOOR_MAX_BACKGROUND;
	conn->congestion_threshold = FLOOR_MAX_BACKGROUND * 3 / 4;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .attr_timeout = 3600, .entry_timeout = 3600 };

	if (parent != FUSE_ROOT_ID || strcmp(name, "disk")) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.ino = FLOOR_INO;
	floor_attr(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != FUSE_ROOT_ID && ino != FLOOR_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	floor_attr(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FLOOR_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (off >= floor_size)
		size = 0;
	else if ((off_t)size > floor_size - off)
		size = (size_t)(floor_size - off);
	if (size > sizeof(floor_zeros))
		size = sizeof(floor_zeros);
	fuse_reply_buf(req, floor_zeros, size);
}

static void floor_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
			off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	(void)buf;
	(void)off;
	(void)fi;
	fuse_reply_write(req, size);
}

static const struct fuse_lowlevel_ops floor_ops = {
	.init = floor_init,
	.lookup = floor_lookup,
	.getattr = floor_getattr,
	.open = floor_open,
	.read = floor_read,
	.write = floor_write,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "fsname=xbd-floor,subtype=xbd-floor", NULL };
	struct fuse_args fa = FUSE_ARGS_INIT(3, fargv);
	enum fuse_uring_mode transport = FUSE_URING_OFF;
	struct fuse_loop_config *cfg = NULL;
	struct fuse_session *se = NULL;
	const char *opt = "--fuse-uring=";
	char *end;
	long mib;
	int rc = 1;

	xbd_log_init("xbd-bench-fuse-floor", XBD_LOG_INFO, false);
	if (argc == 4 && !strncmp(argv[1], opt, strlen(opt))) {
		if (fuse_uring_mode_parse(argv[1] + strlen(opt), &transport)) {
			fprintf(stderr, "%s: %s: not auto, on or off\n", argv[0], argv[1]);
			return 2;
		}
		argv++;
		argc--;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: %s [--fuse-uring=auto|on|off] MOUNTPOINT SIZE_MIB\n",
			argv[0]);
		return 2;
	}
	mib = strtol(argv[2], &end, 10);
	if (*end || mib <= 0 || mib > (1L << 20)) {
		fprintf(stderr, "%s: size %s: not a number of MiB in 1..1048576\n", argv[0], argv[2]);
		return 2;
	}
	floor_size = (off_t)mib << 20;
	se = fuse_session_new(&fa, &floor_ops, sizeof(floor_ops), NULL);
	cfg = fuse_loop_cfg_create();
	if (!se || !cfg)
		goto out;
	fuse_loop_cfg_set_max_threads(cfg, FLOOR_MAX_THREADS);
	fuse_loop_cfg_set_idle_threads(cfg, FLOOR_MAX_THREADS);
	if (fuse_set_signal_handlers(se))
		goto out;
	if (fuse_session_mount(se, argv[1])) {
		fprintf(stderr, "%s: cannot mount on %s\n", argv[0], argv[1]);
	} else if (fuse_uring_attach(se, transport) == 0) {
		rc = fuse_session_loop_mt(se, cfg) < 0 || fuse_uring_failed();
		fuse_session_unmount(se);
		fuse_uring_stop();
		fuse_uring_release();
	} else {
		fuse_session_unmount(se);
	}
	fuse_remove_signal_handlers(se);
out:
	if (cfg)
		fuse_loop_cfg_destroy(cfg);
	if (se)
		fuse_session_destroy(se);
	fuse_opt_free_args(&fa);
	return rc;
}
