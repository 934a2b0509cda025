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

void xbd_log(enum xbd_log_level level, const char *fmt, ...)
{
	char line[1024];
	int saved = errno;
	va_list ap;

	if ((int)level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	if (log_syslog) {
		vsyslog((int)level, fmt, ap);
	} else {
		int n = snprintf(line, sizeof(line), "%s[%d]: %s: ", log_ident,
				 (int)getpid(), level_name(level));
		if (n > 0 && (size_t)n < sizeof(line))
			n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		if (n >= (int)sizeof(line) - 1)
			n = sizeof(line) - 2;
		if (n > 0) {
			line[n++] = '\n';
			ssize_t r = write(STDERR_FILENO, line, (size_t)n);
			(void)r;
		}
	}
	va_end(ap);
	errno = saved;
}
