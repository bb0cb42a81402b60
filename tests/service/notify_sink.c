/* SPDX-License-Identifier: BSD-2-Clause */
/* Stands in for systemd's notify socket: binds a Unix datagram socket at
 * PATH and writes every message it receives to stdout, one line per
 * assignment (READY=1, STATUS=..., WATCHDOG=1, STOPPING=1), flushed at
 * once. Exits on SIGTERM, or after LIFETIME seconds (default 120) so that
 * a broken test never leaves it behind. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void
on_term(int sig)
{
	stop = 1;
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sigaction act = {.sa_handler = on_term};
	int lifetime = argc > 2 ? atoi(argv[2]) : 120;
	time_t end = time(NULL) + lifetime;
	char buf[4097];
	int fd;

	if (argc < 2 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: notify_sink PATH [LIFETIME]\n");
		return 64;
	}
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	strcpy(sa.sun_path, argv[1]);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "notify_sink: %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	while (!stop && time(NULL) < end) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* one datagram may carry several assignments, one a line */
		fputs(buf, stdout);
		if (buf[n - 1] != '\n')
			fputc('\n', stdout);
		fflush(stdout);
	}
	unlink(argv[1]);
	return 0;
}
