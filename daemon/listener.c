/* SPDX-License-Identifier: BSD-2-Clause */
/* The UCX listener: connections other daemons open to this one. Each is
 * checked against peer_allow and the inbound caps (total and per source
 * address: every endpoint costs file descriptors), accepted as an inbound
 * peer in state CONNECTING, and served only once its handshake is done
 * (handshake.c), within connect_timeout. Worker 0 listens.
 *
 * The guard: UCX's own tcp sockets (each worker's tcp interfaces, and the
 * sockcm listener under ucp's) take raw bytes from whoever connects, and
 * UCX 1.13 trusts them (a fragment's length, a put's address) before any
 * handshake of its own or rmad's. So every connection UCX accepts
 * (ucx_accept.c) is checked here first, in UCX's async thread: its source
 * must be in peer_allow, a daemon this one connected to (UCX's tcp opens
 * its connection in the direction the two addresses order, not the one
 * rmad connected in), or this host itself (the destination address:
 * rmad's own workers connect to each other). That thread holds no
 * daemon, so what it reads is shared through atomics, never a lock: */
#include "daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* peer_allow, a copy published whole. A copy that was current is never
 * freed: the async thread may still be reading it. A new one is made only
 * when a reload changes peer_allow, and is about 800 bytes. */
struct listener_allow {
	struct listener_allow *older; /* kept reachable until exit */
	size_t n;
	struct cidr cidrs[CONFIG_LIST_MAX];
};

/* Daemons this one connected to, appended, never changed or removed:
 * a slot's address is written before ready is set (release), and read
 * only once ready is seen (acquire). */
#define LISTENER_HOSTS 1024
struct listener_host {
	atomic_bool ready;
	int family;
	uint8_t addr[16];
};

static _Atomic(struct listener_allow *) listener_allow_now;
static struct listener_host listener_hosts[LISTENER_HOSTS];
static atomic_size_t listener_n_hosts;
static atomic_uint_fast64_t listener_accept_refused;

/* The IP of sa, an IPv4-mapped IPv6 address as IPv4; false for another
 * family. */
static bool
listener_ip(const struct sockaddr *sa, int *family, const uint8_t **addr)
{
	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		*addr = (const uint8_t *)&((const struct sockaddr_in *)sa)
			    ->sin_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
		    &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			*family = AF_INET;
			*addr = a6->s6_addr + 12;
		} else {
			*family = AF_INET6;
			*addr = a6->s6_addr;
		}
		return true;
	}
	return false;
}

static bool
listener_cidrs_match(const struct cidr *cidrs, size_t n,
		     const struct sockaddr *sa)
{
	const uint8_t *addr;
	int family;

	if (!listener_ip(sa, &family, &addr))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (config_cidr_match(&cidrs[i], family, addr))
			return true;
	}
	return false;
}

static bool
listener_address_allowed(struct daemon *d, const struct sockaddr_storage *ss)
{
	return listener_cidrs_match(d->cfg.peer_allow, d->cfg.n_peer_allow,
				    (const struct sockaddr *)ss);
}

int
listener_guard_publish(const struct config *cfg)
{
	struct listener_allow *cur = atomic_load(&listener_allow_now), *next;

	if (cur != NULL && cur->n == cfg->n_peer_allow &&
	    memcmp(cur->cidrs, cfg->peer_allow,
		   cfg->n_peer_allow * sizeof(cfg->peer_allow[0])) == 0)
		return 0;
	next = calloc(1, sizeof(*next));
	if (next == NULL) {
		log_error("listener_guard_publish: out of memory");
		return -1;
	}
	next->older = cur;
	next->n = cfg->n_peer_allow;
	memcpy(next->cidrs, cfg->peer_allow,
	       cfg->n_peer_allow * sizeof(cfg->peer_allow[0]));
	atomic_store_explicit(&listener_allow_now, next, memory_order_release);
	return 0;
}

static bool
listener_host_known(int family, const uint8_t *addr)
{
	size_t n =
	    atomic_load_explicit(&listener_n_hosts, memory_order_acquire);
	size_t len = family == AF_INET ? 4 : 16;

	if (n > LISTENER_HOSTS)
		n = LISTENER_HOSTS;
	for (size_t i = 0; i < n; i++) {
		const struct listener_host *h = &listener_hosts[i];
		if (atomic_load_explicit(&h->ready, memory_order_acquire) &&
		    h->family == family && memcmp(h->addr, addr, len) == 0)
			return true;
	}
	return false;
}

void
listener_guard_add_host(const struct sockaddr_storage *ss)
{
	const uint8_t *addr;
	struct listener_host *h;
	int family;
	size_t i;

	if (!listener_ip((const struct sockaddr *)ss, &family, &addr) ||
	    listener_host_known(family, addr))
		return;
	i = atomic_fetch_add(&listener_n_hosts, 1);
	if (i >= LISTENER_HOSTS) {
		if (i == LISTENER_HOSTS)
			log_warn("listener_guard_add_host: %d daemons "
				 "connected to: UCX's sockets let in further "
				 "ones only from peer_allow",
				 LISTENER_HOSTS);
		return;
	}
	h = &listener_hosts[i];
	h->family = family;
	memcpy(h->addr, addr, family == AF_INET ? 4 : 16);
	atomic_store_explicit(&h->ready, true, memory_order_release);
}

/* Same host: a connection to this host's own address from that same
 * address (the kernel's source for a local destination). */
static bool
listener_same_address(int fd, int family, const uint8_t *addr)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	const uint8_t *laddr;
	int lfamily;

	if (getsockname(fd, (struct sockaddr *)&local, &len) < 0 ||
	    !listener_ip((const struct sockaddr *)&local, &lfamily, &laddr))
		return false;
	return lfamily == family &&
	       memcmp(laddr, addr, family == AF_INET ? 4 : 16) == 0;
}

bool
listener_guard_accept(int fd, const struct sockaddr *peer)
{
	const struct listener_allow *allow =
	    atomic_load_explicit(&listener_allow_now, memory_order_acquire);
	const uint8_t *addr;
	int family;

	if (listener_ip(peer, &family, &addr) &&
	    ((allow != NULL &&
	      listener_cidrs_match(allow->cidrs, allow->n, peer)) ||
	     listener_host_known(family, addr) ||
	     listener_same_address(fd, family, addr)))
		return true;
	atomic_fetch_add_explicit(&listener_accept_refused, 1,
				  memory_order_relaxed);
	return false;
}

uint64_t
listener_guard_refused(void)
{
	return atomic_load_explicit(&listener_accept_refused,
				    memory_order_relaxed);
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
	if (total >= d->cfg.max_inbound_peers)
		return "max_inbound_peers reached";
	if (same >= d->cfg.max_inbound_per_address)
		return "max_inbound_per_address reached";
	return NULL;
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
	static double last_logged;
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
	refusal = !listener_address_allowed(d, &attr.client_address)
		      ? "not in peer_allow"
		      : listener_refusal(d, &attr.client_address);
	if (refusal != NULL || d->shutting_down) {
		d->counters.inbound_refused++;
		/* Rate-limited: a flood must not flood the log too. */
		if (daemon_now() - last_logged >= 1.0) {
			last_logged = daemon_now();
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
	peer_timer_start(p, d->cfg.connect_timeout);
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

	snprintf(address, sizeof(address), "%s:%u", d->cfg.listen_host,
		 d->cfg.listen_port);
	if (peer_sockaddr(d->cfg.listen_host, d->cfg.listen_port, false,
			  &d->listen_sa, &len) < 0) {
		log_error("listener_start: cannot resolve listen address %s",
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
	if (ucp_listener_query(d->listener, &lattr) == UCS_OK) {
		struct sockaddr_storage *ss = &lattr.sockaddr;
		if (ss->ss_family == AF_INET)
			d->cfg.listen_port =
			    ntohs(((struct sockaddr_in *)ss)->sin_port);
		else if (ss->ss_family == AF_INET6)
			d->cfg.listen_port =
			    ntohs(((struct sockaddr_in6 *)ss)->sin6_port);
	}
	return 0;
}

void
listener_stop(struct daemon *d)
{
	if (d->listener) {
		ucp_listener_destroy(d->listener);
		d->listener = NULL;
	}
}
