/* SPDX-License-Identifier: MIT */
/*
 * Optional persistence (--db FILE): nodes, perms, introduced domains and
 * the special-node perms survive a restart; watches and transactions do
 * not.  The snapshot is written to FILE.tmp, fsync'ed and renamed over
 * FILE, so a crash at any moment leaves the old or the new snapshot.
 *
 * Format (host byte order, it never leaves the machine):
 *   "XBDXS1\n"
 *   'N' u32 pathlen, path, u32 nperms, nperms x (u32 domid, u8 access),
 *       u32 vlen, value, u32 clen, children
 *   'D' u32 domid, u32 target+1             (an introduced domain)
 *   'S' u8 which (0 intro, 1 release), u32 n, n x (u32, u8)
 *   'E' u64 FNV-1a of every byte before 'E'
 * A file that does not parse or whose checksum differs is refused.
 */
#include "xenstored.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "XBDXS1\n"

const char *db_file;
bool db_dirty;

struct buf {
	uint8_t *data;
	size_t len, cap, pos;
	bool bad;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->bad || n == 0)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 65536;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d) {
			b->bad = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put8(struct buf *b, uint8_t v) { put(b, &v, 1); }

static uint64_t fnv64(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	while (n--) {
		h ^= *p++;
		h *= 1099511628211ull;
	}
	return h;
}

static void put_perms(struct buf *b, const struct perm *p, uint32_t n)
{
	put32(b, n);
	for (uint32_t i = 0; i < n; i++) {
		put32(b, p[i].domid);
		put8(b, p[i].access);
	}
}

static void put_node(void *node, void *arg)
{
	const struct node *n = node;
	struct buf *b = arg;
	uint32_t plen = (uint32_t)strlen(n->path);

	put8(b, 'N');
	put32(b, plen);
	put(b, n->path, plen);
	put_perms(b, n->perms, n->nperms);
	put32(b, n->vlen);
	put(b, n->value, n->vlen);
	put32(b, n->clen);
	put(b, n->children, n->clen);
}

static int write_all(const char *tmp, const struct buf *b)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t off = 0;
	int ret = 0;

	if (fd < 0)
		return -errno;
	while (off < b->len) {
		ssize_t n = write(fd, b->data + off, b->len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		off += (size_t)n;
	}
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int persist_save(const char *file)
{
	struct buf b = { 0 };
	char *tmp = NULL;
	int ret;

	put(&b, MAGIC, strlen(MAGIC));
	db_foreach(put_node, &b);
	for (uint32_t d = 1; d <= DOMID_MAX_VALID; d++) {
		struct domain *dom = domain_get(d, false);
		if (dom && dom->introduced) {
			put8(&b, 'D');
			put32(&b, d);
			put32(&b, (uint32_t)(dom->target + 1));
		}
	}
	put8(&b, 'S'); put8(&b, 0); put_perms(&b, special_intro, nspecial_intro);
	put8(&b, 'S'); put8(&b, 1); put_perms(&b, special_release, nspecial_release);
	uint64_t sum = b.bad ? 0 : fnv64(b.data, b.len);
	put8(&b, 'E');
	put(&b, &sum, 8);
	if (b.bad || asprintf(&tmp, "%s.tmp", file) < 0) {
		free(b.data);
		return -ENOMEM;
	}
	ret = write_all(tmp, &b);
	if (!ret && rename(tmp, file) < 0)
		ret = -errno;
	if (ret) {
		log_err("cannot save %s: %s", file, strerror(-ret));
		unlink(tmp);
	}
	free(tmp);
	free(b.data);
	return ret;
}

/* ---- loading ---- */

static bool get(struct buf *b, void *p, size_t n)
{
	if (b->bad || b->len - b->pos < n) {
		b->bad = true;
		return false;
	}
	memcpy(p, b->data + b->pos, n);
	b->pos += n;
	return true;
}

static uint32_t get32(struct buf *b)
{
	uint32_t v = 0;
	get(b, &v, 4);
	return v;
}

static const uint8_t *get_bytes(struct buf *b, uint32_t n)
{
	const uint8_t *p = b->data + b->pos;
	if (b->bad || b->len - b->pos < n) {
		b->bad = true;
		return NULL;
	}
	b->pos += n;
	return p;
}

static struct perm *get_perms(struct buf *b, uint32_t *n)
{
	*n = get32(b);
	if (b->bad || *n == 0 || *n > 4096) {
		b->bad = true;
		return NULL;
	}
	struct perm *p = calloc(*n, sizeof(*p));
	for (uint32_t i = 0; p && i < *n; i++) {
		p[i].domid = get32(b);
		get(b, &p[i].access, 1);
		p[i].access &= PERM_READ | PERM_WRITE;
	}
	if (!p || b->bad) {
		free(p);
		b->bad = true;
		return NULL;
	}
	return p;
}

static void load_node(struct buf *b)
{
	uint32_t plen = get32(b), np, vlen, clen;
	const uint8_t *path = get_bytes(b, plen);
	char *pathz = path && plen < 4096 ? strndup((const char *)path, plen) : NULL;
	struct perm *p = get_perms(b, &np);
	vlen = get32(b);
	const uint8_t *value = get_bytes(b, vlen);
	clen = get32(b);
	const uint8_t *children = get_bytes(b, clen);
	struct node *n = NULL;

	if (!b->bad && pathz && path_valid(pathz, false) &&
	    (!clen || children[clen - 1] == '\0') &&
	    (n = node_new(pathz, p, np, value, vlen))) {
		n->children = clen ? malloc(clen) : NULL;
		if (clen && n->children)
			memcpy(n->children, children, clen);
		n->clen = n->children ? clen : 0;
		if (db_put(n))
			b->bad = true;
	} else {
		b->bad = true;
	}
	free(pathz);
	free(p);
}

static void load_record(struct buf *b, uint8_t type)
{
	uint32_t np, d;
	uint8_t which = 0;
	struct perm *p;

	switch (type) {
	case 'N':
		load_node(b);
		break;
	case 'D':
		d = get32(b);
		struct domain *dom = d && d <= DOMID_MAX_VALID ? domain_get(d, true) : NULL;
		uint32_t t = get32(b);
		if (!dom || b->bad) {
			b->bad = true;
			break;
		}
		dom->introduced = true;
		dom->target = (int64_t)t - 1;
		break;
	case 'S':
		get(b, &which, 1);
		p = get_perms(b, &np);
		if (!p || special_perms_set(which ? "@releaseDomain"
					    : "@introduceDomain", p, np))
			b->bad = true;
		free(p);
		break;
	default:
		b->bad = true;
	}
}

static int read_file(const char *file, struct buf *b)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	struct stat st;
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size > (1 << 30)) {
		close(fd);
		return -EFBIG;
	}
	b->len = (size_t)st.st_size;
	b->data = malloc(b->len ? b->len : 1);
	if (!b->data)
		ret = -ENOMEM;
	else if (read(fd, b->data, b->len) != (ssize_t)b->len)
		ret = -EIO;
	close(fd);
	return ret;
}

/* Returns 0 (loaded), -ENOENT (no file: start empty) or -EINVAL. */
int persist_load(const char *file)
{
	struct buf b = { 0 };
	uint64_t sum;
	uint8_t type;
	int ret = read_file(file, &b);

	if (ret)
		goto out;
	ret = -EINVAL;
	if (b.len < strlen(MAGIC) + 9 || memcmp(b.data, MAGIC, strlen(MAGIC)) ||
	    b.data[b.len - 9] != 'E')
		goto out;
	memcpy(&sum, b.data + b.len - 8, 8);
	if (sum != fnv64(b.data, b.len - 9))
		goto out;
	b.pos = strlen(MAGIC);
	b.len -= 9;
	while (!b.bad && b.pos < b.len && get(&b, &type, 1))
		load_record(&b, type);
	if (!b.bad && db_get("/"))
		ret = 0;
out:
	free(b.data);
	return ret;
}
