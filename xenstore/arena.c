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
#include <sanitizer/asan_interface.h>

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	max_align_t data[];
};

#define ARENA_BLOCK 8192u

/*
 * One block of ARENA_BLOCK is kept from one request to the next instead
 * of a malloc and a free per request (the daemon is single-threaded: no
 * lock).  Under AddressSanitizer a block's data is poisoned but for what
 * arena_alloc has handed out, to the byte: an overflow out of one
 * scratch object into the next one's padding or the unused rest of the
 * block is reported (a plain malloc'ed block let ASan see only its end),
 * and the kept block is poisoned whole while no request holds it, so a
 * pointer kept past arena_release still faults.  Without ASan the macros
 * are empty.
 */
static struct arena_block *spare;

static struct arena_block *block_new(size_t size)
{
	struct arena_block *b;

	if (size == ARENA_BLOCK && spare) {
		b = spare;
		spare = NULL;
	} else {
		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		ASAN_POISON_MEMORY_REGION(b->data, size);
	}
	b->size = size;
	b->used = 0;
	return b;
}

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_block *b = a->head;
	size_t align = sizeof(max_align_t), asked = n;

	n = (n + align - 1) / align * align;
	if (!b || b->size - b->used < n) {
		b = block_new(n > ARENA_BLOCK ? n : ARENA_BLOCK);
		if (!b)
			return NULL;
		b->next = a->head;
		a->head = b;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	ASAN_UNPOISON_MEMORY_REGION(p, asked);
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
		if (!spare && b->size == ARENA_BLOCK) {
			ASAN_POISON_MEMORY_REGION(b->data, b->used);
			spare = b;
		} else {
			ASAN_UNPOISON_MEMORY_REGION(b->data, b->size);
			free(b);
		}
	}
}
