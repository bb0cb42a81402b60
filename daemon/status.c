/* SPDX-License-Identifier: BSD-2-Clause */
/* The status request: everything an operator asks "what is rmad doing".
 * It renders a snapshot (snapshot.h), taken under one world stop; the
 * reply is built and queued after the world runs again. */
#include "daemon.h"
#include "snapshot.h"

#include <stdlib.h>
#include <unistd.h>

/* Operations listed in one reply: the oldest, which are the interesting
 * ones; the total is always there. */
#define STATUS_OPS_MAX 1000

/* The reply's parts, pointing into the snapshot: freed after sending. */
struct status_msg {
	Rma__V1__StatusReply st;
	Rma__V1__Counters counters;
	Rma__V1__LatencyHistogram hist[METRICS_KINDS];
	Rma__V1__LatencyHistogram *hist_ptrs[METRICS_KINDS];
	double bounds[METRICS_BUCKETS];
	Rma__V1__PeerInfo *peers, **peer_ptrs;
	Rma__V1__ClientInfo *clients, **client_ptrs;
	Rma__V1__RegionInfo *regions, **region_ptrs;
	Rma__V1__OpInfo *ops, **op_ptrs;
	Rma__V1__UserInfo *users, **user_ptrs;
};

static void
status_fill_daemon(Rma__V1__StatusReply *st, const struct snapshot *s)
{
	st->daemon_id = (char *)s->daemon_id;
	st->version = RMA_VERSION;
	st->ucx_version = (char *)s->ucx_version;
	st->transports = (char *)s->transports;
	st->listen_address = (char *)s->listen;
	st->uptime_ms = (uint64_t)(s->uptime * 1000);
	st->pid = (int32_t)getpid();
	st->progress_mode = s->polling ? "polling" : "blocking";
	st->workers = s->world.workers;
	st->restarts = s->world.restarts;
	st->regions_recovered = s->world.regions_recovered;
	st->regions_reattached = s->world.regions_reattached;
	st->config_refused = (char *)s->world.config_refused;
	st->ops_in_flight = s->world.ops_in_flight;
	st->regions_orphaned = s->regions_orphaned;
	st->max_clients_per_uid = s->max_clients_per_uid;
	st->max_regions_per_uid = s->max_regions_per_uid;
	st->max_region_bytes_per_uid = s->max_region_bytes_per_uid;
}

static void
status_fill_counters(Rma__V1__Counters *sum, const struct snapshot *s)
{
	const struct counters *c = &s->world.counters;

	sum->ops_put = c->ops_put;
	sum->ops_get = c->ops_get;
	sum->ops_flush = c->ops_flush;
	sum->bytes_put = c->bytes_put;
	sum->bytes_get = c->bytes_get;
	sum->ops_failed = c->ops_failed;
	sum->clients_accepted = c->clients_accepted;
	sum->protocol_errors = c->protocol_errors;
	sum->regions_created = c->regions_created;
	sum->resolves_served = c->resolves_served;
	sum->target_puts = c->target_puts;
	sum->target_gets = c->target_gets;
	sum->peer_messages_dropped = c->am_dropped;
	sum->peers_cut_off = c->peers_cut_off;
	sum->inbound_refused = c->inbound_refused;
	sum->peer_auth_failures = c->auth_failures;
	sum->peer_connect_attempts = c->connect_attempts;
	sum->peer_connect_failures = c->connect_failures;
	sum->target_refused = c->target_refused;
	sum->ops_atomic = c->ops_atomic;
	sum->target_atomics = c->target_atomics;
	sum->notifications_ring = c->notify_ring;
	sum->notifications_socket = c->notify_socket;
	sum->notify_wakeups = c->notify_wakeups;
	sum->notify_wakeups_held = c->notify_wakeups_held;
	sum->ucx_accept_refused = s->ucx_accept_refused;
	sum->ucx_accept_refused_local_user = s->ucx_accept_refused_local_user;
}

/* The latency histogram, for rates over an interval (rmactl top). */
static void
status_fill_latency(struct status_msg *msg, const struct snapshot *s)
{
	for (size_t b = 0; b < METRICS_BUCKETS; b++)
		msg->bounds[b] = metrics_bounds[b];
	for (int k = 0; k < METRICS_KINDS; k++) {
		Rma__V1__LatencyHistogram *h = &msg->hist[k];

		rma__v1__latency_histogram__init(h);
		h->kind = (Rma__V1__OpKind)k;
		h->n_bounds = METRICS_BUCKETS;
		h->bounds = msg->bounds;
		h->n_counts = METRICS_BUCKETS + 1;
		/* protobuf-c takes a non-const array; it only reads it */
		h->counts = (uint64_t *)s->latency.buckets[k];
		msg->hist_ptrs[k] = h;
	}
	msg->st.n_latency = METRICS_KINDS;
	msg->st.latency = msg->hist_ptrs;
}

static void
status_fill_peer(Rma__V1__PeerInfo *pi, const struct peer_info *p, double now)
{
	rma__v1__peer_info__init(pi);
	pi->peer_id = p->id;
	pi->address = (char *)p->address;
	pi->state = p->state;
	pi->daemon_id = (char *)p->daemon_id;
	pi->ops = p->ops;
	pi->bytes = p->bytes;
	pi->errors = p->errors;
	pi->in_flight = p->in_flight;
	pi->last_error = (char *)p->last_error;
	pi->inbound = p->inbound;
	pi->state_age_ms = (uint64_t)((now - p->state_since) * 1000);
	pi->worker = p->worker;
	pi->dropped = p->dropped;
	pi->served_puts = p->served_puts;
	pi->served_gets = p->served_gets;
	pi->served_resolves = p->served_resolves;
	pi->served_bytes = p->served_bytes;
	pi->refused = p->refused;
	pi->listen_address = (char *)p->listen;
	pi->connect_attempts = p->connect_attempts;
	pi->connect_failures = p->connect_failures;
	pi->last_error_unix_ms =
	    p->last_error[0] != '\0' ? (uint64_t)(p->last_error_at * 1000) : 0;
}

static void
status_fill_client(Rma__V1__ClientInfo *ci, const struct client_info *k)
{
	rma__v1__client_info__init(ci);
	ci->client_id = k->id;
	ci->pid = (int32_t)k->pid;
	ci->uid = (uint32_t)k->uid;
	ci->gid = (uint32_t)k->gid;
	ci->name = (char *)k->name;
	ci->regions = k->regions;
	ci->region_bytes = k->region_bytes;
	ci->in_flight = k->in_flight;
	ci->ops = k->ops;
	ci->worker = k->worker;
	ci->ring = k->ring;
}

static void
status_fill_region(Rma__V1__RegionInfo *ri, const struct region_info *r)
{
	rma__v1__region_info__init(ri);
	ri->region_id = r->id;
	ri->length = r->length;
	ri->client_id = r->client_id;
	ri->in_flight = r->in_flight;
	ri->registered = r->registered;
}

static void
status_fill_op(Rma__V1__OpInfo *oi, const struct op_info *op)
{
	rma__v1__op_info__init(oi);
	oi->op_id = op->op_id;
	oi->kind = op->kind;
	oi->client_id = op->client_id;
	oi->client_pid = (int32_t)op->client_pid;
	oi->peer_id = op->peer_id;
	oi->peer_address = (char *)op->peer_address;
	oi->length = op->length;
	oi->age_us = op->age > 0 ? (uint64_t)(op->age * 1e6) : 0;
}

/* n messages and n pointers to them; false (and nothing kept) when out
 * of memory: that list is left empty. */
static bool
status_alloc(size_t n, size_t size, void **items_p, void ***ptrs_p)
{
	*items_p = calloc(n + 1, size);
	*ptrs_p = calloc(n + 1, sizeof(void *));
	if (*items_p != NULL && *ptrs_p != NULL)
		return true;
	free(*items_p);
	free(*ptrs_p);
	*items_p = NULL;
	*ptrs_p = NULL;
	return false;
}

static void
status_fill_lists(struct status_msg *msg, const struct snapshot *s)
{
	Rma__V1__StatusReply *st = &msg->st;

	if (status_alloc(s->n_peers, sizeof(*msg->peers), (void **)&msg->peers,
			 (void ***)&msg->peer_ptrs)) {
		for (size_t i = 0; i < s->n_peers; i++) {
			status_fill_peer(&msg->peers[i], &s->peers[i], s->now);
			msg->peer_ptrs[i] = &msg->peers[i];
		}
		st->n_peers = s->n_peers;
	}
	st->peers = msg->peer_ptrs;
	if (status_alloc(s->n_clients, sizeof(*msg->clients),
			 (void **)&msg->clients, (void ***)&msg->client_ptrs)) {
		for (size_t i = 0; i < s->n_clients; i++) {
			status_fill_client(&msg->clients[i], &s->clients[i]);
			msg->client_ptrs[i] = &msg->clients[i];
		}
		st->n_clients = s->n_clients;
	}
	st->clients = msg->client_ptrs;
	if (status_alloc(s->n_regions, sizeof(*msg->regions),
			 (void **)&msg->regions, (void ***)&msg->region_ptrs)) {
		for (size_t i = 0; i < s->n_regions; i++) {
			status_fill_region(&msg->regions[i], &s->regions[i]);
			msg->region_ptrs[i] = &msg->regions[i];
		}
		st->n_regions = s->n_regions;
	}
	st->regions = msg->region_ptrs;
	if (status_alloc(s->n_ops, sizeof(*msg->ops), (void **)&msg->ops,
			 (void ***)&msg->op_ptrs)) {
		for (size_t i = 0; i < s->n_ops; i++) {
			status_fill_op(&msg->ops[i], &s->ops[i]);
			msg->op_ptrs[i] = &msg->ops[i];
		}
		st->n_ops = s->n_ops;
	}
	st->ops = msg->op_ptrs;
	if (status_alloc(s->n_users, sizeof(*msg->users), (void **)&msg->users,
			 (void ***)&msg->user_ptrs)) {
		for (size_t i = 0; i < s->n_users; i++) {
			Rma__V1__UserInfo *u = &msg->users[i];

			rma__v1__user_info__init(u);
			u->uid = (uint32_t)s->users[i].uid;
			u->clients = s->users[i].conns;
			u->regions = s->users[i].regions;
			u->region_bytes = s->users[i].bytes;
			msg->user_ptrs[i] = u;
		}
		st->n_users = s->n_users;
	}
	st->users = msg->user_ptrs;
}

static void
status_msg_free(struct status_msg *msg)
{
	free(msg->peers);
	free(msg->peer_ptrs);
	free(msg->clients);
	free(msg->client_ptrs);
	free(msg->regions);
	free(msg->region_ptrs);
	free(msg->ops);
	free(msg->op_ptrs);
	free(msg->users);
	free(msg->user_ptrs);
}

static void
status_reply(struct reply_to to, const struct snapshot *s)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	struct status_msg msg = {.st = RMA__V1__STATUS_REPLY__INIT,
				 .counters = RMA__V1__COUNTERS__INIT};

	status_fill_daemon(&msg.st, s);
	status_fill_counters(&msg.counters, s);
	msg.st.counters = &msg.counters;
	status_fill_latency(&msg, s);
	status_fill_lists(&msg, s);
	reply.body_case = RMA__V1__REPLY__BODY_STATUS_REPLY;
	reply.status_reply = &msg.st;
	reply_send(to, &reply, -1);
	status_msg_free(&msg);
}

void
status_handle(struct reply_to to)
{
	struct daemon *d = to.conn->d;
	const struct snapshot_hooks *h = d->world->snapshot;
	struct snapshot snap;

	h->take(d, STATUS_OPS_MAX, false, &snap);
	status_reply(to, &snap);
	h->release(&snap);
}
