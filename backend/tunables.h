/* SPDX-License-Identifier: MIT */
/*
 * The backend's tunables: Linux xen-blkback's module parameters, with the
 * same names, defaults and meanings, plus the few of ours.  One table in
 * tunables.c ({name, type, default, min, max, mode, desc}) drives the
 * command line, the FUSE tree and Documentation/ABI/backend-tunables.
 *
 * Threads: values are read with relaxed atomics by any thread and written
 * by the control thread (command line, FUSE writes).  A device reads the
 * ones that shape its connection once, at connect (as Linux does for
 * feature_persistent and max_ring_page_order); the rest are read live.
 */
#ifndef XBD_BACKEND_TUNABLES_H
#define XBD_BACKEND_TUNABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tun_id {
	TUN_MAX_BUFFER_PAGES,
	TUN_MAX_PERSISTENT_GRANTS,
	TUN_PERSISTENT_GRANT_UNUSED_SECONDS,
	TUN_MAX_QUEUES,
	TUN_MAX_RING_PAGE_ORDER,
	TUN_MAX_INDIRECT_SEGMENTS,
	TUN_LOG_STATS,
	TUN_IO_WAIT_POLL,
	TUN_BUFFER_SQUEEZE_DURATION_MS,
	TUN_FEATURE_PERSISTENT,
	TUN_GRANT_COPY_MAX_BYTES,
	TUN_MAX_QUEUE_PAGES,
	TUN_MAX_VBD_PAGES,
	TUN_MAX_TOTAL_PAGES,
	TUN_MAX_CONNECTS_PER_SECOND,
	TUN_STORAGE_OUTAGE_MS,
	TUN_SIZE_CHECK_MS,
	TUN_POLL_DURATION_US,
	TUN_SYNC_IO,
	TUN_SYNC_IO_BATCH,
	/* a new vbd's I/O limits (limit.h), in be_limit_key order */
	TUN_DEFAULT_READ_IOPS, TUN_DEFAULT_WRITE_IOPS,
	TUN_DEFAULT_READ_BPS, TUN_DEFAULT_WRITE_BPS,
	TUN_DEFAULT_READ_IOPS_BURST, TUN_DEFAULT_WRITE_IOPS_BURST,
	TUN_DEFAULT_READ_BPS_BURST, TUN_DEFAULT_WRITE_BPS_BURST,
	TUN_COUNT
};

/* TUN_AUTO: a boolean that may also be left to the backend: 0 (N),
 * 1 (Y) or TUN_AUTO_VAL ("auto"). */
enum tun_type { TUN_UINT, TUN_BOOL, TUN_AUTO };
#define TUN_AUTO_VAL 2

struct tunable {
	const char *name;
	enum tun_type type;
	uint64_t def, min, max;
	unsigned int mode;          /* 0644: writable at run time; 0444: not */
	const char *desc;
};

/* Reset every value to its default (max_queues 0 -> online CPUs, as Linux
 * resolves it at load; io_wait_poll Y under valgrind).  Call once before
 * threads start. */
void tun_init(void);

const struct tunable *tun_info(enum tun_id id);
/* The id of a name, or -ENOENT. */
int tun_lookup(const char *name);

uint64_t tun_get(enum tun_id id);

/*
 * Parse and set.  Booleans take Y/N/y/n/1/0 like Linux module
 * parameters (TUN_AUTO ones also "auto"); numbers are decimal within [min, max].  at_runtime: refuse
 * 0444 tunables with -EPERM (the command line may set them).  -EINVAL for
 * a bad value; the old value then stays.
 */
int tun_set(enum tun_id id, const char *value, bool at_runtime);

/* "name=value" (a command-line option).  0, -ENOENT, -EINVAL. */
int tun_set_arg(const char *arg);

/* The value as the tree shows it: "%llu\n", or "Y\n"/"N\n" (or "auto\n").  Returns the
 * length written (snprintf semantics). */
int tun_format(enum tun_id id, char *buf, size_t len);

#endif
