/* SPDX-License-Identifier: BSD-2-Clause */
/* The guard on UCX's own sockets (guard.c): who may keep a TCP connection
 * that UCX accepted, decided in ucx_accept.c before UCX reads a byte. */
#ifndef RMAD_GUARD_H
#define RMAD_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct cidr;
struct config;

/* A connection to UCX's sockets admitted for one endpoint at most this
 * many times (UCX 1.13's tcp opens one per lane and device, two when both
 * ends connect at once). */
#define GUARD_CONNS_PER_ENDPOINT 8
/* Endpoints the guard can admit connections for at once (every worker's
 * outbound and inbound endpoints together). */
#define GUARD_ENDPOINTS 4096

/* Loop threads. peer_allow, published at start and on every reload. */
int guard_publish_allow(const struct config *cfg);
/* The ucp listener's bound address (with its port): connections to it
 * are UCX's sockcm, open to peer_allow; all others are UCX's tcp
 * interface sockets, open only to the endpoints below. Each listener
 * started calls it, and takes connections again after a
 * guard_listener_close of the one before. */
void guard_set_listener(const struct sockaddr_storage *sa);
/* An endpoint is about to be created to (or was accepted from) the host
 * of remote: UCX's tcp may connect from it to an interface socket, at most
 * GUARD_CONNS_PER_ENDPOINT times and for window seconds, or until
 * guard_seal. Returns the entry (never 0), or 0 when GUARD_ENDPOINTS
 * endpoints hold one already. */
uint32_t guard_open(const struct sockaddr_storage *remote, double window);
/* The endpoint's handshake is done: no further connection for it. */
void guard_seal(uint32_t entry);
/* The endpoint failed, closed or was refused: its entry goes; *entry is
 * cleared (0 is accepted and ignored). */
void guard_close(uint32_t *entry);

/* UCX's async thread (or a worker thread catching up on its events):
 * may connection fd, accepted on listen_fd from peer, stay? A refusal is
 * counted; the caller closes fd. */
bool guard_accept(int listen_fd, int fd, const struct sockaddr *peer);
/* A loop thread, before dialing sa: the uid of the socket listening at
 * sa, when sa is an address of this host and something listens there
 * (1), 0 when sa is another host's or nothing listens, -1 when the
 * kernel did not say. Between two daemons of one host, UCX's tcp opens
 * its lanes in the direction their ports order and each guard refuses a
 * local socket of another uid than its own (root's too, unless it runs
 * as root): daemons of different users would connect about half the
 * time, so they do not try. */
int guard_local_listener_owner(const struct sockaddr_storage *sa, uid_t *uid_p);

/* A loop thread, before the ucp listener is destroyed: from now on every
 * connection to the listener is refused at accept, and each one it
 * accepted that is still open is shut down (both ways), for UCX to drop.
 * Returns how many were still open (call again until 0). */
int guard_listener_close(void);

/* Connections refused at accept, all reasons together. */
uint64_t guard_refused(void);
/* ... of them, from a local socket of another user (or of none). */
uint64_t guard_refused_local_user(void);

/* Is the address of sa in cidrs? (An IPv4-mapped IPv6 address counts as
 * IPv4.) */
bool guard_cidrs_match(const struct cidr *cidrs, size_t n,
		       const struct sockaddr *sa);

#endif
