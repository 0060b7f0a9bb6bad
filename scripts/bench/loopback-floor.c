/*
 * loopback-floor: what a server that streams every byte back over loopback
 * TCP costs in its own CPU, without any cryptography: the floor under
 * aesd's CPU per byte on this host (scripts/bench/loopback-floor.sh).
 *
 *   loopback-floor server PORT MODE BUF SNDBUF RCVBUF
 *   loopback-floor client PORT CONNECTIONS BYTES WRITE
 *
 * The server accepts connections on 127.0.0.1:PORT, one thread each, and
 * sends back every byte it receives until the peer shuts its side down:
 *   copy    read(BUF) into user memory, write it back (what any server
 *           that looks at the bytes must at least do: one copy in, one out);
 *   touch   as copy, and xor every byte in place first (a stand-in for a
 *           cipher that reads and writes each byte);
 *   splice  socket -> pipe -> socket inside the kernel (no copy into user
 *           memory: below anything that encrypts);
 *   http    reads HTTP/1.1 requests (each until its header's end and then
 *           Content-Length bytes, into BUF bytes at most) and answers every
 *           one, keep-alive, with the same canned 200: a Transit answer of
 *           the size aesd gives a 1 KiB encryption (a 1603-byte JSON body
 *           with its `vault:v1:` ciphertext). No parsing beyond that, no
 *           JSON, no cryptography: the floor under a request-response
 *           server's CPU per request (scripts/bench/transit.sh --floor).
 * SNDBUF > 0 sets SO_SNDBUF, RCVBUF > 0 SO_RCVBUF on the listening socket,
 * which accepted sockets inherit (the kernel doubles the value, caps it at
 * net.core.[rw]mem_max and stops autotuning that side); 0 leaves the
 * kernel's autotuning on. On SIGTERM the server prints its own CPU time so
 * far, "USER_US SYSTEM_US" (getrusage, all threads), and exits 0.
 *
 * The client opens CONNECTIONS connections at once; on each, one thread
 * writes BYTES in WRITE-sized writes and shuts its side down, another
 * reads everything back, and it checks that the BYTES that came back are
 * the ones it sent (xored with TOUCH_XOR in touch mode). It prints the total and exits 0, or
 * says what went wrong and exits 1. Exit status 2: bad usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum mode { COPY, TOUCH, SPLICE, HTTP };

/* What touch xors into every byte. */
#define TOUCH_XOR 0x5a

struct server_conn {
	int fd;
	enum mode mode;
	size_t buf;
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void echo_user(struct server_conn *c)
{
	unsigned char *buf = malloc(c->buf);
	if (!buf)
		die("malloc");
	for (;;) {
		ssize_t r = read(c->fd, buf, c->buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (c->mode == TOUCH) {
			uint64_t *words = (uint64_t *)buf;
			size_t i, n = (size_t)r / 8;
			for (i = 0; i < n; i++)
				words[i] ^= TOUCH_XOR * 0x0101010101010101ULL;
			for (i = n * 8; i < (size_t)r; i++)
				buf[i] ^= TOUCH_XOR;
		}
		if (write_all(c->fd, buf, (size_t)r) < 0)
			break;
	}
	free(buf);
}

static void echo_splice(struct server_conn *c)
{
	int pipefd[2];
	if (pipe(pipefd) < 0)
		die("pipe");
	fcntl(pipefd[1], F_SETPIPE_SZ, (int)c->buf);
	for (;;) {
		ssize_t r = splice(c->fd, NULL, pipefd[1], NULL, c->buf, SPLICE_F_MOVE);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		while (r > 0) {
			ssize_t w = splice(pipefd[0], NULL, c->fd, NULL, (size_t)r, SPLICE_F_MOVE);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				goto out;
			r -= w;
		}
	}
out:
	close(pipefd[0]);
	close(pipefd[1]);
}

/* The http mode's answer, built once by http_answer_init. */
static char *http_answer;
static size_t http_answer_len;

/* The canned answer: headers as aesd sends them, a body of the size aesd's
 * answer to a 1 KiB encryption has (1 024 bytes, a 12-byte nonce and a
 * 16-byte tag: 1 404 characters of base64 after `vault:v1:`). */
static void http_answer_init(void)
{
	static const char head[] = "{\"auth\":null,\"data\":{\"ciphertext\":\"vault:v1:";
	static const char tail[] =
		"\",\"key_version\":1},\"lease_duration\":0,\"lease_id\":\"\",\"renewable\":false,"
		"\"request_id\":\"00000000-0000-0000-0000-000000000000\",\"warnings\":null,"
		"\"wrap_info\":null}";
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t text = (1024 + 12 + 16 + 2) / 3 * 4, body = strlen(head) + text + strlen(tail), i;
	char *p;
	http_answer = malloc(body + 256);
	if (!http_answer)
		die("malloc");
	p = http_answer + sprintf(http_answer,
				  "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
				  "content-length: %zu\r\ndate: Sun, 29 Nov 2026 00:00:00 GMT\r\n\r\n",
				  body);
	p += sprintf(p, "%s", head);
	for (i = 0; i < text; i++)
		*p++ = b64[i % 64];
	p += sprintf(p, "%s", tail);
	http_answer_len = (size_t)(p - http_answer);
}

/* The length of the first whole request in buf[0..n), 0 while it is not
 * complete yet (a header without Content-Length is taken as no body). */
static ssize_t http_request_len(const char *buf, size_t n)
{
	const char *end = memmem(buf, n, "\r\n\r\n", 4), *cl;
	size_t head, body = 0;
	if (!end)
		return 0;
	head = (size_t)(end - buf) + 4;
	cl = memmem(buf, head, "\r\nContent-Length:", 17);
	if (!cl)
		cl = memmem(buf, head, "\r\ncontent-length:", 17);
	if (cl)
		body = strtoul(cl + 17, NULL, 10);
	return head + body <= n ? (ssize_t)(head + body) : 0;
}

static void answer_http(struct server_conn *c)
{
	char *buf = malloc(c->buf);
	size_t have = 0;
	if (!buf)
		die("malloc");
	for (;;) {
		ssize_t whole = http_request_len(buf, have), r;
		if (whole > 0) {
			if (write_all(c->fd, (unsigned char *)http_answer, http_answer_len) < 0)
				break;
			memmove(buf, buf + whole, have - (size_t)whole);
			have -= (size_t)whole;
			continue;
		}
		if (have == c->buf) {
			fprintf(stderr, "loopback-floor: a request above %zu bytes\n", c->buf);
			break;
		}
		r = read(c->fd, buf + have, c->buf - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	free(buf);
}

static void *serve(void *arg)
{
	struct server_conn *c = arg;
	if (c->mode == SPLICE)
		echo_splice(c);
	else if (c->mode == HTTP)
		answer_http(c);
	else
		echo_user(c);
	shutdown(c->fd, SHUT_WR);
	close(c->fd);
	free(c);
	return NULL;
}

/* Waits for SIGTERM (blocked in every other thread), then prints the
 * process's CPU time and exits. */
static void *report_on_term(void *arg)
{
	sigset_t *term = arg;
	struct rusage usage;
	int sig;
	sigwait(term, &sig);
	getrusage(RUSAGE_SELF, &usage);
	printf("%lld %lld\n",
	       (long long)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec,
	       (long long)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec);
	fflush(stdout);
	_exit(0);
	return NULL;
}

static void server(int port, enum mode mode, size_t buf, int sndbuf, int rcvbuf)
{
	static sigset_t term;
	pthread_t reporter;
	int one = 1;
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int lfd;
	if (mode == HTTP)
		http_answer_init();
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	if (pthread_create(&reporter, NULL, report_on_term, &term) != 0)
		die("pthread_create");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	/* On the listening socket, so that accepted sockets have them from
	 * the handshake on (the window scale is fixed then). */
	if (sndbuf > 0)
		setsockopt(lfd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	if (rcvbuf > 0)
		setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0)
		die("bind");
	if (listen(lfd, 128) < 0)
		die("listen");
	for (;;) {
		pthread_t thread;
		struct server_conn *c;
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		c = malloc(sizeof *c);
		if (!c)
			die("malloc");
		c->fd = fd;
		c->mode = mode;
		c->buf = buf;
		if (pthread_create(&thread, NULL, serve, c) != 0)
			die("pthread_create");
		pthread_detach(thread);
	}
}

struct client_conn {
	int fd;
	size_t bytes;
	size_t write;
	unsigned char xor; /* what the server xors into every byte */
	size_t received;
	int mismatch;
};

/* The byte at offset i of every connection's stream. */
static unsigned char pattern(size_t i)
{
	return (unsigned char)((i * 131) ^ (i >> 13));
}

static void *client_write(void *arg)
{
	struct client_conn *c = arg;
	unsigned char *buf = malloc(c->write);
	size_t sent = 0;
	if (!buf)
		die("malloc");
	while (sent < c->bytes) {
		size_t n = c->bytes - sent < c->write ? c->bytes - sent : c->write;
		size_t i;
		for (i = 0; i < n; i++)
			buf[i] = pattern(sent + i);
		if (write_all(c->fd, buf, n) < 0)
			die("client write");
		sent += n;
	}
	shutdown(c->fd, SHUT_WR);
	free(buf);
	return NULL;
}

static void *client_read(void *arg)
{
	struct client_conn *c = arg;
	size_t size = c->write;
	unsigned char *buf = malloc(size);
	if (!buf)
		die("malloc");
	for (;;) {
		ssize_t r = read(c->fd, buf, size);
		size_t i;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("client read");
		if (r == 0)
			break;
		if (!c->mismatch)
			for (i = 0; i < (size_t)r; i++)
				if (buf[i] != (pattern(c->received + i) ^ c->xor)) {
					c->mismatch = 1;
					break;
				}
		c->received += (size_t)r;
	}
	free(buf);
	return NULL;
}

static int client(int port, int connections, size_t bytes, size_t write_size, unsigned char xor)
{
	struct client_conn *conns = calloc((size_t)connections, sizeof *conns);
	pthread_t *threads = calloc((size_t)connections * 2, sizeof *threads);
	size_t total = 0;
	int i, failed = 0, one = 1;
	if (!conns || !threads)
		die("calloc");
	for (i = 0; i < connections; i++) {
		struct sockaddr_in addr = { .sin_family = AF_INET,
					    .sin_port = htons((uint16_t)port) };
		addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		conns[i].fd = socket(AF_INET, SOCK_STREAM, 0);
		if (conns[i].fd < 0)
			die("socket");
		if (connect(conns[i].fd, (struct sockaddr *)&addr, sizeof addr) < 0)
			die("connect");
		setsockopt(conns[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		conns[i].bytes = bytes;
		conns[i].write = write_size;
		conns[i].xor = xor;
		pthread_create(&threads[2 * i], NULL, client_write, &conns[i]);
		pthread_create(&threads[2 * i + 1], NULL, client_read, &conns[i]);
	}
	for (i = 0; i < connections * 2; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < connections; i++) {
		if (conns[i].received != bytes) {
			fprintf(stderr, "connection %d: %zu bytes back of %zu\n", i,
				conns[i].received, bytes);
			failed = 1;
		}
		if (conns[i].mismatch) {
			fprintf(stderr, "connection %d: other bytes came back than the server sends\n", i);
			failed = 1;
		}
		total += conns[i].received;
		close(conns[i].fd);
	}
	printf("%zu\n", total);
	return failed;
}

static void usage(void)
{
	fprintf(stderr, "usage: loopback-floor server PORT copy|touch|splice|http BUF SNDBUF RCVBUF\n"
			"       loopback-floor client PORT CONNECTIONS BYTES WRITE copy|touch|splice\n");
	exit(2);
}

static enum mode parse_mode(const char *s)
{
	if (!strcmp(s, "copy"))
		return COPY;
	if (!strcmp(s, "touch"))
		return TOUCH;
	if (!strcmp(s, "splice"))
		return SPLICE;
	if (!strcmp(s, "http"))
		return HTTP;
	usage();
	return COPY;
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "server")) {
		long buf = atol(argv[4]);
		if (buf < 1)
			usage();
		server(atoi(argv[2]), parse_mode(argv[3]), (size_t)buf, atoi(argv[5]), atoi(argv[6]));
	}
	if (argc == 7 && !strcmp(argv[1], "client")) {
		long connections = atol(argv[3]), bytes = atol(argv[4]), write_size = atol(argv[5]);
		if (connections < 1 || bytes < 0 || write_size < 1)
			usage();
		return client(atoi(argv[2]), (int)connections, (size_t)bytes, (size_t)write_size,
			      parse_mode(argv[6]) == TOUCH ? TOUCH_XOR : 0);
	}
	usage();
	return 2;
}
