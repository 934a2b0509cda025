/* SPDX-License-Identifier: MIT */
/*
 * backend/storage: what storage_open() learns from files and block
 * devices (a real loop device, detached by the teardown whatever happens).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/loop.h>
#include <cmocka.h>

#include "backend/storage/storage.h"
#include "test_be_loop.h"

struct fx {
	char file[64];
	char dev[32];
	int fd;
};

static int setup(void **state)
{
	static struct fx fx;

	memset(&fx, 0, sizeof(fx));
	fx.fd = tmp_backing_file(fx.file, 8 << 20);
	if (fx.fd < 0)
		return -1;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	loop_detach(fx->dev);
	close(fx->fd);
	unlink(fx->file);
	return 0;
}

static void test_file_rw(void **state)
{
	struct fx *fx = *state;
	struct storage s;
	struct storage_opts o = { 0 };

	assert_int_equal(ftruncate(fx->fd, (8 << 20) + 100), 0);  /* not a sector multiple */
	assert_int_equal(storage_open(fx->file, &o, &s), 0);
	assert_false(s.is_blkdev);
	assert_false(s.read_only);
	assert_true(s.direct);                 /* ext4 /tmp takes O_DIRECT */
	assert_true(fcntl(s.fd, F_GETFL) & O_DIRECT);
	assert_int_equal(s.logical_block, 512);
	assert_true(s.physical_block >= 512 && s.physical_block <= 4096);
	assert_true(s.size == 8u << 20);       /* rounded down to 512 */
	assert_true(s.discard);                /* punch-hole */
	assert_false(s.discard_secure);
	assert_true(s.discard_granularity >= 512);
	/* the probe punched past the end: the size is unchanged */
	struct stat st;
	assert_int_equal(fstat(fx->fd, &st), 0);
	assert_int_equal(st.st_size, (8 << 20) + 100);
	assert_int_equal(storage_discard(&s, 0, 4096, false), -EOPNOTSUPP);
	storage_close(&s);
	assert_int_equal(s.fd, -1);
	storage_close(&s);                     /* idempotent */
}

static void test_file_options(void **state)
{
	struct fx *fx = *state;
	struct storage s;
	struct storage_opts ro = { .read_only = true }, nodirect = { .no_direct = true },
			    big = { .sector_size = 4096 };

	assert_int_equal(storage_open(fx->file, &ro, &s), 0);
	assert_true(s.read_only);
	assert_int_equal(fcntl(s.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	assert_false(s.discard);               /* nothing to discard read-only */
	storage_close(&s);

	assert_int_equal(storage_open(fx->file, &nodirect, &s), 0);
	assert_false(s.direct);
	assert_false(fcntl(s.fd, F_GETFL) & O_DIRECT);
	storage_close(&s);

	assert_int_equal(storage_open(fx->file, &big, &s), 0);
	assert_int_equal(s.logical_block, 4096);
	assert_int_equal(s.physical_block, 4096);
	assert_true(s.size == 8u << 20);
	storage_close(&s);
}

static void test_open_errors(void **state)
{
	struct fx *fx = *state;
	struct storage s;
	struct storage_opts o = { 0 };
	static const uint32_t bad_ss[] = { 256, 1000, 8192 };
	char empty[64];
	int efd;

	assert_int_equal(storage_open("/nonexistent/xbd", &o, &s), -ENOENT);
	assert_int_equal(s.fd, -1);
	assert_int_equal(storage_open("/tmp", &o, &s), -EINVAL);     /* a directory */
	assert_int_equal(storage_open("/dev/null", &o, &s), -EINVAL); /* char device */
	for (size_t i = 0; i < 3; i++) {
		struct storage_opts b = { .sector_size = bad_ss[i] };
		assert_int_equal(storage_open(fx->file, &b, &s), -EINVAL);
	}
	efd = tmp_backing_file(empty, 100);    /* less than one sector */
	assert_true(efd >= 0);
	assert_int_equal(storage_open(empty, &o, &s), -ENOSPC);
	assert_int_equal(s.fd, -1);
	close(efd);
	unlink(empty);
}

static void test_loop_device(void **state)
{
	struct fx *fx = *state;
	struct storage s, s2;
	struct storage_opts o = { 0 }, small = { .sector_size = 512 };
	char buf[4096];

	assert_int_equal(loop_attach(fx->file, fx->dev), 0);
	assert_int_equal(storage_open(fx->dev, &o, &s), 0);
	assert_true(s.is_blkdev);
	assert_true(s.direct);
	assert_int_equal(s.logical_block, 512);
	assert_true(s.size >= 8u << 20);
	assert_true(s.rdev != 0);
	assert_true(s.discard);                /* loop punches the backing file */
	assert_true(s.discard_granularity > 0);
	/* O_EXCL: a second opener is refused while we hold it */
	assert_int_equal(storage_open(fx->dev, &o, &s2), -EBUSY);
	/* BLKDISCARD really reaches the backing file */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(pwrite(fx->fd, buf, sizeof(buf), 65536), (ssize_t)sizeof(buf));
	assert_int_equal(fsync(fx->fd), 0);
	assert_int_equal(storage_discard(&s, 65536, 4096, false), 0);
	assert_int_equal(pread(fx->fd, buf, sizeof(buf), 65536), (ssize_t)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	if (!s.discard_secure)
		assert_int_equal(storage_discard(&s, 0, 4096, true), -EOPNOTSUPP);
	storage_close(&s);
	/* a block size below the device's is refused; equal is fine */
	assert_int_equal(storage_open(fx->dev, &small, &s), 0);
	storage_close(&s);
}

/* A 4Kn disk: the loop device's logical block becomes sector-size. */
static void test_loop_device_4k(void **state)
{
	struct fx *fx = *state;
	struct storage s;
	struct storage_opts o = { 0 }, small = { .sector_size = 512 };

	assert_int_equal(loop_attach_bs(fx->file, 4096, fx->dev), 0);
	assert_int_equal(storage_open(fx->dev, &small, &s), -EINVAL);  /* below the device's */
	assert_int_equal(storage_open(fx->dev, &o, &s), 0);
	assert_int_equal(s.logical_block, 4096);
	assert_int_equal(s.physical_block, 4096);
	assert_true(s.size == 8u << 20);
	storage_close(&s);
}

/* Online resize of a file: the probe sees the new length (rounded down
 * to the logical block); storage_grow takes a larger size only. */
static void test_file_grow(void **state)
{
	struct fx *fx = *state;
	struct storage s;
	struct storage_opts o = { 0 };
	uint64_t now = 0;

	assert_int_equal(storage_open(fx->file, &o, &s), 0);
	assert_int_equal(storage_probe_size(&s, &now), 0);
	assert_true(now == 8u << 20);
	assert_int_equal(ftruncate(fx->fd, (24 << 20) + 300), 0);
	assert_int_equal(storage_probe_size(&s, &now), 0);
	assert_true(now == 24u << 20);
	assert_true(storage_size(&s) == 8u << 20);       /* not taken yet */
	assert_int_equal(storage_grow(&s, now), 0);
	assert_true(storage_size(&s) == 24u << 20);
	assert_int_equal(storage_grow(&s, 16u << 20), -EINVAL);    /* never shrinks */
	assert_int_equal(storage_grow(&s, (32u << 20) + 1), -EINVAL);  /* not a block */
	assert_true(storage_size(&s) == 24u << 20);
	storage_close(&s);
	assert_int_equal(storage_probe_size(&s, &now), -EOPNOTSUPP);   /* closed */
}

/* A block device that grew (a loop device told its file grew, as
 * lvextend grows an LV): BLKGETSIZE64 says so. */
static void test_loop_device_grow(void **state)
{
	struct fx *fx = *state;
	struct storage s;
	struct storage_opts o = { 0 };
	uint64_t now = 0;
	int fd;

	assert_int_equal(loop_attach(fx->file, fx->dev), 0);
	assert_int_equal(storage_open(fx->dev, &o, &s), 0);
	assert_int_equal(ftruncate(fx->fd, 12 << 20), 0);
	fd = open(fx->dev, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ioctl(fd, LOOP_SET_CAPACITY, 0), 0);
	close(fd);
	assert_int_equal(storage_probe_size(&s, &now), 0);
	assert_true(now == 12u << 20);
	storage_close(&s);
}

/* params -> driver and target, as libxl and xbd block-attach write them. */
static void test_parse_params(void **state)
{
	static const struct { const char *params, *driver, *target; } t[] = {
		{ "/srv/a.img", "raw", "/srv/a.img" },
		{ "raw:/srv/a.img", "raw", "/srv/a.img" },
		{ "qcow2:/srv/b.qcow2", "qcow2", "/srv/b.qcow2" },
		{ "nbd://h:10809/x", "nbd", "nbd://h:10809/x" },
		{ "nbd+unix:///x?socket=/s", "nbd", "nbd+unix:///x?socket=/s" },
		{ "nbds://h/x", "nbd", "nbds://h/x" },
		{ "/dev/nbd0", "raw", "/dev/nbd0" },
		{ "vhd:/x", "raw", "vhd:/x" },      /* a path, refused by raw */
	};
	char drv[STORAGE_DRIVER_MAX];
	const char *target;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		storage_parse_params(t[i].params, drv, &target);
		assert_string_equal(drv, t[i].driver);
		assert_string_equal(target, t[i].target);
	}
}

/* Unknown drivers, and drivers whose store is not there: -errno and a
 * one-line reason; the storage stays closed. */
static void test_driver_errors(void **state)
{
	struct storage s;
	struct storage_opts o = { .driver = "vhd" };

	(void)state;
	assert_int_equal(storage_open("/x", &o, &s), -EINVAL);
	assert_false(storage_is_open(&s));
	assert_non_null(strstr(storage_error(), "unknown storage driver vhd"));
	o.driver = "nbd";
	assert_true(storage_open("nbd+unix:///x?socket=/nonexistent/s", &o, &s) < 0);
	assert_false(storage_is_open(&s));
	assert_non_null(strstr(storage_error(), "nbd"));
	storage_close(&s);                    /* idempotent on a failed open */
	o.driver = "qcow2";
	assert_int_equal(storage_open("/nonexistent/x.qcow2", &o, &s), -ENOENT);
	assert_non_null(strstr(storage_error(), "qcow2"));
	assert_int_equal(storage_watch_fd(&s), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_file_rw, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_device_4k, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_grow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_device_grow, setup, teardown),
		cmocka_unit_test(test_parse_params),
		cmocka_unit_test(test_driver_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
