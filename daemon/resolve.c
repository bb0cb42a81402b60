/* SPDX-License-Identifier: BSD-2-Clause */
/* Descriptor resolution. A descriptor is a claim; the owning daemon's
 * answer to a RESOLVE is the only bounds the initiator trusts, cached per
 * peer (struct resolved) and shared by every remote handle naming that
 * region. The owner tells the initiators when a region is freed (FREED);
 * after a reconnect the cache is confirmed again, and after the owner
 * restarted it is stale for good. Owner side: RESOLVE answers and FREED
 * notices. */
#include "daemon.h"
#include "am.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies a fixed-size message out of its data; false unless it is whole
 * and starts with the magic. */
static bool
resolve_read(const struct am_msg *m, void *out, size_t size)
{
	uint32_t magic;

	if (m->length < size)
		return false;
	memcpy(out, m->data, size);
	memcpy(&magic, out, sizeof(magic));
	return magic == AM_MAGIC;
}

/* ---- owner side ---------------------------------------------------------- */

void
resolve_on_request(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct am_resolve in;
	struct am_resolve_reply *out;
	struct region *r = NULL;
	size_t out_len = sizeof(*out);
	bool read_only;

	if (!resolve_read(m, &in, sizeof(in)))
		return;
	if (memcmp(in.daemon_id, d->id, DAEMON_ID_SIZE) == 0) {
		r = region_lookup(d, in.region_id);
		/* Handing over: a region whose owner has gone from this
		 * process lives on in the next one, which answers once the
		 * initiator reconnects (our exit drops this question, and
		 * resolve_peer_down asks again). "Gone" from here would be
		 * final for the initiator. */
		if (r == NULL && d->regions_kept)
			return;
	}
	d->counters.resolves_served++;
	p->served_resolves++;
	read_only = r != NULL && r->generation != in.generation;
	if (read_only && r->ro_generation != in.generation)
		r = NULL;
	/* Addresses and keys go out only when UCX-native RMA is on, and
	 * never for the read-only secret: its every access must reach
	 * target.c's check (UCX RMA over an rkey writes as well as reads). */
	if (r != NULL && !read_only && d->cfg->ucx_rma &&
	    r->rkey_len <= AM_RKEY_MAX)
		out_len += r->rkey_len;
	out = calloc(1, out_len);
	if (out == NULL)
		return; /* the initiator's deadline covers it */
	out->magic = AM_MAGIC;
	out->token = in.token;
	if (r == NULL) {
		out->status = RMA__V1__STATUS__ERR_STALE_DESCRIPTOR;
		p->refused++;
		d->counters.target_refused++;
	} else {
		out->status = RMA__V1__STATUS__OK;
		out->length = r->length;
		out->flags = read_only ? AM_RESOLVE_READ_ONLY : 0;
		if (out_len > sizeof(*out)) {
			out->addr = (uint64_t)(uintptr_t)r->addr;
			out->rkey_len = (uint32_t)r->rkey_len;
			memcpy(out + 1, r->rkey, r->rkey_len);
		}
	}
	am_send(p, AM_RESOLVE_REPLY, NULL, 0, out, out_len, NULL);
	free(out);
}

static void
resolve_send_freed(struct daemon *d, void *arg)
{
	struct am_freed *msg = arg;
	struct peer *p;

	/* Initiators resolved through connections they opened to us, all
	 * of which worker 0 accepted. */
	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->inbound && p->state == RMA__V1__PEER_STATE__PEER_UP)
			am_send(p, AM_FREED, NULL, 0, msg, sizeof(*msg), NULL);
	}
	free(msg);
}

void
resolve_broadcast_freed(struct daemon *d, const struct region *r)
{
	struct am_freed *msg = calloc(1, sizeof(*msg));

	if (msg == NULL)
		return; /* initiators learn at their next operation */
	msg->magic = AM_MAGIC;
	memcpy(msg->daemon_id, d->id, DAEMON_ID_SIZE);
	msg->region_id = r->id;
	msg->generation = r->generation;
	if (d->index == 0)
		resolve_send_freed(d, msg);
	else if (world_post(d->world->workers[0], resolve_send_freed, msg) < 0)
		free(msg);
}

/* ---- initiator side: the cache ------------------------------------------- */

static struct resolved *
resolve_find(struct peer *p, uint64_t region_id, uint64_t generation)
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

void
resolve_conn_gone(struct conn *c)
{
	struct remote *rem;
	size_t pos = 0;

	while (idmap_next(&c->remotes, &pos, (void **)&rem))
		remote_release(rem);
}

static void
resolve_invalidate(struct resolved *res)
{
	if (!res->valid)
		return;
	res->valid = false;
	resolved_unref(res); /* the cache's reference */
}

static void
resolve_reply_import(struct reply_to to, struct peer *p, struct resolved *res,
		     const struct descriptor *desc)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__RemoteImportReply body = RMA__V1__REMOTE_IMPORT_REPLY__INIT;
	struct conn *c = to.conn;
	struct remote *rem;

	/* A descriptor is a claim; the owner's answer decides. One that
	 * claims more than the owner exported was forged or corrupted. */
	if (desc->length != res->length) {
		reply_error(to, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR,
			    "descriptor claims %llu bytes but the owner's "
			    "region %llu has %llu",
			    (unsigned long long)desc->length,
			    (unsigned long long)res->region_id,
			    (unsigned long long)res->length);
		return;
	}
	/* Imports cost the daemon memory: as many as regions may be held. */
	if (c->remotes.count >= c->d->cfg->max_regions) {
		reply_error(to, RMA__V1__STATUS__ERR_LIMIT,
			    "client already holds %zu remotes (max_regions "
			    "%u); release some",
			    c->remotes.count, c->d->cfg->max_regions);
		return;
	}
	rem = calloc(1, sizeof(*rem));
	if (rem == NULL) {
		reply_error(to, RMA__V1__STATUS__ERR_NO_MEMORY,
			    "out of memory");
		return;
	}
	rem->id = c->next_remote_id++;
	rem->peer = p;
	rem->res = res;
	res->refs++;
	if (idmap_put(&c->remotes, rem->id, rem) < 0) {
		remote_release(rem);
		reply_error(to, RMA__V1__STATUS__ERR_NO_MEMORY,
			    "out of memory");
		return;
	}
	body.remote_id = rem->id;
	body.length = res->length;
	body.local = res->peer == NULL;
	reply.body_case = RMA__V1__REPLY__BODY_REMOTE_IMPORT;
	reply.remote_import = &body;
	reply_send(to, &reply, -1);
}

/* UCX-native RMA only when both sides offer it; NULL means rmad's own
 * protocol, where the target checks every access itself. */
static ucs_status_t
resolve_unpack_rkey(struct peer *p, const struct am_resolve_reply *in,
		    const void *data, ucp_rkey_h *rkey_p)
{
	*rkey_p = NULL;
	if (!p->d->cfg->ucx_rma || in->rkey_len == 0)
		return UCS_OK;
	return ucp_ep_rkey_unpack(p->ep, (const char *)data + sizeof(*in),
				  rkey_p);
}

/* Asks the owner about one of its regions; on success w waits for the
 * answer (matched by token) until the operation deadline. */
static ucs_status_t
resolve_send(struct peer *p, struct peer_waiter *w, uint64_t region_id,
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
	st = am_send(p, AM_RESOLVE, NULL, 0, &msg, sizeof(msg), NULL);
	if (st == UCS_OK) {
		w->deadline = daemon_now() + p->d->cfg->op_timeout;
		TAILQ_INSERT_TAIL(&p->resolve_waiters, w, link);
	}
	return st;
}

/* A reconnect: remotes imported before it stay usable once the owner
 * confirms their regions again, with the new endpoint's rkey. */
static void
resolve_refresh_done(struct peer *p, struct resolved *res,
		     const struct am_resolve_reply *in, const struct am_msg *m)
{
	ucp_rkey_h rkey;

	if (res->valid || res->stale)
		return;
	if (in->status != RMA__V1__STATUS__OK || in->length != res->length ||
	    in->rkey_len > AM_RKEY_MAX ||
	    m->length < sizeof(*in) + in->rkey_len ||
	    resolve_unpack_rkey(p, in, m->data, &rkey) != UCS_OK) {
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

void
resolve_peer_up(struct peer *p, bool restarted)
{
	struct resolved *res;

	if (restarted) {
		log_warn("resolve_peer_up: %s restarted; descriptors of its "
			 "previous run are stale",
			 p->address);
		TAILQ_FOREACH(res, &p->resolved, link)
		res->stale = true;
	}
	if (p->self)
		return; /* nothing to confirm: what was parked runs next */
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
		if (resolve_send(p, w, res->region_id, res->generation) !=
		    UCS_OK) {
			res->stale = true;
			resolved_unref(res);
			free(w);
		}
	}
}

void
resolve_peer_down(struct peer *p)
{
	struct peer_waiter *w;
	struct resolved *res, *next;

	while ((w = TAILQ_FIRST(&p->resolve_waiters)) != NULL) {
		TAILQ_REMOVE(&p->resolve_waiters, w, link);
		if (w->refresh != NULL) {
			resolved_unref(w->refresh);
			free(w);
		} else if (!w->retried && !p->d->shutting_down) {
			/* The connection went while the owner was asked: ask
			 * again over the next one (once), so a restarted owner
			 * answers STALE instead of the client hearing of a
			 * connection it never used. */
			w->retried = true;
			w->import = true;
			TAILQ_INSERT_TAIL(&p->connect_waiters, w, link);
		} else {
			reply_error(w->to, p->last_status, "%s", p->last_error);
			free(w);
		}
	}
	for (res = TAILQ_FIRST(&p->resolved); res != NULL; res = next) {
		next = TAILQ_NEXT(res, link);
		resolve_invalidate(res);
	}
}

void
resolve_peer_destroy(struct peer *p)
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
}

void
resolve_on_reply(struct peer *p, const struct am_msg *m)
{
	struct am_resolve_reply in;
	struct peer_waiter *w;
	struct resolved *res;
	ucs_status_t st;

	if (!resolve_read(m, &in, sizeof(in)))
		return;
	/* Only the asked peer answers: the gate gave us the endpoint. */
	TAILQ_FOREACH(w, &p->resolve_waiters, link)
	{
		if (w->token == in.token)
			break;
	}
	if (w == NULL)
		return; /* its client went away */
	TAILQ_REMOVE(&p->resolve_waiters, w, link);
	if (w->refresh != NULL) {
		resolve_refresh_done(p, w->refresh, &in, m);
		resolved_unref(w->refresh);
		/* what waited for this region runs now */
		p->d->resolve_hooks->settled(p);
		goto out;
	}
	if (in.status != RMA__V1__STATUS__OK) {
		reply_error(w->to, RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
			    "daemon %s has no region %llu of this "
			    "descriptor (freed, or the daemon restarted)",
			    p->remote_id_hex,
			    (unsigned long long)w->descriptor.region_id);
		goto out;
	}
	if (in.rkey_len > AM_RKEY_MAX || m->length < sizeof(in) + in.rkey_len) {
		reply_error(w->to, RMA__V1__STATUS__ERR_PROTOCOL,
			    "peer %s sent a malformed resolve answer",
			    p->address);
		goto out;
	}
	res =
	    resolve_find(p, w->descriptor.region_id, w->descriptor.generation);
	if (res == NULL) {
		res = calloc(1, sizeof(*res));
		if (res == NULL) {
			reply_error(w->to, RMA__V1__STATUS__ERR_NO_MEMORY,
				    "out of memory");
			goto out;
		}
		st = resolve_unpack_rkey(p, &in, m->data, &res->rkey);
		if (st != UCS_OK) {
			free(res);
			reply_error(w->to, RMA__V1__STATUS__ERR_TRANSPORT,
				    "ucp_ep_rkey_unpack: %s",
				    ucs_status_string(st));
			goto out;
		}
		res->peer = p;
		res->region_id = w->descriptor.region_id;
		res->generation = w->descriptor.generation;
		res->addr = in.addr;
		res->length = in.length;
		res->read_only = (in.flags & AM_RESOLVE_READ_ONLY) != 0;
		res->valid = true;
		res->refs = 1; /* the peer's cache */
		TAILQ_INSERT_TAIL(&p->resolved, res, link);
	}
	resolve_reply_import(w->to, p, res, &w->descriptor);
out:
	free(w);
	worker_kick(p->d);
}

void
resolve_on_freed(struct peer *p, const struct am_msg *m)
{
	struct am_freed in;
	struct resolved *res, *next;

	if (!resolve_read(m, &in, sizeof(in)))
		return;
	/* Only the owner, over its own connection, frees its regions. */
	if (memcmp(p->remote_id, in.daemon_id, DAEMON_ID_SIZE) != 0)
		return;
	/* Every resolution of the region goes: through its full secret
	 * and through its read-only one (region ids are never reused by
	 * one run of the owner, whose id the descriptor names). */
	for (res = TAILQ_FIRST(&p->resolved); res != NULL; res = next) {
		next = TAILQ_NEXT(res, link);
		if (res->region_id != in.region_id || res->stale)
			continue;
		log_debug("resolve_on_freed: region %llu of %s freed",
			  (unsigned long long)in.region_id, p->remote_id_hex);
		res->stale = true;
		resolve_invalidate(res);
	}
}

/* ---- initiator side: a client's import ----------------------------------- */

static void
resolve_import_local(struct reply_to to, const struct descriptor *desc)
{
	struct region *r = region_lookup(to.conn->d, desc->region_id);
	struct resolved *res;

	if (r == NULL || (r->generation != desc->generation &&
			  r->ro_generation != desc->generation)) {
		reply_error(to, RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
			    "this daemon has no region %llu of this "
			    "descriptor (freed)",
			    (unsigned long long)desc->region_id);
		return;
	}
	res = calloc(1, sizeof(*res));
	if (res == NULL) {
		reply_error(to, RMA__V1__STATUS__ERR_NO_MEMORY,
			    "out of memory");
		return;
	}
	res->region_id = r->id;
	res->generation = desc->generation;
	res->read_only = r->generation != desc->generation;
	res->length = r->length;
	res->valid = true;
	res->refs = 1;
	resolve_reply_import(to, NULL, res, desc);
	resolved_unref(res);
}

/* desc names another daemon than p. STALE_DESCRIPTOR (rma.h: "region
 * freed or owner restarted") only when p had desc's id before its last
 * restart; otherwise the descriptor is good and the peer wrong, which no
 * retry through p mends: BAD_DESCRIPTOR, naming the owner's address when
 * it is a peer of ours. */
static void
resolve_refuse_other(struct reply_to to, struct peer *p,
		     const struct descriptor *desc)
{
	char hex[2 * DAEMON_ID_SIZE + 1];
	const struct peer *q, *owner = NULL;

	descriptor_hex(desc->daemon_id, DAEMON_ID_SIZE, hex);
	if (!p->self && p->has_previous &&
	    memcmp(desc->daemon_id, p->previous_id, DAEMON_ID_SIZE) == 0) {
		reply_error(to, RMA__V1__STATUS__ERR_STALE_DESCRIPTOR,
			    "descriptor belongs to daemon %s, which %s "
			    "was before it restarted (now daemon %s)",
			    hex, p->address, p->remote_id_hex);
		return;
	}
	TAILQ_FOREACH(q, &p->d->peers, link)
	{
		if (q->known && !q->inbound &&
		    memcmp(q->remote_id, desc->daemon_id, DAEMON_ID_SIZE) ==
			0) {
			owner = q;
			break;
		}
	}
	reply_error(to, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR,
		    "wrong peer: descriptor belongs to daemon %s, but %s "
		    "is %s %s; import it through its owner%s%s",
		    hex, p->address, p->self ? "this daemon," : "daemon",
		    p->remote_id_hex, owner != NULL ? ", at " : "",
		    owner != NULL ? owner->address : "");
}

/* The import of desc through p, which is up: asks the owner unless the
 * answer is cached. */
static void
resolve_import_from(struct reply_to to, struct peer *p,
		    const struct descriptor *desc)
{
	struct peer_waiter *w;
	struct resolved *res;
	ucs_status_t st;

	if (p->self ||
	    memcmp(desc->daemon_id, p->remote_id, DAEMON_ID_SIZE) != 0) {
		resolve_refuse_other(to, p, desc);
		return;
	}
	/* A cached answer may be older than a FREED notice still on its
	 * way: the target refuses the operations then (STALE). */
	res = resolve_find(p, desc->region_id, desc->generation);
	if (res != NULL) {
		resolve_reply_import(to, p, res, desc);
		return;
	}
	w = peer_waiter_new(to);
	if (w == NULL)
		return;
	w->descriptor = *desc;
	st = resolve_send(p, w, desc->region_id, desc->generation);
	if (st != UCS_OK) {
		free(w);
		reply_error(to, worker_status_from_ucs(st),
			    "resolve request to %s: %s", p->address,
			    ucs_status_string(st));
	}
}

void
resolve_import_waited(struct peer *p, struct peer_waiter *w)
{
	if (p->state == RMA__V1__PEER_STATE__PEER_UP)
		resolve_import_from(w->to, p, &w->descriptor);
	else
		reply_error(w->to, p->last_status, "%s", p->last_error);
}

void
resolve_handle_import(struct reply_to to, uint32_t peer_id, const char *text)
{
	struct daemon *d = to.conn->d;
	struct descriptor desc;
	struct peer_waiter *w;
	struct peer *p;

	if (descriptor_parse(text, strlen(text), &desc) < 0) {
		reply_error(to, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR,
			    "not a valid rma1 descriptor (corrupt, "
			    "truncated or wrong version)");
		return;
	}
	p = peer_lookup(d, peer_id);
	if (p == NULL) {
		reply_error(to, RMA__V1__STATUS__ERR_NO_PEER,
			    "no peer %u: connect to it first", peer_id);
		return;
	}
	if (memcmp(desc.daemon_id, d->id, DAEMON_ID_SIZE) == 0) {
		/* Ours: only through our own address, never through a peer
		 * that is another daemon. */
		if (p->self)
			resolve_import_local(to, &desc);
		else
			reply_error(
			    to, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR,
			    "wrong peer: descriptor belongs to this daemon, "
			    "not to %s; "
			    "import it through this daemon's own address",
			    p->address);
		return;
	}
	if (p->state == RMA__V1__PEER_STATE__PEER_UP) {
		resolve_import_from(to, p, &desc);
		return;
	}
	/* Down or connecting: wait for the connection (at most
	 * connect_timeout), then import; an import does not wait for the
	 * backoff, as a connect does not. */
	w = peer_waiter_new(to);
	if (w == NULL)
		return;
	w->descriptor = desc;
	w->import = true;
	TAILQ_INSERT_TAIL(&p->connect_waiters, w, link);
	peer_connect_now(p);
}
