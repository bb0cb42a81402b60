/* SPDX-License-Identifier: BSD-2-Clause */
/* A hostile peer: a program on libucp that talks to a real rmad's listener
 * the way a broken or malicious daemon could, one attack class per run,
 * bounded in count and time. It speaks the wire format of daemon/am.h
 * (protocol 2, unkeyed handshake) and never waits for the daemon to
 * behave: every wait has a deadline. Exit 0 when the attack was sent
 * (whatever the daemon did with it), 2 on bad usage, 1 when it could not
 * even reach the daemon. One summary line goes to stdout.
 *
 * The classes are those of issue 10: high-ids, rndv, resolve-flood,
 * get-flood, batch-amp, silent-conns, spoof (requests and answers before
 * and after a hello; each malformed hello on its own connection, which
 * must not be served), walkaround, and epochs
 * (a put over a connection its origin has replaced); retire (a put over
 * a connection of another lane that its origin's retire mark closed);
 * and of issue 23:
 * reflect (no cluster key, a listener of our own: the daemon dials us,
 * and we hand its own handshake back to it). */
#include <errno.h>
#include <getopt.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "am.h"
#include "descriptor.h"
#include "monotime.h"
#include "walkaround.h"

#define HOSTILE_IDS 64 /* handlers we register: every id rmad may send */
#define HOSTILE_BIG (2 * 1024 * 1024)
#define HOSTILE_INFLIGHT_MAX 200000 /* our own requests, to bound us */

struct hostile;

/* One registered handler: which id it is, for the counts. */
struct hostile_id {
	struct hostile *h;
	unsigned id;
};

struct hostile_ep {
	ucp_ep_h ep;
	bool failed;
	ucs_status_t why;
};

struct hostile {
	ucp_context_h ctx;
	ucp_worker_h worker;
	struct sockaddr_storage sa;
	socklen_t sa_len;
	const char *attack;
	double seconds;
	long count;
	long pid;
	long progress_every;
	uint64_t length;
	bool after_hello_only;
	struct descriptor desc;
	bool have_desc;
	struct hostile_id ids[HOSTILE_IDS];

	uint64_t token;
	uint64_t epoch;
	unsigned long sent, send_errors, completed, inflight, inflight_max;
	unsigned long received[HOSTILE_IDS];
	unsigned long received_bytes;
	/* the last HELLO_REPLY and RESOLVE_REPLY */
	bool hello_answered;
	int32_t hello_status;
	uint32_t hello_flags;
	uint64_t hello_token;
	int32_t put_ack_status;
	uint64_t put_ack_token;
	bool put_acked;
	bool resolve_answered;
	int32_t resolve_status;
	uint64_t resolve_length;
	/* reflect: our listener, the endpoint the daemon dialed, and the
	 * last handshake message of each id, as it came */
	struct sockaddr_storage listen_sa, relay_sa;
	socklen_t listen_sa_len, relay_sa_len;
	bool have_listen, have_relay;
	ucp_listener_h listener;
	struct hostile_ep dialed;
	bool dialed_up;
	struct hostile_capture {
		unsigned long n;
		size_t length;
		uint8_t data[256];
	} capture[AM_HELLO_DONE + 1];
	char notes[512];
};

/* Read-only payloads: every send points into these, so nothing is freed
 * while UCX still holds a request. */
static uint8_t hostile_pattern[HOSTILE_BIG];

static void hostile_note(struct hostile *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
hostile_note(struct hostile *h, const char *fmt, ...)
{
	size_t at = strlen(h->notes);
	va_list ap;

	if (at + 2 >= sizeof(h->notes))
		return;
	if (at > 0)
		h->notes[at++] = ';', h->notes[at] = '\0';
	va_start(ap, fmt);
	vsnprintf(h->notes + at, sizeof(h->notes) - at, fmt, ap);
	va_end(ap);
}

static ucs_status_t
hostile_on_am(void *arg, const void *header, size_t header_length, void *data,
	      size_t length, const ucp_am_recv_param_t *param)
{
	struct hostile_id *hid = arg;
	struct hostile *h = hid->h;

	h->received[hid->id]++;
	h->received_bytes += length;
	if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
		return UCS_OK; /* UCX sends the ATS: we never take it */
	if (hid->id <= AM_HELLO_DONE && length <= sizeof(h->capture[0].data)) {
		struct hostile_capture *c = &h->capture[hid->id];
		memcpy(c->data, data, length);
		c->length = length;
		c->n++;
	}
	if (hid->id == AM_HELLO_REPLY &&
	    length >= 2 * sizeof(uint32_t) + sizeof(uint64_t)) {
		struct am_hello_reply r;
		memset(&r, 0, sizeof(r));
		memcpy(&r, data, length < sizeof(r) ? length : sizeof(r));
		if (r.magic == AM_MAGIC) {
			h->hello_answered = true;
			h->hello_status = r.status;
			h->hello_token = r.token;
			/* flags only exist in the protocol 2 reply */
			h->hello_flags = length >= sizeof(r) ? r.flags : 0;
		}
	} else if (hid->id == AM_PUT_ACK &&
		   header_length == sizeof(struct am_rma_answer)) {
		struct am_rma_answer a;
		memcpy(&a, header, sizeof(a));
		h->put_ack_status = a.status;
		h->put_ack_token = a.token;
		h->put_acked = true;
	} else if (hid->id == AM_RESOLVE_REPLY &&
		   length >= sizeof(struct am_resolve_reply)) {
		struct am_resolve_reply r;
		memcpy(&r, data, sizeof(r));
		if (r.magic == AM_MAGIC) {
			h->resolve_answered = true;
			h->resolve_status = r.status;
			h->resolve_length = r.length;
		}
	}
	return UCS_OK;
}

static void
hostile_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct hostile_ep *e = arg;

	e->failed = true;
	e->why = status;
}

static void
hostile_sent(void *request, ucs_status_t status, void *user_data)
{
	struct hostile *h = user_data;

	h->inflight--;
	h->completed++;
	if (status != UCS_OK)
		h->send_errors++;
	ucp_request_free(request);
}

/* Sends one AM; the header is copied into our pattern area's twin so the
 * caller's stack can go. Returns false when UCX refused it at once. */
static bool
hostile_send(struct hostile *h, struct hostile_ep *e, unsigned id,
	     const void *header, size_t header_length, const void *data,
	     size_t length, uint32_t flags)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_USER_DATA |
			    UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = flags,
	    .cb.send = hostile_sent,
	    .user_data = h,
	};
	ucs_status_ptr_t sp;
	void *hcopy = NULL;

	if (e->failed)
		return false;
	if (header_length > 0) {
		/* UCX may keep the header until completion: leak it rather
		 * than track it (bounded by --count). */
		hcopy = malloc(header_length);
		if (hcopy == NULL)
			return false;
		memcpy(hcopy, header, header_length);
	}
	sp = ucp_am_send_nbx(e->ep, id, hcopy, header_length, data, length,
			     &param);
	h->sent++;
	if (UCS_PTR_IS_ERR(sp)) {
		h->send_errors++;
		return false;
	}
	if (sp != NULL) {
		h->inflight++;
		if (h->inflight > h->inflight_max)
			h->inflight_max = h->inflight;
	} else {
		h->completed++;
	}
	return true;
}

/* Progresses until our sends are gone, the endpoint failed, or the
 * deadline passed. */
static void
hostile_flush(struct hostile *h, struct hostile_ep *e, double seconds)
{
	double deadline = monotime_s() + seconds;

	while (h->inflight > 0 && !e->failed && monotime_s() < deadline)
		ucp_worker_progress(h->worker);
}

/* Keeps our endpoints open without progressing (nothing is read, so what
 * the daemon answers stays with it) until standard input is readable or
 * closed: whoever runs us says when the daemon has done what we asked
 * (tests/hostile.sh watches its counters). At most seconds. */
static void
hostile_hold(double seconds)
{
	struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
	double deadline = monotime_s() + seconds;
	double left;

	while ((left = deadline - monotime_s()) > 0 &&
	       poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno == EINTR)
		;
}

/* Progresses for a while, reading whatever comes. */
static void
hostile_progress_for(struct hostile *h, double seconds)
{
	double deadline = monotime_s() + seconds;

	while (monotime_s() < deadline)
		ucp_worker_progress(h->worker);
}

static int
hostile_connect_to(struct hostile *h, struct hostile_ep *e,
		   const struct sockaddr_storage *sa, socklen_t sa_len)
{
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			  UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = hostile_on_ep_error,
	    .err_handler.arg = e,
	};
	ucs_status_t st;

	memset(e, 0, sizeof(*e));
	params.err_handler.arg = e;
	params.sockaddr.addr = (const struct sockaddr *)sa;
	params.sockaddr.addrlen = sa_len;
	st = ucp_ep_create(h->worker, &params, &e->ep);
	if (st != UCS_OK) {
		e->ep = NULL;
		e->failed = true;
		e->why = st;
		return -1;
	}
	return 0;
}

static int
hostile_connect(struct hostile *h, struct hostile_ep *e)
{
	return hostile_connect_to(h, e, &h->sa, h->sa_len);
}

static void
hostile_close(struct hostile *h, struct hostile_ep *e)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_EP_CLOSE_FLAG_FORCE,
	};
	double deadline = monotime_s() + 2.0;
	ucs_status_ptr_t sp;

	if (e->ep == NULL)
		return;
	sp = ucp_ep_close_nbx(e->ep, &param);
	if (UCS_PTR_IS_PTR(sp)) {
		while (ucp_request_check_status(sp) == UCS_INPROGRESS &&
		       monotime_s() < deadline)
			ucp_worker_progress(h->worker);
		if (ucp_request_check_status(sp) != UCS_INPROGRESS)
			ucp_request_free(sp);
	}
	e->ep = NULL;
}

static void
hostile_hello_fill(struct hostile *h, struct am_hello *m)
{
	memset(m, 0, sizeof(*m));
	m->magic = AM_MAGIC;
	m->version = AM_VERSION;
	m->token = ++h->token;
	for (size_t i = 0; i < DAEMON_ID_SIZE; i++)
		m->daemon_id[i] = (uint8_t)(0xa0 + i);
	m->epoch = ++h->epoch;
	m->lane = 0;
	m->listen_port = 9; /* discard: nobody listens for us */
	m->flags = 0;
}

/* The reply says it read an optional field of the hello (flag) exactly
 * when the hello carried it. */
static bool
hostile_reply_reads(struct hostile *h, const struct am_hello *m, uint32_t flag,
		    const char *what)
{
	if ((h->hello_flags & flag) == (m->flags & flag))
		return true;
	hostile_note(h, "HELLO_REPLY %s %s, our hello %s",
		     h->hello_flags & flag ? "read" : "did not read", what,
		     m->flags & flag ? "carried one" : "carried none");
	return false;
}

/* The unkeyed handshake of m (len bytes of it); true once the daemon
 * accepted it. */
static bool
hostile_hello_send(struct hostile *h, struct hostile_ep *e,
		   const struct am_hello *hello, size_t len)
{
	struct am_hello m = *hello;
	double deadline = monotime_s() + 5.0;

	h->hello_answered = false;
	hostile_send(h, e, AM_HELLO, NULL, 0, &m, len, UCP_AM_SEND_FLAG_REPLY);
	/* The payload lives on our stack: wait for it to leave. */
	hostile_flush(h, e, 5.0);
	while (!(h->hello_answered && h->hello_token == m.token) &&
	       !e->failed && monotime_s() < deadline)
		ucp_worker_progress(h->worker);
	if (!h->hello_answered) {
		hostile_note(h, "no HELLO_REPLY");
		return false;
	}
	if (h->hello_flags & AM_HELLO_KEYED) {
		hostile_note(h, "daemon wants a keyed handshake");
		return false;
	}
	if (!hostile_reply_reads(h, &m, AM_HELLO_RETIRE, "a retire mark") ||
	    !hostile_reply_reads(h, &m, AM_HELLO_FLOOR, "a floor"))
		return false;
	/* protocol 1 daemons echo an am_hello: its version sits here */
	if (h->hello_status != 0 && h->hello_status != AM_VERSION) {
		hostile_note(h, "HELLO refused (%d)", h->hello_status);
		return false;
	}
	return true;
}

/* The hello of an rmad from before the retire mark: the daemons of a
 * cluster speak to each other across that change, so every class also
 * checks that a hello of AM_HELLO_SIZE_V3 bytes is taken. */
static bool
hostile_hello(struct hostile *h, struct hostile_ep *e)
{
	struct am_hello m;

	hostile_hello_fill(h, &m);
	return hostile_hello_send(h, e, &m, AM_HELLO_SIZE_V3);
}

static struct am_rma
hostile_rma(struct hostile *h, uint32_t kind, uint64_t offset, uint64_t length)
{
	struct am_rma r = {
	    .magic = AM_MAGIC,
	    .kind = kind,
	    .token = ++h->token,
	    .region_id = h->have_desc ? h->desc.region_id : 1,
	    .generation = h->have_desc ? h->desc.generation : 1,
	    .offset = offset,
	    .length = length,
	};
	return r;
}

/* RESOLVE of our descriptor's region; true with its length known. */
static bool
hostile_resolve(struct hostile *h, struct hostile_ep *e)
{
	static struct am_resolve m;
	double deadline = monotime_s() + 5.0;

	memset(&m, 0, sizeof(m));
	m.magic = AM_MAGIC;
	m.token = ++h->token;
	memcpy(m.daemon_id, h->desc.daemon_id, DAEMON_ID_SIZE);
	m.region_id = h->desc.region_id;
	m.generation = h->desc.generation;
	h->resolve_answered = false;
	hostile_send(h, e, AM_RESOLVE, NULL, 0, &m, sizeof(m),
		     UCP_AM_SEND_FLAG_REPLY);
	while (!h->resolve_answered && !e->failed && monotime_s() < deadline)
		ucp_worker_progress(h->worker);
	if (!h->resolve_answered) {
		hostile_note(h, "no RESOLVE_REPLY");
		return false;
	}
	if (h->resolve_status != 0) {
		hostile_note(h, "RESOLVE refused (%d)", h->resolve_status);
		return false;
	}
	return true;
}

/* ---- high-ids ------------------------------------------------------ */

static void
hostile_high_ids_burst(struct hostile *h, struct hostile_ep *e)
{
	static const unsigned fixed[] = {64,	65,    100,  255,  256,
					 1000,	3000,  8191, 8192, 16384,
					 32768, 65534, 65535};
	unsigned ids[sizeof(fixed) / sizeof(fixed[0]) + 105];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		ids[n++] = fixed[i];
	for (unsigned id = 4096; id <= 4200; id++)
		ids[n++] = id;
	for (size_t i = 0; i < n && !e->failed; i++) {
		for (int v = 0; v < 4; v++) {
			uint32_t flags = v & 1 ? UCP_AM_SEND_FLAG_REPLY : 0;
			size_t len = v & 2 ? 64 : 0;
			hostile_send(h, e, ids[i], NULL, 0, hostile_pattern,
				     len, flags | UCP_AM_SEND_FLAG_EAGER);
		}
		hostile_flush(h, e, 2.0);
	}
	/* A few in rendezvous too: the RTS path reads the handler table
	 * with the id before it checks it. */
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		hostile_send(h, e, fixed[i], NULL, 0, hostile_pattern, 65536,
			     UCP_AM_SEND_FLAG_RNDV | UCP_AM_SEND_FLAG_REPLY);
	hostile_flush(h, e, 3.0);
}

static int
hostile_attack_high_ids(struct hostile *h)
{
	struct hostile_ep e;

	if (!h->after_hello_only) {
		hostile_connect(h, &e);
		hostile_high_ids_burst(h, &e);
		hostile_note(h, "before hello: ep %s",
			     e.failed ? ucs_status_string(e.why) : "up");
		hostile_close(h, &e);
	}
	hostile_connect(h, &e);
	if (hostile_hello(h, &e))
		hostile_note(h, "hello ok");
	hostile_high_ids_burst(h, &e);
	hostile_note(h, "after hello: ep %s",
		     e.failed ? ucs_status_string(e.why) : "up");
	hostile_close(h, &e);
	return 0;
}

/* ---- rndv ---------------------------------------------------------- */

static void
hostile_rndv_burst(struct hostile *h, struct hostile_ep *e)
{
	long n = h->count > 0 ? h->count : 300;

	for (long i = 0; i < n && !e->failed; i++) {
		unsigned id = (unsigned)(i % AM_ID_LIMIT);
		struct am_rma r =
		    hostile_rma(h, id == AM_GET ? AM_GET : AM_PUT, 0, 65536);
		bool rma = id == AM_PUT || id == AM_GET;

		/* puts and gets get a well-formed header to the victim, so
		 * only the protocol choice is wrong */
		hostile_send(h, e, id, rma ? &r : NULL, rma ? sizeof(r) : 0,
			     hostile_pattern, 65536,
			     UCP_AM_SEND_FLAG_RNDV | UCP_AM_SEND_FLAG_REPLY);
		if (i % 16 == 15)
			hostile_flush(h, e, 2.0);
	}
	hostile_flush(h, e, 3.0);
}

static int
hostile_attack_rndv(struct hostile *h)
{
	struct hostile_ep e;

	if (!h->after_hello_only) {
		hostile_connect(h, &e);
		hostile_rndv_burst(h, &e);
		hostile_note(h, "before hello: ep %s",
			     e.failed ? ucs_status_string(e.why) : "up");
		hostile_close(h, &e);
	}
	hostile_connect(h, &e);
	if (hostile_hello(h, &e))
		hostile_note(h, "hello ok");
	hostile_rndv_burst(h, &e);
	hostile_note(h, "after hello: ep %s",
		     e.failed ? ucs_status_string(e.why) : "up");
	hostile_close(h, &e);
	return 0;
}

/* ---- resolve-flood, get-flood ------------------------------------- */

/* Sends for --seconds without reading: our worker is progressed only
 * every --progress-every sends (never by default), so the daemon's answers
 * fill our socket and then pile up on its side. An eager send over tcp
 * goes straight to the socket from ucp_am_send_nbx while it has room. */
static void
hostile_flood(struct hostile *h, struct hostile_ep *e, bool get)
{
	static struct am_resolve m;
	double deadline = monotime_s() + h->seconds;
	uint64_t length = h->length;
	unsigned long n = 0;

	if (get && (length == 0 || length > h->resolve_length))
		length = h->resolve_length < 65536 ? h->resolve_length : 65536;
	memset(&m, 0, sizeof(m));
	m.magic = AM_MAGIC;
	if (h->have_desc)
		memcpy(m.daemon_id, h->desc.daemon_id, DAEMON_ID_SIZE);
	while (!e->failed && monotime_s() < deadline &&
	       (h->count <= 0 || n < (unsigned long)h->count)) {
		if (h->inflight >= HOSTILE_INFLIGHT_MAX)
			continue; /* bounded: just hold, still not reading */
		if (get) {
			struct am_rma r = hostile_rma(h, AM_GET, 0, length);
			hostile_send(h, e, AM_GET, &r, sizeof(r), NULL, 0,
				     UCP_AM_SEND_FLAG_REPLY |
					 UCP_AM_SEND_FLAG_EAGER);
		} else {
			/* the payload is read at send time when it goes out
			 * at once, later otherwise: keep it static and only
			 * vary what does not matter for the pile */
			m.token = ++h->token;
			m.region_id = (uint64_t)random() << 32 | random();
			hostile_send(h, e, AM_RESOLVE, NULL, 0, &m, sizeof(m),
				     UCP_AM_SEND_FLAG_REPLY |
					 UCP_AM_SEND_FLAG_EAGER);
		}
		n++;
		if (h->progress_every > 0 && n % h->progress_every == 0)
			ucp_worker_progress(h->worker);
	}
	hostile_note(h, "flood: %lu requests, %lu still queued at us", n,
		     h->inflight);
}

static int
hostile_attack_flood(struct hostile *h, bool get)
{
	struct hostile_ep e;

	if (get && !h->have_desc) {
		fprintf(stderr, "hostile_peer: get-flood needs --descriptor\n");
		return 2;
	}
	hostile_connect(h, &e);
	if (hostile_hello(h, &e))
		hostile_note(h, "hello ok");
	if (get && !hostile_resolve(h, &e))
		h->resolve_length = h->desc.length;
	hostile_flood(h, &e, get);
	hostile_close(h, &e);
	return 0;
}

/* ---- batch-amp ----------------------------------------------------- */

/* Batches as big as the daemon takes (AM_BATCH_BYTES), each of gets of
 * AM_BATCH_SMALL bytes: 200 times what we send asked back, of which the
 * daemon answers AM_BATCH_REPLY_BYTES a batch. Then one batch over the
 * size, which costs us the endpoint. */
static int
hostile_attack_batch_amp(struct hostile *h)
{
	static uint8_t batch[AM_BATCH_BYTES];
	static uint8_t oversize[2 * AM_BATCH_BYTES];
	long n = h->count > 0 ? h->count : 400;
	uint64_t span = h->have_desc ? h->desc.length : 8192;
	size_t records = sizeof(batch) / sizeof(struct am_rma);
	struct hostile_ep e;

	if (span < AM_BATCH_SMALL)
		span = AM_BATCH_SMALL;
	for (size_t i = 0; i < records; i++) {
		uint64_t off =
		    (i * AM_BATCH_SMALL) % (span - AM_BATCH_SMALL + 1);
		struct am_rma r = hostile_rma(h, AM_GET, off, AM_BATCH_SMALL);
		memcpy(batch + i * sizeof(r), &r, sizeof(r));
	}
	hostile_connect(h, &e);
	if (hostile_hello(h, &e))
		hostile_note(h, "hello ok");
	for (long i = 0; i < n && !e.failed; i++)
		hostile_send(h, &e, AM_BATCH, NULL, 0, batch,
			     records * sizeof(struct am_rma),
			     UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
	hostile_flush(h, &e, h->seconds);
	/* The answers are the attack: left unread until the daemon has
	 * taken every get (hostile.sh waits for this line, then for its
	 * counters). */
	printf("batch-amp: holding, %ld gets sent\n", n * (long)records);
	fflush(stdout);
	hostile_hold(h->seconds);
	memcpy(oversize, batch, sizeof(batch));
	memcpy(oversize + sizeof(batch), batch, sizeof(batch));
	if (!e.failed)
		hostile_send(h, &e, AM_BATCH, NULL, 0, oversize,
			     sizeof(oversize),
			     UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
	hostile_flush(h, &e, h->seconds);
	hostile_note(h, "%ld batches of %zu gets of %d bytes (%.0f MiB asked)",
		     n, records, AM_BATCH_SMALL,
		     (double)n * (double)records * AM_BATCH_SMALL / 1048576.0);
	hostile_close(h, &e);
	return 0;
}

/* ---- silent-conns -------------------------------------------------- */

static int
hostile_attack_silent_conns(struct hostile *h)
{
	long n = h->count > 0 ? h->count : 800;
	struct hostile_ep *eps = calloc((size_t)n, sizeof(*eps));
	struct rlimit rl;
	long made = 0, failed = 0;

	if (eps == NULL)
		return 1;
	/* Each endpoint costs us two sockets (the connection manager's and
	 * the transport's). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (long i = 0; i < n; i++) {
		if (hostile_connect(h, &eps[i]) == 0)
			made++;
		if (i % 32 == 31)
			ucp_worker_progress(h->worker);
	}
	/* Hold them, progressing so the connections really establish. */
	hostile_progress_for(h, h->seconds);
	for (long i = 0; i < n; i++) {
		if (eps[i].failed)
			failed++;
	}
	hostile_note(h, "%ld endpoints created, %ld failed while held", made,
		     failed);
	for (long i = 0; i < n; i++)
		hostile_close(h, &eps[i]);
	free(eps);
	return 0;
}

/* ---- spoof --------------------------------------------------------- */

/* Where the true hello's put of the spoof class goes: past the first
 * 64 KiB of the victim, which hostile.sh checks unchanged. */
#define HOSTILE_SPOOF_TRUE_AT (896u * 1024)

/* Answers nobody asked for, and requests that are wrong in one way each.
 * None may change a byte of the victim region. */
static void
hostile_spoof_answers(struct hostile *h, struct hostile_ep *e)
{
	static uint8_t buf[8192];
	struct am_hello_reply hr;
	struct am_resolve_reply *rr = (struct am_resolve_reply *)buf;
	struct am_freed fr;
	struct am_rma_answer ra;
	uint32_t f = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;

	memset(&hr, 0, sizeof(hr));
	hr.magic = AM_MAGIC;
	for (uint64_t t = 0; t < 64; t++) {
		hr.token = t;
		hostile_send(h, e, AM_HELLO_REPLY, NULL, 0, &hr, sizeof(hr), f);
		hostile_flush(h, e, 1.0);
	}
	memset(buf, 0, sizeof(buf));
	rr->magic = AM_MAGIC;
	rr->length = UINT64_MAX;
	rr->addr = 0x1000;
	for (uint64_t t = 0; t < 64; t++) {
		rr->token = t;
		rr->rkey_len = t % 2 ? AM_RKEY_MAX : 0xffffffffu;
		hostile_send(h, e, AM_RESOLVE_REPLY, NULL, 0, buf,
			     t % 2 ? sizeof(buf) : sizeof(*rr), f);
		hostile_flush(h, e, 1.0);
	}
	memset(&fr, 0, sizeof(fr));
	fr.magic = AM_MAGIC;
	if (h->have_desc) {
		memcpy(fr.daemon_id, h->desc.daemon_id, DAEMON_ID_SIZE);
		fr.region_id = h->desc.region_id;
		fr.generation = h->desc.generation;
	}
	hostile_send(h, e, AM_FREED, NULL, 0, &fr, sizeof(fr), f);
	hostile_flush(h, e, 1.0);
	memset(&ra, 0, sizeof(ra));
	ra.magic = AM_MAGIC;
	for (uint64_t t = 0; t < 64; t++) {
		ra.token = t;
		hostile_send(h, e, AM_PUT_ACK, &ra, sizeof(ra), NULL, 0, f);
		hostile_send(h, e, AM_GET_REPLY, &ra, sizeof(ra),
			     hostile_pattern, 4096, f);
		hostile_send(h, e, AM_GET_REPLY, &ra, sizeof(ra) - 1,
			     hostile_pattern, 100, f);
		hostile_flush(h, e, 1.0);
	}
	/* one answer for several put pieces: tokens nobody sent, counts
	 * of none and of more than any range, a count past the last token,
	 * and refusals (never ranged) */
	for (uint64_t t = 0; t < 64; t++) {
		struct am_rma_answer_range rg = {
		    .magic = AM_MAGIC,
		    .status = t % 5 == 0 ? -1 : 0,
		    .token = t == 63 ? UINT64_MAX - 1 : t,
		    .count = t % 3 == 0 ? 0xffffffffu : (uint32_t)(t % 9),
		};
		hostile_send(h, e, AM_PUT_ACK, &rg, sizeof(rg), NULL, 0, f);
		hostile_flush(h, e, 1.0);
	}
	/* a batch reply whose length field runs past the message */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &ra, sizeof(ra));
	memset(buf + sizeof(ra), 0xff, sizeof(uint64_t));
	hostile_send(h, e, AM_BATCH_REPLY, NULL, 0, buf, 64, f);
	hostile_send(h, e, AM_BATCH_REPLY, NULL, 0, buf, 3, f);
	hostile_flush(h, e, 1.0);
}

/* Requests that must be refused: each would write the pattern into the
 * victim, or read outside it, if it were served. */
static void
hostile_spoof_requests(struct hostile *h, struct hostile_ep *e, bool valid)
{
	static uint8_t batch[4096];
	uint32_t f = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
	uint64_t len = h->have_desc ? h->desc.length : 4096;
	struct am_rma r;
	size_t at = 0;

	if (valid) {
		/* well-formed, but before any handshake */
		r = hostile_rma(h, AM_PUT, 0, 64);
		hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64,
			     f);
		r = hostile_rma(h, AM_GET, 0, 64);
		hostile_send(h, e, AM_GET, &r, sizeof(r), NULL, 0, f);
		r = hostile_rma(h, AM_PUT, 64, 64);
		memcpy(batch, &r, sizeof(r));
		memcpy(batch + sizeof(r), hostile_pattern, 64);
		hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) + 64, f);
		hostile_flush(h, e, 2.0);
		return;
	}
	/* Each kind of put aims at its own 64-byte block of the victim, so a
	 * changed block names the request that got through: 0 and 64 before
	 * the handshake, then 128 + 64 * n. */
	/* header one byte short, one byte long */
	r = hostile_rma(h, AM_PUT, 128, 64);
	hostile_send(h, e, AM_PUT, &r, sizeof(r) - 1, hostile_pattern, 64, f);
	{
		uint8_t longer[sizeof(r) + 1] = {0};
		r = hostile_rma(h, AM_PUT, 192, 64);
		memcpy(longer, &r, sizeof(r));
		hostile_send(h, e, AM_PUT, longer, sizeof(longer),
			     hostile_pattern, 64, f);
		hostile_send(h, e, AM_GET, longer, sizeof(longer), NULL, 0, f);
	}
	/* wrong magic */
	r = hostile_rma(h, AM_PUT, 256, 64);
	r.magic ^= 1;
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	/* past the end, by one byte and by far */
	r = hostile_rma(h, AM_PUT, len - 63, 64);
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	r = hostile_rma(h, AM_GET, len - 63, 64);
	hostile_send(h, e, AM_GET, &r, sizeof(r), NULL, 0, f);
	r = hostile_rma(h, AM_GET, 0, len + 1);
	hostile_send(h, e, AM_GET, &r, sizeof(r), NULL, 0, f);
	/* offset + length wraps to a small number */
	r = hostile_rma(h, AM_PUT, UINT64_MAX - 31, 64);
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	r = hostile_rma(h, AM_GET, UINT64_MAX - 31, 64);
	hostile_send(h, e, AM_GET, &r, sizeof(r), NULL, 0, f);
	r = hostile_rma(h, AM_GET, 16, UINT64_MAX - 8);
	hostile_send(h, e, AM_GET, &r, sizeof(r), NULL, 0, f);
	/* the header's length is not the data's */
	r = hostile_rma(h, AM_PUT, 320, 8);
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	r = hostile_rma(h, AM_PUT, 384, 64);
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 8, f);
	/* a stale generation */
	r = hostile_rma(h, AM_PUT, 448, 64);
	r.generation++;
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	hostile_flush(h, e, 2.0);
	/* batches: a put record whose bytes are missing, one whose length
	 * wraps, one past the end, a truncated record, an unknown kind */
	r = hostile_rma(h, AM_PUT, 512, 4000);
	memcpy(batch, &r, sizeof(r));
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) + 16, f);
	r = hostile_rma(h, AM_PUT, 8192, UINT64_MAX);
	memcpy(batch, &r, sizeof(r));
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) + 64, f);
	r = hostile_rma(h, AM_PUT, len - 8, 64);
	memcpy(batch, &r, sizeof(r));
	memcpy(batch + sizeof(r), hostile_pattern, 64);
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) + 64, f);
	r = hostile_rma(h, AM_PUT, UINT64_MAX - 31, 64);
	memcpy(batch, &r, sizeof(r));
	memcpy(batch + sizeof(r), hostile_pattern, 64);
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) + 64, f);
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) - 1, f);
	r = hostile_rma(h, 77, 8256, 64);
	memcpy(batch, &r, sizeof(r));
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, sizeof(r) + 64, f);
	for (size_t i = 0; i + sizeof(r) <= sizeof(batch); i += sizeof(r)) {
		/* many gets, each past the end */
		r = hostile_rma(h, AM_GET, len, 1);
		memcpy(batch + i, &r, sizeof(r));
		at = i + sizeof(r);
	}
	hostile_send(h, e, AM_BATCH, NULL, 0, batch, at, f);
	hostile_flush(h, e, 2.0);
}

/* The spoofed hellos, each as sent: a hello that must be refused, or, on
 * a connection already served, ignored. */
struct hostile_spoof {
	const char *name;
	struct am_hello m;
	size_t len;
	uint32_t flags;
};

enum { HOSTILE_N_SPOOFS = 9 };

/* Static: UCX may read a hello until its send completes. */
static const struct hostile_spoof *
hostile_spoofs(struct hostile *h)
{
	static struct hostile_spoof s[HOSTILE_N_SPOOFS];
	const uint32_t f = UCP_AM_SEND_FLAG_REPLY;

	for (size_t i = 0; i < HOSTILE_N_SPOOFS; i++) {
		hostile_hello_fill(h, &s[i].m);
		s[i].len = sizeof(s[i].m);
		s[i].flags = f;
	}
	s[0].name = "bad-magic";
	s[0].m.magic ^= 0x01010101;
	s[1].name = "version-1";
	s[1].m.version = 1;
	s[2].name = "version-max";
	s[2].m.version = 0xffffffffu;
	s[3].name = "8-bytes";
	s[3].len = 8;
	s[4].name = "short-v3";
	s[4].len = AM_HELLO_SIZE_V3 - 1;
	/* says it carries a retire mark, and ends before it */
	s[5].name = "short-retire";
	s[5].m.flags = AM_HELLO_RETIRE;
	s[5].len = AM_HELLO_SIZE_V4 - 1;
	s[6].name = "empty";
	s[6].len = 0;
	s[7].name = "no-reply-endpoint";
	s[7].flags = 0;
	/* says it carries a floor, and ends before it */
	s[8].name = "short-floor";
	s[8].m.flags = AM_HELLO_RETIRE | AM_HELLO_FLOOR;
	s[8].len = sizeof(s[8].m) - 1;
	return s;
}

static void
hostile_spoof_send(struct hostile *h, struct hostile_ep *e,
		   const struct hostile_spoof *s)
{
	hostile_send(h, e, AM_HELLO, NULL, 0, s->len ? &s->m : NULL, s->len,
		     s->flags);
}

/* Over a connection already served: every spoofed hello, a hello that
 * says it is keyed without any key, and proofs nobody asked for. */
static void
hostile_spoof_hellos(struct hostile *h, struct hostile_ep *e)
{
	static struct am_hello keyed;
	static const struct am_hello_proof p = {.magic = AM_MAGIC, .token = 1};
	const struct hostile_spoof *s = hostile_spoofs(h);

	for (size_t i = 0; i < HOSTILE_N_SPOOFS; i++)
		hostile_spoof_send(h, e, &s[i]);
	hostile_hello_fill(h, &keyed);
	keyed.flags = AM_HELLO_KEYED;
	hostile_send(h, e, AM_HELLO, NULL, 0, &keyed, sizeof(keyed),
		     UCP_AM_SEND_FLAG_REPLY);
	hostile_flush(h, e, 2.0);
	hostile_send(h, e, AM_HELLO_PROOF, NULL, 0, &p, sizeof(p),
		     UCP_AM_SEND_FLAG_REPLY);
	hostile_send(h, e, AM_HELLO_DONE, NULL, 0, &p, sizeof(p),
		     UCP_AM_SEND_FLAG_REPLY);
	hostile_flush(h, e, 2.0);
}

/* What became of a put over a connection. */
enum hostile_put_fate {
	HOSTILE_PUT_APPLIED,   /* acknowledged OK */
	HOSTILE_PUT_REFUSED,   /* acknowledged with an error */
	HOSTILE_PUT_CLOSED,    /* the daemon closed the connection */
	HOSTILE_PUT_NO_ANSWER, /* neither, in ample time */
};

/* A put at offset over e, sent at once, and what became of it: the
 * daemon answers it or closes the connection, at once when it works. */
static enum hostile_put_fate
hostile_put_fate(struct hostile *h, struct hostile_ep *e, uint64_t offset)
{
	uint32_t f = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
	struct am_rma r = hostile_rma(h, AM_PUT, offset, 64);
	double deadline = monotime_s() + 10.0;

	h->put_acked = false;
	hostile_send(h, e, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	while (!(h->put_acked && h->put_ack_token == r.token) && !e->failed &&
	       monotime_s() < deadline)
		ucp_worker_progress(h->worker);
	if (h->put_acked && h->put_ack_token == r.token)
		return h->put_ack_status == 0 ? HOSTILE_PUT_APPLIED
					      : HOSTILE_PUT_REFUSED;
	return e->failed ? HOSTILE_PUT_CLOSED : HOSTILE_PUT_NO_ANSWER;
}

static void
hostile_name_add(char *list, size_t size, const char *name)
{
	strncat(list, " ", size - strlen(list) - 1);
	strncat(list, name, size - strlen(list) - 1);
}

/* Each spoofed hello on a connection of its own, then a put at the
 * victim's start over it: the daemon's answer to the first spoof (it
 * fails the endpoint) would otherwise stand for all. The put must be
 * refused or its connection closed, not applied nor left unanswered.
 * Then a true hello the same way, past the victim's checked start, which
 * must be served: notes "spoofed hellos served: N of M (names),
 * unanswered: K (names); true hello served S". */
static void
hostile_spoof_hellos_alone(struct hostile *h)
{
	const struct hostile_spoof *s = hostile_spoofs(h);
	char served[128] = "", unanswered[128] = "";
	unsigned n_served = 0, n_unanswered = 0;
	struct hostile_ep e;
	bool control;

	for (size_t i = 0; i < HOSTILE_N_SPOOFS; i++) {
		hostile_connect(h, &e);
		hostile_spoof_send(h, &e, &s[i]);
		hostile_flush(h, &e, 2.0);
		switch (hostile_put_fate(h, &e, 0)) {
		case HOSTILE_PUT_APPLIED:
			n_served++;
			hostile_name_add(served, sizeof(served), s[i].name);
			break;
		case HOSTILE_PUT_NO_ANSWER:
			n_unanswered++;
			hostile_name_add(unanswered, sizeof(unanswered),
					 s[i].name);
			break;
		default:
			break;
		}
		hostile_close(h, &e);
	}
	hostile_connect(h, &e);
	control = hostile_hello(h, &e) &&
		  hostile_put_fate(h, &e, HOSTILE_SPOOF_TRUE_AT) ==
		      HOSTILE_PUT_APPLIED;
	hostile_close(h, &e);
	hostile_note(h,
		     "spoofed hellos served: %u of %d (%s), unanswered: %u "
		     "(%s); true hello served %d",
		     n_served, HOSTILE_N_SPOOFS, served, n_unanswered,
		     unanswered, control);
}

static int
hostile_attack_spoof(struct hostile *h)
{
	struct hostile_ep e;

	hostile_spoof_hellos_alone(h);
	hostile_connect(h, &e);
	hostile_spoof_requests(h, &e, true);
	hostile_spoof_requests(h, &e, false);
	hostile_spoof_answers(h, &e);
	hostile_progress_for(h, 0.5);
	hostile_note(h, "before hello: ep %s, %lu answers",
		     e.failed ? ucs_status_string(e.why) : "up",
		     h->received[AM_PUT_ACK] + h->received[AM_GET_REPLY] +
			 h->received[AM_BATCH_REPLY]);
	hostile_close(h, &e);

	hostile_connect(h, &e);
	if (hostile_hello(h, &e))
		hostile_note(h, "hello ok");
	hostile_spoof_requests(h, &e, false);
	hostile_spoof_answers(h, &e);
	hostile_spoof_hellos(h, &e);
	hostile_progress_for(h, 0.5);
	hostile_note(h, "after hello: ep %s",
		     e.failed ? ucs_status_string(e.why) : "up");
	hostile_close(h, &e);
	return 0;
}

/* ---- epochs ------------------------------------------------------- */

/* A put at the victim's start over e1, a connection the daemon should
 * have closed: sent even when UCX told us it did. Then notes "connection
 * NAME WHY" once UCX reports the close, or "connection NAME still up
 * here" after ample time (hostile.sh fails on that; the put must not
 * land). */
static void
hostile_put_over_closed(struct hostile *h, struct hostile_ep *e1,
			const char *name)
{
	uint32_t f = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
	struct am_rma r = hostile_rma(h, AM_PUT, 0, 64);
	bool was_failed = e1->failed, sent;
	double deadline;

	e1->failed = false;
	sent =
	    hostile_send(h, e1, AM_PUT, &r, sizeof(r), hostile_pattern, 64, f);
	e1->failed = e1->failed || was_failed;
	hostile_flush(h, e1, 2.0);
	deadline = monotime_s() + 10.0;
	while (!e1->failed && monotime_s() < deadline)
		ucp_worker_progress(h->worker);
	hostile_note(h, "old put %s, connection %s %s",
		     sent ? "sent" : "refused by UCX", name,
		     e1->failed ? ucs_status_string(e1->why) : "still up here");
}

/* A put of the pattern at offset over e, awaited: notes "WHO put acked
 * STATUS", or that it was not. */
static void
hostile_put_awaited(struct hostile *h, struct hostile_ep *e, uint64_t offset,
		    const char *who)
{
	enum hostile_put_fate fate = hostile_put_fate(h, e, offset);

	if (fate == HOSTILE_PUT_APPLIED || fate == HOSTILE_PUT_REFUSED)
		hostile_note(h, "%s put acked %d", who, h->put_ack_status);
	else
		hostile_note(h, "%s put not acked (its connection %s)", who,
			     e->failed ? ucs_status_string(e->why) : "up");
}

/* Offset of the put over the newer connection: past the first 64 KiB of
 * the victim, which the old connection's put aims at and hostile.sh
 * checks unchanged. */
#define HOSTILE_EPOCHS_NEW_AT (768u * 1024)

/* Two connections from one origin (our address, the same claimed listen
 * port and lane), the second with the next epoch; then a put over each.
 * The daemon must have closed the first at the second's handshake: the
 * old put must not land, the new one must. */
static int
hostile_attack_epochs(struct hostile *h)
{
	struct hostile_ep e1, e2;

	if (!h->have_desc) {
		hostile_note(h, "epochs needs --descriptor");
		return 2;
	}
	if (hostile_connect(h, &e1) < 0 || !hostile_hello(h, &e1)) {
		hostile_note(h, "connection 1 not accepted");
		return 1;
	}
	if (hostile_connect(h, &e2) < 0 || !hostile_hello(h, &e2)) {
		hostile_note(h, "connection 2 not accepted");
		return 1;
	}
	hostile_put_over_closed(h, &e1, "1");
	/* The new connection's put must be applied and acknowledged. */
	hostile_put_awaited(h, &e2, HOSTILE_EPOCHS_NEW_AT, "new");
	hostile_close(h, &e1);
	hostile_close(h, &e2);
	return 0;
}

/* ---- retire -------------------------------------------------------- */

/* Where the puts over connections 2 and 3 of the retire class land: past
 * the victim's first 64 KiB, which connection 1's put aims at and
 * hostile.sh checks unchanged. */
#define HOSTILE_RETIRE_OTHER_AT (832u * 1024)
#define HOSTILE_RETIRE_FLOOR_AT (960u * 1024)

/* What a connection of the retire class closes at its handshake: every
 * connection of ours before it to the same address (a retire mark), or
 * to any address (a floor: we took a predecessor's place). */
enum hostile_retires {
	HOSTILE_RETIRE_NONE,
	HOSTILE_RETIRE_MARK,
	HOSTILE_RETIRE_FLOOR
};

/* Connection NAME of the retire class on lane, its hello of today's size
 * saying it dialed port dialed_port (0: as the others), with a mark or a
 * floor at its own epoch (every connection of ours before it is below). */
static bool
hostile_retire_conn(struct hostile *h, struct hostile_ep *e, const char *name,
		    uint16_t lane, uint16_t dialed_port,
		    enum hostile_retires retires)
{
	struct am_hello m;

	hostile_hello_fill(h, &m);
	m.lane = lane;
	m.flags = AM_HELLO_RETIRE | AM_HELLO_FLOOR;
	m.dialed.port = dialed_port;
	m.retire = retires == HOSTILE_RETIRE_MARK ? m.epoch : 0;
	m.floor = retires == HOSTILE_RETIRE_FLOOR ? m.epoch : 0;
	if (hostile_connect(h, e) < 0 ||
	    !hostile_hello_send(h, e, &m, sizeof(m))) {
		hostile_note(h, "connection %s not accepted", name);
		return false;
	}
	return true;
}

/* Connection 1 on lane 1; connection 3 on lane 2, dialed (it says) to
 * another address of the daemon; then connection 2 on lane 0, whose
 * hello's retire mark is above both their epochs. At connection 2's
 * handshake the daemon must close connection 1 (another lane, the same
 * address dialed) and keep connection 3 (a mark names one address).
 * Then connection 4 on lane 3, as the first of a process that took our
 * place: its floor, above every epoch before, must close connections 2
 * and 3 (another address: a floor names none). */
static int
hostile_attack_retire(struct hostile *h)
{
	struct hostile_ep e1, e2, e3, e4;

	if (!h->have_desc) {
		hostile_note(h, "retire needs --descriptor");
		return 2;
	}
	if (!hostile_retire_conn(h, &e1, "1", 1, 0, HOSTILE_RETIRE_NONE) ||
	    !hostile_retire_conn(h, &e3, "3", 2, 1, HOSTILE_RETIRE_NONE) ||
	    !hostile_retire_conn(h, &e2, "2", 0, 0, HOSTILE_RETIRE_MARK))
		return 1;
	hostile_put_over_closed(h, &e1, "1");
	hostile_put_awaited(h, &e2, HOSTILE_EPOCHS_NEW_AT, "new");
	hostile_put_awaited(h, &e3, HOSTILE_RETIRE_OTHER_AT, "other-address");
	if (!hostile_retire_conn(h, &e4, "4", 3, 0, HOSTILE_RETIRE_FLOOR))
		return 1;
	hostile_put_over_closed(h, &e2, "2");
	hostile_put_over_closed(h, &e3, "3");
	hostile_put_awaited(h, &e4, HOSTILE_RETIRE_FLOOR_AT, "floor");
	hostile_close(h, &e1);
	hostile_close(h, &e2);
	hostile_close(h, &e3);
	hostile_close(h, &e4);
	return 0;
}

/* ---- reflect ------------------------------------------------------- */

/* The daemon connecting to our listener: accepted, and kept. */
static void
hostile_on_conn_request(ucp_conn_request_h req, void *arg)
{
	struct hostile *h = arg;
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .conn_request = req,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = hostile_on_ep_error,
	    .err_handler.arg = &h->dialed,
	};

	if (h->dialed_up) {
		ucp_listener_reject(h->listener, req);
		return;
	}
	memset(&h->dialed, 0, sizeof(h->dialed));
	if (ucp_ep_create(h->worker, &params, &h->dialed.ep) != UCS_OK) {
		h->dialed.ep = NULL;
		return;
	}
	h->dialed_up = true;
}

/* Progresses until a message of id has come since n (its count then),
 * the endpoint failed, or the deadline passed; true if it came. */
static bool
hostile_await(struct hostile *h, unsigned id, unsigned long n,
	      const struct hostile_ep *e, double deadline)
{
	while (h->capture[id].n == n && (e == NULL || !e->failed) &&
	       monotime_s() < deadline)
		ucp_worker_progress(h->worker);
	return h->capture[id].n > n;
}

/* The status field of a captured am_hello_reply (HELLO_REPLY or
 * HELLO_DONE): the same place in every protocol version. */
static int32_t
hostile_captured_status(const struct hostile *h, unsigned id)
{
	struct am_hello_reply r;

	memset(&r, 0, sizeof(r));
	memcpy(&r, h->capture[id].data,
	       h->capture[id].length < sizeof(r) ? h->capture[id].length
						 : sizeof(r));
	return r.status;
}

/* Hands the captured message of id on over e, as it came. */
static void
hostile_forward(struct hostile *h, struct hostile_ep *e, unsigned id)
{
	static uint8_t out[AM_HELLO_DONE + 1][256];

	memcpy(out[id], h->capture[id].data, h->capture[id].length);
	hostile_send(h, e, id, NULL, 0, out[id], h->capture[id].length,
		     UCP_AM_SEND_FLAG_REPLY);
	hostile_flush(h, e, 2.0);
}

/* A new connection to sa, the hello m over it, and its answer noted as
 * "<what> answered <status>" (or unanswered). */
static void
hostile_hello_once(struct hostile *h, const struct sockaddr_storage *sa,
		   socklen_t sa_len, const void *m, size_t len,
		   const char *what)
{
	static uint8_t out[4][256];
	static unsigned turn;
	uint8_t *copy = out[turn++ % 4];
	struct hostile_ep e;
	unsigned long n = h->capture[AM_HELLO_REPLY].n;

	if (hostile_connect_to(h, &e, sa, sa_len) < 0) {
		hostile_note(h, "%s: no connection", what);
		return;
	}
	memcpy(copy, m, len);
	hostile_send(h, &e, AM_HELLO, NULL, 0, copy, len,
		     UCP_AM_SEND_FLAG_REPLY);
	hostile_flush(h, &e, 2.0);
	if (hostile_await(h, AM_HELLO_REPLY, n, &e, monotime_s() + 10.0))
		hostile_note(h, "%s answered %d", what,
			     hostile_captured_status(h, AM_HELLO_REPLY));
	else
		hostile_note(h, "%s unanswered", what);
	hostile_close(h, &e);
}

/* The address the daemon listens at, as a hello names it. */
static void
hostile_dialed(const struct hostile *h, struct am_hello *m)
{
#if AM_VERSION >= 3
	if (h->sa.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)&h->sa;
		memset(&m->dialed, 0, sizeof(m->dialed));
		m->dialed.family = 4;
		m->dialed.port = ntohs(in->sin_port);
		memcpy(m->dialed.addr, &in->sin_addr, 4);
	}
#else
	(void)h, (void)m;
#endif
}

/* reflect: the hello the daemon sent us goes back to its own listener;
 * what it answers (and, keyed, the proof its dialing side gives for the
 * challenge) is noted, then whether anything is served over that
 * connection. -1: no connection to the daemon. */
static int
hostile_reflect_back(struct hostile *h, double deadline)
{
	struct hostile_ep back;
	unsigned long n;
	int32_t status;

	if (hostile_connect(h, &back) < 0) {
		hostile_note(h, "no connection to the daemon");
		return -1;
	}
	n = h->capture[AM_HELLO_REPLY].n;
	hostile_forward(h, &back, AM_HELLO);
	if (!hostile_await(h, AM_HELLO_REPLY, n, &back, deadline)) {
		hostile_note(h, "reflected hello unanswered");
	} else if ((status = hostile_captured_status(h, AM_HELLO_REPLY)) != 0) {
		hostile_note(h, "reflected hello answered %d", status);
	} else {
		/* A challenge: to the side that sent the hello, whose
		 * proof goes back to the challenger. */
		hostile_note(h, "reflected hello answered 0");
		n = h->capture[AM_HELLO_PROOF].n;
		hostile_forward(h, &h->dialed, AM_HELLO_REPLY);
		if (!hostile_await(h, AM_HELLO_PROOF, n, &h->dialed,
				   deadline)) {
			hostile_note(h, "no proof from the dialing side");
		} else {
			n = h->capture[AM_HELLO_DONE].n;
			hostile_forward(h, &back, AM_HELLO_PROOF);
			if (hostile_await(h, AM_HELLO_DONE, n, &back, deadline))
				hostile_note(
				    h, "reflected proof answered %d",
				    hostile_captured_status(h, AM_HELLO_DONE));
			else
				hostile_note(h, "reflected proof unanswered");
		}
	}
	/* Whatever it said: is anything served to us? A daemon that
	 * refused leaves the close to us until its connect_timeout (its
	 * answer must reach us first), then closes, which ends the wait. */
	h->resolve_answered = false;
	if (!back.failed && hostile_resolve(h, &back))
		hostile_note(h, "RESOLVE served %d", h->resolve_status);
	else if (h->resolve_answered)
		hostile_note(h, "RESOLVE refused %d", h->resolve_status);
	else
		hostile_note(h, "no RESOLVE served");
	hostile_close(h, &back);
	return 0;
}

/* The daemon dialed us (a client asked it to: whoever runs us does, once
 * we say we listen). Holding no key, we try what its HELLO can buy:
 *   relayed: its hello to another daemon of the cluster (--relay), which
 *     must see that it was dialed to another address;
 *   own-nonce: a hello of another id carrying the daemon's nonce, to
 *     the daemon, dialed right;
 *   reflected: its hello back to its own listener, then each challenge
 *     and proof to the other side; nothing may be served to us;
 *   version-2: a hello of the daemon protocol before, which must be
 *     answered ERR_VERSION;
 *   own-id: a hello of our making with the daemon's id (from the
 *     descriptor), a fresh nonce, dialed right.
 * Each answer is noted as "<what> answered <status>". */
static int
hostile_attack_reflect(struct hostile *h)
{
	ucp_listener_params_t lp = {
	    .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
			  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .conn_handler.cb = hostile_on_conn_request,
	    .conn_handler.arg = h,
	};
	double deadline = monotime_s() + h->seconds;
	struct am_hello theirs, m;
	ucs_status_t st;

	if (!h->have_listen || !h->have_desc) {
		fprintf(stderr, "hostile_peer: reflect needs --listen and "
				"--descriptor\n");
		return 2;
	}
	lp.sockaddr.addr = (struct sockaddr *)&h->listen_sa;
	lp.sockaddr.addrlen = h->listen_sa_len;
	st = ucp_listener_create(h->worker, &lp, &h->listener);
	if (st != UCS_OK) {
		fprintf(stderr, "hostile_peer: listen: %s\n",
			ucs_status_string(st));
		return 1;
	}
	printf("reflect: listening\n");
	fflush(stdout);
	if (!hostile_await(h, AM_HELLO, 0, NULL, deadline) ||
	    h->capture[AM_HELLO].length < sizeof(theirs)) {
		hostile_note(h, "the daemon never dialed us (no HELLO)");
		return 1;
	}
	memcpy(&theirs, h->capture[AM_HELLO].data, sizeof(theirs));

	if (h->have_relay)
		hostile_hello_once(
		    h, &h->relay_sa, h->relay_sa_len, h->capture[AM_HELLO].data,
		    h->capture[AM_HELLO].length, "relayed hello");
	m = theirs;
	for (size_t i = 0; i < DAEMON_ID_SIZE; i++)
		m.daemon_id[i] = (uint8_t)(0xa0 + i);
	m.token = ++h->token;
	hostile_dialed(h, &m);
	hostile_hello_once(h, &h->sa, h->sa_len, &m, sizeof(m),
			   "own-nonce hello");

	/* Its hello, back to its own listener. */
	if (hostile_reflect_back(h, deadline) < 0)
		return 1;

	/* A hello of daemon protocol 2 (88 bytes; the version at the same
	 * place in every one): answered, with ERR_VERSION. */
	{
		struct {
			uint32_t magic, version;
			uint64_t token;
			uint8_t rest[72];
		} v2 = {.magic = AM_MAGIC, .version = 2, .token = ++h->token};
		hostile_hello_once(h, &h->sa, h->sa_len, &v2, sizeof(v2),
				   "version-2 hello");
	}

	hostile_hello_fill(h, &m);
	memcpy(m.daemon_id, h->desc.daemon_id, DAEMON_ID_SIZE);
	m.flags = AM_HELLO_KEYED;
	for (size_t i = 0; i < sizeof(m.nonce); i++)
		m.nonce[i] = (uint8_t)random();
	hostile_dialed(h, &m);
	hostile_hello_once(h, &h->sa, h->sa_len, &m, sizeof(m), "own-id hello");

	hostile_close(h, &h->dialed);
	ucp_listener_destroy(h->listener);
	return 0;
}

/* ---- walkaround ---------------------------------------------------- */

static uint16_t
hostile_port(const struct hostile *h)
{
	if (h->sa.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&h->sa)->sin6_port);
	return ntohs(((const struct sockaddr_in *)&h->sa)->sin_port);
}

static int
hostile_attack_walkaround(struct hostile *h)
{
	struct hostile_ep e;
	char why[256] = "";
	ucs_status_t st;

	if (h->pid <= 0) {
		fprintf(stderr, "hostile_peer: walkaround needs --pid\n");
		return 2;
	}
	memset(&e, 0, sizeof(e));
	st = walkaround_connect(h->worker, (pid_t)h->pid, hostile_port(h),
				hostile_on_ep_error, &e, why, sizeof(why),
				&e.ep);
	if (st != UCS_OK) {
		hostile_note(h, "walkaround: no endpoint: %s", why);
		return 0;
	}
	hostile_note(h, "walkaround: %s", why);
	if (hostile_hello(h, &e))
		hostile_note(h, "hello ok over the walkaround");
	if (h->have_desc && hostile_resolve(h, &e))
		hostile_note(h, "resolve ok over the walkaround");
	{
		struct am_rma r = hostile_rma(h, AM_PUT, 0, 64);
		hostile_send(h, &e, AM_PUT, &r, sizeof(r), hostile_pattern, 64,
			     UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
		r = hostile_rma(h, AM_GET, 0, 64);
		hostile_send(h, &e, AM_GET, &r, sizeof(r), NULL, 0,
			     UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
	}
	hostile_flush(h, &e, 3.0);
	hostile_progress_for(h, 0.5);
	hostile_note(h, "walkaround: %lu PUT_ACK (status %d), %lu GET_REPLY",
		     h->received[AM_PUT_ACK], h->put_ack_status,
		     h->received[AM_GET_REPLY]);
	/* last: this one crashes an rmad that has no handler for it */
	hostile_send(h, &e, 65535, NULL, 0, hostile_pattern, 64,
		     UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
	hostile_flush(h, &e, 2.0);
	hostile_progress_for(h, 0.2);
	hostile_note(h, "ep %s", e.failed ? ucs_status_string(e.why) : "up");
	hostile_close(h, &e);
	return 0;
}

/* ---- main ---------------------------------------------------------- */

static int
hostile_parse_address(struct hostile *h, const char *text)
{
	char host[256];
	const char *colon = strrchr(text, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	size_t n;

	if (colon == NULL || colon == text)
		return -1;
	n = (size_t)(colon - text);
	if (n >= sizeof(host))
		return -1;
	memcpy(host, text, n);
	host[n] = '\0';
	if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return -1;
	memcpy(&h->sa, ai->ai_addr, ai->ai_addrlen);
	h->sa_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int
hostile_read_descriptor(struct hostile *h, const char *path)
{
	char text[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	if (descriptor_parse(text, n, &h->desc) < 0)
		return -1;
	h->have_desc = true;
	return 0;
}

static int
hostile_ucx_start(struct hostile *h)
{
	ucp_params_t params = {
	    .field_mask = UCP_PARAM_FIELD_FEATURES,
	    .features = UCP_FEATURE_AM,
	};
	ucp_worker_params_t wparams = {
	    .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	    .thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucs_status_t st;

	st = ucp_init(&params, NULL, &h->ctx);
	if (st != UCS_OK)
		goto err;
	st = ucp_worker_create(h->ctx, &wparams, &h->worker);
	if (st != UCS_OK)
		goto err_cleanup;
	/* every id rmad may answer with, or UCX 1.13 crashes us */
	for (unsigned id = 0; id < HOSTILE_IDS; id++) {
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
				  UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG,
		    .id = id,
		    .cb = hostile_on_am,
		    .arg = &h->ids[id],
		};
		h->ids[id].h = h;
		h->ids[id].id = id;
		st = ucp_worker_set_am_recv_handler(h->worker, &hp);
		if (st != UCS_OK)
			goto err_worker;
	}
	return 0;

err_worker:
	ucp_worker_destroy(h->worker);
err_cleanup:
	ucp_cleanup(h->ctx);
err:
	fprintf(stderr, "hostile_peer: ucx: %s\n", ucs_status_string(st));
	return -1;
}

static void
hostile_usage(void)
{
	fprintf(
	    stderr,
	    "usage: hostile_peer --connect HOST:PORT --attack NAME\n"
	    "  [--seconds S] [--count N] [--descriptor FILE] [--pid PID]\n"
	    "  [--length BYTES] [--progress-every N] [--after-hello]\n"
	    "  [--listen HOST:PORT] [--relay HOST:PORT]\n"
	    "attacks: high-ids rndv resolve-flood get-flood batch-amp\n"
	    "         silent-conns spoof walkaround epochs retire reflect\n");
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"connect", required_argument, NULL, 'c'},
	    {"attack", required_argument, NULL, 'a'},
	    {"seconds", required_argument, NULL, 's'},
	    {"count", required_argument, NULL, 'n'},
	    {"descriptor", required_argument, NULL, 'd'},
	    {"pid", required_argument, NULL, 'p'},
	    {"length", required_argument, NULL, 'l'},
	    {"progress-every", required_argument, NULL, 'e'},
	    {"after-hello", no_argument, NULL, 'H'},
	    {"listen", required_argument, NULL, 'L'},
	    {"relay", required_argument, NULL, 'R'},
	    {NULL, 0, NULL, 0},
	};
	static struct hostile h;
	const char *connect = NULL;
	double started;
	int c, rc;

	h.seconds = 3;
	h.token = (uint64_t)getpid() << 32;
	h.epoch = (uint64_t)time(NULL) << 16;
	srandom((unsigned)getpid());
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			connect = optarg;
			break;
		case 'a':
			h.attack = optarg;
			break;
		case 's':
			h.seconds = atof(optarg);
			break;
		case 'n':
			h.count = atol(optarg);
			break;
		case 'd':
			if (hostile_read_descriptor(&h, optarg) < 0) {
				fprintf(stderr,
					"hostile_peer: bad descriptor %s\n",
					optarg);
				return 2;
			}
			break;
		case 'p':
			h.pid = atol(optarg);
			break;
		case 'l':
			h.length = strtoull(optarg, NULL, 0);
			break;
		case 'e':
			h.progress_every = atol(optarg);
			break;
		case 'H':
			h.after_hello_only = true;
			break;
		case 'L':
		case 'R': {
			struct sockaddr_storage sa = h.sa;
			socklen_t len = h.sa_len;
			if (hostile_parse_address(&h, optarg) < 0) {
				hostile_usage();
				return 2;
			}
			if (c == 'L') {
				h.listen_sa = h.sa, h.listen_sa_len = h.sa_len;
				h.have_listen = true;
			} else {
				h.relay_sa = h.sa, h.relay_sa_len = h.sa_len;
				h.have_relay = true;
			}
			h.sa = sa, h.sa_len = len;
			break;
		}
		default:
			hostile_usage();
			return 2;
		}
	}
	if (connect == NULL || h.attack == NULL ||
	    hostile_parse_address(&h, connect) < 0) {
		hostile_usage();
		return 2;
	}
	for (size_t i = 0; i < sizeof(hostile_pattern); i++)
		hostile_pattern[i] = "HOSTILE!"[i % 8];
	/* rmad speaks tcp only (its default transports) */
	setenv("UCX_TLS", "tcp", 0);
	if (hostile_ucx_start(&h) < 0)
		return 1;
	started = monotime_s();
	if (strcmp(h.attack, "high-ids") == 0)
		rc = hostile_attack_high_ids(&h);
	else if (strcmp(h.attack, "rndv") == 0)
		rc = hostile_attack_rndv(&h);
	else if (strcmp(h.attack, "resolve-flood") == 0)
		rc = hostile_attack_flood(&h, false);
	else if (strcmp(h.attack, "get-flood") == 0)
		rc = hostile_attack_flood(&h, true);
	else if (strcmp(h.attack, "batch-amp") == 0)
		rc = hostile_attack_batch_amp(&h);
	else if (strcmp(h.attack, "silent-conns") == 0)
		rc = hostile_attack_silent_conns(&h);
	else if (strcmp(h.attack, "spoof") == 0)
		rc = hostile_attack_spoof(&h);
	else if (strcmp(h.attack, "walkaround") == 0)
		rc = hostile_attack_walkaround(&h);
	else if (strcmp(h.attack, "epochs") == 0)
		rc = hostile_attack_epochs(&h);
	else if (strcmp(h.attack, "retire") == 0)
		rc = hostile_attack_retire(&h);
	else if (strcmp(h.attack, "reflect") == 0)
		rc = hostile_attack_reflect(&h);
	else {
		hostile_usage();
		rc = 2;
	}
	if (rc != 2) {
		unsigned long answers = 0;
		for (unsigned id = 0; id < HOSTILE_IDS; id++)
			answers += h.received[id];
		printf("hostile_peer: %s: %.1f s, %lu sent, %lu completed, "
		       "%lu send errors, %lu max queued at us, %lu answers "
		       "(%lu bytes); %s\n",
		       h.attack, monotime_s() - started, h.sent, h.completed,
		       h.send_errors, h.inflight_max, answers, h.received_bytes,
		       h.notes);
	}
	/* Requests still queued at us die with the process: the point of
	 * some attacks is not to wait for them. */
	fflush(stdout);
	_exit(rc);
}
