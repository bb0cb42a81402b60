/* SPDX-License-Identifier: BSD-2-Clause */
/* systemd: socket activation, the notify protocol and the watchdog.
 * Type=notify with NotifyAccess=main: only this process (not UCX's
 * threads, which never call sd_notify anyway) may speak for the service. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

/* How often STATUS= is refreshed (only sent when its text changed). */
#define NOTIFY_STATUS_PERIOD 1.0

static void
sdnotify_names_free(char **names)
{
	for (char **p = names; p != NULL && *p != NULL; p++)
		free(*p);
	free(names);
}

/* The activation socket: one listening AF_UNIX stream socket, made
 * nonblocking (systemd hands it over blocking). */
static int
sdnotify_check_socket(int fd)
{
	int r = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);

	if (r < 0) {
		log_error("sdnotify_listen_fds: fd %d: %s", fd, strerror(-r));
		return -1;
	}
	if (r == 0) {
		log_error("sdnotify_listen_fds: fd %d from systemd is not a "
			  "listening AF_UNIX stream socket",
			  fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		log_error("sdnotify_listen_fds: fcntl: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void
sdnotify_fds_free(struct sdnotify_fds *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->fds[i] >= 0)
			close(p->fds[i]);
		free(p->names[i]);
	}
	free(p->fds);
	free(p->names);
	if (p->activation_fd >= 0)
		close(p->activation_fd);
	memset(p, 0, sizeof(*p));
	p->activation_fd = -1;
}

int
sdnotify_listen_fds(struct sdnotify_fds *out)
{
	char **names = NULL;
	int n, sockets = 0;

	memset(out, 0, sizeof(*out));
	out->activation_fd = -1;
	/* 1: unset LISTEN_FDS and friends, so nothing we start inherits
	 * them. Sockets come first, the store's fds after them; without
	 * LISTEN_FDNAMES every name is "unknown" (a socket). */
	n = sd_listen_fds_with_names(1, &names);
	if (n < 0) {
		log_error("sdnotify_listen_fds: sd_listen_fds: %s",
			  strerror(-n));
		return -1;
	}
	out->fds = calloc(n > 0 ? n : 1, sizeof(*out->fds));
	out->names = calloc(n > 0 ? n : 1, sizeof(*out->names));
	if (out->fds == NULL || out->names == NULL)
		goto err;
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names != NULL && names[i] ? names[i] : "";

		/* none of them may leak into what we start */
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		if (strncmp(name, SDNOTIFY_STORE_PREFIX,
			    strlen(SDNOTIFY_STORE_PREFIX)) == 0) {
			out->fds[out->n] = fd;
			out->names[out->n] = strdup(name);
			if (out->names[out->n++] == NULL)
				goto err;
			continue;
		}
		if (++sockets > 1) {
			log_error("sdnotify_listen_fds: systemd passed %d "
				  "sockets; rmad takes exactly one "
				  "(ListenStream= in rmad.socket)",
				  sockets);
			close(fd);
			goto err;
		}
		out->activation_fd = fd;
		if (sdnotify_check_socket(fd) < 0)
			goto err;
	}
	sdnotify_names_free(names);
	return 0;

err:
	sdnotify_names_free(names);
	sdnotify_fds_free(out);
	return -1;
}

static void
sdnotify_summary(struct daemon *d, char *buf, size_t len)
{
	unsigned clients = 0, peers = 0, up = 0;
	unsigned long long in_flight = 0;
	struct world *w = d->world;
	struct conn *c;
	struct peer *p;

	world_stop(d);
	for (uint32_t i = 0; i < w->n; i++) {
		struct daemon *wd = w->workers[i];
		TAILQ_FOREACH(c, &wd->conns, link)
		clients++;
		TAILQ_FOREACH(p, &wd->peers, link)
		{
			peers++;
			if (p->state == RMA__V1__PEER_STATE__PEER_UP)
				up++;
		}
		in_flight += wd->ops_in_flight;
	}
	world_resume(d);
	if (d->shutting_down)
		snprintf(buf, len,
			 "Shutting down: %llu operations in flight, %u clients",
			 in_flight, clients);
	else
		snprintf(
		    buf, len,
		    "%s%u clients, %u/%u peers up, %llu operations in flight",
		    /* systemctl status shows it first; rmactl status says
		     * why */
		    w->config_refused[0] != '\0'
			? "CONFIG REFUSED, on the last good one (rmactl "
			  "status): "
			: "",
		    clients, up, peers, in_flight);
}

static void
sdnotify_send_status(struct daemon *d, const char *extra)
{
	char status[sizeof(d->sdnotify.status)];
	int r;

	sdnotify_summary(d, status, sizeof(status));
	if (extra == NULL && strcmp(status, d->sdnotify.status) == 0)
		return;
	memcpy(d->sdnotify.status, status, sizeof(status));
	r = sd_notifyf(0, "%sSTATUS=%s", extra ? extra : "", status);
	if (r < 0)
		log_warn("sdnotify_send_status: sd_notify: %s", strerror(-r));
}

static void
sdnotify_on_status(evutil_socket_t fd, short what, void *arg)
{
	sdnotify_send_status(arg, NULL);
}

static void
sdnotify_on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;
	double interval = (double)d->sdnotify.watchdog_usec / 1e6;
	/* The worker's periodic pass runs at least once a second. */
	double window = interval > 2.0 ? interval : 2.0;
	double since = daemon_now() - d->sdnotify.last_beat;

	if (since > window) {
		/* The loop runs but the worker's duties do not: let systemd
		 * restart us rather than serve without deadlines. */
		if (!d->sdnotify.beat_missed)
			log_error(
			    "sdnotify_on_watchdog: worker's periodic pass "
			    "has not run for %.1f s, withholding "
			    "WATCHDOG=1",
			    since);
		d->sdnotify.beat_missed = true;
		return;
	}
	d->sdnotify.beat_missed = false;
	sd_notify(0, "WATCHDOG=1");
}

int
sdnotify_start(struct daemon *d)
{
	struct timeval tv;
	uint64_t usec = 0;
	int r;

	d->sdnotify.last_beat = daemon_now();
	d->sdnotify.enabled = getenv("NOTIFY_SOCKET") != NULL;
	if (!d->sdnotify.enabled)
		return 0;
	d->sdnotify.status_ev =
	    event_new(d->base, -1, EV_PERSIST, sdnotify_on_status, d);
	if (d->sdnotify.status_ev == NULL)
		goto err_events;
	tv = worker_timeval(NOTIFY_STATUS_PERIOD);
	event_add(d->sdnotify.status_ev, &tv);

	r = sd_watchdog_enabled(0, &usec);
	if (r < 0)
		log_warn("sdnotify_start: sd_watchdog_enabled: %s",
			 strerror(-r));
	if (r > 0 && usec > 0) {
		d->sdnotify.watchdog_usec = usec;
		d->sdnotify.watchdog_ev =
		    event_new(d->base, -1, EV_PERSIST, sdnotify_on_watchdog, d);
		if (d->sdnotify.watchdog_ev == NULL)
			goto err_events;
		tv = worker_timeval((double)usec / 2e6);
		event_add(d->sdnotify.watchdog_ev, &tv);
		log_info("sdnotify_start: watchdog every %.3f s",
			 (double)usec / 2e6);
	}
	return 0;

err_events:
	log_error("sdnotify_start: cannot set up notify events");
	sdnotify_stop(d);
	return -1;
}

void
sdnotify_stop(struct daemon *d)
{
	if (d->sdnotify.status_ev)
		event_free(d->sdnotify.status_ev);
	if (d->sdnotify.watchdog_ev)
		event_free(d->sdnotify.watchdog_ev);
	d->sdnotify.status_ev = d->sdnotify.watchdog_ev = NULL;
}

void
sdnotify_ready(struct daemon *d)
{
	if (d->sdnotify.enabled)
		sdnotify_send_status(d, "READY=1\n");
}

void
sdnotify_stopping(struct daemon *d)
{
	if (d->sdnotify.enabled)
		sdnotify_send_status(d, "STOPPING=1\n");
}

void
sdnotify_beat(struct daemon *d)
{
	d->sdnotify.last_beat = daemon_now();
}
