/* Other daemons: one UCX endpoint per remote daemon, shared by every local
 * client; a handshake that proves the far side is an rmad and learns its
 * identity; descriptor resolution (the owner's answer is the only bounds
 * the initiator trusts); failure, deadlines and endpoint closing.
 * Messages between daemons are in am.h. */
#include "daemon.h"
#include "am.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Other daemons one daemon connects to: a cluster's worth. */
#define PEER_MAX 4096

static void peer_fail(struct peer *p, ucs_status_t st, const char *detail);
static void peer_forget_resolved(struct peer *p);
static void peer_notify(struct peer *p);
static void peer_refresh_resolved(struct peer *p);

const char *
peer_state_name(enum peer_state s)
{
	switch (s) {
	case PEER_CONNECTING:
		return "connecting";
	case PEER_UP:
		return "up";
	case PEER_DOWN:
		return "down";
	}
	return "?";
}

struct peer *
peer_lookup(struct daemon *d, uint32_t id)
{
	struct peer *p;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->id == id && !p->inbound)
			return p;
	}
	return NULL;
}

/* ---- active messages ---------------------------------------------------- */

static void
peer_am_sent(void *request, ucs_status_t status, void *user_data)
{
	free(user_data);
	ucp_request_free(request);
}

/* Sends a copy of buf; the copy is freed once UCX is done with it. */
static ucs_status_t
peer_am_send(ucp_ep_h ep, unsigned id, const void *buf, size_t len)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_AM_SEND_FLAG_REPLY,
	    .cb.send = peer_am_sent,
	};
	ucs_status_ptr_t sp;
	void *copy = malloc(len);

	if (copy == NULL)
		return UCS_ERR_NO_MEMORY;
	memcpy(copy, buf, len);
	param.user_data = copy;
	sp = ucp_am_send_nbx(ep, id, NULL, 0, copy, len, &param);
	if (UCS_PTR_IS_ERR(sp)) {
		free(copy);
		return UCS_PTR_STATUS(sp);
	}
	if (sp == NULL)
		free(copy);
	return UCS_OK;
}

/* Our messages are small, so eager: the data is readable during the
 * callback (FLAG_DATA would only mean it may be kept after). A rendezvous
 * message is not one of ours and is dropped. */
static int
peer_am_usable(const ucp_am_recv_param_t *param, size_t length, size_t min)
{
	return !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) &&
	       (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) &&
	       length >= min;
}

/* Copies a fixed-size message out of an AM; false if it is not one of
 * ours (every message starts with the magic). */
static bool
peer_am_read(const ucp_am_recv_param_t *param, const void *data, size_t length,
	     void *out, size_t size)
{
	uint32_t magic;

	if (!peer_am_usable(param, length, size))
		return false;
	memcpy(out, data, size);
	memcpy(&magic, out, sizeof(magic));
	return magic == AM_MAGIC;
}

static ucs_status_t
peer_on_am_hello(void *arg, const void *header, size_t header_length,
		 void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct am_hello in, out;

	if (!peer_am_read(param, data, length, &in, sizeof(in)))
		return UCS_OK;
	if (in.version != AM_VERSION) {
		log_warn("peer_on_am_hello: bad magic or version, ignored");
		return UCS_OK;
	}
	memset(&out, 0, sizeof(out));
	out.magic = AM_MAGIC;
	out.version = AM_VERSION;
	out.token = in.token;
	memcpy(out.daemon_id, d->id, DAEMON_ID_SIZE);
	peer_am_send(param->reply_ep, AM_HELLO_REPLY, &out, sizeof(out));
	return UCS_OK;
}

static void
peer_reply_connect(struct peer *p, struct peer_waiter *w, wire_status_t st)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__PeerConnectReply body = RMA__V1__PEER_CONNECT_REPLY__INIT;

	reply.id = w->request_id;
	reply.status = st;
	if (st == RMA__V1__STATUS__OK) {
		body.peer_id = p->id;
		body.daemon_id = p->remote_id_hex;
		reply.body_case = RMA__V1__REPLY__BODY_PEER_CONNECT;
		reply.peer_connect = &body;
	} else {
		reply.detail = p->last_error;
	}
	conn_send_reply(w->conn, &reply, -1);
}

static void
peer_set_up(struct peer *p)
{
	struct peer_waiter *w;

	if (p->connect_timer)
		event_del(p->connect_timer);
	p->state = PEER_UP;
	p->state_since = daemon_now();
	p->last_status = RMA__V1__STATUS__OK;
	p->backoff = 0;
	log_info("peer_set_up: peer %u %s is daemon %s%s", p->id, p->address,
		 p->remote_id_hex, p->self ? " (this daemon)" : "");
	if (!p->inbound)
		peer_notify(p);
	while ((w = TAILQ_FIRST(&p->connect_waiters)) != NULL) {
		TAILQ_REMOVE(&p->connect_waiters, w, link);
		peer_reply_connect(p, w, RMA__V1__STATUS__OK);
		free(w);
	}
}

static ucs_status_t
peer_on_am_hello_reply(void *arg, const void *header, size_t header_length,
		       void *data, size_t length,
		       const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct am_hello in;
	struct peer *p;

	if (!peer_am_read(param, data, length, &in, sizeof(in)))
		return UCS_OK;
	TAILQ_FOREACH(p, &d->peers, link)
	{
		/* Tokens are guessable: the answer must also come over the
		 * endpoint the question went out on, or any peer could name
		 * another's identity. */
		if (p->state == PEER_CONNECTING && p->hello_token == in.token &&
		    p->ep == param->reply_ep)
			break;
	}
	if (p == NULL)
		return UCS_OK; /* late answer to a connect that timed out */
	if (p->known && memcmp(p->remote_id, in.daemon_id, DAEMON_ID_SIZE) != 0)
		peer_forget_resolved(p); /* restarted: its regions are gone */
	memcpy(p->remote_id, in.daemon_id, DAEMON_ID_SIZE);
	descriptor_hex(p->remote_id, DAEMON_ID_SIZE, p->remote_id_hex);
	p->known = true;
	if (memcmp(p->remote_id, d->id, DAEMON_ID_SIZE) == 0) {
		/* We reached ourselves: copies are local, the endpoint idles.
		 */
		p->self = true;
	}
	peer_set_up(p);
	peer_refresh_resolved(p);
	return UCS_OK;
}

static ucs_status_t
peer_on_am_resolve(void *arg, const void *header, size_t header_length,
		   void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct am_resolve in;
	struct am_resolve_reply *out;
	struct region *r = NULL;
	size_t out_len = sizeof(*out);

	if (!peer_am_read(param, data, length, &in, sizeof(in)))
		return UCS_OK;
	d->counters.resolves_served++;
	if (memcmp(in.daemon_id, d->id, DAEMON_ID_SIZE) == 0)
		r = region_lookup(d, in.region_id);
	if (r != NULL && r->generation != in.generation)
		r = NULL;
	/* Addresses and keys go out only when UCX-native RMA is on. */
	if (r != NULL && d->cfg.ucx_rma && r->rkey_len <= AM_RKEY_MAX)
		out_len += r->rkey_len;
	out = calloc(1, out_len);
	if (out == NULL)
		return UCS_OK;
	out->magic = AM_MAGIC;
	out->token = in.token;
	if (r == NULL) {
		out->status = RMA__V1__STATUS__ERR_STALE_DESCRIPTOR;
	} else {
		out->status = RMA__V1__STATUS__OK;
		out->length = r->length;
		if (out_len > sizeof(*out)) {
			out->addr = (uint64_t)(uintptr_t)r->addr;
			out->rkey_len = (uint32_t)r->rkey_len;
			memcpy(out + 1, r->rkey, r->rkey_len);
		}
	}
	peer_am_send(param->reply_ep, AM_RESOLVE_REPLY, out, out_len);
	free(out);
	return UCS_OK;
}

static struct resolved *
peer_find_resolved(struct peer *p, uint64_t region_id, uint64_t generation)
{
	struct resolved *res;

	TAILQ_FOREACH(res, &p->resolved, link)
	{
		if (res->valid && res->region_id == region_id &&
		    res->generation == generation)
			return res;
	}
	return NULL;
}

void
resolved_unref(struct resolved *res)
{
	if (--res->refs > 0)
		return;
	if (res->peer != NULL)
		TAILQ_REMOVE(&res->peer->resolved, res, link);
	if (res->rkey != NULL)
		ucp_rkey_destroy(res->rkey);
	free(res);
}

void
remote_release(struct remote *rem)
{
	resolved_unref(rem->res);
	free(rem);
}

static void
peer_reply_import(struct conn *c, uint64_t req_id, struct peer *p,
		  struct resolved *res, const struct descriptor *desc)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__RemoteImportReply body = RMA__V1__REMOTE_IMPORT_REPLY__INIT;
	struct remote *rem;

	/* A descriptor is a claim; the owner's answer decides. One that
	 * claims more than the owner exported was forged or corrupted. */
	if (desc->length != res->length) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR,
				"descriptor claims %llu bytes but the owner's "
				"region %llu has %llu",
				(unsigned long long)desc->length,
				(unsigned long long)res->region_id,
				(unsigned long long)res->length);
		return;
	}
	/* Imports cost the daemon memory: as many as regions may be held. */
	if (c->remotes.count >= c->d->cfg.max_regions) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_LIMIT,
				"client already holds %zu remotes (max_regions "
				"%u); release some",
				c->remotes.count, c->d->cfg.max_regions);
		return;
	}
	rem = calloc(1, sizeof(*rem));
	if (rem == NULL) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_NO_MEMORY,
				"out of memory");
		return;
	}
	rem->id = c->next_remote_id++;
	rem->peer = p;
	rem->res = res;
	res->refs++;
	if (idmap_put(&c->remotes, rem->id, rem) < 0) {
		remote_release(rem);
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_NO_MEMORY,
				"out of memory");
		return;
	}
	body.remote_id = rem->id;
	body.length = res->length;
	body.local = res->peer == NULL;
	reply.id = req_id;
	reply.body_case = RMA__V1__REPLY__BODY_REMOTE_IMPORT;
	reply.remote_import = &body;
	conn_send_reply(c, &reply, -1);
}

/* UCX-native RMA only when both sides offer it; NULL means rmad's own
 * protocol, where the target checks every access itself. */
static ucs_status_t
peer_unpack_rkey(struct peer *p, const struct am_resolve_reply *in,
		 const void *data, ucp_rkey_h *rkey_p)
{
	*rkey_p = NULL;
	if (!p->d->cfg.ucx_rma || in->rkey_len == 0)
		return UCS_OK;
	return ucp_ep_rkey_unpack(p->ep, (const char *)data + sizeof(*in),
				  rkey_p);
}

/* Asks the owner about one of its regions; on success w waits for the
 * answer (matched by token) until the operation deadline. */
static ucs_status_t
peer_send_resolve(struct peer *p, struct peer_waiter *w, uint64_t region_id,
		  uint64_t generation)
{
	struct am_resolve msg;
	ucs_status_t st;

	memset(&msg, 0, sizeof(msg));
	msg.magic = AM_MAGIC;
	msg.token = w->token = p->d->next_token++;
	memcpy(msg.daemon_id, p->remote_id, DAEMON_ID_SIZE);
	msg.region_id = region_id;
	msg.generation = generation;
	st = peer_am_send(p->ep, AM_RESOLVE, &msg, sizeof(msg));
	if (st == UCS_OK) {
		w->deadline = daemon_now() + p->d->cfg.op_timeout;
		TAILQ_INSERT_TAIL(&p->resolve_waiters, w, link);
	}
	return st;
}

/* A reconnect: remotes imported before it stay usable once the owner
 * confirms their regions again, with the new endpoint's rkey. */
static void
peer_refresh_done(struct peer *p, struct resolved *res,
		  const struct am_resolve_reply *in, const void *data,
		  size_t length)
{
	ucp_rkey_h rkey;

	if (res->valid || res->stale)
		return;
	if (in->status != RMA__V1__STATUS__OK || in->length != res->length ||
	    in->rkey_len > AM_RKEY_MAX || length < sizeof(*in) + in->rkey_len ||
	    peer_unpack_rkey(p, in, data, &rkey) != UCS_OK) {
		res->stale = true;
		return;
	}
	if (res->rkey != NULL)
		ucp_rkey_destroy(res->rkey);
	res->rkey = rkey;
	res->addr = in->addr;
	res->valid = true;
	res->refs++; /* the cache's reference again */
}

static void
peer_refresh_resolved(struct peer *p)
{
	struct resolved *res;

	if (p->self)
		return;
	TAILQ_FOREACH(res, &p->resolved, link)
	{
		struct peer_waiter *w;

		if (res->valid || res->stale)
			continue;
		w = calloc(1, sizeof(*w));
		if (w == NULL) {
			res->stale = true;
			continue;
		}
		w->refresh = res;
		res->refs++;
		if (peer_send_resolve(p, w, res->region_id, res->generation) !=
		    UCS_OK) {
			res->stale = true;
			resolved_unref(res);
			free(w);
		}
	}
}

static void
peer_forget_resolved(struct peer *p)
{
	struct resolved *res;

	log_warn("peer_forget_resolved: %s restarted; descriptors of its "
		 "previous run are stale",
		 p->address);
	TAILQ_FOREACH(res, &p->resolved, link)
	res->stale = true;
}

static ucs_status_t
peer_on_am_resolve_reply(void *arg, const void *header, size_t header_length,
			 void *data, size_t length,
			 const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct am_resolve_reply in;
	struct peer_waiter *w = NULL;
	struct resolved *res;
	struct peer *p;
	ucs_status_t st;

	if (!peer_am_read(param, data, length, &in, sizeof(in)))
		return UCS_OK;
	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->ep != param->reply_ep)
			continue; /* only the asked peer answers */
		TAILQ_FOREACH(w, &p->resolve_waiters, link)
		{
			if (w->token == in.token)
				goto found;
		}
	}
	return UCS_OK; /* its client went away */
found:
	TAILQ_REMOVE(&p->resolve_waiters, w, link);
	if (w->refresh != NULL) {
		peer_refresh_done(p, w->refresh, &in, data, length);
		resolved_unref(w->refresh);
		goto out;
	}
	if (in.status != RMA__V1__STATUS__OK) {
		conn_send_error(w->conn, w->request_id,
				RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
				"daemon %s has no region %llu generation %llu "
				"(freed, or the daemon restarted)",
				p->remote_id_hex,
				(unsigned long long)w->descriptor.region_id,
				(unsigned long long)w->descriptor.generation);
		goto out;
	}
	if (in.rkey_len > AM_RKEY_MAX || length < sizeof(in) + in.rkey_len) {
		conn_send_error(
		    w->conn, w->request_id, RMA__V1__STATUS__ERR_PROTOCOL,
		    "peer %s sent a malformed resolve answer", p->address);
		goto out;
	}
	res = peer_find_resolved(p, w->descriptor.region_id,
				 w->descriptor.generation);
	if (res == NULL) {
		res = calloc(1, sizeof(*res));
		if (res == NULL) {
			conn_send_error(w->conn, w->request_id,
					RMA__V1__STATUS__ERR_NO_MEMORY,
					"out of memory");
			goto out;
		}
		st = peer_unpack_rkey(p, &in, data, &res->rkey);
		if (st != UCS_OK) {
			free(res);
			conn_send_error(w->conn, w->request_id,
					RMA__V1__STATUS__ERR_TRANSPORT,
					"ucp_ep_rkey_unpack: %s",
					ucs_status_string(st));
			goto out;
		}
		res->peer = p;
		res->region_id = w->descriptor.region_id;
		res->generation = w->descriptor.generation;
		res->addr = in.addr;
		res->length = in.length;
		res->valid = true;
		res->refs = 1; /* the peer's cache */
		TAILQ_INSERT_TAIL(&p->resolved, res, link);
	}
	peer_reply_import(w->conn, w->request_id, p, res, &w->descriptor);
out:
	free(w);
	worker_kick(d);
	return UCS_OK;
}

static void
peer_invalidate(struct resolved *res)
{
	if (!res->valid)
		return;
	res->valid = false;
	resolved_unref(res); /* the cache's reference */
}

static ucs_status_t
peer_on_am_freed(void *arg, const void *header, size_t header_length,
		 void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;
	struct am_freed in;
	struct peer *p;

	if (!peer_am_read(param, data, length, &in, sizeof(in)))
		return UCS_OK;
	TAILQ_FOREACH(p, &d->peers, link)
	{
		struct resolved *res;
		/* Only the owner, over its own connection, frees its
		 * regions. */
		if (p->inbound || p->ep != param->reply_ep ||
		    memcmp(p->remote_id, in.daemon_id, DAEMON_ID_SIZE) != 0)
			continue;
		res = peer_find_resolved(p, in.region_id, in.generation);
		if (res != NULL) {
			log_debug("peer_on_am_freed: region %llu of %s freed",
				  (unsigned long long)in.region_id,
				  p->remote_id_hex);
			res->stale = true;
			peer_invalidate(res);
		}
	}
	return UCS_OK;
}

static void
peer_send_freed(struct daemon *d, void *arg)
{
	struct am_freed *msg = arg;
	struct peer *p;

	/* Initiators resolved through connections they opened to us, all
	 * of which worker 0 accepted. */
	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->inbound && p->state == PEER_UP && p->ep != NULL)
			peer_am_send(p->ep, AM_FREED, msg, sizeof(*msg));
	}
	free(msg);
}

void
peer_broadcast_freed(struct daemon *d, const struct region *r)
{
	struct am_freed *msg = calloc(1, sizeof(*msg));

	if (msg == NULL)
		return; /* initiators learn at their next operation */
	msg->magic = AM_MAGIC;
	memcpy(msg->daemon_id, d->id, DAEMON_ID_SIZE);
	msg->region_id = r->id;
	msg->generation = r->generation;
	if (d->index == 0)
		peer_send_freed(d, msg);
	else if (world_post(d->world->workers[0], peer_send_freed, msg) < 0)
		free(msg);
}

/* ---- endpoints ----------------------------------------------------------- */

static void
peer_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct peer *p = arg;
	char detail[160];

	snprintf(detail, sizeof(detail), "%s", ucs_status_string(status));
	peer_fail(p, status, detail);
}

static struct peer *
peer_new(struct daemon *d, const char *address)
{
	struct peer *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->d = d;
	p->id = world_next_id(&d->world->next_peer_id);
	snprintf(p->address, sizeof(p->address), "%s", address);
	TAILQ_INIT(&p->connect_waiters);
	TAILQ_INIT(&p->resolve_waiters);
	TAILQ_INIT(&p->resolved);
	TAILQ_INIT(&p->ops);
	TAILQ_INSERT_TAIL(&d->peers, p, link);
	return p;
}

static void
peer_destroy(struct peer *p)
{
	struct resolved *res, *next;

	for (res = TAILQ_FIRST(&p->resolved); res != NULL; res = next) {
		next = TAILQ_NEXT(res, link);
		/* Remotes may still name it: detach from the dying peer. */
		TAILQ_REMOVE(&p->resolved, res, link);
		res->peer = NULL;
		if (res->valid) {
			res->valid = false;
			if (--res->refs == 0) {
				if (res->rkey)
					ucp_rkey_destroy(res->rkey);
				free(res);
			}
		}
	}
	/* Only at shutdown can operations outlive their peer (UCX did not
	 * complete them in time): they must not point at it. */
	while (!TAILQ_EMPTY(&p->ops)) {
		struct op *op = TAILQ_FIRST(&p->ops);
		TAILQ_REMOVE(&p->ops, op, link);
		op->peer = NULL;
	}
	if (p->connect_timer)
		event_free(p->connect_timer);
	TAILQ_REMOVE(&p->d->peers, p, link);
	free(p);
}

static void
peer_on_closed(void *request, ucs_status_t status, void *user_data)
{
	struct daemon *d = user_data;

	d->closing_eps--;
	ucp_request_free(request);
}

static void
peer_close_ep(struct peer *p)
{
	struct daemon *d = p->d;
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_EP_CLOSE_FLAG_FORCE,
	    .cb.send = peer_on_closed,
	    .user_data = d,
	};
	ucs_status_ptr_t sp;

	if (p->ep == NULL)
		return;
	/* Force: everything still on the endpoint completes (CANCELED). */
	/* Counted first: UCX may run the callback before it returns. */
	d->closing_eps++;
	sp = ucp_ep_close_nbx(p->ep, &param);
	p->ep = NULL;
	if (sp == NULL || UCS_PTR_IS_ERR(sp))
		d->closing_eps--;
}

int
peer_close_failed(struct daemon *d)
{
	struct peer *p, *next;
	int closed = 0;

	if (d->failed_eps == 0)
		return 0;
	d->failed_eps = 0;
	for (p = TAILQ_FIRST(&d->peers); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		if (!p->ep_failed)
			continue;
		p->ep_failed = false;
		closed++;
		peer_close_ep(p);
		/* An inbound peer exists only for its endpoint, and an address
		 * that never answered is kept for nobody: a client cannot grow
		 * the table with connects to nowhere. */
		if ((p->inbound && p->in_flight == 0) ||
		    (!p->inbound && !p->known && p->in_flight == 0 &&
		     TAILQ_EMPTY(&p->connect_waiters) &&
		     TAILQ_EMPTY(&p->resolve_waiters) &&
		     TAILQ_EMPTY(&p->resolved)))
			peer_destroy(p);
	}
	return closed;
}

bool
peer_all_closed(struct daemon *d)
{
	return d->closing_eps == 0;
}

/* Clients holding remotes on the peer hear when it goes down or comes
 * back. */
static void
peer_notify(struct peer *p)
{
	Rma__V1__PeerEvent pe = RMA__V1__PEER_EVENT__INIT;
	Rma__V1__Event event = RMA__V1__EVENT__INIT;
	struct conn *c;

	pe.peer_id = p->id;
	pe.address = p->address;
	pe.state = p->state == PEER_UP ? RMA__V1__PEER_STATE__PEER_UP
				       : RMA__V1__PEER_STATE__PEER_DOWN;
	pe.status = p->last_status;
	pe.detail = p->last_error;
	event.body_case = RMA__V1__EVENT__BODY_PEER;
	event.peer = &pe;
	TAILQ_FOREACH(c, &p->d->conns, link)
	{
		struct remote *rem;
		size_t pos = 0;
		while (idmap_next(&c->remotes, &pos, (void **)&rem)) {
			if (rem->peer == p) {
				conn_send_event(c, &event);
				break;
			}
		}
	}
}

static void
peer_fail(struct peer *p, ucs_status_t st, const char *detail)
{
	struct peer_waiter *w;
	struct resolved *res, *next;

	if (p->state == PEER_DOWN)
		return;
	p->state = PEER_DOWN;
	p->state_since = daemon_now();
	p->ep_status = st;
	p->last_status = op_status_from_ucs(st);
	snprintf(p->last_error, sizeof(p->last_error), "peer %s: %s",
		 p->address, detail);
	if (p->inbound)
		log_info("peer_fail: inbound peer %s: %s", p->address, detail);
	else
		log_warn("peer_fail: %s", p->last_error);
	if (p->connect_timer)
		event_del(p->connect_timer);
	while ((w = TAILQ_FIRST(&p->connect_waiters)) != NULL) {
		TAILQ_REMOVE(&p->connect_waiters, w, link);
		peer_reply_connect(p, w, p->last_status);
		free(w);
	}
	while ((w = TAILQ_FIRST(&p->resolve_waiters)) != NULL) {
		TAILQ_REMOVE(&p->resolve_waiters, w, link);
		if (w->refresh != NULL)
			resolved_unref(w->refresh);
		else
			conn_send_error(w->conn, w->request_id, p->last_status,
					"%s", p->last_error);
		free(w);
	}
	/* Reconnect on demand, at most every backoff seconds. */
	p->backoff = p->backoff == 0 ? 0.1 : p->backoff * 2;
	if (p->backoff > 5.0)
		p->backoff = 5.0;
	p->next_attempt = daemon_now() + p->backoff;
	for (res = TAILQ_FIRST(&p->resolved); res != NULL; res = next) {
		next = TAILQ_NEXT(res, link);
		peer_invalidate(res);
	}
	if (!p->inbound) {
		/* Past a deadline it is our own close that cancels the rest. */
		op_peer_failed(p,
			       st == UCS_ERR_TIMED_OUT ? UCS_ERR_CANCELED : st);
		peer_notify(p);
	}
	/* Closing inside a UCX callback is not allowed: the tick does it. */
	p->ep_failed = true;
	p->d->failed_eps++;
	worker_kick(p->d);
}

static void
peer_on_connect_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	char detail[160];

	snprintf(detail, sizeof(detail),
		 "no rmad answered within %.1f s (unreachable, or not an rmad)",
		 p->d->cfg.connect_timeout);
	peer_fail(p, UCS_ERR_TIMED_OUT, detail);
}

static void peer_reconnect(struct peer *p);

static int
peer_connect_start(struct peer *p)
{
	struct daemon *d = p->d;
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			  UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = peer_on_ep_error,
	    .err_handler.arg = p,
	};
	struct am_hello hello;
	struct timeval tv;
	ucs_status_t st;

	params.sockaddr.addr = (struct sockaddr *)&p->sa;
	params.sockaddr.addrlen = p->sa_len;
	p->state = PEER_CONNECTING;
	p->state_since = daemon_now();
	p->self = false;
	if (p->connect_timer == NULL)
		p->connect_timer =
		    evtimer_new(d->base, peer_on_connect_timeout, p);
	tv.tv_sec = (time_t)d->cfg.connect_timeout;
	tv.tv_usec =
	    (suseconds_t)((d->cfg.connect_timeout - (double)tv.tv_sec) * 1e6);
	evtimer_add(p->connect_timer, &tv);
	st = ucp_ep_create(d->worker, &params, &p->ep);
	if (st != UCS_OK) {
		p->ep = NULL;
		peer_fail(p, st, ucs_status_string(st));
		return -1;
	}
	memset(&hello, 0, sizeof(hello));
	hello.magic = AM_MAGIC;
	hello.version = AM_VERSION;
	hello.token = p->hello_token = d->next_token++;
	memcpy(hello.daemon_id, d->id, DAEMON_ID_SIZE);
	st = peer_am_send(p->ep, AM_HELLO, &hello, sizeof(hello));
	if (st != UCS_OK) {
		peer_fail(p, st, ucs_status_string(st));
		return -1;
	}
	worker_kick(d);
	return 0;
}

static int
peer_sockaddr(const char *host, uint16_t port, bool numeric,
	      struct sockaddr_storage *sa, socklen_t *len_p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	char service[8];

	snprintf(service, sizeof(service), "%u", port);
	/* Numeric only: a DNS lookup would stall the loop. Clients resolve
	 * names themselves; the listen address may be a name (at start). */
	hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
	if (getaddrinfo(host, service, &hints, &ai) != 0)
		return -1;
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len_p = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int
peer_resolve_address(const char *address, struct sockaddr_storage *sa,
		     socklen_t *len_p)
{
	char host[64];
	uint16_t port;

	if (config_parse_hostport(address, host, sizeof(host), &port) < 0)
		return -1;
	return peer_sockaddr(host, port, true, sa, len_p);
}

/* A request that waits for the peer; NULL (answered) without memory. */
static struct peer_waiter *
peer_waiter_new(struct conn *c, uint64_t req_id)
{
	struct peer_waiter *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_NO_MEMORY,
				"out of memory");
		return NULL;
	}
	w->conn = c;
	w->request_id = req_id;
	return w;
}

void
peer_handle_connect(struct conn *c, uint64_t req_id, const char *address)
{
	struct daemon *d = c->d;
	struct sockaddr_storage sa;
	struct peer_waiter *w;
	socklen_t len;
	struct peer *p;

	if (peer_resolve_address(address, &sa, &len) < 0) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_INVALID,
				"peer address '%s' is not a numeric HOST:PORT",
				address);
		return;
	}
	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (!p->inbound && p->sa_len == len &&
		    memcmp(&p->sa, &sa, len) == 0)
			break;
	}
	if (p == NULL) {
		size_t n = 0;
		TAILQ_FOREACH(p, &d->peers, link)
		n += !p->inbound;
		if (n >= PEER_MAX) {
			conn_send_error(c, req_id, RMA__V1__STATUS__ERR_LIMIT,
					"this daemon already knows %zu peers",
					n);
			return;
		}
		p = peer_new(d, address);
		if (p == NULL) {
			conn_send_error(c, req_id,
					RMA__V1__STATUS__ERR_NO_MEMORY,
					"out of memory");
			return;
		}
		p->sa = sa;
		p->sa_len = len;
		p->state = PEER_DOWN;
		p->state_since = daemon_now();
	}
	if (p->state == PEER_UP) {
		struct peer_waiter now = {.conn = c, .request_id = req_id};
		peer_reply_connect(p, &now, RMA__V1__STATUS__OK);
		return;
	}
	w = peer_waiter_new(c, req_id);
	if (w == NULL)
		return;
	TAILQ_INSERT_TAIL(&p->connect_waiters, w, link);
	/* An explicit connect does not wait for the backoff. */
	if (p->state == PEER_DOWN)
		peer_reconnect(p);
}

static void
peer_reconnect(struct peer *p)
{
	if (p->ep_failed || p->ep != NULL) {
		/* The old endpoint goes first. */
		p->ep_failed = true;
		p->d->failed_eps++;
		peer_close_failed(p->d);
	}
	log_info("peer_reconnect: connecting to %s", p->address);
	peer_connect_start(p);
}

void
peer_maybe_reconnect(struct peer *p)
{
	if (p->inbound || p->state != PEER_DOWN ||
	    daemon_now() < p->next_attempt)
		return;
	peer_reconnect(p);
}

static void
peer_import_local(struct conn *c, uint64_t req_id,
		  const struct descriptor *desc)
{
	struct region *r = region_lookup(c->d, desc->region_id);
	struct resolved *res;

	if (r == NULL || r->generation != desc->generation) {
		conn_send_error(
		    c, req_id, RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
		    "this daemon has no region %llu generation %llu "
		    "(freed)",
		    (unsigned long long)desc->region_id,
		    (unsigned long long)desc->generation);
		return;
	}
	res = calloc(1, sizeof(*res));
	if (res == NULL) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_NO_MEMORY,
				"out of memory");
		return;
	}
	res->region_id = r->id;
	res->generation = r->generation;
	res->length = r->length;
	res->valid = true;
	res->refs = 1;
	peer_reply_import(c, req_id, NULL, res, desc);
	resolved_unref(res);
}

void
peer_handle_import(struct conn *c, uint64_t req_id, uint32_t peer_id,
		   const char *text)
{
	struct daemon *d = c->d;
	struct descriptor desc;
	struct peer_waiter *w;
	struct resolved *res;
	struct peer *p;
	ucs_status_t st;

	if (descriptor_parse(text, strlen(text), &desc) < 0) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR,
				"not a valid rma1 descriptor (corrupt, "
				"truncated or wrong version)");
		return;
	}
	p = peer_lookup(d, peer_id);
	if (p == NULL) {
		conn_send_error(c, req_id, RMA__V1__STATUS__ERR_NO_PEER,
				"no peer %u: connect to it first", peer_id);
		return;
	}
	if (memcmp(desc.daemon_id, d->id, DAEMON_ID_SIZE) == 0) {
		peer_import_local(c, req_id, &desc);
		return;
	}
	if (p->state != PEER_UP) {
		peer_maybe_reconnect(p);
		conn_send_error(
		    c, req_id,
		    p->state == PEER_DOWN ? p->last_status
					  : RMA__V1__STATUS__ERR_INVALID,
		    "peer %s is %s%s%s", p->address, peer_state_name(p->state),
		    p->last_error[0] ? ": " : "", p->last_error);
		return;
	}
	if (p->self ||
	    memcmp(desc.daemon_id, p->remote_id, DAEMON_ID_SIZE) != 0) {
		char hex[2 * DAEMON_ID_SIZE + 1];
		descriptor_hex(desc.daemon_id, DAEMON_ID_SIZE, hex);
		conn_send_error(c, req_id,
				RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
				"descriptor belongs to daemon %s, but %s is "
				"daemon %s (restarted, or the wrong peer)",
				hex, p->address, p->remote_id_hex);
		return;
	}
	res = peer_find_resolved(p, desc.region_id, desc.generation);
	if (res != NULL) {
		peer_reply_import(c, req_id, p, res, &desc);
		return;
	}
	w = peer_waiter_new(c, req_id);
	if (w == NULL)
		return;
	w->descriptor = desc;
	st = peer_send_resolve(p, w, desc.region_id, desc.generation);
	if (st != UCS_OK) {
		free(w);
		conn_send_error(c, req_id, op_status_from_ucs(st),
				"resolve request to %s: %s", p->address,
				ucs_status_string(st));
	}
}

void
peer_conn_gone(struct daemon *d, struct conn *c)
{
	struct peer *p;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		struct waiter_list *lists[] = {&p->connect_waiters,
					       &p->resolve_waiters};
		for (int i = 0; i < 2; i++) {
			struct peer_waiter *w, *next;
			for (w = TAILQ_FIRST(lists[i]); w != NULL; w = next) {
				next = TAILQ_NEXT(w, link);
				if (w->conn == c) {
					TAILQ_REMOVE(lists[i], w, link);
					free(w);
				}
			}
		}
	}
}

/* Past its deadline an operation fails; since UCX 1.13 never notices a
 * frozen peer, the whole endpoint is force-closed, which completes
 * everything on it. */
void
peer_check_deadlines(struct daemon *d)
{
	double now = daemon_now();
	struct peer *p;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		struct op *op = TAILQ_FIRST(&p->ops);
		struct peer_waiter *w = TAILQ_FIRST(&p->resolve_waiters);
		char detail[160];
		int expired = 0;

		if (p->state != PEER_UP) {
			/* Its endpoint is closed, so UCX owes these
			 * operations their completion; should it never come,
			 * the client still hears by the deadline. */
			TAILQ_FOREACH(op, &p->ops, link)
			{
				if (op->deadline > now)
					break;
				op_report_overdue(op);
			}
			continue;
		}
		/* Resolves are answered in order: the oldest decides. */
		if (w != NULL && w->deadline <= now) {
			snprintf(detail, sizeof(detail),
				 "no answer to a descriptor resolve within "
				 "%.1f s; endpoint closed",
				 d->cfg.op_timeout);
			peer_fail(p, UCS_ERR_TIMED_OUT, detail);
			continue;
		}
		if (op == NULL || op->deadline > now)
			continue;
		TAILQ_FOREACH(op, &p->ops, link)
		{
			if (op->deadline > now)
				break;
			op->timed_out = true;
			expired++;
		}
		snprintf(detail, sizeof(detail),
			 "%d operation(s) got no completion within %.1f s; "
			 "endpoint closed",
			 expired, d->cfg.op_timeout);
		peer_fail(p, UCS_ERR_TIMED_OUT, detail);
	}
}

/* ---- listener: connections from other daemons ---------------------------- */

static bool
peer_address_allowed(struct daemon *d, const struct sockaddr_storage *ss)
{
	const uint8_t *addr;
	int family = ss->ss_family;

	if (family == AF_INET)
		addr = (const uint8_t *)&((const struct sockaddr_in *)ss)
			   ->sin_addr;
	else if (family == AF_INET6)
		addr = (const uint8_t *)&((const struct sockaddr_in6 *)ss)
			   ->sin6_addr;
	else
		return false;
	for (size_t i = 0; i < d->cfg.n_peer_allow; i++) {
		if (config_cidr_match(&d->cfg.peer_allow[i], family, addr))
			return true;
	}
	return false;
}

static void
peer_on_conn_request(ucp_conn_request_h req, void *arg)
{
	struct daemon *d = arg;
	ucp_conn_request_attr_t attr = {
	    .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR,
	};
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .conn_request = req,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = peer_on_ep_error,
	};
	char host[INET6_ADDRSTRLEN] = "?", address[96];
	struct peer *p;
	ucs_status_t st;
	uint16_t port = 0;

	memset(&attr.client_address, 0, sizeof(attr.client_address));
	if (ucp_conn_request_query(req, &attr) == UCS_OK) {
		struct sockaddr_storage *ss = &attr.client_address;
		if (ss->ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)ss;
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
		} else if (ss->ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
			inet_ntop(AF_INET6, &in6->sin6_addr, host,
				  sizeof(host));
			port = ntohs(in6->sin6_port);
		}
	}
	snprintf(address, sizeof(address), "%s:%u", host, port);
	if (!peer_address_allowed(d, &attr.client_address)) {
		log_warn(
		    "peer_on_conn_request: rejected daemon connection from "
		    "%s: not in peer_allow",
		    address);
		ucp_listener_reject(d->listener, req);
		return;
	}
	p = peer_new(d, address);
	if (p == NULL) {
		ucp_listener_reject(d->listener, req);
		return;
	}
	p->inbound = true;
	params.err_handler.arg = p;
	st = ucp_ep_create(d->worker, &params, &p->ep);
	if (st != UCS_OK) {
		log_warn("peer_on_conn_request: %s: ucp_ep_create: %s", address,
			 ucs_status_string(st));
		p->ep = NULL;
		peer_destroy(p);
		return;
	}
	p->state = PEER_UP;
	p->state_since = daemon_now();
	log_info("peer_on_conn_request: accepted daemon connection from %s",
		 address);
}

static ucs_status_t
peer_on_am_unknown(void *arg, const void *header, size_t header_length,
		   void *data, size_t length, const ucp_am_recv_param_t *param)
{
	struct daemon *d = arg;

	if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
		ucp_am_data_release(d->worker, data);
	log_debug("peer_on_am_unknown: dropped a message rmad does not know");
	return UCS_OK;
}

int
peer_system_start(struct daemon *d)
{
	static const struct {
		unsigned id;
		ucp_am_recv_callback_t cb;
	} handlers[] = {
	    {AM_HELLO, peer_on_am_hello},
	    {AM_HELLO_REPLY, peer_on_am_hello_reply},
	    {AM_RESOLVE, peer_on_am_resolve},
	    {AM_RESOLVE_REPLY, peer_on_am_resolve_reply},
	    {AM_FREED, peer_on_am_freed},
	    {AM_PUT, target_on_put},
	    {AM_PUT_ACK, op_on_put_ack},
	    {AM_GET, target_on_get},
	    {AM_GET_REPLY, op_on_get_reply},
	    {AM_BATCH, target_on_batch},
	    {AM_BATCH_REPLY, op_on_batch_reply},
	};
	ucp_listener_params_t lparams = {
	    .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
			  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .conn_handler.cb = peer_on_conn_request,
	    .conn_handler.arg = d,
	};
	ucp_listener_attr_t lattr = {
	    .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR,
	};
	char address[96];
	ucs_status_t st;
	socklen_t len;

	/* UCX 1.13 crashes on a message id without a handler: every id a
	 * peer of another version might send gets one, if only to drop it. */
	for (unsigned id = 0; id < AM_ID_LIMIT; id++) {
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
				  UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG,
		    .id = id,
		    .cb = peer_on_am_unknown,
		    .arg = d,
		};
		for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]);
		     i++) {
			if (handlers[i].id == id)
				hp.cb = handlers[i].cb;
		}
		st = ucp_worker_set_am_recv_handler(d->worker, &hp);
		if (st != UCS_OK) {
			log_error("peer_system_start: set_am_recv_handler: %s",
				  ucs_status_string(st));
			return -1;
		}
	}
	/* Worker 0 listens; the others only connect out. */
	if (d->index != 0)
		return 0;
	snprintf(address, sizeof(address), "%s:%u", d->cfg.listen_host,
		 d->cfg.listen_port);
	if (peer_sockaddr(d->cfg.listen_host, d->cfg.listen_port, false,
			  &d->listen_sa, &len) < 0) {
		log_error("peer_system_start: cannot resolve listen address %s",
			  address);
		return -1;
	}
	lparams.sockaddr.addr = (struct sockaddr *)&d->listen_sa;
	lparams.sockaddr.addrlen = len;
	st = ucp_listener_create(d->worker, &lparams, &d->listener);
	if (st != UCS_OK) {
		log_error("peer_system_start: cannot listen on %s: %s", address,
			  ucs_status_string(st));
		return -1;
	}
	/* Port 0 asks for any free port: learn which one we got. */
	if (ucp_listener_query(d->listener, &lattr) == UCS_OK) {
		struct sockaddr_storage *ss = &lattr.sockaddr;
		if (ss->ss_family == AF_INET)
			d->cfg.listen_port =
			    ntohs(((struct sockaddr_in *)ss)->sin_port);
		else if (ss->ss_family == AF_INET6)
			d->cfg.listen_port =
			    ntohs(((struct sockaddr_in6 *)ss)->sin6_port);
	}
	return 0;
}

void
peer_system_stop(struct daemon *d)
{
	struct peer *p;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->state != PEER_DOWN)
			peer_fail(p, UCS_ERR_CANCELED, "daemon shutting down");
	}
	peer_close_failed(d);
	worker_drain(d, 2.0);
	if (d->listener) {
		ucp_listener_destroy(d->listener);
		d->listener = NULL;
	}
	while (!TAILQ_EMPTY(&d->peers))
		peer_destroy(TAILQ_FIRST(&d->peers));
}
