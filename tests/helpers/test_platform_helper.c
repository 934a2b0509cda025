/* SPDX-License-Identifier: MIT */
/*
 * xbd-test-platform: drives the platform layer from a script, so tests can
 * play a guest and a backend in separate processes.
 *
 * Reads one command per line on stdin and answers one line on stdout:
 * "ok [values]" or "err <-errno> <message>".  Single-threaded; every handle
 * it opens lives until "exit" or end of input, when all are closed.
 * Usage: xbd-test-platform [--platform local|xen|auto] [--rundir DIR]
 * Commands (D, REMOTE, SELF: domain ids; indices are this process's):
 *   open | pid | exit
 *   create D NAME BYTES | destroy D [force] | info D
 *   claim D | release
 *   gntshr | share REMOTE COUNT rw|ro | fill AREA OFF BYTE | peek AREA OFF
 *   unshare AREA
 *   gnttab SELF | map REMOTE rw|ro REF... | mpeek MAP OFF | mpoke MAP OFF BYTE
 *   mpokefault MAP OFF       (store from a child; reports how it ended)
 *   unmap MAP                (repeatable, for the double-unmap test)
 *   copyfrom REMOTE REF OFF LEN | copyto REMOTE REF OFF LEN BYTE
 *   evtchn SELF | unbound REMOTE | bind REMOTE PORT | notify PORT [TIMES]
 *   pending | unmask PORT | unbind PORT | wait MS
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/platform.h"

#define MAX_AREAS 64
#define MAX_ARGS 40

struct area { uint8_t *addr; unsigned int count; };

static struct {
	enum xbd_platform_kind kind;
	const char *rundir;
	struct xbd_platform *p;
	struct xbd_domain *dom;
	struct xbd_gntshr *gs;
	struct xbd_gnttab *gt;
	struct xbd_evtchn *ev;
	struct area shares[MAX_AREAS], maps[MAX_AREAS];
	unsigned int nshares, nmaps;
} st;

static int reply_rc(int rc)
{
	if (rc < 0)
		printf("err %d %s\n", rc, strerror(-rc));
	else
		printf("ok\n");
	return 0;
}

static long num(const char *s)
{
	return s ? strtol(s, NULL, 0) : -1;
}

static struct area *area(struct area *tab, unsigned int n, const char *idx)
{
	long i = num(idx);

	return i >= 0 && (unsigned long)i < n ? &tab[i] : NULL;
}

static int cmd_share(char **a, int n)
{
	xbd_grant_ref_t refs[MAX_ARGS];
	unsigned int count = (unsigned int)num(a[2]);
	void *addr;
	int rc;

	if (n < 4 || !st.gs || count == 0 || count > MAX_ARGS || st.nshares == MAX_AREAS)
		return reply_rc(-EINVAL);
	rc = xbd_gntshr_share_pages(st.gs, (xbd_domid_t)num(a[1]), count, refs,
				    strcmp(a[3], "rw") == 0, &addr);
	if (rc)
		return reply_rc(rc);
	st.shares[st.nshares] = (struct area){ addr, count };
	printf("ok %u", st.nshares++);
	for (unsigned int i = 0; i < count; i++)
		printf(" %u", refs[i]);
	printf("\n");
	return 0;
}

static int cmd_map(char **a, int n)
{
	xbd_grant_ref_t refs[MAX_ARGS];
	int count = n - 3, rc;
	void *addr;

	if (count <= 0 || !st.gt || st.nmaps == MAX_AREAS)
		return reply_rc(-EINVAL);
	for (int i = 0; i < count; i++)
		refs[i] = (xbd_grant_ref_t)num(a[3 + i]);
	rc = xbd_gnttab_map(st.gt, (xbd_domid_t)num(a[1]), (unsigned int)count, refs,
			    strcmp(a[2], "rw") == 0 ? PROT_READ | PROT_WRITE : PROT_READ,
			    &addr);
	if (rc)
		return reply_rc(rc);
	st.maps[st.nmaps] = (struct area){ addr, (unsigned int)count };
	printf("ok %u\n", st.nmaps++);
	return 0;
}

/* Store into a mapping from a child, so a fault kills only the child. */
static int cmd_pokefault(struct area *m, long off)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	struct rlimit nocore = { 0, 0 };
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return reply_rc(-errno);
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &nocore);
		sigaction(SIGSEGV, &sa, NULL);   /* not the sanitizer's handler */
		sigaction(SIGBUS, &sa, NULL);
		*(volatile uint8_t *)(m->addr + off) = 0xee;
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		return reply_rc(-errno);
	if (WIFSIGNALED(status))
		printf("ok signal=%d\n", WTERMSIG(status));
	else
		printf("ok exited=%d\n", WEXITSTATUS(status));
	return 0;
}

static int cmd_copy(char **a, int n, bool to)
{
	struct xbd_gnttab_copy_seg seg = { 0 };
	uint8_t buf[XBD_PAGE_SIZE];
	int rc;

	if (n < (to ? 6 : 5) || !st.gt)
		return reply_rc(-EINVAL);
	memset(buf, to ? (int)num(a[5]) : 0, sizeof(buf));
	seg.len = (uint16_t)num(a[4]);
	if (seg.len > sizeof(buf))
		return reply_rc(-EINVAL);
	if (to) {
		seg.source.virt = buf;
		seg.dest.foreign.domid = (xbd_domid_t)num(a[1]);
		seg.dest.foreign.ref = (xbd_grant_ref_t)num(a[2]);
		seg.dest.foreign.offset = (uint16_t)num(a[3]);
		seg.flags = XBD_GNTCOPY_dest_gref;
	} else {
		seg.dest.virt = buf;
		seg.source.foreign.domid = (xbd_domid_t)num(a[1]);
		seg.source.foreign.ref = (xbd_grant_ref_t)num(a[2]);
		seg.source.foreign.offset = (uint16_t)num(a[3]);
		seg.flags = XBD_GNTCOPY_source_gref;
	}
	rc = xbd_gnttab_copy(st.gt, 1, &seg);
	if (rc)
		return reply_rc(rc);
	if (to)
		printf("ok %d\n", seg.status);
	else
		printf("ok %d %u\n", seg.status, buf[0]);
	return 0;
}

static int cmd_wait(long ms)
{
	struct pollfd pfd = { .fd = st.ev ? xbd_evtchn_fd(st.ev) : -1, .events = POLLIN };
	int n;

	if (!st.ev)
		return reply_rc(-EINVAL);
	n = poll(&pfd, 1, (int)ms);
	if (n < 0)
		return reply_rc(-errno);
	printf("ok %s\n", n ? "ready" : "timeout");
	return 0;
}

static int cmd_info(long domid)
{
	struct xbd_domain_info info;
	int rc = xbd_domain_get_info(st.p, (xbd_domid_t)domid, &info);

	if (domid < 0 || domid > 0xffff)
		rc = -EINVAL;
	if (rc)
		return reply_rc(rc);
	printf("ok exists=%d dying=%d claimed_by=%d memory=%llu name=%s\n",
	       info.exists, info.dying, (int)info.claimed_by,
	       (unsigned long long)info.memory, info.name[0] ? info.name : "-");
	return 0;
}

static int cmd_evtchn(char **a, int n)
{
	const char *c = a[0];
	long x = n > 1 ? num(a[1]) : -1;
	int rc;

	static const char *const cmds[] = { "evtchn", "unbound", "bind", "wait",
		"pending", "notify", "unmask", "unbind" };
	bool known = false;

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		known = known || !strcmp(c, cmds[i]);
	if (!known)
		return -1;
	if (!strcmp(c, "evtchn"))
		return reply_rc(st.ev ? -EBUSY : xbd_evtchn_open(st.p, (xbd_domid_t)x, &st.ev));
	if (!st.ev)
		return reply_rc(-EINVAL);
	if (!strcmp(c, "unbound"))
		rc = xbd_evtchn_bind_unbound_port(st.ev, (xbd_domid_t)x);
	else if (!strcmp(c, "bind") && n > 2)
		rc = xbd_evtchn_bind_interdomain(st.ev, (xbd_domid_t)x,
						 (xbd_evtchn_port_t)num(a[2]));
	else if (!strcmp(c, "wait"))
		return cmd_wait(x);
	else if (!strcmp(c, "pending"))
		rc = xbd_evtchn_pending(st.ev);
	else if (!strcmp(c, "notify")) {
		long times = n > 2 ? num(a[2]) : 1;

		rc = 0;
		for (long i = 0; i < times && rc == 0; i++)
			rc = xbd_evtchn_notify(st.ev, (xbd_evtchn_port_t)x);
		return reply_rc(rc);
	} else if (!strcmp(c, "unmask"))
		return reply_rc(xbd_evtchn_unmask(st.ev, (xbd_evtchn_port_t)x));
	else if (!strcmp(c, "unbind"))
		return reply_rc(xbd_evtchn_unbind(st.ev, (xbd_evtchn_port_t)x));
	else
		return -1;
	if (rc < 0)
		return reply_rc(rc);
	printf("ok %d\n", rc);
	return 0;
}

static int cmd_grant(char **a, int n)
{
	const char *c = a[0];
	struct area *s = n > 1 ? area(st.shares, st.nshares, a[1]) : NULL;
	struct area *m = n > 1 ? area(st.maps, st.nmaps, a[1]) : NULL;
	long off = n > 2 ? num(a[2]) : 0;

	if (!strcmp(c, "gntshr"))
		return reply_rc(st.gs || !st.dom ? -EINVAL : xbd_gntshr_open(st.dom, &st.gs));
	if (!strcmp(c, "share"))
		return cmd_share(a, n);
	if (!strcmp(c, "gnttab"))
		return reply_rc(st.gt ? -EBUSY : xbd_gnttab_open(st.p, (xbd_domid_t)num(a[1]), &st.gt));
	if (!strcmp(c, "map"))
		return cmd_map(a, n);
	if (!strcmp(c, "copyfrom") || !strcmp(c, "copyto"))
		return cmd_copy(a, n, c[4] == 't');
	if (!strcmp(c, "unshare"))
		return reply_rc(s ? xbd_gntshr_unshare(st.gs, s->addr, s->count) : -EINVAL);
	if (!strcmp(c, "unmap"))
		return reply_rc(m ? xbd_gnttab_unmap(st.gt, m->addr, m->count) : -EINVAL);
	if (off < 0 || off >= XBD_PAGE_SIZE * MAX_ARGS)
		return reply_rc(-EINVAL);
	if (!strcmp(c, "fill") && s && n > 3) {
		memset(s->addr + off, (int)num(a[3]), s->count * XBD_PAGE_SIZE - (size_t)off);
		return reply_rc(0);
	}
	if (!strcmp(c, "peek") && s)
		return printf("ok %u\n", s->addr[off]), 0;
	if (!strcmp(c, "mpeek") && m)
		return printf("ok %u\n", m->addr[off]), 0;
	if (!strcmp(c, "mpoke") && m && n > 3) {
		m->addr[off] = (uint8_t)num(a[3]);
		return reply_rc(0);
	}
	if (!strcmp(c, "mpokefault") && m)
		return cmd_pokefault(m, off);
	return -1;
}

static int cmd_domain(char **a, int n)
{
	const char *c = a[0];
	long d = n > 1 ? num(a[1]) : -1;

	if (!strcmp(c, "open"))
		return reply_rc(st.p ? -EBUSY : xbd_platform_open(st.kind, st.rundir, &st.p));
	if (!strcmp(c, "pid"))
		return printf("ok %d\n", (int)getpid()), 0;
	if (!st.p)
		return reply_rc(-ENXIO);
	if (!strcmp(c, "create") && n > 3)
		return reply_rc(d < 0 || d > 0xffff ? -EINVAL :
				xbd_domain_create(st.p, (xbd_domid_t)d, a[2],
						  strtoull(a[3], NULL, 0)));
	if (!strcmp(c, "destroy"))
		return reply_rc(d < 0 || d > 0xffff ? -EINVAL :
				xbd_domain_destroy(st.p, (xbd_domid_t)d,
						   n > 2 && !strcmp(a[2], "force")));
	if (!strcmp(c, "info"))
		return cmd_info(d);
	if (!strcmp(c, "claim"))
		return reply_rc(st.dom ? -EBUSY : d < 0 || d > 0xffff ? -EINVAL :
				xbd_domain_claim(st.p, (xbd_domid_t)d, &st.dom));
	if (!strcmp(c, "release")) {
		xbd_gntshr_close(st.gs);
		st.gs = NULL;
		st.nshares = 0;
		xbd_domain_release(st.dom);
		st.dom = NULL;
		return reply_rc(0);
	}
	return -1;
}

static void close_all(void)
{
	xbd_evtchn_close(st.ev);
	xbd_gnttab_close(st.gt);
	xbd_gntshr_close(st.gs);
	xbd_domain_release(st.dom);
	xbd_platform_close(st.p);
}

int main(int argc, char **argv)
{
	char line[1024];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rundir"))
			st.rundir = argv[i + 1];
		else if (!strcmp(argv[i], "--platform") &&
			 xbd_platform_kind_parse(argv[i + 1], &st.kind) == 0)
			continue;
		else {
			fprintf(stderr, "usage: %s [--platform local|xen|auto] [--rundir DIR]\n",
				argv[0]);
			return 2;
		}
	}
	if (!st.kind)
		st.kind = XBD_PLATFORM_LOCAL;
	while (fgets(line, sizeof(line), stdin)) {
		char *a[MAX_ARGS + 4], *save = NULL;
		int n = 0;

		for (char *t = strtok_r(line, " \t\n", &save); t && n < MAX_ARGS + 3;
		     t = strtok_r(NULL, " \t\n", &save))
			a[n++] = t;
		a[n] = NULL;
		if (n == 0)
			continue;
		if (!strcmp(a[0], "exit"))
			break;
		if (cmd_domain(a, n) < 0 && cmd_evtchn(a, n) < 0 && cmd_grant(a, n) < 0)
			reply_rc(-EINVAL);
		fflush(stdout);
	}
	close_all();
	return 0;
}
