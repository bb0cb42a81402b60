/* SPDX-License-Identifier: BSD-2-Clause */
/* The operations of rma.h that make requests: put, get, flush and
 * atomic, the vectored putv/getv as one request of pieces, and their
 * _sync forms. Each checks its arguments, completes at once what the
 * library decides alone, and submits the rest (rma_submit.c). Split from
 * rma_request.c (issue 25). */
#include "rma_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- public ---- */

/* put and get: checked here, numbered and sent by request_submit.
 * Inlined into each of its three callers: its twelve arguments, half of
 * them on the stack, cost more to pass again than its checks. */
static inline __attribute__((always_inline)) rma_status_t
request_rma(rma_client_t *client, Rma__V1__OpKind kind, rma_region_t *region,
	    uint64_t offset, rma_remote_t *remote, uint64_t remote_offset,
	    uint64_t length, unsigned flags, const uint64_t *notify,
	    rma_callback_t cb, void *user_data, rma_request_t **req_p)
{
	const char *name = kind == RMA__V1__OP_KIND__PUT ? "put" : "get";
	Rma__V1__Op op;
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
	oprec_op_init(&op);
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
	return request_submit_staged(client, &op, NULL, cb, user_data, req_p);
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
		request_hold(client, parent);
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
