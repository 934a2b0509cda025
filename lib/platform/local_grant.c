/* SPDX-License-Identifier: MIT */
/*
 * Local platform: grants.
 *
 * Grantor side (gntshr): pages come from the claimed domain's memory file,
 * which the claimer maps once; a grant is one 64-bit store of a
 * grant_entry_v1 into dom<N>/gnttab.  Revoke is a CAS of the entry to 0
 * followed by a look at the pin count (see local_revoke_ref).
 *
 * Mapper side (gnttab): each handle maps, once per remote domain, the
 * remote's grant table and pin table and two whole views of its memory
 * file, one read-only and one read-write.  Mapping a grant (or a run of
 * grants whose frames are consecutive) then costs no mmap: the address is
 * a pointer into the right view, so a read-only grant lands in a read-only
 * view and a store faults.  Only a batch of scattered frames needs a fresh
 * contiguous mapping (one mmap per run of consecutive frames).  Grant copy
 * is a checked memcpy from/to the views: no syscall at all.
 *
 * Pins: a map first takes (on the handle's first pin of that ref) a shared
 * OFD lock on byte <ref> of dom<N>/maptrack, then adds to active[ref], then
 * validates the entry and sets GTF_reading/GTF_writing with a CAS on the
 * whole entry.  Revoke clears the entry, then reads active[ref]: the pin
 * and the entry are a Dekker pair (both seq_cst), so either the mapper sees
 * the cleared entry or the revoker sees the pin.  Pins whose mapper died are
 * recognised because nobody holds the byte lock any more.
 *
 * Threads: a gntshr or gnttab handle is used by one thread at a time; the
 * claimed domain's allocators are shared by its gntshr handles under
 * local_domain.lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform/local.h"

#define CAS_TRIES LOCAL_CAS_TRIES   /* an entry rewritten forever: -EAGAIN */

static bool cas64(uint64_t *p, uint64_t *expected, uint64_t desired)
{
	return __atomic_compare_exchange_n(p, expected, desired, false,
					   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int local_revoke_ref(struct local_domain *d, xbd_grant_ref_t ref)
{
	uint64_t old = __atomic_load_n(&d->gnttab[ref], __ATOMIC_SEQ_CST);
	int rc, tries = 0;

	/* Mappers CAS the entry too (GTF bits), briefly; one that never stops
	 * just makes the grant look busy. */
	while (!cas64(&d->gnttab[ref], &old, 0)) {
		if (++tries == CAS_TRIES)
			return -EBUSY;
	}
	if (__atomic_load_n(&d->active[ref], __ATOMIC_SEQ_CST) == 0)
		return 0;
	/* Pinned.  A live mapper holds the byte lock; a dead one does not. */
	rc = local_lock_byte(d->maptrack_fd, ref, F_WRLCK, false);
	if (rc) {
		uint64_t zero = 0;

		cas64(&d->gnttab[ref], &zero, old);
		return -EBUSY;
	}
	/* Holding the write lock: no live pin, and no new mapper can pin. */
	__atomic_store_n(&d->active[ref], 0, __ATOMIC_SEQ_CST);
	local_lock_byte(d->maptrack_fd, ref, F_UNLCK, false);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Grantor side                                                        */
/* ------------------------------------------------------------------ */

/* One share_pages() result; owned by its gntshr handle. */
struct share_area {
	struct share_area *next;
	uint8_t *addr;
	unsigned int count;
	uint32_t first_frame;
	xbd_grant_ref_t refs[];
};

#define AREA_BUCKETS 1024

/* Areas and maps are found by address: hash on the page number. */
static size_t bucket(const void *addr)
{
	return ((uintptr_t)addr / XBD_PAGE_SIZE) % AREA_BUCKETS;
}

struct local_gntshr {
	struct xbd_gntshr pub;
	struct local_domain *d;
	struct share_area *areas[AREA_BUCKETS];   /* owned by the handle's thread */
};

int local_gntshr_open(struct xbd_domain *dom, struct xbd_gntshr **out)
{
	struct local_gntshr *gs = calloc(1, sizeof(*gs));

	if (!gs)
		return -ENOMEM;
	gs->pub.p = dom->p;
	gs->d = container_of(dom, struct local_domain, pub);
	local_domain_get(gs->d);   /* put in local_gntshr_close */
	*out = &gs->pub;
	return 0;
}

static bool bit_test(const uint64_t *map, size_t i)
{
	return map[i / 64] >> (i % 64) & 1;
}

static void bit_assign(uint64_t *map, size_t i, bool v)
{
	if (v)
		map[i / 64] |= 1ull << (i % 64);
	else
		map[i / 64] &= ~(1ull << (i % 64));
}

/*
 * First run of count clear bits in map[nbits], searching from *hint and
 * wrapping once; full words are skipped 64 bits at a time.  Sets the bits
 * and moves *hint past them.  Returns the first bit or -ENOMEM.
 */
static long take_run(uint64_t *map, size_t nbits, unsigned int count, size_t *hint)
{
	size_t run = 0, first = 0, i = *hint < nbits ? *hint : 0;

	for (size_t seen = 0; seen < nbits; seen++, i++) {
		if (i == nbits)
			i = run = 0;   /* a run does not wrap */
		if (i % 64 == 0 && i + 64 <= nbits && map[i / 64] == ~0ull) {
			run = 0;
			seen += 63;
			i += 63;
			continue;
		}
		if (bit_test(map, i)) {
			run = 0;
			continue;
		}
		if (run++ == 0)
			first = i;
		if (run == count) {
			for (size_t j = first; j <= i; j++)
				bit_assign(map, j, true);
			*hint = i + 1;
			return (long)first;
		}
	}
	return -ENOMEM;
}

/* count consecutive free pages and count free refs; d->lock held. */
static int alloc_grants(struct local_domain *d, unsigned int count,
			uint32_t *first, xbd_grant_ref_t *refs)
{
	long frame = take_run(d->page_used, d->mem_pages, count, &d->page_hint);
	unsigned int n;

	if (frame < 0)
		return -ENOMEM;
	for (n = 0; n < count; n++) {
		long ref = take_run(d->ref_used, LOCAL_NR_GRANTS, 1, &d->ref_hint);

		if (ref < 0)
			break;
		refs[n] = (xbd_grant_ref_t)ref;
	}
	if (n == count) {
		*first = (uint32_t)frame;
		return 0;
	}
	while (n-- > 0)
		bit_assign(d->ref_used, refs[n], false);
	for (n = 0; n < count; n++)
		bit_assign(d->page_used, (size_t)frame + n, false);
	return -ENOMEM;
}

int local_gntshr_share_pages(struct xbd_gntshr *pub, xbd_domid_t remote,
			     unsigned int count, xbd_grant_ref_t *refs,
			     bool writable, void **addr)
{
	struct local_gntshr *gs = container_of(pub, struct local_gntshr, pub);
	struct local_domain *d = gs->d;
	struct share_area *a;
	uint32_t first;
	int rc;

	if (remote > XBD_DOMID_MAX || count > LOCAL_NR_GRANTS)
		return -EINVAL;
	a = calloc(1, sizeof(*a) + count * sizeof(a->refs[0]));
	if (!a)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	rc = alloc_grants(d, count, &first, a->refs);
	pthread_mutex_unlock(&d->lock);
	if (rc) {
		free(a);
		return rc;
	}
	a->addr = d->mem + (size_t)first * XBD_PAGE_SIZE;
	a->count = count;
	a->first_frame = first;
	memset(a->addr, 0, (size_t)count * XBD_PAGE_SIZE);
	for (unsigned int i = 0; i < count; i++) {
		uint16_t flags = GTF_permit_access | (writable ? 0 : GTF_readonly);

		/* One release store: domid, frame and flags appear together. */
		__atomic_store_n(&d->gnttab[a->refs[i]],
				 gent_pack(flags, remote, first + i), __ATOMIC_SEQ_CST);
		refs[i] = a->refs[i];
	}
	a->next = gs->areas[bucket(a->addr)];
	gs->areas[bucket(a->addr)] = a;
	*addr = a->addr;
	return 0;
}

/* Revoke every grant of a, or none: on -EBUSY the revoked ones are put back. */
static int revoke_area(struct local_domain *d, struct share_area *a)
{
	for (unsigned int i = 0; i < a->count; i++) {
		uint64_t old = __atomic_load_n(&d->gnttab[a->refs[i]], __ATOMIC_SEQ_CST);

		if (local_revoke_ref(d, a->refs[i]) == 0)
			continue;
		while (i-- > 0) {
			uint64_t zero = 0;
			uint64_t back = gent_pack(gent_unpack(old).flags &
						  (GTF_type_mask | GTF_readonly),
						  gent_unpack(old).domid,
						  a->first_frame + i);

			cas64(&d->gnttab[a->refs[i]], &zero, back);
		}
		return -EBUSY;
	}
	return 0;
}

static void free_area(struct local_domain *d, struct share_area *a)
{
	pthread_mutex_lock(&d->lock);
	for (unsigned int i = 0; i < a->count; i++) {
		bit_assign(d->ref_used, a->refs[i], false);
		bit_assign(d->page_used, a->first_frame + i, false);
	}
	pthread_mutex_unlock(&d->lock);
	free(a);
}

int local_gntshr_unshare(struct xbd_gntshr *pub, void *addr, unsigned int count)
{
	struct local_gntshr *gs = container_of(pub, struct local_gntshr, pub);
	struct share_area **pp, *a;
	int rc;

	for (pp = &gs->areas[bucket(addr)]; (a = *pp) != NULL; pp = &a->next) {
		if (a->addr == addr && a->count == count)
			break;
	}
	if (!a)
		return -EINVAL;
	rc = revoke_area(gs->d, a);
	if (rc)
		return rc;
	*pp = a->next;
	free_area(gs->d, a);
	return 0;
}

void local_gntshr_close(struct xbd_gntshr *pub)
{
	struct local_gntshr *gs = container_of(pub, struct local_gntshr, pub);
	struct share_area *a, *next;

	/* Areas still mapped by a peer stay allocated (the refs and pages
	 * remain marked used) until the domain is released. */
	for (size_t b = 0; b < AREA_BUCKETS; b++) {
		for (a = gs->areas[b]; a; a = next) {
			next = a->next;
			if (revoke_area(gs->d, a) == 0)
				free_area(gs->d, a);
			else
				free(a);
		}
	}
	local_domain_put(gs->d);   /* got in local_gntshr_open */
	free(gs);
}

/* ------------------------------------------------------------------ */
/* Mapper side                                                         */
/* ------------------------------------------------------------------ */

/* What a gnttab handle keeps of one remote domain, opened on first use and
 * kept until the handle closes (the views stay valid even if the domain is
 * destroyed meanwhile: the mappings hold the files). */
struct remote {
	struct remote *next;
	xbd_domid_t domid;
	bool stale;                   /* the domain died: kept for old maps only */
	const struct local_state *state;
	int mem_fd;
	size_t mem_pages;
	uint8_t *ro_view, *rw_view;   /* whole memory file */
	uint64_t *gnttab;             /* the remote's grant table (rw: GTF bits) */
	uint64_t *active;             /* its pin counts */
	int maptrack_fd;              /* our OFD for the per-ref byte locks */
	uint32_t *pins;               /* this handle's maps per ref */
};

/* One xbd_gnttab_map() result, in a hash by address. */
struct map_area {
	struct map_area *next;
	void *addr;
	unsigned int count;
	bool own_mapping;             /* mmap'ed for this area: munmap on unmap */
	bool writable;
	struct remote *r;             /* outlives the area (freed at close) */
	xbd_grant_ref_t refs[];       /* our copy of the caller's refs */
};

/* Everything here belongs to the thread using the handle; close frees it
 * all: areas first (they point at their remote), then the remotes. */
struct local_gnttab {
	struct xbd_gnttab pub;
	xbd_domid_t self;
	struct remote *remotes;                /* live and stale, until close */
	struct map_area *maps[AREA_BUCKETS];   /* by address; freed by unmap */
};

int local_gnttab_open(struct xbd_platform *p, xbd_domid_t self,
		      struct xbd_gnttab **out)
{
	struct local_gnttab *gt;
	int rc;

	rc = local_domain_ensure(p, self);
	if (rc)
		return rc;
	gt = calloc(1, sizeof(*gt));
	if (!gt)
		return -ENOMEM;
	gt->pub.p = p;
	gt->self = self;
	*out = &gt->pub;
	return 0;
}

static void remote_free(struct remote *r)
{
	size_t len = r->mem_pages * XBD_PAGE_SIZE;

	if (r->ro_view)
		munmap(r->ro_view, len);
	if (r->rw_view)
		munmap(r->rw_view, len);
	if (r->gnttab)
		munmap(r->gnttab, LOCAL_NR_GRANTS * 8);
	if (r->active)
		munmap(r->active, LOCAL_NR_GRANTS * 8);
	if (r->mem_fd >= 0)
		close(r->mem_fd);
	if (r->maptrack_fd >= 0)
		close(r->maptrack_fd);   /* drops our byte locks */
	if (r->state)
		munmap((void *)r->state, sizeof(*r->state));
	free(r->pins);
	free(r);
}

static int remote_views(struct xbd_platform *p, struct remote *r)
{
	struct stat st;
	size_t len;
	void *m;

	r->mem_fd = local_open(p, r->domid, "memory", O_RDWR);
	if (r->mem_fd < 0)
		return r->mem_fd;
	if (fstat(r->mem_fd, &st) < 0)
		return -errno;
	if (st.st_size % XBD_PAGE_SIZE || (uint64_t)st.st_size > LOCAL_MAX_MEMORY)
		return -EIO;
	r->mem_pages = (size_t)st.st_size / XBD_PAGE_SIZE;
	len = (size_t)st.st_size;
	if (!len)
		return 0;
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, r->mem_fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	r->ro_view = m;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, r->mem_fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	r->rw_view = m;
	return 0;
}

static int remote_get(struct local_gnttab *gt, xbd_domid_t domid, struct remote **out)
{
	struct xbd_platform *p = gt->pub.p;
	struct remote *r;
	int rc;

	for (r = gt->remotes; r; r = r->next) {
		if (r->domid != domid || r->stale)
			continue;
		/* A domain destroyed (and maybe created again with the same id)
		 * since we cached it: its areas keep the old files, new maps
		 * and copies must use the new domain. */
		if (__atomic_load_n(&r->state->dying, __ATOMIC_ACQUIRE)) {
			r->stale = true;
			continue;
		}
		*out = r;
		return 0;
	}
	rc = local_domain_ensure(p, domid);
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->domid = domid;
	r->mem_fd = r->maptrack_fd = -1;
	rc = local_map_state(p, domid, &r->state);
	if (rc)
		goto out;
	rc = remote_views(p, r);
	if (rc)
		goto out;
	rc = local_open_grant_tables(p, domid, &r->gnttab, &r->active,
				     &r->maptrack_fd);
	if (rc)
		goto out;
	r->pins = calloc(LOCAL_NR_GRANTS, sizeof(r->pins[0]));
	if (!r->pins) {
		rc = -ENOMEM;
		goto out;
	}
	r->next = gt->remotes;
	gt->remotes = r;
	*out = r;
	return 0;
out:
	remote_free(r);
	return rc;
}

/*
 * Check an entry image against what a mapper (self, writable) may do:
 * -EINVAL if not a grant or the frame is outside the domain's memory,
 * -EPERM if it grants another domain or is read-only for a writer.
 */
static int check_entry(const struct remote *r, uint64_t v, xbd_domid_t self,
		       bool writable)
{
	grant_entry_v1_t e = gent_unpack(v);

	if ((e.flags & GTF_type_mask) != GTF_permit_access)
		return -EINVAL;
	if (e.domid != self)
		return -EPERM;
	if (writable && (e.flags & GTF_readonly))
		return -EPERM;
	if (e.frame >= r->mem_pages)
		return -EINVAL;
	return 0;
}

static void clear_busy_bits(struct remote *r, xbd_grant_ref_t ref, uint64_t pins)
{
	uint16_t clear = 0;
	uint64_t v;

	if ((uint32_t)pins == 0)
		clear = GTF_reading | GTF_writing;
	else if ((pins >> 32) == 0)
		clear = GTF_writing;
	if (!clear)
		return;
	v = __atomic_load_n(&r->gnttab[ref], __ATOMIC_SEQ_CST);
	for (int i = 0; i < CAS_TRIES; i++) {
		grant_entry_v1_t e = gent_unpack(v);

		if (cas64(&r->gnttab[ref], &v,
			  gent_pack(e.flags & ~clear, e.domid, e.frame)))
			return;
	}
}

static void unpin(struct remote *r, xbd_grant_ref_t ref, bool writable)
{
	uint64_t delta = 1 + (writable ? ACTIVE_WRITER : 0);
	uint64_t left = __atomic_sub_fetch(&r->active[ref], delta, __ATOMIC_SEQ_CST);

	clear_busy_bits(r, ref, left);
	if (--r->pins[ref] == 0)
		local_lock_byte(r->maptrack_fd, ref, F_UNLCK, false);
}

/*
 * Take the shared byte lock that marks ref as mapped by a live handle.  A
 * revoke holds the write lock for a few microseconds; the guest could hold
 * it forever, so we retry for about 10 ms and then give up with -EAGAIN
 * rather than hang the backend.
 */
static int lock_for_map(int fd, xbd_grant_ref_t ref)
{
	const struct timespec pause = { .tv_nsec = 50 * 1000 };
	int rc;

	for (int i = 0; i < 200; i++) {
		rc = local_lock_byte(fd, ref, F_RDLCK, false);
		if (rc != -EAGAIN)
			return rc;
		nanosleep(&pause, NULL);
	}
	return -EAGAIN;
}

/* Pin one grant for mapping; *frame gets the validated frame. */
static int pin(struct remote *r, xbd_domid_t self, xbd_grant_ref_t ref,
	       bool writable, uint32_t *frame)
{
	uint64_t delta = 1 + (writable ? ACTIVE_WRITER : 0), v;
	int rc;

	if (ref >= LOCAL_NR_GRANTS)
		return -EINVAL;
	if (r->pins[ref] == UINT32_MAX)
		return -ENOSPC;
	if (r->pins[ref] == 0) {
		rc = lock_for_map(r->maptrack_fd, ref);
		if (rc)
			return rc;
	}
	r->pins[ref]++;
	__atomic_add_fetch(&r->active[ref], delta, __ATOMIC_SEQ_CST);
	v = __atomic_load_n(&r->gnttab[ref], __ATOMIC_SEQ_CST);
	for (int i = 0; i < CAS_TRIES; i++) {
		grant_entry_v1_t e = gent_unpack(v);
		uint16_t busy = GTF_reading | (writable ? GTF_writing : 0);

		rc = check_entry(r, v, self, writable);
		if (rc)
			break;
		if (cas64(&r->gnttab[ref], &v,
			  gent_pack(e.flags | busy, e.domid, e.frame))) {
			*frame = e.frame;
			return 0;
		}
		rc = -EAGAIN;
	}
	unpin(r, ref, writable);
	return rc;
}

/* A contiguous mapping of scattered frames: one mmap per run. */
static int map_scattered(struct remote *r, const uint32_t *frames,
			 unsigned int count, int prot, void **addr)
{
	size_t len = (size_t)count * XBD_PAGE_SIZE;
	uint8_t *base;
	unsigned int i = 0;

	base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	while (i < count) {
		unsigned int run = 1;

		while (i + run < count && frames[i + run] == frames[i] + run)
			run++;
		if (mmap(base + (size_t)i * XBD_PAGE_SIZE, (size_t)run * XBD_PAGE_SIZE,
			 prot, MAP_SHARED | MAP_FIXED | MAP_POPULATE, r->mem_fd,
			 (off_t)frames[i] * XBD_PAGE_SIZE) == MAP_FAILED) {
			int rc = -errno;

			munmap(base, len);
			return rc;
		}
		i += run;
	}
	*addr = base;
	return 0;
}

static int map_pages(struct remote *r, struct map_area *a,
		     const uint32_t *frames, int prot)
{
	bool consecutive = true;

	for (unsigned int i = 1; i < a->count; i++)
		consecutive = consecutive && frames[i] == frames[0] + i;
	if (consecutive) {
		uint8_t *view = a->writable ? r->rw_view : r->ro_view;

		a->addr = view + (size_t)frames[0] * XBD_PAGE_SIZE;
		return 0;
	}
	a->own_mapping = true;
	return map_scattered(r, frames, a->count, prot, &a->addr);
}

int local_gnttab_map(struct xbd_gnttab *pub, xbd_domid_t remote,
		     unsigned int count, const xbd_grant_ref_t *refs,
		     int prot, void **addr)
{
	struct local_gnttab *gt = container_of(pub, struct local_gnttab, pub);
	bool writable = prot == (PROT_READ | PROT_WRITE);
	struct map_area *a = NULL;
	uint32_t *frames = NULL;
	struct remote *r;
	unsigned int done = 0;
	int rc;

	if ((prot != PROT_READ && !writable) || remote > XBD_DOMID_MAX ||
	    count > LOCAL_NR_GRANTS)
		return -EINVAL;
	rc = remote_get(gt, remote, &r);
	if (rc)
		return rc;
	a = calloc(1, sizeof(*a) + count * sizeof(a->refs[0]));
	frames = calloc(count, sizeof(*frames));
	if (!a || !frames) {
		rc = -ENOMEM;
		goto out;
	}
	a->count = count;
	a->writable = writable;
	a->r = r;
	for (; done < count; done++) {
		a->refs[done] = refs[done];   /* our copy: the caller's may change */
		rc = pin(r, gt->self, a->refs[done], writable, &frames[done]);
		if (rc)
			goto out;
	}
	rc = map_pages(r, a, frames, prot);
	if (rc)
		goto out;
	a->next = gt->maps[bucket(a->addr)];
	gt->maps[bucket(a->addr)] = a;
	*addr = a->addr;
	a = NULL;
out:
	while (a && done-- > 0)
		unpin(r, a->refs[done], writable);
	free(a);
	free(frames);
	return rc;
}

static void area_release(struct map_area *a)
{
	for (unsigned int i = 0; i < a->count; i++)
		unpin(a->r, a->refs[i], a->writable);
	if (a->own_mapping)
		munmap(a->addr, (size_t)a->count * XBD_PAGE_SIZE);
	free(a);
}

int local_gnttab_unmap(struct xbd_gnttab *pub, void *addr, unsigned int count)
{
	struct local_gnttab *gt = container_of(pub, struct local_gnttab, pub);
	struct map_area **pp, *a;

	for (pp = &gt->maps[bucket(addr)]; (a = *pp) != NULL; pp = &a->next) {
		if (a->addr == addr && a->count == count) {
			*pp = a->next;
			area_release(a);
			return 0;
		}
	}
	return -EINVAL;
}

void local_gnttab_close(struct xbd_gnttab *pub)
{
	struct local_gnttab *gt = container_of(pub, struct local_gnttab, pub);
	struct remote *r, *rn;
	struct map_area *a, *an;

	for (size_t b = 0; b < AREA_BUCKETS; b++) {
		for (a = gt->maps[b]; a; a = an) {
			an = a->next;
			area_release(a);
		}
	}
	for (r = gt->remotes; r; r = rn) {
		rn = r->next;
		remote_free(r);
	}
	free(gt);
}

/* Address of offset in the page a grant names, checked for this access. */
static int gref_ptr(struct local_gnttab *gt, xbd_domid_t domid, xbd_grant_ref_t ref,
		    uint16_t offset, uint16_t len, bool writable, uint8_t **ptr)
{
	struct remote *r;
	uint64_t v;
	int rc;

	if (domid > XBD_DOMID_MAX || ref >= LOCAL_NR_GRANTS ||
	    (unsigned int)offset + len > XBD_PAGE_SIZE)
		return -EINVAL;
	rc = remote_get(gt, domid, &r);
	if (rc)
		return rc;
	v = __atomic_load_n(&r->gnttab[ref], __ATOMIC_ACQUIRE);   /* one load */
	rc = check_entry(r, v, gt->self, writable);
	if (rc)
		return rc;
	*ptr = (writable ? r->rw_view : r->ro_view) +
	       (size_t)gent_unpack(v).frame * XBD_PAGE_SIZE + offset;
	return 0;
}

static int copy_one(struct local_gnttab *gt, const struct xbd_gnttab_copy_seg *s)
{
	uint8_t *src, *dst;
	int rc;

	if (s->flags & XBD_GNTCOPY_source_gref) {
		rc = gref_ptr(gt, s->source.foreign.domid, s->source.foreign.ref,
			      s->source.foreign.offset, s->len, false, &src);
		if (rc)
			return rc;
	} else if (!(src = s->source.virt)) {
		return -EINVAL;
	}
	if (s->flags & XBD_GNTCOPY_dest_gref) {
		rc = gref_ptr(gt, s->dest.foreign.domid, s->dest.foreign.ref,
			      s->dest.foreign.offset, s->len, true, &dst);
		if (rc)
			return rc;
	} else if (!(dst = s->dest.virt)) {
		return -EINVAL;
	}
	memmove(dst, src, s->len);
	return 0;
}

int local_gnttab_copy(struct xbd_gnttab *pub, unsigned int count,
		      struct xbd_gnttab_copy_seg *segs)
{
	struct local_gnttab *gt = container_of(pub, struct local_gnttab, pub);

	for (unsigned int i = 0; i < count; i++) {
		struct xbd_gnttab_copy_seg s = segs[i];

		if (s.flags & ~(XBD_GNTCOPY_source_gref | XBD_GNTCOPY_dest_gref))
			segs[i].status = -EINVAL;
		else
			segs[i].status = (int16_t)copy_one(gt, &s);
	}
	return 0;
}
