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
#include "op_int.h"
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

void
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

/* A flush waits for every older operation on its peer: once it is the
 * oldest, that part of its wait is over. */
void
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

void
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
	metrics_observe_op(
	    d,
	    &(struct metrics_op){op->kind, op->started, op->peer, op->length},
	    ws);
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

/* The lookups of the last operation of a batch, for the next: a stream of
 * puts names the same region and remote record after record, and the
 * hash lookups were a fifth of a same-daemon 8-byte put's instructions.
 * Lives for one op_submit_records call, while what it holds cannot go:
 * c's regions and remotes go only by a request of their own or c's close
 * (which ends the batch: c->dead). A region of the world goes while the
 * others are stopped (world.c), or by a close this worker makes of
 * another client, which only an operation reaching beyond c can cause (a
 * notification queued to its owner, UCX): so the target is kept only
 * from one same-daemon copy that notifies nobody to the next. Ids are
 * compared, and every check of the record still runs, for every
 * record. */
struct op_memo {
	uint64_t region_id, remote_id, target_id;
	struct region *local, *target;
	struct remote *rem;
};

/* c's region id, as idmap_get(&c->regions, id) */
static inline struct region *
op_memo_local(struct conn *c, struct op_memo *m, uint64_t id)
{
	struct region *r;

	if (m != NULL && m->local != NULL && m->region_id == id)
		return m->local;
	r = idmap_get(&c->regions, id);
	if (m != NULL) {
		m->region_id = id;
		m->local = r;
	}
	return r;
}

/* as op_remote */
static inline struct remote *
op_memo_remote(struct conn *c, struct op_memo *m, const Rma__V1__Op *o)
{
	struct remote *rem;

	if (m != NULL && m->rem != NULL && m->remote_id == o->remote_id)
		return m->rem;
	rem = op_remote(c, o);
	if (m != NULL) {
		m->remote_id = o->remote_id;
		m->rem = rem;
	}
	return rem;
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
static struct region *
op_local_target_check(struct conn *c, const Rma__V1__Op *o,
		      const struct resolved *res, bool write,
		      struct region *target)
{
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

struct region *
op_local_target(struct conn *c, const Rma__V1__Op *o,
		const struct resolved *res, bool write)
{
	return op_local_target_check(c, o, res, write,
				     region_lookup(c->d, res->region_id));
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

/* A same-daemon notifying put's place in the owner's bound, in *share_p;
 * false if o was refused (failed here). */
static bool
op_local_reserve(struct conn *c, const Rma__V1__Op *o, struct region *target,
		 const struct resolved *res, uint32_t *share_p)
{
	/* a client of this daemon is an initiator within its uid's group */
	struct notification_initiator from = {.daemon_id = c->d->id,
					      .client = (uint64_t)c->id + 1,
					      .group = (uint64_t)c->uid + 1};
	wire_status_t st = notification_reserve(target, &from, share_p);

	if (st == RMA__V1__STATUS__OK)
		return true;
	op_fail(c, o, st,
		st == RMA__V1__STATUS__ERR_LIMIT
		    ? "the owner of region %llu holds %d notifications "
		      "it has not taken, or this client its share of "
		      "them: nothing written"
		    : "region %llu: no owner to notify, or no memory "
		      "(%d)",
		(unsigned long long)res->region_id, NOTIFICATION_QUEUE_MAX);
	return false;
}

/* Both regions live here: the daemon copies, no UCX involved. */
static void
op_copy_local(struct conn *c, const Rma__V1__Op *o, struct region *local,
	      const struct resolved *res, struct op_memo *m)
{
	bool notify = o->kind == RMA__V1__OP_KIND__PUT &&
		      (o->flags & RMA__V1__OP_FLAG__OP_FLAG_NOTIFY);
	struct region *target;
	uint32_t share = 0;

	/* Not kept for the next when notifying (see op_memo). */
	if (m != NULL && m->target != NULL && !notify &&
	    m->target_id == res->region_id) {
		target = m->target;
	} else {
		target = region_lookup(c->d, res->region_id);
		if (m != NULL) {
			m->target_id = res->region_id;
			m->target = notify ? NULL : target;
		}
	}
	target = op_local_target_check(
	    c, o, res, o->kind == RMA__V1__OP_KIND__PUT, target);
	if (target == NULL)
		return;
	/* The owner's bound first: a full queue refuses the put whole. */
	if (notify && !op_local_reserve(c, o, target, res, &share))
		return;
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
op_start_rma(struct conn *c, const Rma__V1__Op *o, bool unparked,
	     struct op_memo *m)
{
	struct daemon *d = c->d;
	bool put = o->kind == RMA__V1__OP_KIND__PUT;
	ucp_request_param_t param;
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
	local = op_memo_local(c, m, o->region_id);
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
	rem = op_memo_remote(c, m, o);
	if (rem == NULL)
		return;
	res = rem->res;
	if (!bounds_within(o->remote_offset, o->length, res->length)) {
		op_fail_remote_bounds(c, o, "range", res);
		return;
	}
	if (rem->peer == NULL) {
		op_copy_local(c, o, local, res, m);
		return;
	}
	if (m != NULL)
		m->target = NULL; /* see op_memo */
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
	/* set here, not at the top: a same-daemon copy never needs it */
	param = (ucp_request_param_t){
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_MEMH,
	    .cb.send = op_on_ucx_done,
	    .user_data = op,
	    .memh = local->memh,
	};
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
void
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

/* One operation; m: the lookups of its batch (op_memo), or NULL. */
static void
op_submit_memo(struct conn *c, const Rma__V1__Op *o, bool unparked,
	       struct op_memo *m)
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
	if (m != NULL && o->kind != RMA__V1__OP_KIND__PUT &&
	    o->kind != RMA__V1__OP_KIND__GET)
		m->target = NULL; /* see op_memo */
	switch (o->kind) {
	case RMA__V1__OP_KIND__PUT:
	case RMA__V1__OP_KIND__GET:
		op_start_rma(c, o, unparked, m);
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

void
op_submit_one(struct conn *c, const Rma__V1__Op *o, bool unparked)
{
	op_submit_memo(c, o, unparked, NULL);
}

/* The one check of an operation record, wherever it came from (a Submit
 * frame or the client's ring): decoded, then validated and run as any
 * operation is. */
static void
op_submit_records(struct conn *c, const uint8_t *rec, size_t n)
{
	struct daemon *d = c->d;
	double outer = d->op_clock;
	struct op_memo m = {0};
	Rma__V1__Op o;

	d->op_clock = daemon_now();
	for (size_t i = 0; i < n && !c->dead; i++, rec += OPREC_SIZE) {
		if (oprec_decode(rec, &o) < 0)
			op_fail(c, &o, RMA__V1__STATUS__ERR_PROTOCOL,
				"reserved bytes of an operation record are "
				"not 0");
		else
			op_submit_memo(c, &o, false, &m);
	}
	d->op_clock = outer;
}

void
op_submit(struct conn *c, const Rma__V1__Submit *submit)
{
	handshake_retire_catch_up(c->d);
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
	handshake_retire_catch_up(c->d);
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
