/* rmad: the per-host remote memory access daemon. */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static volatile sig_atomic_t signals_seen;

static void
daemon_finish_shutdown(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	log_warn("daemon_finish_shutdown: %llu operations still in flight "
		 "after %.1f s, failing them",
		 (unsigned long long)d->ops_in_flight, d->cfg.shutdown_timeout);
	event_base_loopbreak(d->base);
}

static void
daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	struct timeval tv;
	Rma__V1__Shutdown shutdown = RMA__V1__SHUTDOWN__INIT;
	Rma__V1__Event event = RMA__V1__EVENT__INIT;
	struct conn *c;

	if (++signals_seen > 1) {
		log_warn("daemon_on_signal: second signal, exiting at once");
		_exit(1);
	}
	log_info("daemon_on_signal: %s, shutting down",
		 sig == SIGINT ? "SIGINT" : "SIGTERM");
	d->shutting_down = true;
	conn_server_stop(d);
	shutdown.detail = "rmad is shutting down";
	event.body_case = RMA__V1__EVENT__BODY_SHUTDOWN;
	event.shutdown = &shutdown;
	TAILQ_FOREACH(c, &d->conns, link)
		conn_send_event(c, &event);
	tv.tv_sec = (time_t)d->cfg.shutdown_timeout;
	tv.tv_usec = (suseconds_t)((d->cfg.shutdown_timeout -
				    (double)tv.tv_sec) * 1e6);
	event_base_once(d->base, -1, EV_TIMEOUT, daemon_finish_shutdown, d,
			&tv);
	worker_kick(d);
}

static void
daemon_signal_ready(struct daemon *d)
{
	static const char msg[] = "ready\n";

	if (d->cfg.ready_fd < 0)
		return;
	if (write(d->cfg.ready_fd, msg, sizeof(msg) - 1) < 0)
		log_warn("daemon_signal_ready: write: %s", strerror(errno));
	close(d->cfg.ready_fd);
	d->cfg.ready_fd = -1;
}

int
main(int argc, char **argv)
{
	struct daemon d;
	struct event *sigterm_ev, *sigint_ev;
	int rc;

	memset(&d, 0, sizeof(d));
	config_defaults(&d.cfg);
	rc = config_parse_args(&d.cfg, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 64;
	log_init(d.cfg.log_level);
	signal(SIGPIPE, SIG_IGN);

	if (getrandom(d.id, sizeof(d.id), 0) != sizeof(d.id)) {
		log_error("main: getrandom: %s", strerror(errno));
		return 1;
	}
	descriptor_hex(d.id, sizeof(d.id), d.id_hex);
	d.started = daemon_now();
	d.listen_fd = -1;
	d.next_conn_id = 1;
	d.next_region_id = 1;
	d.next_generation = 1;
	d.next_peer_id = 1;
	d.next_token = 1;
	TAILQ_INIT(&d.conns);
	TAILQ_INIT(&d.dirty_conns);
	TAILQ_INIT(&d.peers);
	TAILQ_INIT(&d.quarantine);
	idmap_init(&d.regions);

	d.base = event_base_new();
	if (d.base == NULL) {
		log_error("main: event_base_new failed");
		return 1;
	}
	if (worker_start(&d) < 0)
		goto err_base;
	if (peer_system_start(&d) < 0)
		goto err_worker;
	if (conn_server_start(&d) < 0)
		goto err_peers;

	sigterm_ev = evsignal_new(d.base, SIGTERM, daemon_on_signal, &d);
	sigint_ev = evsignal_new(d.base, SIGINT, daemon_on_signal, &d);
	evsignal_add(sigterm_ev, NULL);
	evsignal_add(sigint_ev, NULL);

	log_info("main: rmad %s id %s serving %s, listening on %s:%u",
		 RMA_VERSION, d.id_hex, d.cfg.socket_path, d.cfg.listen_host,
		 d.cfg.listen_port);
	daemon_signal_ready(&d);
	event_base_dispatch(d.base);

	/* Shutdown: whatever is still in flight fails now. */
	conn_server_stop(&d);
	peer_system_stop(&d);
	while (!TAILQ_EMPTY(&d.conns))
		conn_close(TAILQ_FIRST(&d.conns), "daemon shutting down");
	worker_drain(&d, 1.0);
	region_quarantine_drain_all(&d);
	event_free(sigterm_ev);
	event_free(sigint_ev);
	op_pool_cleanup(&d);
	worker_stop(&d);
	idmap_cleanup(&d.regions);
	event_base_free(d.base);
	log_info("main: rmad stopped");
	return 0;

err_peers:
	peer_system_stop(&d);
err_worker:
	worker_stop(&d);
err_base:
	event_base_free(d.base);
	return 1;
}
