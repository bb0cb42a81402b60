/* SPDX-License-Identifier: BSD-2-Clause */
/* The shared-memory ring to rmad (layout: proto/ringrec.h): operations go
 * into the submission ring and completions come out of the completion
 * ring without a system call while both sides are busy; the socket
 * carries everything else and the wake-ups of a side that sleeps.
 *
 * Asked for at hello unless RMA_RING=0; a daemon without rings simply
 * gives none, and everything goes over the socket as before. The daemon
 * made the ring, so what it publishes is trusted (checked only against
 * crashing: counters and lengths stay within the mapping).
 *
 * Order: the ring is drained before every frame from the socket
 * (client.c), so completions are seen in the order the daemon sent them,
 * replies and events included; when the ring is full the daemon sends
 * completions as Completions events (notifications of our regions, which
 * share the ring, as Notifications events), and goes back to the ring
 * only once we took them (socket_events_seen). A batch the ring has
 * no room for goes as a Submit frame; the ring is used again only once
 * the daemon took every such frame (socket_submits), as it drains the
 * ring before each frame it reads.
 *
 * Sleeping: client_sleeps is 1 (the daemon wakes us through the socket)
 * except while rma_wait(), rma_request_wait() and the _sync calls spin
 * on the ring, for RMA_RING_SPIN_US (default 100) after the last
 * completion while operations are in flight. Whoever returns to the
 * caller sets it again and looks at the ring once more (ring_arm), so
 * rma_fd() stays the one thing an event loop has to watch. */
#include "rma_internal.h"
#include "descriptor.h"
#include "monotime.h"
#include "oprec.h"
#include "ringrec.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define RING_SPIN_US_DEFAULT 100
/* Completion slots asked for (the most a daemon gives, 128 KiB): room
 * for 2048 notifications, so that a stream of them wakes us every 1024
 * and seldom overflows onto the socket. At 8 B, window 256 the default
 * 512 slots woke us three times as often as 2048, and notifying puts ran
 * 4-9% faster with 4096 than with 2048 (long runs, back to back). */
#define RING_COMP_SLOTS 4096
/* A yield that took this long gave the CPU to someone else: a scheduler
 * slice is milliseconds. */
#define RING_CROWDED_NS 20000
/* Spin iterations between two looks at the socket (a reply, an event). */
#define RING_SPIN_SOCKET_EVERY 64

struct client_ring {
	void *map;
	struct ringrec_header *h;
	uint8_t *sub, *comp;
	/* ring_kick: a RingWake went out since ring_socket_idle last
	 * looked */
	bool woke;
	uint32_t comp_slots;	     /* what the daemon gave */
	uint32_t sub_tail;	     /* ours: operations written */
	uint32_t comp_head;	     /* ours: completion slots taken */
	uint32_t socket_submits;     /* Submit frames sent while it is on */
	uint32_t socket_events_seen; /* Completions events taken */
	int64_t spin_ns;	     /* RMA_RING_SPIN_US */
	uint32_t moved; /* ring_socket_idle: the daemon's counters */
	/* the last notification's sender, in binary (two words, compared
	 * as such) and as hex: a stream comes from few daemons, and hex per
	 * notification showed */
	uint64_t sender[RINGREC_SENDER_SIZE / 8];
	char sender_hex[2 * RINGREC_SENDER_SIZE + 1];
};

uint32_t
ring_comp_slots_wanted(void)
{
	return RING_COMP_SLOTS;
}

bool
ring_wanted(void)
{
	const char *e = getenv("RMA_RING");

	return e == NULL || strcmp(e, "0") != 0;
}

static int64_t
ring_spin_ns(void)
{
	const char *e = getenv("RMA_RING_SPIN_US");
	char *end;
	long v;

	if (e == NULL || *e == '\0')
		return RING_SPIN_US_DEFAULT * 1000;
	v = strtol(e, &end, 10);
	if (*end != '\0' || v < 0)
		return RING_SPIN_US_DEFAULT * 1000;
	return (int64_t)v * 1000;
}

static int64_t
ring_now_ns(void)
{
	return (int64_t)monotime_ns();
}

rma_status_t
ring_open(rma_client_t *c, int fd, const Rma__V1__RingInfo *info)
{
	struct client_ring *r;
	struct ringrec_header *h;
	void *map;

	ring_close(c);
	/* RING_COMP_SLOTS if the daemon knows Hello.ring_comp_slots, the
	 * default ring of one that does not */
	if (!ringrec_comp_slots_valid(info->comp_slots) ||
	    info->size != RINGREC_SIZE_FOR(info->comp_slots) ||
	    info->sub_slots != RINGREC_SUB_SLOTS) {
		close(fd);
		return client_error(c, RMA_ERR_PROTOCOL,
				    "the daemon's ring (%u bytes, %u/%u slots) "
				    "is not of this library's layout",
				    info->size, info->sub_slots,
				    info->comp_slots);
	}
	map = mmap(NULL, info->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return client_error(c, RMA_ERR_NO_MEMORY, "mmap ring: %s",
				    strerror(errno));
	h = map;
	if (h->magic != RINGREC_MAGIC || h->version != RINGREC_VERSION ||
	    h->sub_offset != RINGREC_HEADER_SIZE ||
	    h->comp_slots != info->comp_slots || h->size != info->size ||
	    h->comp_offset !=
		RINGREC_HEADER_SIZE + RINGREC_SUB_SLOTS * RINGREC_SUB_SIZE) {
		munmap(map, info->size);
		return client_error(c, RMA_ERR_PROTOCOL,
				    "the daemon's ring has another layout");
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		munmap(map, info->size);
		return client_error(c, RMA_ERR_NO_MEMORY, "no memory");
	}
	r->map = map;
	r->h = h;
	r->comp_slots = info->comp_slots;
	r->sub = (uint8_t *)map + h->sub_offset;
	r->comp = (uint8_t *)map + h->comp_offset;
	r->sub_tail = ringrec_load(&h->sub_tail);
	r->comp_head = ringrec_load(&h->comp_head);
	r->spin_ns = ring_spin_ns();
	ringrec_store(&h->client_sleeps, 1);
	c->ring = r;
	return RMA_OK;
}

void
ring_close(rma_client_t *c)
{
	if (c->ring == NULL)
		return;
	munmap(c->ring->map, RINGREC_SIZE_FOR(c->ring->comp_slots));
	free(c->ring);
	c->ring = NULL;
}

/* We published operations: a daemon that sleeps hears it on the
 * socket. */
static void
ring_kick(rma_client_t *c)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RingWake wake = RMA__V1__RING_WAKE__INIT;

	ringrec_fence();
	if (!ringrec_take_sleeper(&c->ring->h->daemon_sleeps))
		return;
	req.body_case = RMA__V1__REQUEST__BODY_RING_WAKE;
	req.ring_wake = &wake;
	if (client_send(c, &req) == RMA_OK && c->ring != NULL)
		c->ring->woke = true;
}

bool
ring_push(rma_client_t *c, const uint8_t *recs, size_t n)
{
	struct client_ring *r = c->ring;
	uint32_t head;

	/* No daemon reads it any more: the socket says what happened. */
	if (r == NULL || ringrec_load(&r->h->closed) != 0)
		return false;
	/* A Submit frame the daemon has not taken yet goes first. */
	if (ringrec_load(&r->h->socket_submits) != r->socket_submits)
		return false;
	head = ringrec_load(&r->h->sub_head);
	if (n > RINGREC_SUB_SLOTS - (r->sub_tail - head))
		return false;
	for (size_t i = 0; i < n; i++) {
		uint32_t slot = (r->sub_tail + (uint32_t)i) % RINGREC_SUB_SLOTS;
		memcpy(r->sub + slot * RINGREC_SUB_SIZE,
		       recs + i * RINGREC_SUB_SIZE, RINGREC_SUB_SIZE);
	}
	r->sub_tail += (uint32_t)n;
	ringrec_store(&r->h->sub_tail, r->sub_tail);
	ringrec_note_cpu(&r->h->client_cpu);
	return true;
}

void
ring_submitted(rma_client_t *c)
{
	if (c->ring != NULL && !c->gone)
		ring_kick(c);
}

void
ring_socket_event(rma_client_t *c)
{
	struct client_ring *r = c->ring;

	if (r != NULL)
		ringrec_store(&r->h->socket_events_seen,
			      ++r->socket_events_seen);
}

void
ring_note_socket_submit(rma_client_t *c)
{
	if (c->ring != NULL)
		c->ring->socket_submits++;
}

/* Takes one completion with its detail (in k, detail): 1; 0 when the
 * ring is empty or the record is bad (the client then failed); -1 when
 * the next record is a whole notification, ring_take_fast's to take.
 * Every other record is ring_take_fast's, but the tail is read again
 * here: the daemon may have published the rest of a notification since
 * ring_take_fast found only its first slot. Only one without its two
 * slots in is an error (any notification here was taken as one, and
 * ended owners in the middle of a stream of notifying puts: one spinning
 * on its ring within thousands, rmactl expose once in millions). */
static int
ring_take(rma_client_t *c, struct ringrec_comp *k, char *detail)
{
	struct client_ring *r = c->ring;
	uint32_t tail = ringrec_load(&r->h->comp_tail);
	uint32_t avail = tail - r->comp_head, need;
	/* comp_slots is a power of two: a mask, where a division was 14% of
	 * ring_reap's time */
	uint32_t slot = r->comp_head & (r->comp_slots - 1);

	if (avail == 0)
		return 0;
	if (avail > r->comp_slots) {
		client_fail(c, RMA_ERR_PROTOCOL,
			    "the ring's completion tail is impossible");
		return 0;
	}
	memcpy(k, r->comp + slot * RINGREC_COMP_SIZE, sizeof(*k));
	if (k->kind == RINGREC_KIND_NOTIFICATION) {
		if (avail >= RINGREC_NOTIFY_SLOTS)
			return -1;
		client_fail(c, RMA_ERR_PROTOCOL,
			    "a notification in the ring ends past its tail");
		return 0;
	}
	if (k->kind != RINGREC_KIND_COMPLETION) {
		client_fail(c, RMA_ERR_PROTOCOL,
			    "a record of unknown kind %u in the ring",
			    (unsigned)k->kind);
		return 0;
	}
	if (k->detail_len > RINGREC_DETAIL_MAX)
		k->detail_len = RINGREC_DETAIL_MAX;
	need = ringrec_comp_slots(k->detail_len);
	if (need > avail) {
		client_fail(c, RMA_ERR_PROTOCOL,
			    "a completion in the ring ends past its tail");
		return 0;
	}
	for (uint32_t at = 0; at < k->detail_len; at += RINGREC_COMP_SIZE) {
		uint32_t len = k->detail_len - at < RINGREC_COMP_SIZE
				   ? k->detail_len - at
				   : RINGREC_COMP_SIZE;
		slot =
		    (r->comp_head + 1 + at / RINGREC_COMP_SIZE) % r->comp_slots;
		memcpy(detail + at, r->comp + slot * RINGREC_COMP_SIZE, len);
	}
	detail[k->detail_len] = '\0';
	r->comp_head += need;
	ringrec_store(&r->h->comp_head, r->comp_head);
	return 1;
}

/* What ring_reap hands notifications on in: set once per reap, not per
 * notification, and the sender its daemon_id holds (each reap its own:
 * a callback's reap may hand on another sender's). Only has_sender is
 * set at the start: the rest is written before it is handed on, and a
 * reap of completions alone (nearly all) zeroed 120 bytes for nothing. */
struct ring_reaping {
	rma_notification_t n;
	uint64_t sender[RINGREC_SENDER_SIZE / 8];
	bool has_sender;
};

/* rp->n.daemon_id for a sender id other than the last one's. */
static void
ring_reaping_sender(struct client_ring *r, struct ring_reaping *rp,
		    uint64_t id0, uint64_t id1)
{
	if (r->sender_hex[0] == '\0' || id0 != r->sender[0] ||
	    id1 != r->sender[1]) {
		r->sender[0] = id0;
		r->sender[1] = id1;
		descriptor_hex((const uint8_t *)r->sender, RINGREC_SENDER_SIZE,
			       r->sender_hex);
	}
	memcpy(rp->n.daemon_id, r->sender_hex, sizeof(r->sender_hex));
	/* the rest of the field as a zeroed struct would have it */
	memset(rp->n.daemon_id + sizeof(r->sender_hex), 0,
	       sizeof(rp->n.daemon_id) - sizeof(r->sender_hex));
	rp->sender[0] = id0;
	rp->sender[1] = id1;
	rp->has_sender = true;
}

/* The notifications that lie next in the ring, h the first (all its
 * slots in), taken one after the other where they lie: each field read
 * once, straight from its slot (copied onto the stack first, the sender
 * was read back wider than it was stored there, and each notification
 * waited for those stores), the sender's hex copied only when it
 * changes, and no call per notification but the callback's. Each is
 * taken before it is handed on, and the ring looked at again after:
 * a callback may reap, re-attach (a new ring) or free a region.
 * Returns how many. */
static int
ring_take_notifications(rma_client_t *c, const struct ringrec_notif_head *h,
			struct ring_reaping *rp)
{
	struct client_ring *r = c->ring;
	int taken = 0;
	uint32_t avail;

	for (;;) {
		const struct ringrec_notify *body =
		    (const struct ringrec_notify *)(r->comp +
						    ((r->comp_head + 1) &
						     (r->comp_slots - 1)) *
							RINGREC_COMP_SIZE);
		uint64_t region_id = h->region_id, id0, id1;

		rp->n.offset = h->offset;
		rp->n.length = h->length;
		rp->n.value = body->value;
		memcpy(&id0, body->sender, sizeof(id0));
		memcpy(&id1, body->sender + 8, sizeof(id1));
		if (!rp->has_sender || id0 != rp->sender[0] ||
		    id1 != rp->sender[1])
			ring_reaping_sender(r, rp, id0, id1);
		r->comp_head += RINGREC_NOTIFY_SLOTS;
		ringrec_store(&r->h->comp_head, r->comp_head);
		/* looked up again for each: a callback may free it */
		rp->n.region = notification_region(c, region_id);
		notification_deliver(c, &rp->n);
		taken++;
		if (c->gone || (r = c->ring) == NULL)
			return taken;
		avail = ringrec_load(&r->h->comp_tail) - r->comp_head;
		/* an impossible tail is ring_take's to report */
		if (avail < RINGREC_NOTIFY_SLOTS || avail > r->comp_slots)
			return taken;
		h = (const struct ringrec_notif_head *)(r->comp +
							(r->comp_head &
							 (r->comp_slots - 1)) *
							    RINGREC_COMP_SIZE);
		if (h->kind != RINGREC_KIND_NOTIFICATION)
			return taken;
	}
}

/* The common records, a completion without detail (its callback run) or
 * notifications (handed on in rp), taken where they lie, without
 * ring_take's copies: how many, 0 if the ring holds something else next
 * (for ring_take), -1 if it is empty (nothing for ring_take either: a
 * spinning client looks at an empty ring far more often than at one with
 * anything else). */
static int
ring_take_fast(rma_client_t *c, struct ring_reaping *rp)
{
	struct client_ring *r = c->ring;
	uint32_t avail = ringrec_load(&r->h->comp_tail) - r->comp_head;
	const struct ringrec_comp *k;
	uint64_t op_id, bytes, value;
	int32_t status;

	if (avail == 0)
		return -1;
	/* an impossible tail is ring_take's to report */
	if (avail > r->comp_slots)
		return 0;
	k = (const struct ringrec_comp *)(r->comp +
					  (r->comp_head & (r->comp_slots - 1)) *
					      RINGREC_COMP_SIZE);
	if (k->kind == RINGREC_KIND_NOTIFICATION &&
	    avail >= RINGREC_NOTIFY_SLOTS)
		return ring_take_notifications(
		    c, (const struct ringrec_notif_head *)k, rp);
	if (k->kind != RINGREC_KIND_COMPLETION || k->detail_len != 0)
		return 0;
	/* each field read once; then the slot is the daemon's again */
	op_id = k->op_id;
	bytes = k->bytes;
	value = k->value;
	status = k->status;
	r->comp_head++;
	ringrec_store(&r->h->comp_head, r->comp_head);
	request_complete_wire(c, op_id, status, bytes, value, NULL);
	return 1;
}

/* ring_take's record, its callback run: as ring_take. Out of line: its
 * detail buffer would give ring_reap's loop a stack frame of 400 bytes
 * and a stack protector's check on every reap. */
static __attribute__((noinline)) int
ring_reap_slow(rma_client_t *c)
{
	char detail[RINGREC_DETAIL_MAX + 1];
	struct ringrec_comp k;
	int got = ring_take(c, &k, detail);

	if (got > 0)
		request_complete_wire(c, k.op_id, k.status, k.bytes, k.value,
				      detail);
	return got;
}

int
ring_reap(rma_client_t *c)
{
	struct ring_reaping rp;
	int count = 0, n;

	rp.has_sender = false;
	/* A callback may wait, and so reap, or re-attach (a new ring):
	 * each record is taken before its callback runs. */
	while (!c->gone && c->ring != NULL) {
		n = ring_take_fast(c, &rp);
		if (n < 0)
			break;
		if (n == 0) {
			n = ring_reap_slow(c);
			if (n == 0)
				break;
			/* a notification published meanwhile */
			if (n < 0)
				continue;
		}
		count += n;
	}
	return count;
}

bool
ring_closed(const rma_client_t *c)
{
	return c->ring != NULL && ringrec_load(&c->ring->h->closed) != 0;
}

bool
ring_socket_read_all(const rma_client_t *c)
{
	const struct client_ring *r = c->ring;

	return r != NULL && (r->h->features & RINGREC_FEATURE_SOCKET_BYTES) &&
	       ringrec_load(&r->h->closed) == 0 &&
	       ringrec_load(&r->h->socket_bytes) == (uint32_t)c->socket_read;
}

bool
ring_socket_idle(rma_client_t *c)
{
	struct client_ring *r = c->ring;
	uint32_t moved;

	if (r == NULL || !(r->h->features & RINGREC_FEATURE_SOCKET_BYTES) ||
	    ringrec_load(&r->h->closed) != 0)
		return false;
	/* Only if the daemon took or completed something since we last
	 * asked: that it lives, which socket_bytes cannot tell (a daemon
	 * killed leaves the ring as it was). A dead one's end of stream is
	 * read at the next look. */
	moved = ringrec_load(&r->h->sub_head) + ringrec_load(&r->h->comp_tail);
	/* Or if a RingWake of ours went out since: the daemon's end of the
	 * socket was open then (a dead one's refuses it, EPIPE), which says
	 * as much. A sleeping daemon is woken, then asked at once, before
	 * it could move: a recvmsg that found nothing per wake-up. */
	if (moved == r->moved && !r->woke)
		return false;
	r->woke = false;
	r->moved = moved;
	return ring_socket_read_all(c);
}

void
ring_arm(rma_client_t *c)
{
	if (c->ring == NULL)
		return;
	do {
		ringrec_store(&c->ring->h->client_sleeps, 1);
		ringrec_fence();
	} while (ring_reap(c) > 0 && c->ring != NULL);
}

/* Lets whoever waits for this CPU run (at once if nobody does). True
 * if that took long: more busy processes than CPUs, and sleeping (woken
 * by the socket, which the scheduler favours) beats spinning. */
static bool
ring_crowded(void)
{
	int64_t t0 = ring_now_ns();

	sched_yield();
	return ring_now_ns() - t0 > RING_CROWDED_NS;
}

bool
ring_spin(rma_client_t *c, int64_t deadline, int64_t spin_ns,
	  int (*done)(const void *arg), const void *arg)
{
	int64_t spin, end;
	struct pollfd pfd;
	bool progress = false;
	unsigned i = 0;

	if (c->ring == NULL || c->gone || c->sent_in_flight == 0)
		return false;
	spin = spin_ns < 0 ? c->ring->spin_ns : spin_ns;
	if (spin == 0)
		return false;
	/* Even with the daemon on our CPU (which then does not poll for
	 * us, see ringrec.h): each yield lets it run, a long one ends the
	 * spin (ring_crowded), and while we are runnable beside it the
	 * scheduler may move one of us to a CPU of its own. Sleeping there
	 * at once kept the two together: an 8-byte put, window 1, took
	 * 23 us against 28 (median of 18 runs each, 2 CPUs). */
	ringrec_note_cpu(&c->ring->h->client_cpu);
	ringrec_store(&c->ring->h->client_sleeps, 0);
	end = ring_now_ns() + spin;
	while (!c->gone && c->ring != NULL) {
		if (ring_reap(c) > 0) {
			progress = true;
			if (done(arg) || c->sent_in_flight == 0)
				break;
			/* RMA_RING_SPIN_US counts from the last record; a
			 * caller's own bound (rma_poll) from the start */
			if (spin_ns < 0)
				end = ring_now_ns() + spin;
		}
		if (++i % RING_SPIN_SOCKET_EVERY == 0) {
			pfd.fd = c->fd;
			pfd.events = POLLIN;
			pfd.revents = 0;
			if (poll(&pfd, 1, 0) != 0)
				return true;
			if (ring_now_ns() >= end ||
			    client_remaining(deadline) == 0 || ring_crowded())
				break;
			ringrec_note_cpu(&c->ring->h->client_cpu);
		}
		ringrec_pause();
	}
	return progress;
}
