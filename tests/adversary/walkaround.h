/* SPDX-License-Identifier: BSD-2-Clause */
/* The walkaround: an endpoint to a daemon's worker that does not go
 * through its listener, made from our own packed worker address with the
 * daemon's tcp interface ports patched in. */
#ifndef HOSTILE_WALKAROUND_H
#define HOSTILE_WALKAROUND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ucp/api/ucp.h>

/* Creates *ep_p on worker towards process pid's UCX worker (found by its
 * listening tcp sockets other than its listener's port). why says what
 * was done, or what did not work. */
ucs_status_t walkaround_connect(ucp_worker_h worker, pid_t pid,
				uint16_t listener, ucp_err_handler_cb_t cb,
				void *arg, char *why, size_t why_size,
				ucp_ep_h *ep_p);

#endif
