/* SPDX-License-Identifier: MIT */
/* Strict decimal numbers from the command line (see num.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "num.h"

long long xbd_num(const char *s, unsigned long long max)
{
	unsigned long long v;
	char *end;

	/* strtoull takes blanks, a sign and wraps "-1": only digits here */
	if (!s || !isdigit((unsigned char)s[0]) || max > LLONG_MAX)
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	return (long long)v;
}

long long xbd_num_in(const char *s, long long lo, long long hi)
{
	long long v = hi < 0 ? -1 : xbd_num(s, (unsigned long long)hi);

	return v < lo ? -1 : v;
}
