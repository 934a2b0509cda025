/* SPDX-License-Identifier: MIT */
/* backend/stats.c: see stats.h for who writes and who reads. */
#include "backend/stats.h"

/* floor(log2(us)), 0 below 2 us, the last bucket from 2^23 us up. */
unsigned int be_stats_lat_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned int b = us ? 63u - (unsigned int)__builtin_clzll(us) : 0;

	return b < BE_LAT_BUCKETS - 1 ? b : BE_LAT_BUCKETS - 1;
}

void be_stats_record_latency(struct be_stats *s, uint64_t ns)
{
	be_stat_add(&s->lat[be_stats_lat_bucket(ns)], 1);
}

static uint64_t rd(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void be_stats_add_to(struct be_stats *sum, const struct be_stats *q)
{
	sum->oo_req += rd(&q->oo_req);
	sum->rd_req += rd(&q->rd_req);
	sum->wr_req += rd(&q->wr_req);
	sum->f_req += rd(&q->f_req);
	sum->ds_req += rd(&q->ds_req);
	sum->rd_sect += rd(&q->rd_sect);
	sum->wr_sect += rd(&q->wr_sect);
	sum->inflight += rd(&q->inflight);
	sum->evt_in += rd(&q->evt_in);
	sum->evt_out += rd(&q->evt_out);
	sum->adopted += rd(&q->adopted);
	sum->replayed_req += rd(&q->replayed_req);
	sum->mem_waits += rd(&q->mem_waits);
	sum->errors += rd(&q->errors);
	sum->polls += rd(&q->polls);
	sum->poll_hits += rd(&q->poll_hits);
	sum->helper_req += rd(&q->helper_req);
	for (unsigned int i = 0; i < BE_LAT_BUCKETS; i++)
		sum->lat[i] += rd(&q->lat[i]);
}
