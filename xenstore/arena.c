/* SPDX-License-Identifier: MIT */
/*
 * Scratch arena: one per request (CONTRIBUTING.md, "Tables, not token
 * pasting").  Every temporary string a handler builds (canonical paths,
 * reply payloads) comes from the request's arena and is freed in one go
 * once the reply is queued, so no handler has a cleanup path for its
 * scratch memory (XSA-416).
 */
#include "xenstored.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	max_align_t data[];
};

#define ARENA_BLOCK 8192u

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_block *b = a->head;
	size_t align = sizeof(max_align_t);

	n = (n + align - 1) / align * align;
	if (!b || b->size - b->used < n) {
		size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	if (p) {
		if (n)
			memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *p = arena_alloc(a, (size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void arena_release(struct arena *a)
{
	while (a->head) {
		struct arena_block *b = a->head;
		a->head = b->next;
		free(b);
	}
}
