/* SPDX-License-Identifier: MIT */
/*
 * The `xbd` toolstack command: what its command files share.
 *
 * One process, one thread: every command runs to completion on the main
 * thread, holding one xenstore handle and, for the domain commands, one
 * platform handle; the command opens them, main() closes them.
 */
#ifndef XBD_TOOLS_XBD_H
#define XBD_TOOLS_XBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/platform.h"
#include "xenbus.h"

#define XBD_DEFAULT_TIMEOUT_MS 10000   /* LIBXL_INIT_TIMEOUT, LIBXL_DESTROY_TIMEOUT */

struct xbd_ctx {
	const char *rundir;            /* NULL: $XBD_RUNDIR or the default */
	enum xbd_platform_kind kind;
	struct xbd_platform *plat;
	struct xs_handle *xs;
	bool quiet;                    /* xbd_ctx_open: no message on failure */
};

/* Connect to xenstore: the local platform's socket, or the real
 * xenstored on xen (c->kind is resolved here).  Prints the error. */
int xbd_ctx_open(struct xbd_ctx *c);
/* Open the platform too (domain commands only: block commands need no
 * access to the domains' files).  Prints the error. */
int xbd_ctx_platform(struct xbd_ctx *c);

/* One line "xbd: <message>" on stderr. */
void xbd_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Command handlers: argv[0] is the command name; return the exit status. */
int cmd_domain_create(struct xbd_ctx *c, int argc, char **argv);
int cmd_domain_destroy(struct xbd_ctx *c, int argc, char **argv);
int cmd_domain_list(struct xbd_ctx *c, int argc, char **argv);
int cmd_block_attach(struct xbd_ctx *c, int argc, char **argv);
int cmd_block_detach(struct xbd_ctx *c, int argc, char **argv);
int cmd_block_list(struct xbd_ctx *c, int argc, char **argv);
int cmd_block_resize(struct xbd_ctx *c, int argc, char **argv);  /* resize.c */
int cmd_top(struct xbd_ctx *c, int argc, char **argv);          /* top.c */

/* Print a command's usage text (to stderr when err, else stdout). */
void xbd_usage(const char *cmd, bool err);

/* Command options; a command names the ones it takes. */
enum { XBD_OPT_TIMEOUT = 1, XBD_OPT_FORCE = 2, XBD_OPT_MEMORY = 4,
       XBD_OPT_OWNER = 8, XBD_OPT_LIMIT = 16 };
#define XBD_MAX_LIMIT_OPTS 8
struct xbd_opts {
	int timeout_ms;          /* XBD_DEFAULT_TIMEOUT_MS unless --timeout */
	bool force;
	const char *memory;      /* NULL unless --memory */
	const char *user;        /* NULL unless --user */
	const char *group;       /* NULL unless --group */
	const char *limit[XBD_MAX_LIMIT_OPTS];   /* each --limit, in order */
	unsigned int nlimit;
};
/*
 * Parse the options of command argv[0] (allowed: XBD_OPT_* mask) and
 * check that between min_pos and max_pos positional arguments remain
 * (max_pos < 0: no limit).  Returns the index of the first positional
 * argument (getopt moves them to the end), or -1 after printing the
 * usage; -h/--help prints it to stdout and returns -2.
 */
int xbd_parse_opts(int argc, char **argv, unsigned int allowed, int min_pos,
		   int max_pos, struct xbd_opts *o);

/* ---- domains (domain.c) --------------------------------------------- */

/* NAME or numeric ID of a domain present in xenstore (/local/domain/<id>).
 * Prints the error.  -ENOENT for an unknown domain. */
int xbd_resolve_domain(struct xbd_ctx *c, const char *arg, xbd_domid_t *out);

/* qsort comparator for uint32_t. */
int xbd_cmp_u32(const void *a, const void *b);
/* A number with an optional K, M or G suffix (x1024, either case), at
 * most max: 0 or -EINVAL.  --limit values and block-resize sizes. */
int xbd_parse_size(const char *s, uint64_t max, uint64_t *out);
/* Parse "--timeout SECONDS" (decimal, fractions allowed, 0 = no wait). */
int xbd_parse_timeout(const char *s, int *ms);

#endif
