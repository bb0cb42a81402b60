/* SPDX-License-Identifier: BSD-2-Clause */
/* The target side of puts, gets and atomics between daemons. A peer names a
 * region by id and generation, never by address; every access is checked
 * against this daemon's own region table before a byte moves, and the answer
 * goes back through rmad's own messages. (UCX 1.13's emulated RMA over tcp
 * trusts raw addresses, and aborts the target when it cannot acknowledge
 * a put to a peer that went away.) */
#include "daemon.h"
#include "am.h"
#include "bounds.h"
#include "atomic.h"

#include <stdlib.h>
#include <string.h>

static void
target_answer(struct peer *p, unsigned id, uint64_t token, wire_status_t status,
	      struct region *r, const void *data, size_t length)
{
	struct am_rma_answer a = {
	    .magic = AM_MAGIC, .status = status, .token = token};

	/* A failed send is the initiator's deadline's to report. */
	am_send(p, id, &a, sizeof(a), data, length, r);
}

/* The region a request names by id and secret, if that secret grants the
 * access: the full one everything, the read-only one reads. */
static wire_status_t
target_region(struct daemon *d, uint64_t region_id, uint64_t generation,
	      bool write, struct region **r_p)
{
	struct region *r = region_lookup(d, region_id);

	/* Handing over, the region may live on in the next process: not
	 * stale, but not here either (nothing is written; retry). */
	if (r == NULL)
		return d->regions_kept ? RMA__V1__STATUS__ERR_SHUTDOWN
				       : RMA__V1__STATUS__ERR_STALE_DESCRIPTOR;
	if (r->generation != generation) {
		if (r->ro_generation == 0 || r->ro_generation != generation)
			return RMA__V1__STATUS__ERR_STALE_DESCRIPTOR;
		if (write)
			return RMA__V1__STATUS__ERR_PERMISSION;
	}
	*r_p = r;
	return RMA__V1__STATUS__OK;
}

/* Which region, if the request is acceptable; a wire status otherwise. */
static wire_status_t
target_check(struct daemon *d, const struct am_rma *h, bool write,
	     struct region **r_p)
{
	struct region *r = NULL;
	wire_status_t st;

	st = target_region(d, h->region_id, h->generation, write, &r);
	if (st != RMA__V1__STATUS__OK)
		return st;
	if (!bounds_within(h->offset, h->length, r->length))
		return RMA__V1__STATUS__ERR_OUT_OF_BOUNDS;
	*r_p = r;
	return RMA__V1__STATUS__OK;
}

/* What p asked of us, for status and /metrics: refusals and bytes moved. */
static void
target_count(struct peer *p, bool put, wire_status_t st, uint64_t length)
{
	if (put) {
		p->served_puts++;
		p->d->counters.target_puts++;
	} else {
		p->served_gets++;
		p->d->counters.target_gets++;
	}
	if (st == RMA__V1__STATUS__OK) {
		p->served_bytes += length;
	} else {
		p->refused++;
		p->d->counters.target_refused++;
	}
}

static bool
target_read_header(const struct am_msg *m, struct am_rma *h)
{
	if (m->header_length != sizeof(*h))
		return false;
	memcpy(h, m->header, sizeof(*h));
	return h->magic == AM_MAGIC;
}

/* A put, notifying or not: the owner's bound is taken before a byte is
 * copied (a full queue refuses the whole put), the notification posted
 * only once the bytes are in. A batch's notifying puts from one client to
 * one region after the first are told as a run (stream, when not NULL):
 * the first takes every step, the run's open makes the rest one. */
static wire_status_t
target_apply_put(struct peer *p, const struct am_rma *h, const void *data,
		 const struct am_batch_notify *notify,
		 struct notification_stream *stream)
{
	/* each client of the peer is an initiator within the peer's group */
	struct notification_initiator from = {
	    .daemon_id = p->remote_id,
	    .client = notify != NULL ? notify->client : 0,
	    .group = 0};
	struct region *r = NULL;
	uint32_t share = 0;
	wire_status_t st;

	st = target_check(p->d, h, true, &r);
	if (st != RMA__V1__STATUS__OK)
		return st;
	if (notify == NULL) {
		region_copy((char *)r->addr + h->offset, data, h->length);
		return st;
	}
	if (stream != NULL) {
		if (notification_stream_fits(stream, r, notify->client)) {
			region_copy((char *)r->addr + h->offset, data,
				    h->length);
			notification_stream_put(stream, h->offset, h->length,
						notify->value, p->remote_id);
			return st;
		}
		notification_stream_close(p->d, stream);
	}
	st = notification_reserve(r, &from, &share);
	if (st != RMA__V1__STATUS__OK)
		return st;
	region_copy((char *)r->addr + h->offset, data, h->length);
	notification_post(p->d, r, h->offset, h->length, notify->value,
			  p->remote_id, share);
	if (stream != NULL)
		notification_stream_open(p->d, stream, r, &from, share);
	return st;
}

void
target_flush_answers(struct daemon *d)
{
	struct am_rma_answer_range a = {
	    .magic = AM_MAGIC,
	    .status = RMA__V1__STATUS__OK,
	    .token = d->ack_token,
	    .count = d->ack_count,
	};

	if (d->ack_count == 0)
		return;
	d->ack_count = 0;
	/* A failed send is the initiator's deadline's to report. */
	am_send(d->ack_peer, AM_PUT_ACK, &a, sizeof(a), NULL, 0, NULL);
	d->ack_peer = NULL;
}

void
target_forget(struct peer *p)
{
	if (p->d->ack_peer == p) {
		p->d->ack_peer = NULL;
		p->d->ack_count = 0;
	}
}

/* A written piece of a put: its answer waits, joined with those of the
 * pieces after it. An answer costs the target a send (on loopback the
 * kernel delivers it to the initiator in that send, and wakes it): per
 * 64 KiB piece, a fifth of the target's time at 1 MiB puts. UCX's tcp
 * transport hands over about one piece per progress call (one receive of
 * a fragment), so answers are held until UCX has nothing more
 * (worker_progress_idle), the end of the pass, a piece of another run of
 * tokens, or AM_ACK_RANGE_MAX of them. */
static void
target_hold_answer(struct peer *p, uint64_t token)
{
	struct daemon *d = p->d;

	if (d->ack_count > 0 && d->ack_peer == p &&
	    d->ack_count < AM_ACK_RANGE_MAX &&
	    token == d->ack_token + d->ack_count) {
		d->ack_count++;
		return;
	}
	target_flush_answers(d);
	d->ack_peer = p;
	d->ack_token = token;
	d->ack_count = 1;
}

void
target_on_put(struct peer *p, const struct am_msg *m)
{
	struct am_rma_notify n = {.value = 0};
	struct am_batch_notify nb = {0};
	bool notify = m->header_length == sizeof(n);
	wire_status_t st;
	struct am_rma h;

	if (notify) {
		memcpy(&n, m->header, sizeof(n));
		h = n.rma;
		nb.value = n.value;
		nb.client = n.client;
		if (h.magic != AM_MAGIC)
			return;
	} else if (!target_read_header(m, &h)) {
		return;
	}
	if (m->length != h.length)
		st = RMA__V1__STATUS__ERR_PROTOCOL;
	else
		st =
		    target_apply_put(p, &h, m->data, notify ? &nb : NULL, NULL);
	target_count(p, true, st, h.length);
	if (st == RMA__V1__STATUS__OK && !notify && p->put_ack_ranges) {
		target_hold_answer(p, h.token);
		return;
	}
	/* the answers before this one go first */
	target_flush_answers(p->d);
	target_answer(p, AM_PUT_ACK, h.token, st, NULL, NULL, 0);
}

/* A ranged get (am_rma_range): every piece its own answer, straight from
 * the region, each small enough for one fragment of UCX's transport. */
static void
target_get_range(struct peer *p, const struct am_rma_range *rg)
{
	const struct am_rma *h = &rg->rma;
	struct region *r = NULL;
	wire_status_t st = RMA__V1__STATUS__OK;
	uint64_t n = 0;

	if (rg->piece == 0 || h->length == 0)
		st = RMA__V1__STATUS__ERR_PROTOCOL;
	else
		n = h->length / rg->piece + (h->length % rg->piece != 0);
	/* rmad's initiators never ask for more: a bigger range is an
	 * attempt to make this daemon hold many answers */
	if (n > AM_PIECES_IN_FLIGHT)
		st = RMA__V1__STATUS__ERR_PROTOCOL;
	if (st == RMA__V1__STATUS__OK)
		st = target_check(p->d, h, false, &r);
	target_count(p, false, st, h->length);
	if (st != RMA__V1__STATUS__OK) {
		target_answer(p, AM_GET_REPLY, h->token, st, NULL, NULL, 0);
		return;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t at = i * rg->piece;
		uint64_t len = i + 1 < n ? rg->piece : h->length - at;
		target_answer(p, AM_GET_REPLY, h->token + i, st, r,
			      (char *)r->addr + h->offset + at, len);
	}
}

void
target_on_get(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct region *r = NULL;
	wire_status_t st;
	struct am_rma h;

	if (m->header_length == sizeof(struct am_rma_range)) {
		struct am_rma_range rg;
		memcpy(&rg, m->header, sizeof(rg));
		if (rg.rma.magic == AM_MAGIC)
			target_get_range(p, &rg);
		return;
	}
	if (!target_read_header(m, &h))
		return;
	st = target_check(d, &h, false, &r);
	target_count(p, false, st, h.length);
	if (st != RMA__V1__STATUS__OK)
		r = NULL;
	target_answer(p, AM_GET_REPLY, h.token, st, r,
		      r ? (char *)r->addr + h.offset : NULL, r ? h.length : 0);
}

/* Answers to a batch, gathered in the worker's scratch buffer and sent
 * (copied) once. */
static bool
target_reply_add(struct daemon *d, size_t *len, uint64_t token,
		 wire_status_t st, const void *data, uint64_t n)
{
	struct am_rma_answer a = {
	    .magic = AM_MAGIC, .status = st, .token = token};
	size_t need = sizeof(a) + sizeof(n) + n;
	uint8_t *at;

	if (d->batch_reply_cap - *len < need) {
		size_t cap = d->batch_reply_cap ? d->batch_reply_cap : 4096;
		uint8_t *buf;
		while (cap - *len < need)
			cap *= 2;
		buf = realloc(d->batch_reply, cap);
		if (buf == NULL)
			return false;
		d->batch_reply = buf;
		d->batch_reply_cap = cap;
	}
	at = d->batch_reply + *len;
	memcpy(at, &a, sizeof(a));
	memcpy(at + sizeof(a), &n, sizeof(n));
	if (n > 0)
		memcpy(at + sizeof(a) + sizeof(n), data, n);
	*len += need;
	return true;
}

/* An atomic of a batch: checked like a put (it writes), applied by this
 * CPU on the region's memory, answered with the old word. Nothing is
 * touched unless every check passed. False when the answer could not be
 * added (out of memory). */
static bool
target_batch_atomic(struct peer *p, const struct am_rma *h,
		    const uint8_t *trailer, size_t *len)
{
	struct daemon *d = p->d;
	struct region *r = NULL;
	struct am_batch_atomic a;
	wire_status_t st;
	uint64_t old = 0;

	memcpy(&a, trailer, sizeof(a));
	st = target_region(d, h->region_id, h->generation, true, &r);
	if (st == RMA__V1__STATUS__OK &&
	    !atomic_valid((Rma__V1__AtomicOp)a.op, h->length))
		st = RMA__V1__STATUS__ERR_INVALID;
	if (st == RMA__V1__STATUS__OK &&
	    !atomic_fits(h->offset, h->length, r->length))
		st = RMA__V1__STATUS__ERR_OUT_OF_BOUNDS;
	if (st == RMA__V1__STATUS__OK)
		old = atomic_apply((char *)r->addr + h->offset,
				   (Rma__V1__AtomicOp)a.op, h->length,
				   a.operand, a.compare);
	d->counters.target_atomics++;
	if (st == RMA__V1__STATUS__OK) {
		p->served_bytes += h->length;
	} else {
		p->refused++;
		d->counters.target_refused++;
	}
	return target_reply_add(d, len, h->token, st, &old,
				st == RMA__V1__STATUS__OK ? sizeof(old) : 0);
}

void
target_on_batch(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	const uint8_t *data = m->data;
	size_t at = 0, len = 0;
	uint64_t reply_bytes = 0;
	struct notification_stream stream = {.r = NULL};

	/* rmad's initiators never send more; a bigger batch is an attempt
	 * to make the answer large. */
	if (m->length > AM_BATCH_BYTES) {
		peer_fail(p, UCS_ERR_EXCEEDS_LIMIT,
			  "sent a batch over AM_BATCH_BYTES; endpoint closed");
		return;
	}
	while (at + sizeof(struct am_rma) <= m->length) {
		struct region *r = NULL;
		struct am_rma h;
		wire_status_t st;
		bool put;

		memcpy(&h, data + at, sizeof(h));
		at += sizeof(h);
		if (h.magic == AM_MAGIC && h.kind == AM_ATOMIC) {
			if (sizeof(struct am_batch_atomic) > m->length - at ||
			    !target_batch_atomic(p, &h, data + at, &len))
				break;
			at += sizeof(struct am_batch_atomic);
			continue;
		}
		struct am_batch_notify n;
		bool notify = h.kind == AM_PUT_NOTIFY;

		if (notify) {
			if (sizeof(n) > m->length - at)
				break;
			memcpy(&n, data + at, sizeof(n));
			at += sizeof(n);
		}
		put = h.kind == AM_PUT || notify;
		if (h.magic != AM_MAGIC || (!put && h.kind != AM_GET) ||
		    (put && h.length > m->length - at))
			break; /* malformed: the initiator's deadline covers it
				*/
		/* Batches carry small operations only, and the gets of one
		 * batch answer with at most AM_BATCH_REPLY_BYTES. */
		if (h.length > AM_BATCH_SMALL ||
		    (!put && reply_bytes + h.length > AM_BATCH_REPLY_BYTES)) {
			target_count(p, put, RMA__V1__STATUS__ERR_PROTOCOL, 0);
			if (!target_reply_add(d, &len, h.token,
					      RMA__V1__STATUS__ERR_PROTOCOL,
					      NULL, 0))
				break;
			at += put ? h.length : 0;
			continue;
		}
		if (put) {
			st = target_apply_put(p, &h, data + at,
					      notify ? &n : NULL, &stream);
			at += h.length;
		} else {
			st = target_check(d, &h, false, &r);
			if (st == RMA__V1__STATUS__OK)
				reply_bytes += h.length;
		}
		target_count(p, put, st, h.length);
		if (!target_reply_add(
			d, &len, h.token, st,
			!put && st == RMA__V1__STATUS__OK
			    ? (char *)r->addr + h.offset
			    : NULL,
			!put && st == RMA__V1__STATUS__OK ? h.length : 0))
			break;
	}
	notification_stream_close(d, &stream);
	if (len > 0)
		am_send(p, AM_BATCH_REPLY, NULL, 0, d->batch_reply, len, NULL);
}
