/* SPDX-License-Identifier: BSD-2-Clause */
/* The handshake between daemons. It proves the far side is an rmad,
 * learns its identity and gives the connection one: the initiator's
 * daemon id, its lane (worker index), its path (which of the target's
 * addresses it dialed) and an epoch that grows with every connection it
 * opens. A target serves a connection only while it is the newest from
 * its origin (source address and the initiator's listen port), lane and
 * path; a newer one closes the older at the target before anything on it
 * is served, so a put that failed with the old connection can never land
 * after one made over the new. With a cluster key both sides prove they
 * hold it (challenge and response, keyed BLAKE2b) before anything else
 * is served:
 *
 *   initiator                          target
 *   HELLO (id, lane, epoch, nonce) -->
 *                                  <-- HELLO_REPLY (id, nonce', proof)
 *   HELLO_PROOF (proof')           -->   keyed only
 *                                  <-- HELLO_DONE                keyed only
 */
#include "daemon.h"
#include "am.h"

#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

/* A failed proof is logged at most this often: strangers may try
 * without end. */
#define HANDSHAKE_LOG_INTERVAL 30.0

static void handshake_send_reply(struct peer *p, unsigned id,
				 wire_status_t status);

/* Every connection a daemon opens gets a higher epoch than the last, in
 * this run and (the clock permitting) in any earlier one. */
static uint64_t
handshake_next_epoch(struct daemon *d)
{
	return __atomic_fetch_add(&d->world->next_epoch, 1, __ATOMIC_RELAXED);
}

/* Initiator: the first message on a new endpoint. */
ucs_status_t
handshake_start(struct peer *p)
{
	struct daemon *d = p->d;
	struct am_hello *hello = &p->hello;

	memset(hello, 0, sizeof(*hello));
	hello->magic = AM_MAGIC;
	hello->version = AM_VERSION;
	hello->token = d->next_token++;
	memcpy(hello->daemon_id, d->id, DAEMON_ID_SIZE);
	hello->epoch = p->epoch = handshake_next_epoch(d);
	hello->lane = p->lane = (uint16_t)d->index;
	hello->path = p->path = p->id;
	hello->listen_port = d->cfg.listen_port;
	hello->flags = AM_HELLO_PUT_ACK_RANGES;
	if (d->cfg.peer_key_set) {
		hello->flags |= AM_HELLO_KEYED;
		randombytes_buf(hello->nonce, sizeof(hello->nonce));
	}
	return am_send(p, AM_HELLO, NULL, 0, hello, sizeof(*hello), NULL);
}

/* MAC(key, label | hello | nonce): what each side proves with. */
static void
handshake_proof(const struct daemon *d, const char *label,
		const struct am_hello *hello, const uint8_t *nonce,
		uint8_t *out)
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, d->cfg.peer_key, sizeof(d->cfg.peer_key),
				AM_PROOF_SIZE);
	crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
	crypto_generichash_update(&st, (const uint8_t *)hello, sizeof(*hello));
	crypto_generichash_update(&st, nonce, AM_NONCE_SIZE);
	crypto_generichash_final(&st, out, AM_PROOF_SIZE);
}

static bool
handshake_proof_ok(const struct daemon *d, const char *label,
		   const struct am_hello *hello, const uint8_t *nonce,
		   const uint8_t *proof)
{
	uint8_t want[AM_PROOF_SIZE];

	handshake_proof(d, label, hello, nonce, want);
	return sodium_memcmp(want, proof, AM_PROOF_SIZE) == 0;
}

/* Initiator: the target accepted; learn who it is. */
static void
handshake_up_as(struct peer *p, const uint8_t *daemon_id)
{
	bool restarted =
	    p->known && memcmp(p->remote_id, daemon_id, DAEMON_ID_SIZE) != 0;

	memcpy(p->remote_id, daemon_id, DAEMON_ID_SIZE);
	descriptor_hex(p->remote_id, DAEMON_ID_SIZE, p->remote_id_hex);
	p->known = true;
	peer_set_up(p);
	resolve_peer_up(p, restarted);
}

/* Fails p once what was just sent to it (a refusal saying why) has left:
 * a forced close would drop it. connect_timeout bounds the wait. */
static void
handshake_refuse(struct peer *p, const char *detail)
{
	p->linger = true;
	peer_fail(p, UCS_ERR_REJECTED, detail);
}

void
handshake_on_reply(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct am_hello_reply in;
	struct am_hello_proof proof;

	if (m->length < sizeof(in) ||
	    p->state != RMA__V1__PEER_STATE__PEER_CONNECTING || p->await_proof)
		return;
	memcpy(&in, m->data, sizeof(in));
	if (in.magic != AM_MAGIC || in.token != p->hello.token)
		return;
	p->answered = true; /* an rmad, whatever it says next */
	p->get_ranges = (in.flags & AM_HELLO_GET_RANGES) != 0;
	if (in.status != RMA__V1__STATUS__OK) {
		peer_fail(p, UCS_ERR_REJECTED,
			  in.flags & AM_HELLO_KEYED
			      ? "refused: it requires a cluster key "
				"(peer_key_file)"
			      : "refused the connection");
		return;
	}
	if (!(in.flags & AM_HELLO_KEYED) != !d->cfg.peer_key_set) {
		peer_fail(p, UCS_ERR_REJECTED,
			  d->cfg.peer_key_set
			      ? "does not prove a cluster key, and this "
				"daemon requires one"
			      : "requires a cluster key (peer_key_file)");
		return;
	}
	if (!d->cfg.peer_key_set) {
		handshake_up_as(p, in.daemon_id);
		return;
	}
	memset(&proof, 0, sizeof(proof));
	proof.magic = AM_MAGIC;
	proof.token = p->hello.token;
	if (!handshake_proof_ok(d, "rmad-target", &p->hello, in.nonce,
				in.proof)) {
		/* An empty proof, so that the target counts the failure
		 * too, and hears it before the endpoint closes. */
		d->counters.auth_failures++;
		am_send(p, AM_HELLO_PROOF, NULL, 0, &proof, sizeof(proof),
			NULL);
		handshake_refuse(p,
				 "failed the cluster key proof (another key?)");
		return;
	}
	handshake_proof(d, "rmad-initiator", &p->hello, in.nonce, proof.proof);
	p->await_proof = true; /* ours is sent: wait for HELLO_DONE */
	am_send(p, AM_HELLO_PROOF, NULL, 0, &proof, sizeof(proof), NULL);
}

void
handshake_on_done(struct peer *p, const struct am_msg *m)
{
	struct am_hello_reply in;

	if (m->length < sizeof(in) ||
	    p->state != RMA__V1__PEER_STATE__PEER_CONNECTING || !p->await_proof)
		return;
	memcpy(&in, m->data, sizeof(in));
	if (in.magic != AM_MAGIC || in.token != p->hello.token)
		return;
	p->await_proof = false;
	if (in.status != RMA__V1__STATUS__OK) {
		peer_fail(p, UCS_ERR_REJECTED, "refused our key proof");
		return;
	}
	handshake_up_as(p, in.daemon_id);
}

static void
handshake_send_reply(struct peer *p, unsigned id, wire_status_t status)
{
	struct daemon *d = p->d;
	struct am_hello_reply out;

	memset(&out, 0, sizeof(out));
	out.magic = AM_MAGIC;
	out.status = status;
	out.token = p->hello.token;
	memcpy(out.daemon_id, d->id, DAEMON_ID_SIZE);
	out.flags = AM_HELLO_GET_RANGES;
	if (d->cfg.peer_key_set) {
		out.flags |= AM_HELLO_KEYED;
		if (id == AM_HELLO_REPLY && status == RMA__V1__STATUS__OK) {
			memcpy(out.nonce, p->nonce, AM_NONCE_SIZE);
			handshake_proof(d, "rmad-target", &p->hello, p->nonce,
					out.proof);
		}
	}
	am_send(p, id, NULL, 0, &out, sizeof(out), NULL);
}

static bool
handshake_same_origin(const struct peer *a, const struct peer *b)
{
	const struct sockaddr_storage *x = &a->sa, *y = &b->sa;

	if (a->origin_port != b->origin_port || x->ss_family != y->ss_family)
		return false;
	if (x->ss_family == AF_INET)
		return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)y)->sin_addr.s_addr;
	if (x->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
			      &((const struct sockaddr_in6 *)y)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return false;
}

/* Target: p proved itself; it becomes the connection of its origin and
 * lane, and every older one is closed before p is served. False if p is
 * itself the older one (its hello came late). */
static bool
handshake_take_over(struct peer *p)
{
	struct daemon *d = p->d;
	struct peer *q;

	TAILQ_FOREACH(q, &d->peers, link)
	{
		if (q == p || !q->inbound ||
		    q->state != RMA__V1__PEER_STATE__PEER_UP ||
		    !handshake_same_origin(p, q))
			continue;
		if (memcmp(q->remote_id, p->remote_id, DAEMON_ID_SIZE) == 0 &&
		    q->lane == p->lane && q->path == p->path &&
		    q->epoch >= p->epoch)
			return false;
	}
	TAILQ_FOREACH(q, &d->peers, link)
	{
		if (q == p || !q->inbound ||
		    q->state != RMA__V1__PEER_STATE__PEER_UP ||
		    !handshake_same_origin(p, q))
			continue;
		if (memcmp(q->remote_id, p->remote_id, DAEMON_ID_SIZE) != 0)
			peer_fail(q, UCS_ERR_CANCELED,
				  "its daemon restarted: connection closed");
		else if (q->lane == p->lane && q->path == p->path)
			peer_fail(q, UCS_ERR_CANCELED,
				  "replaced by a newer connection from the "
				  "same daemon");
	}
	return true;
}

/* Target: serve p from now on and tell it so (reply_id), or close it
 * unanswered if a newer connection from its origin and lane exists. */
static void
handshake_accept(struct peer *p, unsigned reply_id)
{
	if (!handshake_take_over(p)) {
		p->d->counters.inbound_refused++;
		peer_fail(p, UCS_ERR_CANCELED,
			  "an older connection of its daemon: closed");
		return;
	}
	descriptor_hex(p->remote_id, DAEMON_ID_SIZE, p->remote_id_hex);
	p->known = true;
	peer_set_up(p);
	handshake_send_reply(p, reply_id, RMA__V1__STATUS__OK);
}

void
handshake_on_hello(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct am_hello in;

	if (m->length < sizeof(in) ||
	    p->state != RMA__V1__PEER_STATE__PEER_CONNECTING ||
	    p->await_proof || p->known)
		return;
	memcpy(&in, m->data, sizeof(in));
	if (in.magic != AM_MAGIC || in.version != AM_VERSION) {
		peer_fail(p, UCS_ERR_UNSUPPORTED,
			  "not an rmad of protocol version 2");
		return;
	}
	p->hello = in;
	memcpy(p->remote_id, in.daemon_id, DAEMON_ID_SIZE);
	p->epoch = in.epoch;
	p->lane = in.lane;
	p->path = in.path;
	p->origin_port = in.listen_port;
	p->put_ack_ranges = (in.flags & AM_HELLO_PUT_ACK_RANGES) != 0;
	if (!d->cfg.peer_key_set) {
		handshake_accept(p, AM_HELLO_REPLY);
		return;
	}
	if (!(in.flags & AM_HELLO_KEYED)) {
		handshake_send_reply(p, AM_HELLO_REPLY,
				     RMA__V1__STATUS__ERR_REJECTED);
		d->counters.auth_failures++;
		handshake_refuse(p, "holds no cluster key");
		return;
	}
	randombytes_buf(p->nonce, sizeof(p->nonce));
	p->await_proof = true;
	handshake_send_reply(p, AM_HELLO_REPLY, RMA__V1__STATUS__OK);
}

void
handshake_on_proof(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct am_hello_proof in;
	static double last_logged;

	if (m->length < sizeof(in) ||
	    p->state != RMA__V1__PEER_STATE__PEER_CONNECTING || !p->await_proof)
		return;
	memcpy(&in, m->data, sizeof(in));
	p->await_proof = false;
	if (in.magic != AM_MAGIC || in.token != p->hello.token ||
	    !handshake_proof_ok(d, "rmad-initiator", &p->hello, p->nonce,
				in.proof)) {
		d->counters.auth_failures++;
		/* Rate-limited: a stranger may try without end. */
		if (daemon_now() - last_logged > HANDSHAKE_LOG_INTERVAL) {
			last_logged = daemon_now();
			log_warn("handshake_on_proof: %s failed the cluster "
				 "key proof (%llu failures so far)",
				 p->address,
				 (unsigned long long)d->counters.auth_failures);
		}
		handshake_send_reply(p, AM_HELLO_DONE,
				     RMA__V1__STATUS__ERR_REJECTED);
		handshake_refuse(p, "failed the cluster key proof");
		return;
	}
	handshake_accept(p, AM_HELLO_DONE);
}
