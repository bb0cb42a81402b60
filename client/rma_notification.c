/* SPDX-License-Identifier: BSD-2-Clause */
/* Notifications: what notifying puts (rma_put_notify()) of any daemon wrote
 * into this client's regions. The daemon holds a bounded number for us
 * until we acknowledge them (NotifyAck); we acknowledge what the callback
 * or rma_notify_next() consumed, in batches, so that a client that stops
 * consuming makes notifying puts to it fail at their initiators with
 * RMA_ERR_LIMIT rather than grow without bound. */
#include "rma_internal.h"
#include "descriptor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of line: the owner calls notification_ack for every notification,
 * and building the request before the test that nearly always returns was
 * an eighth of its instructions on a stream of 8-byte notifying puts. */
static void
notification_ack_send(rma_client_t *c)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__NotifyAck ack = RMA__V1__NOTIFY_ACK__INIT;

	ack.count = c->notify_unacked;
	req.id = 0;
	req.body_case = RMA__V1__REQUEST__BODY_NOTIFY_ACK;
	req.notify_ack = &ack;
	/* A failed send fails the connection: nothing left to bound. */
	if (client_send(c, &req) == RMA_OK)
		c->notify_unacked = 0;
}

void
notification_ack(rma_client_t *c, int force)
{
	if (c->notify_unacked == 0 || c->gone ||
	    (!force && c->notify_unacked < NOTIFICATION_ACK_BATCH))
		return;
	notification_ack_send(c);
}

static int
notification_push(rma_client_t *c, const rma_notification_t *n)
{
	if (c->notify_count == c->notify_cap) {
		size_t cap = c->notify_cap ? 2 * c->notify_cap : 64;
		rma_notification_t *q = malloc(cap * sizeof(*q));

		if (q == NULL)
			return -1;
		for (size_t i = 0; i < c->notify_count; i++)
			q[i] =
			    c->notify_q[(c->notify_head + i) % c->notify_cap];
		free(c->notify_q);
		c->notify_q = q;
		c->notify_cap = cap;
		c->notify_head = 0;
	}
	c->notify_q[(c->notify_head + c->notify_count) % c->notify_cap] = *n;
	c->notify_count++;
	return 0;
}

void
notification_queue(rma_client_t *c, const rma_notification_t *n)
{
	if (notification_push(c, n) < 0) {
		/* Dropped here: acknowledged, so the daemon's bound is not
		 * held by what nobody will ever see. */
		c->notify_unacked++;
		notification_ack(c, 0);
	}
}

void
notification_receive(rma_client_t *c, uint64_t region_id, rma_notification_t *n,
		     const char *daemon_id, size_t id_len)
{
	size_t len = id_len < sizeof(n->daemon_id) - 1
			 ? id_len
			 : sizeof(n->daemon_id) - 1;

	/* Looked up again for each: a callback may free it. */
	n->region = notification_region(c, region_id);
	/* per notification: a copy, not a printf; of a fixed size for a
	 * daemon's id, which the compiler makes two moves, where a call to
	 * memcpy with a length was a sixth of the owner's instructions */
	if (len == 2 * DAEMON_ID_SIZE)
		memcpy(n->daemon_id, daemon_id, 2 * DAEMON_ID_SIZE);
	else
		memcpy(n->daemon_id, daemon_id, len);
	n->daemon_id[len] = '\0';
	notification_deliver(c, n);
}

void
notification_receive_all(rma_client_t *c, const Rma__V1__Notifications *ns)
{
	rma_notification_t n;
	struct notifrec rec;

	for (size_t i = 0; i < ns->n_notifications; i++) {
		const Rma__V1__Notification *w = ns->notifications[i];
		const char *id = w->daemon_id != NULL ? w->daemon_id : "";

		n.offset = w->offset;
		n.length = w->length;
		n.value = w->value;
		notification_receive(c, w->region_id, &n, id, strlen(id));
	}
	for (size_t at = 0; at + NOTIFREC_SIZE <= ns->packed.len;
	     at += NOTIFREC_SIZE) {
		const char *sender = "";

		/* A record we cannot read still had its place in the
		 * daemon's bound: it is passed on with what it says. */
		(void)notifrec_decode(ns->packed.data + at, &rec);
		if (rec.sender < ns->n_daemon_ids &&
		    ns->daemon_ids[rec.sender] != NULL)
			sender = ns->daemon_ids[rec.sender];
		n.offset = rec.offset;
		n.length = rec.length;
		n.value = rec.value;
		notification_receive(c, rec.region_id, &n, sender,
				     strlen(sender));
	}
}

void
notification_free(rma_client_t *c)
{
	free(c->notify_q);
	c->notify_q = NULL;
	c->notify_count = c->notify_cap = c->notify_head = 0;
}

RMA_API void
rma_notify_callback(rma_client_t *client, rma_notify_callback_t cb,
		    void *user_data)
{
	if (client == NULL)
		return;
	client->notify_cb = cb;
	client->notify_user_data = user_data;
}

RMA_API int
rma_notify_next(rma_client_t *client, rma_notification_t *n)
{
	rma_status_t st = RMA_OK;

	if (client == NULL || n == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (client->notify_count == 0)
		st = rma_progress(client);
	if (client->notify_count == 0) {
		notification_ack(client, 1);
		return st == RMA_OK ? 0 : st;
	}
	*n = client->notify_q[client->notify_head];
	client->notify_head = (client->notify_head + 1) % client->notify_cap;
	client->notify_count--;
	client->notify_unacked++;
	notification_ack(client, client->notify_count == 0);
	return 1;
}
