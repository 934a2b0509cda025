/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkback: the backend daemon.
 *
 * Threading model (see Documentation/backend.md):
 *   - one control thread, this one: it owns the xenstore connection, the
 *     device table (backend/devtab.c) and every struct backend_dev, and
 *     sleeps in one poll() on the xenstore watch fd, a signalfd and the
 *     done_fd of every queue;
 *   - one thread per queue (backend/queue.c), with its own io_uring,
 *     grant and event-channel handles; the control thread starts and
 *     joins them and touches nothing of theirs while they run, except
 *     the statistics (read-only, single writer).
 * Signals: SIGTERM/SIGINT stop every queue and exit (xenstore is left as
 * it is, so a restarted backend adopts the devices again); SIGUSR1 writes
 * the statistics of every device to $rundir/xbd-blkback.stats.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "backend/devtab.h"
#include "backend/pressure.h"
#include "backend/sysfs.h"
#include "backend/tunables.h"
#include "log.h"

struct options {
	enum xbd_platform_kind platform;
	const char *rundir, *pid_file;
	const char *sysfs;            /* NULL: $rundir/sys; "none": no tree */
	const char *pressure;         /* --pressure SPEC ("auto"), or "none" */
	bool foreground;
	unsigned int domid;
	enum xbd_log_level level;
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: xbd-blkback [OPTION]... [--TUNABLE=VALUE]...\n"
"Serve the vbd devices of this domain (xenstore backend/vbd) over blkif.\n"
"\n"
"  -p, --platform KIND      auto|xen|local (default auto)\n"
"  -R, --rundir DIR         the local machine's directory (default $XBD_RUNDIR\n"
"                           or /run/xbd); holds xenstored.sock and the stats\n"
"  -d, --domid N            the domain this backend runs in (default 0)\n"
"  -N, --foreground         do not daemonize; log to stderr\n"
"  -F, --pid-file FILE      write the pid to FILE\n"
"  -l, --log-level LEVEL    err|warn|info|debug (default warn)\n"
"  -s, --sysfs DIR          mount the sysfs-style tree at DIR (default\n"
"                           $rundir/sys; \"none\": no tree)\n"
"  -P, --pressure SPEC      squeeze page pools on memory pressure from\n"
"                           auto (default: this process's cgroup v2\n"
"                           memory.pressure, else /proc/pressure/memory,\n"
"                           else its cgroup v1 memory group; logs which),\n"
"                           psi[:FILE] (a PSI trigger on /proc/pressure/memory\n"
"                           or a cgroup v2 memory.pressure), cgroup1:DIR (a\n"
"                           cgroup v1 memory.pressure_level event) or none\n"
"  -h, --help               this text\n"
"\n"
"Tunables (Linux xen-blkback's names; Documentation/ABI/backend-tunables):\n");
	for (int i = 0; i < TUN_COUNT; i++) {
		const struct tunable *t = tun_info(i);

		fprintf(f, "  --%s=%s\n", t->name, t->type == TUN_UINT ? "N" :
			t->type == TUN_BOOL ? "Y|N" : "Y|N|auto");
	}
	fprintf(f, "\nUnder valgrind io_wait_poll starts as Y: queue threads sleep in poll(2),\n"
		   "not in io_uring_enter(2), which valgrind cannot follow.\n");
	fprintf(f, "\nkill -USR1 writes every device's statistics to "
		   "$rundir/xbd-blkback.stats.\n");
}

/* Fixed options, then one long option per tunable (val 1000 + id). */
static struct option *long_options(void)
{
	static const struct option fixed[] = {
		{ "platform", required_argument, NULL, 'p' },
		{ "rundir", required_argument, NULL, 'R' },
		{ "domid", required_argument, NULL, 'd' },
		{ "foreground", no_argument, NULL, 'N' },
		{ "pid-file", required_argument, NULL, 'F' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "sysfs", required_argument, NULL, 's' },
		{ "pressure", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
	};
	size_t nf = sizeof(fixed) / sizeof(fixed[0]);
	struct option *o = calloc(nf + TUN_COUNT + 1, sizeof(*o));

	if (!o)
		return NULL;
	memcpy(o, fixed, sizeof(fixed));
	for (int i = 0; i < TUN_COUNT; i++)
		o[nf + i] = (struct option){ tun_info(i)->name, required_argument, NULL, 1000 + i };
	return o;
}

static int parse_one(struct options *o, int c, const char *arg)
{
	char *end;

	switch (c) {
	case 'p': return xbd_platform_kind_parse(arg, &o->platform);
	case 'R': o->rundir = arg; return 0;
	case 'N': o->foreground = true; return 0;
	case 'F': o->pid_file = arg; return 0;
	case 'l': return xbd_log_parse_level(arg, &o->level);
	case 's': o->sysfs = arg; return *arg ? 0 : -EINVAL;
	case 'P': o->pressure = arg; return 0;
	case 'd':
		o->domid = (unsigned int)strtoul(arg, &end, 10);
		return *arg && !*end && o->domid <= XBD_DOMID_MAX ? 0 : -EINVAL;
	default:
		if (c >= 1000 && c < 1000 + TUN_COUNT)
			return tun_set((enum tun_id)(c - 1000), arg, false);
		return -EINVAL;
	}
}

/* Say what was wrong: a tunable names itself and its range. */
static void bad_option(int c, const char *arg)
{
	const struct tunable *t = c >= 1000 ? tun_info((enum tun_id)(c - 1000)) : NULL;

	if (t && t->type == TUN_UINT)
		fprintf(stderr, "xbd-blkback: --%s=%s: not a number in %llu..%llu\n",
			t->name, arg, (unsigned long long)t->min,
			(unsigned long long)t->max);
	else if (t)
		fprintf(stderr, "xbd-blkback: --%s=%s: not %s\n", t->name, arg,
			t->type == TUN_AUTO ? "Y, N or auto" : "Y or N");
	else
		fprintf(stderr, "xbd-blkback: bad option or value%s%s\n",
			arg ? ": " : "", arg ? arg : "");
}

/* 0, 1 for --help, or -EINVAL (message printed). */
static int parse(int argc, char **argv, struct options *o)
{
	struct option *lo = long_options();
	int c, rc = lo ? 0 : -ENOMEM;

	while (!rc && (c = getopt_long(argc, argv, "p:R:d:NF:l:s:P:h", lo, NULL)) != -1) {
		if (c == 'h')
			rc = 1;
		else if (c == '?' || parse_one(o, c, optarg)) {
			bad_option(c, optarg);
			rc = -EINVAL;
		}
	}
	if (!rc && optind < argc) {
		fprintf(stderr, "xbd-blkback: unexpected argument %s\n", argv[optind]);
		rc = -EINVAL;
	}
	free(lo);
	return rc;
}

static int write_pid_file(const char *file)
{
	FILE *f = fopen(file, "we");
	int rc;

	if (!f)
		return -errno;
	rc = fprintf(f, "%d\n", (int)getpid()) < 0 ? -EIO : 0;
	return fclose(f) && !rc ? -errno : rc;
}

static void dump_stats(const struct devtab *t, const char *rundir)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/xbd-blkback.stats", rundir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wex");   /* O_EXCL: never through a planted link */
	if (!f && errno == EEXIST && unlink(tmp) == 0)
		f = fopen(tmp, "wex");
	if (!f) {
		log_warn("cannot write %s: %s", tmp, strerror(errno));
		return;
	}
	devtab_dump_stats(t, f);
	if (fclose(f) == 0 && rename(tmp, path) == 0)
		return;
	log_warn("cannot write %s: %s", path, strerror(errno));
}

/* log_stats: every device's line through the logger (stderr, or syslog
 * when daemonized), at warn level so the default level shows it. */
/* log_stats every 10 s, whatever else ends the control loop's poll. */
static bool stats_due(void)
{
	static time_t last;
	time_t now = time(NULL);

	if (now - last < 10)
		return false;
	last = now;
	return true;
}

static void log_stats(const struct devtab *t)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return;
	devtab_dump_stats(t, f);
	fclose(f);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		log_warn("stats %s", line);
	free(buf);
}

/* One signal: 1 to stop, 0 to go on. */
static int on_signal(int sfd, const struct devtab *t, const char *rundir)
{
	struct signalfd_siginfo si;

	if (read(sfd, &si, sizeof(si)) != sizeof(si))
		return 0;
	if (si.ssi_signo == SIGUSR1) {
		dump_stats(t, rundir);
		return 0;
	}
	log_info("signal %u: stopping", si.ssi_signo);
	return 1;
}

#define MAX_POLL 1024
#define NFIXED 4           /* signalfd, xenstore, the tree, pressure */

/* What the control loop polls besides xenstore and the queues. */
struct extras {
	struct sysfs *sysfs;          /* NULL: no tree */
	struct pressure *pressure;    /* NULL: none (or auto found none) */
};

/* The tree's and the pressure source's events; a source that went away
 * is dropped (the backend serves on without it). */
static void on_extras(struct extras *x, const struct pollfd *fds)
{
	if (x->sysfs && fds[2].revents && sysfs_process(x->sysfs) < 0) {
		log_warn("the sysfs tree was unmounted");
		sysfs_unmount(x->sysfs);
		x->sysfs = NULL;
	}
	if (x->pressure && fds[3].revents && pressure_handle(x->pressure, fds[3].revents) < 0) {
		log_warn("the memory-pressure source went away");
		pressure_close(x->pressure);
		x->pressure = NULL;
	}
}

/* The control loop: returns 0 on a stop signal, -errno if xenstore went. */
static int serve(struct devtab *t, int sfd, const char *rundir, struct extras *x)
{
	static struct pollfd fds[MAX_POLL];

	for (;;) {
		unsigned int n = NFIXED + devtab_pollfds(t, fds + NFIXED, MAX_POLL - NFIXED);
		int timeout = tun_get(TUN_LOG_STATS) ? 10000 : -1;
		int tt = devtab_timeout_ms(t);
		int rc;

		if (tt >= 0 && (timeout < 0 || tt < timeout))
			timeout = tt;         /* a deferred connect, a deadline */
		fds[0] = (struct pollfd){ sfd, POLLIN, 0 };
		fds[1] = (struct pollfd){ xbd_xs_watch_fd(t->ctx.xs), POLLIN, 0 };
		fds[2] = (struct pollfd){ x->sysfs ? sysfs_fd(x->sysfs) : -1, POLLIN, 0 };
		fds[3] = (struct pollfd){ x->pressure ? pressure_fd(x->pressure) : -1,
					  x->pressure ? pressure_events(x->pressure) : 0, 0 };
		rc = poll(fds, n, timeout);
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (rc == 0 && tun_get(TUN_LOG_STATS) && stats_due())
			log_stats(t);
		devtab_timers(t);
		if ((fds[0].revents & POLLIN) && on_signal(sfd, t, rundir))
			return 0;
		on_extras(x, fds);
		for (unsigned int i = NFIXED; i < n; i++)
			if (fds[i].revents & POLLIN)
				devtab_queue_done(t, fds[i].fd);
		if (fds[1].revents && (rc = devtab_events(t)) < 0)
			return rc;
	}
}

/* The tree and the pressure source.  A tree that cannot be mounted (no
 * /dev/fuse) is a warning; a bad --pressure is an error. */
static int start_extras(const struct options *o, struct devtab *t, const char *rundir,
			struct extras *x)
{
	char dir[512];
	int rc;

	if (!strcmp(o->pressure, "auto")) {
		/* the default: no source is a warning, not a reason to stop */
		rc = pressure_open("auto", &x->pressure);
		if (rc)
			log_warn("--pressure auto: no memory-pressure source (%s): "
				 "only the tree's memory_pressure squeezes", strerror(-rc));
		else
			log_info("--pressure auto: %s (%s)", pressure_spec(x->pressure),
				 pressure_origin(x->pressure));
	} else if (strcmp(o->pressure, "none")) {
		rc = pressure_open(o->pressure, &x->pressure);
		if (rc) {
			log_err("--pressure %s: %s", o->pressure, strerror(-rc));
			return rc;
		}
		log_info("--pressure %s", pressure_spec(x->pressure));
	}
	if (o->sysfs && !strcmp(o->sysfs, "none"))
		return 0;
	snprintf(dir, sizeof(dir), "%s/sys", rundir);
	rc = sysfs_mount(o->sysfs ? o->sysfs : dir, t, &x->sysfs);
	if (rc)
		log_warn("cannot mount the sysfs tree at %s: %s", o->sysfs ? o->sysfs : dir,
			 strerror(-rc));
	return 0;
}

static int block_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))   /* queue threads inherit it */
		return -EINVAL;
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

static int connect_xs(const struct options *o, struct xbd_platform *p, struct xs_handle **xs)
{
	char sock[512];
	int rc;

	if (xbd_platform_get_kind(p) == XBD_PLATFORM_XEN)
		return xbd_xs_open(NULL, xs);
	rc = xbd_xs_local_socket(o->rundir, sock, sizeof(sock));
	return rc ? rc : xbd_xs_open(sock, xs);
}

static int run(const struct options *o)
{
	struct xbd_platform *p = NULL;
	struct xs_handle *xs = NULL;
	struct devtab t = { 0 };
	struct extras x = { 0 };
	int sfd = -1, rc;

	rc = xbd_platform_open(o->platform, o->rundir, &p);
	if (rc) {
		log_err("cannot open the %s platform: %s", xbd_platform_kind_name(o->platform),
			strerror(-rc));
		goto out;
	}
	/* A guest truncating its own files must not kill us (nor the other
	 * guests' disks): ring.c turns the fault into that device's error. */
	if (xbd_platform_get_kind(p) == XBD_PLATFORM_LOCAL &&
	    (rc = xbd_fault_catch(xbd_platform_rundir(p))) != 0) {
		log_err("cannot catch SIGBUS: %s", strerror(-rc));
		goto out;
	}
	rc = connect_xs(o, p, &xs);
	if (rc) {
		log_err("cannot connect to xenstore: %s", strerror(-rc));
		goto out;
	}
	rc = sfd = block_signals();
	if (rc < 0)
		goto out;
	rc = devtab_start(&t, &(struct be_ctx){ .xs = xs, .plat = p, .self = (xbd_domid_t)o->domid,
						    .async_teardown = true });
	if (rc) {
		log_err("cannot watch backend/vbd: %s", strerror(-rc));
		goto out;
	}
	rc = start_extras(o, &t, xbd_platform_rundir(p), &x);
	if (rc)
		goto out;
	rc = serve(&t, sfd, xbd_platform_rundir(p), &x);
	if (rc)
		log_err("xenstore connection lost: %s", strerror(-rc));
out:
	sysfs_unmount(x.sysfs);          /* before the devices it shows */
	pressure_close(x.pressure);
	devtab_stop(&t);
	if (sfd >= 0)
		close(sfd);
	if (xs)
		xs_close(xs);
	if (p)
		xbd_platform_close(p);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct options o = { .platform = XBD_PLATFORM_AUTO, .level = XBD_LOG_WARN,
			     .pressure = "auto" };
	int rc;

	tun_init();
	rc = parse(argc, argv, &o);
	if (rc) {
		usage(rc == 1 ? stdout : stderr);
		return rc == 1 ? 0 : 2;
	}
	xbd_log_init("xbd-blkback", o.level, !o.foreground);
	if (!o.foreground && daemon(0, 0) < 0) {
		log_err("cannot daemonize: %s", strerror(errno));
		return 1;
	}
	if (o.pid_file && (rc = write_pid_file(o.pid_file))) {
		log_err("cannot write %s: %s", o.pid_file, strerror(-rc));
		return 1;
	}
	return run(&o);
}
