/* SPDX-License-Identifier: MIT */
/*
 * The frontend's side of the xenbus handshake (blkif.h "STATE DIAGRAM"):
 * xbdfront_open_in() negotiates, and the domain's monitor thread follows
 * the backend's state afterwards (resize, restart, detach).
 *
 * Negotiation, as Linux xen-blkfront's talk_to_blkback/blkfront_connect:
 *   1. read <fe>/backend and <fe>/backend-id; the path must be
 *      /local/domain/<backend-id>/backend/vbd/<domid>/<devid>;
 *   2. a device a previous frontend left (our state not Initialising):
 *      Closed, wait for the backend to be Closed, Initialising; then wait
 *      (connect_timeout_ms) for the backend's InitWait; a backend that
 *      is Closing there refused the disk (its `error` node says why):
 *      fail at once;
 *   3. read its offer: multi-queue-max-queues (default 1),
 *      max-ring-page-order (default 0), feature-persistent (default 0);
 *   4. queues = min(ours, its), order = min(ours, its), persistent = both;
 *      allocate and grant the rings, allocate the event channels;
 *   5. one transaction: ring-ref / ring-ref%u / event-channel (one queue)
 *      or multi-queue-num-queues + queue-N/... (several), ring-page-order
 *      (when > 0), protocol, feature-persistent; then Initialised;
 *   6. wait (connect_timeout_ms) for Connected; Closing/timeout is an
 *      error node and Closing, then (xbdfront_close, once the backend is
 *      Closing or Closed) Closed, as Linux blkfront_closing; the reason
 *      (the backend's `error` text, else ours) goes to the caller of
 *      xbdfront_open_in_why(); Closed with online = 1 is a backend that
 *      restarted under us: Closed, its Closed, Initialising, its InitWait,
 *      fresh rings, back to 5 (three tries in all);
 *   7. read sectors, info, sector-size (all required), physical-sector-size,
 *      feature-flush-cache, feature-barrier, feature-discard, discard-secure,
 *      feature-max-indirect-segments; connect the queues; Connected.
 *
 * After that the monitor thread (one per domain handle, shared by its
 * devices; the only reader of the domain's xenstore watch events, with
 * one watch per device whose token names the device) handles, in
 * fe_xb_on_peer_state():
 *   Connected         re-read `sectors` (online resize), signal the queues;
 *                     after fresh rings were published: finish connecting;
 *   InitWait/Initialising while we are connected: a restarted backend that
 *                     re-attaches to the published rings; nothing to do;
 *   Closing/Closed with online = 1: the backend gave up on this connection;
 *                     I/O waits; we say Closed (it disconnects), then, once
 *                     it is Closed, Initialising (it probes again); on its
 *                     InitWait we grant fresh rings, take every request back
 *                     onto them, Initialised, and on Connected re-issue all;
 *   Closing/Closed with online = 0, or the backend gone: detached; pending
 *                     I/O fails with -ENODEV, we go Closed.
 */
#ifndef XBD_FRONTEND_XENBUS_H
#define XBD_FRONTEND_XENBUS_H

#include <xen/io/xenbus.h>

struct fe_xb;

/* One switch per backend transition (see above). */
void fe_xb_on_peer_state(struct fe_xb *xb, enum xenbus_state state);

#endif
