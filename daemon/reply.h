/* SPDX-License-Identifier: BSD-2-Clause */
/* reply.c: the answers to a client's requests, the one place that writes
 * them. */
#ifndef RMAD_REPLY_H
#define RMAD_REPLY_H

#include <stdint.h>

#include "rma.pb-c.h"

typedef Rma__V1__Status wire_status_t;

struct conn;

/* A request to answer: its client's connection and its id. A waiter keeps
 * one while a peer is asked (struct peer_waiter); it goes with its client
 * (peer_conn_gone), so the connection needs no reference of its own. */
struct reply_to {
	struct conn *conn;
	uint64_t id;
};

static inline struct reply_to
reply_to(struct conn *c, uint64_t id)
{
	return (struct reply_to){c, id};
}

/* The reply to `to`, with its id set; fd (or -1) goes with it. */
void reply_send(struct reply_to to, Rma__V1__Reply *reply, int fd);
/* A reply of status st and no body, the detail formatted. */
void reply_error(struct reply_to to, wire_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
