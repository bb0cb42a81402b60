/* SPDX-License-Identifier: BSD-2-Clause */
/* The guard on UCX's own sockets: each worker's tcp interface sockets and
 * the sockcm socket under ucp's listener. UCX 1.13's tcp trusts the bytes
 * of any connection to them before any handshake of its own or rmad's: a
 * PUT_REQ fragment (UCT AM id 33) is a memcpy to the address the sender
 * names, handled by uct_tcp_ep_progress_am_rx (src/uct/tcp/tcp_ep.c,
 * v1.13.1) for every connection once the 8-byte magic number arrived,
 * whatever the state of the endpoint. No setting refuses it on the
 * receiving side: UCX_TCP_PUT_ENABLE only decides whether this side's
 * uct_tcp_iface_query offers put (UCT_IFACE_FLAG_PUT_ZCOPY) to its own
 * senders. So who may keep a connection to these sockets is who may write
 * rmad's memory, and that is decided here, at accept (ucx_accept.c),
 * before UCX reads a byte:
 *
 *  - A local source (a socket of this network namespace, which the kernel
 *    finds by its 4-tuple through NETLINK_SOCK_DIAG) is another program of
 *    this host: it stays only if that socket is ESTABLISHED (or SYN_SENT)
 *    and belongs to rmad's own uid or to root. A socket its owner closed
 *    is orphaned (FIN_WAIT, TIME_WAIT: the kernel reports uid 0 for these),
 *    and a local source whose socket is not found at all is refused too.
 *  - Then the address: a connection from this host's own address to that
 *    same address (rmad's workers, or another local rmad of the same uid)
 *    stays; at the listener's port, one from peer_allow (rmad's listener
 *    then decides, and rejects what it will not serve); at an interface
 *    socket, one from the host of an endpoint rmad created or accepted, at
 *    most GUARD_CONNS_PER_ENDPOINT times per endpoint, until its
 *    handshake is done and within connect_timeout. UCX's tcp connects a
 *    lane in the direction the two interface addresses order, whoever
 *    dialed: the lower address connects to the higher one
 *    (uct_tcp_cm_ep_accept_conn in src/uct/tcp/tcp_cm.c, memcmp of the
 *    addresses as ucs_sockaddr_cmp does), so the far end of either kind
 *    of endpoint may connect here before rmad's handshake can run over
 *    that lane, but only from a lower address than ours: one from a
 *    higher address is never UCX's, and is refused.
 *
 * What this leaves, for the threat model. Root and rmad's own uid may
 * still write rmad's memory through these sockets (they can through
 * ptrace or /proc/PID/mem too). A host inside peer_allow that has not
 * proved the cluster key can still open a connection to the listener's
 * port (sockcm's bytes then reach UCX before rmad hears of it), and,
 * once rmad accepted that endpoint, up to GUARD_CONNS_PER_ENDPOINT raw
 * connections to an interface socket until the handshake is done or
 * connect_timeout passed, if its address is the lower one: in that
 * window its PUT_REQ lands, so peer_allow, not the key, is the boundary
 * for rmad's memory. A host rmad dials for a client (PeerConnect) gets
 * the same window for that endpoint, whether or not it is in peer_allow;
 * the window closes for good when the connect fails or its handshake
 * completes, and is never opened without an endpoint.
 *
 * This runs in UCX's async thread, or in a worker thread catching up on
 * the events it missed: it holds no daemon and takes no lock. What the
 * loops publish is read through atomics: peer_allow as a copy published
 * whole, the endpoint entries each under a sequence count. */
#include "daemon.h"
#include "guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* peer_allow, a copy published whole. A copy that was current is never
 * freed: the async thread may still be reading it. A new one is made only
 * when a reload changes peer_allow, and is about 800 bytes. */
struct guard_allow {
	struct guard_allow *older; /* kept reachable until exit */
	size_t n;
	struct cidr cidrs[CONFIG_LIST_MAX];
};

/* One endpoint's entry. A loop thread claims a free one (used), and
 * writes it between two increments of seq (odd while written); the async
 * thread reads it only between two equal, even values of seq. */
struct guard_entry {
	atomic_bool used;
	atomic_uint seq;
	atomic_int family;
	_Atomic uint32_t addr[4];
	_Atomic double until; /* daemon_now(); 0: sealed or closed */
	atomic_uint admitted; /* connections admitted for it */
};

/* An address and port, IPv4-mapped IPv6 as IPv4. */
struct guard_ip {
	int family;
	uint8_t addr[16];
	uint16_t port; /* network order */
};

enum guard_owner {
	GUARD_OWNER_OURS,   /* a local socket of our uid or root */
	GUARD_OWNER_OTHER,  /* a local socket of another uid, or closed */
	GUARD_OWNER_REMOTE, /* no socket here, and not a local address */
	GUARD_OWNER_UNKNOWN /* the kernel did not say: refused */
};

static _Atomic(struct guard_allow *) guard_allow_now;
static struct guard_entry guard_entries[GUARD_ENDPOINTS];
static atomic_size_t guard_entries_high; /* no entry used at or above */
static struct guard_ip guard_listener;	 /* written once, before: */
static atomic_bool guard_listener_set;
static atomic_bool guard_listener_closing; /* guard_listener_close */
static atomic_uint_fast64_t guard_n_refused, guard_n_refused_local;

static size_t
guard_addr_len(int family)
{
	return family == AF_INET ? 4 : 16;
}

static bool
guard_ip_of(const struct sockaddr *sa, struct guard_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		ip->family = AF_INET;
		memcpy(ip->addr, &in->sin_addr, 4);
		ip->port = in->sin_port;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			ip->family = AF_INET;
			memcpy(ip->addr, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			ip->family = AF_INET6;
			memcpy(ip->addr, in6->sin6_addr.s6_addr, 16);
		}
		ip->port = in6->sin6_port;
		return true;
	}
	return false;
}

static bool
guard_ip_same_host(const struct guard_ip *x, const struct guard_ip *y)
{
	return x->family == y->family &&
	       memcmp(x->addr, y->addr, guard_addr_len(x->family)) == 0;
}

static bool
guard_ip_unspecified(const struct guard_ip *ip)
{
	static const uint8_t zero[16];

	return memcmp(ip->addr, zero, guard_addr_len(ip->family)) == 0;
}

bool
guard_cidrs_match(const struct cidr *cidrs, size_t n, const struct sockaddr *sa)
{
	struct guard_ip ip;

	if (!guard_ip_of(sa, &ip))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (config_cidr_match(&cidrs[i], ip.family, ip.addr))
			return true;
	}
	return false;
}

/* ---- what the loops publish ----------------------------------------- */

int
guard_publish_allow(const struct config *cfg)
{
	struct guard_allow *cur = atomic_load(&guard_allow_now), *next;

	if (cur != NULL && cur->n == cfg->n_peer_allow &&
	    memcmp(cur->cidrs, cfg->peer_allow,
		   cfg->n_peer_allow * sizeof(cfg->peer_allow[0])) == 0)
		return 0;
	next = calloc(1, sizeof(*next));
	if (next == NULL) {
		log_error("guard_publish_allow: out of memory");
		return -1;
	}
	next->older = cur;
	next->n = cfg->n_peer_allow;
	memcpy(next->cidrs, cfg->peer_allow,
	       cfg->n_peer_allow * sizeof(cfg->peer_allow[0]));
	atomic_store_explicit(&guard_allow_now, next, memory_order_release);
	return 0;
}

void
guard_set_listener(const struct sockaddr_storage *sa)
{
	/* A listener of a start that failed was closed with it
	 * (guard_listener_close); the one main.c starts again on the last
	 * good configuration takes connections again. */
	atomic_store(&guard_listener_closing, false);
	/* Once: one listener per process, for its whole life. Until then
	 * every socket is an interface socket, the narrower door. */
	if (atomic_load(&guard_listener_set) ||
	    !guard_ip_of((const struct sockaddr *)sa, &guard_listener))
		return;
	atomic_store_explicit(&guard_listener_set, true, memory_order_release);
}

uint32_t
guard_open(const struct sockaddr_storage *remote, double window)
{
	struct guard_ip ip;
	size_t high;

	if (!guard_ip_of((const struct sockaddr *)remote, &ip))
		return 0;
	for (size_t i = 0; i < GUARD_ENDPOINTS; i++) {
		struct guard_entry *e = &guard_entries[i];
		bool free_slot = false;
		uint32_t words[4] = {0};

		if (!atomic_compare_exchange_strong(&e->used, &free_slot, true))
			continue;
		memcpy(words, ip.addr, guard_addr_len(ip.family));
		atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		atomic_store_explicit(&e->family, ip.family,
				      memory_order_relaxed);
		for (int k = 0; k < 4; k++)
			atomic_store_explicit(&e->addr[k], words[k],
					      memory_order_relaxed);
		atomic_store_explicit(&e->admitted, 0, memory_order_relaxed);
		atomic_store_explicit(&e->until, daemon_now() + window,
				      memory_order_relaxed);
		atomic_fetch_add_explicit(&e->seq, 1, memory_order_release);
		high = atomic_load(&guard_entries_high);
		while (high < i + 1 && !atomic_compare_exchange_weak(
					   &guard_entries_high, &high, i + 1))
			;
		return (uint32_t)i + 1;
	}
	return 0;
}

void
guard_seal(uint32_t entry)
{
	if (entry == 0 || entry > GUARD_ENDPOINTS)
		return;
	atomic_store_explicit(&guard_entries[entry - 1].until, 0.0,
			      memory_order_release);
}

void
guard_close(uint32_t *entry)
{
	struct guard_entry *e;

	if (*entry == 0 || *entry > GUARD_ENDPOINTS)
		return;
	e = &guard_entries[*entry - 1];
	*entry = 0;
	/* Sealed first: a reader that already matched it and admits
	 * afterwards sees the window closed (guard_entry_admit). */
	atomic_store_explicit(&e->until, 0.0, memory_order_release);
	atomic_store_explicit(&e->used, false, memory_order_release);
}

/* ---- UCX's async thread --------------------------------------------- */

/* One entry for src's host that may still admit a connection: taken. */
static bool
guard_entry_admit(const struct guard_ip *src, double now)
{
	size_t high =
	    atomic_load_explicit(&guard_entries_high, memory_order_acquire);

	for (size_t i = 0; i < high && i < GUARD_ENDPOINTS; i++) {
		struct guard_entry *e = &guard_entries[i];
		unsigned s1, s2;
		uint32_t words[4];
		int family;
		double until;

		if (!atomic_load_explicit(&e->used, memory_order_acquire))
			continue;
		s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
		if (s1 & 1)
			continue; /* being written: not ready to admit */
		family = atomic_load_explicit(&e->family, memory_order_relaxed);
		for (int k = 0; k < 4; k++)
			words[k] = atomic_load_explicit(&e->addr[k],
							memory_order_relaxed);
		until = atomic_load_explicit(&e->until, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&e->seq, memory_order_relaxed);
		if (s1 != s2 || family != src->family || until <= now ||
		    memcmp(words, src->addr, guard_addr_len(family)) != 0)
			continue;
		if (atomic_load(&e->admitted) >= GUARD_CONNS_PER_ENDPOINT ||
		    atomic_fetch_add(&e->admitted, 1) >=
			GUARD_CONNS_PER_ENDPOINT)
			continue;
		/* Closed or reused meanwhile: not for this one after all. */
		if (atomic_load(&e->seq) != s1 || atomic_load(&e->until) <= now)
			continue;
		return true;
	}
	return false;
}

/* The kernel's answer to one netlink request, within a deadline (it is
 * written during the send; the deadline only bounds the unexpected). */
static ssize_t
guard_netlink_ask(int protocol, const void *req, size_t len, void *answer,
		  size_t size)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	ssize_t n = -1;
	int fd;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, protocol);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
	    sendto(fd, req, len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) == (ssize_t)len)
		n = recv(fd, answer, size, 0);
	close(fd);
	return n;
}

/* Is ip an address of this host (this network namespace)? Asked as
 * `ip route get` does: local addresses have routes of type local,
 * whatever net.ipv4.ip_nonlocal_bind says. 1 yes, 0 no, -1 unknown. */
static int
guard_is_local_address(const struct guard_ip *ip)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		struct rtattr rta;
		uint8_t addr[16];
	} req;
	union {
		struct nlmsghdr nh;
		char buf[1024];
	} ans;
	size_t alen = guard_addr_len(ip->family);
	const struct nlmsghdr *nh = &ans.nh;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)) + RTA_SPACE(alen);
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.rt.rtm_family = ip->family;
	req.rt.rtm_dst_len = alen * 8;
	req.rta.rta_type = RTA_DST;
	req.rta.rta_len = RTA_LENGTH(alen);
	memcpy(req.addr, ip->addr, alen);
	n = guard_netlink_ask(NETLINK_ROUTE, &req, req.nh.nlmsg_len, &ans,
			      sizeof(ans));
	if (n < 0 || !NLMSG_OK(nh, (size_t)n))
		return -1;
	if (nh->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *err = NLMSG_DATA(nh);

		if (NLMSG_PAYLOAD(nh, 0) < sizeof(*err))
			return -1;
		/* no route to it: certainly not one of ours */
		return err->error == -ENETUNREACH || err->error == -EHOSTUNREACH
			   ? 0
			   : -1;
	}
	if (nh->nlmsg_type != RTM_NEWROUTE ||
	    NLMSG_PAYLOAD(nh, 0) < sizeof(struct rtmsg))
		return -1;
	return ((const struct rtmsg *)NLMSG_DATA(nh))->rtm_type == RTN_LOCAL;
}

/* An address as inet_diag reports it (an IPv6 socket connected to an
 * IPv4 address shows it IPv4-mapped) is ip's. */
static bool
guard_diag_addr_is(int family, const uint32_t *words, const struct guard_ip *ip)
{
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	struct guard_ip seen;

	if (family != AF_INET6)
		return family == ip->family && memcmp(words, ip->addr, 4) == 0;
	memcpy(&in6.sin6_addr, words, 16);
	return guard_ip_of((struct sockaddr *)&in6, &seen) &&
	       guard_ip_same_host(&seen, ip);
}

/* The kernel's exact inet_diag lookup of the TCP socket whose local end
 * is src (and whose remote end is dst, when dst is not 0): 1 and *m
 * filled when found, 0 when there is no such socket, -1 when the kernel
 * did not say. */
static int
guard_diag_lookup(const struct guard_ip *src, const struct guard_ip *dst,
		  struct inet_diag_msg *m)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 req;
	} req;
	union {
		struct nlmsghdr nh;
		char buf[1024];
	} ans;
	const struct nlmsghdr *nh = &ans.nh;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.req.sdiag_family = src->family;
	req.req.sdiag_protocol = IPPROTO_TCP;
	req.req.idiag_states = ~0u;
	req.req.id.idiag_sport = src->port;
	memcpy(req.req.id.idiag_src, src->addr, guard_addr_len(src->family));
	if (dst != NULL) {
		req.req.id.idiag_dport = dst->port;
		memcpy(req.req.id.idiag_dst, dst->addr,
		       guard_addr_len(dst->family));
	}
	req.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	n = guard_netlink_ask(NETLINK_SOCK_DIAG, &req, sizeof(req), &ans,
			      sizeof(ans));
	if (n < 0 || !NLMSG_OK(nh, (size_t)n))
		return -1;
	if (nh->nlmsg_type == NLMSG_ERROR) {
		if (NLMSG_PAYLOAD(nh, 0) < sizeof(struct nlmsgerr))
			return -1;
		return ((const struct nlmsgerr *)NLMSG_DATA(nh))->error ==
			       -ENOENT
			   ? 0
			   : -1;
	}
	if (nh->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    NLMSG_PAYLOAD(nh, 0) < sizeof(*m))
		return -1;
	memcpy(m, NLMSG_DATA(nh), sizeof(*m));
	return 1;
}

/* Whose is the socket at the other end of an accepted connection? The
 * kernel looks it up by the exact 4-tuple (its local end is our peer). */
static enum guard_owner
guard_owner_of(const struct guard_ip *src, const struct guard_ip *dst)
{
	struct inet_diag_msg m;
	uid_t uid;

	switch (guard_diag_lookup(src, dst, &m)) {
	case 1:
		break;
	case 0:
		/* No such socket here: another host, or a local one gone
		 * (reset, or its orphan expired) with its bytes still
		 * queued for us. */
		switch (guard_is_local_address(src)) {
		case 0:
			return GUARD_OWNER_REMOTE;
		case 1:
			return GUARD_OWNER_OTHER;
		default:
			return GUARD_OWNER_UNKNOWN;
		}
	default:
		return GUARD_OWNER_UNKNOWN;
	}
	/* The lookup falls back to a listening socket on the same address
	 * and port: only the connecting socket itself counts. */
	if (m.id.idiag_sport != src->port || m.id.idiag_dport != dst->port ||
	    !guard_diag_addr_is(m.idiag_family, m.id.idiag_src, src) ||
	    !guard_diag_addr_is(m.idiag_family, m.id.idiag_dst, dst))
		return GUARD_OWNER_OTHER;
	/* Closed by its owner, it is orphaned (uid 0 in TIME_WAIT): only
	 * a socket still open in its owner's hands is asked about. */
	if (m.idiag_state != TCP_ESTABLISHED && m.idiag_state != TCP_SYN_SENT)
		return GUARD_OWNER_OTHER;
	uid = m.idiag_uid;
	return uid == geteuid() || uid == 0 ? GUARD_OWNER_OURS
					    : GUARD_OWNER_OTHER;
}

int
guard_local_listener_owner(const struct sockaddr_storage *sa, uid_t *uid_p)
{
	struct inet_diag_msg m;
	struct guard_ip ip;
	int found;

	if (!guard_ip_of((const struct sockaddr *)sa, &ip))
		return -1;
	/* Another host's address first: a wildcard listener here would
	 * answer for any address. */
	switch (guard_is_local_address(&ip)) {
	case 0:
		return 0;
	case 1:
		break;
	default:
		return -1;
	}
	found = guard_diag_lookup(&ip, NULL, &m);
	if (found != 1)
		return found;
	if (m.idiag_state != TCP_LISTEN || m.id.idiag_sport != ip.port)
		return 0;
	*uid_p = m.idiag_uid;
	return 1;
}

static bool
guard_is_listener(int listen_fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct guard_ip ip;

	if (!atomic_load_explicit(&guard_listener_set, memory_order_acquire) ||
	    getsockname(listen_fd, (struct sockaddr *)&ss, &len) < 0 ||
	    !guard_ip_of((struct sockaddr *)&ss, &ip))
		return false;
	return ip.port == guard_listener.port &&
	       (guard_ip_unspecified(&guard_listener) ||
		guard_ip_same_host(&ip, &guard_listener));
}

static bool
guard_refuse(bool local_user)
{
	atomic_fetch_add_explicit(&guard_n_refused, 1, memory_order_relaxed);
	if (local_user)
		atomic_fetch_add_explicit(&guard_n_refused_local, 1,
					  memory_order_relaxed);
	return false;
}

bool
guard_accept(int listen_fd, int fd, const struct sockaddr *peer)
{
	const struct guard_allow *allow =
	    atomic_load_explicit(&guard_allow_now, memory_order_acquire);
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct guard_ip src, dst;

	/* Before the other checks: rmad's own daemons are refused too. */
	if (atomic_load(&guard_listener_closing) &&
	    guard_is_listener(listen_fd))
		return guard_refuse(false);
	if (!guard_ip_of(peer, &src) ||
	    getsockname(fd, (struct sockaddr *)&local, &len) < 0 ||
	    !guard_ip_of((struct sockaddr *)&local, &dst) ||
	    src.family != dst.family)
		return guard_refuse(false);
	switch (guard_owner_of(&src, &dst)) {
	case GUARD_OWNER_OURS:
		/* this host's own daemons */
		if (guard_ip_same_host(&src, &dst))
			return true;
		break;
	case GUARD_OWNER_OTHER:
		return guard_refuse(true);
	case GUARD_OWNER_REMOTE:
		break;
	default:
		return guard_refuse(false);
	}
	if (guard_is_listener(listen_fd)) {
		if (allow != NULL &&
		    guard_cidrs_match(allow->cidrs, allow->n, peer))
			return true;
		return guard_refuse(false);
	}
	if (memcmp(src.addr, dst.addr, guard_addr_len(src.family)) < 0 &&
	    guard_entry_admit(&src, daemon_now()))
		return true;
	return guard_refuse(false);
}

/* A connection the listener accepted: a connected socket (not the
 * listening one) whose local end is the listener's address and port. */
static bool
guard_is_accepted_at_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int listening = 1;
	socklen_t optlen = sizeof(listening);
	struct guard_ip ip;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    !guard_ip_of((struct sockaddr *)&ss, &ip) ||
	    ip.port != guard_listener.port ||
	    (!guard_ip_unspecified(&guard_listener) &&
	     !guard_ip_same_host(&ip, &guard_listener)))
		return false;
	return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) ==
		   0 &&
	       !listening;
}

int
guard_listener_close(void)
{
	struct dirent *e;
	int open = 0;
	DIR *dir;

	if (!atomic_load_explicit(&guard_listener_set, memory_order_acquire))
		return 0;
	/* Seen by every accept that ends after this store: the ones before
	 * it are in the descriptor table read below. */
	atomic_store(&guard_listener_closing, true);
	dir = opendir("/proc/self/fd");
	if (dir == NULL)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);

		if (*end != '\0' || end == e->d_name || fd == dirfd(dir) ||
		    !guard_is_accepted_at_listener((int)fd))
			continue;
		/* UCX reads the end of the stream and drops it. */
		shutdown((int)fd, SHUT_RDWR);
		open++;
	}
	closedir(dir);
	return open;
}

uint64_t
guard_refused(void)
{
	return atomic_load_explicit(&guard_n_refused, memory_order_relaxed);
}

uint64_t
guard_refused_local_user(void)
{
	return atomic_load_explicit(&guard_n_refused_local,
				    memory_order_relaxed);
}
