/* SPDX-License-Identifier: MIT */
/* lib/log: level parsing and filtering. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "log.h"

static void test_parse_levels(void **state)
{
	static const struct { const char *in; int rc; enum xbd_log_level out; } cases[] = {
		{ "err", 0, XBD_LOG_ERR },   { "error", 0, XBD_LOG_ERR },
		{ "warn", 0, XBD_LOG_WARN }, { "info", 0, XBD_LOG_INFO },
		{ "debug", 0, XBD_LOG_DEBUG }, { "6", 0, XBD_LOG_INFO },
		{ "", -EINVAL, 0 }, { "8", -EINVAL, 0 }, { "loud", -EINVAL, 0 },
		{ "33", -EINVAL, 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum xbd_log_level l = 0;
		assert_int_equal(xbd_log_parse_level(cases[i].in, &l), cases[i].rc);
		if (cases[i].rc == 0)
			assert_int_equal(l, cases[i].out);
	}
}

/* Capture stderr into a pipe and return what one log call wrote. */
static size_t capture(enum xbd_log_level level, const char *msg, char *buf, size_t len)
{
	int fds[2], saved = dup(STDERR_FILENO);
	assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
	dup2(fds[1], STDERR_FILENO);
	xbd_log(level, "%s", msg);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	ssize_t n = read(fds[0], buf, len - 1);
	close(fds[0]);
	buf[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

static void test_filtering(void **state)
{
	char buf[256];
	(void)state;
	xbd_log_init("test_log", XBD_LOG_WARN, false);
	assert_int_equal(capture(XBD_LOG_INFO, "hidden", buf, sizeof(buf)), 0);
	assert_true(capture(XBD_LOG_ERR, "shown", buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "test_log["));
	assert_non_null(strstr(buf, "error: shown\n"));
	xbd_log_set_level(XBD_LOG_DEBUG);
	assert_true(capture(XBD_LOG_DEBUG, "now shown", buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "debug: now shown"));
}

/* A peer's text is escaped: no byte of it can end or start a line. */
static void test_escape(void **state)
{
	char out[XBD_LOG_ESC_SIZE], longer[200];
	(void)state;
	assert_string_equal(xbd_log_escape(out, sizeof(out), "x86_64-abi"), "x86_64-abi");
	assert_string_equal(xbd_log_escape(out, sizeof(out), "a\nb\x1b[2Jc\\"),
			    "a\\x0ab\\x1b[2Jc\\\\");
	assert_string_equal(xbd_log_escape(out, sizeof(out), "\xff\x7f"), "\\xff\\x7f");
	memset(longer, 'A', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	xbd_log_escape(out, sizeof(out), longer);
	assert_int_equal(strlen(out), XBD_LOG_ESC_KEEP + 3);
	assert_string_equal(out + XBD_LOG_ESC_KEEP, "...");
	/* a small buffer cuts earlier and stays terminated */
	assert_string_equal(xbd_log_escape(out, 8, "\n\n\n"), "\\x0a...");
	/* every escaped byte of a worst-case input fits the documented size */
	memset(longer, '\n', sizeof(longer) - 1);
	xbd_log_escape(out, sizeof(out), longer);
	assert_int_equal(strlen(out), XBD_LOG_ESC_KEEP * 4 + 3);
}

/* Whatever reached the message, one call writes one line. */
static void test_one_line(void **state)
{
	char buf[512];
	(void)state;
	xbd_log_init("test_log", XBD_LOG_WARN, false);
	capture(XBD_LOG_ERR, "proto x\ntest_log[1]: error: forged\x1b]0;t\x07", buf,
		sizeof(buf));
	assert_null(strstr(buf, "\ntest_log[1]"));
	assert_non_null(strstr(buf, "proto x\\x0atest_log[1]: error: forged\\x1b]0;t\\x07\n"));
	assert_ptr_equal(strchr(buf, '\n'), buf + strlen(buf) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_levels),
		cmocka_unit_test(test_filtering),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_one_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
