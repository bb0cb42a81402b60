/* SPDX-License-Identifier: BSD-2-Clause */
/* What each local user holds in rmad at once, over every worker:
 * connections, regions, region bytes (max_clients_per_uid,
 * max_regions_per_uid, max_region_bytes_per_uid). */
#ifndef RMAD_UIDLIMIT_H
#define RMAD_UIDLIMIT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct uidlimit_entry {
	uid_t uid;
	uint32_t conns;
	uint64_t regions;
	uint64_t bytes;
};

/* One lock for the table: taken once per connect and close and per
 * region made or freed, never on an operation's path. A user holding
 * nothing has no entry, so the table is at most one entry per client. */
struct uidlimit {
	pthread_mutex_t lock;
	struct uidlimit_entry *v;
	size_t n, cap;
};

/* Why uidlimit_region_get refused. */
enum uidlimit_over {
	UIDLIMIT_OK = 0,
	UIDLIMIT_NO_MEMORY,
	UIDLIMIT_CLIENTS,
	UIDLIMIT_REGIONS,
	UIDLIMIT_BYTES,
};

void uidlimit_init(struct uidlimit *u);
void uidlimit_cleanup(struct uidlimit *u);
/* One more connection of @uid if it holds fewer than @max; otherwise
 * UIDLIMIT_CLIENTS (or UIDLIMIT_NO_MEMORY) and nothing charged. *held_p
 * is what @uid held before. */
enum uidlimit_over uidlimit_conn_get(struct uidlimit *u, uid_t uid,
				     uint32_t max,
				     struct uidlimit_entry *held_p);
void uidlimit_conn_put(struct uidlimit *u, uid_t uid);
/* One more region of @length bytes of @uid within @max_regions and
 * @max_bytes; otherwise the limit it would pass and nothing charged.
 * *held_p is what @uid held before. */
enum uidlimit_over uidlimit_region_get(struct uidlimit *u, uid_t uid,
				       uint64_t length, uint64_t max_regions,
				       uint64_t max_bytes,
				       struct uidlimit_entry *held_p);
void uidlimit_region_put(struct uidlimit *u, uid_t uid, uint64_t length);
/* A copy of every user's entry (for status), into *out (free() it);
 * their number, 0 with *out NULL when there are none or no memory. */
size_t uidlimit_copy(struct uidlimit *u, struct uidlimit_entry **out);

#endif
