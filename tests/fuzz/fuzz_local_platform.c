/* SPDX-License-Identifier: MIT */
/*
 * fuzz_local_platform: a hostile guest's grant table, pin counts and
 * event-channel table against the local platform's mapper side, which is
 * what xbd-blkback runs on the local machine (lib/platform/local_grant.c:
 * remote_get, pin, check_entry, map_pages, unpin, clear_busy_bits,
 * gref_ptr, copy_one; local_evtchn.c: ev_domain_get, bind_interdomain,
 * own_port, notify, raise_port, wake, unmask, pending, close_port).
 *
 * The platform is the real one on a private run directory (tmpfs when
 * there is one), made once: domain 1 (16 pages of memory) is the guest,
 * this process acts as domain 0 with one grant-table handle and one
 * event-channel handle.  Every file a guest holds read-write is mapped
 * by the harness too, and the input writes into it what the guest may:
 * any grant entry (raw, or a well-formed one), any pin count, any port's
 * bind word, flags and owner.  Between those writes domain 0 maps and
 * unmaps grants, copies to and from them, binds to the guest's ports,
 * notifies, unmasks, takes pending events and unbinds.  The guest also
 * has an event-channel handle of its own (slot 0), so a notify can reach
 * a real FIFO.  File sizes are left alone: a guest truncating its files
 * is the business of lib/platform/local_fault.c and its system test.
 *
 * Checked: no crash/UB/leak; a map succeeds only for entries that grant
 * domain 0 access to a frame inside the memory (and not read-only for a
 * writable map), and the mapped page is the guest's frame (a store
 * through a writable map shows in the guest's memory); a copy from a
 * grant reads the frame's bytes; statuses are the documented errors; a
 * successful bind leaves the guest's port connected to ours; after every
 * map is gone, every pin count the input did not scribble is 0 and the
 * entries carry no busy bits the guest did not write.  Each input ends
 * with everything unmapped and unbound and the guest's tables zeroed.
 *
 * Input: a series of struct fz_op.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "platform/local.h"
#include "tests/fuzz/fuzz.h"

#define FZ_GUEST 1
#define FZ_PAGES 16u
#define FZ_REFS 72u             /* entries the input writes (and 8 more read) */
#define FZ_PORTS 64u
#define FZ_MAPS 8u
#define FZ_OWN 16u

struct fz_op {
	uint8_t op;
	uint8_t a;
	uint16_t b;
	uint64_t val;
} __attribute__((packed));

enum { GNT_WRITE, GNT_VALID, ACTIVE_WRITE, MAP, UNMAP, COPY, EV_BIND_WORD,
       EV_FLAGS, EV_OFFER, BIND, EV_OP, UNBIND, NOPS };

static char rundir[64];
static struct xbd_platform *plat;
static struct xbd_gnttab *gt0;
static struct xbd_evtchn *ev0, *ev1;
static uint64_t *g_gnttab, *g_active;        /* the guest's files */
static struct local_port *g_ports;
static uint8_t *g_mem;

static struct { void *addr; unsigned int count; bool rw; } maps[FZ_MAPS];
static unsigned int nmaps;
static int own[FZ_OWN];
static unsigned int nown;
static bool scribbled_active, scribbled_gnttab;

static void *map_guest(const char *file, size_t len)
{
	char path[128];
	void *m;
	int fd;

	snprintf(path, sizeof(path), "%s/dom%u/%s", rundir, (unsigned int)FZ_GUEST, file);
	fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	return m;
}

static void cleanup(void)
{
	fuzz_rm_tree(rundir);
}

static void init_once(void)
{
	if (plat)
		return;
	snprintf(rundir, sizeof(rundir), "%s/fuzz-local.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	CHECK(mkdtemp(rundir));
	atexit(cleanup);
	xbd_log_init("fuzz_local_platform", XBD_LOG_ERR, false);
	CHECK(xbd_platform_open(XBD_PLATFORM_LOCAL, rundir, &plat) == 0);
	CHECK(xbd_domain_create(plat, FZ_GUEST, "guest", FZ_PAGES * XBD_PAGE_SIZE) == 0);
	CHECK(xbd_gnttab_open(plat, 0, &gt0) == 0);
	CHECK(xbd_evtchn_open(plat, 0, &ev0) == 0);
	CHECK(xbd_evtchn_open(plat, FZ_GUEST, &ev1) == 0);
	g_gnttab = map_guest("gnttab", LOCAL_NR_GRANTS * sizeof(uint64_t));
	g_active = map_guest("active", LOCAL_NR_GRANTS * sizeof(uint64_t));
	g_ports = map_guest("evtchn", LOCAL_NR_PORTS * sizeof(struct local_port));
	g_mem = map_guest("memory", FZ_PAGES * XBD_PAGE_SIZE);
	for (size_t i = 0; i < FZ_PAGES * XBD_PAGE_SIZE; i++)
		g_mem[i] = (uint8_t)(i * 7 + i / XBD_PAGE_SIZE);
}

/* What a successful map or copy of ref by domain 0 implies of its entry. */
static const uint8_t *granted_frame(xbd_grant_ref_t ref, bool writable)
{
	grant_entry_v1_t e = gent_unpack(__atomic_load_n(&g_gnttab[ref], __ATOMIC_SEQ_CST));

	CHECK(ref < LOCAL_NR_GRANTS);
	CHECK((e.flags & GTF_type_mask) == GTF_permit_access && e.domid == 0);
	CHECK(!(writable && (e.flags & GTF_readonly)));
	CHECK(e.frame < FZ_PAGES);
	return g_mem + (size_t)e.frame * XBD_PAGE_SIZE;
}

static void do_unmap(unsigned int i)
{
	CHECK(xbd_gnttab_unmap(gt0, maps[i].addr, maps[i].count) == 0);
	maps[i] = maps[--nmaps];
}

static void do_map(const struct fz_op *o)
{
	xbd_grant_ref_t refs[4];
	unsigned int count = o->a % 4 + 1;
	bool rw = o->a & 4;
	xbd_domid_t remote = (o->a & 8) ? (xbd_domid_t)(o->val >> 48) : FZ_GUEST;
	uint8_t *addr;
	int rc;

	for (unsigned int i = 0; i < count; i++)
		refs[i] = ((const uint8_t *)&o->val)[i] % FZ_REFS;
	if (o->a & 0x80)
		refs[0] = o->b;             /* any ref, past the table too */
	if (nmaps == FZ_MAPS)
		do_unmap(0);
	rc = xbd_gnttab_map(gt0, remote, count, refs, PROT_READ | (rw ? PROT_WRITE : 0),
			    (void **)&addr);
	if (rc) {
		CHECK(rc == -EINVAL || rc == -EPERM || rc == -ENOENT || rc == -EAGAIN ||
		      rc == -ENOSPC);
		return;
	}
	CHECK(remote == FZ_GUEST);
	for (unsigned int i = 0; i < count; i++) {
		const uint8_t *frame = granted_frame(refs[i], rw);
		uint8_t *page = addr + (size_t)i * XBD_PAGE_SIZE;

		CHECK(!memcmp(page, frame, 64) &&
		      !memcmp(page + XBD_PAGE_SIZE - 64, frame + XBD_PAGE_SIZE - 64, 64));
		if (rw) {
			page[o->b % XBD_PAGE_SIZE]++;
			CHECK(page[o->b % XBD_PAGE_SIZE] == frame[o->b % XBD_PAGE_SIZE]);
		}
	}
	maps[nmaps].addr = addr;
	maps[nmaps].count = count;
	maps[nmaps++].rw = rw;
}

static void do_copy(const struct fz_op *o)
{
	static uint8_t buf[XBD_PAGE_SIZE];
	struct xbd_gnttab_copy_seg s = { .flags = o->a & 3 };
	bool to_grant, from_grant;
	xbd_domid_t dom = (o->a & 8) ? (xbd_domid_t)(o->val >> 48) : FZ_GUEST;
	xbd_grant_ref_t ref = (o->a & 0x80) ? o->b : o->b % FZ_REFS;
	uint16_t off = (uint16_t)o->val, len = (uint16_t)(o->val >> 16);

	if (o->a & 0x40)
		s.flags = (uint16_t)(o->val >> 32);      /* any flags */
	/* what the copy does is what its flags say, not the op's bits */
	to_grant = s.flags & XBD_GNTCOPY_dest_gref;
	from_grant = s.flags & XBD_GNTCOPY_source_gref;
	if (!(s.flags & XBD_GNTCOPY_source_gref) || !(s.flags & XBD_GNTCOPY_dest_gref))
		len %= XBD_PAGE_SIZE + 1;        /* our side is one page */
	if (s.flags & XBD_GNTCOPY_source_gref)
		s.source.foreign = (typeof(s.source.foreign)){ ref, off, dom };
	else
		s.source.virt = (o->a & 0x20) ? NULL : buf;
	if (s.flags & XBD_GNTCOPY_dest_gref)
		s.dest.foreign = (typeof(s.dest.foreign)){ (ref + 1) % FZ_REFS, off, dom };
	else
		s.dest.virt = (o->a & 0x20) ? NULL : buf;
	if (!(s.flags & XBD_GNTCOPY_source_gref) && !(s.flags & XBD_GNTCOPY_dest_gref) &&
	    s.source.virt)
		return;                     /* a local memmove: nothing of the platform's */
	s.len = len;
	CHECK(xbd_gnttab_copy(gt0, 1, &s) == 0);
	if (s.status) {
		CHECK(s.status == -EINVAL || s.status == -EPERM || s.status == -ENOENT);
		return;
	}
	CHECK(dom == FZ_GUEST && (unsigned int)off + len <= XBD_PAGE_SIZE);
	CHECK(!(s.flags & ~3u));
	if (from_grant && !to_grant)
		CHECK(!memcmp(buf, granted_frame(ref, false) + off, len));
	if (to_grant && !from_grant)
		CHECK(!memcmp(granted_frame((ref + 1) % FZ_REFS, true) + off, buf, len));
}

static void do_bind(const struct fz_op *o)
{
	xbd_domid_t dom = (o->a & 1) ? (xbd_domid_t)(o->val >> 48) : FZ_GUEST;
	uint32_t rport = (o->a & 2) ? o->b : o->b % (FZ_PORTS + 2);
	int port;
	uint64_t bind;

	if (nown == FZ_OWN)
		return;
	port = xbd_evtchn_bind_interdomain(ev0, dom, rport);
	if (port < 0) {
		CHECK(port == -EINVAL || port == -EPERM || port == -ENOENT || port == -ENOSPC);
		return;
	}
	CHECK(dom == FZ_GUEST && rport > 0 && rport < LOCAL_NR_PORTS);
	bind = __atomic_load_n(&g_ports[rport].bind, __ATOMIC_SEQ_CST);
	CHECK(bind == port_bind(PORT_INTERDOMAIN, 0, (uint32_t)port));
	own[nown++] = port;
}

static void do_ev_op(const struct fz_op *o)
{
	int port = nown ? own[o->b % nown] : (int)o->b, rc;

	switch (o->a % 3) {
	case 0:
		rc = xbd_evtchn_notify(ev0, (xbd_evtchn_port_t)port);
		CHECK(rc == 0 || rc == -EINVAL || rc == -EPROTO || rc == -ENOENT);
		break;
	case 1:
		rc = xbd_evtchn_unmask(ev0, (xbd_evtchn_port_t)port);
		CHECK(rc == 0 || rc == -EINVAL || rc == -EPROTO);
		break;
	default:
		rc = xbd_evtchn_pending(ev1);   /* the guest's side */
		CHECK(rc == -EAGAIN || (rc > 0 && rc < (int)LOCAL_NR_PORTS));
		rc = xbd_evtchn_pending(ev0);
		CHECK(rc == -EAGAIN || (rc > 0 && rc < (int)LOCAL_NR_PORTS));
	}
}

static void do_unbind(const struct fz_op *o)
{
	if (nown && !(o->a & 1)) {
		unsigned int k = o->b % nown;

		CHECK(xbd_evtchn_unbind(ev0, (xbd_evtchn_port_t)own[k]) == 0);
		own[k] = own[--nown];
		return;
	}
	/* Not one of ours (or ours, twice): refused, unless it is ours. */
	for (unsigned int k = 0; k < nown; k++)
		if (own[k] == o->b)
			return;
	CHECK(xbd_evtchn_unbind(ev0, o->b) == -EINVAL);
}

static void one_op(const struct fz_op *o)
{
	unsigned int ref = o->b % FZ_REFS, port = o->b % FZ_PORTS;

	switch (o->op % NOPS) {
	case GNT_WRITE:
		__atomic_store_n(&g_gnttab[ref], o->val, __ATOMIC_SEQ_CST);
		scribbled_gnttab = true;
		break;
	case GNT_VALID:
		__atomic_store_n(&g_gnttab[ref],
				 gent_pack(GTF_permit_access | ((o->a & 1) ? GTF_readonly : 0),
					   (o->a & 2) ? (xbd_domid_t)(o->a >> 2) : 0,
					   (uint32_t)(o->val % (FZ_PAGES + 2))),
				 __ATOMIC_SEQ_CST);
		break;
	case ACTIVE_WRITE:
		__atomic_store_n(&g_active[ref], o->val, __ATOMIC_SEQ_CST);
		scribbled_active = true;
		break;
	case MAP:
		do_map(o);
		break;
	case UNMAP:
		if (nmaps)
			do_unmap(o->a % nmaps);
		else
			CHECK(xbd_gnttab_unmap(gt0, g_mem, 1) == -EINVAL);
		break;
	case COPY:
		do_copy(o);
		break;
	case EV_BIND_WORD:
		__atomic_store_n(&g_ports[port].bind, o->val, __ATOMIC_SEQ_CST);
		break;
	case EV_FLAGS:
		__atomic_store_n(&g_ports[port].flags, (uint32_t)o->val, __ATOMIC_SEQ_CST);
		__atomic_store_n(&g_ports[port].owner, (uint32_t)(o->val >> 32) %
				 (LOCAL_NR_SLOTS + 2), __ATOMIC_SEQ_CST);
		break;
	case EV_OFFER:
		/* What a guest does to offer a port to domain 0. */
		__atomic_store_n(&g_ports[port | 1].owner, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&g_ports[port | 1].bind, port_bind(PORT_UNBOUND, 0, 0),
				 __ATOMIC_SEQ_CST);
		break;
	case BIND:
		do_bind(o);
		break;
	case EV_OP:
		do_ev_op(o);
		break;
	default:
		do_unbind(o);
	}
}

static void end_input(void)
{
	while (nmaps)
		do_unmap(nmaps - 1);
	while (nown)
		CHECK(xbd_evtchn_unbind(ev0, (xbd_evtchn_port_t)own[--nown]) == 0);
	for (unsigned int r = 0; r < FZ_REFS; r++) {
		grant_entry_v1_t e = gent_unpack(g_gnttab[r]);

		if (!scribbled_active)
			CHECK(g_active[r] == 0);
		if (!scribbled_gnttab && !scribbled_active)
			CHECK(!(e.flags & (GTF_reading | GTF_writing)));
	}
	while (xbd_evtchn_pending(ev0) > 0 || xbd_evtchn_pending(ev1) > 0)
		;
	memset(g_gnttab, 0, FZ_REFS * sizeof(*g_gnttab));
	memset(g_active, 0, FZ_REFS * sizeof(*g_active));
	memset(g_ports, 0, (FZ_PORTS + 1) * sizeof(*g_ports));
	scribbled_active = scribbled_gnttab = false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data, size };
	struct fz_op o;
	int n = 0;

	init_once();
	while (n++ < 256 && take(&c, &o, sizeof(o))) {
		one_op(&o);
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "op %u a %#x b %u val %#llx: maps %u ports %u\n",
				(unsigned int)(o.op % NOPS), o.a, o.b, (unsigned long long)o.val, nmaps, nown);
	}
	end_input();
	return 0;
}
