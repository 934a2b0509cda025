/* SPDX-License-Identifier: MIT */
/* Strict decimal numbers from the command line (see num.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

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

long long xbd_size(const char *s, unsigned int unit_shift, unsigned long long max)
{
	static const char units[] = "KMG";
	char digits[24];          /* more digits than any 63-bit value */
	unsigned int shift = unit_shift;
	size_t n = s ? strspn(s, "0123456789") : 0;
	long long v;

	if (!n || n >= sizeof(digits) || unit_shift > 62 || max > LLONG_MAX)
		return -1;
	if (s[n]) {
		const char *u = strchr(units, toupper((unsigned char)s[n]));

		if (!u || !*u || s[n + 1])
			return -1;
		shift = (unsigned int)(u - units + 1) * 10;
	}
	memcpy(digits, s, n);
	digits[n] = '\0';
	v = xbd_num(digits, max >> shift);
	return v < 0 ? -1 : v << shift;
}
