/* SPDX-License-Identifier: BSD-2-Clause */
/* rmad: the per-host remote memory access daemon. */
#include "daemon.h"
#include "config_saved.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile sig_atomic_t signals_seen;

/* What SIGHUP needs: the daemon, argv to parse again, and the last
 * configuration that worked as kept in systemd's fd store (store: the
 * store is on). */
struct main_reload {
	struct daemon *d;
	int argc;
	char **argv;
	struct config_saved *saved;
	bool store;
};

static void main_fd_budget(struct config *cfg);

/* What runs, kept for the next start (fdstore.c) to fall back on. */
static void
main_save(struct config_saved *saved, const struct daemon *d)
{
	struct config running;

	world_config_running(d->world, &running);
	config_saved_store(saved, &running);
}

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
	sdnotify_stopping(d);
	/* systemctl restart keeps the store, stop empties it: either way
	 * the regions are systemd's to keep or drop now. */
	fdstore_freeze(d);
	world_shutdown(d);
}

/* SIGHUP: read the configuration again (config_reload.c says what may
 * change); a file that does not parse or check changes nothing. */
static void
main_on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct main_reload *r = arg;
	struct config old, next;
	char err[512];
	int rc;

	if (r->d->shutting_down) {
		log_info("main_on_hup: SIGHUP while shutting down: ignored");
		return;
	}
	rc = config_reread(r->argc, r->argv, &next, err, sizeof(err));
	if (rc > 0) {
		log_warn("main_on_hup: SIGHUP: started without --config, "
			 "nothing to reload");
		return;
	}
	if (rc < 0) {
		log_error("main_on_hup: reload refused, configuration "
			  "unchanged: %s",
			  err);
		return;
	}
	log_info("main_on_hup: SIGHUP, reloading the configuration");
	main_fd_budget(&next);
	old = *r->d->cfg;
	daemon_reconfigure(r->d, &next);
	/* after: lines about a new log level obey it */
	if (config_reload_report(&old, &next) == 0 &&
	    r->d->world->config_refused[0] != '\0') {
		/* the file now holds what runs: nothing refused any more */
		log_info("main_on_hup: the configuration file is accepted "
			 "and applied whole: no longer running on the last "
			 "good one");
		r->d->world->config_refused[0] = '\0';
	}
	if (r->store)
		main_save(r->saved, r->d);
}

/* The configuration given was refused (why): run on the last one that
 * worked (saved, len), keeping this start's take_over and fds. 0, or -1
 * logged: there is none. */
static int
main_fall_back(struct config *cfg, const uint8_t *saved, size_t len,
	       const char *why)
{
	char err[512];

	if (saved == NULL) {
		log_error("main: configuration refused (%s), and no last good "
			  "configuration to run on instead",
			  why);
		return -1;
	}
	if (config_saved_decode(saved, len, cfg, err, sizeof(err)) < 0) {
		log_error("main: configuration refused (%s), and the last good "
			  "one is unreadable: %s",
			  why, err);
		return -1;
	}
	log_init(cfg->log_level);
	log_error("main: configuration refused: %s; rmad keeps its regions "
		  "and runs on the last configuration that worked (fix the "
		  "file, then systemctl reload or restart)",
		  why);
	main_fd_budget(cfg);
	return 0;
}

/* daemon_start_as; with something to keep (from), a failure on the
 * configuration given (UCX refusing a device or transport that passed
 * the checks) is tried again on the last one that worked: the
 * predecessor's (the newer), or the one saved in the fd store. */
static int
main_start(struct daemon *d, struct config *cfg,
	   const struct handover_state *from, const struct config_saved *saved,
	   char *refused, size_t refused_len)
{
	const uint8_t *good = saved->blob;
	size_t good_len = saved->len;

	if (from != NULL && from->config != NULL) {
		good = from->config;
		good_len = from->config_len;
	}
	if (daemon_start_as(d, cfg, from) == 0)
		return 0;
	/* refused already: this was the last good one */
	if (from == NULL || good == NULL || refused[0] != '\0')
		return -1;
	snprintf(refused, refused_len,
		 "rmad did not start on it (the errors logged before say "
		 "why)");
	if (main_fall_back(cfg, good, good_len, refused) < 0)
		return -1;
	return daemon_start_as(d, cfg, from);
}

/* --ready-fd: written and closed once serving. */
static void
main_signal_ready(int fd)
{
	static const char msg[] = "ready\n";

	if (fd < 0)
		return;
	if (write(fd, msg, sizeof(msg) - 1) < 0)
		log_warn("main_signal_ready: write: %s", strerror(errno));
	close(fd);
}

/* Descriptors: the soft limit goes up to the hard one (systemd's
 * default soft limit is 1024), and inbound daemons are capped to what it
 * holds. UCX's tcp costs about 2 descriptors per endpoint and a peer
 * connected both ways has two; the rest is clients, the listeners and
 * UCX's own. Running out inside UCX is worse than refusing a peer. */
static void
main_fd_budget(struct config *cfg)
{
	enum { FDS_PER_PEER = 4, FDS_RESERVED = 256 };
	struct rlimit rl;
	rlim_t fit;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	fit = rl.rlim_cur > FDS_RESERVED
		  ? (rl.rlim_cur - FDS_RESERVED) / FDS_PER_PEER
		  : 1;
	if (cfg->max_inbound_peers > fit) {
		log_warn("main_fd_budget: %llu descriptors hold %llu inbound "
			 "peers, not max_inbound_peers %u: capped (raise "
			 "LimitNOFILE / ulimit -n)",
			 (unsigned long long)rl.rlim_cur,
			 (unsigned long long)fit, cfg->max_inbound_peers);
		cfg->max_inbound_peers = (uint32_t)fit;
	}
}

/* The configuration argv gives, into cfg: 0; -1 when it is refused (why
 * in refused); 1 or CONFIG_USAGE as config_parse_args. Refused, a start
 * with something to keep (the fd store's regions, a predecessor's) runs
 * on the last configuration that worked; only one with nothing to keep
 * exits EX_CONFIG. Until that is known, the given one as far as it
 * parses says where to look. */
static int
main_configure(struct config *cfg, int argc, char **argv, char *refused,
	       size_t refused_len)
{
	int rc;

	config_defaults(cfg);
	rc = config_parse_args(cfg, argc, argv, refused, refused_len);
	if (rc == -1)
		config_parse_lenient(cfg, argc, argv);
	return rc;
}

/* Serving: metrics, systemd, the signals, and the loop until a signal
 * ends it. 0 then, or 1 when metrics or systemd's timers do not start. */
static int
main_serve(struct daemon *d, struct main_reload *reload, int ready_fd)
{
	struct event *sigterm_ev, *sigint_ev, *sighup_ev;

	if (metrics_start(d) < 0)
		return 1;
	if (sdnotify_start(d) < 0) {
		metrics_stop(d);
		return 1;
	}
	sigterm_ev = evsignal_new(d->base, SIGTERM, main_on_signal, d);
	sigint_ev = evsignal_new(d->base, SIGINT, main_on_signal, d);
	/* From here on SIGHUP reloads instead of ending the daemon. */
	sighup_ev = evsignal_new(d->base, SIGHUP, main_on_hup, reload);
	evsignal_add(sigterm_ev, NULL);
	evsignal_add(sigint_ev, NULL);
	evsignal_add(sighup_ev, NULL);

	log_info("main: rmad %s id %s serving %s, listening on %s:%u",
		 RMA_VERSION, d->id_hex, d->world->learned.socket_path,
		 d->cfg->listen_host, d->world->learned.listen_port);
	main_signal_ready(ready_fd);
	sdnotify_ready(d);
	event_base_dispatch(d->base);

	event_free(sigterm_ev);
	event_free(sigint_ev);
	event_free(sighup_ev);
	sdnotify_stop(d);
	metrics_stop(d);
	return 0;
}

int
main(int argc, char **argv)
{
	static struct daemon d;
	struct config cfg;
	struct config_saved saved = {0};
	struct main_reload reload = {&d, argc, argv, &saved, false};
	struct handover_state from = {.listen_fd = -1};
	struct sdnotify_fds passed;
	struct fdstore *store = NULL;
	char refused[384] = "";
	int rc, recovered, activation_fd;

	rc = main_configure(&cfg, argc, argv, refused, sizeof(refused));
	if (rc > 0 || rc == CONFIG_USAGE) /* sysexits.h: EX_USAGE */
		return rc > 0 ? 0 : 64;
	log_init(cfg.log_level);
	signal(SIGPIPE, SIG_IGN);

	/* systemd's: the activation socket, and what the fd store kept of
	 * a previous process (fdstore.c), the last good configuration with
	 * it */
	if (sdnotify_listen_fds(&passed) < 0)
		return 1;
	config_saved_take(&passed, &saved);
	/* nothing kept: config_parse_args said it all */
	if (rc < 0 && !cfg.take_over &&
	    (saved.blob == NULL ||
	     main_fall_back(&cfg, saved.blob, saved.len, refused) < 0))
		goto err_config;
	recovered = fdstore_open(&cfg, &passed, &store, &from);
	activation_fd = passed.activation_fd;
	passed.activation_fd = -1; /* the world's, then server_start's */
	sdnotify_fds_free(&passed);
	if (recovered < 0)
		goto err_saved;
	if (rc < 0 && !cfg.take_over && recovered == 0) {
		log_error("main: configuration refused, and systemd's fd store "
			  "kept no regions: nothing to keep, exiting");
		fdstore_destroy(store);
		goto err_config;
	}
	/* A take-over waits here until the old process is gone. */
	if (cfg.take_over && handover_receive(&cfg, &from) < 0)
		goto err_saved;
	if (rc < 0 && cfg.take_over &&
	    main_fall_back(&cfg, from.config, from.config_len, refused) < 0) {
		handover_state_free(&from);
		goto err_config;
	}
	if (refused[0] == '\0')
		main_fd_budget(&cfg);
	if (main_start(&d, &cfg, cfg.take_over || recovered ? &from : NULL,
		       &saved, refused, sizeof(refused)) < 0)
		goto err_start;
	d.world->learned.activation_fd = activation_fd;
	if (cfg.take_over || recovered)
		rc = handover_restore(&d, &from) < 0 ? 1 : 0;
	else
		rc = server_start(&d);
	if (rc == 0 && store != NULL && fdstore_attach(&d, store) < 0)
		rc = 1;
	if (rc != 0)
		goto out_daemon;
	/* Serving: this configuration worked. Kept for the next start
	 * (the hand-over sends what runs, handover.c). */
	snprintf(d.world->config_refused, sizeof(d.world->config_refused), "%s",
		 refused);
	reload.store = store != NULL;
	if (store != NULL)
		main_save(&saved, &d);
	/* Without it the daemon serves, but cannot be taken over. */
	handover_start(&d);
	rc = main_serve(&d, &reload, cfg.ready_fd);

out_daemon:
	handover_stop(&d);
	daemon_stop(&d);
	fdstore_destroy(store);
	config_saved_free(&saved);
	if (rc == 0)
		log_info("main: rmad stopped");
	return rc;

err_config:
	/* the refusals before fdstore_open come here with passed still
	 * held (freed again after it: sdnotify_fds_free leaves it empty) */
	sdnotify_fds_free(&passed);
	config_saved_free(&saved);
	return 78; /* sysexits.h: EX_CONFIG */

err_start:
	handover_state_free(&from);
	fdstore_destroy(store);

err_saved:
	config_saved_free(&saved);
	return 1;
}
