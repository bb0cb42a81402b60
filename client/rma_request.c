/* SPDX-License-Identifier: BSD-2-Clause */
/* A request's life: allocation and references, the slot table, completion
 * (from the daemon, all at once when the connection goes, or here for
 * what the library decides alone), cancel, and the public accessors, wait
 * and release. A request in flight sits in the client's slot table,
 * indexed by the low half of its op_id, so a completion finds it in O(1);
 * the high half is a sequence number, so a stray or repeated completion
 * never hits a newer request. Numbering and batching are rma_submit.c's,
 * the operations that make requests rma_ops.c's (issue 25 split them out
 * of here). */
#include "rma_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rma_request *
request_alloc(rma_client_t *c)
{
	struct rma_request *req = c->req_free;

	if (req != NULL) {
		c->req_free = req->next;
		c->req_nfree--;
	} else {
		req = malloc(sizeof(*req));
		if (req == NULL)
			return NULL;
	}
	request_reset(req, c);
	return req;
}

void
request_hold(rma_client_t *c, struct rma_request *req)
{
	req->held = true;
	req->prev = NULL;
	req->next = c->req_live;
	if (c->req_live != NULL)
		c->req_live->prev = req;
	c->req_live = req;
}

void
request_free_slow(struct rma_request *req)
{
	rma_client_t *c = req->client;

	/* almost always NULL: no call for it */
	if (req->detail != NULL) {
		free(req->detail);
		req->detail = NULL;
	}
	if (c == NULL) {
		/* its client is gone; it was taken off every list then */
		free(req);
		return;
	}
	if (req->held) {
		if (req->prev != NULL)
			req->prev->next = req->next;
		else
			c->req_live = req->next;
		if (req->next != NULL)
			req->next->prev = req->prev;
		req->held = false;
	}
	if (c->req_nfree < REQUEST_FREE_MAX) {
		req->next = c->req_free;
		c->req_free = req;
		c->req_nfree++;
	} else {
		free(req);
	}
}

int
request_slot_get(rma_client_t *c, uint32_t *slot_p)
{
	if (c->slots_nfree > 0) {
		*slot_p = c->slots_free[--c->slots_nfree];
		return 0;
	}
	if (c->slots_used == c->slots_cap) {
		uint32_t cap = c->slots_cap ? 2 * c->slots_cap : 256;
		struct rma_request **slots;
		uint32_t *free_list;

		if (cap <= c->slots_cap)
			return -1;
		slots = realloc(c->slots, cap * sizeof(*slots));
		if (slots == NULL)
			return -1;
		c->slots = slots;
		free_list = realloc(c->slots_free, cap * sizeof(*free_list));
		if (free_list == NULL)
			return -1;
		c->slots_free = free_list;
		c->slots_cap = cap;
	}
	*slot_p = c->slots_used++;
	return 0;
}

void
request_complete(rma_client_t *c, struct rma_request *req, rma_status_t status,
		 uint64_t bytes, uint64_t value, const char *detail)
{
	bool staged = req->stage_ext != 0;

	request_slot_put(c, req);
	req->status = status;
	req->bytes = bytes;
	req->value = value;
	if (detail != NULL && detail[0] != '\0')
		req->detail = strdup(detail);
	/* a get's bytes reach the caller's buffer before it completes */
	if (staged)
		staging_release(c, req);
	if (req->cb != NULL)
		req->cb(req, status, req->user_data);
	/* the library's reference */
	request_unref(req);
	/* the room it left lets waiting transfers go on */
	if (staged)
		staging_pump(c);
}

void
request_complete_all(rma_client_t *c, rma_status_t status, const char *detail)
{
	c->pending_n = 0;
	c->pending_bytes = 0;
	/* callbacks cannot add requests: the client is gone */
	for (uint32_t i = 0; i < c->slots_used; i++) {
		if (c->slots[i] != NULL)
			request_complete(c, c->slots[i], status, 0, 0, detail);
	}
	/* transfers waiting for staging room fail too */
	staging_pump(c);
}

int
request_in_flight_ids(rma_client_t *c, uint64_t **ids_p, size_t *n_p)
{
	uint64_t *ids = NULL;
	size_t n = 0;

	if (c->in_flight > 0) {
		ids = malloc(c->slots_used * sizeof(*ids));
		if (ids == NULL)
			return -1;
	}
	for (uint32_t i = 0; i < c->slots_used && ids != NULL; i++) {
		if (c->slots[i] != NULL)
			ids[n++] = c->slots[i]->op_id;
	}
	c->pending_n = 0;
	c->pending_bytes = 0;
	*ids_p = ids;
	*n_p = n;
	return 0;
}

void
request_complete_ids(rma_client_t *c, const uint64_t *ids, size_t n,
		     rma_status_t status, const char *detail)
{
	/* By id, not by slot: a callback may start an operation that takes
	 * a slot freed here; its op_id is a new one. */
	for (size_t i = 0; i < n; i++) {
		uint32_t slot = (uint32_t)ids[i];

		if (slot < c->slots_used && c->slots[slot] != NULL &&
		    c->slots[slot]->op_id == ids[i])
			request_complete(c, c->slots[slot], status, 0, 0,
					 detail);
	}
}

void
request_cleanup(rma_client_t *c)
{
	struct rma_request *req, *next;

	/* requests the caller still holds outlive the client */
	for (req = c->req_live; req != NULL; req = next) {
		next = req->next;
		req->client = NULL;
		req->prev = req->next = NULL;
	}
	c->req_live = NULL;
	for (req = c->req_free; req != NULL; req = next) {
		next = req->next;
		free(req);
	}
	c->req_free = NULL;
	c->req_nfree = 0;
	free(c->slots);
	free(c->slots_free);
	c->slots = NULL;
	c->slots_free = NULL;
	c->slots_cap = c->slots_used = c->slots_nfree = 0;
}

/* An operation the library can decide alone (a range outside what the
 * owner resolved, a misaligned word, a freed local region, a daemon known
 * to be gone): it completes here, before the call that started it
 * returns, with its callback run in the caller's thread, as ucxx does for
 * a request that completes at once. The daemon never hears of it. */
rma_status_t
request_complete_now(rma_client_t *c, rma_status_t status, rma_callback_t cb,
		     void *user_data, rma_request_t **req_p, const char *fmt,
		     ...)
{
	struct rma_request *req = request_alloc(c);
	char detail[256];
	va_list ap;

	if (req == NULL)
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a request");
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	req->refs = 1; /* the library's, until the callback returned */
	if (req_p != NULL) {
		req->refs++;
		request_hold(c, req);
		*req_p = req;
	}
	req->status = status;
	req->detail = strdup(detail);
	client_error(c, status, "%s", detail);
	if (cb != NULL)
		cb(req, status, user_data);
	request_unref(req);
	return RMA_OK;
}

/* The cases every transfer shares that the library decides alone: a
 * freed local region or one lost at a restart (region may be NULL: none),
 * a daemon known gone.
 * True when the request completed here, its call's status in *st_p. */
bool
request_decide_here(rma_client_t *c, const rma_region_t *region,
		    const char *name, rma_callback_t cb, void *user_data,
		    rma_request_t **req_p, rma_status_t *st_p)
{
	if (region != NULL && (region->freed || region->lost != RMA_OK)) {
		*st_p = request_complete_now(
		    c, RMA_ERR_NO_REGION, cb, user_data, req_p,
		    "%s names region %llu, which %s", name,
		    (unsigned long long)region->region_id,
		    region->freed ? "was freed"
				  : "the daemon did not give back after a "
				    "restart");
		return true;
	}
	if (c->gone) {
		*st_p =
		    request_complete_now(c, RMA_ERR_DAEMON_GONE, cb, user_data,
					 req_p, "%s", c->gone_detail);
		return true;
	}
	return false;
}

/* A vectored request: its pieces still in the batch are canceled, so it
 * completes with RMA_ERR_CANCELED once the sent ones are done. */
static rma_status_t
request_cancel_parts(rma_client_t *c, struct rma_request *parent)
{
	int canceled = 0;
	size_t i = 0;

	parent->refs++; /* its last piece may complete it here */
	while (i < c->pending_n) {
		struct rma_request *req = c->pending_reqs[i];
		size_t after = c->pending_n - i - 1;

		if (req->parent != parent) {
			i++;
			continue;
		}
		memmove(c->pending_packed + i * OPREC_SIZE,
			c->pending_packed + (i + 1) * OPREC_SIZE,
			after * OPREC_SIZE);
		memmove(c->pending_reqs + i, c->pending_reqs + i + 1,
			after * sizeof(*c->pending_reqs));
		c->pending_n--;
		c->pending_bytes -= OPREC_SIZE;
		request_complete(c, req, RMA_ERR_CANCELED, 0, 0,
				 "canceled before it was sent");
		canceled = 1;
	}
	request_unref(parent);
	return canceled ? RMA_OK : RMA_INPROGRESS;
}

/* Asks the daemon to cancel sent operations: those it parked, waiting
 * for their peer to come back, complete with RMA_ERR_CANCELED; the others
 * complete as they would have. Nothing to ask a gone daemon: they all
 * complete with RMA_ERR_DAEMON_GONE. */
static void
request_cancel_sent(rma_client_t *c, uint64_t *op_ids, size_t n)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Cancel cancel = RMA__V1__CANCEL__INIT;

	if (n == 0 || c->gone)
		return;
	cancel.op_ids = op_ids;
	cancel.n_op_ids = n;
	req.id = 0;
	req.body_case = RMA__V1__REQUEST__BODY_CANCEL;
	req.cancel = &cancel;
	/* a failed send fails the connection, which completes them all */
	(void)client_send(c, &req);
}

/* The sent pieces of a vectored request, asked back as one Cancel. */
static void
request_cancel_sent_parts(rma_client_t *c, const struct rma_request *parent)
{
	uint64_t ids[RMA_IOV_MAX];
	size_t n = 0;

	for (uint32_t i = 0; i < c->slots_used && n < RMA_IOV_MAX; i++) {
		const struct rma_request *r = c->slots[i];

		if (r != NULL && r->parent == parent && r->sent &&
		    r->status == RMA_INPROGRESS)
			ids[n++] = r->op_id;
	}
	request_cancel_sent(c, ids, n);
}

RMA_API rma_status_t
rma_request_cancel(rma_client_t *client, rma_request_t *req)
{
	bool unissued = false;
	rma_status_t st;

	if (client != NULL && fork_inherited(client))
		return fork_error(client);
	if (client == NULL || req == NULL || req->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "rma_request_cancel: no request of this "
				    "client");
	if (req->status != RMA_INPROGRESS)
		return client_error(client, RMA_ERR_INVALID,
				    "rma_request_cancel: already completed");
	/* Still in the batch: the daemon never hears of it. */
	for (size_t i = 0; i < client->pending_n; i++) {
		size_t after = client->pending_n - i - 1;

		if (client->pending_reqs[i] != req)
			continue;
		memmove(client->pending_packed + i * OPREC_SIZE,
			client->pending_packed + (i + 1) * OPREC_SIZE,
			after * OPREC_SIZE);
		memmove(client->pending_reqs + i, client->pending_reqs + i + 1,
			after * sizeof(*client->pending_reqs));
		client->pending_n--;
		client->pending_bytes -= OPREC_SIZE;
		request_complete(client, req, RMA_ERR_CANCELED, 0, 0,
				 "canceled before it was sent");
		return RMA_OK;
	}
	/* A transfer through the staging area: its pieces not issued yet
	 * never will be (it may complete here). */
	if (req->xfer != NULL)
		unissued = staging_cancel(client, req);
	if (req->parts_left > 0) {
		request_cancel_sent_parts(client, req);
		st = request_cancel_parts(client, req);
		return unissued ? RMA_OK : st;
	}
	if (unissued)
		return RMA_OK;
	/* Handed to the daemon: only it can tell whether it already left
	 * (parked ops have not); the completion says which. */
	request_cancel_sent(client, &req->op_id, 1);
	return RMA_INPROGRESS;
}

/* A vectored request loses one piece still to wait for: the last
 * completes it, with its first failure (or RMA_OK). */
void
request_part_finish(struct rma_request *parent)
{
	if (--parent->parts_left > 0)
		return;
	parent->status = parent->first_error;
	if (parent->cb != NULL)
		parent->cb(parent, parent->status, parent->user_data);
	request_unref(parent); /* the library's */
}

RMA_API uint64_t
rma_request_value(const rma_request_t *req)
{
	return req != NULL && req->status == RMA_OK ? req->value : 0;
}

RMA_API int
rma_request_is_completed(const rma_request_t *req)
{
	return req != NULL && req->status != RMA_INPROGRESS;
}

RMA_API rma_status_t
rma_request_status(const rma_request_t *req)
{
	return req != NULL ? req->status : RMA_ERR_INVALID;
}

RMA_API uint64_t
rma_request_bytes(const rma_request_t *req)
{
	return req != NULL ? req->bytes : 0;
}

RMA_API const char *
rma_request_detail(const rma_request_t *req)
{
	return req != NULL && req->detail != NULL ? req->detail : "";
}

static int
request_done(const void *arg)
{
	const struct rma_request *req = arg;

	return req->status != RMA_INPROGRESS;
}

RMA_API rma_status_t
rma_request_wait(rma_client_t *client, rma_request_t *req, int timeout_ms)
{
	rma_status_t st;

	if (client != NULL && fork_inherited(client))
		return fork_error(client);
	if (req == NULL)
		return client_error(client, RMA_ERR_INVALID,
				    "rma_request_wait: no request");
	if (req->status == RMA_INPROGRESS) {
		if (client == NULL || req->client != client)
			return client_error(client, RMA_ERR_INVALID,
					    "request of another client");
		st = client_wait(client, client_deadline(timeout_ms),
				 request_done, req);
		/* a gone client completes everything, this one included */
		client_reap(client);
		if (st == RMA_ERR_TIMEOUT && req->status == RMA_INPROGRESS)
			return client_error(client, RMA_ERR_TIMEOUT,
					    "request not completed within %d "
					    "ms",
					    timeout_ms);
	}
	if (req->status < 0 && client != NULL)
		client_error(client, req->status, "%s",
			     rma_request_detail(req));
	return req->status;
}

RMA_API void
rma_request_release(rma_request_t *req)
{
	/* An in-flight request keeps the library's reference: it completes
	 * (and its callback runs) unseen. */
	if (req != NULL)
		request_unref(req);
}
