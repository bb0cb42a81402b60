/* SPDX-License-Identifier: BSD-2-Clause */
/* Waiting on the connection: the wait loop (ring spin, ring arm, poll of
 * the socket), synchronous calls over the asynchronous stream, the calls
 * that only ask the daemon something (rma_daemon_status), and the public
 * rma_progress / rma_wait. Split from client.c (issue 25): this file
 * drives client_io.c's reading and dispatch until what it waits for came. */
#include "rma_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
		if (ring_spin(c, deadline, -1, done, arg)) {
			if (!ring_socket_idle(c))
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

/* The caller may go to sleep on rma_fd() now. What the completions
 * handled before submitted (a callback's operation, a staged transfer's
 * next piece) goes out, or nothing in flight might wake it; and the
 * daemon must wake it (ring_arm, which reaps what came meanwhile, whose
 * callbacks may submit too). */
static void
client_settle(rma_client_t *c)
{
	while (!c->gone) {
		if (c->pending_n > 0 && request_flush(c) != RMA_OK)
			break;
		if (c->ring == NULL)
			break;
		ring_arm(c);
		if (c->pending_n == 0)
			break;
	}
}

rma_status_t
client_wait(rma_client_t *c, int64_t deadline, int (*done)(const void *arg),
	    const void *arg)
{
	rma_status_t st = client_wait_once(c, deadline, done, arg);

	client_settle(c);
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
	if (c->gone)
		return client_reap_gone(c);
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

/* rma_progress; with waiting, for rma_wait before client_wait, which
 * looks at the socket itself (its spin polls the socket, and so does its
 * sleep), whatever the daemon did or did not since. */
static rma_status_t
client_progress(rma_client_t *client, bool waiting)
{
	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (!client->gone) {
		/* The socket, unless the ring says it holds nothing: a
		 * recvmsg that found nothing was a sixth of a same-daemon
		 * 8-byte put's time in the client. Asked before the ring is
		 * reaped, so that what the daemon did since the last call
		 * (ring_arm reaps after it) shows it at work. A daemon that
		 * did nothing since may have died, which only the socket
		 * tells (its end of stream): read it then, unless the caller
		 * looks at it too (rma_wait, called after a progress that
		 * found nothing, read it twice for nothing: two recvmsg per
		 * wait). */
		bool idle = ring_socket_idle(client) ||
			    (waiting && ring_socket_read_all(client));

		request_flush(client);
		client_dispatch(client);
		if (!idle)
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
	if (client->gone)
		return client_reap_gone(client);
	return RMA_OK;
}

RMA_API rma_status_t
rma_progress(rma_client_t *client)
{
	return client_progress(client, false);
}

static int
client_dispatched_since(const void *arg)
{
	const uint64_t *since = arg;

	return since[1] != 0 &&
	       ((const rma_client_t *)(uintptr_t)since[1])->dispatched !=
		   since[0];
}

/* client_progress(), what was dispatched before it noted in since (for
 * client_dispatched_since); client_progress checks fork_inherited. */
static rma_status_t
client_progress_noting(rma_client_t *client, uint64_t since[2], bool waiting)
{
	since[0] = client->dispatched;
	since[1] = (uint64_t)(uintptr_t)client;
	return client_progress(client, waiting);
}

RMA_API rma_status_t
rma_wait(rma_client_t *client, int timeout_ms)
{
	uint64_t since[2];
	rma_status_t st;
	bool waiting;

	if (client == NULL)
		return RMA_ERR_INVALID;
	/* client_wait comes next (unless nothing is awaited): it looks at
	 * the socket */
	waiting =
	    client->in_flight > 0 || client->calls != NULL || timeout_ms >= 0;
	st = client_progress_noting(client, since, waiting);
	if (st != RMA_OK)
		return st;
	if (client->in_flight == 0 && client->calls == NULL && timeout_ms < 0)
		return RMA_OK;
	st = client_wait(client, client_deadline(timeout_ms),
			 client_dispatched_since, since);
	if (st == RMA_ERR_TIMEOUT)
		return client_error(client, st, "nothing came within %d ms",
				    timeout_ms);
	if (client->gone)
		return client_reap_gone(client);
	return rma_progress(client);
}

RMA_API rma_status_t
rma_poll(rma_client_t *client, int spin_us)
{
	uint64_t since[2];
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	st = client_progress_noting(client, since, false);
	if (st != RMA_OK || client_dispatched_since(since))
		return st;
	/* Never a sleep: an event loop's reader calls this, and its loop
	 * sleeps on rma_fd() once this returns. */
	if (ring_spin(client, -1, spin_us < 0 ? -1 : (int64_t)spin_us * 1000,
		      client_dispatched_since, since)) {
		/* the socket, if the spin saw it readable; the ring armed */
		st = rma_progress(client);
		if (st != RMA_OK)
			return st;
	} else {
		/* the spin (if it ran) left the ring unarmed */
		client_settle(client);
		if (client->gone)
			return client_reap_gone(client);
	}
	if (client_dispatched_since(since))
		return RMA_OK;
	return client_error(client, RMA_ERR_TIMEOUT,
			    "nothing came within the poll");
}
