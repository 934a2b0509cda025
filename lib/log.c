/* SPDX-License-Identifier: MIT */
/* Logging with levels to stderr or syslog; see log.h. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* Written once by xbd_log_init() before threads start; the level may be
 * changed at run time, hence the relaxed atomics. */
static const char *log_ident = "xbd";
static int log_level = XBD_LOG_WARN;
static bool log_syslog;

void xbd_log_init(const char *ident, enum xbd_log_level level, bool to_syslog)
{
	log_ident = ident;
	log_syslog = to_syslog;
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
	if (to_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void xbd_log_set_level(enum xbd_log_level level)
{
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

enum xbd_log_level xbd_log_get_level(void)
{
	return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

int xbd_log_parse_level(const char *s, enum xbd_log_level *out)
{
	static const struct { const char *name; enum xbd_log_level level; } names[] = {
		{ "err", XBD_LOG_ERR }, { "error", XBD_LOG_ERR },
		{ "warn", XBD_LOG_WARN }, { "warning", XBD_LOG_WARN },
		{ "info", XBD_LOG_INFO }, { "debug", XBD_LOG_DEBUG },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].level;
			return 0;
		}
	}
	if (s[0] >= '3' && s[0] <= '7' && s[1] == '\0') {
		*out = (enum xbd_log_level)(s[0] - '0');
		return 0;
	}
	return -EINVAL;
}

static const char *level_name(enum xbd_log_level level)
{
	switch (level) {
	case XBD_LOG_ERR: return "error";
	case XBD_LOG_WARN: return "warning";
	case XBD_LOG_INFO: return "info";
	default: return "debug";
	}
}

static bool printable(unsigned char c)
{
	return c >= 0x20 && c < 0x7f;
}

/* Append c to dst (cap bytes, *n used) escaped; false if it did not fit. */
static bool put_escaped(char *dst, size_t cap, size_t *n, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";

	if (printable(c) && c != '\\') {
		if (*n + 1 >= cap)
			return false;
		dst[(*n)++] = (char)c;
		return true;
	}
	if (c == '\\') {
		if (*n + 2 >= cap)
			return false;
		dst[(*n)++] = '\\';
		dst[(*n)++] = '\\';
		return true;
	}
	if (*n + 4 >= cap)
		return false;
	dst[(*n)++] = '\\';
	dst[(*n)++] = 'x';
	dst[(*n)++] = hex[c >> 4];
	dst[(*n)++] = hex[c & 15];
	return true;
}

char *xbd_log_escape(char *dst, size_t dst_size, const char *src)
{
	size_t n = 0, i;

	if (dst_size == 0)
		return dst;
	/* Leave room for "..." after whatever we keep. */
	for (i = 0; src && src[i] && i < XBD_LOG_ESC_KEEP; i++) {
		if (!put_escaped(dst, dst_size > 4 ? dst_size - 3 : 1, &n,
				 (unsigned char)src[i]))
			break;
	}
	if (src && src[i] && dst_size > 4) {
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
	return dst;
}

/* Copy msg (len bytes) to out (cap bytes) with its non-printable bytes
 * escaped; cut where out is full. */
static size_t sanitize(char *out, size_t cap, const char *msg, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)msg[i];

		/* Backslashes of our own messages stay single here; only
		 * xbd_log_escape() doubles them (a quoted peer string). */
		if (c == '\\' || printable(c)) {
			if (n + 1 >= cap)
				break;
			out[n++] = (char)c;
		} else if (!put_escaped(out, cap, &n, c)) {
			break;
		}
	}
	out[n] = '\0';
	return n;
}

void xbd_log(enum xbd_log_level level, const char *fmt, ...)
{
	char msg[1024], line[1024];
	int saved = errno, m, n;
	va_list ap;

	if ((int)level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	if ((size_t)m >= sizeof(msg))
		m = sizeof(msg) - 1;
	if (log_syslog) {
		sanitize(line, sizeof(line), msg, (size_t)m);
		syslog((int)level, "%s", line);
	} else {
		n = snprintf(line, sizeof(line), "%s[%d]: %s: ", log_ident,
			     (int)getpid(), level_name(level));
		if (n < 0 || (size_t)n >= sizeof(line) - 1)
			n = 0;
		n += (int)sanitize(line + n, sizeof(line) - 1 - (size_t)n,
				   msg, (size_t)m);
		line[n++] = '\n';
		ssize_t r = write(STDERR_FILENO, line, (size_t)n);
		(void)r;
	}
	errno = saved;
}
