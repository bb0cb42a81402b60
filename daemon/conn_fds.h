/* SPDX-License-Identifier: BSD-2-Clause */
/* File descriptors a client sends: held with the stream range of the
 * recvmsg that brought them until the frame they came with is
 * dispatched. The kernel attaches a sendmsg's fds to its first byte and
 * ends a recvmsg after the bytes that carry fds, so the fds belong to a
 * frame that starts inside that range. Only RegionRegister takes one. */
#ifndef RMAD_CONN_FDS_H
#define RMAD_CONN_FDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* fds held at once; more is a protocol error (no request takes more
 * than one, and the frame they came with is at most one read away) */
#define CONN_FDS_MAX 8

struct conn_fds {
	uint64_t received; /* stream bytes read so far */
	uint64_t frame_at; /* stream offset of the frame being dispatched */
	size_t n;
	struct {
		int fd;
		uint64_t from, to; /* the bytes of the recvmsg it came with */
	} held[CONN_FDS_MAX];
};

/* Keeps the fds of @mh, a recvmsg of @n bytes. -1 when more than
 * CONN_FDS_MAX would be held (those of @mh are closed). */
int conn_fds_receive(struct conn_fds *f, struct msghdr *mh, size_t n);
/* The fds that came with the frame at f->frame_at, moved to the caller:
 * their count, the first in *fd_p (-1 if none), the others closed. */
size_t conn_fds_take(struct conn_fds *f, int *fd_p);
/* Closes the fds whose frame went by without taking them (every frame
 * starting in their range was dispatched before @next_frame_at): their
 * count. */
size_t conn_fds_drop_stale(struct conn_fds *f, uint64_t next_frame_at);
void conn_fds_close_all(struct conn_fds *f);

#endif
