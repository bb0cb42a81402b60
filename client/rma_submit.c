/* SPDX-License-Identifier: BSD-2-Clause */
/* Submitting a request: numbered (op_id = sequence << 32 | slot), its
 * record coalesced with others into one batch, and the batch sent, into
 * the shared ring if it has room, in a Submit frame on the socket
 * otherwise. Split from rma_request.c (issue 25): the batching rules in
 * one place, apart from a request's life and the calls that make one. */
#include "rma_internal.h"

#include <stdbool.h>

/* The batch into the ring, if it has room; otherwise it waits for the
 * next flush. */
static bool
request_push(rma_client_t *c)
{
	size_t n = c->pending_n;

	if (!ring_push(c, c->pending_packed, n))
		return false;
	c->pending_n = 0;
	c->pending_bytes = 0;
	for (size_t i = 0; i < n; i++)
		c->pending_reqs[i]->sent = 1;
	c->sent_in_flight += n;
	/* may find the daemon gone or taken over: these ops are in
	 * flight, and complete as such */
	ring_submitted(c);
	return true;
}

rma_status_t
request_flush(rma_client_t *c)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Submit submit = RMA__V1__SUBMIT__INIT;
	rma_status_t st;
	size_t n = c->pending_n;

	if (n == 0)
		return RMA_OK;
	if (c->gone)
		return client_gone_error(c);
	/* The ring if it has room; the socket otherwise (rma_ring.c keeps the
	 * order between the two). */
	if (request_push(c))
		return c->gone ? client_gone_error(c) : RMA_OK;
	submit.packed.data = c->pending_packed;
	submit.packed.len = n * OPREC_SIZE;
	req.id = 0;
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &submit;
	st = client_send(c, &req);
	if (st == RMA_OK)
		ring_note_socket_submit(c);
	/* The daemon was taken over as we wrote: these ops already completed
	 * RESTARTED, and what their callbacks queued since is pending for
	 * the new connection. */
	if (st == RMA_ERR_RESTARTED)
		return st;
	c->pending_n = 0;
	c->pending_bytes = 0;
	if (st != RMA_OK) {
		/* The ops are lost to the daemon; they must not hang. They
		 * complete with the connection's failure at the next reap. */
		client_fail(c, st, "could not send operations: %s",
			    c->last_error);
		return st;
	}
	for (size_t i = 0; i < n; i++)
		c->pending_reqs[i]->sent = 1;
	c->sent_in_flight += n;
	return RMA_OK;
}

struct rma_request *
request_begin_slow(rma_client_t *c, const struct request_stage *stage,
		   rma_callback_t cb, void *user_data, rma_status_t *st_p)
{
	struct rma_request *req;
	uint32_t slot;

	/* Not submitted: a staged piece's extent goes back (staging_drop) */
	if (c->gone) {
		staging_drop(c, stage != NULL ? stage->ext : 0);
		*st_p = client_gone_error(c);
		return NULL;
	}
	req = request_alloc(c);
	if (req == NULL) {
		staging_drop(c, stage != NULL ? stage->ext : 0);
		*st_p = client_error(c, RMA_ERR_NO_MEMORY,
				     "no memory for a request");
		return NULL;
	}
	req->refs = 1;
	if (request_slot_get(c, &slot) < 0) {
		request_unref(req);
		staging_drop(c, stage != NULL ? stage->ext : 0);
		*st_p = client_error(c, RMA_ERR_NO_MEMORY,
				     "no memory for a request");
		return NULL;
	}
	request_attach(c, req, slot, stage, cb, user_data);
	/* Ours while it is sent: a take-over noticed as it is written
	 * (request_flush) completes it RESTARTED, and drops the library's
	 * reference, before we return. */
	req->refs++;

	if (c->pending_n > 0 &&
	    c->pending_bytes + OPREC_SIZE + REQUEST_FRAME_SLACK > c->max_frame)
		request_flush(c);
	return req;
}

rma_status_t
request_queue_slow(rma_client_t *c, struct rma_request *req,
		   rma_request_t **req_p)
{
	if (!c->gone) {
		c->pending_reqs[c->pending_n] = req;
		c->pending_n++;
		c->pending_bytes += OPREC_SIZE;
		/* Nothing in flight: send now, for latency. Otherwise a
		 * completion will come and wake the caller, who sends the
		 * batch from rma_progress(). */
		if ((c->sent_in_flight == 0 && !c->hold_batch) ||
		    c->pending_n == REQUEST_BATCH_MAX)
			request_flush(c);
		else if (c->ring != NULL && !c->hold_batch &&
			 c->pending_n >= REQUEST_RING_BATCH)
			request_push(c);
	}
	if (c->gone) {
		/* Not submitted after all: take it back without a
		 * callback. Others complete at the next reap. */
		if (c->pending_n > 0 &&
		    c->pending_reqs[c->pending_n - 1] == req)
			c->pending_n--;
		if (c->slots[req->slot] == req) {
			request_slot_put(c, req);
			staging_drop(c, req->stage_ext);
			req->stage_ext = 0;
			request_unref(req); /* the library's */
		}
		request_unref(req); /* ours */
		return client_gone_error(c);
	}
	if (req_p != NULL) {
		request_hold(c, req);
		*req_p = req; /* ours is the caller's, until
			       * rma_request_release */
	} else {
		request_unref(req);
	}
	return RMA_OK;
}

rma_status_t
request_submit(rma_client_t *c, const Rma__V1__Op *op, rma_callback_t cb,
	       void *user_data, rma_request_t **req_p)
{
	return request_submit_staged(c, op, NULL, cb, user_data, req_p);
}
