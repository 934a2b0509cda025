/* SPDX-License-Identifier: MIT */
/*
 * Local platform: event channels.
 *
 * Every domain has a port table (dom<N>/evtchn, struct local_port) that all
 * processes acting for or talking to the domain map shared.  A handle owns
 * a slot s (an OFD write lock on byte s of dom<N>/evtchn.lock, so a dead
 * handle's slot is recognisable and reusable) and the FIFO dom<N>/evtchn.<s>,
 * which is the handle's pollable fd.
 *
 * notify(port) sets PENDING on the peer port with one CAS.  Only when the
 * port goes from not pending to pending while unmasked does the notifier
 * also set MASKED and write the 4-byte port number into the owner's FIFO:
 * that is the only syscall, and it wakes the owner's poll().  While the
 * port is pending or masked (the owner is awake and working), notifies are
 * a single atomic operation.  pending() reads one port number from the FIFO
 * and clears PENDING; the port stays MASKED until unmask(), which delivers
 * again at once if a notify came meanwhile (as xenevtchn does).
 *
 * No daemon is involved: the notifier writes straight into the peer's
 * table and FIFO.  Whatever is read from a table or FIFO another process
 * writes is range-checked before use.
 *
 * Threads: as with libxenevtchn, several threads may notify (and unmask)
 * through one handle at once: libxbdfront notifies outside its channel
 * lock, so two submitters of one queue do (ThreadSanitizer caught two
 * threads growing the list of peer tables at once).  The caches a handle
 * grows on first use (the peer tables it mapped, their FIFOs it opened)
 * are read without a lock, each entry published complete with a release
 * store, and grown under grow_lock, which looks again before it adds.
 * Entries live until close.  Open, bind and close: one thread, with no
 * other using the handle.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/local.h"

#define PORTS_LEN (LOCAL_NR_PORTS * sizeof(struct local_port))

/* A domain whose port table this handle has mapped, with the FIFOs of its
 * slots opened on first notify (O_RDWR, so a write never gets SIGPIPE). */
struct ev_domain {
	struct ev_domain *next;
	xbd_domid_t domid;
	bool stale;                 /* atomic: the domain died; a new one gets a new entry */
	const struct local_state *state;
	struct local_port *ports;
	int fifo[LOCAL_NR_SLOTS];   /* atomic; -1: not opened yet (grow_lock) */
};

/* Threads: see the top of the file; close unbinds our ports, then frees. */
struct local_evtchn {
	struct xbd_evtchn pub;
	xbd_domid_t self;
	uint32_t slot;
	int lock_fd;                /* holds the slot's byte lock */
	int fifo_fd;                /* our FIFO: the pollable fd */
	struct ev_domain *doms;     /* atomic head: every table mapped, self's
	                             * included; grown under grow_lock */
	pthread_mutex_t grow_lock;
	struct ev_domain *own;      /* self's, in doms */
};

static uint32_t port_state(uint64_t bind) { return (uint32_t)(bind & 0xff); }
static xbd_domid_t port_dom(uint64_t bind) { return (xbd_domid_t)(bind >> 8); }
static uint32_t port_peer(uint64_t bind) { return (uint32_t)(bind >> 32); }

static void ev_domain_free(struct ev_domain *ed)
{
	for (unsigned int s = 0; s < LOCAL_NR_SLOTS; s++) {
		if (ed->fifo[s] >= 0)
			close(ed->fifo[s]);
	}
	if (ed->ports)
		munmap(ed->ports, PORTS_LEN);
	if (ed->state)
		munmap((void *)ed->state, sizeof(*ed->state));
	free(ed);
}

static struct ev_domain *ev_domain_find(struct local_evtchn *e, xbd_domid_t domid)
{
	struct ev_domain *ed;

	for (ed = __atomic_load_n(&e->doms, __ATOMIC_ACQUIRE); ed; ed = ed->next) {
		if (ed->domid != domid || __atomic_load_n(&ed->stale, __ATOMIC_RELAXED))
			continue;
		if (ed != e->own && __atomic_load_n(&ed->state->dying, __ATOMIC_ACQUIRE)) {
			/* destroyed, maybe re-created: look again */
			__atomic_store_n(&ed->stale, true, __ATOMIC_RELAXED);
			continue;
		}
		return ed;
	}
	return NULL;
}

/* Map domid's table and add it to the list.  grow_lock held. */
static int ev_domain_add(struct local_evtchn *e, xbd_domid_t domid,
			 struct ev_domain **out)
{
	struct ev_domain *ed = ev_domain_find(e, domid);
	void *m;
	int rc;

	if (ed) {                     /* another thread added it meanwhile */
		*out = ed;
		return 0;
	}
	rc = local_domain_ensure(e->pub.p, domid);
	if (rc)
		return rc;
	ed = calloc(1, sizeof(*ed));
	if (!ed)
		return -ENOMEM;
	ed->domid = domid;
	for (unsigned int s = 0; s < LOCAL_NR_SLOTS; s++)
		ed->fifo[s] = -1;
	rc = local_map_state(e->pub.p, domid, &ed->state);
	if (!rc)
		rc = local_map_file(e->pub.p, domid, "evtchn", PORTS_LEN,
				    PROT_READ | PROT_WRITE, &m);
	if (rc) {
		ev_domain_free(ed);
		return rc;
	}
	ed->ports = m;
	ed->next = e->doms;
	__atomic_store_n(&e->doms, ed, __ATOMIC_RELEASE);   /* complete */
	*out = ed;
	return 0;
}

static int ev_domain_get(struct local_evtchn *e, xbd_domid_t domid,
			 struct ev_domain **out)
{
	int rc;

	*out = ev_domain_find(e, domid);
	if (*out)
		return 0;
	pthread_mutex_lock(&e->grow_lock);
	rc = ev_domain_add(e, domid, out);
	pthread_mutex_unlock(&e->grow_lock);
	return rc;
}

static struct local_port *own_ports(struct local_evtchn *e)
{
	return e->own->ports;
}

static void wake(struct local_evtchn *e, struct ev_domain *ed, uint32_t port)
{
	uint32_t owner = __atomic_load_n(&ed->ports[port].owner, __ATOMIC_ACQUIRE);
	char name[32];
	int fd;

	if (owner == 0 || owner > LOCAL_NR_SLOTS)
		return;   /* nobody to wake (or a scribbled table) */
	fd = __atomic_load_n(&ed->fifo[owner - 1], __ATOMIC_ACQUIRE);
	if (fd < 0) {
		pthread_mutex_lock(&e->grow_lock);
		fd = ed->fifo[owner - 1];     /* another thread may have opened it */
		if (fd < 0) {
			snprintf(name, sizeof(name), "evtchn.%u", owner - 1);
			fd = local_open(e->pub.p, ed->domid, name, O_RDWR | O_NONBLOCK);
			if (fd >= 0)
				__atomic_store_n(&ed->fifo[owner - 1], fd, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&e->grow_lock);
		if (fd < 0)
			return;   /* the owner is gone: the event is dropped */
	}
	/* A full FIFO means the owner has thousands of undelivered ports:
	 * dropping is what Xen does with an overflowing queue too. */
	if (write(fd, &port, sizeof(port)) < 0)
		return;
}

/* Set PENDING on port of ed; deliver if it was neither pending nor masked.
 * -EPROTO when the word changed under every one of LOCAL_CAS_TRIES
 * attempts: only a peer writing it non-stop does that. */
static int raise_port(struct local_evtchn *e, struct ev_domain *ed, uint32_t port)
{
	uint32_t *flags = &ed->ports[port].flags;
	uint32_t old = __atomic_load_n(flags, __ATOMIC_ACQUIRE), new;
	int tries = 0;

	do {
		if (old & PORT_PENDING)
			return 0;   /* coalesced: the owner will see it */
		if (tries++ == LOCAL_CAS_TRIES)
			return -EPROTO;
		new = old | PORT_PENDING;
		if (!(old & PORT_MASKED))
			new |= PORT_MASKED;
	} while (!__atomic_compare_exchange_n(flags, &old, new, false,
					      __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE));
	if (!(old & PORT_MASKED))
		wake(e, ed, port);
	return 0;
}

/* Free every port owned by slot (a dead handle's, or ours at close). */
static void free_slot_ports(struct local_evtchn *e, uint32_t slot);

static int claim_slot(struct local_evtchn *e)
{
	for (uint32_t s = 0; s < LOCAL_NR_SLOTS; s++) {
		int rc = local_lock_byte(e->lock_fd, s, F_WRLCK, false);

		if (rc == -EAGAIN)
			continue;
		if (rc)
			return rc;
		e->slot = s;
		return 0;
	}
	return -EMFILE;
}

/*
 * Free the ports of every other dead handle of our domain, so their peers
 * become unbound (and can be bound again) without waiting for someone to
 * reuse the slot.  We lock a dead slot while we free its ports, so a handle
 * that claims it meanwhile cannot lose the ports it is binding.
 */
static void sweep_dead_slots(struct local_evtchn *e)
{
	bool checked[LOCAL_NR_SLOTS] = { false };
	struct local_port *ports = own_ports(e);

	checked[e->slot] = true;
	for (uint32_t p = 1; p < LOCAL_NR_PORTS; p++) {
		uint32_t owner = __atomic_load_n(&ports[p].owner, __ATOMIC_ACQUIRE);

		if (owner == 0 || owner > LOCAL_NR_SLOTS || checked[owner - 1])
			continue;
		checked[owner - 1] = true;
		if (local_lock_byte(e->lock_fd, owner - 1, F_WRLCK, false) != 0)
			continue;   /* alive */
		free_slot_ports(e, owner - 1);
		local_lock_byte(e->lock_fd, owner - 1, F_UNLCK, false);
	}
}

static int open_fifo(struct local_evtchn *e)
{
	char name[32], path[PATH_MAX];
	uint32_t junk[64];

	snprintf(name, sizeof(name), "evtchn.%u", e->slot);
	local_path(e->pub.p, e->self, name, path);
	if (mkfifo(path, 0660) < 0 && errno != EEXIST)
		return -errno;
	e->fifo_fd = local_open(e->pub.p, e->self, name, O_RDWR | O_NONBLOCK);
	if (e->fifo_fd < 0)
		return e->fifo_fd;
	/* Ports the previous owner of this slot never read (bounded: a
	 * process writing non-stop cannot keep us here). */
	for (int i = 0; i < 1024 && read(e->fifo_fd, junk, sizeof(junk)) > 0; i++)
		;
	return 0;
}

int local_evtchn_open(struct xbd_platform *p, xbd_domid_t self,
		      struct xbd_evtchn **out)
{
	struct local_evtchn *e;
	int rc;

	rc = local_domain_ensure(p, self);
	if (rc)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pub.p = p;
	e->self = self;
	e->fifo_fd = -1;
	pthread_mutex_init(&e->grow_lock, NULL);
	e->lock_fd = local_open(p, self, "evtchn.lock", O_RDWR);
	if (e->lock_fd < 0) {
		rc = e->lock_fd;
		goto out;
	}
	rc = ev_domain_get(e, self, &e->own);
	if (rc)
		goto out;
	rc = claim_slot(e);
	if (rc)
		goto out;
	free_slot_ports(e, e->slot);
	sweep_dead_slots(e);
	rc = open_fifo(e);
	if (rc)
		goto out;
	*out = &e->pub;
	return 0;
out:
	local_evtchn_close(&e->pub);
	return rc;
}

int local_evtchn_fd(struct xbd_evtchn *pub)
{
	return container_of(pub, struct local_evtchn, pub)->fifo_fd;
}

/* Our port, bound by this handle?  Returns its bind word or 0. */
static uint64_t own_port(struct local_evtchn *e, uint32_t port)
{
	struct local_port *lp;
	uint64_t bind;

	if (port == 0 || port >= LOCAL_NR_PORTS)
		return 0;
	lp = &own_ports(e)[port];
	if (__atomic_load_n(&lp->owner, __ATOMIC_ACQUIRE) != e->slot + 1)
		return 0;
	bind = __atomic_load_n(&lp->bind, __ATOMIC_ACQUIRE);
	if (port_state(bind) != PORT_UNBOUND && port_state(bind) != PORT_INTERDOMAIN)
		return 0;
	return bind;
}

/* Reserve a free port of ours, make it ours, then publish bind. */
static int alloc_port(struct local_evtchn *e, uint64_t bind)
{
	struct local_port *ports = own_ports(e);

	for (uint32_t p = 1; p < LOCAL_NR_PORTS; p++) {
		uint64_t expected = 0;

		if (__atomic_load_n(&ports[p].bind, __ATOMIC_RELAXED) != 0)
			continue;
		if (__atomic_compare_exchange_n(&ports[p].bind, &expected,
						port_bind(PORT_RESERVED, 0, 0), false,
						__ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			__atomic_store_n(&ports[p].flags, 0, __ATOMIC_RELEASE);
			__atomic_store_n(&ports[p].owner, e->slot + 1, __ATOMIC_RELEASE);
			__atomic_store_n(&ports[p].bind, bind, __ATOMIC_SEQ_CST);
			return (int)p;
		}
	}
	return -ENOSPC;
}

static void release_port(struct local_port *lp)
{
	__atomic_store_n(&lp->owner, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&lp->flags, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&lp->bind, 0, __ATOMIC_SEQ_CST);
}

int local_evtchn_bind_unbound_port(struct xbd_evtchn *pub, xbd_domid_t remote)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);
	int rc;

	if (remote > XBD_DOMID_MAX)
		return -EINVAL;
	rc = local_domain_ensure(e->pub.p, remote);
	if (rc)
		return rc;
	return alloc_port(e, port_bind(PORT_UNBOUND, remote, 0));
}

int local_evtchn_bind_interdomain(struct xbd_evtchn *pub, xbd_domid_t remote,
				  xbd_evtchn_port_t remote_port)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);
	struct local_port *rp;
	struct ev_domain *ed;
	uint64_t expected, cur;
	int port, rc;

	if (remote > XBD_DOMID_MAX || remote_port == 0 || remote_port >= LOCAL_NR_PORTS)
		return -EINVAL;
	rc = ev_domain_get(e, remote, &ed);
	if (rc)
		return rc;
	/* Our end first, so the peer's first notify already finds it. */
	port = alloc_port(e, port_bind(PORT_INTERDOMAIN, remote, remote_port));
	if (port < 0)
		return port;
	rp = &ed->ports[remote_port];
	expected = port_bind(PORT_UNBOUND, e->self, 0);
	if (__atomic_compare_exchange_n(&rp->bind, &expected,
					port_bind(PORT_INTERDOMAIN, e->self, (uint32_t)port),
					false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return port;
	cur = expected;
	release_port(&own_ports(e)[port]);
	if (port_state(cur) != PORT_UNBOUND)
		return -EINVAL;   /* free, or already connected */
	return -EPERM;            /* offered to another domain */
}

/* Disconnect our port from its peer (the peer's end becomes unbound, as in
 * Xen), then free it. */
static void close_port(struct local_evtchn *e, uint32_t port)
{
	struct local_port *lp = &own_ports(e)[port];
	uint64_t bind = __atomic_load_n(&lp->bind, __ATOMIC_ACQUIRE);
	struct ev_domain *ed;

	if (port_state(bind) == PORT_INTERDOMAIN &&
	    port_peer(bind) > 0 && port_peer(bind) < LOCAL_NR_PORTS &&
	    ev_domain_get(e, port_dom(bind), &ed) == 0) {
		uint64_t expected = port_bind(PORT_INTERDOMAIN, e->self, port);

		__atomic_compare_exchange_n(&ed->ports[port_peer(bind)].bind, &expected,
					    port_bind(PORT_UNBOUND, e->self, 0), false,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
	}
	release_port(lp);
}

static void free_slot_ports(struct local_evtchn *e, uint32_t slot)
{
	struct local_port *ports = own_ports(e);

	for (uint32_t p = 1; p < LOCAL_NR_PORTS; p++) {
		if (__atomic_load_n(&ports[p].owner, __ATOMIC_ACQUIRE) == slot + 1 &&
		    __atomic_load_n(&ports[p].bind, __ATOMIC_ACQUIRE) != 0)
			close_port(e, p);
	}
}

int local_evtchn_unbind(struct xbd_evtchn *pub, xbd_evtchn_port_t port)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);

	if (!own_port(e, port))
		return -EINVAL;
	close_port(e, port);
	return 0;
}

int local_evtchn_notify(struct xbd_evtchn *pub, xbd_evtchn_port_t port)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);
	uint64_t bind = own_port(e, port), peer_bind;
	struct ev_domain *ed;
	uint32_t rport;
	int rc;

	if (!bind)
		return -EINVAL;
	if (port_state(bind) == PORT_UNBOUND)
		return 0;   /* no peer yet (or any more): dropped, as in Xen */
	rport = port_peer(bind);
	if (rport == 0 || rport >= LOCAL_NR_PORTS)
		return -EINVAL;
	rc = ev_domain_get(e, port_dom(bind), &ed);
	if (rc)
		return rc;
	peer_bind = __atomic_load_n(&ed->ports[rport].bind, __ATOMIC_ACQUIRE);
	if (peer_bind != port_bind(PORT_INTERDOMAIN, e->self, port))
		return 0;   /* the peer closed its end */
	return raise_port(e, ed, rport);
}

int local_evtchn_pending(struct xbd_evtchn *pub)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);
	uint32_t port;
	ssize_t n;

	/* Bounded: a process writing garbage non-stop cannot keep us here. */
	for (int skipped = 0; skipped < 64; skipped++) {
		n = read(e->fifo_fd, &port, sizeof(port));
		if (n < 0)
			return errno == EINTR ? -EINTR : -errno;   /* -EAGAIN: none */
		if (n == 0)
			return -EAGAIN;
		if (n != sizeof(port) || !own_port(e, port))
			continue;   /* stale (port closed) or garbage: skip it */
		__atomic_and_fetch(&own_ports(e)[port].flags, ~PORT_PENDING,
				   __ATOMIC_SEQ_CST);
		return (int)port;
	}
	return -EAGAIN;   /* the fd stays readable: the caller comes back */
}

int local_evtchn_unmask(struct xbd_evtchn *pub, xbd_evtchn_port_t port)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);
	uint32_t *flags, old, new;
	int tries = 0;

	if (!own_port(e, port))
		return -EINVAL;
	flags = &own_ports(e)[port].flags;
	old = __atomic_load_n(flags, __ATOMIC_ACQUIRE);
	do {
		if (!(old & PORT_MASKED))
			return 0;
		/* Our table, but every notifier writes it: bounded as in
		 * raise_port(). */
		if (tries++ == LOCAL_CAS_TRIES)
			return -EPROTO;
		/* Pending meanwhile: stay masked and deliver again now. */
		new = (old & PORT_PENDING) ? old : old & ~PORT_MASKED;
	} while (!__atomic_compare_exchange_n(flags, &old, new, false,
					      __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE));
	if (new & PORT_PENDING)
		wake(e, e->own, port);
	return 0;
}

void local_evtchn_close(struct xbd_evtchn *pub)
{
	struct local_evtchn *e = container_of(pub, struct local_evtchn, pub);
	struct ev_domain *ed, *next;

	if (e->own && e->lock_fd >= 0 && e->fifo_fd >= 0)
		free_slot_ports(e, e->slot);
	for (ed = e->doms; ed; ed = next) {
		next = ed->next;
		ev_domain_free(ed);
	}
	if (e->fifo_fd >= 0)
		close(e->fifo_fd);
	if (e->lock_fd >= 0)
		close(e->lock_fd);   /* frees the slot */
	pthread_mutex_destroy(&e->grow_lock);
	free(e);
}
