/* SPDX-License-Identifier: BSD-2-Clause */
/* Connecting out to other daemons, the peer subsystem's other half (see
 * peer.c): a client's connect to an address, the reconnects that
 * operations and imports wait for (backoff, parked operations), the
 * endpoint and hello of each attempt, a daemon's own address recognised
 * without an endpoint, and a plain TCP probe beside each attempt that
 * tells a listener that is not an rmad from nothing at all. */
#include "daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void peer_reconnect(struct peer *p);

/* A plain TCP connect beside UCX's tells what listens at a peer's
 * address. Connected, it says something listens there; a listener that
 * then speaks first (an SSH or SMTP banner, anything) is not an rmad,
 * since UCX's connection manager never writes before its client has: the
 * connect fails as NOT_RMAD. A listener that accepts and stays silent may
 * be a busy or stopped rmad as well as another program, so that failure
 * stays a TIMEOUT (a real rmad slow in a connect storm is not NOT_RMAD). */
void
peer_probe_stop(struct peer *p)
{
	char byte;

	if (p->probe_ev != NULL) {
		/* UCX may fail the connect on a banner before the probe's
		 * own read event ran: look once more. */
		if (p->probe_ok && recv(event_get_fd(p->probe_ev), &byte, 1,
					MSG_PEEK | MSG_DONTWAIT) > 0)
			p->probe_foreign = true;
		close(event_get_fd(p->probe_ev));
		event_free(p->probe_ev);
		p->probe_ev = NULL;
	}
}

/* Readable: bytes from the far side mark it foreign (peer_probe_stop
 * looks); an end of stream or an error (a guard that closes at accept)
 * says nothing about it. */
static void
peer_on_probe_read(evutil_socket_t fd, short what, void *arg)
{
	peer_probe_stop(arg);
}

static void
peer_on_probe(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	int err = -1;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
		peer_probe_stop(p);
		return;
	}
	p->probe_ok = true;
	/* Listen on until the connect ends (peer_fail and peer_set_up stop
	 * the probe): the event is not pending inside its own callback. */
	if (event_assign(p->probe_ev, p->d->base, fd, EV_READ,
			 peer_on_probe_read, p) < 0 ||
	    event_add(p->probe_ev, NULL) < 0)
		peer_probe_stop(p);
}

static void
peer_probe_start(struct peer *p)
{
	int fd;

	peer_probe_stop(p);
	p->probe_ok = false;
	p->probe_foreign = false;
	fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&p->sa, p->sa_len) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return;
	}
	p->probe_ev = event_new(p->d->base, fd, EV_WRITE, peer_on_probe, p);
	if (p->probe_ev == NULL) {
		close(fd);
		return;
	}
	if (event_add(p->probe_ev, NULL) < 0)
		peer_probe_stop(p);
}

/* The wire status of a failure: a connect to a listener that spoke
 * first, and never answered as an rmad, is NOT_RMAD. Not so at an
 * address that did answer as one before (known): an rmad handing over
 * (rmad --take-over) still accepts on its port while it drains, then
 * resets; it is going away or coming back, and the failure is what UCX
 * says. */
wire_status_t
peer_failure_status(const struct peer *p, ucs_status_t st)
{
	if (!p->inbound && !p->answered && !p->known && p->probe_foreign &&
	    p->state == RMA__V1__PEER_STATE__PEER_CONNECTING)
		return RMA__V1__STATUS__ERR_NOT_RMAD;
	return worker_status_from_ucs(st);
}

static int
peer_connect_start(struct peer *p)
{
	struct daemon *d = p->d;
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			  UCP_EP_PARAM_FIELD_SOCK_ADDR |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = peer_on_ep_error,
	    .err_handler.arg = p,
	};
	char detail[320];
	ucs_status_t st;
	uid_t owner;

	params.sockaddr.addr = (struct sockaddr *)&p->sa;
	params.sockaddr.addrlen = p->sa_len;
	p->state = RMA__V1__PEER_STATE__PEER_CONNECTING;
	p->state_since = daemon_now();
	p->await_proof = false;
	p->answered = false;
	peer_probe_start(p);
	peer_timer_start(p, d->cfg->connect_timeout);
	/* Before UCX connects: its tcp may connect back to us from there,
	 * before the handshake (guard.c). Only for this endpoint. */
	guard_close(&p->guard);
	if (guard_local_listener_owner(&p->sa, &owner) == 1 &&
	    owner != geteuid()) {
		/* Each side's guard refuses the other's sockets: UCX's tcp
		 * would connect in about half the tries (guard.h). */
		snprintf(detail, sizeof(detail),
			 "the daemon at %s runs as uid %u, this one as uid "
			 "%u: UCX's sockets do not take connections from "
			 "another user's daemon on the same host",
			 p->address, (unsigned)owner, (unsigned)geteuid());
		p->ep = NULL;
		peer_fail(p, UCS_ERR_REJECTED, detail);
		return -1;
	}
	p->guard = guard_open(&p->sa, d->cfg->connect_timeout);
	if (p->guard == 0) {
		p->ep = NULL;
		peer_fail(p, UCS_ERR_EXCEEDS_LIMIT,
			  "too many endpoints at once for UCX's sockets");
		return -1;
	}
	st = ucp_ep_create(d->worker, &params, &p->ep);
	if (st != UCS_OK) {
		p->ep = NULL;
		peer_fail(p, st, ucs_status_string(st));
		return -1;
	}
	am_attach(p);
	st = handshake_start(p);
	if (st != UCS_OK) {
		peer_fail(p, st, ucs_status_string(st));
		return -1;
	}
	worker_kick(d);
	return 0;
}

/* UCX 1.13's tcp transport, its endpoints connected through the
 * connection manager (every endpoint between daemons), overruns a heap
 * buffer when the connection manager's socket is IPv6 and UCX's tcp
 * interface on that device is IPv4:
 *
 * - ucp_wireup_is_reachable skips uct_iface_is_reachable (which compares
 *   the families) while lanes are chosen in the connection manager's
 *   phase, so the lanes are the device's tcp interfaces whatever the
 *   family of the other side's address;
 * - that address is the connection manager's peer address (getpeername,
 *   uct_tcp_sockcm_ep_get_remote_device_addr), put in place of the
 *   other side's own by ucp_ep_create_server_accept on the listener and
 *   ucp_cm_client_connect_progress on the dialer;
 * - uct_tcp_ep_init allocates a tcp endpoint's peer_addr for its
 *   interface's family (iface->config.sockaddr_len: 16 bytes for IPv4),
 *   and uct_tcp_ep_connect_to_ep has uct_tcp_ep_set_dest_addr write a
 *   28-byte sockaddr_in6 there: 12 bytes past the end of the endpoint,
 *   then read back by ucs_sockaddr_str at connect (ASan sees that read
 *   first; without it malloc aborts later, "invalid size").
 *
 * A tcp interface is IPv4 on loopback always (ucs_netif_get_addr skips
 * ::1 and link-local addresses), and on every device once rmad sets
 * UCX_TCP_AF_PRIO to inet (worker.c). So daemons reach each other over
 * IPv4 alone: a client's IPv6 peer address is refused before UCX sees it
 * (peer_handle_connect, after ::ffff:a.b.c.d became a.b.c.d), and the
 * listener listens on 0.0.0.0 for [::] and rejects a connection from an
 * IPv6 address before ucp_ep_create (listener.c). Either side alone would
 * leave the other open to a dialer or listener that is not this rmad. */
bool
peer_sockaddr_usable(const struct sockaddr_storage *sa)
{
	return sa->ss_family == AF_INET;
}

/* ::ffff:a.b.c.d is a.b.c.d to the kernel: the same listener answers. */
static void
peer_sockaddr_unmap(struct sockaddr_storage *sa, socklen_t *len_p)
{
	const struct sockaddr_in6 *in6 = (const void *)sa;
	struct sockaddr_in in = {.sin_family = AF_INET};

	if (sa->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	in.sin_port = in6->sin6_port;
	memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], sizeof(in.sin_addr));
	memset(sa, 0, sizeof(*sa));
	memcpy(sa, &in, sizeof(in));
	*len_p = sizeof(in);
}

int
peer_sockaddr(const char *host, uint16_t port, bool numeric,
	      struct sockaddr_storage *sa, socklen_t *len_p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	char service[8];

	snprintf(service, sizeof(service), "%u", port);
	/* Numeric only: a DNS lookup would stall the loop. Clients resolve
	 * names themselves; the listen address may be a name (at start). */
	hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
	if (getaddrinfo(host, service, &hints, &ai) != 0)
		return -1;
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len_p = ai->ai_addrlen;
	freeaddrinfo(ai);
	peer_sockaddr_unmap(sa, len_p);
	return 0;
}

static int
peer_resolve_address(const char *address, struct sockaddr_storage *sa,
		     socklen_t *len_p)
{
	char host[64];
	uint16_t port;

	if (config_parse_hostport(address, host, sizeof(host), &port) < 0)
		return -1;
	return peer_sockaddr(host, port, true, sa, len_p);
}

static void
peer_reconnect(struct peer *p)
{
	/* An endpoint dialed now would be closed again before it
	 * answered: its waiters hear of the shutdown instead. */
	if (p->d->shutting_down) {
		peer_refuse_waiters(p);
		return;
	}
	/* The old endpoint still carries its refusal out (handshake_refuse),
	 * and peer_connect_start takes p->ep's place: peer_close_failed
	 * dials once it has closed it, at connect_timeout at the latest. */
	if (p->ep != NULL && peer_lingers(p))
		return;
	if (p->ep_failed || p->ep != NULL) {
		/* The old endpoint goes first. */
		p->ep_failed = true;
		p->d->failed_eps++;
		peer_close_failed(p->d);
	}
	log_debug("peer_reconnect: connecting to %s", p->address);
	p->connect_attempts++;
	p->attempt_pending = true;
	p->d->counters.connect_attempts++;
	peer_connect_start(p);
}

void
peer_maybe_reconnect(struct peer *p)
{
	double now = daemon_now();

	if (p->inbound || p->self || p->state != RMA__V1__PEER_STATE__PEER_DOWN)
		return;
	if (now >= p->next_attempt)
		peer_reconnect(p);
	else if (!TAILQ_EMPTY(&p->parked) || !TAILQ_EMPTY(&p->connect_waiters))
		peer_timer_start(p, p->next_attempt - now);
}

/* Is sa this daemon's own listener? Then transfers are local copies and
 * no endpoint is needed. */
static bool
peer_is_self(const struct daemon *d, const struct sockaddr_storage *sa)
{
	const struct sockaddr_storage *ls = &d->listen_sa;
	struct ifaddrs *ifs, *i;
	bool found = false;

	if (sa->ss_family != ls->ss_family)
		return false;
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)sa,
					 *l = (const void *)ls;
		if (ntohs(a->sin_port) != d->world->learned.listen_port)
			return false;
		if (l->sin_addr.s_addr != htonl(INADDR_ANY))
			return a->sin_addr.s_addr == l->sin_addr.s_addr;
	} else if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)sa,
					  *l = (const void *)ls;
		if (ntohs(a->sin6_port) != d->world->learned.listen_port)
			return false;
		if (!IN6_IS_ADDR_UNSPECIFIED(&l->sin6_addr))
			return IN6_ARE_ADDR_EQUAL(&a->sin6_addr, &l->sin6_addr);
	} else {
		return false;
	}
	/* A wildcard listener is reached through any local address. */
	if (getifaddrs(&ifs) < 0)
		return false;
	for (i = ifs; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL ||
		    i->ifa_addr->sa_family != sa->ss_family)
			continue;
		if (sa->ss_family == AF_INET)
			found =
			    ((const struct sockaddr_in *)i->ifa_addr)
				->sin_addr.s_addr ==
			    ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
		else
			found = IN6_ARE_ADDR_EQUAL(
			    &((const struct sockaddr_in6 *)i->ifa_addr)
				 ->sin6_addr,
			    &((const struct sockaddr_in6 *)sa)->sin6_addr);
	}
	freeifaddrs(ifs);
	return found;
}

struct peer_waiter *
peer_waiter_new(struct reply_to to)
{
	struct peer_waiter *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		reply_error(to, RMA__V1__STATUS__ERR_NO_MEMORY,
			    "out of memory");
		return NULL;
	}
	w->to = to;
	return w;
}

void
peer_handle_connect(struct reply_to to, const char *address)
{
	struct daemon *d = to.conn->d;
	struct sockaddr_storage sa;
	struct peer_waiter *w;
	socklen_t len;
	struct peer *p;

	if (peer_resolve_address(address, &sa, &len) < 0) {
		reply_error(to, RMA__V1__STATUS__ERR_INVALID,
			    "peer address '%s' is not a numeric HOST:PORT",
			    address);
		return;
	}
	if (!peer_sockaddr_usable(&sa)) {
		reply_error(to, RMA__V1__STATUS__ERR_UNREACHABLE,
			    "peer address '%s' is IPv6: daemons reach each "
			    "other over IPv4 only (UCX 1.13's tcp)",
			    address);
		return;
	}
	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (!p->inbound && p->sa_len == len &&
		    memcmp(&p->sa, &sa, len) == 0)
			break;
	}
	if (p == NULL) {
		size_t n = 0;
		TAILQ_FOREACH(p, &d->peers, link)
		n += !p->inbound;
		if (n >= PEER_MAX && peer_evict_one(d))
			n--;
		if (n >= PEER_MAX) {
			reply_error(to, RMA__V1__STATUS__ERR_LIMIT,
				    "this daemon already knows %zu peers", n);
			return;
		}
		p = peer_new(d, address);
		if (p == NULL) {
			reply_error(to, RMA__V1__STATUS__ERR_NO_MEMORY,
				    "out of memory");
			return;
		}
		p->sa = sa;
		p->sa_len = len;
		p->state = RMA__V1__PEER_STATE__PEER_DOWN;
		p->state_since = daemon_now();
		if (peer_is_self(d, &sa)) {
			/* Our own address: copies are local, no endpoint. */
			p->self = true;
			memcpy(p->remote_id, d->id, DAEMON_ID_SIZE);
			p->known = true;
			descriptor_hex(p->remote_id, DAEMON_ID_SIZE,
				       p->remote_id_hex);
			peer_set_up(p);
		}
	}
	if (p->state == RMA__V1__PEER_STATE__PEER_UP) {
		struct peer_waiter now = {.to = to};
		peer_reply_connect(p, &now, RMA__V1__STATUS__OK);
		return;
	}
	w = peer_waiter_new(to);
	if (w == NULL)
		return;
	TAILQ_INSERT_TAIL(&p->connect_waiters, w, link);
	/* An explicit connect does not wait for the backoff. */
	peer_connect_now(p);
}

void
peer_connect_now(struct peer *p)
{
	if (p->state == RMA__V1__PEER_STATE__PEER_DOWN && !p->inbound)
		peer_reconnect(p);
}
