/* The target side of puts and gets between daemons. A peer names a region
 * by id and generation, never by address; every access is checked against
 * this daemon's own region table before a byte moves, and the answer goes
 * back through rmad's own messages. (UCX 1.13's emulated RMA over tcp
 * trusts raw addresses, and aborts the target when it cannot acknowledge
 * a put to a peer that went away.) */
#include "daemon.h"
#include "am.h"
#include "bounds.h"

#include <stdlib.h>
#include <string.h>

/* An answer in flight: its header, and the region a get reads from,
 * both kept until UCX is done with them. */
struct target_answer {
	struct am_rma_answer hdr;
	struct daemon *d;
	struct region *region;
};

static void
target_answer_sent(void *request, ucs_status_t status, void *user_data)
{
	struct target_answer *a = user_data;

	if (a->region != NULL)
		region_unref(a->d, a->region);
	free(a);
	ucp_request_free(request);
}

static void
target_answer(struct daemon *d, ucp_ep_h ep, unsigned id, uint64_t token,
	      wire_status_t status, struct region *r, const void *data,
	      size_t length)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = target_answer_sent,
	};
	struct target_answer *a = malloc(sizeof(*a));
	ucs_status_ptr_t sp;

	if (a == NULL)
		return; /* the initiator's deadline covers it */
	a->hdr.magic = AM_MAGIC;
	a->hdr.status = status;
	a->hdr.token = token;
	a->d = d;
	a->region = r;
	if (r != NULL)
		region_ref(r);
	param.user_data = a;
	sp = ucp_am_send_nbx(ep, id, &a->hdr, sizeof(a->hdr), data, length,
			     &param);
	if (sp == NULL || UCS_PTR_IS_ERR(sp)) {
		if (UCS_PTR_IS_ERR(sp))
			log_debug("target_answer: %s",
				  ucs_status_string(UCS_PTR_STATUS(sp)));
		if (r != NULL)
			region_unref(d, r);
		free(a);
	}
}

/* Which region, if the request is acceptable; a wire status otherwise. */
static wire_status_t
target_check(struct daemon *d, const struct am_rma *h, struct region **r_p)
{
	struct region *r = region_lookup(d, h->region_id);

	if (r == NULL || r->generation != h->generation)
		return RMA__V1__STATUS__ERR_STALE_DESCRIPTOR;
	if (!bounds_within(h->offset, h->length, r->length))
		return RMA__V1__STATUS__ERR_OUT_OF_BOUNDS;
	*r_p = r;
	return RMA__V1__STATUS__OK;
}

static bool
target_read_header(const void *header, size_t header_length,
		   const ucp_am_recv_param_t *param, struct am_rma *h)
{
	if (header_length != sizeof(*h) ||
	    !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
		return false;
	memcpy(h, header, sizeof(*h));
	return h->magic == AM_MAGIC;
}

ucs_status_t
target_on_put(void *arg, const void *header, size_t header_length, void *data,
	      size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct region *r = NULL;
	wire_status_t st;
	struct am_rma h;

	if (!target_read_header(header, header_length, param, &h) ||
	    (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
		/* not ours: rmad sends eager only */
		if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
			ucp_am_data_release(d->worker, data);
		return UCS_OK;
	}
	st = target_check(d, &h, &r);
	if (st == RMA__V1__STATUS__OK && length != h.length)
		st = RMA__V1__STATUS__ERR_PROTOCOL;
	if (st == RMA__V1__STATUS__OK)
		memcpy((char *)r->addr + h.offset, data, length);
	d->counters.target_puts++;
	target_answer(d, param->reply_ep, AM_PUT_ACK, h.token, st, NULL, NULL,
		      0);
	return UCS_OK;
}

ucs_status_t
target_on_get(void *arg, const void *header, size_t header_length, void *data,
	      size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct region *r = NULL;
	wire_status_t st;
	struct am_rma h;

	if (!target_read_header(header, header_length, param, &h))
		return UCS_OK;
	st = target_check(d, &h, &r);
	d->counters.target_gets++;
	if (st != RMA__V1__STATUS__OK)
		r = NULL;
	target_answer(d, param->reply_ep, AM_GET_REPLY, h.token, st, r,
		      r ? (char *)r->addr + h.offset : NULL, r ? h.length : 0);
	return UCS_OK;
}

/* Answers to a batch, one buffer sent once. */
struct target_reply {
	size_t len, cap;
	uint8_t *buf;
};

static bool
target_reply_add(struct target_reply *r, uint64_t token, wire_status_t st,
		 const void *data, uint64_t n)
{
	struct am_rma_answer a = {
	    .magic = AM_MAGIC, .status = st, .token = token};
	size_t need = sizeof(a) + sizeof(n) + n;

	if (r->cap - r->len < need) {
		size_t cap = r->cap ? r->cap : 4096;
		uint8_t *buf;
		while (cap - r->len < need)
			cap *= 2;
		buf = realloc(r->buf, cap);
		if (buf == NULL)
			return false;
		r->buf = buf;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, &a, sizeof(a));
	memcpy(r->buf + r->len + sizeof(a), &n, sizeof(n));
	if (n > 0)
		memcpy(r->buf + r->len + sizeof(a) + sizeof(n), data, n);
	r->len += need;
	return true;
}

static void
target_reply_sent(void *request, ucs_status_t status, void *user_data)
{
	free(user_data);
	ucp_request_free(request);
}

ucs_status_t
target_on_batch(void *arg, const void *header, size_t header_length, void *data,
		size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct target_reply reply = {0};
	const uint8_t *p = data;
	size_t at = 0;
	ucp_request_param_t rp = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = target_reply_sent,
	};
	ucs_status_ptr_t sp;

	if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
	    !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
		if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
			ucp_am_data_release(d->worker, data);
		return UCS_OK;
	}
	while (at + sizeof(struct am_rma) <= length) {
		struct region *r = NULL;
		struct am_rma h;
		wire_status_t st;
		bool put;

		memcpy(&h, p + at, sizeof(h));
		at += sizeof(h);
		put = h.kind == AM_PUT;
		if (h.magic != AM_MAGIC || (!put && h.kind != AM_GET) ||
		    (put && h.length > length - at))
			break; /* malformed: the initiator's deadline covers it
				*/
		/* Batches carry small operations only: a big get here would
		 * make the answer as big as the peer asks. */
		if (h.length > AM_BATCH_SMALL) {
			if (!target_reply_add(&reply, h.token,
					      RMA__V1__STATUS__ERR_PROTOCOL,
					      NULL, 0))
				break;
			at += put ? h.length : 0;
			continue;
		}
		st = target_check(d, &h, &r);
		if (put) {
			if (st == RMA__V1__STATUS__OK)
				memcpy((char *)r->addr + h.offset, p + at,
				       h.length);
			at += h.length;
			d->counters.target_puts++;
		} else {
			d->counters.target_gets++;
		}
		if (!target_reply_add(
			&reply, h.token, st,
			!put && st == RMA__V1__STATUS__OK
			    ? (char *)r->addr + h.offset
			    : NULL,
			!put && st == RMA__V1__STATUS__OK ? h.length : 0))
			break;
	}
	if (reply.len == 0) {
		free(reply.buf);
		return UCS_OK;
	}
	rp.user_data = reply.buf;
	sp = ucp_am_send_nbx(param->reply_ep, AM_BATCH_REPLY, NULL, 0,
			     reply.buf, reply.len, &rp);
	if (sp == NULL || UCS_PTR_IS_ERR(sp))
		free(reply.buf);
	return UCS_OK;
}
