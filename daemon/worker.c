/* SPDX-License-Identifier: BSD-2-Clause */
/* The UCX context and worker, progressed from the libevent loop: the
 * worker's event fd sits in the loop, and every loop turn that did work
 * ends with a tick that progresses until idle, flushes client output and
 * re-arms the worker (UCS_ERR_BUSY from arm means: progress again).
 *
 * This file sits below the subsystems (peers, clients, operations): what
 * a tick, the deadline timer or a drain does up there, it reaches only
 * through the hooks daemon.c hands it (struct worker_hooks). */
#include "daemon.h"
#include "fdhold.h"
#include "monotime.h"
#include "ucx_defaults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

double
daemon_now(void)
{
	return monotime_s();
}

/* The UCX boundary: a UCX status as the wire's, converted once where it
 * comes in. */
wire_status_t
worker_status_from_ucs(ucs_status_t st)
{
	switch (st) {
	case UCS_OK:
		return RMA__V1__STATUS__OK;
	case UCS_ERR_CONNECTION_RESET:
	case UCS_ERR_ENDPOINT_TIMEOUT:
	case UCS_ERR_IO_ERROR:
		return RMA__V1__STATUS__ERR_CONNECTION_RESET;
	case UCS_ERR_CANCELED:
		return RMA__V1__STATUS__ERR_CANCELED;
	case UCS_ERR_REJECTED:
		return RMA__V1__STATUS__ERR_REJECTED;
	case UCS_ERR_UNREACHABLE:
	case UCS_ERR_NOT_CONNECTED:
		return RMA__V1__STATUS__ERR_UNREACHABLE;
	case UCS_ERR_TIMED_OUT:
		return RMA__V1__STATUS__ERR_TIMEOUT;
	case UCS_ERR_NO_MEMORY:
		return RMA__V1__STATUS__ERR_NO_MEMORY;
	default:
		return RMA__V1__STATUS__ERR_TRANSPORT;
	}
}

struct timeval
worker_timeval(double seconds)
{
	struct timeval tv;

	if (seconds < 0)
		seconds = 0;
	tv.tv_sec = (time_t)seconds;
	tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
	return tv;
}

static void
worker_progress_idle(struct daemon *d)
{
	/* only worker 0's progress reads what UCX missed for the
	 * listener's connections (fdhold.c) */
	uint64_t held = d->index == 0 ? fdhold_mark() : 0;
	int calls = 0;

	/* Bounded, so a flood from one peer cannot starve the clients. */
	while (calls < 4096 && !d->pass_end) {
		calls++;
		if (ucp_worker_progress(d->worker) == 0)
			break;
	}
	/* Worker 0's missed events were read: numbers closed before are
	 * free to be used again (fdhold.c). */
	if (calls > 0 && d->index == 0)
		fdhold_release(held);
	d->hooks->progressed(d);
}

/* Polling mode: progress on every loop turn. A zero timer (not
 * event_active, which libevent would run again before polling) keeps
 * the loop from sleeping while client sockets are still polled between
 * turns. */
static void
worker_poll(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval zero = {0, 0};
	struct daemon *d = arg;

	/* Nothing from UCX: let whoever waits for this CPU run first (a
	 * client or another daemon polling too: on a machine with fewer
	 * cores than pollers, measured 16-29 us against 24-29 us for an
	 * 8-byte put, window 1, and 3x the operations per second). */
	if (ucp_worker_progress(d->worker) == 0)
		sched_yield();
	worker_progress_idle(d);
	d->hooks->after_progress(d);
	d->hooks->flush(d);
	d->pass_end = false;
	if (d->shutting_down && d->ops_in_flight == 0)
		event_base_loopbreak(d->base);
	evtimer_add(d->poll_ev, &zero);
}

/* Blocking mode, operations in flight: an answer is often microseconds
 * away, and waking up for it costs more than polling for it. Returns
 * whether UCX had work. */
static bool
worker_spin(struct daemon *d)
{
	double end;

	if (d->cfg->progress_spin_us == 0 || d->ops_in_flight == 0)
		return false;
	end = daemon_now() + d->cfg->progress_spin_us * 1e-6;
	do {
		if (ucp_worker_progress(d->worker) != 0)
			return true;
	} while (daemon_now() < end);
	return false;
}

static void
worker_tick(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval zero = {0, 0};
	struct daemon *d = arg;
	bool spun = false;

	if (d->cfg->polling) {
		worker_progress_idle(d);
		d->hooks->flush(d);
		d->pass_end = false;
		return;
	}
	/* Kicks from callbacks of this pass (a completion queued) are
	 * served by the pass itself, not by another one. */
	d->in_tick = true;
	for (int round = 0; round < 64; round++) {
		ucs_status_t st;

		worker_progress_idle(d);
		/* A closed endpoint completes its requests: progress again. */
		if (d->hooks->after_progress(d) > 0)
			continue;
		d->hooks->flush(d);
		/* Asked to end the pass: what it flushed goes out, and the
		 * clients' sockets are read (by a zero timer, which libevent
		 * runs after it polled them, as ring.c's poller) before
		 * UCX is progressed again. */
		if (d->pass_end) {
			d->pass_end = false;
			evtimer_add(d->tick_ev, &zero);
			break;
		}
		/* Once a pass: new client frames wait meanwhile. */
		if (!spun) {
			spun = true;
			if (worker_spin(d))
				continue;
		}
		st = ucp_worker_arm(d->worker);
		if (st == UCS_OK)
			break;
		if (st != UCS_ERR_BUSY) {
			log_error("worker_tick: ucp_worker_arm: %s",
				  ucs_status_string(st));
			break;
		}
	}
	d->in_tick = false;
	if (d->shutting_down && d->ops_in_flight == 0)
		event_base_loopbreak(d->base);
}

void
worker_kick(struct daemon *d)
{
	if (!d->in_tick && !event_pending(d->tick_ev, EV_TIMEOUT, NULL))
		event_active(d->tick_ev, EV_TIMEOUT, 0);
}

static void
worker_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	d->hooks->deadline(d);
	worker_kick(d);
}

int
worker_context_create(struct daemon *d, ucp_context_h *ucp_p)
{
	ucp_params_t params = {
	    .field_mask =
		UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
	    /* Without UCP_FEATURE_RMA no peer can use UCX's emulated
	     * RMA, which writes any address it is sent. */
	    .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP |
			(d->cfg->ucx_rma ? UCP_FEATURE_RMA : 0),
	    /* Workers register memory from their own threads. */
	    .mt_workers_shared = d->cfg->workers > 1,
	};
	ucp_config_t *config;
	ucs_status_t st;
	unsigned major, minor, release;
	const char *tls = d->cfg->transports;
	char warning[320];

	log_ucx_start();
	ucp_get_version(&major, &minor, &release);
	snprintf(d->ucx_version, sizeof(d->ucx_version), "%u.%u.%u", major,
		 minor, release);

	/* A restarted daemon must get its port back although connections
	 * of its previous run linger in TIME_WAIT. */
	setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
	st = ucp_config_read(NULL, NULL, &config);
	if (st != UCS_OK) {
		log_error("worker_context_create: ucp_config_read: %s",
			  ucs_status_string(st));
		return -1;
	}
	/* The environment wins, as UCX users expect. */
	if (getenv("UCX_TLS") != NULL)
		tls = getenv("UCX_TLS");
	else
		ucp_config_modify(config, "TLS", tls);
	snprintf(d->world->learned.transports,
		 sizeof(d->world->learned.transports), "%s", tls);
	/* rmad's UCX settings (copies only, the tcp transport's fragment
	 * size): why each, in common/ucx_defaults.c. */
	for (const struct ucx_default *u = ucx_defaults; u->name; u++) {
		int from_env;
		const char *v = ucx_defaults_effective(u, &from_env);
		if (!from_env)
			ucp_config_modify(config, u->name, v);
		else
			log_info("worker_context_create: %s=%s from the "
				 "environment",
				 u->env, v);
	}
	/* One family for UCX's tcp interfaces, the one peers reach us by
	 * (peer_sockaddr_usable): an interface of the other family aborts
	 * the daemon on a peer's connection request (UCX 1.13's
	 * uct_tcp_cm_handle_conn_pkt asserts its length against the
	 * interface's sockaddr_len) or overruns an endpoint's address.
	 * Applied after the environment is read, so it wins. */
	if (getenv("UCX_TCP_AF_PRIO") != NULL &&
	    strcmp(getenv("UCX_TCP_AF_PRIO"), "inet") != 0)
		log_warn("worker_context_create: UCX_TCP_AF_PRIO=%s ignored: "
			 "inet, daemons reach each other over IPv4 only",
			 getenv("UCX_TCP_AF_PRIO"));
	ucp_config_modify(config, "AF_PRIO", "inet");
	if (getenv("UCX_NET_DEVICES") == NULL) {
		char devices[512];
		if (netdev_auto(d->cfg, devices, sizeof(devices)) < 0) {
			ucp_config_release(config);
			return -1;
		}
		ucp_config_modify(config, "NET_DEVICES", devices);
		log_info("worker_context_create: UCX network devices %s",
			 devices);
	}
	if (config_check_rma_unchecked(d->cfg, warning, sizeof(warning)))
		log_warn("worker_context_create: %s (rma_protocol_unchecked)",
			 warning);
	st = ucp_init(&params, config, ucp_p);
	ucp_config_release(config);
	if (st != UCS_OK) {
		log_error("worker_context_create: ucp_init: %s",
			  ucs_status_string(st));
		return -1;
	}
	return 0;
}

int
worker_start(struct daemon *d)
{
	ucp_worker_params_t wparams = {
	    .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
	    .thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucs_status_t st;
	int efd;
	double period;
	struct timeval tv;

	st = ucp_worker_create(d->ucp, &wparams, &d->worker);
	if (st != UCS_OK) {
		log_error("worker_start: ucp_worker_create: %s",
			  ucs_status_string(st));
		return -1;
	}
	/* Worker 0 owns the listener: it releases held numbers (fdhold.c) */
	if (d->index == 0)
		fdhold_wake_on(d->mail_fd);
	st = ucp_worker_get_efd(d->worker, &efd);
	if (st != UCS_OK) {
		log_error("worker_start: ucp_worker_get_efd: %s",
			  ucs_status_string(st));
		goto err_worker;
	}
	d->worker_ev =
	    event_new(d->base, efd, EV_READ | EV_PERSIST, worker_tick, d);
	d->tick_ev = event_new(d->base, -1, 0, worker_tick, d);
	d->deadline_ev =
	    event_new(d->base, -1, EV_PERSIST, worker_on_deadline, d);
	if (d->worker_ev == NULL || d->tick_ev == NULL ||
	    d->deadline_ev == NULL ||
	    (!d->cfg->polling && event_add(d->worker_ev, NULL) < 0))
		goto err_events;
	period = d->cfg->op_timeout / 10;
	period = period < 0.05 ? 0.05 : period > 1.0 ? 1.0 : period;
	tv = worker_timeval(period);
	event_add(d->deadline_ev, &tv);
	if (d->cfg->polling) {
		/* Lowest priority would be nicer; one priority level keeps it
		 * fair with the client sockets. */
		d->poll_ev = evtimer_new(d->base, worker_poll, d);
		if (d->poll_ev == NULL)
			goto err_events;
		event_active(d->poll_ev, EV_TIMEOUT, 0);
	}
	worker_kick(d);
	if (d->index == 0)
		log_info("worker_start: UCX %s, transports %s, %s progress, "
			 "%u worker%s",
			 d->ucx_version, d->world->learned.transports,
			 d->cfg->polling ? "polling" : "blocking",
			 d->cfg->workers, d->cfg->workers == 1 ? "" : "s");
	return 0;

err_events:
	log_error("worker_start: cannot set up worker events");
err_worker:
	worker_stop(d);
	return -1;
}

void
worker_stop(struct daemon *d)
{
	if (d->poll_ev)
		event_free(d->poll_ev);
	d->poll_ev = NULL;
	if (d->worker_ev)
		event_free(d->worker_ev);
	if (d->tick_ev)
		event_free(d->tick_ev);
	if (d->deadline_ev)
		event_free(d->deadline_ev);
	d->worker_ev = d->tick_ev = d->deadline_ev = NULL;
	if (d->index == 0)
		fdhold_wake_on(-1);
	if (d->worker)
		ucp_worker_destroy(d->worker);
	d->worker = NULL;
	/* Its missed events went with it: no number need stay taken. */
	if (d->index == 0)
		fdhold_release(UINT64_MAX);
}

/* Progress until done(d) or the deadline passes, waiting on the worker
 * fd between passes so that it does not spin: used outside the loop, at
 * shutdown. */
void
worker_progress_until(struct daemon *d, double seconds,
		      bool (*done)(struct daemon *d))
{
	double deadline = daemon_now() + seconds;

	while (daemon_now() < deadline) {
		worker_progress_idle(d);
		d->hooks->after_progress(d);
		d->hooks->flush(d);
		if (done(d))
			break;
		if (ucp_worker_arm(d->worker) == UCS_OK) {
			struct timeval tv = {0, 10000};
			event_base_loopexit(d->base, &tv);
			event_base_loop(d->base, EVLOOP_ONCE);
		}
	}
}

static bool
worker_drained(struct daemon *d)
{
	return d->ops_in_flight == 0 && d->hooks->drained(d);
}

/* Progress until nothing is in flight or the deadline passes: used when
 * closing endpoints outside the loop, at shutdown. */
void
worker_drain(struct daemon *d, double seconds)
{
	worker_progress_until(d, seconds, worker_drained);
}
