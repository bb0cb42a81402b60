/* SPDX-License-Identifier: BSD-2-Clause */
/* A local client's connection: its socket (conn.c: frames in, replies,
 * events and completions out, the output queue, closing) and its
 * shared-memory ring (ring.c: operation records in, completions and
 * notifications out). Below the requests and operations: what a client
 * sends goes up through struct conn_hooks, which daemon.c fills
 * (request_dispatch, op_submit_packed), and so does its close. Replies to
 * requests are reply.c's to write. */
#ifndef RMAD_CONN_H
#define RMAD_CONN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "conn_fds.h"
#include "descriptor.h"
#include "frame.h"
#include "idmap.h"
#include "reply.h"
#include "rma.pb-c.h"
#include "ringrec.h"

struct daemon;
struct event;
struct evbuffer;
struct notification_owner;

struct conn;

/* What a client's connection (conn.c, ring.c) hands up, through a table
 * daemon.c fills: the layers above it it may not name. */
struct conn_hooks {
	/* one request frame of c's (request.c) */
	void (*dispatch)(struct conn *c, const uint8_t *payload, size_t len);
	/* n operation records from c's ring, as a Submit frame's (op.c) */
	void (*submit_packed)(struct conn *c, const uint8_t *rec, size_t n);
	/* c closed, its regions freed: what it holds elsewhere goes, and
	 * the client socket may accept again */
	void (*closed)(struct conn *c);
	/* the last reference to c went: just before it is freed */
	void (*freed)(struct conn *c);
};

struct out_fd {
	uint64_t pos; /* stream offset of the frame carrying it */
	int fd;
};

struct conn {
	struct daemon *d;
	uint32_t id;
	int fd;
	int refs;     /* the table's, plus one per operation in flight */
	bool dead;    /* closed: completions are dropped, freed at refs 0 */
	bool closing; /* flush what is queued, then close */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[64];
	bool hello_done;
	struct event *read_ev;
	struct event *write_ev;
	struct frame_reader in;
	struct conn_fds fds_in; /* fds received, for the frame they came with */
	struct evbuffer *out;
	uint64_t out_written;
	struct out_fd *out_fds;
	size_t out_fds_len, out_fds_cap;
	bool read_paused;
	double paused_since;
	bool refused; /* credentials not allowed: every request is refused */
	/* its user already held max_clients_per_uid connections: every
	 * request is refused with ERR_LIMIT, and it counts for nobody */
	bool over_uid_limit;
	bool uid_charged; /* counted in world->uids until conn_close */
	/* refused or over_uid_limit: closed when it says nothing within
	 * connect_timeout, so that silent refused clients hold no fds */
	struct event *refused_ev;
	Rma__V1__Completion *done; /* completions waiting for the next flush */
	size_t done_len, done_cap;
	bool dirty;	      /* on d->dirty_conns */
	struct idmap regions; /* region id -> struct region (owned) */
	struct idmap remotes; /* remote id -> struct remote (owned) */
	uint64_t next_remote_id;
	uint64_t in_flight;
	uint64_t ops;
	uint64_t region_bytes;
	/* Notifications held for this client, by initiator: posted to it
	 * and not yet acknowledged (notification.c); made at the first,
	 * by whichever worker applies it. */
	struct notification_owner *notify;
	struct ring *ring; /* ring.c: the shared ring, NULL without one */
	TAILQ_ENTRY(conn) link;
	TAILQ_ENTRY(conn) dirty_link;
	/* the detail of the last error reply, which says why it is closing
	 * (conn_close logs it); last, away from the fields of every op */
	char error_sent[256];
};

TAILQ_HEAD(conn_list, conn);

/* Serve a connected socket (nonblocking, CLOEXEC) as a new client. */
void conn_create(struct daemon *d, int fd);
void conn_send_reply(struct conn *c, Rma__V1__Reply *reply, int fd);
/* A reply of status st and no body, the detail formatted. */
void conn_send_error(struct conn *c, uint64_t id, wire_status_t status,
		     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void conn_send_verror(struct conn *c, uint64_t id, wire_status_t status,
		      const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
void conn_send_event(struct conn *c, Rma__V1__Event *event);
/* Queue a completion; sent in one Completions event at the next flush. */
void conn_complete(struct conn *c, uint64_t op_id, wire_status_t status,
		   uint64_t bytes, const char *detail);
/* The same with a value for the client (an atomic's old word). */
void conn_complete_value(struct conn *c, uint64_t op_id, wire_status_t status,
			 uint64_t bytes, uint64_t value, const char *detail);
void conn_flush_dirty(struct daemon *d);
void conn_check_stuck(struct daemon *d);
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);
void conn_close(struct conn *c, const char *why);

/* ---- ring.c: a client's shared-memory ring ----------------------------- */

struct ring;
struct ring_poller;

/* Makes c's ring, of comp_slots completion slots if the client asked
 * for a valid number (else RINGREC_COMP_SLOTS): *memfd_p goes to the
 * client with info in the HelloReply. */
wire_status_t ring_create(struct conn *c, uint32_t comp_slots, int *memfd_p,
			  Rma__V1__RingInfo *info, char *detail,
			  size_t detail_len);
void ring_destroy(struct conn *c);
/* Runs what the client put in its ring (before each socket frame). */
void ring_drain(struct conn *c);
/* A Submit frame came over the socket and was run. */
void ring_socket_submit(struct conn *c);
/* RingWake: the client published something while we slept. */
void ring_woken(struct conn *c);
/* c->done into the ring, as much as fits, and what ring_complete wrote
 * published; conn.c sends the rest as Completions events and says how
 * many (ring_socket_events). */
void ring_publish(struct conn *c);
/* A completion without detail written into c's ring at once, if it has
 * room and may be written now: true, and ring_publish makes it seen.
 * For a caller with nothing in c->done, which would go first. */
bool ring_complete(struct conn *c, uint64_t op_id, wire_status_t status,
		   uint64_t bytes, uint64_t value);
/* Notifications recs[0, n) into c's ring (if it has one), as many as
 * fit, in order; how many. The rest go as Notifications events, counted
 * with ring_socket_events. */
struct notifrec;
size_t ring_notify(struct conn *c, const struct notifrec *recs, size_t n,
		   const uint8_t (*senders)[DAEMON_ID_SIZE],
		   uint32_t n_senders);
/* One notification written into c's ring, not yet seen, if it has a
 * ring with room that may be written now: true, and
 * ring_notify_publish makes it seen. For a caller with none of c's
 * notifications waiting elsewhere, which would go first. */
bool ring_notify_one(struct conn *c, uint64_t region_id, uint64_t offset,
		     uint64_t length, uint64_t value, const uint8_t *sender);
/* Where a run of notifications goes in c's ring: slots one after the
 * other from at to end, written with ring_span_notify and counted in with
 * ring_notify_span_end. The ring's checks and counters once per run, not
 * per notification (a batch's notifying puts to one owner), and no slot
 * number per notification: a run ends at the ring's end. Nothing else
 * may write c's ring between the two. */
struct ring_span {
	uint8_t *at, *end;
};
/* How many notifications c's ring takes now without asking the client
 * for room, up to its end (0 if it has no ring, or it may not be written
 * now), and where they go in *span. */
uint32_t ring_notify_span(struct conn *c, struct ring_span *span);
/* n notifications written through a span since ring_notify_span: counted
 * as ring_notify_one's are, for ring_notify_publish. */
void ring_notify_span_end(struct conn *c, uint32_t n);

/* One notification at span->at, if span->at != span->end. */
static inline void
ring_span_notify(struct ring_span *span, uint64_t region_id, uint64_t offset,
		 uint64_t length, uint64_t value, const uint8_t *sender)
{
	ringrec_store_notification(span->at, span->at + RINGREC_COMP_SIZE,
				   region_id, offset, length, value, sender);
	span->at += RINGREC_NOTIFY_SLOTS * RINGREC_COMP_SIZE;
}
/* The n notifications written into c's ring since the last publish are
 * made seen, and c woken (or its wake-up held, see ring.c). */
void ring_notify_publish(struct conn *c, uint32_t n);
/* events Completions or Notifications events went to c for want of room
 * in its ring (or while earlier ones were not taken). */
void ring_socket_events(struct conn *c, uint32_t events);
/* bytes: what c's socket may hold for its client, counted from the
 * connection's start; raised before each write, set again after it
 * (ringrec.h: socket_bytes). */
void ring_socket_bytes(struct conn *c, uint64_t bytes);
void ring_poller_free(struct daemon *d);
/* The ring poller runs: it flushes completions itself (no kick needed). */
bool ring_polling(const struct daemon *d);
/* After each progress pass (worker hook): if it had traffic (operations,
 * or other daemons' requests served), the poller also polls the UCX
 * worker for ring_spin, so the next message needs no wake-up. */
void ring_after_pass(struct daemon *d);

#endif
