/* SPDX-License-Identifier: MIT */
/*
 * CONTROL (privileged): a small command set in cxenstored's style.  An
 * unknown command is EINVAL; xenstore-control then prints our `help`.
 */
#include "xenstored.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct control_cmd {
	const char *name;
	const char *params;
	int (*fn)(struct request *req, const char **argv, unsigned argc);
};

static int ctl_help(struct request *req, const char **argv, unsigned argc);

static int ctl_log(struct request *req, const char **argv, unsigned argc)
{
	enum xbd_log_level level;

	if (argc != 1)
		return -EINVAL;
	if (strcmp(argv[0], "on") == 0)
		level = XBD_LOG_DEBUG;
	else if (strcmp(argv[0], "off") == 0)
		level = XBD_LOG_WARN;
	else if (xbd_log_parse_level(argv[0], &level))
		return -EINVAL;
	xbd_log_set_level(level);
	return reply_string(req, "OK");
}

static int ctl_quota(struct request *req, const char **argv, unsigned argc)
{
	char *end, *s;
	long domid = -1;

	if (argc == 3 && strcmp(argv[0], "set") == 0) {
		if (quota_set(argv[1], argv[2]))
			return -EINVAL;
		return reply_string(req, "OK");
	}
	if (argc > 1)
		return -EINVAL;
	if (argc == 1) {
		domid = strtol(argv[0], &end, 10);
		if (!argv[0][0] || *end || domid < 0)
			return -EINVAL;
	}
	s = quota_report(&req->arena, domid);
	return s ? reply_string(req, s) : -EINVAL;
}

static int ctl_print(struct request *req, const char **argv, unsigned argc)
{
	if (argc != 1)
		return -EINVAL;
	log_info("control: %s", argv[0]);
	return reply_string(req, "OK");
}

static void count_node(void *node, void *arg)
{
	(void)node;
	(*(size_t *)arg)++;
}

static int count_reached(struct node *n, void *arg)
{
	(void)n;
	(*(size_t *)arg)++;
	return 0;
}

struct usage {
	long nodes, memory;
};

static void charge_node(void *node, void *arg)
{
	const struct node *n = node;
	struct usage *u = arg;
	uint32_t owner = n->perms[0].domid;

	if (owner <= DOMID_MAX_VALID) {
		u[owner].nodes++;
		u[owner].memory += (long)node_memory(n);
	}
}

static void owner_end(void *node, void *arg)
{
	const struct node *n = node;
	uint32_t *end = arg, owner = n->perms[0].domid;

	if (owner <= DOMID_MAX_VALID && owner >= *end)
		*end = owner + 1;
}

/* One past the highest domid the recount can charge or the counters can
 * hold: a domain's, a node owner's or a connection's.  The recount and
 * the comparison stop there (a store serves a few domains, not 32k: the
 * table of every domid was 512 KiB to zero and walk per check). */
static uint32_t usage_end(void)
{
	uint32_t end = domain_id_end();

	db_foreach(owner_end, &end);
	for (struct conn *c = conns; c; c = c->next)
		if (c->domid <= DOMID_MAX_VALID && c->domid >= end)
			end = c->domid + 1;
	return end;
}

/* The per-domain counters equal a recount from the tree and watches. */
static char *check_accounting(struct arena *a)
{
	uint32_t end = usage_end();
	struct usage *u = calloc(end ? end : 1, sizeof(*u));
	char *bad = NULL;

	if (!u)
		return arena_printf(a, "out of memory");
	db_foreach(charge_node, u);
	for (struct conn *c = conns; c; c = c->next) {
		for (struct watch *w = c->watches; !c->dead && !c->priv && w; w = w->next)
			u[c->domid].memory += (long)(strlen(w->path) + strlen(w->token));
		if (!c->dead && !c->priv)
			u[c->domid].memory += conn_charged(c);
	}
	for (uint32_t d = 0; d < end && !bad; d++) {
		struct domain *dom = domain_get(d, false);
		long nodes = dom ? dom->nodes : 0, mem = dom ? dom->memory : 0;
		if (nodes != u[d].nodes || mem != u[d].memory)
			bad = arena_printf(a, "inconsistent: domain %u counts %ld nodes %ld bytes, store has %ld nodes %ld bytes",
					   d, nodes, mem, u[d].nodes, u[d].memory);
	}
	free(u);
	return bad;
}

/* Every node reachable from "/" through the child lists, and no other;
 * the quota counters match the store. */
static int ctl_check(struct request *req, const char **argv, unsigned argc)
{
	size_t total = 0, reached = 0;
	char *bad;
	int ret;

	(void)argv;
	if (argc)
		return -EINVAL;
	db_foreach(count_node, &total);
	ret = db_walk("/", count_reached, &reached);
	if (ret)
		return ret;
	if (reached != total)
		return reply_string(req, arena_printf(&req->arena,
			"inconsistent: %zu nodes, %zu reachable", total, reached));
	bad = check_accounting(&req->arena);
	return reply_string(req, bad ? bad : "OK");
}

static const struct control_cmd cmds[] = {
	{ "check", "", ctl_check },
	{ "help", "", ctl_help },
	{ "log", "on|off|err|warn|info|debug", ctl_log },
	{ "print", "<string>", ctl_print },
	{ "quota", "[set <name> <val>|<domid>]", ctl_quota },
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static int ctl_help(struct request *req, const char **argv, unsigned argc)
{
	char *s = "";

	(void)argv;
	(void)argc;
	for (size_t i = 0; i < NCMDS && s; i++)
		s = arena_printf(&req->arena, "%s%s\t%s\n", s, cmds[i].name,
				 cmds[i].params);
	return s ? reply_string(req, s) : -ENOMEM;
}

int do_control(struct request *req)
{
	const char *argv[8];
	unsigned argc = 0;

	for (uint32_t off = 0; off < req->len && argc < 8;) {
		const char *s = req->body + off;
		const char *nul = memchr(s, 0, req->len - off);
		if (!nul)
			break;
		argv[argc++] = s;
		off += (uint32_t)(nul - s) + 1;
	}
	if (argc == 0)
		return -EINVAL;
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(argv[0], cmds[i].name) == 0)
			return cmds[i].fn(req, argv + 1, argc - 1);
	return -EINVAL;
}
