/* SPDX-License-Identifier: BSD-2-Clause */
/* librma internals, shared by the library's files, rmactl and the tests
 * (which link the static library). Nothing here is exported from the shared
 * library: only functions marked RMA_API are. */
#ifndef RMA_INTERNAL_H
#define RMA_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "rma.h"
#include "oprec.h"
#include "rma.pb-c.h"
#include "frame.h"

#define RMA_API __attribute__((visibility("default")))

/* Deadlines of synchronous calls. A peer connect or a remote import may
 * wait for the daemon's own connect deadline, so they get longer. */
#define CLIENT_CALL_TIMEOUT_MS 30000
#define CLIENT_PEER_TIMEOUT_MS 60000
/* A write that cannot progress for this long means the daemon stopped
 * reading: the connection is given up. */
#define CLIENT_WRITE_TIMEOUT_MS 30000

/* Coalescing limit of one Submit frame. */
#define REQUEST_BATCH_MAX 256
/* With the shared ring a batch costs no system call: one this big goes
 * at once, so the daemon works on it while the caller submits more. */
#define REQUEST_RING_BATCH 32
/* Room in a frame besides the records: Request id, Submit and field
 * headers. */
#define REQUEST_FRAME_SLACK 64

struct rma_request {
	struct rma_client *client; /* NULL once the client is gone */
	uint64_t op_id;
	uint32_t slot; /* index in client->slots while in flight */
	int refs;      /* library (until completion) + caller */
	int sent;      /* its Submit went out */
	rma_status_t status;
	uint64_t bytes;
	uint64_t value; /* an atomic's old word */
	char *detail;	/* NULL for "" */
	rma_callback_t cb;
	void *user_data;
	/* vectored: a piece names its whole request (parent), which counts
	 * the pieces not completed yet and keeps the first failure */
	struct rma_request *parent;
	uint32_t parts_left;
	rma_status_t first_error; /* of its pieces (RMA_OK: none yet) */
	/* staging.c: a piece through the staging area holds extent
	 * stage_ext - 1 (0: none) and, for a get, copies it to stage_dst
	 * before it completes; a transfer with pieces still to issue has
	 * its xfer */
	uint32_t stage_ext;
	/* on the client's req_live: handed to the caller (request_hold) */
	bool held;
	void *stage_dst;
	struct staging_xfer *xfer;
	/* the requests handed to the caller (held), so rma_disconnect can
	 * detach those it still holds; the free list links by next */
	struct rma_request *prev, *next;
};

struct rma_region {
	struct rma_client *client;
	struct rma_region *prev, *next;
	uint64_t region_id;
	uint64_t generation;
	void *base;
	size_t length;	     /* as asked for; 0 once freed */
	size_t map_length;   /* as the daemon made it */
	char *descriptor;    /* NULL once freed */
	char *ro_descriptor; /* gets only; NULL once freed */
	int freed;	     /* rma_region_free ran: a tombstone */
	int freeing; /* rma_region_free is asking the daemon: not re-attached */
	/* RMA_OK, or why the daemon would not give it back after a
	 * take-over: operations on it fail with RMA_ERR_NO_REGION here; the
	 * mapping stays until rma_region_free */
	rma_status_t lost;
};

struct rma_peer {
	struct rma_client *client;
	struct rma_peer *next;
	uint32_t peer_id;
	char *address;
	char *daemon_id;
	int state;	     /* Rma__V1__PeerState */
	rma_status_t status; /* of the last PeerEvent */
	char *detail;
};

struct rma_remote {
	struct rma_client *client;
	struct rma_remote *prev, *next;
	struct rma_peer *peer;
	uint64_t remote_id;
	uint64_t length;
	int local;
	char *descriptor; /* as imported: imported again after a take-over */
	/* RMA_OK, or why it could not be imported again after a take-over:
	 * what operations on it then fail with, here, never reaching the
	 * daemon (its remote id may be another's now) */
	rma_status_t lost;
	/* staging.c: transfers with pieces still to issue on it; a
	 * release while there are (released) waits for the last
	 * (peer_remote_unstage), as operations already submitted must go
	 * on */
	uint32_t staged;
	int released;
};

/* One synchronous call waiting for its Reply; on the waiter's stack.
 * Several may wait at once when a callback makes a call. */
struct client_call {
	uint64_t id;
	Rma__V1__Reply *reply; /* set by dispatch; owned by the waiter */
	int fd;		       /* memfd that came with the reply, or -1 */
	int lost; /* sent to a daemon taken over since: no reply will come */
	struct client_call *next;
};

struct rma_client {
	int fd;	  /* the socket to the daemon; its number may change */
	int epfd; /* rma_fd(): fd in it, for the client's life (client.c) */
	char *socket_path;
	struct frame_reader reader;
	uint32_t max_frame; /* for frames we send */

	/* set once the connection is unusable; gone_status is what
	 * outstanding requests complete with */
	int gone;
	rma_status_t gone_status;
	char gone_detail[256];

	uint64_t next_id;
	uint32_t op_seq;

	char *daemon_id;
	char *daemon_version;
	/* Re-attach after a take-over (client_reconnect): the deadline in
	 * ms, 0 for today's RMA_ERR_DAEMON_GONE (RMA_NO_REATTACH, or no
	 * socket path to go back to). */
	int reattach_ms;
	int reconnecting;
	/* the new connection closed too while we re-attached (another
	 * take-over): client_reconnect starts over */
	int reclosed;
	char hello_name[128]; /* said again to the new process */
	uint64_t reattaches;  /* take-overs this connection survived */
	rma_reattach_callback_t reattach_cb; /* rma_on_reattach() */
	void *reattach_user_data;
	char *shutdown_detail; /* from Event.shutdown or an id-0 error Reply */
	char last_error[512];

	/* memfds received and not yet claimed by a RegionAllocReply, oldest
	 * first (ring buffer) */
	int *fds;
	size_t fds_head, fds_count, fds_cap;

	struct client_call *calls;

	/* requests in flight (pending or sent), indexed by the low 32 bits
	 * of their op_id */
	struct rma_request **slots;
	uint32_t *slots_free;
	uint32_t slots_cap, slots_used, slots_nfree;
	size_t sent_in_flight; /* sent and not completed */
	size_t in_flight;      /* pending or sent, not completed */

	/* the coalesced Submit not sent yet, as records (oprec.h) */
	uint8_t pending_packed[REQUEST_BATCH_MAX * OPREC_SIZE];
	struct rma_request *pending_reqs[REQUEST_BATCH_MAX];
	size_t pending_n;
	int hold_batch; /* a vectored request is being queued: send it whole */
	size_t pending_bytes;

	struct rma_request *req_free; /* free list, linked by next */
	size_t req_nfree;
	struct rma_request *req_live;

	struct rma_region *regions;
	struct rma_peer *peers;
	struct rma_remote *remotes;

	/* output buffer for frames */
	uint8_t *out;
	size_t out_cap;

	/* rma_ring.c: the shared-memory ring, NULL on the socket alone */
	struct client_ring *ring;
	/* bytes read from the socket since it was made (ring_socket_idle) */
	uint64_t socket_read;
	/* completions and events handled so far (rma_wait: did any come) */
	uint64_t dispatched;

	/* notifications (rma_notification.c): the callback, or else a queue
	 * (ring) for rma_notify_next(); consumed ones not yet acknowledged
	 * to the daemon, which bounds what it holds for us */
	rma_notify_callback_t notify_cb;
	void *notify_user_data;
	rma_notification_t *notify_q;
	size_t notify_head, notify_count, notify_cap;
	uint32_t notify_unacked;

	/* staging.c: the staging area of rma_put_buf and rma_get_buf, made
	 * at their first call; NULL until then */
	struct staging *staging;

	/* fork.c: the fork generation this client was made in */
	unsigned fork_generation;
};

/* ---- fork.c ---- */

/* Bumped in every child of fork() (a pthread_atfork handler). */
extern unsigned fork_generation;
/* Registers the handler (once); the generation a new client keeps. */
unsigned fork_watch(void);
/* The client was made before a fork() that this process is the child of:
 * the connection and ring are the parent's. Every public call checks it
 * first and fails with fork_error(); one load and compare. */
static inline bool
fork_inherited(const rma_client_t *c)
{
	return __builtin_expect(c->fork_generation != fork_generation, 0);
}
/* RMA_ERR_INVALID, detail set: "this client belongs to the parent
 * process". */
rma_status_t fork_error(rma_client_t *c);
/* rma_disconnect() in the child: frees the child's copy (closes its fds,
 * unmaps its regions and ring), sending and reading nothing. */
void fork_release(rma_client_t *c);

/* ---- rma_notification.c ---- */

/* A Notifications event: each to the callback, or queued, in order. */
void notification_receive_all(rma_client_t *c,
			      const Rma__V1__Notifications *ns);
/* Tell the daemon what was consumed: always when force, otherwise only
 * once a batch of them is. */
void notification_ack(rma_client_t *c, int force);
/* One notification into region_id, its offset, length and value in *n,
 * from daemon_id (id_len characters): to the callback or the queue. */
void notification_receive(rma_client_t *c, uint64_t region_id,
			  rma_notification_t *n, const char *daemon_id,
			  size_t id_len);
/* Consumed notifications acknowledged in one NotifyAck; far below the
 * daemon's bound, so an active consumer never meets it. */
#define NOTIFICATION_ACK_BATCH 256
/* Our region region_id, not freed, or NULL. */
static inline rma_region_t *
notification_region(rma_client_t *c, uint64_t region_id)
{
	for (rma_region_t *r = c->regions; r != NULL; r = r->next) {
		if (r->region_id == region_id && !r->freed)
			return r;
	}
	return NULL;
}
/* n, every field set, onto the queue for rma_notify_next(). */
void notification_queue(rma_client_t *c, const rma_notification_t *n);
/* n, every field set: to the callback, or the queue. Inline: the ring's
 * loop (ring_reap) hands on each notification it takes with it. */
static inline void
notification_deliver(rma_client_t *c, const rma_notification_t *n)
{
	/* Something came: rma_wait() and rma_poll() return (a notification
	 * from the ring raises no other count). */
	c->dispatched++;
	if (c->notify_cb == NULL) {
		notification_queue(c, n);
		return;
	}
	c->notify_cb(c, n, c->notify_user_data);
	/* the batch's test here, not a call per notification */
	if (++c->notify_unacked >= NOTIFICATION_ACK_BATCH)
		notification_ack(c, 0);
}
void notification_free(rma_client_t *c);

/* ---- rma_ring.c ---- */

struct client_ring;
/* Whether to ask for a ring at hello (RMA_RING=0: no). */
bool ring_wanted(void);
/* Completion slots to ask for at hello (Hello.ring_comp_slots). */
uint32_t ring_comp_slots_wanted(void);
/* Maps the daemon's ring (takes fd); replaces the one before. */
rma_status_t ring_open(rma_client_t *c, int fd, const Rma__V1__RingInfo *info);
void ring_close(rma_client_t *c);
/* n operation records into the ring, all or none (false: send them as a
 * Submit frame, then call ring_note_socket_submit). */
bool ring_push(rma_client_t *c, const uint8_t *recs, size_t n);
/* After a push, the requests marked sent: wakes the daemon if it sleeps
 * (over the socket, which may find it gone). */
void ring_submitted(rma_client_t *c);
void ring_note_socket_submit(rma_client_t *c);
/* A Completions or Notifications event came over the socket and was
 * handled. */
void ring_socket_event(rma_client_t *c);
/* Completes what the ring holds (callbacks run); how many. */
int ring_reap(rma_client_t *c);
/* Before sleeping or returning to the caller: the daemon is to wake us
 * through the socket; what came meanwhile is reaped. */
void ring_arm(rma_client_t *c);
/* The daemon closed the connection: its end of stream is readable. */
bool ring_closed(const rma_client_t *c);
/* The daemon, open and seen at work since the last call, says it wrote
 * nothing we have not read (ringrec.h: socket_bytes): no need to read
 * the socket now. */
bool ring_socket_idle(rma_client_t *c);
/* The daemon, open, says we read all it wrote (no proof that it lives:
 * see ring_socket_idle). */
bool ring_socket_read_all(const rma_client_t *c);
/* While operations are in flight: polls the ring until done(arg), a
 * quiet RMA_RING_SPIN_US (spin_ns < 0) or spin_ns in all, the deadline,
 * or data on the socket. True if anything happened (the caller then reads the
 * socket). Leaves the ring unarmed: the caller arms it before it sleeps. */
bool ring_spin(rma_client_t *c, int64_t deadline, int64_t spin_ns,
	       int (*done)(const void *arg), const void *arg);

/* ---- client.c, client_io.c, client_call.c ---- */

/* s, or "" for NULL (a string field the daemon left unset). */
const char *client_str(const char *s);
/* client_io.c: handle every whole frame already read (reentrant: a
 * callback may wait and so dispatch the frames after its own); read
 * everything the socket has, dispatching as frames complete. */
void client_dispatch(rma_client_t *c);
void client_read(rma_client_t *c);

/**
 * Synchronous request/reply: assigns req->id, sends, waits up to 30 s for
 * the Reply with that id (handling events meanwhile).
 * @return RMA_OK with *reply_p set (free it with
 *         rma__v1__reply__free_unpacked(reply, NULL)), or the Reply's
 *         non-OK status (negated wire status) with rma_last_error() set to
 *         its detail, or a local failure (RMA_ERR_TIMEOUT,
 *         RMA_ERR_DAEMON_GONE, ...).
 */
rma_status_t rma_client_call(rma_client_t *c, Rma__V1__Request *req,
			     Rma__V1__Reply **reply_p);

/* The detail of a failed rma_connect (no client to hold it yet). */
extern __thread char client_connect_error[512];
/* client*.c and connect.c: the next received fd (-1: none); the hello;
 * a client on a connected fd (closed on failure); the reconnect after a
 * take-over (false: the daemon is gone for good, why says so). */
int client_fd_pop(rma_client_t *c);
/* Closes the fds and unmaps the ring, frees the struct: nothing sent. */
void client_free(rma_client_t *c);
rma_status_t client_hello(rma_client_t *c, const char *name, int timeout_ms);
rma_status_t client_attach(int fd, const char *name, const char *path,
			   int timeout_ms, rma_client_t **client_p);
bool client_reconnect(rma_client_t *c, char *why, size_t why_len);
/* The connection is fd from now on (the old one is closed): it replaces
 * the old in rma_fd()'s set. Takes fd, also on failure. */
rma_status_t client_socket_replace(rma_client_t *c, int fd);

/**
 * Take over a connected SOCK_STREAM fd (say one end of a socketpair, in
 * tests) and say hello on it. The fd is closed on failure too.
 */
rma_status_t rma_client_attach(int fd, const char *name,
			       rma_client_t **client_p);

/* As rma_client_call with a timeout; *fd_p (if not NULL) receives the memfd
 * that came with the reply, or -1. */
rma_status_t client_call(rma_client_t *c, Rma__V1__Request *req, int timeout_ms,
			 Rma__V1__Reply **reply_p, int *fd_p);
/* The same, sending @send_fd (if >= 0; it stays the caller's) with the
 * request's frame. */
rma_status_t client_call_fd(rma_client_t *c, Rma__V1__Request *req, int send_fd,
			    int timeout_ms, Rma__V1__Reply **reply_p,
			    int *fd_p);

/* Record a failure's detail on the handle; returns status. */
rma_status_t client_error(rma_client_t *c, rma_status_t status, const char *fmt,
			  ...) __attribute__((format(printf, 3, 4)));

/* The status a call returns on a client that is gone, detail set. */
rma_status_t client_gone_error(rma_client_t *c);

/* Pack and send one Request; fails the connection on write errors. */
rma_status_t client_send(rma_client_t *c, const Rma__V1__Request *req);
/* The same with @fd (if >= 0) as SCM_RIGHTS on the frame's first byte. */
rma_status_t client_send_fd(rma_client_t *c, const Rma__V1__Request *req,
			    int fd);

/* Give the connection up: later calls fail with RMA_ERR_DAEMON_GONE and
 * outstanding requests complete (at the next client_reap) with it. */
void client_fail(rma_client_t *c, rma_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Complete every outstanding request once the client is gone; callbacks
 * run. Called only where callbacks may run. */
void client_reap(rma_client_t *c);
/* client_reap, then client_gone_error: a call's end on a gone client. */
rma_status_t client_reap_gone(rma_client_t *c);

/* Make progress until done(arg) is true, the deadline passes
 * (RMA_ERR_TIMEOUT) or the client is gone (its gone status). Callbacks run
 * meanwhile. */
rma_status_t client_wait(rma_client_t *c, int64_t deadline,
			 int (*done)(const void *arg), const void *arg);

/* ---- rma_request.c, rma_submit.c, rma_ops.c ---- */

/* rma_status.c: the negated wire Status */
rma_status_t status_from_wire(int wire);

/* rma_request.c: a free slot of the table (grown as needed; -1 without
 * memory); a request out of it, its in-flight counts down. */
int request_slot_get(rma_client_t *c, uint32_t *slot_p);
/* rma_submit.c: request_submit_staged without a staging piece. */
rma_status_t request_submit(rma_client_t *c, const Rma__V1__Op *op,
			    rma_callback_t cb, void *user_data,
			    rma_request_t **req_p);

/* Send the coalesced Submit, if any. */
rma_status_t request_flush(rma_client_t *c);

/* Complete every request in flight (or pending) with status. */
void request_complete_all(rma_client_t *c, rma_status_t status,
			  const char *detail);

/* Free the free list and detach requests the caller still holds. */
void request_cleanup(rma_client_t *c);

/* Ids of every request in flight (pending or sent), malloc'd (NULL
 * when none); the pending ones will not be sent. 0, or -1 out of
 * memory. */
int request_in_flight_ids(rma_client_t *c, uint64_t **ids_p, size_t *n_p);

/* Complete those of ids still in flight with status (callbacks run). */
void request_complete_ids(rma_client_t *c, const uint64_t *ids, size_t n,
			  rma_status_t status, const char *detail);

/* What request_submit_staged gives a piece through the staging area. */
struct request_stage {
	uint32_t ext;		    /* its extent + 1 */
	void *dst;		    /* a get's destination, NULL for a put */
	struct rma_request *parent; /* the request of pieces, or NULL */
};

/* request_submit_staged's three steps. request_begin: the request
 * numbered, in the slot table, with the library's reference and the
 * caller's; NULL and the error in *st_p (nothing submitted) otherwise.
 * request_rec: where its record goes, NULL if the client went meanwhile.
 * request_queue: the record (written if request_rec gave a place) joins
 * the batch, or the request is taken back if the client went; as
 * request_submit_staged returns. The first and the last inline for the
 * common case (a request and a slot from their free lists, a batch that
 * goes on filling), the rest out of line (rma_submit.c): calls and the
 * registers each saved were a sixth of the client's instructions per
 * 8-byte put. */
struct rma_request *request_begin_slow(rma_client_t *c,
				       const struct request_stage *stage,
				       rma_callback_t cb, void *user_data,
				       rma_status_t *st_p);
rma_status_t request_queue_slow(rma_client_t *c, struct rma_request *req,
				rma_request_t **req_p);
/* Every field, one store each: a memset of the whole struct compiled to
 * rep stos, whose start-up took about 5% of an 8-byte put's time in the
 * client (perf, rmactl bench, window 256). The assertion is there so
 * that a new field is not left out. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct rma_request) == 128,
	       "a new field of struct rma_request: set it in request_reset");
static inline void
request_reset(struct rma_request *req, rma_client_t *c)
{
	req->client = c;
	req->op_id = 0;
	req->slot = 0;
	req->refs = 0;
	req->sent = 0;
	req->status = RMA_INPROGRESS;
	req->bytes = 0;
	req->value = 0;
	req->detail = NULL;
	req->cb = NULL;
	req->user_data = NULL;
	req->parent = NULL;
	req->parts_left = 0;
	req->first_error = RMA_OK;
	req->stage_ext = 0;
	req->held = false;
	req->stage_dst = NULL;
	req->xfer = NULL;
	req->prev = NULL;
	req->next = NULL;
}
/* req, numbered, in slot: in flight, its callback and staged piece set
 * (before it can complete: a flush may complete it). */
static inline __attribute__((always_inline)) void
request_attach(rma_client_t *c, struct rma_request *req, uint32_t slot,
	       const struct request_stage *stage, rma_callback_t cb,
	       void *user_data)
{
	req->slot = slot;
	req->op_id = (uint64_t)c->op_seq << 32 | slot;
	/* op_id 0 never happens: the sequence skips 0 */
	if (++c->op_seq == 0)
		c->op_seq = 1;
	req->cb = cb;
	req->user_data = user_data;
	if (stage != NULL) {
		req->stage_ext = stage->ext;
		req->stage_dst = stage->dst;
		req->parent = stage->parent;
	}
	c->slots[slot] = req;
	c->in_flight++;
}

static inline struct rma_request *
request_begin(rma_client_t *c, const struct request_stage *stage,
	      rma_callback_t cb, void *user_data, rma_status_t *st_p)
{
	struct rma_request *req = c->req_free;
	uint32_t slot;

	if (__builtin_expect(
		c->gone || req == NULL || c->slots_nfree == 0 ||
		    (c->pending_n > 0 &&
		     c->pending_bytes + OPREC_SIZE + REQUEST_FRAME_SLACK >
			 c->max_frame),
		0))
		return request_begin_slow(c, stage, cb, user_data, st_p);
	c->req_free = req->next;
	c->req_nfree--;
	request_reset(req, c);
	slot = c->slots_free[--c->slots_nfree];
	request_attach(c, req, slot, stage, cb, user_data);
	/* the library's, and ours while it is sent (see
	 * request_begin_slow) */
	req->refs = 2;
	return req;
}
static inline uint8_t *
request_rec(rma_client_t *c)
{
	return c->gone ? NULL : c->pending_packed + c->pending_n * OPREC_SIZE;
}
/* req goes on the client's req_live: the caller holds it, and
 * rma_disconnect detaches it. */
void request_hold(rma_client_t *c, struct rma_request *req);
static inline rma_status_t
request_queue(rma_client_t *c, struct rma_request *req, rma_request_t **req_p)
{
	/* Joins the batch, which neither goes now nor into the ring (see
	 * request_queue_slow): nothing can have completed it. */
	if (__builtin_expect(
		!c->gone && !c->hold_batch && c->sent_in_flight != 0 &&
		    c->pending_n + 1 < (c->ring != NULL ? REQUEST_RING_BATCH
							: REQUEST_BATCH_MAX),
		1)) {
		c->pending_reqs[c->pending_n++] = req;
		c->pending_bytes += OPREC_SIZE;
		if (req_p != NULL) {
			request_hold(c, req);
			*req_p = req;
		} else {
			req->refs--;
		}
		return RMA_OK;
	}
	return request_queue_slow(c, req, req_p);
}

/* As rma_put() and friends submit an op: numbered, batched, sent; with
 * stage (or NULL) set on the request before anything can complete it.
 * RMA_OK, or an error with nothing submitted. Inline: the record is
 * encoded straight from the caller's op, which for rma_put and rma_get
 * is constants and arguments the compiler folds; no Op is read back. */
static inline __attribute__((always_inline)) rma_status_t
request_submit_staged(rma_client_t *c, const Rma__V1__Op *op,
		      const struct request_stage *stage, rma_callback_t cb,
		      void *user_data, rma_request_t **req_p)
{
	struct rma_request *req;
	rma_status_t st;
	uint8_t *rec;

	req = request_begin(c, stage, cb, user_data, &st);
	if (req == NULL)
		return st;
	rec = request_rec(c);
	if (rec != NULL)
		oprec_encode_id(rec, op, req->op_id);
	return request_queue(c, req, req_p);
}
/* A request struct (status INPROGRESS, refs 0), not in the slot table
 * and not held (request_hold); NULL without memory. */
struct rma_request *request_alloc(rma_client_t *c);
/* Request structs kept for reuse; more are freed. */
#define REQUEST_FREE_MAX 4096
/* Frees a request whose last reference went (request_unref). */
void request_free_slow(struct rma_request *req);
/* Inline for the common case, one the caller never held, back onto the
 * free list. */
static inline void
request_free(struct rma_request *req)
{
	rma_client_t *c = req->client;

	if (__builtin_expect(c == NULL || req->held || req->detail != NULL ||
				 c->req_nfree >= REQUEST_FREE_MAX,
			     0)) {
		request_free_slow(req);
		return;
	}
	req->next = c->req_free;
	c->req_free = req;
	c->req_nfree++;
}
/* Drops a reference; the last frees it. Inline: every operation drops
 * two, and the first never frees. */
static inline void
request_unref(struct rma_request *req)
{
	if (--req->refs <= 0)
		request_free(req);
}
/* Take req out of the slot table; the library's reference goes with the
 * caller of this. */
static inline void
request_slot_put(rma_client_t *c, struct rma_request *req)
{
	c->slots[req->slot] = NULL;
	c->slots_free[c->slots_nfree++] = req->slot;
	c->in_flight--;
	if (req->sent)
		c->sent_in_flight--;
}
/* req completes: its status set, its callback run, the library's
 * reference dropped. */
void request_complete(rma_client_t *c, struct rma_request *req,
		      rma_status_t status, uint64_t bytes, uint64_t value,
		      const char *detail);
/* A completion from the daemon (status on the wire; detail may be NULL).
 * Inline for the common case, no detail and no staging piece: the ring's
 * loop (ring_reap) runs each callback without a call of its own. */
static inline void
request_complete_wire(rma_client_t *c, uint64_t op_id, int32_t status,
		      uint64_t bytes, uint64_t value, const char *detail)
{
	uint32_t slot = (uint32_t)op_id;
	struct rma_request *req;
	rma_status_t st;

	c->dispatched++;
	if (slot >= c->slots_used)
		return;
	req = c->slots[slot];
	/* unknown, repeated, or for an op not even sent: ignore */
	if (req == NULL || req->op_id != op_id || !req->sent)
		return;
	st = status == RMA__V1__STATUS__OK ? RMA_OK : status_from_wire(status);
	if (__builtin_expect(req->stage_ext != 0 ||
				 (detail != NULL && detail[0] != '\0'),
			     0)) {
		request_complete(c, req, st, bytes, value, detail);
		return;
	}
	request_slot_put(c, req);
	req->status = st;
	req->bytes = bytes;
	req->value = value;
	if (req->cb != NULL)
		req->cb(req, st, req->user_data);
	/* the library's reference */
	request_unref(req);
}
/* A request the library decided alone: completed (callback run) before
 * this returns RMA_OK, detail set; see rma_put(). */
rma_status_t request_complete_now(rma_client_t *c, rma_status_t status,
				  rma_callback_t cb, void *user_data,
				  rma_request_t **req_p, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* request_decided_here once one of its cases holds. */
bool request_decide_here(rma_client_t *c, const rma_region_t *region,
			 const char *name, rma_callback_t cb, void *user_data,
			 rma_request_t **req_p, rma_status_t *st_p);
/* A freed or lost region (NULL: none), a daemon known gone: completed
 * here, true, the call's status in *st_p. Inline: every operation asks,
 * and almost none is decided here. */
static inline bool
request_decided_here(rma_client_t *c, const rma_region_t *region,
		     const char *name, rma_callback_t cb, void *user_data,
		     rma_request_t **req_p, rma_status_t *st_p)
{
	if (__builtin_expect((region == NULL ||
			      (!region->freed && region->lost == RMA_OK)) &&
				 !c->gone,
			     1))
		return false;
	return request_decide_here(c, region, name, cb, user_data, req_p, st_p);
}
/* A request of pieces loses one to wait for; the last completes it with
 * its first_error. */
void request_part_finish(struct rma_request *parent);

/* ---- staging.c ---- */

struct staging;
struct staging_xfer;
/* A staged piece completed (its status set): a get's bytes are copied
 * out if it worked, its extent is freed. */
void staging_release(rma_client_t *c, struct rma_request *req);
/* Issue what waits for staging room, as far as it goes; fail it once the
 * client is gone or inherited across fork(). */
void staging_pump(rma_client_t *c);
/* rma_request_cancel of a transfer: no more pieces are issued, it fails
 * with RMA_ERR_CANCELED; true if some were never issued. */
bool staging_cancel(rma_client_t *c, struct rma_request *parent);
/* rma_flush while transfers wait for staging room: the flush waits in
 * the queue behind them, so that it covers their pieces; RMA_INPROGRESS
 * when nothing waits (a plain flush covers what is issued). */
rma_status_t staging_flush(rma_client_t *c, uint64_t peer_id, rma_callback_t cb,
			   void *user_data, rma_request_t **req_p);
/* Frees the staging bookkeeping (its region goes with the others). */
void staging_free(rma_client_t *c);
/* Gives back extent e (index + 1; 0: none) of a piece that was never
 * submitted after all. */
void staging_drop(rma_client_t *c, uint32_t e);

/* ---- rma_region.c, rma_peer.c ---- */

/* After a take-over: claim every live region back (RegionReattach) on the
 * new connection; one the daemon refuses is marked lost and the others go
 * on. RMA_OK, or the connection's failure (detail set): start over. */
rma_status_t region_reattach_all(rma_client_t *c, int64_t deadline);
/* After a take-over: connect every peer and import every remote again;
 * one that fails is reported on its handle, not here. */
void peer_reattach_all(rma_client_t *c, int64_t deadline);
/* A remote peer_reattach_all could not import again: try again, as an
 * operation needs it. RMA_OK (at once if it was not lost), or the
 * failure, with its detail. */
rma_status_t peer_remote_revive(rma_client_t *c, struct rma_remote *remote);

/* Unmap and free every region / peer / remote left at disconnect. */
void region_cleanup(rma_client_t *c);
void peer_cleanup(rma_client_t *c);
/* staging.c: a transfer on @remote issues no more pieces; the last one
 * of a released remote releases it now. */
void peer_remote_unstage(rma_client_t *c, struct rma_remote *remote);
void peer_event(rma_client_t *c, const Rma__V1__PeerEvent *ev);

/* ---- time ---- */

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t client_now_ms(void);
/* timeout_ms < 0: no deadline (returns -1). */
int64_t client_deadline(int timeout_ms);
/* Time left for poll(): -1 without a deadline, 0 once passed. */
int client_remaining(int64_t deadline);

#endif
