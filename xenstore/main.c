/* SPDX-License-Identifier: MIT */
/*
 * xbd-xenstored: a xenstore daemon on Unix sockets (see
 * Documentation/xenstored.md).  One thread, one epoll loop: listeners,
 * connections and a signalfd; SIGTERM/SIGINT stop it cleanly.
 */
#include "xenstored.h"
#include "log.h"
#include "platform/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int epoll_fd = -1;

struct options {
	bool foreground, syslog;
	const char *pid_file, *trace, *rundir;
	enum xbd_log_level level;
};

static const char usage_text[] =
"Usage: xbd-xenstored [OPTION]...\n"
"Serve xenstore on $XBD_RUNDIR/xenstored.sock (domain 0) and, for every\n"
"introduced domain N, on $XBD_RUNDIR/dom<N>/xenstore.sock.\n"
"\n"
"  -N, --foreground         do not daemonize\n"
"  -F, --pid-file FILE      write the pid to FILE\n"
"  -T, --trace FILE         log every message to FILE\n"
"  -R, --rundir DIR         run directory (default $XBD_RUNDIR or /run/xbd)\n"
"  -D, --db FILE            persist the store in FILE (default: in memory)\n"
"  -s, --syslog             log to syslog instead of stderr\n"
"  -l, --log-level LEVEL    err|warn|info|debug (default warn)\n"
"  -E, --entry-nb N         nodes per domain (1000)\n"
"  -S, --entry-size N       bytes per node record (2048)\n"
"  -W, --watch-nb N         watches per domain (128)\n"
"  -t, --transaction N      open transactions per domain (10)\n"
"  -A, --perm-nb N          permission entries per node (5)\n"
"  -M, --path-max N         path length below /local/domain/N/ (2048)\n"
"  -Q, --quota NAME=N       any quota by name (see CONTROL quota)\n"
"  -h, --help               this text\n";

static const struct option long_opts[] = {
	{ "foreground", no_argument, NULL, 'N' },
	{ "pid-file", required_argument, NULL, 'F' },
	{ "trace", required_argument, NULL, 'T' },
	{ "rundir", required_argument, NULL, 'R' },
	{ "db", required_argument, NULL, 'D' },
	{ "syslog", no_argument, NULL, 's' },
	{ "log-level", required_argument, NULL, 'l' },
	{ "entry-nb", required_argument, NULL, 'E' },
	{ "entry-size", required_argument, NULL, 'S' },
	{ "watch-nb", required_argument, NULL, 'W' },
	{ "transaction", required_argument, NULL, 't' },
	{ "perm-nb", required_argument, NULL, 'A' },
	{ "path-max", required_argument, NULL, 'M' },
	{ "quota", required_argument, NULL, 'Q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int quota_option(int opt, char *arg)
{
	static const struct { int opt; const char *name; } map[] = {
		{ 'E', "nodes" }, { 'S', "node-size" }, { 'W', "watches" },
		{ 't', "transactions" }, { 'A', "perms" }, { 'M', "path-max" },
	};
	char *eq;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].opt == opt)
			return quota_set(map[i].name, arg);
	eq = strchr(arg, '=');
	if (!eq)
		return -EINVAL;
	*eq = '\0';
	return quota_set(arg, eq + 1);
}

static int parse_args(int argc, char **argv, struct options *o)
{
	int opt;

	while ((opt = getopt_long(argc, argv, "NF:T:R:D:sl:E:S:W:t:A:M:Q:h",
				  long_opts, NULL)) != -1) {
		switch (opt) {
		case 'N': o->foreground = true; break;
		case 'F': o->pid_file = optarg; break;
		case 'T': o->trace = optarg; break;
		case 'R': o->rundir = optarg; break;
		case 'D': db_file = optarg; break;
		case 's': o->syslog = true; break;
		case 'l':
			if (xbd_log_parse_level(optarg, &o->level))
				goto bad;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case '?':
			goto bad;
		default:
			if (quota_option(opt, optarg))
				goto bad;
		}
	}
	if (optind != argc)
		goto bad;
	return 0;
bad:
	fputs(usage_text, stderr);
	return -EINVAL;
}

/* A live daemon accepts connections; a stale socket file refuses them. */
static bool instance_live(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	strcpy(sa.sun_path, path);
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return live;
}

/* Written to FILE.tmp and renamed: a reader never sees it half written. */
static int write_pid_file(const char *file)
{
	char buf[32], *tmp = NULL;
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	int fd, ret = 0;

	if (asprintf(&tmp, "%s.tmp", file) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		ret = -errno;
	else if (write(fd, buf, (size_t)n) != n)
		ret = -EIO;
	if (fd >= 0)
		close(fd);
	if (!ret && rename(tmp, file) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	free(tmp);
	return ret;
}

static int open_signals(void)
{
	static struct { enum poll_kind kind; } sig_src = { POLL_SIGNAL };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &sig_src };
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return fd;
}

/* Out of file descriptors, a pending connection would keep the listener
 * readable forever: give up a spare descriptor to accept and drop it. */
static int spare_fd = -1;

static void shed_connection(struct listener *l)
{
	static bool logged;

	if (!logged)
		log_warn("out of file descriptors: refusing connections");
	logged = true;
	if (spare_fd >= 0)
		close(spare_fd);
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void accept_conns(struct listener *l)
{
	/* a RELEASE earlier in this loop turn may have closed it */
	for (int i = 0; i < 16 && l->fd >= 0; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				shed_connection(l);
			else if (errno != EAGAIN && errno != EINTR)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (l->domid && conn_count(l->domid) >= quota.connections) {
			log_warn("domain %u: more than %u connections, refusing one",
				 l->domid, quota.connections);
			close(fd);
			continue;
		}
		conn_new(fd, l->domid, l->domid == 0);
	}
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Snapshots are written at most every 100 ms while the store changes. */
static int maybe_save(long long *last_save)
{
	long long now;

	if (!db_file || !db_dirty)
		return -1;
	now = now_ms();
	if (now - *last_save < 100)
		return (int)(100 - (now - *last_save));
	db_dirty = false;
	*last_save = now;
	persist_save(db_file);
	return -1;
}

static bool handle_signal(int sfd)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			log_info("signal %u: shutting down", si.ssi_signo);
			return true;
		}
	}
	return false;
}

static void run_loop(int sfd)
{
	struct epoll_event evs[64];
	long long last_save = 0, last_expire = now_ms();
	int timeout = 1000;
	bool stop = false;

	while (!stop) {
		int n = epoll_wait(epoll_fd, evs, 64, timeout);
		for (int i = 0; i < n && !stop; i++) {
			enum poll_kind *kind = evs[i].data.ptr;
			if (*kind == POLL_SIGNAL)
				stop = handle_signal(sfd);
			else if (*kind == POLL_LISTEN)
				accept_conns((struct listener *)kind);
			else
				conn_handle((struct conn *)kind, evs[i].events);
		}
		bool backlog = conn_run_backlog();
		conn_reap();
		if (now_ms() - last_expire >= 1000) {
			conn_expire_events();
			last_expire = now_ms();
		}
		int save_wait = maybe_save(&last_save);
		int throttle = conn_throttle_wait();
		timeout = backlog ? 0 : save_wait >= 0 ? save_wait : 1000;
		if (throttle >= 0 && throttle < timeout)
			timeout = throttle;
	}
}

static int setup(const struct options *o, char **sock_path)
{
	int ret;

	char why[PATH_MAX + 128];

	if (mkdir(rundir, 0755) < 0 && errno != EEXIST) {
		log_err("cannot create %s: %s", rundir, strerror(errno));
		return -errno;
	}
	ret = xbd_rundir_check(rundir, why, sizeof(why));
	if (ret) {
		log_err("%s", why);
		return ret;
	}
	if (asprintf(sock_path, "%s/xenstored.sock", rundir) < 0)
		return -ENOMEM;
	if (instance_live(*sock_path)) {
		log_err("another xenstored is serving %s", *sock_path);
		return -EADDRINUSE;
	}
	if (o->trace && !(trace_file = fopen(o->trace, "ae"))) {
		log_err("cannot open trace file %s: %s", o->trace, strerror(errno));
		return -errno;
	}
	ret = db_init(!db_file);
	if (!ret && db_file) {
		ret = persist_load(db_file);
		if (ret == -ENOENT) {
			db_destroy();
			ret = db_init(true);
		} else if (ret) {
			log_err("store file %s is corrupt or unreadable; refusing to start",
				db_file);
		} else {
			log_info("loaded %zu nodes from %s", db_count(), db_file);
		}
	}
	return ret;
}

static void cleanup(struct listener *main_lis, const char *sock_path,
		    const char *pid_file, int sfd, bool served)
{
	listener_close(main_lis, sock_path);
	if (served && db_file)
		persist_save(db_file);
	if (pid_file)
		unlink(pid_file);
	conn_shutdown();
	domain_shutdown();
	db_destroy();
	if (trace_file)
		fclose(trace_file);
	if (sfd >= 0)
		close(sfd);
	if (epoll_fd >= 0)
		close(epoll_fd);
	if (spare_fd >= 0)
		close(spare_fd);
}

int main(int argc, char **argv)
{
	struct options o = { .level = XBD_LOG_WARN };
	static struct listener main_lis = { POLL_LISTEN, -1, 0 };
	char *sock_path = NULL;
	const char *pid_written = NULL;
	int ret, sfd = -1;

	if (parse_args(argc, argv, &o))
		return 2;
	xbd_log_init("xbd-xenstored", o.level, o.syslog);
	rundir = o.rundir ? o.rundir : getenv("XBD_RUNDIR");
	if (!rundir || !*rundir)
		rundir = "/run/xbd";
	ret = setup(&o, &sock_path);
	/* fork before epoll and signalfd exist: both belong to one process;
	 * the pid file exists before the socket accepts anyone */
	if (!ret && !o.foreground && daemon(0, 0) < 0)
		ret = -errno;
	if (!ret && o.pid_file) {
		ret = write_pid_file(o.pid_file);
		if (ret)
			log_err("cannot write %s: %s", o.pid_file, strerror(-ret));
		else
			pid_written = o.pid_file;
	}
	if (!ret && (epoll_fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		ret = -errno;
	if (!ret && (sfd = open_signals()) < 0)
		ret = sfd;
	if (!ret && (ret = listener_open(&main_lis, sock_path, 0)))
		log_err("cannot listen on %s: %s", sock_path, strerror(-ret));
	if (!ret) {
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		domain_listen_all();
		log_info("serving %s", sock_path);
		run_loop(sfd);
	}
	cleanup(&main_lis, sock_path, pid_written, sfd, !ret);
	free(sock_path);
	return ret ? 1 : 0;
}
