/* SPDX-License-Identifier: BSD-2-Clause */
/* Notifications to a region's owner: a put with OP_FLAG_NOTIFY, from a
 * peer (target.c) or a client of this daemon (op.c), tells the client that
 * owns the region what was written, once the bytes are in it.
 *
 * The owner's connection may live on another worker than the one that
 * applied the put (inbound peers are all on worker 0), so the notification
 * travels through the owner worker's mailbox: one mailbox is one FIFO, so
 * the puts of one initiator reach the owner in the order they were applied.
 * An owner on the applying worker itself is told directly.
 * What one pass of the worker's loop applied for one owner goes as one
 * job, and to the client through its shared ring (ring.c: two slots a
 * notification, the sender's id inline) while that has room, else as
 * Notifications events of packed 40-byte records (proto/oprec.h): a job,
 * an event or a protobuf message per put cost more than the put. The ring
 * takes notifications again only once the client took every event sent
 * instead, so one initiator's order holds across the two.
 *
 * The notifications a client holds (sent or waiting, not yet acknowledged
 * with NotifyAck) are bounded by NOTIFICATION_QUEUE_MAX. The bound is
 * taken before a byte is copied, with an atomic counter on the owner's
 * connection (any worker may take it): a put over the bound fails with
 * ERR_LIMIT and its bytes are not applied, so nothing is lost silently. */
#include "daemon.h"
#include "descriptor.h"
#include "oprec.h"

#include <stdlib.h>
#include <string.h>

/* Records in one Notifications event: 20 KiB, far below a frame. */
#define NOTIFICATION_PER_EVENT 512
/* Senders one job names; one more opens a new job for the owner. */
#define NOTIFICATION_SENDERS_MAX 8

struct notification_entry {
	uint64_t region_id;
	uint64_t generation;
	uint64_t offset;
	uint64_t length;
	uint64_t value;
	uint32_t sender; /* index into the job's senders */
};

/* The notifications for one owner gathered during one pass of the loop,
 * sent to its worker as one job. */
struct notification_job {
	struct conn *owner; /* compared, never followed until checked */
	uint32_t owner_id;
	size_t n, cap;
	struct notification_entry *entries;
	uint32_t n_senders;
	uint8_t senders[NOTIFICATION_SENDERS_MAX][DAEMON_ID_SIZE];
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

static void
notification_job_free(struct notification_job *job)
{
	free(job->entries);
	free(job);
}

/* Records [0, n) of recs to owner: through its ring as far as it has one
 * with room, the rest as one event naming job's senders. */
static void
notification_send(struct conn *owner, struct notification_job *job,
		  const struct notifrec *recs, size_t n)
{
	uint8_t packed[NOTIFICATION_PER_EVENT * NOTIFREC_SIZE];
	Rma__V1__Event ev = RMA__V1__EVENT__INIT;
	Rma__V1__Notifications ns = RMA__V1__NOTIFICATIONS__INIT;
	char hex[NOTIFICATION_SENDERS_MAX][2 * DAEMON_ID_SIZE + 1];
	char *senders[NOTIFICATION_SENDERS_MAX];
	size_t done = ring_notify(owner, recs, n, job->senders, job->n_senders);

	owner->d->counters.notify_ring += done;
	if (done == n)
		return;
	owner->d->counters.notify_socket += n - done;
	for (size_t i = done; i < n; i++)
		notifrec_encode(packed + (i - done) * NOTIFREC_SIZE, &recs[i]);
	for (uint32_t i = 0; i < job->n_senders; i++) {
		descriptor_hex(job->senders[i], DAEMON_ID_SIZE, hex[i]);
		senders[i] = hex[i];
	}
	ns.packed.data = packed;
	ns.packed.len = (n - done) * NOTIFREC_SIZE;
	ns.n_daemon_ids = job->n_senders;
	ns.daemon_ids = senders;
	ev.body_case = RMA__V1__EVENT__BODY_NOTIFICATIONS;
	ev.notifications = &ns;
	conn_send_event(owner, &ev);
	/* the ring waits until the client took this one */
	ring_socket_events(owner, 1);
}

/* On the owner's worker: each region is looked up again, since it may
 * have been freed (and its connection with it) while the job waited. */
static void
notification_deliver(struct daemon *d, void *arg)
{
	struct notification_job *job = arg;
	struct notifrec recs[NOTIFICATION_PER_EVENT];
	struct conn *alive = NULL;
	size_t k = 0, gone = 0;

	for (size_t i = 0; i < job->n; i++) {
		const struct notification_entry *e = &job->entries[i];
		struct region *r = region_lookup(d, e->region_id);

		if (r == NULL || r->generation != e->generation ||
		    r->owner != job->owner || job->owner->dead) {
			gone++;
			continue;
		}
		alive = job->owner; /* owns a region: not freed */
		recs[k].region_id = e->region_id;
		recs[k].offset = e->offset;
		recs[k].length = e->length;
		recs[k].value = e->value;
		recs[k].sender = e->sender;
		if (++k == NOTIFICATION_PER_EVENT) {
			notification_send(alive, job, recs, k);
			k = 0;
		}
	}
	if (k > 0)
		notification_send(alive, job, recs, k);
	/* Nobody to tell for these; a client that is still here gets
	 * their places in the bound back. */
	if (gone > 0) {
		if (alive == NULL)
			alive = notification_find_owner(d, job);
		if (alive != NULL)
			notification_release(alive, (uint32_t)gone);
	}
	notification_job_free(job);
}

/* The open job for owner that names sender, opened if need be; its
 * sender's index in *sender_p. */
static struct notification_job *
notification_open_job(struct daemon *d, struct conn *owner,
		      const uint8_t *sender, uint32_t *sender_p)
{
	struct notification_job *job = NULL;

	/* the newest job of this owner: older ones are already behind it */
	for (uint32_t i = d->notify_open_n; i-- > 0;) {
		if (d->notify_open[i]->owner == owner) {
			job = d->notify_open[i];
			break;
		}
	}
	if (job != NULL) {
		for (uint32_t i = job->n_senders; i-- > 0;) {
			if (memcmp(job->senders[i], sender, DAEMON_ID_SIZE) ==
			    0) {
				*sender_p = i;
				return job;
			}
		}
		if (job->n_senders < NOTIFICATION_SENDERS_MAX)
			goto add_sender;
	}
	if (d->notify_open_n == NOTIFICATION_OPEN_MAX)
		notification_flush(d);
	job = calloc(1, sizeof(*job));
	if (job == NULL)
		return NULL;
	job->owner = owner;
	job->owner_id = owner->id;
	d->notify_open[d->notify_open_n++] = job;
add_sender:
	memcpy(job->senders[job->n_senders], sender, DAEMON_ID_SIZE);
	*sender_p = job->n_senders++;
	return job;
}

void
notification_post(struct daemon *d, struct region *r, uint64_t offset,
		  uint64_t length, uint64_t value,
		  const uint8_t sender_id[DAEMON_ID_SIZE])
{
	struct conn *owner = r->owner;
	struct notification_entry *e;
	struct notification_job *job;
	uint32_t sender;

	job = notification_open_job(d, owner, sender_id, &sender);
	if (job == NULL)
		goto fail;
	if (job->n == job->cap) {
		size_t cap = job->cap ? 2 * job->cap : 64;
		struct notification_entry *es =
		    realloc(job->entries, cap * sizeof(*es));
		if (es == NULL)
			goto fail;
		job->entries = es;
		job->cap = cap;
	}
	e = &job->entries[job->n++];
	e->region_id = r->id;
	e->generation = r->generation;
	e->offset = offset;
	e->length = length;
	e->value = value;
	e->sender = sender;
	return;
fail:
	/* The bytes are in already: the notification is lost, and said so
	 * in the log rather than held against the bound for ever. */
	log_warn("notification for region %llu lost: out of memory",
		 (unsigned long long)r->id);
	notification_release(owner, 1);
}

void
notification_flush(struct daemon *d)
{
	for (uint32_t i = 0; i < d->notify_open_n; i++) {
		struct notification_job *job = d->notify_open[i];

		/* An owner of this worker is told now: the mailbox would
		 * cost an eventfd write, a wake-up and a loop turn per
		 * job. The jobs of one worker for one owner all take the
		 * same way, so one initiator's order holds either way. */
		if (job->owner->d == d) {
			notification_deliver(d, job);
			continue;
		}
		if (world_post(job->owner->d, notification_deliver, job) < 0) {
			log_warn("%zu notifications lost: out of memory",
				 job->n);
			notification_release(job->owner, (uint32_t)job->n);
			notification_job_free(job);
		}
	}
	d->notify_open_n = 0;
}
