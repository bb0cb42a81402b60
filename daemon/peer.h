/* SPDX-License-Identifier: BSD-2-Clause */
/* The peer subsystem: the other daemons this one talks to, one struct
 * peer per endpoint.
 *
 *   peer.c          state (CONNECTING, UP, DOWN), failure (peer_fail),
 *                   closing endpoints, the deadline tick, forgetting
 *   peer_connect.c  outbound connects, the probe beside them, reconnects
 *                   and their backoff, what a failed attempt means
 *   handshake.c     the hello (and key proof) on a new endpoint
 *   listener.c      the endpoints other daemons open
 *
 * It calls down only (am.c, reply.c, conn.c for events, guard.c, worker.c,
 * world.c).
 * What it tells the layers above, operations (op*.c), resolves
 * (resolve.c) and the target side (target.c), goes through struct
 * peer_hooks, which daemon.c fills: read daemon_peer_down and
 * daemon_peer_forget there for who hears of a failure, and in which
 * order. Messages from a peer reach their handlers through daemon.c's
 * AM route table (struct am_hooks); am.c cuts off a peer that breaks the
 * door's rules through am_hooks.fail (peer_fail). */
#ifndef RMAD_PEER_H
#define RMAD_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/util.h>
#include <ucp/api/ucp.h>

#include "am.h"
#include "descriptor.h"
#include "reply.h"
#include "rma.pb-c.h"

struct daemon;
struct conn;
struct event;
struct am_msg;

/* A connect or import waiting for the peer. */
struct peer_waiter {
	struct reply_to to;	      /* the request that waits */
	uint64_t token;		      /* resolve: matches the answer */
	struct descriptor descriptor; /* resolve: what was asked */
	struct resolved *refresh; /* re-resolve after a reconnect (ref held) */
	bool import;	 /* a connect waiter: an import once the peer is up */
	bool retried;	 /* an import asked again after a lost connection */
	double deadline; /* resolve: fail the peer past this */
	TAILQ_ENTRY(peer_waiter) link;
};

TAILQ_HEAD(waiter_list, peer_waiter);

struct resolved; /* resolve.c's cache of the regions p owns */
TAILQ_HEAD(resolved_list, resolved);

struct am_tx;
TAILQ_HEAD(am_tx_list, am_tx);

struct op;
struct op_batch;
struct op_parked;
TAILQ_HEAD(op_list, op);
TAILQ_HEAD(op_parked_list, op_parked);

/* What the close of a peer that refused its handshake waits for
 * (handshake.c: handshake_refuse), connect_timeout at the latest. */
enum peer_linger {
	PEER_LINGER_NONE,
	/* the refusal to leave: the far end answers it no more */
	PEER_LINGER_SENT,
	/* the far end to close once it read the refusal: UCX's disconnect
	 * can overtake what was sent before it (handshake_refuse) */
	PEER_LINGER_HEARD,
};

struct peer {
	struct daemon *d;
	uint32_t id;
	char address[96];
	struct sockaddr_storage sa;
	socklen_t sa_len;
	Rma__V1__PeerState state; /* the wire's PeerState */
	double state_since;	  /* daemon_now() of the last state change */
	bool self;    /* our own listen address: transfers are local copies */
	bool inbound; /* accepted from another daemon's connect */
	ucp_ep_h ep;
	bool ep_failed; /* error callback ran: close at the next tick */
	ucs_status_t ep_status;
	uint8_t remote_id[DAEMON_ID_SIZE];
	char remote_id_hex[2 * DAEMON_ID_SIZE + 1];
	bool known; /* remote_id is set: a handshake completed once */
	/* The id before the last restart seen at this address: a
	 * descriptor of it is stale, not one imported through the wrong
	 * peer (resolve_import_from). */
	uint8_t previous_id[DAEMON_ID_SIZE];
	bool has_previous;
	double backoff;	     /* seconds before the next reconnect attempt */
	double next_attempt; /* monotonic time reconnecting is allowed again */
	uint64_t hello_token;
	struct event *connect_timer;
	struct waiter_list connect_waiters;
	struct waiter_list resolve_waiters;
	struct resolved_list resolved;
	struct op_list ops; /* in flight, oldest first (deadline order) */
	struct op_parked_list parked; /* waiting for it to come back */
	struct op_batch *batch;	      /* small ops of the frame being handled */
	uint64_t in_flight;
	uint64_t stat_ops, stat_bytes, stat_errors;
	uint64_t stat_dropped; /* messages the door refused (am.c) */
	/* Target side (target.c, resolve.c): what this peer asked of us. */
	uint64_t served_puts, served_gets, served_resolves;
	uint64_t served_bytes;
	uint64_t refused; /* requests answered with an error */
	/* Outbound: connects tried, and those that never came up. */
	uint64_t connect_attempts, connect_failures;
	bool attempt_pending; /* a connect was started and has not ended */
	double last_error_at; /* wall clock of the last failure, 0 if none */
	wire_status_t last_status;
	char last_error[256];
	double last_warned; /* daemon_now() of the last reconnect warning */
	/* The connection's identity (handshake): an outbound peer sends its
	 * own, an inbound one records the initiator's. */
	uint64_t epoch;
	uint16_t lane;
	uint16_t origin_port; /* inbound: the initiator's listen port */
	/* the guard's entry for its endpoint (guard.h), 0 when none */
	uint32_t guard;
	uint32_t path;	  /* the initiator's peer id for this target */
	bool await_proof; /* keyed handshake: hello seen, proof not yet */
	/* failed, but the endpoint's close waits (handshake_refuse) */
	enum peer_linger linger;
	/* Outbound connect: did a plain TCP connect to the address succeed
	 * (something listens there), and did an rmad answer the hello? */
	struct event *probe_ev;
	bool probe_ok;	    /* the probe connected: something listens */
	bool probe_foreign; /* and spoke first: not an rmad */
	bool answered;
	/* Outbound: the target answers gets of several pieces in one
	 * request (its hello reply said AM_HELLO_GET_RANGES). */
	bool get_ranges;
	/* Inbound: the initiator takes one answer for several put pieces
	 * (its hello said AM_HELLO_PUT_ACK_RANGES; target.c). */
	bool put_ack_ranges;
	/* Outbound: failed by a retire mark (handshake_retire_catch_up),
	 * so its failure marks nothing more. */
	bool retired;
	struct am_hello hello; /* outbound: ours; inbound: the initiator's */
	/* keyed: the handshake's transcript hash so far (handshake.c) */
	uint8_t transcript[AM_TRANSCRIPT_SIZE];
	/* am.c: answers UCX has not sent yet */
	struct am_tx_list tx;
	uint32_t tx_msgs;
	uint64_t tx_bytes;
	TAILQ_ENTRY(peer) link;
};

TAILQ_HEAD(peer_list, peer);

/* What the peer subsystem (peer.c, peer_connect.c, handshake.c,
 * listener.c) tells the layers above it, through a table daemon.c fills:
 * operations (op*.c), resolves (resolve.c) and the target side
 * (target.c) hear a peer's events here; what arrives from it goes by the
 * AM route table (struct am_hooks). */
struct peer_hooks {
	/* The handshake completed; restarted: the far daemon's id changed. */
	void (*up)(struct peer *p, bool restarted);
	/* p failed with st (state DOWN, its connect waiters answered);
	 * was_connecting: it was the connect attempt that failed. */
	void (*down)(struct peer *p, ucs_status_t st, bool was_connecting);
	/* A connect waiter that is an import: go on, or fail. */
	void (*import_waited)(struct peer *p, struct peer_waiter *w);
	/* p goes for good: nothing may point at it any more. */
	void (*forget)(struct peer *p);
	/* Client c closed: what it left waiting on p goes. */
	void (*conn_gone)(struct peer *p, struct conn *c);
	/* The deadline tick: parked operations past it fail; operations in
	 * flight past it fail, returning how many (the peer is up: peer.c
	 * closes it), or are reported overdue (it is not: 0). */
	void (*expire_parked)(struct peer *p, double now);
	int (*ops_expire)(struct peer *p, double now);
};

/* Fails the peer: state DOWN, waiters answered, the endpoint closed at
 * the next tick (never inside a UCX callback). */
void peer_fail(struct peer *p, ucs_status_t st, const char *detail);
/* Shared by peer.c, handshake.c and listener.c. */
struct peer *peer_new(struct daemon *d, const char *address);
void peer_destroy(struct peer *p);
/* Does p's close still wait for its refusal (handshake_refuse)? */
bool peer_lingers(const struct peer *p);
/* Answers p's connect waiters, none of which will see a connection: SHUTDOWN
 * in a shutdown, else CANCELED (p is forgotten). */
void peer_refuse_waiters(struct peer *p);
void peer_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
/* Arms the peer's one timer: the connect or handshake deadline while
 * connecting, the end of the backoff while down. */
void peer_timer_start(struct peer *p, double seconds);
void peer_set_up(struct peer *p);
void peer_reply_connect(struct peer *p, struct peer_waiter *w,
			wire_status_t st);
void peer_on_timer(evutil_socket_t fd, short what, void *arg);
/* Other daemons one daemon connects to: a cluster's worth. At the
 * bound, the peer that failed longest ago without ever connecting goes
 * (peer_evict_one; false if none can). */
#define PEER_MAX 4096
bool peer_evict_one(struct daemon *d);
/* peer_connect.c: the probe beside a connect attempt, and what a failure
 * of the attempt means given it. */
void peer_probe_stop(struct peer *p);
wire_status_t peer_failure_status(const struct peer *p, ucs_status_t st);
/* A numeric or (numeric false) named HOST and PORT as a socket address;
 * an IPv4-mapped IPv6 address comes back as the IPv4 one. */
int peer_sockaddr(const char *host, uint16_t port, bool numeric,
		  struct sockaddr_storage *sa, socklen_t *len_p);
/* May UCX's connection manager carry a connection to or from sa? IPv4
 * only: why, at the definition. */
bool peer_sockaddr_usable(const struct sockaddr_storage *sa);
int peer_system_start(struct daemon *d);
void peer_system_stop(struct daemon *d);
struct peer *peer_lookup(struct daemon *d, uint32_t id);
void peer_handle_connect(struct reply_to to, const char *address);
void peer_conn_gone(struct daemon *d, struct conn *c);
/* A request that waits for a peer; NULL (and answered) without memory. */
struct peer_waiter *peer_waiter_new(struct reply_to to);
/* Closes endpoints whose peer failed; returns how many. */
int peer_close_failed(struct daemon *d);
/* A request needs a peer that is down: reconnect unless backing off. */
void peer_maybe_reconnect(struct peer *p);
/* Connect now if down, backoff or not (a client asked explicitly). */
void peer_connect_now(struct peer *p);
bool peer_all_closed(struct daemon *d);
void peer_check_deadlines(struct daemon *d);
const char *peer_state_name(Rma__V1__PeerState s);
/* The peer's listen address, the name both ends use for one link:
 * outbound, the address dialed; inbound, its source address with the
 * listen port its handshake announced ("" before the handshake). */
void peer_listen_address(const struct peer *p, char *buf, size_t len);

/* ---- handshake.c: who is at the other end of a connection --------------- */

/* Initiator: sends the hello on a new endpoint. */
ucs_status_t handshake_start(struct peer *p);
void handshake_on_hello(struct peer *p, const struct am_msg *m);
void handshake_on_proof(struct peer *p, const struct am_msg *m);
void handshake_on_reply(struct peer *p, const struct am_msg *m);
void handshake_on_done(struct peer *p, const struct am_msg *m);
/* Initiator: p, up, failed; every older connection to its target, on
 * every worker, is dead too (rma.h's promise for a failed put). */
void handshake_retire_others(struct peer *p);
/* Fails this worker's connections that a mark retired; one load when
 * there is none new. Before operations are dispatched (op_submit). */
void handshake_retire_catch_up(struct daemon *d);

/* ---- listener.c: connections other daemons open ------------------------- */

int listener_start(struct daemon *d);
void listener_stop(struct daemon *d);
/* The guard on UCX's own sockets is guard.h. */

#endif
