/*
 * rtlprobe's 'K' command: what the primitives that a service such as aesd
 * is made of cost on the board's own core and kernel, in guest cycles, so
 * that its cost above the echo can be split by measurement (issue 41,
 * docs/board-rtl.md). Each is run n times in a row and answered as a line
 * "NAME OPS CYCLES" (cycles for all OPS together):
 *   null-syscall       getppid(), the cheapest trap into the kernel
 *   clock-read         clock_gettime(CLOCK_MONOTONIC): a system call on
 *                      riscv32 Linux 6.1, whose vDSO has no clock
 *   page-map           mmap of one anonymous page, a write to it (the page
 *                      fault that clears it), munmap: what an allocator
 *                      that maps and unmaps costs
 *   pipe-self          write one byte into a pipe and read it back, one
 *                      thread (two system calls, no switch)
 *   thread-round-trip  one byte to another thread through a pipe and one
 *                      back: two switches between threads plus four
 *                      system calls (pipe-self's two, twice)
 *   memcpy-16k         memcpy of 16 KiB (a chunk of the board's aesd),
 *                      both buffers word aligned
 *   memcpy-16k-offset  the same with the source 5 bytes past alignment (a
 *                      payload behind a 5-byte frame header)
 * A primitive that fails answers "NAME error MESSAGE" instead.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cycles.h"

#define COPY_BYTES 16384

static unsigned char copy_src[COPY_BYTES + 8] __attribute__((aligned(16)));
static unsigned char copy_dst[COPY_BYTES] __attribute__((aligned(16)));

/* Appends one answer line to out. */
static void line(char *out, size_t size, size_t *used, const char *name, uint64_t ops,
		 uint64_t spent)
{
	if (*used < size)
		*used += (size_t)snprintf(out + *used, size - *used, "%s %llu %llu\n", name,
					  (unsigned long long)ops, (unsigned long long)spent);
}

static void failed(char *out, size_t size, size_t *used, const char *name, const char *what)
{
	if (*used < size)
		*used += (size_t)snprintf(out + *used, size - *used, "%s error %s: %s\n", name,
					  what, strerror(errno));
}

static int null_syscalls(uint64_t n, uint64_t *spent)
{
	uint64_t start = cycles();
	for (uint64_t i = 0; i < n; i++)
		syscall(SYS_getppid);
	*spent = cycles() - start;
	return 0;
}

static int clock_reads(uint64_t n, uint64_t *spent)
{
	struct timespec ts;
	uint64_t start = cycles();
	for (uint64_t i = 0; i < n; i++)
		if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
			return -1;
	*spent = cycles() - start;
	return 0;
}

static int page_maps(uint64_t n, uint64_t *spent)
{
	uint64_t start = cycles();
	for (uint64_t i = 0; i < n; i++) {
		volatile unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
						    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (page == MAP_FAILED)
			return -1;
		page[0] = 1;
		if (munmap((void *)page, 4096) != 0)
			return -1;
	}
	*spent = cycles() - start;
	return 0;
}

/* One byte through fd_out, one back through fd_in. */
static int pass_byte(int fd_out, int fd_in)
{
	char byte = 'k';
	if (write(fd_out, &byte, 1) != 1 || read(fd_in, &byte, 1) != 1)
		return -1;
	return 0;
}

static int pipe_self(uint64_t n, uint64_t *spent)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	int rc = 0;
	uint64_t start = cycles();
	for (uint64_t i = 0; i < n && rc == 0; i++)
		rc = pass_byte(p[1], p[0]);
	*spent = cycles() - start;
	close(p[0]);
	close(p[1]);
	return rc;
}

/* The other thread of thread-round-trip: answers every byte with one. */
struct echo_pipes {
	int from_main, to_main;
	uint64_t n;
};

static void *echo_thread(void *arg)
{
	struct echo_pipes *pipes = arg;
	char byte;
	for (uint64_t i = 0; i < pipes->n; i++)
		if (read(pipes->from_main, &byte, 1) != 1 || write(pipes->to_main, &byte, 1) != 1)
			break;
	return NULL;
}

static int thread_round_trips(uint64_t n, uint64_t *spent)
{
	int there[2], back[2];
	if (pipe(there) != 0)
		return -1;
	if (pipe(back) != 0) {
		close(there[0]);
		close(there[1]);
		return -1;
	}
	struct echo_pipes pipes = { .from_main = there[0], .to_main = back[1], .n = n };
	pthread_t other;
	int rc = pthread_create(&other, NULL, echo_thread, &pipes);
	if (rc != 0) {
		errno = rc;
		rc = -1;
	} else {
		uint64_t start = cycles();
		for (uint64_t i = 0; i < n && rc == 0; i++)
			rc = pass_byte(there[1], back[0]);
		*spent = cycles() - start;
		/* A failed round trip leaves the other thread waiting: the
		 * closed pipe ends its read. */
		close(there[1]);
		there[1] = -1;
		pthread_join(other, NULL);
	}
	close(there[0]);
	if (there[1] >= 0)
		close(there[1]);
	close(back[0]);
	close(back[1]);
	return rc;
}

static int copies(uint64_t n, size_t offset, uint64_t *spent)
{
	memset(copy_src, 0x5a, sizeof copy_src);
	uint64_t start = cycles();
	for (uint64_t i = 0; i < n; i++) {
		memcpy(copy_dst, copy_src + offset, COPY_BYTES);
		/* Each copy is used: the compiler may not merge or drop them. */
		__asm__ volatile("" : : "r"(copy_dst) : "memory");
	}
	*spent = cycles() - start;
	return 0;
}

static int memcpy_aligned(uint64_t n, uint64_t *spent)
{
	return copies(n, 0, spent);
}

static int memcpy_offset(uint64_t n, uint64_t *spent)
{
	return copies(n, 5, spent);
}

static const struct {
	const char *name;
	int (*run)(uint64_t n, uint64_t *spent);
	const char *what;
} measured[] = {
	{ "null-syscall", null_syscalls, "getppid" },
	{ "clock-read", clock_reads, "clock_gettime" },
	{ "page-map", page_maps, "mmap/munmap" },
	{ "pipe-self", pipe_self, "pipe" },
	{ "thread-round-trip", thread_round_trips, "pipe or thread" },
	{ "memcpy-16k", memcpy_aligned, "memcpy" },
	{ "memcpy-16k-offset", memcpy_offset, "memcpy" },
};

int primitives(int fd, uint64_t n)
{
	char out[1024];
	size_t used = 0;
	if (n == 0 || n > PRIMITIVES_MAX_OPS) {
		fprintf(stderr, "rtlprobe: %llu operations per primitive (1..%d)\n",
			(unsigned long long)n, PRIMITIVES_MAX_OPS);
		return -1;
	}
	for (size_t i = 0; i < sizeof measured / sizeof measured[0]; i++) {
		uint64_t spent = 0;
		if (measured[i].run(n, &spent) == 0)
			line(out, sizeof out, &used, measured[i].name, n, spent);
		else
			failed(out, sizeof out, &used, measured[i].name, measured[i].what);
	}
	if (used > sizeof out)
		used = sizeof out;
	return write_full(fd, out, used);
}
