/* SPDX-License-Identifier: BSD-2-Clause */
/* rmad's objects and the functions each subsystem offers the others.
 * One daemon context is passed down everywhere; there are no other globals
 * besides signal state. Sections follow the files: notification.c,
 * request.c, server.c, handover.c, fdstore.c, am.c, op.c, target.c,
 * worker.c, world.c; headers of their own: the configuration (config.h),
 * a client's connection and ring (conn.h), regions (region.h), the peer
 * subsystem (peer.h), imports of other daemons' regions (resolve.h), the
 * replies to clients (reply.h), and what only the operations' files
 * share (op_int.h). A subsystem reaches the ones above it only through
 * the hooks tables daemon.c fills (struct region_hooks, conn_hooks,
 * peer_hooks, resolve_hooks, am_hooks, worker_hooks). */
#ifndef RMAD_DAEMON_H
#define RMAD_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/listener.h>
#include <ucp/api/ucp.h>

#include "am.h"
#include "config.h"
#include "conn_fds.h"
#include "descriptor.h"
#include "frame.h"
#include "guard.h"
#include "handover_wire.h"
#include "idmap.h"
#include "log.h"
#include "metrics.h"
#include "sdnotify.h"
#include "uidlimit.h"
#include "reply.h"
#include "rma.pb-c.h"

/* ---- conn.c, ring.c: conn.h -------------------------------------------- */

#include "conn.h"

/* ---- notification.c: puts that tell the region's owner ------------------ */

/* Notifications one client may hold unacknowledged, from all initiators
 * together; one initiator (a client, of this daemon or of a peer) at most
 * half of what the others leave of it (2048 alone). A notifying put over
 * either fails with ERR_LIMIT, its bytes not applied. */
#define NOTIFICATION_QUEUE_MAX 4096
/* Initiators holding notifications for one client at once; one more is
 * refused with ERR_LIMIT until one of them has none left. */
#define NOTIFICATION_INITIATORS_MAX 64

struct region;
struct notification_owner;
/* Who puts: the sender's daemon id and its client as that daemon numbers
 * them (the connection's id + 1; 0 from a peer that names none). */
struct notification_initiator {
	const uint8_t *daemon_id; /* DAEMON_ID_SIZE bytes */
	uint64_t client;
	/* Whose word the client is: with daemon_id, the group its share is
	 * part of (a peer daemon: 0; a client of ours: its uid + 1). */
	uint64_t group;
};
/* Takes one place in the bound of r's owner, and in its initiator's
 * share of it, before the bytes are copied: OK with the share in
 * *share_p (for notification_post), ERR_LIMIT when either is full,
 * ERR_NO_REGION when r has no owner, ERR_NO_MEMORY. */
wire_status_t notification_reserve(struct region *r,
				   const struct notification_initiator *from,
				   uint32_t *share_p);
/* After the bytes are in r: tells its owner, on the owner's worker. The
 * place notification_reserve() took (share) goes with it. */
void notification_post(struct daemon *d, struct region *r, uint64_t offset,
		       uint64_t length, uint64_t value,
		       const uint8_t sender_id[DAEMON_ID_SIZE], uint32_t share);
/* A batch's run of notifying puts from one initiator to one region,
 * each told in one step: its place in the owner's bound and its ring
 * slots were counted for the whole run when it opened, and go into the
 * counts when it closes. Per put, the checks, the bound's test and the
 * ring's room cost more than the put (target.c). */
struct notification_stream {
	struct region *r; /* NULL: no run open */
	uint64_t region_id;
	uint64_t client; /* its initiator, of the batch's peer */
	uint32_t share;
	/* its slots in the owner's ring: as many as it may take */
	struct ring_span ring;
	uint8_t *start;
};
/* Opens s after a put that notification_post() told straight into the
 * owner's ring, if the next puts of its initiator (from, share) to r may
 * be told the same way; else leaves it closed. */
void notification_stream_open(struct daemon *d, struct notification_stream *s,
			      struct region *r,
			      const struct notification_initiator *from,
			      uint32_t share);
/* What s took goes into the bound's and the ring's counts; s closed. Before
 * anything else reserves, posts or flushes. */
void notification_stream_close(struct daemon *d, struct notification_stream *s);
/* Whether the next put of from's client to r is s's to tell. */
static inline bool
notification_stream_fits(const struct notification_stream *s,
			 const struct region *r, uint64_t client)
{
	return s->r == r && s->client == client && s->ring.at != s->ring.end;
}
/* After its bytes are in: one put of s told (notification_stream_fits). */
static inline void
notification_stream_put(struct notification_stream *s, uint64_t offset,
			uint64_t length, uint64_t value, const uint8_t *sender)
{
	ring_span_notify(&s->ring, s->region_id, offset, length, value, sender);
}
/* On owner's worker: the client acknowledged the first n notifications
 * it was sent (NotifyAck); their places go back to their initiators. */
void notification_release(struct conn *owner, uint32_t n);
/* The fuzz model's: a copy of owner's bound as it is now, on which
 * notification_bound_try() says (and takes) what notification_reserve()
 * would, one put after another. */
struct notification_bound;
struct notification_bound *notification_bound_copy(struct conn *owner);
bool notification_bound_try(struct notification_bound *b,
			    const struct notification_initiator *from);
void notification_bound_free(struct notification_bound *b);
/* When owner is freed. */
void notification_owner_free(struct conn *owner);
/* Posts what notification_post() gathered on d: at the end of each pass
 * of the worker's loop (daemon.c) and of each client Submit. Never before
 * the bytes of the puts are in their regions. */
void notification_flush(struct daemon *d);

/* ---- request.c: a client's requests, dispatched through a table -------- */

/* Decodes one frame's payload and runs its handler (or replies with why
 * not); may set c->closing or close c. */
void request_dispatch(struct conn *c, const uint8_t *payload, size_t len);

/* ---- server.c: the client socket's listener ----------------------------- */

/* Returns 0, or the exit status for a failed start: EX_NOPERM when the
 * socket path or its per-user directory belongs to someone else, else 1. */
int server_start(struct daemon *d);
void server_stop(struct daemon *d);
/* A descriptor came free: accept again if accepting had paused. */
void server_accept_resume(struct daemon *d);
/* Serves a listening socket a previous process handed over. */
int server_adopt(struct daemon *d, int fd);
/* 0 when nobody but us and root can add a name in path's directory or
 * move it (socket_path_check_private), or when cfg->socket_dir_shared
 * says to go on (warned); else -1, logged with what we were doing
 * ("serving", "taking over"). */
int server_check_dir(const struct config *cfg, const char *path,
		     const char *doing);

/* ---- region.c, region_fd.c: region.h ---------------------------------- */

#include "region.h"

/* ---- handover.c: an old and a new process of the same daemon ------------ */

/* struct handover_record (one region on the wire of a hand-over and in
 * fdstore.c's state record) is in handover_wire.h. */

/* One region as the old process hands it over. Beside its record: an
 * orphan's deadline (region.orphan_until_ms, CLOCK_REALTIME as it crosses
 * processes; 0 for a region with its owner), which travels apart
 * (handover.c: DEADLINES; fdstore.c: after the slots), so that the
 * record, and rmad versions that do not know deadlines, stay as they
 * were. */
struct handover_region {
	uint64_t id, generation, ro_generation, length;
	int32_t owner_pid;
	uint32_t owner_uid;
	char owner_name[64];
	uint64_t orphan_until_ms;
	int memfd;
};

/* What the new process takes over: identity, counters, the client
 * socket and every region. */
struct handover_state {
	uint8_t id[DAEMON_ID_SIZE];
	uint64_t next_region_id, next_epoch;
	double started; /* the first process's start */
	uint32_t restarts;
	int listen_fd;
	size_t n;
	struct handover_region *regions;
	/* the predecessor's configuration (config_saved.h's encoding), or
	 * NULL from an rmad that sends none */
	uint8_t *config;
	size_t config_len;
};

/* New side: asks the running rmad at cfg's socket for everything and
 * waits until it is gone. 0, or -1 logged. */
int handover_receive(const struct config *cfg, struct handover_state *st);
/* New side, after daemon_start_as: regions mapped again, the client
 * socket served. Consumes st. 0, or -1 logged. */
int handover_restore(struct daemon *d, struct handover_state *st);
void handover_state_free(struct handover_state *st);
/* Old side: listen for a successor beside the client socket. */
int handover_start(struct daemon *d);
void handover_stop(struct daemon *d);

/* ---- fdstore.c: regions kept in systemd's file descriptor store ---------- */

struct fdstore;

/* At start, before daemon_start_as: with the store on (fd_store, and
 * NOTIFY_SOCKET), takes the store's fds out of passed and rebuilds what
 * the previous process left into *from (1: recovered), or prepares an
 * empty state (0). *store_p = NULL when the store is off. -1 logged:
 * fd_store = yes without NOTIFY_SOCKET, or no memory. */
int fdstore_open(const struct config *cfg, struct sdnotify_fds *passed,
		 struct fdstore **store_p, struct handover_state *from);
/* After the regions are restored and the client socket served: identity
 * and counters into the state record, the state (and the client socket
 * when systemd does not hold it) into the store. The caller keeps s
 * (fdstore_destroy after daemon_stop). */
int fdstore_attach(struct daemon *d, struct fdstore *s);
/* region_create: a slot for a region, before anything is made
 * (ERR_LIMIT when the store is full, ERR_SHUTDOWN when frozen); then,
 * before the client hears of it, its memfd stored and its record live. */
wire_status_t fdstore_reserve(struct daemon *d, int *slot_p, char *detail,
			      size_t detail_len);
wire_status_t fdstore_commit(struct daemon *d, struct region *r, char *detail,
			     size_t detail_len);
/* A slot reserved and never committed, or a region freed: record dead
 * first, then the fd out of the store. */
void fdstore_release(struct daemon *d, struct region *r);
/* SIGTERM: what is stored stays for the next start (systemctl restart
 * keeps the store, systemctl stop empties it): no region is removed or
 * made from here on. */
void fdstore_freeze(struct daemon *d);
/* Frozen: the regions go to the next start as they are now. */
bool fdstore_frozen(struct daemon *d);
/* r became an orphan or was claimed back: its record's deadline follows
 * (r->orphan_until_ms, or 0). */
void fdstore_orphan_update(struct daemon *d, const struct region *r);
/* For metrics: regions stored and room for them (0 and 0 when off). */
void fdstore_count(struct daemon *d, uint32_t *stored_p, uint32_t *capacity_p);
/* One fd of another part (config_saved.c) into the store under name
 * (0, or -1 logged: systemd did not take it), or every fd of that name
 * out of it. */
int fdstore_keep(const char *name, int fd);
void fdstore_drop(const char *name);
/* After daemon_stop. */
void fdstore_destroy(struct fdstore *s);

/* ---- peer.c, peer_connect.c, handshake.c, listener.c: peer.h -------- */

#include "peer.h"

/* ---- am.c: the door between daemons ------------------------------------- */

/* One rmad message as the gate hands it on. */
struct am_msg {
	const void *header;
	size_t header_length;
	const void *data;
	size_t length;
};

typedef void (*am_handler_t)(struct peer *p, const struct am_msg *m);

struct am_route {
	unsigned id;
	bool to_target; /* arrives over inbound endpoints (a request) */
	bool handshake; /* served before the handshake completed */
	size_t header_min;
	am_handler_t fn;
};

struct am_door {
	struct daemon *d;
	unsigned id;
};

/* What the door hands up, through a table daemon.c fills: each message
 * to its route's handler, and a peer that broke the rules to be cut off
 * (peer_fail), which am.c may not name. */
struct am_hooks {
	const struct am_route *routes;
	size_t n_routes;
	void (*fail)(struct peer *p, ucs_status_t st, const char *detail);
};

/* Registers a handler for every id: d->am_hooks' routes for rmad's own, a
 * drop for the rest. */
int am_start(struct daemon *d);
void am_stop(struct daemon *d);
/* The gate and the route for one message, as UCX hands it over (the
 * handler registered for id calls this; fuzzers call it directly). */
void am_deliver(struct daemon *d, unsigned id, const void *header,
		size_t header_length, const void *data, size_t length,
		const ucp_am_recv_param_t *param);
/* Messages over p->ep are served from now on / no longer. */
void am_attach(struct peer *p);
void am_detach(struct peer *p);
/* Sends header + data to p (REPLY, eager). data is copied unless hold is
 * the region it lies in (a reference is kept until sent). Fails, and cuts
 * the peer off, when p has too much unsent already. */
ucs_status_t am_send(struct peer *p, unsigned id, const void *header,
		     size_t header_length, const void *data, size_t length,
		     struct region *hold);
/* p is going away: pending sends forget it. */
void am_peer_gone(struct peer *p);

/* ---- resolve.c: resolve.h ---------------------------------------------- */

#include "resolve.h"

/* ---- op.c: puts, gets and flushes -----------------------------------------
 */

/* An operation: its body is op_int.h's, the operations' files' alone;
 * others see it through op_info_fill (snapshot.c). */
struct op;

void op_submit(struct conn *c, const Rma__V1__Submit *submit);
/* n operation records (proto/oprec.h) as a Submit frame's are run. */
void op_submit_packed(struct conn *c, const uint8_t *rec, size_t n);
/* The peer failed: operations waiting for its answer fail with status. */
void op_peer_failed(struct peer *p, ucs_status_t status);
/* The deadline tick for p's operations: on a peer up, how many failed
 * with ERR_TIMEOUT (peer.c closes the endpoint, which completes them);
 * on one down, the clients of the overdue hear (0). */
int op_check_deadlines(struct peer *p, double now);
/* p is forgotten: its operations no longer point at it. */
void op_peer_forget(struct peer *p);
/* Operations waiting for a peer to reconnect (op.c parks them): run what
 * can run now, in order; fail what waited past its deadline; drop a gone
 * client's; fail them all. */
void op_unpark(struct peer *p);
void op_expire_parked(struct peer *p, double now);
void op_parked_conn_gone(struct peer *p, struct conn *c);
void op_parked_fail_all(struct peer *p, wire_status_t st, const char *detail);
/* c's op op_id, if parked on p: fails it with ERR_CANCELED (true). */
bool op_parked_cancel(struct peer *p, struct conn *c, uint64_t op_id);
/* Answers from targets (routed by am.c). */
void op_on_put_ack(struct peer *p, const struct am_msg *m);
void op_on_batch_reply(struct peer *p, const struct am_msg *m);
void op_on_get_reply(struct peer *p, const struct am_msg *m);
/* The free list of operation records, emptied at the worker's stop. */
void op_pool_cleanup(struct daemon *d);
/* What only the operations' own files share is op_int.h. */

/* ---- target.c: puts and gets other daemons send here -----------------------
 */

void target_on_put(struct peer *p, const struct am_msg *m);
void target_on_batch(struct peer *p, const struct am_msg *m);
void target_on_get(struct peer *p, const struct am_msg *m);
/* Put answers held back (one for several pieces) go out now: called once
 * UCX has no more to progress, and at the end of every pass;
 * target_forget drops them with their peer. */
void target_flush_answers(struct daemon *d);
void target_forget(struct peer *p);

/* ---- worker.c: UCX context, worker, listener, progress ----------------------
 */

/* What the loop does in the subsystems above worker.c and world.c: they
 * call up only through these, which daemon.c fills in. */
struct worker_hooks {
	/* After each progress pass: returns how many endpoints it closed
	 * (their requests complete, so progress again). */
	int (*after_progress)(struct daemon *d);
	/* End of a pass: what it completed goes out to the clients. */
	void (*flush)(struct daemon *d);
	/* Once UCX has nothing more (or the bound of one go is reached):
	 * what was held back for the rest of the go goes out (target.c's
	 * put answers). */
	void (*progressed)(struct daemon *d);
	/* Every op_timeout / 10, within [50 ms, 1 s]. */
	void (*deadline)(struct daemon *d);
	/* Draining: true once no endpoint close is still under way. */
	bool (*drained)(struct daemon *d);
	/* world.c: the shutdown flag reached this worker. */
	void (*begin_shutdown)(struct daemon *d);
};

/* The UCX context every worker shares; fills d->ucx_version and the
 * transports in use (world->learned). */
int worker_context_create(struct daemon *d, ucp_context_h *ucp_p);
int worker_start(struct daemon *d);
void worker_stop(struct daemon *d);
/* Ask for a progress pass and output flush before the loop sleeps. */
void worker_kick(struct daemon *d);
double daemon_now(void);
/* seconds (negative counts as 0) as libevent takes a timeout. */
struct timeval worker_timeval(double seconds);
/* A UCX status as the wire's: the one place they are mapped. */
wire_status_t worker_status_from_ucs(ucs_status_t st);
void worker_drain(struct daemon *d, double seconds);
void worker_progress_until(struct daemon *d, double seconds,
			   bool (*done)(struct daemon *d));

/* ---- status.c
 * ---------------------------------------------------------------- */

void status_handle(struct reply_to to);

/* ---- world.c: worker threads and what they share ------------------------
 */

/* Shared by every worker. The region table and next_region_id change
 * only while the world is stopped (world_stop); the id counters are
 * atomic. Everything else in a struct daemon is its own thread's. */
/* Owners a worker gathers notifications for at once (notification.c). */
#define NOTIFICATION_OPEN_MAX 8
struct notification_job;

/* handshake.c: the nonces of this daemon's latest hellos, shared by its
 * workers (each dials; worker 0 answers), so that a hello of its own
 * relayed back to it is known. A ring under its own lock: the oldest
 * gives way; a hello answered leaves at once. */
#define HANDSHAKE_ISSUED 256
struct handshake_issued {
	pthread_mutex_t lock;
	uint32_t next;
	uint8_t nonce[HANDSHAKE_ISSUED][AM_NONCE_SIZE];
};

/* handshake.c: per target address, the epoch below which every
 * connection of this daemon to it is retired (handshake_retire_others):
 * when one worker's connection fails, the others' older ones must not
 * carry later operations. Under its own lock, with the epoch counter
 * drawn inside it; seq grows with every mark, so a worker sees at one
 * load whether it has anything to catch up on. Full, the oldest mark
 * gives way. */
#define HANDSHAKE_RETIRE_MAX 1024
struct handshake_retire {
	pthread_mutex_t lock;
	uint64_t seq; /* atomic */
	/* Every hello's floor (am_hello.floor) and its mark at least: a
	 * predecessor under the same identity (a take-over, a restart from
	 * the fd store) opened its connections below it. Set at the start,
	 * 0 for a new identity. */
	uint64_t floor;
	uint32_t n;
	struct handshake_retire_entry {
		struct am_addr target;
		uint64_t epoch;
	} mark[HANDSHAKE_RETIRE_MAX];
};

struct snapshot_hooks;

/* What the daemon learns as it starts, kept apart from the configuration
 * it was given: each is written once on worker 0 before the other
 * workers run, then only read. */
struct world_learned {
	char transports[64];  /* UCX_TLS in use: the option's, or the env's */
	uint16_t listen_port; /* the UCX listener's (any free one for 0) */
	/* the client socket served: the option's, or the path of the socket
	 * systemd or a predecessor passed */
	char socket_path[108];
	/* the client socket systemd passed, until server_start takes it */
	int activation_fd;
};

struct world {
	uint32_t n; /* workers, the main thread's included */
	/* As checked at start; a reload replaces it whole, in a world stop
	 * (daemon_reconfigure). Every worker reads it, none writes it. */
	struct config cfg;
	struct world_learned learned;
	struct daemon **workers; /* [0] is the main thread's */
	ucp_context_h ucp;
	struct idmap regions; /* every live region, by id */
	/* uidlimit.c: what each user's clients hold, over every worker */
	struct uidlimit uids;
	uint64_t next_region_id;
	uint32_t next_conn_id, next_peer_id;
	uint64_t next_epoch; /* atomic: connections this daemon opens */
	struct handshake_issued issued; /* nonces of our latest hellos */
	struct handshake_retire retire; /* dead connections per target */
	uint32_t next_accept;		/* round robin of new clients */
	bool handed_over;  /* a successor has the regions: make none */
	uint32_t restarts; /* hand-overs this identity went through */
	uint64_t regions_recovered;
	uint64_t regions_reattached; /* orphans their owners came back for */
	struct fdstore *fdstore;     /* fdstore.c: NULL when off */
	uint32_t store_recoveries;   /* starts from systemd's fd store */
	pthread_mutex_t lock;
	pthread_cond_t parked_cv, resume_cv;
	struct daemon *stopper; /* the worker that stopped the world */
	uint64_t resume_gen;
	bool joined;   /* only the main thread is left (teardown) */
	bool shutdown; /* atomic: every worker begins its shutdown */
	bool quit;     /* atomic: every worker leaves its loop */
	/* main.c: why the configuration this start was given was refused,
	 * while it runs on the last one that worked ("" = on the given) */
	char config_refused[384];
	/* daemon.c: snapshot.c's, for status.c and metrics_http.c: a
	 * snapshot asks files below status.c, which may not name it */
	const struct snapshot_hooks *snapshot;
};

typedef void (*world_fn_t)(struct daemon *d, void *arg);

/* Runs fn(to, arg) on to's thread, soon. */
int world_post(struct daemon *to, world_fn_t fn, void *arg);
/* The begin_shutdown hook on every worker: at once on self, at their
 * next wake-up on the others. */
void world_shutdown(struct daemon *self);
int world_mailbox_open(struct daemon *d);
/* Runs what was posted to d, now. */
void world_mailbox_run(struct daemon *d);
void world_mailbox_close(struct daemon *d);
/* Parks every other worker between two callbacks until world_resume:
 * the caller alone touches shared state meanwhile. Not reentrant. */
void world_stop(struct daemon *self);
void world_resume(struct daemon *self);
int world_start_threads(struct world *w);
/* Joins the other workers: once they left their loops (draining at
 * shutdown), or at once when quit asks them to. */
void world_join_threads(struct daemon *self, bool quit);
uint32_t world_next_id(uint32_t *counter);
/* The configuration as it runs, for a successor to fall back on: the one
 * checked, with what was learned in its place (the transports in use,
 * the bound port, the socket served). */
void world_config_running(const struct world *w, struct config *out);

/* ---- the daemon ------------------------------------------------------------
 */

struct counters {
	uint64_t ops_put, ops_get, ops_flush;
	uint64_t bytes_put, bytes_get;
	uint64_t ops_failed;
	uint64_t clients_accepted;
	uint64_t clients_refused_uid; /* over max_clients_per_uid */
	uint64_t protocol_errors;
	uint64_t regions_created;
	uint64_t resolves_served;
	uint64_t target_puts, target_gets; /* served for other daemons */
	uint64_t am_dropped;		   /* peer messages the door refused */
	uint64_t peers_cut_off;	  /* peers that did not read their answers */
	uint64_t inbound_refused; /* connections over a cap, or stale */
	uint64_t auth_failures;	  /* peers that failed the key proof */
	uint64_t connect_attempts, connect_failures; /* outbound */
	uint64_t target_refused; /* peer requests answered with an error */
	uint64_t peers_evicted;	 /* failed peers dropped for room */
	uint64_t ops_atomic, target_atomics;
	/* notifications handed to owners: through their ring, or as
	 * Notifications events over the socket */
	uint64_t notify_ring, notify_socket;
	/* owners woken (RingWake) for notifications in their ring: at once,
	 * or after the wake-up was held back (ring_notify) */
	uint64_t notify_wakeups, notify_wakeups_held;
};

/* One worker: with --workers 1 (the default), the whole daemon. */
struct daemon {
	struct world *world;
	uint32_t index;		  /* in world->workers */
	const struct config *cfg; /* &world->cfg */
	struct event_base *base;
	uint8_t id[DAEMON_ID_SIZE];
	char id_hex[2 * DAEMON_ID_SIZE + 1];
	double started;
	bool shutting_down;

	int listen_fd;
	bool
	    listen_inherited; /* from systemd: its path is not ours to unlink */
	struct event *accept_ev;
	struct event *accept_pause_ev; /* out of fds: accepting again */
	uint64_t accept_pauses;
	double accept_warn_next; /* daemon_now() the next warning may come */
	struct conn_list conns;
	struct conn_list dirty_conns;

	ucp_context_h ucp; /* world->ucp */
	ucp_worker_h worker;
	ucp_listener_h listener;
	struct event *worker_ev;
	struct event *tick_ev;
	struct event *deadline_ev;
	struct event *poll_ev; /* polling mode only */
	bool in_tick;	       /* worker_tick is running */
	/* conn_flush_dirty is running: a frame queued meanwhile (the
	 * RingWake of a completion it publishes) goes out in that same
	 * flush, with no worker tick for it */
	bool flushing_conns;
	/* Set by a subsystem that gathered what must go out before more
	 * comes in (notification.c: an owner's wake-up, which is written
	 * and whose acknowledgement is read only between passes): the
	 * progress loop stops, the pass flushes and yields to the loop. */
	bool pass_end;
	const struct worker_hooks *hooks; /* daemon.c's */
	/* daemon.c's: the upward events of the subsystems below it */
	const struct conn_hooks *conn_hooks;
	const struct peer_hooks *peer_hooks;
	const struct resolve_hooks *resolve_hooks;
	uint32_t parts_started; /* daemon.c: parts to stop */
	char ucx_version[32];

	struct quarantine_list quarantine;
	const struct region_hooks *region_hooks; /* daemon.c's */
	/* The regions live on in a successor or the fd store: a region
	 * freed is not announced to peers (set with the world stopped). */
	bool regions_kept;

	struct peer_list peers;
	uint32_t closing_eps; /* endpoint closes not yet completed */
	uint32_t failed_eps;  /* peers with ep_failed set: close at the tick */
	uint64_t retire_seen; /* world->retire.seq when last caught up */
	uint32_t batches;     /* peers with a batch to send */
	/* notifications applied here and not yet posted to their owners'
	 * workers, one job per owner (notification.c) */
	struct notification_job *notify_open[NOTIFICATION_OPEN_MAX];
	uint32_t notify_open_n;
	uint32_t notify_open_entries; /* in those jobs, all owners */
	/* the job of the last notification_post and its sender's index
	 * there; NULL once the jobs are flushed */
	struct notification_job *notify_last;
	uint32_t notify_last_sender;
	/* the owner whose ring notification_post wrote into directly this
	 * pass (held by a reference), and how many, to publish at the
	 * flush */
	struct conn *notify_direct;
	uint32_t notify_direct_n;
	uint64_t next_token;
	/* target.c: put pieces written and not yet answered, all of one
	 * peer, tokens ack_token .. ack_token + ack_count - 1 */
	struct peer *ack_peer;
	uint64_t ack_token;
	uint32_t ack_count;
	/* The largest put or get one message carries: what fits in one
	 * fragment of UCX's tcp transport (op_send_am). */
	size_t am_piece;
	struct sockaddr_storage listen_sa;

	/* am.c */
	const struct am_hooks *am_hooks; /* daemon.c's */
	struct am_door am_doors[AM_ID_LIMIT];
	struct idmap peers_by_ep; /* ep -> struct peer, served endpoints */

	struct ring_poller *rings; /* ring.c: hot client rings */
	struct op *op_free;	   /* free list of operation records */
	void *decode_arena;	   /* request.c: requests are decoded here */
	uint8_t *batch_reply;	   /* target.c: scratch for batch answers */
	size_t batch_reply_cap;
	struct idmap ops_by_token; /* ops waiting for a target's answer */
	uint64_t ops_in_flight;

	struct counters counters;
	/* daemon_now() of the batch of operations being started or
	 * answered (0: none): see daemon_op_clock */
	double op_clock;

	struct sdnotify sdnotify;	/* sdnotify.c: systemd */
	struct metrics *metrics;	/* metrics.c: NULL when off */
	struct metrics_latency latency; /* metrics.c: always kept */
	struct handover *handover;	/* handover.c: worker 0 only */

	/* world.c */
	pthread_t thread;
	bool thread_started;
	int world_state; /* under world->lock */
	pthread_mutex_t mail_lock;
	struct world_job *mail_head, **mail_tail;
	int mail_fd;
	struct event *mail_ev;
};

/* The time an operation starts or ends, for its deadline and latency:
 * one clock read serves a whole batch (a frame's operations, the answers
 * of one message), which at millions of operations a second is a few
 * percent of the daemon's time. */
static inline double
daemon_op_clock(const struct daemon *d)
{
	return d->op_clock != 0 ? d->op_clock : daemon_now();
}

/* daemon.c: the world and its workers, d being worker 0 (the caller's
 * thread); the client socket apart. Extra workers run from here on. */
int daemon_start(struct daemon *d, const struct config *cfg);
/* The same under an identity taken over (from != NULL). */
int daemon_start_as(struct daemon *d, const struct config *cfg,
		    const struct handover_state *from);
void daemon_stop(struct daemon *d);
/* First step of a graceful stop on every worker: refuse new work, tell
 * clients, leave the loop once drained or after shutdown_timeout. */
void daemon_begin_shutdown(struct daemon *d);
/* SIGHUP, on worker 0: the configuration every worker reads is replaced
 * by one with what a running daemon can take from next (the world
 * stopped), and the log level with it. */
void daemon_reconfigure(struct daemon *d, const struct config *next);

#endif
