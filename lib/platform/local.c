/* SPDX-License-Identifier: MIT */
/*
 * Local platform: the machine directory and its domains (create, destroy,
 * query, claim).  The file layout is described in local.h.
 *
 * A domain is created complete in a temporary directory and renamed into
 * place, so other processes never see half a domain.  The claim is an OFD
 * write lock on dom<N>/claim: the kernel drops it when the claiming
 * process dies, which is what lets a later claim take over.
 */
#include <ctype.h>
#include <stddef.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "platform/local.h"

int xbd_local_prepare_rundir(const char *rundir)
{
	char why[PATH_MAX + 128];
	struct stat st;
	int rc;

	if (mkdir(rundir, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (stat(rundir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	rc = xbd_rundir_check(rundir, why, sizeof(why));
	if (rc) {
		log_err("%s", why);
		return rc;
	}
	if (access(rundir, W_OK | X_OK) < 0)
		return -errno;
	return 0;
}

void local_path(const struct xbd_platform *p, xbd_domid_t domid,
		const char *file, char *buf)
{
	snprintf(buf, PATH_MAX, "%s/dom%u%s%s", p->rundir, domid,
		 file ? "/" : "", file ? file : "");
}

int local_open(const struct xbd_platform *p, xbd_domid_t domid,
	       const char *file, int flags)
{
	char path[PATH_MAX];
	int fd;

	local_path(p, domid, file, path);
	/* Never through a link: the guest owns its files (and with
	 * domain-create --user its directory) and could point one anywhere. */
	fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0660);
	return fd < 0 ? -errno : fd;
}

int local_map_file(const struct xbd_platform *p, xbd_domid_t domid,
		   const char *file, size_t len, int prot, void **out)
{
	struct stat st;
	void *m;
	int fd, rc = 0;

	fd = local_open(p, domid, file, (prot & PROT_WRITE) ? O_RDWR : O_RDONLY);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if ((uint64_t)st.st_size != len) {   /* a damaged domain directory */
		rc = -EIO;
		goto out;
	}
	m = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	*out = m;
out:
	close(fd);
	return rc;
}

int local_lock_byte(int fd, uint32_t byte, short type, bool wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = byte, .l_len = 1 };

	for (;;) {
		if (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0)
			return 0;
		if (errno != EINTR)
			return errno == EACCES ? -EAGAIN : -errno;
	}
}

int local_open_grant_tables(const struct xbd_platform *p, xbd_domid_t domid,
			    uint64_t **gnttab, uint64_t **active, int *maptrack_fd)
{
	void *m;
	int rc;

	rc = local_map_file(p, domid, "gnttab", LOCAL_NR_GRANTS * 8,
			    PROT_READ | PROT_WRITE, &m);
	if (rc)
		return rc;
	*gnttab = m;
	rc = local_map_file(p, domid, "active", LOCAL_NR_GRANTS * 8,
			    PROT_READ | PROT_WRITE, &m);
	if (rc)
		return rc;
	*active = m;
	*maptrack_fd = local_open(p, domid, "maptrack", O_RDWR);
	return *maptrack_fd < 0 ? *maptrack_fd : 0;
}

int local_map_state(const struct xbd_platform *p, xbd_domid_t domid,
		    const struct local_state **out)
{
	void *m;
	int rc = local_map_file(p, domid, "state", sizeof(struct local_state),
				PROT_READ, &m);

	if (!rc)
		*out = m;
	return rc;
}

/* ---- creation ---- */

static int write_file(int dirfd, const char *name, const void *data,
		      size_t len, off_t size)
{
	int fd, rc = 0;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		    0660);
	if (fd < 0)
		return -errno;
	if (len && write(fd, data, len) != (ssize_t)len)
		rc = -EIO;
	if (!rc && size && ftruncate(fd, size) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int remove_dir(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *de;

	if (!dir)
		return -errno;
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(dir), de->d_name, 0);
	}
	closedir(dir);
	return rmdir(path) < 0 ? -errno : 0;
}

/* Fill a fresh directory with every file of a domain. */
static int populate(int dfd, const char *name, uint64_t mem_bytes)
{
	char info[128];
	int n, rc;

	n = snprintf(info, sizeof(info), "name=%s\nmemory=%" PRIu64 "\n",
		     name, mem_bytes);
	rc = write_file(dfd, "info", info, (size_t)n, 0);
	if (!rc)
		rc = write_file(dfd, "state", NULL, 0, sizeof(struct local_state));
	if (!rc)
		rc = write_file(dfd, "claim", NULL, 0, 0);
	if (!rc)
		rc = write_file(dfd, "memory", NULL, 0, (off_t)mem_bytes);
	if (!rc)
		rc = write_file(dfd, "gnttab", NULL, 0, LOCAL_NR_GRANTS * 8);
	if (!rc)
		rc = write_file(dfd, "active", NULL, 0, LOCAL_NR_GRANTS * 8);
	if (!rc)
		rc = write_file(dfd, "maptrack", NULL, 0, 0);
	if (!rc)
		rc = write_file(dfd, "evtchn", NULL, 0,
				LOCAL_NR_PORTS * sizeof(struct local_port));
	if (!rc)
		rc = write_file(dfd, "evtchn.lock", NULL, 0, 0);
	return rc;
}

static bool valid_name(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len >= sizeof(((struct xbd_domain_info *)0)->name))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isgraph((unsigned char)name[i]) || name[i] == '/')
			return false;
	}
	return true;
}

static int create_domain(struct xbd_platform *p, xbd_domid_t domid,
			 const char *name, uint64_t mem_bytes)
{
	static unsigned int counter;
	char tmp[PATH_MAX], final[PATH_MAX];
	int dfd, rc;

	snprintf(tmp, sizeof(tmp), "%s/.dom%u.%d.%u.tmp", p->rundir, domid,
		 (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	local_path(p, domid, NULL, final);
	if (mkdir(tmp, 0755) < 0)
		return -errno;
	dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto out;
	}
	rc = populate(dfd, name, mem_bytes);
	close(dfd);
	if (rc)
		goto out;
	/* rename(2) onto an existing non-empty directory fails: atomic create. */
	if (rename(tmp, final) == 0)
		return 0;
	rc = (errno == ENOTEMPTY || errno == EEXIST) ? -EEXIST : -errno;
out:
	remove_dir(tmp);
	return rc;
}

static int local_domain_create(struct xbd_platform *p, xbd_domid_t domid,
			       const char *name, uint64_t mem_bytes)
{
	struct stat st;
	char path[PATH_MAX];

	if (mem_bytes == 0)
		mem_bytes = XBD_DEFAULT_MEMORY;
	if (domid > XBD_DOMID_MAX || !valid_name(name) ||
	    mem_bytes % XBD_PAGE_SIZE || mem_bytes > LOCAL_MAX_MEMORY)
		return -EINVAL;
	local_path(p, domid, NULL, path);
	if (stat(path, &st) == 0)
		return -EEXIST;
	return create_domain(p, domid, name, mem_bytes);
}

static bool is_dying(const struct xbd_platform *p, xbd_domid_t domid)
{
	uint32_t dying = 0;
	int fd = local_open(p, domid, "state", O_RDONLY);

	if (fd < 0)
		return fd != -ENOENT;   /* an unreadable domain is not usable */
	if (pread(fd, &dying, sizeof(dying), offsetof(struct local_state, dying)) < 0)
		dying = 1;
	close(fd);
	return dying != 0;
}

int local_domain_ensure(struct xbd_platform *p, xbd_domid_t domid)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if (domid > XBD_DOMID_MAX)
		return -EINVAL;
	local_path(p, domid, NULL, path);
	if (stat(path, &st) == 0)
		return is_dying(p, domid) ? -ENOENT : 0;
	if (domid != 0)
		return -ENOENT;
	rc = create_domain(p, 0, "Domain-0", 0);
	return rc == -EEXIST ? 0 : rc;
}

/* ---- queries ---- */

/* pid of the live claimer, 0 if none. */
static pid_t claimer(const struct xbd_platform *p, xbd_domid_t domid)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char buf[32] = "";
	pid_t pid = 0;
	int fd;

	fd = local_open(p, domid, "claim", O_RDONLY);
	if (fd < 0)
		return 0;
	if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
		if (pread(fd, buf, sizeof(buf) - 1, 0) > 0)
			pid = (pid_t)strtol(buf, NULL, 10);
		if (pid <= 0)
			pid = -1;   /* claimed, pid not yet written */
	}
	close(fd);
	return pid;
}

static void read_info(const struct xbd_platform *p, struct xbd_domain_info *info)
{
	char buf[256], *line, *save = NULL;
	ssize_t n;
	int fd;

	fd = local_open(p, info->domid, "info", O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "name=", 5) == 0)
			snprintf(info->name, sizeof(info->name), "%s", line + 5);
		else if (strncmp(line, "memory=", 7) == 0)
			info->memory = strtoull(line + 7, NULL, 10);
	}
}

static int local_domain_get_info(struct xbd_platform *p, xbd_domid_t domid,
				 struct xbd_domain_info *info)
{
	char path[PATH_MAX];
	struct stat st;

	if (domid > XBD_DOMID_MAX)
		return -EINVAL;
	if (domid == 0)
		local_domain_ensure(p, 0);
	local_path(p, domid, NULL, path);
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	info->exists = true;
	info->dying = is_dying(p, domid);
	info->claimed_by = claimer(p, domid);
	read_info(p, info);
	return 0;
}

/* ---- destruction ---- */

/* Tell every process that has the domain's files mapped (their caches see
 * state->dying without a syscall), then new openers (is_dying). */
static int mark_dying(const struct xbd_platform *p, xbd_domid_t domid)
{
	uint32_t one = 1;
	int fd = local_open(p, domid, "state", O_RDWR), rc = 0;

	if (fd < 0)
		return fd;
	if (pwrite(fd, &one, sizeof(one), offsetof(struct local_state, dying)) != sizeof(one))
		rc = -EIO;
	close(fd);
	return rc;
}

int local_domain_set_owner(struct xbd_platform *p, xbd_domid_t domid,
			   uid_t uid, gid_t gid)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dir;
	int rc = 0;

	local_path(p, domid, NULL, path);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, "..") == 0)
			continue;
		if (fchownat(dirfd(dir), de->d_name, uid, gid,
			     AT_SYMLINK_NOFOLLOW) < 0) {
			rc = -errno;
			break;
		}
	}
	closedir(dir);
	return rc;
}

static int local_domain_destroy(struct xbd_platform *p, xbd_domid_t domid, bool force)
{
	static unsigned int counter;
	char path[PATH_MAX], dead[PATH_MAX];
	int fd, rc;

	if (domid > XBD_DOMID_MAX)
		return -EINVAL;
	fd = local_open(p, domid, "claim", O_RDWR);
	/* A link in place of claim or state (an owner given the directory
	 * with domain-create --user planted it; we never open through one)
	 * leaves a broken domain: it is removed all the same. */
	if (fd < 0 && fd != -ELOOP)
		return fd == -ENOENT ? -ENOENT : fd;
	/* Holding the claim lock keeps anyone from claiming meanwhile. */
	rc = fd < 0 ? 0 : local_lock_byte(fd, 0, F_WRLCK, false);
	if (rc == -EAGAIN && !force) {
		rc = -EBUSY;
		goto out;
	}
	rc = mark_dying(p, domid);
	if (rc && rc != -ELOOP)
		goto out;
	local_path(p, domid, NULL, path);
	snprintf(dead, sizeof(dead), "%s/.dead.dom%u.%d.%u", p->rundir, domid,
		 (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	if (rename(path, dead) < 0) {
		rc = errno == ENOENT ? -ENOENT : -errno;
		goto out;
	}
	rc = remove_dir(dead);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- claim ---- */

static void domain_free(struct local_domain *d)
{
	if (d->mem)
		munmap(d->mem, d->mem_pages * XBD_PAGE_SIZE);
	if (d->gnttab)
		munmap(d->gnttab, LOCAL_NR_GRANTS * 8);
	if (d->active)
		munmap(d->active, LOCAL_NR_GRANTS * 8);
	if (d->maptrack_fd >= 0)
		close(d->maptrack_fd);
	if (d->mem_fd >= 0)
		close(d->mem_fd);
	if (d->claim_fd >= 0)
		close(d->claim_fd);    /* drops the claim lock */
	pthread_mutex_destroy(&d->lock);
	free(d->ref_used);
	free(d->page_used);
	free(d);
}

static void bit_set(uint64_t *map, size_t i)
{
	map[i / 64] |= 1ull << (i % 64);
}

/*
 * A new claimer inherits the grant table of the previous one (dead or
 * released): revoke what can be revoked, and keep the refs and frames of
 * grants a live peer still maps out of the allocators.
 */
static void reclaim_grants(struct local_domain *d)
{
	for (uint32_t ref = 0; ref < LOCAL_NR_GRANTS; ref++) {
		uint64_t v = __atomic_load_n(&d->gnttab[ref], __ATOMIC_ACQUIRE);
		uint64_t pins = __atomic_load_n(&d->active[ref], __ATOMIC_ACQUIRE);
		grant_entry_v1_t e = gent_unpack(v);

		if (ref < LOCAL_NR_RESERVED) {
			bit_set(d->ref_used, ref);
			continue;
		}
		if (v == 0 && pins == 0)
			continue;
		if (local_revoke_ref(d, ref) == 0)
			continue;
		bit_set(d->ref_used, ref);
		if (e.frame < d->mem_pages)
			bit_set(d->page_used, e.frame);
	}
}

static int map_memory(struct local_domain *d)
{
	struct stat st;

	d->mem_fd = local_open(d->pub.p, d->pub.domid, "memory", O_RDWR);
	if (d->mem_fd < 0)
		return d->mem_fd;
	if (fstat(d->mem_fd, &st) < 0)
		return -errno;
	if (st.st_size % XBD_PAGE_SIZE || (uint64_t)st.st_size > LOCAL_MAX_MEMORY)
		return -EIO;
	d->mem_pages = (size_t)st.st_size / XBD_PAGE_SIZE;
	if (d->mem_pages) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			       MAP_SHARED, d->mem_fd, 0);
		if (m == MAP_FAILED)
			return -errno;
		d->mem = m;
	}
	d->page_used = calloc((d->mem_pages + 63) / 64 + 1, 8);
	d->ref_used = calloc(LOCAL_NR_GRANTS / 64, 8);
	return d->page_used && d->ref_used ? 0 : -ENOMEM;
}

static int take_claim(struct local_domain *d)
{
	char buf[32];
	int n, rc;

	d->claim_fd = local_open(d->pub.p, d->pub.domid, "claim", O_RDWR);
	if (d->claim_fd < 0)
		return d->claim_fd;
	rc = local_lock_byte(d->claim_fd, 0, F_WRLCK, false);
	if (rc)
		return rc == -EAGAIN ? -EBUSY : rc;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(d->claim_fd, 0) < 0 || pwrite(d->claim_fd, buf, (size_t)n, 0) != n)
		return -EIO;
	/* destroy may have won the race between our open and our lock */
	return is_dying(d->pub.p, d->pub.domid) ? -ENOENT : 0;
}

static int local_domain_claim(struct xbd_platform *p, xbd_domid_t domid,
			      struct xbd_domain **out)
{
	struct local_domain *d;
	int rc;

	rc = local_domain_ensure(p, domid);
	if (rc)
		return rc;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->pub.p = p;
	d->pub.domid = domid;
	d->refs = 1;   /* the claim's, dropped by release */
	d->claim_fd = d->mem_fd = d->maptrack_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	rc = take_claim(d);
	if (rc)
		goto out;
	rc = map_memory(d);
	if (rc)
		goto out;
	rc = local_open_grant_tables(p, domid, &d->gnttab, &d->active,
				     &d->maptrack_fd);
	if (rc)
		goto out;
	reclaim_grants(d);
	*out = &d->pub;
	return 0;
out:
	domain_free(d);
	return rc;
}

void local_domain_get(struct local_domain *d)
{
	__atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
}

void local_domain_put(struct local_domain *d)
{
	if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
		domain_free(d);
}

static void local_domain_release(struct xbd_domain *pub)
{
	local_domain_put(container_of(pub, struct local_domain, pub));   /* the claim's */
}

const struct platform_ops xbd_local_ops = {
	.domain_create = local_domain_create,
	.domain_destroy = local_domain_destroy,
	.domain_get_info = local_domain_get_info,
	.domain_claim = local_domain_claim,
	.domain_release = local_domain_release,
	.gntshr_open = local_gntshr_open,
	.gntshr_close = local_gntshr_close,
	.gntshr_share_pages = local_gntshr_share_pages,
	.gntshr_unshare = local_gntshr_unshare,
	.gnttab_open = local_gnttab_open,
	.gnttab_close = local_gnttab_close,
	.gnttab_map = local_gnttab_map,
	.gnttab_unmap = local_gnttab_unmap,
	.gnttab_copy = local_gnttab_copy,
	.evtchn_open = local_evtchn_open,
	.evtchn_close = local_evtchn_close,
	.evtchn_fd = local_evtchn_fd,
	.evtchn_bind_unbound_port = local_evtchn_bind_unbound_port,
	.evtchn_bind_interdomain = local_evtchn_bind_interdomain,
	.evtchn_unbind = local_evtchn_unbind,
	.evtchn_notify = local_evtchn_notify,
	.evtchn_pending = local_evtchn_pending,
	.evtchn_unmask = local_evtchn_unmask,
};
