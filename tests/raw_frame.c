/* SPDX-License-Identifier: BSD-2-Clause */
/* Frames built and read by hand; see raw_frame.h. */
#include "raw_frame.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"

uint8_t *
raw_frame_pack(const ProtobufCMessage *msg, size_t *len_p)
{
	size_t n = frame_packed_size(msg);
	uint8_t *buf = malloc(n);

	if (buf == NULL)
		return NULL;
	frame_pack(msg, buf);
	*len_p = n;
	return buf;
}

uint8_t *
raw_frame_hello(uint64_t id, const char *client_name, size_t *len_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Hello hello = RMA__V1__HELLO__INIT;

	hello.protocol_version = RMA_PROTOCOL_VERSION;
	hello.client_name = (char *)client_name;
	req.id = id;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &hello;
	return raw_frame_pack(&req.base, len_p);
}

int
raw_frame_recv(int fd, raw_frame_wait_fn wait, void *arg, int *fd_p,
	       Rma__V1__DaemonMessage **m_p)
{
	uint8_t hdr[FRAME_HEADER_SIZE], *buf;
	size_t len, got = 0;
	Rma__V1__DaemonMessage *m;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {hdr, sizeof(hdr)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.buf,
			    .msg_controllen = sizeof(cbuf.buf)};
	ssize_t n;

	if (fd_p != NULL)
		*fd_p = -1;
	if (!wait(fd, arg))
		return -1;
	n = recvmsg(fd, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	if (n == 0)
		return 0;
	if (n != (ssize_t)sizeof(hdr))
		return -1;
	if (mh.msg_controllen > 0) {
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		int passed;

		memcpy(&passed, CMSG_DATA(cm), sizeof(int));
		if (fd_p == NULL) {
			close(passed); /* nobody expects one */
			return -1;
		}
		*fd_p = passed;
	}
	len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 |
	      (size_t)hdr[2] << 8 | hdr[3];
	buf = malloc(len + 1);
	if (buf == NULL)
		return -1;
	while (got < len) {
		if (!wait(fd, arg))
			goto err_free;
		n = read(fd, buf + got, len - got);
		if (n <= 0)
			goto err_free;
		got += (size_t)n;
	}
	m = rma__v1__daemon_message__unpack(NULL, len, buf);
	free(buf);
	if (m == NULL)
		return -1;
	*m_p = m;
	return 1;

err_free:
	free(buf);
	return -1;
}
