/* SPDX-License-Identifier: MIT */
/*
 * backend/storage/storage.c: pick the driver of a vbd and hand every call
 * to it.  See storage.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/storage/storage.h"

static const struct storage_driver *const drivers[] = {
	&storage_raw_driver,
	&storage_nbd_driver,
	&storage_qcow2_driver,
	&storage_rbd_driver,
};

static __thread char last_error[256];

void storage_set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
}

const char *storage_error(void)
{
	return last_error;
}

static const struct storage_driver *find_driver(const char *name)
{
	if (!name || !*name)
		name = "raw";
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		if (!strcmp(drivers[i]->name, name))
			return drivers[i];
	return NULL;
}

void storage_parse_params(const char *params, char driver[STORAGE_DRIVER_MAX],
			  const char **target)
{
	static const char *const formats[] = { "qcow2:", "raw:", "rbd:" };

	*target = params;
	snprintf(driver, STORAGE_DRIVER_MAX, "raw");
	if (!strncmp(params, "nbd://", 6) || !strncmp(params, "nbd+", 4) ||
	    !strncmp(params, "nbds://", 7)) {
		snprintf(driver, STORAGE_DRIVER_MAX, "nbd");
		return;
	}
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		size_t n = strlen(formats[i]);

		if (!strncmp(params, formats[i], n)) {
			snprintf(driver, STORAGE_DRIVER_MAX, "%.*s", (int)n - 1, params);
			*target = params + n;
			return;
		}
	}
}

static bool sector_size_ok(uint32_t ss)
{
	return ss >= 512 && ss <= 4096 && !(ss & (ss - 1));
}

int storage_open(const char *target, const struct storage_opts *o,
		 struct storage *s)
{
	const struct storage_driver *drv = find_driver(o->driver);
	int rc;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	last_error[0] = '\0';
	if (!drv) {
		storage_set_error("unknown storage driver %s", o->driver);
		return -EINVAL;
	}
	if ((o->sector_size && !sector_size_ok(o->sector_size)) ||
	    strlen(target) >= sizeof(s->target)) {
		storage_set_error("%s: bad sector size or target", drv->name);
		return -EINVAL;
	}
	strcpy(s->target, target);
	snprintf(s->driver, sizeof(s->driver), "%s", drv->name);
	s->read_only = o->read_only;
	rc = drv->open(s, o);
	if (!rc) {
		s->size -= s->size % s->logical_block;
		rc = s->size ? 0 : -ENOSPC;
		if (rc)
			drv->close(s);
	}
	if (rc) {
		s->drv = NULL;
		s->fd = -1;
		return rc;
	}
	s->drv = drv;
	return 0;
}

void storage_close(struct storage *s)
{
	if (s->drv)
		s->drv->close(s);
	s->drv = NULL;
	s->fd = -1;
}

int storage_queue_open(const struct storage *s, unsigned int index, unsigned int depth,
		       const struct storage_loop *loop, struct storage_queue **q)
{
	*q = NULL;
	if (!s->drv)
		return -EBADF;
	return s->drv->queue_open(s, index, depth, loop, q);
}

void storage_queue_close(const struct storage *s, struct storage_queue *q)
{
	if (s->drv && q)
		s->drv->queue_close(q);
}

int storage_submit(const struct storage *s, struct storage_queue *q,
		   const struct storage_req *r)
{
	return s->drv->submit(q, r);
}

int storage_queue_poll(const struct storage *s, struct storage_queue *q,
		       short *events)
{
	*events = 0;
	return s->drv && s->drv->poll && q ? s->drv->poll(q, events) : -1;
}

void storage_queue_ready(const struct storage *s, struct storage_queue *q,
			 short revents)
{
	if (s->drv && s->drv->ready && q)
		s->drv->ready(q, revents);
}

void storage_queue_commit(const struct storage *s, struct storage_queue *q)
{
	if (s->drv && s->drv->commit && q)
		s->drv->commit(q);
}

void storage_queue_tick(const struct storage *s, struct storage_queue *q,
			uint64_t now_ns)
{
	if (s->drv && s->drv->tick && q)
		s->drv->tick(q, now_ns);
}

int storage_watch_fd(const struct storage *s)
{
	return s->drv && s->drv->watch_fd ? s->drv->watch_fd(s) : -1;
}

int storage_watch(struct storage *s)
{
	return s->drv && s->drv->watch ? s->drv->watch(s) : 0;
}

int storage_probe_size(const struct storage *s, uint64_t *bytes)
{
	int rc;

	if (!s->drv || !s->drv->get_size)
		return -EOPNOTSUPP;
	rc = s->drv->get_size(s, bytes);
	if (!rc)
		*bytes -= *bytes % s->logical_block;
	return rc;
}

int storage_grow(struct storage *s, uint64_t bytes)
{
	if (bytes < s->size || bytes % s->logical_block)
		return -EINVAL;
	__atomic_store_n(&s->size, bytes, __ATOMIC_RELEASE);
	return 0;
}

bool storage_queue_has_tick(const struct storage *s)
{
	return s->drv && s->drv->tick;
}
