/* SPDX-License-Identifier: MIT */
/*
 * Test helpers shared by the backend storage and io_uring tests: a
 * temporary backing file, and a loop device over it that the test's
 * teardown always detaches.
 */
#ifndef XBD_TEST_BE_LOOP_H
#define XBD_TEST_BE_LOOP_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Create a sparse file of size bytes; path receives its name. */
static inline int tmp_backing_file(char path[64], off_t size)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(path, 64, "%s/xbd-be-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, size)) {
		close(fd);
		unlink(path);
		return -1;
	}
	return fd;
}

/* losetup -f --show [-b bs] file -> dev ("/dev/loopN").  0 or -1. */
static inline int loop_attach_bs(const char *file, unsigned int bs, char dev[32])
{
	char cmd[160];
	FILE *p;
	int ok;

	if (bs)
		snprintf(cmd, sizeof(cmd), "losetup -f --show -b %u '%s'", bs, file);
	else
		snprintf(cmd, sizeof(cmd), "losetup -f --show '%s'", file);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	ok = fgets(dev, 32, p) != NULL;
	if (pclose(p) != 0 || !ok)
		return -1;
	dev[strcspn(dev, "\n")] = '\0';
	return strncmp(dev, "/dev/loop", 9) ? -1 : 0;
}

static inline int loop_attach(const char *file, char dev[32])
{
	return loop_attach_bs(file, 0, dev);
}

static inline void loop_detach(const char *dev)
{
	char cmd[64];

	if (!dev[0])
		return;
	snprintf(cmd, sizeof(cmd), "losetup -d '%s'", dev);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not detach %s\n", dev);
}

#endif
