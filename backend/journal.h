/* SPDX-License-Identifier: MIT */
/*
 * The in-flight journal of one queue: what a restarted xbd-blkback needs to
 * take over a ring whose frontend stayed Connected (adoption).
 *
 * Why: responses are produced in completion order and a response
 * overwrites the start of a request's ring entry, so after a crash the
 * ring alone cannot say which consumed requests were never answered.  The
 * journal can: it holds, in the slot of each in-flight entry (the queue's
 * pending-request slot), the private copy of the request as it was taken
 * off the ring, from the moment it is consumed until its response is
 * published.  Its header holds the identity of the connection and the
 * ring's req_cons / rsp_prod as this backend last moved them.
 *
 * Where: $rundir/journal/vbd-<self>-<fe>-<devid>.q<N>, a file mapped
 * MAP_SHARED (tmpfs under /run): a store into it is in the page cache the
 * moment it retires, so it survives SIGKILL of the backend (not a reboot,
 * which nothing needs: the rings do not survive one either).
 *
 * The protocol of one request (queue thread, in this order):
 *   be_journal_record(slot, idx, req)   entry INFLIGHT, then req_cons
 *   ... the I/O ...
 *   be_journal_answering(slot, R)       entry ANSWERING at response slot R
 *   response written at R, rsp_prod = R + 1 published
 *   be_journal_answered(slot, R + 1)    entry FREE, then rsp_prod
 * A crash between any two steps leaves a journal be_journal_load()
 * resolves: an ANSWERING entry whose R is below the ring's published
 * rsp_prod was answered (dropped), one at rsp_prod was not (re-run); an
 * INFLIGHT entry at idx == req_cons means req_cons was not moved yet.
 *
 * Trust: the file holds only copies this backend took and validated, but
 * it is input like any other on load: sizes, identity, every index and
 * every entry are checked, and the requests go through validation again
 * when they are re-run.  Anything odd is -EBADMSG (fall back to Closed).
 *
 * Threads: created or loaded by the control thread before the queue
 * thread starts, then written only by the queue thread, closed by the
 * control thread after joining it.  No locks.
 */
#ifndef XBD_BACKEND_JOURNAL_H
#define XBD_BACKEND_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/ring.h"

/* Who the journal belongs to: the connection it was written for.  A
 * journal is only ever used for a connection with the same identity. */
struct be_journal_id {
	uint64_t generation;          /* xenstore xbd-generation of the connection */
	uint32_t fe_domid, devid;
	uint32_t queue, nr_queues;
	uint32_t order, abi, persistent;
	uint32_t remote_port;
	uint32_t ring_refs[1u << RING_MAX_ORDER];   /* unused ones zero */
	uint32_t pad[2];              /* zero: no implicit padding (memcmp) */
};
_Static_assert(sizeof(struct be_journal_id) ==
	       offsetof(struct be_journal_id, pad) + 2 * sizeof(uint32_t),
	       "be_journal_id is compared with memcmp: no padding");

struct be_journal;

/* One request to run again after adoption, in ring order. */
struct be_replay_ent {
	unsigned int slot;            /* the pending slot it keeps */
	RING_IDX idx;                 /* where it was on the ring */
	struct ring_req req;          /* sanitised copy (nr_copied consistent) */
};

/* What be_journal_load() found: where to resume and what to re-run. */
struct be_replay {
	RING_IDX req_cons;            /* the ring's consumer index to resume at */
	unsigned int n;
	struct be_replay_ent *e;      /* n entries, malloc'd; be_replay_free() */
};

/* "$rundir/journal/vbd-<self>-<fe>-<devid>.q<q>".  0 or -ENAMETOOLONG. */
int be_journal_path(char *buf, size_t len, const char *rundir, unsigned int self,
		    unsigned int fe, uint32_t devid, unsigned int q);

/*
 * Create (or truncate) the journal at path for a fresh connection: nr_ents
 * free entries, req_cons = rsp_prod = start.  Creates $rundir/journal
 * (0700) if needed.  0 or -errno; *out is then mapped and ours.
 */
int be_journal_create(const char *path, const struct be_journal_id *id,
		      unsigned int nr_ents, RING_IDX start, struct be_journal **out);

/*
 * Open the journal at path for adopting a ring whose shared rsp_prod is
 * rsp_prod, check it (identity equal to *id, nr_ents entries, indices and
 * entries consistent) and resolve it (see above): on success *plan has the
 * requests to re-run (they stay INFLIGHT in their slots) and *out the
 * journal, which the adopted queue goes on writing.
 * Errors: -ENOENT (no journal), -ESTALE (another connection's), -EBADMSG
 * (corrupt or inconsistent with the ring), -ENOMEM, other -errno.
 */
int be_journal_load(const char *path, const struct be_journal_id *id,
		    unsigned int nr_ents, RING_IDX rsp_prod, struct be_replay *plan,
		    struct be_journal **out);

void be_replay_free(struct be_replay *plan);

/* The queue thread's hooks; each is a no-op on a NULL journal. */
void be_journal_record(struct be_journal *j, unsigned int slot, RING_IDX idx,
		       const struct ring_req *req);
void be_journal_answering(struct be_journal *j, unsigned int slot, RING_IDX rsp_idx);
void be_journal_answered(struct be_journal *j, unsigned int slot, RING_IDX rsp_prod);

/* Unmap and free (the file stays).  Safe with NULL. */
void be_journal_close(struct be_journal *j);

#endif
