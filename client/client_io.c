/* SPDX-License-Identifier: BSD-2-Clause */
/* The connection's byte stream, both ways: our own recvmsg on the
 * nonblocking socket (so passed memfds are not lost) with the received fds
 * queued oldest first, dispatch of every whole frame to its waiter or
 * handler, and frames out with an fd on their first byte. Split from
 * client.c (issue 25): the setup and teardown of a connection there, this
 * file what goes over it, client_call.c who waits for it. */
#include "rma_internal.h"

#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* More than the daemon ever attaches to one frame; a bigger batch shows as
 * MSG_CTRUNC, which is a protocol error anyway. */
#define CLIENT_FDS_PER_READ 16

/* ---- received file descriptors, oldest first ---- */

static int
client_fd_push(rma_client_t *c, int fd)
{
	if (c->fds_count == c->fds_cap) {
		size_t cap = c->fds_cap ? 2 * c->fds_cap : 8;
		int *fds = malloc(cap * sizeof(*fds));

		if (fds == NULL)
			return -1;
		for (size_t i = 0; i < c->fds_count; i++)
			fds[i] = c->fds[(c->fds_head + i) % c->fds_cap];
		free(c->fds);
		c->fds = fds;
		c->fds_cap = cap;
		c->fds_head = 0;
	}
	c->fds[(c->fds_head + c->fds_count) % c->fds_cap] = fd;
	c->fds_count++;
	return 0;
}

int
client_fd_pop(rma_client_t *c)
{
	int fd;

	if (c->fds_count == 0)
		return -1;
	fd = c->fds[c->fds_head];
	c->fds_head = (c->fds_head + 1) % c->fds_cap;
	c->fds_count--;
	return fd;
}

/* ---- dispatch ---- */

static void
client_dispatch_reply(rma_client_t *c, Rma__V1__Reply *reply)
{
	struct client_call *call;
	int fd = -1;

	c->dispatched++;
	if (reply->status == RMA__V1__STATUS__OK &&
	    (reply->body_case == RMA__V1__REPLY__BODY_REGION_ALLOC ||
	     (reply->body_case == RMA__V1__REPLY__BODY_HELLO &&
	      reply->hello->ring != NULL))) {
		fd = client_fd_pop(c);
		if (fd < 0) {
			rma__v1__reply__free_unpacked(reply, NULL);
			client_fail(c, RMA_ERR_PROTOCOL,
				    "region reply came without "
				    "its file descriptor");
			return;
		}
	}
	for (call = c->calls; call != NULL; call = call->next) {
		if (call->id == reply->id && call->reply == NULL) {
			/* ownership of reply and fd moves to the waiter */
			call->reply = reply;
			call->fd = fd;
			return;
		}
	}
	/* No waiter: the late reply of a call that timed out, or an error
	 * about a frame without id, which the daemon sends before it closes
	 * the connection: keep its detail to say why. */
	if (reply->id == 0 && reply->status != RMA__V1__STATUS__OK) {
		free(c->shutdown_detail);
		c->shutdown_detail = strdup(client_str(reply->detail));
	}
	if (fd >= 0)
		close(fd);
	rma__v1__reply__free_unpacked(reply, NULL);
}

static void
client_dispatch_event(rma_client_t *c, const Rma__V1__Event *ev)
{
	c->dispatched++;
	switch (ev->body_case) {
	case RMA__V1__EVENT__BODY_RING_WAKE:
		/* the ring was reaped before this frame; sleep again */
		ring_arm(c);
		break;
	case RMA__V1__EVENT__BODY_COMPLETIONS:
		for (size_t i = 0; i < ev->completions->n_completions; i++) {
			const Rma__V1__Completion *k =
			    ev->completions->completions[i];
			request_complete_wire(c, k->op_id, k->status, k->bytes,
					      k->value, k->detail);
		}
		for (size_t i = 0;
		     i + COMPREC_SIZE <= ev->completions->packed.len;
		     i += COMPREC_SIZE) {
			struct comprec k;
			comprec_decode(ev->completions->packed.data + i, &k);
			request_complete_wire(c, k.op_id, k.status, k.bytes, 0,
					      NULL);
		}
		ring_socket_event(c);
		/* Callbacks may have queued submissions behind ops that
		 * are now all complete: nothing would wake a poller to send
		 * them. */
		if (!c->gone && c->pending_n > 0 && c->sent_in_flight == 0)
			request_flush(c);
		break;
	case RMA__V1__EVENT__BODY_PEER:
		peer_event(c, ev->peer);
		break;
	case RMA__V1__EVENT__BODY_NOTIFICATIONS:
		notification_receive_all(c, ev->notifications);
		ring_socket_event(c);
		break;
	case RMA__V1__EVENT__BODY_SHUTDOWN:
		free(c->shutdown_detail);
		c->shutdown_detail = strdup(client_str(ev->shutdown->detail));
		break;
	default:
		/* an event of a newer daemon: nothing to do with it */
		break;
	}
}

/* Handle every whole frame in the reader. Reentrant: a callback may wait
 * and so dispatch the frames after its own. */
void
client_dispatch(rma_client_t *c)
{
	Rma__V1__DaemonMessage *msg;
	Rma__V1__Reply *reply;
	const uint8_t *payload;
	size_t len;
	int rc;

	while (!c->gone) {
		/* what the daemon put in the ring before this frame */
		if (c->ring != NULL)
			ring_reap(c);
		if (c->gone)
			return;
		rc = frame_reader_next(&c->reader, &payload, &len);
		if (rc == FRAME_MORE)
			return;
		if (rc < 0) {
			client_fail(c, RMA_ERR_PROTOCOL,
				    "frame from the daemon over "
				    "%u bytes",
				    c->reader.max_frame);
			return;
		}
		msg = rma__v1__daemon_message__unpack(NULL, len, payload);
		if (msg == NULL) {
			client_fail(c, RMA_ERR_PROTOCOL,
				    "undecodable message from "
				    "the daemon");
			return;
		}
		switch (msg->kind_case) {
		case RMA__V1__DAEMON_MESSAGE__KIND_REPLY:
			/* detach the reply so that it can outlive msg */
			reply = msg->reply;
			msg->reply = NULL;
			msg->kind_case = RMA__V1__DAEMON_MESSAGE__KIND__NOT_SET;
			rma__v1__daemon_message__free_unpacked(msg, NULL);
			client_dispatch_reply(c, reply);
			break;
		case RMA__V1__DAEMON_MESSAGE__KIND_EVENT:
			client_dispatch_event(c, msg->event);
			rma__v1__daemon_message__free_unpacked(msg, NULL);
			break;
		default:
			rma__v1__daemon_message__free_unpacked(msg, NULL);
			break;
		}
	}
}

static void
client_closed(rma_client_t *c)
{
	char why[sizeof(c->last_error)];

	why[0] = '\0';
	if (c->reconnecting) {
		/* the connection client_reconnect made: it starts over */
		c->reclosed = 1;
		client_fail(c, RMA_ERR_DAEMON_GONE,
			    "daemon closed the connection while the client "
			    "re-attached");
		return;
	}
	/* completions the daemon wrote before it closed, as frames read
	 * before the end of the stream are */
	if (c->ring != NULL)
		ring_reap(c);
	if (c->gone)
		return;
	if (client_reconnect(c, why, sizeof(why)))
		return;
	if (why[0] != '\0')
		client_fail(c, RMA_ERR_DAEMON_GONE,
			    "daemon closed the connection; re-attaching "
			    "failed: %s",
			    why);
	else if (c->shutdown_detail != NULL && c->shutdown_detail[0] != '\0')
		client_fail(c, RMA_ERR_DAEMON_GONE,
			    "daemon closed the connection: %s",
			    c->shutdown_detail);
	else
		client_fail(c, RMA_ERR_DAEMON_GONE,
			    "daemon closed the connection");
}

/* Read everything the socket has, dispatching as frames complete, so that
 * a RegionAllocReply always finds its fd already queued. */
void
client_read(rma_client_t *c)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * CLIENT_FDS_PER_READ)];
	} control;
	struct msghdr msg;
	struct cmsghdr *cmsg;
	struct iovec iov;
	uint8_t *p;
	size_t avail;
	ssize_t n;
	int rc;

	while (!c->gone) {
		rc = frame_reader_space(&c->reader, &p, &avail);
		if (rc == FRAME_OVERSIZE) {
			client_fail(c, RMA_ERR_PROTOCOL,
				    "frame from the daemon over "
				    "%u bytes",
				    c->reader.max_frame);
			return;
		}
		if (rc < 0) {
			client_fail(c, RMA_ERR_NO_MEMORY,
				    "no memory for a frame from the daemon");
			return;
		}
		iov.iov_base = p;
		iov.iov_len = avail;
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		n = recvmsg(c->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			/* A close with our requests still unread in the
			 * daemon's socket (a take-over, an exit, a kill
			 * that systemd restarts with its regions,
			 * daemon/fdstore.c) reads as a reset, after
			 * everything it sent: a close. */
			if (errno == ECONNRESET) {
				client_closed(c);
				return;
			}
			client_fail(c, RMA_ERR_DAEMON_GONE,
				    "read from the daemon: %s",
				    strerror(errno));
			return;
		}
		for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
		     cmsg = CMSG_NXTHDR(&msg, cmsg)) {
			size_t nfds;
			int fd;

			if (cmsg->cmsg_level != SOL_SOCKET ||
			    cmsg->cmsg_type != SCM_RIGHTS)
				continue;
			nfds = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfds; i++) {
				memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int),
				       sizeof(int));
				/* after a failure, just close the rest */
				if (c->gone || client_fd_push(c, fd) < 0) {
					close(fd);
					client_fail(c, RMA_ERR_NO_MEMORY,
						    "no memory for a received "
						    "file descriptor");
				}
			}
		}
		if (c->gone)
			return;
		if (msg.msg_flags & MSG_CTRUNC) {
			client_fail(c, RMA_ERR_PROTOCOL,
				    "file descriptors from the "
				    "daemon were truncated");
			return;
		}
		if (n == 0) {
			client_closed(c);
			return;
		}
		c->socket_read += (uint64_t)n;
		frame_reader_commit(&c->reader, (size_t)n);
		client_dispatch(c);
		/* All the daemon wrote is read: no recvmsg more to hear
		 * EAGAIN (a third of what a RingWake cost us). Should it have
		 * closed since, the next look reads the end of stream. */
		if (ring_socket_read_all(c))
			return;
	}
}

/* ---- sending ---- */

/* One send; @fd (if >= 0) rides as SCM_RIGHTS on its first byte. */
static ssize_t
client_send_some(rma_client_t *c, const uint8_t *p, size_t n, int fd)
{
	if (fd < 0)
		return send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	return fdpass_send(c->fd, p, n, &fd, 1, MSG_DONTWAIT);
}

/* A whole frame; @fd (if >= 0) goes with its first byte, which is where
 * the daemon looks for it (daemon/conn_fds.h). */
static rma_status_t
client_write_all(rma_client_t *c, const uint8_t *p, size_t n, int fd)
{
	int64_t deadline = client_deadline(CLIENT_WRITE_TIMEOUT_MS);
	struct pollfd pfd;
	ssize_t w;
	int rc;

	while (n > 0) {
		w = client_send_some(c, p, n, fd);
		if (w > 0) {
			fd = -1; /* sent with the bytes just written */
			p += w;
			n -= (size_t)w;
			deadline = client_deadline(CLIENT_WRITE_TIMEOUT_MS);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		/* The fd to pass is not open: sendmsg sent nothing, so the
		 * stream is whole; the caller's argument is at fault. */
		if (w < 0 && errno == EBADF && fd >= 0 &&
		    fcntl(fd, F_GETFD) < 0)
			return client_error(c, RMA_ERR_INVALID,
					    "file descriptor %d is not open",
					    fd);
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			client_closed(c);
			if (c->gone)
				return client_gone_error(c);
			/* nothing of this frame reached the new process */
			return client_error(c, RMA_ERR_RESTARTED,
					    "the daemon was taken over while "
					    "this was sent: retry");
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			client_fail(c, RMA_ERR_DAEMON_GONE,
				    "write to the daemon: %s", strerror(errno));
			return client_gone_error(c);
		}
		/* Never read here: a callback could then send in the middle
		 * of this frame. The daemon always reads, so this ends. */
		pfd.fd = c->fd;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		rc = poll(&pfd, 1, client_remaining(deadline));
		if (rc < 0 && errno != EINTR) {
			client_fail(c, RMA_ERR_DAEMON_GONE, "poll: %s",
				    strerror(errno));
			return client_gone_error(c);
		}
		if (rc == 0) {
			/* a frame may be half written: the stream is lost */
			client_fail(c, RMA_ERR_DAEMON_GONE,
				    "daemon did not read for %d s",
				    CLIENT_WRITE_TIMEOUT_MS / 1000);
			return client_gone_error(c);
		}
	}
	return RMA_OK;
}

rma_status_t
client_send(rma_client_t *c, const Rma__V1__Request *req)
{
	return client_send_fd(c, req, -1);
}

rma_status_t
client_send_fd(rma_client_t *c, const Rma__V1__Request *req, int fd)
{
	size_t size;

	if (c->gone)
		return client_gone_error(c);
	size = frame_packed_size(&req->base);
	if (size - FRAME_HEADER_SIZE > c->max_frame)
		return client_error(c, RMA_ERR_INVALID,
				    "request of %zu bytes over the daemon's "
				    "frame limit of %u bytes",
				    size - FRAME_HEADER_SIZE, c->max_frame);
	if (size > c->out_cap) {
		uint8_t *out = realloc(c->out, size);

		if (out == NULL)
			return client_error(c, RMA_ERR_NO_MEMORY,
					    "no memory for a %zu-byte request",
					    size);
		c->out = out;
		c->out_cap = size;
	}
	frame_pack(&req->base, c->out);
	return client_write_all(c, c->out, size, fd);
}
