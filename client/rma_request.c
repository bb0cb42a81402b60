/* SPDX-License-Identifier: BSD-2-Clause */
/* Operations: puts, gets and flushes as requests, their coalescing into
 * Submit frames, and their completion. A request in flight sits in the
 * client's slot table, indexed by the low half of its op_id, so a
 * completion finds it in O(1); the high half is a sequence number, so a
 * stray or repeated completion never hits a newer request. */
#include "rma_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Request structs kept for reuse; more are freed. */
#define REQUEST_FREE_MAX 4096
/* Room in a frame besides the records: Request id, Submit and field
 * headers. */
#define REQUEST_FRAME_SLACK 64

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
	memset(req, 0, sizeof(*req));
	req->client = c;
	req->status = RMA_INPROGRESS;
	req->next = c->req_live;
	if (c->req_live != NULL)
		c->req_live->prev = req;
	c->req_live = req;
	return req;
}

void
request_unref(struct rma_request *req)
{
	rma_client_t *c = req->client;

	if (--req->refs > 0)
		return;
	free(req->detail);
	req->detail = NULL;
	if (c == NULL) {
		/* its client is gone; it was taken off every list then */
		free(req);
		return;
	}
	if (req->prev != NULL)
		req->prev->next = req->next;
	else
		c->req_live = req->next;
	if (req->next != NULL)
		req->next->prev = req->prev;
	if (c->req_nfree < REQUEST_FREE_MAX) {
		req->next = c->req_free;
		c->req_free = req;
		c->req_nfree++;
	} else {
		free(req);
	}
}

static int
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

/* Take req out of the slot table; the library's reference goes with the
 * caller of this. */
static void
request_slot_put(rma_client_t *c, struct rma_request *req)
{
	c->slots[req->slot] = NULL;
	c->slots_free[c->slots_nfree++] = req->slot;
	c->in_flight--;
	if (req->sent)
		c->sent_in_flight--;
}

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

rma_status_t
request_submit_staged(rma_client_t *c, const Rma__V1__Op *op,
		      const struct request_stage *stage, rma_callback_t cb,
		      void *user_data, rma_request_t **req_p)
{
	struct rma_request *req;
	Rma__V1__Op rec_op;
	uint32_t slot;

	/* Not submitted: a staged piece's extent goes back (staging_drop) */
	if (c->gone) {
		staging_drop(c, stage != NULL ? stage->ext : 0);
		return client_gone_error(c);
	}
	req = request_alloc(c);
	if (req == NULL) {
		staging_drop(c, stage != NULL ? stage->ext : 0);
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a request");
	}
	req->refs = 1;
	if (request_slot_get(c, &slot) < 0) {
		request_unref(req);
		staging_drop(c, stage != NULL ? stage->ext : 0);
		return client_error(c, RMA_ERR_NO_MEMORY,
				    "no memory for a request");
	}
	req->slot = slot;
	req->op_id = (uint64_t)c->op_seq << 32 | slot;
	/* op_id 0 never happens: the sequence skips 0 */
	if (++c->op_seq == 0)
		c->op_seq = 1;
	req->cb = cb;
	req->user_data = user_data;
	/* before it can complete: a flush below may complete it */
	if (stage != NULL) {
		req->stage_ext = stage->ext;
		req->stage_dst = stage->dst;
		req->parent = stage->parent;
	}
	c->slots[slot] = req;
	c->in_flight++;
	/* Ours while it is sent: a take-over noticed as it is written
	 * (request_flush) completes it RESTARTED, and drops the library's
	 * reference, before we return. */
	req->refs++;

	if (c->pending_n > 0 &&
	    c->pending_bytes + OPREC_SIZE + REQUEST_FRAME_SLACK > c->max_frame)
		request_flush(c);
	if (!c->gone) {
		rec_op = *op;
		rec_op.op_id = req->op_id;
		oprec_encode(c->pending_packed + c->pending_n * OPREC_SIZE,
			     &rec_op);
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
	if (req_p != NULL)
		*req_p = req; /* ours is the caller's, until
			       * rma_request_release */
	else
		request_unref(req);
	return RMA_OK;
}

static rma_status_t
request_submit(rma_client_t *c, const Rma__V1__Op *op, rma_callback_t cb,
	       void *user_data, rma_request_t **req_p)
{
	return request_submit_staged(c, op, NULL, cb, user_data, req_p);
}

static void
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
request_complete_wire(rma_client_t *c, uint64_t op_id, int32_t status,
		      uint64_t bytes, uint64_t value, const char *detail)
{
	uint32_t slot = (uint32_t)op_id;
	struct rma_request *req;

	c->dispatched++;
	if (slot >= c->slots_used)
		return;
	req = c->slots[slot];
	/* unknown, repeated, or for an op not even sent: ignore */
	if (req == NULL || req->op_id != op_id || !req->sent)
		return;
	request_complete(c, req, status_from_wire(status), bytes, value,
			 detail);
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
request_decided_here(rma_client_t *c, const rma_region_t *region,
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

/* ---- public ---- */

/* put and get: checked here, numbered and sent by request_submit */
static rma_status_t
request_rma(rma_client_t *client, Rma__V1__OpKind kind, rma_region_t *region,
	    uint64_t offset, rma_remote_t *remote, uint64_t remote_offset,
	    uint64_t length, unsigned flags, const uint64_t *notify,
	    rma_callback_t cb, void *user_data, rma_request_t **req_p)
{
	const char *name = kind == RMA__V1__OP_KIND__PUT ? "put" : "get";
	Rma__V1__Op op = RMA__V1__OP__INIT;
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (region == NULL || remote == NULL)
		return client_error(client, RMA_ERR_INVALID,
				    "%s needs a region and a remote", name);
	if (region->client != client || remote->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "region or remote of another client");
	if (remote->lost != RMA_OK) {
		rma_status_t st = peer_remote_revive(client, remote);

		if (st != RMA_OK)
			return st;
	}
	/* Nothing to move, and the daemon refuses it anyway: say so here,
	 * not as a request that fails later. */
	if (length == 0)
		return client_error(client, RMA_ERR_INVALID,
				    "%s of 0 bytes: length must be at least 1",
				    name);
	if (flags & ~RMA_FLAG_REMOTE_COMPLETION)
		return client_error(client, RMA_ERR_INVALID,
				    "unknown %s flags 0x%x", name, flags);
	if (request_decided_here(client, region, name, cb, user_data, req_p,
				 &st))
		return st;
	if (offset > region->length || length > region->length - offset)
		return request_complete_now(
		    client, RMA_ERR_OUT_OF_BOUNDS, cb, user_data, req_p,
		    "local range [%llu, +%llu) is outside region %llu of %zu "
		    "bytes",
		    (unsigned long long)offset, (unsigned long long)length,
		    (unsigned long long)region->region_id, region->length);
	if (remote_offset > remote->length ||
	    length > remote->length - remote_offset)
		return request_complete_now(
		    client, RMA_ERR_OUT_OF_BOUNDS, cb, user_data, req_p,
		    "remote range [%llu, +%llu) is outside the remote region "
		    "of %llu bytes",
		    (unsigned long long)remote_offset,
		    (unsigned long long)length,
		    (unsigned long long)remote->length);
	op.kind = kind;
	op.region_id = region->region_id;
	op.offset = offset;
	op.remote_id = remote->remote_id;
	op.remote_offset = remote_offset;
	op.length = length;
	op.flags = flags;
	if (notify != NULL) {
		op.flags |= RMA__V1__OP_FLAG__OP_FLAG_NOTIFY;
		op.notify_value = *notify;
	}
	return request_submit(client, &op, cb, user_data, req_p);
}

RMA_API rma_status_t
rma_put(rma_client_t *client, rma_region_t *region, uint64_t offset,
	rma_remote_t *remote, uint64_t remote_offset, uint64_t length,
	unsigned flags, rma_callback_t cb, void *user_data,
	rma_request_t **req_p)
{
	return request_rma(client, RMA__V1__OP_KIND__PUT, region, offset,
			   remote, remote_offset, length, flags, NULL, cb,
			   user_data, req_p);
}

RMA_API rma_status_t
rma_put_notify(rma_client_t *client, rma_region_t *region, uint64_t offset,
	       rma_remote_t *remote, uint64_t remote_offset, uint64_t length,
	       uint64_t value, unsigned flags, rma_callback_t cb,
	       void *user_data, rma_request_t **req_p)
{
	return request_rma(client, RMA__V1__OP_KIND__PUT, region, offset,
			   remote, remote_offset, length, flags, &value, cb,
			   user_data, req_p);
}

RMA_API rma_status_t
rma_get(rma_client_t *client, rma_region_t *region, uint64_t offset,
	rma_remote_t *remote, uint64_t remote_offset, uint64_t length,
	rma_callback_t cb, void *user_data, rma_request_t **req_p)
{
	return request_rma(client, RMA__V1__OP_KIND__GET, region, offset,
			   remote, remote_offset, length, 0, NULL, cb,
			   user_data, req_p);
}

RMA_API rma_status_t
rma_flush(rma_client_t *client, rma_peer_t *peer, rma_callback_t cb,
	  void *user_data, rma_request_t **req_p)
{
	Rma__V1__Op op = RMA__V1__OP__INIT;
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (peer != NULL && peer->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "peer of another client");
	op.kind = RMA__V1__OP_KIND__FLUSH;
	op.peer_id = peer != NULL ? peer->peer_id : 0;
	/* behind the buffer transfers that wait for staging room: submitted
	 * before it, they are the flush's to cover */
	st = staging_flush(client, op.peer_id, cb, user_data, req_p);
	if (st != RMA_INPROGRESS)
		return st;
	return request_submit(client, &op, cb, user_data, req_p);
}

RMA_API rma_status_t
rma_atomic(rma_client_t *client, rma_remote_t *remote, uint64_t remote_offset,
	   rma_atomic_op_t op, unsigned width, uint64_t operand,
	   uint64_t compare, rma_callback_t cb, void *user_data,
	   rma_request_t **req_p)
{
	Rma__V1__Op o = RMA__V1__OP__INIT;
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (remote == NULL || remote->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "atomic needs a remote of this client");
	if (remote->lost != RMA_OK) {
		rma_status_t st = peer_remote_revive(client, remote);

		if (st != RMA_OK)
			return st;
	}
	if (width != 4 && width != 8)
		return client_error(client, RMA_ERR_INVALID,
				    "atomic on a word of %u bytes: the width "
				    "is 4 or 8",
				    width);
	if ((unsigned)op > RMA_ATOMIC_FETCH_XOR)
		return client_error(client, RMA_ERR_INVALID,
				    "unknown atomic operation %d", (int)op);
	if (request_decided_here(client, NULL, "atomic", cb, user_data, req_p,
				 &st))
		return st;
	if (remote_offset % width != 0)
		return request_complete_now(
		    client, RMA_ERR_INVALID, cb, user_data, req_p,
		    "remote offset %llu is not aligned to the word's %u bytes",
		    (unsigned long long)remote_offset, width);
	if (remote_offset > remote->length ||
	    width > remote->length - remote_offset)
		return request_complete_now(
		    client, RMA_ERR_OUT_OF_BOUNDS, cb, user_data, req_p,
		    "remote word [%llu, +%u) is outside the remote region of "
		    "%llu bytes",
		    (unsigned long long)remote_offset, width,
		    (unsigned long long)remote->length);
	o.kind = RMA__V1__OP_KIND__ATOMIC;
	o.remote_id = remote->remote_id;
	o.remote_offset = remote_offset;
	o.length = width;
	o.atomic_op = (Rma__V1__AtomicOp)op;
	o.operand = operand;
	o.compare = compare;
	return request_submit(client, &o, cb, user_data, req_p);
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

/* One piece of a vectored request done; the bytes of those that worked
 * add up. */
static void
request_part_done(rma_request_t *part, rma_status_t st, void *arg)
{
	struct rma_request *parent = arg;

	if (st != RMA_OK && parent->first_error == RMA_OK) {
		parent->first_error = st;
		free(parent->detail);
		parent->detail = strdup(
		    part->detail != NULL ? part->detail : rma_strerror(st));
	}
	if (st == RMA_OK)
		parent->bytes += part->bytes;
	request_part_finish(parent);
}

/* What fails a putv/getv before any request exists (the client's last
 * error set): RMA_OK when the arguments are usable. */
static rma_status_t
request_vector_args(rma_client_t *client, const char *name,
		    const rma_region_t *region, rma_remote_t *remote,
		    const rma_iov_t *iov, size_t n, unsigned flags)
{
	if (fork_inherited(client))
		return fork_error(client);
	if (region == NULL || remote == NULL || (iov == NULL && n > 0))
		return client_error(client, RMA_ERR_INVALID,
				    "%s needs a region, a remote and pieces",
				    name);
	if (region->client != client || remote->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "region or remote of another client");
	if (remote->lost != RMA_OK) {
		rma_status_t st = peer_remote_revive(client, remote);

		if (st != RMA_OK)
			return st;
	}
	if (n == 0 || n > RMA_IOV_MAX)
		return client_error(client, RMA_ERR_INVALID,
				    "%s of %zu pieces: 1 to %d", name, n,
				    RMA_IOV_MAX);
	if (flags & ~RMA_FLAG_REMOTE_COMPLETION)
		return client_error(client, RMA_ERR_INVALID,
				    "unknown %s flags 0x%x", name, flags);
	return RMA_OK;
}

/* Every piece is checked before any is sent: a bad one and nothing
 * moves. True when one is bad, with what to return in *st_p: a piece of
 * length 0 is an argument error, one outside its region completes the
 * request at once. */
static bool
request_vector_refused(rma_client_t *client, const char *name,
		       const rma_region_t *region, const rma_remote_t *remote,
		       const rma_iov_t *iov, size_t n, rma_callback_t cb,
		       void *user_data, rma_request_t **req_p,
		       rma_status_t *st_p)
{
	for (size_t i = 0; i < n; i++) {
		const rma_iov_t *v = &iov[i];

		if (v->length == 0) {
			*st_p =
			    client_error(client, RMA_ERR_INVALID,
					 "%s piece %zu has length 0", name, i);
			return true;
		}
		if (v->offset > region->length ||
		    v->length > region->length - v->offset ||
		    v->remote_offset > remote->length ||
		    v->length > remote->length - v->remote_offset) {
			*st_p = request_complete_now(
			    client, RMA_ERR_OUT_OF_BOUNDS, cb, user_data, req_p,
			    "%s piece %zu ([%llu, +%llu) here, [%llu, +%llu) "
			    "there) is outside its region",
			    name, i, (unsigned long long)v->offset,
			    (unsigned long long)v->length,
			    (unsigned long long)v->remote_offset,
			    (unsigned long long)v->length);
			return true;
		}
	}
	return false;
}

/* Submits the pieces as parts of parent, in one frame (the daemon then
 * sends the small ones to the target in one message). Returns the first
 * failure, the pieces submitted before it in *done_p. */
static rma_status_t
request_vector_submit(rma_client_t *client, Rma__V1__OpKind kind,
		      const rma_region_t *region, const rma_remote_t *remote,
		      const rma_iov_t *iov, size_t n, unsigned flags,
		      struct rma_request *parent, size_t *done_p)
{
	rma_status_t st = RMA_OK;
	size_t i;

	client->hold_batch = 1;
	for (i = 0; i < n; i++) {
		Rma__V1__Op op = RMA__V1__OP__INIT;
		rma_request_t *part = NULL;

		op.kind = kind;
		op.region_id = region->region_id;
		op.offset = iov[i].offset;
		op.remote_id = remote->remote_id;
		op.remote_offset = iov[i].remote_offset;
		op.length = iov[i].length;
		op.flags = flags;
		parent->parts_left++;
		st = request_submit(client, &op, request_part_done, parent,
				    &part);
		if (st != RMA_OK) {
			parent->parts_left--;
			break;
		}
		part->parent = parent;
		rma_request_release(part);
	}
	client->hold_batch = 0;
	if (client->pending_n > 0 && client->sent_in_flight == 0)
		request_flush(client);
	*done_p = i;
	return st;
}

static rma_status_t
request_vector(rma_client_t *client, Rma__V1__OpKind kind, rma_region_t *region,
	       rma_remote_t *remote, const rma_iov_t *iov, size_t n,
	       unsigned flags, rma_callback_t cb, void *user_data,
	       rma_request_t **req_p)
{
	const char *name = kind == RMA__V1__OP_KIND__PUT ? "putv" : "getv";
	struct rma_request *parent;
	rma_status_t st;
	size_t done;

	if (client == NULL)
		return RMA_ERR_INVALID;
	st = request_vector_args(client, name, region, remote, iov, n, flags);
	if (st != RMA_OK)
		return st;
	if (request_decided_here(client, region, name, cb, user_data, req_p,
				 &st) ||
	    request_vector_refused(client, name, region, remote, iov, n, cb,
				   user_data, req_p, &st))
		return st;
	parent = request_alloc(client);
	if (parent == NULL)
		return client_error(client, RMA_ERR_NO_MEMORY,
				    "no memory for a request");
	parent->refs = 1; /* the library's, until the last piece */
	parent->cb = cb;
	parent->user_data = user_data;
	parent->parts_left = 1; /* held while the pieces are queued */
	st = request_vector_submit(client, kind, region, remote, iov, n, flags,
				   parent, &done);
	if (st != RMA_OK && done == 0) {
		/* nothing submitted: no request */
		request_unref(parent);
		return st;
	}
	if (st != RMA_OK && parent->first_error == RMA_OK) {
		/* the rest was not submitted: the request fails */
		parent->first_error = st;
		free(parent->detail);
		parent->detail = strdup(rma_last_error(client));
	}
	if (req_p != NULL) {
		parent->refs++;
		*req_p = parent;
	}
	/* the hold: the last piece may have completed already */
	request_part_finish(parent);
	return RMA_OK;
}

RMA_API rma_status_t
rma_putv(rma_client_t *client, rma_region_t *region, rma_remote_t *remote,
	 const rma_iov_t *iov, size_t n, unsigned flags, rma_callback_t cb,
	 void *user_data, rma_request_t **req_p)
{
	return request_vector(client, RMA__V1__OP_KIND__PUT, region, remote,
			      iov, n, flags, cb, user_data, req_p);
}

RMA_API rma_status_t
rma_getv(rma_client_t *client, rma_region_t *region, rma_remote_t *remote,
	 const rma_iov_t *iov, size_t n, rma_callback_t cb, void *user_data,
	 rma_request_t **req_p)
{
	return request_vector(client, RMA__V1__OP_KIND__GET, region, remote,
			      iov, n, 0, cb, user_data, req_p);
}

RMA_API rma_status_t
rma_atomic_sync(rma_client_t *client, rma_remote_t *remote,
		uint64_t remote_offset, rma_atomic_op_t op, unsigned width,
		uint64_t operand, uint64_t compare, uint64_t *old_p,
		int timeout_ms)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_atomic(client, remote, remote_offset, op, width, operand,
			compare, NULL, NULL, &req);
	if (st != RMA_OK)
		return st;
	st = rma_request_wait(client, req, timeout_ms);
	if (st == RMA_OK && old_p != NULL)
		*old_p = req->value;
	rma_request_release(req);
	return st;
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

RMA_API rma_status_t
rma_put_sync(rma_client_t *client, rma_region_t *region, uint64_t offset,
	     rma_remote_t *remote, uint64_t remote_offset, uint64_t length,
	     unsigned flags, int timeout_ms)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_put(client, region, offset, remote, remote_offset, length,
		     flags, NULL, NULL, &req);
	if (st != RMA_OK)
		return st;
	st = rma_request_wait(client, req, timeout_ms);
	rma_request_release(req);
	return st;
}

RMA_API rma_status_t
rma_get_sync(rma_client_t *client, rma_region_t *region, uint64_t offset,
	     rma_remote_t *remote, uint64_t remote_offset, uint64_t length,
	     int timeout_ms)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_get(client, region, offset, remote, remote_offset, length,
		     NULL, NULL, &req);
	if (st != RMA_OK)
		return st;
	st = rma_request_wait(client, req, timeout_ms);
	rma_request_release(req);
	return st;
}

RMA_API rma_status_t
rma_flush_sync(rma_client_t *client, rma_peer_t *peer, int timeout_ms)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_flush(client, peer, NULL, NULL, &req);
	if (st != RMA_OK)
		return st;
	st = rma_request_wait(client, req, timeout_ms);
	rma_request_release(req);
	return st;
}
