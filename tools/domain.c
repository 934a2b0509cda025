/* SPDX-License-Identifier: MIT */
/*
 * xbd domain-create / domain-destroy / domain-list, and name -> id.
 *
 * The xenstore nodes of a domain are those libxl writes at creation
 * (libxl__domain_make, libxl__build_post), with the same permissions:
 *   /local/domain/<id>            n0 r<id>   (name, domid, vm, memory/...)
 *   .../device, .../control       n0 r<id>
 *   .../control/shutdown, data, drivers, feature, attr, error   n<id>
 *   /vm/<uuid>                    n0 r<id>   (uuid, name)
 *   /libxl/<id>, /libxl/<id>/device   n0
 * Domain 0's /local/domain/0/{name,domid} are written when missing, as
 * xen-init-dom0 does on a Xen host.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "num.h"
#include "vbd.h"
#include "xbd.h"

#define NAME_MAX_LEN 63

/* ---- name <-> id ------------------------------------------------------ */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static int domain_exists(struct xbd_ctx *c, xbd_domid_t id)
{
	char path[64];

	snprintf(path, sizeof(path), "/local/domain/%u", id);
	return xbd_xs_exists(c->xs, XBT_NULL, path, NULL);
}

/* The id of the domain named name: 0 and *out, -ENOENT, or -errno. */
static int find_by_name(struct xbd_ctx *c, const char *name, xbd_domid_t *out)
{
	char **ids = NULL, dir[64], val[NAME_MAX_LEN + 1];
	unsigned int n = 0;
	int rc = xbd_xs_directory(c->xs, XBT_NULL, "/local/domain", NULL, &ids, &n);

	if (rc)
		return rc == -ENOENT ? -ENOENT : rc;
	rc = -ENOENT;
	for (unsigned int i = 0; i < n && rc == -ENOENT; i++) {
		unsigned long id;
		char *end;

		id = strtoul(ids[i], &end, 10);
		if (*end || id > XBD_DOMID_MAX)
			continue;
		snprintf(dir, sizeof(dir), "/local/domain/%lu", id);
		if (xbd_xs_read_buf(c->xs, XBT_NULL, dir, "name", val, sizeof(val)) == 0 &&
		    strcmp(val, name) == 0) {
			*out = (xbd_domid_t)id;
			rc = 0;
		}
	}
	free(ids);
	return rc;
}

int xbd_resolve_domain(struct xbd_ctx *c, const char *arg, xbd_domid_t *out)
{
	int rc;

	if (all_digits(arg)) {
		unsigned long id = strtoul(arg, NULL, 10);
		if (strlen(arg) > 5 || id > XBD_DOMID_MAX) {
			xbd_err("invalid domain id '%s'", arg);
			return -EINVAL;
		}
		rc = domain_exists(c, (xbd_domid_t)id);
		if (rc == 1) {
			*out = (xbd_domid_t)id;
			return 0;
		}
	} else {
		rc = find_by_name(c, arg, out);
		if (rc == 0)
			return 0;
	}
	if (rc == 0 || rc == -ENOENT) {
		xbd_err("unknown domain '%s'", arg);
		return -ENOENT;
	}
	xbd_err("cannot look up domain '%s': %s", arg, strerror(-rc));
	return rc;
}

/* ---- domain-create ---------------------------------------------------- */

static int valid_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > NAME_MAX_LEN || all_digits(name))
		return -EINVAL;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789_.-") == len ? 0 : -EINVAL;
}

/* "512" (MiB, as xl's memory=), "512k", "256M", "1G" (lib/num.h):
 * 4 KiB .. 1 TiB, whole pages. */
static int parse_memory(const char *s, uint64_t *bytes)
{
	long long v = xbd_size(s, 20, 1ull << 40);

	if (v <= 0 || v % XBD_PAGE_SIZE)
		return -EINVAL;
	*bytes = (uint64_t)v;
	return 0;
}

struct create_arg {
	xbd_domid_t id;
	const char *name;
	uint64_t mem;
	uid_t uid;               /* (uid_t)-1: root's (not changed) */
	gid_t gid;
	char uuid[40];
};

/* A user or group by name or number; -1 when unknown. */
static long owner_id(const char *s, bool group)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s && !*end && !errno && v >= 0 && v < 0x7fffffff)
		return v;
	if (group) {
		struct group *g = getgrnam(s);

		return g ? (long)g->gr_gid : -1;
	}
	struct passwd *pw = getpwnam(s);

	return pw ? (long)pw->pw_uid : -1;
}

static int mknod_perms(struct xs_handle *xs, xs_transaction_t t, const char *dir,
		       const char *node, xbd_domid_t owner, xbd_domid_t reader)
{
	struct xs_permissions p[2] = {
		{ .id = owner, .perms = XS_PERM_NONE },
		{ .id = reader, .perms = XS_PERM_READ },
	};
	char path[XBD_XS_PATH_MAX];
	int rc = xbd_xs_path(path, sizeof(path), dir, node);

	return rc ? rc : xbd_xs_mkdir_perms(xs, t, path, p, owner == reader ? 1 : 2);
}

static int create_txn(struct xs_handle *xs, xs_transaction_t t, void *p)
{
	static const char *const rw_nodes[] = {
		"control/shutdown", "data", "drivers", "feature", "attr", "error",
	};
	const struct create_arg *a = p;
	char dom[64], vm[64], libxl[64];
	int rc;

	snprintf(dom, sizeof(dom), "/local/domain/%u", a->id);
	snprintf(vm, sizeof(vm), "/vm/%s", a->uuid);
	snprintf(libxl, sizeof(libxl), "/libxl/%u", a->id);
	rc = xbd_xs_exists(xs, t, dom, NULL);
	if (rc != 0)
		return rc < 0 ? rc : -EEXIST;
	rc = mknod_perms(xs, t, dom, NULL, 0, a->id);
	rc = rc ? rc : mknod_perms(xs, t, vm, NULL, 0, a->id);
	rc = rc ? rc : mknod_perms(xs, t, libxl, NULL, 0, 0);
	rc = rc ? rc : mknod_perms(xs, t, libxl, "device", 0, 0);
	rc = rc ? rc : xbd_xs_write(xs, t, vm, "uuid", a->uuid);
	rc = rc ? rc : xbd_xs_write(xs, t, vm, "name", a->name);
	rc = rc ? rc : xbd_xs_write(xs, t, dom, "vm", vm);
	rc = rc ? rc : xbd_xs_write(xs, t, dom, "name", a->name);
	rc = rc ? rc : xbd_xs_printf(xs, t, dom, "domid", "%u", a->id);
	rc = rc ? rc : xbd_xs_printf(xs, t, dom, "memory/static-max", "%llu",
				     (unsigned long long)(a->mem >> 10));
	rc = rc ? rc : xbd_xs_printf(xs, t, dom, "memory/target", "%llu",
				     (unsigned long long)(a->mem >> 10));
	rc = rc ? rc : mknod_perms(xs, t, dom, "device", 0, a->id);
	rc = rc ? rc : mknod_perms(xs, t, dom, "control", 0, a->id);
	rc = rc ? rc : xbd_xs_write(xs, t, dom, "control/platform-feature-xs_reset_watches", "1");
	for (size_t i = 0; rc == 0 && i < sizeof(rw_nodes) / sizeof(rw_nodes[0]); i++)
		rc = mknod_perms(xs, t, dom, rw_nodes[i], a->id, a->id);
	return rc;
}

static int dom0_txn(struct xs_handle *xs, xs_transaction_t t, void *p)
{
	int rc;

	(void)p;
	if (xbd_xs_exists(xs, t, "/local/domain/0", "name") == 1)
		return 0;
	if (xbd_xs_exists(xs, t, "/local/domain/0", NULL) == 0) {
		rc = mknod_perms(xs, t, "/local/domain/0", NULL, 0, 0);
		if (rc)
			return rc;
	}
	rc = xbd_xs_write(xs, t, "/local/domain/0", "name", "Domain-0");

	return rc ? rc : xbd_xs_write(xs, t, "/local/domain/0", "domid", "0");
}

static void make_uuid(char *buf, size_t len)
{
	unsigned char b[16] = { 0 };
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
			memset(b, 0, sizeof(b));
		close(fd);
	}
	b[6] = (b[6] & 0x0f) | 0x40;   /* version 4 */
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
		 b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Reserve the lowest free id on the platform (-EEXIST races move on). */
static int allocate_domain(struct xbd_ctx *c, struct create_arg *a)
{
	for (unsigned int id = 1; id <= XBD_DOMID_MAX; id++) {
		int rc = domain_exists(c, (xbd_domid_t)id);
		if (rc < 0)
			return rc;
		if (rc == 1)
			continue;
		rc = xbd_domain_create(c->plat, (xbd_domid_t)id, a->name, a->mem);
		if (rc == -EEXIST)
			continue;
		a->id = (xbd_domid_t)id;
		return rc;
	}
	return -ENOSPC;
}

struct destroy_arg {
	xbd_domid_t id;
	char vm[256];
};

static int destroy_txn(struct xs_handle *xs, xs_transaction_t t, void *p)
{
	const struct destroy_arg *a = p;
	char path[64];
	int rc;

	snprintf(path, sizeof(path), "/local/domain/%u", a->id);
	rc = xbd_xs_rm(xs, t, path, NULL);
	snprintf(path, sizeof(path), "/libxl/%u", a->id);
	rc = rc ? rc : xbd_xs_rm(xs, t, path, NULL);
	if (rc == 0 && strncmp(a->vm, "/vm/", 4) == 0 && !strchr(a->vm + 4, '/'))
		rc = xbd_xs_rm(xs, t, a->vm, NULL);
	return rc;
}

static int create_parse(int argc, char **argv, struct create_arg *a)
{
	struct xbd_opts o;
	int i = xbd_parse_opts(argc, argv, XBD_OPT_MEMORY | XBD_OPT_OWNER, 1, 1, &o);
	long id;

	if (i < 0)
		return i == -2 ? 0 : 2;
	a->name = argv[i];
	a->mem = XBD_DEFAULT_MEMORY;
	if (valid_name(a->name)) {
		xbd_err("invalid domain name '%s' (1-%d of A-Z a-z 0-9 _ . -, "
			"not all digits)", a->name, NAME_MAX_LEN);
		return 2;
	}
	if (o.memory && parse_memory(o.memory, &a->mem)) {
		xbd_err("invalid memory size '%s' (MiB, or a number with k, M or G, "
			"a multiple of 4k)", o.memory);
		return 2;
	}
	a->uid = (uid_t)-1;
	a->gid = (gid_t)-1;
	if (o.user) {
		if ((id = owner_id(o.user, false)) < 0) {
			xbd_err("unknown user '%s'", o.user);
			return 2;
		}
		a->uid = (uid_t)id;
	}
	if (o.group) {
		if ((id = owner_id(o.group, true)) < 0) {
			xbd_err("unknown group '%s'", o.group);
			return 2;
		}
		a->gid = (gid_t)id;
	}
	return -1;
}

int cmd_domain_create(struct xbd_ctx *c, int argc, char **argv)
{
	struct create_arg a = { 0 };
	xbd_domid_t other;
	int rc = create_parse(argc, argv, &a);

	if (rc >= 0)
		return rc;
	if (xbd_ctx_open(c) || xbd_ctx_platform(c))
		return 1;
	if (xbd_platform_get_kind(c->plat) != XBD_PLATFORM_LOCAL) {
		xbd_err("domain-create is for the local platform; on Xen use xl create");
		return 1;
	}
	rc = xbd_xs_transaction(c->xs, dom0_txn, NULL);
	if (rc == 0 && find_by_name(c, a.name, &other) == 0) {
		xbd_err("a domain named '%s' already exists (id %u)", a.name, other);
		return 1;
	}
	rc = rc ? rc : allocate_domain(c, &a);
	if (rc) {
		xbd_err("cannot create domain '%s': %s", a.name, strerror(-rc));
		return 1;
	}
	/* Before the introduction: xbd-xenstored gives the socket the
	 * directory's owner and group. */
	if ((a.uid != (uid_t)-1 || a.gid != (gid_t)-1) &&
	    (rc = xbd_domain_set_owner(c->plat, a.id, a.uid, a.gid)) != 0) {
		xbd_err("cannot give domain '%s' to its owner: %s", a.name,
			strerror(-rc));
		xbd_domain_destroy(c->plat, a.id, true);
		return 1;
	}
	make_uuid(a.uuid, sizeof(a.uuid));
	rc = xbd_xs_transaction(c->xs, create_txn, &a);
	/* libxenstore wants an event channel > 0; the local platform has no
	 * store ring, so the store page and port are placeholders. */
	if (rc == 0 && !xs_introduce_domain(c->xs, a.id, 0, 1)) {
		struct destroy_arg d = { .id = a.id };

		rc = errno ? -errno : -EIO;
		snprintf(d.vm, sizeof(d.vm), "/vm/%s", a.uuid);
		xbd_xs_transaction(c->xs, destroy_txn, &d);   /* undo create_txn */
	}
	if (rc) {
		xbd_err("cannot register domain '%s' in xenstore: %s", a.name,
			strerror(-rc));
		xbd_domain_destroy(c->plat, a.id, true);
		return 1;
	}
	printf("%u\n", a.id);
	return 0;
}

/* ---- domain-destroy ----------------------------------------------------- */

/* Detach every vbd: gracefully while the guest lives, forcibly if gone. */
static int detach_all(struct xbd_ctx *c, xbd_domid_t id, int timeout_ms)
{
	struct xbd_domain_info info = { 0 };
	uint32_t *ids = NULL;
	unsigned int n = 0;
	int rc = xbd_vbd_list(c, id, &ids, &n), failed = 0;

	if (rc)
		return rc;
	if (xbd_domain_get_info(c->plat, id, &info) != 0)
		info.claimed_by = 0;
	for (unsigned int i = 0; i < n; i++) {
		/* A live guest gets the timeout to close; the removal is forced
		 * either way since the domain goes. */
		if (xbd_vbd_detach(c, id, ids[i], true,
				   info.claimed_by ? timeout_ms : 0) && !failed)
			failed = 1;
	}
	free(ids);
	return failed ? -EIO : 0;
}

int cmd_domain_destroy(struct xbd_ctx *c, int argc, char **argv)
{
	struct destroy_arg a = { 0 };
	struct xbd_opts o;
	char dom[64];
	int i = xbd_parse_opts(argc, argv, XBD_OPT_TIMEOUT, 1, 1, &o), rc;

	if (i < 0)
		return i == -2 ? 0 : 2;
	if (xbd_ctx_open(c) || xbd_ctx_platform(c) ||
	    xbd_resolve_domain(c, argv[i], &a.id))
		return 1;
	if (a.id == 0) {
		xbd_err("domain 0 cannot be destroyed");
		return 1;
	}
	rc = detach_all(c, a.id, o.timeout_ms);
	if (rc && rc != -EIO) {
		xbd_err("cannot list the disks of domain %u: %s", a.id, strerror(-rc));
		return 1;
	}
	if (!xs_release_domain(c->xs, a.id) && errno != ENOENT)
		xbd_err("warning: releasing domain %u: %s", a.id, strerror(errno));
	snprintf(dom, sizeof(dom), "/local/domain/%u", a.id);
	if (xbd_xs_read_buf(c->xs, XBT_NULL, dom, "vm", a.vm, sizeof(a.vm)))
		a.vm[0] = '\0';
	rc = xbd_xs_transaction(c->xs, destroy_txn, &a);
	if (rc) {
		xbd_err("cannot remove domain %u from xenstore: %s", a.id, strerror(-rc));
		return 1;
	}
	rc = xbd_domain_destroy(c->plat, a.id, true);
	if (rc && rc != -ENOENT && rc != -EOPNOTSUPP) {
		xbd_err("cannot remove the files of domain %u: %s", a.id, strerror(-rc));
		return 1;
	}
	return 0;
}

/* ---- domain-list -------------------------------------------------------- */

static void list_one(struct xbd_ctx *c, xbd_domid_t id)
{
	struct xbd_domain_info info = { 0 };
	char dir[64], name[NAME_MAX_LEN + 1] = "-", state[32] = "-";
	uint32_t *ids = NULL;
	unsigned int n = 0;

	snprintf(dir, sizeof(dir), "/local/domain/%u", id);
	if (xbd_xs_read_buf(c->xs, XBT_NULL, dir, "name", name, sizeof(name)))
		snprintf(name, sizeof(name), "-");
	if (xbd_vbd_list(c, id, &ids, &n))
		n = 0;
	free(ids);
	if (id != 0 && xbd_domain_get_info(c->plat, id, &info) == 0) {
		if (!info.exists)
			snprintf(state, sizeof(state), "gone");
		else if (info.dying)
			snprintf(state, sizeof(state), "dying");
		else if (info.claimed_by)
			snprintf(state, sizeof(state), "claimed:%d", (int)info.claimed_by);
		else
			snprintf(state, sizeof(state), "unclaimed");
	}
	printf("%-5u %-24s %-16s %u\n", id, name, state, n);
}

int cmd_domain_list(struct xbd_ctx *c, int argc, char **argv)
{
	struct xbd_opts o;
	char **names = NULL;
	uint32_t *ids;
	unsigned int n = 0, k = 0;
	int i = xbd_parse_opts(argc, argv, 0, 0, 0, &o), rc;

	if (i < 0)
		return i == -2 ? 0 : 2;
	if (xbd_ctx_open(c) || xbd_ctx_platform(c))
		return 1;
	rc = xbd_xs_directory(c->xs, XBT_NULL, "/local/domain", NULL, &names, &n);
	if (rc && rc != -ENOENT) {
		xbd_err("cannot list domains: %s", strerror(-rc));
		return 1;
	}
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids) {
		free(names);
		xbd_err("out of memory");
		return 1;
	}
	for (unsigned int j = 0; j < n; j++) {
		char *end;
		unsigned long id = strtoul(names[j], &end, 10);
		if (!*end && all_digits(names[j]) && id <= XBD_DOMID_MAX)
			ids[k++] = (uint32_t)id;
	}
	free(names);
	qsort(ids, k, sizeof(*ids), xbd_cmp_u32);
	printf("%-5s %-24s %-16s %s\n", "ID", "Name", "State", "VBDs");
	for (unsigned int j = 0; j < k; j++)
		list_one(c, (xbd_domid_t)ids[j]);
	free(ids);
	return 0;
}
