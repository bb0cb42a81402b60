/* SPDX-License-Identifier: BSD-2-Clause */
/* What the daemon is doing, copied once: the one source status.c (the
 * StatusReply) and metrics_http.c (the Prometheus page) render.
 *
 * Taking one (snapshot_hooks.take) stops the world, asks each owner
 * to describe its objects (the *_info_fill functions below, one in each
 * owner's file) and resumes it; rendering and replying happen after,
 * from the copy alone, so the stop lasts as long as the copying and no
 * longer. Nothing in a snapshot points into the daemon's objects. */
#ifndef RMAD_SNAPSHOT_H
#define RMAD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon.h"

/* peer.c: one peer daemon, either direction. */
struct peer_info {
	uint32_t id;
	char address[96];
	char listen[96]; /* peer_listen_address: the name both ends agree on */
	char daemon_id[2 * DAEMON_ID_SIZE + 1];
	Rma__V1__PeerState state;
	double state_since; /* daemon_now() */
	bool inbound;
	bool known; /* a handshake named it */
	uint32_t worker;
	uint16_t lane; /* inbound: the initiator's worker */
	uint64_t ops, bytes, errors, in_flight, dropped;
	uint64_t served_puts, served_gets, served_resolves, served_bytes;
	uint64_t refused;
	uint64_t connect_attempts, connect_failures;
	char last_error[256];
	double last_error_at; /* wall clock, 0 if none */
};

/* conn.c: one local client. */
struct client_info {
	uint32_t id;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[64];
	uint32_t regions;
	uint64_t region_bytes, in_flight, ops;
	uint32_t worker;
	bool ring;
};

/* region.c: one live region. */
struct region_info {
	uint64_t id;
	uint64_t length;
	uint32_t client_id; /* 0 while an orphan */
	uint64_t in_flight;
	bool orphan;
	bool registered; /* the client's own file (region_fd.c) */
};

/* op.c: one operation in flight. */
struct op_info {
	uint64_t op_id;
	Rma__V1__OpKind kind;
	uint32_t client_id;
	pid_t client_pid;
	uint32_t peer_id;
	char peer_address[96];
	uint64_t length;
	double age; /* seconds since it was accepted, at the snapshot */
};

/* world.c: the daemon as a whole, every worker's counters added up. */
struct world_info {
	uint32_t workers;
	uint32_t restarts;
	uint64_t regions_recovered, regions_reattached;
	uint32_t store_recoveries;
	char config_refused[384];
	struct counters counters;
	uint64_t ops_in_flight;
};

struct snapshot {
	double now; /* daemon_now() under the stop */
	/* this daemon, as worker 0 knows it */
	char daemon_id[2 * DAEMON_ID_SIZE + 1];
	char ucx_version[32];
	char transports[64];
	char listen[96];
	bool polling;
	double uptime; /* seconds */
	struct world_info world;
	uint64_t ucx_accept_refused, ucx_accept_refused_local_user;
	uint32_t fd_stored, fd_capacity;
	struct peer_info *peers; /* worker by worker, each in list order */
	size_t n_peers;
	struct client_info *clients;
	size_t n_clients;
	struct region_info *regions; /* in the region table's order */
	size_t n_regions;
	uint64_t region_bytes;
	uint32_t regions_orphaned;
	struct op_info *ops; /* the oldest in flight, oldest first */
	size_t n_ops;
	struct uidlimit_entry *users; /* uidlimit.c's table, copied */
	size_t n_users;
	uint32_t max_clients_per_uid, max_regions_per_uid;
	uint64_t max_region_bytes_per_uid;
	struct metrics_latency latency;
	struct metrics *series; /* metrics.c: merged; NULL when off */
};

/* Reached through d->world->snapshot (daemon.c sets it to
 * snapshot_hooks): status.c sits below the owners a snapshot asks
 * (request.c calls it), and a call by name would close a cycle;
 * metrics_http.c takes the same road. */
struct snapshot_hooks {
	/* Fills *s under one world stop from worker d (d's thread), with
	 * at most ops_max operations, and the metrics series if series
	 * (status needs no series; metrics no operations). A list that
	 * cannot be allocated is left empty. */
	void (*take)(struct daemon *d, size_t ops_max, bool series,
		     struct snapshot *s);
	void (*release)(struct snapshot *s);
};

extern const struct snapshot_hooks snapshot_hooks;

/* The owners' side, each called with the world stopped. */
void peer_info_fill(const struct peer *p, struct peer_info *pi);
void conn_info_fill(const struct conn *c, struct client_info *ci);
void region_info_fill(const struct region *r, struct region_info *ri);
/* op.c: the oldest op listed on p, and the one after op on its peer. */
const struct op *op_info_first(const struct peer *p);
const struct op *op_info_next(const struct op *op);
/* Which of two listed ops is older (their deadlines: start order). */
bool op_info_older(const struct op *a, const struct op *b);
void op_info_fill(const struct op *op, double now, struct op_info *oi);
void world_info_fill(const struct world *w, struct world_info *wi);
/* metrics.c: wd's latency into *latency, its series into *merged_p
 * (made at the first worker that has any; merged_p NULL: none). */
void metrics_info_fill(const struct daemon *wd, struct metrics **merged_p,
		       struct metrics_latency *latency);
void metrics_info_free(struct metrics *merged);

#endif
