/* SPDX-License-Identifier: MIT */
/*
 * Numbers a user typed (command-line options and arguments), read
 * strictly: a whole plain decimal number, nothing before or after it
 * (but a size's one unit letter).  Shared by the guest-side programs
 * (xbdfront-io, xbd-blkfront, the fio engine, xbd-test-xen-dd) and `xbd`
 * (memory sizes, I/O limits) so that "--queues 2x", "-1", " 7", "4MB" or
 * "99999999999999999999" are refused the same way everywhere.  Nothing
 * logs.
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

/*
 * A size: a number as xbd_num, then at most one unit letter, K, M or G
 * (either case, powers of 1024); without a letter the number counts
 * units of 2^unit_shift bytes (0: bytes; 20: MiB, as `xl` memory sizes).
 * Its value in bytes, or -1 as xbd_num, for any other suffix, a
 * unit_shift above 62, or a value in bytes above max (max at most
 * LLONG_MAX; the multiplication cannot overflow).
 */
long long xbd_size(const char *s, unsigned int unit_shift, unsigned long long max);

#endif
