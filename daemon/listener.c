/* SPDX-License-Identifier: BSD-2-Clause */
/* The UCX listener: connections other daemons open to this one. Each is
 * checked against peer_allow and the inbound caps (total and per source
 * address: every endpoint costs file descriptors), accepted as an inbound
 * peer in state CONNECTING, and served only once its handshake is done
 * (handshake.c), within connect_timeout. Worker 0 listens.
 *
 * UCX's own sockets, this one included, are guarded at accept (guard.c):
 * an endpoint accepted here opens the guard's door on UCX's tcp interface
 * sockets to its host, for that endpoint alone, until its handshake is
 * done. */
#include "daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
listener_address_allowed(struct daemon *d, const struct sockaddr_storage *ss)
{
	return guard_cidrs_match(d->cfg->peer_allow, d->cfg->n_peer_allow,
				 (const struct sockaddr *)ss);
}

static bool
listener_same_host(const struct sockaddr_storage *x,
		   const struct sockaddr_storage *y)
{
	if (x->ss_family != y->ss_family)
		return false;
	if (x->ss_family == AF_INET)
		return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)y)->sin_addr.s_addr;
	if (x->ss_family == AF_INET6)
		return IN6_ARE_ADDR_EQUAL(
		    &((const struct sockaddr_in6 *)x)->sin6_addr,
		    &((const struct sockaddr_in6 *)y)->sin6_addr);
	return false;
}

/* Inbound endpoints are capped in total and per source address: each
 * costs file descriptors (UCX's tcp holds about 4 per peer). */
static const char *
listener_refusal(struct daemon *d, const struct sockaddr_storage *ss)
{
	uint32_t total = 0, same = 0;
	struct peer *p;

	TAILQ_FOREACH(p, &d->peers, link)
	{
		if (!p->inbound || p->ep == NULL)
			continue;
		total++;
		same += listener_same_host(&p->sa, ss);
	}
	if (total >= d->cfg->max_inbound_peers)
		return "max_inbound_peers reached";
	if (same >= d->cfg->max_inbound_per_address)
		return "max_inbound_per_address reached";
	return NULL;
}

/* [::] is every address, and the IPv4 ones are all a daemon can be
 * reached at (peer_sockaddr_usable): 0.0.0.0 then, which also lets IPv4
 * peers in (UCX 1.13 finds no device for an IPv4-mapped peer of an IPv6
 * listener and drops it). Any other IPv6 address: -1. */
static int
listener_wildcard_v4(struct sockaddr_storage *ss, socklen_t *len_p)
{
	const struct sockaddr_in6 *in6 = (const void *)ss;
	struct sockaddr_in in = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_ANY)};

	if (ss->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
		return -1;
	in.sin_port = in6->sin6_port;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &in, sizeof(in));
	*len_p = sizeof(in);
	log_info("listener_start: listening on 0.0.0.0 for [::]: daemons "
		 "reach each other over IPv4 only (UCX 1.13's tcp)");
	return 0;
}

static void
listener_on_conn_request(ucp_conn_request_h req, void *arg)
{
	struct daemon *d = arg;
	ucp_conn_request_attr_t attr = {
	    .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR,
	};
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .conn_request = req,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = peer_on_ep_error,
	};
	char host[INET6_ADDRSTRLEN] = "?", address[96];
	static struct log_limit limit;
	const char *refusal;
	struct peer *p;
	ucs_status_t st;
	uint16_t port = 0;

	memset(&attr.client_address, 0, sizeof(attr.client_address));
	if (ucp_conn_request_query(req, &attr) == UCS_OK) {
		struct sockaddr_storage *ss = &attr.client_address;
		if (ss->ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)ss;
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
		} else if (ss->ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
			inet_ntop(AF_INET6, &in6->sin6_addr, host,
				  sizeof(host));
			port = ntohs(in6->sin6_port);
		}
	}
	snprintf(address, sizeof(address), "%s:%u", host, port);
	/* Not IPv4: ucp_ep_create would overrun a heap buffer of UCX's
	 * (peer_sockaddr_usable). */
	refusal = !peer_sockaddr_usable(&attr.client_address) ? "not IPv4"
		  : !listener_address_allowed(d, &attr.client_address)
		      ? "not in peer_allow"
		      : listener_refusal(d, &attr.client_address);
	if (refusal != NULL || d->shutting_down) {
		d->counters.inbound_refused++;
		/* Rate-limited: a flood must not flood the log too. */
		if (log_limit_pass(&limit, 1.0)) {
			log_warn(
			    "listener_on_conn_request: rejected daemon "
			    "connection from %s: %s (%llu refused so far)",
			    address, refusal ? refusal : "shutting down",
			    (unsigned long long)d->counters.inbound_refused);
		}
		ucp_listener_reject(d->listener, req);
		return;
	}
	p = peer_new(d, address);
	if (p == NULL) {
		ucp_listener_reject(d->listener, req);
		return;
	}
	p->inbound = true;
	p->sa = attr.client_address;
	p->sa_len = sizeof(p->sa);
	/* Before UCX answers: the initiator's tcp may then connect to our
	 * interface sockets, before the handshake can run. */
	p->guard = guard_open(&p->sa, d->cfg->connect_timeout);
	if (p->guard == 0) {
		log_warn("listener_on_conn_request: %s: too many endpoints at "
			 "once for UCX's sockets (%d)",
			 address, GUARD_ENDPOINTS);
		d->counters.inbound_refused++;
		peer_destroy(p);
		ucp_listener_reject(d->listener, req);
		return;
	}
	params.err_handler.arg = p;
	st = ucp_ep_create(d->worker, &params, &p->ep);
	if (st != UCS_OK) {
		log_warn("listener_on_conn_request: %s: ucp_ep_create: %s",
			 address, ucs_status_string(st));
		p->ep = NULL;
		peer_destroy(p);
		return;
	}
	am_attach(p);
	/* Served only once its handshake is done, within connect_timeout. */
	p->state = RMA__V1__PEER_STATE__PEER_CONNECTING;
	p->state_since = daemon_now();
	peer_timer_start(p, d->cfg->connect_timeout);
	log_debug(
	    "listener_on_conn_request: accepted daemon connection from %s",
	    address);
}

int
listener_start(struct daemon *d)
{
	ucp_listener_params_t lparams = {
	    .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
			  UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
	    .conn_handler.cb = listener_on_conn_request,
	    .conn_handler.arg = d,
	};
	ucp_listener_attr_t lattr = {
	    .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR,
	};
	char address[96];
	ucs_status_t st;
	socklen_t len;

	snprintf(address, sizeof(address), "%s:%u", d->cfg->listen_host,
		 d->cfg->listen_port);
	if (peer_sockaddr(d->cfg->listen_host, d->cfg->listen_port, false,
			  &d->listen_sa, &len) < 0) {
		log_error("listener_start: cannot resolve listen address %s",
			  address);
		return -1;
	}
	if (!peer_sockaddr_usable(&d->listen_sa) &&
	    listener_wildcard_v4(&d->listen_sa, &len) < 0) {
		log_error("listener_start: cannot listen on %s: daemons reach "
			  "each other over IPv4 only (UCX 1.13's tcp)",
			  address);
		return -1;
	}
	lparams.sockaddr.addr = (struct sockaddr *)&d->listen_sa;
	lparams.sockaddr.addrlen = len;
	st = ucp_listener_create(d->worker, &lparams, &d->listener);
	if (st != UCS_OK) {
		log_error("listener_start: cannot listen on %s: %s", address,
			  st == UCS_ERR_BUSY ? "the address is already in use"
					     : ucs_status_string(st));
		return -1;
	}
	/* Port 0 asks for any free port: learn which one we got. */
	d->world->learned.listen_port = d->cfg->listen_port;
	if (ucp_listener_query(d->listener, &lattr) == UCS_OK) {
		struct sockaddr_storage *ss = &lattr.sockaddr;
		if (ss->ss_family == AF_INET)
			d->world->learned.listen_port =
			    ntohs(((struct sockaddr_in *)ss)->sin_port);
		else if (ss->ss_family == AF_INET6)
			d->world->learned.listen_port =
			    ntohs(((struct sockaddr_in6 *)ss)->sin6_port);
		/* the guard tells UCX's sockcm from its tcp interfaces */
		guard_set_listener(ss);
	}
	return 0;
}

static bool
listener_accepted_gone(struct daemon *d)
{
	(void)d;
	return guard_listener_close() == 0;
}

/* UCX 1.13's sockcm keeps a connection it accepted, until its first bytes
 * (the private data) arrive, with a pointer to the uct listener
 * (tcp_listener.c, ep->listener), which ucp_listener_destroy frees
 * without looking at its connections: bytes arriving afterwards call the
 * freed listener's conn_request_cb on UCX's async thread
 * (tcp_sockcm_ep.c:660, ucp_cm_server_conn_request_cb), a crash seen in a
 * hand-over's drain. So the listener goes only once none is left: the
 * guard refuses new ones at accept and shuts down those open, and the
 * worker runs until UCX has read their end and dropped them (a peer's
 * drops with its endpoint, all closed by now). */
void
listener_stop(struct daemon *d)
{
	int open;

	if (d->listener == NULL)
		return;
	open = guard_listener_close();
	if (open > 0) {
		worker_progress_until(d, 1.0, listener_accepted_gone);
		log_info("listener_stop: %d connections to the listener shut "
			 "down before it goes, %d still open",
			 open, guard_listener_close());
	}
	ucp_listener_destroy(d->listener);
	d->listener = NULL;
}
