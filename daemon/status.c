/* SPDX-License-Identifier: BSD-2-Clause */
/* The status request: everything an operator asks "what is rmad doing".
 * It reads every worker's state, so the world is stopped while the reply
 * is built and queued. */
#include "daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Operations listed in one reply: the oldest, which are the interesting
 * ones; the total is always there. */
#define STATUS_OPS_MAX 1000

/* In-flight operations on every peer, oldest first: each peer's list is in
 * start order already, so this merges their heads. Returns how many of
 * max were filled. */
static size_t
status_fill_ops(struct world *w, Rma__V1__OpInfo *infos, Rma__V1__OpInfo **ptrs,
		size_t max)
{
	struct op **cursor;
	struct peer *p;
	size_t n_peers = 0, n = 0, i;
	double now = daemon_now();

	for (uint32_t k = 0; k < w->n; k++) {
		TAILQ_FOREACH(p, &w->workers[k]->peers, link)
		n_peers++;
	}
	cursor = calloc(n_peers + 1, sizeof(*cursor));
	if (cursor == NULL)
		return 0;
	i = 0;
	for (uint32_t k = 0; k < w->n; k++) {
		TAILQ_FOREACH(p, &w->workers[k]->peers, link)
		cursor[i++] = TAILQ_FIRST(&p->ops);
	}
	while (n < max) {
		size_t best = n_peers;
		const struct op *op;
		Rma__V1__OpInfo *oi;
		double age;

		for (i = 0; i < n_peers; i++) {
			if (cursor[i] != NULL &&
			    (best == n_peers ||
			     cursor[i]->deadline < cursor[best]->deadline))
				best = i;
		}
		if (best == n_peers)
			break;
		op = cursor[best];
		cursor[best] = TAILQ_NEXT(cursor[best], link);
		age = now - op->started;
		oi = &infos[n];
		rma__v1__op_info__init(oi);
		oi->op_id = op->op_id;
		oi->kind = op->kind;
		oi->client_id = op->conn->id;
		oi->client_pid = (int32_t)op->conn->pid;
		oi->peer_id = op->peer->id;
		oi->peer_address = op->peer->address;
		oi->length = op->length;
		oi->age_us = age > 0 ? (uint64_t)(age * 1e6) : 0;
		ptrs[n++] = oi;
	}
	free(cursor);
	return n;
}

static void
status_add_counters(Rma__V1__Counters *sum, const struct counters *c)
{
	sum->ops_put += c->ops_put;
	sum->ops_get += c->ops_get;
	sum->ops_flush += c->ops_flush;
	sum->bytes_put += c->bytes_put;
	sum->bytes_get += c->bytes_get;
	sum->ops_failed += c->ops_failed;
	sum->clients_accepted += c->clients_accepted;
	sum->protocol_errors += c->protocol_errors;
	sum->regions_created += c->regions_created;
	sum->resolves_served += c->resolves_served;
	sum->target_puts += c->target_puts;
	sum->target_gets += c->target_gets;
	sum->peer_messages_dropped += c->am_dropped;
	sum->peers_cut_off += c->peers_cut_off;
	sum->inbound_refused += c->inbound_refused;
	sum->peer_auth_failures += c->auth_failures;
	sum->peer_connect_attempts += c->connect_attempts;
	sum->peer_connect_failures += c->connect_failures;
	sum->target_refused += c->target_refused;
	sum->ops_atomic += c->ops_atomic;
	sum->target_atomics += c->target_atomics;
	sum->notifications_ring += c->notify_ring;
	sum->notifications_socket += c->notify_socket;
	sum->notify_wakeups += c->notify_wakeups;
	sum->notify_wakeups_held += c->notify_wakeups_held;
}

/* Called with the world stopped. */
static void
status_reply(struct conn *c, uint64_t req_id)
{
	struct daemon *d = c->d;
	struct world *w = d->world;
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__StatusReply st = RMA__V1__STATUS_REPLY__INIT;
	Rma__V1__Counters counters = RMA__V1__COUNTERS__INIT;
	Rma__V1__PeerInfo *peers = NULL, **peer_ptrs = NULL;
	char(*peer_listens)[96] = NULL;
	Rma__V1__ClientInfo *clients = NULL, **client_ptrs = NULL;
	Rma__V1__RegionInfo *regions = NULL, **region_ptrs = NULL;
	Rma__V1__OpInfo *ops = NULL, **op_ptrs = NULL;
	size_t n_peers = 0, n_clients = 0, n_ops = 0, n, pos;
	struct metrics_latency latency = {0};
	Rma__V1__LatencyHistogram hist[METRICS_KINDS],
	    *hist_ptrs[METRICS_KINDS];
	double bounds[METRICS_BUCKETS];
	double now = daemon_now();
	char listen[96];
	struct region *r;

	snprintf(listen, sizeof(listen), "%s:%u", d->cfg.listen_host,
		 d->cfg.listen_port);
	st.daemon_id = d->id_hex;
	st.version = RMA_VERSION;
	st.ucx_version = d->ucx_version;
	st.transports = d->cfg.transports;
	st.listen_address = listen;
	st.uptime_ms = (uint64_t)((now - d->started) * 1000);
	st.pid = (int32_t)getpid();
	st.progress_mode = d->cfg.polling ? "polling" : "blocking";
	st.workers = w->n;
	st.restarts = w->restarts;
	st.regions_recovered = w->regions_recovered;
	st.regions_reattached = w->regions_reattached;
	st.config_refused = w->config_refused;

	for (uint32_t i = 0; i < w->n; i++) {
		struct daemon *wd = w->workers[i];
		struct peer *p;
		struct conn *k;

		TAILQ_FOREACH(p, &wd->peers, link)
		n_peers++;
		TAILQ_FOREACH(k, &wd->conns, link)
		n_clients++;
		n_ops += wd->ops_in_flight;
		status_add_counters(&counters, &wd->counters);
		metrics_latency_add(&latency, &wd->latency);
	}
	counters.ucx_accept_refused = guard_refused();
	counters.ucx_accept_refused_local_user = guard_refused_local_user();
	/* The latency histogram, for rates over an interval (rmactl top). */
	for (size_t b = 0; b < METRICS_BUCKETS; b++)
		bounds[b] = metrics_bounds[b];
	for (int k = 0; k < METRICS_KINDS; k++) {
		rma__v1__latency_histogram__init(&hist[k]);
		hist[k].kind = (Rma__V1__OpKind)k;
		hist[k].n_bounds = METRICS_BUCKETS;
		hist[k].bounds = bounds;
		hist[k].n_counts = METRICS_BUCKETS + 1;
		hist[k].counts = latency.buckets[k];
		hist_ptrs[k] = &hist[k];
	}
	st.n_latency = METRICS_KINDS;
	st.latency = hist_ptrs;
	peers = calloc(n_peers + 1, sizeof(*peers));
	peer_ptrs = calloc(n_peers + 1, sizeof(*peer_ptrs));
	peer_listens = calloc(n_peers + 1, sizeof(*peer_listens));
	clients = calloc(n_clients + 1, sizeof(*clients));
	client_ptrs = calloc(n_clients + 1, sizeof(*client_ptrs));
	n_peers = n_clients = 0;
	for (uint32_t i = 0; i < w->n && peers && peer_ptrs && peer_listens;
	     i++) {
		struct peer *p;

		TAILQ_FOREACH(p, &w->workers[i]->peers, link)
		{
			Rma__V1__PeerInfo *pi = &peers[n_peers];
			rma__v1__peer_info__init(pi);
			pi->peer_id = p->id;
			pi->address = p->address;
			pi->state = p->state;
			pi->daemon_id = p->remote_id_hex;
			pi->ops = p->stat_ops;
			pi->bytes = p->stat_bytes;
			pi->errors = p->stat_errors;
			pi->in_flight = p->in_flight;
			pi->last_error = p->last_error;
			pi->inbound = p->inbound;
			pi->state_age_ms =
			    (uint64_t)((now - p->state_since) * 1000);
			pi->worker = i;
			pi->dropped = p->stat_dropped;
			pi->served_puts = p->served_puts;
			pi->served_gets = p->served_gets;
			pi->served_resolves = p->served_resolves;
			pi->served_bytes = p->served_bytes;
			pi->refused = p->refused;
			peer_listen_address(p, peer_listens[n_peers],
					    sizeof(peer_listens[n_peers]));
			pi->listen_address = peer_listens[n_peers];
			pi->connect_attempts = p->connect_attempts;
			pi->connect_failures = p->connect_failures;
			pi->last_error_unix_ms =
			    p->last_error[0] != '\0'
				? (uint64_t)(p->last_error_at * 1000)
				: 0;
			peer_ptrs[n_peers++] = pi;
		}
	}
	st.n_peers = n_peers;
	st.peers = peer_ptrs;
	for (uint32_t i = 0; i < w->n && clients && client_ptrs; i++) {
		struct conn *k;

		TAILQ_FOREACH(k, &w->workers[i]->conns, link)
		{
			Rma__V1__ClientInfo *ci = &clients[n_clients];
			rma__v1__client_info__init(ci);
			ci->client_id = k->id;
			ci->pid = (int32_t)k->pid;
			ci->uid = (uint32_t)k->uid;
			ci->gid = (uint32_t)k->gid;
			ci->name = k->name;
			ci->regions = (uint32_t)k->regions.count;
			ci->region_bytes = k->region_bytes;
			ci->in_flight = k->in_flight;
			ci->ops = k->ops;
			ci->worker = i;
			ci->ring = k->ring != NULL;
			client_ptrs[n_clients++] = ci;
		}
	}
	st.n_clients = n_clients;
	st.clients = client_ptrs;

	regions = calloc(w->regions.count + 1, sizeof(*regions));
	region_ptrs = calloc(w->regions.count + 1, sizeof(*region_ptrs));
	n = 0;
	pos = 0;
	if (regions && region_ptrs) {
		while (idmap_next(&w->regions, &pos, (void **)&r)) {
			Rma__V1__RegionInfo *ri = &regions[n];
			rma__v1__region_info__init(ri);
			ri->region_id = r->id;
			ri->length = r->length;
			ri->client_id = r->owner ? r->owner->id : 0;
			ri->in_flight = r->in_flight;
			if (r->orphan)
				st.regions_orphaned++;
			region_ptrs[n++] = ri;
		}
	}
	st.n_regions = n;
	st.regions = region_ptrs;

	n = n_ops < STATUS_OPS_MAX ? n_ops : STATUS_OPS_MAX;
	ops = calloc(n + 1, sizeof(*ops));
	op_ptrs = calloc(n + 1, sizeof(*op_ptrs));
	st.n_ops = ops && op_ptrs ? status_fill_ops(w, ops, op_ptrs, n) : 0;
	st.ops = op_ptrs;
	st.ops_in_flight = n_ops;
	st.counters = &counters;

	reply.id = req_id;
	reply.body_case = RMA__V1__REPLY__BODY_STATUS_REPLY;
	reply.status_reply = &st;
	conn_send_reply(c, &reply, -1);
	free(peers);
	free(peer_ptrs);
	free(peer_listens);
	free(clients);
	free(client_ptrs);
	free(regions);
	free(region_ptrs);
	free(ops);
	free(op_ptrs);
}

void
status_handle(struct conn *c, uint64_t req_id)
{
	world_stop(c->d);
	status_reply(c, req_id);
	world_resume(c->d);
}
