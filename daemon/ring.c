/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's shared-memory ring (layout: proto/ringrec.h): its operations
 * come in through the submission ring and their completions go out
 * through the completion ring, with no system call per operation while
 * both sides are busy. The socket stays for everything else, for the
 * wake-ups of a side that sleeps, and for Submit frames the ring had no
 * room for.
 *
 * The client is not trusted, and it can write the whole mapping at any
 * moment. So every record is copied out once, into our memory, before it
 * is looked at, and then goes through the very path a Submit frame's
 * records take (op_submit_packed: oprec_decode, op_submit_one); the
 * counters it publishes are read once and checked against the ring's
 * size; our own counters are kept here and never read back. A client
 * that scribbles gets an error and loses its connection; what it does to
 * its mapping cannot reach another client.
 *
 * Order: the ring is drained before every frame read from the socket
 * (conn.c), and the client uses the ring again after a Submit frame only
 * once we took that frame (socket_submits): operations run in the order
 * the client issued them. Completions go through the ring while it has
 * room, else as Completions events over the socket (with its limits and
 * backpressure), and through the ring again only once the client took
 * all of those (socket_events_seen): they arrive in the order they came.
 * Notifications to the client's regions (notification.c) take the same
 * ring and the same rule, as Notifications events when it is full.
 *
 * Wake-ups: a ring with traffic is "hot": a zero timer polls it on every
 * loop turn until ring_spin (100 us by default; a client's next
 * operation usually comes within microseconds of its completion, and a
 * wake-up costs about 20 us on the VMs this was measured on) passes
 * without anything to do, or at once when the client runs on our CPU;
 * then it sets daemon_sleeps, looks once more, and leaves the loop to
 * sleep (no CPU when idle). The client's RingWake frame makes it hot again.
 * Wake-ups go over the socket, not an eventfd: the client shares an eventfd's
 * file status flags and could make our read or write of it block
 * (clear O_NONBLOCK, then drain it or fill its counter); a socket is
 * read and written with MSG_DONTWAIT, whatever the client does. The same
 * poller keeps polling the UCX worker for ring_spin after a progress pass
 * that had traffic (ring_after_pass), so that a target daemon under load
 * needs no wake-up per message either. For notifications alone an
 * owner's wake-up may be held back (ring_notify): once a wake-up found a
 * stream of them, the next comes RING_NOTIFY_HOLD later at the earliest,
 * carrying all that came meanwhile. */
#include "daemon.h"
#include "oprec.h"
#include "ringrec.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A yield that took this long (seconds) gave the CPU to a process that
 * was not waiting for us: a scheduler slice is milliseconds. */
#define RING_CROWDED 20e-6
/* Notifications one wake-up of their owner must find to call what
 * follows a stream, and how long (seconds) after such a wake-up the next
 * may wait (ring_notify): at a few hundred thousand a second, the ring
 * is half full sooner. */
#define RING_NOTIFY_STREAM 8
#define RING_NOTIFY_HOLD 500e-6

struct ring {
	struct conn *c;
	void *map;
	struct ringrec_header *h;
	uint8_t *sub, *comp;
	uint32_t comp_slots; /* asked for at hello, or the default */
	uint32_t sub_head;   /* ours: operations taken */
	uint32_t comp_tail;  /* ours: completion slots written */
	uint32_t announced;  /* ours: comp_tail as last published */
	/* slots ring_complete may still write without asking ring_room:
	 * never more than the ring has free (only the client frees them),
	 * 0 once events went over the socket */
	uint32_t room;
	uint32_t socket_submits; /* ours: Submit frames taken */
	double active;		 /* daemon_now() of the last traffic */
	uint32_t socket_events;	 /* ours: Completions events sent instead */
	bool hot;
	TAILQ_ENTRY(ring) hot_link;
	/* Notifications: how many since the client's last wake-up, when
	 * that was (daemon_now()), whether it found a stream of them, and
	 * the timer of a wake-up held back (ring_notify). */
	uint32_t since_wake;
	double last_wake;
	bool stream;
	struct event *wake_ev;
};

TAILQ_HEAD(ring_list, ring);

struct ring_poller {
	struct event *ev;
	struct ring_list hot;
	bool polling; /* in ring_poll: it flushes what completes */
	/* The UCX worker is polled too while it had traffic lately:
	 * daemon_now() of the last, and the counters that tell it. */
	bool worker_hot;
	double worker_active;
	uint64_t traffic;
};

/* The client broke the ring's rules: it is told why, then closed. */
static void
ring_fail(struct conn *c, const char *what, uint32_t got, uint32_t ours)
{
	c->d->counters.protocol_errors++;
	conn_send_error(c, 0, RMA__V1__STATUS__ERR_PROTOCOL,
			"shared ring: %s counter %u is impossible (ours is "
			"%u): the client wrote over the ring",
			what, got, ours);
	/* the error reply goes out, then the close (conn.c) */
	c->closing = true;
}

static void ring_poll(evutil_socket_t fd, short what, void *arg);
static bool ring_wake(struct conn *c);

static struct ring_poller *
ring_poller_get(struct daemon *d)
{
	struct ring_poller *rp = d->rings;

	if (rp != NULL)
		return rp;
	rp = calloc(1, sizeof(*rp));
	if (rp == NULL)
		return NULL;
	rp->ev = evtimer_new(d->base, ring_poll, d);
	if (rp->ev == NULL) {
		free(rp);
		return NULL;
	}
	TAILQ_INIT(&rp->hot);
	d->rings = rp;
	return rp;
}

void
ring_poller_free(struct daemon *d)
{
	if (d->rings == NULL)
		return;
	event_free(d->rings->ev);
	free(d->rings);
	d->rings = NULL;
}

/* Traffic on r: poll it on every loop turn for a while. */
static void
ring_heat(struct ring *r)
{
	static const struct timeval zero = {0, 0};
	struct ring_poller *rp = r->c->d->rings;

	r->active = daemon_now();
	ringrec_note_cpu(&r->h->daemon_cpu);
	if (r->hot)
		return;
	r->hot = true;
	TAILQ_INSERT_TAIL(&rp->hot, r, hot_link);
	/* Awake: the client need not ring. A late RingWake is harmless. */
	ringrec_store(&r->h->daemon_sleeps, 0);
	if (!evtimer_pending(rp->ev, NULL))
		evtimer_add(rp->ev, &zero);
}

static void
ring_cool(struct ring *r)
{
	if (!r->hot)
		return;
	r->hot = false;
	TAILQ_REMOVE(&r->c->d->rings->hot, r, hot_link);
}

wire_status_t
ring_create(struct conn *c, uint32_t comp_slots, int *memfd_p,
	    Rma__V1__RingInfo *info, char *detail, size_t detail_len)
{
	struct ring *r;
	int fd;

	if (!ringrec_comp_slots_valid(comp_slots))
		comp_slots = RINGREC_COMP_SLOTS;

	if (ring_poller_get(c->d) == NULL)
		goto err_nomem;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		goto err_nomem;
	fd = region_memfd_map("rmad-ring", RINGREC_SIZE_FOR(comp_slots),
			      &r->map, detail, detail_len);
	if (fd < 0)
		goto err_free;
	r->c = c;
	r->h = r->map;
	r->sub = (uint8_t *)r->map + RINGREC_HEADER_SIZE;
	r->comp = r->sub + RINGREC_SUB_SLOTS * RINGREC_SUB_SIZE;
	r->h->magic = RINGREC_MAGIC;
	r->h->version = RINGREC_VERSION;
	r->h->sub_slots = RINGREC_SUB_SLOTS;
	r->comp_slots = comp_slots;
	r->h->comp_slots = comp_slots;
	r->h->sub_offset = RINGREC_HEADER_SIZE;
	r->h->comp_offset = (uint32_t)(r->comp - (uint8_t *)r->map);
	r->h->size = RINGREC_SIZE_FOR(comp_slots);
	r->h->features = RINGREC_FEATURE_SOCKET_BYTES;
	/* the HelloReply that brings the ring is not written yet */
	r->h->socket_bytes = (uint32_t)c->out_written;
	/* the client rings until we are polling */
	r->h->daemon_sleeps = 1;
	info->size = RINGREC_SIZE_FOR(comp_slots);
	info->sub_slots = RINGREC_SUB_SLOTS;
	info->comp_slots = comp_slots;
	c->ring = r;
	*memfd_p = fd;
	return RMA__V1__STATUS__OK;

err_free:
	free(r);
	return RMA__V1__STATUS__ERR_NO_MEMORY;
err_nomem:
	snprintf(detail, detail_len, "no memory for a ring");
	return RMA__V1__STATUS__ERR_NO_MEMORY;
}

void
ring_destroy(struct conn *c)
{
	struct ring *r = c->ring;

	if (r == NULL)
		return;
	ring_cool(r);
	if (r->wake_ev != NULL)
		event_free(r->wake_ev);
	/* after the socket's close (conn_close): see ringrec.h */
	ringrec_store(&r->h->closed, 1);
	munmap(r->map, RINGREC_SIZE_FOR(r->comp_slots));
	free(r);
	c->ring = NULL;
}

/* Takes what the client submitted: each record copied out of the ring
 * first, then handled exactly as a Submit frame's. Returns how many. */
static uint32_t
ring_take(struct conn *c)
{
	uint8_t recs[RINGREC_SUB_SLOTS * RINGREC_SUB_SIZE];
	struct ring *r = c->ring;
	uint32_t tail, n;

	if (c->closing)
		return 0;
	tail = ringrec_load(&r->h->sub_tail);
	n = tail - r->sub_head;
	if (n == 0)
		return 0;
	if (n > RINGREC_SUB_SLOTS) {
		ring_fail(c, "submission", tail, r->sub_head);
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = (r->sub_head + i) % RINGREC_SUB_SLOTS;
		memcpy(recs + i * RINGREC_SUB_SIZE,
		       r->sub + slot * RINGREC_SUB_SIZE, RINGREC_SUB_SIZE);
	}
	/* The slots are the client's again: we hold our copies. */
	r->sub_head = tail;
	ringrec_store(&r->h->sub_head, r->sub_head);
	ring_heat(r);
	c->d->conn_hooks->submit_packed(c, recs, n);
	return n;
}

void
ring_drain(struct conn *c)
{
	if (c->ring == NULL || c->dead || c->closing)
		return;
	conn_ref(c);
	ring_take(c);
	conn_unref(c);
}

void
ring_socket_submit(struct conn *c)
{
	struct ring *r = c->ring;

	if (r == NULL || c->dead)
		return;
	ringrec_store(&r->h->socket_submits, ++r->socket_submits);
}

void
ring_woken(struct conn *c)
{
	if (c->ring == NULL)
		return;
	ring_heat(c->ring);
	ring_drain(c);
	if (!c->dead && c->ring != NULL)
		ring_publish(c);
}

/* Slot n of the completion ring (n counts from the start, wrapping). */
static inline uint8_t *
ring_comp_slot(const struct ring *r, uint32_t n)
{
	return r->comp + (size_t)(n & (r->comp_slots - 1)) * RINGREC_COMP_SIZE;
}

static void
ring_write_comp(struct ring *r, const Rma__V1__Completion *k, size_t dlen)
{
	ringrec_store_completion(ring_comp_slot(r, r->comp_tail), k->op_id,
				 k->bytes, k->value, (int32_t)k->status,
				 (uint16_t)dlen);
	r->comp_tail++;
	for (size_t at = 0; at < dlen; at += RINGREC_COMP_SIZE) {
		size_t len = dlen - at < RINGREC_COMP_SIZE ? dlen - at
							   : RINGREC_COMP_SIZE;
		memcpy(ring_comp_slot(r, r->comp_tail), k->detail + at, len);
		r->comp_tail++;
	}
}

/* Completion slots free for us in *room_p; false if the ring may not be
 * written now: events sent over the socket for want of room must all be
 * taken by the client first, or newer records could overtake them. */
static bool
ring_room(struct conn *c, uint32_t *room_p)
{
	struct ring *r = c->ring;
	uint32_t head, used;

	if (r->socket_events != 0 &&
	    ringrec_load(&r->h->socket_events_seen) != r->socket_events)
		return false;
	head = ringrec_load(&r->h->comp_head);
	used = r->comp_tail - head;
	if (used > r->comp_slots) {
		ring_fail(c, "completion", head, r->comp_tail);
		return false;
	}
	*room_p = r->comp_slots - used;
	return true;
}

/* Slots written: published, and a client that sleeps hears it on the
 * socket. A client that got completions is likely to submit again soon:
 * its ring is polled for a while (heat). */
static void
ring_announce(struct conn *c, bool heat)
{
	struct ring *r = c->ring;

	r->announced = r->comp_tail;
	ringrec_store(&r->h->comp_tail, r->comp_tail);
	if (heat)
		ring_heat(r);
	ring_wake(c);
}

/* A client that sleeps hears of what we published on the socket.
 * Returns whether it slept (and was woken). */
static bool
ring_wake(struct conn *c)
{
	struct ring *r = c->ring;

	if (r->wake_ev != NULL)
		evtimer_del(r->wake_ev);
	ringrec_fence();
	if (ringrec_take_sleeper(&r->h->client_sleeps)) {
		Rma__V1__Event ev = RMA__V1__EVENT__INIT;
		Rma__V1__RingWake wake = RMA__V1__RING_WAKE__INIT;

		ev.body_case = RMA__V1__EVENT__BODY_RING_WAKE;
		ev.ring_wake = &wake;
		conn_send_event(c, &ev);
		r->stream = r->since_wake >= RING_NOTIFY_STREAM;
		r->since_wake = 0;
		r->last_wake = daemon_now();
		return true;
	}
	return false;
}

/* A held wake-up is due. */
static void
ring_wake_due(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	conn_ref(c);
	if (c->ring != NULL && ring_wake(c))
		c->d->counters.notify_wakeups_held++;
	conn_unref(c);
}

/* Whether the owner's wake-up for the notifications just published may
 * wait, and if so, its timer set. */
static bool
ring_hold_wake(struct conn *c, uint32_t room)
{
	struct ring *r = c->ring;
	double now, due = r->last_wake + RING_NOTIFY_HOLD;
	struct timeval tv;

	/* a clock read only when the rest allows holding */
	if (!r->stream || room < r->comp_slots / 2 ||
	    c->d->cfg->ring_spin_us == 0 ||
	    !ringrec_load(&r->h->client_sleeps) || (now = daemon_now()) >= due)
		return false;
	if (r->wake_ev == NULL &&
	    (r->wake_ev = evtimer_new(c->d->base, ring_wake_due, c)) == NULL)
		return false;
	if (!evtimer_pending(r->wake_ev, NULL)) {
		tv.tv_sec = 0;
		tv.tv_usec = (suseconds_t)((due - now) * 1e6) + 1;
		if (evtimer_add(r->wake_ev, &tv) < 0)
			return false;
	}
	return true;
}

/* ring_complete once the room counted down is spent, as
 * ring_notify_one_refill: out of line, so that the common case saves no
 * registers for it (5 pushes and pops per same-daemon put). */
static __attribute__((noinline)) bool
ring_complete_refill(struct conn *c, uint64_t op_id, wire_status_t status,
		     uint64_t bytes, uint64_t value)
{
	struct ring *r = c->ring;

	if (!ring_room(c, &r->room) || r->room == 0)
		return false;
	ringrec_store_completion(ring_comp_slot(r, r->comp_tail), op_id, bytes,
				 value, (int32_t)status, 0);
	r->comp_tail++;
	r->room--;
	return true;
}

bool
ring_complete(struct conn *c, uint64_t op_id, wire_status_t status,
	      uint64_t bytes, uint64_t value)
{
	struct ring *r = c->ring;

	if (c->closing)
		return false;
	/* the client's comp_head is read once per ring's worth, not per
	 * completion: it is on a line the client writes as it reaps */
	if (r->room == 0)
		return ring_complete_refill(c, op_id, status, bytes, value);
	ringrec_store_completion(ring_comp_slot(r, r->comp_tail), op_id, bytes,
				 value, (int32_t)status, 0);
	r->comp_tail++;
	r->room--;
	return true;
}

void
ring_publish(struct conn *c)
{
	struct ring *r = c->ring;
	uint32_t room;
	size_t i = 0;

	if (c->done_len == 0 || !ring_room(c, &room))
		goto announce;
	for (i = 0; i < c->done_len; i++) {
		const Rma__V1__Completion *k = &c->done[i];
		/* almost every completion has none: no strlen for it (1% of
		 * the daemon's samples on same-daemon 8-byte puts) */
		size_t dlen = k->detail == protobuf_c_empty_string
				  ? 0
				  : strlen(k->detail);

		if (dlen > RINGREC_DETAIL_MAX)
			dlen = RINGREC_DETAIL_MAX;
		if (ringrec_comp_slots(dlen) > room)
			break;
		room -= ringrec_comp_slots(dlen);
		ring_write_comp(r, k, dlen);
		if (k->detail != protobuf_c_empty_string)
			free(k->detail);
	}
	r->room = room;
	c->done_len -= i;
	memmove(c->done, c->done + i, c->done_len * sizeof(*c->done));
announce:
	/* what ring_complete wrote comes before done's: seen together */
	if (r->comp_tail != r->announced)
		ring_announce(c, true);
}

/* A notification into two slots, one at a time: the second may be the
 * ring's first. */
static inline void
ring_write_notify(struct ring *r, uint64_t region_id, uint64_t offset,
		  uint64_t length, uint64_t value, const uint8_t *sender)
{
	ringrec_store_notification(ring_comp_slot(r, r->comp_tail),
				   ring_comp_slot(r, r->comp_tail + 1),
				   region_id, offset, length, value, sender);
	r->comp_tail += RINGREC_NOTIFY_SLOTS;
}

/* ring_notify_one once the room counted down is spent: the client's
 * comp_head read again (once per ring's worth, as ring_complete does).
 * Out of line, so that the common case saves no registers for it. */
static __attribute__((noinline)) bool
ring_notify_one_refill(struct conn *c, uint64_t region_id, uint64_t offset,
		       uint64_t length, uint64_t value, const uint8_t *sender)
{
	struct ring *r = c->ring;

	if (!ring_room(c, &r->room) || r->room < RINGREC_NOTIFY_SLOTS)
		return false;
	ring_write_notify(r, region_id, offset, length, value, sender);
	r->room -= RINGREC_NOTIFY_SLOTS;
	return true;
}

bool
ring_notify_one(struct conn *c, uint64_t region_id, uint64_t offset,
		uint64_t length, uint64_t value, const uint8_t *sender)
{
	struct ring *r = c->ring;

	if (r == NULL || c->dead || c->closing)
		return false;
	if (r->room < RINGREC_NOTIFY_SLOTS)
		return ring_notify_one_refill(c, region_id, offset, length,
					      value, sender);
	ring_write_notify(r, region_id, offset, length, value, sender);
	r->room -= RINGREC_NOTIFY_SLOTS;
	return true;
}

uint32_t
ring_notify_span(struct conn *c, struct ring_span *span)
{
	struct ring *r = c->ring;
	uint32_t slot, n;

	if (r == NULL || c->dead || c->closing)
		return 0;
	slot = r->comp_tail & (r->comp_slots - 1);
	n = r->room / RINGREC_NOTIFY_SLOTS;
	/* both slots of each before the ring's end */
	if (n > (r->comp_slots - slot) / RINGREC_NOTIFY_SLOTS)
		n = (r->comp_slots - slot) / RINGREC_NOTIFY_SLOTS;
	span->at = ring_comp_slot(r, r->comp_tail);
	span->end =
	    span->at + (size_t)n * RINGREC_NOTIFY_SLOTS * RINGREC_COMP_SIZE;
	return n;
}

void
ring_notify_span_end(struct conn *c, uint32_t n)
{
	struct ring *r = c->ring;

	r->comp_tail += n * RINGREC_NOTIFY_SLOTS;
	r->room -= n * RINGREC_NOTIFY_SLOTS;
}

size_t
ring_notify(struct conn *c, const struct notifrec *recs, size_t n,
	    const uint8_t (*senders)[DAEMON_ID_SIZE], uint32_t n_senders)
{
	uint32_t room;
	size_t i;

	if (c->ring == NULL || c->dead || c->closing || !ring_room(c, &room))
		return 0;
	for (i = 0; i < n && room >= RINGREC_NOTIFY_SLOTS; i++) {
		const struct notifrec *nr = &recs[i];

		if (nr->sender >= n_senders)
			break;
		ring_write_notify(c->ring, nr->region_id, nr->offset,
				  nr->length, nr->value, senders[nr->sender]);
		room -= RINGREC_NOTIFY_SLOTS;
	}
	if (i == 0)
		return 0;
	c->ring->room = room;
	ring_notify_publish(c, (uint32_t)i);
	return i;
}

void
ring_notify_publish(struct conn *c, uint32_t n)
{
	struct ring *r = c->ring;
	uint32_t room;

	if (r == NULL || c->dead || c->closing)
		return;
	/* Not heated: what an owner does with notifications (NotifyAck)
	 * comes over the socket, and polling its ring would only take a
	 * CPU from the processes that make the puts. An owner asleep is
	 * woken at once, unless its last wake-up found a stream (it slept
	 * through RING_NOTIFY_STREAM or more): then not again within
	 * RING_NOTIFY_HOLD of that one while the ring is less than half
	 * full. A wake-up per pass of the loop cost the owner (and the
	 * processes it took a CPU from) more than the notifications did;
	 * one notification at a time, as a ping-pong sends them, is never
	 * held. */
	r->since_wake += n;
	/* what ring_complete wrote before them is seen with them */
	r->announced = r->comp_tail;
	ringrec_store(&r->h->comp_tail, r->comp_tail);
	/* the room the client left now, not what was counted down since
	 * it was last read (which holds no wake-up once below half) */
	if (ring_room(c, &room))
		r->room = room;
	else
		room = 0;
	if (ring_hold_wake(c, room))
		return;
	if (ring_wake(c))
		c->d->counters.notify_wakeups++;
}

void
ring_socket_events(struct conn *c, uint32_t events)
{
	if (c->ring == NULL || events == 0)
		return;
	c->ring->socket_events += events;
	/* nothing into the ring until the client took them */
	c->ring->room = 0;
}

void
ring_socket_bytes(struct conn *c, uint64_t bytes)
{
	if (c->ring == NULL)
		return;
	ringrec_store(&c->ring->h->socket_bytes, (uint32_t)bytes);
	/* before the bytes can be read: the client that finds the count it
	 * read skips the socket */
	ringrec_fence();
}

/* Nothing to do on r for a while: sleep, unless the client published
 * something while we decided to. */
static void
ring_try_sleep(struct ring *r)
{
	ringrec_store(&r->h->daemon_sleeps, 1);
	ringrec_fence();
	if (ringrec_load(&r->h->sub_tail) != r->sub_head) {
		ringrec_store(&r->h->daemon_sleeps, 0);
		r->active = daemon_now();
		return;
	}
	ring_cool(r);
}

static uint64_t
ring_traffic(const struct daemon *d)
{
	const struct counters *k = &d->counters;

	return k->ops_put + k->ops_get + k->ops_atomic + k->ops_flush +
	       k->target_puts + k->target_gets + k->target_atomics +
	       k->resolves_served;
}

void
ring_after_pass(struct daemon *d)
{
	static const struct timeval zero = {0, 0};
	uint64_t traffic = ring_traffic(d);
	struct ring_poller *rp;

	if (d->cfg->polling || d->cfg->ring_spin_us == 0 || d->shutting_down)
		return;
	rp = d->rings;
	if (rp != NULL && traffic == rp->traffic)
		return;
	if (rp == NULL && (rp = ring_poller_get(d)) == NULL)
		return;
	rp->traffic = traffic;
	rp->worker_active = daemon_now();
	rp->worker_hot = true;
	if (!evtimer_pending(rp->ev, NULL))
		evtimer_add(rp->ev, &zero);
}

/* A peer's message is often microseconds behind the last one: polled
 * for, it needs no wake-up. UCX work found goes to the worker's tick. */
static void
ring_poll_worker(struct daemon *d, struct ring_poller *rp, double now)
{
	if (!rp->worker_hot || d->worker == NULL)
		return;
	if (ucp_worker_progress(d->worker) != 0) {
		rp->worker_active = now;
		worker_kick(d);
	} else if (now - rp->worker_active > d->cfg->ring_spin_us * 1e-6) {
		rp->worker_hot = false;
	}
}

bool
ring_polling(const struct daemon *d)
{
	return d->rings != NULL && d->rings->polling;
}

/* Nothing to do this turn. Who we wait for may wait for this CPU: let
 * it run (at once if nobody waits). If the CPU went to someone else for
 * long, there are more busy processes than CPUs: polling now only takes
 * turns from them, and sleeping (woken by the socket, which the
 * scheduler favours) is faster; until the next traffic. */
static void
ring_yield(struct daemon *d, struct ring_poller *rp)
{
	double t0 = daemon_now();
	struct ring *r;

	sched_yield();
	if (daemon_now() - t0 < RING_CROWDED)
		return;
	while ((r = TAILQ_FIRST(&rp->hot)) != NULL) {
		ring_try_sleep(r);
		if (r->hot) /* the client published meanwhile */
			break;
	}
	rp->worker_hot = false;
}

static void
ring_poll(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval zero = {0, 0};
	struct daemon *d = arg;
	struct ring_poller *rp = d->rings;
	struct ring *r, *next;
	double now = daemon_now();
	bool work = false;

	rp->polling = true;
	for (r = TAILQ_FIRST(&rp->hot); r != NULL; r = next) {
		struct conn *c = r->c;
		double active = r->active;

		next = TAILQ_NEXT(r, hot_link);
		conn_ref(c);
		/* Backpressure as on the socket: a client that does not
		 * read what we sent gets no new work done. */
		if (!c->read_paused && ring_take(c) > 0)
			work = true;
		/* Nothing new: sleep once ring_spin passed, or at once if
		 * the client runs on our CPU (we only keep it off). */
		if (!c->dead && c->ring != NULL && r->active == active &&
		    (now - r->active > d->cfg->ring_spin_us * 1e-6 ||
		     ringrec_load(&r->h->client_cpu) ==
			 ringrec_note_cpu(&r->h->daemon_cpu)))
			ring_try_sleep(r);
		/* next may be gone if c closed: start over next turn */
		if (c->dead)
			next = NULL;
		conn_unref(c);
	}
	rp->polling = false;
	/* Completions of local copies go out now; only UCX work needs
	 * the worker's tick. */
	conn_flush_dirty(d);
	if (work && d->ops_in_flight > 0)
		worker_kick(d);
	ring_poll_worker(d, rp, now);
	if (!work && (!TAILQ_EMPTY(&rp->hot) || rp->worker_hot))
		ring_yield(d, rp);
	if (!TAILQ_EMPTY(&rp->hot) || rp->worker_hot)
		evtimer_add(rp->ev, &zero);
}
