/* SPDX-License-Identifier: MIT */
/*
 * Watches and watch events, as cxenstored 4.17 (xenstored_watch.c).
 *
 * A watch matches an event on its path or anything below it; "exact"
 * events (descendants of a removed subtree) match only watches on exactly
 * that path.  An event reaches an unprivileged connection only if it may
 * read the node or its parent (XSA-115); for SET_PERMS the old perms count
 * too.  Special events (@introduceDomain, @releaseDomain) reach only
 * connections allowed to read the special node.  Watches belong to their
 * connection and die with it.
 */
#include "xenstored.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct perm special_intro[8] = { { 0, PERM_NONE } };
struct perm special_release[8] = { { 0, PERM_NONE } };
uint32_t nspecial_intro = 1, nspecial_release = 1;
#define SPECIAL_MAX 8u

int watch_add(struct conn *c, const char *path, const char *token, size_t rel)
{
	struct watch *w;
	struct domain *d = NULL;

	for (w = c->watches; w; w = w->next)
		if (strcmp(w->path, path) == 0 && strcmp(w->token, token) == 0)
			return -EEXIST;
	if (!c->priv) {
		d = domain_get(c->domid, true);
		if (!d)
			return -ENOMEM;
		if (d->watches > quota.watches)
			return -E2BIG;
		if (d->memory + (long)(strlen(path) + strlen(token)) >
		    (long)quota.memory)
			return -ENOMEM;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->path = strdup(path)) || !(w->token = strdup(token))) {
		if (w)
			free(w->path);
		free(w);
		return -ENOMEM;
	}
	w->rel = rel;
	w->next = c->watches;
	c->watches = w;
	c->nwatches++;
	if (d) {
		d->watches++;
		d->memory += (long)(strlen(path) + strlen(token));
	}
	return 0;
}

static void watch_free(struct conn *c, struct watch *w)
{
	struct domain *d = c->priv ? NULL : domain_get(c->domid, false);

	if (d && d->watches) {
		d->watches--;
		d->memory -= (long)(strlen(w->path) + strlen(w->token));
	}
	c->nwatches--;
	free(w->path);
	free(w->token);
	free(w);
}

int watch_remove(struct conn *c, const char *path, const char *token)
{
	for (struct watch **pp = &c->watches; *pp; pp = &(*pp)->next) {
		struct watch *w = *pp;
		if (strcmp(w->path, path) == 0 && strcmp(w->token, token) == 0) {
			*pp = w->next;
			watch_free(c, w);
			return 0;
		}
	}
	return -ENOENT;
}

void watch_reset(struct conn *c)
{
	while (c->watches) {
		struct watch *w = c->watches;
		c->watches = w->next;
		watch_free(c, w);
	}
}

static bool can_read(const struct conn *c, const struct perm *p, uint32_t n)
{
	return perm_for(c->domid, c->priv, conn_target(c), p, n) & PERM_READ;
}

/* XSA-115: the watcher must be able to read the node or its parent. */
static bool watch_permitted(const struct conn *c, const char *path,
			    const struct node *n, const struct perm *old,
			    uint32_t nold)
{
	struct arena a = { 0 };
	const char *parent;
	const struct node *pn;
	bool ok;

	if (c->priv || (old && can_read(c, old, nold)))
		return true;
	if (!n)
		n = db_get(path);
	if (n && can_read(c, n->perms, n->nperms))
		return true;
	parent = path_parent(&a, path);
	pn = parent ? db_get(parent) : NULL;
	ok = pn && can_read(c, pn->perms, pn->nperms);
	arena_release(&a);
	return ok;
}

static const char *event_path(const struct watch *w, const char *path)
{
	if (!w->rel)
		return path;
	path += w->rel;
	return *path == '/' ? path + 1 : path;
}

void watch_fire(const char *path, const struct node *n, bool exact,
		const struct perm *old, uint32_t nold)
{
	for (struct conn *c = conns; c; c = c->next) {
		bool checked = false, allowed = false;
		if (c->dead)
			continue;
		for (struct watch *w = c->watches; w; w = w->next) {
			bool match = exact ? strcmp(w->path, path) == 0
					   : path_is_child(path, w->path);
			if (!match)
				continue;
			if (!checked) {
				allowed = watch_permitted(c, path, n, old, nold);
				checked = true;
			}
			if (allowed)
				conn_send_event(c, event_path(w, path), w->token);
		}
	}
}

const struct perm *special_perms_get(const char *name, uint32_t *n)
{
	if (strcmp(name, "@introduceDomain") == 0) {
		*n = nspecial_intro;
		return special_intro;
	}
	if (strcmp(name, "@releaseDomain") == 0) {
		*n = nspecial_release;
		return special_release;
	}
	return NULL;
}

int special_perms_set(const char *name, const struct perm *p, uint32_t n)
{
	struct perm *dst = strcmp(name, "@introduceDomain") == 0
			   ? special_intro : special_release;

	if (n > SPECIAL_MAX)
		return -ENOSPC;
	memcpy(dst, p, sizeof(*p) * n);
	if (dst == special_intro)
		nspecial_intro = n;
	else
		nspecial_release = n;
	return 0;
}

static void drop_from(struct perm *p, uint32_t *n, uint32_t domid)
{
	for (uint32_t i = 1; i < *n;) {
		if (p[i].domid == domid) {
			memmove(&p[i], &p[i + 1], sizeof(*p) * (*n - i - 1));
			(*n)--;
		} else {
			i++;
		}
	}
	if (p[0].domid == domid)
		p[0].domid = 0;
}

void special_perms_drop(uint32_t domid)
{
	drop_from(special_intro, &nspecial_intro, domid);
	drop_from(special_release, &nspecial_release, domid);
}

void watch_fire_special(const char *name)
{
	uint32_t n;
	const struct perm *p = special_perms_get(name, &n);

	for (struct conn *c = conns; c; c = c->next) {
		if (c->dead || !can_read(c, p, n))
			continue;
		for (struct watch *w = c->watches; w; w = w->next)
			if (strcmp(w->path, name) == 0)
				conn_send_event(c, name, w->token);
	}
}
