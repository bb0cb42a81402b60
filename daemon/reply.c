/* SPDX-License-Identifier: BSD-2-Clause */
/* The answers to a client's requests, the one place that writes them:
 * for a request answered at once (request.c, status.c) and for one that
 * waited for a peer (peer_connect.c, peer.c, resolve.c). A struct
 * reply_to names the request; conn.c only frames and queues. */
#include "daemon.h"

#include <stdarg.h>
#include <stdio.h>

void
reply_send(struct reply_to to, Rma__V1__Reply *reply, int fd)
{
	reply->id = to.id;
	conn_send_reply(to.conn, reply, fd);
}

void
reply_error(struct reply_to to, wire_status_t st, const char *fmt, ...)
{
	Rma__V1__Reply reply = RMA__V1__REPLY__INIT;
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	reply.status = st;
	reply.detail = detail;
	reply_send(to, &reply, -1);
}
