/* SPDX-License-Identifier: BSD-2-Clause */
/* The door between daemons: every active message a peer can send arrives
 * here first, and every answer to a peer leaves through here.
 *
 * Arrival. UCX 1.13 reads its handler table entry before it compares a
 * message's id with the table's length, so every one of the 65536 ids a
 * peer can put on the wire gets a handler; rmad's own (below
 * AM_ID_LIMIT) go through one gate, am_on_message, which decides for all
 * of them alike:
 * - rendezvous data is never rmad's (rmad sends eager only): returning
 *   UCS_OK without touching it lets UCX acknowledge and release it;
 *   releasing it here as well would free it twice (ucp_am_rndv_process_rts);
 * - a message must name the endpoint it came over (REPLY flag), and that
 *   endpoint must be one rmad created or accepted through its listener:
 *   UCX also creates endpoints by itself when a process connects to a
 *   worker's interface sockets, and those are never served;
 * - requests (to a target) come over inbound endpoints and answers over
 *   outbound ones; before the handshake only the handshake is served.
 * What fails the gate is dropped and counted.
 *
 * Departure. Answers to a peer are counted per endpoint until UCX is done
 * with them; a peer that does not read its answers is cut off at a bound,
 * so it can never make the daemon grow. */
#include "daemon.h"
#include "am.h"

#include <stdlib.h>
#include <string.h>

#define AM_ID_COUNT 65536

/* Answers not yet sent to one peer, and the bytes rmad copied for them
 * (region data is sent from the region itself and costs no copy). */
#define AM_TX_MAX_MSGS 16384
#define AM_TX_MAX_BYTES (32u << 20)

struct am_tx {
	struct peer *p; /* NULL once the peer is gone */
	struct region *hold;
	size_t bytes;
	TAILQ_ENTRY(am_tx) link;
	/* header and copied data follow */
};

static const struct am_route *
am_route_of(const struct daemon *d, unsigned id)
{
	const struct am_hooks *h = d->am_hooks;

	for (size_t i = 0; i < h->n_routes; i++) {
		if (h->routes[i].id == id)
			return &h->routes[i];
	}
	return NULL;
}

static void
am_drop(struct daemon *d, struct peer *p, const char *why, unsigned id)
{
	d->counters.am_dropped++;
	if (p != NULL)
		p->stat_dropped++;
	log_debug("am_drop: message %u from %s dropped: %s", id,
		  p != NULL ? p->address : "an unknown endpoint", why);
}

static ucs_status_t
am_on_message(void *arg, const void *header, size_t header_length, void *data,
	      size_t length, const ucp_am_recv_param_t *param)
{
	struct am_door *door = arg;

	am_deliver(door->d, door->id, header, header_length, data, length,
		   param);
	return UCS_OK;
}

void
am_deliver(struct daemon *d, unsigned id, const void *header,
	   size_t header_length, const void *data, size_t length,
	   const ucp_am_recv_param_t *param)
{
	const struct am_route *route = am_route_of(d, id);
	struct am_msg m = {header, header_length, data, length};
	struct peer *p = NULL;

	if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
		p = idmap_get(&d->peers_by_ep, (uintptr_t)param->reply_ep);
	if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
		/* Not ours: UCX releases it once we return UCS_OK. */
		am_drop(d, p, "rendezvous", id);
		return;
	}
	if (route == NULL || id >= AM_ID_LIMIT) {
		am_drop(d, p, "unknown id", id);
		return;
	}
	if (p == NULL) {
		am_drop(d, NULL, "endpoint rmad did not accept", id);
		return;
	}
	if (route->to_target != p->inbound) {
		am_drop(d, p, "wrong direction", id);
		return;
	}
	if (header_length < route->header_min) {
		am_drop(d, p, "short header", id);
		return;
	}
	if (!route->handshake && p->state != RMA__V1__PEER_STATE__PEER_UP) {
		am_drop(d, p, "before the handshake, or on a closed endpoint",
			id);
		/* A request before the handshake is a protocol violation. */
		if (p->inbound &&
		    p->state == RMA__V1__PEER_STATE__PEER_CONNECTING)
			d->am_hooks->fail(p, UCS_ERR_REJECTED,
					  "request before the handshake");
		return;
	}
	route->fn(p, &m);
}

static ucs_status_t
am_on_foreign(void *arg, const void *header, size_t header_length, void *data,
	      size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;

	/* Same rule as the gate: UCX releases rendezvous data itself. */
	am_drop(d, NULL, "id outside rmad's range", AM_ID_COUNT);
	return UCS_OK;
}

int
am_start(struct daemon *d)
{
	idmap_init(&d->peers_by_ep);
	/* Highest first: the table grows once to its full length. */
	for (unsigned id = AM_ID_COUNT; id-- > 0;) {
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
				  UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG,
		    .id = id,
		    .cb = am_on_foreign,
		    .arg = d,
		};
		ucs_status_t st;

		if (id < AM_ID_LIMIT) {
			d->am_doors[id].d = d;
			d->am_doors[id].id = id;
			hp.cb = am_on_message;
			hp.arg = &d->am_doors[id];
		}
		st = ucp_worker_set_am_recv_handler(d->worker, &hp);
		if (st != UCS_OK) {
			log_error("am_start: set_am_recv_handler(%u): %s", id,
				  ucs_status_string(st));
			return -1;
		}
	}
	return 0;
}

void
am_stop(struct daemon *d)
{
	idmap_cleanup(&d->peers_by_ep);
}

void
am_attach(struct peer *p)
{
	if (p->ep != NULL &&
	    idmap_put(&p->d->peers_by_ep, (uintptr_t)p->ep, p) < 0)
		log_warn("am_attach: out of memory; %s will not be served",
			 p->address);
}

void
am_detach(struct peer *p)
{
	if (p->ep != NULL)
		idmap_remove(&p->d->peers_by_ep, (uintptr_t)p->ep);
}

static void
am_tx_release(struct daemon *d, struct am_tx *tx)
{
	struct peer *p = tx->p;

	if (p != NULL) {
		TAILQ_REMOVE(&p->tx, tx, link);
		p->tx_msgs--;
		p->tx_bytes -= tx->bytes;
		if (p->linger == PEER_LINGER_SENT && p->tx_msgs == 0)
			worker_kick(d); /* its refusal left: close it now */
	}
	if (tx->hold != NULL)
		region_unref(d, tx->hold);
	free(tx);
}

static void
am_tx_sent(void *request, ucs_status_t status, void *user_data)
{
	struct am_tx *tx = user_data;
	struct daemon *d = *(struct daemon **)(tx + 1);

	ucp_request_free(request);
	am_tx_release(d, tx);
}

ucs_status_t
am_send(struct peer *p, unsigned id, const void *header, size_t header_length,
	const void *data, size_t length, struct region *hold)
{
	struct daemon *d = p->d;
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	    .cb.send = am_tx_sent,
	};
	/* Region data is sent in place; anything else is copied. */
	size_t copied = hold != NULL ? 0 : length;
	size_t extra = sizeof(struct daemon *) + header_length + copied;
	struct am_tx *tx;
	uint8_t *hdr, *body;
	ucs_status_ptr_t sp;

	if (p->ep == NULL || p->state == RMA__V1__PEER_STATE__PEER_DOWN)
		return UCS_ERR_NOT_CONNECTED;
	if (p->tx_msgs > 0 && (p->tx_msgs >= AM_TX_MAX_MSGS ||
			       p->tx_bytes + copied > AM_TX_MAX_BYTES)) {
		char detail[160];
		snprintf(detail, sizeof(detail),
			 "does not read its answers (%u unsent, %llu bytes); "
			 "endpoint closed",
			 p->tx_msgs, (unsigned long long)p->tx_bytes);
		d->counters.peers_cut_off++;
		d->am_hooks->fail(p, UCS_ERR_EXCEEDS_LIMIT, detail);
		return UCS_ERR_EXCEEDS_LIMIT;
	}
	tx = malloc(sizeof(*tx) + extra);
	if (tx == NULL)
		return UCS_ERR_NO_MEMORY; /* the peer's deadline covers it */
	memcpy(tx + 1, &d, sizeof(d));
	hdr = (uint8_t *)(tx + 1) + sizeof(d);
	body = hdr + header_length;
	if (header_length > 0)
		memcpy(hdr, header, header_length);
	if (copied > 0)
		memcpy(body, data, copied);
	tx->p = p;
	tx->hold = hold;
	tx->bytes = copied;
	if (hold != NULL)
		region_ref(hold);
	TAILQ_INSERT_TAIL(&p->tx, tx, link);
	p->tx_msgs++;
	p->tx_bytes += copied;
	param.user_data = tx;
	sp = ucp_am_send_nbx(p->ep, id, header_length ? hdr : NULL,
			     header_length, hold != NULL ? data : body, length,
			     &param);
	if (sp == NULL || UCS_PTR_IS_ERR(sp)) {
		am_tx_release(d, tx);
		return UCS_PTR_STATUS(sp);
	}
	return UCS_OK;
}

void
am_peer_gone(struct peer *p)
{
	struct am_tx *tx;

	/* UCX may still call back for these: they must not name p. */
	while ((tx = TAILQ_FIRST(&p->tx)) != NULL) {
		TAILQ_REMOVE(&p->tx, tx, link);
		tx->p = NULL;
	}
	p->tx_msgs = 0;
	p->tx_bytes = 0;
}
