/* SPDX-License-Identifier: MIT */
/*
 * Numbers a user typed (command-line options and arguments), read
 * strictly: a whole plain decimal number, nothing before or after it.
 * Shared by the guest-side programs (xbdfront-io, xbd-blkfront, the fio
 * engine, xbd-test-xen-dd) so
 * that "--queues 2x", "-1", " 7" or "99999999999999999999" are refused
 * the same way everywhere.  Nothing logs.
 */
#ifndef XBD_NUM_H
#define XBD_NUM_H

/*
 * s as an unsigned decimal in [0, max]: its value, or -1 for an empty
 * string, a sign, blanks, any other character, or a value out of range
 * (max at most LLONG_MAX, so that -1 stays apart from every value).
 */
long long xbd_num(const char *s, unsigned long long max);
/* The same in [lo, hi] (lo >= 0): its value, or -1. */
long long xbd_num_in(const char *s, long long lo, long long hi);

#endif
