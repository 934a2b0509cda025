/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the fuzz harnesses: a cursor over the input that
 * reads missing bytes as zero (so every input, however short, is a valid
 * configuration), and CHECK, which aborts (a crash for libFuzzer) with
 * the failed condition.
 */
#ifndef XBD_FUZZ_H
#define XBD_FUZZ_H

#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { \
	fprintf(stderr, "fuzz: check failed: %s (%s:%d)\n", \
		#c, __FILE__, __LINE__); abort(); } } while (0)

/* a equals b, without strcmp: ASan's interceptor would feed the
 * harness's own comparisons to libFuzzer's compare hooks. */
static inline bool fuzz_str_eq(const char *a, const char *b)
{
	for (; *a && *a == *b; a++, b++)
		;
	return *a == *b;
}

/* FUZZ_RESET_CHECK set (asked once): a harness that keeps its connection
 * across inputs runs each input twice, after a reset and on a fresh
 * connection, and compares; report runs at exit then. */
static inline bool fuzz_reset_check(void (*report)(void))
{
	static int check = -1;

	if (check < 0) {
		check = getenv("FUZZ_RESET_CHECK") != NULL;
		if (check)
			atexit(report);
	}
	return check;
}

struct cursor {
	const uint8_t *p;
	size_t left;
};

/* Copy n bytes out (zero past the end).  True if any byte was left. */
static inline bool take(struct cursor *c, void *dst, size_t n)
{
	size_t k = n < c->left ? n : c->left;

	memcpy(dst, c->p, k);
	memset((uint8_t *)dst + k, 0, n - k);
	c->p += k;
	c->left -= k;
	return k > 0;
}

static inline int fuzz_rm_entry(const char *path, const struct stat *st, int flag,
				struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(path);
}

/* Remove a private run directory and everything in it (at exit). */
static inline void fuzz_rm_tree(const char *dir)
{
	nftw(dir, fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
