/* SPDX-License-Identifier: BSD-2-Clause */
/* Parked operations: a put, get or atomic for a peer that is reconnecting,
 * or whose region its owner has not confirmed again since, waits here in
 * the client's order, within its own deadline, instead of failing with
 * the error of the connection before. A failed reconnect fails them with
 * its real cause; a gone client, a shutdown or a forgotten peer fails
 * them too, and the client may cancel them (Cancel) while they wait. */
#include "op_int.h"

#include <stdio.h>
#include <stdlib.h>

struct op_parked {
	Rma__V1__Op o;
	struct conn *conn; /* ref held */
	double deadline;
	TAILQ_ENTRY(op_parked) link;
};

void
op_park(struct conn *c, const Rma__V1__Op *o, struct peer *p)
{
	struct op_parked *pk = malloc(sizeof(*pk));

	if (pk == NULL) {
		op_fail(c, o, RMA__V1__STATUS__ERR_NO_MEMORY, "out of memory");
		return;
	}
	pk->o = *o;
	pk->conn = c;
	pk->deadline = daemon_now() + c->d->cfg->op_timeout;
	conn_ref(c);
	c->in_flight++;
	c->d->ops_in_flight++;
	TAILQ_INSERT_TAIL(&p->parked, pk, link);
	peer_maybe_reconnect(p);
}

/* Takes pk off p's list; the caller runs or fails pk->o, then frees. */
static void
op_unlink_parked(struct peer *p, struct op_parked *pk)
{
	TAILQ_REMOVE(&p->parked, pk, link);
	pk->conn->in_flight--;
	p->d->ops_in_flight--;
}

static void
op_fail_parked(struct peer *p, struct op_parked *pk, wire_status_t st,
	       const char *detail)
{
	op_unlink_parked(p, pk);
	if (!pk->conn->dead)
		op_fail(pk->conn, &pk->o, st, "%s", detail);
	conn_unref(pk->conn);
	free(pk);
}

/* Whether the op at the head of p's parked list can run (or fail) now:
 * its peer is up and its region confirmed, or gone for good. */
static bool
op_parked_ready(struct peer *p, const struct op_parked *pk)
{
	struct remote *rem;

	if (pk->conn->dead || p->d->shutting_down)
		return true;
	rem = idmap_get(&pk->conn->remotes, pk->o.remote_id);
	return rem == NULL || rem->res->valid || rem->res->stale;
}

void
op_unpark(struct peer *p)
{
	struct op_parked *pk;

	while ((pk = TAILQ_FIRST(&p->parked)) != NULL &&
	       op_parked_ready(p, pk)) {
		struct conn *c = pk->conn;
		op_unlink_parked(p, pk);
		if (!c->dead)
			op_submit_one(c, &pk->o, true);
		conn_unref(c);
		free(pk);
	}
	op_batch_send_all(p->d);
}

void
op_expire_parked(struct peer *p, double now)
{
	struct op_parked *pk;
	char detail[400];

	if (p->d->shutting_down) {
		op_parked_fail_all(p, RMA__V1__STATUS__ERR_SHUTDOWN,
				   "daemon shutting down");
		return;
	}
	/* One deadline for all: they were parked in order. */
	while ((pk = TAILQ_FIRST(&p->parked)) != NULL && pk->deadline <= now) {
		snprintf(detail, sizeof(detail),
			 "%s did not come back within %.1f s%s%s", p->address,
			 p->d->cfg->op_timeout, p->last_error[0] ? ": " : "",
			 p->last_error);
		op_fail_parked(p, pk,
			       p->last_status != RMA__V1__STATUS__OK
				   ? p->last_status
				   : RMA__V1__STATUS__ERR_TIMEOUT,
			       detail);
	}
}

void
op_parked_conn_gone(struct peer *p, struct conn *c)
{
	struct op_parked *pk, *next;

	for (pk = TAILQ_FIRST(&p->parked); pk != NULL; pk = next) {
		next = TAILQ_NEXT(pk, link);
		if (pk->conn == c)
			op_fail_parked(p, pk, RMA__V1__STATUS__ERR_CANCELED,
				       "client gone");
	}
}

void
op_parked_fail_all(struct peer *p, wire_status_t st, const char *detail)
{
	struct op_parked *pk;

	while ((pk = TAILQ_FIRST(&p->parked)) != NULL)
		op_fail_parked(p, pk, st, detail);
}

bool
op_parked_cancel(struct peer *p, struct conn *c, uint64_t op_id)
{
	struct op_parked *pk;

	TAILQ_FOREACH(pk, &p->parked, link)
	{
		if (pk->conn == c && pk->o.op_id == op_id) {
			op_fail_parked(p, pk, RMA__V1__STATUS__ERR_CANCELED,
				       "canceled while waiting for its peer "
				       "to come back");
			return true;
		}
	}
	return false;
}
