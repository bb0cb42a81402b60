/* SPDX-License-Identifier: BSD-2-Clause */
/* Operations: every put, get, atomic and flush a client submits is validated
 * against the client's own region and the owner-resolved remote region
 * before UCX sees it, then issued at once from the loop (we are the
 * worker's thread), and its completion queued for the client's next
 * Completions event. Records come from a free list: no malloc per op.
 *
 * Between daemons a put or get travels as rmad's own active message
 * (am.h): the target checks and copies, then answers; the op completes
 * on the answer, so a completed put is at the target. One bigger than a
 * fragment of UCX's tcp transport travels as pieces (op_send_am). With
 * rma_protocol = ucx, ucp_put_nbx/ucp_get_nbx are used instead, for
 * fabrics where the NIC does RMA one-sidedly; atomics travel in rmad's
 * batches in both modes (op_start_atomic). A flush completes once
 * everything before it on its peer has. */
#include "daemon.h"
#include "snapshot.h"
#include "oprec.h"
#include "am.h"
#include "bounds.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first failure decides; later ones are its consequences. */
void op_set_failed(struct op *op, wire_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void
op_set_failed(struct op *op, wire_status_t st, const char *fmt, ...)
{
	va_list ap;

	if (op->status != RMA__V1__STATUS__OK)
		return;
	op->status = st;
	va_start(ap, fmt);
	vsnprintf(op->detail, sizeof(op->detail), fmt, ap);
	va_end(ap);
}

/* The UCX boundary: what a UCX call or callback reports becomes the op's
 * wire status here. */
void
op_set_ucs_failed(struct op *op, ucs_status_t st)
{
	struct peer *p = op->peer;

	if (st == UCS_OK)
		return;
	if (op->d->shutting_down && st == UCS_ERR_CANCELED)
		op_set_failed(op, RMA__V1__STATUS__ERR_SHUTDOWN,
			      "daemon shutting down");
	else if (p && p->state == RMA__V1__PEER_STATE__PEER_DOWN &&
		 p->last_status != RMA__V1__STATUS__OK &&
		 st != UCS_ERR_CANCELED)
		/* Its endpoint failed: UCX's word for each request left on
		 * it varies (unreachable, not connected); the peer's cause
		 * is the one that holds. */
		op_set_failed(op, p->last_status, "%s (%s)", p->last_error,
			      ucs_status_string(st));
	else if (p && p->last_error[0])
		op_set_failed(op, worker_status_from_ucs(st), "%s (%s)",
			      p->last_error, ucs_status_string(st));
	else
		op_set_failed(op, worker_status_from_ucs(st), "%s",
			      ucs_status_string(st));
}

/* The target answered with a refusal, or with something unusable. */
void
op_set_refused(struct op *op, wire_status_t st)
{
	op_set_failed(
	    op, st, "%s refused it: %s", op->peer->address,
	    st == RMA__V1__STATUS__ERR_STALE_DESCRIPTOR ? "the region is gone"
	    : st == RMA__V1__STATUS__ERR_OUT_OF_BOUNDS	? "outside the region"
	    : st == RMA__V1__STATUS__ERR_PERMISSION
		? "the descriptor is read-only"
	    : st == RMA__V1__STATUS__ERR_LIMIT
		? "the region's owner holds as many notifications as it may "
		  "(it is not taking them); nothing written"
	    : st == RMA__V1__STATUS__ERR_NO_REGION
		? "the region's owner is away, nobody to notify"
		: "bad request");
}

static void
op_set_timed_out(struct op *op)
{
	op_set_failed(op, RMA__V1__STATUS__ERR_TIMEOUT,
		      "no completion within %.1f s", op->d->cfg->op_timeout);
}

static struct op *
op_alloc(struct daemon *d)
{
	struct op *op = d->op_free;

	if (op != NULL)
		d->op_free = op->next_free;
	else
		op = malloc(sizeof(*op));
	if (op != NULL)
		memset(op, 0, sizeof(*op));
	return op;
}

void
op_pool_cleanup(struct daemon *d)
{
	while (d->op_free != NULL) {
		struct op *op = d->op_free;
		d->op_free = op->next_free;
		free(op);
	}
}

static void op_finish(struct op *op);

/* Answers naming the op's tokens are not for it any more. */
static void
op_forget_tokens(struct op *op)
{
	if (op->token == 0)
		return;
	/* a batched op's token is named at once, a piece's once sent */
	for (uint32_t i = 0; i < op->sent || i == 0; i++)
		idmap_remove(&op->d->ops_by_token, op->token + i);
	op->token = 0;
}

/* A flush waits for every older operation on its peer: once it is the
 * oldest, that part of its wait is over. */
static void
op_release_barriers(struct peer *p)
{
	struct op *head;

	while ((head = TAILQ_FIRST(&p->ops)) != NULL && head->barrier) {
		head->barrier = false;
		if (--head->pending > 0)
			break;
		op_finish(head);
	}
}

static void
op_recycle(struct op *op)
{
	free(op->piece_hdrs);
	op->next_free = op->d->op_free;
	op->d->op_free = op;
}

static void
op_finish(struct op *op)
{
	struct daemon *d = op->d;
	struct conn *c = op->conn;
	struct peer *p = op->peer;
	wire_status_t ws = op->status;

	op_forget_tokens(op);
	if (p != NULL) {
		if (op->listed)
			TAILQ_REMOVE(&p->ops, op, link);
		p->in_flight--;
	}
	if (c == NULL) {
		/* one peer's part of a flush of every peer */
		struct op *parent = op->flush_all_parent;
		if (op->status != RMA__V1__STATUS__OK)
			op_set_failed(parent, op->status, "%s", op->detail);
		op_recycle(op);
		if (--parent->pending == 0)
			op_finish(parent);
		if (p != NULL)
			op_release_barriers(p);
		return;
	}
	if (op->reported) {
		/* the client heard at the deadline (op_report_overdue) */
		c->in_flight--;
		d->ops_in_flight--;
		goto release;
	}
	if (p) {
		p->stat_ops++;
		if (ws == RMA__V1__STATUS__OK)
			p->stat_bytes += op->length;
		else
			p->stat_errors++;
	}
	metrics_observe_op(d, op, ws);
	if (ws != RMA__V1__STATUS__OK)
		d->counters.ops_failed++;
	else if (op->kind == RMA__V1__OP_KIND__PUT)
		d->counters.bytes_put += op->length;
	else if (op->kind == RMA__V1__OP_KIND__GET)
		d->counters.bytes_get += op->length;
	c->in_flight--;
	d->ops_in_flight--;
	conn_complete_value(
	    c, op->op_id, ws, ws == RMA__V1__STATUS__OK ? op->length : 0,
	    ws == RMA__V1__STATUS__OK ? op->value : 0, op->detail);
release:
	if (op->region) {
		op->region->in_flight--;
		region_unref(op->d, op->region);
	}
	if (op->res)
		resolved_unref(op->res);
	conn_unref(c);
	op_recycle(op);
	if (p != NULL)
		op_release_barriers(p);
}

static void
op_on_ucx_done(void *request, ucs_status_t status, void *user_data)
{
	struct op *op = user_data;

	op_set_ucs_failed(op, status);
	ucp_request_free(request);
	if (--op->pending == 0)
		op_finish(op);
}

/* Every UCX call that may run an op's callback is counted before it is
 * made (op_expect): UCX can complete a request, callback included, before
 * returning it, and counting afterwards then leaves the op waiting for a
 * callback that already came. op_track uncounts it when no callback will
 * come: done at once, or failed at once. */
static void
op_expect(struct op *op)
{
	op->pending++;
}

static void
op_track(struct op *op, ucs_status_ptr_t sp)
{
	if (sp != NULL && !UCS_PTR_IS_ERR(sp))
		return;
	op->pending--;
	if (UCS_PTR_IS_ERR(sp))
		op_set_ucs_failed(op, UCS_PTR_STATUS(sp));
}

static void op_send_am(struct op *op, const struct resolved *res,
		       uint64_t remote_offset);

struct op *
op_begin(struct conn *c, const Rma__V1__Op *o, struct peer *p)
{
	struct daemon *d = c->d;
	struct op *op = op_alloc(d);

	if (op == NULL)
		return NULL;
	op->d = d;
	op->conn = c;
	op->op_id = o->op_id;
	op->kind = o->kind;
	op->length = o->length;
	op->peer = p;
	op->notify = o->kind == RMA__V1__OP_KIND__PUT &&
		     (o->flags & RMA__V1__OP_FLAG__OP_FLAG_NOTIFY);
	op->notify_value = o->notify_value;
	op->started = daemon_op_clock(d);
	op->deadline = op->started + d->cfg->op_timeout;
	/* Held until UCX is done, so the pending request never dangles. */
	op->pending = 1;
	op->pieces = 1;
	conn_ref(c);
	c->in_flight++;
	c->ops++;
	d->ops_in_flight++;
	if (p) {
		TAILQ_INSERT_TAIL(&p->ops, op, link);
		op->listed = true;
		p->in_flight++;
	}
	return op;
}

void
op_end_submit(struct op *op)
{
	if (--op->pending == 0)
		op_finish(op);
}

void
op_fail(struct conn *c, const Rma__V1__Op *o, wire_status_t st, const char *fmt,
	...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	c->d->counters.ops_failed++;
	c->ops++;
	conn_complete(c, o->op_id, st, 0, detail);
}

struct remote *
op_remote(struct conn *c, const Rma__V1__Op *o)
{
	struct remote *rem = idmap_get(&c->remotes, o->remote_id);

	if (rem == NULL)
		op_fail(c, o, RMA__V1__STATUS__ERR_NO_PEER,
			"remote %llu is not a remote of this client",
			(unsigned long long)o->remote_id);
	return rem;
}

void
op_fail_remote_bounds(struct conn *c, const Rma__V1__Op *o, const char *what,
		      const struct resolved *res)
{
	op_fail(c, o, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS,
		"remote %s [%llu, +%llu) is outside remote region %llu of "
		"%llu bytes",
		what, (unsigned long long)o->remote_offset,
		(unsigned long long)o->length,
		(unsigned long long)res->region_id,
		(unsigned long long)res->length);
}

/* One peer's flush: UCX's flush of the endpoint, and the wait for every
 * older operation (our puts complete on the target's answer, which a
 * UCX flush does not wait for). */
static void
op_flush_peer(struct op *op, struct peer *p)
{
	ucp_request_param_t param = {
	    .op_attr_mask =
		UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
	    .cb.send = op_on_ucx_done,
	    .user_data = op,
	};

	if (TAILQ_FIRST(&p->ops) != op) {
		op->barrier = true;
		op->pending++;
	}
	op_expect(op);
	op_track(op, ucp_ep_flush_nbx(p->ep, &param));
}

static void
op_start_flush(struct conn *c, const Rma__V1__Op *o)
{
	struct daemon *d = c->d;
	struct peer *p = NULL;
	struct op *op;

	d->counters.ops_flush++;
	if (o->peer_id != 0) {
		p = peer_lookup(d, o->peer_id);
		if (p == NULL) {
			op_fail(c, o, RMA__V1__STATUS__ERR_NO_PEER,
				"no peer %u", o->peer_id);
			return;
		}
		if (p->state != RMA__V1__PEER_STATE__PEER_UP) {
			peer_maybe_reconnect(p);
			op_fail(c, o,
				p->last_status ? p->last_status
					       : RMA__V1__STATUS__ERR_INVALID,
				"peer %s is %s", p->address,
				peer_state_name(p->state));
			return;
		}
	}
	op = op_begin(c, o, p && !p->self ? p : NULL);
	if (op == NULL) {
		op_fail(c, o, RMA__V1__STATUS__ERR_NO_MEMORY, "out of memory");
		return;
	}
	op->length = 0;
	if (p != NULL && !p->self) {
		op_flush_peer(op, p);
	} else if (p == NULL) {
		/* every peer: one child per peer with operations in flight */
		TAILQ_FOREACH(p, &d->peers, link)
		{
			struct op *child;
			if (p->inbound || p->self ||
			    p->state != RMA__V1__PEER_STATE__PEER_UP ||
			    p->ep == NULL)
				continue;
			child = op_alloc(d);
			if (child == NULL) {
				op_set_failed(op,
					      RMA__V1__STATUS__ERR_NO_MEMORY,
					      "out of memory");
				break;
			}
			child->d = d;
			child->kind = RMA__V1__OP_KIND__FLUSH;
			child->peer = p;
			child->flush_all_parent = op;
			child->started = op->started;
			child->deadline = op->deadline;
			child->pending = 1;
			TAILQ_INSERT_TAIL(&p->ops, child, link);
			child->listed = true;
			p->in_flight++;
			op->pending++;
			op_flush_peer(child, p);
			op_end_submit(child);
		}
	}
	op_end_submit(op);
}

/* The region of this daemon a remote names, if its secret grants the
 * access (the same rule as target.c's for peers); fails o otherwise. */
struct region *
op_local_target(struct conn *c, const Rma__V1__Op *o,
		const struct resolved *res, bool write)
{
	struct region *target = region_lookup(c->d, res->region_id);

	if (target == NULL || (target->generation != res->generation &&
			       target->ro_generation != res->generation)) {
		op_fail(c, o, RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
			"region %llu was freed",
			(unsigned long long)res->region_id);
		return NULL;
	}
	if (write && target->generation != res->generation) {
		op_fail(c, o, RMA__V1__STATUS__ERR_PERMISSION,
			"region %llu: the descriptor is read-only",
			(unsigned long long)res->region_id);
		return NULL;
	}
	return target;
}

/* An op on a remote region, begun: NULL when it is answered already
 * (stale, out of memory) or parked until its peer is back. */
struct op *
op_begin_remote(struct conn *c, const Rma__V1__Op *o, struct remote *rem,
		bool unparked)
{
	struct resolved *res = rem->res;
	struct op *op;

	if (res->stale) {
		op_fail(c, o, RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
			"remote region %llu is gone (freed by its owner, "
			"or %s restarted)",
			(unsigned long long)res->region_id, rem->peer->address);
		return NULL;
	}
	/* The peer is reconnecting, or confirming the region again after
	 * a reconnect: wait for it within the op's own deadline, behind
	 * whatever waits already (the client's order is kept). */
	if (!res->valid || (!unparked && !TAILQ_EMPTY(&rem->peer->parked))) {
		op_park(c, o, rem->peer);
		return NULL;
	}
	op = op_begin(c, o, rem->peer);
	if (op == NULL) {
		op_fail(c, o, RMA__V1__STATUS__ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	op->res = res;
	res->refs++;
	return op;
}

/* Both regions live here: the daemon copies, no UCX involved. */
static void
op_copy_local(struct conn *c, const Rma__V1__Op *o, struct region *local,
	      const struct resolved *res)
{
	struct region *target =
	    op_local_target(c, o, res, o->kind == RMA__V1__OP_KIND__PUT);

	bool notify = o->kind == RMA__V1__OP_KIND__PUT &&
		      (o->flags & RMA__V1__OP_FLAG__OP_FLAG_NOTIFY);
	/* a client of this daemon is an initiator within its uid's group */
	struct notification_initiator from = {.daemon_id = c->d->id,
					      .client = (uint64_t)c->id + 1,
					      .group = (uint64_t)c->uid + 1};
	uint32_t share = 0;
	wire_status_t st;

	if (target == NULL)
		return;
	/* The owner's bound first: a full queue refuses the put whole. */
	if (notify && (st = notification_reserve(target, &from, &share)) !=
			  RMA__V1__STATUS__OK) {
		op_fail(c, o, st,
			st == RMA__V1__STATUS__ERR_LIMIT
			    ? "the owner of region %llu holds %d notifications "
			      "it has not taken, or this client its share of "
			      "them: nothing written"
			    : "region %llu: no owner to notify, or no memory "
			      "(%d)",
			(unsigned long long)res->region_id,
			NOTIFICATION_QUEUE_MAX);
		return;
	}
	/* One copy, the put's or the get's. (A put once copied the target
	 * back into its source as well, which undid part of an overlapping
	 * put within one region.) */
	if (o->kind == RMA__V1__OP_KIND__PUT)
		region_copy((char *)target->addr + o->remote_offset,
			    (char *)local->addr + o->offset, o->length);
	else
		region_copy((char *)local->addr + o->offset,
			    (char *)target->addr + o->remote_offset, o->length);
	if (notify)
		notification_post(c->d, target, o->remote_offset, o->length,
				  o->notify_value, c->d->id, share);
	if (o->kind == RMA__V1__OP_KIND__PUT)
		c->d->counters.bytes_put += o->length;
	else
		c->d->counters.bytes_get += o->length;
	c->ops++;
	conn_complete(c, o->op_id, RMA__V1__STATUS__OK, o->length, NULL);
}

static void
op_start_rma(struct conn *c, const Rma__V1__Op *o, bool unparked)
{
	struct daemon *d = c->d;
	bool put = o->kind == RMA__V1__OP_KIND__PUT;
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_MEMH,
	    .cb.send = op_on_ucx_done,
	};
	struct region *local;
	struct remote *rem;
	struct resolved *res;
	struct op *op;
	void *buf;

	if (put)
		d->counters.ops_put++;
	else
		d->counters.ops_get++;
	if (o->length == 0) {
		op_fail(c, o, RMA__V1__STATUS__ERR_INVALID,
			"length must be greater than 0");
		return;
	}
	local = idmap_get(&c->regions, o->region_id);
	if (local == NULL) {
		op_fail(c, o, RMA__V1__STATUS__ERR_NO_REGION,
			"region %llu is not a region of this client",
			(unsigned long long)o->region_id);
		return;
	}
	if (!bounds_within(o->offset, o->length, local->length)) {
		op_fail(c, o, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS,
			"local range [%llu, +%llu) is outside region %llu of "
			"%zu bytes",
			(unsigned long long)o->offset,
			(unsigned long long)o->length,
			(unsigned long long)local->id, local->length);
		return;
	}
	rem = op_remote(c, o);
	if (rem == NULL)
		return;
	res = rem->res;
	if (!bounds_within(o->remote_offset, o->length, res->length)) {
		op_fail_remote_bounds(c, o, "range", res);
		return;
	}
	if (rem->peer == NULL) {
		op_copy_local(c, o, local, res);
		return;
	}
	op = op_begin_remote(c, o, rem, unparked);
	if (op == NULL)
		return;
	op->region = local;
	region_ref(local);
	local->in_flight++;
	op->buf = (char *)local->addr + o->offset;
	/* A notifying put goes through rmad's own messages in ucx mode too:
	 * only the target daemon can tell the owner, and a UCX put leaves
	 * it nothing to notice. */
	if (res->rkey == NULL || op->notify) {
		if (o->length <= AM_BATCH_SMALL)
			op_batch_add(op, res, o->remote_offset);
		else
			op_send_am(op, res, o->remote_offset);
		op_end_submit(op);
		return;
	}
	param.user_data = op;
	param.memh = local->memh;
	buf = op->buf;
	op_expect(op);
	if (put)
		op_track(op, ucp_put_nbx(rem->peer->ep, buf, o->length,
					 res->addr + o->remote_offset,
					 res->rkey, &param));
	else
		op_track(op, ucp_get_nbx(rem->peer->ep, buf, o->length,
					 res->addr + o->remote_offset,
					 res->rkey, &param));
	if (put && (o->flags & RMA__V1__OP_FLAG__OP_FLAG_REMOTE_COMPLETION) &&
	    op->status == RMA__V1__STATUS__OK) {
		param.op_attr_mask &= ~UCP_OP_ATTR_FIELD_MEMH;
		op_expect(op);
		op_track(op, ucp_ep_flush_nbx(rem->peer->ep, &param));
	}
	op_end_submit(op);
}

/* An operation on a failed peer that UCX has still not completed past its
 * deadline: the client gets its timeout now; the record stays until UCX
 * lets go of it. */
static void
op_report_overdue(struct op *op)
{
	char detail[160];

	if (op->reported || op->conn == NULL)
		return;
	op->reported = true;
	log_warn("op_report_overdue: operation %llu on %s still pending "
		 "in UCX after its deadline",
		 (unsigned long long)op->op_id,
		 op->peer ? op->peer->address : "?");
	snprintf(detail, sizeof(detail),
		 "no completion within %.1f s (peer down)",
		 op->d->cfg->op_timeout);
	op->d->counters.ops_failed++;
	conn_complete(op->conn, op->op_id, RMA__V1__STATUS__ERR_TIMEOUT, 0,
		      detail);
}

/* ---- rmad's own protocol: the target answers every put and get ---------- */

static void
op_stop_waiting(struct op *op)
{
	op->awaiting_answer = false;
	op_forget_tokens(op);
	op->pending--;
}

/* The answer came, or will not: finish unless UCX still holds the op. */
void
op_done_waiting(struct op *op)
{
	op_stop_waiting(op);
	if (op->pending == 0)
		op_finish(op);
}

static void
op_on_am_sent(void *request, ucs_status_t status, void *user_data)
{
	struct op *op = user_data;

	ucp_request_free(request);
	if (status != UCS_OK) {
		op_set_ucs_failed(op, status);
		/* never delivered: no answer will come */
		if (op->awaiting_answer)
			op_stop_waiting(op);
	}
	if (--op->pending == 0)
		op_finish(op);
}

/* Hands the op's next pieces to UCX, until AM_PIECES_IN_FLIGHT are
 * unanswered. The caller holds the op (pending), so that a send failing
 * here cannot finish it underneath. */
static void
op_send_pieces(struct op *op)
{
	bool put = op->kind == RMA__V1__OP_KIND__PUT;
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    /* Eager only: UCX 1.13's rendezvous over tcp goes through
	     * the same emulated RMA that aborts on a vanished peer. */
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = op_on_am_sent,
	    .user_data = op,
	};

	/* a get asks for up to AM_RANGE_PIECES pieces at once, where the
	 * target can answer that */
	uint32_t range = !put && op->pieces > 1 && op->peer->get_ranges
			     ? AM_RANGE_PIECES
			     : 1;

	while (op->awaiting_answer && op->sent < op->pieces) {
		uint32_t k = op->pieces - op->sent < range
				 ? op->pieces - op->sent
				 : range;
		struct am_rma_range *rg =
		    op->pieces > 1 ? &op->piece_hdrs[op->sent] : NULL;
		const struct am_rma *h = rg != NULL ? &rg->rma : &op->hdr;
		const char *data =
		    (const char *)op->buf +
		    (rg != NULL ? h->offset - op->hdr.offset : 0);
		size_t hlen = op->notify ? sizeof(op->nhdr) : sizeof(*h);
		ucs_status_ptr_t sp;
		uint32_t i;

		if (AM_PIECES_IN_FLIGHT - (op->sent - op->answered) < k)
			break; /* the answers in flight make room first */
		for (i = 0; i < k; i++)
			if (idmap_put(&op->d->ops_by_token, h->token + i, op) <
			    0)
				break;
		op->sent += i; /* named: forgotten with the op's others */
		if (i < k) {
			op_set_failed(op, RMA__V1__STATUS__ERR_NO_MEMORY,
				      "out of memory");
			op_stop_waiting(op);
			break;
		}
		if (k > 1) {
			/* the range's length: these pieces together */
			rg->rma.length =
			    op->sent == op->pieces
				? op->length - h->offset + op->hdr.offset
				: (uint64_t)k * op->piece;
			rg->piece = op->piece;
			hlen = sizeof(*rg);
		}
		op_expect(op);
		sp = ucp_am_send_nbx(op->peer->ep, put ? AM_PUT : AM_GET, h,
				     hlen, put ? data : NULL,
				     put ? h->length : 0, &param);
		op_track(op, sp);
		if (UCS_PTR_IS_ERR(sp)) {
			if (op->awaiting_answer)
				op_stop_waiting(op);
			break;
		}
	}
}

/* A put or get as rmad's messages. One bigger than d->am_piece (a
 * fragment of UCX's tcp transport) would reach the target's callback only
 * after UCX reassembled it into a buffer of its own, to be copied once
 * more from there: instead it travels as pieces that each fit in one
 * fragment, an AM_PUT or AM_GET of their own with their own token
 * (op->token + i) and answer, which UCX hands over straight from its
 * receive buffer. Pieces are sent as earlier ones are answered
 * (AM_PIECES_IN_FLIGHT). A notifying put stays whole: its owner hears of
 * it once. As with a UCX put, a put that fails may have written part of
 * its range. */
static void
op_send_am(struct op *op, const struct resolved *res, uint64_t remote_offset)
{
	struct daemon *d = op->d;
	uint64_t most = op->notify ? op->length : d->am_piece;
	uint64_t n = (op->length + most - 1) / most;
	/* as many pieces as needed, of equal size: 64 KiB goes as two of
	 * 32, not as one full fragment and 64 bytes */
	uint64_t piece = (op->length + n - 1) / n;

	n = (op->length + piece - 1) / piece; /* none left empty */

	op->hdr.magic = AM_MAGIC;
	op->hdr.region_id = res->region_id;
	op->hdr.generation = res->generation;
	op->hdr.offset = remote_offset;
	op->hdr.length = op->length;
	if (op->notify) {
		op->nhdr.value = op->notify_value;
		op->nhdr.client = (uint64_t)op->conn->id + 1;
	}
	if (n > 1) {
		op->piece_hdrs = n <= UINT32_MAX
				     ? malloc(n * sizeof(*op->piece_hdrs))
				     : NULL;
		if (op->piece_hdrs == NULL) {
			op_set_failed(op, RMA__V1__STATUS__ERR_NO_MEMORY,
				      "out of memory");
			return;
		}
	}
	/* tokens for every piece, each named in ops_by_token once sent */
	op->token = d->next_token;
	d->next_token += n;
	op->pieces = (uint32_t)n;
	op->piece = piece;
	op->hdr.token = op->token;
	for (uint32_t i = 0; i < op->pieces && n > 1; i++) {
		struct am_rma *h = &op->piece_hdrs[i].rma;
		*h = op->hdr;
		h->token = op->token + i;
		h->offset = remote_offset + i * piece;
		h->length = i + 1 < n ? piece : op->length - i * piece;
	}
	/* The headers live in the op until UCX is done with them. */
	op->awaiting_answer = true;
	op->pending++;
	op_send_pieces(op);
}

/* An answer from a target: the op it names, if it is of that kind, still
 * waiting and the answer came over that op's own endpoint, and which of
 * its pieces it answers (each only once). */
static struct op *
op_answered_token(struct peer *p, Rma__V1__OpKind kind, uint64_t token,
		  int32_t status, uint32_t *piece_p)
{
	struct op *op = idmap_get(&p->d->ops_by_token, token);

	if (op == NULL || !op->awaiting_answer || op->peer != p ||
	    op->kind != kind)
		return NULL; /* late, or not for us */
	*piece_p = (uint32_t)(token - op->token);
	idmap_remove(&p->d->ops_by_token, token);
	if (status != RMA__V1__STATUS__OK)
		op_set_refused(op, status);
	return op;
}

static struct op *
op_answered(struct peer *p, const struct am_msg *m, Rma__V1__OpKind kind,
	    struct am_rma_answer *a, uint32_t *piece_p)
{
	if (m->header_length != sizeof(*a))
		return NULL;
	memcpy(a, m->header, sizeof(*a));
	if (a->magic != AM_MAGIC)
		return NULL;
	return op_answered_token(p, kind, a->token, a->status, piece_p);
}

/* One more piece answered: done once all are, or at the first refusal
 * (the answers still to come are then not waited for). Otherwise the
 * next ones go. */
static void
op_piece_answered(struct op *op)
{
	op->answered++;
	if (op->answered >= op->pieces || op->status != RMA__V1__STATUS__OK) {
		op_done_waiting(op);
		return;
	}
	op->pending++;
	op_send_pieces(op);
	op_end_submit(op);
}

/* One answer for several written pieces (am_rma_answer_range): each token
 * is checked as if it came alone, so a target can answer only what it
 * was sent, each piece once. An op finished by one of them has forgotten
 * its other tokens. */
static void
op_on_put_acks(struct peer *p, const struct am_msg *m)
{
	struct am_rma_answer_range a;

	memcpy(&a, m->header, sizeof(a));
	if (a.magic != AM_MAGIC || a.status != RMA__V1__STATUS__OK ||
	    a.count == 0 || a.count > AM_ACK_RANGE_MAX ||
	    a.token > UINT64_MAX - a.count)
		return;
	for (uint32_t i = 0; i < a.count; i++) {
		uint32_t piece;
		struct op *op = op_answered_token(
		    p, RMA__V1__OP_KIND__PUT, a.token + i, a.status, &piece);
		if (op != NULL)
			op_piece_answered(op);
	}
}

void
op_on_put_ack(struct peer *p, const struct am_msg *m)
{
	struct am_rma_answer a;
	uint32_t piece;
	struct op *op;

	if (m->header_length == sizeof(struct am_rma_answer_range)) {
		op_on_put_acks(p, m);
		return;
	}
	op = op_answered(p, m, RMA__V1__OP_KIND__PUT, &a, &piece);
	if (op != NULL)
		op_piece_answered(op);
}

void
op_on_get_reply(struct peer *p, const struct am_msg *m)
{
	struct am_rma_answer a;
	uint32_t piece;
	struct op *op = op_answered(p, m, RMA__V1__OP_KIND__GET, &a, &piece);
	uint64_t at, want;

	if (op == NULL)
		return;
	/* where this piece's bytes go (op_send_am) */
	at = (uint64_t)piece * op->piece;
	want = piece + 1 < op->pieces ? op->piece : op->length - at;
	if (op->status == RMA__V1__STATUS__OK) {
		if (m->length == want)
			region_copy((char *)op->buf + at, m->data, want);
		else
			op_set_refused(op, RMA__V1__STATUS__ERR_PROTOCOL);
	}
	op_piece_answered(op);
}

/* The peer failed: answers will not come. Ops still in UCX's hands
 * complete through their callbacks when the endpoint is closed. */
void
op_peer_failed(struct peer *p, ucs_status_t status)
{
	struct op_list done = TAILQ_HEAD_INITIALIZER(done);
	struct op *op, *next;

	/* Past a deadline it is our own close that cancels the rest. */
	if (status == UCS_ERR_TIMED_OUT)
		status = UCS_ERR_CANCELED;
	for (op = TAILQ_FIRST(&p->ops); op != NULL; op = next) {
		next = TAILQ_NEXT(op, link);
		if (!op->awaiting_answer)
			continue;
		op_set_ucs_failed(op, status);
		op_stop_waiting(op);
		if (op->pending == 0) {
			TAILQ_REMOVE(&p->ops, op, link);
			op->listed = false;
			TAILQ_INSERT_TAIL(&done, op, link);
		}
	}
	while ((op = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, op, link);
		op_finish(op);
	}
	op_release_barriers(p);
}

/* The deadline tick for p's operations, oldest first (peer.c). On a peer
 * up, those past their deadline fail with ERR_TIMEOUT and their count is
 * returned: peer.c closes the endpoint next, which completes them. On one
 * that is not, UCX owes them their completion (its endpoint is closed);
 * should it never come, the client still hears by the deadline (0). */
int
op_check_deadlines(struct peer *p, double now)
{
	struct op *op;
	int expired = 0;

	TAILQ_FOREACH(op, &p->ops, link)
	{
		if (op->deadline > now)
			break;
		if (p->state != RMA__V1__PEER_STATE__PEER_UP) {
			op_report_overdue(op);
		} else {
			op_set_timed_out(op);
			expired++;
		}
	}
	return expired;
}

/* Only at shutdown can operations outlive their peer (UCX did not
 * complete them in time): they must not point at it. */
void
op_peer_forget(struct peer *p)
{
	while (!TAILQ_EMPTY(&p->ops)) {
		struct op *op = TAILQ_FIRST(&p->ops);
		TAILQ_REMOVE(&p->ops, op, link);
		op->peer = NULL;
	}
}

void
op_submit_one(struct conn *c, const Rma__V1__Op *o, bool unparked)
{
	if (c->d->shutting_down) {
		op_fail(c, o, RMA__V1__STATUS__ERR_SHUTDOWN,
			"daemon shutting down");
		return;
	}
	if (c->in_flight >= c->d->cfg->max_in_flight) {
		op_fail(c, o, RMA__V1__STATUS__ERR_LIMIT,
			"%llu operations in flight (max_in_flight %u)",
			(unsigned long long)c->in_flight,
			c->d->cfg->max_in_flight);
		return;
	}
	switch (o->kind) {
	case RMA__V1__OP_KIND__PUT:
	case RMA__V1__OP_KIND__GET:
		op_start_rma(c, o, unparked);
		break;
	case RMA__V1__OP_KIND__FLUSH:
		op_start_flush(c, o);
		break;
	case RMA__V1__OP_KIND__ATOMIC:
		op_start_atomic(c, o, unparked);
		break;
	default:
		op_fail(c, o, RMA__V1__STATUS__ERR_INVALID,
			"unknown operation kind %d", (int)o->kind);
		break;
	}
}

/* The one check of an operation record, wherever it came from (a Submit
 * frame or the client's ring): decoded, then validated and run as any
 * operation is. */
static void
op_submit_records(struct conn *c, const uint8_t *rec, size_t n)
{
	struct daemon *d = c->d;
	double outer = d->op_clock;
	Rma__V1__Op o;

	d->op_clock = daemon_now();
	for (size_t i = 0; i < n && !c->dead; i++, rec += OPREC_SIZE) {
		if (oprec_decode(rec, &o) < 0)
			op_fail(c, &o, RMA__V1__STATUS__ERR_PROTOCOL,
				"reserved bytes of an operation record are "
				"not 0");
		else
			op_submit_one(c, &o, false);
	}
	d->op_clock = outer;
}

void
op_submit(struct conn *c, const Rma__V1__Submit *submit)
{
	for (size_t i = 0; i < submit->n_ops && !c->dead; i++)
		op_submit_one(c, submit->ops[i], false);
	op_submit_records(c, submit->packed.data,
			  submit->packed.len / OPREC_SIZE);
	op_batch_send_all(c->d);
	notification_flush(c->d);
}

void
op_submit_packed(struct conn *c, const uint8_t *rec, size_t n)
{
	op_submit_records(c, rec, n);
	op_batch_send_all(c->d);
	notification_flush(c->d);
}

/* For snapshot.c, with the world stopped: a peer's ops in flight, in
 * start order (op_track keeps p->ops sorted by deadline). */
const struct op *
op_info_first(const struct peer *p)
{
	return TAILQ_FIRST(&p->ops);
}

const struct op *
op_info_next(const struct op *op)
{
	return TAILQ_NEXT(op, link);
}

bool
op_info_older(const struct op *a, const struct op *b)
{
	return a->deadline < b->deadline;
}

void
op_info_fill(const struct op *op, double now, struct op_info *oi)
{
	oi->op_id = op->op_id;
	oi->kind = op->kind;
	oi->client_id = op->conn->id;
	oi->client_pid = op->conn->pid;
	oi->peer_id = op->peer->id;
	snprintf(oi->peer_address, sizeof(oi->peer_address), "%s",
		 op->peer->address);
	oi->length = op->length;
	oi->age = now - op->started;
}
