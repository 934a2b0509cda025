/* SPDX-License-Identifier: MIT */
/*
 * Local platform: surviving a guest that truncates its own files.
 *
 * A guest must hold dom<N>/memory, gnttab and evtchn read-write to be
 * domain N, so it can also ftruncate() them; the next access of ours to
 * a page past the new end raises SIGBUS, which would kill the backend and
 * every other guest's disk with it (issue 18).  The files cannot be
 * sealed (they are ordinary files other processes open by name), so the
 * fault is caught instead: the handler finds the mapping of the address in
 * /proc/self/maps, and when it is a file of $rundir/dom<N>/ it maps a
 * private zero page over the faulting page and counts a fault for N.  The
 * access is then restarted and completes (reading zeros, writing into the
 * private page), and the code that owns the mapping checks the count
 * (backend/ring.c ring_pending: the device gets an error and Closing).
 * Any other SIGBUS restores the default action, so a real bug still
 * crashes.
 *
 * The handler uses only system calls and its own parsing (no malloc, no
 * stdio, no locks): it may run on any thread, several at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "platform/local.h"

static char prefix[PATH_MAX];          /* realpath(rundir) + "/dom"; set once */
static size_t prefix_len;
static uint32_t counts[XBD_DOMID_MAX + 1];   /* faults per domain, atomics */

static uintptr_t hex(const char **s)
{
	uintptr_t v = 0;

	for (;; (*s)++) {
		char c = **s;

		if (c >= '0' && c <= '9')
			v = v * 16 + (uintptr_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uintptr_t)(c - 'a' + 10);
		else
			return v;
	}
}

/* "$rundir/dom<N>/<file>..." -> N, else -1. */
static long domid_of(const char *path, const char *end)
{
	long n = 0;
	const char *p;

	if ((size_t)(end - path) <= prefix_len || memcmp(path, prefix, prefix_len))
		return -1;
	for (p = path + prefix_len; p < end && *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (*p - '0');
		if (n > XBD_DOMID_MAX)
			return -1;
	}
	return (p > path + prefix_len && p < end && *p == '/') ? n : -1;
}

/* One maps line [line, nl): the domain when it maps addr, -1 when it maps
 * something else, -2 when it does not contain addr. */
static long match_line(const char *line, const char *nl, uintptr_t addr)
{
	const char *s = line;
	uintptr_t start = hex(&s), end;

	if (*s++ != '-')
		return -2;
	end = hex(&s);
	if (addr < start || addr >= end)
		return -2;
	/* perms offset dev inode, then the path */
	for (int field = 0; field < 4; field++) {
		while (s < nl && *s == ' ')
			s++;
		while (s < nl && *s != ' ')
			s++;
	}
	while (s < nl && *s == ' ')
		s++;
	return domid_of(s, nl);
}

static long domain_of_addr(uintptr_t addr)
{
	char buf[8192];
	size_t have = 0;
	long found = -1;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		char *line = buf, *nl;

		if (n <= 0)
			break;
		have += (size_t)n;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
			long r = match_line(line, nl, addr);

			if (r != -2) {
				found = r;
				goto out;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		if (have == sizeof(buf))
			have = 0;           /* a line longer than the buffer: skip */
		memmove(buf, line, have);
	}
out:
	close(fd);
	return found;
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t page = (uintptr_t)si->si_addr & ~(uintptr_t)(XBD_PAGE_SIZE - 1);
	int saved = errno;
	long dom = si->si_code == BUS_ADRERR ? domain_of_addr(page) : -1;

	(void)sig;
	(void)ctx;
	if (dom < 0 ||
	    mmap((void *)page, XBD_PAGE_SIZE, PROT_READ | PROT_WRITE,
		 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) {
		signal(SIGBUS, SIG_DFL);   /* not a guest's file: crash as before */
	} else {
		__atomic_fetch_add(&counts[dom], 1, __ATOMIC_SEQ_CST);
	}
	errno = saved;
}

int xbd_fault_catch(const char *rundir)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus,
				.sa_flags = SA_SIGINFO | SA_RESTART };
	char real[PATH_MAX];

	if (!realpath(rundir, real))
		return -errno;
	if (strlen(real) + sizeof("/dom") > sizeof(prefix))
		return -ENAMETOOLONG;
	strcpy(prefix, real);
	strcat(prefix, "/dom");
	prefix_len = strlen(prefix);
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) < 0 ? -errno : 0;
}

uint32_t xbd_fault_count(xbd_domid_t domid)
{
	return domid <= XBD_DOMID_MAX ?
	       __atomic_load_n(&counts[domid], __ATOMIC_ACQUIRE) : 0;
}
