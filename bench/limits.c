/* SPDX-License-Identifier: BSD-2-Clause */
/* limits: what this machine can do without rmad or UCX, measured in the
 * same run as the benchmarks so that every row of bench/compare can be
 * read against it (a ratio to a limit measured another day says little on
 * a shared, noisy machine):
 *
 * - one TCP loopback stream of 1 MiB writes read 64 KiB at a time, the
 *   best of three (what a big transfer between two daemons over tcp could
 *   reach);
 * - memcpy of 1 MiB and of 16 MiB (what a same-daemon copy could reach);
 * - an 8-byte ping-pong round trip over a Unix socket and over tcp
 *   loopback, with both sides blocking in read() and with both spinning
 *   on non-blocking reads (a one-at-a-time operation's floor; the gap
 *   between the two is the cost of waking up).
 *
 *   limits [--smoke] [--seconds S] [--stream-only]
 *
 * Prints one JSON object (--stream-only: the TCP stream alone, for a
 * figure taken right beside the run it bounds). Each figure is measured for
 * about S seconds (default 0.5; --smoke: a few milliseconds, the figures mean
 * nothing). The other end of each socket is a child process, as a peer daemon
 * or a client would be. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "monotime.h"

#define LIMITS_CHUNK (1u << 20)
/* The stream's reader takes what fits in a core's cache at a time, as
 * UCX's tcp receive buffer (64 KiB) does: reading 1 MiB at a time makes
 * the kernel's copy miss the cache and measures the reader, not TCP. */
#define LIMITS_READ (64u << 10)
/* The stream is measured this many times and the best kept: a limit is
 * what the machine can do, and a neighbour's burst only lowers it. */
#define LIMITS_STREAM_TRIES 3
#define LIMITS_PING 8
#define LIMITS_PINGS_MAX 2000000

struct limits_pingpong {
	const char *name;
	int domain;
	bool spin;
	double rtt_us; /* median round trip */
	double mean_us;
};

static int
limits_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Exactly n bytes: 0, or 1 at end of stream, -1 on error. A spinning
 * reader never sleeps in the kernel. */
static int
limits_read_full(int fd, void *buf, size_t n, bool spin)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got,
				 spin ? MSG_DONTWAIT : 0);
		if (r > 0) {
			got += (size_t)r;
		} else if (r == 0) {
			return 1;
		} else if (errno != EINTR && errno != EAGAIN) {
			return -1;
		}
	}
	return 0;
}

static int
limits_write_full(int fd, const void *buf, size_t n)
{
	size_t put = 0;

	while (put < n) {
		ssize_t w =
		    send(fd, (const char *)buf + put, n - put, MSG_NOSIGNAL);
		if (w > 0)
			put += (size_t)w;
		else if (w < 0 && errno != EINTR && errno != EAGAIN)
			return -1;
	}
	return 0;
}

/* A connected pair of stream sockets: a socketpair for AF_UNIX, a
 * loopback connection with TCP_NODELAY (as UCX sets it) for AF_INET. */
static int
limits_pair(int domain, int fds[2])
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int one = 1;
	int lfd;

	if (domain == AF_UNIX)
		return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -1;
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len) < 0)
		goto err_listen;
	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fds[0] < 0)
		goto err_listen;
	if (connect(fds[0], (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto err_client;
	fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fds[1] < 0)
		goto err_client;
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(lfd);
	return 0;

err_client:
	close(fds[0]);
err_listen:
	close(lfd);
	return -1;
}

/* The far end, in a child: runs fn on its socket, then exits. */
static pid_t
limits_spawn(int fds[2], int (*fn)(int fd, bool spin), bool spin)
{
	pid_t pid = fork();

	if (pid == 0) {
		close(fds[0]);
		_exit(fn(fds[1], spin) == 0 ? 0 : 1);
	}
	close(fds[1]);
	return pid;
}

static int
limits_reap(pid_t pid)
{
	int ws;

	if (pid < 0 || waitpid(pid, &ws, 0) < 0)
		return -1;
	return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

/* The stream's reader: drains until the writer closes. */
static int
limits_sink(int fd, bool spin)
{
	char *buf = malloc(LIMITS_READ);
	ssize_t r;

	if (buf == NULL)
		return -1;
	while ((r = read(fd, buf, LIMITS_READ)) > 0 ||
	       (r < 0 && errno == EINTR))
		;
	free(buf);
	return r == 0 ? 0 : -1;
}

/* One TCP loopback stream of 1 MiB writes: bytes per second, counted
 * when the reader has seen the last byte (a 1-byte answer after close
 * would add a round trip; the writer's last write returning is within
 * one socket buffer of it, which is small next to the total). */
static int
limits_tcp_stream(double seconds, double *bytes_per_s)
{
	char *buf = malloc(LIMITS_CHUNK);
	uint64_t bytes = 0;
	double t0, t;
	int fds[2];
	pid_t pid;

	if (buf == NULL)
		return -1;
	memset(buf, 0x5a, LIMITS_CHUNK);
	if (limits_pair(AF_INET, fds) < 0)
		goto err_free;
	pid = limits_spawn(fds, limits_sink, false);
	if (pid < 0)
		goto err_close;
	/* warm the connection's window up first */
	for (int i = 0; i < 16; i++)
		if (limits_write_full(fds[0], buf, LIMITS_CHUNK) < 0)
			goto err_child;
	t0 = monotime_s();
	do {
		if (limits_write_full(fds[0], buf, LIMITS_CHUNK) < 0)
			goto err_child;
		bytes += LIMITS_CHUNK;
		t = monotime_s();
	} while (t - t0 < seconds);
	shutdown(fds[0], SHUT_WR);
	close(fds[0]);
	if (limits_reap(pid) < 0)
		goto err_free;
	t = monotime_s();
	free(buf);
	*bytes_per_s = (double)bytes / (t - t0);
	return 0;

err_child:
	close(fds[0]);
	limits_reap(pid);
	free(buf);
	return -1;
err_close:
	close(fds[0]);
	close(fds[1]);
err_free:
	free(buf);
	return -1;
}

/* memcpy of size bytes between two buffers, touched first. */
static int
limits_memcpy(size_t size, double seconds, double *bytes_per_s)
{
	char *a = malloc(size), *b = malloc(size);
	uint64_t bytes = 0;
	double t0, t;

	if (a == NULL || b == NULL) {
		free(a);
		free(b);
		return -1;
	}
	memset(a, 1, size);
	memset(b, 2, size);
	t0 = monotime_s();
	do {
		memcpy(b, a, size);
		/* the compiler must not drop the copy */
		__asm__ volatile("" : : "r"(b) : "memory");
		bytes += size;
		t = monotime_s();
	} while (t - t0 < seconds);
	free(a);
	free(b);
	*bytes_per_s = (double)bytes / (t - t0);
	return 0;
}

/* The ping-pong's far end: every 8 bytes back as they came. */
static int
limits_echo(int fd, bool spin)
{
	char buf[LIMITS_PING];
	int r;

	while ((r = limits_read_full(fd, buf, sizeof(buf), spin)) == 0)
		if (limits_write_full(fd, buf, sizeof(buf)) < 0)
			return -1;
	return r < 0 ? -1 : 0;
}

static int
limits_pingpong(struct limits_pingpong *pp, double seconds)
{
	double *rtt = malloc(LIMITS_PINGS_MAX * sizeof(*rtt));
	char buf[LIMITS_PING] = {0};
	double t0, t, sum = 0;
	size_t n = 0;
	int fds[2];
	pid_t pid;

	if (rtt == NULL)
		return -1;
	if (limits_pair(pp->domain, fds) < 0)
		goto err_free;
	pid = limits_spawn(fds, limits_echo, pp->spin);
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		goto err_free;
	}
	/* a few rounds unmeasured: both sides in their loops */
	for (int i = 0; i < 100; i++)
		if (limits_write_full(fds[0], buf, sizeof(buf)) < 0 ||
		    limits_read_full(fds[0], buf, sizeof(buf), pp->spin) != 0)
			goto err_child;
	t0 = t = monotime_s();
	while (n < LIMITS_PINGS_MAX && t - t0 < seconds) {
		double start = t;
		if (limits_write_full(fds[0], buf, sizeof(buf)) < 0 ||
		    limits_read_full(fds[0], buf, sizeof(buf), pp->spin) != 0)
			goto err_child;
		t = monotime_s();
		rtt[n++] = (t - start) * 1e6;
		sum += (t - start) * 1e6;
	}
	close(fds[0]);
	if (limits_reap(pid) < 0 || n == 0)
		goto err_free;
	qsort(rtt, n, sizeof(*rtt), limits_cmp_double);
	pp->rtt_us = rtt[n / 2];
	pp->mean_us = sum / (double)n;
	free(rtt);
	return 0;

err_child:
	close(fds[0]);
	limits_reap(pid);
err_free:
	free(rtt);
	return -1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"smoke", no_argument, NULL, 's'},
	    {"seconds", required_argument, NULL, 't'},
	    {"stream-only", no_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct limits_pingpong pp[] = {
	    {"unix_block", AF_UNIX, false, 0, 0},
	    {"unix_spin", AF_UNIX, true, 0, 0},
	    {"tcp_block", AF_INET, false, 0, 0},
	    {"tcp_spin", AF_INET, true, 0, 0},
	};
	double seconds = 0.5, stream, copy_1m, copy_16m;
	bool smoke = false, stream_only = false;
	int c;

	while ((c = getopt_long(argc, argv, "st:oh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			smoke = true;
			break;
		case 'o':
			stream_only = true;
			break;
		case 't':
			seconds = strtod(optarg, NULL);
			if (seconds <= 0 || seconds > 60) {
				fprintf(stderr, "limits: --seconds: 0 to 60\n");
				return EX_USAGE;
			}
			break;
		default:
			fprintf(stderr, "usage: limits [--smoke] "
					"[--seconds S] [--stream-only]\n");
			return EX_USAGE;
		}
	}
	if (smoke)
		seconds = 0.005;
	signal(SIGPIPE, SIG_IGN);
	stream = 0;
	for (int i = 0; i < LIMITS_STREAM_TRIES; i++) {
		double once;

		if (limits_tcp_stream(seconds, &once) < 0) {
			perror("limits: tcp stream");
			return EX_OSERR;
		}
		if (once > stream)
			stream = once;
	}
	if (stream_only) {
		printf("{\"tool\": \"limits\", \"smoke\": %s, "
		       "\"seconds\": %.3f, \"tcp_stream_1m_bytes_per_s\": "
		       "%.0f}\n",
		       smoke ? "true" : "false", seconds, stream);
		return fflush(stdout) == 0 ? 0 : EX_IOERR;
	}
	if (limits_memcpy(1u << 20, seconds, &copy_1m) < 0 ||
	    limits_memcpy(16u << 20, seconds, &copy_16m) < 0) {
		fprintf(stderr, "limits: memcpy: out of memory\n");
		return EX_OSERR;
	}
	for (size_t i = 0; i < sizeof(pp) / sizeof(pp[0]); i++) {
		if (limits_pingpong(&pp[i], seconds) < 0) {
			fprintf(stderr, "limits: ping-pong %s: %s\n",
				pp[i].name, strerror(errno));
			return EX_OSERR;
		}
	}
	printf("{\"tool\": \"limits\", \"smoke\": %s, \"seconds\": %.3f, "
	       "\"tcp_stream_1m_bytes_per_s\": %.0f, "
	       "\"memcpy_1m_bytes_per_s\": %.0f, "
	       "\"memcpy_16m_bytes_per_s\": %.0f, \"pingpong_8b\": {",
	       smoke ? "true" : "false", seconds, stream, copy_1m, copy_16m);
	for (size_t i = 0; i < sizeof(pp) / sizeof(pp[0]); i++)
		printf("%s\"%s\": {\"rtt_p50_us\": %.2f, \"rtt_mean_us\": "
		       "%.2f}",
		       i ? ", " : "", pp[i].name, pp[i].rtt_us, pp[i].mean_us);
	printf("}}\n");
	return fflush(stdout) == 0 ? 0 : EX_IOERR;
}
