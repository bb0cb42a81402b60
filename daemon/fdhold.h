/* SPDX-License-Identifier: BSD-2-Clause */
/* Descriptor numbers of UCX's accepted sockets, held after UCX closes
 * them until worker 0 has read the events UCX missed for them (fdhold.c). */
#ifndef RMAD_FDHOLD_H
#define RMAD_FDHOLD_H

#include <stdbool.h>
#include <stdint.h>

/* ucx_accept.c: fd is a socket UCX accepted, at the number it keeps. */
void fdhold_track(int fd);
/* ucx_accept.c's close(): when fd is one of those, its socket is closed
 * and its number held (true); otherwise the caller closes it (false). */
bool fdhold_close(int fd);
/* Worker 0 at its start (its mailbox's eventfd) and stop (-1): written
 * when a number is held, so that an idle worker 0 wakes, progresses and
 * releases it. The first call opens the placeholder the numbers are held
 * with: without it nothing is held, and the daemon's descriptor count
 * does not grow at the first close. */
void fdhold_wake_on(int efd);
/* Worker 0, around a progress call: the numbers held before mark are
 * released once a progress call that began after mark has returned. */
uint64_t fdhold_mark(void);
void fdhold_release(uint64_t mark);

#endif
