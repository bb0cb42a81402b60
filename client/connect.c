/* SPDX-License-Identifier: BSD-2-Clause */
/* Connecting to the daemon: the default socket, the check of who serves
 * it (SO_PEERCRED: this user, root or the service user), the connect with
 * its deadline, and the reconnect and re-attach after a take-over. The
 * connection itself, once up, is client.c's. */
#include "rma_internal.h"
#include "socket_path.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static __thread char client_socket_buf[PATH_MAX];

RMA_API const char *
rma_default_socket(void)
{
	/* too long a path stays truncated; connect then says so */
	socket_path_client(client_socket_buf, sizeof(client_socket_buf));
	return client_socket_buf;
}

/* RMAD_DAEMON_USER or the service user: a name, or a uid in digits. */
static bool
client_user_is(const char *user, uid_t uid)
{
	struct passwd pw, *found = NULL;
	char buf[2048];
	char *end;
	unsigned long n;

	if (user == NULL || user[0] == '\0')
		return false;
	n = strtoul(user, &end, 10);
	if (*end == '\0')
		return n == (unsigned long)uid;
	return getpwnam_r(user, &pw, buf, sizeof(buf), &found) == 0 &&
	       found != NULL && found->pw_uid == uid;
}

/* Whoever listens at the path gets the hello and hands out the memfds
 * that become regions: a daemon of anyone else could read everything
 * written into them. Only this user's own daemon, root's and the service
 * user's are trusted, whatever the path. */
static rma_status_t
client_check_daemon(int fd, const char *path)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return client_error(NULL, RMA_ERR_PERMISSION,
				    "cannot tell who serves %s: %s", path,
				    strerror(errno));
	if (cred.uid == getuid() || cred.uid == geteuid() || cred.uid == 0 ||
	    client_user_is(SOCKET_PATH_SERVICE_USER, cred.uid) ||
	    client_user_is(getenv("RMAD_DAEMON_USER"), cred.uid))
		return RMA_OK;
	return client_error(NULL, RMA_ERR_PERMISSION,
			    "%s is served by uid %u (pid %d), not by this "
			    "user, root or user %s: not trusting it",
			    path, (unsigned)cred.uid, (int)cred.pid,
			    SOCKET_PATH_SERVICE_USER);
}

/* connect(2) to a Unix socket blocks while the listener's backlog is full
 * (a daemon that stopped accepting); SO_SNDTIMEO bounds that wait, after
 * which it fails with EAGAIN. */
static rma_status_t
client_connect_socket(int fd, const struct sockaddr_un *sa, int64_t deadline,
		      int *err_p)
{
	const char *path = sa->sun_path;
	struct timeval tv;
	int left, err;

	for (;;) {
		left = client_remaining(deadline);
		if (left >= 0) {
			/* 0 would mean no limit */
			left = left > 0 ? left : 1;
			tv.tv_sec = left / 1000;
			tv.tv_usec = (left % 1000) * 1000;
			if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
				       sizeof(tv)) < 0)
				return client_error(NULL, RMA_ERR_INTERNAL,
						    "setsockopt SO_SNDTIMEO: "
						    "%s",
						    strerror(errno));
		}
		if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
			return RMA_OK;
		err = errno;
		if (err == EINTR && client_remaining(deadline) != 0)
			continue;
		break;
	}
	*err_p = err;
	switch (err) {
	case EACCES:
	case EPERM:
		/* rmad's socket (and /run/rmad) admit its socket_group */
		return client_error(
		    NULL, RMA_ERR_PERMISSION,
		    "cannot connect to %s: %s (rmad admits the "
		    "members of its socket_group, 'rma' by "
		    "default: usermod -aG rma USER, then log in "
		    "again)",
		    path, strerror(err));
	case ENOENT:
	case ENOTDIR:
		/* never there, not gone: say what is missing */
		return client_error(
		    NULL, RMA_ERR_DAEMON_GONE,
		    "socket %s does not exist: is rmad running? "
		    "(systemctl start rmad.socket; RMAD_SOCKET "
		    "or --socket names another)",
		    path);
	case ECONNREFUSED:
		return client_error(NULL, RMA_ERR_DAEMON_GONE,
				    "no daemon at %s: %s (a socket left by one "
				    "that exited)",
				    path, strerror(err));
	case EAGAIN:
	case EINTR:
		return client_error(NULL, RMA_ERR_TIMEOUT,
				    "%s accepted no connection in time: its "
				    "daemon is not accepting (stopped, or out "
				    "of file descriptors)",
				    path);
	default:
		return client_error(NULL, RMA_ERR_DAEMON_GONE,
				    "cannot connect to %s: %s", path,
				    strerror(err));
	}
}

/* ---- re-attach after a take-over ---- */

/* RMA_NO_REATTACH=1: today's RMA_ERR_DAEMON_GONE at a take-over.
 * RMA_REATTACH_TIMEOUT_MS: how long to try to get back (default 5 s). */
static int
client_reattach_ms(void)
{
	const char *off = getenv("RMA_NO_REATTACH");
	const char *ms = getenv("RMA_REATTACH_TIMEOUT_MS");
	char *end;
	long v;

	if (off != NULL && off[0] != '\0' && strcmp(off, "0") != 0)
		return 0;
	if (ms == NULL || ms[0] == '\0')
		return RMA_REATTACH_TIMEOUT_DEFAULT_MS;
	v = strtol(ms, &end, 10);
	if (*end != '\0' || v < 0 || v > INT_MAX)
		return RMA_REATTACH_TIMEOUT_DEFAULT_MS;
	return (int)v;
}

/* One try: a new socket to the same path, in place of the old one in
 * rma_fd()'s set (client.c: a poller of rma_fd() sees nothing change),
 * then hello. */
static rma_status_t
client_reconnect_once(rma_client_t *c, int64_t deadline, bool *refused)
{
	struct sockaddr_un sa;
	rma_status_t st;
	int fd, err = 0;

	*refused = false;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return client_error(c, RMA_ERR_NO_MEMORY, "socket: %s",
				    strerror(errno));
	st = client_connect_socket(fd, &sa, deadline, &err);
	if (st == RMA_OK)
		st = client_check_daemon(fd, c->socket_path);
	if (st != RMA_OK) {
		close(fd);
		/* the detail went to the thread's connect error */
		return client_error(c, st, "%s", client_connect_error);
	}
	st = client_socket_replace(c, fd);
	if (st != RMA_OK)
		return st;
	frame_reader_cleanup(&c->reader);
	frame_reader_init(&c->reader, FRAME_MAX_DEFAULT);
	c->max_frame = FRAME_MAX_DEFAULT;
	free(c->daemon_id);
	free(c->daemon_version);
	c->daemon_id = c->daemon_version = NULL;
	c->gone = 0;
	st = client_hello(c, c->hello_name, client_remaining(deadline));
	/* The daemon answered and said no (this uid over
	 * max_clients_per_uid, not allowed, another protocol version): it
	 * would say it again. */
	*refused = st == RMA_ERR_LIMIT || st == RMA_ERR_PERMISSION ||
		   st == RMA_ERR_VERSION;
	return st;
}

/* The daemon closed the connection. If it was taken over (rmad
 * --take-over: same identity, same socket, every region kept), connect
 * again within reattach_ms, claim the regions back, connect the peers and
 * import the remotes again. What was in flight completes RESTARTED (none
 * is sent again: a put may have landed, a get may have written part of
 * its bytes), calls waiting for an answer return RESTARTED. False leaves
 * the client for client_fail, with why set if a re-attach was tried. */
bool
client_reconnect(rma_client_t *c, char *why, size_t why_len)
{
	int64_t deadline;
	struct client_call *call;
	uint64_t *ids;
	size_t n_ids;
	char *old_id;
	rma_status_t st;
	bool refused = false;
	int fd;

	if (c->reattach_ms <= 0 || c->socket_path == NULL || c->reconnecting ||
	    c->gone)
		return false;
	if (request_in_flight_ids(c, &ids, &n_ids) < 0) {
		snprintf(why, why_len, "no memory");
		return false;
	}
	c->reconnecting = 1;
	deadline = client_deadline(c->reattach_ms);
	/* the old process will answer none of these */
	for (call = c->calls; call != NULL; call = call->next)
		if (call->reply == NULL)
			call->lost = 1;
	while ((fd = client_fd_pop(c)) >= 0)
		close(fd);
	old_id = c->daemon_id;
	c->daemon_id = NULL;
again:
	c->reclosed = 0;
	for (;;) {
		st = client_reconnect_once(c, deadline, &refused);
		if (st == RMA_OK || refused || client_remaining(deadline) == 0)
			break;
		/* A take-over hands the listening socket itself to the new
		 * process, which never stops accepting; but a daemon that
		 * died and is restarted (systemd without socket activation,
		 * a supervisor, a person) leaves the path refusing
		 * (ECONNREFUSED) or absent (ENOENT) until it is up: try
		 * again soon, within the deadline, unless it refused us. */
		c->gone = 0;
		c->reclosed = 0;
		poll(NULL, 0, 10);
	}
	if (st == RMA_OK && strcmp(old_id, c->daemon_id) != 0) {
		st = client_error(c, RMA_ERR_DAEMON_GONE,
				  "daemon %s is not %s: restarted, not taken "
				  "over",
				  c->daemon_id, old_id);
	}
	if (st == RMA_OK)
		st = region_reattach_all(c, deadline);
	if (st == RMA_OK)
		peer_reattach_all(c, deadline);
	/* Taken over again while we re-attached: the regions are the next
	 * process's now, orphans until claimed again. */
	if (c->reclosed && !refused && client_remaining(deadline) > 0) {
		c->gone = 0;
		goto again;
	}
	if (c->reclosed && st == RMA_OK)
		st = client_error(c, RMA_ERR_DAEMON_GONE,
				  "taken over again while re-attaching, until "
				  "the deadline");
	if (st != RMA_OK) {
		snprintf(why, why_len, "%s", c->last_error);
		/* the new connection (if any) goes: the daemon frees what
		 * was re-attached on it */
		c->gone = 0;
		client_fail(c, RMA_ERR_DAEMON_GONE, "%s", why);
		c->gone = 0;
		free(old_id);
		free(ids);
		c->reconnecting = 0;
		return false;
	}
	free(old_id);
	free(c->shutdown_detail); /* the old process's goodbye */
	c->shutdown_detail = NULL;
	c->reattaches++;
	c->reconnecting = 0;
	request_complete_ids(c, ids, n_ids, RMA_ERR_RESTARTED,
			     "the daemon was taken over: retry");
	free(ids);
	if (c->reattach_cb != NULL && !c->gone)
		c->reattach_cb(c, c->reattaches, c->reattach_user_data);
	return true;
}

RMA_API rma_status_t
rma_connect_timeout(const char *socket_path, int timeout_ms,
		    rma_client_t **client_p)
{
	int64_t deadline = client_deadline(timeout_ms);
	struct sockaddr_un sa;
	char name[128], why[256];
	rma_status_t st;
	int fd, err;

	if (client_p == NULL)
		return client_error(NULL, RMA_ERR_INVALID,
				    "rma_connect: client_p is NULL");
	if (socket_path == NULL) {
		if (socket_path_client(client_socket_buf,
				       sizeof(client_socket_buf)) < 0)
			return client_error(NULL, RMA_ERR_INVALID,
					    "default socket path too long");
		socket_path = client_socket_buf;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (socket_path[0] == '\0' ||
	    strlen(socket_path) >= sizeof(sa.sun_path))
		return client_error(NULL, RMA_ERR_INVALID,
				    "bad socket path \"%s\" (empty or over "
				    "%zu bytes)",
				    socket_path, sizeof(sa.sun_path) - 1);
	strcpy(sa.sun_path, socket_path);
	if (socket_path_check_dir(socket_path, why, sizeof(why)) < 0 &&
	    errno == EPERM)
		return client_error(NULL, RMA_ERR_PERMISSION, "%s", why);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return client_error(NULL, RMA_ERR_NO_MEMORY, "socket: %s",
				    strerror(errno));
	st = client_connect_socket(fd, &sa, deadline, &err);
	if (st == RMA_OK)
		st = client_check_daemon(fd, socket_path);
	if (st != RMA_OK) {
		close(fd);
		return st;
	}
	snprintf(name, sizeof(name), "%s[%d]", program_invocation_short_name,
		 (int)getpid());
	/* the fd is nonblocking from here on: SO_SNDTIMEO no longer counts */
	st = client_attach(fd, name, socket_path, client_remaining(deadline),
			   client_p);
	if (st == RMA_OK)
		(*client_p)->reattach_ms = client_reattach_ms();
	if (st == RMA_ERR_TIMEOUT)
		client_error(NULL, st,
			     "%s did not answer hello within %d ms: its daemon "
			     "is stopped or overloaded, or what listens there "
			     "is not an rmad",
			     socket_path, timeout_ms);
	return st;
}

RMA_API rma_status_t
rma_connect(const char *socket_path, rma_client_t **client_p)
{
	return rma_connect_timeout(socket_path, RMA_CONNECT_TIMEOUT_DEFAULT_MS,
				   client_p);
}
