/* SPDX-License-Identifier: MIT */
/*
 * Transactions: optimistic, checked per node, as cxenstored 4.17.
 *
 * Every request works on a "view" (struct view): the main tree, or a
 * transaction.  A transaction keeps, per node it has touched, one entry
 * with a private copy of the node (or "absent") and the generation the
 * node had in the main tree at the first access (0 = absent).  Handlers
 * always read a node before changing it (permission checks, parent child
 * lists), so every entry is checked at commit: if any recorded generation
 * differs from the main tree's, END T answers EAGAIN and applies nothing.
 * Otherwise the modified entries are copied into the main tree, each
 * getting a new generation, and their watch events fire, in first-access
 * order.
 *
 * Worked examples (gen in brackets, g(x) = generation of x):
 *
 *  1. Isolation ("ta rmw").  /a = "a" [5].  T1 reads /a: entry /a gen 5,
 *     copy "a".  T1 writes "b": the copy becomes "b".  A READ outside T1
 *     still sees "a" [5] from the main tree.  END T: g(/a) is still 5, so
 *     /a = "b" [new gen 9], one event on /a.
 *
 *  2. Conflict ("ta err").  T1 reads /a [5].  Outside, WRITE /a "b" makes
 *     it [6].  T1 reads /a again: its copy, still "a".  T1 writes "c".  END
 *     T: recorded 5 != 6, EAGAIN; /a stays "b" and no event fires.
 *
 *  3. Absent nodes count too.  T1 reads /x: ENOENT, entry /x gen 0.
 *     Outside, /x is created [7].  END T: 0 != 7, EAGAIN.  Likewise a
 *     DIRECTORY of /d records g(/d); a child created outside bumps g(/d).
 *
 *  4. Two deleters (XSA-440).  T1 and T2 both RM /a (entries /, /a and
 *     every node below).  T1 commits: the nodes are gone, g(/) is new.  T2
 *     commits: g(/a) is now 0 != recorded, EAGAIN.  No counter goes
 *     negative because nothing is applied before every check passed.
 *
 *  5. Create and delete in one transaction (XSA-421).  T1 writes /n (entry
 *     /n absent -> copy), then RMs /n (entry -> absent).  At commit /n is
 *     absent in the main tree and in the entry: nothing to apply, owner
 *     accounting unchanged.
 *
 * Limits (unprivileged callers only): more than quota.tx_nodes entries
 * gives ENOSPC and marks the transaction failed; END T of a failed
 * transaction answers ENOMEM, as cxenstored.
 */
#include "xenstored.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct txn_entry {
	struct txn_entry *next;		/* first-access order */
	char *path;			/* hash key, owned */
	uint64_t gen;			/* main-tree generation at first access */
	struct node *node;		/* private copy; NULL = absent */
	bool modified;
	int fire;			/* 0 none, 1 event, 2 exact event */
	struct perm *old;		/* perms before SET_PERMS, for the filter */
	uint32_t nold;
};

/* Owned by its connection (conn->txns list). */
struct txn {
	struct txn *next;
	uint32_t id;
	bool failed;
	struct hash entries;		/* path -> struct txn_entry */
	struct txn_entry *first, *last;
	unsigned count;
	long owned_delta;		/* nodes the caller gains on commit */
	long mem_delta;			/* memory the caller gains on commit */
	uint32_t domid;			/* charged for the entries (unprivileged) */
	long charged;			/* bytes of entries charged to domid */
};

/* What an entry costs its transaction's domain while the transaction
 * lives: cxenstored charges transaction nodes to the memory quota too. */
static long entry_cost(const struct txn_entry *e)
{
	return (long)(sizeof(*e) + strlen(e->path) + 1 +
		      (e->node ? node_memory(e->node) : 0));
}

uint32_t txn_id(const struct txn *t)
{
	return t->id;
}

static unsigned domain_txns(uint32_t domid)
{
	unsigned n = 0;

	for (struct conn *c = conns; c; c = c->next)
		if (!c->dead && !c->priv && c->domid == domid)
			n += c->ntxns;
	return n;
}

struct txn *txn_start(struct conn *c)
{
	struct txn *t;

	/* cxenstored counts per connection, and a ring domain has exactly
	 * one; a socket domain may have several, so count them all */
	if (!c->priv && domain_txns(c->domid) > quota.transactions) {
		errno = ENOSPC;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t || hash_init(&t->entries)) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	t->domid = c->priv ? UINT32_MAX : c->domid;
	do {	/* ids are never 0 and unique per connection */
		t->id = ++c->next_txid;
	} while (t->id == 0 || txn_find(c, t->id));
	t->next = c->txns;
	c->txns = t;
	c->ntxns++;
	return t;
}

struct txn *txn_find(struct conn *c, uint32_t id)
{
	for (struct txn *t = c->txns; t; t = t->next)
		if (t->id == id)
			return t;
	return NULL;
}

static void txn_free(struct txn *t)
{
	struct txn_entry *e = t->first;

	while (e) {
		struct txn_entry *next = e->next;
		node_free(e->node);
		free(e->old);
		free(e->path);
		free(e);
		e = next;
	}
	hash_destroy(&t->entries);
	if (t->charged) {
		struct domain *d = domain_get(t->domid, false);

		if (d)
			d->memory -= t->charged;
	}
	free(t);
}

long txn_charged(const struct conn *c)
{
	long sum = 0;

	for (const struct txn *t = c->txns; t; t = t->next)
		sum += t->charged;
	return sum;
}

static void txn_unlink(struct conn *c, struct txn *t)
{
	for (struct txn **pp = &c->txns; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			c->ntxns--;
			return;
		}
	}
}

void txn_abort_all(struct conn *c)
{
	while (c->txns) {
		struct txn *t = c->txns;
		txn_unlink(c, t);
		txn_free(t);
	}
}

static int txn_check(const struct conn *c, const struct txn *t)
{
	if (t->failed)
		return -ENOMEM;
	for (struct txn_entry *e = t->first; e; e = e->next) {
		struct node *cur = db_get(e->path);
		if ((cur ? cur->gen : 0) != e->gen)
			return -EAGAIN;
	}
	if (!c->priv && t->owned_delta > 0) {
		struct domain *d = domain_get(c->domid, false);
		long have = d ? d->nodes : 0;
		if (have + t->owned_delta > (long)quota.nodes)
			return -ENOSPC;
	}
	/* Committed use may have grown since the writes were checked. */
	if (!c->priv && t->mem_delta > 0) {
		struct domain *d = domain_get(c->domid, false);
		long have = (d ? d->memory : 0) - t->charged;
		if (have + t->mem_delta > (long)quota.memory)
			return -ENOMEM;
	}
	return 0;
}

/* Apply one modified entry; events fire with the perms that allow them. */
static int txn_apply(struct txn_entry *e)
{
	if (e->node) {
		struct node *n = e->node;
		e->node = NULL;
		int ret = db_put(n);
		if (ret)
			return ret;
		if (e->fire)
			watch_fire(e->path, db_get(e->path), e->fire == 2,
				   e->old, e->nold);
		return 0;
	}
	struct node *cur = db_get(e->path);
	if (!cur)
		return 0;	/* created and deleted inside (example 5) */
	if (e->fire)
		watch_fire(e->path, cur, e->fire == 2, NULL, 0);
	db_del(e->path);
	return 0;
}

int txn_end(struct conn *c, struct txn *t, bool commit)
{
	int ret = 0;

	txn_unlink(c, t);
	if (commit) {
		ret = txn_check(c, t);
		for (struct txn_entry *e = t->first; !ret && e; e = e->next)
			if (e->modified)
				ret = txn_apply(e);
	}
	txn_free(t);
	return ret;
}

/* ---- the store view ---- */

static int entry_get(struct view *v, const char *path, struct txn_entry **out)
{
	struct txn *t = v->txn;
	struct txn_entry *e = hash_get(&t->entries, path);
	struct node *cur;

	if (e)
		goto out;
	if (!v->conn->priv && t->count >= quota.tx_nodes) {
		t->failed = true;
		return -ENOSPC;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path)))
		goto nomem;
	cur = db_get(path);
	e->gen = cur ? cur->gen : 0;
	if (cur && !(e->node = node_dup(cur)))
		goto nomem;
	if (!v->conn->priv) {
		struct domain *d = domain_get(v->conn->domid, true);
		long cost = entry_cost(e);

		if (!d || d->memory + cost > (long)quota.memory) {
			node_free(e->node);
			free(e->path);
			free(e);
			t->failed = true;
			return -ENOMEM;
		}
		if (hash_put(&t->entries, e->path, e, NULL))
			goto nomem;
		d->memory += cost;
		t->charged += cost;
	} else if (hash_put(&t->entries, e->path, e, NULL)) {
		goto nomem;
	}
	if (t->last)
		t->last->next = e;
	else
		t->first = e;
	t->last = e;
	t->count++;
out:
	*out = e;
	return 0;
nomem:
	if (e) {
		node_free(e->node);
		free(e->path);
		free(e);
	}
	t->failed = true;
	return -ENOMEM;
}

int store_get(struct view *v, const char *path, const struct node **out)
{
	struct txn_entry *e;
	int ret;

	if (!v->txn) {
		*out = db_get(path);
		return 0;
	}
	ret = entry_get(v, path, &e);
	*out = ret ? NULL : e->node;
	return ret;
}

static void account_pending(struct view *v, const struct node *n, long delta)
{
	if (n && !v->conn->priv && n->perms[0].domid == v->conn->domid) {
		v->txn->owned_delta += delta;
		v->txn->mem_delta += delta * (long)node_memory(n);
	}
}

int store_put(struct view *v, struct node *n, int fire,
	      const struct perm *old, uint32_t nold)
{
	struct txn_entry *e;
	int ret;

	if (!v->txn) {
		ret = db_put(n);
		if (!ret && fire)
			watch_fire(n->path, db_get(n->path), fire == 2, old, nold);
		return ret;
	}
	ret = entry_get(v, n->path, &e);
	if (ret) {
		node_free(n);
		return ret;
	}
	account_pending(v, e->node, -1);
	account_pending(v, n, +1);
	node_free(e->node);
	e->node = n;
	e->modified = true;
	if (fire)
		e->fire = fire;
	if (old && !e->old && (e->old = malloc(sizeof(*old) * nold))) {
		memcpy(e->old, old, sizeof(*old) * nold);
		e->nold = nold;
	}
	return 0;
}

int store_del(struct view *v, const char *path, int fire)
{
	struct txn_entry *e;
	int ret;

	if (!v->txn) {
		struct node *cur = db_get(path);
		if (cur && fire)
			watch_fire(path, cur, fire == 2, NULL, 0);
		db_del(path);
		return 0;
	}
	ret = entry_get(v, path, &e);
	if (ret)
		return ret;
	account_pending(v, e->node, -1);
	node_free(e->node);
	e->node = NULL;
	e->modified = true;
	if (fire)
		e->fire = fire;
	return 0;
}

long store_pending_nodes(const struct view *v)
{
	return v->txn ? v->txn->owned_delta : 0;
}

long store_pending_memory(const struct view *v)
{
	return v->txn ? v->txn->mem_delta : 0;
}
