/* SPDX-License-Identifier: BSD-2-Clause */
/* One local client on the Unix socket: frames read with our own recvmsg
 * (so passed fds are seen: conn_fds.c holds them for the one request
 * that takes one, RegionRegister, and any other is an error) and
 * handed to request.c, replies, events and completions queued and written
 * without ever blocking on a slow client, and the connection's life:
 * refcount, close, the stuck-client check. The listener is server.c's. */
#include "daemon.h"
#include "fdpass.h"
#include "snapshot.h"
#include "oprec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Work done for one client per wake-up, so one client cannot starve others. */
#define CONN_READS_PER_WAKEUP 4
#define CONN_FRAMES_PER_WAKEUP 256
/* Stop reading a client while this much output waits for it. */
#define CONN_OUT_HIGH (4u << 20)

static void conn_on_read(evutil_socket_t fd, short what, void *arg);
static void conn_on_write(evutil_socket_t fd, short what, void *arg);

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
		/* a tick (UCX progressed and armed, a read of its event fd)
		 * per RingWake was 5 system calls per 1000 same-daemon puts */
		if (!c->d->flushing_conns)
			worker_kick(c->d);
	}
}

static size_t
conn_iov_bytes(const struct iovec *iov, int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	return len;
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
		union fdpass_buf cbuf;
		bool with_fd = false;
		size_t len;
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
		/* the most that may be in the socket once sendmsg ran */
		len = conn_iov_bytes(iov, nv);
		ring_socket_bytes(c, c->out_written + len);
		if (with_fd)
			fdpass_attach(&mh, &cbuf, &c->out_fds[0].fd, 1);
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			ring_socket_bytes(c, c->out_written);
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
		if ((size_t)n < len) /* the rest waits */
			ring_socket_bytes(c, c->out_written);
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
	return comp->detail == protobuf_c_empty_string && comp->value == 0;
}

/* Completions go out in order, as runs: those without a detail as packed
 * records, the others as Completion messages. Returns the events sent. */
static uint32_t
conn_pack_completions(struct conn *c)
{
	Rma__V1__Completion *ptrs[CONN_COMPLETIONS_PER_EVENT];
	uint8_t packed[CONN_COMPLETIONS_PER_EVENT * COMPREC_SIZE];
	Rma__V1__Completions comps = RMA__V1__COMPLETIONS__INIT;
	Rma__V1__Event event = RMA__V1__EVENT__INIT;
	uint32_t events = 0;
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
		events++;
		at += n;
	}
	for (size_t i = 0; i < c->done_len; i++) {
		if (c->done[i].detail != protobuf_c_empty_string)
			free(c->done[i].detail);
	}
	c->done_len = 0;
	return events;
}

void
conn_flush_dirty(struct daemon *d)
{
	bool was = d->flushing_conns;
	struct conn *c;

	/* what is queued meanwhile is written by this loop */
	d->flushing_conns = true;
	while ((c = TAILQ_FIRST(&d->dirty_conns)) != NULL) {
		TAILQ_REMOVE(&d->dirty_conns, c, dirty_link);
		c->dirty = false;
		conn_ref(c);
		/* Packing queues frames and so puts c back on the list; the
		 * write then happens on that later pass. */
		/* The ring while it has room; the socket for the rest. */
		if (!c->dead && c->ring != NULL)
			ring_publish(c);
		if (!c->dead && c->done_len > 0)
			ring_socket_events(c, conn_pack_completions(c));
		if (!c->dead && !c->dirty)
			conn_write(c);
		conn_unref(c);
	}
	d->flushing_conns = was;
}

static void
conn_send_message(struct conn *c, Rma__V1__DaemonMessage *m, int fd)
{
	conn_queue_frame(c, &m->base, fd);
	if (c->dead)
		return;
	if (evbuffer_get_length(c->out) > c->d->cfg->max_queued_bytes) {
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
conn_send_verror(struct conn *c, uint64_t id, wire_status_t status,
		 const char *fmt, va_list ap)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;

	vsnprintf(c->error_sent, sizeof(c->error_sent), fmt, ap);
	reply.id = id;
	reply.status = status;
	reply.detail = c->error_sent;
	conn_send_reply(c, &reply, -1);
}

void
conn_send_error(struct conn *c, uint64_t id, wire_status_t status,
		const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_send_verror(c, id, status, fmt, ap);
	va_end(ap);
}

void
conn_complete(struct conn *c, uint64_t op_id, wire_status_t status,
	      uint64_t bytes, const char *detail)
{
	conn_complete_value(c, op_id, status, bytes, 0, detail);
}

/* A completion into c->done, for the flush; false if c was closed for
 * want of memory. Not inlined: conn_complete_value's common case then
 * saves no registers for it. */
static __attribute__((noinline)) bool
conn_complete_queue(struct conn *c, uint64_t op_id, wire_status_t status,
		    uint64_t bytes, uint64_t value, const char *detail)
{
	Rma__V1__Completion *comp;

	if (c->done_len == c->done_cap) {
		size_t cap = c->done_cap ? 2 * c->done_cap : 64;
		Rma__V1__Completion *p = realloc(c->done, cap * sizeof(*p));
		if (p == NULL) {
			conn_close(c, "out of memory queueing a completion");
			return false;
		}
		c->done = p;
		c->done_cap = cap;
	}
	comp = &c->done[c->done_len++];
	/* in place, without rma__v1__completion__init's call and copy */
	*comp = (Rma__V1__Completion){
	    .base = PROTOBUF_C_MESSAGE_INIT(&rma__v1__completion__descriptor),
	    .op_id = op_id,
	    .status = status,
	    .bytes = bytes,
	    .detail = (char *)protobuf_c_empty_string,
	    .value = value,
	};
	if (detail != NULL && detail[0] != '\0') {
		comp->detail = strdup(detail);
		if (comp->detail == NULL)
			comp->detail = (char *)protobuf_c_empty_string;
	}
	return true;
}

void
conn_complete_value(struct conn *c, uint64_t op_id, wire_status_t status,
		    uint64_t bytes, uint64_t value, const char *detail)
{
	if (c->dead)
		return;
	/* Nothing queued before it: straight into the ring, not built as
	 * a Completion to be copied there at the flush. */
	if ((c->ring == NULL || c->done_len > 0 ||
	     (detail != NULL && detail[0] != '\0') ||
	     !ring_complete(c, op_id, status, bytes, value)) &&
	    !conn_complete_queue(c, op_id, status, bytes, value, detail))
		return;
	if (!c->dirty) {
		c->dirty = true;
		TAILQ_INSERT_TAIL(&c->d->dirty_conns, c, dirty_link);
		if (!ring_polling(c->d))
			worker_kick(c->d);
	}
}

/* ---- input -------------------------------------------------------------- */

/* Stream offset of the first byte not yet taken as a frame. */
static uint64_t
conn_stream_at(const struct conn *c)
{
	return c->fds_in.received - frame_reader_pending(&c->in);
}

/* A client broke the framing: the error reply goes out, then the close. */
static void conn_protocol_error(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
conn_protocol_error(struct conn *c, const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	c->d->counters.protocol_errors++;
	conn_send_error(c, 0, RMA__V1__STATUS__ERR_PROTOCOL, "%s", detail);
	c->closing = true;
}

/* One recvmsg into the frame reader, the fds that came with it held for
 * their frame: the bytes read (> 0); 0 to try again (EINTR); -1 to stop
 * reading for now (nothing more, the client gone, or a framing error).
 * *avail_p: the room there was. */
static ssize_t
conn_read_once(struct conn *c, size_t *avail_p)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov;
	struct msghdr mh = {0};
	uint8_t *p;
	ssize_t n;

	if (frame_reader_space(&c->in, &p, avail_p) < 0) {
		conn_protocol_error(c,
				    "frame larger than the maximum of %u bytes",
				    c->in.max_frame);
		return -1;
	}
	iov.iov_base = p;
	iov.iov_len = *avail_p;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf.buf;
	mh.msg_controllen = sizeof(cbuf.buf);
	n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			conn_close(c, strerror(errno));
		return -1;
	}
	if (n == 0) {
		conn_close(c, "client closed the connection");
		return -1;
	}
	if (conn_fds_receive(&c->fds_in, &mh, (size_t)n) < 0 ||
	    (mh.msg_flags & MSG_CTRUNC)) {
		conn_protocol_error(c, "more file descriptors than %d at once",
				    CONN_FDS_MAX);
		return -1;
	}
	frame_reader_commit(&c->in, (size_t)n);
	return n;
}

/* Every complete frame read so far, dispatched in order while the client
 * stands; returns how many. */
static int
conn_dispatch_frames(struct conn *c)
{
	int frames = 0;

	for (;;) {
		const uint8_t *payload;
		size_t len;
		int rc;

		c->fds_in.frame_at = conn_stream_at(c);
		rc = frame_reader_next(&c->in, &payload, &len);
		if (rc == FRAME_MORE)
			break;
		if (rc < 0) {
			conn_protocol_error(
			    c, "frame larger than the maximum of %u bytes",
			    c->in.max_frame);
			break;
		}
		/* What the client put in its ring before it sent this frame
		 * runs first, as it was issued. */
		ring_drain(c);
		if (c->dead || c->closing)
			break;
		c->d->conn_hooks->dispatch(c, payload, len);
		frames++;
		if (c->dead || c->closing)
			break;
		if (conn_fds_drop_stale(&c->fds_in, conn_stream_at(c)) > 0) {
			conn_protocol_error(
			    c, "a file descriptor came with a request that "
			       "takes none (only region_register takes one)");
			break;
		}
	}
	return frames;
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
		size_t avail;
		ssize_t n = conn_read_once(c, &avail);

		if (n == 0)
			continue;
		if (n < 0)
			break;
		frames += conn_dispatch_frames(c);
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
		if (c->read_paused &&
		    now - c->paused_since > d->cfg->op_timeout)
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
	conn_fds_close_all(&c->fds_in);
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
	c->d->conn_hooks->freed(c);
	free(c);
}

/* conn_close's line for a client closed for what it did */
static struct log_limit conn_close_limit;

void
conn_close(struct conn *c, const char *why)
{
	struct daemon *d = c->d;
	struct region *r;
	size_t pos;

	if (c->dead)
		return;
	/* Closed for what it did (an error reply went, or was going, out
	 * first): said with that reply's detail, since the client may not
	 * say it anywhere; at warn once a second at most, or a client that
	 * reconnects to fail again would flood the log (then at info). */
	if (c->closing)
		log_msg(log_limit_pass(&conn_close_limit, 1.0) ? LOG_LEVEL_WARN
							       : LOG_LEVEL_INFO,
			"conn_close: client %u (pid %d, %s): %s after the "
			"error \"%s\"",
			c->id, (int)c->pid, c->name[0] ? c->name : "no hello",
			why ? why : "closed", c->error_sent);
	else
		log_info("conn_close: client %u (pid %d, %s): %s", c->id,
			 (int)c->pid, c->name[0] ? c->name : "no hello",
			 why ? why : "closed");
	c->dead = true;
	event_free(c->read_ev);
	event_free(c->write_ev);
	c->read_ev = c->write_ev = NULL;
	if (c->refused_ev != NULL) {
		event_free(c->refused_ev);
		c->refused_ev = NULL;
	}
	close(c->fd);
	c->fd = -1;
	ring_destroy(c);
	TAILQ_REMOVE(&d->conns, c, link);
	if (c->dirty) {
		TAILQ_REMOVE(&d->dirty_conns, c, dirty_link);
		c->dirty = false;
	}
	/* Regions go once their in-flight operations complete. */
	pos = 0;
	while (idmap_next(&c->regions, &pos, (void **)&r))
		region_free(r);
	if (c->uid_charged) {
		uidlimit_conn_put(&d->world->uids, c->uid);
		c->uid_charged = false;
	}
	d->conn_hooks->closed(c);
	idmap_cleanup(&c->remotes);
	conn_unref(c);
}

/* With allow lists configured, a client must be root, a listed user, or
 * in a listed group (primary or supplementary). */
static bool
conn_allowed(struct daemon *d, int fd, const struct ucred *cred)
{
	const struct config *cfg = d->cfg;
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

/* One more connection of c's user, or c refused at its first request
 * (as allow_users refuses: the client hears why). A refused one is not
 * counted: it ends at its first request. */
static void
conn_charge_uid(struct daemon *d, struct conn *c)
{
	struct uidlimit_entry held;
	enum uidlimit_over over;

	if (c->refused)
		return;
	over = uidlimit_conn_get(&d->world->uids, c->uid,
				 d->cfg->max_clients_per_uid, &held);
	if (over == UIDLIMIT_OK) {
		c->uid_charged = true;
		return;
	}
	c->over_uid_limit = true;
	d->counters.clients_refused_uid++;
	log_warn("conn_create: client %u pid %d: uid %u already holds %u "
		 "connections (max_clients_per_uid %u)%s",
		 c->id, (int)c->pid, (unsigned)c->uid, held.conns,
		 d->cfg->max_clients_per_uid,
		 over == UIDLIMIT_NO_MEMORY ? ", or out of memory" : "");
}

static void
conn_on_refused_silent(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)fd;
	(void)what;
	conn_close(c, "refused, and no request within connect_timeout");
}

/* A refused client hears why at its first request; one that never
 * sends any would keep its fd here for good, and over
 * max_clients_per_uid that is the very exhaustion the limit is for. */
static void
conn_refused_deadline(struct daemon *d, struct conn *c)
{
	struct timeval tv = worker_timeval(d->cfg->connect_timeout);

	if (!c->refused && !c->over_uid_limit)
		return;
	c->refused_ev = evtimer_new(d->base, conn_on_refused_silent, c);
	if (c->refused_ev == NULL) {
		log_warn("conn_refused_deadline: client %u: out of memory, "
			 "closed",
			 c->id);
		conn_close(c, "out of memory");
		return;
	}
	evtimer_add(c->refused_ev, &tv);
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
		c->refused =
		    d->cfg->n_allow_uids > 0 || d->cfg->n_allow_gids > 0;
	}
	frame_reader_init(&c->in, d->cfg->max_frame);
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
	conn_charge_uid(d, c);
	TAILQ_INSERT_TAIL(&d->conns, c, link);
	event_add(c->read_ev, NULL);
	d->counters.clients_accepted++;
	log_debug("conn_create: client %u pid %d uid %u", c->id, (int)c->pid,
		  (unsigned)c->uid);
	conn_refused_deadline(d, c);
}

/* For snapshot.c, with the world stopped. */
void
conn_info_fill(const struct conn *c, struct client_info *ci)
{
	ci->id = c->id;
	ci->pid = c->pid;
	ci->uid = c->uid;
	ci->gid = c->gid;
	snprintf(ci->name, sizeof(ci->name), "%s", c->name);
	ci->regions = (uint32_t)c->regions.count;
	ci->region_bytes = c->region_bytes;
	ci->in_flight = c->in_flight;
	ci->ops = c->ops;
	ci->worker = c->d->index;
	ci->ring = c->ring != NULL;
}
