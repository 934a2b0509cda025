/* SPDX-License-Identifier: MIT */
/* A slot that changes between reads: see slot_trap.h. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <cmocka.h>

#include "tests/unit/slot_trap.h"

struct slot_trap trap;

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uint8_t *a = si->si_addr;

	(void)sig;
	if (a < trap.page || a >= trap.page + 4096) {
		signal(SIGSEGV, SIG_DFL);   /* a real crash: let it happen */
		return;
	}
	if (a >= trap.slot && a < trap.slot + trap.len)
		trap.reads[(a - trap.slot) / 4]++;
	else
		trap.outside++;
	mprotect(trap.page, 4096, PROT_READ | PROT_WRITE);
	uc->uc_mcontext.gregs[REG_EFL] |= 0x100;        /* single-step it */
}

static void on_step(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uint32_t *w = (uint32_t *)(void *)trap.slot;

	(void)sig; (void)si;
	uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
	/* The peer rewrites every word that has been read already. */
	for (size_t i = 0; i < trap.len / 4; i++)
		if (trap.reads[i])
			w[i] ^= 0x5a5a5a5au + (uint32_t)i;
	mprotect(trap.page, 4096, PROT_NONE);
}

void arm_trap(uint8_t *page, uint8_t *slot, size_t len)
{
	struct sigaction sa = { .sa_flags = SA_SIGINFO };

	memset(&trap, 0, sizeof(trap));
	trap.page = page;
	trap.slot = slot;
	trap.len = len;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_segv;
	assert_int_equal(sigaction(SIGSEGV, &sa, NULL), 0);
	sa.sa_sigaction = on_step;
	assert_int_equal(sigaction(SIGTRAP, &sa, NULL), 0);
	assert_int_equal(mprotect(page, 4096, PROT_NONE), 0);
}

void disarm_trap(void)
{
	assert_int_equal(mprotect(trap.page, 4096, PROT_READ | PROT_WRITE), 0);
	signal(SIGSEGV, SIG_DFL);
	signal(SIGTRAP, SIG_DFL);
}
