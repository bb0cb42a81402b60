/* SPDX-License-Identifier: BSD-2-Clause */
/* The connection to rmad: a client's setup (attach, hello) and teardown
 * (rma_disconnect), failure (client_fail, client_reap) and its detail,
 * rma_fd()'s epoll set, and the handle's accessors. What goes over the
 * socket is client_io.c's; waiting and synchronous calls are
 * client_call.c's (issue 25 split them out of here). */
#include "rma_internal.h"
#include "monotime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

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

const char *
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

rma_status_t
client_reap_gone(rma_client_t *c)
{
	client_reap(c);
	return client_gone_error(c);
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
 * once. Hence, with rma_progress() reading the socket until EAGAIN
 * (unless the ring says the daemon, seen at work since the last look,
 * wrote nothing unread: ring_socket_idle):
 * - no busy loop: once it returns the socket has nothing unread, so
 *   rma_fd() polls not readable; a wake-up for bytes it already read ends
 *   in nothing (epoll_wait does not return for it, poll() sees 0); a
 *   daemon killed after its last completions costs one wake-up more,
 *   whose rma_progress() reads the end of stream;
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
	c->socket_read = 0;
	return RMA_OK;
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
