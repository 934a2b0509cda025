/* SPDX-License-Identifier: MIT */
/*
 * Domains, quotas and the per-domain sockets.
 *
 * Domain 0 is the privileged socket $rundir/xenstored.sock.  INTRODUCE of
 * domain N (N > 0) binds $rundir/dom<N>/xenstore.sock; a client connected
 * there *is* domain N: unprivileged, home /local/domain/N, subject to the
 * quotas below.  The directory dom<N>/ is shared with the platform layer:
 * it is created (0755) when missing and never removed; only our
 * xenstore.sock inside it is ours.  RELEASE closes the socket and its
 * connections, deletes the nodes N owns, removes N from every permission
 * list (XSA-322: a later domain N inherits nothing) and fires
 * @releaseDomain.
 */
#include "xenstored.h"
#include "log.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* cxenstored 4.17 defaults (xenstored_core.c); events/priv_* are ours. */
struct quotas quota = {
	.nodes = 1000, .node_size = 2048, .watches = 128, .transactions = 10,
	.perms = 5, .path_len = XENSTORE_REL_PATH_MAX, .tx_nodes = 1024,
	.outstanding = 20, .events = 1024, .event_timeout = 20,
	.priv_events = 16384, .priv_outstanding = 1024, .connections = 16, .memory = 2621440,
	.write_rate = 200, .write_burst = 10,
};

static const struct {
	const char *name;
	size_t off;
	const char *desc;
} quota_names[] = {
#define Q(n, f, d) { n, offsetof(struct quotas, f), d }
	Q("nodes", nodes, "nodes owned per domain"),
	Q("node-size", node_size, "bytes per node record"),
	Q("watches", watches, "watches per domain"),
	Q("transactions", transactions, "open transactions per domain"),
	Q("perms", perms, "permission entries per node"),
	Q("path-max", path_len, "path length below /local/domain/N/"),
	Q("transaction-nodes", tx_nodes, "nodes touched per transaction"),
	Q("outstanding", outstanding, "unread replies before input stalls"),
	Q("watch-events", events, "queued watch events per connection"),
	Q("watch-event-timeout", event_timeout, "seconds an event may stay unread"),
	Q("priv-watch-events", priv_events, "queued events, privileged connection"),
	Q("priv-outstanding", priv_outstanding, "unread replies, privileged connection"),
	Q("connections", connections, "connections per unprivileged domain"),
	Q("memory", memory, "bytes of nodes and watches per domain"),
	Q("write-rate", write_rate, "writes per second per domain, 0 = no limit"),
	Q("write-burst", write_burst, "writes a domain may make at once"),
#undef Q
};
#define NQUOTAS (sizeof(quota_names) / sizeof(quota_names[0]))

const char *rundir;
static struct domain *domains[DOMID_MAX_VALID + 1];
/* One past the highest domid with an entry: the walks over domains[]
 * stop there (a store serves a few domains, not 32k). */
static uint32_t domains_end;

int quota_set(const char *name, const char *value)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(value, &end, 10);
	if (!*value || *end || errno || v > 0x7fffffff)
		return -EINVAL;
	for (size_t i = 0; i < NQUOTAS; i++) {
		if (strcmp(name, quota_names[i].name) == 0) {
			*(unsigned *)((char *)&quota + quota_names[i].off) = (unsigned)v;
			if (quota.path_len > XENSTORE_REL_PATH_MAX)
				quota.path_len = XENSTORE_REL_PATH_MAX;
			return 0;
		}
	}
	return -EINVAL;
}

static char *append(struct arena *a, char *s, const char *add)
{
	return s ? arena_printf(a, "%s%s", s, add) : NULL;
}

/* domid < 0: the limits; otherwise that domain's usage. */
char *quota_report(struct arena *a, int64_t domid)
{
	char *s = arena_strndup(a, "", 0);
	struct domain *d;

	if (domid < 0) {
		for (size_t i = 0; i < NQUOTAS; i++)
			s = append(a, s, arena_printf(a, "%-20s %u  (%s)\n",
				quota_names[i].name,
				*(unsigned *)((char *)&quota + quota_names[i].off),
				quota_names[i].desc));
		return s;
	}
	if (domid > DOMID_MAX_VALID)
		return NULL;
	d = domain_get((uint32_t)domid, false);
	unsigned conns_n = 0, watches = 0, txns = 0, replies = 0, events = 0;
	for (struct conn *c = conns; c; c = c->next) {
		if (c->dead || c->domid != (uint32_t)domid)
			continue;
		conns_n++;
		watches += c->nwatches;
		txns += c->ntxns;
		replies += c->out_replies;
		events += c->out_events;
	}
	return arena_printf(a,
		"domain %u\nintroduced %s\nnodes %ld\nmemory %ld\nwatches %u\n"
		"transactions %u\nconnections %u\nqueued-replies %u\n"
		"queued-events %u\n", (unsigned)domid,
		(domid == 0 || (d && d->introduced)) ? "yes" : "no",
		d ? d->nodes : 0, d ? d->memory : 0, watches, txns, conns_n,
		replies, events);
}

struct domain *domain_get(uint32_t domid, bool create)
{
	struct domain *d;

	if (domid > DOMID_MAX_VALID)
		return NULL;
	d = domains[domid];
	if (d || !create)
		return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->domid = domid;
	if (domid >= domains_end)
		domains_end = domid + 1;
	d->target = -1;
	d->lis.kind = POLL_LISTEN;
	d->lis.fd = -1;
	d->lis.domid = domid;
	domains[domid] = d;
	return d;
}

uint32_t domain_id_end(void)
{
	return domains_end;
}

bool domain_exists(uint32_t domid)
{
	struct domain *d = domain_get(domid, false);
	return domid == 0 || (d && d->introduced);
}

void domain_account(uint32_t owner, long delta, const struct node *n)
{
	struct domain *d = domain_get(owner, true);

	if (d) {
		d->nodes += delta;
		d->memory += delta * (long)node_memory(n);
	}
}

/*
 * A domain's socket belongs to the owner and group of its directory (root
 * unless `xbd domain-create --user/--group` gave them away): mode 0600,
 * or 0660 when the directory has a group other than root's.  Issue 18:
 * a 0666 socket let any local user act as the domain.  The mode is set by
 * the umask at bind (chmod would follow a link the owner planted);
 * xenstored.sock (domid 0) is root's, 0600.
 */
static int socket_owner(const char *path, uint32_t domid, struct stat *st)
{
	char dir[PATH_MAX];
	char *slash;

	memset(st, 0, sizeof(*st));
	if (!domid)
		return 0600;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (lstat(dir, st) < 0)
		return -errno;
	if (!S_ISDIR(st->st_mode))
		return -ENOTDIR;
	return st->st_gid != 0 ? 0660 : 0600;
}

int listener_open(struct listener *l, const char *path, uint32_t domid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = l };
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Anyone who can connect to a domain's socket *is* that domain:
	 * born with its final mode (single-threaded daemon: the umask is
	 * ours), owned by root until the lchown, listening only after. */
	struct stat st;
	int mode = socket_owner(path, domid, &st), b;

	if (mode < 0) {
		close(fd);
		return mode;
	}
	unlink(path);
	mode_t old_mask = umask(~(mode_t)mode & 0777);

	b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (b < 0 || (domid && lchown(path, st.st_uid, st.st_gid) < 0) ||
	    listen(fd, 128) < 0 ||
	    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		close(fd);
		unlink(path);
		return ret;
	}
	l->kind = POLL_LISTEN;
	l->fd = fd;
	l->domid = domid;
	return 0;
}

void listener_close(struct listener *l, const char *path)
{
	if (l->fd < 0)
		return;
	epoll_ctl(epoll_fd, EPOLL_CTL_DEL, l->fd, NULL);
	close(l->fd);
	l->fd = -1;
	if (path)
		unlink(path);
}

static int domain_listen(struct domain *d)
{
	char *dir = NULL;
	int ret;

	if (asprintf(&dir, "%s/dom%u", rundir, d->domid) < 0)
		return -ENOMEM;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		ret = -errno;
		log_err("domain %u: cannot create %s: %s", d->domid, dir,
			strerror(-ret));
		goto out;
	}
	free(d->sock_path);
	if (asprintf(&d->sock_path, "%s/xenstore.sock", dir) < 0) {
		d->sock_path = NULL;
		ret = -ENOMEM;
		goto out;
	}
	ret = listener_open(&d->lis, d->sock_path, d->domid);
	if (ret) {
		log_err("domain %u: cannot listen on %s: %s", d->domid,
			d->sock_path, strerror(-ret));
		free(d->sock_path);
		d->sock_path = NULL;
	}
out:
	free(dir);
	return ret;
}

int domain_introduce(uint32_t domid)
{
	struct domain *d;
	int ret;

	if (domid > DOMID_MAX_VALID)
		return -EINVAL;
	if (domid == 0)
		return 0;	/* the master domain is always there */
	d = domain_get(domid, true);
	if (!d)
		return -ENOMEM;
	if (d->introduced)
		return 0;	/* re-introduction: nothing fires */
	ret = domain_listen(d);
	if (ret)
		return ret;
	d->introduced = true;
	db_dirty = true;
	log_info("domain %u introduced", domid);
	watch_fire_special("@introduceDomain");
	return 0;
}

struct purge {
	uint32_t domid;
	struct arena arena;
	const char **doomed;	/* roots of subtrees domid owns */
	size_t n, cap;
};

static int purge_visit(struct node *n, void *arg)
{
	struct purge *p = arg;
	uint32_t before = n->nperms, owner = n->perms[0].domid;

	if (n->perms[0].domid == p->domid && strcmp(n->path, "/") != 0) {
		if (p->n == p->cap) {
			size_t cap = p->cap ? 2 * p->cap : 16;
			const char **d = arena_alloc(&p->arena, cap * sizeof(*d));
			if (!d)
				return -ENOMEM;
			if (p->n)
				memcpy(d, p->doomed, p->n * sizeof(*d));
			p->doomed = d;
			p->cap = cap;
		}
		p->doomed[p->n++] = n->path;	/* valid until the deletions */
		return 1;
	}
	domain_account(owner, -1, n);	/* the record shrinks: re-charge */
	for (uint32_t i = 1; i < n->nperms;) {
		if (n->perms[i].domid == p->domid) {
			memmove(&n->perms[i], &n->perms[i + 1],
				sizeof(n->perms[0]) * (n->nperms - i - 1));
			n->nperms--;
		} else {
			i++;
		}
	}
	domain_account(owner, +1, n);
	if (n->nperms != before) {
		n->gen = db_next_gen();	/* open transactions must notice */
		db_dirty = true;
	}
	return 0;
}

/* Delete every subtree whose root domid owns; drop domid from the perm
 * lists of the rest (XSA-322/419). */
static void domain_purge_nodes(uint32_t domid)
{
	struct purge p = { .domid = domid };
	struct view v = { .conn = NULL, .txn = NULL };

	if (db_walk("/", purge_visit, &p) == 0) {
		for (size_t i = 0; i < p.n; i++)
			p.doomed[i] = arena_strndup(&p.arena, p.doomed[i],
						    strlen(p.doomed[i]));
		for (size_t i = 0; i < p.n; i++)
			if (p.doomed[i])
				store_rm_tree(&v, &p.arena, p.doomed[i]);
	}
	arena_release(&p.arena);
}

int domain_release(uint32_t domid)
{
	struct domain *d = domain_get(domid, false);

	if (domid == 0)
		return -EINVAL;
	if (!d || !d->introduced)
		return -ENOENT;
	listener_close(&d->lis, d->sock_path);
	free(d->sock_path);
	d->sock_path = NULL;
	for (struct conn *c = conns; c; c = c->next)
		if (!c->priv && c->domid == domid)
			conn_kill(c, "domain released");
	domain_purge_nodes(domid);
	special_perms_drop(domid);
	for (uint32_t i = 0; i < domains_end; i++)
		if (domains[i] && domains[i]->target == (int64_t)domid)
			domains[i]->target = -1;
	d->introduced = false;
	d->target = -1;
	d->watches = 0;		/* XSA-483: the next domain N starts fresh */
	db_dirty = true;
	log_info("domain %u released", domid);
	watch_fire_special("@releaseDomain");
	return 0;
}

/* Sockets left by an instance that died without cleaning up: nobody
 * serves them (main.c made sure no other instance is live), and a client
 * would get ECONNREFUSED instead of ENOENT. */
static void remove_stale_sockets(void)
{
	char *pattern = NULL;
	glob_t g;

	if (asprintf(&pattern, "%s/dom*/xenstore.sock", rundir) < 0)
		return;
	if (glob(pattern, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++) {
			log_info("removing stale %s", g.gl_pathv[i]);
			unlink(g.gl_pathv[i]);
		}
		globfree(&g);
	}
	free(pattern);
}

/* At start: clear stale sockets, then listen again for the domains a
 * persisted store introduced. */
int domain_listen_all(void)
{
	remove_stale_sockets();
	for (uint32_t i = 1; i < domains_end; i++) {
		struct domain *d = domains[i];
		if (d && d->introduced && d->lis.fd < 0 && domain_listen(d))
			d->introduced = false;
	}
	return 0;
}

void domain_shutdown(void)
{
	for (uint32_t i = 0; i < domains_end; i++) {
		struct domain *d = domains[i];
		if (!d)
			continue;
		listener_close(&d->lis, d->sock_path);
		free(d->sock_path);
		free(d);
		domains[i] = NULL;
	}
	domains_end = 0;
}
