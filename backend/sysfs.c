/* SPDX-License-Identifier: MIT */
/* backend/sysfs.c: the sysfs-style FUSE tree.  See sysfs.h. */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>  /* the session, polled by the control thread */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/devtab.h"
#include "backend/pressure.h"
#include "backend/sysfs.h"
#include "backend/tunables.h"
#include "backend/xenbus.h"
#include "log.h"

struct sysfs {
	struct fuse *f;
	struct fuse_session *se;
	struct fuse_buf buf;          /* reused for every request */
	struct devtab *t;
	char dir[512];
	bool mounted, made_dir;
};

/* Directories of the tree, in path order. */
enum dir_id {
	D_ROOT, D_MODULE, D_BLKBACK, D_PARAMS, D_BUS, D_XENBACKEND, D_DEVICES,
	D_VBD, D_STATS, D_QUEUE, D_LIMITS
};
/* Files: a tunable, the pressure file, a device attribute, a statistic. */
enum file_id { F_TUNABLE, F_PRESSURE, F_ATTR, F_STAT, F_LIMIT, F_LIMIT_STAT };

static const char *const fixed_dirs[] = {
	[D_ROOT] = "", [D_MODULE] = "module", [D_BLKBACK] = "xen_blkback",
	[D_PARAMS] = "parameters", [D_BUS] = "bus", [D_XENBACKEND] = "xen-backend",
	[D_DEVICES] = "devices",
};
/* The parent of each fixed directory after the root. */
static const enum dir_id fixed_parent[] = {
	[D_MODULE] = D_ROOT, [D_BLKBACK] = D_MODULE, [D_PARAMS] = D_BLKBACK,
	[D_BUS] = D_ROOT, [D_XENBACKEND] = D_BUS, [D_DEVICES] = D_XENBACKEND,
};

static const char *const attr_names[] = { "mode", "physical_device", "state", "nodename",
					   "storage", "sectors", "poll_duration_us", "sync_io" };
enum { ATTR_POLL = 6 };          /* the one writable attribute */
enum { NR_ATTRS = sizeof(attr_names) / sizeof(attr_names[0]) };

/* Read-only counters of the limiter, beside the limits (limit.h). */
static const char *const limit_stat_names[] = { "waits", "waited_us" };
enum { NR_LIMIT_STATS = sizeof(limit_stat_names) / sizeof(limit_stat_names[0]) };

/* Linux's statistics first (their order in xenbus.c), then ours.  Each
 * name has its own index, so render_stat's values cannot drift from the
 * names (a repeated name once hid adopted and replayed_req). */
enum stat_id {
	ST_OO_REQ, ST_RD_REQ, ST_WR_REQ, ST_F_REQ, ST_DS_REQ, ST_RD_SECT, ST_WR_SECT,
	ST_INFLIGHT, ST_LATENCY_US, ST_POOL_FREE, ST_POOL_IN_USE, ST_PGRANTS,
	ST_SQUEEZES, ST_EVT_IN, ST_EVT_OUT, ST_ADOPTED, ST_REPLAYED_REQ,
	ST_MEM_WAITS, ST_BUDGET_PAGES, ST_ERRORS, ST_POLLS, ST_POLL_HITS,
	ST_HELPER_REQ, ST_COUNT
};
static const char *const stat_names[ST_COUNT] = {
	[ST_OO_REQ] = "oo_req", [ST_RD_REQ] = "rd_req", [ST_WR_REQ] = "wr_req",
	[ST_F_REQ] = "f_req", [ST_DS_REQ] = "ds_req", [ST_RD_SECT] = "rd_sect",
	[ST_WR_SECT] = "wr_sect", [ST_INFLIGHT] = "inflight",
	[ST_LATENCY_US] = "latency_us", [ST_POOL_FREE] = "pool_pages_free",
	[ST_POOL_IN_USE] = "pool_pages_in_use", [ST_PGRANTS] = "persistent_grants",
	[ST_SQUEEZES] = "squeezes", [ST_EVT_IN] = "evt_in", [ST_EVT_OUT] = "evt_out",
	[ST_ADOPTED] = "adopted", [ST_REPLAYED_REQ] = "replayed_req",
	[ST_MEM_WAITS] = "mem_waits", [ST_BUDGET_PAGES] = "budget_pages",
	[ST_ERRORS] = "errors", [ST_POLLS] = "polls", [ST_POLL_HITS] = "poll_hits",
	[ST_HELPER_REQ] = "helper_req",
};
enum { NR_STATS = ST_COUNT };

struct node {
	bool is_dir;
	enum dir_id dir;              /* is_dir */
	enum file_id file;            /* !is_dir */
	int idx;                      /* tunable id, attribute or statistic */
	struct backend_dev *d;        /* D_VBD and below */
	int queue;                    /* D_QUEUE: the queue; else -1 (all) */
};

static struct sysfs *ctx_sysfs(void)
{
	return fuse_get_context()->private_data;
}

/* ---- path -> node ---------------------------------------------------------- */

static int find_name(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

static struct backend_dev *find_vbd(const struct devtab *t, const char *name)
{
	unsigned int dom, devid;
	int end = 0;

	if (sscanf(name, "vbd-%u-%u%n", &dom, &devid, &end) != 2 || name[end])
		return NULL;
	for (unsigned int i = 0; i < t->n; i++)
		if (t->dev[i]->fe_domid == dom && t->dev[i]->devid == devid)
			return t->dev[i];
	return NULL;
}

/* One path component below directory n; n becomes the child. */
static int step(const struct devtab *t, struct node *n, const char *c)
{
	unsigned int q;
	int end = 0, i;

	if (!n->is_dir)
		return -ENOTDIR;
	for (i = D_MODULE; i <= D_DEVICES; i++)
		if (fixed_parent[i] == n->dir && !strcmp(fixed_dirs[i], c)) {
			n->dir = (enum dir_id)i;
			return 0;
		}
	n->is_dir = false;
	n->idx = -1;
	switch (n->dir) {
	case D_PARAMS:
		n->file = F_TUNABLE;
		n->idx = tun_lookup(c);
		break;
	case D_BLKBACK:
		n->file = F_PRESSURE;
		n->idx = strcmp(c, "memory_pressure") ? -1 : 0;
		break;
	case D_DEVICES:
		n->d = find_vbd(t, c);
		*n = (struct node){ .is_dir = true, .dir = D_VBD, .d = n->d, .queue = -1 };
		return n->d ? 0 : -ENOENT;
	case D_VBD:
		if (!strcmp(c, "statistics") || !strcmp(c, "limits")) {
			n->is_dir = true;
			n->dir = c[0] == 's' ? D_STATS : D_LIMITS;
			return 0;
		}
		if (sscanf(c, "queue-%u%n", &q, &end) == 1 && !c[end] &&
		    n->d->queues && q < n->d->nr_queues) {
			n->is_dir = true;
			n->dir = D_QUEUE;
			n->queue = (int)q;
			return 0;
		}
		n->file = F_ATTR;
		n->idx = find_name(attr_names, NR_ATTRS, c);
		break;
	case D_STATS:
	case D_QUEUE:
		n->file = F_STAT;
		n->idx = find_name(stat_names, NR_STATS, c);
		break;
	case D_LIMITS:
		n->file = F_LIMIT;
		n->idx = be_limit_lookup(c);
		if (n->idx < 0) {
			n->file = F_LIMIT_STAT;
			n->idx = find_name(limit_stat_names, NR_LIMIT_STATS, c);
		}
		break;
	default:
		break;
	}
	return n->idx < 0 ? -ENOENT : 0;
}

static int resolve(const struct devtab *t, const char *path, struct node *n)
{
	char buf[256], *save = NULL, *c;
	int rc = 0;

	*n = (struct node){ .is_dir = true, .dir = D_ROOT, .queue = -1 };
	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	for (c = strtok_r(buf, "/", &save); c && !rc; c = strtok_r(NULL, "/", &save))
		rc = step(t, n, c);
	return rc;
}

static bool writable(const struct node *n)
{
	return !n->is_dir && (n->file == F_PRESSURE || n->file == F_LIMIT ||
			      (n->file == F_ATTR && n->idx == ATTR_POLL) ||
			      (n->file == F_TUNABLE && (tun_info(n->idx)->mode & 0200)));
}

/* ---- contents --------------------------------------------------------------- */

static int render_stat(const struct node *n, char *buf, size_t len)
{
	struct be_stats s;
	struct gnt_pool_view v;
	int off = 0;

	devtab_gather(n->d, n->queue, &s, &v);
	uint64_t val[NR_STATS] = {
		[ST_OO_REQ] = s.oo_req, [ST_RD_REQ] = s.rd_req, [ST_WR_REQ] = s.wr_req,
		[ST_F_REQ] = s.f_req, [ST_DS_REQ] = s.ds_req, [ST_RD_SECT] = s.rd_sect,
		[ST_WR_SECT] = s.wr_sect, [ST_INFLIGHT] = s.inflight,
		[ST_POOL_FREE] = v.pages_free, [ST_POOL_IN_USE] = v.pages_in_use,
		[ST_PGRANTS] = v.grants_mapped, [ST_SQUEEZES] = v.squeezes,
		[ST_EVT_IN] = s.evt_in, [ST_EVT_OUT] = s.evt_out,
		[ST_ADOPTED] = s.adopted, [ST_REPLAYED_REQ] = s.replayed_req,
		[ST_MEM_WAITS] = s.mem_waits, [ST_BUDGET_PAGES] = v.budget_pages,
		[ST_ERRORS] = s.errors, [ST_POLLS] = s.polls, [ST_POLL_HITS] = s.poll_hits,
		[ST_HELPER_REQ] = s.helper_req,
	};
	if (n->idx != ST_LATENCY_US)
		return snprintf(buf, len, "%" PRIu64 "\n", val[n->idx]);
	/* "<from>:<count>" for the non-empty buckets, as the stats dump */
	for (unsigned int b = 0; b < BE_LAT_BUCKETS && off < (int)len; b++)
		if (s.lat[b])
			off += snprintf(buf + off, len - (size_t)off, "%s%u:%" PRIu64,
					off ? " " : "", b ? 1u << b : 0, s.lat[b]);
	return off + snprintf(buf + off, len - (size_t)off, "\n");
}

static int render_attr(const struct node *n, char *buf, size_t len)
{
	const struct backend_dev *d = n->d;

	switch (n->idx) {
	case 0:
		return snprintf(buf, len, "%s\n", d->read_only ? "r" : "w");
	case 1:     /* Linux's "%x:%x"; a file has no device number: 0:0 */
		return snprintf(buf, len, "%x:%x\n",
				major(d->st.rdev), minor(d->st.rdev));
	case 2:
		return snprintf(buf, len, "%s\n", xbd_xenbus_state_name(d->state));
	case ATTR_POLL:   /* xbd: -1 follows the module parameter */
		return snprintf(buf, len, "%" PRId64 "\n",
				__atomic_load_n(&d->poll_us, __ATOMIC_RELAXED));
	case 4:     /* xbd: the driver and its target (storage.h) */
		return snprintf(buf, len, "%s %s\n",
				storage_is_open(&d->st) ? d->st.driver : "none",
				storage_is_open(&d->st) ? d->st.target : "-");
	case 5:     /* xbd: what the frontend is told (online resize) */
		return snprintf(buf, len, "%" PRIu64 "\n",
				storage_is_open(&d->st) ? storage_size(&d->st) >> 9 : 0);
	case 7:     /* xbd: the raw data path on the queue thread (raw.c) */
		return snprintf(buf, len, "%c\n",
				storage_is_open(&d->st) && d->st.sync_io ? 'Y' : 'N');
	default:
		return snprintf(buf, len, "%s\n", d->be_path);
	}
}

static int render(const struct node *n, char *buf, size_t len)
{
	switch (n->file) {
	case F_TUNABLE:
		return tun_format((enum tun_id)n->idx, buf, len);
	case F_PRESSURE:
		return snprintf(buf, len, "%" PRIu64 "\n", pressure_count());
	case F_ATTR:
		return render_attr(n, buf, len);
	case F_LIMIT:
		return snprintf(buf, len, "%" PRIu64 "\n",
				be_limit_get(&n->d->limit, (enum be_limit_key)n->idx));
	case F_LIMIT_STAT:
		return snprintf(buf, len, "%" PRIu64 "\n", n->idx ?
				be_limit_waited_us(&n->d->limit) :
				be_limit_waits(&n->d->limit));
	default:
		return render_stat(n, buf, len);
	}
}

/* ---- FUSE operations (control thread, through sysfs_process) ------------ */

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct node n;
	int rc = resolve(ctx_sysfs()->t, path, &n);

	(void)fi;
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	if (n.is_dir) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | (writable(&n) ? 0644 : 0444);
		st->st_nlink = 1;
		st->st_size = 4096;      /* as sysfs: a page, whatever the value */
	}
	return 0;
}

static void fill_dir(const struct devtab *t, const struct node *n, void *buf,
		     fuse_fill_dir_t fill)
{
	char name[64];

	for (int i = D_MODULE; i <= D_DEVICES; i++)
		if (fixed_parent[i] == n->dir)
			fill(buf, fixed_dirs[i], NULL, 0, 0);
	switch (n->dir) {
	case D_PARAMS:
		for (int i = 0; i < TUN_COUNT; i++)
			fill(buf, tun_info(i)->name, NULL, 0, 0);
		break;
	case D_BLKBACK:
		fill(buf, "memory_pressure", NULL, 0, 0);
		break;
	case D_DEVICES:
		for (unsigned int i = 0; i < t->n; i++) {
			snprintf(name, sizeof(name), "vbd-%u-%u", t->dev[i]->fe_domid,
				 t->dev[i]->devid);
			fill(buf, name, NULL, 0, 0);
		}
		break;
	case D_VBD:
		for (int i = 0; i < NR_ATTRS; i++)
			fill(buf, attr_names[i], NULL, 0, 0);
		fill(buf, "statistics", NULL, 0, 0);
		fill(buf, "limits", NULL, 0, 0);
		for (unsigned int q = 0; n->d->queues && q < n->d->nr_queues; q++) {
			snprintf(name, sizeof(name), "queue-%u", q);
			fill(buf, name, NULL, 0, 0);
		}
		break;
	case D_STATS:
	case D_QUEUE:
		for (int i = 0; i < NR_STATS; i++)
			fill(buf, stat_names[i], NULL, 0, 0);
		break;
	case D_LIMITS:
		for (int i = 0; i < BE_LIM_COUNT; i++)
			fill(buf, be_limit_names[i], NULL, 0, 0);
		for (int i = 0; i < NR_LIMIT_STATS; i++)
			fill(buf, limit_stat_names[i], NULL, 0, 0);
		break;
	default:
		break;
	}
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct sysfs *s = ctx_sysfs();
	struct node n;
	int rc = resolve(s->t, path, &n);

	(void)off, (void)fi, (void)flags;
	if (rc)
		return rc;
	if (!n.is_dir)
		return -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill_dir(s->t, &n, buf, fill);
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	struct node n;
	int rc = resolve(ctx_sysfs()->t, path, &n);

	if (rc)
		return rc;
	if (n.is_dir)
		return -EISDIR;
	if ((fi->flags & O_ACCMODE) != O_RDONLY && !writable(&n))
		return -EACCES;          /* as sysfs, even for root */
	fi->direct_io = 1;           /* no page cache: every read is fresh */
	return 0;
}

static int op_read(const char *path, char *out, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	char buf[1024];
	struct node n;
	int len, rc = resolve(ctx_sysfs()->t, path, &n);

	(void)fi;
	if (rc)
		return rc;                /* the device went away meanwhile */
	if (n.is_dir)
		return -EISDIR;
	len = render(&n, buf, sizeof(buf));
	if (len < 0)
		return -EIO;
	if (len >= (int)sizeof(buf))
		len = (int)sizeof(buf) - 1;
	if (off >= len)
		return 0;
	if (size > (size_t)(len - off))
		size = (size_t)(len - off);
	memcpy(out, buf + off, size);
	return (int)size;
}

/* A vbd's limit: a decimal number (0: none), live for its queues. */
static int write_limit(const struct node *n, const char *val, size_t size)
{
	struct timespec ts;
	uint64_t v;
	char *end;

	errno = 0;
	v = strtoull(val, &end, 10);
	if (end == val || (*end && strcmp(end, "\n")) || errno || val[0] == '-' ||
	    v > BE_LIMIT_MAX)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	be_limit_set(&n->d->limit, (enum be_limit_key)n->idx, v,
		     (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	log_info("sysfs: %s/%s = %" PRIu64, n->d->be_path, be_limit_names[n->idx], v);
	return (int)size;
}

/* A vbd's poll_duration_us: -1 (the module parameter's) or 0..its max,
 * live for its queues. */
static int write_poll(const struct node *n, const char *val, size_t size)
{
	const struct tunable *t = tun_info(TUN_POLL_DURATION_US);
	long long v;
	char *end;

	errno = 0;
	v = strtoll(val, &end, 10);
	if (end == val || (*end && strcmp(end, "\n")) || errno || val[0] == ' ' ||
	    v < -1 || v > (long long)t->max) {
		log_warn("sysfs: %s/poll_duration_us: %.*s refused: -1 or a number in 0..%llu",
			 n->d->be_path, (int)strcspn(val, "\n"), val,
			 (unsigned long long)t->max);
		return -EINVAL;
	}
	__atomic_store_n(&n->d->poll_us, (int64_t)v, __ATOMIC_RELAXED);
	log_info("sysfs: %s/poll_duration_us = %lld", n->d->be_path, v);
	return (int)size;
}

/* One write is one value, as in sysfs (a store of the whole buffer). */
static int op_write(const char *path, const char *in, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char val[64];
	struct node n;
	int rc = resolve(ctx_sysfs()->t, path, &n);

	(void)fi;
	if (rc)
		return rc;
	if (!writable(&n))
		return -EACCES;
	if (off != 0 || size == 0 || size >= sizeof(val))
		return -EINVAL;
	memcpy(val, in, size);            /* copied once, then parsed */
	val[size] = '\0';
	if (n.file == F_PRESSURE) {
		if (strcmp(val, "1") && strcmp(val, "1\n"))
			return -EINVAL;
		pressure_fire();
		return (int)size;
	}
	if (n.file == F_LIMIT)
		return write_limit(&n, val, size);
	if (n.file == F_ATTR)
		return write_poll(&n, val, size);
	rc = tun_set((enum tun_id)n.idx, val, true);
	if (rc == -EPERM)
		rc = -EACCES;
	if (rc == -EINVAL && tun_info(n.idx)->type == TUN_UINT)
		log_warn("sysfs: %s: %.*s refused: not a number in %llu..%llu",
			 tun_info(n.idx)->name, (int)strcspn(val, "\n"), val,
			 (unsigned long long)tun_info(n.idx)->min,
			 (unsigned long long)tun_info(n.idx)->max);
	if (!rc)
		log_info("sysfs: %s = %.*s", tun_info(n.idx)->name,
			 (int)strcspn(val, "\n"), val);
	return rc ? rc : (int)size;
}

/* O_TRUNC of `echo >`: nothing to truncate. */
static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct node n;
	int rc = resolve(ctx_sysfs()->t, path, &n);

	(void)size, (void)fi;
	if (rc)
		return rc;
	return writable(&n) ? 0 : -EACCES;
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->entry_timeout = 0;       /* devices come and go: no caching */
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->direct_io = 1;
	return fuse_get_context()->private_data;
}

static const struct fuse_operations ops = {
	.init = op_init,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.truncate = op_truncate,
};

/* ---- mount ------------------------------------------------------------------ */

/* A backend killed with the tree mounted leaves a dead FUSE mount
 * (ENOTCONN); detach it.  true if there was one. */
static bool clean_stale(const char *dir)
{
	struct stat st;
	pid_t pid;

	if (stat(dir, &st) == 0 || errno != ENOTCONN)
		return false;
	log_warn("%s: removing the stale mount of a previous backend", dir);
	if (umount2(dir, MNT_DETACH) == 0)
		return true;
	pid = fork();                 /* not root: the setuid helper */
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", dir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return true;
}

int sysfs_mount(const char *dir, struct devtab *t, struct sysfs **out)
{
	char *argv[] = { "xbd-blkback", "-o",
			 "allow_other,default_permissions,fsname=xbd-sysfs,subtype=xbd", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct sysfs *s = calloc(1, sizeof(*s));
	int rc = 0;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->t = t;
	if (snprintf(s->dir, sizeof(s->dir), "%s", dir) >= (int)sizeof(s->dir)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	s->made_dir = clean_stale(dir);   /* a previous backend's: ours to remove */
	if (mkdir(dir, 0755) == 0)
		s->made_dir = true;
	else if (errno != EEXIST) {
		rc = -errno;
		goto out;
	}
	s->f = fuse_new(&args, &ops, sizeof(ops), s);
	if (!s->f) {
		rc = -EINVAL;
		goto out;
	}
	s->se = fuse_get_session(s->f);
	if (fuse_mount(s->f, dir)) {
		rc = -EIO;
		goto out;
	}
	s->mounted = true;
out:
	fuse_opt_free_args(&args);
	if (rc) {
		sysfs_unmount(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* Serve what is queued already (the kernel sends RELEASEDIR / RELEASE in
 * the background after close): libfuse frees a directory handle only
 * then, and an unmount drops the requests it has not read. */
static void drain(struct sysfs *s)
{
	struct pollfd pfd = { fuse_session_fd(s->se), POLLIN, 0 };

	for (int i = 0; i < 256 && poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN); i++)
		if (sysfs_process(s) < 0)
			break;
}

void sysfs_unmount(struct sysfs *s)
{
	if (!s)
		return;
	if (s->mounted) {
		drain(s);
		fuse_unmount(s->f);
	}
	if (s->f)
		fuse_destroy(s->f);
	if (s->made_dir && rmdir(s->dir))
		log_warn("cannot remove %s: %s", s->dir, strerror(errno));
	free(s->buf.mem);
	free(s);
}

int sysfs_fd(const struct sysfs *s)
{
	return fuse_session_fd(s->se);
}

int sysfs_process(struct sysfs *s)
{
	int rc = fuse_session_receive_buf(s->se, &s->buf);

	if (rc == -EINTR || rc == -EAGAIN)
		return 0;
	if (rc <= 0 || fuse_session_exited(s->se))
		return rc < 0 ? rc : -ENODEV;
	fuse_session_process_buf(s->se, &s->buf);
	return 0;
}
