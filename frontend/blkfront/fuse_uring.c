/* SPDX-License-Identifier: MIT */
/*
 * xbd-blkfront's FUSE transport over io_uring (FUSE_OVER_IO_URING, Linux
 * 6.14 and later), beside libfuse 3.14, which knows only /dev/fuse.
 *
 * libfuse keeps the session and the handlers (fs.c); this file takes its
 * reads and writes of /dev/fuse (fuse_session_custom_io):
 * - the read hook notes the kernel's INIT: its unique and whether the
 *   kernel offers io_uring (FUSE_OVER_IO_URING in flags2; only when the
 *   fuse module's enable_uring is Y);
 * - the writev hook adds FUSE_OVER_IO_URING to libfuse's INIT answer
 *   (unless --fuse-uring=off), and once the kernel took it, starts one
 *   ring thread per kernel queue (one per possible CPU: the kernel queues
 *   a request on the queue of the CPU its caller runs on); each registers
 *   FU_ENTRIES ring entries (IORING_OP_URING_CMD, FUSE_IO_URING_CMD_REGISTER)
 *   on its own io_uring.  When every queue has entries the kernel sends
 *   its requests through them, and /dev/fuse carries only what it keeps
 *   there (FORGET, INTERRUPT), still served by libfuse's workers;
 * - a ring thread's completion is a request in an entry: it puts the
 *   fuse_in_header and the first argument right before the payload (the
 *   entry's buffer has FU_HEADROOM for them), so libfuse sees the one
 *   contiguous request it would have read (fuse_session_process_buf);
 * - the writev hook sees every answer, from whichever thread gives it
 *   (the ring thread itself, a disk's completion thread): the answer to a
 *   request of an entry (found by its unique in fu.tab) is copied into
 *   the entry and put on its queue's done list; the ring thread commits
 *   it with FUSE_IO_URING_CMD_COMMIT_AND_FETCH (commit_id = unique),
 *   which also makes the entry fetch the next request; any other answer
 *   goes to /dev/fuse.
 * A handler may not read its request's buffer after answering it (the
 * commit hands the entry back to the kernel): fs.c's copy what they keep.
 *
 * Why the ring thread commits: the kernel gives a request to a waiting
 * entry as task work of the task that submitted the entry's last command.
 * Committed by a completion thread, every request interrupted that
 * thread first (its poll), which then woke the ring thread; committed by
 * the ring thread (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN), the work
 * runs in the ring thread's own wait.  Answerers wake it once per batch
 * (an eventfd the ring keeps a read on; fuse_uring_batch: one write per
 * libxbdfront reap), and it submits the commits and waits in one
 * io_uring_enter.
 *
 * Threads and locks: the ring thread of queue q alone submits to and
 * reaps q's ring, and runs the handlers of the requests q brings;
 * q->lock: q's done list and its flags (any answering thread).
 * fu.lock: fu.tab.
 * Lifetime: the rings, entries and buffers live from just before the
 * INIT answer (prepare_rings) to fuse_uring_release(), after the unmount
 * (the kernel ends every entry: -ENOTCONN), the ring threads' exit and
 * the drain of every answer.  fu.active is set before the first REGISTER
 * (start_rings): from then on an answer goes to its entry.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <liburing.h>
#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "frontend/blkfront/fuse_uring.h"
#include "frontend/blkfront/fuse_uring_abi.h"
#include "lib/log.h"

/* Entries per queue: a queue serves this many requests at once (the
 * kernel queues more until one is committed).  QD64 of one process
 * lands on one queue. */
#define FU_ENTRIES 64
/* Queues (possible CPUs) beyond this: /dev/fuse (the buffers would be
 * FU_ENTRIES x 1 MiB each). */
#define FU_MAX_QUEUES 64
/* Room before an entry's payload for the fuse_in_header and the first
 * argument (at most FUSE_URING_OP_IN_OUT_SZ); a page keeps the payload
 * page aligned. */
#define FU_HEADROOM 4096
/* The least payload the kernel accepts (FUSE_MIN_READ_BUFFER) */
#define FU_MIN_PAYLOAD 8192
/* How long fuse_uring_stop waits for the kernel to end the entries */
#define FU_STOP_TIMEOUT_S 10
#define FU_ENABLE_PATH "/sys/module/fuse/parameters/enable_uring"
#define FU_CPUS_PATH "/sys/devices/system/cpu/possible"

struct fu_queue;

/* One ring entry.  Owned by the kernel from its REGISTER or COMMIT until
 * its completion, then by its ring thread and the request's answerer. */
struct fu_ent {
	struct fuse_uring_req_header hdr;   /* iov[0]: the kernel's and ours */
	struct iovec iov[2];                /* the REGISTER's: hdr, payload */
	char *payload;                      /* FU_HEADROOM into its slot */
	struct fu_queue *q;
	uint64_t unique;                    /* the request it holds (fu.lock) */
	uint64_t commit_id;                 /* its answer's, for the ring thread */
};

struct fu_queue {
	pthread_mutex_t lock;               /* done, ndone, kicked, stopping */
	struct io_uring ring;               /* the ring thread's alone */
	int efd;                            /* eventfd: done has entries, or stop */
	uint64_t efd_val;                   /* the ring thread's read of efd */
	struct fu_ent *done[FU_ENTRIES];    /* answered, to be committed */
	unsigned int ndone;
	bool kicked;                        /* efd written since done was taken */
	bool stopping;                      /* fuse_uring_stop gave up waiting */
	bool ring_ok, started;
	bool inited;                        /* lock and registered exist */
	unsigned int qid;
	pthread_t th;
	sem_t registered;                   /* posted once reg_rc is set */
	int reg_rc;                         /* the registration: 0 or -errno */
	struct fu_ent *ents;                /* FU_ENTRIES */
	char *mem;                          /* the entries' buffers */
	size_t memlen;
};

static struct {
	struct fuse_session *se;
	enum fuse_uring_mode mode;
	int fd;                             /* /dev/fuse */
	/* the INIT: set by the worker that reads it, used by the same
	 * worker's answer (libfuse answers INIT in the handler) */
	uint64_t init_unique;
	bool offered;                       /* the kernel offers io_uring */
	bool init_done;                     /* atomic: the INIT was answered */
	bool active;                        /* atomic: rings serve requests */
	bool failed;                        /* --fuse-uring=on could not */
	struct fu_queue *q;
	unsigned int nq;
	size_t payload;                     /* bytes of each entry's payload */
	pthread_mutex_t lock;               /* tab */
	struct fu_ent **tab;                /* unique -> entry, linear probing */
	size_t tabmask;
	unsigned long served;               /* atomic: requests of the rings */
} fu = { .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

/* A batch of answers (fuse_uring_batch), per thread: the commits are
 * queued on their rings and submitted at the batch's end, one
 * io_uring_enter per ring rather than one per answer. */
static __thread unsigned int batch_depth;
static __thread uint64_t batch_queues;    /* bit qid: commits queued on q */

int fuse_uring_mode_parse(const char *s, enum fuse_uring_mode *mode)
{
	static const char *const names[] = { "off", "auto", "on" };

	for (unsigned int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*mode = (enum fuse_uring_mode)i;
			return 0;
		}
	return -EINVAL;
}

bool fuse_uring_failed(void)
{
	return fu.failed;
}

/* ---- unique -> entry ------------------------------------------------------- */

static size_t tab_slot(uint64_t unique)
{
	return (size_t)((unique * 0x9e3779b97f4a7c15ULL) >> 32) & fu.tabmask;
}

static void tab_put(struct fu_ent *e)
{
	pthread_mutex_lock(&fu.lock);
	size_t i = tab_slot(e->unique);

	while (fu.tab[i])                   /* never full: 4 x the entries */
		i = (i + 1) & fu.tabmask;
	fu.tab[i] = e;
	pthread_mutex_unlock(&fu.lock);
}

/* The entry holding request unique, taken out of the table, or NULL. */
static struct fu_ent *tab_take(uint64_t unique)
{
	struct fu_ent *e = NULL;
	size_t i, j;

	pthread_mutex_lock(&fu.lock);
	for (i = tab_slot(unique); fu.tab[i]; i = (i + 1) & fu.tabmask)
		if (fu.tab[i]->unique == unique) {
			e = fu.tab[i];
			break;
		}
	if (e) {
		/* backward-shift deletion keeps every probe chain whole */
		for (j = (i + 1) & fu.tabmask; fu.tab[j]; j = (j + 1) & fu.tabmask) {
			size_t k = tab_slot(fu.tab[j]->unique);

			if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
				fu.tab[i] = fu.tab[j];
				i = j;
			}
		}
		fu.tab[i] = NULL;
		e->unique = 0;
	}
	pthread_mutex_unlock(&fu.lock);
	return e;
}

/* ---- submission ------------------------------------------------------------- */

/* Queue one command of e on q's ring (the ring thread). */
static int prep_cmd(struct fu_queue *q, struct fu_ent *e, uint32_t op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct fuse_uring_cmd_req cr = { .commit_id = commit_id, .qid = (uint16_t)q->qid };

	if (!sqe)
		return -EBUSY;               /* cannot be: one command per entry */
	memset(sqe, 0, 2 * sizeof(*sqe));    /* IORING_SETUP_SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fu.fd;
	sqe->cmd_op = op;
	if (op == FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)e->iov;
		sqe->len = 2;
	}
	memcpy(sqe->cmd, &cr, sizeof(cr));
	io_uring_sqe_set_data(sqe, e);
	return 0;
}

/* Wake q's ring thread (efd). */
static void kick(struct fu_queue *q)
{
	uint64_t one = 1;

	while (write(q->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;                               /* EAGAIN: it is awake already */
}

/* The thread's own queue, on a ring thread (its answers need no kick). */
static __thread struct fu_queue *self_q;

/*
 * Hand e back to the kernel with its answer (written into e): the ring
 * thread submits the COMMIT_AND_FETCH, so that the kernel's next request
 * for e is task work of that thread (the submitter's), not of ours.
 * The first answer since the ring thread took the list wakes it; in a
 * batch, at the batch's end.
 */
static int commit(struct fu_ent *e, uint64_t unique)
{
	struct fu_queue *q = e->q;
	bool wake;

	e->commit_id = unique;
	pthread_mutex_lock(&q->lock);
	q->done[q->ndone++] = e;            /* one slot per entry: never full */
	wake = !q->kicked && self_q != q;
	if (wake)
		q->kicked = true;
	pthread_mutex_unlock(&q->lock);
	if (wake && batch_depth)
		batch_queues |= 1ULL << q->qid;  /* qid < FU_MAX_QUEUES */
	else if (wake)
		kick(q);
	return 0;
}

void fuse_uring_batch(bool end)
{
	if (!end) {
		batch_depth++;
		return;
	}
	if (!batch_depth || --batch_depth)
		return;
	while (batch_queues) {
		unsigned int qid = (unsigned int)__builtin_ctzll(batch_queues);

		batch_queues &= batch_queues - 1;
		kick(&fu.q[qid]);
	}
}

/* Answer the request of e: the out header, then the arguments (count
 * iovecs after it) in the payload. */
static ssize_t answer(struct fu_ent *e, const struct iovec *iov, int count, uint64_t unique)
{
	struct fuse_uring_ent_in_out io = { .commit_id = unique };
	struct fuse_out_header oh;
	size_t n = 0, total = iov[0].iov_len;
	int rc;

	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > fu.payload - n) {
			oh.error = -EIO;             /* libfuse answers at most max_write */
			n = 0;
			break;
		}
		memcpy(e->payload + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
		total += iov[i].iov_len;
	}
	oh.len = (uint32_t)(sizeof(oh) + n);
	io.payload_sz = (uint32_t)n;
	memcpy(e->hdr.in_out, &oh, sizeof(oh));
	memcpy(&e->hdr.ring_ent_in_out, &io, sizeof(io));
	rc = commit(e, unique);
	if (rc) {
		errno = -rc;
		return -1;
	}
	return (ssize_t)total;
}

/* ---- the ring threads ------------------------------------------------------- */

/* A request arrived in e: give it to libfuse as one buffer. */
static void serve(struct fu_ent *e)
{
	struct fuse_in_header ih;
	struct fuse_uring_ent_in_out io;
	size_t hl = sizeof(ih), oplen;
	char *start;

	/* copied once, then checked: the kernel wrote them */
	memcpy(&ih, e->hdr.in_out, sizeof(ih));
	memcpy(&io, &e->hdr.ring_ent_in_out, sizeof(io));
	if (!ih.unique || ih.unique != io.commit_id || io.payload_sz > fu.payload ||
	    ih.len < hl + io.payload_sz ||
	    ih.len - hl - io.payload_sz > FUSE_URING_OP_IN_OUT_SZ) {
		struct fuse_out_header oh = { .len = sizeof(oh), .error = -EIO,
					      .unique = io.commit_id };
		struct iovec v = { &oh, sizeof(oh) };

		log_warn("fuse io_uring queue %u: malformed request (len %u, payload %u)",
			 e->q->qid, ih.len, io.payload_sz);
		(void)answer(e, &v, 1, io.commit_id);
		return;
	}
	oplen = ih.len - hl - io.payload_sz;
	start = e->payload - hl - oplen;
	memcpy(start, &ih, hl);
	memcpy(start + hl, e->hdr.op_in, oplen);
	e->unique = ih.unique;
	tab_put(e);
	__atomic_add_fetch(&fu.served, 1, __ATOMIC_RELAXED);
	fuse_session_process_buf(fu.se, &(struct fuse_buf){ .size = ih.len, .mem = start });
}

/* Submit q's SQ, and with wait, wait for a completion: 0 or -errno. */
static int submit(struct fu_queue *q, bool wait)
{
	int rc = wait ? io_uring_submit_and_wait(&q->ring, 1) : io_uring_submit(&q->ring);

	return rc < 0 ? rc : 0;
}

/* The read of efd, again (user data: efd_val). */
static void arm_kick(struct fu_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe)
		return;                         /* cannot be: it has its own slot */
	io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
	io_uring_sqe_set_data(sqe, &q->efd_val);
}

/* Register every entry of q; the result in q->reg_rc.  A failed
 * REGISTER completes at once, within the submit. */
static int register_all(struct fu_queue *q)
{
	struct io_uring_cqe *cqe;
	int rc = 0;

	/* IORING_SETUP_SINGLE_ISSUER: this thread is the submitter */
	rc = syscall(__NR_io_uring_register, q->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
		     NULL, 0) ? -errno : 0;   /* liburing 2.3 has no call for it */
	for (unsigned int i = 0; i < FU_ENTRIES && !rc; i++)
		rc = prep_cmd(q, &q->ents[i], FUSE_IO_URING_CMD_REGISTER, 0);
	if (!rc)
		rc = submit(q, false);
	if (!rc && !io_uring_peek_cqe(&q->ring, &cqe) && cqe->res < 0)
		rc = cqe->res;                  /* left for the loop to count */
	return rc;
}

static void *queue_main(void *arg)
{
	struct fu_queue *q = arg;
	unsigned int live = FU_ENTRIES;     /* entries the kernel has not ended */
	struct io_uring_cqe *cqes[2 * FU_ENTRIES + 2];
	struct fu_ent *got[2 * FU_ENTRIES + 2], *todo[FU_ENTRIES];
	bool stop = false;

	self_q = q;
	q->reg_rc = register_all(q);
	sem_post(&q->registered);
	arm_kick(q);                        /* fuse_uring_stop's way in, too */
	while (live && !stop) {
		unsigned int n, k = 0, nt;
		int rc;

		/* the answers to commit: every thread's, this one's too */
		pthread_mutex_lock(&q->lock);
		nt = q->ndone;
		memcpy(todo, q->done, nt * sizeof(*todo));
		q->ndone = 0;
		q->kicked = false;
		stop = q->stopping;
		pthread_mutex_unlock(&q->lock);
		for (unsigned int i = 0; i < nt; i++)
			if (prep_cmd(q, todo[i], FUSE_IO_URING_CMD_COMMIT_AND_FETCH,
				     todo[i]->commit_id))
				log_warn("fuse io_uring queue %u: cannot commit an answer", q->qid);
		/* one io_uring_enter: the commits, then the wait */
		rc = submit(q, !stop);
		if (rc && rc != -EINTR && rc != -ETIME) {
			log_warn("fuse io_uring queue %u: %s", q->qid, strerror(-rc));
			break;
		}
		n = io_uring_peek_batch_cqe(&q->ring, cqes, 2 * FU_ENTRIES + 2);
		for (unsigned int i = 0; i < n; i++) {
			void *data = io_uring_cqe_get_data(cqes[i]);

			if (data == &q->efd_val)
				arm_kick(q);          /* the list is taken above */
			else if (cqes[i]->res < 0)
				live--;               /* ended: unmount, abort, or refused */
			else
				got[k++] = data;
		}
		io_uring_cq_advance(&q->ring, n);
		for (unsigned int i = 0; i < k; i++)
			serve(got[i]);
	}
	return NULL;
}

/* ---- start ------------------------------------------------------------------- */

/* The kernel's queues: possible CPUs (the last of FU_CPUS_PATH + 1). */
static unsigned int possible_cpus(void)
{
	char buf[256] = "";
	FILE *f = fopen(FU_CPUS_PATH, "r");
	unsigned long n = 0;
	char *p;

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	for (p = buf; *p; ) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p)
			break;
		n = v + 1;                      /* ranges and lists are ascending */
		p = *end ? end + 1 : end;
	}
	return n > FU_MAX_QUEUES ? FU_MAX_QUEUES + 1 : (unsigned int)n;
}

/* q's entries, buffers and ring (its thread comes later): 0 or -errno. */
static int queue_init(struct fu_queue *q, unsigned int qid)
{
	size_t slot = FU_HEADROOM + fu.payload;
	int rc;

	q->qid = qid;
	q->efd = -1;
	pthread_mutex_init(&q->lock, NULL);
	sem_init(&q->registered, 0, 0);
	q->inited = true;
	q->ents = calloc(FU_ENTRIES, sizeof(*q->ents));
	q->memlen = slot * FU_ENTRIES;
	q->mem = mmap(NULL, q->memlen, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (q->mem == MAP_FAILED)
		q->mem = NULL;
	if (!q->ents || !q->mem)
		return -ENOMEM;
	for (unsigned int i = 0; i < FU_ENTRIES; i++) {
		struct fu_ent *e = &q->ents[i];

		e->q = q;
		e->payload = q->mem + i * slot + FU_HEADROOM;
		e->iov[0] = (struct iovec){ &e->hdr, sizeof(e->hdr) };
		e->iov[1] = (struct iovec){ e->payload, fu.payload };
	}
	q->efd = eventfd(0, EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	/* the entries' commands and the read of efd; only the ring thread
	 * submits (it enables the ring), and the kernel's task work (a
	 * request for an entry) waits for that thread's io_uring_enter */
	rc = io_uring_queue_init(2 * FU_ENTRIES, &q->ring,
				 IORING_SETUP_SQE128 | IORING_SETUP_R_DISABLED |
				 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	q->ring_ok = !rc;
	return rc;
}

/*
 * Before the INIT answer, everything that can fail on our side: the
 * table, the queues, their buffers and rings, sized for an answer with
 * max_write and max_pages.  Once the kernel took FUSE_OVER_IO_URING it
 * holds every request until each queue has registered entries (there is
 * no going back to /dev/fuse), so the answer asks for io_uring only when
 * this succeeded.  0, or -errno with why (static text) in *why; what was
 * made is freed by fuse_uring_release().
 */
static int prepare_rings(uint32_t max_write, uint16_t max_pages, const char **why)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned int n = possible_cpus();
	int rc = 0;

	fu.payload = FU_MIN_PAYLOAD;
	if (max_write > fu.payload)
		fu.payload = max_write;
	if ((size_t)max_pages * page > fu.payload)
		fu.payload = (size_t)max_pages * page;
	*why = "too many possible CPUs";
	if (!n || n > FU_MAX_QUEUES)
		return -E2BIG;
	*why = "no memory";
	fu.tabmask = 1;
	while (fu.tabmask < 4u * FU_ENTRIES * n)
		fu.tabmask <<= 1;
	fu.tab = calloc(fu.tabmask, sizeof(*fu.tab));
	fu.tabmask--;
	fu.q = calloc(n, sizeof(*fu.q));
	if (!fu.tab || !fu.q)
		return -ENOMEM;
	fu.nq = n;
	for (unsigned int i = 0; i < n; i++)
		fu.q[i].efd = -1;               /* a queue_init that did not run */
	*why = "setting up a queue";
	for (unsigned int i = 0; i < n && !rc; i++)
		rc = queue_init(&fu.q[i], i);
	return rc;
}

/*
 * After the INIT answer took io_uring: the ring threads register their
 * entries.  Answers look for their entry from now on: the kernel sends
 * a request through a ring as soon as the last queue registered, before
 * the wait here is over, and such an answer written to /dev/fuse would
 * be lost (its caller waiting for ever, its entry never back).
 * 0, or -errno (the kernel refused an entry).
 */
static int start_rings(void)
{
	int rc = 0;

	__atomic_store_n(&fu.active, true, __ATOMIC_RELEASE);
	for (unsigned int i = 0; i < fu.nq && !rc; i++) {
		rc = -pthread_create(&fu.q[i].th, NULL, queue_main, &fu.q[i]);
		fu.q[i].started = !rc;
	}
	for (unsigned int i = 0; i < fu.nq; i++)
		if (fu.q[i].started) {
			sem_wait(&fu.q[i].registered);
			if (!rc)
				rc = fu.q[i].reg_rc;
		}
	return rc;
}

/* Why the kernel does not offer io_uring, as text. */
static const char *not_offered(void)
{
	FILE *f = fopen(FU_ENABLE_PATH, "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	if (c == 'N')
		return "the kernel does not offer it (" FU_ENABLE_PATH " is N)";
	return "the kernel does not offer it";
}

/* io_uring is not used, for why: said; with --fuse-uring=on, or when the
 * kernel took io_uring but the rings did not start (fatal), the session
 * ends: the worker answering INIT ends the loop once it returns (nothing
 * of ours waits on the mount, see fs.c's tune_bdi). */
static void no_rings(const char *why, bool fatal)
{
	log_info("FUSE transport: /dev/fuse (%s)", why);
	if (fu.mode == FUSE_URING_ON)
		log_err("--fuse-uring=on: io_uring cannot be used");
	if (fu.mode == FUSE_URING_ON || fatal) {
		fu.failed = true;
		fuse_session_exit(fu.se);
	}
}

/* ---- the hooks ---------------------------------------------------------------- */

static ssize_t fu_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	struct fuse_in_header ih;
	struct fuse_init_in in = { 0 };
	size_t hl = sizeof(ih);

	(void)userdata;
	if (n < (ssize_t)hl || __atomic_load_n(&fu.init_done, __ATOMIC_ACQUIRE))
		return n;
	memcpy(&ih, buf, hl);
	if (ih.opcode != FUSE_INIT)
		return n;
	memcpy(&in, (char *)buf + hl, (size_t)n - hl < sizeof(in) ? (size_t)n - hl : sizeof(in));
	fu.offered = (in.flags & FUSE_INIT_EXT) &&
		     (in.flags2 & (uint32_t)(FUSE_OVER_IO_URING >> 32));
	fu.init_unique = ih.unique;
	return n;
}

/* libfuse's INIT answer: with FUSE_OVER_IO_URING when wanted and the
 * rings could be made; then the rings start. */
static ssize_t init_answer(int fd, struct iovec *iov, int count)
{
	struct fuse_init_out out = { 0 };
	struct iovec v[2];
	const char *why = "--fuse-uring=off";
	bool ok = count == 2 && iov[1].iov_len <= sizeof(out) &&
		  iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(out.flags2) &&
		  !((struct fuse_out_header *)iov[0].iov_base)->error;
	bool want = false;
	ssize_t res;
	int rc;

	if (fu.mode != FUSE_URING_OFF)
		why = fu.offered ? "libfuse's INIT answer is not one we know" : not_offered();
	if (fu.mode != FUSE_URING_OFF && fu.offered && ok) {
		memcpy(&out, iov[1].iov_base, iov[1].iov_len);
		rc = prepare_rings(out.max_write, out.max_pages, &why);
		want = !rc;
		if (rc)
			log_warn("FUSE io_uring: %s: %s", why, strerror(-rc));
	}
	if (want) {
		out.flags |= FUSE_INIT_EXT;
		out.flags2 |= (uint32_t)(FUSE_OVER_IO_URING >> 32);
		v[0] = iov[0];
		v[1] = (struct iovec){ &out, iov[1].iov_len };
		iov = v;
	}
	res = writev(fd, iov, count);
	if (res < 0 || !want) {
		no_rings(res < 0 ? "the INIT answer was not taken" : why, false);
		return res;
	}
	rc = start_rings();
	if (rc) {
		/* the kernel holds every request for rings that will not come */
		log_err("FUSE io_uring: the kernel refused a ring entry: %s", strerror(-rc));
		no_rings("the rings did not start", true);
		return res;
	}
	log_info("FUSE transport: io_uring, %u queues of %u entries", fu.nq, FU_ENTRIES);
	return res;
}

static ssize_t fu_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fuse_out_header oh;
	struct fu_ent *e;

	(void)userdata;
	if (count < 1 || iov[0].iov_len < sizeof(oh))
		return writev(fd, iov, count);
	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	if (fu.init_unique && oh.unique == fu.init_unique &&
	    !__atomic_exchange_n(&fu.init_done, true, __ATOMIC_ACQ_REL))
		return init_answer(fd, iov, count);
	if (!oh.unique || !__atomic_load_n(&fu.active, __ATOMIC_ACQUIRE))
		return writev(fd, iov, count);
	e = tab_take(oh.unique);
	return e ? answer(e, iov, count, oh.unique) : writev(fd, iov, count);
}

#define FU_ENABLE_PARAM "/sys/module/fuse/parameters/enable_uring"

/* Whether the fuse module would offer io_uring at a mount's INIT. */
static bool fu_kernel_enabled(void)
{
	char c = 0;
	int fd = open(FU_ENABLE_PARAM, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	return c == 'Y';
}

int fuse_uring_attach(struct fuse_session *se, enum fuse_uring_mode mode)
{
	static const struct fuse_custom_io io = { .read = fu_read, .writev = fu_writev };
	int rc;

	fu.se = se;
	fu.mode = mode;
	fu.fd = fuse_session_fd(se);
	if (mode == FUSE_URING_OFF) {
		log_info("FUSE transport: /dev/fuse (--fuse-uring=off)");
		return 0;                       /* libfuse's own reads and writes */
	}
	/* The kernel offers io_uring at INIT only while the fuse module's
	 * enable_uring is Y: refuse "on" here, before any request, rather
	 * than at INIT, where the loop's workers sit in read(2). */
	if (mode == FUSE_URING_ON && !fu_kernel_enabled()) {
		log_err("--fuse-uring=on: io_uring cannot be used (%s is not Y)", FU_ENABLE_PARAM);
		return -EOPNOTSUPP;
	}
	rc = fuse_session_custom_io(se, &io, fu.fd);
	if (rc)
		log_err("cannot take over the FUSE transport: %s", strerror(-rc));
	return rc;
}

/* ---- stop ---------------------------------------------------------------------- */

void fuse_uring_stop(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += FU_STOP_TIMEOUT_S;
	for (unsigned int i = 0; i < fu.nq; i++) {
		struct fu_queue *q = &fu.q[i];

		if (!q->started)
			continue;
		if (pthread_timedjoin_np(q->th, NULL, &until)) {
			log_warn("fuse io_uring queue %u: entries not ended by the kernel, "
				 "stopping the thread", q->qid);
			pthread_mutex_lock(&q->lock);
			q->stopping = true;
			pthread_mutex_unlock(&q->lock);
			kick(q);
			pthread_join(q->th, NULL);
		}
		q->started = false;
	}
}

void fuse_uring_release(void)
{
	if (fu.q && __atomic_load_n(&fu.active, __ATOMIC_ACQUIRE))
		log_info("FUSE io_uring: %lu requests served through the rings",
			 __atomic_load_n(&fu.served, __ATOMIC_RELAXED));
	__atomic_store_n(&fu.active, false, __ATOMIC_RELEASE);
	fuse_uring_stop();                  /* idempotent; for a failed start */
	for (unsigned int i = 0; fu.q && i < fu.nq; i++) {
		struct fu_queue *q = &fu.q[i];

		if (q->ring_ok)
			io_uring_queue_exit(&q->ring);
		if (q->mem)
			munmap(q->mem, q->memlen);
		if (q->efd >= 0)
			close(q->efd);
		free(q->ents);
		if (q->inited) {            /* not when a queue before it failed */
			sem_destroy(&q->registered);
			pthread_mutex_destroy(&q->lock);
		}
	}
	free(fu.q);
	free(fu.tab);
	fu.q = NULL;
	fu.tab = NULL;
	fu.nq = 0;
}
