/* SPDX-License-Identifier: MIT */
/*
 * A shared slot whose words change between reads, for the single-read
 * tests of both ends (test_ring.c: the backend's request fetch;
 * test_fe_ring.c: the frontend's response fetch).
 *
 * arm_trap() makes the page holding the slot inaccessible.  Every load
 * from it faults; the SIGSEGV handler counts which word of the slot was
 * read (trap.reads[], or trap.outside for the rest of the page), opens
 * the page and single-steps the load; the SIGTRAP after it rewrites
 * every word read so far, as a hostile peer would, and closes the page
 * again.  So a fetch that reads a word twice sees two different values,
 * and the counts say exactly how often each word was read.  x86-64 only
 * (the trap flag in EFLAGS); one trap at a time (process-wide handlers).
 */
#ifndef XBD_TESTS_SLOT_TRAP_H
#define XBD_TESTS_SLOT_TRAP_H

#include <stddef.h>
#include <stdint.h>

struct slot_trap {
	uint8_t *page;
	uint8_t *slot;
	size_t len;                   /* bytes, at most 112 */
	unsigned int reads[28];       /* loads of each 32-bit word of the slot */
	unsigned int outside;         /* loads elsewhere in the page */
};

extern struct slot_trap trap;

void arm_trap(uint8_t *page, uint8_t *slot, size_t len);
void disarm_trap(void);

#endif
