/* Notifications to a region's owner: a put with OP_FLAG_NOTIFY, from a
 * peer (target.c) or a client of this daemon (op.c), tells the client that
 * owns the region what was written, once the bytes are in it.
 *
 * The owner's connection may live on another worker than the one that
 * applied the put (inbound peers are all on worker 0), so the notification
 * travels through the owner worker's mailbox: one mailbox is one FIFO, so
 * the puts of one initiator reach the owner in the order they were applied.
 *
 * The notifications a client holds (sent or waiting, not yet acknowledged
 * with NotifyAck) are bounded by NOTIFICATION_QUEUE_MAX. The bound is
 * taken before a byte is copied, with an atomic counter on the owner's
 * connection (any worker may take it): a put over the bound fails with
 * ERR_LIMIT and its bytes are not applied, so nothing is lost silently. */
#include "daemon.h"

#include <stdlib.h>

struct notification_job {
	struct conn *owner; /* compared, never followed until checked */
	uint32_t owner_id;
	uint64_t region_id;
	uint64_t generation;
	uint64_t offset;
	uint64_t length;
	uint64_t value;
	char daemon_id[2 * DAEMON_ID_SIZE + 1];
};

wire_status_t
notification_reserve(struct region *r)
{
	struct conn *owner = r->owner;

	/* An orphan (its owner has not taken it back after a hand-over)
	 * has nobody to tell. */
	if (owner == NULL)
		return RMA__V1__STATUS__ERR_NO_REGION;
	if (__atomic_add_fetch(&owner->notify_held, 1, __ATOMIC_RELAXED) >
	    NOTIFICATION_QUEUE_MAX) {
		__atomic_sub_fetch(&owner->notify_held, 1, __ATOMIC_RELAXED);
		return RMA__V1__STATUS__ERR_LIMIT;
	}
	return RMA__V1__STATUS__OK;
}

void
notification_release(struct conn *owner, uint32_t n)
{
	uint32_t held = __atomic_load_n(&owner->notify_held, __ATOMIC_RELAXED);

	/* A client acknowledging more than it got is clamped, not
	 * allowed to raise its own bound. */
	while (held > 0) {
		uint32_t take = n < held ? n : held;
		if (__atomic_compare_exchange_n(
			&owner->notify_held, &held, held - take, false,
			__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return;
	}
}

/* The owner's connection if it still lives on this worker (its region
 * was freed while the notification waited, the client may not be gone). */
static struct conn *
notification_find_owner(struct daemon *d, const struct notification_job *job)
{
	struct conn *c;

	TAILQ_FOREACH(c, &d->conns, link)
	{
		if (c == job->owner && c->id == job->owner_id)
			return c;
	}
	return NULL;
}

/* On the owner's worker: the region is looked up again, since it may
 * have been freed (and its connection with it) while the job waited. */
static void
notification_deliver(struct daemon *d, void *arg)
{
	struct notification_job *job = arg;
	struct region *r = region_lookup(d, job->region_id);
	Rma__V1__Event ev = RMA__V1__EVENT__INIT;
	Rma__V1__Notification n = RMA__V1__NOTIFICATION__INIT;

	struct conn *c;

	if (r == NULL || r->generation != job->generation ||
	    r->owner != job->owner) {
		/* Nobody to tell; a client that is still here gets its
		 * place in the bound back. */
		c = notification_find_owner(d, job);
		if (c != NULL)
			notification_release(c, 1);
		goto cleanup;
	}
	if (job->owner->dead) {
		notification_release(job->owner, 1);
		goto cleanup;
	}
	n.region_id = job->region_id;
	n.offset = job->offset;
	n.length = job->length;
	n.value = job->value;
	n.daemon_id = job->daemon_id;
	ev.body_case = RMA__V1__EVENT__BODY_NOTIFICATION;
	ev.notification = &n;
	conn_send_event(job->owner, &ev);
cleanup:
	free(job);
}

void
notification_post(struct region *r, uint64_t offset, uint64_t length,
		  uint64_t value, const char *daemon_id)
{
	struct conn *owner = r->owner;
	struct notification_job *job = malloc(sizeof(*job));

	if (job == NULL)
		goto fail;
	job->owner = owner;
	job->owner_id = owner->id;
	job->region_id = r->id;
	job->generation = r->generation;
	job->offset = offset;
	job->length = length;
	job->value = value;
	snprintf(job->daemon_id, sizeof(job->daemon_id), "%s", daemon_id);
	if (world_post(owner->d, notification_deliver, job) == 0)
		return;
	free(job);
fail:
	/* The bytes are in already: the notification is lost, and said so
	 * in the log rather than held against the bound for ever. */
	log_warn("notification for region %llu lost: out of memory",
		 (unsigned long long)r->id);
	notification_release(owner, 1);
}
