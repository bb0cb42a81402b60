/* SPDX-License-Identifier: BSD-2-Clause */
/* The hand-over's messages (handover.c): what an old and a new rmad say
 * on "<socket>.takeover", a SOCK_SEQPACKET socket. Apart from handover.c
 * so that the tests' fake predecessor (tests/adversary/) speaks exactly
 * this. Each message is a handover_msg, then its body; fds travel by
 * SCM_RIGHTS. */
#ifndef RMAD_HANDOVER_WIRE_H
#define RMAD_HANDOVER_WIRE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "descriptor.h" /* DAEMON_ID_SIZE */

#define HANDOVER_MAGIC 0x524d4148u /* "RMAH" */
#define HANDOVER_VERSION 1u
#define HANDOVER_SUFFIX ".takeover"
/* Regions (and fds) per message: well under SCM_MAX_FD (253). */
#define HANDOVER_CHUNK 128

enum handover_kind {
	HANDOVER_ASK = 1,
	HANDOVER_HEAD = 2,
	HANDOVER_REGIONS = 3,
	HANDOVER_END = 4,
	/* after the REGIONS, to a successor that asked for them: one orphan
	 * deadline per region, in the same order */
	HANDOVER_DEADLINES = 5,
	/* first of all, to a successor that asked for it: the configuration
	 * the predecessor runs on (config_saved.h's encoding), the last that
	 * worked, for a successor whose own is refused */
	HANDOVER_CONFIG = 6,
};

/* What a successor takes beyond version 1, in the ASK's body (a
 * predecessor that does not know it reads the header alone). */
#define HANDOVER_TAKES_DEADLINES 1u
#define HANDOVER_TAKES_CONFIG 2u
/* DEADLINES in CLOCK_BOOTTIME ms; a successor that takes deadlines
 * without this bit reads them on the wall clock (CLOCK_REALTIME ms) */
#define HANDOVER_TAKES_BOOTTIME 4u
/* The largest CONFIG body a successor takes. */
#define HANDOVER_CONFIG_MAX (80u * 1024)

struct handover_ask {
	uint32_t takes; /* HANDOVER_TAKES_* */
	uint32_t pad;
};

struct handover_msg {
	uint32_t magic;
	uint32_t version;
	uint32_t kind;
	uint32_t count; /* REGIONS: records here; END: regions in all */
};

/* One region on the wire of a hand-over and in fdstore.c's state
 * record: fixed size, no pointers. */
struct handover_record {
	uint64_t id, generation, ro_generation, length;
	int32_t owner_pid;
	uint32_t owner_uid;
	char owner_name[64];
};

/* HEAD's body; the client socket's listening fd rides along when
 * has_listen_fd. REGIONS' body is count records, one memfd each. */
struct handover_head {
	uint8_t id[DAEMON_ID_SIZE];
	uint64_t next_region_id;
	uint64_t next_epoch;
	uint32_t restarts;
	uint32_t has_listen_fd;
};

/* One message: m, its body, up to HANDOVER_CHUNK fds. 0, or -1 with
 * errno (EINVAL: more fds than that). */
static inline int
handover_wire_send(int fd, const struct handover_msg *m, const void *body,
		   size_t body_len, const int *fds, size_t n_fds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * HANDOVER_CHUNK)];
	struct iovec iov[2] = {{(void *)m, sizeof(*m)},
			       {(void *)body, body_len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = body_len ? 2 : 1};

	if (n_fds > HANDOVER_CHUNK) {
		errno = EINVAL;
		return -1;
	}
	if (n_fds > 0) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* One message: its header, body into buf, fds into fds (at most max;
 * the rest are closed). The body's length (0 also at the end of the
 * stream, m untouched); -1 for a broken or foreign message (its fds
 * closed). */
static inline ssize_t
handover_wire_recv(int fd, struct handover_msg *m, void *buf, size_t len,
		   int *fds, size_t max, size_t *n_fds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * HANDOVER_CHUNK)];
	struct iovec iov[2] = {{m, sizeof(*m)}, {buf, len}};
	struct msghdr mh = {.msg_iov = iov,
			    .msg_iovlen = 2,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	ssize_t n;

	*n_fds = 0;
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return n < 0 ? -1 : 0;
	for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			if (*n_fds < max)
				fds[(*n_fds)++] = f;
			else
				close(f);
		}
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)n < sizeof(*m) || m->magic != HANDOVER_MAGIC ||
	    m->version != HANDOVER_VERSION) {
		for (size_t i = 0; i < *n_fds; i++)
			close(fds[i]);
		*n_fds = 0;
		return -1;
	}
	return n - (ssize_t)sizeof(*m);
}

#endif
