/* SPDX-License-Identifier: MIT */
/*
 * The platform layer: domains, grants and event channels.
 *
 * One interface, two implementations:
 *   xen    a thin pass-through to libxengnttab, libxengntshr, libxenevtchn
 *          (and libxenctrl for domain queries), used on a Xen host;
 *   local  no hypervisor: domains are directories under XBD_RUNDIR, guest
 *          memory and grant tables are shared-memory files, event channels
 *          are cross-process wake-ups (see Documentation/local-platform.md).
 *
 * The calls mirror the Xen libraries closely enough that the xen
 * implementation passes straight through.  Conventions for every call:
 *   - returns 0 (or a non-negative value where documented) or -errno;
 *   - logs nothing (errors are for the caller to report);
 *   - handles are not shared between threads unless the call says so
 *     (open one handle per thread, as the queue threads do);
 *   - handles do not survive fork(): the child must open its own;
 *   - ownership: every handle is owned by its opener and freed by its
 *     close/release call, which also undoes what the handle still holds
 *     (mappings, shared pages, bound ports).  Close the handles opened from
 *     a platform before closing the platform (a domain's gntshr handles
 *     keep the domain alive after xbd_domain_release()).  Addresses
 *     returned by share/map belong to the handle: never munmap or free them.
 * Common errors: -EINVAL for a domid above XBD_DOMID_MAX or a NULL/zero
 * argument; -ENOENT (local) for a domain that does not exist or is dying.
 */
#ifndef XBD_PLATFORM_H
#define XBD_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef uint16_t xbd_domid_t;
typedef uint32_t xbd_grant_ref_t;
typedef uint32_t xbd_evtchn_port_t;

#define XBD_PAGE_SIZE 4096u
#define XBD_DOMID_MAX 0x7fef          /* DOMID_FIRST_RESERVED - 1 */
#define XBD_DEFAULT_RUNDIR "/run/xbd"
#define XBD_DEFAULT_MEMORY (256ull << 20)

enum xbd_platform_kind {
	XBD_PLATFORM_AUTO,   /* xen when /dev/xen/gntdev and /dev/xen/evtchn exist */
	XBD_PLATFORM_LOCAL,
	XBD_PLATFORM_XEN,
};

struct xbd_platform;

/* "auto" | "local" | "xen" -> kind.  Returns 0 or -EINVAL. */
int xbd_platform_kind_parse(const char *s, enum xbd_platform_kind *out);
const char *xbd_platform_kind_name(enum xbd_platform_kind kind);

#define XBD_XEN_GNTDEV_PATH "/dev/xen/gntdev"
#define XBD_XEN_EVTCHN_PATH "/dev/xen/evtchn"

/*
 * What XBD_PLATFORM_AUTO resolves to: XBD_PLATFORM_XEN when both device
 * paths exist as character devices, XBD_PLATFORM_LOCAL otherwise.
 * xbd_platform_open(XBD_PLATFORM_AUTO) calls it with the two paths above;
 * tests call it with their own.  Never fails, never logs.
 */
enum xbd_platform_kind xbd_platform_kind_detect(const char *gntdev_path,
						const char *evtchn_path);

/*
 * Open the platform.  rundir: the local machine's directory; NULL means
 * $XBD_RUNDIR, or XBD_DEFAULT_RUNDIR when unset.  The local platform creates
 * rundir (mode 0755, one level) if missing and fails with -ENOENT (parent
 * missing), -EACCES, -ENOTDIR or -EROFS when it cannot be used, and
 * -ENAMETOOLONG for a path longer than about PATH_MAX - 256.  The xen
 * platform ignores rundir except for naming and fails with -ENODEV without
 * a hypervisor.  -EINVAL for an unknown kind.  *out is freed by
 * xbd_platform_close().  The handle may be shared by threads; the handles
 * opened from it may not.
 */
int xbd_platform_open(enum xbd_platform_kind kind, const char *rundir,
		      struct xbd_platform **out);
void xbd_platform_close(struct xbd_platform *p);
enum xbd_platform_kind xbd_platform_get_kind(const struct xbd_platform *p);
const char *xbd_platform_rundir(const struct xbd_platform *p);
/*
 * Is dir fit to be a run directory?  It must be a directory (not a link)
 * owned by root or by our effective uid, and not writable by group or
 * others: whoever can write it can plant links and rename our sockets.
 * 0, or -errno with a one-line reason in why (len bytes).  The local
 * platform's open checks its run directory so and logs the reason
 * (error level) when it refuses.
 */
int xbd_rundir_check(const char *dir, char *why, size_t len);

/*
 * Local platform, for the backend: survive a guest truncating its own
 * memory, grant-table or event-channel file under our mappings.
 * xbd_fault_catch() installs a process-wide SIGBUS handler (call once,
 * before threads start): a fault on a mapping of a file of
 * $rundir/dom<N>/ gets a private zero page mapped in its place (the access
 * completes, reading zeros) and counts a fault for domain N; any other
 * SIGBUS still kills.  xbd_fault_count(N): the faults counted for N so far
 * (one atomic load; compare with an earlier reading).  The mapping stays
 * useless: whoever sees the count move must stop using that domain's
 * pages (lib/platform/local_fault.c).
 */
int xbd_fault_catch(const char *rundir);
uint32_t xbd_fault_count(xbd_domid_t domid);

/* ------------------------------------------------------------------ */
/* Domains                                                             */
/* ------------------------------------------------------------------ */

struct xbd_domain_info {
	xbd_domid_t domid;
	bool exists;
	bool dying;          /* destruction has begun */
	pid_t claimed_by;    /* local: pid of the live claiming process, 0 if none */
	uint64_t memory;     /* bytes of guest memory (local), 0 if unknown */
	char name[64];       /* local: name given at creation; xen: "" */
};

/*
 * Local only (xen: -EOPNOTSUPP): create $rundir/dom<domid>/ with a sparse
 * memory file of mem_bytes (a page multiple up to 1 TiB; 0 means
 * XBD_DEFAULT_MEMORY), an empty grant table and event-channel state.
 * name: 1-63 printable characters, no '/' or blanks.  -EEXIST if the
 * domain exists, -EINVAL for a domid above XBD_DOMID_MAX or a bad size or
 * name.  Domain 0 needs no creation: any handle opened for self=0 creates
 * dom0/ on demand (without memory).
 */
int xbd_domain_create(struct xbd_platform *p, xbd_domid_t domid,
		      const char *name, uint64_t mem_bytes);
/*
 * Local only (xen: -EOPNOTSUPP): give domain domid's directory, its files
 * and (xbd-xenstored follows the directory) its xenstore socket to uid and
 * gid, so that user, or that group, can run the guest.  (uid_t)-1 or
 * (gid_t)-1 leaves that one as it is.  Call before introducing the domain.
 */
int xbd_domain_set_owner(struct xbd_platform *p, xbd_domid_t domid,
			 uid_t uid, gid_t gid);
/* Local only: mark dying, then remove the domain's files.  -EBUSY while a
 * live process has it claimed (unless force), -ENOENT if absent. */
int xbd_domain_destroy(struct xbd_platform *p, xbd_domid_t domid, bool force);
/* Both platforms: fills *info; info->exists=false (and 0 returned) for a
 * domain that does not exist.  Local: domain 0 always exists (created on
 * demand); claimed_by is -1 for a claim whose pid is not written yet. */
int xbd_domain_get_info(struct xbd_platform *p, xbd_domid_t domid,
			struct xbd_domain_info *info);

/*
 * The guest side: a process claims a domain to become it (own its memory,
 * grant pages, allocate event channels as that domain).  One live claimer
 * at a time: a second claim fails with -EBUSY; a claim left by a dead
 * process is taken over.  The claim ends with xbd_domain_release() or the
 * process's death.  -ENOENT if the domain does not exist or is dying.
 * Local: the claimer inherits the previous claimer's grant table; grants
 * nobody maps are revoked, grants still mapped stay reserved.  On xen,
 * claiming the domain the process runs in always succeeds and any other
 * domid fails with -EPERM.  Release frees *d and ends the claim once the
 * domain's gntshr handles are closed too (each holds a reference).
 */
struct xbd_domain;
int xbd_domain_claim(struct xbd_platform *p, xbd_domid_t domid,
		     struct xbd_domain **out);
void xbd_domain_release(struct xbd_domain *d);
xbd_domid_t xbd_domain_id(const struct xbd_domain *d);

/* ------------------------------------------------------------------ */
/* Grants, grantor side (like xengntshr)                               */
/* ------------------------------------------------------------------ */

struct xbd_gntshr;
/* Open a sharing handle for a claimed domain.  Several handles per domain
 * are allowed (one per thread). */
int xbd_gntshr_open(struct xbd_domain *d, struct xbd_gntshr **out);
/* Revokes what can be revoked, frees the pages; grants still mapped by a
 * peer stay allocated until the domain is released. */
void xbd_gntshr_close(struct xbd_gntshr *gs);

/*
 * Allocate count pages of the domain's memory, contiguous in this process,
 * zero-filled, and grant each to domain remote (read-only unless writable).
 * refs[count] receives the grant references; *addr the mapping, owned by
 * the handle and valid until xbd_gntshr_unshare() succeeds on it.
 * -ENOMEM when the domain's memory (local: count consecutive pages) or
 * grant table is exhausted; -EINVAL for count 0 or remote > XBD_DOMID_MAX.
 * Local: no syscall (the memory file is mapped once at claim).
 */
int xbd_gntshr_share_pages(struct xbd_gntshr *gs, xbd_domid_t remote,
			   unsigned int count, xbd_grant_ref_t *refs,
			   bool writable, void **addr);
/*
 * Revoke the grants of a share_pages() area and free its pages.  If any of
 * them is still mapped by the peer, nothing changes and -EBUSY is returned
 * (the caller defers and retries, as Linux's gnttab_end_foreign_access
 * does).  -EINVAL if addr/count is not an area of this handle.  On xen the
 * kernel (gntalloc) defers the revoke of a mapped page itself, so this
 * unmaps and returns 0; callers handle -EBUSY for the local platform.
 */
int xbd_gntshr_unshare(struct xbd_gntshr *gs, void *addr, unsigned int count);

/* ------------------------------------------------------------------ */
/* Grants, mapper side (like xengnttab)                                */
/* ------------------------------------------------------------------ */

struct xbd_gnttab;
/* self: the domain this process acts as (the backend domain).  The local
 * platform checks grants against it (it must exist: -ENOENT; domain 0 is
 * created on demand); xen ignores it (the hypervisor knows). */
int xbd_gnttab_open(struct xbd_platform *p, xbd_domid_t self,
		    struct xbd_gnttab **out);
/* Unmaps everything this handle still has mapped. */
void xbd_gnttab_close(struct xbd_gnttab *gt);

/*
 * Map count grants of domain remote contiguously (rings, or a batch of data
 * pages).  prot: PROT_READ or PROT_READ|PROT_WRITE.  Each entry must grant
 * this handle's domain (-EPERM otherwise), a writable map needs a writable
 * grant (-EPERM), a ref must be in range and in use (-EINVAL).  All or
 * nothing: on error nothing stays mapped.  A read-only map has no write
 * permission (a store faults).  -ENOENT: no such remote domain (local).
 * -EAGAIN (local): the entry kept changing, or the guest held the grant's
 * lock for more than about 10 ms.  *addr is owned by the handle until
 * xbd_gnttab_unmap() (or close).  Xen: every refused map is -EINVAL
 * (gntdev folds the hypervisor's per-grant status into one EINVAL).  Local: a map of one grant, or of grants
 * with consecutive frames, costs no mmap (a pointer into a view of the
 * remote memory mapped once per handle); the handle's first map of a ref
 * costs one fcntl.  The same grant mapped twice may return the same
 * address: unmap once per map.
 */
int xbd_gnttab_map(struct xbd_gnttab *gt, xbd_domid_t remote, unsigned int count,
		   const xbd_grant_ref_t *refs, int prot, void **addr);
/* Unmap an area returned by xbd_gnttab_map.  -EINVAL if it is not one
 * (double unmap included). */
int xbd_gnttab_unmap(struct xbd_gnttab *gt, void *addr, unsigned int count);

struct xbd_gnttab_copy_seg {
	union {
		void *virt;
		struct {
			xbd_grant_ref_t ref;
			uint16_t offset;
			xbd_domid_t domid;
		} foreign;
	} source, dest;
	uint16_t len;
	uint16_t flags;   /* XBD_GNTCOPY_source_gref | XBD_GNTCOPY_dest_gref */
	int16_t status;   /* out: 0 or -errno for this segment */
};
#define XBD_GNTCOPY_source_gref (1u << 0)
#define XBD_GNTCOPY_dest_gref   (1u << 1)

/*
 * Grant copy, batched (like xengnttab_grant_copy): each segment copies len
 * bytes within one page of a grant; copying into a grant needs a writable
 * grant.  Returns 0 when the batch was processed (per-segment results in
 * status) or -errno when it could not be attempted.  Segment status: 0,
 * -EINVAL (offset + len > XBD_PAGE_SIZE, bad ref or flags, NULL virt),
 * -EPERM (grant for another domain, or read-only and written), -ENOENT
 * (local) / -ESRCH (xen) for an unknown domain.  Local: no syscall.
 */
int xbd_gnttab_copy(struct xbd_gnttab *gt, unsigned int count,
		    struct xbd_gnttab_copy_seg *segs);

/* ------------------------------------------------------------------ */
/* Event channels (like xenevtchn)                                     */
/* ------------------------------------------------------------------ */

struct xbd_evtchn;
/* self: the domain this process acts as (local: any existing domain, domain
 * 0 created on demand, -ENOENT otherwise; at most 1024 handles per domain,
 * then -EMFILE; ignored on xen). */
int xbd_evtchn_open(struct xbd_platform *p, xbd_domid_t self,
		    struct xbd_evtchn **out);
/* Unbinds every port of this handle. */
void xbd_evtchn_close(struct xbd_evtchn *e);
/* The handle's pollable fd: readable when a port of this handle is pending. */
int xbd_evtchn_fd(struct xbd_evtchn *e);
/* Returns the new local port (> 0) or -errno: -ENOSPC when the domain's
 * ports are exhausted, -ENOENT for an unknown remote (local).
 * bind_interdomain: remote_port must be unbound and offered to this domain:
 * -EINVAL if it is out of range, free or connected, -EPERM if offered to
 * another domain.  Ports start unmasked.  Xen: bind_interdomain leaves the
 * new local port pending (the hypervisor does this on purpose, as events
 * sent to the unbound port may be lost), so expect one spurious event. */
int xbd_evtchn_bind_unbound_port(struct xbd_evtchn *e, xbd_domid_t remote);
int xbd_evtchn_bind_interdomain(struct xbd_evtchn *e, xbd_domid_t remote,
				xbd_evtchn_port_t remote_port);
/* -EINVAL for a port this handle has not bound (every call taking a port).
 * Unbinding one end of an interdomain channel makes the other end unbound. */
int xbd_evtchn_unbind(struct xbd_evtchn *e, xbd_evtchn_port_t port);
/* Send an event to the peer of port.  Coalesced: costs no syscall when the
 * remote port is already pending or masked (the peer is awake and has not
 * unmasked).  Sent on an unbound port or to a closed peer: dropped, 0.
 * Local platform: -EPROTO when the peer rewrote the port's flags under
 * every bounded attempt to set them (a hostile peer; unmask likewise). */
int xbd_evtchn_notify(struct xbd_evtchn *e, xbd_evtchn_port_t port);
/* Next pending port of this handle (> 0), or -EAGAIN if none.  The port
 * stays masked until xbd_evtchn_unmask(), as with xenevtchn; unmask
 * delivers again at once if the port was notified meanwhile.  Each call
 * takes one event (like xenevtchn_pending): call it after each poll wake-up,
 * or in a loop until -EAGAIN. */
int xbd_evtchn_pending(struct xbd_evtchn *e);
int xbd_evtchn_unmask(struct xbd_evtchn *e, xbd_evtchn_port_t port);

#endif
