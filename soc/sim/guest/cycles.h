/*
 * The guest's clock cycles, read in user mode: the `time` CSR (rdtime and
 * rdtimeh; the VexRiscv-SMP cluster lets user mode read it, and its CLINT
 * counts one tick per clock cycle). Shared by rtlprobe's modules.
 */
#ifndef RTLPROBE_CYCLES_H
#define RTLPROBE_CYCLES_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t cycles(void)
{
	uint32_t hi, lo, again;
	do {
		__asm__ volatile("rdtimeh %0" : "=r"(hi));
		__asm__ volatile("rdtime %0" : "=r"(lo));
		__asm__ volatile("rdtimeh %0" : "=r"(again));
	} while (hi != again);
	return ((uint64_t)hi << 32) | lo;
}

/* rtlprobe's 'K' command (primitives.c): what the primitives a service is
 * made of cost on this core and kernel, n times each, as text lines
 * "NAME OPS CYCLES" on fd. 0 when answered. */
int primitives(int fd, uint64_t n);

/* Writes all len bytes of buf to fd (rtlprobe.c); 0 when written. */
int write_full(int fd, const void *buf, size_t len);

/* The largest n that 'K' takes. */
#define PRIMITIVES_MAX_OPS 100000

#endif
