/* SPDX-License-Identifier: BSD-2-Clause */
/* The handshake between daemons. It proves the far side is an rmad,
 * learns its identity and gives the connection one: the initiator's
 * daemon id, its lane (worker index), its path (which of the target's
 * addresses it dialed) and an epoch that grows with every connection it
 * opens. A target serves a connection only while it is the newest from
 * its origin (source address and the initiator's listen port), lane and
 * path; a newer one closes the older at the target before anything on it
 * is served, so a put that failed with the old connection can never land
 * after one made over the new.
 *
 *   initiator                             target
 *   HELLO (id, lane, epoch, nonce, dialed) -->
 *                                     <-- HELLO_REPLY (id, nonce', proof)
 *   HELLO_PROOF (proof')              -->   keyed only
 *                                     <-- HELLO_DONE           keyed only
 *
 * With a cluster key both sides prove they hold it before anything else
 * is served. The model is Noise's NNpsk0 (and WireGuard, built on Noise):
 * one transcript hash chains every byte both sides sent, and each proof
 * is a MAC, under a key drawn from the cluster key and that hash, of its
 * own role. So a proof is good only for this pair of nonces, these two
 * daemon ids, this address dialed and this direction: a process without
 * the key that relays a daemon's hello back to it, or to another daemon,
 * learns no proof it can use. Noise's ephemeral Diffie-Hellman is left
 * out: it would protect a session key, and no later message is keyed (the
 * transport below rmad's messages takes unauthenticated writes from any
 * connection it accepted, so a MAC on rmad's messages would stop no one
 * who can reach UCX; the README's Security section says what can).
 *
 * A daemon also refuses outright a hello carrying its own daemon id, or
 * a nonce of a hello it sent itself (world->issued), keyed or not.
 *
 * With several workers, a daemon has one connection per worker to a
 * target. When one fails, what it still had queued in the kernel may
 * reach the target once the network is back, after another worker's
 * connection carried a later put that completed. So a failure retires
 * every connection to that target (handshake_retire_others): the others
 * fail too, and every new hello carries the mark, an epoch, which closes
 * at the target every older connection of ours before the new one is
 * served. A process that took over its predecessor's identity (rmad
 * --take-over, a restart from the fd store) starts with a mark for every
 * target, its first epoch (retire.floor): what the predecessor left in
 * its sockets' queues as it exited must not land after a put of the new
 * process completed over another lane or to another address of the
 * target: every hello carries the floor (am_hello.floor), which closes
 * the predecessor's connections to any address. A floor never closes a
 * connection of the process itself, whose epochs all lie above it. */
#include "daemon.h"
#include "am.h"

#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

/* A refused handshake is logged at most this often: strangers may try
 * without end. */
#define HANDSHAKE_LOG_INTERVAL 30.0

/* The name the transcript starts from: another protocol, or another
 * version of this one, never shares a proof with it. */
#define HANDSHAKE_NAME "rmad handshake 3: NNpsk0-like, BLAKE2b, no DH"

static void handshake_send_reply(struct peer *p, unsigned id,
				 wire_status_t status);

/* Every connection a daemon opens gets a higher epoch than the last, in
 * this run and (the clock permitting) in any earlier one. */
static uint64_t
handshake_next_epoch(struct daemon *d)
{
	return __atomic_fetch_add(&d->world->next_epoch, 1, __ATOMIC_RELAXED);
}

/* ---- the nonces of our own hellos ---------------------------------------- */

static void
handshake_issued_add(struct world *w, const uint8_t *nonce)
{
	struct handshake_issued *s = &w->issued;

	pthread_mutex_lock(&s->lock);
	memcpy(s->nonce[s->next % HANDSHAKE_ISSUED], nonce, AM_NONCE_SIZE);
	s->next++;
	pthread_mutex_unlock(&s->lock);
}

/* Is nonce one of ours? Forgets it too when forget is set (its hello was
 * answered). An all-zero nonce is never ours: free slots are zero. */
static bool
handshake_issued_find(struct world *w, const uint8_t *nonce, bool forget)
{
	struct handshake_issued *s = &w->issued;
	bool found = false;
	uint32_t n;

	if (sodium_is_zero(nonce, AM_NONCE_SIZE))
		return false;
	pthread_mutex_lock(&s->lock);
	n = s->next < HANDSHAKE_ISSUED ? s->next : HANDSHAKE_ISSUED;
	for (uint32_t i = 0; i < n && !found; i++) {
		if (sodium_memcmp(s->nonce[i], nonce, AM_NONCE_SIZE) != 0)
			continue;
		found = true;
		if (forget)
			sodium_memzero(s->nonce[i], AM_NONCE_SIZE);
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

/* ---- the transcript and the proofs --------------------------------------- */

/* The address as the handshake binds it; false for another family. */
static bool
handshake_addr(const struct sockaddr_storage *ss, struct am_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		out->family = 4;
		out->port = ntohs(in->sin_port);
		memcpy(out->addr, &in->sin_addr, 4);
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		out->port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			out->family = 4;
			memcpy(out->addr, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			out->family = 6;
			memcpy(out->addr, in6->sin6_addr.s6_addr, 16);
		}
		return true;
	}
	return false;
}

/* Target: did the initiator dial the address this connection reached?
 * UCX gives the local address of the endpoint's connection (the
 * accepted socket of its listener). */
static bool
handshake_dialed_here(const struct peer *p, const struct am_addr *dialed)
{
	ucp_ep_attr_t attr = {.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR};
	struct am_addr here;

	if (p->ep == NULL || ucp_ep_query(p->ep, &attr) != UCS_OK ||
	    !handshake_addr(&attr.local_sockaddr, &here))
		return false;
	return memcmp(&here, dialed, sizeof(here)) == 0;
}

/* h = H(h | label | msg): one message more in the transcript. */
static void
handshake_mix(uint8_t *h, const char *label, const void *msg, size_t len)
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, AM_TRANSCRIPT_SIZE);
	crypto_generichash_update(&st, h, AM_TRANSCRIPT_SIZE);
	crypto_generichash_update(&st, (const uint8_t *)label,
				  strlen(label) + 1);
	crypto_generichash_update(&st, msg, len);
	crypto_generichash_final(&st, h, AM_TRANSCRIPT_SIZE);
}

/* The transcript of a hello: from the protocol's name, then the hello,
 * every byte of it up to its retire mark (both ids come with the
 * reply's). The mark joins only once the target says it read it
 * (handshake_transcript_more): a target of before hashes a hello of
 * AM_HELLO_SIZE_V3 bytes, and proves that. */
static void
handshake_transcript_hello(const struct am_hello *hello, uint8_t *h)
{
	crypto_generichash(h, AM_TRANSCRIPT_SIZE,
			   (const uint8_t *)HANDSHAKE_NAME,
			   strlen(HANDSHAKE_NAME), NULL, 0);
	handshake_mix(h, "hello", hello, AM_HELLO_SIZE_V3);
}

/* The fields a hello of before lacks, once the target says it read
 * them (am_hello_reply.flags), in this order on both sides. */
static void
handshake_transcript_more(const struct am_hello *hello, uint32_t flags,
			  uint8_t *h)
{
	if (flags & AM_HELLO_RETIRE)
		handshake_mix(h, "retire", &hello->retire,
			      sizeof(hello->retire));
	if (flags & AM_HELLO_FLOOR)
		handshake_mix(h, "floor", &hello->floor, sizeof(hello->floor));
}

/* The reply joins the transcript without its proof. */
static void
handshake_transcript_reply(const struct am_hello_reply *reply, uint8_t *h)
{
	struct am_hello_reply r = *reply;

	memset(r.proof, 0, sizeof(r.proof));
	handshake_mix(h, "reply", &r, sizeof(r));
}

/* The proof of one role: MAC(MAC(cluster key, h), role). */
static void
handshake_proof(const struct daemon *d, const uint8_t *h, const char *role,
		uint8_t *out)
{
	uint8_t k[AM_TRANSCRIPT_SIZE];

	crypto_generichash(k, sizeof(k), h, AM_TRANSCRIPT_SIZE,
			   d->cfg->peer_key, sizeof(d->cfg->peer_key));
	crypto_generichash(out, AM_PROOF_SIZE, (const uint8_t *)role,
			   strlen(role), k, sizeof(k));
	sodium_memzero(k, sizeof(k));
}

static bool
handshake_proof_ok(const struct daemon *d, const uint8_t *h, const char *role,
		   const uint8_t *proof)
{
	uint8_t want[AM_PROOF_SIZE];

	handshake_proof(d, h, role, want);
	return sodium_memcmp(want, proof, AM_PROOF_SIZE) == 0;
}

/* ---- retiring the connections to a target -------------------------------- */

static struct handshake_retire_entry *
handshake_retire_find(struct handshake_retire *r, const struct am_addr *target)
{
	for (uint32_t i = 0; i < r->n; i++) {
		if (memcmp(&r->mark[i].target, target, sizeof(*target)) == 0)
			return &r->mark[i];
	}
	return NULL;
}

/* The mark of target, 0 if none; r->lock held. */
static uint64_t
handshake_retire_epoch(struct handshake_retire *r, const struct am_addr *target)
{
	struct handshake_retire_entry *e = handshake_retire_find(r, target);

	return e != NULL ? e->epoch : 0;
}

/* r->lock held. Full, the oldest mark gives way: its connections failed
 * the longest ago, and every one since was opened with it. */
static void
handshake_retire_set(struct handshake_retire *r, const struct am_addr *target,
		     uint64_t epoch)
{
	struct handshake_retire_entry *e = handshake_retire_find(r, target);

	if (e == NULL && r->n < HANDSHAKE_RETIRE_MAX)
		e = &r->mark[r->n++];
	for (uint32_t i = 0; e == NULL && i < r->n; i++) {
		if (i == 0 || r->mark[i].epoch < e->epoch)
			e = &r->mark[i];
	}
	e->target = *target;
	e->epoch = epoch;
}

static void
handshake_retire_job(struct daemon *d, void *arg)
{
	(void)arg;
	handshake_retire_catch_up(d);
}

void
handshake_retire_others(struct peer *p)
{
	struct daemon *d = p->d;
	struct world *w = d->world;
	struct handshake_retire *r = &w->retire;
	struct am_addr target;

	/* Not for a connection a mark failed, and not while the daemon
	 * stops: no hello follows, and other workers' mailboxes may be
	 * closed already. */
	if (p->inbound || p->self || p->retired || d->shutting_down ||
	    w->joined || __atomic_load_n(&w->shutdown, __ATOMIC_ACQUIRE) ||
	    !handshake_addr(&p->sa, &target))
		return;
	/* The mark is an epoch drawn under the lock hellos take theirs in:
	 * a connection opened after it has a higher epoch and carries it,
	 * one opened before has a lower one and is retired. */
	pthread_mutex_lock(&r->lock);
	handshake_retire_set(r, &target, handshake_next_epoch(d));
	__atomic_fetch_add(&r->seq, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&r->lock);
	/* Idle workers close theirs now; a busy one catches up before its
	 * next operation anyway (op_submit). */
	for (uint32_t i = 0; i < w->n; i++) {
		if (w->workers[i] != d)
			world_post(w->workers[i], handshake_retire_job, NULL);
	}
}

void
handshake_retire_catch_up(struct daemon *d)
{
	struct handshake_retire *r = &d->world->retire;
	uint64_t seq = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
	struct peer *p;

	if (seq == d->retire_seen)
		return;
	d->retire_seen = seq;
	TAILQ_FOREACH(p, &d->peers, link)
	{
		struct am_addr target;
		uint64_t mark;

		if (p->inbound || p->self ||
		    p->state == RMA__V1__PEER_STATE__PEER_DOWN ||
		    !handshake_addr(&p->sa, &target))
			continue;
		pthread_mutex_lock(&r->lock);
		mark = handshake_retire_epoch(r, &target);
		pthread_mutex_unlock(&r->lock);
		if (p->epoch >= mark)
			continue;
		p->retired = true;
		peer_fail(p, UCS_ERR_CANCELED,
			  "closed: another worker's connection to it failed, "
			  "and an older connection must not carry later "
			  "operations");
		p->retired = false;
	}
}

/* ---- the handshake ------------------------------------------------------- */

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
	handshake_addr(&p->sa, &hello->dialed);
	pthread_mutex_lock(&d->world->retire.lock);
	hello->epoch = p->epoch = handshake_next_epoch(d);
	hello->retire =
	    handshake_retire_epoch(&d->world->retire, &hello->dialed);
	pthread_mutex_unlock(&d->world->retire.lock);
	/* A target of before reads no floor: as a mark, the floor still
	 * closes the predecessor's connections to this address there. */
	if (hello->retire < d->world->retire.floor)
		hello->retire = d->world->retire.floor;
	hello->lane = p->lane = (uint16_t)d->index;
	hello->path = p->path = p->id;
	hello->listen_port = d->world->learned.listen_port;
	hello->floor = d->world->retire.floor;
	hello->flags =
	    AM_HELLO_PUT_ACK_RANGES | AM_HELLO_RETIRE | AM_HELLO_FLOOR;
	if (d->cfg->peer_key_set)
		hello->flags |= AM_HELLO_KEYED;
	randombytes_buf(hello->nonce, sizeof(hello->nonce));
	handshake_issued_add(d->world, hello->nonce);
	handshake_transcript_hello(hello, p->transcript);
	return am_send(p, AM_HELLO, NULL, 0, hello, sizeof(*hello), NULL);
}

/* Initiator: the target accepted; learn who it is. */
static void
handshake_up_as(struct peer *p, const uint8_t *daemon_id)
{
	bool restarted =
	    p->known && memcmp(p->remote_id, daemon_id, DAEMON_ID_SIZE) != 0;

	if (restarted) {
		memcpy(p->previous_id, p->remote_id, DAEMON_ID_SIZE);
		p->has_previous = true;
	}
	memcpy(p->remote_id, daemon_id, DAEMON_ID_SIZE);
	descriptor_hex(p->remote_id, DAEMON_ID_SIZE, p->remote_id_hex);
	p->known = true;
	peer_set_up(p);
	p->d->peer_hooks->up(p, restarted);
}

/* Fails p, closing its endpoint only once what was just sent to it (a
 * refusal saying why) can reach the far end: a forced close would drop
 * it. connect_timeout bounds the wait.
 *
 * Sent is not enough for an answer the far end must read. UCX 1.13 tells
 * the far end of our close over the connection manager's socket, and the
 * answer went over the tcp lane, another socket. The far end's async
 * thread takes the disconnect and queues ucp_ep_cm_disconnect_progress
 * (src/ucp/wireup/wireup_cm.c, v1.13.1) for its next worker progress,
 * which fails the endpoint and destroys its lanes: an answer still unread
 * on the lane goes with them, though it was on the wire first (hostile
 * reflect lost one in 8 of 40 runs on a loaded host, up to 25 ms between
 * the answer and the close; an rmad initiator would report an older
 * daemon protocol). So the target, which answers last, leaves the close
 * to the initiator, which closes once it has read the answer (linger
 * HEARD; peer_on_ep_error ends it). An initiator that refuses closes once
 * its last word was sent (linger SENT): the target answers a refused
 * proof and waits for that close. A refused peer serves nothing meanwhile
 * (state DOWN), and peer_fail closed its guard entry: the wait holds no
 * more than a connection that never says hello. */
static void
handshake_refuse(struct peer *p, enum peer_linger linger, const char *detail)
{
	p->linger = linger;
	peer_fail(p, UCS_ERR_REJECTED, detail);
}

/* Initiator: why a refusal came, in words for the client. */
static const char *
handshake_refusal_detail(const struct am_hello_reply *in)
{
	if (in->status == RMA__V1__STATUS__ERR_VERSION)
		return "refused: it speaks another daemon protocol version "
		       "(rmad versions differ)";
	if (in->status == RMA__V1__STATUS__ERR_PERMISSION)
		return "refused: it took our hello for a reflected or relayed "
		       "one (its own daemon id, or an address it was not "
		       "reached at: address translation between the two?)";
	if (in->flags & AM_HELLO_KEYED)
		return "refused: it requires a cluster key (peer_key_file)";
	return "refused the connection";
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
	handshake_issued_find(d->world, p->hello.nonce, true);
	if (in.status != RMA__V1__STATUS__OK) {
		peer_fail(p, UCS_ERR_REJECTED, handshake_refusal_detail(&in));
		return;
	}
	if (!(in.flags & AM_HELLO_KEYED) != !d->cfg->peer_key_set) {
		peer_fail(p, UCS_ERR_REJECTED,
			  d->cfg->peer_key_set
			      ? "does not prove a cluster key, and this "
				"daemon requires one"
			      : "requires a cluster key (peer_key_file)");
		return;
	}
	/* Our own reply, or our own nonce, come back: a reflection. */
	if (memcmp(in.daemon_id, d->id, DAEMON_ID_SIZE) == 0 ||
	    (d->cfg->peer_key_set &&
	     (sodium_memcmp(in.nonce, p->hello.nonce, AM_NONCE_SIZE) == 0 ||
	      handshake_issued_find(d->world, in.nonce, false)))) {
		d->counters.auth_failures++;
		handshake_refuse(p, PEER_LINGER_SENT,
				 "answered with this daemon's own id or "
				 "nonce (a reflected connection)");
		return;
	}
	if (!d->cfg->peer_key_set) {
		handshake_up_as(p, in.daemon_id);
		return;
	}
	memset(&proof, 0, sizeof(proof));
	proof.magic = AM_MAGIC;
	proof.token = p->hello.token;
	handshake_transcript_more(&p->hello, in.flags, p->transcript);
	handshake_transcript_reply(&in, p->transcript);
	if (!handshake_proof_ok(d, p->transcript, "target", in.proof)) {
		/* An empty proof, so that the target counts the failure
		 * too, and hears it before the endpoint closes. */
		d->counters.auth_failures++;
		am_send(p, AM_HELLO_PROOF, NULL, 0, &proof, sizeof(proof),
			NULL);
		handshake_refuse(p, PEER_LINGER_SENT,
				 "failed the cluster key proof (another key?)");
		return;
	}
	handshake_proof(d, p->transcript, "initiator", proof.proof);
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
	out.version = AM_VERSION;
	memcpy(out.daemon_id, d->id, DAEMON_ID_SIZE);
	out.flags = AM_HELLO_GET_RANGES |
		    (p->hello.flags & (AM_HELLO_RETIRE | AM_HELLO_FLOOR));
	if (d->cfg->peer_key_set && status != RMA__V1__STATUS__ERR_VERSION) {
		out.flags |= AM_HELLO_KEYED;
		if (id == AM_HELLO_REPLY && status == RMA__V1__STATUS__OK) {
			randombytes_buf(out.nonce, sizeof(out.nonce));
			handshake_transcript_reply(&out, p->transcript);
			handshake_proof(d, p->transcript, "target", out.proof);
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
 * lane, and every older one is closed before p is served, as is every
 * one of its daemon to the address p dialed below p's retire mark, on
 * any lane. A mark names one address of ours, as the initiator keeps
 * them: another address's connections are not its to close (were they,
 * two addresses in use would close each other's in turn). Below p's
 * floor every connection of its daemon is a predecessor's: closed
 * whatever the address dialed, and, keyed (the daemon id proven), from
 * any source address of its host (handshake_predecessor). False if p is
 * itself the older one (its hello came late). */
/* Target: q, of another origin than p, is a connection the process
 * that took its daemon's place (p's) left behind: the same proven daemon
 * id and listen port, from another source address of that host, below
 * p's floor. Unkeyed, a daemon id proves nothing, and a process on any
 * allowed host could close another host's connections: only p's origin
 * is closed then. */
static bool
handshake_predecessor(const struct peer *p, const struct peer *q)
{
	return p->d->cfg->peer_key_set && q->epoch < p->hello.floor &&
	       q->origin_port == p->origin_port &&
	       memcmp(q->remote_id, p->remote_id, DAEMON_ID_SIZE) == 0;
}

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
		    q->state != RMA__V1__PEER_STATE__PEER_UP)
			continue;
		if (!handshake_same_origin(p, q)) {
			if (handshake_predecessor(p, q))
				peer_fail(q, UCS_ERR_CANCELED,
					  "its daemon's process was replaced "
					  "(a take-over or a restart): "
					  "connection of the predecessor "
					  "closed");
			continue;
		}
		if (memcmp(q->remote_id, p->remote_id, DAEMON_ID_SIZE) != 0)
			peer_fail(q, UCS_ERR_CANCELED,
				  "its daemon restarted: connection closed");
		else if (q->lane == p->lane && q->path == p->path)
			peer_fail(q, UCS_ERR_CANCELED,
				  "replaced by a newer connection from the "
				  "same daemon");
		else if (q->epoch < p->hello.retire &&
			 memcmp(&q->hello.dialed, &p->hello.dialed,
				sizeof(p->hello.dialed)) == 0)
			peer_fail(q, UCS_ERR_CANCELED,
				  "retired by a newer connection from the same "
				  "daemon (a connection of its failed)");
		else if (q->epoch < p->hello.floor)
			peer_fail(q, UCS_ERR_CANCELED,
				  "its daemon's process was replaced (a "
				  "take-over or a restart): connection of the "
				  "predecessor closed");
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

/* Target: a refused hello is answered (so that the initiator hears why
 * before the endpoint closes), counted, and logged now and then. */
static void
handshake_refuse_hello(struct peer *p, wire_status_t status, const char *why)
{
	struct daemon *d = p->d;
	static struct log_limit limit;

	d->counters.auth_failures++;
	if (log_limit_pass(&limit, HANDSHAKE_LOG_INTERVAL)) {
		log_warn("handshake_on_hello: %s: hello refused: %s (%llu "
			 "handshakes refused so far)",
			 p->address, why,
			 (unsigned long long)d->counters.auth_failures);
	}
	handshake_send_reply(p, AM_HELLO_REPLY, status);
	handshake_refuse(p, PEER_LINGER_HEARD, why);
}

/* Target: why the hello in must be refused, with the status to answer,
 * or NULL. ERR_PERMISSION says "not from you": a hello of our own come
 * back, or one sent to another address. */
static const char *
handshake_hello_refusal(const struct peer *p, const struct am_hello *in,
			wire_status_t *status_p)
{
	struct daemon *d = p->d;

	*status_p = RMA__V1__STATUS__ERR_PERMISSION;
	if (memcmp(in->daemon_id, d->id, DAEMON_ID_SIZE) == 0)
		return "it carries this daemon's own id (a reflected hello)";
	if (handshake_issued_find(d->world, in->nonce, false))
		return "it carries a nonce this daemon issued (a reflected "
		       "hello)";
	if (!d->cfg->peer_key_set)
		return NULL;
	if (!(in->flags & AM_HELLO_KEYED)) {
		*status_p = RMA__V1__STATUS__ERR_REJECTED;
		return "holds no cluster key";
	}
	if (!handshake_dialed_here(p, &in->dialed))
		return "it was dialed to another address (a relayed hello, "
		       "or address translation between the daemons)";
	return NULL;
}

void
handshake_on_hello(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct am_hello_head head;
	struct am_hello in;
	wire_status_t status;
	const char *why;

	if (m->length < sizeof(head) ||
	    p->state != RMA__V1__PEER_STATE__PEER_CONNECTING ||
	    p->await_proof || p->known)
		return;
	memcpy(&head, m->data, sizeof(head));
	if (head.magic != AM_MAGIC) {
		peer_fail(p, UCS_ERR_UNSUPPORTED, "not an rmad");
		return;
	}
	if (head.version != AM_VERSION) {
		char detail[96];

		/* Answered, so that the initiator can say so: a protocol 2
		 * one reads the reply's first fields as its own. */
		p->hello.token = head.token;
		snprintf(detail, sizeof(detail),
			 "it speaks daemon protocol %u, this rmad %u",
			 head.version, AM_VERSION);
		handshake_refuse_hello(p, RMA__V1__STATUS__ERR_VERSION, detail);
		return;
	}
	/* A hello of before ends at the retire mark or the floor, which
	 * count as 0. */
	memset(&in, 0, sizeof(in));
	memcpy(&in, m->data, m->length < sizeof(in) ? m->length : sizeof(in));
	if (m->length < AM_HELLO_SIZE_V3 ||
	    (m->length < AM_HELLO_SIZE_V4 && (in.flags & AM_HELLO_RETIRE)) ||
	    (m->length < sizeof(in) && (in.flags & AM_HELLO_FLOOR))) {
		peer_fail(p, UCS_ERR_UNSUPPORTED, "a short hello");
		return;
	}
	if (!(in.flags & AM_HELLO_RETIRE))
		in.retire = 0;
	if (!(in.flags & AM_HELLO_FLOOR))
		in.floor = 0;
	p->hello = in;
	why = handshake_hello_refusal(p, &in, &status);
	if (why != NULL) {
		handshake_refuse_hello(p, status, why);
		return;
	}
	memcpy(p->remote_id, in.daemon_id, DAEMON_ID_SIZE);
	p->epoch = in.epoch;
	p->lane = in.lane;
	p->path = in.path;
	p->origin_port = in.listen_port;
	p->put_ack_ranges = (in.flags & AM_HELLO_PUT_ACK_RANGES) != 0;
	if (!d->cfg->peer_key_set) {
		handshake_accept(p, AM_HELLO_REPLY);
		return;
	}
	handshake_transcript_hello(&in, p->transcript);
	handshake_transcript_more(&in, in.flags, p->transcript);
	p->await_proof = true;
	handshake_send_reply(p, AM_HELLO_REPLY, RMA__V1__STATUS__OK);
}

void
handshake_on_proof(struct peer *p, const struct am_msg *m)
{
	struct daemon *d = p->d;
	struct am_hello_proof in;
	static struct log_limit limit;

	if (m->length < sizeof(in) ||
	    p->state != RMA__V1__PEER_STATE__PEER_CONNECTING || !p->await_proof)
		return;
	memcpy(&in, m->data, sizeof(in));
	p->await_proof = false;
	if (in.magic != AM_MAGIC || in.token != p->hello.token ||
	    !handshake_proof_ok(d, p->transcript, "initiator", in.proof)) {
		d->counters.auth_failures++;
		/* Rate-limited: a stranger may try without end. */
		if (log_limit_pass(&limit, HANDSHAKE_LOG_INTERVAL)) {
			log_warn("handshake_on_proof: %s failed the cluster "
				 "key proof (%llu failures so far)",
				 p->address,
				 (unsigned long long)d->counters.auth_failures);
		}
		handshake_send_reply(p, AM_HELLO_DONE,
				     RMA__V1__STATUS__ERR_REJECTED);
		handshake_refuse(p, PEER_LINGER_HEARD,
				 "failed the cluster key proof");
		return;
	}
	handshake_accept(p, AM_HELLO_DONE);
}
