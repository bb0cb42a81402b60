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

/* Charges @uid one more of what @add says, if within @max; otherwise
 * the limit it would pass and nothing charged. *held_p is what @uid held
 * before. */
static enum uidlimit_over
uidlimit_charge(struct uidlimit *u, uid_t uid, const struct uidlimit_entry *add,
		const struct uidlimit_entry *max, struct uidlimit_entry *held_p)
{
	enum uidlimit_over over = UIDLIMIT_OK;
	struct uidlimit_entry *e;

	pthread_mutex_lock(&u->lock);
	e = uidlimit_find(u, uid, true);
	if (e == NULL) {
		memset(held_p, 0, sizeof(*held_p));
		held_p->uid = uid;
		pthread_mutex_unlock(&u->lock);
		return UIDLIMIT_NO_MEMORY;
	}
	*held_p = *e;
	if (add->conns > 0 && e->conns >= max->conns)
		over = UIDLIMIT_CLIENTS;
	else if (add->regions > 0 && e->regions >= max->regions)
		over = UIDLIMIT_REGIONS;
	else if (e->bytes > max->bytes || add->bytes > max->bytes - e->bytes)
		over = UIDLIMIT_BYTES;
	else {
		e->conns += add->conns;
		e->regions += add->regions;
		e->bytes += add->bytes;
	}
	uidlimit_drop_if_empty(u, e);
	pthread_mutex_unlock(&u->lock);
	return over;
}

enum uidlimit_over
uidlimit_conn_get(struct uidlimit *u, uid_t uid, uint32_t max,
		  struct uidlimit_entry *held_p)
{
	const struct uidlimit_entry add = {.conns = 1},
				    limit = {.conns = max, .bytes = UINT64_MAX};

	return uidlimit_charge(u, uid, &add, &limit, held_p);
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
	const struct uidlimit_entry add = {.regions = 1, .bytes = length},
				    limit = {.regions = max_regions,
					     .bytes = max_bytes};

	return uidlimit_charge(u, uid, &add, &limit, held_p);
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

size_t
uidlimit_copy(struct uidlimit *u, struct uidlimit_entry **out)
{
	size_t n = 0;

	pthread_mutex_lock(&u->lock);
	*out = u->n > 0 ? malloc(u->n * sizeof(**out)) : NULL;
	if (*out != NULL) {
		memcpy(*out, u->v, u->n * sizeof(**out));
		n = u->n;
	}
	pthread_mutex_unlock(&u->lock);
	return n;
}
