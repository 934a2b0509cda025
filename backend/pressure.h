/* SPDX-License-Identifier: MIT */
/*
 * Memory-pressure detection for xbd-blkback, the user-space stand-in for
 * the xenbus backend shrinker Linux uses (drivers/xen/xenbus/
 * xenbus_probe_backend.c): when the system or our cgroup reports memory
 * pressure, every queue squeezes its page pool (gnt_squeeze_all) for
 * buffer_squeeze_duration_ms.
 *
 * Sources (--pressure SPEC; the tree's write is the third one):
 *   auto           (the default) the first that arms of: a PSI trigger on
 *                  the service's own cgroup v2 memory.pressure (found
 *                  from /proc/self/cgroup and /proc/self/mountinfo), on
 *                  the system-wide /proc/pressure/memory, or the cgroup
 *                  v1 memory controller's event on the service's group.
 *   psi[:FILE]     a PSI trigger ("some 50000 1000000": 50 ms of stall in
 *                  a 1 s window) on FILE, default /proc/pressure/memory, or
 *                  a cgroup v2 memory.pressure.  Without CAP_SYS_RESOURCE
 *                  the kernel wants the window to be a multiple of 2 s, so
 *                  a refused trigger is retried with a 2 s window.  The
 *                  fd polls POLLPRI when the trigger fires.
 *   cgroup1:DIR    a cgroup v1 memory.pressure_level event, level "low"
 *                  (any reclaim), registered through DIR/cgroup.event_control
 *                  on an eventfd that polls POLLIN.
 *   pressure_fire  direct: the tree's module/xen_blkback/memory_pressure
 *                  file, for tests, balloon drivers or orchestration.
 *
 * Threads: a struct pressure belongs to the control thread, which polls
 * its fd and calls pressure_handle().  pressure_fire() and pressure_count()
 * may be called by any thread.
 */
#ifndef XBD_BACKEND_PRESSURE_H
#define XBD_BACKEND_PRESSURE_H

#include <stdint.h>

#define PRESSURE_PSI_DEFAULT "/proc/pressure/memory"

struct pressure;

/* Parse SPEC and arm the source.  0, -EINVAL (bad spec), or the errno of
 * opening or arming it (-ENOENT, -EACCES...). */
int pressure_open(const char *spec, struct pressure **out);
void pressure_close(struct pressure *p);

/* "auto" with its inputs named (tests give made-up ones): our cgroups
 * (/proc/self/cgroup), the mounts (/proc/self/mountinfo) and the system
 * PSI file.  0, or the errno of the last source tried. */
int pressure_open_auto(const char *self_cgroup, const char *mountinfo, const char *psi_file,
		       struct pressure **out);

/* What p is armed on, as a --pressure spec ("psi:/proc/pressure/memory"),
 * and why auto picked it ("system-wide PSI"; NULL when not by auto).
 * Both live as long as p. */
const char *pressure_spec(const struct pressure *p);
const char *pressure_origin(const struct pressure *p);

/* The fd to poll and the events to poll it for. */
int pressure_fd(const struct pressure *p);
short pressure_events(const struct pressure *p);

/* The fd polled with revents: consume the event and squeeze.  Returns 1
 * when it squeezed, 0 when nothing was pending, -errno when the source
 * went away (POLLERR: the cgroup was removed); then stop polling it. */
int pressure_handle(struct pressure *p, short revents);

/* Squeeze now: every queue keeps no free page and no idle persistent
 * grant for buffer_squeeze_duration_ms from now.  With a duration of 0
 * the report is counted and nothing is squeezed (Linux's behaviour). */
void pressure_fire(void);

/* How many times pressure was reported since start (all sources). */
uint64_t pressure_count(void);

#endif
