/* SPDX-License-Identifier: BSD-2-Clause */
/* resolve.c: a descriptor resolved with the daemon that owns its region,
 * the answer cached per peer (struct resolved) and shared by the clients'
 * remote handles (struct remote); the owner's side of it; and what a
 * peer's coming and going means to the cache. Above the peer subsystem:
 * it hears of a peer's events through daemon.c (struct peer_hooks). */
#ifndef RMAD_RESOLVE_H
#define RMAD_RESOLVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <ucp/api/ucp.h>

#include "reply.h"

struct daemon;
struct conn;
struct peer;
struct peer_waiter;
struct region;
struct am_msg;

/* What the owner answered for one of its regions: the only bounds the
 * initiator trusts. Shared by every remote handle naming that region. */
struct resolved {
	struct peer *peer; /* NULL for a region of this daemon */
	uint64_t region_id;
	uint64_t generation;
	uint64_t addr;
	uint64_t length;
	ucp_rkey_h rkey;
	bool read_only; /* resolved with the region's read-only secret */
	bool valid;
	bool stale; /* freed by the owner, or the owner restarted: for good */
	int refs;
	TAILQ_ENTRY(resolved) link;
};

struct remote {
	uint64_t id;
	struct peer *peer;
	struct resolved *res;
};

/* What resolve.c tells the layers above it (daemon.c fills it). */
struct resolve_hooks {
	/* A region p owns was resolved again after a reconnect: what was
	 * parked for p may run now (op_park.c). */
	void (*settled)(struct peer *p);
};

void resolve_handle_import(struct reply_to to, uint32_t peer_id,
			   const char *descriptor);
void remote_release(struct remote *rem);
/* c closed: the remotes it imported go (conn_close empties c->remotes). */
void resolve_conn_gone(struct conn *c);
void resolved_unref(struct resolved *res);
/* Owner side: tell peers a region is gone, so their resolves go stale. */
void resolve_broadcast_freed(struct daemon *d, const struct region *r);
/* The peer came up (again): confirm cached regions, or mark them stale
 * when it restarted. */
void resolve_peer_up(struct peer *p, bool restarted);
/* The peer went down: waiting imports fail, the cache needs confirming. */
void resolve_peer_down(struct peer *p);
void resolve_peer_destroy(struct peer *p);
/* An import that waited for its peer's connection: go on, or fail. */
void resolve_import_waited(struct peer *p, struct peer_waiter *w);
void resolve_on_request(struct peer *p, const struct am_msg *m);
void resolve_on_reply(struct peer *p, const struct am_msg *m);
void resolve_on_freed(struct peer *p, const struct am_msg *m);

#endif
