/* SPDX-License-Identifier: BSD-2-Clause */
/* Worker threads (--workers N) and what they share.
 *
 * Each worker is a struct daemon of its own: loop, UCX worker, clients,
 * outbound peers and operations, touched by its thread alone. Worker 0
 * runs on the main thread and also owns the client socket, the UCX
 * listener (so every inbound peer and the target side live there), the
 * metrics server and the signals.
 *
 * The few things they share (the region table, id counters) change only
 * while the world is stopped: world_stop() parks every other worker
 * between two of its callbacks, so readers need no lock at all, and the
 * hot path (a lookup in a target handler, a local copy) takes none.
 * Stops are for control paths: region create and free, status, metrics.
 *
 * Messages between workers go through mailboxes: a locked job list and
 * an eventfd in the receiving worker's loop. A stop wakes the others
 * through the same eventfd, and each parks in that callback.
 *
 * Like worker.c, this file names nothing above it: a shutdown reaches the
 * subsystems through the worker's hooks. */
#include "daemon.h"
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct world_job {
	world_fn_t fn;
	void *arg;
	struct world_job *next;
};

enum { WORLD_RUNNING, WORLD_PARKED, WORLD_WAITING, WORLD_EXITED };

/* ---- mailboxes ------------------------------------------------------------
 */

void
world_mailbox_run(struct daemon *d)
{
	struct world_job *job, *next;

	pthread_mutex_lock(&d->mail_lock);
	job = d->mail_head;
	d->mail_head = NULL;
	d->mail_tail = &d->mail_head;
	pthread_mutex_unlock(&d->mail_lock);
	for (; job != NULL; job = next) {
		next = job->next;
		job->fn(d, job->arg);
		free(job);
	}
}

static void world_park_if_stopped(struct daemon *d);
static void world_check_flags(struct daemon *d);
static void world_raise(struct daemon *self, bool *flag);

static void
world_on_mail(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n;

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("world_on_mail: read: %s", strerror(errno));
	world_park_if_stopped(arg);
	world_mailbox_run(arg);
	world_check_flags(arg);
	worker_kick(arg);
}

/* Wakes a worker's loop: it parks there if the world is being stopped. */
static void
world_wake(struct daemon *to)
{
	uint64_t one = 1;

	/* Only fails when the counter would overflow: it is read soon. */
	if (write(to->mail_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("world_wake: write: %s", strerror(errno));
}

int
world_post(struct daemon *to, world_fn_t fn, void *arg)
{
	struct world_job *job = malloc(sizeof(*job));
	bool was_empty;

	if (job == NULL)
		return -1;
	job->fn = fn;
	job->arg = arg;
	job->next = NULL;
	pthread_mutex_lock(&to->mail_lock);
	was_empty = to->mail_head == NULL;
	*to->mail_tail = job;
	to->mail_tail = &job->next;
	pthread_mutex_unlock(&to->mail_lock);
	/* A non-empty mailbox has had its wake-up already and is taken
	 * whole after it: one write per burst, not per job (notifications
	 * post one job per put). */
	if (was_empty)
		world_wake(to);
	return 0;
}

int
world_mailbox_open(struct daemon *d)
{
	pthread_mutex_init(&d->mail_lock, NULL);
	d->mail_head = NULL;
	d->mail_tail = &d->mail_head;
	d->mail_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->mail_fd < 0) {
		log_error("world_mailbox_open: eventfd: %s", strerror(errno));
		return -1;
	}
	d->mail_ev = event_new(d->base, d->mail_fd, EV_READ | EV_PERSIST,
			       world_on_mail, d);
	if (d->mail_ev == NULL || event_add(d->mail_ev, NULL) < 0) {
		log_error("world_mailbox_open: cannot add mailbox event");
		return -1;
	}
	return 0;
}

void
world_mailbox_close(struct daemon *d)
{
	/* Posted since the posted-jobs part ran (daemon.c): run it now. */
	world_mailbox_run(d);
	if (d->mail_ev)
		event_free(d->mail_ev);
	d->mail_ev = NULL;
	if (d->mail_fd >= 0)
		close(d->mail_fd);
	d->mail_fd = -1;
	pthread_mutex_destroy(&d->mail_lock);
}

/* ---- stopping the world ---------------------------------------------------
 */

static bool
world_others_quiet(const struct world *w, const struct daemon *self)
{
	for (uint32_t i = 0; i < w->n; i++) {
		const struct daemon *o = w->workers[i];
		if (o != self && o->world_state == WORLD_RUNNING)
			return false;
	}
	return true;
}

/* Called with w->lock held: wait here until the stopper resumes. */
static void
world_park_locked(struct world *w, struct daemon *self)
{
	uint64_t gen = w->resume_gen;

	self->world_state = WORLD_PARKED;
	pthread_cond_broadcast(&w->parked_cv);
	while (w->resume_gen == gen)
		pthread_cond_wait(&w->resume_cv, &w->lock);
}

/* Between two callbacks of d's loop: the place where it parks. */
static void
world_park_if_stopped(struct daemon *d)
{
	struct world *w = d->world;

	if (w->n == 1)
		return;
	pthread_mutex_lock(&w->lock);
	/* A wake-up left over from a stop that already ended does
	 * nothing. */
	if (w->stopper != NULL && w->stopper != d)
		world_park_locked(w, d);
	pthread_mutex_unlock(&w->lock);
}

void
world_stop(struct daemon *self)
{
	struct world *w = self->world;

	if (w->n == 1 || w->joined)
		return;
	pthread_mutex_lock(&w->lock);
	/* Another worker is stopping the world: be stopped first. */
	while (w->stopper != NULL)
		world_park_locked(w, self);
	w->stopper = self;
	for (uint32_t i = 0; i < w->n; i++) {
		struct daemon *o = w->workers[i];
		if (o != self && o->world_state == WORLD_RUNNING)
			world_wake(o);
	}
	while (!world_others_quiet(w, self))
		pthread_cond_wait(&w->parked_cv, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void
world_resume(struct daemon *self)
{
	struct world *w = self->world;

	if (w->n == 1 || w->joined)
		return;
	pthread_mutex_lock(&w->lock);
	/* Running again as of now, before any next stopper can look. */
	for (uint32_t i = 0; i < w->n; i++) {
		if (w->workers[i]->world_state == WORLD_PARKED)
			w->workers[i]->world_state = WORLD_RUNNING;
	}
	w->stopper = NULL;
	w->resume_gen++;
	pthread_cond_broadcast(&w->resume_cv);
	pthread_mutex_unlock(&w->lock);
}

/* ---- worker threads -------------------------------------------------------
 */

static void
world_set_state(struct daemon *d, int state)
{
	struct world *w = d->world;

	pthread_mutex_lock(&w->lock);
	d->world_state = state;
	pthread_cond_broadcast(&w->parked_cv);
	pthread_mutex_unlock(&w->lock);
}

static void *
world_thread(void *arg)
{
	struct daemon *d = arg;

	event_base_dispatch(d->base);
	world_set_state(d, WORLD_EXITED);
	return NULL;
}

int
world_start_threads(struct world *w)
{
	for (uint32_t i = 1; i < w->n; i++) {
		int err = pthread_create(&w->workers[i]->thread, NULL,
					 world_thread, w->workers[i]);
		if (err != 0) {
			log_error("world_start_threads: pthread_create: %s",
				  strerror(err));
			return -1;
		}
		w->workers[i]->thread_started = true;
	}
	return 0;
}

void
world_join_threads(struct daemon *self, bool quit)
{
	struct world *w = self->world;
	bool all_exited;

	if (quit)
		world_raise(self, &w->quit);
	/* Waiting, this thread counts as stopped for any worker that stops
	 * the world on its way out (a client closing frees regions). */
	pthread_mutex_lock(&w->lock);
	self->world_state = WORLD_WAITING;
	pthread_cond_broadcast(&w->parked_cv);
	do {
		all_exited = true;
		for (uint32_t i = 0; i < w->n; i++) {
			const struct daemon *o = w->workers[i];
			if (o != self && o->thread_started &&
			    o->world_state != WORLD_EXITED)
				all_exited = false;
		}
		if (!all_exited)
			pthread_cond_wait(&w->parked_cv, &w->lock);
	} while (!all_exited);
	self->world_state = WORLD_RUNNING;
	pthread_mutex_unlock(&w->lock);
	for (uint32_t i = 0; i < w->n; i++) {
		struct daemon *o = w->workers[i];
		if (o != self && o->thread_started) {
			pthread_join(o->thread, NULL);
			o->thread_started = false;
		}
	}
	/* One thread from here on: tearing down any worker needs no stop. */
	w->joined = true;
}

/* The flags: set once, seen by every worker at its next wake-up. No
 * allocation, so they cannot fail to arrive. */
static void
world_raise(struct daemon *self, bool *flag)
{
	struct world *w = self->world;

	__atomic_store_n(flag, true, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < w->n; i++) {
		if (w->workers[i] != self)
			world_wake(w->workers[i]);
	}
}

static void
world_check_flags(struct daemon *d)
{
	struct world *w = d->world;

	if (__atomic_load_n(&w->shutdown, __ATOMIC_ACQUIRE))
		d->hooks->begin_shutdown(d);
	if (__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE))
		event_base_loopbreak(d->base);
}

void
world_shutdown(struct daemon *self)
{
	world_raise(self, &self->world->shutdown);
	self->hooks->begin_shutdown(self);
}

uint32_t
world_next_id(uint32_t *counter)
{
	return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* ---- for status and metrics ---------------------------------------------
 */

static void
world_counters_add(struct counters *sum, const struct counters *c)
{
	sum->ops_put += c->ops_put;
	sum->ops_get += c->ops_get;
	sum->ops_flush += c->ops_flush;
	sum->bytes_put += c->bytes_put;
	sum->bytes_get += c->bytes_get;
	sum->ops_failed += c->ops_failed;
	sum->clients_accepted += c->clients_accepted;
	sum->clients_refused_uid += c->clients_refused_uid;
	sum->protocol_errors += c->protocol_errors;
	sum->regions_created += c->regions_created;
	sum->resolves_served += c->resolves_served;
	sum->target_puts += c->target_puts;
	sum->target_gets += c->target_gets;
	sum->am_dropped += c->am_dropped;
	sum->peers_cut_off += c->peers_cut_off;
	sum->inbound_refused += c->inbound_refused;
	sum->auth_failures += c->auth_failures;
	sum->connect_attempts += c->connect_attempts;
	sum->connect_failures += c->connect_failures;
	sum->target_refused += c->target_refused;
	sum->peers_evicted += c->peers_evicted;
	sum->ops_atomic += c->ops_atomic;
	sum->target_atomics += c->target_atomics;
	sum->notify_ring += c->notify_ring;
	sum->notify_socket += c->notify_socket;
	sum->notify_wakeups += c->notify_wakeups;
	sum->notify_wakeups_held += c->notify_wakeups_held;
}

/* For snapshot.c, with the world stopped. */
void
world_info_fill(const struct world *w, struct world_info *wi)
{
	wi->workers = w->n;
	wi->restarts = w->restarts;
	wi->regions_recovered = w->regions_recovered;
	wi->regions_reattached = w->regions_reattached;
	wi->store_recoveries = w->store_recoveries;
	snprintf(wi->config_refused, sizeof(wi->config_refused), "%s",
		 w->config_refused);
	for (uint32_t i = 0; i < w->n; i++) {
		world_counters_add(&wi->counters, &w->workers[i]->counters);
		wi->ops_in_flight += w->workers[i]->ops_in_flight;
	}
}

void
world_config_running(const struct world *w, struct config *out)
{
	const struct world_learned *l = &w->learned;

	*out = w->cfg;
	snprintf(out->transports, sizeof(out->transports), "%s", l->transports);
	out->listen_port = l->listen_port;
	snprintf(out->socket_path, sizeof(out->socket_path), "%s",
		 l->socket_path);
}
