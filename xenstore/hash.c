/* SPDX-License-Identifier: MIT */
/*
 * String-keyed hash map with separate chaining.  The map never owns keys
 * or values: a key must live as long as its entry (the node tree uses the
 * node's own path).  Single-threaded like the rest of the daemon.
 */
#include "xenstored.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct hash_entry {
	struct hash_entry *next;
	const char *key;
	uint32_t hash;
	void *value;
};

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 16777619u;
	}
	return h;
}

int hash_init(struct hash *h)
{
	h->nbuckets = 64;
	h->count = 0;
	h->buckets = calloc(h->nbuckets, sizeof(*h->buckets));
	return h->buckets ? 0 : -ENOMEM;
}

void hash_destroy(struct hash *h)
{
	for (size_t i = 0; h->buckets && i < h->nbuckets; i++) {
		struct hash_entry *e = h->buckets[i];
		while (e) {
			struct hash_entry *next = e->next;
			free(e);
			e = next;
		}
	}
	free(h->buckets);
	h->buckets = NULL;
	h->count = 0;
}

static struct hash_entry **find_slot(const struct hash *h, const char *key,
				     uint32_t hv)
{
	struct hash_entry **pp = &h->buckets[hv & (h->nbuckets - 1)];

	while (*pp && ((*pp)->hash != hv || strcmp((*pp)->key, key) != 0))
		pp = &(*pp)->next;
	return pp;
}

void *hash_get(const struct hash *h, const char *key)
{
	struct hash_entry *e = *find_slot(h, key, hash_str(key));
	return e ? e->value : NULL;
}

static void grow(struct hash *h)
{
	size_t n = h->nbuckets * 2;
	struct hash_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return;	/* keep the longer chains; still correct */
	for (size_t i = 0; i < h->nbuckets; i++) {
		struct hash_entry *e = h->buckets[i];
		while (e) {
			struct hash_entry *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	free(h->buckets);
	h->buckets = b;
	h->nbuckets = n;
}

/* Insert or replace.  *old (if not NULL) receives the replaced value. */
int hash_put(struct hash *h, const char *key, void *value, void **old)
{
	uint32_t hv = hash_str(key);
	struct hash_entry **pp = find_slot(h, key, hv);

	if (old)
		*old = *pp ? (*pp)->value : NULL;
	if (*pp) {
		(*pp)->key = key;
		(*pp)->value = value;
		return 0;
	}
	struct hash_entry *e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = key;
	e->hash = hv;
	e->value = value;
	e->next = NULL;
	*pp = e;
	if (++h->count > h->nbuckets)
		grow(h);
	return 0;
}

void *hash_del(struct hash *h, const char *key)
{
	struct hash_entry **pp = find_slot(h, key, hash_str(key));
	struct hash_entry *e = *pp;
	void *value;

	if (!e)
		return NULL;
	value = e->value;
	*pp = e->next;
	free(e);
	h->count--;
	return value;
}

void hash_foreach(const struct hash *h, void (*fn)(void *value, void *arg),
		  void *arg)
{
	for (size_t i = 0; i < h->nbuckets; i++)
		for (struct hash_entry *e = h->buckets[i]; e; e = e->next)
			fn(e->value, arg);
}
