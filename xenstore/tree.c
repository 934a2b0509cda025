/* SPDX-License-Identifier: MIT */
/*
 * Nodes, permissions, paths and the main tree.
 *
 * The tree is a flat map from canonical path to node; each node keeps its
 * children's names in insertion order (the DIRECTORY payload), as
 * cxenstored does.  Every change gives the node a fresh generation from a
 * global 64-bit counter, which transactions compare at commit and
 * DIRECTORY_PART reports.
 */
#include "xenstored.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct hash tree;	/* path -> struct node * */
static uint64_t gen_counter;	/* last generation handed out */

struct node *node_new(const char *path, const struct perm *perms,
		      uint32_t nperms, const void *value, uint32_t vlen)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->path = strdup(path);
	if (!n->path || node_set_perms(n, perms, nperms) ||
	    node_set_value(n, value, vlen)) {
		node_free(n);
		return NULL;
	}
	return n;
}

struct node *node_dup(const struct node *src)
{
	struct node *n = node_new(src->path, src->perms, src->nperms,
				  src->value, src->vlen);

	if (!n)
		return NULL;
	n->gen = src->gen;
	if (src->clen) {
		n->children = malloc(src->clen);
		if (!n->children) {
			node_free(n);
			return NULL;
		}
		memcpy(n->children, src->children, src->clen);
		n->clen = src->clen;
	}
	return n;
}

void node_free(struct node *n)
{
	if (!n)
		return;
	free(n->path);
	free(n->perms);
	free(n->value);
	free(n->children);
	free(n);
}

int node_set_value(struct node *n, const void *value, uint32_t vlen)
{
	uint8_t *v = malloc(vlen ? vlen : 1);

	if (!v)
		return -ENOMEM;
	if (vlen)
		memcpy(v, value, vlen);
	free(n->value);
	n->value = v;
	n->vlen = vlen;
	return 0;
}

int node_set_perms(struct node *n, const struct perm *p, uint32_t nperms)
{
	struct perm *copy = malloc(sizeof(*copy) * (nperms ? nperms : 1));

	if (!copy)
		return -ENOMEM;
	memcpy(copy, p, sizeof(*copy) * nperms);
	free(n->perms);
	n->perms = copy;
	n->nperms = nperms;
	return 0;
}

int node_add_child(struct node *n, const char *name)
{
	size_t len = strlen(name) + 1;
	char *c = realloc(n->children, n->clen + len);

	if (!c)
		return -ENOMEM;
	memcpy(c + n->clen, name, len);
	n->children = c;
	n->clen += (uint32_t)len;
	return 0;
}

void node_del_child(struct node *n, const char *name)
{
	size_t len = strlen(name) + 1;

	for (uint32_t off = 0; off < n->clen;) {
		size_t l = strlen(n->children + off) + 1;
		if (l == len && memcmp(n->children + off, name, len) == 0) {
			memmove(n->children + off, n->children + off + l,
				n->clen - off - l);
			n->clen -= (uint32_t)l;
			return;
		}
		off += (uint32_t)l;
	}
}

size_t node_size(const struct node *n)
{
	/* cxenstored: record header (24) + 8 per perm + value + children */
	return 24 + 8 * (size_t)n->nperms + n->vlen + n->clen;
}

size_t node_memory(const struct node *n)
{
	return node_size(n) + strlen(n->path);
}

const char *path_parent(struct arena *a, const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash || (slash == path && path[1] == '\0'))
		return NULL;
	if (slash == path)
		return "/";
	return arena_strndup(a, path, (size_t)(slash - path));
}

const char *path_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* True if child is parent or below it ("/" is above everything). */
bool path_is_child(const char *child, const char *parent)
{
	size_t len = strlen(parent);

	if (strcmp(parent, "/") == 0)
		return child[0] == '/';
	return strncmp(child, parent, len) == 0 &&
	       (child[len] == '\0' || child[len] == '/');
}

int perm_parse(const char *s, struct perm *out)
{
	char *end;
	long id;

	switch (s[0]) {
	case 'n': out->access = PERM_NONE; break;
	case 'r': out->access = PERM_READ; break;
	case 'w': out->access = PERM_WRITE; break;
	case 'b': out->access = PERM_READ | PERM_WRITE; break;
	default: return -EINVAL;
	}
	if (s[1] == '\0')
		return -EINVAL;
	errno = 0;
	id = strtol(s + 1, &end, 0);	/* like xs_strings_to_perms() */
	if (*end || errno)
		return -EINVAL;
	out->domid = (uint32_t)id;
	return 0;
}

unsigned perm_for(uint32_t domid, bool priv, int64_t target,
		  const struct perm *p, uint32_t n)
{
	const unsigned all = PERM_READ | PERM_WRITE | PERM_OWNER;

	if (priv || n == 0 || p[0].domid == domid)
		return all;
	if (target >= 0 && p[0].domid == (uint32_t)target)
		return all;
	for (uint32_t i = 1; i < n; i++)
		if (p[i].domid == domid ||
		    (target >= 0 && p[i].domid == (uint32_t)target))
			return p[i].access;
	return p[0].access;
}

/* ---- the main tree ---- */

uint64_t db_next_gen(void)
{
	return ++gen_counter;
}

static struct node *root_node(const char *path)
{
	struct perm p = { .domid = 0, .access = PERM_NONE };
	return node_new(path, &p, 1, "", 0);
}

/* cxenstored's setup_structure(): "/", "/tool", "/tool/xenstored", n0. */
int db_init(bool structure)
{
	struct node *root, *tool, *xsd;

	if (hash_init(&tree))
		return -ENOMEM;
	if (!structure)
		return 0;
	root = root_node("/");
	tool = root_node("/tool");
	xsd = root_node("/tool/xenstored");
	if (!root || !tool || !xsd || node_add_child(root, "tool") ||
	    node_add_child(tool, "xenstored")) {
		node_free(root);
		node_free(tool);
		node_free(xsd);
		return -ENOMEM;
	}
	db_put(root);
	db_put(tool);
	db_put(xsd);
	return 0;
}

static void free_node(void *n, void *arg)
{
	(void)arg;
	node_free(n);
}

void db_destroy(void)
{
	if (!tree.buckets)
		return;
	hash_foreach(&tree, free_node, NULL);
	hash_destroy(&tree);
}

struct node *db_get(const char *path)
{
	return hash_get(&tree, path);
}

int db_put(struct node *n)
{
	void *old = NULL;
	int ret;

	n->gen = db_next_gen();
	ret = hash_put(&tree, n->path, n, &old);
	if (ret) {
		node_free(n);
		return ret;
	}
	if (old) {
		domain_account(((struct node *)old)->perms[0].domid, -1, old);
		node_free(old);
	}
	domain_account(n->perms[0].domid, +1, n);
	db_dirty = true;
	return 0;
}

void db_del(const char *path)
{
	struct node *n = hash_del(&tree, path);

	if (n) {
		domain_account(n->perms[0].domid, -1, n);
		node_free(n);
		db_dirty = true;
	}
}

size_t db_count(void)
{
	return tree.count;
}

void db_foreach(void (*fn)(void *node, void *arg), void *arg)
{
	hash_foreach(&tree, fn, arg);
}

const char *path_child(struct arena *a, const char *parent, const char *name)
{
	return strcmp(parent, "/") == 0 ? arena_printf(a, "/%s", name)
					: arena_printf(a, "%s/%s", parent, name);
}

int db_walk(const char *root, int (*fn)(struct node *n, void *arg), void *arg)
{
	struct arena a = { 0 };
	size_t cap = 64, top = 0;
	const char **stack = malloc(cap * sizeof(*stack));
	int ret = 0;

	if (!stack)
		return -ENOMEM;
	stack[top++] = root;
	while (top && ret >= 0) {
		struct node *n = db_get(stack[--top]);
		if (!n || (ret = fn(n, arg)) != 0)
			continue;
		for (uint32_t off = 0; off < n->clen && ret >= 0;) {
			const char *name = n->children + off;
			off += (uint32_t)strlen(name) + 1;
			if (top == cap) {
				const char **st = realloc(stack, 2 * cap * sizeof(*st));
				if (!st) {
					ret = -ENOMEM;
					break;
				}
				stack = st;
				cap *= 2;
			}
			if (!(stack[top++] = path_child(&a, n->path, name)))
				ret = -ENOMEM;
		}
	}
	free(stack);
	arena_release(&a);
	return ret < 0 ? ret : 0;
}
