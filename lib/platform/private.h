/* SPDX-License-Identifier: MIT */
/*
 * Inside the platform layer: the table of operations each implementation
 * provides, and the common head of every handle.  Only the files of lib/platform/
 * include this.
 *
 * Every public handle starts with a pointer to the platform it was opened
 * from; platform.c dispatches through p->ops.  The implementations embed
 * the public struct in their own (local_*.c: struct local_gnttab, ...;
 * xen.c: struct xen_gnttab, ...) and get back with container_of().
 */
#ifndef XBD_PLATFORM_PRIVATE_H
#define XBD_PLATFORM_PRIVATE_H

#include <limits.h>
#include <stddef.h>

#include "platform/platform.h"

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

struct platform_ops {
	void (*close)(struct xbd_platform *p);

	int (*domain_create)(struct xbd_platform *p, xbd_domid_t domid,
			     const char *name, uint64_t mem_bytes);
	int (*domain_destroy)(struct xbd_platform *p, xbd_domid_t domid, bool force);
	int (*domain_get_info)(struct xbd_platform *p, xbd_domid_t domid,
			       struct xbd_domain_info *info);
	int (*domain_claim)(struct xbd_platform *p, xbd_domid_t domid,
			    struct xbd_domain **out);
	void (*domain_release)(struct xbd_domain *d);

	int (*gntshr_open)(struct xbd_domain *d, struct xbd_gntshr **out);
	void (*gntshr_close)(struct xbd_gntshr *gs);
	int (*gntshr_share_pages)(struct xbd_gntshr *gs, xbd_domid_t remote,
				  unsigned int count, xbd_grant_ref_t *refs,
				  bool writable, void **addr);
	int (*gntshr_unshare)(struct xbd_gntshr *gs, void *addr, unsigned int count);

	int (*gnttab_open)(struct xbd_platform *p, xbd_domid_t self,
			   struct xbd_gnttab **out);
	void (*gnttab_close)(struct xbd_gnttab *gt);
	int (*gnttab_map)(struct xbd_gnttab *gt, xbd_domid_t remote,
			  unsigned int count, const xbd_grant_ref_t *refs,
			  int prot, void **addr);
	int (*gnttab_unmap)(struct xbd_gnttab *gt, void *addr, unsigned int count);
	int (*gnttab_copy)(struct xbd_gnttab *gt, unsigned int count,
			   struct xbd_gnttab_copy_seg *segs);

	int (*evtchn_open)(struct xbd_platform *p, xbd_domid_t self,
			   struct xbd_evtchn **out);
	void (*evtchn_close)(struct xbd_evtchn *e);
	int (*evtchn_fd)(struct xbd_evtchn *e);
	int (*evtchn_bind_unbound_port)(struct xbd_evtchn *e, xbd_domid_t remote);
	int (*evtchn_bind_interdomain)(struct xbd_evtchn *e, xbd_domid_t remote,
				       xbd_evtchn_port_t remote_port);
	int (*evtchn_unbind)(struct xbd_evtchn *e, xbd_evtchn_port_t port);
	int (*evtchn_notify)(struct xbd_evtchn *e, xbd_evtchn_port_t port);
	int (*evtchn_pending)(struct xbd_evtchn *e);
	int (*evtchn_unmask)(struct xbd_evtchn *e, xbd_evtchn_port_t port);
};

/* Immutable after xbd_platform_open(), so threads may share it. */
struct xbd_platform {
	const struct platform_ops *ops;
	enum xbd_platform_kind kind;
	char rundir[PATH_MAX - 256];   /* room left for "/dom<N>/<file>" */
	void *impl;               /* xen.c: its private state; local: NULL */
};

struct xbd_domain {
	struct xbd_platform *p;
	xbd_domid_t domid;
};

struct xbd_gntshr { struct xbd_platform *p; };
struct xbd_gnttab { struct xbd_platform *p; };
struct xbd_evtchn { struct xbd_platform *p; };

extern const struct platform_ops xbd_local_ops;
extern const struct platform_ops xbd_xen_ops;

/* local.c: create rundir (one level) if missing and check it is a
 * writable directory: 0, -ENOENT, -ENOTDIR, -EACCES or -EROFS. */
int xbd_local_prepare_rundir(const char *rundir);
int local_domain_set_owner(struct xbd_platform *p, xbd_domid_t domid,
			   uid_t uid, gid_t gid);

/* xen.c: sets p->impl; 0 or -errno (-ENODEV without a hypervisor). */
int xbd_xen_init(struct xbd_platform *p);
/* xen.c: the xenbus device every Xen guest has (tests point it elsewhere);
 * without privcmd, its presence tells an unprivileged domU from no Xen. */
extern const char *xbd_xen_xenbus_path;

#endif
