/* SPDX-License-Identifier: MIT */
/* backend/limit.c: per-vbd I/O limits (token buckets).  See limit.h. */
#include <errno.h>
#include <string.h>

#include "backend/limit.h"

const char *const be_limit_names[BE_LIM_COUNT] = {
	"read_iops", "write_iops", "read_bps", "write_bps",
	"read_iops_burst", "write_iops_burst", "read_bps_burst", "write_bps_burst",
};
const char *const be_limit_nodes[BE_LIM_COUNT] = {
	"read-iops", "write-iops", "read-bps", "write-bps",
	"read-iops-burst", "write-iops-burst", "read-bps-burst", "write-bps-burst",
};

void be_limit_init(struct be_limit *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
}

void be_limit_destroy(struct be_limit *l)
{
	pthread_mutex_destroy(&l->lock);
}

int be_limit_lookup(const char *name)
{
	for (int i = 0; i < BE_LIM_COUNT; i++)
		if (!strcmp(be_limit_names[i], name))
			return i;
	return -1;
}

uint64_t be_limit_get(struct be_limit *l, enum be_limit_key k)
{
	uint64_t v;

	pthread_mutex_lock(&l->lock);
	v = l->val[k];
	pthread_mutex_unlock(&l->lock);
	return v;
}

/* Bucket i's capacity: its burst, or a tenth of a second at its rate. */
static double burst_of(const struct be_limit *l, int i)
{
	uint64_t b = l->val[i + BE_LIM_RATES];

	return b ? (double)b : (double)l->val[i] / 10.0;
}

static void refill(struct be_limit *l, int i, uint64_t now)
{
	struct be_bucket *b = &l->b[i];
	double cap = burst_of(l, i);

	if (now > b->last_ns)
		b->level += (double)l->val[i] * (double)(now - b->last_ns) / 1e9;
	if (b->level > cap)
		b->level = cap;
	b->last_ns = now;
}

int be_limit_set(struct be_limit *l, enum be_limit_key k, uint64_t v, uint64_t now)
{
	bool on = false;

	if ((unsigned int)k >= BE_LIM_COUNT || v > BE_LIMIT_MAX)
		return -EINVAL;
	pthread_mutex_lock(&l->lock);
	l->val[k] = v;
	for (int i = 0; i < BE_LIM_RATES; i++) {
		l->b[i] = (struct be_bucket){ .level = 0, .last_ns = now };
		on |= l->val[i] != 0;
	}
	__atomic_add_fetch(&l->gen, 1, __ATOMIC_RELAXED);  /* held: charged again */
	__atomic_store_n(&l->on, on, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&l->lock);
	return 0;
}

void be_limit_fill(struct be_limit *l, uint64_t now)
{
	pthread_mutex_lock(&l->lock);
	for (int i = 0; i < BE_LIM_RATES; i++)
		l->b[i] = (struct be_bucket){ .level = burst_of(l, i), .last_ns = now };
	pthread_mutex_unlock(&l->lock);
}

/* Take cost from bucket i; the ns until its debt (if any) is paid. */
static uint64_t charge(struct be_limit *l, int i, double cost, uint64_t now)
{
	struct be_bucket *b = &l->b[i];

	if (!l->val[i])
		return 0;
	refill(l, i, now);
	b->level -= cost;
	return b->level >= 0 ? 0 : (uint64_t)(-b->level * 1e9 / (double)l->val[i]) + 1;
}

bool be_limit_hold(struct be_limit *l, struct be_limit_wait *w, bool write,
		   uint64_t bytes, uint64_t now)
{
	if (!w->charged)
		w->since_ns = now;
	if (!w->charged || w->gen != __atomic_load_n(&l->gen, __ATOMIC_RELAXED)) {
		int iops = write ? BE_LIM_WRITE_IOPS : BE_LIM_READ_IOPS;
		int bps = write ? BE_LIM_WRITE_BPS : BE_LIM_READ_BPS;
		uint64_t a, b;

		pthread_mutex_lock(&l->lock);
		a = charge(l, iops, 1.0, now);
		/* no data: a debt of bytes does not hold it */
		b = bytes ? charge(l, bps, (double)bytes, now) : 0;
		w->gen = l->gen;
		pthread_mutex_unlock(&l->lock);
		w->charged = true;
		w->until_ns = now + (a > b ? a : b);
	}
	if (now < w->until_ns)
		return true;
	w->charged = false;
	if (now > w->since_ns) {      /* it was held: count it as it goes */
		__atomic_add_fetch(&l->waits, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&l->waited_ns, now - w->since_ns, __ATOMIC_RELAXED);
	}
	return false;
}

uint64_t be_limit_waits(struct be_limit *l)
{
	return __atomic_load_n(&l->waits, __ATOMIC_RELAXED);
}

uint64_t be_limit_waited_us(struct be_limit *l)
{
	return __atomic_load_n(&l->waited_ns, __ATOMIC_RELAXED) / 1000;
}

int be_limit_timeout_ms(const struct be_limit_wait *w, int timeout_ms, uint64_t now)
{
	uint64_t left = w->until_ns > now ? w->until_ns - now : 0;
	int ms = (int)((left + 999999) / 1000000);   /* never early */

	if (ms > BE_LIMIT_RECHECK_MS)
		ms = BE_LIMIT_RECHECK_MS;
	return timeout_ms >= 0 && timeout_ms < ms ? timeout_ms : ms;
}
