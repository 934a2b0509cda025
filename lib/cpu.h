/* SPDX-License-Identifier: MIT */
/*
 * The one hint a busy-wait loop gives the CPU between two looks at a
 * word another thread or process writes (the backend's polling and
 * sync_io helper, libxbdfront's ring spin, the platform bench): PAUSE on
 * x86, YIELD on arm64, nothing elsewhere.
 */
#ifndef XBD_CPU_H
#define XBD_CPU_H

static inline void xbd_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif /* XBD_CPU_H */
