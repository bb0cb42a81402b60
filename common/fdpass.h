/* SPDX-License-Identifier: BSD-2-Clause */
/* File descriptors on a Unix socket message (SCM_RIGHTS), for the one
 * place each side puts them: librma's frame writer and rmad's reply
 * writer, which pass one, and the test programs that pass several, or
 * the wrong ones on purpose. */
#ifndef RMA_FDPASS_H
#define RMA_FDPASS_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Room for the most fds one message carries here (an adversary's). */
#define FDPASS_MAX 32

/* Control buffer for up to FDPASS_MAX fds, aligned for a cmsghdr. */
union fdpass_buf {
	char buf[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
	struct cmsghdr align;
};

/* Puts fds[0..n) on mh as one SCM_RIGHTS message held in cb (n in
 * 1..FDPASS_MAX); nothing for n == 0. */
void fdpass_attach(struct msghdr *mh, union fdpass_buf *cb, const int *fds,
		   size_t n);

/* One sendmsg of p[0..len) with fds[0..n) on its first byte, flags as
 * for sendmsg (MSG_NOSIGNAL is added); -1 with EINVAL for more than
 * FDPASS_MAX fds, nothing sent. */
ssize_t fdpass_send(int sock, const void *p, size_t len, const int *fds,
		    size_t n, int flags);

#endif
