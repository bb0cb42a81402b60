/* SPDX-License-Identifier: BSD-2-Clause */
#include "fdpass.h"

#include <errno.h>
#include <string.h>

void
fdpass_attach(struct msghdr *mh, union fdpass_buf *cb, const int *fds, size_t n)
{
	struct cmsghdr *cm;

	if (n == 0 || n > FDPASS_MAX)
		return;
	memset(cb, 0, sizeof(*cb));
	mh->msg_control = cb->buf;
	mh->msg_controllen = CMSG_SPACE(n * sizeof(int));
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
}

ssize_t
fdpass_send(int sock, const void *p, size_t len, const int *fds, size_t n,
	    int flags)
{
	union fdpass_buf cb;
	struct iovec iov = {(void *)p, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	/* the bytes without their fds would be a different message */
	if (n > FDPASS_MAX) {
		errno = EINVAL;
		return -1;
	}
	fdpass_attach(&mh, &cb, fds, n);
	return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}
