/* SPDX-License-Identifier: MIT */
/*
 * xbd top: a live view of every vbd (and queue) xbd-blkback serves, read
 * from its sysfs-style tree (Documentation/ABI/testing/sysfs-bus-xbd-backend)
 * like xentop reads blkback's statistics.  Rates and latency percentiles
 * are over the last interval: the difference of two samples of the
 * counters and of the latency histogram.
 *
 * Three outputs: a screen (plain ANSI: alternate screen, cursor home,
 * clear to end of line; keys read from the terminal in non-canonical
 * mode), --batch lines (one header, then one line per vbd per iteration,
 * like `xentop -b`) and --json (one object per iteration, one line each).
 *
 * Single-threaded.  The rows live in one array owned by struct top; a row
 * whose vbd left the tree is dropped at the next sample.  Guest names and
 * params come from xenstore when it is reachable, else are left out.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "num.h"
#include "vdev.h"
#include "xbd.h"

#define LAT_BUCKETS 24          /* backend/stats.h BE_LAT_BUCKETS */
#define MIN_DELAY_MS 100
#define MAX_DELAY_MS 3600000

/* The counters read per vbd (statistics/) and per queue (queue-N/). */
enum cnt { C_RD_REQ, C_WR_REQ, C_RD_SECT, C_WR_SECT, C_INFLIGHT, C_GRANTS,
	   C_POOL_FREE, C_POOL_USED, C_SQUEEZES, C_ERRORS, C_POLLS, C_POLL_HITS,
	   C_HELPER, NR_CNT };
static const char *const cnt_file[NR_CNT] = {
	"rd_req", "wr_req", "rd_sect", "wr_sect", "inflight", "persistent_grants",
	"pool_pages_free", "pool_pages_in_use", "squeezes", "errors", "polls",
	"poll_hits", "helper_req",
};

struct sample {
	uint64_t c[NR_CNT];
	uint64_t lat[LAT_BUCKETS];
};

struct row {
	char name[40];                /* "vbd-D-N", or "vbd-D-N/queue-Q" */
	unsigned int domid, devid;
	int queue;                    /* -1: the vbd's sums */
	unsigned int nr_queues;
	char guest[64], vdev[XBD_VDEV_NAME_MAX], state[16], storage[256];
	struct sample prev, cur;
	bool have_prev, seen;
	/* over the last interval; p50/p99 < 0: no completion in it */
	double rd_iops, wr_iops, rd_mbs, wr_mbs, p50, p99;
};

/* Sort columns: text ones ascending, numbers descending (biggest first). */
enum key { K_VBD, K_GUEST, K_VDEV, K_IOPS, K_RD_IOPS, K_WR_IOPS, K_MBS,
	   K_RD_MBS, K_WR_MBS, K_P50, K_P99, K_INFLIGHT, K_GRANTS, K_POOL,
	   K_SQUEEZES, K_ERRORS, K_POLLS, K_POLL_HITS, K_HELPER, NR_KEYS };
static const char *const key_name[NR_KEYS] = {
	"vbd", "guest", "vdev", "iops", "rd_iops", "wr_iops", "mbs", "rd_mbs",
	"wr_mbs", "p50", "p99", "inflight", "grants", "pool", "squeezes", "errors",
	"polls", "poll_hits", "helper_req",
};

struct top {
	const char *tree;             /* .../bus/xen-backend/devices */
	struct xs_handle *xs;         /* NULL: no names, no params */
	struct row *rows;
	unsigned int n, cap;
	enum key key;
	bool reverse, queues, batch, json;
	long long iterations;         /* 0: until q (or forever in batch) */
	int delay_ms;
	double interval_s;            /* between the last two samples */
	double last_ns;
};

static volatile sig_atomic_t stop_flag, resized;

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static double mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- reading the tree -------------------------------------------------- */

/* The first line of dir/file into buf; "" if absent. */
static void read_line(const char *dir, const char *file, char *buf, size_t len)
{
	char path[1024];
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* "from:count ..." (from = 0 or 2^b) into the histogram. */
static void parse_latency(const char *s, uint64_t *lat)
{
	unsigned long long from, count;
	int used;

	while (sscanf(s, " %llu:%llu%n", &from, &count, &used) == 2) {
		unsigned int b = from ? 63u - (unsigned int)__builtin_clzll(from) : 0;

		if (b < LAT_BUCKETS)
			lat[b] = count;
		s += used;
	}
}

/* A counter a backend of an older ABI lacks (errors, polls, helper_req)
 * reads as 0. */
static void read_sample(const char *dir, struct sample *s)
{
	char buf[1024];

	memset(s, 0, sizeof(*s));
	for (int i = 0; i < NR_CNT; i++) {
		read_line(dir, cnt_file[i], buf, sizeof(buf));
		s->c[i] = strtoull(buf, NULL, 10);
	}
	read_line(dir, "latency_us", buf, sizeof(buf));
	parse_latency(buf, s->lat);
}

/* The row of name, a new one (*is_new) if none, NULL without memory. */
static struct row *find_row(struct top *t, const char *name, bool *is_new)
{
	struct row *r;

	*is_new = false;
	for (unsigned int i = 0; i < t->n; i++)
		if (!strcmp(t->rows[i].name, name))
			return &t->rows[i];
	*is_new = true;
	if (t->n == t->cap) {
		unsigned int cap = t->cap ? 2 * t->cap : 16;
		struct row *nr = realloc(t->rows, cap * sizeof(*nr));

		if (!nr)
			return NULL;
		t->rows = nr;
		t->cap = cap;
	}
	r = &t->rows[t->n++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	return r;
}

/* Names and paths are shown on a terminal: no control characters. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* Guest name and params from xenstore; the tree's storage node (when the
 * backend has one) names the storage better than params. */
static void describe(struct top *t, struct row *r, const char *dir)
{
	char path[64], nodename[256];

	read_line(dir, "state", r->state, sizeof(r->state));
	read_line(dir, "storage", r->storage, sizeof(r->storage));
	if (!t->xs)
		goto out;
	snprintf(path, sizeof(path), "/local/domain/%u", r->domid);
	if (!r->guest[0] &&
	    xbd_xs_read_buf(t->xs, XBT_NULL, path, "name", r->guest, sizeof(r->guest)))
		r->guest[0] = '\0';
	read_line(dir, "nodename", nodename, sizeof(nodename));
	if (!r->storage[0] && nodename[0] &&
	    xbd_xs_read_buf(t->xs, XBT_NULL, nodename, "params", r->storage,
			    sizeof(r->storage)))
		r->storage[0] = '\0';
out:
	printable(r->guest);
	printable(r->storage);
	printable(r->state);
}

/* Sample the counters in dir into the row of name (the vbd's own
 * directory vdir for its attributes); the previous sample becomes prev. */
static void sample_row(struct top *t, const char *name, const char *vdir,
		       const char *dir, unsigned int domid, unsigned int devid,
		       int queue, unsigned int nr_queues)
{
	bool is_new;
	struct row *r = find_row(t, name, &is_new);

	if (!r)
		return;
	r->domid = domid;
	r->devid = devid;
	r->queue = queue;
	r->nr_queues = nr_queues;
	r->seen = true;
	r->have_prev = !is_new;
	if (xbd_vdev_name(devid, r->vdev, sizeof(r->vdev)) < 0)
		snprintf(r->vdev, sizeof(r->vdev), "%u", devid);
	r->prev = r->cur;
	if (queue < 0)
		describe(t, r, vdir);
	read_sample(dir, &r->cur);
}

static unsigned int count_queues(const char *vdir)
{
	char path[1100];
	unsigned int n = 0;

	for (;;) {
		snprintf(path, sizeof(path), "%s/queue-%u", vdir, n);
		if (access(path, F_OK))
			return n;
		n++;
	}
}

/* One pass over the tree: every row sampled, vanished rows dropped. */
static void sample_all(struct top *t)
{
	char vdir[1024], qdir[1100], name[48];
	unsigned int domid, devid, nq, k = 0;
	struct dirent *e;
	DIR *d;
	double now = mono_ns();

	for (unsigned int i = 0; i < t->n; i++)
		t->rows[i].seen = false;
	d = opendir(t->tree);
	while (d && (e = readdir(d))) {
		int end = 0;

		if (sscanf(e->d_name, "vbd-%u-%u%n", &domid, &devid, &end) != 2 ||
		    e->d_name[end])
			continue;
		snprintf(vdir, sizeof(vdir), "%s/%s", t->tree, e->d_name);
		nq = count_queues(vdir);
		snprintf(qdir, sizeof(qdir), "%s/statistics", vdir);
		sample_row(t, e->d_name, vdir, qdir, domid, devid, -1, nq);
		for (unsigned int q = 0; t->queues && q < nq; q++) {
			/* "vbd-%u-%u" is at most 25 */
			snprintf(name, sizeof(name), "%.25s/queue-%u", e->d_name, q);
			snprintf(qdir, sizeof(qdir), "%s/queue-%u", vdir, q);
			sample_row(t, name, vdir, qdir, domid, devid, (int)q, nq);
		}
	}
	if (d)
		closedir(d);
	for (unsigned int i = 0; i < t->n; i++)   /* keep the rows still there */
		if (t->rows[i].seen)
			t->rows[k++] = t->rows[i];
	t->n = k;
	t->interval_s = t->last_ns ? (now - t->last_ns) / 1e9 : 0;
	t->last_ns = now;
}

/* ---- figures over the interval ------------------------------------------- */

static uint64_t delta(const struct row *r, int i)
{
	uint64_t a = r->prev.c[i], b = r->cur.c[i];

	return b >= a ? b - a : b;     /* a reconnected queue starts at 0 */
}

/* Percentile p of the histogram difference, interpolated linearly inside
 * its bucket [2^b, 2^(b+1)) us (bucket 0: [0, 2)); -1 when empty. */
static double percentile(const struct row *r, double p)
{
	uint64_t d[LAT_BUCKETS], total = 0, cum = 0;
	double want;

	for (int b = 0; b < LAT_BUCKETS; b++) {
		uint64_t x = r->prev.lat[b], y = r->cur.lat[b];

		d[b] = y >= x ? y - x : y;
		total += d[b];
	}
	if (!total)
		return -1;
	want = ceil(p * (double)total);
	for (int b = 0; b < LAT_BUCKETS; b++) {
		double lo = b ? (double)(1u << b) : 0, hi = (double)(2u << b);

		if (d[b] && (double)(cum + d[b]) >= want)
			return lo + (hi - lo) * (want - (double)cum) / (double)d[b];
		cum += d[b];
	}
	return -1;
}

static void compute(struct top *t)
{
	double s = t->interval_s;

	for (unsigned int i = 0; i < t->n; i++) {
		struct row *r = &t->rows[i];

		if (!r->have_prev || s <= 0) {
			r->rd_iops = r->wr_iops = r->rd_mbs = r->wr_mbs = 0;
			r->p50 = r->p99 = -1;
			continue;
		}
		r->rd_iops = (double)delta(r, C_RD_REQ) / s;
		r->wr_iops = (double)delta(r, C_WR_REQ) / s;
		r->rd_mbs = (double)delta(r, C_RD_SECT) * 512 / 1e6 / s;
		r->wr_mbs = (double)delta(r, C_WR_SECT) * 512 / 1e6 / s;
		r->p50 = percentile(r, 0.50);
		r->p99 = percentile(r, 0.99);
	}
}

/* ---- sorting ---------------------------------------------------------------- */

static double num_of(const struct row *r, enum key k)
{
	switch (k) {
	case K_IOPS: return r->rd_iops + r->wr_iops;
	case K_RD_IOPS: return r->rd_iops;
	case K_WR_IOPS: return r->wr_iops;
	case K_MBS: return r->rd_mbs + r->wr_mbs;
	case K_RD_MBS: return r->rd_mbs;
	case K_WR_MBS: return r->wr_mbs;
	case K_P50: return r->p50;
	case K_P99: return r->p99;
	case K_INFLIGHT: return (double)r->cur.c[C_INFLIGHT];
	case K_GRANTS: return (double)r->cur.c[C_GRANTS];
	case K_POOL: return (double)(r->cur.c[C_POOL_FREE] + r->cur.c[C_POOL_USED]);
	case K_SQUEEZES: return (double)r->cur.c[C_SQUEEZES];
	case K_ERRORS: return (double)r->cur.c[C_ERRORS];
	case K_POLLS: return (double)r->cur.c[C_POLLS];
	case K_POLL_HITS: return (double)r->cur.c[C_POLL_HITS];
	case K_HELPER: return (double)r->cur.c[C_HELPER];
	default: return 0;
	}
}

static int cmp_vbd(const struct row *a, const struct row *b)
{
	if (a->domid != b->domid)
		return a->domid < b->domid ? -1 : 1;
	if (a->devid != b->devid)
		return a->devid < b->devid ? -1 : 1;
	return 0;
}

static enum key sort_key;
static bool sort_reverse;
static const struct row *sort_base;
static unsigned int sort_n;

/* Queue rows sort with their vbd and stay below it in queue order. */
static const struct row *vbd_of(const struct row *r)
{
	for (unsigned int i = 0; i < sort_n; i++) {
		const struct row *v = &sort_base[i];

		if (v->queue < 0 && v->domid == r->domid && v->devid == r->devid)
			return v;
	}
	return r;       /* its vbd's row could not be allocated */
}

static int cmp_vbds(const struct row *a, const struct row *b)
{
	int c = 0;
	double x, y;

	if (sort_key == K_GUEST)
		c = strcmp(a->guest, b->guest);
	else if (sort_key == K_VDEV)
		c = strcmp(a->vdev, b->vdev);
	else if (sort_key != K_VBD) {
		x = num_of(a, sort_key);
		y = num_of(b, sort_key);
		c = x > y ? -1 : x < y;
	}
	if (sort_reverse)
		c = -c;
	return c ? c : cmp_vbd(a, b);
}

static int cmp_rows(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	int c = cmp_vbds(vbd_of(a), vbd_of(b));

	if (c || a->queue == b->queue)
		return c;
	return a->queue < b->queue ? -1 : 1;
}

static void sort_rows(struct top *t)
{
	struct row *copy;

	if (t->n < 2)
		return;         /* no vbd: t->rows may be NULL, not for memcpy */
	copy = malloc(t->n * sizeof(*copy));
	if (!copy)
		return;
	/* vbd_of() looks in a stable copy while qsort moves the rows */
	memcpy(copy, t->rows, t->n * sizeof(*copy));
	sort_base = copy;
	sort_n = t->n;
	sort_key = t->key;
	sort_reverse = t->reverse;
	qsort(t->rows, t->n, sizeof(*t->rows), cmp_rows);
	free(copy);
}

/* ---- text ----------------------------------------------------------------- */

static const char header_fmt[] =
	"%-20s %5s %-8s %2s %-9s %8s %8s %8s %8s %7s %7s %5s %6s %6s %4s %4s %9s %9s %9s %s";

static int header(char *buf, size_t len)
{
	return snprintf(buf, len, header_fmt, "GUEST", "DOMID", "VDEV", "Q",
			"STATE", "RD_IOPS", "WR_IOPS", "RD_MB/s", "WR_MB/s", "P50_us",
			"P99_us", "INFL", "GRANTS", "POOL", "SQZ", "ERR", "POLLS", "HITS",
			"HELPER", "STORAGE");
}

static void fmt_lat(char *buf, size_t len, double v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f", v);
}

static int line(const struct row *r, char *buf, size_t len)
{
	char guest[64], q[8], p50[16], p99[16], ri[16], wi[16], rm[16], wm[16];

	if (r->queue < 0) {
		snprintf(guest, sizeof(guest), "%s", r->guest[0] ? r->guest : "-");
		snprintf(q, sizeof(q), "%u", r->nr_queues);
	} else {
		snprintf(guest, sizeof(guest), "  queue-%d", r->queue);
		snprintf(q, sizeof(q), "-");
	}
	fmt_lat(p50, sizeof(p50), r->p50);
	fmt_lat(p99, sizeof(p99), r->p99);
	if (r->have_prev) {
		snprintf(ri, sizeof(ri), "%.0f", r->rd_iops);
		snprintf(wi, sizeof(wi), "%.0f", r->wr_iops);
		snprintf(rm, sizeof(rm), "%.2f", r->rd_mbs);
		snprintf(wm, sizeof(wm), "%.2f", r->wr_mbs);
	} else {
		strcpy(ri, "-"), strcpy(wi, "-"), strcpy(rm, "-"), strcpy(wm, "-");
	}
	return snprintf(buf, len,
			 "%-20.20s %5u %-8s %2s %-9.9s %8s %8s %8s %8s %7s %7s %5" PRIu64
			 " %6" PRIu64 " %6" PRIu64 " %4" PRIu64 " %4" PRIu64 " %9" PRIu64
			 " %9" PRIu64 " %9" PRIu64 " %s",
			 guest, r->domid, r->vdev, q, r->queue < 0 ? r->state : "",
			 ri, wi, rm, wm, p50, p99, r->cur.c[C_INFLIGHT],
			 r->cur.c[C_GRANTS],
			 r->cur.c[C_POOL_FREE] + r->cur.c[C_POOL_USED],
			 r->cur.c[C_SQUEEZES], r->cur.c[C_ERRORS],
			 r->cur.c[C_POLLS], r->cur.c[C_POLL_HITS],
			 r->cur.c[C_HELPER],
			 r->queue < 0 && r->storage[0] ? r->storage : "-");
}

/* ---- JSON --------------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void json_num(const char *name, double v, bool have)
{
	if (have)
		printf(",\"%s\":%.3f", name, v);
	else
		printf(",\"%s\":null", name);
}

/* One row's object, without its closing brace (the caller may add to it). */
static void json_row(const struct row *r)
{
	printf("{\"domid\":%u,\"devid\":%u,\"vdev\":", r->domid, r->devid);
	json_str(r->vdev);
	if (r->queue >= 0) {
		printf(",\"queue\":%d", r->queue);
	} else {
		printf(",\"guest\":");
		if (r->guest[0])
			json_str(r->guest);
		else
			printf("null");
		printf(",\"state\":");
		json_str(r->state);
		printf(",\"storage\":");
		json_str(r->storage);
		printf(",\"queues\":%u", r->nr_queues);
	}
	json_num("rd_iops", r->rd_iops, r->have_prev);
	json_num("wr_iops", r->wr_iops, r->have_prev);
	json_num("rd_mbs", r->rd_mbs, r->have_prev);
	json_num("wr_mbs", r->wr_mbs, r->have_prev);
	json_num("lat_p50_us", r->p50, r->p50 >= 0);
	json_num("lat_p99_us", r->p99, r->p99 >= 0);
	printf(",\"inflight\":%" PRIu64 ",\"persistent_grants\":%" PRIu64
	       ",\"pool_pages\":%" PRIu64 ",\"squeezes\":%" PRIu64
	       ",\"errors\":%" PRIu64 ",\"polls\":%" PRIu64 ",\"poll_hits\":%" PRIu64
	       ",\"helper_req\":%" PRIu64,
	       r->cur.c[C_INFLIGHT], r->cur.c[C_GRANTS],
	       r->cur.c[C_POOL_FREE] + r->cur.c[C_POOL_USED],
	       r->cur.c[C_SQUEEZES], r->cur.c[C_ERRORS], r->cur.c[C_POLLS],
	       r->cur.c[C_POLL_HITS], r->cur.c[C_HELPER]);
}

/* {"interval_s":..,"sort":..,"vbds":[{..,"queue_stats":[..]}]} */
static void print_json(const struct top *t)
{
	bool first = true;

	printf("{\"time\":%lld,\"interval_s\":%.3f,\"sort\":\"%s\",\"vbds\":[",
	       (long long)time(NULL), t->interval_s, key_name[t->key]);
	for (unsigned int i = 0; i < t->n; i++) {
		const struct row *r = &t->rows[i];

		if (r->queue >= 0)
			continue;
		printf("%s", first ? "" : ",");
		first = false;
		json_row(r);
		/* the vbd's queues follow it (sort_rows) */
		if (t->queues) {
			printf(",\"queue_stats\":[");
			for (unsigned int j = i + 1; j < t->n && t->rows[j].queue >= 0; j++) {
				printf("%s", j > i + 1 ? "," : "");
				json_row(&t->rows[j]);
				putchar('}');
			}
			putchar(']');
		}
		putchar('}');
	}
	printf("]}\n");
}

/* ---- the screen ------------------------------------------------------------ */

static struct termios saved_tio;
static bool tio_saved;

static void screen_leave(void)
{
	if (!tio_saved)
		return;
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
	fputs("\033[?25h\033[?1049l", stdout);   /* cursor on, main screen */
	fflush(stdout);
	tio_saved = false;
}

static int screen_enter(void)
{
	struct termios tio;

	if (tcgetattr(STDIN_FILENO, &saved_tio))
		return -errno;
	tio = saved_tio;
	tio.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	tio.c_cc[VMIN] = 0;
	tio.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &tio))
		return -errno;
	tio_saved = true;
	fputs("\033[?1049h\033[?25l", stdout);   /* alternate screen, no cursor */
	return 0;
}

static unsigned int nr_vbds(const struct top *t)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < t->n; i++)
		n += t->rows[i].queue < 0;
	return n;
}

static void draw(const struct top *t)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	char buf[1024];
	unsigned int rows;

	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	if (ws.ws_col == 0 || ws.ws_col >= sizeof(buf))
		ws.ws_col = sizeof(buf) - 1;
	rows = ws.ws_row > 3 ? ws.ws_row - 3u : 1;
	fputs("\033[H", stdout);
	snprintf(buf, sizeof(buf),
		 "xbd top - %u vbds, every %.1fs, sort %s%s   keys: < > sort  r reverse"
		 "  + - interval  Q queues  q quit",
		 nr_vbds(t), t->delay_ms / 1000.0,
		 key_name[t->key], t->reverse ? " (reversed)" : "");
	printf("%.*s\033[K\n\033[K\n", ws.ws_col, buf);
	header(buf, sizeof(buf));
	printf("\033[7m%-*.*s\033[0m\n", ws.ws_col, ws.ws_col, buf);
	for (unsigned int i = 0; i < t->n && i < rows; i++) {
		line(&t->rows[i], buf, sizeof(buf));
		printf("%.*s\033[K\n", ws.ws_col, buf);
	}
	fputs("\033[J", stdout);
	fflush(stdout);
}

static void drop_queue_rows(struct top *t)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < t->n; i++)
		if (t->rows[i].queue < 0)
			t->rows[k++] = t->rows[i];
	t->n = k;
}

/* A key: true to redraw at once (sorting), false to quit. */
static bool on_key(struct top *t, int ch, bool *quit)
{
	switch (ch) {
	case 'q':
		*quit = true;
		return false;
	case '>':
		t->key = (enum key)((t->key + 1) % NR_KEYS);
		return true;
	case '<':
		t->key = (enum key)((t->key + NR_KEYS - 1) % NR_KEYS);
		return true;
	case 'r':
		t->reverse = !t->reverse;
		return true;
	case '+':
		t->delay_ms = t->delay_ms * 2 > MAX_DELAY_MS ? MAX_DELAY_MS : t->delay_ms * 2;
		return true;
	case '-':
		t->delay_ms = t->delay_ms / 2 < MIN_DELAY_MS ? MIN_DELAY_MS : t->delay_ms / 2;
		return true;
	case 'Q':
		t->queues = !t->queues;
		if (!t->queues)
			drop_queue_rows(t);
		return true;
	default:
		return false;
	}
}

/* Wait up to ms for keys; returns when the interval is over or q. */
static void wait_keys(struct top *t, int ms, bool *quit)
{
	double end = mono_ns() + ms * 1e6;
	struct pollfd p = { STDIN_FILENO, POLLIN, 0 };

	while (!stop_flag && !*quit) {
		double left = (end - mono_ns()) / 1e6;
		unsigned char buf[16];
		ssize_t n;

		if (left <= 0)
			return;
		if (resized) {
			resized = 0;
			draw(t);
		}
		if (poll(&p, 1, (int)left + 1) <= 0)
			continue;
		n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*quit = true;             /* the terminal went away */
			return;
		}
		for (ssize_t i = 0; i < n; i++)
			if (on_key(t, buf[i], quit)) {
				sort_rows(t);
				draw(t);
			}
	}
}

static int run_screen(struct top *t)
{
	bool quit = false;
	int rc = screen_enter();

	if (rc) {
		xbd_err("top: cannot set up the terminal: %s", strerror(-rc));
		return 1;
	}
	sample_all(t);
	compute(t);
	for (long long i = 0; !stop_flag && !quit; i++) {
		sort_rows(t);
		draw(t);
		if (t->iterations && i + 1 >= t->iterations)
			break;
		wait_keys(t, t->delay_ms, &quit);
		sample_all(t);
		compute(t);
	}
	screen_leave();
	return 0;
}

/* stdout failed.  A reader that went away (`xbd top -b | head -3`)
 * ends a batch quietly with status 0, as top and xentop do; any other
 * error (a full disk) is one, with its reason. */
static int out_failed(void)
{
	if (errno == EPIPE)
		return 0;
	xbd_err("top: cannot write the output: %s", strerror(errno));
	return 1;
}

/* Sleep ms, watching stdout: 1 as soon as its reader went away (a pipe
 * whose read end closed reports POLLERR, a hung-up socket or terminal
 * POLLHUP), -1 with errno when stdout is no file, else 0 (the time is
 * up, or a signal asked to stop).  A batch with no vbd writes nothing
 * after its header, so no write would ever fail with EPIPE; a regular
 * file or /dev/null reports nothing and the poll is a plain sleep. */
static int sleep_watching_stdout(int ms)
{
	double end = mono_ns() + ms * 1e6;
	struct pollfd p = { STDOUT_FILENO, 0, 0 };

	while (!stop_flag) {
		double left = (end - mono_ns()) / 1e6;

		if (left <= 0)
			return 0;
		if (poll(&p, 1, (int)left + 1) <= 0)
			continue;                 /* time up (left <= 0 next) or EINTR */
		if (p.revents & POLLNVAL) {
			errno = EBADF;
			return -1;
		}
		return 1;
	}
	return 0;
}

static int run_batch(struct top *t)
{
	char buf[1024];
	int gone;

	if (!t->json) {
		header(buf, sizeof(buf));
		printf("%s\n", buf);
		if (fflush(stdout) == EOF)
			return out_failed();
	}
	sample_all(t);
	for (long long i = 0; !stop_flag && (!t->iterations || i < t->iterations); i++) {
		gone = sleep_watching_stdout(t->delay_ms);
		if (gone < 0)
			return out_failed();
		if (gone || stop_flag)
			break;                    /* a reader gone: status 0, as EPIPE */
		sample_all(t);
		compute(t);
		sort_rows(t);
		if (t->json) {
			print_json(t);
		} else {
			for (unsigned int j = 0; j < t->n; j++) {
				line(&t->rows[j], buf, sizeof(buf));
				printf("%s\n", buf);
			}
		}
		if (fflush(stdout) == EOF)
			return out_failed();
	}
	return 0;
}

/* ---- options ------------------------------------------------------------------ */

static int parse_key(const char *s, enum key *k)
{
	for (int i = 0; i < NR_KEYS; i++)
		if (!strcmp(key_name[i], s)) {
			*k = (enum key)i;
			return 0;
		}
	return -EINVAL;
}

/* 0 to run, 1 after --help, -1 after a one-line error. */
static int parse(struct top *t, int argc, char **argv, const char **tree)
{
	static const struct option opts[] = {
		{ "batch", no_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "delay", required_argument, NULL, 'd' },
		{ "sort", required_argument, NULL, 's' },
		{ "reverse", no_argument, NULL, 'r' },
		{ "queues", no_argument, NULL, 'Q' },
		{ "sysfs", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	opterr = 0;
	while ((o = getopt_long(argc, argv, ":bjn:d:s:rQh", opts, NULL)) != -1) {
		switch (o) {
		case 'b': t->batch = true; break;
		case 'j': t->json = t->batch = true; break;
		case 'r': t->reverse = true; break;
		case 'Q': t->queues = true; break;
		case 'S': *tree = optarg; break;
		case 'h':
			xbd_usage("top", false);
			return 1;
		case 'n':
			t->iterations = xbd_num_in(optarg, 1, 1000000000);
			if (t->iterations > 0)
				break;
			xbd_err("top: bad iterations '%s' (a number from 1)", optarg);
			return -1;
		case 'd':
			if (xbd_parse_timeout(optarg, &t->delay_ms) == 0 &&
			    t->delay_ms >= MIN_DELAY_MS && t->delay_ms <= MAX_DELAY_MS)
				break;
			xbd_err("top: bad delay '%s' (seconds from 0.1 to 3600, e.g. 1 or 0.5)",
				optarg);
			return -1;
		case 's':
			if (parse_key(optarg, &t->key) == 0)
				break;
			xbd_err("top: unknown sort key '%s' ('xbd help top' lists them)",
				optarg);
			return -1;
		case ':':
			xbd_err("top: option %s needs a value", argv[optind - 1]);
			return -1;
		default:
			xbd_err("top: unknown option %s ('xbd help top' lists them)",
				argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		xbd_err("top: unexpected argument '%s'", argv[optind]);
		return -1;
	}
	return 0;
}

int cmd_top(struct xbd_ctx *c, int argc, char **argv)
{
	struct top t = { .delay_ms = 1000, .key = K_VBD };
	const char *sysfs = NULL, *rundir = c->rundir;
	char tree[1024];
	int rc = parse(&t, argc, argv, &sysfs);

	if (rc)
		return rc > 0 ? 0 : 2;
	if (!rundir || !*rundir)
		rundir = getenv("XBD_RUNDIR");
	if (!rundir || !*rundir)
		rundir = XBD_DEFAULT_RUNDIR;
	if (sysfs)
		snprintf(tree, sizeof(tree), "%s/bus/xen-backend/devices", sysfs);
	else
		snprintf(tree, sizeof(tree), "%s/sys/bus/xen-backend/devices", rundir);
	if (access(tree, R_OK | X_OK)) {
		xbd_err("top: cannot read %s: %s (is xbd-blkback running with its tree?)",
			tree, strerror(errno));
		return 1;
	}
	if (!t.batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		xbd_err("top: not a terminal; use --batch or --json");
		return 2;
	}
	t.tree = tree;
	c->quiet = true;              /* names are a bonus: the tree suffices */
	if (xbd_ctx_open(c) == 0)
		t.xs = c->xs;
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	signal(SIGHUP, on_stop);
	signal(SIGWINCH, on_winch);
	signal(SIGPIPE, SIG_IGN);
	rc = t.batch ? run_batch(&t) : run_screen(&t);
	free(t.rows);
	return rc;
}
