/* SPDX-License-Identifier: BSD-2-Clause */
/* Batches: the small operations (puts and gets up to AM_BATCH_SMALL,
 * atomics, notifying puts) a client frame sends to one peer travel in one
 * message, and come back in one answer of at most AM_BATCH_REPLY_BYTES of
 * data. The operations themselves are op.c's; this is their packing, the
 * send, and the answer's unpacking. */
#include "op_int.h"
#include "am.h"

#include <stdlib.h>
#include <string.h>

struct op_batch {
	struct daemon *d;
	size_t len;
	size_t reply_bytes; /* what its gets will bring back */
	uint8_t buf[AM_BATCH_BYTES];
};

/* What follows a record's header in a batch. */
static size_t
op_batch_record_extra(const struct am_rma *h)
{
	if (h->kind == AM_PUT)
		return h->length;
	if (h->kind == AM_PUT_NOTIFY)
		return sizeof(struct am_batch_notify) + h->length;
	if (h->kind == AM_ATOMIC)
		return sizeof(struct am_batch_atomic);
	return 0;
}

/* The batch never left: its ops get no answer. */
static void
op_batch_fail(struct op_batch *b, ucs_status_t status)
{
	size_t at = 0;

	while (at + sizeof(struct am_rma) <= b->len) {
		struct am_rma h;
		struct op *op;
		memcpy(&h, b->buf + at, sizeof(h));
		at += sizeof(h) + op_batch_record_extra(&h);
		op = idmap_get(&b->d->ops_by_token, h.token);
		if (op == NULL || !op->awaiting_answer)
			continue;
		op_set_ucs_failed(op, status);
		op_done_waiting(op);
	}
}

static void
op_batch_sent(void *request, ucs_status_t status, void *user_data)
{
	struct op_batch *b = user_data;

	ucp_request_free(request);
	if (status != UCS_OK)
		op_batch_fail(b, status);
	free(b);
}

static void
op_batch_send(struct peer *p)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = op_batch_sent,
	};
	struct op_batch *b = p->batch;
	ucs_status_ptr_t sp;

	p->batch = NULL;
	param.user_data = b;
	sp = ucp_am_send_nbx(p->ep, AM_BATCH, NULL, 0, b->buf, b->len, &param);
	if (UCS_PTR_IS_ERR(sp))
		op_batch_fail(b, UCS_PTR_STATUS(sp));
	if (sp == NULL || UCS_PTR_IS_ERR(sp))
		free(b);
}

void
op_batch_send_all(struct daemon *d)
{
	struct peer *p;

	if (d->batches == 0)
		return;
	d->batches = 0;
	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->batch != NULL)
			op_batch_send(p);
	}
}

void
op_batch_add(struct op *op, const struct resolved *res, uint64_t remote_offset)
{
	struct daemon *d = op->d;
	struct peer *p = op->peer;
	bool put = op->kind == RMA__V1__OP_KIND__PUT;
	bool atomic = op->kind == RMA__V1__OP_KIND__ATOMIC;
	struct am_rma h = {
	    .magic = AM_MAGIC,
	    .kind = op->notify ? AM_PUT_NOTIFY
		    : put      ? AM_PUT
		    : atomic   ? AM_ATOMIC
			       : AM_GET,
	    .region_id = res->region_id,
	    .generation = res->generation,
	    .offset = remote_offset,
	    .length = op->length,
	};
	size_t need = sizeof(h) + op_batch_record_extra(&h);
	/* what the answer brings back: a get's bytes, an atomic's old word */
	uint64_t reply = put ? 0 : atomic ? sizeof(uint64_t) : op->length;

	/* The target answers at most AM_BATCH_REPLY_BYTES per batch. */
	if (p->batch != NULL &&
	    (p->batch->len + need > AM_BATCH_BYTES ||
	     p->batch->reply_bytes + reply > AM_BATCH_REPLY_BYTES))
		op_batch_send(p);
	if (p->batch == NULL) {
		p->batch = malloc(sizeof(*p->batch));
		if (p->batch == NULL) {
			op_set_failed(op, RMA__V1__STATUS__ERR_NO_MEMORY,
				      "out of memory");
			return;
		}
		p->batch->d = d;
		p->batch->len = 0;
		p->batch->reply_bytes = 0;
		d->batches++;
	}
	op->token = d->next_token++;
	if (idmap_put(&d->ops_by_token, op->token, op) < 0) {
		op->token = 0;
		op_set_failed(op, RMA__V1__STATUS__ERR_NO_MEMORY,
			      "out of memory");
		return;
	}
	op->awaiting_answer = true;
	op->pending++;
	h.token = op->token;
	memcpy(p->batch->buf + p->batch->len, &h, sizeof(h));
	if (op->notify) {
		struct am_batch_notify n = {.value = op->notify_value,
					    .client =
						(uint64_t)op->conn->id + 1};

		memcpy(p->batch->buf + p->batch->len + sizeof(h), &n,
		       sizeof(n));
		memcpy(p->batch->buf + p->batch->len + sizeof(h) + sizeof(n),
		       op->buf, op->length);
	} else if (put)
		memcpy(p->batch->buf + p->batch->len + sizeof(h), op->buf,
		       op->length);
	else if (atomic)
		memcpy(p->batch->buf + p->batch->len + sizeof(h), &op->atomic,
		       sizeof(op->atomic));
	p->batch->len += need;
	p->batch->reply_bytes += reply;
}

void
op_on_batch_reply(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	const uint8_t *data = m->data;
	size_t at = 0, length = m->length;
	double outer = d->op_clock;

	d->op_clock = daemon_now();
	while (at + sizeof(struct am_rma_answer) + 8 <= length) {
		struct am_rma_answer a;
		uint64_t n;
		struct op *op;

		memcpy(&a, data + at, sizeof(a));
		memcpy(&n, data + at + sizeof(a), sizeof(n));
		at += sizeof(a) + 8;
		if (a.magic != AM_MAGIC || n > length - at)
			break; /* malformed: the rest time out */
		op = idmap_get(&d->ops_by_token, a.token);
		if (op != NULL && op->awaiting_answer && op->peer == p) {
			if (a.status != RMA__V1__STATUS__OK)
				op_set_refused(op, a.status);
			else if (op->kind == RMA__V1__OP_KIND__ATOMIC) {
				if (n == sizeof(op->value))
					memcpy(&op->value, data + at, n);
				else
					op_set_refused(
					    op, RMA__V1__STATUS__ERR_PROTOCOL);
			} else if (op->kind == RMA__V1__OP_KIND__GET) {
				if (n == op->length)
					region_copy(op->buf, data + at, n);
				else
					op_set_refused(
					    op, RMA__V1__STATUS__ERR_PROTOCOL);
			}
			op_done_waiting(op);
		}
		at += n;
	}
	d->op_clock = outer;
}
