/* SPDX-License-Identifier: BSD-2-Clause */
/* The answers to a client's requests, the one place that writes them:
 * for a request answered at once (request.c, status.c) and for one that
 * waited for a peer (peer_connect.c, peer.c, resolve.c). A struct
 * reply_to names the request; conn.c only frames and queues. */
#include "daemon.h"

#include <stdarg.h>

void
reply_send(struct reply_to to, Rma__V1__Reply *reply, int fd)
{
	reply->id = to.id;
	conn_send_reply(to.conn, reply, fd);
}

void
reply_error(struct reply_to to, wire_status_t st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_send_verror(to.conn, to.id, st, fmt, ap);
	va_end(ap);
}
