/* SPDX-License-Identifier: BSD-2-Clause */
/* The connection to rmad: connect and hello, framing over the nonblocking
 * socket (our own recvmsg, so passed memfds are not lost), dispatch of
 * replies and events, synchronous calls, progress and failure. */
#include "rma_internal.h"
#include "monotime.h"
#include "socket_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* More than the daemon ever attaches to one frame; a bigger batch shows as
 * MSG_CTRUNC, which is a protocol error anyway. */
#define CLIENT_FDS_PER_READ 16

/* rma_connect fails before there is a handle to hold the detail. */
__thread char client_connect_error[512];

int64_t
client_now_ms(void)
{
	return (int64_t)(monotime_ns() / 1000000u);
}

int64_t
client_deadline(int timeout_ms)
{
	if (timeout_ms < 0)
		return -1;
	return client_now_ms() + timeout_ms;
}

int
client_remaining(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - client_now_ms();
	if (left <= 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

static const char *
client_str(const char *s)
{
	return s != NULL ? s : "";
}

rma_status_t
client_error(rma_client_t *c, rma_status_t status, const char *fmt, ...)
{
	va_list ap;
	char *buf = c != NULL ? c->last_error : client_connect_error;
	size_t len =
	    c != NULL ? sizeof(c->last_error) : sizeof(client_connect_error);

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return status;
}

rma_status_t
client_gone_error(rma_client_t *c)
{
	return client_error(c, RMA_ERR_DAEMON_GONE, "%s", c->gone_detail);
}

void
client_fail(rma_client_t *c, rma_status_t status, const char *fmt, ...)
{
	va_list ap;

	if (c->gone)
		return;
	c->gone = 1;
	c->gone_status = status;
	va_start(ap, fmt);
	vsnprintf(c->gone_detail, sizeof(c->gone_detail), fmt, ap);
	va_end(ap);
	snprintf(c->last_error, sizeof(c->last_error), "%s", c->gone_detail);
	/* Keep the socket open, in rma_fd()'s set, but make it readable
	 * for good, so a poller of rma_fd() wakes and sees
	 * RMA_ERR_DAEMON_GONE from rma_progress(). */
	shutdown(c->fd, SHUT_RDWR);
	while (c->fds_count > 0) {
		close(c->fds[c->fds_head]);
		c->fds_head = (c->fds_head + 1) % c->fds_cap;
		c->fds_count--;
	}
}

void
client_reap(rma_client_t *c)
{
	/* While client_reconnect runs, gone only ends one attempt: what
	 * was in flight completes when it is done (RESTARTED or gone). */
	if (c->gone && c->in_flight > 0 && !c->reconnecting)
		request_complete_all(c, RMA_ERR_DAEMON_GONE, c->gone_detail);
}

/* ---- rma_fd(): one open file for the client's life ----
 *
 * An event loop registers rma_fd() once; a re-attach (connect.c) brings a
 * new socket, which epoll would not know: a registration belongs to the
 * open file, not to the number. So rma_fd() is an epoll instance of ours
 * holding the socket, level-triggered, EPOLLIN, and a re-attach swaps the
 * socket in it (client_socket_replace). The socket is its only member:
 * the shared ring has no fd of its own, a daemon wakes a sleeping owner
 * (client_sleeps, rma_ring.c) with a RingWake frame on the socket.
 *
 * An epoll instance polls readable while one of its members is ready, as
 * checked at each poll (ep_eventpoll_poll polls again the members it was
 * woken for and drops those no longer ready), not because it was woken
 * once. Hence, with rma_progress() reading the socket until EAGAIN:
 * - no busy loop: once it returns the socket has nothing unread, so
 *   rma_fd() polls not readable; a wake-up for bytes it already read ends
 *   in nothing (epoll_wait does not return for it, poll() sees 0);
 * - no lost wake-up: bytes that come after its last read make the socket,
 *   and so rma_fd(), readable and wake the outer waiter (the kernel wakes
 *   the instance's waiters even when the member is listed already, so an
 *   edge-triggered outer loop is woken too); ring completions after its
 *   last look come with a RingWake, as it leaves client_sleeps set
 *   (ring_arm); a socket put in at a re-attach with bytes already unread
 *   is listed at once by EPOLL_CTL_ADD;
 * - gone: the socket is shut down (client_fail) and reads EOF for good,
 *   so rma_fd() stays readable and rma_progress() says RMA_ERR_DAEMON_GONE.
 * What rma_progress() leaves queued without the socket (notifications for
 * rma_notify_next()) is the caller's to take, as before. */

static rma_status_t
client_epoll_add(rma_client_t *c, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "epoll_ctl: cannot watch the connection: "
				    "%s",
				    strerror(errno));
	return RMA_OK;
}

rma_status_t
client_socket_replace(rma_client_t *c, int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		close(fd);
		return client_error(c, RMA_ERR_INTERNAL,
				    "cannot take the new connection: %s",
				    strerror(errno));
	}
	/* The new one in first: should that fail, the old one (shut down
	 * by client_fail, reading EOF) stays in the set, so that rma_fd()
	 * still wakes its poller to see the daemon gone. */
	if (client_epoll_add(c, fd) != RMA_OK) {
		close(fd);
		return RMA_ERR_NO_MEMORY;
	}
	/* the old one out of the set before its file goes */
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = fd;
	return RMA_OK;
}

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
static void
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
static void
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
		frame_reader_commit(&c->reader, (size_t)n);
		client_dispatch(c);
	}
}

/* ---- sending ---- */

/* One send; @fd (if >= 0) rides as SCM_RIGHTS on its first byte. */
static ssize_t
client_send_some(rma_client_t *c, const uint8_t *p, size_t n, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {(void *)p, n};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	if (fd < 0)
		return send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	memset(&cbuf, 0, sizeof(cbuf));
	mh.msg_control = cbuf.buf;
	mh.msg_controllen = sizeof(cbuf.buf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
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

/* ---- waiting ---- */

static rma_status_t
client_wait_once(rma_client_t *c, int64_t deadline,
		 int (*done)(const void *arg), const void *arg)
{
	struct pollfd pfd;
	int left, rc;

	for (;;) {
		/* frames an outer dispatch left when it ran our caller */
		client_dispatch(c);
		/* The daemon closed after the completions we just took:
		 * take the end of the stream (a take-over re-attaches) before
		 * the caller goes on, as over the socket alone. */
		if (ring_closed(c))
			client_read(c);
		if (done(arg))
			return RMA_OK;
		if (c->gone)
			return c->gone_status;
		if (c->pending_n > 0 && request_flush(c) != RMA_OK)
			continue;
		/* Operations in flight: their completions are often
		 * microseconds away, a wake-up costs more. */
		if (ring_spin(c, deadline, done, arg)) {
			client_read(c);
			continue;
		}
		if (c->ring != NULL) {
			/* it reaps what came meanwhile, whose callbacks
			 * may have submitted more (a staged transfer's next
			 * piece): send that before sleeping */
			ring_arm(c);
			if (done(arg) || c->gone || c->pending_n > 0)
				continue;
		}
		left = client_remaining(deadline);
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		rc = poll(&pfd, 1, left);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			client_fail(c, RMA_ERR_DAEMON_GONE, "poll: %s",
				    strerror(errno));
			continue;
		}
		if (rc == 0) {
			if (client_remaining(deadline) == 0)
				return RMA_ERR_TIMEOUT;
			continue;
		}
		client_read(c);
	}
}

rma_status_t
client_wait(rma_client_t *c, int64_t deadline, int (*done)(const void *arg),
	    const void *arg)
{
	rma_status_t st = client_wait_once(c, deadline, done, arg);

	/* The caller may go to sleep on rma_fd() now. What the completions
	 * handled here submitted (a callback's operation, a staged
	 * transfer's next piece) goes out, or nothing in flight might wake
	 * it; and the daemon must wake it (ring_arm, which reaps what came
	 * meanwhile, whose callbacks may submit too). */
	while (!c->gone) {
		if (c->pending_n > 0 && request_flush(c) != RMA_OK)
			break;
		if (c->ring == NULL)
			break;
		ring_arm(c);
		if (c->pending_n == 0)
			break;
	}
	return st;
}

static int
client_call_done(const void *arg)
{
	const struct client_call *call = arg;

	return call->reply != NULL || call->lost;
}

static void
client_call_unlink(rma_client_t *c, struct client_call *call)
{
	struct client_call **pp;

	for (pp = &c->calls; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == call) {
			*pp = call->next;
			return;
		}
	}
}

rma_status_t
client_call(rma_client_t *c, Rma__V1__Request *req, int timeout_ms,
	    Rma__V1__Reply **reply_p, int *fd_p)
{
	return client_call_fd(c, req, -1, timeout_ms, reply_p, fd_p);
}

rma_status_t
client_call_fd(rma_client_t *c, Rma__V1__Request *req, int send_fd,
	       int timeout_ms, Rma__V1__Reply **reply_p, int *fd_p)
{
	struct client_call call = {.fd = -1};
	rma_status_t st;

	if (fork_inherited(c))
		return fork_error(c);
	if (c->gone) {
		client_reap(c);
		return client_gone_error(c);
	}
	/* ops queued before this call go first, as they were issued */
	st = request_flush(c);
	if (st != RMA_OK)
		goto err_reap;
	req->id = c->next_id++;
	call.id = req->id;
	st = client_send_fd(c, req, send_fd);
	if (st != RMA_OK)
		goto err_reap;

	call.next = c->calls;
	c->calls = &call;
	st = client_wait(c, client_deadline(timeout_ms), client_call_done,
			 &call);
	client_call_unlink(c, &call);
	if (st == RMA_OK && call.lost && call.reply == NULL) {
		/* its daemon was taken over (client_reconnect) */
		st = c->gone ? client_gone_error(c)
			     : client_error(c, RMA_ERR_RESTARTED,
					    "the daemon was taken over before "
					    "it answered: retry");
		goto err_reap;
	}
	if (st == RMA_ERR_TIMEOUT) {
		client_error(c, st, "no reply from the daemon within %.1f s",
			     timeout_ms / 1000.0);
		goto err_reap;
	}
	if (st != RMA_OK) {
		client_error(c, st, "%s", c->gone_detail);
		goto err_reap;
	}

	st = status_from_wire(call.reply->status);
	if (st != RMA_OK) {
		client_error(c, st, "%s", client_str(call.reply->detail));
		goto err_free_reply;
	}
	if (fd_p != NULL)
		*fd_p = call.fd;
	else if (call.fd >= 0)
		close(call.fd);
	*reply_p = call.reply;
	client_reap(c);
	return RMA_OK;

err_free_reply:
	if (call.fd >= 0)
		close(call.fd);
	rma__v1__reply__free_unpacked(call.reply, NULL);
err_reap:
	client_reap(c);
	return st;
}

rma_status_t
rma_client_call(rma_client_t *c, Rma__V1__Request *req,
		Rma__V1__Reply **reply_p)
{
	if (c == NULL || req == NULL || reply_p == NULL)
		return client_error(c, RMA_ERR_INVALID,
				    "rma_client_call: missing argument");
	return client_call(c, req, CLIENT_CALL_TIMEOUT_MS, reply_p, NULL);
}

RMA_API rma_status_t
rma_daemon_status(rma_client_t *client, void **status_p, size_t *len_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__StatusRequest body = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Reply *reply;
	rma_status_t st;
	size_t len;
	void *buf;

	if (client == NULL || status_p == NULL || len_p == NULL)
		return client_error(client, RMA_ERR_INVALID,
				    "rma_daemon_status: missing argument");
	/* client_call checks fork_inherited */
	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &body;
	st = client_call(client, &req, CLIENT_CALL_TIMEOUT_MS, &reply, NULL);
	if (st != RMA_OK)
		return st;
	if (reply->body_case != RMA__V1__REPLY__BODY_STATUS_REPLY) {
		st = client_error(
		    client, RMA_ERR_PROTOCOL,
		    "rma_daemon_status: the reply holds no status");
		goto err_free_reply;
	}
	len = rma__v1__status_reply__get_packed_size(reply->status_reply);
	/* one byte more: an empty message is still a buffer to free */
	buf = malloc(len + 1);
	if (buf == NULL) {
		st = client_error(client, RMA_ERR_NO_MEMORY,
				  "rma_daemon_status: no memory for %zu bytes",
				  len);
		goto err_free_reply;
	}
	rma__v1__status_reply__pack(reply->status_reply, buf);
	rma__v1__reply__free_unpacked(reply, NULL);
	*status_p = buf;
	*len_p = len;
	return RMA_OK;

err_free_reply:
	rma__v1__reply__free_unpacked(reply, NULL);
	return st;
}

/* ---- connect and disconnect ---- */

void
client_free(rma_client_t *c)
{
	int fd;

	while ((fd = client_fd_pop(c)) >= 0)
		close(fd);
	ring_close(c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->epfd >= 0)
		close(c->epfd);
	frame_reader_cleanup(&c->reader);
	notification_free(c);
	staging_free(c);
	free(c->fds);
	free(c->out);
	free(c->socket_path);
	free(c->daemon_id);
	free(c->daemon_version);
	free(c->shutdown_detail);
	free(c);
}

rma_status_t
client_hello(rma_client_t *c, const char *name, int timeout_ms)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Hello hello = RMA__V1__HELLO__INIT;
	Rma__V1__Reply *reply;
	Rma__V1__HelloReply *hr;
	rma_status_t st;
	int fd = -1;

	hello.protocol_version = RMA_PROTOCOL_VERSION;
	hello.client_name = (char *)name;
	hello.ring = ring_wanted();
	hello.ring_comp_slots = hello.ring ? ring_comp_slots_wanted() : 0;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &hello;
	/* a ring of an earlier connection (a take-over) is of no use now */
	ring_close(c);
	st = client_call(c, &req, timeout_ms, &reply, &fd);
	if (st != RMA_OK)
		return st;
	if (fd >= 0) {
		/* the daemon puts completions there from now on */
		st = ring_open(c, fd, reply->hello->ring);
		if (st != RMA_OK)
			goto err_free_reply;
	}
	if (reply->body_case != RMA__V1__REPLY__BODY_HELLO) {
		st = client_error(c, RMA_ERR_PROTOCOL,
				  "hello answered without a "
				  "hello reply");
		goto err_free_reply;
	}
	hr = reply->hello;
	c->daemon_id = strdup(client_str(hr->daemon_id));
	c->daemon_version = strdup(client_str(hr->version));
	if (c->daemon_id == NULL || c->daemon_version == NULL) {
		st = client_error(c, RMA_ERR_NO_MEMORY, "no memory");
		goto err_free_reply;
	}
	/* The daemon's limit bounds what we send; what it sends may be
	 * bigger than our default only if it says so. */
	if (hr->max_frame >= 4096) {
		c->max_frame = hr->max_frame;
		if (hr->max_frame > c->reader.max_frame)
			c->reader.max_frame = hr->max_frame;
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	return RMA_OK;

err_free_reply:
	rma__v1__reply__free_unpacked(reply, NULL);
	return st;
}

rma_status_t
client_attach(int fd, const char *name, const char *path, int timeout_ms,
	      rma_client_t **client_p)
{
	rma_client_t *c;
	rma_status_t st;
	int flags;

	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return client_error(NULL, RMA_ERR_NO_MEMORY,
				    "no memory for a client");
	}
	c->fd = fd;
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	c->fork_generation = fork_watch();
	c->next_id = 1;
	c->op_seq = 1;
	c->max_frame = FRAME_MAX_DEFAULT;
	frame_reader_init(&c->reader, FRAME_MAX_DEFAULT);
	if (path != NULL) {
		c->socket_path = strdup(path);
		if (c->socket_path == NULL) {
			st = client_error(NULL, RMA_ERR_NO_MEMORY,
					  "no memory for a client");
			goto err_free_client;
		}
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		st = client_error(NULL, RMA_ERR_INTERNAL, "fcntl: %s",
				  strerror(errno));
		goto err_free_client;
	}
	if (c->epfd < 0 || client_epoll_add(c, c->fd) != RMA_OK) {
		st = client_error(NULL, RMA_ERR_NO_MEMORY,
				  "no epoll instance for rma_fd(): %s",
				  strerror(errno));
		goto err_free_client;
	}
	snprintf(c->hello_name, sizeof(c->hello_name), "%s", name);
	st = client_hello(c, name, timeout_ms);
	if (st != RMA_OK) {
		client_error(NULL, st, "%s", c->last_error);
		goto err_free_client;
	}
	*client_p = c;
	return RMA_OK;

err_free_client:
	/* no request, region or peer exists yet */
	client_free(c);
	return st;
}

rma_status_t
rma_client_attach(int fd, const char *name, rma_client_t **client_p)
{
	if (fd < 0 || client_p == NULL) {
		if (fd >= 0)
			close(fd);
		return client_error(NULL, RMA_ERR_INVALID,
				    "rma_client_attach: bad argument");
	}
	return client_attach(fd, name != NULL ? name : "", NULL,
			     CLIENT_CALL_TIMEOUT_MS, client_p);
}

RMA_API void
rma_disconnect(rma_client_t *client)
{
	if (client == NULL)
		return;
	if (fork_inherited(client)) {
		/* the parent's connection: only this copy goes */
		fork_release(client);
		return;
	}
	client_fail(client, RMA_ERR_DAEMON_GONE, "client disconnected");
	request_complete_all(client, RMA_ERR_DAEMON_GONE,
			     "client disconnected");
	region_cleanup(client);
	peer_cleanup(client);
	request_cleanup(client);
	client_free(client);
}

RMA_API const char *
rma_last_error(const rma_client_t *client)
{
	return client != NULL ? client->last_error : client_connect_error;
}

RMA_API const char *
rma_daemon_id(const rma_client_t *client)
{
	return client != NULL ? client_str(client->daemon_id) : "";
}

RMA_API int
rma_fd(const rma_client_t *client)
{
	return client != NULL ? client->epfd : -1;
}

RMA_API rma_status_t
rma_on_reattach(rma_client_t *client, rma_reattach_callback_t cb,
		void *user_data)
{
	if (client == NULL)
		return client_error(NULL, RMA_ERR_INVALID,
				    "rma_on_reattach: client is NULL");
	client->reattach_cb = cb;
	client->reattach_user_data = user_data;
	return RMA_OK;
}

RMA_API uint64_t
rma_reattach_count(const rma_client_t *client)
{
	return client != NULL ? client->reattaches : 0;
}

RMA_API size_t
rma_in_flight(const rma_client_t *client)
{
	return client != NULL ? client->in_flight : 0;
}

RMA_API rma_status_t
rma_progress(rma_client_t *client)
{
	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (!client->gone) {
		request_flush(client);
		client_dispatch(client);
		client_read(client);
		/* the daemon is to wake an event loop's poll of rma_fd() */
		if (!client->gone)
			ring_arm(client);
		/* what callbacks submitted goes out now, as coalesced, and
		 * the notifications they took are acknowledged */
		if (!client->gone)
			request_flush(client);
		if (!client->gone)
			notification_ack(client, 1);
	}
	if (client->gone) {
		client_reap(client);
		return client_gone_error(client);
	}
	return RMA_OK;
}

static int
client_dispatched_since(const void *arg)
{
	const uint64_t *since = arg;

	return since[1] != 0 &&
	       ((const rma_client_t *)(uintptr_t)since[1])->dispatched !=
		   since[0];
}

RMA_API rma_status_t
rma_wait(rma_client_t *client, int timeout_ms)
{
	uint64_t since[2];
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	/* rma_progress, first, checks fork_inherited */
	since[0] = client->dispatched;
	since[1] = (uint64_t)(uintptr_t)client;
	st = rma_progress(client);
	if (st != RMA_OK)
		return st;
	if (client->in_flight == 0 && client->calls == NULL && timeout_ms < 0)
		return RMA_OK;
	st = client_wait(client, client_deadline(timeout_ms),
			 client_dispatched_since, since);
	if (st == RMA_ERR_TIMEOUT)
		return client_error(client, st, "nothing came within %d ms",
				    timeout_ms);
	if (client->gone) {
		client_reap(client);
		return client_gone_error(client);
	}
	return rma_progress(client);
}
