/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront: a local guest that shows its virtual disks as files.
 *
 *   xbd-blkfront --domain NAME|ID [--mount DIR] [options]
 *   xbd-blkfront [--platform xen] [--mount DIR] [options]   (in a Xen domU)
 *
 * Threads: main (parses, mounts, runs libfuse's loop, tears down), libfuse
 * workers (fs.c), the watcher and the completion threads (disks.c) and
 * libxbdfront's threads.
 * SIGTERM/SIGINT/SIGHUP write every disk's file back and flush it (fs.c),
 * then end the loop; teardown closes every device (Closing -> Closed),
 * unmounts and releases the domain.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "frontend/blkfront/disks.h"
#include "frontend/blkfront/fs.h"
#include "lib/log.h"
#include "lib/num.h"
#include "lib/platform/platform.h"

static const char usage[] =
"usage: xbd-blkfront --domain NAME|ID [--mount DIR] [options]\n"
"       xbd-blkfront [--platform xen] [--mount DIR] [options]   (in a Xen domU)\n"
"Become local domain NAME (claim it: one process per domain), connect every\n"
"one of its virtual disks at once (device/vbd, and those attached later)\n"
"and show each as the file DIR/<vdev> through FUSE (default DIR:\n"
"$XBD_RUNDIR/dom<N>/dev, made with its parents); a detached disk's file\n"
"disappears.  On Xen the domain is the one this process runs in: --domain\n"
"may be left out (or be its own id or name); the kernel's xen-blkfront\n"
"must not claim the disks, and /dev/xen/gntalloc, /dev/xen/evtchn,\n"
"/dev/xen/xenbus and /dev/fuse are used.  The files use the page cache\n"
"as a block device does (O_DIRECT bypasses it; fsync writes back, then\n"
"flushes).  SIGTERM, SIGINT or SIGHUP: every disk written back and\n"
"flushed, then Closing -> Closed, unmount, release the domain, exit 0.\n"
"Exit 1 when the domain cannot be claimed (e.g. another process is it)\n"
"or served, 2 on a usage error.\n"
"\n"
"options (the Linux xen_blkfront parameter names):\n"
"  --max_queues=N             queues per disk to ask for, 1..16 (default 4;\n"
"                             up to 64 accepted and capped, with a message)\n"
"  --max_ring_page_order=N    ring pages 2^N per queue, 0..5 (default 0)\n"
"  --max_indirect_segments=N  indirect segments, 0 = off (default 32)\n"
"  --feature_persistent=0|1   offer persistent grants (default 1)\n"
"  --poll_duration_us=N       spin at most N us on a queue with requests in\n"
"                             flight before sleeping (default 50, 0 = never;\n"
"                             an idle disk never spins)\n"
"other options:\n"
"  --mount DIR        where the files appear (created if missing)\n"
"  --rundir DIR       the local machine's directory (default $XBD_RUNDIR)\n"
"  --platform P       auto, local or xen (default auto: xen when\n"
"                     /dev/xen/gntalloc and /dev/xen/evtchn exist)\n"
"  --timeout MS       wait for a backend to connect (default 10000)\n"
"  --fuse-uring=M     auto, on or off (default off): FUSE requests over\n"
"                     io_uring when the kernel offers them\n"
"  -v                 log debug messages\n"
"  -h, --help         this text\n";

#define BLKFRONT_GNTALLOC_PATH "/dev/xen/gntalloc"

struct args {
	struct xbdfront_opts opts;
	const char *domain, *mount;
	enum fuse_uring_mode transport;
	char mount_buf[4096];
};

enum { O_MOUNT = 256, O_RUNDIR, O_PLATFORM, O_TIMEOUT, O_QUEUES, O_ORDER, O_INDIRECT,
       O_PERSISTENT, O_DOMAIN, O_POLL, O_FUSE_URING };

static const struct option longopts[] = {
	{ "domain", required_argument, NULL, O_DOMAIN },
	{ "mount", required_argument, NULL, O_MOUNT },
	{ "rundir", required_argument, NULL, O_RUNDIR },
	{ "platform", required_argument, NULL, O_PLATFORM },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "max_queues", required_argument, NULL, O_QUEUES },
	{ "max_ring_page_order", required_argument, NULL, O_ORDER },
	{ "max_indirect_segments", required_argument, NULL, O_INDIRECT },
	{ "feature_persistent", required_argument, NULL, O_PERSISTENT },
	{ "poll_duration_us", required_argument, NULL, O_POLL },
	{ "fuse-uring", required_argument, NULL, O_FUSE_URING },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int set_opt(struct args *a, int c, const char *v)
{
	long long n = 0;

	switch (c) {
	case O_DOMAIN: a->domain = v; return 0;
	case O_MOUNT: a->mount = v; return 0;
	case O_RUNDIR: a->opts.rundir = v; return 0;
	case O_PLATFORM: a->opts.platform = v; return 0;
	case O_TIMEOUT: n = xbd_num_in(v, 1, 3600000); a->opts.connect_timeout_ms = (unsigned int)n; break;
	case O_QUEUES:
		n = xbd_num_in(v, 1, 64);
		if (n > XBDFRONT_MAX_QUEUES) {
			fprintf(stderr, "xbd-blkfront: --max_queues=%lld capped at %u, the most "
				"queues a disk has\n", n, XBDFRONT_MAX_QUEUES);
			n = XBDFRONT_MAX_QUEUES;
		}
		a->opts.max_queues = (unsigned int)n;
		break;
	case O_ORDER: n = xbd_num_in(v, 0, 5); a->opts.max_ring_page_order = (unsigned int)n; break;
	case O_INDIRECT: n = xbd_num_in(v, 0, 4096); a->opts.max_indirect_segs = (unsigned int)n; break;
	case O_PERSISTENT: n = xbd_num_in(v, 0, 1); a->opts.persistent = n == 1; break;
	case O_FUSE_URING:
		if (!fuse_uring_mode_parse(v, &a->transport))
			return 0;
		fprintf(stderr, "xbd-blkfront: --fuse-uring=%s: not auto, on or off\n", v);
		return -1;
	case O_POLL:
		n = xbd_num_in(v, 0, XBDFRONT_POLL_DURATION_US_MAX);
		a->opts.poll_duration_us = (unsigned int)n;
		break;
	default: return -1;
	}
	if (n < 0)
		fprintf(stderr, "xbd-blkfront: bad value '%s'\n", v);
	return n < 0 ? -1 : 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	int c;

	xbdfront_opts_default(&a->opts);
	/* off: the rings were not faster than /dev/fuse in the same-run A/B
	 * (Documentation/performance.md, "FUSE over io_uring") */
	a->transport = FUSE_URING_OFF;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		if (c == 'v')
			xbd_log_set_level(XBD_LOG_DEBUG);
		else if (c == 'h')
			return 1;
		else if (set_opt(a, c, optarg))
			return -1;
	}
	if (optind != argc)
		return -1;
	return 0;
}

/* mkdir -p: dir and its missing parents (mode 0755). */
static int make_dirs(const char *dir)
{
	char path[4096];
	size_t len = strlen(dir);

	if (!len)
		return -ENOENT;
	if (len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; ; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = c;
		if (!c)
			return 0;
	}
}

/* The mount point: made (with its parents) if missing; a stale FUSE mount
 * left by a killed blkfront (ENOTCONN) is detached first. */
static int prepare_mount(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) < 0 && errno == ENOTCONN) {
		log_warn("%s: stale mount of a previous blkfront, detaching it", dir);
		if (umount2(dir, MNT_DETACH) < 0)
			return -errno;
	}
	return make_dirs(dir);
}

/* Become the domain: one claim for all its disks.  A claim held by
 * another process is named, with its pid. */
static int claim(unsigned int domid, const struct xbdfront_opts *o,
		 struct xbdfront_domain **out)
{
	char id[16];
	unsigned int same;
	int claimer = 0, rc = xbdfront_domain_open(domid, o, out);

	if (rc == -EPERM && o->platform && !strcmp(o->platform, "xen")) {
		log_err("domain %u: on Xen a frontend can only be the domain it runs in "
			"(leave --domain out)", domid);
		return rc;
	}
	if (rc != -EBUSY) {
		if (rc)
			log_err("domain %u: cannot claim it: %s", domid, strerror(-rc));
		return rc;
	}
	snprintf(id, sizeof(id), "%u", domid);
	(void)xbdfront_domain_resolve(id, o, &same, &claimer);
	log_err("domain %u is already claimed by process %d (another xbd-blkfront or "
		"fio engine is this guest)", domid, claimer);
	return rc;
}

/*
 * --platform as a kind; auto is resolved here for a frontend: xen when the
 * devices a frontend uses exist (gntalloc, not the backend's gntdev, which
 * a domU rarely loads), so that a domU does not fall back to local.
 */
static int platform_kind(const char *name, enum xbd_platform_kind *kind)
{
	int rc = xbd_platform_kind_parse(name ? name : "auto", kind);

	if (rc) {
		log_err("--platform %s: not auto, local or xen", name);
		return rc;
	}
	if (*kind == XBD_PLATFORM_AUTO)
		*kind = xbd_platform_kind_detect(BLKFRONT_GNTALLOC_PATH, XBD_XEN_EVTCHN_PATH);
	return 0;
}

int main(int argc, char **argv)
{
	struct xbd_platform *plat = NULL;
	struct xbdfront_domain *dom = NULL;
	struct disks *t = NULL;
	enum xbd_platform_kind kind;
	unsigned int domid = 0;
	sigset_t sigs, old;
	struct args a = { 0 };
	int rc;

	xbd_log_init("xbd-blkfront", XBD_LOG_INFO, false);
	/* Every FUSE request allocates its buffer in a worker thread and
	 * frees it in a completion thread.  With glibc's defaults each
	 * thread's arena then gives its top back to the kernel (madvise)
	 * and faults it in again for the next request, and 1 MiB buffers
	 * are an mmap and munmap each: keep the memory (up to 64 MiB). */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	rc = parse(argc, argv, &a);
	if (rc) {
		fputs(usage, rc > 0 ? stdout : stderr);
		return rc > 0 ? 0 : 2;
	}
	rc = platform_kind(a.opts.platform, &kind);
	if (rc)
		goto out;
	if (!a.domain && kind != XBD_PLATFORM_XEN) {
		fputs(usage, stderr);           /* only on Xen is the domain implied */
		return 2;
	}
	/* everything below (the library, the watcher) sees the resolved kind */
	a.opts.platform = xbd_platform_kind_name(kind);
	rc = xbd_platform_open(kind, a.opts.rundir, &plat);
	rc = rc ? rc : xbdfront_domain_resolve(a.domain, &a.opts, &domid, NULL);
	if (rc) {
		log_err("domain %s: %s", a.domain ? a.domain : "(this one)", strerror(-rc));
		goto out;
	}
	if (!a.mount) {
		snprintf(a.mount_buf, sizeof(a.mount_buf), "%s/dom%u/dev",
			 xbd_platform_rundir(plat), domid);
		a.mount = a.mount_buf;
	}
	if (!a.opts.rundir)
		a.opts.rundir = xbd_platform_rundir(plat);
	rc = prepare_mount(a.mount);
	if (rc) {
		log_err("mount point %s: %s", a.mount, strerror(-rc));
		goto out;
	}
	/* Our threads (libxbdfront's monitor, the watcher) leave the stop
	 * signals to main, where libfuse's handlers end the loop. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	rc = claim(domid, &a.opts, &dom);
	if (!rc) {
		rc = disks_start(dom, &a.opts, &t);
		if (rc)
			log_err("domain %u: cannot watch its disks: %s", domid, strerror(-rc));
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		goto out;
	rc = blkfront_fs_serve(t, a.mount, a.transport);
out:
	disks_stop(t);                  /* every disk Closing -> Closed */
	xbdfront_domain_close(dom);     /* then the claim goes */
	if (a.mount && a.mount == a.mount_buf)
		(void)rmdir(a.mount);
	xbd_platform_close(plat);
	return rc ? 1 : 0;
}
