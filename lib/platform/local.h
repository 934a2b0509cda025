/* SPDX-License-Identifier: MIT */
/*
 * The local platform's shared layout and internal helpers (local.c,
 * local_grant.c, local_evtchn.c).  Documentation/local-platform.md
 * describes the same layout for humans.
 *
 * $XBD_RUNDIR/dom<N>/ holds, for domain N:
 *   info         "name=...\nmemory=...\n", written once at creation
 *   state        struct local_state (one page): dying is set by destroy
 *                before the directory goes, so processes with cached
 *                mappings of a dead domain's files notice without a syscall
 *   claim        OFD-write-locked by the claiming process; holds its pid
 *   memory       the guest's memory, sparse, page-granular (size = memory)
 *   gnttab       LOCAL_NR_GRANTS grant_entry_v1 entries, written by the guest
 *   active       LOCAL_NR_GRANTS uint64 pin counts ("hypervisor" state:
 *                low 32 bits all maps, high 32 bits writable maps)
 *   maptrack     lock file: byte r is OFD-read-locked by every handle that
 *                has grant r mapped, so pins of dead mappers are detectable
 *   evtchn       LOCAL_NR_PORTS struct local_port
 *   evtchn.lock  byte s is OFD-write-locked by the event-channel handle
 *                that owns slot s
 *   evtchn.<s>   FIFO: the pollable fd of the handle owning slot s; a
 *                notifier writes the 4-byte port number into it
 *
 * Everything two processes touch is accessed with __atomic builtins, and
 * everything read from another domain's files is validated after one load.
 */
#ifndef XBD_PLATFORM_LOCAL_H
#define XBD_PLATFORM_LOCAL_H

#include <pthread.h>
#include <stdint.h>
#include <xen/grant_table.h>

#include "platform/private.h"

#define LOCAL_NR_GRANTS       32768u  /* 64 frames of v1 entries, Xen 4.17's default */
#define LOCAL_NR_RESERVED     8u      /* GNTTAB_NR_RESERVED_ENTRIES: never allocated */
#define LOCAL_NR_PORTS        4096u   /* 2-level event channel ABI on 64-bit */
#define LOCAL_NR_SLOTS        1024u   /* event-channel handles per domain */
#define LOCAL_MAX_MEMORY      (1ull << 40)
/* Compare-and-swap attempts on a word another domain can write (grant
 * entries, event-channel flags) before we stop: a peer that rewrites the
 * word between our load and our CAS forever is hostile, and gets an error
 * instead of a thread of ours spinning (Documentation/security.md). */
#define LOCAL_CAS_TRIES       64

/* The 64-bit image of one grant_entry_v1, loaded and stored atomically. */
static inline uint64_t gent_pack(uint16_t flags, xbd_domid_t domid, uint32_t frame)
{
	union { grant_entry_v1_t e; uint64_t v; } u = {
		.e = { .flags = flags, .domid = domid, .frame = frame } };
	return u.v;
}

static inline grant_entry_v1_t gent_unpack(uint64_t v)
{
	union { grant_entry_v1_t e; uint64_t v; } u = { .v = v };
	return u.e;
}

#define ACTIVE_WRITER (1ull << 32)

struct local_state {
	uint32_t dying;        /* 0, then 1 for ever */
	uint32_t pad[1023];
};

/* Map dom<N>/state read-only (cached handles check ->dying). */
int local_map_state(const struct xbd_platform *p, xbd_domid_t domid,
		    const struct local_state **out);

/* One event-channel port in dom<N>/evtchn.  bind is written by the owner
 * and, on connect/disconnect, by the peer (CAS); flags by any notifier. */
struct local_port {
	uint64_t bind;     /* PORT_* state | remote domid << 8 | remote port << 32 */
	uint32_t flags;    /* PORT_PENDING | PORT_MASKED */
	uint32_t owner;    /* slot + 1 of the owning handle, 0 = none */
	uint64_t pad[2];
};

enum { PORT_FREE, PORT_RESERVED, PORT_UNBOUND, PORT_INTERDOMAIN };
#define PORT_PENDING 1u
#define PORT_MASKED  2u

static inline uint64_t port_bind(unsigned int state, xbd_domid_t dom, uint32_t port)
{
	return (uint64_t)state | (uint64_t)dom << 8 | (uint64_t)port << 32;
}

/* A claimed domain (local.c).  The claiming process's state. */
struct local_domain {
	struct xbd_domain pub;
	int claim_fd;              /* holds the OFD write lock on dom<N>/claim */
	int mem_fd;
	uint8_t *mem;              /* whole memory file, MAP_SHARED rw */
	size_t mem_pages;
	uint64_t *gnttab;          /* LOCAL_NR_GRANTS entries, MAP_SHARED */
	uint64_t *active;          /* LOCAL_NR_GRANTS pin counts, MAP_SHARED */
	int maptrack_fd;
	/* One reference for the claim (dropped by xbd_domain_release) and one
	 * per open gntshr handle: the last put frees, so a handle closed after
	 * the release still finds its domain.  Atomic: handles live on
	 * different threads. */
	unsigned int refs;
	/* lock protects the two bitmaps; taken by every gntshr handle's thread */
	pthread_mutex_t lock;
	uint64_t *ref_used;        /* LOCAL_NR_GRANTS bits (refs 0-7 always set) */
	uint64_t *page_used;       /* mem_pages bits */
	size_t ref_hint, page_hint; /* where the next search starts */
};

/* "rundir/dom<N>[/file]" into buf (PATH_MAX). */
void local_path(const struct xbd_platform *p, xbd_domid_t domid,
		const char *file, char *buf);
/* 0 if dom<N>/ exists and is not dying, creating dom0 on demand;
 * -EINVAL for a domid out of range, -ENOENT otherwise. */
int local_domain_ensure(struct xbd_platform *p, xbd_domid_t domid);
/* Map a whole file of exactly len bytes.  0 or -errno. */
int local_map_file(const struct xbd_platform *p, xbd_domid_t domid,
		   const char *file, size_t len, int prot, void **out);
/* Open dom<N>/file.  fd or -errno. */
int local_open(const struct xbd_platform *p, xbd_domid_t domid,
	       const char *file, int flags);
/* Map dom<N>/gnttab and dom<N>/active read-write and open dom<N>/maptrack.
 * On error the caller unmaps/closes what was set (non-NULL, >= 0). */
int local_open_grant_tables(const struct xbd_platform *p, xbd_domid_t domid,
			    uint64_t **gnttab, uint64_t **active, int *maptrack_fd);
/* OFD byte lock: type F_RDLCK/F_WRLCK/F_UNLCK, wait: F_OFD_SETLKW. */
int local_lock_byte(int fd, uint32_t byte, short type, bool wait);

/* local.c: take / drop a reference on a claimed domain (see refs). */
void local_domain_get(struct local_domain *d);
void local_domain_put(struct local_domain *d);

/* local_grant.c: revoke grant ref of a claimed domain.  On success the
 * entry is 0 and the pins are 0 (stale pins of dead mappers reclaimed);
 * -EBUSY (entry restored) while a live handle has it mapped. */
int local_revoke_ref(struct local_domain *d, xbd_grant_ref_t ref);

/* Operation tables of local_grant.c and local_evtchn.c. */
int local_gntshr_open(struct xbd_domain *d, struct xbd_gntshr **out);
void local_gntshr_close(struct xbd_gntshr *gs);
int local_gntshr_share_pages(struct xbd_gntshr *gs, xbd_domid_t remote,
			     unsigned int count, xbd_grant_ref_t *refs,
			     bool writable, void **addr);
int local_gntshr_unshare(struct xbd_gntshr *gs, void *addr, unsigned int count);
int local_gnttab_open(struct xbd_platform *p, xbd_domid_t self,
		      struct xbd_gnttab **out);
void local_gnttab_close(struct xbd_gnttab *gt);
int local_gnttab_map(struct xbd_gnttab *gt, xbd_domid_t remote,
		     unsigned int count, const xbd_grant_ref_t *refs,
		     int prot, void **addr);
int local_gnttab_unmap(struct xbd_gnttab *gt, void *addr, unsigned int count);
int local_gnttab_copy(struct xbd_gnttab *gt, unsigned int count,
		      struct xbd_gnttab_copy_seg *segs);

int local_evtchn_open(struct xbd_platform *p, xbd_domid_t self,
		      struct xbd_evtchn **out);
void local_evtchn_close(struct xbd_evtchn *e);
int local_evtchn_fd(struct xbd_evtchn *e);
int local_evtchn_bind_unbound_port(struct xbd_evtchn *e, xbd_domid_t remote);
int local_evtchn_bind_interdomain(struct xbd_evtchn *e, xbd_domid_t remote,
				  xbd_evtchn_port_t remote_port);
int local_evtchn_unbind(struct xbd_evtchn *e, xbd_evtchn_port_t port);
int local_evtchn_notify(struct xbd_evtchn *e, xbd_evtchn_port_t port);
int local_evtchn_pending(struct xbd_evtchn *e);
int local_evtchn_unmask(struct xbd_evtchn *e, xbd_evtchn_port_t port);

#endif
