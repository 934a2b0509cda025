/* SPDX-License-Identifier: MIT */
/*
 * A fake frontend for the backend engine tests: it writes requests in
 * the native (x86_64) layout into a shared ring in memory, kicks an
 * eventfd standing in for the event channel, runs the queue loop and
 * collects the responses.
 */
#ifndef XBD_TEST_BE_FRONT_H
#define XBD_TEST_BE_FRONT_H

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "backend/io_uring.h"

struct fe {
	void *sring;
	unsigned int nr_ents;
	int evfd;                    /* the "event channel" */
	struct be_io *io;
	RING_IDX prod, rsp_cons;
	struct blkif_response rsp[256];
	unsigned int nrsp;
};

static inline void fe_init(struct fe *fe, void *sring, const struct be_ring *r,
			   int evfd, struct be_io *io)
{
	*fe = (struct fe){ .sring = sring, .nr_ents = r->nr_ents, .evfd = evfd, .io = io };
}

static inline void *fe_slot(struct fe *fe)
{
	return (uint8_t *)fe->sring + 64 + (fe->prod++ & (fe->nr_ents - 1)) * 112;
}

static inline void fe_rw(struct fe *fe, uint8_t op, uint64_t id, uint64_t sector,
			 unsigned int n, const struct blkif_request_segment *segs)
{
	struct blkif_request r = { .operation = op, .nr_segments = (uint8_t)n,
				   .id = id, .sector_number = sector };

	if (n)
		memcpy(r.seg, segs, n * sizeof(*segs));
	memcpy(fe_slot(fe), &r, sizeof(r));
}

/* An indirect request whose one indirect page is gref, mapped at mem. */
static inline void fe_indirect(struct fe *fe, uint8_t iop, uint64_t id, uint64_t sector,
			       unsigned int n, grant_ref_t gref, void *mem,
			       const struct blkif_request_segment *segs)
{
	struct blkif_request_indirect r = { .operation = BLKIF_OP_INDIRECT,
		.indirect_op = iop, .nr_segments = (uint16_t)n, .id = id,
		.sector_number = sector, .indirect_grefs = { gref } };

	memcpy(mem, segs, (n < 512 ? n : 512) * sizeof(*segs));
	memcpy(fe_slot(fe), &r, sizeof(r));
}

static inline void fe_discard(struct fe *fe, uint64_t id, uint64_t sector, uint64_t n)
{
	struct blkif_request_discard r = { .operation = BLKIF_OP_DISCARD, .id = id,
					   .sector_number = sector, .nr_sectors = n };

	memcpy(fe_slot(fe), &r, sizeof(r));
}

/* Publish the requests and kick, as RING_PUSH_REQUESTS_AND_CHECK_NOTIFY. */
static inline void fe_push(struct fe *fe)
{
	uint64_t one = 1;

	__atomic_store_n((uint32_t *)fe->sring, fe->prod, __ATOMIC_RELEASE);
	assert_int_equal(write(fe->evfd, &one, sizeof(one)), sizeof(one));
}

/* Run the queue until n more responses arrived (bounded). */
static inline void fe_wait(struct fe *fe, unsigned int n)
{
	unsigned int want = fe->nrsp + n;

	for (int i = 0; i < 100 && fe->nrsp < want; i++) {
		assert_int_equal(be_io_run_once(fe->io, 100), 0);
		RING_IDX prod = __atomic_load_n((uint32_t *)fe->sring + 2, __ATOMIC_ACQUIRE);
		for (; fe->rsp_cons != prod; fe->rsp_cons++)
			memcpy(&fe->rsp[fe->nrsp++ % 256], (uint8_t *)fe->sring + 64 +
			       (fe->rsp_cons & (fe->nr_ents - 1)) * 112, 16);
	}
	assert_int_equal(fe->nrsp, want);
}

static inline void check_rsp(const struct fe *fe, unsigned int i, uint64_t id,
			     uint8_t op, int st)
{
	const struct blkif_response *r = &fe->rsp[i];

	if (r->id != id || r->operation != op || r->status != st)
		fail_msg("response %u: id %llu op %u status %d, want %llu %u %d", i,
			 (unsigned long long)r->id, r->operation, r->status,
			 (unsigned long long)id, op, st);
}

/* The response to request id, in whatever order it came. */
static inline void check_id(const struct fe *fe, uint64_t id, uint8_t op, int st)
{
	for (unsigned int i = 0; i < fe->nrsp; i++)
		if (fe->rsp[i].id == id) {
			check_rsp(fe, i, id, op, st);
			return;
		}
	fail_msg("no response to request %llu", (unsigned long long)id);
}

static inline void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

#endif
