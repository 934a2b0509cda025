/* SPDX-License-Identifier: MIT */
/*
 * Wire operations: one table indexed by message type
 * (CONTRIBUTING.md, "Tables, not token pasting"), one scratch arena per
 * request.
 *
 * ops_process() copies the payload once (NUL-terminated) into the arena,
 * checks the type, the privilege and the transaction id in that order, as
 * cxenstored's process_message(), then runs the handler.  A handler
 * returns 0 with req->reply set, or -errno, which goes back as the error
 * string.  Replies above 4096 bytes become E2BIG (XSA-72).
 */
#include "xenstored.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define F_PRIV  1u	/* privileged callers only */
#define F_NOTID 2u	/* tx_id ignored (XSA-115) */

FILE *trace_file;

/* ---- payload and path helpers ---- */

int reply_string(struct request *req, const char *s)
{
	req->reply = s;
	req->reply_len = (uint32_t)strlen(s) + 1;
	return 0;
}

/* cxenstored onearg(): exactly one string, its NUL the last byte. */
static const char *onearg(const struct request *req)
{
	if (!req->len || memchr(req->body, 0, req->len) != req->body + req->len - 1)
		return NULL;
	return req->body;
}

/* Split into strings; returns the count of NUL-terminated strings. */
static unsigned split(const struct request *req, const char **vec, unsigned max)
{
	unsigned n = 0;

	for (uint32_t off = 0; off < req->len;) {
		const char *s = req->body + off;
		const char *nul = memchr(s, 0, req->len - off);
		if (!nul)
			break;
		if (n < max)
			vec[n] = s;
		n++;
		off += (uint32_t)(nul - s) + 1;
	}
	return n;
}

/* Exactly n strings, nothing after the last NUL. */
static bool exact_strings(const struct request *req, const char **vec,
			  unsigned n)
{
	return req->len && req->body[req->len - 1] == '\0' &&
	       split(req, vec, n) == n;
}

static size_t local_prefix_len(const char *p)
{
	static const char pre[] = "/local/domain/";
	size_t i = sizeof(pre) - 1, digits = 0;

	if (strncmp(p, pre, i) != 0)
		return 0;
	while (isdigit((unsigned char)p[i]) && digits < 5) {
		i++;
		digits++;
	}
	return digits && p[i] == '/' ? i + 1 : 0;
}

bool path_valid(const char *p, bool allow_special)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-/_@";
	size_t len = strlen(p);

	if (p[0] != '/' && !(allow_special && p[0] == '@'))
		return false;
	if (len > 1 && p[len - 1] == '/')
		return false;
	if (strstr(p, "//"))
		return false;
	if (len - local_prefix_len(p) > quota.path_len)
		return false;
	return strspn(p, ok) == len;
}

const char *canonical_path(struct request *req, const char *path,
			   bool allow_special, size_t *rel)
{
	const char *canon = path;

	if (rel)
		*rel = 0;
	if (path[0] != '/' && path[0] != '@') {
		canon = arena_printf(&req->arena, "/local/domain/%u/%s",
				     req->conn->domid, path);
		if (!canon)
			return NULL;
		if (rel)
			*rel = strlen(canon) - strlen(path) - 1;
	}
	return path_valid(canon, allow_special) ? canon : NULL;
}

static unsigned node_perm(const struct request *req, const struct node *n)
{
	const struct conn *c = req->conn;
	return perm_for(c->domid, c->priv, conn_target(c), n->perms, n->nperms);
}

/* cxenstored errno_from_parents(): ENOENT only if the nearest existing
 * ancestor grants perm, otherwise EACCES (existence hiding). */
static int errno_from_parents(struct request *req, const char *path,
			      unsigned perm, const struct node **anc)
{
	const struct node *n = NULL;
	int ret;

	while ((path = path_parent(&req->arena, path))) {
		ret = store_get(&req->view, path, &n);
		if (ret)
			return ret;
		if (n)
			break;
	}
	if (anc)
		*anc = n;
	if (!n)
		return -EIO;	/* no root: cannot happen */
	return (node_perm(req, n) & perm) ? -ENOENT : -EACCES;
}

static int get_node(struct request *req, const char *path, unsigned perm,
		    const struct node **out)
{
	const struct node *n;
	int ret = store_get(&req->view, path, &n);

	if (ret)
		return ret;
	if (!n)
		return errno_from_parents(req, path, perm, NULL);
	if ((node_perm(req, n) & perm) != perm)
		return -EACCES;
	*out = n;
	return 0;
}

/* Memory an unprivileged caller is charged for storing n in place of
 * old (NULL: a new node); nodes owned by others are not its charge. */
static long memory_delta(const struct request *req, const struct node *n,
			 const struct node *old)
{
	long delta = 0;

	if (n->perms[0].domid == req->conn->domid)
		delta += (long)node_memory(n);
	if (old && old->perms[0].domid == req->conn->domid)
		delta -= (long)node_memory(old);
	return delta;
}

/* The node-size and memory quotas of an unprivileged caller. */
static int check_store(const struct request *req, const struct node *n,
		       const struct node *old, long *mem)
{
	struct domain *d;

	if (req->conn->priv)
		return 0;
	if (node_size(n) >= quota.node_size)
		return -ENOSPC;
	*mem += memory_delta(req, n, old);
	d = domain_get(req->conn->domid, false);
	/* Committed use plus what this transaction adds (XSA-326: a commit
	 * must not land past the quota). */
	if (*mem > 0 && (d ? d->memory : 0) + store_pending_memory(&req->view) +
	    *mem > (long)quota.memory)
		return -ENOMEM;
	return 0;
}

/* ---- creating and removing ---- */

/* New nodes inherit the parent's perms; an unprivileged creator becomes
 * the owner. */
static struct node *new_child(struct request *req, const char *path,
			      const struct node *parent, const void *value,
			      uint32_t vlen)
{
	struct node *n = node_new(path, parent->perms, parent->nperms, value, vlen);

	if (n && !req->conn->priv)
		n->perms[0].domid = req->conn->domid;
	return n;
}

static int check_node_quota(struct request *req, long new_nodes)
{
	struct domain *d;
	long have;

	if (req->conn->priv)
		return 0;
	d = domain_get(req->conn->domid, false);
	have = (d ? d->nodes : 0) + store_pending_nodes(&req->view);
	return have + new_nodes > (long)quota.nodes ? -ENOSPC : 0;
}

/*
 * Create path (absent) and its missing parents; needs WRITE on the
 * nearest existing ancestor.  Everything is built and checked before the
 * first store_put(), so a refused creation changes nothing (XSA-414).
 */
static int create_node(struct request *req, const char *path,
		       const void *value, uint32_t vlen)
{
	const struct node *anc;
	size_t depth = 0;
	long mem = 0;
	int ret = errno_from_parents(req, path, PERM_WRITE, &anc);

	if (ret != -ENOENT)
		return ret;
	for (const char *p = path; strcmp(p, anc->path) != 0;
	     p = path_parent(&req->arena, p))
		depth++;
	ret = check_node_quota(req, (long)depth);
	if (ret)
		return ret;

	struct node **chain = arena_alloc(&req->arena, (depth + 1) * sizeof(*chain));
	const char *p = path;
	if (!chain)
		return -ENOMEM;
	chain[0] = node_dup(anc);
	for (size_t i = depth; i > 0; i--, p = path_parent(&req->arena, p))
		chain[i] = new_child(req, p, anc, i == depth ? value : "",
				     i == depth ? vlen : 0);
	for (size_t i = 0; i <= depth; i++) {
		if (!chain[i] || (i < depth &&
		    node_add_child(chain[i], path_basename(chain[i + 1]->path))))
			ret = -ENOMEM;
		else if (!ret)
			ret = check_store(req, chain[i], i ? NULL : anc, &mem);
	}
	for (size_t i = 0; i <= depth; i++) {
		if (ret)
			node_free(chain[i]);
		else if ((ret = store_put(&req->view, chain[i], i == depth, NULL, 0)))
			while (++i <= depth)
				node_free(chain[i]);
	}
	return ret;
}

/* Collect the subtree in pre-order with an explicit stack (XSA-418). */
static const char **subtree(struct view *v, struct arena *a, const char *path,
			    size_t *count)
{
	size_t cap = 16, n = 0;
	const char **list = arena_alloc(a, cap * sizeof(*list));

	if (!list)
		return NULL;
	list[n++] = path;
	for (size_t i = 0; i < n; i++) {
		const struct node *node;
		if (store_get(v, list[i], &node) || !node)
			continue;
		for (uint32_t off = 0; off < node->clen;) {
			const char *name = node->children + off;
			off += (uint32_t)strlen(name) + 1;
			if (n == cap) {
				const char **l = arena_alloc(a, 2 * cap * sizeof(*l));
				if (!l)
					return NULL;
				memcpy(l, list, n * sizeof(*l));
				list = l;
				cap *= 2;
			}
			if (!(list[n++] = path_child(a, list[i], name)))
				return NULL;
		}
	}
	*count = n;
	return list;
}

int store_rm_tree(struct view *v, struct arena *a, const char *path)
{
	const char *parent = path_parent(a, path);
	const struct node *pn;
	struct node *copy;
	size_t n = 0;
	const char **list;
	int ret;

	if (!parent)
		return -EINVAL;
	ret = store_get(v, parent, &pn);
	if (ret)
		return ret;
	list = subtree(v, a, path, &n);
	if (!list)
		return -ENOMEM;
	if (pn) {
		if (!(copy = node_dup(pn)))
			return -ENOMEM;
		node_del_child(copy, path_basename(path));
		ret = store_put(v, copy, 0, NULL, 0);
	}
	/* children before parents; the root's event goes to watchers above */
	for (size_t i = n; !ret && i > 0; i--)
		ret = store_del(v, list[i - 1], i == 1 ? 1 : 2);
	return ret;
}

/* ---- node operations ---- */

/* The node named by a one-argument request, checked for perm. */
static int arg_node(struct request *req, unsigned perm, const char **path,
		    const struct node **n)
{
	const char *arg = onearg(req);

	if (!arg || !(*path = canonical_path(req, arg, false, NULL)))
		return -EINVAL;
	return get_node(req, *path, perm, n);
}

static int do_read(struct request *req)
{
	const char *path;
	const struct node *n;
	int ret = arg_node(req, PERM_READ, &path, &n);

	if (ret)
		return ret;
	req->reply = arena_strndup(&req->arena, (const char *)n->value, n->vlen);
	req->reply_len = n->vlen;
	return req->reply ? 0 : -ENOMEM;
}

static int do_directory(struct request *req)
{
	const char *path;
	const struct node *n;
	int ret = arg_node(req, PERM_READ, &path, &n);

	if (ret)
		return ret;
	req->reply = arena_strndup(&req->arena, n->children, n->clen);
	req->reply_len = n->clen;
	return req->reply ? 0 : -ENOMEM;
}

/* Reply: "<gen>\0" and the whole child names that fit from byte offset;
 * the last chunk ends with an extra NUL (send_directory_part()). */
static int do_directory_part(struct request *req)
{
	const char *vec[2], *path;
	const struct node *n;
	char gen[24];
	int ret;

	if (!exact_strings(req, vec, 2) ||
	    !(path = canonical_path(req, vec[0], false, NULL)))
		return -EINVAL;
	ret = get_node(req, path, PERM_READ, &n);
	if (ret)
		return ret;
	uint32_t off = (uint32_t)atoi(vec[1]);
	size_t genlen = (size_t)snprintf(gen, sizeof(gen), "%llu",
					 (unsigned long long)n->gen) + 1;
	size_t len = 0, max = XS_MAX_PAYLOAD - genlen - 1;
	while (off < n->clen && off + len < n->clen) {
		size_t l = strlen(n->children + off + len) + 1;
		if (len + l > max)
			break;
		len += l;
	}
	char *out = arena_alloc(&req->arena, genlen + len + 1);
	if (!out)
		return -ENOMEM;
	memcpy(out, gen, genlen);
	if (len)
		memcpy(out + genlen, n->children + off, len);
	if (off >= n->clen || off + len == n->clen)
		out[genlen + len++] = '\0';
	req->reply = out;
	req->reply_len = (uint32_t)(genlen + len);
	return 0;
}

static int do_write(struct request *req)
{
	const char *vec[1], *path;
	const struct node *n;
	struct node *copy;
	int ret;

	if (split(req, vec, 1) < 1 ||
	    !(path = canonical_path(req, vec[0], false, NULL)))
		return -EINVAL;
	uint32_t off = (uint32_t)strlen(vec[0]) + 1;
	const char *value = req->body + off;
	uint32_t vlen = req->len - off;

	ret = get_node(req, path, PERM_WRITE, &n);
	if (ret == -ENOENT)
		ret = create_node(req, path, value, vlen);
	else if (!ret) {
		if (!(copy = node_dup(n)) || node_set_value(copy, value, vlen)) {
			node_free(copy);
			return -ENOMEM;
		}
		if ((ret = check_store(req, copy, n, &(long){ 0 }))) {
			node_free(copy);
			return ret;
		}
		ret = store_put(&req->view, copy, 1, NULL, 0);
	}
	return ret ? ret : reply_string(req, "OK");
}

static int do_mkdir(struct request *req)
{
	const char *path;
	const struct node *n;
	int ret = arg_node(req, PERM_WRITE, &path, &n);

	if (ret == -ENOENT)
		ret = create_node(req, path, "", 0);
	return ret ? ret : reply_string(req, "OK");
}

static int do_rm(struct request *req)
{
	const char *path, *parent;
	const struct node *n;
	int ret = arg_node(req, PERM_WRITE, &path, &n);

	if (ret == -ENOENT) {
		/* Didn't exist: fine if the parent does. */
		parent = path_parent(&req->arena, path);
		ret = parent ? store_get(&req->view, parent, &n) : -ENOENT;
		if (!ret && !n)
			ret = -ENOENT;
		return ret ? ret : reply_string(req, "OK");
	}
	if (ret)
		return ret;
	if (strcmp(path, "/") == 0)
		return -EINVAL;
	ret = store_rm_tree(&req->view, &req->arena, path);
	return ret ? ret : reply_string(req, "OK");
}

static int do_get_perms(struct request *req)
{
	const char *arg = onearg(req), *path;
	const struct perm *p;
	const struct node *n;
	uint32_t np;
	int ret;

	if (!arg)
		return -EINVAL;
	p = special_perms_get(arg, &np);
	if (!p) {
		if (!(path = canonical_path(req, arg, false, NULL)))
			return -EINVAL;
		ret = get_node(req, path, PERM_READ, &n);
		if (ret)
			return ret;
		p = n->perms;
		np = n->nperms;
	}
	char *out = arena_alloc(&req->arena, np * 12 + 1);
	size_t len = 0;
	if (!out)
		return -ENOMEM;
	for (uint32_t i = 0; i < np; i++) {
		static const char letter[] = "nrwb";
		len += (size_t)sprintf(out + len, "%c%u", letter[p[i].access & 3],
				       p[i].domid) + 1;
	}
	req->reply = out;
	req->reply_len = (uint32_t)len;
	return 0;
}

static int parse_perms(struct request *req, const char **vec, unsigned n,
		       struct perm **out)
{
	struct perm *p = arena_alloc(&req->arena, n * sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		if (perm_parse(vec[i], &p[i]))
			return -EINVAL;
	*out = p;
	return 0;
}

static int set_special_perms(struct request *req, const char *name,
			     const struct perm *p, unsigned n)
{
	uint32_t nold;
	const struct perm *old = special_perms_get(name, &nold);
	unsigned need = PERM_WRITE | PERM_OWNER;

	if ((perm_for(req->conn->domid, req->conn->priv,
		      conn_target(req->conn), old, nold) & need) != need)
		return -EACCES;
	return special_perms_set(name, p, n);
}

static int do_set_perms(struct request *req)
{
	unsigned n = split(req, NULL, 0), np;
	const char **vec, *path;
	const struct node *node;
	struct perm *p;
	struct node *copy;
	int ret;

	if (n < 2)
		return -EINVAL;
	np = n - 1;
	if (!req->conn->priv && np > quota.perms)
		return -ENOSPC;
	vec = arena_alloc(&req->arena, n * sizeof(*vec));
	if (!vec)
		return -ENOMEM;
	split(req, vec, n);
	ret = parse_perms(req, vec + 1, np, &p);
	if (ret)
		return ret;
	if (special_perms_get(vec[0], &(uint32_t){ 0 })) {
		ret = set_special_perms(req, vec[0], p, np);
		return ret ? ret : reply_string(req, "OK");
	}
	if (!(path = canonical_path(req, vec[0], false, NULL)))
		return -EINVAL;
	ret = get_node(req, path, PERM_WRITE | PERM_OWNER, &node);
	if (ret)
		return ret;
	if (!req->conn->priv && p[0].domid != node->perms[0].domid)
		return -EPERM;
	if (!(copy = node_dup(node)) || node_set_perms(copy, p, np)) {
		node_free(copy);
		return -ENOMEM;
	}
	if ((ret = check_store(req, copy, node, &(long){ 0 }))) {
		node_free(copy);
		return ret;
	}
	/* the old perms outlive the node store_put() replaces */
	uint32_t nold = node->nperms;
	struct perm *old = arena_alloc(&req->arena, nold * sizeof(*old));
	if (!old) {
		node_free(copy);
		return -ENOMEM;
	}
	memcpy(old, node->perms, nold * sizeof(*old));
	ret = store_put(&req->view, copy, 1, old, nold);
	return ret ? ret : reply_string(req, "OK");
}

/* ---- watches ---- */

static int do_watch(struct request *req)
{
	const char *vec[2], *path;
	size_t rel;
	int ret;

	if (!exact_strings(req, vec, 2) ||
	    !(path = canonical_path(req, vec[0], true, &rel)))
		return -EINVAL;
	ret = watch_add(req->conn, path, vec[1], rel);
	if (ret)
		return ret;
	/* fire once up front, queued behind the OK */
	req->ev_path = vec[0];
	req->ev_token = vec[1];
	return reply_string(req, "OK");
}

static int do_unwatch(struct request *req)
{
	const char *vec[2], *path;
	int ret;

	if (!exact_strings(req, vec, 2) ||
	    !(path = canonical_path(req, vec[0], true, NULL)))
		return -EINVAL;
	ret = watch_remove(req->conn, path, vec[1]);
	return ret ? ret : reply_string(req, "OK");
}

static int do_reset_watches(struct request *req)
{
	watch_reset(req->conn);
	txn_abort_all(req->conn);	/* XSA-484: safe in any context */
	return reply_string(req, "OK");
}

/* ---- transactions ---- */

static int do_transaction_start(struct request *req)
{
	struct txn *t;

	if (req->view.txn)
		return -EBUSY;
	t = txn_start(req->conn);
	if (!t)
		return -errno;
	char *id = arena_printf(&req->arena, "%u", txn_id(t));
	return id ? reply_string(req, id) : -ENOMEM;
}

static int do_transaction_end(struct request *req)
{
	const char *arg = onearg(req);
	int ret;

	if (!arg || (strcmp(arg, "T") != 0 && strcmp(arg, "F") != 0))
		return -EINVAL;
	if (!req->view.txn)
		return -ENOENT;
	ret = txn_end(req->conn, req->view.txn, arg[0] == 'T');
	req->view.txn = NULL;
	return ret ? ret : reply_string(req, "OK");
}

/* ---- domains ---- */

/* Strict decimal domid; cxenstored uses atoi(), we refuse garbage. */
static int parse_domid(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end || errno || v > 0xffff)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int do_introduce(struct request *req)
{
	const char *vec[3];
	uint32_t domid;
	int ret;

	if (split(req, vec, 3) < 3 || parse_domid(vec[0], &domid))
		return -EINVAL;
	/* vec[1] (ring gfn) has no meaning without a hypervisor */
	if (atoi(vec[2]) <= 0)
		return -EINVAL;
	ret = domain_introduce(domid);
	return ret ? ret : reply_string(req, "OK");
}

/* cxenstored onearg_domain(): 0 is EINVAL, unknown ENOENT. */
static int onearg_domain(struct request *req, uint32_t *domid)
{
	const char *arg = onearg(req);

	if (!arg || parse_domid(arg, domid) || *domid == 0)
		return -EINVAL;
	return domain_exists(*domid) ? 0 : -ENOENT;
}

static int do_release(struct request *req)
{
	uint32_t domid;
	int ret = onearg_domain(req, &domid);

	if (!ret)
		ret = domain_release(domid);
	return ret ? ret : reply_string(req, "OK");
}

static int do_resume(struct request *req)
{
	uint32_t domid;
	int ret = onearg_domain(req, &domid);

	/* no shutdown state to re-arm without a hypervisor */
	return ret ? ret : reply_string(req, "OK");
}

static int do_get_domain_path(struct request *req)
{
	const char *arg = onearg(req);
	char *path;

	if (!arg)
		return -EINVAL;
	path = arena_printf(&req->arena, "/local/domain/%u", (unsigned)atoi(arg));
	return path ? reply_string(req, path) : -ENOMEM;
}

static int do_is_domain_introduced(struct request *req)
{
	const char *arg = onearg(req);
	unsigned domid;

	if (!arg)
		return -EINVAL;
	domid = (unsigned)atoi(arg);
	return reply_string(req, domid == DOMID_SELF_ID || domain_exists(domid)
				 ? "T" : "F");
}

static int do_set_target(struct request *req)
{
	const char *vec[2];
	uint32_t domid, tdomid;
	struct domain *d;

	if (split(req, vec, 2) < 2 || parse_domid(vec[0], &domid) ||
	    parse_domid(vec[1], &tdomid))
		return -EINVAL;
	if (!domain_exists(domid) || !domain_exists(tdomid))
		return -ENOENT;
	if (domid == 0 || !(d = domain_get(domid, false)))
		return -EINVAL;
	d->target = tdomid;
	return reply_string(req, "OK");
}

/* ---- dispatch ---- */

static const struct op {
	const char *name;
	int (*fn)(struct request *req);
	unsigned flags;
} ops[XS_TYPE_COUNT] = {
	[XS_CONTROL] = { "CONTROL", do_control, F_PRIV },
	[XS_DIRECTORY] = { "DIRECTORY", do_directory, 0 },
	[XS_READ] = { "READ", do_read, 0 },
	[XS_GET_PERMS] = { "GET_PERMS", do_get_perms, 0 },
	[XS_WATCH] = { "WATCH", do_watch, F_NOTID },
	[XS_UNWATCH] = { "UNWATCH", do_unwatch, F_NOTID },
	[XS_TRANSACTION_START] = { "TRANSACTION_START", do_transaction_start, 0 },
	[XS_TRANSACTION_END] = { "TRANSACTION_END", do_transaction_end, 0 },
	[XS_INTRODUCE] = { "INTRODUCE", do_introduce, F_PRIV },
	[XS_RELEASE] = { "RELEASE", do_release, F_PRIV },
	[XS_GET_DOMAIN_PATH] = { "GET_DOMAIN_PATH", do_get_domain_path, 0 },
	[XS_WRITE] = { "WRITE", do_write, 0 },
	[XS_MKDIR] = { "MKDIR", do_mkdir, 0 },
	[XS_RM] = { "RM", do_rm, 0 },
	[XS_SET_PERMS] = { "SET_PERMS", do_set_perms, 0 },
	[XS_WATCH_EVENT] = { "WATCH_EVENT", NULL, 0 },
	[XS_ERROR] = { "ERROR", NULL, 0 },
	[XS_IS_DOMAIN_INTRODUCED] = { "IS_DOMAIN_INTRODUCED", do_is_domain_introduced, F_PRIV },
	[XS_RESUME] = { "RESUME", do_resume, F_PRIV },
	[XS_SET_TARGET] = { "SET_TARGET", do_set_target, F_PRIV },
	[XS_RESET_WATCHES] = { "RESET_WATCHES", do_reset_watches, F_NOTID },
	[XS_DIRECTORY_PART] = { "DIRECTORY_PART", do_directory_part, 0 },
};

static const char *error_string(int err)
{
	for (size_t i = 0; i < sizeof(xsd_errors) / sizeof(xsd_errors[0]); i++)
		if (xsd_errors[i].errnum == err)
			return xsd_errors[i].errstring;
	return "EINVAL";
}

static void send_error(struct request *req, int err)
{
	const char *s = error_string(err);
	conn_send(req->conn, XS_ERROR, req->hdr.req_id, req->hdr.tx_id, s,
		  (uint32_t)strlen(s) + 1);
}

static int dispatch(struct request *req)
{
	uint32_t type = req->hdr.type;
	const struct op *op = type < XS_TYPE_COUNT ? &ops[type] : NULL;

	if (!op || !op->fn)
		return -ENOSYS;
	if ((op->flags & F_PRIV) && !req->conn->priv)
		return -EACCES;
	if (!(op->flags & F_NOTID) && req->hdr.tx_id) {
		req->view.txn = txn_find(req->conn, req->hdr.tx_id);
		if (!req->view.txn)
			return -ENOENT;
	}
	return op->fn(req);
}

void ops_process(struct conn *c, const struct xsd_sockmsg *hdr,
		 const uint8_t *body)
{
	struct request req = { .conn = c, .hdr = *hdr, .len = hdr->len };
	char *copy = arena_alloc(&req.arena, hdr->len + 1);
	int ret;

	trace_msg(c, "IN ", hdr, body);
	if (!copy) {
		conn_kill(c, "out of memory");
		return;
	}
	memcpy(copy, body, hdr->len);
	copy[hdr->len] = '\0';
	req.body = copy;
	req.view.conn = c;
	ret = dispatch(&req);
	if (!ret && req.reply_len > XS_MAX_PAYLOAD)
		ret = -E2BIG;
	if (ret)
		send_error(&req, -ret);
	else
		conn_send(c, hdr->type, hdr->req_id, hdr->tx_id, req.reply,
			  req.reply_len);
	if (!ret && req.ev_path)
		conn_send_event(c, req.ev_path, req.ev_token);
	arena_release(&req.arena);
}

static const char *type_name(uint32_t type)
{
	return type < XS_TYPE_COUNT && ops[type].name ? ops[type].name : "?";
}

void trace_msg(const struct conn *c, const char *dir,
	       const struct xsd_sockmsg *hdr, const uint8_t *body)
{
	char text[80];
	size_t n = 0;

	if (!trace_file)
		return;
	for (uint32_t i = 0; i < hdr->len && n < sizeof(text) - 5; i++) {
		uint8_t ch = body[i];
		if (ch == 0)
			text[n++] = ' ';
		else if (ch < 0x20 || ch > 0x7e)
			n += (size_t)sprintf(text + n, "\\x%02x", ch);
		else
			text[n++] = (char)ch;
	}
	text[n] = '\0';
	fprintf(trace_file, "%s conn %u dom %u %s req %u tx %u len %u \"%s\"\n",
		dir, c->id, c->domid, type_name(hdr->type), hdr->req_id,
		hdr->tx_id, hdr->len, text);
	fflush(trace_file);
}
