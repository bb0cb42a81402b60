/* SPDX-License-Identifier: BSD-2-Clause */
/* One copy of the daemon's state for status.c and metrics_http.c
 * (snapshot.h): taken under one world stop, by asking each owner, and
 * nothing else. The lists are sized first and filled second, both under
 * the stop, so that no object comes or goes between the two. */
#include "snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
snapshot_self(const struct daemon *d, struct snapshot *s)
{
	snprintf(s->daemon_id, sizeof(s->daemon_id), "%s", d->id_hex);
	snprintf(s->ucx_version, sizeof(s->ucx_version), "%s", d->ucx_version);
	snprintf(s->transports, sizeof(s->transports), "%s",
		 d->world->learned.transports);
	snprintf(s->listen, sizeof(s->listen), "%s:%u", d->cfg->listen_host,
		 d->world->learned.listen_port);
	s->polling = d->cfg->polling;
	s->uptime = s->now - d->started;
}

static void
snapshot_peers(const struct world *w, struct snapshot *s)
{
	const struct peer *p;
	size_t n = 0;

	for (uint32_t i = 0; i < w->n; i++) {
		TAILQ_FOREACH(p, &w->workers[i]->peers, link)
		n++;
	}
	s->peers = calloc(n + 1, sizeof(*s->peers));
	if (s->peers == NULL)
		return;
	for (uint32_t i = 0; i < w->n; i++) {
		TAILQ_FOREACH(p, &w->workers[i]->peers, link)
		peer_info_fill(p, &s->peers[s->n_peers++]);
	}
}

static void
snapshot_clients(const struct world *w, struct snapshot *s)
{
	const struct conn *c;
	size_t n = 0;

	for (uint32_t i = 0; i < w->n; i++) {
		TAILQ_FOREACH(c, &w->workers[i]->conns, link)
		n++;
	}
	s->clients = calloc(n + 1, sizeof(*s->clients));
	if (s->clients == NULL)
		return;
	for (uint32_t i = 0; i < w->n; i++) {
		TAILQ_FOREACH(c, &w->workers[i]->conns, link)
		conn_info_fill(c, &s->clients[s->n_clients++]);
	}
}

static void
snapshot_regions(const struct world *w, struct snapshot *s)
{
	struct region *r;
	size_t pos = 0;

	s->regions = calloc(w->regions.count + 1, sizeof(*s->regions));
	if (s->regions == NULL)
		return;
	while (idmap_next(&w->regions, &pos, (void **)&r)) {
		struct region_info *ri = &s->regions[s->n_regions++];

		region_info_fill(r, ri);
		s->region_bytes += ri->length;
		if (ri->orphan)
			s->regions_orphaned++;
	}
}

/* The oldest max operations of every peer, oldest first: each peer's
 * list is in start order already, so this merges their heads. */
static void
snapshot_ops(const struct world *w, size_t max, struct snapshot *s)
{
	const struct op **cursor;
	const struct peer *p;
	size_t n_peers = 0, i;

	if (max > s->world.ops_in_flight)
		max = s->world.ops_in_flight;
	if (max == 0)
		return;
	for (uint32_t k = 0; k < w->n; k++) {
		TAILQ_FOREACH(p, &w->workers[k]->peers, link)
		n_peers++;
	}
	cursor = calloc(n_peers + 1, sizeof(*cursor));
	s->ops = calloc(max + 1, sizeof(*s->ops));
	if (cursor == NULL || s->ops == NULL)
		goto out;
	i = 0;
	for (uint32_t k = 0; k < w->n; k++) {
		TAILQ_FOREACH(p, &w->workers[k]->peers, link)
		cursor[i++] = op_info_first(p);
	}
	while (s->n_ops < max) {
		size_t best = n_peers;

		for (i = 0; i < n_peers; i++) {
			if (cursor[i] != NULL &&
			    (best == n_peers ||
			     op_info_older(cursor[i], cursor[best])))
				best = i;
		}
		if (best == n_peers)
			break;
		op_info_fill(cursor[best], s->now, &s->ops[s->n_ops++]);
		cursor[best] = op_info_next(cursor[best]);
	}
out:
	free(cursor);
}

static void
snapshot_take(struct daemon *d, size_t ops_max, bool series, struct snapshot *s)
{
	const struct world *w = d->world;

	memset(s, 0, sizeof(*s));
	world_stop(d);
	s->now = daemon_now();
	snapshot_self(d, s);
	world_info_fill(w, &s->world);
	s->ucx_accept_refused = guard_refused();
	s->ucx_accept_refused_local_user = guard_refused_local_user();
	fdstore_count(d, &s->fd_stored, &s->fd_capacity);
	for (uint32_t i = 0; i < w->n; i++)
		metrics_info_fill(w->workers[i], series ? &s->series : NULL,
				  &s->latency);
	snapshot_peers(w, s);
	snapshot_clients(w, s);
	snapshot_regions(w, s);
	snapshot_ops(w, ops_max, s);
	s->n_users = uidlimit_copy(&d->world->uids, &s->users);
	s->max_clients_per_uid = d->cfg->max_clients_per_uid;
	s->max_regions_per_uid = d->cfg->max_regions_per_uid;
	s->max_region_bytes_per_uid = d->cfg->max_region_bytes_per_uid;
	world_resume(d);
}

static void
snapshot_release(struct snapshot *s)
{
	free(s->peers);
	free(s->clients);
	free(s->regions);
	free(s->ops);
	free(s->users);
	metrics_info_free(s->series);
	memset(s, 0, sizeof(*s));
}

const struct snapshot_hooks snapshot_hooks = {
    .take = snapshot_take,
    .release = snapshot_release,
};
