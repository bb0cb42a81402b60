/* rmad: the per-host remote memory access daemon. */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t signals_seen;

/* First signal: stop taking work, drain for a bounded time. Second: go. */
static void
main_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	if (++signals_seen > 1) {
		log_warn("main_on_signal: second signal, exiting at once");
		_exit(1);
	}
	log_info("main_on_signal: %s, shutting down",
		 sig == SIGINT ? "SIGINT" : "SIGTERM");
	notify_stopping(d);
	world_shutdown(d);
}

static void
main_signal_ready(struct daemon *d)
{
	static const char msg[] = "ready\n";

	if (d->cfg.ready_fd < 0)
		return;
	if (write(d->cfg.ready_fd, msg, sizeof(msg) - 1) < 0)
		log_warn("main_signal_ready: write: %s", strerror(errno));
	close(d->cfg.ready_fd);
	d->cfg.ready_fd = -1;
}

int
main(int argc, char **argv)
{
	static struct daemon d;
	struct config cfg;
	struct event *sigterm_ev, *sigint_ev;
	int rc;

	config_defaults(&cfg);
	rc = config_parse_args(&cfg, argc, argv);
	if (rc != 0) /* sysexits.h: EX_USAGE, EX_CONFIG */
		return rc > 0 ? 0 : rc == CONFIG_USAGE ? 64 : 78;
	log_init(cfg.log_level);
	signal(SIGPIPE, SIG_IGN);

	if (daemon_start(&d, &cfg) < 0)
		return 1;
	rc = server_start(&d);
	if (rc != 0)
		goto err_daemon;
	rc = 1; /* what the failures below exit with */
	if (metrics_start(&d) < 0)
		goto err_daemon;
	if (notify_start(&d) < 0)
		goto err_metrics;
	sigterm_ev = evsignal_new(d.base, SIGTERM, main_on_signal, &d);
	sigint_ev = evsignal_new(d.base, SIGINT, main_on_signal, &d);
	evsignal_add(sigterm_ev, NULL);
	evsignal_add(sigint_ev, NULL);

	log_info("main: rmad %s id %s serving %s, listening on %s:%u",
		 RMA_VERSION, d.id_hex, d.cfg.socket_path, d.cfg.listen_host,
		 d.cfg.listen_port);
	main_signal_ready(&d);
	notify_ready(&d);
	event_base_dispatch(d.base);

	event_free(sigterm_ev);
	event_free(sigint_ev);
	notify_stop(&d);
	metrics_stop(&d);
	daemon_stop(&d);
	log_info("main: rmad stopped");
	return 0;

err_metrics:
	metrics_stop(&d);
err_daemon:
	daemon_stop(&d);
	return rc;
}
