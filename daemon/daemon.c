/* SPDX-License-Identifier: BSD-2-Clause */
/* The daemon: a world of workers, set up and torn down in one place, so
 * main() and the protocol tests build it the same way. The caller's
 * struct daemon is worker 0; further workers run on threads of their own
 * (world.c).
 *
 * The floors, bottom up: proto/; worker.c and world.c; the subsystems
 * (clients, regions, peers, operations, status); this file, which names
 * them all in two tables (a worker's parts, the worker's hooks); main.c.
 * Lower floors reach up only through those tables. */
#include "daemon.h"
#include "am.h"
#include "snapshot.h"
#include "ucx_defaults.h"

#include <time.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static int
daemon_loop_start(struct daemon *d)
{
	idmap_init(&d->ops_by_token);
	d->base = event_base_new();
	if (d->base == NULL) {
		log_error("daemon_loop_start: event_base_new failed");
		return -1;
	}
	return 0;
}

static void
daemon_loop_stop(struct daemon *d)
{
	idmap_cleanup(&d->ops_by_token);
	if (d->base != NULL)
		event_base_free(d->base);
	d->base = NULL;
}

static void
daemon_scratch_free(struct daemon *d)
{
	free(d->decode_arena);
	d->decode_arena = NULL;
	free(d->batch_reply);
	d->batch_reply = NULL;
}

/* Whatever is still in flight on this worker fails now. */
static void
daemon_drain(struct daemon *d)
{
	worker_drain(d, 1.0);
}

static void
daemon_clients_close(struct daemon *d)
{
	conn_flush_dirty(d);
	while (!TAILQ_EMPTY(&d->conns))
		conn_close(TAILQ_FIRST(&d->conns), "daemon shutting down");
}

/* A worker's parts, bottom up: started in this order, stopped in the
 * reverse one. A stop also undoes its own part's failed start. Some
 * parts only have a stop: what they undo was made by traffic (clients,
 * operations, quarantined ranges), or, for the client socket, by main()
 * on worker 0 (its failure is an exit status of its own). */
static const struct daemon_part {
	const char *name;
	int (*start)(struct daemon *d);
	void (*stop)(struct daemon *d);
} daemon_parts[] = {
    {"loop", daemon_loop_start, daemon_loop_stop},
    {"mailbox", world_mailbox_open, world_mailbox_close},
    {"client rings", NULL, ring_poller_free},
    {"UCX worker", worker_start, worker_stop},
    {"scratch buffers", NULL, daemon_scratch_free},
    {"operation records", NULL, op_pool_cleanup},
    {"quarantine", NULL, region_quarantine_drain_all},
    {"operations in flight", NULL, daemon_drain},
    {"clients", NULL, daemon_clients_close},
    {"peers", peer_system_start, peer_system_stop},
    {"client socket", NULL, server_stop},
    /* Run what other workers posted before the clients close, so an
     * accepted client is closed rather than leaked. */
    {"posted jobs", NULL, world_mailbox_run},
};

#define DAEMON_N_PARTS (sizeof(daemon_parts) / sizeof(daemon_parts[0]))

static void
daemon_on_deadline(struct daemon *d)
{
	peer_check_deadlines(d);
	conn_check_stuck(d);
	sdnotify_beat(d);
}

/* The end of a loop pass: the notifications its puts applied go to their
 * owners' workers (one job per owner), then what clients are owed goes
 * out, and the ring poller is told whether this pass had traffic (it then
 * polls for a while). */
static void
daemon_flush(struct daemon *d)
{
	/* put answers held back by a progress call made outside a pass
	 * (ring.c polls UCX, then kicks the tick that ends here) */
	target_flush_answers(d);
	notification_flush(d);
	conn_flush_dirty(d);
	ring_after_pass(d);
}

/* The only calls from worker.c and world.c up into the subsystems. */
static const struct worker_hooks daemon_hooks = {
    .after_progress = peer_close_failed,
    .flush = daemon_flush,
    .progressed = target_flush_answers,
    .deadline = daemon_on_deadline,
    .drained = peer_all_closed,
    .begin_shutdown = daemon_begin_shutdown,
};

/* Upward events: what a lower subsystem tells the ones above it, which
 * it may not name. */

static const struct region_hooks daemon_region_hooks = {
    .reserve = fdstore_reserve,
    .commit = fdstore_commit,
    .release = fdstore_release,
    .orphan_update = fdstore_orphan_update,
    .freed = resolve_broadcast_freed,
};

static void
daemon_conn_closed(struct conn *c)
{
	resolve_conn_gone(c);
	peer_conn_gone(c->d, c);
	server_accept_resume(c->d); /* a descriptor came free */
}

static const struct conn_hooks daemon_conn_hooks = {
    .dispatch = request_dispatch,
    .submit_packed = op_submit_packed,
    .closed = daemon_conn_closed,
    .freed = notification_owner_free,
};

static void
daemon_peer_up(struct peer *p, bool restarted)
{
	resolve_peer_up(p, restarted);
	op_unpark(p); /* what is stale for good fails now, the rest runs */
}

static void
daemon_peer_down(struct peer *p, ucs_status_t st, bool was_connecting)
{
	resolve_peer_down(p);
	/* an inbound peer carries no operation of ours */
	if (p->inbound)
		return;
	op_peer_failed(p, st);
	/* Parked operations waited for this reconnect: it failed, and they
	 * fail with its real cause. */
	if (was_connecting)
		op_parked_fail_all(p, p->last_status, p->last_error);
}

static void
daemon_peer_forget(struct peer *p)
{
	op_parked_fail_all(p,
			   p->d->shutting_down ? RMA__V1__STATUS__ERR_SHUTDOWN
					       : RMA__V1__STATUS__ERR_CANCELED,
			   "peer forgotten");
	resolve_peer_destroy(p);
	op_peer_forget(p);
	target_forget(p);
}

static const struct peer_hooks daemon_peer_hooks = {
    .up = daemon_peer_up,
    .down = daemon_peer_down,
    .import_waited = resolve_import_waited,
    .forget = daemon_peer_forget,
    .conn_gone = op_parked_conn_gone,
    .expire_parked = op_expire_parked,
    .ops_expire = op_check_deadlines,
};

static const struct resolve_hooks daemon_resolve_hooks = {
    .settled = op_unpark,
};

/* What may arrive from other daemons, over which endpoints, and when:
 * the one table of the subsystems that serve peer messages. */
static const struct am_route daemon_am_routes[] = {
    {AM_HELLO, true, true, 0, handshake_on_hello},
    {AM_HELLO_PROOF, true, true, 0, handshake_on_proof},
    {AM_HELLO_REPLY, false, true, 0, handshake_on_reply},
    {AM_HELLO_DONE, false, true, 0, handshake_on_done},
    {AM_RESOLVE, true, false, 0, resolve_on_request},
    {AM_RESOLVE_REPLY, false, false, 0, resolve_on_reply},
    {AM_FREED, false, false, 0, resolve_on_freed},
    {AM_PUT, true, false, sizeof(struct am_rma), target_on_put},
    {AM_GET, true, false, sizeof(struct am_rma), target_on_get},
    {AM_BATCH, true, false, 0, target_on_batch},
    {AM_PUT_ACK, false, false, sizeof(struct am_rma_answer), op_on_put_ack},
    {AM_GET_REPLY, false, false, sizeof(struct am_rma_answer), op_on_get_reply},
    {AM_BATCH_REPLY, false, false, 0, op_on_batch_reply},
};

static const struct am_hooks daemon_am_hooks = {
    .routes = daemon_am_routes,
    .n_routes = sizeof(daemon_am_routes) / sizeof(daemon_am_routes[0]),
    .fail = peer_fail,
};

/* One worker's loop, UCX worker and handlers. */
static int
daemon_worker_start(struct daemon *d, struct world *w, uint32_t index,
		    const struct daemon *first)
{
	d->world = w;
	d->index = index;
	d->cfg = &w->cfg;
	d->ucp = w->ucp;
	if (first != NULL) {
		memcpy(d->id, first->id, sizeof(d->id));
		memcpy(d->id_hex, first->id_hex, sizeof(d->id_hex));
		memcpy(d->ucx_version, first->ucx_version,
		       sizeof(d->ucx_version));
		d->started = first->started;
	}
	d->hooks = &daemon_hooks;
	d->region_hooks = &daemon_region_hooks;
	d->conn_hooks = &daemon_conn_hooks;
	d->peer_hooks = &daemon_peer_hooks;
	d->resolve_hooks = &daemon_resolve_hooks;
	d->am_hooks = &daemon_am_hooks;
	d->listen_fd = -1;
	d->mail_fd = -1;
	d->next_token = 1;
	d->am_piece = ucx_defaults_am_fragment(sizeof(struct am_rma));
	TAILQ_INIT(&d->conns);
	TAILQ_INIT(&d->dirty_conns);
	TAILQ_INIT(&d->peers);
	TAILQ_INIT(&d->quarantine);
	for (size_t i = 0; i < DAEMON_N_PARTS; i++) {
		const struct daemon_part *part = &daemon_parts[i];
		d->parts_started = i + 1;
		/* Each start logs its own failure. */
		if (part->start != NULL && part->start(d) < 0)
			return -1;
	}
	if (first != NULL)
		d->listen_sa = first->listen_sa;
	return 0;
}

static void
daemon_worker_stop(struct daemon *d)
{
	while (d->parts_started > 0) {
		const struct daemon_part *part =
		    &daemon_parts[--d->parts_started];
		if (part->stop != NULL)
			part->stop(d);
	}
}

/* Until a part learns better: what the configuration says. */
static void
daemon_learned_init(struct world_learned *l, const struct config *cfg)
{
	snprintf(l->transports, sizeof(l->transports), "%s", cfg->transports);
	l->listen_port = cfg->listen_port;
	snprintf(l->socket_path, sizeof(l->socket_path), "%s",
		 cfg->socket_path);
	l->activation_fd = -1;
}

int
daemon_start(struct daemon *d, const struct config *cfg)
{
	return daemon_start_as(d, cfg, NULL);
}

int
daemon_start_as(struct daemon *d, const struct config *cfg,
		const struct handover_state *from)
{
	struct world *w;
	uint32_t n = cfg->workers > 0 ? cfg->workers : 1;

	memset(d, 0, sizeof(*d));
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -1;
	d->world = w;
	w->cfg = *cfg;
	w->cfg.workers = n;
	d->cfg = &w->cfg;
	daemon_learned_init(&w->learned, cfg);
	/* A fresh identity per start: descriptors of a previous run are
	 * recognised as stale, never written through. A hand-over keeps
	 * the identity, since it keeps the regions. */
	if (from != NULL)
		memcpy(d->id, from->id, sizeof(d->id));
	else if (getrandom(d->id, sizeof(d->id), 0) != sizeof(d->id)) {
		log_error("daemon_start: getrandom: %s", strerror(errno));
		goto err_free_world;
	}
	descriptor_hex(d->id, sizeof(d->id), d->id_hex);
	d->started = daemon_now();
	w->n = n;
	w->workers = calloc(n, sizeof(*w->workers));
	if (w->workers == NULL)
		goto err;
	w->workers[0] = d;
	for (uint32_t i = 1; i < n; i++) {
		w->workers[i] = calloc(1, sizeof(struct daemon));
		if (w->workers[i] == NULL)
			goto err;
	}
	w->snapshot = &snapshot_hooks;
	w->next_region_id = 1;
	w->next_conn_id = 1;
	w->next_peer_id = 1;
	{
		/* Epochs of this run start above any of an earlier run. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		w->next_epoch =
		    (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	if (from != NULL) {
		/* Region ids are never reused under one identity. */
		w->next_region_id = from->next_region_id;
		if (from->next_epoch > w->next_epoch)
			w->next_epoch = from->next_epoch;
		/* the predecessor's connections, of our identity, are all
		 * below: each target closes them at our first hello
		 * (handshake.c) */
		w->retire.floor = w->next_epoch;
		w->restarts = from->restarts + 1;
	}
	idmap_init(&w->regions);
	uidlimit_init(&w->uids);
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->issued.lock, NULL);
	pthread_mutex_init(&w->retire.lock, NULL);
	pthread_cond_init(&w->parked_cv, NULL);
	pthread_cond_init(&w->resume_cv, NULL);
	/* before UCX opens a socket: ucx_accept.c refuses all until then */
	if (guard_publish_allow(cfg) < 0)
		goto err;
	if (worker_context_create(d, &w->ucp) < 0)
		goto err;
	/* Worker 0 first: it listens, and the rest learn the address. */
	for (uint32_t i = 0; i < n; i++) {
		if (daemon_worker_start(w->workers[i], w, i,
					i == 0 ? NULL : d) < 0)
			goto err;
	}
	if (world_start_threads(w) < 0)
		goto err;
	return 0;

err:
	daemon_stop(d);
	return -1;

err_free_world:
	free(w);
	d->world = NULL;
	return -1;
}

void
daemon_stop(struct daemon *d)
{
	struct world *w = d->world;

	if (w == NULL)
		return;
	/* Draining workers leave their loops on their own deadline. */
	world_join_threads(d, !d->shutting_down);
	for (uint32_t i = 1; i < w->n && w->workers; i++) {
		if (w->workers[i] != NULL)
			daemon_worker_stop(w->workers[i]);
	}
	daemon_worker_stop(d);
	for (uint32_t i = 1; i < w->n && w->workers; i++)
		free(w->workers[i]);
	if (w->ucp)
		ucp_cleanup(w->ucp);
	idmap_cleanup(&w->regions);
	uidlimit_cleanup(&w->uids);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->issued.lock);
	pthread_mutex_destroy(&w->retire.lock);
	pthread_cond_destroy(&w->parked_cv);
	pthread_cond_destroy(&w->resume_cv);
	free(w->workers);
	free(w);
	d->world = NULL;
	d->cfg = NULL;
}

static void
daemon_finish_shutdown(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	log_warn("daemon_finish_shutdown: %llu operations still in flight "
		 "after %.1f s, failing them",
		 (unsigned long long)d->ops_in_flight,
		 d->cfg->shutdown_timeout);
	event_base_loopbreak(d->base);
}

void
daemon_begin_shutdown(struct daemon *d)
{
	Rma__V1__Shutdown shutdown = RMA__V1__SHUTDOWN__INIT;
	Rma__V1__Event event = RMA__V1__EVENT__INIT;
	struct timeval tv = worker_timeval(d->cfg->shutdown_timeout);
	struct conn *c;

	if (d->shutting_down)
		return;
	d->shutting_down = true;
	server_stop(d);
	shutdown.detail = "rmad is shutting down";
	event.body_case = RMA__V1__EVENT__BODY_SHUTDOWN;
	event.shutdown = &shutdown;
	TAILQ_FOREACH(c, &d->conns, link)
	conn_send_event(c, &event);
	event_base_once(d->base, -1, EV_TIMEOUT, daemon_finish_shutdown, d,
			&tv);
	worker_kick(d);
}

void
daemon_reconfigure(struct daemon *d, const struct config *next)
{
	struct world *w = d->world;
	struct config merged = w->cfg;

	config_take_reloadable(&merged, next);
	/* Replaced between two callbacks of every worker: no operation
	 * sees half a limit list. */
	world_stop(d);
	w->cfg = merged;
	log_init(next->log_level);
	world_resume(d);
	/* UCX's async thread takes it on its own: no world stop needed */
	if (guard_publish_allow(next) < 0)
		log_error("daemon_reconfigure: UCX's sockets keep the old "
			  "peer_allow");
}
