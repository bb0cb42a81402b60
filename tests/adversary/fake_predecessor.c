/* SPDX-License-Identifier: BSD-2-Clause */
/* A fake rmad predecessor (issue 23, finding 4): it listens at
 * "<socket>.takeover" as rmad's old process does, and to a successor that
 * asks it hands an identity and regions (memfds), speaking handover.c's
 * messages (daemon/handover_wire.h).
 *
 *   fake_predecessor SOCKET [--as-uid UID] [--unsealed K] [--regions N]
 *                           [--listen-fd KIND]
 *
 * --as-uid: bind as the caller (root: the path may sit in root's own
 * directory), then become UID (groups dropped) before listen(), whose
 * credentials SO_PEERCRED reports to whoever connects. Without it the
 * caller's (setpriv runs it as another user). --regions: N regions of
 * 64 KiB (default 2), ids 1..N; the first K of them (default 0) are
 * memfds without seals, the rest sealed as rmad seals its own.
 * --listen-fd: hand, in HEAD, a client socket that is not one: "pipe"
 * (a pipe's read end), "dgram" (a bound Unix datagram socket), "idle"
 * (a bound Unix stream socket that does not listen), "nameless" (a
 * listening stream socket without a path).
 *
 * stdout, one line each: "listening", then for each region its
 * descriptor ("region ID rma1:..."), then "handed N" once END is sent.
 * Then it closes the hand-over (the successor's cue that the old process
 * is gone) and keeps its memfds, reading stdin: "t" truncates every memfd
 * to 0 bytes and says "truncated K" (those that let it); "r ID" prints
 * the first 8 bytes of region ID as "bytes ID HEX"; EOF exits.
 *
 * Exit status: 0 after EOF on stdin, 2 when nobody connected within 10 s,
 * 3 when the one who connected asked nothing (a successor that refused
 * us before its ASK), 1 on any other failure. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "descriptor.h"
#include "handover_wire.h"

#define FAKE_REGION_SIZE 65536u
#define FAKE_MAX_REGIONS 8
#define FAKE_WAIT_MS 10000

static void
fake_die(const char *what)
{
	fprintf(stderr, "fake_predecessor: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* The client socket handed as KIND (see above), or -1 for none. */
static int
fake_listen_fd(const char *kind, const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, fds[2];

	if (kind == NULL)
		return -1;
	if (strcmp(kind, "pipe") == 0) {
		if (pipe(fds) < 0)
			fake_die("pipe");
		return fds[0];
	}
	fd = socket(AF_UNIX,
		    strcmp(kind, "dgram") == 0 ? SOCK_DGRAM : SOCK_STREAM, 0);
	if (fd < 0)
		fake_die("socket");
	if (strcmp(kind, "nameless") == 0) {
		/* an address of the family alone: an abstract autobind */
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa_family_t)) <
			0 ||
		    listen(fd, 1) < 0)
			fake_die("listen nameless");
		return fd;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.fake-%s", sock, kind);
	unlink(sa.sun_path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fake_die("bind fake listen fd");
	return fd;
}

static int
fake_memfd(unsigned i, int sealed)
{
	int fd = memfd_create("rmad-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	unsigned char fill[FAKE_REGION_SIZE];

	if (fd < 0)
		fake_die("memfd_create");
	memset(fill, 0xA0 + (int)i, sizeof(fill));
	if (write(fd, fill, sizeof(fill)) != (ssize_t)sizeof(fill))
		fake_die("write");
	if (sealed && fcntl(fd, F_ADD_SEALS,
			    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		fake_die("F_ADD_SEALS");
	return fd;
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct handover_record recs[FAKE_MAX_REGIONS];
	int memfds[FAKE_MAX_REGIONS];
	struct handover_head head = {
	    .next_region_id = 100, .next_epoch = 100, .restarts = 3};
	struct handover_msg m = {HANDOVER_MAGIC, HANDOVER_VERSION,
				 HANDOVER_HEAD, 1};
	struct {
		struct handover_msg m;
		struct handover_ask ask;
	} ask;
	const char *listen_kind = NULL;
	unsigned n = 2, unsealed = 0;
	int listen_fd;
	long as_uid = -1;
	struct pollfd p;
	char line[64];
	int lfd, fd;
	ssize_t got;

	if (argc < 2) {
		fprintf(stderr, "usage: fake_predecessor SOCKET [--as-uid "
				"UID] [--unsealed K] [--regions N] [--listen-fd "
				"KIND]\n");
		return 1;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--as-uid") == 0)
			as_uid = strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--unsealed") == 0)
			unsealed = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--listen-fd") == 0)
			listen_kind = argv[i + 1];
		else if (strcmp(argv[i], "--regions") == 0)
			n = (unsigned)strtoul(argv[i + 1], NULL, 10);
	}
	if (n == 0 || n > FAKE_MAX_REGIONS)
		n = 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", argv[1],
		     HANDOVER_SUFFIX) >= (int)sizeof(sa.sun_path))
		return 1;
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fake_die("bind");
	if (as_uid >= 0 &&
	    (setgroups(0, NULL) < 0 || setgid((gid_t)as_uid) < 0 ||
	     setuid((uid_t)as_uid) < 0))
		fake_die("becoming --as-uid");
	if (listen(lfd, 4) < 0)
		fake_die("listen");
	printf("listening\n");

	p = (struct pollfd){lfd, POLLIN, 0};
	if (poll(&p, 1, FAKE_WAIT_MS) != 1)
		return 2;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		fake_die("accept");
	p = (struct pollfd){fd, POLLIN, 0};
	if (poll(&p, 1, FAKE_WAIT_MS) != 1)
		return 3;
	got = recv(fd, &ask, sizeof(ask), 0);
	if (got < (ssize_t)sizeof(ask.m) || ask.m.magic != HANDOVER_MAGIC ||
	    ask.m.kind != HANDOVER_ASK)
		return 3;

	/* An identity of our choosing, and regions of our memory. */
	memset(head.id, 0x5a, sizeof(head.id));
	for (unsigned i = 0; i < n; i++) {
		struct descriptor d = {.region_id = i + 1,
				       .generation = 0x1000 + i,
				       .length = FAKE_REGION_SIZE};
		char text[DESCRIPTOR_TEXT_SIZE];

		memset(&recs[i], 0, sizeof(recs[i]));
		recs[i].id = i + 1;
		recs[i].generation = 0x1000 + i;
		recs[i].ro_generation = 0x2000 + i;
		recs[i].length = FAKE_REGION_SIZE;
		recs[i].owner_pid = 1;
		recs[i].owner_uid = (uint32_t)getuid();
		memfds[i] = fake_memfd(i, i >= unsealed);
		memcpy(d.daemon_id, head.id, sizeof(d.daemon_id));
		descriptor_format(&d, text);
		printf("region %u %s\n", i + 1, text);
	}
	listen_fd = fake_listen_fd(listen_kind, argv[1]);
	head.has_listen_fd = listen_fd >= 0;
	if (handover_wire_send(fd, &m, &head, sizeof(head), &listen_fd,
			       listen_fd >= 0 ? 1 : 0) < 0)
		fake_die("send HEAD");
	m.kind = HANDOVER_REGIONS;
	m.count = n;
	if (handover_wire_send(fd, &m, recs, n * sizeof(recs[0]), memfds, n) <
	    0)
		fake_die("send REGIONS");
	m.kind = HANDOVER_END;
	if (handover_wire_send(fd, &m, NULL, 0, NULL, 0) < 0)
		fake_die("send END");
	printf("handed %u\n", n);
	/* "gone": the successor starts now; the memfds stay ours */
	close(fd);
	close(lfd);
	unlink(sa.sun_path);

	while (fgets(line, sizeof(line), stdin) != NULL) {
		unsigned id, cut = 0;

		if (line[0] == 't') {
			for (unsigned i = 0; i < n; i++)
				cut += ftruncate(memfds[i], 0) == 0;
			printf("truncated %u\n", cut);
		} else if (sscanf(line, "r %u", &id) == 1 && id >= 1 &&
			   id <= n) {
			unsigned char b[8] = {0};

			if (pread(memfds[id - 1], b, sizeof(b), 0) < 0)
				memset(b, 0, sizeof(b));
			printf("bytes %u ", id);
			for (size_t k = 0; k < sizeof(b); k++)
				printf("%02x", b[k]);
			printf("\n");
		}
	}
	return 0;
}
