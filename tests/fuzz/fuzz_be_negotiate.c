/* SPDX-License-Identifier: MIT */
/*
 * fuzz_be_negotiate: a hostile frontend's xenstore keys against the
 * backend's real probe and negotiation (backend/xenbus.c: be_dev_probe,
 * be_dev_changed -> read_fe_common, read_queue_keys, be_queue_start), with
 * the real lib/xenbus.c readers.
 *
 * Stubs:
 *   - an in-memory xenstore: the libxenstore calls lib/xenbus.c makes
 *     (xs_read, xs_write, xs_rm, xs_mkdir, xs_directory,
 *     xs_set_permissions, xs_transaction_start/end) are defined here, so
 *     the executable's definitions win over libxenstore's.  The toolstack's
 *     backend keys are valid and fixed (a 1 MiB file as params); the
 *     frontend directory holds whatever the input writes;
 *   - a fake platform: grant refs 0..63 map if the input granted them
 *     (fresh zeroed pages: an empty ring), ports 1..63 bind if the input
 *     allows it; every map, bind and handle is counted.
 * The queues really start and stop, on the fuzzer's thread: a fake
 * io_uring and the queue thread's loop run at the join (see below).
 *
 * Checked: no crash/UB/leak; Connected only with 1..max_queues queues of
 * order <= max_order whose every ring ref and port is the frontend's
 * value; after removal every mapping, binding, handle and thread is gone.
 *
 * Input: struct fz_hdr, then records struct fz_key + len value bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/blkif.h"
#include "backend/tunables.h"
#include "backend/xenbus.h"
#include "log.h"
#include "platform/private.h"
#include "tests/fuzz/fuzz.h"

#define FE_DOMID 5
#define BE_PATH "/local/domain/0/backend/vbd/5/768"
#define FE_PATH "/local/domain/5/device/vbd/768"

struct fz_hdr {
	uint8_t max_queues;     /* tunable, % 8 + 1 */
	uint8_t max_order;      /* tunable, % 6 */
	uint8_t flags;          /* bit0 feature_persistent, bit1 mode "r",
				 * bit2 second state event, bit3 no fe state */
	uint8_t fe_state;       /* % 8, written to FE_PATH/state */
	uint16_t max_indirect;  /* tunable */
	uint64_t granted;       /* refs 0..63 */
	uint64_t ports;         /* ports 1..63 that bind */
} __attribute__((packed));

struct fz_key {
	uint8_t sel;            /* bits0-3 key name, bit7 under queue-<q>/ */
	uint8_t idx;            /* bits0-4 ring-ref index, bits5-7 queue */
	uint8_t len;            /* % 48 */
} __attribute__((packed));

/* ---- the in-memory xenstore ------------------------------------------ */

#define XS_NODES 512
struct xnode {
	char *path;
	char *val;
	unsigned int len;
	uint32_t hash;          /* of path: most lookups compare no string */
};
static struct xnode store[XS_NODES];
static unsigned int nstore;

/* FNV-1a of a path, and its length.  The harness compares paths by hash
 * first and then with its own loop: every lookup through ASan's strcmp
 * interceptor fed libFuzzer's compare hook (a third of an execution, and
 * comparisons of the harness's own store, not of the code under test). */
static uint32_t path_hash(const char *path)
{
	uint32_t h = 2166136261u;

	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 16777619u;
	return h;
}

/* The first l bytes of p are prefix (not intercepted either). */
static bool path_starts(const char *p, const char *prefix, size_t l)
{
	for (size_t i = 0; i < l; i++)
		if (p[i] != prefix[i])
			return false;
	return true;
}

static struct xnode *xfind(const char *path)
{
	uint32_t h = path_hash(path);

	for (unsigned int i = 0; i < nstore; i++)
		if (store[i].hash == h && fuzz_str_eq(store[i].path, path))
			return &store[i];
	return NULL;
}

static bool xset(const char *path, const void *val, unsigned int len)
{
	struct xnode *n = xfind(path);

	if (!n) {
		if (nstore == XS_NODES) {
			errno = ENOSPC;
			return false;
		}
		n = &store[nstore++];
		n->path = strdup(path);
		n->hash = path_hash(path);
		n->val = NULL;
	}
	free(n->val);
	n->val = malloc(len + 1);
	memcpy(n->val, val, len);
	n->val[len] = 0;
	n->len = len;
	return true;
}

static void xclear(void)
{
	for (unsigned int i = 0; i < nstore; i++) {
		free(store[i].path);
		free(store[i].val);
	}
	nstore = 0;
}

void *xs_read(struct xs_handle *h, xs_transaction_t t, const char *path, unsigned int *len)
{
	struct xnode *n = xfind(path);
	char *v;

	(void)h;
	(void)t;
	if (!n) {
		errno = ENOENT;
		return NULL;
	}
	v = malloc(n->len + 1);
	memcpy(v, n->val, n->len + 1);
	if (len)
		*len = n->len;
	return v;
}

bool xs_write(struct xs_handle *h, xs_transaction_t t, const char *path,
	      const void *data, unsigned int len)
{
	(void)h;
	(void)t;
	return xset(path, data, len);
}

bool xs_mkdir(struct xs_handle *h, xs_transaction_t t, const char *path)
{
	(void)h;
	(void)t;
	return xfind(path) ? true : xset(path, "", 0);
}

bool xs_rm(struct xs_handle *h, xs_transaction_t t, const char *path)
{
	size_t l = strlen(path);

	(void)h;
	(void)t;
	for (unsigned int i = 0; i < nstore;) {
		if (path_starts(store[i].path, path, l) &&
		    (store[i].path[l] == 0 || store[i].path[l] == '/')) {
			free(store[i].path);
			free(store[i].val);
			store[i] = store[--nstore];
		} else {
			i++;
		}
	}
	return true;
}

char **xs_directory(struct xs_handle *h, xs_transaction_t t, const char *path,
		    unsigned int *num)
{
	size_t l = strlen(path);
	char **out = calloc(XS_NODES + 1, sizeof(char *));

	(void)h;
	(void)t;
	*num = 0;
	for (unsigned int i = 0; i < nstore; i++) {
		const char *p = store[i].path;

		if (path_starts(p, path, l) && p[l] == '/' && !strchr(p + l + 1, '/'))
			out[(*num)++] = (char *)p + l + 1;   /* test only: borrowed */
	}
	return out;
}

bool xs_set_permissions(struct xs_handle *h, xs_transaction_t t, const char *path,
			struct xs_permissions *perms, unsigned int num)
{
	(void)h;
	(void)t;
	(void)perms;
	(void)num;
	return xfind(path) != NULL || (errno = ENOENT, false);
}

xs_transaction_t xs_transaction_start(struct xs_handle *h)
{
	(void)h;
	return 1;
}

bool xs_transaction_end(struct xs_handle *h, xs_transaction_t t, bool abort)
{
	(void)h;
	(void)t;
	(void)abort;
	return true;
}

/* ---- the fake platform ------------------------------------------------- */

static uint64_t g_granted, g_ports;
static int open_handles, live_maps, bound_ports;
static uint32_t mapped_refs[64];
static unsigned int nmapped_refs;

struct fz_evtchn {
	struct xbd_evtchn pub;
	int fd;
};

/*
 * Ring mappings come from one static area, 32 pages (the largest ring)
 * for each of 8 queues, zeroed per map and poisoned for ASan from the
 * unmap on: a heap allocation of up to 128 KiB per queue and input came
 * back from ASan's quarantine cold (page faults and cache misses, a
 * fifth of an execution with the queues run in process).
 */
#define FZ_RING_SLOTS 8u
#define FZ_RING_PAGES 32u
static uint8_t ring_area[FZ_RING_SLOTS][FZ_RING_PAGES * 4096] __attribute__((aligned(4096)));
static bool ring_busy[FZ_RING_SLOTS];

static void *ring_pages_get(unsigned int count)
{
	for (unsigned int i = 0; i < FZ_RING_SLOTS && count <= FZ_RING_PAGES; i++) {
		if (ring_busy[i])
			continue;
		ring_busy[i] = true;
		ASAN_UNPOISON_MEMORY_REGION(ring_area[i], (size_t)count * 4096);
		memset(ring_area[i], 0, (size_t)count * 4096);
		return ring_area[i];
	}
	CHECK(!"more ring mappings than queues");
	return NULL;
}

static void ring_pages_put(void *addr, unsigned int count)
{
	unsigned int i = (unsigned int)(((uint8_t *)addr - ring_area[0]) / sizeof(ring_area[0]));

	CHECK(i < FZ_RING_SLOTS && addr == ring_area[i] && ring_busy[i]);
	ring_busy[i] = false;
	ASAN_POISON_MEMORY_REGION(ring_area[i], (size_t)count * 4096);
}

static int f_gnttab_open(struct xbd_platform *p, xbd_domid_t self, struct xbd_gnttab **out)
{
	struct xbd_gnttab *g = calloc(1, sizeof(*g));

	(void)self;
	g->p = p;
	*out = g;
	open_handles++;
	return 0;
}

static void f_gnttab_close(struct xbd_gnttab *gt)
{
	free(gt);
	open_handles--;
}

static int f_gnttab_map(struct xbd_gnttab *gt, xbd_domid_t remote, unsigned int count,
			const xbd_grant_ref_t *refs, int prot, void **addr)
{
	(void)gt;
	(void)prot;
	if (remote != FE_DOMID)
		return -EPERM;
	for (unsigned int i = 0; i < count; i++)
		if (refs[i] >= 64 || !(g_granted & (1ull << refs[i])))
			return -EINVAL;
	*addr = ring_pages_get(count);
	if (!*addr)
		return -ENOMEM;
	for (unsigned int i = 0; i < count && nmapped_refs < 64; i++)
		mapped_refs[nmapped_refs++] = refs[i];
	live_maps++;
	return 0;
}

static int f_gnttab_unmap(struct xbd_gnttab *gt, void *addr, unsigned int count)
{
	(void)gt;
	ring_pages_put(addr, count);
	live_maps--;
	return 0;
}

static int f_evtchn_open(struct xbd_platform *p, xbd_domid_t self, struct xbd_evtchn **out)
{
	struct fz_evtchn *e = calloc(1, sizeof(*e));

	(void)self;
	e->pub.p = p;
	e->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	*out = &e->pub;
	open_handles++;
	return 0;
}

static void f_evtchn_close(struct xbd_evtchn *pub)
{
	struct fz_evtchn *e = container_of(pub, struct fz_evtchn, pub);

	close(e->fd);
	free(e);
	open_handles--;
}

static int f_evtchn_fd(struct xbd_evtchn *pub)
{
	return container_of(pub, struct fz_evtchn, pub)->fd;
}

static int f_bind(struct xbd_evtchn *e, xbd_domid_t remote, xbd_evtchn_port_t port)
{
	(void)e;
	if (remote != FE_DOMID || port == 0 || port >= 64 || !(g_ports & (1ull << port)))
		return -EINVAL;
	bound_ports++;
	return (int)port + 100;
}

static int f_unbind(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	(void)e;
	CHECK(port > 100 && port < 164);
	bound_ports--;
	return 0;
}

static int f_notify(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	(void)e;
	(void)port;
	return 0;
}

static int f_pending(struct xbd_evtchn *pub)
{
	uint64_t v;

	return read(f_evtchn_fd(pub), &v, sizeof(v)) == sizeof(v) ? 101 : -EAGAIN;
}

static int f_unmask(struct xbd_evtchn *e, xbd_evtchn_port_t port)
{
	(void)e;
	(void)port;
	return 0;
}

static const struct platform_ops fz_ops = {
	.gnttab_open = f_gnttab_open, .gnttab_close = f_gnttab_close,
	.gnttab_map = f_gnttab_map, .gnttab_unmap = f_gnttab_unmap,
	.evtchn_open = f_evtchn_open, .evtchn_close = f_evtchn_close,
	.evtchn_fd = f_evtchn_fd, .evtchn_bind_interdomain = f_bind,
	.evtchn_unbind = f_unbind, .evtchn_notify = f_notify,
	.evtchn_pending = f_pending, .evtchn_unmask = f_unmask,
};
static struct xbd_platform fz_plat = { .ops = &fz_ops };

/* ---- the queues, driven on the fuzzer's thread ------------------------ */

/*
 * be_queue_start (backend/queue.c) sets the engine up on the control
 * thread, then hands it to a thread of its own that runs be_io_run until
 * be_queue_stop writes the queue's stop eventfd and joins it.  Per input
 * that was a real thread and a real io_uring per queue: 60 % of an
 * execution on an evolved corpus was the kernel's (clone, the io_uring's
 * set-up and teardown), none of it reachable by the peer.  Here:
 *   - io_uring_queue_init/exit and io_uring_submit* are wrapped
 *     (-Wl,--wrap), so the engine's liburing inlines run on rings in heap
 *     memory, one per queue; the only SQEs a queue makes here are its
 *     POLL_ADDs on the event-channel and stop eventfds (the rings the fake
 *     platform maps are empty: no request, so no I/O; anything else is a
 *     check failure), held until their fd is readable (a real poll(2)
 *     with no timeout at each submit);
 *   - pthread_create is wrapped to record the queue thread's function
 *     instead of starting it, and pthread_join runs it on the fuzzer's
 *     thread: be_queue_stop has written the stop eventfd by then, so
 *     be_io_run makes the turns the thread would make before it stops
 *     (the ring read, the stop CQE, the done eventfd) and returns.
 * What the thread would do between start and stop on an empty ring is
 * wait; be_request fuzzes the loop with requests.
 */
#define FZ_URINGS 8u                /* max_queues % 8 + 1 */
#define FZ_USQES 4096u
struct fz_uring {
	bool live;
	unsigned int sq_head, cq_head, cq_tail, zero, cq_entries, npolls;
	struct { int fd; uint64_t ud; } polls[4];
	struct io_uring_sqe sqes[FZ_USQES];
	struct io_uring_cqe cqes[2 * FZ_USQES];
};
static struct fz_uring *urings[FZ_URINGS];

static struct fz_uring *uring_of(struct io_uring *ring)
{
	for (unsigned int i = 0; i < FZ_URINGS; i++)
		if (urings[i] && urings[i]->live && ring->sq.sqes == urings[i]->sqes)
			return urings[i];
	CHECK(!"io_uring not made by io_uring_queue_init");
	return NULL;
}

int __wrap_io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	struct fz_uring *u = NULL;
	unsigned int n = 1;

	CHECK(flags == 0);
	while (n < entries)
		n <<= 1;
	CHECK(n <= FZ_USQES);
	for (unsigned int i = 0; i < FZ_URINGS && !u; i++) {
		if (!urings[i])
			urings[i] = calloc(1, sizeof(*urings[i]));   /* kept: reused */
		if (!urings[i]->live)
			u = urings[i];
	}
	CHECK(u);
	u->live = true;
	u->sq_head = u->cq_head = u->cq_tail = u->zero = u->npolls = 0;
	u->cq_entries = 2 * n;
	memset(ring, 0, sizeof(*ring));
	ring->sq.khead = ring->sq.ktail = &u->sq_head;   /* ktail: at submit */
	ring->sq.kflags = ring->sq.kdropped = &u->zero;
	ring->sq.sqes = u->sqes;
	ring->sq.ring_mask = n - 1;
	ring->sq.ring_entries = n;
	ring->cq.khead = &u->cq_head;
	ring->cq.ktail = &u->cq_tail;
	ring->cq.kflags = ring->cq.koverflow = &u->zero;
	ring->cq.cqes = u->cqes;
	ring->cq.ring_mask = u->cq_entries - 1;
	ring->cq.ring_entries = u->cq_entries;
	ring->ring_fd = ring->enter_ring_fd = -1;
	return 0;
}

void __wrap_io_uring_queue_exit(struct io_uring *ring)
{
	uring_of(ring)->live = false;
}

/* Take the queued SQEs, complete the polls whose fd is readable. */
static void uring_submit(struct io_uring *ring)
{
	struct fz_uring *u = uring_of(ring);
	struct io_uring_sq *sq = &ring->sq;

	for (; sq->sqe_head != sq->sqe_tail; sq->sqe_head++) {
		const struct io_uring_sqe *sqe = &sq->sqes[sq->sqe_head & sq->ring_mask];

		CHECK(sqe->opcode == IORING_OP_POLL_ADD && sqe->poll32_events == POLLIN);
		CHECK(u->npolls < sizeof(u->polls) / sizeof(u->polls[0]));
		u->polls[u->npolls].fd = sqe->fd;
		u->polls[u->npolls++].ud = sqe->user_data;
	}
	u->sq_head = sq->sqe_tail;
	for (unsigned int i = 0; i < u->npolls;) {
		struct pollfd p = { u->polls[i].fd, POLLIN, 0 };

		if (poll(&p, 1, 0) != 1) {
			i++;
			continue;
		}
		CHECK(u->cq_tail - u->cq_head < u->cq_entries);
		u->cqes[u->cq_tail++ & (u->cq_entries - 1)] =
			(struct io_uring_cqe){ .user_data = u->polls[i].ud, .res = p.revents };
		u->polls[i] = u->polls[--u->npolls];
	}
}

int __wrap_io_uring_submit(struct io_uring *ring)
{
	int n = (int)(ring->sq.sqe_tail - ring->sq.sqe_head);

	uring_submit(ring);
	return n;
}

int __wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	int n = __wrap_io_uring_submit(ring);
	struct fz_uring *u = uring_of(ring);

	/* Only the fuzzer's thread runs: a wait nothing ends would hang. */
	CHECK(u->cq_tail - u->cq_head >= wait_nr);
	return n;
}

int __wrap_io_uring_submit_and_wait_timeout(struct io_uring *ring,
		struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
		struct __kernel_timespec *ts, sigset_t *sigmask)
{
	struct fz_uring *u = uring_of(ring);

	(void)ts;
	(void)sigmask;
	__wrap_io_uring_submit(ring);
	if (u->cq_tail - u->cq_head < wait_nr)
		return -ETIME;             /* the timeout, without the wait */
	*cqe_ptr = &u->cqes[u->cq_head & (u->cq_entries - 1)];
	return 0;
}

struct fz_thread {
	void *(*fn)(void *);
	void *arg;
};
static struct fz_thread threads[FZ_URINGS];
static int live_threads;

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	(void)a;
	for (unsigned int i = 0; i < FZ_URINGS; i++) {
		if (threads[i].fn)
			continue;
		threads[i] = (struct fz_thread){ fn, arg };
		*t = (pthread_t)i + 1;
		live_threads++;
		return 0;
	}
	CHECK(!"more queue threads than queues");
	return EAGAIN;
}

int __wrap_pthread_join(pthread_t t, void **ret)
{
	struct fz_thread *th;
	void *r;

	CHECK(t >= 1 && t <= FZ_URINGS && threads[t - 1].fn);
	th = &threads[t - 1];
	r = th->fn(th->arg);       /* the queue's loop, until it sees stop */
	if (ret)
		*ret = r;
	th->fn = NULL;
	live_threads--;
	return 0;
}

/* ---- one input ------------------------------------------------------------ */

static char run_dir[64], disk_path[96];

/*
 * The backend removes every journal a vbd may have (backend/xenbus.c
 * unlink_journals: max_queues of them, at each disconnect and at
 * removal), almost all of which do not exist: 17 failing unlink calls
 * per input, a fifth of an execution in path walks.  Only this process
 * writes in its private run directory, so the harness knows which files
 * exist there: those an open created (tests/fuzz/env.c reports them)
 * and no unlink removed.  An unlink of any other path in the run
 * directory fails with ENOENT, as the kernel would say, without asking
 * it; every unlink of a file that exists, and every path elsewhere,
 * goes to the real call.
 */
#define FZ_FILES 64
static char *created[FZ_FILES];
static unsigned int ncreated;
static bool created_overflow;       /* lost track: ask the kernel */

static bool in_run_dir(const char *path)
{
	size_t l = strlen(run_dir);

	return l && path_starts(path, run_dir, l) && path[l] == '/';
}

void fuzz_created(const char *path)
{
	if (!in_run_dir(path))
		return;
	for (unsigned int i = 0; i < ncreated; i++)
		if (fuzz_str_eq(created[i], path))
			return;
	if (ncreated == FZ_FILES) {
		created_overflow = true;
		return;
	}
	created[ncreated++] = strdup(path);
}

/*
 * The queues' restart journals, in memory.  Each queue start creates
 * $rundir/journal/vbd-...qN (backend/journal.c be_journal_create: open
 * O_CREAT, ftruncate to 0 and to its size, mmap MAP_SHARED, close), each
 * stop unmaps it and the disconnect unlinks it: on tmpfs a path walk per
 * call, a fresh page and its first-touch fault per journal, a third of
 * the kernel's share of an execution on an evolved corpus.  journal.c
 * runs as it is; the harness plays the file system for the files of
 * $rundir/journal/ only, with a file's semantics: open creates it (or
 * fails with ENOENT / EEXIST as the kernel would) and returns a real
 * descriptor (a duplicate of one memfd, so close is the real call), a
 * file keeps its bytes across mappings and opens until it is unlinked,
 * what ftruncate grows reads as zeros, fstat gives its size, and a
 * MAP_SHARED mapping of it is the file's own buffer, poisoned for ASan
 * when no mapping is live (any use after munmap is reported) and past
 * the mapped length.  Every other path, descriptor and address goes to
 * the real call.
 */
#define FZ_JFILES 32
#define FZ_JMAX (4u << 20)          /* the largest journal: 1024 entries */
#define FZ_FDS 1024
struct jfile {
	char path[160];
	bool exists;
	size_t size;                /* the file's length */
	size_t dirty;               /* bytes from the start that may be non-zero */
	unsigned int maps;          /* live mappings */
	size_t map_len;
	uint8_t *buf;               /* FZ_JMAX of address space */
};
static struct jfile jfiles[FZ_JFILES];
static int8_t fd_jfile[FZ_FDS];     /* slot + 1 of a descriptor open() returned */
static int jmemfd = -1;
static char jdir[96];               /* "$rundir/journal/" */

static struct jfile *jfile_of_path(const char *path, bool make)
{
	struct jfile *free_slot = NULL;

	for (unsigned int i = 0; i < FZ_JFILES; i++) {
		if (jfiles[i].path[0] && fuzz_str_eq(jfiles[i].path, path))
			return &jfiles[i];
		if (!free_slot && !jfiles[i].path[0])
			free_slot = &jfiles[i];
	}
	if (!make)
		return NULL;
	CHECK(free_slot && strlen(path) < sizeof(free_slot->path));
	strcpy(free_slot->path, path);
	if (!free_slot->buf) {
		free_slot->buf = mmap(NULL, FZ_JMAX, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		CHECK(free_slot->buf != MAP_FAILED);
		ASAN_POISON_MEMORY_REGION(free_slot->buf, FZ_JMAX);
	}
	return free_slot;
}

static struct jfile *jfile_of_fd(int fd)
{
	return fd >= 0 && fd < FZ_FDS && fd_jfile[fd] ? &jfiles[fd_jfile[fd] - 1] : NULL;
}

static bool is_journal(const char *path)
{
	size_t l = strlen(jdir);

	return l && path_starts(path, jdir, l) && path[l] && !strchr(path + l, '/');
}

int fuzz_open_mem(const char *path, int flags)
{
	struct jfile *f;
	int fd;

	if (!is_journal(path))
		return -2;
	CHECK((flags & O_ACCMODE) == O_RDWR && !(flags & (O_TRUNC | O_APPEND)));
	f = jfile_of_path(path, flags & O_CREAT);
	if (f && f->exists && (flags & O_CREAT) && (flags & O_EXCL)) {
		errno = EEXIST;
		return -1;
	}
	if (!f || (!f->exists && !(flags & O_CREAT))) {
		errno = ENOENT;
		return -1;
	}
	if (!f->exists) {
		f->exists = true;
		f->size = 0;
	}
	fd = fcntl(jmemfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	CHECK(fd < FZ_FDS && !fd_jfile[fd]);
	fd_jfile[fd] = (int8_t)(f - jfiles + 1);
	return fd;
}

int __real_close(int fd);
int __real_ftruncate(int fd, off_t len);
int __real_fstat(int fd, struct stat *st);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);

int __wrap_close(int fd)
{
	if (jfile_of_fd(fd))
		fd_jfile[fd] = 0;
	return __real_close(fd);
}

int __wrap_ftruncate(int fd, off_t len)
{
	struct jfile *f = jfile_of_fd(fd);
	size_t to;

	if (!f)
		return __real_ftruncate(fd, len);
	if (len < 0 || (size_t)len > FZ_JMAX) {
		errno = len < 0 ? EINVAL : EFBIG;
		return -1;
	}
	to = (size_t)len;
	/* what it grows by reads as zeros */
	if (to > f->size && f->dirty > f->size) {
		size_t end = to < f->dirty ? to : f->dirty;

		ASAN_UNPOISON_MEMORY_REGION(f->buf + f->size, end - f->size);
		memset(f->buf + f->size, 0, end - f->size);
		if (!f->maps || f->size >= f->map_len)
			ASAN_POISON_MEMORY_REGION(f->buf + f->size, end - f->size);
		else if (end > f->map_len)
			ASAN_POISON_MEMORY_REGION(f->buf + f->map_len, end - f->map_len);
	}
	CHECK(!f->maps || to >= f->map_len);     /* journal.c never shrinks a mapped file */
	if (to > f->size && to >= f->dirty)
		f->dirty = f->size;                  /* [size, to) is zero now */
	f->size = to;
	return 0;
}

int __wrap_fstat(int fd, struct stat *st)
{
	struct jfile *f = jfile_of_fd(fd);

	if (!f)
		return __real_fstat(fd, st);
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = f->exists;
	st->st_size = (off_t)f->size;
	return 0;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct jfile *f = jfile_of_fd(fd);

	if (!f)
		return __real_mmap(addr, len, prot, flags, fd, off);
	/* journal.c's one use: the whole file, shared, read-write */
	CHECK(!addr && !off && flags == MAP_SHARED && prot == (PROT_READ | PROT_WRITE));
	CHECK(!f->maps);
	if (!len || len > f->size) {  /* a page past the end would SIGBUS */
		errno = len ? ENXIO : EINVAL;
		return MAP_FAILED;
	}
	f->maps = 1;
	f->map_len = len;
	if (f->dirty < len)
		f->dirty = len;
	ASAN_UNPOISON_MEMORY_REGION(f->buf, len);
	return f->buf;
}

int __wrap_munmap(void *addr, size_t len)
{
	for (unsigned int i = 0; i < FZ_JFILES; i++) {
		struct jfile *f = &jfiles[i];

		if (!f->buf || addr != f->buf)
			continue;
		CHECK(f->maps && len == f->map_len);
		f->maps = 0;
		ASAN_POISON_MEMORY_REGION(f->buf, f->map_len);
		return 0;
	}
	return __real_munmap(addr, len);
}

/* After the frontend closed and the vbd is gone: no journal is mapped
 * or open, and none is left (the disconnect removes them all), so the
 * next input starts from an empty journal directory as a fresh process
 * would. */
static void check_journals(void)
{
	for (unsigned int i = 0; i < FZ_JFILES; i++)
		CHECK(!jfiles[i].maps && !jfiles[i].exists && !jfiles[i].path[0]);
	for (int fd = 0; fd < FZ_FDS; fd++)
		CHECK(!fd_jfile[fd]);
}

int __real_unlink(const char *path);

int __wrap_unlink(const char *path)
{
	unsigned int i;

	if (is_journal(path)) {
		struct jfile *f = jfile_of_path(path, false);

		if (!f || !f->exists) {
			errno = ENOENT;
			return -1;
		}
		/* No descriptor or mapping of it may outlive the unlink
		 * here (journal.c closes both first); a new file of that
		 * name starts empty. */
		CHECK(!f->maps);
		for (int fd = 0; fd < FZ_FDS; fd++)
			CHECK(fd_jfile[fd] != f - jfiles + 1);
		f->exists = false;
		f->size = 0;
		f->path[0] = '\0';
		return 0;
	}
	if (!in_run_dir(path) || created_overflow)
		return __real_unlink(path);
	for (i = 0; i < ncreated && !fuzz_str_eq(created[i], path); i++)
		;
	if (i == ncreated) {
		errno = ENOENT;
		return -1;
	}
	free(created[i]);
	created[i] = created[--ncreated];
	return __real_unlink(path);
}

static void cleanup(void)
{
	fuzz_rm_tree(run_dir);
}

/*
 * The fake platform's run directory is a private one (tmpfs when there is
 * one): the backend keeps each queue's restart journal in
 * $rundir/journal/, and with no run directory set it wrote them to
 * /journal at the root of the file system.  The disk is a 1 MiB file in
 * it.
 */
static void init_once(void)
{
	int fd;

	if (run_dir[0])
		return;
	snprintf(run_dir, sizeof(run_dir), "%s/fuzz-negotiate.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	CHECK(mkdtemp(run_dir));
	atexit(cleanup);
	CHECK(strlen(run_dir) < sizeof(fz_plat.rundir));
	strcpy(fz_plat.rundir, run_dir);
	snprintf(disk_path, sizeof(disk_path), "%s/disk", run_dir);
	snprintf(jdir, sizeof(jdir), "%s/journal/", run_dir);
	jmemfd = memfd_create("fuzz-journal", MFD_CLOEXEC);
	CHECK(jmemfd >= 0);
	fd = open(disk_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
	close(fd);
	/* Below ERR: be_fatal's messages would drown libFuzzer's output. */
	xbd_log_init("fuzz_be_negotiate", (enum xbd_log_level)0, false);
	ASAN_POISON_MEMORY_REGION(ring_area, sizeof(ring_area));
}

static void put(const char *dir, const char *key, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, key);
	CHECK(xset(path, val, (unsigned int)strlen(val)));
}

static void toolstack_keys(bool ro)
{
	put(BE_PATH, "frontend", FE_PATH);
	put(BE_PATH, "frontend-id", "5");
	put(BE_PATH, "mode", ro ? "r" : "w");
	put(BE_PATH, "params", disk_path);
	put(BE_PATH, "online", "1");
	put(BE_PATH, "state", "1");
	put(FE_PATH, "backend", BE_PATH);
}

static const char *const key_names[16] = {
	"protocol", "feature-persistent", "multi-queue-num-queues", "ring-page-order",
	NULL /* ring-ref%u */, "ring-ref", "event-channel", "state",
	"multi-queue-max-queues", "max-ring-page-order", "feature-flush-cache",
	"feature-discard", "", "queue-0", "queue-1/", "ring-ref0/x",
};

static void frontend_key(const struct fz_key *k, const uint8_t *val, size_t len)
{
	char dir[96], key[32], v[64];

	if (k->sel & 0x80)
		snprintf(dir, sizeof(dir), "%s/queue-%u", FE_PATH, (unsigned int)(k->idx >> 5));
	else
		snprintf(dir, sizeof(dir), "%s", FE_PATH);
	if (key_names[k->sel & 15])
		snprintf(key, sizeof(key), "%s", key_names[k->sel & 15]);
	else
		snprintf(key, sizeof(key), "ring-ref%u", (unsigned int)(k->idx & 31));
	memcpy(v, val, len);
	v[len] = 0;
	put(dir, key, v);
}

/* The frontend's value of key in dir as an unsigned number, or -1. */
static long long fe_value(const char *dir, const char *key)
{
	char path[256];
	struct xnode *n;
	char *end;
	unsigned long long v;

	snprintf(path, sizeof(path), "%s/%s", dir, key);
	n = xfind(path);
	if (!n || !n->len)
		return -1;
	v = strtoull(n->val, &end, 10);
	return *end ? -1 : (long long)v;
}

static void check_connected(const struct backend_dev *d, unsigned int max_q,
			    unsigned int max_order)
{
	char dir[128];

	CHECK(d->nr_queues >= 1 && d->nr_queues <= max_q);
	CHECK(d->order <= max_order);
	for (unsigned int q = 0; q < d->nr_queues; q++) {
		const struct be_queue_cfg *c = &d->queues[q].cfg;

		if (d->nr_queues == 1)
			snprintf(dir, sizeof(dir), "%s", FE_PATH);
		else
			snprintf(dir, sizeof(dir), "%s/queue-%u", FE_PATH, q);
		CHECK(fe_value(dir, "event-channel") == c->remote_port);
		for (unsigned int i = 0; i < (1u << d->order); i++) {
			char key[16];
			long long v;

			snprintf(key, sizeof(key), "ring-ref%u", i);
			v = fe_value(dir, key);
			if (v < 0 && d->order == 0)
				v = fe_value(dir, "ring-ref");
			CHECK(v == c->ring_refs[i]);
			CHECK(g_granted & (1ull << c->ring_refs[i]));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct fz_hdr h;
	struct fz_key k;
	struct be_ctx ctx = { .xs = (struct xs_handle *)&fz_plat, .plat = &fz_plat, .self = 0 };
	struct backend_dev *d = NULL;
	char num[8];
	int rc;

	init_once();
	take(&c, &h, sizeof(h));
	g_granted = h.granted;
	g_ports = h.ports;
	nmapped_refs = 0;
	tun_init();
	snprintf(num, sizeof(num), "%u", (unsigned int)(h.max_queues % 8 + 1));
	CHECK(!tun_set(TUN_MAX_QUEUES, num, false));
	snprintf(num, sizeof(num), "%u", (unsigned int)(h.max_order % 6));
	CHECK(!tun_set(TUN_MAX_RING_PAGE_ORDER, num, false));
	CHECK(!tun_set(TUN_FEATURE_PERSISTENT, h.flags & 1 ? "1" : "0", false));
	snprintf(num, sizeof(num), "%u", (unsigned int)(h.max_indirect % 1025));
	tun_set(TUN_MAX_INDIRECT_SEGMENTS, num, false);   /* may be out of range */
	/* The disk is on tmpfs, where sync_io=auto would start raw.c's
	 * helper thread with every queue; no I/O runs here (be_request
	 * fuzzes the sync_io path). */
	CHECK(!tun_set(TUN_SYNC_IO, "N", false));

	toolstack_keys(h.flags & 2);
	rc = be_dev_probe(&ctx, BE_PATH, &d);
	CHECK(d != NULL);
	if (rc == 0) {
		while (take(&c, &k, sizeof(k))) {
			uint8_t val[48];
			size_t len = k.len % 48;

			take(&c, val, len);
			frontend_key(&k, val, len);
		}
		if (!(h.flags & 8)) {
			snprintf(num, sizeof(num), "%u", (unsigned int)(h.fe_state % 8));
			put(FE_PATH, "state", num);
		}
		be_dev_changed(d);
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "state %d fatal %d queues %u order %u persistent %d\n",
				d->state, d->fatal, d->nr_queues, d->order, d->persistent);
		if (d->state == XenbusStateConnected)
			check_connected(d, h.max_queues % 8 + 1, h.max_order % 6);
		if (h.flags & 4)
			be_dev_changed(d);          /* the same event twice */
	}
	put(FE_PATH, "state", "6");                 /* the frontend closes */
	be_dev_changed(d);
	be_dev_remove(d);
	CHECK(live_maps == 0 && bound_ports == 0 && open_handles == 0 && live_threads == 0);
	check_journals();
	xclear();
	return 0;
}
