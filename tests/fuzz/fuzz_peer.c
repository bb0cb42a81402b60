/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the daemon's peer side. Messages from other daemons, as
 * UCX hands them to am.c's door (am_deliver): any 16-bit id, any header
 * and data, over the endpoint of an inbound peer before or after its
 * handshake, of an outbound peer up or still connecting, over an endpoint
 * rmad never accepted or with no reply endpoint at all, with or without
 * the rendezvous flag.
 *
 * The daemon runs in process (as in fuzz_dispatch) with its listener on
 * 127.0.0.1, and a second UCX context and worker in this process plays
 * the other daemon ("far"), so every peer has a real endpoint and every
 * answer goes somewhere and is read:
 * - A: far connected to the daemon's listener and said a valid hello;
 *   the daemon's inbound peer is UP;
 * - B: far connected too but said nothing; the inbound peer is CONNECTING;
 * - C: the daemon connected out to far's listener (a client's
 *   PeerConnect); far answers its hello, so the outbound peer is UP, or
 *   for selector C_CONNECTING does not, so it stays CONNECTING.
 * Each input starts from that state. A peer that an earlier record made
 * fail is made again before a record that names it.
 *
 * Input: records, each [flags][id lo][id hi][hlen][dlen lo][dlen hi]
 * [header: hlen bytes][data: dlen bytes] (dlen 0xffff: the rest of the
 * input), at most FUZZ_RECORDS of them, the last one cut at the input's
 * end. flags & 7 picks the endpoint (enum fuzz_peer_sel); FUZZ_PEER_RNDV sets
 * the rendezvous flag; FUZZ_PEER_TOKEN writes the peer's handshake token at
 * data offset 8 (where am_hello_reply and am_hello_proof carry it: the
 * daemon's token is not known when the input is written). Header and data
 * are copied to buffers of their exact size, so that ASan sees reads past
 * either.
 *
 * Aborts when a region's bytes change other than by a well-formed put
 * (single or in a batch, notifying or not: a notifying one only while the
 * owner's queue has room) or a batch's atomic of an inbound peer that is
 * UP naming that region's id and generation within its bounds (a model of
 * target.c below, kept in a shadow copy), when a peer's unsent answers pass
 * am.c's bounds, when the daemon sends far anything but an answer or a
 * handshake message starting with the magic, or when a peer cannot be made
 * within FUZZ_PATIENCE. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "atomic.h"
#include "bounds.h"
#include "fuzz.h"

#define FUZZ_PATIENCE 10.0
#define FUZZ_RECORDS 32
#define FUZZ_PUMP_ROUNDS 8

/* am.c's bounds on a peer's unsent answers (private there). */
#define FUZZ_TX_MAX_MSGS 16384
#define FUZZ_TX_MAX_BYTES (32u << 20)

struct fuzz_region {
	struct region *r;
	uint8_t *shadow;
};

/* far: the other daemon's endpoints, and what came over them */
struct far_ep {
	ucp_ep_h ep;
	bool failed;
};

#define FAR_EPS 64

static struct daemon d;
static bool started;
static struct conn *client; /* owns the victim regions; asks PeerConnect */
static int client_fd = -1;
static struct fuzz_region victims[2];
static uint32_t a_id, b_id, c_id; /* daemon-side peer ids, 0 = none */
static struct far_ep *a_far, *b_far;

static ucp_context_h far_ctx;
static ucp_worker_h far_worker;
static ucp_listener_h far_listener;
static uint16_t far_port;
static struct far_ep far_eps[FAR_EPS];
static bool far_answer_hellos = true;
static uint64_t far_epoch = 1;
/* A hello the daemon sent to far's listener, not answered yet. */
static ucp_ep_h far_hello_ep;
static uint64_t far_hello_token;
static bool far_hello_pending;
static uint64_t far_received;
static uint64_t far_hellos; /* hellos the daemon sent far, answered or not */

static void
fuzz_fail(const char *what)
{
	fprintf(stderr, "fuzz_peer: %s\n", what);
	abort();
}

/* Region generations come from getrandom(): counted instead, so that the
 * corpus can name the victims (see fuzz_start). */
static uint64_t random_count;

ssize_t
getrandom(void *buf, size_t len, unsigned int flags)
{
	for (size_t i = 0; i < len; i += sizeof(random_count)) {
		size_t n = len - i;

		if (n > sizeof(random_count))
			n = sizeof(random_count);
		random_count++;
		memcpy((uint8_t *)buf + i, &random_count, n);
	}
	return (ssize_t)len;
}

/* LeakSanitizer cannot see a live UCX endpoint's control_ext: UCX 1.13
 * keeps its only pointer in ucp_ep_ext_gen, inside the endpoint, which
 * ucs_strided_alloc carves from mmap'd chunks that LSan does not scan.
 * libFuzzer checks for leaks mid-run, after an input that freed less than
 * it allocated (one that made a peer again), and then every endpoint alive
 * (A, B, C and far's ends, 56 bytes each, allocated by ucs_calloc from
 * ucp_ep_create_base) reads as leaked: __lsan_do_recoverable_leak_check()
 * right after ensure_a/b/c reports all six. Those are not leaks (they go
 * at ucp_worker_destroy); the fast unwinder stops at ucs_calloc (libucs
 * keeps no frame pointers), hence that name. rmad's own allocations are
 * still checked. */
const char *__lsan_default_suppressions(void);

const char *
__lsan_default_suppressions(void)
{
	return "leak:ucs_calloc\n";
}

/* ---- far: the other daemon ----------------------------------------------- */

static struct far_ep *
far_slot(void)
{
	for (int i = 0; i < FAR_EPS; i++) {
		if (far_eps[i].ep == NULL) {
			far_eps[i].failed = false;
			return &far_eps[i];
		}
	}
	fuzz_fail("far has no free endpoint slot (endpoints not closed?)");
	return NULL;
}

static void
far_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	struct far_ep *e = arg;

	e->failed = true;
}

static void
far_close(struct far_ep *e)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_EP_CLOSE_FLAG_FORCE,
	};
	double deadline = daemon_now() + FUZZ_PATIENCE;
	ucs_status_ptr_t sp;

	if (e == NULL || e->ep == NULL)
		return;
	if (far_hello_ep == e->ep)
		far_hello_pending = false;
	sp = ucp_ep_close_nbx(e->ep, &param);
	e->ep = NULL;
	if (!UCS_PTR_IS_PTR(sp))
		return;
	while (ucp_request_check_status(sp) == UCS_INPROGRESS) {
		ucp_worker_progress(far_worker);
		if (daemon_now() > deadline)
			fuzz_fail("far cannot close an endpoint");
	}
	ucp_request_free(sp);
}

/* Whatever the daemon sends: an answer or a handshake message, starting
 * with the magic; never a request (this daemon has no client ops). */
static ucs_status_t
far_on_am(void *arg, const void *header, size_t header_length, void *data,
	  size_t length, const ucp_am_recv_param_t *param)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	const void *first = header_length > 0 ? header : data;
	size_t first_len = header_length > 0 ? header_length : length;
	uint32_t magic = 0;

	far_received++;
	if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
		fuzz_fail("the daemon sent rendezvous data (rmad sends eager)");
	switch (id) {
	case AM_HELLO:
	case AM_HELLO_REPLY:
	case AM_RESOLVE_REPLY:
	case AM_PUT_ACK:
	case AM_GET_REPLY:
	case AM_BATCH_REPLY:
	case AM_HELLO_DONE:
		break;
	default:
		fprintf(stderr, "fuzz_peer: message %u\n", id);
		fuzz_fail("the daemon sent far a message it has no reason to");
	}
	if (first_len < sizeof(magic))
		fuzz_fail("the daemon sent a message shorter than the magic");
	memcpy(&magic, first, sizeof(magic));
	if (magic != AM_MAGIC)
		fuzz_fail("the daemon sent a message without the magic");
	if (id == AM_HELLO)
		far_hellos++;
	if (id == AM_HELLO && far_answer_hellos) {
		struct am_hello h;

		if (length < sizeof(h) ||
		    !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
			fuzz_fail("the daemon sent a short hello");
		memcpy(&h, data, sizeof(h));
		far_hello_ep = param->reply_ep;
		far_hello_token = h.token;
		far_hello_pending = true;
	}
	return UCS_OK;
}

static void
far_on_conn_request(ucp_conn_request_h req, void *arg)
{
	struct far_ep *e = far_slot();
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .conn_request = req,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = far_on_ep_error,
	    .err_handler.arg = e,
	};

	if (ucp_ep_create(far_worker, &params, &e->ep) != UCS_OK)
		e->ep = NULL;
}

static void
far_send(ucp_ep_h ep, unsigned id, const void *data, size_t length)
{
	ucp_request_param_t param = {
	    .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
	    .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
	};
	double deadline = daemon_now() + FUZZ_PATIENCE;
	ucs_status_ptr_t sp;

	sp = ucp_am_send_nbx(ep, id, NULL, 0, data, length, &param);
	if (!UCS_PTR_IS_PTR(sp))
		return; /* sent, or failed: the daemon's state says which */
	while (ucp_request_check_status(sp) == UCS_INPROGRESS) {
		ucp_worker_progress(far_worker);
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		if (daemon_now() > deadline)
			fuzz_fail("far cannot send");
	}
	ucp_request_free(sp);
}

/* Answers the daemon's hello, as an rmad without a cluster key does. */
static void
far_answer_hello(void)
{
	struct am_hello_reply r;

	if (!far_hello_pending)
		return;
	far_hello_pending = false;
	memset(&r, 0, sizeof(r));
	r.magic = AM_MAGIC;
	r.status = RMA__V1__STATUS__OK;
	r.token = far_hello_token;
	memcpy(r.daemon_id, FUZZ_FAR_ID, DAEMON_ID_SIZE);
	far_send(far_hello_ep, AM_HELLO_REPLY, &r, sizeof(r));
}

/* Far's endpoints the daemon closed are closed here too. */
static void
far_reap(void)
{
	for (int i = 0; i < FAR_EPS; i++) {
		if (far_eps[i].ep != NULL && far_eps[i].failed) {
			if (a_far == &far_eps[i])
				a_far = NULL;
			if (b_far == &far_eps[i])
				b_far = NULL;
			far_close(&far_eps[i]);
		}
	}
}

static void
far_start(void)
{
	ucp_params_t params = {
	    .field_mask = UCP_PARAM_FIELD_FEATURES,
	    .features = UCP_FEATURE_AM,
	};
	ucp_worker_params_t wparams = {
	    .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	    .thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucp_listener_params_t lparams = {
	    .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
			  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .conn_handler.cb = far_on_conn_request,
	};
	ucp_listener_attr_t lattr = {
	    .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR,
	};
	struct sockaddr_in sin = {
	    .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	ucp_config_t *config;
	char devices[512];

	/* The daemon's transports and devices, so that the two meet. */
	if (ucp_config_read(NULL, NULL, &config) != UCS_OK)
		fuzz_fail("far: ucp_config_read");
	if (getenv("UCX_TLS") == NULL)
		ucp_config_modify(config, "TLS", d.world->learned.transports);
	if (getenv("UCX_ZCOPY_THRESH") == NULL)
		ucp_config_modify(config, "ZCOPY_THRESH", "inf");
	if (getenv("UCX_NET_DEVICES") == NULL &&
	    netdev_auto(d.cfg, devices, sizeof(devices)) == 0)
		ucp_config_modify(config, "NET_DEVICES", devices);
	if (ucp_init(&params, config, &far_ctx) != UCS_OK)
		fuzz_fail("far: ucp_init");
	ucp_config_release(config);
	if (ucp_worker_create(far_ctx, &wparams, &far_worker) != UCS_OK)
		fuzz_fail("far: ucp_worker_create");
	for (unsigned id = 0; id < AM_ID_LIMIT; id++) {
		ucp_am_handler_param_t hp = {
		    .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
				  UCP_AM_HANDLER_PARAM_FIELD_CB |
				  UCP_AM_HANDLER_PARAM_FIELD_ARG,
		    .id = id,
		    .cb = far_on_am,
		    .arg = (void *)(uintptr_t)id,
		};
		if (ucp_worker_set_am_recv_handler(far_worker, &hp) != UCS_OK)
			fuzz_fail("far: set_am_recv_handler");
	}
	lparams.sockaddr.addr = (struct sockaddr *)&sin;
	lparams.sockaddr.addrlen = sizeof(sin);
	if (ucp_listener_create(far_worker, &lparams, &far_listener) != UCS_OK)
		fuzz_fail("far: ucp_listener_create");
	if (ucp_listener_query(far_listener, &lattr) != UCS_OK)
		fuzz_fail("far: ucp_listener_query");
	far_port = ntohs(((struct sockaddr_in *)&lattr.sockaddr)->sin_port);
}

static void
far_stop(void)
{
	for (int i = 0; i < FAR_EPS; i++)
		far_close(&far_eps[i]);
	ucp_listener_destroy(far_listener);
	ucp_worker_destroy(far_worker);
	ucp_cleanup(far_ctx);
}

/* ---- both sides ---------------------------------------------------------- */

static void
client_drain(void)
{
	uint8_t buf[65536];

	/* Replies to PeerConnect and peer events: not checked here
	 * (fuzz_dispatch checks the client side). */
	while (recv(client_fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* One turn of both loops: the daemon's (its tick progresses its worker),
 * far's worker until idle (bounded), far's answers, the client socket. */
static void
pump_once(void)
{
	event_base_loop(d.base, EVLOOP_NONBLOCK);
	for (int i = 0; i < 4096 && ucp_worker_progress(far_worker) != 0; i++)
		;
	far_answer_hello();
	far_reap();
	client_drain();
}

static void
pump(int rounds)
{
	worker_kick(&d);
	for (int i = 0; i < rounds; i++)
		pump_once();
}

static struct peer *
peer_by_id(uint32_t id)
{
	struct peer *p;

	if (id == 0)
		return NULL;
	TAILQ_FOREACH(p, &d.peers, link)
	{
		if (p->id == id)
			return p;
	}
	return NULL;
}

static bool
peer_newer_inbound(uint32_t after, uint32_t *id_p)
{
	struct peer *p;

	TAILQ_FOREACH(p, &d.peers, link)
	{
		if (p->inbound && p->id > after && p->ep != NULL &&
		    p->state == RMA__V1__PEER_STATE__PEER_CONNECTING) {
			*id_p = p->id;
			return true;
		}
	}
	return false;
}

static uint32_t newest_peer_id;

/* Waits until far's endpoint is wired up: closing either end during the
 * wire-up makes UCX 1.13 lose both endpoints (LeakSanitizer sees their
 * control_ext), which is UCX's leak, not the daemon's. */
static void
far_flush(struct far_ep *e)
{
	ucp_request_param_t param = {.op_attr_mask = 0};
	double deadline = daemon_now() + FUZZ_PATIENCE;
	ucs_status_ptr_t sp = ucp_ep_flush_nbx(e->ep, &param);

	if (!UCS_PTR_IS_PTR(sp))
		return;
	while (ucp_request_check_status(sp) == UCS_INPROGRESS) {
		pump_once();
		if (daemon_now() > deadline)
			fuzz_fail("far's endpoint to the daemon was not wired "
				  "up");
	}
	ucp_request_free(sp);
}

/* Far connects to the daemon's listener; the daemon's new inbound peer. */
static uint32_t
inbound_make(struct far_ep **far_p)
{
	struct far_ep *e = far_slot();
	struct sockaddr_in sin = {
	    .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	    .sin_port = htons(d.world->learned.listen_port),
	};
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			  UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = far_on_ep_error,
	    .err_handler.arg = e,
	};
	double deadline = daemon_now() + FUZZ_PATIENCE;
	uint32_t id;

	params.sockaddr.addr = (struct sockaddr *)&sin;
	params.sockaddr.addrlen = sizeof(sin);
	if (ucp_ep_create(far_worker, &params, &e->ep) != UCS_OK)
		fuzz_fail("far cannot connect to the daemon");
	while (!peer_newer_inbound(newest_peer_id, &id)) {
		pump(1);
		if (daemon_now() > deadline)
			fuzz_fail("the daemon did not accept far's connection");
	}
	newest_peer_id = id;
	far_flush(e);
	*far_p = e;
	return id;
}

/* Makes the daemon forget an inbound peer, and far its endpoint. */
static void
inbound_drop(uint32_t *id_p, struct far_ep **far_p)
{
	struct peer *p = peer_by_id(*id_p);

	double deadline = daemon_now() + FUZZ_PATIENCE;

	/* The daemon closes its end; far closes its own once it hears
	 * (far_reap), so that the two closes never race. A peer a record
	 * made the daemon refuse waits for far to close first (the refusal
	 * read, as a refused rmad does; else connect_timeout): far does. */
	if (p != NULL && p->state != RMA__V1__PEER_STATE__PEER_DOWN)
		peer_fail(p, UCS_ERR_CANCELED, "fuzz: made again");
	else if (p != NULL && p->linger == PEER_LINGER_HEARD)
		far_close(*far_p);
	while (*far_p != NULL && (*far_p)->ep != NULL) {
		pump(1);
		if (daemon_now() > deadline)
			fuzz_fail("far did not hear that the daemon closed");
	}
	/* Both ends closed before anything new is connected: UCX 1.13 may
	 * hand an event it missed on a closed socket to whichever worker
	 * reuses its fd number (its async.c:643 assertion; fixed upstream
	 * by openucx/ucx#9942), and a progress of each worker consumes
	 * them first. */
	while ((p = peer_by_id(*id_p)) != NULL && p->ep != NULL) {
		pump(1);
		if (daemon_now() > deadline)
			fuzz_fail("the daemon did not close a peer far closed");
	}
	pump(1);
	*far_p = NULL;
	*id_p = 0;
}

static void
ensure_a(void)
{
	struct peer *p = peer_by_id(a_id);
	struct peer *b = peer_by_id(b_id);
	struct am_hello h;
	double deadline;

	if (p != NULL && p->state == RMA__V1__PEER_STATE__PEER_UP &&
	    a_far != NULL)
		return;
	inbound_drop(&a_id, &a_far);
	/* An inbound B that a record made UP may hold A's origin and lane
	 * with a higher epoch: it goes first. */
	if (b != NULL && b->state == RMA__V1__PEER_STATE__PEER_UP)
		inbound_drop(&b_id, &b_far);
	a_id = inbound_make(&a_far);
	memset(&h, 0, sizeof(h));
	h.magic = AM_MAGIC;
	h.version = AM_VERSION;
	h.token = 1;
	memcpy(h.daemon_id, FUZZ_FAR_ID, DAEMON_ID_SIZE);
	h.epoch = far_epoch++;
	h.lane = 0;
	h.listen_port = FUZZ_FAR_PORT;
	far_send(a_far->ep, AM_HELLO, &h, sizeof(h));
	deadline = daemon_now() + FUZZ_PATIENCE;
	while ((p = peer_by_id(a_id)) == NULL ||
	       p->state != RMA__V1__PEER_STATE__PEER_UP) {
		if (p == NULL || p->state == RMA__V1__PEER_STATE__PEER_DOWN)
			fuzz_fail("the daemon refused far's valid hello");
		pump(1);
		if (daemon_now() > deadline)
			fuzz_fail("the daemon did not take far's hello");
	}
}

static void
ensure_b(bool fresh)
{
	struct peer *p = peer_by_id(b_id);

	if (p != NULL && p->state != RMA__V1__PEER_STATE__PEER_DOWN &&
	    b_far != NULL &&
	    (!fresh || p->state == RMA__V1__PEER_STATE__PEER_CONNECTING))
		return;
	inbound_drop(&b_id, &b_far);
	b_id = inbound_make(&b_far);
}

/* Far has no endpoint but A's and B's: none the daemon connected. */
static bool
far_holds_only_inbound(void)
{
	for (int i = 0; i < FAR_EPS; i++) {
		if (far_eps[i].ep != NULL && &far_eps[i] != a_far &&
		    &far_eps[i] != b_far)
			return false;
	}
	return true;
}

/* The daemon's outbound peer to far, in the state a record wants. */
enum c_want { C_ANY, C_UP, C_CONNECTING };

static bool
c_as_wanted(const struct peer *p, enum c_want want)
{
	if (p == NULL || p->ep == NULL)
		return false;
	switch (want) {
	case C_ANY:
		return p->state != RMA__V1__PEER_STATE__PEER_DOWN;
	case C_UP:
		return p->state == RMA__V1__PEER_STATE__PEER_UP;
	case C_CONNECTING:
		return p->state == RMA__V1__PEER_STATE__PEER_CONNECTING;
	}
	return false;
}

/* UP: far answers the daemon's hello; CONNECTING: far does not (until
 * some later record wants C up). */
static void
ensure_c(enum c_want want)
{
	struct peer *p = peer_by_id(c_id);
	double deadline = daemon_now() + FUZZ_PATIENCE;
	uint64_t hellos;
	char address[32];

	if (c_as_wanted(p, want))
		return;
	if (p != NULL && p->state != RMA__V1__PEER_STATE__PEER_DOWN)
		peer_fail(p, UCS_ERR_CANCELED, "fuzz: made again");
	/* Both ends of the old connection closed first (see inbound_drop). */
	while (((p = peer_by_id(c_id)) != NULL && p->ep != NULL) ||
	       !far_holds_only_inbound()) {
		pump(1);
		if (daemon_now() > deadline)
			fuzz_fail("the daemon's old connection to far did not "
				  "close");
	}
	pump(1);
	far_answer_hellos = want != C_CONNECTING;
	far_hello_pending = false;
	hellos = far_hellos;
	snprintf(address, sizeof(address), "127.0.0.1:%u", far_port);
	peer_handle_connect(reply_to(client, 1), address);
	for (;;) {
		TAILQ_FOREACH(p, &d.peers, link)
		{
			if (!p->inbound)
				break;
		}
		if (p == NULL)
			fuzz_fail("PeerConnect made no outbound peer");
		c_id = p->id;
		if (newest_peer_id < c_id)
			newest_peer_id = c_id;
		/* Connecting: once far has the hello, so that the endpoint
		 * is wired up. A close during the wire-up trips UCX 1.13's
		 * own assertions (tcp_sockcm_ep.c:416), which no record
		 * should be blamed for. */
		if (c_as_wanted(p,
				want == C_CONNECTING ? C_CONNECTING : C_UP) &&
		    far_hellos > hellos)
			break;
		if (p->state == RMA__V1__PEER_STATE__PEER_DOWN)
			fuzz_fail("the daemon could not connect to far");
		pump(1);
		if (daemon_now() > deadline) {
			fprintf(
			    stderr,
			    "fuzz_peer: peer %u state %d, far heard %" PRIu64
			    " hellos (%" PRIu64 " before), last error: %s\n",
			    p->id, (int)p->state, far_hellos, hellos,
			    p->last_error);
			fuzz_fail("the daemon's connection to far did not come "
				  "up");
		}
	}
}

/* ---- the model of target.c: what a put may change -------------------------
 */

static struct fuzz_region *
victim(uint64_t id, uint64_t generation)
{
	for (size_t i = 0; i < sizeof(victims) / sizeof(victims[0]); i++) {
		if (victims[i].r->id == id &&
		    victims[i].r->generation == generation)
			return &victims[i];
	}
	return NULL;
}

/* notification_reserve's test: the owner (of both victims) has room for
 * one more from client of p, in the bound and in the client's share of
 * it. *bound_p: the owner's bound as this message found it, with the
 * places its earlier puts took (copied at the first). */
static bool
model_owner_has_room(const struct peer *p, const struct fuzz_region *v,
		     uint64_t client, struct notification_bound **bound_p)
{
	struct notification_initiator from = {.daemon_id = p->remote_id,
					      .client = client};

	if (v->r->owner == NULL)
		return false;
	if (*bound_p == NULL &&
	    (*bound_p = notification_bound_copy(v->r->owner)) == NULL)
		fuzz_fail("out of memory");
	return notification_bound_try(*bound_p, &from);
}

/* A put (notify != NULL: one that notifies the owner, refused when the
 * client's share of the owner's bound is full); true when it writes. */
static bool
model_put(const struct peer *p, const struct am_rma *h, const uint8_t *data,
	  size_t len, const uint64_t *notify,
	  struct notification_bound **bound_p)
{
	struct fuzz_region *v = victim(h->region_id, h->generation);

	if (v == NULL || !bounds_within(h->offset, h->length, v->r->length) ||
	    h->length != len ||
	    (notify != NULL && !model_owner_has_room(p, v, *notify, bound_p)))
		return false;
	memcpy(v->shadow + h->offset, data, len);
	return true;
}

/* An atomic of a batch, applied to the shadow as target.c applies it. */
static void
model_atomic(const struct am_rma *h, const struct am_batch_atomic *a)
{
	struct fuzz_region *v = victim(h->region_id, h->generation);

	if (v != NULL && atomic_valid((Rma__V1__AtomicOp)a->op, h->length) &&
	    atomic_fits(h->offset, h->length, v->r->length))
		atomic_apply(v->shadow + h->offset, (Rma__V1__AtomicOp)a->op,
			     h->length, a->operand, a->compare);
}

static void
model_batch(const struct peer *p, const uint8_t *data, size_t len)
{
	struct notification_bound *bound = NULL;
	size_t at = 0;

	if (len > AM_BATCH_BYTES)
		return;
	while (at + sizeof(struct am_rma) <= len) {
		struct am_batch_atomic a;
		struct am_batch_notify n;
		struct am_rma h;
		bool put, notify;

		memcpy(&h, data + at, sizeof(h));
		at += sizeof(h);
		if (h.magic == AM_MAGIC && h.kind == AM_ATOMIC) {
			if (sizeof(a) > len - at)
				break;
			memcpy(&a, data + at, sizeof(a));
			at += sizeof(a);
			model_atomic(&h, &a);
			continue;
		}
		notify = h.kind == AM_PUT_NOTIFY;
		if (notify) {
			if (sizeof(n) > len - at)
				break;
			memcpy(&n, data + at, sizeof(n));
			at += sizeof(n);
		}
		put = h.kind == AM_PUT || notify;
		if (h.magic != AM_MAGIC || (!put && h.kind != AM_GET) ||
		    (put && h.length > len - at))
			break;
		if (!put)
			continue;
		if (h.length <= AM_BATCH_SMALL)
			model_put(p, &h, data + at, h.length,
				  notify ? &n.client : NULL, &bound);
		at += h.length;
	}
	notification_bound_free(bound);
}

/* The daemon is about to get (id, header, data) from p: what may change. */
static void
model(const struct peer *p, unsigned id, bool rndv, const uint8_t *header,
      size_t hlen, const uint8_t *data, size_t len)
{
	struct notification_bound *bound = NULL;
	struct am_rma_notify n;
	struct am_rma h;

	if (p == NULL || rndv || !p->inbound ||
	    p->state != RMA__V1__PEER_STATE__PEER_UP)
		return;
	if (id == AM_PUT && hlen == sizeof(h)) {
		memcpy(&h, header, sizeof(h));
		if (h.magic == AM_MAGIC)
			model_put(p, &h, data, len, NULL, NULL);
	} else if (id == AM_PUT && hlen == sizeof(n)) {
		memcpy(&n, header, sizeof(n));
		if (n.rma.magic == AM_MAGIC)
			model_put(p, &n.rma, data, len, &n.client, &bound);
		notification_bound_free(bound);
	} else if (id == AM_BATCH) {
		model_batch(p, data, len);
	}
}

static void
check_invariants(void)
{
	struct peer *p;

	for (size_t i = 0; i < sizeof(victims) / sizeof(victims[0]); i++) {
		if (memcmp(victims[i].r->addr, victims[i].shadow,
			   victims[i].r->length) != 0)
			fuzz_fail("a region changed other than by a "
				  "well-formed put from a handshaken peer");
	}
	TAILQ_FOREACH(p, &d.peers, link)
	{
		if (p->tx_msgs > FUZZ_TX_MAX_MSGS ||
		    (p->tx_msgs > 1 && p->tx_bytes > FUZZ_TX_MAX_BYTES))
			fuzz_fail("a peer's unsent answers passed am.c's "
				  "bounds");
	}
}

/* ---- set-up -------------------------------------------------------------- */

static void
fuzz_stop(void)
{
	if (!started)
		return;
	started = false;
	if (getenv("FUZZ_VERBOSE") != NULL)
		fprintf(stderr,
			"fuzz_peer: resolves %llu, puts %llu, gets %llu, "
			"dropped %llu, far received %llu\n",
			(unsigned long long)d.counters.resolves_served,
			(unsigned long long)d.counters.target_puts,
			(unsigned long long)d.counters.target_gets,
			(unsigned long long)d.counters.am_dropped,
			(unsigned long long)far_received);
	/* The daemon's endpoints go first, then far's. */
	daemon_stop(&d);
	far_stop();
	close(client_fd);
	for (size_t i = 0; i < sizeof(victims) / sizeof(victims[0]); i++)
		free(victims[i].shadow);
}

static void
fuzz_victim(struct fuzz_region *v, size_t length, uint64_t seed)
{
	char detail[160];
	int memfd;

	/* getrandom counts: the generation is seed + 1. */
	random_count = seed;
	if (region_create(&d, client, length, &v->r, &memfd, detail,
			  sizeof(detail)) != RMA__V1__STATUS__OK)
		fuzz_fail(detail);
	close(memfd);
	v->shadow = malloc(length);
	if (v->shadow == NULL)
		fuzz_fail("out of memory");
	for (size_t i = 0; i < length; i++)
		((uint8_t *)v->r->addr)[i] = (uint8_t)(i * 7 + seed);
	memcpy(v->shadow, v->r->addr, length);
}

static void
fuzz_start(void)
{
	struct config cfg;
	int sv[2];

	config_defaults(&cfg);
	cfg.listen_port = 0; /* any free port */
	cfg.log_level =
	    getenv("FUZZ_VERBOSE") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR;
	log_init(cfg.log_level);
	if (daemon_start(&d, &cfg) < 0)
		fuzz_fail("daemon_start failed");
	memcpy(d.id, FUZZ_DAEMON_ID, DAEMON_ID_SIZE);
	descriptor_hex(d.id, DAEMON_ID_SIZE, d.id_hex);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fuzz_fail("socketpair failed");
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	conn_create(&d, sv[0]); /* sv[0] is the daemon's now */
	client = TAILQ_LAST(&d.conns, conn_list);
	if (client == NULL)
		fuzz_fail("conn_create did not take the client");
	client_fd = sv[1];
	/* Regions 1 and 2, with the generations the corpus names. */
	fuzz_victim(&victims[0], FUZZ_PEER_R1_LEN, FUZZ_PEER_R1_GEN - 1);
	fuzz_victim(&victims[1], FUZZ_PEER_R2_LEN, FUZZ_PEER_R2_GEN - 1);
	if (victims[0].r->id != 1 || victims[1].r->id != 2 ||
	    victims[0].r->generation != FUZZ_PEER_R1_GEN ||
	    victims[1].r->generation != FUZZ_PEER_R2_GEN)
		fuzz_fail("the victim regions are not the ones the corpus "
			  "names");
	far_start();
	started = true;
	/* Torn down at exit, so that LeakSanitizer sees what the daemon's
	 * own shutdown leaves behind. */
	atexit(fuzz_stop);
}

/* ---- one input ------------------------------------------------------------
 */

static void
deliver(uint8_t flags, unsigned id, const uint8_t *header, size_t hlen,
	const uint8_t *data, size_t len)
{
	ucp_am_recv_param_t param = {0};
	enum fuzz_peer_sel sel = flags & 7;
	struct peer *p = NULL;
	uint8_t *hcopy = malloc(hlen ? hlen : 1);
	uint8_t *dcopy = malloc(len ? len : 1);

	if (hcopy == NULL || dcopy == NULL)
		fuzz_fail("out of memory");
	memcpy(hcopy, header, hlen);
	memcpy(dcopy, data, len);
	switch (sel) {
	case FUZZ_PEER_A:
		ensure_a();
		p = peer_by_id(a_id);
		break;
	case FUZZ_PEER_B:
	case FUZZ_PEER_B_FRESH:
		ensure_b(sel == FUZZ_PEER_B_FRESH);
		p = peer_by_id(b_id);
		break;
	case FUZZ_PEER_C:
	case FUZZ_PEER_C_CONNECTING:
		ensure_c(sel == FUZZ_PEER_C ? C_ANY : C_CONNECTING);
		p = peer_by_id(c_id);
		break;
	case FUZZ_PEER_BOGUS_EP:
		param.recv_attr = UCP_AM_RECV_ATTR_FIELD_REPLY_EP;
		param.reply_ep = (ucp_ep_h)(uintptr_t)0xdead0000;
		break;
	case FUZZ_PEER_FAR_EP:
		ensure_a();
		param.recv_attr = UCP_AM_RECV_ATTR_FIELD_REPLY_EP;
		param.reply_ep = a_far->ep;
		break;
	case FUZZ_PEER_NO_REPLY_EP:
		break;
	}
	if (p != NULL) {
		if (p->ep == NULL)
			fuzz_fail("a peer made for the record has no endpoint");
		param.recv_attr = UCP_AM_RECV_ATTR_FIELD_REPLY_EP;
		param.reply_ep = p->ep;
		if ((flags & FUZZ_PEER_TOKEN) && len >= 16)
			memcpy(dcopy + 8, &p->hello.token, 8);
	}
	if (flags & FUZZ_PEER_RNDV)
		param.recv_attr |= UCP_AM_RECV_ATTR_FLAG_RNDV;
	model(p, id, flags & FUZZ_PEER_RNDV, hcopy, hlen, dcopy, len);
	am_deliver(&d, id, hcopy, hlen, dcopy, len, &param);
	free(hcopy);
	free(dcopy);
	check_invariants();
	pump(FUZZ_PUMP_ROUNDS);
	check_invariants();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t at = 0;

	if (!started)
		fuzz_start();
	ensure_a();
	ensure_b(true);
	ensure_c(C_UP);
	for (int n = 0; n < FUZZ_RECORDS && at + 6 <= size; n++) {
		uint8_t flags = data[at];
		unsigned id = data[at + 1] | (unsigned)data[at + 2] << 8;
		size_t hlen = data[at + 3];
		size_t dlen = data[at + 4] | (size_t)data[at + 5] << 8;

		at += 6;
		if (hlen > size - at)
			hlen = size - at;
		if (dlen == FUZZ_PEER_DLEN_REST || dlen > size - at - hlen)
			dlen = size - at - hlen;
		deliver(flags, id, data + at, hlen, data + at + hlen, dlen);
		at += hlen + dlen;
	}
	return 0;
}
