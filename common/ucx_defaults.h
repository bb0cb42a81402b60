/* SPDX-License-Identifier: BSD-2-Clause */
/* rmad's values for UCX parameters, applied unless the environment sets
 * them (UCX users expect the environment to win). One table for rmad and
 * for bench/raw_ucx, which must run UCX exactly as rmad does for its rows
 * to compare like with like. Why each value: common/ucx_defaults.c. */
#ifndef RMA_UCX_DEFAULTS_H
#define RMA_UCX_DEFAULTS_H

#include <stddef.h>

struct ucx_default {
	const char *env;   /* the environment's name for it */
	const char *name;  /* ucp_config_modify's: a transport's parameter
			      goes without the transport's prefix */
	const char *value; /* as ucp_config_modify takes it */
};

/* The table, ended by an entry of NULLs. */
extern const struct ucx_default ucx_defaults[];

/* The value in force for u: the environment's if set (then *from_env is
 * 1), rmad's otherwise. */
const char *ucx_defaults_effective(const struct ucx_default *u, int *from_env);

/* Bytes of an active message's data that fit in one fragment of UCX's tcp
 * transport next to a user header of header_length bytes and a reply
 * endpoint (UCP_AM_SEND_FLAG_REPLY), with the segment size in force: a
 * message this small reaches the receiver's callback straight from the
 * receive buffer, a bigger one only after UCX reassembled it into a
 * buffer of its own. */
size_t ucx_defaults_am_fragment(size_t header_length);

#endif
