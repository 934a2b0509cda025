/* SPDX-License-Identifier: MIT */
/*
 * Logging with levels, to stderr or syslog.
 *
 * Nothing in lib/ logs unless the program raised the level or a call's
 * documentation says it logs.  Programs call xbd_log_init() once from main
 * before starting threads; xbd_log() itself is thread-safe (one write(2)
 * per line).
 */
#ifndef XBD_LOG_H
#define XBD_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum xbd_log_level {
	XBD_LOG_ERR = 3,
	XBD_LOG_WARN = 4,
	XBD_LOG_INFO = 6,
	XBD_LOG_DEBUG = 7,
};

/* ident: program name used as prefix / syslog ident (the string must live
 * as long as the program).  to_syslog: send to syslog instead of stderr. */
void xbd_log_init(const char *ident, enum xbd_log_level level, bool to_syslog);
void xbd_log_set_level(enum xbd_log_level level);
enum xbd_log_level xbd_log_get_level(void);
/* Parse "err|warn|info|debug" (or 3..7). Returns 0 or -EINVAL. */
int xbd_log_parse_level(const char *s, enum xbd_log_level *out);

/*
 * One line per call: every byte of the formatted message that is not
 * printable ASCII (a newline, an escape sequence, a byte >= 0x7f) is
 * written as \xNN, so a peer's text that reached the message cannot
 * forge a line or drive the terminal.  Lines are capped at 1 KiB.
 */
void xbd_log(enum xbd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Longest text xbd_log_escape() keeps (before escaping). */
#define XBD_LOG_ESC_KEEP 64
/* A buffer that always holds the escape of XBD_LOG_ESC_KEEP bytes. */
#define XBD_LOG_ESC_SIZE (XBD_LOG_ESC_KEEP * 4 + sizeof("...") + 1)

/*
 * Make text a peer wrote (a guest's xenstore node, a backend's error)
 * safe to quote in a log line or an error node: printable ASCII is kept
 * except '\\', which doubles; every other byte becomes \xNN; at most
 * XBD_LOG_ESC_KEEP bytes of src are kept, "..." marks a cut.  dst must
 * hold XBD_LOG_ESC_SIZE bytes (smaller buffers cut earlier); it is
 * always terminated.  Returns dst, so it can be an argument of a log call.
 */
char *xbd_log_escape(char *dst, size_t dst_size, const char *src);

#define log_err(...)   xbd_log(XBD_LOG_ERR, __VA_ARGS__)
#define log_warn(...)  xbd_log(XBD_LOG_WARN, __VA_ARGS__)
#define log_info(...)  xbd_log(XBD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) xbd_log(XBD_LOG_DEBUG, __VA_ARGS__)

#endif
