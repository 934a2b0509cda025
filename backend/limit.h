/* SPDX-License-Identifier: MIT */
/*
 * Per-vbd I/O limits: read/write IOPS and bytes per second, each a token
 * bucket with a burst, shared by all the queues of the vbd.
 *
 * Model: a bucket holds up to `burst` tokens (0: a tenth of a second at
 * the rate) and refills at `rate` per second.  A request is charged once,
 * when its queue comes to submit it: its cost (1 for IOPS, its data bytes
 * for BPS) is taken even if that leaves the bucket in debt, and the request
 * waits until the debt is paid back (debt / rate).  Meanwhile its queue
 * holds it and takes nothing more from the ring: the frontend sees a slow
 * disk, never an error.  Charging in arrival order with at most one
 * request held per queue makes the queues take turns: fair whatever
 * their polling rhythm, and exact over time (each request pays in full).
 *
 * What counts: every request is one op against its direction's IOPS;
 * discards and flushes are writes (Linux's blk-throttle and QEMU's
 * throttle filter, block/throttle.c on its throttle group, count a
 * discard as a write; QEMU lets flushes through unthrottled, we count
 * them so that a guest cannot flush without bound).  Only data bytes
 * count against BPS: a discard moves no data (Linux charges it 512
 * bytes, QEMU its whole length; we charge none, so a trim of the whole
 * disk is one op).
 *
 * A change of any value (be_limit_set) empties the buckets, cancels all
 * debts and bumps a generation; a held request sees the new generation
 * the next time its queue wakes (at most BE_LIMIT_RECHECK_MS later) and
 * is charged again under the new limits (its old charge was cancelled,
 * so it still pays once under the limits in force).
 *
 * Threads: the buckets are under the vbd's mutex, taken only while a
 * limit is set; be_limit_active() is one relaxed load, so a vbd without
 * limits pays one branch per request.  Values are set by the control
 * thread (probe, the tree) and read by any thread.
 * Lifetime: be_limit_init() at probe, be_limit_destroy() when the device
 * is freed, after its queues are joined.
 */
#ifndef XBD_BACKEND_LIMIT_H
#define XBD_BACKEND_LIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* The order of the tree's files and of the xenstore nodes. */
enum be_limit_key {
	BE_LIM_READ_IOPS, BE_LIM_WRITE_IOPS, BE_LIM_READ_BPS, BE_LIM_WRITE_BPS,
	BE_LIM_READ_IOPS_BURST, BE_LIM_WRITE_IOPS_BURST,
	BE_LIM_READ_BPS_BURST, BE_LIM_WRITE_BPS_BURST,
	BE_LIM_COUNT
};
#define BE_LIM_RATES 4              /* the first four keys are rates */
#define BE_LIMIT_RECHECK_MS 20      /* a held request looks again this often */
#define BE_LIMIT_MAX (UINT64_C(1) << 48)

/* "read_iops", ... (the tree, the tunables after "default_") */
extern const char *const be_limit_names[BE_LIM_COUNT];
/* "read-iops", ... (xenstore backend nodes) */
extern const char *const be_limit_nodes[BE_LIM_COUNT];

struct be_bucket {
	double level;               /* tokens; negative: debt */
	uint64_t last_ns;
};

struct be_limit {
	int on;                     /* atomic: any rate set */
	pthread_mutex_t lock;
	uint64_t val[BE_LIM_COUNT]; /* under lock; 0: unlimited / default */
	struct be_bucket b[BE_LIM_RATES];
	uint32_t gen;               /* atomic, changed under lock */
	uint64_t waits;             /* atomic: requests that had to wait */
	uint64_t waited_ns;         /* atomic: the time they waited, summed */
};

/* One queue's held request. */
struct be_limit_wait {
	bool charged;               /* charged, not gone yet: it is held */
	uint32_t gen;
	uint64_t since_ns;          /* when it was first charged */
	uint64_t until_ns;
};

static inline bool be_limit_active(struct be_limit *l)
{
	return l && __builtin_expect(__atomic_load_n(&l->on, __ATOMIC_RELAXED), 0);
}

void be_limit_init(struct be_limit *l);
void be_limit_destroy(struct be_limit *l);

/* The key of a tree name, or -1. */
int be_limit_lookup(const char *name);
uint64_t be_limit_get(struct be_limit *l, enum be_limit_key k);
/* Set one value (0..BE_LIMIT_MAX, else -EINVAL) at CLOCK_MONOTONIC now. */
int be_limit_set(struct be_limit *l, enum be_limit_key k, uint64_t v, uint64_t now_ns);
/* Fill every bucket to its burst (a fresh vbd starts with its burst). */
void be_limit_fill(struct be_limit *l, uint64_t now_ns);

/*
 * A request with `bytes` of data (write: writes, flushes, discards; bytes
 * 0 for no data) comes to be submitted at now_ns: true if it must still
 * wait (its queue holds it and calls again), false if it may go.  w is
 * the queue's: it remembers the charge between calls.  The caller asks
 * once per request until false, never again for that request.
 */
bool be_limit_hold(struct be_limit *l, struct be_limit_wait *w, bool write,
		   uint64_t bytes, uint64_t now_ns);

/* How long a queue holding w may sleep: timeout_ms (-1: forever) cut to
 * when the request may go, and to BE_LIMIT_RECHECK_MS. */
/* The requests that waited, and for how long in all (µs). */
uint64_t be_limit_waits(struct be_limit *l);
uint64_t be_limit_waited_us(struct be_limit *l);

int be_limit_timeout_ms(const struct be_limit_wait *w, int timeout_ms, uint64_t now_ns);

#endif
