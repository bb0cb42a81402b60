/* Local clients: the Unix socket server, one connection per client, frames
 * read with our own recvmsg (so passed fds are seen, then closed: clients
 * may not send any), dispatched through a table, replies and events queued
 * and written without ever blocking on a slow client. */
#include "daemon.h"
#include "oprec.h"
#include "socket_path.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <unistd.h>

/* Work done for one client per wake-up, so one client cannot starve others. */
#define CONN_READS_PER_WAKEUP 4
#define CONN_FRAMES_PER_WAKEUP 256
/* Stop reading a client while this much output waits for it. */
#define CONN_OUT_HIGH (4u << 20)

typedef void (*conn_handler_t)(struct conn *c, const Rma__V1__Request *req);

static void conn_on_read(evutil_socket_t fd, short what, void *arg);
static void conn_on_write(evutil_socket_t fd, short what, void *arg);
static void conn_accept_resume(struct daemon *d);

/* ---- output ----------------------------------------------------------- */

static void
conn_queue_frame(struct conn *c, const ProtobufCMessage *msg, int fd)
{
	size_t n = frame_packed_size(msg);
	struct evbuffer_iovec v;

	if (c->dead || c->fd < 0) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd >= 0) {
		if (c->out_fds_len == c->out_fds_cap) {
			size_t cap = c->out_fds_cap ? 2 * c->out_fds_cap : 4;
			struct out_fd *p =
			    realloc(c->out_fds, cap * sizeof(*p));
			if (p == NULL) {
				close(fd);
				conn_close(
				    c, "out of memory queueing a descriptor");
				return;
			}
			c->out_fds = p;
			c->out_fds_cap = cap;
		}
		c->out_fds[c->out_fds_len].pos =
		    c->out_written + evbuffer_get_length(c->out);
		c->out_fds[c->out_fds_len].fd = fd;
		c->out_fds_len++;
	}
	if (evbuffer_reserve_space(c->out, n, &v, 1) != 1) {
		conn_close(c, "out of memory queueing a frame");
		return;
	}
	frame_pack(msg, v.iov_base);
	v.iov_len = n;
	evbuffer_commit_space(c->out, &v, 1);
	if (!c->dirty) {
		c->dirty = true;
		TAILQ_INSERT_TAIL(&c->d->dirty_conns, c, dirty_link);
		worker_kick(c->d);
	}
}

/* Writes as much as the socket takes; an fd rides on the first byte of the
 * frame that carries it. Returns -1 when the connection was closed. */
static int
conn_write(struct conn *c)
{
	while (evbuffer_get_length(c->out) > 0) {
		struct iovec iov[16];
		size_t limit = evbuffer_get_length(c->out);
		struct msghdr mh = {0};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		bool with_fd = false;
		ssize_t n;
		int nv;

		if (c->out_fds_len > 0) {
			uint64_t at = c->out_fds[0].pos - c->out_written;
			if (at == 0)
				with_fd = true;
			else if (at < limit)
				limit = (size_t)at;
		}
		nv = evbuffer_peek(c->out, (ev_ssize_t)limit, NULL,
				   (struct evbuffer_iovec *)iov, 16);
		if (nv > 16)
			nv = 16;
		/* peek may return more than limit in the last vector */
		{
			size_t total = 0;
			for (int i = 0; i < nv; i++) {
				if (total + iov[i].iov_len > limit) {
					iov[i].iov_len = limit - total;
					nv = i + 1;
					break;
				}
				total += iov[i].iov_len;
			}
		}
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)nv;
		if (with_fd) {
			struct cmsghdr *cm;
			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof(cbuf.buf);
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &c->out_fds[0].fd, sizeof(int));
		}
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				event_add(c->write_ev, NULL);
				return 0;
			}
			if (errno == EINTR)
				continue;
			conn_close(c, strerror(errno));
			return -1;
		}
		if (with_fd) {
			close(c->out_fds[0].fd);
			c->out_fds_len--;
			memmove(c->out_fds, c->out_fds + 1,
				c->out_fds_len * sizeof(*c->out_fds));
		}
		evbuffer_drain(c->out, (size_t)n);
		c->out_written += (uint64_t)n;
	}
	event_del(c->write_ev);
	if (c->closing) {
		conn_close(c, NULL);
		return -1;
	}
	if (c->read_paused && evbuffer_get_length(c->out) < CONN_OUT_HIGH / 2) {
		c->read_paused = false;
		event_add(c->read_ev, NULL);
	}
	return 0;
}

static void
conn_on_write(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	conn_ref(c);
	conn_write(c);
	conn_unref(c);
}

/* Completions per event (on the stack: a packed one takes 24 bytes). */
#define CONN_COMPLETIONS_PER_EVENT 1024

static bool
conn_completion_packs(const Rma__V1__Completion *comp)
{
	return comp->detail == protobuf_c_empty_string;
}

/* Completions go out in order, as runs: those without a detail as packed
 * records, the others as Completion messages. */
static void
conn_pack_completions(struct conn *c)
{
	Rma__V1__Completion *ptrs[CONN_COMPLETIONS_PER_EVENT];
	uint8_t packed[CONN_COMPLETIONS_PER_EVENT * COMPREC_SIZE];
	Rma__V1__Completions comps = RMA__V1__COMPLETIONS__INIT;
	Rma__V1__Event event = RMA__V1__EVENT__INIT;
	size_t at = 0;

	event.body_case = RMA__V1__EVENT__BODY_COMPLETIONS;
	event.completions = &comps;
	while (at < c->done_len) {
		bool pack = conn_completion_packs(&c->done[at]);
		size_t n = 0;

		comps.n_completions = 0;
		comps.packed.len = 0;
		while (at + n < c->done_len && n < CONN_COMPLETIONS_PER_EVENT &&
		       conn_completion_packs(&c->done[at + n]) == pack) {
			const Rma__V1__Completion *k = &c->done[at + n];
			if (pack) {
				struct comprec rec = {k->op_id, k->bytes,
						      (int32_t)k->status};
				comprec_encode(packed + n * COMPREC_SIZE, &rec);
			} else {
				ptrs[n] = &c->done[at + n];
			}
			n++;
		}
		if (pack) {
			comps.packed.data = packed;
			comps.packed.len = n * COMPREC_SIZE;
		} else {
			comps.n_completions = n;
			comps.completions = ptrs;
		}
		conn_send_event(c, &event);
		at += n;
	}
	for (size_t i = 0; i < c->done_len; i++) {
		if (c->done[i].detail != protobuf_c_empty_string)
			free(c->done[i].detail);
	}
	c->done_len = 0;
}

void
conn_flush_dirty(struct daemon *d)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&d->dirty_conns)) != NULL) {
		TAILQ_REMOVE(&d->dirty_conns, c, dirty_link);
		c->dirty = false;
		conn_ref(c);
		/* Packing queues frames and so puts c back on the list; the
		 * write then happens on that later pass. */
		if (!c->dead && c->done_len > 0)
			conn_pack_completions(c);
		if (!c->dead && !c->dirty)
			conn_write(c);
		conn_unref(c);
	}
}

static void
conn_send_message(struct conn *c, Rma__V1__DaemonMessage *m, int fd)
{
	conn_queue_frame(c, &m->base, fd);
	if (c->dead)
		return;
	if (evbuffer_get_length(c->out) > c->d->cfg.max_queued_bytes) {
		conn_close(c, "client does not read its socket: output over "
			      "max_queued_bytes");
		return;
	}
	if (!c->read_paused && evbuffer_get_length(c->out) > CONN_OUT_HIGH) {
		/* Backpressure: a client that does not read gets no new work
		 * done for it until it catches up (or is cut off as stuck). */
		c->read_paused = true;
		c->paused_since = daemon_now();
		event_del(c->read_ev);
	}
}

void
conn_send_reply(struct conn *c, Rma__V1__Reply *reply, int fd)
{
	Rma__V1__DaemonMessage m = RMA__V1__DAEMON_MESSAGE__INIT;

	m.kind_case = RMA__V1__DAEMON_MESSAGE__KIND_REPLY;
	m.reply = reply;
	conn_send_message(c, &m, fd);
}

void
conn_send_event(struct conn *c, Rma__V1__Event *event)
{
	Rma__V1__DaemonMessage m = RMA__V1__DAEMON_MESSAGE__INIT;

	m.kind_case = RMA__V1__DAEMON_MESSAGE__KIND_EVENT;
	m.event = event;
	conn_send_message(c, &m, -1);
}

void
conn_send_error(struct conn *c, uint64_t id, wire_status_t status,
		const char *fmt, ...)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	reply.id = id;
	reply.status = status;
	reply.detail = detail;
	conn_send_reply(c, &reply, -1);
}

void
conn_complete(struct conn *c, uint64_t op_id, wire_status_t status,
	      uint64_t bytes, const char *detail)
{
	Rma__V1__Completion *comp;

	if (c->dead)
		return;
	if (c->done_len == c->done_cap) {
		size_t cap = c->done_cap ? 2 * c->done_cap : 64;
		Rma__V1__Completion *p = realloc(c->done, cap * sizeof(*p));
		if (p == NULL) {
			conn_close(c, "out of memory queueing a completion");
			return;
		}
		c->done = p;
		c->done_cap = cap;
	}
	comp = &c->done[c->done_len++];
	rma__v1__completion__init(comp);
	comp->op_id = op_id;
	comp->status = status;
	comp->bytes = bytes;
	if (detail != NULL && detail[0] != '\0') {
		comp->detail = strdup(detail);
		if (comp->detail == NULL)
			comp->detail = (char *)protobuf_c_empty_string;
	}
	if (!c->dirty) {
		c->dirty = true;
		TAILQ_INSERT_TAIL(&c->d->dirty_conns, c, dirty_link);
		worker_kick(c->d);
	}
}

/* ---- handlers --------------------------------------------------------- */

static void
conn_handle_hello(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__HelloReply hello = RMA__V1__HELLO_REPLY__INIT;
	const Rma__V1__Hello *h = req->hello;

	if (h->protocol_version != RMA_PROTOCOL_VERSION) {
		conn_send_error(c, req->id, RMA__V1__STATUS__ERR_VERSION,
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
	hello.max_frame = c->d->cfg.max_frame;
	reply.id = req->id;
	reply.body_case = RMA__V1__REPLY__BODY_HELLO;
	reply.hello = &hello;
	conn_send_reply(c, &reply, -1);
}

static void
conn_handle_region_alloc(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	Rma__V1__RegionAllocReply body = RMA__V1__REGION_ALLOC_REPLY__INIT;
	struct region *r;
	char detail[160];
	wire_status_t st;
	int memfd;

	st = region_create(c->d, c, req->region_alloc->length, &r, &memfd,
			   detail, sizeof(detail));
	if (st != RMA__V1__STATUS__OK) {
		conn_send_error(c, req->id, st, "%s", detail);
		return;
	}
	body.region_id = r->id;
	body.generation = r->generation;
	body.length = r->length;
	body.descriptor = r->descriptor;
	reply.id = req->id;
	reply.body_case = RMA__V1__REPLY__BODY_REGION_ALLOC;
	reply.region_alloc = &body;
	/* The memfd moves to the output queue, closed once sent. */
	conn_send_reply(c, &reply, memfd);
}

static void
conn_handle_region_free(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	uint64_t id = req->region_free->region_id;
	struct region *r = idmap_get(&c->regions, id);

	if (r == NULL) {
		conn_send_error(c, req->id, RMA__V1__STATUS__ERR_NO_REGION,
				"region %llu is not a region of this client",
				(unsigned long long)id);
		return;
	}
	region_free(r);
	reply.id = req->id;
	conn_send_reply(c, &reply, -1);
}

static void
conn_handle_peer_connect(struct conn *c, const Rma__V1__Request *req)
{
	peer_handle_connect(c, req->id, req->peer_connect->address);
}

static void
conn_handle_remote_import(struct conn *c, const Rma__V1__Request *req)
{
	resolve_handle_import(c, req->id, req->remote_import->peer_id,
			      req->remote_import->descriptor);
}

static void
conn_handle_remote_release(struct conn *c, const Rma__V1__Request *req)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	uint64_t id = req->remote_release->remote_id;
	struct remote *rem = idmap_remove(&c->remotes, id);

	if (rem == NULL) {
		conn_send_error(c, req->id, RMA__V1__STATUS__ERR_NO_PEER,
				"remote %llu is not a remote of this client",
				(unsigned long long)id);
		return;
	}
	remote_release(rem);
	reply.id = req->id;
	conn_send_reply(c, &reply, -1);
}

static void
conn_handle_submit(struct conn *c, const Rma__V1__Request *req)
{
	if (req->submit->packed.len % OPREC_SIZE != 0) {
		c->d->counters.protocol_errors++;
		conn_send_error(c, req->id, RMA__V1__STATUS__ERR_PROTOCOL,
				"Submit.packed holds %zu bytes, not a whole "
				"number of %d-byte operation records",
				req->submit->packed.len, OPREC_SIZE);
		c->closing = true;
		return;
	}
	op_submit(c, req->submit);
}

static void
conn_handle_status(struct conn *c, const Rma__V1__Request *req)
{
	status_handle(c, req->id);
}

static const struct {
	Rma__V1__Request__BodyCase body;
	const char *name;
	conn_handler_t handler;
} conn_handlers[] = {
    {RMA__V1__REQUEST__BODY_HELLO, "hello", conn_handle_hello},
    {RMA__V1__REQUEST__BODY_REGION_ALLOC, "region_alloc",
     conn_handle_region_alloc},
    {RMA__V1__REQUEST__BODY_REGION_FREE, "region_free",
     conn_handle_region_free},
    {RMA__V1__REQUEST__BODY_PEER_CONNECT, "peer_connect",
     conn_handle_peer_connect},
    {RMA__V1__REQUEST__BODY_REMOTE_IMPORT, "remote_import",
     conn_handle_remote_import},
    {RMA__V1__REQUEST__BODY_REMOTE_RELEASE, "remote_release",
     conn_handle_remote_release},
    {RMA__V1__REQUEST__BODY_SUBMIT, "submit", conn_handle_submit},
    {RMA__V1__REQUEST__BODY_STATUS, "status", conn_handle_status},
};

/* Requests are decoded into one bump arena, reset after each request:
 * a Submit of hundreds of ops costs no malloc per op. Larger requests
 * spill to malloc. */
#define CONN_ARENA_SIZE (256 * 1024)

struct conn_arena {
	size_t used;
	_Alignas(16) uint8_t buf[CONN_ARENA_SIZE];
};

static void *
conn_arena_alloc(void *data, size_t size)
{
	struct conn_arena *a = data;
	size_t n = (size + 15) & ~(size_t)15;

#if defined(__SANITIZE_ADDRESS__)
	/* Under ASan every field gets its own allocation, so overruns show. */
	n = SIZE_MAX;
#endif
	if (n <= CONN_ARENA_SIZE - a->used) {
		void *p = a->buf + a->used;
		a->used += n;
		return p;
	}
	return malloc(size);
}

static void
conn_arena_free(void *data, void *p)
{
	struct conn_arena *a = data;

	if ((uint8_t *)p < a->buf || (uint8_t *)p >= a->buf + CONN_ARENA_SIZE)
		free(p);
}

static void
conn_dispatch(struct conn *c, const uint8_t *payload, size_t len)
{
	struct conn_arena *arena = c->d->decode_arena;
	ProtobufCAllocator alloc = {conn_arena_alloc, conn_arena_free, arena};
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
		conn_send_error(c, 0, RMA__V1__STATUS__ERR_PROTOCOL,
				"frame of %zu bytes is not a valid Request",
				len);
		c->closing = true;
		return;
	}
	if (c->refused) {
		conn_send_error(
		    c, req->id, RMA__V1__STATUS__ERR_PERMISSION,
		    "uid %u (gid %u) may not use this daemon: not in "
		    "allow_users or allow_groups",
		    (unsigned)c->uid, (unsigned)c->gid);
		c->closing = true;
		goto out;
	}
	if (!c->hello_done && req->body_case != RMA__V1__REQUEST__BODY_HELLO) {
		c->d->counters.protocol_errors++;
		conn_send_error(c, req->id, RMA__V1__STATUS__ERR_PROTOCOL,
				"the first request must be hello");
		c->closing = true;
		goto out;
	}
	for (size_t i = 0; i < sizeof(conn_handlers) / sizeof(conn_handlers[0]);
	     i++) {
		if (conn_handlers[i].body == req->body_case) {
			log_debug("conn_dispatch: client %u: %s", c->id,
				  conn_handlers[i].name);
			conn_handlers[i].handler(c, req);
			goto out;
		}
	}
	c->d->counters.protocol_errors++;
	conn_send_error(c, req->id, RMA__V1__STATUS__ERR_UNKNOWN_REQUEST,
			"unknown request type %d", (int)req->body_case);
out:
	rma__v1__request__free_unpacked(req, &alloc);
}

/* ---- input -------------------------------------------------------------- */

/* Closes every fd in the control data: clients may not send any. */
static int
conn_discard_fds(struct conn *c, struct msghdr *mh)
{
	int n = 0;

	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL;
	     cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level == SOL_SOCKET &&
		    cm->cmsg_type == SCM_RIGHTS) {
			size_t nfds =
			    (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfds; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(int));
				close(fd);
				n++;
			}
		}
	}
	return n;
}

static void
conn_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int frames = 0;

	conn_ref(c);
	for (int reads = 0; reads < CONN_READS_PER_WAKEUP && !c->dead &&
			    !c->closing && !c->read_paused;
	     reads++) {
		union {
			char buf[CMSG_SPACE(8 * sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov;
		struct msghdr mh = {0};
		uint8_t *p;
		size_t avail;
		ssize_t n;
		int rc;

		rc = frame_reader_space(&c->in, &p, &avail);
		if (rc < 0) {
			c->d->counters.protocol_errors++;
			conn_send_error(
			    c, 0, RMA__V1__STATUS__ERR_PROTOCOL,
			    "frame larger than the maximum of %u bytes",
			    c->d->cfg.max_frame);
			c->closing = true;
			break;
		}
		iov.iov_base = p;
		iov.iov_len = avail;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(c, strerror(errno));
			break;
		}
		if (n == 0) {
			conn_close(c, "client closed the connection");
			break;
		}
		if (conn_discard_fds(c, &mh) > 0 ||
		    (mh.msg_flags & MSG_CTRUNC)) {
			c->d->counters.protocol_errors++;
			conn_send_error(
			    c, 0, RMA__V1__STATUS__ERR_PROTOCOL,
			    "clients may not send file descriptors");
			c->closing = true;
			break;
		}
		frame_reader_commit(&c->in, (size_t)n);
		for (;;) {
			const uint8_t *payload;
			size_t len;
			rc = frame_reader_next(&c->in, &payload, &len);
			if (rc == FRAME_MORE)
				break;
			if (rc < 0) {
				c->d->counters.protocol_errors++;
				conn_send_error(
				    c, 0, RMA__V1__STATUS__ERR_PROTOCOL,
				    "frame larger than the maximum of %u bytes",
				    c->d->cfg.max_frame);
				c->closing = true;
				break;
			}
			conn_dispatch(c, payload, len);
			frames++;
			if (c->dead || c->closing)
				break;
		}
		if ((size_t)n < avail || frames >= CONN_FRAMES_PER_WAKEUP)
			break;
	}
	if (c->closing && !c->dead) {
		/* Stop reading; the error reply goes out, then the close. */
		event_del(c->read_ev);
		conn_write(c);
	} else if (!c->dead && frames >= CONN_FRAMES_PER_WAKEUP) {
		/* Yield to other clients; come back on the next turn. */
		event_active(c->read_ev, EV_READ, 0);
	}
	worker_kick(c->d);
	conn_unref(c);
}

/* Clients that stopped reading for longer than an operation may take are
 * cut off: their queue would otherwise hold daemon memory forever. */
void
conn_check_stuck(struct daemon *d)
{
	double now = daemon_now();
	struct conn *c, *next;

	for (c = TAILQ_FIRST(&d->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->read_paused && now - c->paused_since > d->cfg.op_timeout)
			conn_close(c, "client stopped reading its socket");
	}
}

/* ---- lifecycle ------------------------------------------------------------
 */

void
conn_ref(struct conn *c)
{
	c->refs++;
}

void
conn_unref(struct conn *c)
{
	if (--c->refs > 0)
		return;
	for (size_t i = 0; i < c->out_fds_len; i++)
		close(c->out_fds[i].fd);
	for (size_t i = 0; i < c->done_len; i++) {
		if (c->done[i].detail != protobuf_c_empty_string)
			free(c->done[i].detail);
	}
	free(c->done);
	free(c->out_fds);
	evbuffer_free(c->out);
	frame_reader_cleanup(&c->in);
	idmap_cleanup(&c->regions);
	idmap_cleanup(&c->remotes);
	free(c);
}

void
conn_close(struct conn *c, const char *why)
{
	struct daemon *d = c->d;
	struct region *r;
	struct remote *rem;
	size_t pos;

	if (c->dead)
		return;
	log_info("conn_close: client %u (pid %d, %s): %s", c->id, (int)c->pid,
		 c->name[0] ? c->name : "no hello",
		 why ? why : "closed after error");
	c->dead = true;
	event_free(c->read_ev);
	event_free(c->write_ev);
	c->read_ev = c->write_ev = NULL;
	close(c->fd);
	c->fd = -1;
	conn_accept_resume(d);
	TAILQ_REMOVE(&d->conns, c, link);
	if (c->dirty) {
		TAILQ_REMOVE(&d->dirty_conns, c, dirty_link);
		c->dirty = false;
	}
	/* Regions go once their in-flight operations complete. */
	pos = 0;
	while (idmap_next(&c->regions, &pos, (void **)&r))
		region_free(r);
	pos = 0;
	while (idmap_next(&c->remotes, &pos, (void **)&rem))
		remote_release(rem);
	idmap_cleanup(&c->remotes);
	peer_conn_gone(d, c);
	conn_unref(c);
}

/* With allow lists configured, a client must be root, a listed user, or
 * in a listed group (primary or supplementary). */
static bool
conn_allowed(struct daemon *d, int fd, const struct ucred *cred)
{
	const struct config *cfg = &d->cfg;
	gid_t groups[256];
	socklen_t len = sizeof(groups);

	if (cfg->n_allow_uids == 0 && cfg->n_allow_gids == 0)
		return true;
	if (cred->uid == 0)
		return true;
	for (size_t i = 0; i < cfg->n_allow_uids; i++) {
		if (cfg->allow_uids[i] == cred->uid)
			return true;
	}
	for (size_t i = 0; i < cfg->n_allow_gids; i++) {
		if (cfg->allow_gids[i] == cred->gid)
			return true;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return false;
	for (size_t k = 0; k < len / sizeof(gid_t); k++) {
		for (size_t i = 0; i < cfg->n_allow_gids; i++) {
			if (cfg->allow_gids[i] == groups[k])
				return true;
		}
	}
	return false;
}

void
conn_create(struct daemon *d, int fd)
{
	struct conn *c;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		log_warn("conn_create: out of memory");
		close(fd);
		return;
	}
	c->d = d;
	c->id = world_next_id(&d->world->next_conn_id);
	c->fd = fd;
	c->refs = 1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		c->pid = cred.pid;
		c->uid = cred.uid;
		c->gid = cred.gid;
		c->refused = !conn_allowed(d, fd, &cred);
	} else {
		c->refused = d->cfg.n_allow_uids > 0 || d->cfg.n_allow_gids > 0;
	}
	frame_reader_init(&c->in, d->cfg.max_frame);
	idmap_init(&c->regions);
	idmap_init(&c->remotes);
	c->next_remote_id = 1;
	c->out = evbuffer_new();
	c->read_ev =
	    event_new(d->base, fd, EV_READ | EV_PERSIST, conn_on_read, c);
	c->write_ev = event_new(d->base, fd, EV_WRITE, conn_on_write, c);
	if (c->out == NULL || c->read_ev == NULL || c->write_ev == NULL) {
		log_warn("conn_create: out of memory");
		if (c->out)
			evbuffer_free(c->out);
		if (c->read_ev)
			event_free(c->read_ev);
		if (c->write_ev)
			event_free(c->write_ev);
		frame_reader_cleanup(&c->in);
		free(c);
		close(fd);
		return;
	}
	TAILQ_INSERT_TAIL(&d->conns, c, link);
	event_add(c->read_ev, NULL);
	d->counters.clients_accepted++;
	log_debug("conn_create: client %u pid %d uid %u", c->id, (int)c->pid,
		  (unsigned)c->uid);
}

/* ---- the listening socket ------------------------------------------------ */

static void
conn_on_handed_over(struct daemon *d, void *arg)
{
	conn_create(d, (int)(intptr_t)arg);
}

/* New clients go to the workers in turn. */
static void
conn_assign(struct daemon *d, int fd)
{
	struct world *w = d->world;
	struct daemon *to = w->workers[w->next_accept++ % w->n];

	if (to == d)
		conn_create(d, fd);
	else if (world_post(to, conn_on_handed_over, (void *)(intptr_t)fd) < 0)
		conn_create(d, fd);
}

/* Out of descriptors, the client stays queued and the listener readable:
 * accepting again at once would spin (and log) on every turn. Accepting
 * pauses until a client of this worker closes or a short timer fires, as
 * OpenBSD's daemons do; the warning comes once a minute at most. */
#define CONN_ACCEPT_PAUSE_US 200000
#define CONN_ACCEPT_WARN_PERIOD 60.0

static void
conn_accept_pause(struct daemon *d, int err)
{
	static const struct timeval pause = {0, CONN_ACCEPT_PAUSE_US};
	double now = daemon_now();

	d->accept_pauses++;
	if (now >= d->accept_warn_next) {
		log_warn("conn_accept_pause: %s: not accepting clients until "
			 "descriptors free up (paused %llu times)",
			 strerror(err), (unsigned long long)d->accept_pauses);
		d->accept_warn_next = now + CONN_ACCEPT_WARN_PERIOD;
	}
	event_del(d->accept_ev);
	evtimer_add(d->accept_pause_ev, &pause);
}

/* A descriptor came free: accept again now rather than at the timer. */
static void
conn_accept_resume(struct daemon *d)
{
	if (d->accept_pause_ev == NULL ||
	    !evtimer_pending(d->accept_pause_ev, NULL))
		return;
	evtimer_del(d->accept_pause_ev);
	event_add(d->accept_ev, NULL);
}

static void
conn_on_accept_pause_end(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	event_add(d->accept_ev, NULL);
}

static void
conn_on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct daemon *d = arg;

	for (int i = 0; i < 64; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				conn_accept_pause(d, errno);
			else if (errno != EAGAIN && errno != EINTR &&
				 errno != ECONNABORTED)
				log_warn("conn_on_accept: accept: %s",
					 strerror(errno));
			return;
		}
		conn_assign(d, fd);
	}
}

/* Serves clients on the listening socket fd (ours from now on). */
static int
conn_server_listen(struct daemon *d, int fd)
{
	d->accept_ev =
	    event_new(d->base, fd, EV_READ | EV_PERSIST, conn_on_accept, d);
	d->accept_pause_ev = evtimer_new(d->base, conn_on_accept_pause_end, d);
	if (d->accept_ev == NULL || d->accept_pause_ev == NULL ||
	    event_add(d->accept_ev, NULL) < 0) {
		log_error("conn_server_listen: cannot add accept event");
		if (d->accept_ev != NULL)
			event_free(d->accept_ev);
		if (d->accept_pause_ev != NULL)
			event_free(d->accept_pause_ev);
		d->accept_ev = d->accept_pause_ev = NULL;
		return -1;
	}
	d->listen_fd = fd;
	return 0;
}

/* Our socket path may hold a socket a dead rmad of ours left; anything
 * else there (another user's socket, a file, a symlink) is not ours to
 * remove, and taking another user's path over would make us the daemon
 * its clients talk to. */
static int
conn_server_check_path(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		log_error("conn_server_check_path: %s: %s", path,
			  strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		log_error("conn_server_check_path: %s exists and is not a "
			  "socket: not replacing it",
			  path);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		log_error("conn_server_check_path: %s belongs to uid %u, not "
			  "to uid %u: not taking it over",
			  path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

int
conn_server_start(struct daemon *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t sa_len = sizeof(sa);
	const char *path = d->cfg.socket_path;
	char why[256];
	mode_t old_umask;
	int fd;

	if (notify_listen_fd(&fd) < 0)
		return 1;
	if (fd >= 0) {
		/* Socket activation: systemd made the socket (path, mode,
		 * group) and keeps it across our restarts; say where it is. */
		if (getsockname(fd, (struct sockaddr *)&sa, &sa_len) == 0 &&
		    sa_len > offsetof(struct sockaddr_un, sun_path) &&
		    sa.sun_path[0] != '\0')
			snprintf(d->cfg.socket_path, sizeof(d->cfg.socket_path),
				 "%.*s", (int)sizeof(d->cfg.socket_path) - 1,
				 sa.sun_path);
		d->listen_inherited = true;
		if (conn_server_listen(d, fd) < 0) {
			close(fd);
			return 1;
		}
		return 0;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_error("conn_server_start: socket path too long: %s", path);
		return 1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (socket_path_make_dir(path, why, sizeof(why)) < 0) {
		log_error("conn_server_start: %s",
			  errno == EPERM ? why : strerror(errno));
		return EX_NOPERM;
	}
	if (conn_server_check_path(path) < 0)
		return EX_NOPERM;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("conn_server_start: socket: %s", strerror(errno));
		return 1;
	}
	/* A stale socket from a dead daemon is replaced; a live one is not. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		log_error("conn_server_start: another rmad is serving %s",
			  path);
		goto err_close;
	}
	if (errno == ECONNREFUSED)
		unlink(path);
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("conn_server_start: socket: %s", strerror(errno));
		return 1;
	}
	old_umask = umask(0117); /* 0660 */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		umask(old_umask);
		log_error("conn_server_start: bind %s: %s", path,
			  strerror(errno));
		goto err_close;
	}
	umask(old_umask);
	if (d->cfg.socket_group[0] != '\0') {
		struct group *gr = getgrnam(d->cfg.socket_group);
		if (gr == NULL || chown(path, (uid_t)-1, gr->gr_gid) < 0) {
			log_error("conn_server_start: cannot give %s to group "
				  "%s: %s",
				  path, d->cfg.socket_group,
				  gr ? strerror(errno) : "no such group");
			goto err_unlink;
		}
	}
	if (listen(fd, 128) < 0) {
		log_error("conn_server_start: listen: %s", strerror(errno));
		goto err_unlink;
	}
	if (conn_server_listen(d, fd) < 0)
		goto err_unlink;
	return 0;

err_unlink:
	unlink(path);
err_close:
	close(fd);
	return 1;
}

void
conn_server_stop(struct daemon *d)
{
	if (d->listen_fd < 0)
		return;
	event_free(d->accept_ev);
	event_free(d->accept_pause_ev);
	d->accept_ev = d->accept_pause_ev = NULL;
	close(d->listen_fd);
	d->listen_fd = -1;
	/* systemd's copy of an inherited socket queues clients for our next
	 * start: its path stays */
	if (!d->listen_inherited)
		unlink(d->cfg.socket_path);
}
