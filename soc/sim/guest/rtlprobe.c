/*
 * rtlprobe: the simulated board's own cycle meter (soc/sim/, issue 41).
 *
 * Reads the RISC-V `time` CSR from user mode (rdtime/rdtimeh; the
 * VexRiscv-SMP cluster lets user mode read it, and the cluster's CLINT
 * counts one tick per clock cycle), so every figure is in guest clock
 * cycles and the host's speed never enters.
 *
 *   rtlprobe now          prints the counter ("cycles N")
 *   rtlprobe serve PORT   TCP server, one connection at a time; a
 *                         connection sends one command byte:
 *     'T'               -> 8 bytes: the counter now
 *     'S' + 8-byte N    -> reads N bytes and drops them (TCP sink), then
 *                          8 bytes: cycles from its first to its last byte
 *     'E' + 8-byte N    -> echoes N bytes (TCP echo), then 8 bytes: cycles
 *                          from the first byte read to the last written
 *     'M'               -> VmRSS and VmHWM lines of the process named in
 *                          /var/run/aesd/aesd.pid (aesd's memory)
 * Numbers on the wire are little-endian unsigned 64-bit. A short read,
 * a bad command or a failed write closes that connection with a message
 * on stderr; the server goes on.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint64_t cycles(void)
{
	uint32_t hi, lo, again;
	do {
		__asm__ volatile("rdtimeh %0" : "=r"(hi));
		__asm__ volatile("rdtime %0" : "=r"(lo));
		__asm__ volatile("rdtimeh %0" : "=r"(again));
	} while (hi != again);
	return ((uint64_t)hi << 32) | lo;
}

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int put_u64(int fd, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return write_full(fd, b, sizeof b);
}

static int get_u64(int fd, uint64_t *v)
{
	unsigned char b[8];
	if (read_full(fd, b, sizeof b) != 0)
		return -1;
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = (*v << 8) | b[i];
	return 0;
}

static char buf[65536];

/* Sink (echo == 0) or echo (echo == 1) of n bytes; the cycles go back. */
static int stream(int fd, uint64_t n, int echo)
{
	uint64_t start = 0, left = n;
	int first = 1;
	while (left > 0) {
		size_t want = left < sizeof buf ? (size_t)left : sizeof buf;
		ssize_t got = read(fd, buf, want);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			fprintf(stderr, "rtlprobe: connection ended %llu bytes early\n",
				(unsigned long long)left);
			return -1;
		}
		if (first) {
			start = cycles();
			first = 0;
		}
		if (echo && write_full(fd, buf, (size_t)got) != 0)
			return -1;
		left -= (uint64_t)got;
	}
	return put_u64(fd, n ? cycles() - start : 0);
}

static int memory(int fd)
{
	char pid[32] = { 0 }, path[64], line[128], out[256] = { 0 };
	FILE *f = fopen("/var/run/aesd/aesd.pid", "r");
	if (!f || !fgets(pid, sizeof pid, f)) {
		if (f)
			fclose(f);
		return write_full(fd, "no aesd pid file\n", 17);
	}
	fclose(f);
	pid[strcspn(pid, "\n")] = 0;
	snprintf(path, sizeof path, "/proc/%s/status", pid);
	f = fopen(path, "r");
	if (!f)
		return write_full(fd, "no such process\n", 16);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6) || !strncmp(line, "VmHWM:", 6))
			strncat(out, line, sizeof out - strlen(out) - 1);
	fclose(f);
	return write_full(fd, out, strlen(out));
}

static void serve_one(int fd)
{
	unsigned char cmd;
	uint64_t n;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (read_full(fd, &cmd, 1) != 0)
		return;
	switch (cmd) {
	case 'T':
		put_u64(fd, cycles());
		break;
	case 'S':
	case 'E':
		if (get_u64(fd, &n) == 0)
			stream(fd, n, cmd == 'E');
		break;
	case 'M':
		memory(fd);
		break;
	default:
		fprintf(stderr, "rtlprobe: unknown command 0x%02x\n", cmd);
	}
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "now")) {
		printf("cycles %llu\n", (unsigned long long)cycles());
		return 0;
	}
	if (argc != 3 || strcmp(argv[1], "serve")) {
		fprintf(stderr, "usage: rtlprobe now | rtlprobe serve PORT\n");
		return 2;
	}
	char *end;
	long port = strtol(argv[2], &end, 10);
	if (*end || port < 1 || port > 65535) {
		fprintf(stderr, "rtlprobe: bad port '%s'\n", argv[2]);
		return 2;
	}
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4)) {
		perror("rtlprobe: listen");
		return 1;
	}
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		serve_one(c);
		close(c);
	}
}
