/* SPDX-License-Identifier: BSD-2-Clause */
/* Operations over rmad's own protocol: a put or get sent as active
 * messages, in pieces that each fit a fragment of UCX's tcp transport
 * (op_send_am), the target's answers that complete it (routed here by
 * daemon.c's AM table), and what a peer's failure or deadline does to the
 * operations waiting for its answers. op.c submits and finishes them. */
#include "op_int.h"
#include "am.h"

#include <stdlib.h>
#include <string.h>

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

	/* a get asks for several pieces at once, where the target can
	 * answer that */
	bool ranged = !put && op->pieces > 1 && op->peer->get_ranges;

	while (op->awaiting_answer && op->sent < op->pieces) {
		uint32_t room = AM_PIECES_IN_FLIGHT - (op->sent - op->answered);
		uint32_t left = op->pieces - op->sent;
		/* All that is left if it fits (a 1 MiB get, 17 pieces, in
		 * one request, where 8 + 8 + 1 cost the initiator two sends
		 * more), else as many runs of AM_RANGE_PIECES as there is
		 * room for, so that answers arriving one by one do not each
		 * send a request of one. */
		uint32_t k = !ranged	    ? 1
			     : left <= room ? left
					    : room - room % AM_RANGE_PIECES;
		struct am_rma_range *rg =
		    op->pieces > 1 ? &op->piece_hdrs[op->sent] : NULL;
		const struct am_rma *h = rg != NULL ? &rg->rma : &op->hdr;
		const char *data =
		    (const char *)op->buf +
		    (rg != NULL ? h->offset - op->hdr.offset : 0);
		size_t hlen = op->notify ? sizeof(op->nhdr) : sizeof(*h);
		ucs_status_ptr_t sp;
		uint32_t i;

		if (k == 0 || room < k)
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
void
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
