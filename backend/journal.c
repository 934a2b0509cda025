/* SPDX-License-Identifier: MIT */
/*
 * backend/journal.c: the per-queue in-flight journal.  See journal.h for
 * the protocol and the crash cases it resolves.
 *
 * Stores into the mapping are __atomic stores (release): the compiler
 * keeps them in program order, which is all a SIGKILL needs (the page
 * cache sees every store that retired; a process that dies has retired
 * all of them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/journal.h"

#define JRN_MAGIC 0x314e524a44425858ull      /* "XXBDJRN1" */
#define JRN_VERSION 1u

enum { JE_FREE = 0, JE_INFLIGHT = 1, JE_ANSWERING = 2 };

struct jrn_hdr {
	uint64_t magic;
	uint32_t version, entry_size, nr_ents, pad;
	struct be_journal_id id;
	RING_IDX req_cons;            /* written by the queue thread */
	RING_IDX rsp_prod;            /* written by the queue thread */
};

struct jrn_entry {
	uint32_t state;               /* JE_* */
	RING_IDX idx;                 /* ring index it was fetched from */
	RING_IDX rsp_idx;             /* JE_ANSWERING: its response slot */
	uint32_t pad;
	struct ring_req req;
};

/* The mapping; the file itself outlives it. */
struct be_journal {
	struct jrn_hdr *hdr;
	struct jrn_entry *ent;
	unsigned int nr_ents;
	size_t len;
};

static size_t file_len(unsigned int nr_ents)
{
	return sizeof(struct jrn_hdr) + (size_t)nr_ents * sizeof(struct jrn_entry);
}

int be_journal_path(char *buf, size_t len, const char *rundir, unsigned int self,
		    unsigned int fe, uint32_t devid, unsigned int q)
{
	int n = snprintf(buf, len, "%s/journal/vbd-%u-%u-%u.q%u", rundir, self, fe,
			 devid, q);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The journal's directory and the rundir above it (on Xen nothing else
 * may have created /run/xbd). */
static int make_dir(const char *path)
{
	char dir[4096];
	char *slash;

	if (strlen(path) >= sizeof(dir))
		return -ENAMETOOLONG;
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return -EINVAL;
	*slash = '\0';                        /* $rundir/journal */
	if (!mkdir(dir, 0700) || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return -ENOENT;
	*slash = '\0';                        /* $rundir */
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	*slash = '/';
	return mkdir(dir, 0700) && errno != EEXIST ? -errno : 0;
}

static int map_file(int fd, size_t len, struct be_journal **out)
{
	struct be_journal *j = calloc(1, sizeof(*j));
	void *m;

	if (!j)
		return -ENOMEM;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		free(j);
		return -errno;
	}
	j->hdr = m;
	j->ent = (struct jrn_entry *)(void *)((char *)m + sizeof(struct jrn_hdr));
	j->len = len;
	*out = j;
	return 0;
}

int be_journal_create(const char *path, const struct be_journal_id *id,
		      unsigned int nr_ents, RING_IDX start, struct be_journal **out)
{
	size_t len = file_len(nr_ents);
	int fd, rc;

	rc = make_dir(path);
	if (rc)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* Truncate to nothing first: every byte of the new file is zero. */
	rc = ftruncate(fd, 0) || ftruncate(fd, (off_t)len) ? -errno : 0;
	if (!rc)
		rc = map_file(fd, len, out);
	close(fd);
	if (rc)
		return rc;
	(*out)->nr_ents = nr_ents;
	*(*out)->hdr = (struct jrn_hdr){
		.magic = JRN_MAGIC, .version = JRN_VERSION,
		.entry_size = sizeof(struct jrn_entry), .nr_ents = nr_ents,
		.id = *id, .req_cons = start, .rsp_prod = start,
	};
	return 0;
}

/* ---- loading --------------------------------------------------------------- */

/* Segment or indirect-page entries ring_fetch_req() copies for this
 * request: a loaded copy must agree, since validation trusts nr_copied. */
static unsigned int expected_copied(const struct ring_req *r)
{
	switch (r->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
	case BLKIF_OP_WRITE_BARRIER:
	case BLKIF_OP_FLUSH_DISKCACHE:
		return r->nr_segments < BLKIF_MAX_SEGMENTS_PER_REQUEST ?
		       r->nr_segments : BLKIF_MAX_SEGMENTS_PER_REQUEST;
	case BLKIF_OP_INDIRECT: {
		unsigned int p = (r->nr_segments + RING_SEGS_PER_INDIRECT_PAGE - 1) /
				 RING_SEGS_PER_INDIRECT_PAGE;

		return p < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST ?
		       p : BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST;
	}
	default:
		return 0;
	}
}

static int check_hdr(const struct jrn_hdr *h, const struct be_journal_id *id,
		     unsigned int nr_ents, RING_IDX rsp_prod)
{
	if (h->magic != JRN_MAGIC || h->version != JRN_VERSION ||
	    h->entry_size != sizeof(struct jrn_entry) || h->nr_ents != nr_ents)
		return -EBADMSG;
	if (memcmp(&h->id, id, sizeof(*id)))
		return -ESTALE;
	/* rsp_prod is published before the header follows it: equal, or
	 * one ahead when we died in between. */
	if ((RING_IDX)(rsp_prod - h->rsp_prod) > 1 ||
	    (RING_IDX)(h->req_cons - rsp_prod) > nr_ents)
		return -EBADMSG;
	return 0;
}

/* Resolve entry i into the plan (or drop it).  0 or -EBADMSG. */
static int resolve_entry(struct jrn_entry *e, unsigned int slot, RING_IDX rsp_prod,
			 unsigned int nr_ents, struct be_replay *plan)
{
	struct jrn_entry c = *e;        /* one read of the file's entry */

	if (c.state == JE_FREE)
		return 0;
	if (c.state == JE_ANSWERING) {
		/* Published when R < rsp_prod (within one ring of it). */
		if ((RING_IDX)(rsp_prod - c.rsp_idx - 1) < nr_ents) {
			__atomic_store_n(&e->state, JE_FREE, __ATOMIC_RELEASE);
			return 0;
		}
		if (c.rsp_idx != rsp_prod)
			return -EBADMSG;
		__atomic_store_n(&e->state, JE_INFLIGHT, __ATOMIC_RELEASE);
	} else if (c.state != JE_INFLIGHT) {
		return -EBADMSG;
	}
	if (c.req.nr_copied != expected_copied(&c.req) || plan->n >= nr_ents)
		return -EBADMSG;
	plan->e[plan->n++] = (struct be_replay_ent){ .slot = slot, .idx = c.idx, .req = c.req };
	return 0;
}

static int by_idx(const void *a, const void *b, void *arg)
{
	RING_IDX cons = *(const RING_IDX *)arg;
	RING_IDX x = cons - ((const struct be_replay_ent *)a)->idx;
	RING_IDX y = cons - ((const struct be_replay_ent *)b)->idx;

	return x > y ? -1 : x < y;     /* oldest (furthest behind cons) first */
}

/* Every entry in [req_cons - nr_ents, req_cons), no two alike, as many as
 * the ring says are outstanding.  Fixes req_cons when we died between
 * recording a request and moving req_cons. */
static int check_plan(struct be_replay *plan, RING_IDX cons, RING_IDX rsp_prod,
		      unsigned int nr_ents)
{
	for (unsigned int i = 0; i < plan->n; i++)
		if (plan->e[i].idx == cons)
			cons++;           /* at most one: the last record */
	for (unsigned int i = 0; i < plan->n; i++)
		if ((RING_IDX)(cons - plan->e[i].idx - 1) >= nr_ents)
			return -EBADMSG;
	qsort_r(plan->e, plan->n, sizeof(plan->e[0]), by_idx, &cons);
	for (unsigned int i = 1; i < plan->n; i++)
		if (plan->e[i].idx == plan->e[i - 1].idx)
			return -EBADMSG;
	if ((RING_IDX)(cons - rsp_prod) != plan->n)
		return -EBADMSG;
	plan->req_cons = cons;
	return 0;
}

static int resolve(struct be_journal *j, RING_IDX rsp_prod, struct be_replay *plan)
{
	RING_IDX cons = __atomic_load_n(&j->hdr->req_cons, __ATOMIC_RELAXED);
	int rc = 0;

	plan->e = calloc(j->nr_ents, sizeof(*plan->e));
	if (!plan->e)
		return -ENOMEM;
	for (unsigned int i = 0; i < j->nr_ents && !rc; i++)
		rc = resolve_entry(&j->ent[i], i, rsp_prod, j->nr_ents, plan);
	if (!rc)
		rc = check_plan(plan, cons, rsp_prod, j->nr_ents);
	if (rc)
		return rc;
	__atomic_store_n(&j->hdr->req_cons, plan->req_cons, __ATOMIC_RELEASE);
	__atomic_store_n(&j->hdr->rsp_prod, rsp_prod, __ATOMIC_RELEASE);
	return 0;
}

int be_journal_load(const char *path, const struct be_journal_id *id,
		    unsigned int nr_ents, RING_IDX rsp_prod, struct be_replay *plan,
		    struct be_journal **out)
{
	size_t len = file_len(nr_ents);
	struct be_journal *j = NULL;
	struct stat st;
	int fd, rc;

	memset(plan, 0, sizeof(*plan));
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	rc = fstat(fd, &st) ? -errno : 0;
	if (!rc && (!S_ISREG(st.st_mode) || (size_t)st.st_size != len))
		rc = -EBADMSG;
	if (!rc)
		rc = map_file(fd, len, &j);
	close(fd);
	if (rc)
		goto out;
	j->nr_ents = nr_ents;
	rc = check_hdr(j->hdr, id, nr_ents, rsp_prod);
	if (!rc)
		rc = resolve(j, rsp_prod, plan);
out:
	if (rc) {
		be_replay_free(plan);
		be_journal_close(j);
		return rc;
	}
	*out = j;
	return 0;
}

void be_replay_free(struct be_replay *plan)
{
	free(plan->e);
	plan->e = NULL;
	plan->n = 0;
}

/* ---- the queue thread's hooks ------------------------------------------------ */

void be_journal_record(struct be_journal *j, unsigned int slot, RING_IDX idx,
		       const struct ring_req *req)
{
	struct jrn_entry *e;

	if (!j || slot >= j->nr_ents)
		return;
	e = &j->ent[slot];
	memcpy(&e->req, req, sizeof(*req));
	__atomic_store_n(&e->idx, idx, __ATOMIC_RELEASE);
	__atomic_store_n(&e->state, JE_INFLIGHT, __ATOMIC_RELEASE);
	/* Replays record again at an index behind req_cons: leave it. */
	if ((RING_IDX)(idx + 1 - j->hdr->req_cons) <= j->nr_ents)
		__atomic_store_n(&j->hdr->req_cons, idx + 1, __ATOMIC_RELEASE);
}

void be_journal_answering(struct be_journal *j, unsigned int slot, RING_IDX rsp_idx)
{
	if (!j || slot >= j->nr_ents)
		return;
	__atomic_store_n(&j->ent[slot].rsp_idx, rsp_idx, __ATOMIC_RELEASE);
	__atomic_store_n(&j->ent[slot].state, JE_ANSWERING, __ATOMIC_RELEASE);
}

void be_journal_answered(struct be_journal *j, unsigned int slot, RING_IDX rsp_prod)
{
	if (!j || slot >= j->nr_ents)
		return;
	__atomic_store_n(&j->ent[slot].state, JE_FREE, __ATOMIC_RELEASE);
	__atomic_store_n(&j->hdr->rsp_prod, rsp_prod, __ATOMIC_RELEASE);
}

void be_journal_close(struct be_journal *j)
{
	if (!j)
		return;
	munmap(j->hdr, j->len);
	free(j);
}
