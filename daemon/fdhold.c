/* SPDX-License-Identifier: BSD-2-Clause */
/* Descriptor numbers of UCX's accepted sockets, held after UCX closes
 * them, for a fault of UCX 1.13.
 *
 * UCX's async thread queues an event it cannot deliver while a worker
 * holds the async context (ucs_async_handler_dispatch, "missed"), keyed by
 * descriptor number, and the worker hands it, at its next
 * ucp_worker_progress (__ucs_async_poll_missed), to whatever handler then
 * has that number, with the events of the old one. A sockcm connection
 * closed with a write event queued (a reject being sent, a reply after
 * ucp_ep_create) and a connection accepted at the same number before that
 * progress call: the new connection, which has sent nothing, gets the
 * write event and UCX aborts (tcp_sockcm_ep.c:416, the state assertion in
 * uct_tcp_sockcm_ep_progress_send; fixed upstream after 1.13 by
 * "UCS/ASYNC: Filter stale missed fd events"). ucx_accept.c moves accepted
 * sockets to numbers not used recently, but under a flood with the
 * descriptor limit low the numbers come round again.
 *
 * So when UCX closes one of the sockets it accepted, the socket is closed
 * but its number stays taken (/dev/null, dup3 over it) until worker 0,
 * which owns the listener and its sockcm connections, has returned from
 * a progress call that began after the close: every event queued for the
 * old socket was pushed before UCX closed it (ucs_async_remove_handler
 * waits for its handler) and has been read then, finding no handler.
 *
 * close() runs on UCX's async thread and on worker threads: the held
 * numbers are under a mutex, the tracked ones in an atomic map. */
#include "fdhold.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
	FDHOLD_MAX_FD = 65536, /* ucx_accept.c moves below this */
	FDHOLD_SLOTS = 256,    /* held at once (descriptors); beyond, closed */
};

static atomic_bool fdhold_tracked[FDHOLD_MAX_FD];
static pthread_mutex_t fdhold_lock = PTHREAD_MUTEX_INITIALIZER;
static int fdhold_placeholder = -1;   /* /dev/null, opened with the wake */
static int fdhold_wake_fd = -1;	      /* worker 0's mailbox (eventfd) */
static int fdhold_held[FDHOLD_SLOTS]; /* a ring, oldest at head */
/* held: [head, tail), both written under the lock */
static _Atomic uint64_t fdhold_head, fdhold_tail;

void
fdhold_track(int fd)
{
	if (fd >= 0 && fd < FDHOLD_MAX_FD)
		atomic_store(&fdhold_tracked[fd], true);
}

bool
fdhold_close(int fd)
{
	bool held = false;

	if (fd < 0 || fd >= FDHOLD_MAX_FD ||
	    !atomic_load_explicit(&fdhold_tracked[fd], memory_order_relaxed) ||
	    !atomic_exchange(&fdhold_tracked[fd], false))
		return false;
	pthread_mutex_lock(&fdhold_lock);
	/* dup3 closes the socket at fd and takes the number in one step */
	if (fdhold_placeholder >= 0 &&
	    fdhold_tail - fdhold_head < FDHOLD_SLOTS &&
	    dup3(fdhold_placeholder, fd, O_CLOEXEC) == fd) {
		fdhold_held[fdhold_tail++ % FDHOLD_SLOTS] = fd;
		held = true;
	}
	/* An idle worker 0 would keep the number until its next wake-up:
	 * wake it now (a full counter is read soon anyway). */
	if (held && fdhold_wake_fd >= 0) {
		uint64_t one = 1;

		if (write(fdhold_wake_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: a wake-up is pending already */
		}
	}
	pthread_mutex_unlock(&fdhold_lock);
	return held;
}

void
fdhold_wake_on(int efd)
{
	pthread_mutex_lock(&fdhold_lock);
	if (fdhold_placeholder < 0)
		fdhold_placeholder = open("/dev/null", O_RDONLY | O_CLOEXEC);
	fdhold_wake_fd = efd;
	pthread_mutex_unlock(&fdhold_lock);
}

uint64_t
fdhold_mark(void)
{
	return atomic_load(&fdhold_tail);
}

void
fdhold_release(uint64_t mark)
{
	if (atomic_load(&fdhold_head) >= mark)
		return; /* the common case: nothing held */
	pthread_mutex_lock(&fdhold_lock);
	/* the system call: rmad's close() (ucx_close.c) comes here */
	while (fdhold_head < mark && fdhold_head < fdhold_tail)
		syscall(SYS_close, fdhold_held[fdhold_head++ % FDHOLD_SLOTS]);
	pthread_mutex_unlock(&fdhold_lock);
}
