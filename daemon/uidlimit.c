/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-user limits. The per-client limits (max_regions, max_region_bytes)
 * bound one connection; without these, one user opening many connections
 * could still fill rmad's fd table or memory and starve every other
 * user. Connections are spread over the workers, so the counts live in
 * the world under their own mutex (not the world stop: a connect must
 * not park every worker). Root is counted as any user: the allow lists
 * let root in because it could bypass them anyway, but its clients are
 * as able to exhaust the daemon as anyone's. */
#include "uidlimit.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void
uidlimit_init(struct uidlimit *u)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
}

void
uidlimit_cleanup(struct uidlimit *u)
{
	free(u->v);
	pthread_mutex_destroy(&u->lock);
}

/* @uid's entry, made if @make and missing; NULL if none (or no memory).
 * Under the lock. */
static struct uidlimit_entry *
uidlimit_find(struct uidlimit *u, uid_t uid, bool make)
{
	struct uidlimit_entry *v;

	for (size_t i = 0; i < u->n; i++) {
		if (u->v[i].uid == uid)
			return &u->v[i];
	}
	if (!make)
		return NULL;
	if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 16;

		v = realloc(u->v, cap * sizeof(*v));
		if (v == NULL)
			return NULL;
		u->v = v;
		u->cap = cap;
	}
	v = &u->v[u->n++];
	memset(v, 0, sizeof(*v));
	v->uid = uid;
	return v;
}

/* A user holding nothing leaves the table. Under the lock. */
static void
uidlimit_drop_if_empty(struct uidlimit *u, struct uidlimit_entry *e)
{
	if (e->conns != 0 || e->regions != 0 || e->bytes != 0)
		return;
	*e = u->v[--u->n];
}

enum uidlimit_over
uidlimit_conn_get(struct uidlimit *u, uid_t uid, uint32_t max,
		  struct uidlimit_entry *held_p)
{
	enum uidlimit_over over = UIDLIMIT_OK;
	struct uidlimit_entry *e;

	pthread_mutex_lock(&u->lock);
	e = uidlimit_find(u, uid, true);
	if (e == NULL) {
		over = UIDLIMIT_NO_MEMORY;
		memset(held_p, 0, sizeof(*held_p));
		held_p->uid = uid;
		goto out;
	}
	if (e->conns >= max)
		over = UIDLIMIT_CLIENTS;
	else
		e->conns++;
	*held_p = *e;
	uidlimit_drop_if_empty(u, e);
out:
	pthread_mutex_unlock(&u->lock);
	return over;
}

void
uidlimit_conn_put(struct uidlimit *u, uid_t uid)
{
	struct uidlimit_entry *e;

	pthread_mutex_lock(&u->lock);
	e = uidlimit_find(u, uid, false);
	if (e != NULL && e->conns > 0) {
		e->conns--;
		uidlimit_drop_if_empty(u, e);
	}
	pthread_mutex_unlock(&u->lock);
}

enum uidlimit_over
uidlimit_region_get(struct uidlimit *u, uid_t uid, uint64_t length,
		    uint64_t max_regions, uint64_t max_bytes,
		    struct uidlimit_entry *held_p)
{
	enum uidlimit_over over = UIDLIMIT_OK;
	struct uidlimit_entry *e;

	pthread_mutex_lock(&u->lock);
	e = uidlimit_find(u, uid, true);
	if (e == NULL) {
		over = UIDLIMIT_NO_MEMORY;
		memset(held_p, 0, sizeof(*held_p));
		held_p->uid = uid;
		goto out;
	}
	*held_p = *e;
	if (e->regions >= max_regions)
		over = UIDLIMIT_REGIONS;
	else if (e->bytes > max_bytes || length > max_bytes - e->bytes)
		over = UIDLIMIT_BYTES;
	else {
		e->regions++;
		e->bytes += length;
	}
	uidlimit_drop_if_empty(u, e);
out:
	pthread_mutex_unlock(&u->lock);
	return over;
}

void
uidlimit_region_put(struct uidlimit *u, uid_t uid, uint64_t length)
{
	struct uidlimit_entry *e;

	pthread_mutex_lock(&u->lock);
	e = uidlimit_find(u, uid, false);
	if (e != NULL && e->regions > 0) {
		e->regions--;
		e->bytes -= length < e->bytes ? length : e->bytes;
		uidlimit_drop_if_empty(u, e);
	}
	pthread_mutex_unlock(&u->lock);
}
