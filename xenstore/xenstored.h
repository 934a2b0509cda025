/* SPDX-License-Identifier: MIT */
/*
 * xbd-xenstored internals, shared by the files of xenstore/.
 *
 * Threading: the daemon is single-threaded.  One epoll loop (main.c) owns
 * every object declared here; nothing is locked.
 *
 * Lifetimes:
 *   - struct node: owned by the main tree (db) or by one transaction entry.
 *     Pointers returned by store_get() stay valid until the next
 *     modification through the same view.
 *   - struct conn: created on accept, freed by conn_reap() at the end of a
 *     loop iteration after conn_kill() marked it dead, so a RELEASE that
 *     kills connections never frees one the loop still holds (XSA-425).
 *   - struct domain: created on first use (introduction or node
 *     accounting), never freed before shutdown.
 *   - request scratch memory: struct arena, freed after the reply is queued.
 */
#ifndef XBD_XENSTORED_H
#define XBD_XENSTORED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>	/* before xs_wire.h: it defines xsd_errors[] */
#include <xen/io/xs_wire.h>

#define XS_MAX_PAYLOAD   XENSTORE_PAYLOAD_MAX
#define XS_HDR_SIZE      16u
#define DOMID_MAX_VALID  0x7fefu
#define DOMID_SELF_ID    0x7ff0u

/* ---- arena.c: per-request scratch memory ---- */
struct arena_block;
struct arena {
	struct arena_block *head;
};
void *arena_alloc(struct arena *a, size_t n);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void arena_release(struct arena *a);

/* ---- hash.c: string -> pointer map; keys are borrowed ---- */
struct hash_entry;
struct hash {
	struct hash_entry **buckets;
	size_t nbuckets, count;
};
int hash_init(struct hash *h);
void hash_destroy(struct hash *h);
void *hash_get(const struct hash *h, const char *key);
int hash_put(struct hash *h, const char *key, void *value, void **old);
void *hash_del(struct hash *h, const char *key);
void hash_foreach(const struct hash *h, void (*fn)(void *value, void *arg),
		  void *arg);

/* ---- tree.c: nodes, permissions, paths, the main tree ---- */
#define PERM_NONE  0u
#define PERM_READ  1u
#define PERM_WRITE 2u
#define PERM_OWNER 8u

struct perm {
	uint32_t domid;
	uint8_t access;		/* PERM_READ | PERM_WRITE */
};

struct node {
	char *path;		/* canonical absolute path; the hash key */
	uint64_t gen;		/* globally unique change count, never 0 */
	struct perm *perms;	/* perms[0]: owner and default access */
	uint32_t nperms;
	uint8_t *value;
	uint32_t vlen;
	char *children;		/* child names, each NUL-terminated */
	uint32_t clen;
};

struct node *node_new(const char *path, const struct perm *perms,
		      uint32_t nperms, const void *value, uint32_t vlen);
struct node *node_dup(const struct node *n);
void node_free(struct node *n);
int node_set_value(struct node *n, const void *value, uint32_t vlen);
int node_set_perms(struct node *n, const struct perm *p, uint32_t nperms);
int node_add_child(struct node *n, const char *name);
void node_del_child(struct node *n, const char *name);
/* Record size as cxenstored's node-size quota counts it. */
size_t node_size(const struct node *n);
/* What a node costs its owner's memory quota: record + path. */
size_t node_memory(const struct node *n);

/* Path helpers.  path_parent() writes into the arena; "/" has no parent. */
const char *path_parent(struct arena *a, const char *path);
const char *path_basename(const char *path);
bool path_is_child(const char *child, const char *parent);
/* Parse "b5" etc.  Returns 0 or -EINVAL. */
int perm_parse(const char *s, struct perm *out);
/* Rights of domid (with optional target) on perms: PERM_* mask. */
unsigned perm_for(uint32_t domid, bool priv, int64_t target,
		  const struct perm *p, uint32_t n);

/* The main tree.  db_init(structure) starts it empty or with cxenstored's
 * "/", "/tool", "/tool/xenstored".  db_put() takes ownership, assigns a
 * new generation and keeps the owners' node and memory accounting;
 * db_del() removes and frees one node. */
int db_init(bool structure);
void db_destroy(void);
struct node *db_get(const char *path);
int db_put(struct node *n);
void db_del(const char *path);
uint64_t db_next_gen(void);
size_t db_count(void);
void db_foreach(void (*fn)(void *node, void *arg), void *arg);
/* Pre-order walk from root without recursion (XSA-418).  fn returns 0 to
 * descend, 1 to skip the node's children, < 0 to stop with that error.
 * fn may change a node but not add or remove nodes. */
int db_walk(const char *root, int (*fn)(struct node *n, void *arg), void *arg);
const char *path_child(struct arena *a, const char *parent, const char *name);

/* ---- domain.c: domains, quotas, per-domain sockets ---- */
struct quotas {
	unsigned nodes;		/* -E: nodes owned per domain */
	unsigned node_size;	/* -S: node record size */
	unsigned watches;	/* -W: watches per domain (">" check) */
	unsigned transactions;	/* -t: open transactions per domain */
	unsigned perms;		/* -A: perm entries per node */
	unsigned path_len;	/* -M: path length after /local/domain/N/ */
	unsigned tx_nodes;	/* nodes touched per transaction */
	unsigned outstanding;	/* unread replies before input stalls */
	unsigned events;	/* queued watch events per unprivileged conn */
	unsigned event_timeout;	/* seconds an unread event may wait (0=inf) */
	unsigned priv_events;	/* queued watch events per privileged conn */
	unsigned priv_outstanding; /* unread replies, privileged conn */
	unsigned connections;	/* connections per unprivileged domain */
	unsigned memory;	/* bytes per domain (nodes + watches) */
	unsigned write_rate;	/* writes per second per domain (0: no limit) */
	unsigned write_burst;	/* writes a domain may make at once */
};
extern struct quotas quota;
int quota_set(const char *name, const char *value);
/* Writes "name value\n" lines (or one) into the arena. */
char *quota_report(struct arena *a, int64_t domid);

/* Something epoll reports on: a connection or a listening socket. */
enum poll_kind { POLL_CONN = 1, POLL_LISTEN = 2, POLL_SIGNAL = 3 };
struct listener {
	enum poll_kind kind;	/* POLL_LISTEN; first member */
	int fd;			/* -1 when closed */
	uint32_t domid;		/* connections accepted here are this domain */
};
extern int epoll_fd;
int listener_open(struct listener *l, const char *path, uint32_t domid);
void listener_close(struct listener *l, const char *path);

struct domain {
	uint32_t domid;
	bool introduced;
	int64_t target;		/* -1 when none (SET_TARGET) */
	long nodes;		/* nodes owned in the main tree */
	long memory;		/* bytes of those nodes and of its watches */
	unsigned watches;	/* watches of all its connections */
	struct listener lis;	/* $rundir/dom<N>/xenstore.sock */
	char *sock_path;	/* NULL when not listening */
	/* XSA-206 write pacing (conn.c): credit in 1/1000 writes, and when
	 * it was last topped up (CLOCK_MONOTONIC ms; 0: never) */
	long long wrl_credit, wrl_last;
};
struct domain *domain_get(uint32_t domid, bool create);
bool domain_exists(uint32_t domid);
/* One past the highest domid that has (or had) a struct domain. */
uint32_t domain_id_end(void);
int domain_introduce(uint32_t domid);
int domain_release(uint32_t domid);
/* A node owned by owner appears (+1) or goes (-1). */
void domain_account(uint32_t owner, long delta, const struct node *n);
int domain_listen_all(void);	/* after loading a persisted store */
void domain_shutdown(void);
extern const char *rundir;

/* ---- conn.c: connections, framing, output queues ---- */
struct watch;
struct txn;
struct conn {
	enum poll_kind kind;		/* POLL_CONN; first member */
	struct conn *next;		/* all connections */
	int fd;
	uint32_t domid;
	bool priv;
	bool dead;
	unsigned id;			/* for logs and traces */
	/* input: raw bytes, parsed from the front */
	uint8_t *in;
	size_t in_have;
	/* output queue */
	struct outmsg *out_head, *out_tail;
	size_t out_off;			/* bytes of out_head already sent */
	unsigned out_replies, out_events;
	bool event_drop_logged;
	uint32_t events_mask;		/* registered epoll events */
	/* state */
	struct watch *watches;
	unsigned nwatches;
	struct txn *txns;
	unsigned ntxns;
	uint32_t next_txid;
	/* CLOCK_MONOTONIC ms before which the next request (a write) may not
	 * run: the domain is out of write credit (XSA-206); 0 when not */
	long long throttle_until;
};
extern struct conn *conns;
int conn_new(int fd, uint32_t domid, bool priv);
unsigned conn_count(uint32_t domid);
void conn_kill(struct conn *c, const char *why);
void conn_reap(void);
void conn_handle(struct conn *c, uint32_t events);
/* Process requests already buffered; true if work remains. */
bool conn_run_backlog(void);
/* ms until the first write-throttled connection may go on, or -1. */
int conn_throttle_wait(void);
int conn_send(struct conn *c, uint32_t type, uint32_t req_id, uint32_t tx_id,
	      const void *data, uint32_t len);
int conn_send_event(struct conn *c, const char *path, const char *token);
void conn_expire_events(void);
void conn_update_events(struct conn *c);
int64_t conn_target(const struct conn *c);
void conn_shutdown(void);

/* ---- watch.c ---- */
struct watch {
	struct watch *next;
	char *path;		/* canonical */
	char *token;
	size_t rel;		/* prefix length to strip, 0 if absolute */
};
int watch_add(struct conn *c, const char *path, const char *token, size_t rel);
int watch_remove(struct conn *c, const char *path, const char *token);
void watch_reset(struct conn *c);
/* Fire an event on path; n gives the perms to check (NULL: look up). */
void watch_fire(const char *path, const struct node *n, bool exact,
		const struct perm *old, uint32_t nold);
void watch_fire_special(const char *name);
extern struct perm special_intro[], special_release[];
extern uint32_t nspecial_intro, nspecial_release;
int special_perms_set(const char *name, const struct perm *p, uint32_t n);
const struct perm *special_perms_get(const char *name, uint32_t *n);
void special_perms_drop(uint32_t domid);

/* ---- transaction.c: transactions and the store view ---- */
struct txn *txn_start(struct conn *c);	/* NULL: -errno in errno */
struct txn *txn_find(struct conn *c, uint32_t id);
uint32_t txn_id(const struct txn *t);
int txn_end(struct conn *c, struct txn *t, bool commit);
void txn_abort_all(struct conn *c);

/* The view a request works on: t == NULL is the main tree. */
struct view {
	struct conn *conn;
	struct txn *txn;
};
/* Returns 0 with *out (NULL when absent), or -errno (tx quota). */
int store_get(struct view *v, const char *path, const struct node **out);
/* Takes ownership of n. fire: 0 none, 1 event, 2 exact event. */
int store_put(struct view *v, struct node *n, int fire,
	      const struct perm *old, uint32_t nold);
int store_del(struct view *v, const char *path, int fire);
/* Extra nodes owned by the caller in this transaction (quota). */
long store_pending_nodes(const struct view *v);
/* Bytes charged to c's domain for its queued events and its open
 * transactions' entries (conn.c, transaction.c; CONTROL check). */
long conn_charged(const struct conn *c);
long txn_charged(const struct conn *c);
/* Memory the caller gains when this transaction commits (quota). */
long store_pending_memory(const struct view *v);

/* ---- ops.c ---- */
void ops_process(struct conn *c, const struct xsd_sockmsg *hdr,
		 const uint8_t *body);
extern FILE *trace_file;
void trace_msg(const struct conn *c, const char *dir,
	       const struct xsd_sockmsg *hdr, const uint8_t *body);

/* ---- control.c ---- */
struct request;
int do_control(struct request *req);

/* ---- persist.c ---- */
extern const char *db_file;
extern bool db_dirty;
int persist_load(const char *file);
int persist_save(const char *file);

/* ---- ops.c request ---- */
struct request {
	struct conn *conn;
	struct xsd_sockmsg hdr;
	const char *body;	/* private copy, NUL-terminated at len */
	uint32_t len;
	struct view view;
	struct arena arena;
	const void *reply;
	uint32_t reply_len;
	/* initial WATCH event, queued after the reply */
	const char *ev_path, *ev_token;
};
int reply_string(struct request *req, const char *s);
/* Canonicalise and validate a path argument; NULL if invalid. */
const char *canonical_path(struct request *req, const char *path,
			   bool allow_special, size_t *rel);
bool path_valid(const char *path, bool allow_special);


/* ops.c: remove path and everything below it (RM, domain release). */
int store_rm_tree(struct view *v, struct arena *a, const char *path);

#endif
