/* SPDX-License-Identifier: BSD-2-Clause */
/* Other daemons: one UCX endpoint per remote daemon and worker, shared by
 * every local client of that worker; a peer's state, its failure and the
 * closing of its endpoint (never inside a UCX callback: at the next
 * tick); its one timer; deadlines. Connecting out and reconnecting is
 * peer_connect.c. The messages pass the door in am.c; who is at the other
 * end is handshake.c, connections other daemons open are listener.c,
 * descriptor resolution is resolve.c. */
#include "daemon.h"
#include "snapshot.h"
#include "am.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A peer that keeps failing is warned about at most this often. */
#define PEER_WARN_INTERVAL 30.0

static void peer_notify(struct peer *p);

const char *
peer_state_name(Rma__V1__PeerState s)
{
	switch (s) {
	case RMA__V1__PEER_STATE__PEER_CONNECTING:
		return "connecting";
	case RMA__V1__PEER_STATE__PEER_UP:
		return "up";
	case RMA__V1__PEER_STATE__PEER_DOWN:
		return "down";
	default:
		return "?";
	}
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

/* One timer per peer: the connect or handshake deadline while
 * connecting, the end of the backoff while down with operations parked. */
void
peer_timer_start(struct peer *p, double seconds)
{
	struct timeval tv;

	if (p->connect_timer == NULL)
		p->connect_timer = evtimer_new(p->d->base, peer_on_timer, p);
	if (p->connect_timer == NULL)
		return;
	tv = worker_timeval(seconds);
	evtimer_add(p->connect_timer, &tv);
}

/* ---- state ------------------------------------------------------------- */

void
peer_reply_connect(struct peer *p, struct peer_waiter *w, wire_status_t st)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__PeerConnectReply body = RMA__V1__PEER_CONNECT_REPLY__INIT;

	reply.status = st;
	if (st == RMA__V1__STATUS__OK) {
		body.peer_id = p->id;
		body.daemon_id = p->remote_id_hex;
		reply.body_case = RMA__V1__REPLY__BODY_PEER_CONNECT;
		reply.peer_connect = &body;
	} else {
		reply.detail = p->last_error;
	}
	reply_send(w->to, &reply, -1);
}

void
peer_set_up(struct peer *p)
{
	struct peer_waiter *w;

	if (p->connect_timer)
		event_del(p->connect_timer);
	peer_probe_stop(p);
	p->state = RMA__V1__PEER_STATE__PEER_UP;
	p->state_since = daemon_now();
	p->last_status = RMA__V1__STATUS__OK;
	p->last_error[0] = '\0';
	p->attempt_pending = false;
	p->backoff = 0;
	/* Its handshake is done: UCX has made its connections. */
	guard_seal(p->guard);
	log_info("peer_set_up: %s peer %u %s is daemon %s%s",
		 p->inbound ? "inbound" : "outbound", p->id, p->address,
		 p->remote_id_hex, p->self ? " (this daemon)" : "");
	if (p->inbound)
		return;
	peer_notify(p);
	while ((w = TAILQ_FIRST(&p->connect_waiters)) != NULL) {
		TAILQ_REMOVE(&p->connect_waiters, w, link);
		if (w->import)
			p->d->peer_hooks->import_waited(p, w);
		else
			peer_reply_connect(p, w, RMA__V1__STATUS__OK);
		free(w);
	}
}

/* ---- endpoints ----------------------------------------------------------- */

void
peer_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct peer *p = arg;
	bool lost;

	/* The far end closed a connection whose handshake we refused: it
	 * read the refusal, or never will. Ours closes now. */
	if (p->linger == PEER_LINGER_HEARD) {
		p->linger = PEER_LINGER_NONE;
		worker_kick(p->d);
		return;
	}
	/* Once a connection was up, UCX 1.13's tcp path names its loss in
	 * several ways ("Endpoint timeout", "Destination is unreachable",
	 * "Endpoint is not connected") when the far end closed, reset or
	 * died: nothing timed out, and nothing was unreachable. */
	lost =
	    status == UCS_ERR_ENDPOINT_TIMEOUT ||
	    status == UCS_ERR_CONNECTION_RESET ||
	    (p->state == RMA__V1__PEER_STATE__PEER_UP &&
	     (status == UCS_ERR_UNREACHABLE ||
	      status == UCS_ERR_NOT_CONNECTED || status == UCS_ERR_IO_ERROR));
	/* Something accepted the connection and closed it on our hello
	 * without a word: what an rmad of another daemon protocol (am.h,
	 * AM_VERSION) does; one of this protocol or later answers. */
	if (lost && !p->inbound && !p->answered && p->probe_ok &&
	    p->state == RMA__V1__PEER_STATE__PEER_CONNECTING)
		peer_fail(p, UCS_ERR_CONNECTION_RESET,
			  "closed by the far end before it answered our "
			  "hello (an rmad of an older daemon protocol "
			  "version does that)");
	else if (lost)
		peer_fail(p, UCS_ERR_CONNECTION_RESET,
			  "connection lost (closed or reset by the far end)");
	else
		peer_fail(p, status, ucs_status_string(status));
}

struct peer *
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
	TAILQ_INIT(&p->parked);
	TAILQ_INIT(&p->tx);
	TAILQ_INSERT_TAIL(&d->peers, p, link);
	return p;
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
	/* Nothing that still arrives on it is served, and UCX's sockets
	 * take no more connections for it. */
	am_detach(p);
	guard_close(&p->guard);
	/* Force: everything still on the endpoint completes (CANCELED). */
	/* Counted first: UCX may run the callback before it returns. */
	d->closing_eps++;
	sp = ucp_ep_close_nbx(p->ep, &param);
	p->ep = NULL;
	if (sp == NULL || UCS_PTR_IS_ERR(sp))
		d->closing_eps--;
}

void
peer_refuse_waiters(struct peer *p)
{
	struct peer_waiter *w;

	while ((w = TAILQ_FIRST(&p->connect_waiters)) != NULL) {
		TAILQ_REMOVE(&p->connect_waiters, w, link);
		reply_error(w->to,
			    p->d->shutting_down ? RMA__V1__STATUS__ERR_SHUTDOWN
						: RMA__V1__STATUS__ERR_CANCELED,
			    "peer %s: %s", p->address,
			    p->d->shutting_down ? "daemon shutting down"
						: "peer forgotten");
		free(w);
	}
}

void
peer_destroy(struct peer *p)
{
	p->d->peer_hooks->forget(p);
	peer_refuse_waiters(p);
	/* No peer goes without its endpoint: UCX 1.13 aborts in
	 * ucp_worker_destroy on one left open with a send queued while it
	 * connects (ucp_destroyed_ep_pending_purge). */
	peer_close_ep(p);
	am_detach(p);
	am_peer_gone(p);
	peer_probe_stop(p);
	guard_close(&p->guard);
	if (p->connect_timer)
		event_free(p->connect_timer);
	TAILQ_REMOVE(&p->d->peers, p, link);
	free(p);
}

bool
peer_lingers(const struct peer *p)
{
	switch (p->linger) {
	case PEER_LINGER_SENT:
		return p->tx_msgs > 0;
	case PEER_LINGER_HEARD:
		return true;
	case PEER_LINGER_NONE:
		break;
	}
	return false;
}

int
peer_close_failed(struct daemon *d)
{
	struct peer *p, *next;
	bool lingered;
	int closed = 0;

	if (d->failed_eps == 0)
		return 0;
	d->failed_eps = 0;
	for (p = TAILQ_FIRST(&d->peers); p != NULL; p = next) {
		next = TAILQ_NEXT(p, link);
		if (!p->ep_failed)
			continue;
		/* A refusal still on its way (am.c kicks once it left) or
		 * not yet read (peer_on_ep_error kicks once the far end
		 * closed): connect_timeout at the latest. */
		if (peer_lingers(p) && !d->shutting_down &&
		    daemon_now() < p->state_since + d->cfg->connect_timeout) {
			d->failed_eps++;
			continue;
		}
		lingered = p->linger != PEER_LINGER_NONE;
		p->linger = PEER_LINGER_NONE;
		p->ep_failed = false;
		closed++;
		peer_close_ep(p);
		/* A dial that waited for this close (peer_reconnect) goes
		 * now, if anything still waits for it (peer_on_timer). */
		if (lingered && !p->inbound)
			peer_timer_start(p, 0);
		/* An inbound peer exists only for its endpoint. An address
		 * that never answered stays, so that `rmactl peers` shows why;
		 * peer_evict_one makes room for new ones. */
		if (p->inbound && p->in_flight == 0)
			peer_destroy(p);
	}
	return closed;
}

/* A client cannot grow the table with connects to nowhere: when it is
 * full, the peer that failed longest ago without ever completing a
 * handshake, and that nothing waits for, goes. */
bool
peer_evict_one(struct daemon *d)
{
	struct peer *p, *oldest = NULL;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->inbound || p->known || p->self || p->ep != NULL ||
		    p->ep_failed ||
		    p->state != RMA__V1__PEER_STATE__PEER_DOWN ||
		    p->in_flight != 0 || !TAILQ_EMPTY(&p->connect_waiters) ||
		    !TAILQ_EMPTY(&p->parked) ||
		    !TAILQ_EMPTY(&p->resolve_waiters) ||
		    !TAILQ_EMPTY(&p->resolved))
			continue;
		if (oldest == NULL || p->state_since < oldest->state_since)
			oldest = p;
	}
	if (oldest == NULL)
		return false;
	log_info("peer_evict_one: forgetting %s (%s) to make room",
		 oldest->address, oldest->last_error);
	d->counters.peers_evicted++;
	peer_destroy(oldest);
	return true;
}

void
peer_listen_address(const struct peer *p, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "";

	/* Outbound: what was dialed. Inbound: where its daemon listens, as
	 * it announced in the handshake: the name the other end uses. */
	if (!p->inbound) {
		snprintf(buf, len, "%s", p->address);
		return;
	}
	if (!p->known) {
		snprintf(buf, len, "%s", "");
		return;
	}
	if (p->sa.ss_family == AF_INET)
		inet_ntop(AF_INET,
			  &((const struct sockaddr_in *)&p->sa)->sin_addr, host,
			  sizeof(host));
	else if (p->sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)&p->sa)->sin6_addr,
			  host, sizeof(host));
	snprintf(buf, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
		 p->origin_port);
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
	pe.state = p->state;
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
peer_log_failure(struct peer *p, const char *previous)
{
	double now = daemon_now();
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	p->last_error_at = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	if (p->attempt_pending) {
		/* A connect that never came up. */
		p->attempt_pending = false;
		p->connect_failures++;
		p->d->counters.connect_failures++;
	}

	/* A retired peer follows another worker's failure, warned of. */
	if (p->inbound || p->d->shutting_down || p->retired) {
		log_info("peer_fail: %s peer %s: %s",
			 p->inbound ? "inbound" : "outbound", p->address,
			 p->last_error);
		return;
	}
	/* A peer that stays down fails at every retry: say so once in a
	 * while, and whenever the reason changes. */
	if (strcmp(previous, p->last_error) != 0 ||
	    now - p->last_warned >= PEER_WARN_INTERVAL) {
		p->last_warned = now;
		log_warn("peer_fail: %s", p->last_error);
	} else {
		log_debug("peer_fail: %s", p->last_error);
	}
}

void
peer_fail(struct peer *p, ucs_status_t st, const char *detail)
{
	struct peer_waiter *w;
	char previous[sizeof(p->last_error)];
	bool was_connecting = p->state == RMA__V1__PEER_STATE__PEER_CONNECTING;
	bool was_up = p->state == RMA__V1__PEER_STATE__PEER_UP;

	if (p->state == RMA__V1__PEER_STATE__PEER_DOWN)
		return;
	memcpy(previous, p->last_error, sizeof(previous));
	peer_probe_stop(p); /* reads what the far side said, if anything */
	p->last_status = peer_failure_status(p, st);
	p->state = RMA__V1__PEER_STATE__PEER_DOWN;
	p->state_since = daemon_now();
	p->await_proof = false;
	p->ep_status = st;
	/* UCX's sockets take no more connections for the endpoint. */
	guard_close(&p->guard);
	if (p->last_status == RMA__V1__STATUS__ERR_NOT_RMAD)
		snprintf(p->last_error, sizeof(p->last_error),
			 "peer %s: something listens there but it is not an "
			 "rmad (it spoke first, as no rmad does)",
			 p->address);
	else
		snprintf(p->last_error, sizeof(p->last_error), "peer %s: %s",
			 p->address, detail);
	peer_log_failure(p, previous);
	if (p->connect_timer)
		event_del(p->connect_timer);
	while ((w = TAILQ_FIRST(&p->connect_waiters)) != NULL) {
		TAILQ_REMOVE(&p->connect_waiters, w, link);
		if (w->import)
			p->d->peer_hooks->import_waited(p, w);
		else
			peer_reply_connect(p, w, p->last_status);
		free(w);
	}
	/* Reconnect on demand, at most every backoff seconds. It starts
	 * short: a daemon restarted in place (take-over, systemd) listens
	 * again within tens of milliseconds, and a refused connect costs
	 * next to nothing; a partitioned host is bounded by connect_timeout,
	 * not by this. */
	p->backoff = p->backoff == 0 ? 0.01 : p->backoff * 2;
	if (p->backoff > 5.0)
		p->backoff = 5.0;
	p->next_attempt = daemon_now() + p->backoff;
	/* Before its operations fail: a client told of a failure must find
	 * every other connection to the target retired already. */
	if (was_up)
		handshake_retire_others(p);
	p->d->peer_hooks->down(p, st, was_connecting);
	/* Imports asked again wait for the next connection: at the end of
	 * the backoff, from the tick (not inside this UCX callback). */
	if (!TAILQ_EMPTY(&p->connect_waiters))
		peer_timer_start(p, p->backoff);
	if (!p->inbound)
		peer_notify(p);
	/* Closing inside a UCX callback is not allowed: the tick does it;
	 * meanwhile the door serves nothing more on it (state DOWN). */
	p->ep_failed = true;
	p->d->failed_eps++;
	worker_kick(p->d);
}

void
peer_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	char detail[160];

	if (p->state == RMA__V1__PEER_STATE__PEER_DOWN) {
		if (!TAILQ_EMPTY(&p->parked) ||
		    !TAILQ_EMPTY(&p->connect_waiters))
			peer_maybe_reconnect(p);
		return;
	}
	if (p->state != RMA__V1__PEER_STATE__PEER_CONNECTING)
		return;
	if (p->inbound)
		snprintf(detail, sizeof(detail),
			 "no handshake within %.1f s (connect_timeout); "
			 "closed",
			 p->d->cfg->connect_timeout);
	else if (p->probe_ok)
		snprintf(detail, sizeof(detail),
			 "something accepted the connection, but no rmad "
			 "answered within %.1f s (a busy or stopped rmad, or "
			 "a program that says nothing)",
			 p->d->cfg->connect_timeout);
	else
		snprintf(detail, sizeof(detail),
			 "nothing answered within %.1f s (unreachable)",
			 p->d->cfg->connect_timeout);
	peer_fail(p, UCS_ERR_TIMED_OUT, detail);
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
				if (w->to.conn == c) {
					TAILQ_REMOVE(lists[i], w, link);
					free(w);
				}
			}
		}
		d->peer_hooks->conn_gone(p, c);
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
		struct peer_waiter *w = TAILQ_FIRST(&p->resolve_waiters);
		char detail[160];
		int expired;

		if (!TAILQ_EMPTY(&p->parked)) {
			d->peer_hooks->expire_parked(p, now);
			/* Still waited for: try again once the backoff
			 * allows. */
			if (!TAILQ_EMPTY(&p->parked))
				peer_maybe_reconnect(p);
		}

		if (p->state != RMA__V1__PEER_STATE__PEER_UP) {
			/* Its endpoint is closed, so UCX owes these
			 * operations their completion; should it never come,
			 * the client still hears by the deadline. */
			d->peer_hooks->ops_expire(p, now);
			continue;
		}
		/* Resolves are answered in order: the oldest decides. */
		if (w != NULL && w->deadline <= now) {
			snprintf(detail, sizeof(detail),
				 "no answer to a descriptor resolve within "
				 "%.1f s; endpoint closed",
				 d->cfg->op_timeout);
			peer_fail(p, UCS_ERR_TIMED_OUT, detail);
			continue;
		}
		expired = d->peer_hooks->ops_expire(p, now);
		if (expired == 0)
			continue;
		snprintf(detail, sizeof(detail),
			 "%d operation(s) got no completion within %.1f s; "
			 "endpoint closed",
			 expired, d->cfg->op_timeout);
		peer_fail(p, UCS_ERR_TIMED_OUT, detail);
	}
}

int
peer_system_start(struct daemon *d)
{
	if (am_start(d) < 0)
		return -1;
	/* Worker 0 listens; the others only connect out. */
	return d->index == 0 ? listener_start(d) : 0;
}

void
peer_system_stop(struct daemon *d)
{
	struct peer *p;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (p->state != RMA__V1__PEER_STATE__PEER_DOWN)
			peer_fail(p, UCS_ERR_CANCELED, "daemon shutting down");
	}
	peer_close_failed(d);
	worker_drain(d, 2.0);
	listener_stop(d);
	while (!TAILQ_EMPTY(&d->peers))
		peer_destroy(TAILQ_FIRST(&d->peers));
	am_stop(d);
}

/* For snapshot.c, with the world stopped. */
void
peer_info_fill(const struct peer *p, struct peer_info *pi)
{
	pi->id = p->id;
	snprintf(pi->address, sizeof(pi->address), "%s", p->address);
	peer_listen_address(p, pi->listen, sizeof(pi->listen));
	snprintf(pi->daemon_id, sizeof(pi->daemon_id), "%s", p->remote_id_hex);
	pi->state = p->state;
	pi->state_since = p->state_since;
	pi->inbound = p->inbound;
	pi->known = p->known;
	pi->worker = p->d->index;
	pi->lane = p->lane;
	pi->ops = p->stat_ops;
	pi->bytes = p->stat_bytes;
	pi->errors = p->stat_errors;
	pi->in_flight = p->in_flight;
	pi->dropped = p->stat_dropped;
	pi->served_puts = p->served_puts;
	pi->served_gets = p->served_gets;
	pi->served_resolves = p->served_resolves;
	pi->served_bytes = p->served_bytes;
	pi->refused = p->refused;
	pi->connect_attempts = p->connect_attempts;
	pi->connect_failures = p->connect_failures;
	snprintf(pi->last_error, sizeof(pi->last_error), "%s", p->last_error);
	pi->last_error_at = p->last_error_at;
}
