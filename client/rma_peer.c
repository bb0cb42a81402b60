/* SPDX-License-Identifier: BSD-2-Clause */
/* Peers (other hosts' daemons, as this daemon reaches them) and remotes
 * (regions of other processes, resolved with their owner). */
#include "rma_internal.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct rma_peer *
peer_find(rma_client_t *c, uint32_t peer_id)
{
	struct rma_peer *peer;

	for (peer = c->peers; peer != NULL; peer = peer->next)
		if (peer->peer_id == peer_id)
			return peer;
	return NULL;
}

static int
peer_set_string(char **field, const char *value)
{
	char *s = strdup(value != NULL ? value : "");

	if (s == NULL)
		return -1;
	free(*field);
	*field = s;
	return 0;
}

/* Host names are resolved here, in the caller's process: the daemon takes
 * only numeric addresses, so a slow DNS lookup never stalls it. */
static int
peer_numeric_address(const char *address, char *out, size_t out_len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai, *a;
	char host[256], ip[INET6_ADDRSTRLEN];
	const char *colon, *h = address;
	size_t hl;
	int rc;

	if (address[0] == '[') {
		const char *close = strchr(address, ']');
		if (close == NULL || close[1] != ':')
			return -1;
		h = address + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(address, ':');
		if (colon == NULL)
			return -1;
		hl = (size_t)(colon - address);
	}
	if (hl == 0 || hl >= sizeof(host))
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (getaddrinfo(host, NULL, &hints, &ai) != 0)
		return -1;
	/* Daemons reach each other over IPv4 only (rmad refuses an IPv6
	 * peer address): a name's IPv4 address, when it has one, although
	 * the resolver may list ::1 first for localhost. */
	for (a = ai; a != NULL && a->ai_family != AF_INET; a = a->ai_next)
		;
	if (a == NULL)
		a = ai;
	if (a->ai_family == AF_INET)
		inet_ntop(AF_INET,
			  &((struct sockaddr_in *)a->ai_addr)->sin_addr, ip,
			  sizeof(ip));
	else
		inet_ntop(AF_INET6,
			  &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, ip,
			  sizeof(ip));
	rc = snprintf(out, out_len,
		      a->ai_family == AF_INET6 ? "[%s]%s" : "%s%s", ip, colon);
	freeaddrinfo(ai);
	return rc > 0 && (size_t)rc < out_len ? 0 : -1;
}

RMA_API rma_status_t
rma_peer_connect(rma_client_t *client, const char *address, rma_peer_t **peer_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__PeerConnect body = RMA__V1__PEER_CONNECT__INIT;
	Rma__V1__PeerConnectReply *pc;
	Rma__V1__Reply *reply;
	struct rma_peer *peer, *fresh;
	char numeric[300];
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (address == NULL || peer_p == NULL)
		return client_error(client, RMA_ERR_INVALID,
				    "peer connect needs an address");
	if (peer_numeric_address(address, numeric, sizeof(numeric)) < 0)
		return client_error(client, RMA_ERR_INVALID,
				    "cannot resolve peer address '%s' "
				    "(expected HOST:PORT)",
				    address);
	/* allocated first, so that no failure follows the daemon's yes */
	fresh = calloc(1, sizeof(*fresh));
	if (fresh == NULL)
		return client_error(client, RMA_ERR_NO_MEMORY,
				    "no memory for a peer");
	body.address = numeric;
	req.body_case = RMA__V1__REQUEST__BODY_PEER_CONNECT;
	req.peer_connect = &body;
	st = client_call(client, &req, CLIENT_PEER_TIMEOUT_MS, &reply, NULL);
	if (st != RMA_OK)
		goto err_free_peer;
	if (reply->body_case != RMA__V1__REPLY__BODY_PEER_CONNECT) {
		st = client_error(client, RMA_ERR_PROTOCOL,
				  "peer connect answered "
				  "without a peer");
		goto err_free_reply;
	}
	pc = reply->peer_connect;
	/* one handle per peer: the daemon reuses its endpoint */
	peer = peer_find(client, pc->peer_id);
	if (peer == NULL)
		peer = fresh;
	if (peer_set_string(&peer->address, address) < 0 ||
	    peer_set_string(&peer->daemon_id, pc->daemon_id) < 0) {
		st = client_error(client, RMA_ERR_NO_MEMORY,
				  "no memory for a peer");
		if (peer != fresh)
			goto err_free_reply;
		goto err_free_strings;
	}
	peer->state = RMA__V1__PEER_STATE__PEER_UP;
	peer->status = RMA_OK;
	if (peer == fresh) {
		peer->client = client;
		peer->peer_id = pc->peer_id;
		peer->next = client->peers;
		client->peers = peer;
	} else {
		free(fresh);
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	*peer_p = peer;
	return RMA_OK;

err_free_strings:
	free(fresh->address);
	free(fresh->daemon_id);
err_free_reply:
	rma__v1__reply__free_unpacked(reply, NULL);
err_free_peer:
	free(fresh);
	return st;
}

void
peer_event(rma_client_t *c, const Rma__V1__PeerEvent *ev)
{
	struct rma_peer *peer = peer_find(c, ev->peer_id);

	/* a peer this client never asked for concerns it not */
	if (peer == NULL)
		return;
	peer->state = ev->state;
	peer->status = status_from_wire(ev->status);
	peer_set_string(&peer->detail, ev->detail);
}

RMA_API rma_status_t
rma_peer_status(const rma_peer_t *peer)
{
	if (peer == NULL)
		return RMA_ERR_INVALID;
	if (peer->state == RMA__V1__PEER_STATE__PEER_UP)
		return RMA_OK;
	return peer->status != RMA_OK ? peer->status : RMA_ERR_CONNECTION_RESET;
}

RMA_API const char *
rma_peer_detail(const rma_peer_t *peer)
{
	return peer != NULL && peer->detail != NULL ? peer->detail : "";
}

RMA_API rma_status_t
rma_remote_import(rma_client_t *client, rma_peer_t *peer,
		  const char *descriptor, rma_remote_t **remote_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RemoteImport body = RMA__V1__REMOTE_IMPORT__INIT;
	Rma__V1__RemoteImportReply *ri;
	Rma__V1__Reply *reply;
	struct rma_remote *remote;
	rma_status_t st;

	if (client == NULL)
		return RMA_ERR_INVALID;
	if (fork_inherited(client))
		return fork_error(client);
	if (peer == NULL || descriptor == NULL || remote_p == NULL)
		return client_error(client, RMA_ERR_INVALID,
				    "remote import needs a peer and a "
				    "descriptor");
	if (peer->client != client)
		return client_error(client, RMA_ERR_INVALID,
				    "peer of another client");
	/* Whatever the daemon's frame limit (4 KiB at least), a text this
	 * long cannot be a descriptor: it is refused as one, not as a
	 * request too big to send. */
	if (strnlen(descriptor, RMA_DESCRIPTOR_MAX + 1) > RMA_DESCRIPTOR_MAX)
		return client_error(client, RMA_ERR_BAD_DESCRIPTOR,
				    "descriptor text over %d bytes: not a "
				    "descriptor",
				    RMA_DESCRIPTOR_MAX);
	remote = calloc(1, sizeof(*remote));
	if (remote == NULL)
		return client_error(client, RMA_ERR_NO_MEMORY,
				    "no memory for a remote");
	remote->descriptor = strdup(descriptor);
	if (remote->descriptor == NULL) {
		free(remote);
		return client_error(client, RMA_ERR_NO_MEMORY,
				    "no memory for a remote");
	}
	body.peer_id = peer->peer_id;
	body.descriptor = (char *)descriptor;
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_IMPORT;
	req.remote_import = &body;
	st = client_call(client, &req, CLIENT_PEER_TIMEOUT_MS, &reply, NULL);
	if (st != RMA_OK)
		goto err_free_remote;
	if (reply->body_case != RMA__V1__REPLY__BODY_REMOTE_IMPORT) {
		st = client_error(client, RMA_ERR_PROTOCOL,
				  "remote import answered "
				  "without a remote");
		goto err_free_reply;
	}
	ri = reply->remote_import;
	remote->client = client;
	remote->peer = peer;
	remote->remote_id = ri->remote_id;
	remote->length = ri->length;
	remote->local = ri->local;
	remote->next = client->remotes;
	if (client->remotes != NULL)
		client->remotes->prev = remote;
	client->remotes = remote;
	rma__v1__reply__free_unpacked(reply, NULL);
	*remote_p = remote;
	return RMA_OK;

err_free_reply:
	rma__v1__reply__free_unpacked(reply, NULL);
err_free_remote:
	free(remote->descriptor);
	free(remote);
	return st;
}

RMA_API uint64_t
rma_remote_length(const rma_remote_t *remote)
{
	return remote != NULL ? remote->length : 0;
}

static void
peer_remote_destroy(rma_client_t *c, struct rma_remote *remote)
{
	if (remote->prev != NULL)
		remote->prev->next = remote->next;
	else
		c->remotes = remote->next;
	if (remote->next != NULL)
		remote->next->prev = remote->prev;
	free(remote->descriptor);
	free(remote);
}

/* The daemon forgets the remote; its answer is not awaited (it comes to
 * no waiter and is dropped, client_dispatch_reply). The pieces pending
 * before it go first, as client_call sends them. */
static void
peer_remote_release_send(rma_client_t *c, struct rma_remote *remote)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RemoteRelease body = RMA__V1__REMOTE_RELEASE__INIT;

	if (request_flush(c) != RMA_OK || c->gone)
		return;
	body.remote_id = remote->remote_id;
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_RELEASE;
	req.remote_release = &body;
	req.id = c->next_id++;
	(void)client_send(c, &req);
}

void
peer_remote_unstage(rma_client_t *c, struct rma_remote *remote)
{
	if (--remote->staged > 0 || !remote->released)
		return;
	if (!fork_inherited(c) && !c->gone && remote->lost == RMA_OK)
		peer_remote_release_send(c, remote);
	peer_remote_destroy(c, remote);
}

RMA_API void
rma_remote_release(rma_client_t *client, rma_remote_t *remote)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RemoteRelease body = RMA__V1__REMOTE_RELEASE__INIT;
	Rma__V1__Reply *reply;

	if (client == NULL || remote == NULL || remote->client != client)
		return;
	if (remote->staged > 0) {
		/* a transfer through the staging area still issues pieces
		 * on it: the release follows its last (peer_remote_unstage) */
		remote->released = 1;
		return;
	}
	if (fork_inherited(client)) {
		/* the parent's remote: the child's copy goes, unsaid */
		fork_error(client);
		peer_remote_destroy(client, remote);
		return;
	}
	/* a failure leaves nothing to undo here: the daemon drops a
	 * connection's remotes with it; rma_last_error() tells */
	/* a lost remote's id means nothing, or another remote, now */
	if (!client->gone && remote->lost == RMA_OK) {
		body.remote_id = remote->remote_id;
		req.body_case = RMA__V1__REQUEST__BODY_REMOTE_RELEASE;
		req.remote_release = &body;
		if (client_call(client, &req, CLIENT_CALL_TIMEOUT_MS, &reply,
				NULL) == RMA_OK)
			rma__v1__reply__free_unpacked(reply, NULL);
	}
	peer_remote_destroy(client, remote);
}

void
peer_cleanup(rma_client_t *c)
{
	struct rma_peer *peer;

	while (c->remotes != NULL)
		peer_remote_destroy(c, c->remotes);
	while ((peer = c->peers) != NULL) {
		c->peers = peer->next;
		free(peer->address);
		free(peer->daemon_id);
		free(peer->detail);
		free(peer);
	}
}

/* ---- after a take-over (client.c: client_reconnect) ---- */

static rma_status_t
peer_reattach(rma_client_t *c, struct rma_peer *peer, int64_t deadline)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__PeerConnect body = RMA__V1__PEER_CONNECT__INIT;
	Rma__V1__Reply *reply;
	char numeric[300];
	rma_status_t st;

	if (peer_numeric_address(peer->address, numeric, sizeof(numeric)) < 0)
		return client_error(c, RMA_ERR_UNREACHABLE,
				    "cannot resolve peer address '%s' again",
				    peer->address);
	body.address = numeric;
	req.body_case = RMA__V1__REQUEST__BODY_PEER_CONNECT;
	req.peer_connect = &body;
	st = client_call(c, &req, client_remaining(deadline), &reply, NULL);
	if (st != RMA_OK)
		return st;
	if (reply->body_case != RMA__V1__REPLY__BODY_PEER_CONNECT) {
		rma__v1__reply__free_unpacked(reply, NULL);
		return client_error(c, RMA_ERR_PROTOCOL,
				    "peer connect answered without a peer");
	}
	/* The new process numbers its peers afresh. */
	peer->peer_id = reply->peer_connect->peer_id;
	rma__v1__reply__free_unpacked(reply, NULL);
	return RMA_OK;
}

static rma_status_t
peer_reimport(rma_client_t *c, struct rma_remote *remote, int64_t deadline)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RemoteImport body = RMA__V1__REMOTE_IMPORT__INIT;
	Rma__V1__Reply *reply;
	rma_status_t st;

	body.peer_id = remote->peer->peer_id;
	body.descriptor = remote->descriptor;
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_IMPORT;
	req.remote_import = &body;
	st = client_call(c, &req, client_remaining(deadline), &reply, NULL);
	if (st != RMA_OK)
		return st;
	if (reply->body_case != RMA__V1__REPLY__BODY_REMOTE_IMPORT) {
		rma__v1__reply__free_unpacked(reply, NULL);
		return client_error(c, RMA_ERR_PROTOCOL,
				    "remote import answered without a remote");
	}
	remote->remote_id = reply->remote_import->remote_id;
	remote->length = reply->remote_import->length;
	remote->local = reply->remote_import->local;
	rma__v1__reply__free_unpacked(reply, NULL);
	return RMA_OK;
}

void
peer_reattach_all(rma_client_t *c, int64_t deadline)
{
	struct rma_peer *peer;
	struct rma_remote *remote;
	rma_status_t st;

	for (peer = c->peers; peer != NULL; peer = peer->next) {
		st = c->gone ? RMA_ERR_DAEMON_GONE
			     : peer_reattach(c, peer, deadline);
		peer->status = st;
		if (st == RMA_OK) {
			peer->state = RMA__V1__PEER_STATE__PEER_UP;
			continue;
		}
		/* no id of the new process: events for it must not match */
		peer->peer_id = 0;
		peer->state = RMA__V1__PEER_STATE__PEER_DOWN;
		peer_set_string(&peer->detail, c->last_error);
	}
	for (remote = c->remotes; remote != NULL; remote = remote->next) {
		if (remote->lost != RMA_OK)
			continue;
		if (remote->peer->state != RMA__V1__PEER_STATE__PEER_UP)
			st = remote->peer->status;
		else
			st = c->gone ? RMA_ERR_DAEMON_GONE
				     : peer_reimport(c, remote, deadline);
		remote->lost = st;
	}
}

/* A failure at the re-attach may be passing (our new endpoint crossing
 * the peer's, the peer itself being taken over at that moment): the
 * status it left on the remote is a transport status, which rma.h says
 * to retry. So a retry must be able to work: each operation on such a
 * remote tries to connect its peer and import it again first. */
rma_status_t
peer_remote_revive(rma_client_t *c, struct rma_remote *remote)
{
	int64_t deadline = client_deadline(
	    c->reattach_ms > 0 ? c->reattach_ms
			       : RMA_CONNECT_TIMEOUT_DEFAULT_MS);
	struct rma_peer *peer = remote->peer;
	char why[sizeof(c->last_error)];
	rma_status_t st;

	if (remote->lost == RMA_OK)
		return RMA_OK;
	if (c->gone)
		return client_gone_error(c);
	if (peer->state != RMA__V1__PEER_STATE__PEER_UP) {
		st = peer_reattach(c, peer, deadline);
		peer->status = st;
		if (st != RMA_OK) {
			peer_set_string(&peer->detail, c->last_error);
			goto err;
		}
		peer->state = RMA__V1__PEER_STATE__PEER_UP;
	}
	st = peer_reimport(c, remote, deadline);
	if (st != RMA_OK)
		goto err;
	remote->lost = RMA_OK;
	return RMA_OK;

err:
	snprintf(why, sizeof(why), "%s", c->last_error);
	return client_error(c, st,
			    "remote not imported again after the daemon was "
			    "taken over: %s",
			    why);
}
