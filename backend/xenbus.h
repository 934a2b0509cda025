/* SPDX-License-Identifier: MIT */
/*
 * The xenstore side of a vbd, on the control thread: probe (read what the
 * toolstack wrote, open the storage, advertise, InitWait), negotiation
 * with the frontend (queues, ring order and refs, event channels,
 * protocol, persistent grants), the XenbusState machine, and be_fatal().
 *
 * The machine follows Linux xen-blkback's frontend_changed():
 *   frontend Initialising, we are Closed -> InitWait (it reconnects)
 *   frontend Initialised or Connected    -> disconnect (idempotent), read
 *                                           its keys, start the queues,
 *                                           publish the disk, Connected
 *                                           (nothing if already Connected)
 *   frontend Closing                      -> Closing
 *   frontend Closed                       -> disconnect, Closed; removed
 *                                           when the toolstack set online=0
 *   frontend Unknown (gone)               -> disconnect, Closed, removed
 * and, on our own directory: online=0 with no frontend using the device
 * (as QEMU does) -> disconnect, Closed, removed; the directory removed ->
 * removed.
 */
#ifndef XBD_BACKEND_XENBUS_H
#define XBD_BACKEND_XENBUS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/blkif.h"

/*
 * Probe the device at be_path (".../backend/vbd/<fe>/<devid>").  On
 * success *out holds one reference (the device table's).  A path that is
 * not a vbd path: -EINVAL and nothing written.  Any later failure is
 * reported through be_fatal() (an error node, Closing) and returned; the
 * device is then still returned in *out, so the caller can follow its
 * state until the toolstack removes it.
 */
int be_dev_probe(const struct be_ctx *ctx, const char *be_path,
		 struct backend_dev **out);

#define BE_DEV_REMOVE 1

/* React to a change under our directory or of the frontend's state.
 * Returns BE_DEV_REMOVE when the device must be removed, else 0. */
int be_dev_changed(struct backend_dev *d);

/* A queue's thread ended on its own (its frontend broke the ring): report
 * it and disconnect the device.  Called when the queue's done_fd fires. */
void be_dev_queue_done(struct backend_dev *d, unsigned int q);

/* The storage's watch fd fired (storage.h): a store lost for good is an
 * error node, and the device disconnects; the others are not touched. */
void be_dev_storage_event(struct backend_dev *d);

/*
 * Asynchronous teardown (ctx->async_teardown): while a reaper thread
 * stops a disconnected vbd's queues, be_dev_changed() does nothing and
 * be_dev_reap_fd() is an eventfd that becomes readable once they are
 * stopped; then be_dev_reaped() cleans up and acts on the state as it is
 * (returns as be_dev_changed).  -1: no reaper.
 */
int be_dev_reap_fd(const struct backend_dev *d);
int be_dev_reaped(struct backend_dev *d);

/*
 * Timers: a connect deferred by max_connects_per_second, and the
 * teardown deadline (reported once).  be_dev_timeout_ms(): ms until
 * be_dev_timer() has something to do (-1: nothing).  be_dev_timer():
 * true when the caller must call be_dev_changed() (the deferred
 * connect's time came).
 */
int be_dev_timeout_ms(const struct backend_dev *d, uint64_t now_ns);
bool be_dev_timer(struct backend_dev *d, uint64_t now_ns);

/*
 * Online resize, every size_check_ms: the size queue 0 last measured
 * (be_io_cfg.measured_size; the control thread never waits on a store)
 * of a Connected device.  Grown: the queues take the new end
 * (storage_grow), then `sectors` and state Connected are written again
 * in one transaction, as Linux xen_vbd_resize does, which the frontend
 * takes as "read sectors again".  Shrunk: refused (logged once per
 * size); the disk keeps the size it has.
 */
void be_dev_check_size(struct backend_dev *d);

/* Disconnect (waiting for a reaper), close the storage and drop the
 * table's reference. */
void be_dev_remove(struct backend_dev *d);

/*
 * Report a failure the frontend or the toolstack caused, as
 * xenbus_dev_fatal: "<errno> <message>" in the error nodes, state
 * Closing, and the queues stopped.  neg_errno must be a literal or a
 * just-assigned -errno, never a leftover variable (CONTRIBUTING.md,
 * "Peer-visible failures go through one helper").
 */
void be_fatal(struct backend_dev *d, int neg_errno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
