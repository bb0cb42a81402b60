/* SPDX-License-Identifier: BSD-2-Clause */
/* The client socket: the Unix socket listener clients connect to, made
 * here (its directory and path checked to be ours, mode 0660, an optional
 * group) or inherited from systemd's socket activation. Accepted clients
 * go to the workers in turn; out of descriptors, accepting pauses rather
 * than spins. What happens on a connection is conn.c's. */
#include "daemon.h"
#include "socket_path.h"

#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <unistd.h>

static void
server_on_handed_over(struct daemon *d, void *arg)
{
	conn_create(d, (int)(intptr_t)arg);
}

/* New clients go to the workers in turn. */
static void
server_assign(struct daemon *d, int fd)
{
	struct world *w = d->world;
	struct daemon *to = w->workers[w->next_accept++ % w->n];

	if (to == d)
		conn_create(d, fd);
	else if (world_post(to, server_on_handed_over, (void *)(intptr_t)fd) <
		 0)
		conn_create(d, fd);
}

/* Out of descriptors, the client stays queued and the listener readable:
 * accepting again at once would spin (and log) on every turn. Accepting
 * pauses until a client of this worker closes or a short timer fires, as
 * OpenBSD's daemons do; the warning comes once a minute at most. */
#define SERVER_ACCEPT_PAUSE_US 200000
#define SERVER_ACCEPT_WARN_PERIOD 60.0

static void
server_accept_pause(struct daemon *d, int err)
{
	static const struct timeval pause = {0, SERVER_ACCEPT_PAUSE_US};
	double now = daemon_now();

	d->accept_pauses++;
	if (now >= d->accept_warn_next) {
		log_warn("server_accept_pause: %s: not accepting clients until "
			 "descriptors free up (paused %llu times)",
			 strerror(err), (unsigned long long)d->accept_pauses);
		d->accept_warn_next = now + SERVER_ACCEPT_WARN_PERIOD;
	}
	event_del(d->accept_ev);
	evtimer_add(d->accept_pause_ev, &pause);
}

/* A descriptor came free: accept again now rather than at the timer. */
void
server_accept_resume(struct daemon *d)
{
	if (d->accept_pause_ev == NULL ||
	    !evtimer_pending(d->accept_pause_ev, NULL))
		return;
	evtimer_del(d->accept_pause_ev);
	event_add(d->accept_ev, NULL);
}

static void
server_on_accept_pause_end(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	event_add(d->accept_ev, NULL);
}

static void
server_on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct daemon *d = arg;

	for (int i = 0; i < 64; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				server_accept_pause(d, errno);
			else if (errno != EAGAIN && errno != EINTR &&
				 errno != ECONNABORTED)
				log_warn("server_on_accept: accept: %s",
					 strerror(errno));
			return;
		}
		server_assign(d, fd);
	}
}

/* Serves clients on the listening socket fd (ours from now on). */
static int
server_listen(struct daemon *d, int fd)
{
	d->accept_ev =
	    event_new(d->base, fd, EV_READ | EV_PERSIST, server_on_accept, d);
	d->accept_pause_ev =
	    evtimer_new(d->base, server_on_accept_pause_end, d);
	if (d->accept_ev == NULL || d->accept_pause_ev == NULL ||
	    event_add(d->accept_ev, NULL) < 0) {
		log_error("server_listen: cannot add accept event");
		if (d->accept_ev != NULL)
			event_free(d->accept_ev);
		if (d->accept_pause_ev != NULL)
			event_free(d->accept_pause_ev);
		d->accept_ev = d->accept_pause_ev = NULL;
		return -1;
	}
	d->listen_fd = fd;
	return 0;
}

/* Our socket path may hold a socket a dead rmad of ours left; anything
 * else there (another user's socket, a file, a symlink) is not ours to
 * remove, and taking another user's path over would make us the daemon
 * its clients talk to. */
static int
server_check_path(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		log_error("server_check_path: %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		log_error("server_check_path: %s exists and is not a "
			  "socket: not replacing it",
			  path);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		log_error("server_check_path: %s belongs to uid %u, not "
			  "to uid %u: not taking it over",
			  path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

/* The socket's directory: where other users can create names, one of
 * them can bind "<socket>.takeover" (or the socket, while it is free) and
 * pose as this rmad to its successor or its clients. */
int
server_check_dir(const struct config *cfg, const char *path, const char *doing)
{
	char why[512];

	if (socket_path_check_private(path, why, sizeof(why)) == 0)
		return 0;
	if (errno != EPERM) {
		log_error("server_check_dir: %s", why);
		return -1;
	}
	if (cfg->socket_dir_shared) {
		log_warn("server_check_dir: %s; %s there all the same "
			 "(socket_dir_shared)",
			 why, doing);
		return 0;
	}
	log_error("server_check_dir: %s: not %s there (use a directory only "
		  "this user can write, or socket_dir_shared = yes)",
		  why, doing);
	return -1;
}

int
server_start(struct daemon *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t sa_len = sizeof(sa);
	struct world_learned *learned = &d->world->learned;
	const char *path = learned->socket_path;
	char why[256];
	mode_t old_umask;
	int fd;

	fd = learned->activation_fd; /* sdnotify_listen_fds() found it */
	if (fd >= 0) {
		learned->activation_fd = -1; /* ours now */
		/* Socket activation: systemd made the socket (path, mode,
		 * group) and keeps it across our restarts; say where it is. */
		if (getsockname(fd, (struct sockaddr *)&sa, &sa_len) == 0 &&
		    sa_len > offsetof(struct sockaddr_un, sun_path) &&
		    sa.sun_path[0] != '\0')
			snprintf(learned->socket_path,
				 sizeof(learned->socket_path), "%.*s",
				 (int)sizeof(learned->socket_path) - 1,
				 sa.sun_path);
		d->listen_inherited = true;
		if (server_check_dir(d->cfg, path, "serving") < 0) {
			close(fd);
			return EX_NOPERM;
		}
		if (server_listen(d, fd) < 0) {
			close(fd);
			return 1;
		}
		return 0;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_error("server_start: socket path too long: %s", path);
		return 1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (socket_path_make_dir(path, why, sizeof(why)) < 0) {
		log_error("server_start: %s",
			  errno == EPERM ? why : strerror(errno));
		return EX_NOPERM;
	}
	if (server_check_path(path) < 0 ||
	    server_check_dir(d->cfg, path, "serving") < 0)
		return EX_NOPERM;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("server_start: socket: %s", strerror(errno));
		return 1;
	}
	/* A stale socket from a dead daemon is replaced; a live one is not. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		log_error("server_start: another rmad is serving %s", path);
		goto err_close;
	}
	if (errno == ECONNREFUSED)
		unlink(path);
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("server_start: socket: %s", strerror(errno));
		return 1;
	}
	old_umask = umask(0117); /* 0660 */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		umask(old_umask);
		log_error("server_start: bind %s: %s", path, strerror(errno));
		goto err_close;
	}
	umask(old_umask);
	if (d->cfg->socket_group[0] != '\0') {
		struct group *gr = getgrnam(d->cfg->socket_group);
		if (gr == NULL || chown(path, (uid_t)-1, gr->gr_gid) < 0) {
			log_error("server_start: cannot give %s to group "
				  "%s: %s",
				  path, d->cfg->socket_group,
				  gr ? strerror(errno) : "no such group");
			goto err_unlink;
		}
	}
	if (listen(fd, 128) < 0) {
		log_error("server_start: listen: %s", strerror(errno));
		goto err_unlink;
	}
	if (server_listen(d, fd) < 0)
		goto err_unlink;
	return 0;

err_unlink:
	unlink(path);
err_close:
	close(fd);
	return 1;
}

/* The socket and its path are ours now: a later stop unlinks the path. */
int
server_adopt(struct daemon *d, int fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t sa_len = sizeof(sa), opt_len = sizeof(int);
	int type = 0, listening = 0;

	/* The predecessor passed it: whatever it is, it must be what we
	 * would have made ourselves, a listening stream socket with a path
	 * in a directory only we (or root) can write. */
	memset(sa.sun_path, 0, sizeof(sa.sun_path));
	if (getsockname(fd, (struct sockaddr *)&sa, &sa_len) < 0 ||
	    sa.sun_family != AF_UNIX ||
	    sa_len <= offsetof(struct sockaddr_un, sun_path) ||
	    sa.sun_path[0] == '\0' ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &opt_len) < 0 ||
	    type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &opt_len) <
		0 ||
	    !listening) {
		log_error("server_adopt: the predecessor's client socket is "
			  "not a listening Unix stream socket with a path; "
			  "not taking it");
		return -1;
	}
	sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
	if (server_check_dir(d->cfg, sa.sun_path, "serving") < 0)
		return -1;
	snprintf(d->world->learned.socket_path,
		 sizeof(d->world->learned.socket_path), "%.*s",
		 (int)sizeof(d->world->learned.socket_path) - 1, sa.sun_path);
	evutil_make_socket_nonblocking(fd);
	return server_listen(d, fd);
}

void
server_stop(struct daemon *d)
{
	if (d->listen_fd < 0)
		return;
	event_free(d->accept_ev);
	event_free(d->accept_pause_ev);
	d->accept_ev = d->accept_pause_ev = NULL;
	close(d->listen_fd);
	d->listen_fd = -1;
	/* systemd's copy of an inherited socket queues clients for our next
	 * start: its path stays */
	if (!d->listen_inherited)
		unlink(d->world->learned.socket_path);
}
