/* SPDX-License-Identifier: MIT */
/*
 * Large callocs from blocks kept across inputs (linked by targets whose
 * .deps add -Wl,--wrap=calloc -Wl,--wrap=free).
 *
 * The code under test allocates per-ring tables once per connect (the
 * backend's slot memory, io_uring.c alloc_slots; the frontend's request
 * and descriptor tables, channel.c rq_alloc and ios_create, and its grant
 * pool's page stacks, gntpool.c): 32 KiB to a few MiB.  Under ASan a
 * block of 128 KiB or more is mmap'ed and unmapped on free, and a smaller
 * one comes back from the quarantine cold in the cache, so every input
 * would pay page faults and cache misses for its tables, more than the
 * rest of the execution.  Here a calloc of 32 KiB .. 4 MiB takes one of a
 * few blocks mapped once, zeroed for the size asked; everything past that
 * size, and the whole block once freed, is poisoned, so ASan still
 * reports an overflow and a use after the free (until the block's next
 * calloc, the next input).
 *
 * Shadow work is kept to the size asked: a block is poisoned whole once,
 * when it is mapped; a calloc unpoisons what it hands out and a free
 * poisons that again (the rest never stopped being poisoned).  Poisoning
 * the rest of a 4 MiB block at every calloc and all of it at every free
 * wrote a MiB of shadow per table.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include "tests/fuzz/fuzz.h"

#define ARENA_BLOCK (4u << 20)
#define ARENA_MIN (32u << 10)
#define ARENA_BLOCKS 8

static uint8_t *block[ARENA_BLOCKS];
static size_t open_len[ARENA_BLOCKS];   /* unpoisoned, from the start */
static bool busy[ARENA_BLOCKS];

void *__real_calloc(size_t n, size_t size);
void __real_free(void *p);

void *__wrap_calloc(size_t n, size_t size)
{
	size_t len;
	int i;

	if (__builtin_mul_overflow(n, size, &len) || len < ARENA_MIN ||
	    len > ARENA_BLOCK)
		return __real_calloc(n, size);
	for (i = 0; i < ARENA_BLOCKS && busy[i]; i++)
		;
	if (i == ARENA_BLOCKS)
		return __real_calloc(n, size);
	if (!block[i]) {
		block[i] = mmap(NULL, ARENA_BLOCK, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(block[i] != MAP_FAILED);
		ASAN_POISON_MEMORY_REGION(block[i], ARENA_BLOCK);
	}
	busy[i] = true;
	ASAN_UNPOISON_MEMORY_REGION(block[i], len);
	open_len[i] = len;
	memset(block[i], 0, len);
	return block[i];
}

void __wrap_free(void *p)
{
	for (int i = 0; p && i < ARENA_BLOCKS; i++) {
		if (p != block[i])
			continue;
		CHECK(busy[i]);
		busy[i] = false;
		ASAN_POISON_MEMORY_REGION(block[i], open_len[i]);
		open_len[i] = 0;
		return;
	}
	__real_free(p);
}
