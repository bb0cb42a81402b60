/* SPDX-License-Identifier: BSD-2-Clause */
/* Client requests: a frame decoded into a Request (in one bump arena),
 * the gates every request passes (credentials, hello first), then the
 * handler from a {body, name, handler} table; an unknown request gets
 * ERR_UNKNOWN_REQUEST. Handlers reply through reply.c; the work
 * behind most of them lives in region.c, peer.c, resolve.c, op.c and
 * status.c. */
#include "daemon.h"
#include "oprec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef void (*request_handler_t)(struct conn *c, const Rma__V1__Request *req);

static void
request_handle_hello(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__HelloReply hello = RMA__V1__HELLO_REPLY__INIT;
	Rma__V1__RingInfo ring = RMA__V1__RING_INFO__INIT;
	const Rma__V1__Hello *h = req->hello;
	int ring_fd = -1;

	if (h->protocol_version != RMA_PROTOCOL_VERSION) {
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_VERSION,
			    "protocol version %u not supported; this "
			    "daemon speaks %u",
			    h->protocol_version, RMA_PROTOCOL_VERSION);
		c->closing = true;
		return;
	}
	snprintf(c->name, sizeof(c->name), "%s", h->client_name);
	c->hello_done = true;
	hello.protocol_version = RMA_PROTOCOL_VERSION;
	hello.daemon_id = c->d->id_hex;
	hello.version = RMA_VERSION;
	hello.max_frame =
	    c->in.max_frame; /* this client's, kept over a reload */
	/* A ring if asked for (once); without one, the socket serves. */
	if (h->ring && c->ring == NULL && c->d->cfg->ring) {
		char detail[160];

		if (ring_create(c, h->ring_comp_slots, &ring_fd, &ring, detail,
				sizeof(detail)) == RMA__V1__STATUS__OK)
			hello.ring = &ring;
		else
			log_warn("request_handle_hello: client %u: no ring: %s",
				 c->id, detail);
	}
	reply.body_case = RMA__V1__REPLY__BODY_HELLO;
	reply.hello = &hello;
	/* The ring's memfd moves to the output queue, closed once sent. */
	reply_send(reply_to(c, req->id), &reply, ring_fd);
}

/* A new region's answer (alloc and register alike), with memfd, or -1
 * for none. */
static void
request_reply_region(struct conn *c, uint64_t req_id,
		     Rma__V1__Reply__BodyCase body_case, const struct region *r,
		     int memfd)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__RegionAllocReply body = RMA__V1__REGION_ALLOC_REPLY__INIT;

	body.region_id = r->id;
	body.generation = r->generation;
	body.length = r->length;
	body.descriptor = (char *)r->descriptor;
	body.read_only_descriptor = (char *)r->ro_descriptor;
	reply.body_case = body_case;
	if (body_case == RMA__V1__REPLY__BODY_REGION_ALLOC)
		reply.region_alloc = &body;
	else
		reply.region_register = &body;
	/* The memfd moves to the output queue, closed once sent. */
	reply_send(reply_to(c, req_id), &reply, memfd);
}

static void
request_handle_region_alloc(struct conn *c, const Rma__V1__Request *req)
{
	struct region *r;
	char detail[160];
	wire_status_t st;
	int memfd;

	st = region_create(c->d, c, req->region_alloc->length, &r, &memfd,
			   detail, sizeof(detail));
	if (st != RMA__V1__STATUS__OK) {
		reply_error(reply_to(c, req->id), st, "%s", detail);
		return;
	}
	request_reply_region(c, req->id, RMA__V1__REPLY__BODY_REGION_ALLOC, r,
			     memfd);
}

/* The one request a client sends an fd with (conn_fds.h): exactly one. */
static void
request_handle_region_register(struct conn *c, const Rma__V1__Request *req)
{
	const Rma__V1__RegionRegister *rr = req->region_register;
	struct region *r;
	char detail[256];
	wire_status_t st;
	size_t n;
	int fd;

	n = conn_fds_take(&c->fds_in, &fd);
	if (n != 1) {
		if (fd >= 0)
			close(fd);
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_INVALID,
			    "region_register takes exactly one file "
			    "descriptor (SCM_RIGHTS on its frame), got %zu",
			    n);
		return;
	}
	st = region_register(c->d, c, fd, rr->offset, rr->length, &r, detail,
			     sizeof(detail));
	close(fd); /* the region keeps its own */
	if (st != RMA__V1__STATUS__OK) {
		reply_error(reply_to(c, req->id), st, "%s", detail);
		return;
	}
	request_reply_region(c, req->id, RMA__V1__REPLY__BODY_REGION_REGISTER,
			     r, -1);
}

static void
request_handle_region_free(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	uint64_t id = req->region_free->region_id;
	struct region *r = idmap_get(&c->regions, id);
	char detail[160];
	wire_status_t st;

	/* The region lives on in our successor (a take-over, or systemd's
	 * fd store across a restart): freed here, it would stay there an
	 * orphan. The client frees it again there, with its secret. */
	if (r != NULL &&
	    (__atomic_load_n(&c->d->world->handed_over, __ATOMIC_ACQUIRE) ||
	     fdstore_frozen(c->d))) {
		reply_error(reply_to(c, req->id),
			    RMA__V1__STATUS__ERR_RESTARTED,
			    "rmad is handing region %llu over to its next "
			    "process: free it there",
			    (unsigned long long)id);
		return;
	}
	if (r == NULL) {
		/* not ours: an orphan its owner frees before its re-attach */
		st = region_free_orphan_of(c, id, req->region_free->generation,
					   detail, sizeof(detail));
		if (st != RMA__V1__STATUS__OK) {
			reply_error(reply_to(c, req->id), st, "%s", detail);
			return;
		}
	} else {
		region_free(r);
	}
	reply_send(reply_to(c, req->id), &reply, -1);
}

static void
request_handle_region_reattach(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	char detail[160];
	wire_status_t st;

	st = region_reattach(c, req->region_reattach->region_id,
			     req->region_reattach->generation, detail,
			     sizeof(detail));
	if (st != RMA__V1__STATUS__OK) {
		reply_error(reply_to(c, req->id), st, "%s", detail);
		return;
	}
	reply_send(reply_to(c, req->id), &reply, -1);
}

/* A daemon shutting down takes no new work, as op_submit_memo refuses
 * operations: no peer to dial (its endpoint would be torn down before it
 * answered), no import to resolve. The client asks the successor. */
static bool
request_refused_in_shutdown(struct conn *c, const Rma__V1__Request *req)
{
	if (!c->d->shutting_down)
		return false;
	reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_SHUTDOWN,
		    "daemon shutting down");
	return true;
}

static void
request_handle_peer_connect(struct conn *c, const Rma__V1__Request *req)
{
	if (request_refused_in_shutdown(c, req))
		return;
	peer_handle_connect(reply_to(c, req->id), req->peer_connect->address);
}

static void
request_handle_remote_import(struct conn *c, const Rma__V1__Request *req)
{
	if (request_refused_in_shutdown(c, req))
		return;
	resolve_handle_import(reply_to(c, req->id), req->remote_import->peer_id,
			      req->remote_import->descriptor);
}

static void
request_handle_remote_release(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	uint64_t id = req->remote_release->remote_id;
	struct remote *rem = idmap_remove(&c->remotes, id);

	if (rem == NULL) {
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_NO_PEER,
			    "remote %llu is not a remote of this client",
			    (unsigned long long)id);
		return;
	}
	remote_release(rem);
	reply_send(reply_to(c, req->id), &reply, -1);
}

static void
request_handle_submit(struct conn *c, const Rma__V1__Request *req)
{
	if (req->submit->packed.len % OPREC_SIZE != 0) {
		c->d->counters.protocol_errors++;
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_PROTOCOL,
			    "Submit.packed holds %zu bytes, not a whole "
			    "number of %d-byte operation records",
			    req->submit->packed.len, OPREC_SIZE);
		c->closing = true;
		return;
	}
	op_submit(c, req->submit);
	ring_socket_submit(c);
}

static void
request_handle_status(struct conn *c, const Rma__V1__Request *req)
{
	status_handle(reply_to(c, req->id));
}

static void
request_handle_notify_ack(struct conn *c, const Rma__V1__Request *req)
{
	notification_release(c, req->notify_ack->count);
}

/* Op ids in one Cancel: librma sends one, or the pieces of a vectored
 * request (RMA_IOV_MAX); the search is linear in what is parked. */
#define REQUEST_CANCEL_MAX 1024

/* Only operations parked waiting for their peer can still be taken back:
 * the others are on the wire or done, and complete with their own
 * status. */
static void
request_handle_cancel(struct conn *c, const Rma__V1__Request *req)
{
	const Rma__V1__Cancel *k = req->cancel;
	struct peer *p;

	if (k->n_op_ids > REQUEST_CANCEL_MAX) {
		c->d->counters.protocol_errors++;
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_PROTOCOL,
			    "Cancel names %zu operations: at most %d",
			    k->n_op_ids, REQUEST_CANCEL_MAX);
		c->closing = true;
		return;
	}
	for (size_t i = 0; i < k->n_op_ids; i++) {
		TAILQ_FOREACH(p, &c->d->peers, link)
		{
			if (op_parked_cancel(p, c, k->op_ids[i]))
				break;
		}
	}
}

static void
request_handle_ring_wake(struct conn *c, const Rma__V1__Request *req)
{
	ring_woken(c);
}

static const struct {
	Rma__V1__Request__BodyCase body;
	const char *name;
	request_handler_t handler;
} request_handlers[] = {
    {RMA__V1__REQUEST__BODY_HELLO, "hello", request_handle_hello},
    {RMA__V1__REQUEST__BODY_REGION_ALLOC, "region_alloc",
     request_handle_region_alloc},
    {RMA__V1__REQUEST__BODY_REGION_FREE, "region_free",
     request_handle_region_free},
    {RMA__V1__REQUEST__BODY_PEER_CONNECT, "peer_connect",
     request_handle_peer_connect},
    {RMA__V1__REQUEST__BODY_REMOTE_IMPORT, "remote_import",
     request_handle_remote_import},
    {RMA__V1__REQUEST__BODY_REMOTE_RELEASE, "remote_release",
     request_handle_remote_release},
    {RMA__V1__REQUEST__BODY_SUBMIT, "submit", request_handle_submit},
    {RMA__V1__REQUEST__BODY_STATUS, "status", request_handle_status},
    {RMA__V1__REQUEST__BODY_NOTIFY_ACK, "notify_ack",
     request_handle_notify_ack},
    {RMA__V1__REQUEST__BODY_REGION_REATTACH, "region_reattach",
     request_handle_region_reattach},
    {RMA__V1__REQUEST__BODY_CANCEL, "cancel", request_handle_cancel},
    {RMA__V1__REQUEST__BODY_RING_WAKE, "ring_wake", request_handle_ring_wake},
    {RMA__V1__REQUEST__BODY_REGION_REGISTER, "region_register",
     request_handle_region_register},
};

/* Requests are decoded into one bump arena, reset after each request:
 * a Submit of hundreds of ops costs no malloc per op. Larger requests
 * spill to malloc. */
#define REQUEST_ARENA_SIZE (256 * 1024)

struct request_arena {
	size_t used;
	_Alignas(16) uint8_t buf[REQUEST_ARENA_SIZE];
};

static void *
request_arena_alloc(void *data, size_t size)
{
	struct request_arena *a = data;
	size_t n = (size + 15) & ~(size_t)15;

#if defined(__SANITIZE_ADDRESS__)
	/* Under ASan every field gets its own allocation, so overruns show. */
	n = SIZE_MAX;
#endif
	if (n <= REQUEST_ARENA_SIZE - a->used) {
		void *p = a->buf + a->used;
		a->used += n;
		return p;
	}
	return malloc(size);
}

static void
request_arena_free(void *data, void *p)
{
	struct request_arena *a = data;

	if ((uint8_t *)p < a->buf ||
	    (uint8_t *)p >= a->buf + REQUEST_ARENA_SIZE)
		free(p);
}

void
request_dispatch(struct conn *c, const uint8_t *payload, size_t len)
{
	struct request_arena *arena = c->d->decode_arena;
	ProtobufCAllocator alloc = {request_arena_alloc, request_arena_free,
				    arena};
	Rma__V1__Request *req;

	if (arena == NULL) {
		arena = c->d->decode_arena = malloc(sizeof(*arena));
		if (arena == NULL) {
			conn_close(c, "out of memory");
			return;
		}
		alloc.allocator_data = arena;
	}
	arena->used = 0;
	req = rma__v1__request__unpack(&alloc, len, payload);
	if (req == NULL) {
		c->d->counters.protocol_errors++;
		reply_error(reply_to(c, 0), RMA__V1__STATUS__ERR_PROTOCOL,
			    "frame of %zu bytes is not a valid Request", len);
		c->closing = true;
		return;
	}
	if (c->refused) {
		reply_error(reply_to(c, req->id),
			    RMA__V1__STATUS__ERR_PERMISSION,
			    "uid %u (gid %u) may not use this daemon: not in "
			    "allow_users or allow_groups",
			    (unsigned)c->uid, (unsigned)c->gid);
		c->closing = true;
		goto out;
	}
	if (c->over_uid_limit) {
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_LIMIT,
			    "uid %u already holds %u connections to this "
			    "daemon (max_clients_per_uid %u)",
			    (unsigned)c->uid, c->d->cfg->max_clients_per_uid,
			    c->d->cfg->max_clients_per_uid);
		c->closing = true;
		goto out;
	}
	if (!c->hello_done && req->body_case != RMA__V1__REQUEST__BODY_HELLO) {
		c->d->counters.protocol_errors++;
		reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_PROTOCOL,
			    "the first request must be hello");
		c->closing = true;
		goto out;
	}
	for (size_t i = 0;
	     i < sizeof(request_handlers) / sizeof(request_handlers[0]); i++) {
		if (request_handlers[i].body == req->body_case) {
			log_debug("request_dispatch: client %u: %s", c->id,
				  request_handlers[i].name);
			request_handlers[i].handler(c, req);
			goto out;
		}
	}
	c->d->counters.protocol_errors++;
	reply_error(reply_to(c, req->id), RMA__V1__STATUS__ERR_UNKNOWN_REQUEST,
		    "unknown request type %d", (int)req->body_case);
out:
	rma__v1__request__free_unpacked(req, &alloc);
}
