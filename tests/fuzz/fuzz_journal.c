/* SPDX-License-Identifier: MIT */
/*
 * fuzz_journal: a corrupt or hostile restart journal against the backend's
 * real loader (backend/journal.c be_journal_load: check_hdr, resolve,
 * resolve_entry, check_plan) and its queue-thread hooks.
 *
 * A journal holds only copies the backend itself took, but it is a file in
 * the run directory that outlives the process: on adoption it is input
 * like any other (journal.h, "Trust").  One input is one journal file and
 * the ring's published rsp_prod at adoption.  The harness learns the file
 * layout once from the real writer (be_journal_create: the header size and
 * the entry size, never a copy of the private structs), then per input
 * writes a file of the exact size for the ring (the header's fixed fields
 * and the identity from the writer unless the input asks for raw bytes or
 * another identity; the indexes and the entries from the input) and loads
 * it.
 *
 * Checked on a successful load: the plan has at most nr_ents entries, each
 * within one ring behind the resume index, oldest first and no two alike,
 * exactly resume - rsp_prod of them, each with the nr_copied validation
 * trusts; then the harness answers every planned request through the
 * hooks (be_journal_answering / _answered, as the queue thread does),
 * closes, and loads again at the new rsp_prod: that must succeed with
 * nothing to replay and the same resume index.  A failed load returns one
 * of the documented errors and leaves nothing mapped or allocated
 * (LeakSanitizer).
 *
 * Input layout: struct fz_hdr, then the file's bytes from the end of the
 * identity on (req_cons, rsp_prod, then the entries), zero past the input.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/journal.h"
#include "tests/fuzz/fuzz.h"

struct fz_hdr {
	uint8_t cfg;            /* bits0-2 nr_ents 32 << (n % 6); bit3 raw
				 * fixed fields (magic, version, sizes) from
				 * the input; bit4 another identity; bit5 file
				 * one entry short; bit6 one byte long */
	uint32_t rsp_prod;      /* the ring's published rsp_prod */
	uint8_t raw[24];        /* bit3: the fixed fields */
} __attribute__((packed));

#define FZ_MAX_ENTS 1024u
#define FZ_ID_OFF 24u           /* magic u64, version/entry_size/nr_ents/pad u32 */

static char dir[64], path[96];
static size_t hdr_size, ent_size;
static uint8_t file[(size_t)64 << 10 << 2];
static struct be_journal_id the_id;

static void cleanup(void)
{
	char jdir[96];

	unlink(path);
	snprintf(jdir, sizeof(jdir), "%s/journal", dir);
	rmdir(jdir);
	rmdir(dir);
}

static size_t file_size(void)
{
	struct stat st;

	CHECK(stat(path, &st) == 0);
	return (size_t)st.st_size;
}

/* The layout, from the writer: sizes of a 32- and a 64-entry journal. */
static void init_once(void)
{
	struct be_journal *j;
	size_t s32, s64;

	if (dir[0])
		return;
	snprintf(dir, sizeof(dir), "%s/fuzz-journal.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/journal/vbd-0-7-768.q0", dir);
	atexit(cleanup);
	the_id = (struct be_journal_id){ .generation = 42, .fe_domid = 7, .devid = 768,
					 .queue = 0, .nr_queues = 1, .order = 0,
					 .abi = 1, .persistent = 1, .remote_port = 9,
					 .ring_refs = { 8 } };
	CHECK(be_journal_create(path, &the_id, 32, 0, &j) == 0);
	be_journal_close(j);
	s32 = file_size();
	CHECK(be_journal_create(path, &the_id, 64, 0, &j) == 0);
	be_journal_close(j);
	s64 = file_size();
	ent_size = (s64 - s32) / 32;
	hdr_size = s32 - 32 * ent_size;
	CHECK(hdr_size >= FZ_ID_OFF + sizeof(the_id) + 8);
	CHECK(hdr_size + FZ_MAX_ENTS * ent_size <= sizeof(file));
}

static void write_file(size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	CHECK(write(fd, file, len) == (ssize_t)len);
	close(fd);
}

static unsigned int expected_copied(const struct ring_req *r)
{
	if (r->operation == BLKIF_OP_INDIRECT) {
		unsigned int p = (r->nr_segments + RING_SEGS_PER_INDIRECT_PAGE - 1) /
				 RING_SEGS_PER_INDIRECT_PAGE;

		return p < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST ?
		       p : BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST;
	}
	if (r->operation == BLKIF_OP_READ || r->operation == BLKIF_OP_WRITE ||
	    r->operation == BLKIF_OP_WRITE_BARRIER ||
	    r->operation == BLKIF_OP_FLUSH_DISKCACHE)
		return r->nr_segments < BLKIF_MAX_SEGMENTS_PER_REQUEST ?
		       r->nr_segments : BLKIF_MAX_SEGMENTS_PER_REQUEST;
	return 0;
}

static void check_plan(const struct be_replay *plan, unsigned int nr_ents,
		       RING_IDX rsp_prod)
{
	CHECK(plan->n <= nr_ents);
	CHECK((RING_IDX)(plan->req_cons - rsp_prod) == plan->n);
	for (unsigned int i = 0; i < plan->n; i++) {
		const struct be_replay_ent *e = &plan->e[i];

		CHECK(e->slot < nr_ents);
		CHECK((RING_IDX)(plan->req_cons - e->idx - 1) < nr_ents);
		CHECK(e->req.nr_copied == expected_copied(&e->req));
		if (i)  /* oldest first, so strictly increasing distance */
			CHECK((RING_IDX)(plan->req_cons - e->idx) <
			      (RING_IDX)(plan->req_cons - plan->e[i - 1].idx));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct be_journal_id id;
	struct be_replay plan, again;
	struct be_journal *j = NULL;
	struct fz_hdr h;
	unsigned int nr_ents;
	size_t len, body;
	uint32_t fixed[4];
	RING_IDX rsp;
	int rc;

	init_once();
	id = the_id;
	take(&c, &h, sizeof(h));
	nr_ents = 32u << ((h.cfg & 7) % 6);
	len = hdr_size + nr_ents * ent_size;
	/* The fixed fields as the writer puts them, or the input's. */
	memset(file, 0, len + 1);
	if (h.cfg & 8) {
		memcpy(file, h.raw, FZ_ID_OFF);
	} else {
		uint64_t magic = 0x314e524a44425858ull;

		fixed[0] = 1;
		fixed[1] = (uint32_t)ent_size;
		fixed[2] = nr_ents;
		fixed[3] = 0;
		memcpy(file, &magic, 8);
		memcpy(file + 8, fixed, sizeof(fixed));
	}
	memcpy(file + FZ_ID_OFF, &the_id, sizeof(the_id));
	body = FZ_ID_OFF + sizeof(the_id);
	take(&c, file + body, len - body);
	if (h.cfg & 16)
		id.generation++;
	if (h.cfg & 32)
		len -= ent_size;
	else if (h.cfg & 64)
		len++;
	write_file(len);

	rc = be_journal_load(path, &id, nr_ents, h.rsp_prod, &plan, &j);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "load: %d, %u to replay, resume at %u\n", rc,
			rc ? 0 : plan.n, rc ? 0 : plan.req_cons);
	if (rc) {
		CHECK(rc == -EBADMSG || rc == -ESTALE);
		CHECK(!plan.e && !plan.n);
		return 0;
	}
	check_plan(&plan, nr_ents, h.rsp_prod);
	/* The adopted queue re-runs and answers each, in order. */
	rsp = h.rsp_prod;
	for (unsigned int i = 0; i < plan.n; i++) {
		be_journal_record(j, plan.e[i].slot, plan.e[i].idx, &plan.e[i].req);
		be_journal_answering(j, plan.e[i].slot, rsp);
		be_journal_answered(j, plan.e[i].slot, rsp + 1);
		rsp++;
	}
	be_journal_close(j);
	rc = be_journal_load(path, &id, nr_ents, rsp, &again, &j);
	CHECK(rc == 0);
	CHECK(again.n == 0 && again.req_cons == plan.req_cons);
	be_replay_free(&again);
	be_replay_free(&plan);
	be_journal_close(j);
	return 0;
}
