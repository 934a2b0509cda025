/* SPDX-License-Identifier: MIT */
/*
 * backend/storage/qcow2.c: the qcow2 driver.  QEMU's own qcow2 code serves
 * the image: storage_open() starts a qemu-storage-daemon child for this
 * vbd that opens the image (and its backing chain, as the image header
 * names it) and exports it over NBD on a Unix socket in a private
 * directory (mode 0700, $rundir/qcow2/vbd-XXXXXX: the backend's trusted
 * run directory, not /tmp), then the nbd driver serves the vbd from that
 * socket.  storage_close() stops the daemon (SIGTERM, then SIGKILL after
 * STOP_MS) and removes the directory.
 *
 * A daemon that fails to start (a corrupt image, a missing backing file)
 * is reported with the first line of what it printed on stderr.  The
 * binary is $XBD_QSD when set, else qemu-storage-daemon on PATH (Debian:
 * qemu-system-common).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "backend/storage/storage.h"
#include "platform/platform.h"      /* xbd_rundir_check */

#define START_MS 10000
#define STOP_MS  3000

struct qcow2_vbd {
	pid_t pid;
	int pidfd;                  /* readable when the daemon exits; -1 */
	char dir[96];               /* private: sock and err */
	void *nbd_priv;             /* the nbd driver's */
};

static void path_in(const struct qcow2_vbd *v, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", v->dir, name);
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

struct qsd_args {
	char sock[112], err[112], file[2 * STORAGE_TARGET_MAX + 96];
	char srv[192], exp[80];
	const char *bin;
};

/* Everything the child needs, made before fork (the backend has threads). */
static void make_args(const struct qcow2_vbd *v, const char *image, bool ro,
		      struct qsd_args *a)
{
	char *file = a->file;
	const char *bin = getenv("XBD_QSD");

	path_in(v, "sock", a->sock, sizeof(a->sock));
	path_in(v, "err", a->err, sizeof(a->err));
	a->bin = bin && *bin ? bin : "qemu-storage-daemon";
	/* QEMU's option syntax doubles a comma inside a value.  discard=unmap:
	 * QEMU ignores a discard by default; with it, a guest's discard frees
	 * the qcow2 clusters and punches the file under them. */
	char *o = file + snprintf(file, sizeof(a->file),
				  "driver=qcow2,node-name=fmt,read-only=%s,discard=unmap,"
				  "file.driver=file,file.filename=", ro ? "on" : "off");
	for (const char *c = image; *c && o < file + sizeof(a->file) - 3; c++) {
		*o++ = *c;
		if (*c == ',')
			*o++ = ',';
	}
	*o = '\0';
	snprintf(a->srv, sizeof(a->srv), "addr.type=unix,addr.path=%s", a->sock);
	snprintf(a->exp, sizeof(a->exp),
		 "type=nbd,id=exp,node-name=fmt,name=xbd,writable=%s", ro ? "off" : "on");
}

/* Child: exec the daemon with stderr to dir/err.  The backend blocks the
 * signals it reads through signalfd, and a blocked mask survives exec: the
 * daemon would never see our SIGTERM (and lose its metadata cache to the
 * SIGKILL after it). */
static void exec_daemon(const struct qsd_args *a)
{
	sigset_t none;
	int fd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	fd = open(a->err, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd >= 0)
		dup2(fd, 2);
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
	}
	execlp(a->bin, "qemu-storage-daemon", "--blockdev", a->file, "--nbd-server",
	       a->srv, "--export", a->exp, (char *)NULL);
	_exit(127);
}

/* The daemon's first line on stderr, for the error node, without QEMU's
 * echo of our own --blockdev option. */
static void report_failure(const struct qcow2_vbd *v, const char *what)
{
	char err[112], line[512] = "";
	const char *why = line;
	FILE *f;

	path_in(v, "err", err, sizeof(err));
	int fd = open(err, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f && fd >= 0)
		close(fd);
	if (f) {
		if (fgets(line, sizeof(line), f))
			line[strcspn(line, "\n")] = '\0';
		fclose(f);
	}
	if (strstr(line, "file.filename=")) {
		const char *c = strstr(strstr(line, "file.filename="), ": ");

		why = c ? c + 2 : line;
	}
	storage_set_error("%s%s%s", what, why[0] ? ": " : "", why);
}

static void stop_daemon(struct qcow2_vbd *v)
{
	char p[112];
	int st;

	if (v->pidfd >= 0)
		close(v->pidfd);
	v->pidfd = -1;
	if (v->pid > 0) {
		kill(v->pid, SIGTERM);
		for (unsigned int t = 0; t < STOP_MS / 10; t++) {
			if (waitpid(v->pid, &st, WNOHANG) == v->pid) {
				v->pid = 0;
				break;
			}
			sleep_ms(10);
		}
		if (v->pid > 0) {
			kill(v->pid, SIGKILL);
			waitpid(v->pid, &st, 0);
		}
		v->pid = 0;
	}
	if (v->dir[0]) {
		path_in(v, "sock", p, sizeof(p));
		unlink(p);
		path_in(v, "err", p, sizeof(p));
		unlink(p);
		rmdir(v->dir);
		v->dir[0] = '\0';
	}
}

/* Wait for the export's socket; 0, or -EIO when the daemon died first. */
static int wait_socket(struct qcow2_vbd *v)
{
	char sock[112];
	struct stat st;
	int status;

	path_in(v, "sock", sock, sizeof(sock));
	for (unsigned int t = 0; t < START_MS / 10; t++) {
		if (waitpid(v->pid, &status, WNOHANG) == v->pid) {
			v->pid = 0;
			report_failure(v, "qemu-storage-daemon");
			return -EIO;
		}
		if (!lstat(sock, &st) && S_ISSOCK(st.st_mode))
			return 0;
		sleep_ms(10);
	}
	report_failure(v, "qemu-storage-daemon did not start its export");
	return -ETIMEDOUT;
}

/*
 * The daemon's private directory: $rundir/qcow2 (made 0700, and trusted
 * as the run directory is: a directory, not a link, ours or root's, not
 * writable by others), then a fresh mkdtemp() below it.  The socket's
 * path must fit a sockaddr_un.  0 or -errno (storage_error says why).
 */
static int make_private_dir(const char *rundir, char *dir, size_t len)
{
	char base[sizeof(((struct qcow2_vbd *)0)->dir)], why[256];
	int rc;

	if (!rundir || !*rundir)
		rundir = "/run/xbd";
	if ((size_t)snprintf(base, sizeof(base), "%s/qcow2", rundir) >= sizeof(base) ||
	    (size_t)snprintf(dir, len, "%s/vbd-XXXXXX", base) + sizeof("/sock") > 108) {
		storage_set_error("qcow2: run directory %s: too long a path for "
				  "the daemon's socket", rundir);
		return -ENAMETOOLONG;
	}
	if (mkdir(rundir, 0755) && errno != EEXIST)
		goto fail;
	if (mkdir(base, 0700) && errno != EEXIST)
		goto fail;
	rc = xbd_rundir_check(base, why, sizeof(why));
	if (rc) {
		storage_set_error("qcow2: %s", why);
		return rc;
	}
	if (mkdtemp(dir))
		return 0;
fail:
	rc = -errno;
	storage_set_error("qcow2: %s: %s", base, strerror(errno));
	return rc;
}

static int qcow2_open(struct storage *s, const struct storage_opts *o)
{
	struct qcow2_vbd *v = calloc(1, sizeof(*v));
	struct qsd_args *a = calloc(1, sizeof(*a));
	char uri[256];
	int rc;

	if (v)
		v->pidfd = -1;
	if (!v || !a) {
		free(v);
		free(a);
		return -ENOMEM;
	}
	if (access(s->target, s->read_only ? R_OK : R_OK | W_OK)) {
		rc = -errno;
		storage_set_error("qcow2: %s: %s", s->target, strerror(errno));
		free(v);
		free(a);
		return rc;
	}
	rc = make_private_dir(o->rundir, v->dir, sizeof(v->dir));
	if (rc) {
		v->dir[0] = '\0';
		free(v);
		free(a);
		return rc;
	}
	make_args(v, s->target, s->read_only, a);
	v->pid = fork();
	if (v->pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (v->pid == 0)
		exec_daemon(a);
	free(a);
	a = NULL;
	rc = wait_socket(v);
	if (rc)
		goto fail;
	snprintf(uri, sizeof(uri), "nbd+unix:///xbd?socket=%s/sock", v->dir);
	rc = storage_nbd_open(s, uri, o);
	if (rc) {
		report_failure(v, "cannot read the export");
		goto fail;
	}
	v->nbd_priv = s->priv;
	s->priv = v;
	v->pidfd = pidfd_open(v->pid, 0);      /* -1: its death goes unseen */
	/* QEMU serves several connections to one node coherently. */
	s->max_queues = 0;
	return 0;
fail:
	free(a);
	stop_daemon(v);
	free(v);
	return rc;
}

static void qcow2_close(struct storage *s)
{
	struct qcow2_vbd *v = s->priv;

	if (!v)
		return;
	s->priv = v->nbd_priv;
	storage_nbd_close(s);
	stop_daemon(v);
	free(v);
	s->priv = NULL;
}

static int qcow2_watch_fd(const struct storage *s)
{
	const struct qcow2_vbd *v = s->priv;

	return v ? v->pidfd : -1;
}

/* The daemon exited under a live vbd: reap it, tell the queues the store
 * is gone, and say why (the caller writes the error node). */
static int qcow2_watch(struct storage *s)
{
	struct qcow2_vbd *v = s->priv;
	int status = 0;

	if (!v || v->pid <= 0 || waitpid(v->pid, &status, WNOHANG) != v->pid)
		return 0;
	v->pid = 0;
	close(v->pidfd);
	v->pidfd = -1;
	storage_nbd_lost(v->nbd_priv);
	if (WIFSIGNALED(status))
		storage_set_error("qemu-storage-daemon for %s killed by signal %d",
				  s->target, WTERMSIG(status));
	else
		storage_set_error("qemu-storage-daemon for %s exited with status %d",
				  s->target, WEXITSTATUS(status));
	return -EIO;
}

/* Every queue: the nbd driver's, on the nbd driver's priv. */
static int qcow2_queue_open(const struct storage *s, unsigned int index,
			    unsigned int depth, const struct storage_loop *loop,
			    struct storage_queue **q)
{
	const struct qcow2_vbd *v = s->priv;
	struct storage view = *s;

	view.priv = v->nbd_priv;
	return nbdq_open(&view, index, depth, loop, q);
}

const struct storage_driver storage_qcow2_driver = {
	.name = "qcow2",
	.open = qcow2_open,
	.close = qcow2_close,
	.queue_open = qcow2_queue_open,
	.queue_close = nbdq_close,
	.submit = nbdq_submit,
	.poll = nbdq_poll,
	.ready = nbdq_ready,
	.tick = nbdq_tick,
	.watch_fd = qcow2_watch_fd,
	.watch = qcow2_watch,
};
