/* SPDX-License-Identifier: BSD-2-Clause */
/* Notifications to a region's owner: a put with OP_FLAG_NOTIFY, from a
 * peer (target.c) or a client of this daemon (op.c), tells the client that
 * owns the region what was written, once the bytes are in it.
 *
 * The owner's connection may live on another worker than the one that
 * applied the put (inbound peers are all on worker 0), so the notification
 * travels through the owner worker's mailbox: one mailbox is one FIFO, so
 * the puts of one initiator reach the owner in the order they were applied.
 * An owner on the applying worker itself is told directly: while no job
 * waits, each notification goes into its ring as its put is applied,
 * seen by the owner at the end of the pass (notification_flush).
 * Otherwise what one pass of the worker's loop applied for one owner goes
 * as one job, and to the client through its shared ring (ring.c: two slots a
 * notification, the sender's id inline) while that has room, else as
 * Notifications events of packed 40-byte records (proto/oprec.h): a job,
 * an event or a protobuf message per put cost more than the put. The ring
 * takes notifications again only once the client took every event sent
 * instead, so one initiator's order holds across the two.
 *
 * The notifications a client holds (sent or waiting, not yet acknowledged
 * with NotifyAck) are bounded by NOTIFICATION_QUEUE_MAX, and each
 * initiator's by its share of that: at most half of what the others leave
 * free (2048 alone, 1024 beside one that took its 2048, ...), so that one
 * initiator that fills its share never starves the others. An initiator is
 * a client, of this daemon or of a peer (whose notifying puts name their
 * client, am_rma_notify.client). Initiators are counted in groups whose
 * name is not anyone's word: a peer daemon (the handshake names it) for
 * its clients, a uid (the kernel names it) for ours. A group holds at most
 * three quarters of what the other groups leave, and half of the free
 * share slots, so that no count of client numbers (or of connections)
 * takes one peer or one user past that: beside it, the others keep a
 * quarter. One client alone still has the half it would have without
 * groups (2048: the rules only bind once a group's clients add up) * share. The
 * place is taken before a byte is copied, by whichever worker applies the put,
 * under the owner's lock: a put over either bound fails with ERR_LIMIT and its
 * bytes are not applied, so nothing is lost silently.
 *
 * An acknowledgement is a count: the first n notifications the client was
 * sent. The owner's worker, the only one that sends them and hears the
 * acknowledgements, keeps whose they were as runs (share, count) in the
 * order sent, so that giving places back costs a run, not a walk. */
#include "daemon.h"
#include "descriptor.h"
#include "oprec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A power of two: the share table is open-addressed. */
#define NOTIFICATION_SHARES NOTIFICATION_INITIATORS_MAX

/* One initiator's place in an owner's bound. */
struct notification_share {
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t client;
	uint32_t held;
	uint16_t group; /* its initiator in groups[] */
	bool used;	/* holds a key: a lookup goes on past it */
};

/* The initiators of one peer daemon, or of one uid of ours. */
struct notification_group {
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t group; /* notification_initiator.group */
	uint32_t held;	/* of its shares */
	uint16_t live;	/* its shares that hold any */
	uint16_t refs;	/* its shares in the table; 0: a free group */
};

/* Notifications sent to the owner in a row from one share. */
struct notification_run {
	uint16_t share;
	uint16_t n;
};

/* What the notifications an owner holds are, by initiator. */
struct notification_bound {
	uint32_t held;
	uint32_t live; /* shares that hold any */
	/* The share found last: a stream of notifying puts comes from one
	 * initiator, and is then told without a hash and a probe. Only a
	 * hint: it is checked like any share the probe meets. */
	uint32_t last;
	struct notification_share shares[NOTIFICATION_SHARES];
	struct notification_group groups[NOTIFICATION_SHARES];
};

/* An owner's bound. lock guards it (any worker reserves) when there are
 * workers to guard it from: with one, every reserve, release and give-back
 * runs on its thread, and a lock per notifying put (two atomic
 * instructions, each waiting for the stores before it) was most of what
 * the target daemon spent on one. Runs are the owner worker's alone.
 * Every run holds a notification held, so NOTIFICATION_QUEUE_MAX of them
 * never overflow. */
struct notification_owner {
	pthread_mutex_t lock;
	bool shared; /* more than one worker: lock is taken */
	struct notification_bound bound;
	uint32_t run_head, run_count;
	struct notification_run runs[NOTIFICATION_QUEUE_MAX];
};

/* Records in one Notifications event: 20 KiB, far below a frame. */
#define NOTIFICATION_PER_EVENT 512
/* Senders one job names; one more opens a new job for the owner. */
#define NOTIFICATION_SENDERS_MAX 8
/* Notifications a worker gathers before it ends its loop's pass (pass_end):
 * one pass may progress UCX thousands of times while a peer keeps
 * sending (worker.c), and an owner's wake-up is written, and its
 * NotifyAck read, only between passes: the owner, told nothing for 10 ms
 * passes at 4 KiB puts, window 256, fell behind by its whole share, and
 * the puts failed with LIMIT. One batch of 8-byte puts' worth. */
#define NOTIFICATION_FLUSH_AT 256

struct notification_entry {
	uint64_t region_id;
	uint64_t generation;
	uint64_t offset;
	uint64_t length;
	uint64_t value;
	uint32_t sender; /* index into the job's senders */
	uint32_t share;	 /* the place it holds in the owner's bound */
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

/* The owner's bound, made at its first notification: any worker may be
 * first, and one that loses the race frees its own. */
static struct notification_owner *
notification_owner_get(struct conn *owner)
{
	struct notification_owner *no, *none = NULL;

	no = __atomic_load_n(&owner->notify, __ATOMIC_ACQUIRE);
	if (no != NULL)
		return no;
	no = calloc(1, sizeof(*no));
	if (no == NULL)
		return NULL;
	pthread_mutex_init(&no->lock, NULL);
	no->shared = owner->d->world->n > 1;
	if (!__atomic_compare_exchange_n(&owner->notify, &none, no, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		pthread_mutex_destroy(&no->lock);
		free(no);
		return none;
	}
	return no;
}

static void
notification_lock(struct notification_owner *no)
{
	if (no->shared)
		pthread_mutex_lock(&no->lock);
}

static void
notification_unlock(struct notification_owner *no)
{
	if (no->shared)
		pthread_mutex_unlock(&no->lock);
}

void
notification_owner_free(struct conn *owner)
{
	if (owner->notify == NULL)
		return;
	pthread_mutex_destroy(&owner->notify->lock);
	free(owner->notify);
	owner->notify = NULL;
}

static uint32_t
notification_share_hash(const struct notification_initiator *from)
{
	uint64_t a, b;

	/* daemon ids are random; a peer's could be chosen, which only
	 * lengthens its own probe, never past the table */
	memcpy(&a, from->daemon_id, 8);
	memcpy(&b, from->daemon_id + 8, 8);
	a ^= b ^ (from->client * 0x9e3779b97f4a7c15ull);
	a ^= a >> 32;
	a *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(a >> 40) & (NOTIFICATION_SHARES - 1);
}

/* from's initiator in b, made if need be: a scan, but only for a share
 * new to the table (one that stays in it keeps its group). */
static int
notification_group_find(struct notification_bound *b,
			const struct notification_initiator *from)
{
	int free_group = -1;

	for (int i = 0; i < NOTIFICATION_SHARES; i++) {
		struct notification_group *g = &b->groups[i];

		if (g->refs == 0) {
			if (free_group < 0)
				free_group = i;
		} else if (g->group == from->group &&
			   memcmp(g->daemon_id, from->daemon_id,
				  DAEMON_ID_SIZE) == 0) {
			return i;
		}
	}
	if (free_group >= 0) {
		struct notification_group *g = &b->groups[free_group];

		memset(g, 0, sizeof(*g));
		memcpy(g->daemon_id, from->daemon_id, DAEMON_ID_SIZE);
		g->group = from->group;
	}
	return free_group;
}

/* from's share in b, made if need be; NULL when every share is held by
 * another initiator. */
static struct notification_share *
notification_share_probe(struct notification_bound *b,
			 const struct notification_initiator *from)
{
	struct notification_share *free_share = NULL;
	uint32_t at = notification_share_hash(from);
	int group;

	for (uint32_t probe = 0; probe < NOTIFICATION_SHARES; probe++) {
		struct notification_share *sh = &b->shares[at];

		if (!sh->used)
			break;
		if (sh->client == from->client &&
		    memcmp(sh->daemon_id, from->daemon_id, DAEMON_ID_SIZE) ==
			0) {
			b->last = at;
			return sh;
		}
		if (sh->held == 0 && free_share == NULL)
			free_share = sh;
		at = (at + 1) & (NOTIFICATION_SHARES - 1);
	}
	if (free_share == NULL) {
		if (b->shares[at].used)
			return NULL;
		free_share = &b->shares[at];
	}
	/* reused: no longer its group's (which may be free now) */
	if (free_share->used)
		b->groups[free_share->group].refs--;
	group = notification_group_find(b, from);
	if (group < 0) {
		if (free_share->used)
			b->groups[free_share->group].refs++;
		return NULL;
	}
	memcpy(free_share->daemon_id, from->daemon_id, DAEMON_ID_SIZE);
	free_share->client = from->client;
	free_share->group = (uint16_t)group;
	free_share->used = true;
	b->groups[group].refs++;
	b->last = (uint32_t)(free_share - b->shares);
	return free_share;
}

/* As notification_share_probe, the share found last tried first: a
 * stream of notifying puts is one initiator's, told without a hash and a
 * probe, and without a call (inline in notification_reserve). The hint is
 * checked as any share the probe meets, and a key is in the table once. */
static inline struct notification_share *
notification_share_find(struct notification_bound *b,
			const struct notification_initiator *from)
{
	struct notification_share *last = &b->shares[b->last];

	if (last->used && last->client == from->client &&
	    memcmp(last->daemon_id, from->daemon_id, DAEMON_ID_SIZE) == 0)
		return last;
	return notification_share_probe(b, from);
}

/* A share that holds nothing goes out of the table when nothing after
 * it in its probe chain needs it to be passed: it and the empty shares
 * before it, so that chains stay as short as the initiators holding. */
static void
notification_share_drop(struct notification_bound *b,
			struct notification_share *sh)
{
	const uint32_t mask = NOTIFICATION_SHARES - 1;
	uint32_t at = (uint32_t)(sh - b->shares);

	if (b->shares[(at + 1) & mask].used)
		return;
	while (b->shares[at].used && b->shares[at].held == 0) {
		b->shares[at].used = false;
		b->groups[b->shares[at].group].refs--;
		at = (at - 1) & mask;
	}
}

/* n places of share back into the bound. */
static void
notification_share_release(struct notification_bound *b, uint32_t share,
			   uint32_t n)
{
	struct notification_share *sh = &b->shares[share];
	struct notification_group *g = &b->groups[sh->group];

	/* clamped: a broken count never raises a bound */
	n = n < sh->held ? n : sh->held;
	sh->held -= n;
	g->held -= n;
	b->held -= n;
	if (sh->held == 0 && n > 0) {
		g->live--;
		b->live--;
	}
	/* The share found last stays in the table, empty: an owner that
	 * took everything it was sent empties its stream's share at each
	 * wake-up, and the stream's next put then probed for it again and
	 * scanned every group for its own. An empty share binds nothing
	 * and is reused by the next new initiator its probe meets. */
	if (sh->held == 0 && share != b->last)
		notification_share_drop(b, sh);
}

/* One place for from, if its share has room: half of what the other
 * initiators leave free, within its group's three quarters of what the
 * other groups leave; and a share slot, if its group holds at most half
 * of the free ones. */
static inline struct notification_share *
notification_bound_take(struct notification_bound *b,
			const struct notification_initiator *from)
{
	struct notification_share *sh = notification_share_find(b, from);
	struct notification_group *g;
	uint32_t others;
	bool fits;

	if (sh == NULL)
		return NULL;
	g = &b->groups[sh->group];
	others = b->held - g->held;
	fits = 2 * (sh->held + 1) + (b->held - sh->held) <=
		   NOTIFICATION_QUEUE_MAX &&
	       4 * (g->held + 1) <= 3 * (NOTIFICATION_QUEUE_MAX - others) &&
	       (sh->held > 0 ||
		2 * (g->live + 1) + (b->live - g->live) <= NOTIFICATION_SHARES);
	if (!fits) {
		if (sh->held == 0)
			notification_share_drop(b, sh);
		return NULL;
	}
	if (sh->held++ == 0) {
		g->live++;
		b->live++;
	}
	g->held++;
	b->held++;
	return sh;
}

/* One place for from's stream, if it is the share found last, holds some,
 * and the owner holds less than half its bound: every rule of
 * notification_bound_take holds then, and this is all it would do. With
 * h the share's held, g its group's, H the owner's (g, h <= H < Q / 2),
 * Q the bound: the first rule is h + H + 2 <= Q, and h + H + 2 <= 2H + 2
 * <= Q; the second is g + 3H + 4 <= 3Q, and g + 3H + 4 <= 4H + 4 <= 2Q;
 * the third binds only a share that holds none. */
static inline bool
notification_bound_stream(struct notification_bound *b,
			  const struct notification_initiator *from)
{
	struct notification_share *sh = &b->shares[b->last];
	uint64_t share_id[2], from_id[2];

	_Static_assert(sizeof(share_id) == DAEMON_ID_SIZE,
		       "a daemon id is two words");
	if (sh->held == 0 || b->held >= NOTIFICATION_QUEUE_MAX / 2 ||
	    sh->client != from->client)
		return false;
	/* as two words: memcmp was a call here */
	memcpy(share_id, sh->daemon_id, sizeof(share_id));
	memcpy(from_id, from->daemon_id, sizeof(from_id));
	if (((share_id[0] ^ from_id[0]) | (share_id[1] ^ from_id[1])) != 0)
		return false;
	sh->held++;
	b->groups[sh->group].held++;
	b->held++;
	return true;
}

/* notification_reserve's every case but a stream's next put: out of
 * line, so that the stream pays for none of its registers. */
static __attribute__((noinline)) wire_status_t
notification_reserve_take(struct conn *owner,
			  const struct notification_initiator *from,
			  uint32_t *share_p)
{
	struct notification_owner *no = notification_owner_get(owner);
	struct notification_share *sh;

	if (no == NULL)
		return RMA__V1__STATUS__ERR_NO_MEMORY;
	notification_lock(no);
	sh = notification_bound_take(&no->bound, from);
	if (sh != NULL)
		*share_p = (uint32_t)(sh - no->bound.shares);
	notification_unlock(no);
	return sh != NULL ? RMA__V1__STATUS__OK : RMA__V1__STATUS__ERR_LIMIT;
}

wire_status_t
notification_reserve(struct region *r,
		     const struct notification_initiator *from,
		     uint32_t *share_p)
{
	struct conn *owner = r->owner;
	struct notification_owner *no;

	/* An orphan (its owner has not taken it back after a hand-over)
	 * has nobody to tell. */
	if (owner == NULL)
		return RMA__V1__STATUS__ERR_NO_REGION;
	no = __atomic_load_n(&owner->notify, __ATOMIC_ACQUIRE);
	if (no != NULL && !no->shared &&
	    notification_bound_stream(&no->bound, from)) {
		*share_p = no->bound.last;
		return RMA__V1__STATUS__OK;
	}
	return notification_reserve_take(owner, from, share_p);
}

struct notification_bound *
notification_bound_copy(struct conn *owner)
{
	struct notification_bound *b = calloc(1, sizeof(*b));

	if (b == NULL || owner->notify == NULL)
		return b;
	notification_lock(owner->notify);
	*b = owner->notify->bound;
	notification_unlock(owner->notify);
	return b;
}

bool
notification_bound_try(struct notification_bound *b,
		       const struct notification_initiator *from)
{
	return notification_bound_take(b, from) != NULL;
}

void
notification_bound_free(struct notification_bound *b)
{
	free(b);
}

/* Places that nobody will acknowledge (the notification was not sent). */
static void
notification_give_back(struct conn *owner, uint32_t share, uint32_t n)
{
	struct notification_owner *no = owner->notify;

	notification_lock(no);
	notification_share_release(&no->bound, share, n);
	notification_unlock(no);
}

/* On the owner's worker: n notifications of share were sent, after those
 * already noted. Inline: once per notification on the direct path. */
static inline void
notification_note_sent(struct conn *owner, uint32_t share, uint32_t n)
{
	struct notification_owner *no = owner->notify;
	struct notification_run *last = NULL;

	if (no->run_count > 0)
		last = &no->runs[(no->run_head + no->run_count - 1) %
				 NOTIFICATION_QUEUE_MAX];
	if (last != NULL && last->share == share &&
	    last->n + n <= NOTIFICATION_QUEUE_MAX) {
		last->n += (uint16_t)n;
		return;
	}
	/* every run holds a place: no more runs than places */
	no->runs[(no->run_head + no->run_count) % NOTIFICATION_QUEUE_MAX] =
	    (struct notification_run){.share = (uint16_t)share,
				      .n = (uint16_t)n};
	no->run_count++;
}

void
notification_release(struct conn *owner, uint32_t n)
{
	struct notification_owner *no = owner->notify;

	if (no == NULL)
		return;
	/* A client acknowledging more than it was sent is clamped, not
	 * allowed to raise its own bound. */
	notification_lock(no);
	while (n > 0 && no->run_count > 0) {
		struct notification_run *run = &no->runs[no->run_head];
		uint32_t take = n < run->n ? n : run->n;

		notification_share_release(&no->bound, run->share, take);
		n -= take;
		run->n -= (uint16_t)take;
		if (run->n == 0) {
			no->run_head =
			    (no->run_head + 1) % NOTIFICATION_QUEUE_MAX;
			no->run_count--;
		}
	}
	notification_unlock(no);
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
/* What notification_post_direct wrote, published (the owner sees it
 * now); the owner, to conn_unref once nothing more of this pass uses it,
 * or NULL. */
static struct conn *
notification_publish_direct(struct daemon *d)
{
	struct conn *direct = d->notify_direct;

	if (direct != NULL) {
		d->counters.notify_ring += d->notify_direct_n;
		ring_notify_publish(direct, d->notify_direct_n);
		d->notify_direct = NULL;
		d->notify_direct_n = 0;
	}
	return direct;
}

static void
notification_deliver(struct daemon *d, void *arg)
{
	struct notification_job *job = arg;
	struct notifrec recs[NOTIFICATION_PER_EVENT];
	uint32_t gone[NOTIFICATION_SHARES];
	struct conn *alive = NULL;
	struct region *r = NULL;
	size_t k = 0, n_gone = 0;
	/* those sent in a row from one share, noted as one: a job is
	 * mostly one initiator's */
	uint32_t run_share = 0, run_n = 0;
	/* Written straight into this owner's ring but not yet published
	 * (UCX progressed between passes; the flush is still to come):
	 * seen first, or this job's event could overtake them. */
	struct conn *direct = d->notify_direct == job->owner
				  ? notification_publish_direct(d)
				  : NULL;

	for (size_t i = 0; i < job->n; i++) {
		const struct notification_entry *e = &job->entries[i];

		/* a stream goes to one region: looked up once per job */
		if (r == NULL || r->id != e->region_id)
			r = region_lookup(d, e->region_id);

		if (r == NULL || r->generation != e->generation ||
		    r->owner != job->owner || job->owner->dead) {
			if (n_gone++ == 0)
				memset(gone, 0, sizeof(gone));
			gone[e->share]++;
			continue;
		}
		alive = job->owner; /* owns a region: not freed */
		if (run_n > 0 && e->share != run_share) {
			notification_note_sent(alive, run_share, run_n);
			run_n = 0;
		}
		run_share = e->share;
		run_n++;
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
	if (run_n > 0)
		notification_note_sent(alive, run_share, run_n);
	if (k > 0)
		notification_send(alive, job, recs, k);
	/* Nobody to tell for these; a client that is still here gets
	 * their places in the bound back. */
	if (n_gone > 0) {
		if (alive == NULL)
			alive = notification_find_owner(d, job);
		for (uint32_t i = 0; alive != NULL && i < NOTIFICATION_SHARES;
		     i++)
			if (gone[i] > 0)
				notification_give_back(alive, i, gone[i]);
	}
	notification_job_free(job);
	if (direct != NULL)
		conn_unref(direct);
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

/* The open job for owner that names sender, with room for one more
 * entry: opened or grown if need be (NULL when out of memory), and kept
 * as the last one for notification_post. */
static struct notification_job *
notification_job_room(struct daemon *d, struct conn *owner,
		      const uint8_t *sender, uint32_t *sender_p)
{
	struct notification_job *job;

	job = notification_open_job(d, owner, sender, sender_p);
	if (job == NULL)
		return NULL;
	if (job->n == job->cap) {
		/* a pass ends at NOTIFICATION_FLUSH_AT: most jobs fit the
		 * first, where growing from 64 was a realloc every 85 puts */
		size_t cap = job->cap ? 2 * job->cap : NOTIFICATION_FLUSH_AT;
		struct notification_entry *es =
		    realloc(job->entries, cap * sizeof(*es));
		if (es == NULL)
			return NULL;
		job->entries = es;
		job->cap = cap;
	}
	d->notify_last = job;
	d->notify_last_sender = *sender_p;
	return job;
}

/* Straight into the owner's ring, when it is served on this worker and
 * none of its notifications from here waits in a job (no job is open):
 * the job's entry, the second pass over it and the copy into a record
 * were most of what the target daemon spent on a notification. Seen by
 * the owner at the flush, as a job's would be, one initiator's order
 * kept: what went into the ring went before what a job takes after. */
static inline bool
notification_post_direct(struct daemon *d, struct region *r, uint64_t offset,
			 uint64_t length, uint64_t value,
			 const uint8_t sender_id[DAEMON_ID_SIZE],
			 uint32_t share)
{
	struct conn *owner = r->owner;

	if (d->notify_open_n != 0 || owner->d != d ||
	    (d->notify_direct != NULL && d->notify_direct != owner) ||
	    !ring_notify_one(owner, r->id, offset, length, value, sender_id))
		return false;
	if (d->notify_direct == NULL) {
		/* until the flush: a close meanwhile frees it no sooner */
		conn_ref(owner);
		d->notify_direct = owner;
	}
	d->notify_direct_n++;
	notification_note_sent(owner, share, 1);
	if (++d->notify_open_entries >= NOTIFICATION_FLUSH_AT)
		d->pass_end = true;
	return true;
}

/* Into a job for the owner's worker; out of line, so that the direct
 * path pays for none of its registers. */
static __attribute__((noinline)) void
notification_post_job(struct daemon *d, struct region *r, uint64_t offset,
		      uint64_t length, uint64_t value,
		      const uint8_t sender_id[DAEMON_ID_SIZE], uint32_t share)
{
	struct conn *owner = r->owner;
	struct notification_job *job = d->notify_last;
	uint32_t sender = d->notify_last_sender;
	struct notification_entry *e;

	/* A stream goes to one owner from one sender: the last post's job
	 * is the newest of its owner (a newer one would have been the
	 * last), so one initiator's order holds, and no search, no call. */
	if (job == NULL || job->owner != owner || job->n == job->cap ||
	    memcmp(job->senders[sender], sender_id, DAEMON_ID_SIZE) != 0) {
		job = notification_job_room(d, owner, sender_id, &sender);
		if (job == NULL)
			goto fail;
	}
	e = &job->entries[job->n++];
	e->region_id = r->id;
	e->generation = r->generation;
	e->offset = offset;
	e->length = length;
	e->value = value;
	e->sender = sender;
	e->share = share;
	if (++d->notify_open_entries >= NOTIFICATION_FLUSH_AT)
		d->pass_end = true;
	return;
fail:
	/* The bytes are in already: the notification is lost, and said so
	 * in the log rather than held against the bound for ever. */
	log_warn("notification for region %llu lost: out of memory",
		 (unsigned long long)r->id);
	notification_give_back(owner, share, 1);
}

void
notification_post(struct daemon *d, struct region *r, uint64_t offset,
		  uint64_t length, uint64_t value,
		  const uint8_t sender_id[DAEMON_ID_SIZE], uint32_t share)
{
	if (!notification_post_direct(d, r, offset, length, value, sender_id,
				      share))
		notification_post_job(d, r, offset, length, value, sender_id,
				      share);
}

void
notification_stream_open(struct daemon *d, struct notification_stream *s,
			 struct region *r,
			 const struct notification_initiator *from,
			 uint32_t share)
{
	struct conn *owner = r->owner;
	struct notification_owner *no = owner->notify;
	uint32_t n, places;

	s->r = NULL;
	/* the put just posted went into the ring (no job is open), and its
	 * share is the stream's: the one found last, holding some */
	if (d->notify_direct != owner || d->notify_open_n != 0 || no == NULL ||
	    no->shared || no->bound.last != share ||
	    no->bound.held >= NOTIFICATION_QUEUE_MAX / 2)
		return;
	n = ring_notify_span(owner, &s->ring);
	if (n == 0)
		return;
	/* notification_bound_stream's one test, made for each place of
	 * the run at once: the owner holds less than half its bound before
	 * every one of them, since nothing else takes places meanwhile */
	places = NOTIFICATION_QUEUE_MAX / 2 - no->bound.held;
	if (n > places)
		s->ring.end = s->ring.at + (size_t)places *
					       RINGREC_NOTIFY_SLOTS *
					       RINGREC_COMP_SIZE;
	s->start = s->ring.at;
	s->r = r;
	s->region_id = r->id;
	s->client = from->client;
	s->share = share;
}

void
notification_stream_close(struct daemon *d, struct notification_stream *s)
{
	struct conn *owner;
	struct notification_bound *b;
	struct notification_share *sh;
	uint32_t n;

	if (s->r == NULL)
		return;
	n = (uint32_t)((size_t)(s->ring.at - s->start) /
		       (RINGREC_NOTIFY_SLOTS * RINGREC_COMP_SIZE));
	owner = s->r->owner;
	s->r = NULL;
	if (n == 0)
		return;
	b = &owner->notify->bound;
	sh = &b->shares[s->share];
	sh->held += n;
	b->groups[sh->group].held += n;
	b->held += n;
	ring_notify_span_end(owner, n);
	notification_note_sent(owner, s->share, n);
	d->notify_direct_n += n;
	d->notify_open_entries += n;
	if (d->notify_open_entries >= NOTIFICATION_FLUSH_AT)
		d->pass_end = true;
}

void
notification_flush(struct daemon *d)
{
	/* before any job: those it wrote went into the ring first */
	struct conn *direct = notification_publish_direct(d);

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
			for (size_t k = 0; k < job->n; k++)
				notification_give_back(
				    job->owner, job->entries[k].share, 1);
			notification_job_free(job);
		}
	}
	d->notify_open_n = 0;
	d->notify_open_entries = 0;
	d->notify_last = NULL;
	if (direct != NULL)
		conn_unref(direct);
}
