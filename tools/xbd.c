/* SPDX-License-Identifier: MIT */
/*
 * xbd: the toolstack command of the local platform, with the arguments
 * of xl for the commands they share (see Documentation/xbd.md).
 *
 * Thread model: single-threaded; main() parses the global options, opens
 * the platform and xenstore, runs one command from the table and closes
 * both.  Commands print their own one-line errors and return the exit
 * status: 0 success, 1 failure, 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xbd.h"

struct command {
	const char *name;
	int (*fn)(struct xbd_ctx *c, int argc, char **argv);
	const char *synopsis;
	const char *summary;
	const char *options;   /* one line per option, or NULL */
};

static int cmd_help(struct xbd_ctx *c, int argc, char **argv);

static const struct command commands[] = {
	{ "domain-create", cmd_domain_create,
	  "NAME [--memory SIZE] [--user USER] [--group GROUP]",
	  "create a local domain and introduce it to xenstored",
	  "  --memory SIZE   guest memory: a number of MiB, or with a suffix k, M, G\n"
	  "                  (default 256M)\n"
	  "  --user USER     the domain's files and xenstore socket belong to USER\n"
	  "                  (name or uid; default root): the socket is mode 0600\n"
	  "  --group GROUP   ... and to GROUP (name or gid): the socket is 0660\n" },
	{ "domain-destroy", cmd_domain_destroy, "NAME|ID [--timeout SECONDS]",
	  "detach every disk of a domain, release it and remove its files",
	  "  --timeout S     how long the backend of a live guest's disk may take to\n"
	  "                  close (default 10); a dead guest's disks go at once\n" },
	{ "domain-list", cmd_domain_list, "",
	  "list domains: id, name, state, number of vbds", NULL },
	{ "block-attach", cmd_block_attach,
	  "DOMAIN DISKSPEC... [--timeout SECONDS] [--limit KEY=N[,KEY=N...]]",
	  "attach a disk (DISKSPEC as in xl-disk-configuration(5))",
	  "  --timeout S     wait up to S seconds for the backend's InitWait\n"
	  "                  (default 10; 0 = do not wait)\n"
	  "  --limit L       I/O limits of the disk, KEY=N comma-separated, KEY one of\n"
	  "                  read_iops write_iops read_bps write_bps and their\n"
	  "                  _burst; N a number, K/M/G suffix (x1024); 0 = none\n" },
	{ "block-detach", cmd_block_detach, "DOMAIN VDEV|DEVID [--force] [--timeout SECONDS]",
	  "detach a disk",
	  "  --force         remove the disk's nodes even if the backend does not close\n"
	  "  --timeout S     wait up to S seconds for the backend's Closed (default 10)\n" },
	{ "block-resize", cmd_block_resize, "DOMAIN VDEV|DEVID SIZE [--timeout SECONDS]",
	  "grow a file-backed disk to SIZE bytes while its guest runs",
	  "  SIZE            bytes, or a number with K, M or G (x1024); a multiple of\n"
	  "                  512; smaller than the disk is refused\n"
	  "  --timeout S     wait up to S seconds for the backend to announce the new\n"
	  "                  size (default 10; 0 = do not wait)\n" },
	{ "block-list", cmd_block_list, "DOMAIN...",
	  "list a domain's disks like xl block-list", NULL },
	{ "top", cmd_top,
	  "[--batch] [--json] [--iterations N] [--delay S] [--sort KEY] [--reverse]\n"
	  "               [--queues] [--sysfs DIR]",
	  "a live view of every vbd and queue of xbd-blkback, from its sysfs tree",
	  "  -b, --batch        lines, not a screen: one header, then one line per\n"
	  "                     vbd per iteration (like xentop -b)\n"
	  "  -j, --json         one JSON object per iteration, one line each\n"
	  "                     (implies --batch)\n"
	  "  -n, --iterations N stop after N refreshes (default: until q; in batch\n"
	  "                     mode, until interrupted)\n"
	  "  -d, --delay S      seconds between refreshes (default 1; 0.1 to 3600)\n"
	  "  -s, --sort KEY     sort by KEY: vbd (default), guest, vdev, iops,\n"
	  "                     rd_iops, wr_iops, mbs, rd_mbs, wr_mbs, p50, p99,\n"
	  "                     inflight, grants, pool, squeezes, errors, polls,\n"
	  "                     poll_hits, helper_req; text keys ascending,\n"
	  "                     numbers biggest first\n"
	  "  -r, --reverse      reverse the sort order\n"
	  "  -Q, --queues       a line per queue below each vbd\n"
	  "      --sysfs DIR    the backend's tree (default RUNDIR/sys, as\n"
	  "                     xbd-blkback's --sysfs)\n"
	  "  -h, --help         print this help\n"
	  "\n"
	  "Keys on the screen: < and > move the sort column, r reverses it, + and -\n"
	  "double and halve the interval, Q shows or hides the queues, q quits.\n"
	  "Rates and the latency percentiles P50/P99 (microseconds, estimated\n"
	  "within the backend's power-of-two histogram buckets) are over the last\n"
	  "interval; INFL, GRANTS, POOL are current values; SQZ, ERR, and the\n"
	  "backend's ring polls POLLS and those that found work HITS, totals.\n" },
	{ "help", cmd_help, "[COMMAND]", "print this help, or a command's", NULL },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char global_usage[] =
	"usage: xbd [--rundir DIR] [--platform auto|local|xen] [-v] COMMAND [ARGS]\n"
	"\n"
	"  --rundir DIR    the local machine's directory (default $XBD_RUNDIR, or\n"
	"                  /run/xbd); xenstored is reached at DIR/xenstored.sock\n"
	"  --platform P    local or xen (auto: xen when /dev/xen/gntdev exists)\n"
	"  -v              log debug messages\n";

void xbd_err(const char *fmt, ...)
{
	va_list ap;

	fputs("xbd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int xbd_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

void xbd_usage(const char *cmd, bool err)
{
	const struct command *c = find_command(cmd);
	FILE *f = err ? stderr : stdout;

	if (!c)
		return;
	fprintf(f, "usage: xbd %s%s%s\n%s.\n", c->name, *c->synopsis ? " " : "",
		c->synopsis, c->summary);
	if (c->options)
		fprintf(f, "\n%s", c->options);
}

int xbd_parse_opts(int argc, char **argv, unsigned int allowed, int min_pos,
		   int max_pos, struct xbd_opts *o)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "force", no_argument, NULL, 'f' },
		{ "memory", required_argument, NULL, 'm' },
		{ "user", required_argument, NULL, 'u' },
		{ "group", required_argument, NULL, 'g' },
		{ "limit", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, npos;

	*o = (struct xbd_opts){ .timeout_ms = XBD_DEFAULT_TIMEOUT_MS };
	opterr = 0;                   /* our messages, one line each */
	while ((opt = getopt_long(argc, argv, ":t:fm:u:g:l:h", opts, NULL)) != -1) {
		if (opt == 'h') {
			xbd_usage(argv[0], false);
			return -2;
		}
		if (opt == 't' && (allowed & XBD_OPT_TIMEOUT) &&
		    xbd_parse_timeout(optarg, &o->timeout_ms) == 0)
			continue;
		if (opt == 'f' && (allowed & XBD_OPT_FORCE)) {
			o->force = true;
			continue;
		}
		if (opt == 'm' && (allowed & XBD_OPT_MEMORY)) {
			o->memory = optarg;
			continue;
		}
		if (opt == 'u' && (allowed & XBD_OPT_OWNER)) {
			o->user = optarg;
			continue;
		}
		if (opt == 'g' && (allowed & XBD_OPT_OWNER)) {
			o->group = optarg;
			continue;
		}
		if (opt == 'l' && (allowed & XBD_OPT_LIMIT) &&
		    o->nlimit < XBD_MAX_LIMIT_OPTS) {
			o->limit[o->nlimit++] = optarg;
			continue;
		}
		if (opt == 't' && (allowed & XBD_OPT_TIMEOUT))
			xbd_err("%s: bad timeout '%s' (seconds, e.g. 10 or 0.5)",
				argv[0], optarg);
		else if (opt == ':')
			xbd_err("%s: option %s needs a value", argv[0], argv[optind - 1]);
		else
			xbd_err("%s: unknown option %s", argv[0], argv[optind - 1]);
		xbd_usage(argv[0], true);
		return -1;
	}
	npos = argc - optind;
	if (npos < min_pos || (max_pos >= 0 && npos > max_pos)) {
		xbd_err("%s: %s arguments", argv[0], npos < min_pos ? "missing" : "too many");
		xbd_usage(argv[0], true);
		return -1;
	}
	return optind;
}

static int cmd_help(struct xbd_ctx *c, int argc, char **argv)
{
	(void)c;
	if (argc > 2) {
		xbd_err("help: too many arguments");
		xbd_usage("help", true);
		return 2;
	}
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		xbd_usage("help", false);
		return 0;
	}
	if (argc == 2) {
		if (!find_command(argv[1])) {
			xbd_err("unknown command '%s'", argv[1]);
			return 2;
		}
		xbd_usage(argv[1], false);
		return 0;
	}
	fputs(global_usage, stdout);
	fputs("\ncommands:\n", stdout);
	for (size_t i = 0; i < NCOMMANDS; i++)
		printf("  %-15s %s\n", commands[i].name, commands[i].summary);
	fputs("\n'xbd help COMMAND' shows a command's arguments and options.\n", stdout);
	return 0;
}

int xbd_ctx_open(struct xbd_ctx *c)
{
	char sock[4096];
	const char *path = NULL;
	int rc;

	if (c->kind == XBD_PLATFORM_AUTO)
		c->kind = xbd_platform_kind_detect(XBD_XEN_GNTDEV_PATH,
						   XBD_XEN_EVTCHN_PATH);
	if (c->kind == XBD_PLATFORM_LOCAL) {
		rc = xbd_xs_local_socket(c->rundir, sock, sizeof(sock));
		if (rc) {
			xbd_err("run directory path too long");
			return rc;
		}
		path = sock;
	}
	rc = xbd_xs_open(path, &c->xs);
	if (rc && !c->quiet)
		xbd_err("cannot connect to xenstored%s%s: %s", path ? " at " : "",
			path ? path : "", strerror(-rc));
	return rc;
}

int xbd_ctx_platform(struct xbd_ctx *c)
{
	int rc;

	if (c->plat)
		return 0;
	rc = xbd_platform_open(c->kind, c->rundir, &c->plat);
	if (rc)
		xbd_err("cannot open the %s platform: %s",
			xbd_platform_kind_name(c->kind), strerror(-rc));
	return rc;
}

static void ctx_close(struct xbd_ctx *c)
{
	if (c->xs)
		xs_close(c->xs);
	if (c->plat)
		xbd_platform_close(c->plat);
}

/* Global options; returns the index of the command or -1 (status in *rc). */
static int parse_global(struct xbd_ctx *c, int argc, char **argv, int *rc)
{
	static const struct option opts[] = {
		{ "rundir", required_argument, NULL, 'r' },
		{ "platform", required_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	opterr = 0;
	while ((o = getopt_long(argc, argv, "+:r:p:vh", opts, NULL)) != -1) {
		switch (o) {
		case 'r':
			c->rundir = optarg;
			break;
		case 'p':
			if (xbd_platform_kind_parse(optarg, &c->kind) == 0)
				break;
			xbd_err("unknown platform '%s' (auto, local or xen)", optarg);
			*rc = 2;
			return -1;
		case 'v':
			xbd_log_set_level(XBD_LOG_DEBUG);
			break;
		case 'h':
			*rc = cmd_help(c, 1, argv);
			return -1;
		default:
			xbd_err(o == ':' ? "option %s needs a value" : "unknown option %s",
				argv[optind - 1]);
			fputs(global_usage, stderr);
			*rc = 2;
			return -1;
		}
	}
	if (optind >= argc) {
		xbd_err("no command given");
		fputs(global_usage, stderr);
		*rc = 2;
		return -1;
	}
	return optind;
}

int main(int argc, char **argv)
{
	struct xbd_ctx c = { .kind = XBD_PLATFORM_AUTO };
	const struct command *cmd;
	int rc = 0, first;

	xbd_log_init("xbd", XBD_LOG_WARN, false);
	first = parse_global(&c, argc, argv, &rc);
	if (first < 0)
		return rc;
	cmd = find_command(argv[first]);
	if (!cmd) {
		xbd_err("unknown command '%s'; 'xbd help' lists them", argv[first]);
		return 2;
	}
	if (cmd->fn == cmd_help)
		return cmd_help(&c, argc - first, argv + first);
	/* Each command parses its own options from a fresh getopt state,
	 * then opens what it needs (xbd_ctx_open, xbd_ctx_platform). */
	optind = 0;
	rc = cmd->fn(&c, argc - first, argv + first);
	ctx_close(&c);
	return rc;
}
