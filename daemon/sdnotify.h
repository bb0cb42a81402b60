/* SPDX-License-Identifier: BSD-2-Clause */
/* systemd integration through libsystemd: the socket systemd activated us
 * with, READY=1 / STATUS= / STOPPING=1, and the watchdog. All of it is a
 * silent no-op when rmad is started by hand. */
#ifndef RMAD_SDNOTIFY_H
#define RMAD_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

struct daemon;
struct event;

struct sdnotify {
	bool enabled;		   /* NOTIFY_SOCKET is set */
	struct event *status_ev;   /* STATUS= refresh, when it changed */
	struct event *watchdog_ev; /* WATCHDOG=1 at half the interval */
	uint64_t watchdog_usec;	   /* WATCHDOG_USEC, 0 = no watchdog */
	double last_beat;	   /* worker's periodic pass last ran */
	bool beat_missed;	   /* logged once per stall */
	char status[160];	   /* the STATUS= last sent */
};

/* FDNAME= of the fds rmad keeps in systemd's fd store (fdstore.c). */
#define SDNOTIFY_STORE_PREFIX "store-"

/* What systemd passed at start (LISTEN_FDS, LISTEN_FDNAMES). */
struct sdnotify_fds {
	int activation_fd; /* the client socket (rmad.socket), or -1 */
	size_t n; /* fds from the store, named SDNOTIFY_STORE_PREFIX... */
	int *fds; /* -1 once taken */
	char **names;
};

/* Sorts the fds systemd passed: the one listening socket (-1 when
 * started by hand) and the fd store's. Fails (-1, logged) when systemd
 * passed more than one socket or one that is not a listening AF_UNIX
 * stream socket. */
int sdnotify_listen_fds(struct sdnotify_fds *out);
/* Closes what nobody took. */
void sdnotify_fds_free(struct sdnotify_fds *p);
/* Timers for STATUS= and the watchdog; after the loop exists. */
int sdnotify_start(struct daemon *d);
void sdnotify_stop(struct daemon *d);
/* READY=1 with the first STATUS=; once UCX and the listener are up. */
void sdnotify_ready(struct daemon *d);
/* STOPPING=1 at the first SIGTERM/SIGINT. */
void sdnotify_stopping(struct daemon *d);
/* The worker's periodic pass (deadlines, stuck clients) ran: the watchdog
 * is fed only while it keeps running. */
void sdnotify_beat(struct daemon *d);

#endif
