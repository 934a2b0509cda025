/* SPDX-License-Identifier: MIT */
/*
 * backend/tunables.c: the table.  Names, defaults and modes are Linux
 * xen-blkback's (drivers/block/xen-blkback/{blkback,xenbus}.c and
 * Documentation/ABI/testing/sysfs-driver-xen-blkback); where we go
 * further than Linux the description says so.  Every entry has a
 * What/Default/Description block in Documentation/ABI/backend-tunables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "backend/limit.h"
#include "backend/tunables.h"

/* A default I/O limit of new vbds: 0 (none) by default, the range of the
 * tree's limits/ files (BE_LIMIT_MAX); only the name and the text vary. */
#define LIMIT_DEFAULT(id, name, what) \
	[TUN_DEFAULT_##id] = { "default_" name, TUN_UINT, 0, 0, BE_LIMIT_MAX, 0644, \
			       what " (xbd only)" }
#define BURST_0 "0: a tenth of a second's worth"

static const struct tunable table[TUN_COUNT] = {
	[TUN_MAX_BUFFER_PAGES] = {
		"max_buffer_pages", TUN_UINT, 1024, 0, 1u << 20, 0644,
		"Maximum number of free pages to keep in each queue's buffer pool" },
	[TUN_MAX_PERSISTENT_GRANTS] = {
		"max_persistent_grants", TUN_UINT, 8192, 0, 1u << 20, 0644,
		"Maximum number of grants to map persistently per queue, and never more "
		"than the queue's ring can have in flight (slots x segments per request); "
		"above it the LRU removes 5% of it every 100 ms (Linux: 1056, no ring bound)" },
	[TUN_PERSISTENT_GRANT_UNUSED_SECONDS] = {
		"persistent_grant_unused_seconds", TUN_UINT, 60, 0, 1u << 30, 0644,
		"Time a persistent grant may stay unused before it is unmapped; "
		"0 keeps it indefinitely" },
	[TUN_MAX_QUEUES] = {
		"max_queues", TUN_UINT, 0, 0, 256, 0644,
		"Maximum number of queues per device (multi-queue-max-queues); "
		"0 at start means the number of online CPUs" },
	[TUN_MAX_RING_PAGE_ORDER] = {
		"max_ring_page_order", TUN_UINT, 4, 0, 5, 0444,
		"Maximum order of pages of a queue's shared ring (Linux stops at 4)" },
	[TUN_MAX_INDIRECT_SEGMENTS] = {
		"max_indirect_segments", TUN_UINT, 256, 0, 512, 0644,
		"feature-max-indirect-segments offered to new connections; 0 offers "
		"no indirect descriptors (Linux: fixed at 256)" },
	[TUN_LOG_STATS] = {
		"log_stats", TUN_BOOL, 0, 0, 1, 0644,
		"Log each device's statistics every 10 seconds" },
	[TUN_IO_WAIT_POLL] = {
		"io_wait_poll", TUN_BOOL, 0, 0, 1, 0644,
		"Queue threads started from now on sleep in poll(2) on their io_uring "
		"fd and call io_uring_enter(2) only to submit; Y when started under "
		"valgrind (xbd only)" },
	[TUN_BUFFER_SQUEEZE_DURATION_MS] = {
		"buffer_squeeze_duration_ms", TUN_UINT, 10, 0, 1u << 30, 0644,
		"After memory pressure, the time during which no free buffer page "
		"is kept" },
	[TUN_FEATURE_PERSISTENT] = {
		"feature_persistent", TUN_BOOL, 1, 0, 1, 0644,
		"Offer persistent grants to newly connected frontends" },
	[TUN_GRANT_COPY_MAX_BYTES] = {
		"grant_copy_max_bytes", TUN_UINT, 45056, 0, 45056, 0644,
		"Without persistent grants, requests carrying at most this many bytes "
		"are grant-copied into backend buffers instead of mapped (xbd only)" },
	/* The memory budget (gnt.h): at least one request of the most
	 * segments the engine takes (IOV_MAX), so a request always fits
	 * once what is in flight has drained. */
	[TUN_MAX_QUEUE_PAGES] = {
		"max_queue_pages", TUN_UINT, 16384, 1024, 1u << 24, 0644,
		"Maximum number of pages a queue holds for its frontend: bounce pages, "
		"persistent grants and mappings in flight; a request that does not fit "
		"waits on the ring (xbd only)" },
	[TUN_MAX_VBD_PAGES] = {
		"max_vbd_pages", TUN_UINT, 32768, 1024, 1u << 24, 0644,
		"Maximum number of pages the queues of one vbd hold together (xbd only)" },
	[TUN_MAX_TOTAL_PAGES] = {
		"max_total_pages", TUN_UINT, 262144, 1024, 1u << 26, 0644,
		"Maximum number of pages every queue of the backend holds together "
		"(xbd only)" },
	[TUN_MAX_CONNECTS_PER_SECOND] = {
		"max_connects_per_second", TUN_UINT, 20, 0, 1000000, 0644,
		"Connects of one frontend domain's vbds per second, with as many in a "
		"burst; more are deferred, not refused; 0: no limit (xbd only)" },
	[TUN_STORAGE_OUTAGE_MS] = {
		"storage_outage_ms", TUN_UINT, 30000, 0, 1u << 30, 0644,
		"Network storage (nbd, qcow2, rbd): how long a lost connection stalls the "
		"I/O of disks opened from now on before it fails; the disk works "
		"again once the store is back (xbd only)" },
	[TUN_SIZE_CHECK_MS] = {
		"size_check_ms", TUN_UINT, 1000, 0, 3600000, 0644,
		"How often the size of every connected disk's store is looked at; "
		"a store that grew is announced to the frontend (online resize); "
		"0: never (xbd only)" },
	[TUN_POLL_DURATION_US] = {
		"poll_duration_us", TUN_UINT, 50, 0, 1000, 0644,
		"Longest time a queue thread spins on its ring and its completions "
		"after the ring went empty, before it sleeps on the event channel; "
		"adaptive below it, never on an idle queue; 0: never (xbd only)" },
	[TUN_SYNC_IO] = {
		"sync_io", TUN_AUTO, TUN_AUTO_VAL, 0, TUN_AUTO_VAL, 0644,
		"Raw files and block devices opened from now on are read and written "
		"with preadv/pwritev on their queue thread instead of through its "
		"io_uring; auto: only files in memory (tmpfs, ramfs, hugetlbfs) "
		"(xbd only)" },
	[TUN_SYNC_IO_BATCH] = {
		"sync_io_batch", TUN_UINT, 8, 0, 4096, 0644,
		"A queue served with sync_io that takes at least this many reads and "
		"writes off its ring at once shares their preadv/pwritev with its "
		"helper thread, on another CPU; 0: the queue thread does all "
		"(xbd only)" },
	/* I/O limits of new vbds (limit.h); the toolstack's nodes win */
	LIMIT_DEFAULT(READ_IOPS, "read_iops",
		      "Read requests per second a new vbd may do; 0: no limit"),
	LIMIT_DEFAULT(WRITE_IOPS, "write_iops",
		      "Write requests (flushes and discards too) per second a new vbd "
		      "may do; 0: no limit"),
	LIMIT_DEFAULT(READ_BPS, "read_bps",
		      "Bytes per second a new vbd may read; 0: no limit"),
	LIMIT_DEFAULT(WRITE_BPS, "write_bps",
		      "Bytes per second a new vbd may write; 0: no limit"),
	LIMIT_DEFAULT(READ_IOPS_BURST, "read_iops_burst",
		      "Read requests a new vbd may do at once above read_iops; " BURST_0),
	LIMIT_DEFAULT(WRITE_IOPS_BURST, "write_iops_burst",
		      "Write requests a new vbd may do at once above write_iops; " BURST_0),
	LIMIT_DEFAULT(READ_BPS_BURST, "read_bps_burst",
		      "Bytes a new vbd may read at once above read_bps; " BURST_0),
	LIMIT_DEFAULT(WRITE_BPS_BURST, "write_bps_burst",
		      "Bytes a new vbd may write at once above write_bps; " BURST_0),
};

/* Written by the control thread, read by any (relaxed). */
static uint64_t values[TUN_COUNT];

void tun_init(void)
{
	for (int i = 0; i < TUN_COUNT; i++)
		__atomic_store_n(&values[i], table[i].def, __ATOMIC_RELAXED);
	/* valgrind cannot run a thread that waits in io_uring_enter (io_uring.h) */
	if (RUNNING_ON_VALGRIND)
		__atomic_store_n(&values[TUN_IO_WAIT_POLL], 1, __ATOMIC_RELAXED);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	if (cpus > (long)table[TUN_MAX_QUEUES].max)
		cpus = (long)table[TUN_MAX_QUEUES].max;
	__atomic_store_n(&values[TUN_MAX_QUEUES], (uint64_t)cpus, __ATOMIC_RELAXED);
}

const struct tunable *tun_info(enum tun_id id)
{
	return id < TUN_COUNT ? &table[id] : NULL;
}

int tun_lookup(const char *name)
{
	for (int i = 0; i < TUN_COUNT; i++)
		if (!strcmp(table[i].name, name))
			return i;
	return -ENOENT;
}

uint64_t tun_get(enum tun_id id)
{
	return __atomic_load_n(&values[id], __ATOMIC_RELAXED);
}

static int parse_bool(const char *s, uint64_t *out)
{
	/* Linux kstrtobool: first character decides; allow a newline. */
	if (!s[0] || (s[1] && strcmp(s + 1, "\n")))
		return -EINVAL;
	switch (s[0]) {
	case 'Y': case 'y': case '1':
		*out = 1;
		return 0;
	case 'N': case 'n': case '0':
		*out = 0;
		return 0;
	default:
		return -EINVAL;
	}
}

static int parse_uint(const char *s, const struct tunable *t, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;             /* no sign, no space, not empty */
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || (*end && strcmp(end, "\n")) || v < t->min || v > t->max)
		return -EINVAL;
	*out = v;
	return 0;
}

int tun_set(enum tun_id id, const char *value, bool at_runtime)
{
	const struct tunable *t = tun_info(id);
	uint64_t v;
	int rc;

	if (!t || !value)
		return -EINVAL;
	if (at_runtime && !(t->mode & 0200))
		return -EPERM;
	if (t->type == TUN_AUTO && !strncmp(value, "auto", 4) &&
	    (!value[4] || !strcmp(value + 4, "\n"))) {
		v = TUN_AUTO_VAL;
		rc = 0;
	} else {
		rc = t->type == TUN_UINT ? parse_uint(value, t, &v) : parse_bool(value, &v);
	}
	if (rc)
		return rc;
	__atomic_store_n(&values[id], v, __ATOMIC_RELAXED);
	return 0;
}

int tun_set_arg(const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[64];
	int id;

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(name))
		return -EINVAL;
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = '\0';
	id = tun_lookup(name);
	if (id < 0)
		return id;
	return tun_set((enum tun_id)id, eq + 1, false);
}

int tun_format(enum tun_id id, char *buf, size_t len)
{
	uint64_t v = tun_get(id);

	if (table[id].type == TUN_AUTO && v == TUN_AUTO_VAL)
		return snprintf(buf, len, "auto\n");
	if (table[id].type != TUN_UINT)
		return snprintf(buf, len, "%c\n", v ? 'Y' : 'N');
	return snprintf(buf, len, "%llu\n", (unsigned long long)v);
}
