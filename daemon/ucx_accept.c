/* SPDX-License-Identifier: BSD-2-Clause */
/* UCX's accept(), for two faults of UCX 1.13; linked into rmad alone.
 *
 * UCX's async thread queues the events it cannot deliver while the worker
 * is busy, keyed by file descriptor, and never drops them when that
 * descriptor's handler goes away (ucs/async/async.c, missed events). In a
 * flood of connections that come and go, a connection closed while an
 * event for it waits frees its descriptor, the next accepted connection
 * gets the same number (the kernel hands out the lowest free one), and the
 * stale event reaches the new connection's handler: UCX then aborts the
 * whole process (tcp_sockcm_ep.c:416, "Assertion ... failed") or crashes.
 * Any host that can reach the listener could do that at will.
 *
 * UCX accepts with accept(3); rmad itself uses accept4. This definition
 * takes the place of libc's for UCX (the executable's symbols come first)
 * and moves every accepted descriptor to a number not handed out
 * recently: upward from the middle of the descriptor limit, in turn, so a
 * just-closed number is not reused until the others were. When no such
 * number is free the descriptor stays where the kernel put it. That
 * leaves it to chance (a low descriptor limit, a flood, a worker that
 * sleeps with missed events queued, which nothing wakes it for), so the
 * number of a socket accepted here is also held after UCX closes it, until
 * worker 0 has read what UCX missed for it (ucx_close.c, fdhold.c).
 *
 * It is also the guard on UCX's sockets (guard.c says who may stay):
 * UCX 1.13's tcp trusts the bytes of any connection to them (a PUT_REQ is
 * a memcpy to any address, uct_tcp_ep_progress_am_rx), so one that may
 * not stay is closed here, before UCX reads a byte of it, and the next is
 * accepted in its place. UCX's listening sockets are non-blocking, so this ends
 * with EAGAIN when none is left, as UCX expects; any other errno would
 * make UCX close its listening socket. EAGAIN also ends a long run of
 * refusals, so a flood does not hold UCX's async thread: UCX watches its
 * listening sockets level-triggered and comes back for the rest. */
#include "daemon.h"
#include "fdhold.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);

enum { UCX_ACCEPT_REFUSALS_PER_CALL = 64 };

static int
ucx_accept_move(int fd)
{
	static int next; /* the lowest number to try next */
	struct rlimit rl;
	int low, high, moved;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < 64)
		return fd;
	high = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
	low = high / 2;
	if (next < low || next >= high)
		next = low;
	moved = fcntl(fd, F_DUPFD_CLOEXEC, next);
	if (moved < 0 && next > low) /* wrap around once */
		moved = fcntl(fd, F_DUPFD_CLOEXEC, low);
	if (moved < 0)
		return fd;
	close(fd);
	next = moved + 1;
	return moved;
}

int
accept(int sockfd, struct sockaddr *addr, socklen_t *addrlen)
{
	static accept_fn real;
	int fd, saved;

	if (real == NULL)
		real = (accept_fn)dlsym(RTLD_NEXT, "accept");
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	for (int refused = 0; refused < UCX_ACCEPT_REFUSALS_PER_CALL;
	     refused++) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);

		fd = real(sockfd, (struct sockaddr *)&peer, &len);
		if (fd < 0)
			return fd;
		saved = errno;
		if (!guard_accept(sockfd, fd, (struct sockaddr *)&peer)) {
			close(fd); /* counted by the guard */
			errno = saved;
			continue;
		}
		if (addr != NULL && addrlen != NULL) {
			memcpy(addr, &peer, len < *addrlen ? len : *addrlen);
			*addrlen = len;
		}
		fd = ucx_accept_move(fd);
		fdhold_track(fd);
		errno = saved;
		return fd;
	}
	errno = EAGAIN;
	return -1;
}
