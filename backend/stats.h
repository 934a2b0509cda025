/* SPDX-License-Identifier: MIT */
/*
 * Per-queue statistics, summed per vbd: the counters of Linux blkback
 * (statistics/{oo,rd,wr,f,ds}_req, {rd,wr}_sect) plus requests in flight
 * and a latency histogram.
 *
 * Lifetime and threads: a struct be_stats lives in its queue; only that
 * queue's thread writes it (single writer, so a relaxed load + store is an
 * exact increment); any thread may read it with be_stats_add_to() at any
 * time and sees each counter untorn (not a consistent snapshot across
 * counters, as with Linux's sysfs files).
 *
 * Counting follows Linux xen-blkback: rd_req/wr_req/f_req count every
 * request of that kind as it is taken off the ring (rejected ones too;
 * f_req counts FLUSH_DISKCACHE and WRITE_BARRIER); ds_req counts discards
 * that passed the range and read-only checks; rd_sect/wr_sect add the
 * 512-byte sectors of I/O as it is submitted (flush/barrier data counts as
 * written); oo_req counts requests that found no free pending slot.
 * evt_in/evt_out (ours) count event-channel kicks taken and sent.
 * Ours: adopted is set once when the queue took over the ring of a dead
 * backend (journal.h); replayed_req counts the journalled requests it
 * re-ran then (they are also counted in rd_req/wr_req/... again).
 * errors (ours) counts every response whose status was not OKAY: rejected
 * requests, storage errors, unsupported operations.
 * polls/poll_hits (ours) count the queue thread's spins before a sleep
 * (poll_duration_us) and those that found a request or a completion.
 * helper_req (ours) counts requests whose I/O the queue's sync_io helper
 * thread did (storage/raw.c; the queue thread adds them at the join).
 */
#ifndef XBD_BACKEND_STATS_H
#define XBD_BACKEND_STATS_H

#include <stdint.h>

/* Latency buckets: [0] < 2 us, [i] in [2^i, 2^(i+1)) us, last = the rest. */
#define BE_LAT_BUCKETS 24

struct be_stats {
	uint64_t oo_req, rd_req, wr_req, f_req, ds_req, rd_sect, wr_sect;
	uint64_t inflight;      /* requests taken off the ring, not yet answered */
	/* event channel: kicks from the frontend that woke the queue thread,
	 * and notifications it sent (responses the frontend asked to hear
	 * of); over rd_req + wr_req they are notifications per request */
	uint64_t evt_in, evt_out;
	uint64_t adopted;       /* 1: this ring was adopted from a dead backend */
	uint64_t replayed_req;  /* journalled requests re-run after adoption */
	uint64_t mem_waits;     /* times the ring waited for the memory budget */
	uint64_t errors;        /* responses not BLKIF_RSP_OKAY (ERROR, EOPNOTSUPP) */
	/* polling (poll_duration_us, io_uring.c): spins on the ring and the
	 * CQ before a sleep, and those that found work (no sleep then) */
	uint64_t polls, poll_hits;
	/* raw sync_io (storage/raw.c): reads and writes of deep batches
	 * whose preadv/pwritev the queue's helper thread did */
	uint64_t helper_req;
	uint64_t lat[BE_LAT_BUCKETS];   /* completion latency histogram */
};

/* Writer side (the queue thread only). */
static inline void be_stat_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline void be_stat_sub(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) - n,
			 __ATOMIC_RELAXED);
}

/* Bucket of a latency in nanoseconds. */
unsigned int be_stats_lat_bucket(uint64_t ns);
void be_stats_record_latency(struct be_stats *s, uint64_t ns);

/* Reader side (any thread): *sum += every counter of *q. */
void be_stats_add_to(struct be_stats *sum, const struct be_stats *q);

#endif
