/* SPDX-License-Identifier: BSD-2-Clause */
#include "rma_internal.h"

/* Indexed by the negated status; the phrases are what rmactl prints, so
 * they read as the tail of "rmactl: put: ...". */
static const char *const status_names[] = {
    [0] = "success",
    [1] = "invalid argument",
    [2] = "protocol error",
    [3] = "protocol version mismatch",
    [4] = "unknown request",
    [5] = "out of memory",
    [6] = "no such region",
    [7] = "out of bounds",
    [8] = "bad descriptor",
    [9] = "stale descriptor",
    [10] = "no such peer or remote",
    [11] = "peer unreachable",
    [12] = "peer rejected the connection",
    [13] = "connection to peer reset",
    [14] = "timed out",
    [15] = "canceled",
    [16] = "not an rmad",
    [17] = "daemon shutting down",
    [18] = "limit reached",
    [19] = "permission denied",
    [20] = "transport error",
    [21] = "daemon gone",
    [22] = "internal error",
    [23] = "daemon taken over, retry",
};

#define STATUS_COUNT (sizeof(status_names) / sizeof(status_names[0]))

RMA_API const char *
rma_strerror(rma_status_t status)
{
	if (status == RMA_INPROGRESS)
		return "in progress";
	if (status <= 0 && (size_t)-status < STATUS_COUNT)
		return status_names[-status];
	return "unknown error";
}

rma_status_t
status_from_wire(int wire)
{
	/* A status newer than this library is still a failure. */
	if (wire < 0 || (size_t)wire >= STATUS_COUNT)
		return RMA_ERR_INTERNAL;
	return (rma_status_t)-wire;
}
