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
 *     'F' + 8-byte N + 8-byte F
 *                       -> echoes N bytes in frames of F (1..65536): reads
 *                          a whole frame (the last one may be shorter),
 *                          then writes it back, as a service that answers
 *                          a whole request does (aesd's data frames); then
 *                          8 bytes: cycles from the first byte read to the
 *                          last written
 *     'M'               -> VmRSS and VmHWM lines of the process named in
 *                          /var/run/aesd/aesd.pid (aesd's memory)
 *     'P'               -> where the cycles go, as text lines: "cycles N"
 *                          (the counter), /proc/stat's "cpu" line (clock
 *                          ticks of user, nice, system, idle, iowait, irq,
 *                          softirq time), its "ctxt" and "intr" totals,
 *                          and "aesd UTIME STIME VOLUNTARY INVOLUNTARY":
 *                          aesd's ticks in user and kernel mode (all its
 *                          threads) and its threads' context switches;
 *                          and "net NAME VALUE" lines: chosen TCP
 *                          counters of /proc/net/snmp and netstat
 *                          (Tcp.InSegs, TcpExt.TCPRcvCollapsed, ...) and
 *                          the packets, bytes, errors and drops of every
 *                          interface but lo (eth0.rx_drop, ...)
 *     'K' + 8-byte N    -> what the kernel's and libc's primitives cost
 *                          here, N times each (1..100000), as text lines
 *                          "NAME OPS CYCLES" (primitives.c: a system call,
 *                          a clock read, a page mapped and unmapped, a
 *                          switch between threads, a 16 KiB memcpy)
 * Numbers on the wire are little-endian unsigned 64-bit. A short read,
 * a bad command or a failed write closes that connection with a message
 * on stderr; the server goes on.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cycles.h"

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

int write_full(int fd, const void *buf, size_t len)
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

/* Echo of n bytes a whole frame at a time: each frame of up to `frame`
 * bytes read completely before any of it is written back. */
static int framed(int fd, uint64_t n, uint64_t frame)
{
	uint64_t start = 0, left = n;
	int first = 1;
	if (frame == 0 || frame > sizeof buf) {
		fprintf(stderr, "rtlprobe: frame of %llu bytes (1..%zu)\n",
			(unsigned long long)frame, sizeof buf);
		return -1;
	}
	while (left > 0) {
		size_t want = left < frame ? (size_t)left : (size_t)frame, have = 0;
		while (have < want) {
			ssize_t got = read(fd, buf + have, want - have);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				fprintf(stderr, "rtlprobe: connection ended %llu bytes early\n",
					(unsigned long long)(left - have));
				return -1;
			}
			if (first) {
				start = cycles();
				first = 0;
			}
			have += (size_t)got;
		}
		if (write_full(fd, buf, want) != 0)
			return -1;
		left -= want;
	}
	return put_u64(fd, n ? cycles() - start : 0);
}

/* aesd's pid from its pid file into pid (at most len bytes); 0 if found. */
static int aesd_pid(char *pid, size_t len)
{
	FILE *f = fopen("/var/run/aesd/aesd.pid", "r");
	int found = f && fgets(pid, (int)len, f);
	if (f)
		fclose(f);
	if (!found)
		return -1;
	pid[strcspn(pid, "\n")] = 0;
	return 0;
}

static int memory(int fd)
{
	char pid[32] = { 0 }, path[64], line[128], out[256] = { 0 };
	if (aesd_pid(pid, sizeof pid) != 0)
		return write_full(fd, "no aesd pid file\n", 17);
	snprintf(path, sizeof path, "/proc/%s/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return write_full(fd, "no such process\n", 16);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6) || !strncmp(line, "VmHWM:", 6))
			strncat(out, line, sizeof out - strlen(out) - 1);
	fclose(f);
	return write_full(fd, out, strlen(out));
}

/* The value after "key:" in a /proc status file, or 0. */
static unsigned long long status_field(const char *path, const char *key)
{
	char line[256];
	unsigned long long v = 0;
	size_t n = strlen(key);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

/* Appends to the answer being built (out, cap bytes, used so far); what
 * does not fit is cut, never written past the end. */
static void append(char *out, size_t cap, size_t *used, const char *fmt, ...)
{
	va_list args;
	if (*used + 1 >= cap)
		return;
	va_start(args, fmt);
	int n = vsnprintf(out + *used, cap - *used, fmt, args);
	va_end(args);
	if (n > 0)
		*used = *used + (size_t)n < cap ? *used + (size_t)n : cap - 1;
}

/* The TCP counters the 'P' answer carries: what the network did. */
static const char *const tcp_counters[] = {
	"Tcp.InSegs", "Tcp.OutSegs", "Tcp.RetransSegs", "Tcp.InErrs",
	"TcpExt.DelayedACKs", "TcpExt.TCPPureAcks", "TcpExt.TCPHPHits",
	"TcpExt.TCPHPAcks", "TcpExt.PruneCalled", "TcpExt.RcvPruned",
	"TcpExt.TCPRcvCollapsed", "TcpExt.TCPOFOQueue", "TcpExt.TCPOFODrop",
	"TcpExt.TCPRcvQDrop", "TcpExt.TCPBacklogCoalesce", "TcpExt.TCPSackRecovery",
	"TcpExt.TCPFastRetrans", "TcpExt.TCPTimeouts", "TcpExt.TCPLostRetransmit",
	"TcpExt.TCPDSACKRecv", "TcpExt.TCPDSACKOldSent", "TcpExt.TCPToZeroWindowAdv",
	"TcpExt.TCPFromZeroWindowAdv", "TcpExt.TCPWantZeroWindowAdv",
	"TcpExt.TCPZeroWindowDrop", "TcpExt.TCPDelivered",
};

/* Whether "Proto.Name" is one of tcp_counters. */
static int wanted_counter(const char *proto, size_t proto_len, const char *name)
{
	for (size_t i = 0; i < sizeof tcp_counters / sizeof *tcp_counters; i++) {
		const char *c = tcp_counters[i];
		if (!strncmp(c, proto, proto_len) && c[proto_len] == '.' &&
		    !strcmp(c + proto_len + 1, name))
			return 1;
	}
	return 0;
}

/* Appends "net Proto.Name VALUE" for the wanted counters of a /proc/net
 * file made of line pairs, names ("Proto: A B ...") then values
 * ("Proto: 1 2 ..."), as /proc/net/snmp and /proc/net/netstat are. */
static void net_counters(const char *path, char *out, size_t cap, size_t *used)
{
	static char names[4096], values[4096];
	FILE *f = fopen(path, "r");
	while (f && fgets(names, sizeof names, f) && fgets(values, sizeof values, f)) {
		size_t proto_len = strcspn(names, ":");
		if (names[proto_len] != ':' || strncmp(names, values, proto_len + 1))
			break;
		char *name_save = NULL, *value_save = NULL;
		char *name = strtok_r(names + proto_len + 1, " \n", &name_save);
		char *value = strtok_r(values + proto_len + 1, " \n", &value_save);
		while (name && value) {
			if (wanted_counter(names, proto_len, name))
				append(out, cap, used, "net %.*s.%s %s\n", (int)proto_len, names, name,
				       value);
			name = strtok_r(NULL, " \n", &name_save);
			value = strtok_r(NULL, " \n", &value_save);
		}
	}
	if (f)
		fclose(f);
}

/* Appends "net IFACE.rx_packets N" and the like for every interface but
 * lo, from /proc/net/dev: the MAC's packets and what it dropped. */
static void interface_counters(char *out, size_t cap, size_t *used)
{
	/* /proc/net/dev's columns, in order; NULL: not reported. */
	static const char *const fields[] = {
		"rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", NULL, NULL, NULL,
		"tx_bytes", "tx_packets", "tx_errs", "tx_drop",
	};
	char line[512];
	FILE *f = fopen("/proc/net/dev", "r");
	while (f && fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		char *iface = line + strspn(line, " ");
		if (!strcmp(iface, "lo"))
			continue;
		char *save = NULL, *value = strtok_r(colon + 1, " \n", &save);
		for (size_t i = 0; value && i < sizeof fields / sizeof *fields; i++) {
			if (fields[i])
				append(out, cap, used, "net %s.%s %s\n", iface, fields[i], value);
			value = strtok_r(NULL, " \n", &save);
		}
	}
	if (f)
		fclose(f);
}

/* The 'P' answer: the counter, /proc/stat's totals, aesd's times and the
 * network's counters. */
static int where_cycles_go(int fd)
{
	static char out[8192], line[4096];
	char pid[32], path[320];
	size_t used = 0;
	append(out, sizeof out, &used, "cycles %llu\n", (unsigned long long)cycles());
	FILE *f = fopen("/proc/stat", "r");
	while (f && fgets(line, sizeof line, f)) {
		if (!strncmp(line, "cpu ", 4) || !strncmp(line, "ctxt ", 5)) {
			append(out, sizeof out, &used, "%s", line);
		} else if (!strncmp(line, "intr ", 5)) {
			/* The total only: the per-interrupt counts follow it. */
			line[strcspn(line + 5, " \n") + 5] = 0;
			append(out, sizeof out, &used, "%s\n", line);
		}
	}
	if (f)
		fclose(f);
	if (aesd_pid(pid, sizeof pid) == 0) {
		unsigned long long utime = 0, stime = 0, vol = 0, invol = 0;
		snprintf(path, sizeof path, "/proc/%s/stat", pid);
		f = fopen(path, "r");
		if (f && fgets(line, sizeof line, f)) {
			/* Fields 14 and 15, counted after the ")" that ends the name. */
			char *p = strrchr(line, ')');
			for (int field = 2; p && field < 14; field++)
				p = strchr(p + 1, ' ');
			if (p)
				sscanf(p, " %llu %llu", &utime, &stime);
		}
		if (f)
			fclose(f);
		snprintf(path, sizeof path, "/proc/%s/task", pid);
		DIR *tasks = opendir(path);
		struct dirent *task;
		while (tasks && (task = readdir(tasks))) {
			if (task->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "/proc/%s/task/%s/status", pid, task->d_name);
			vol += status_field(path, "voluntary_ctxt_switches");
			invol += status_field(path, "nonvoluntary_ctxt_switches");
		}
		if (tasks)
			closedir(tasks);
		append(out, sizeof out, &used, "aesd %llu %llu %llu %llu\n", utime, stime, vol, invol);
	}
	net_counters("/proc/net/snmp", out, sizeof out, &used);
	net_counters("/proc/net/netstat", out, sizeof out, &used);
	interface_counters(out, sizeof out, &used);
	return write_full(fd, out, used);
}

static void serve_one(int fd)
{
	unsigned char cmd;
	uint64_t n, frame;
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
	case 'F':
		if (get_u64(fd, &n) == 0 && get_u64(fd, &frame) == 0)
			framed(fd, n, frame);
		break;
	case 'M':
		memory(fd);
		break;
	case 'P':
		where_cycles_go(fd);
		break;
	case 'K':
		if (get_u64(fd, &n) == 0)
			primitives(fd, n);
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
