/* The daemon context: set up and torn down in one place, so main() and
 * the protocol tests build it the same way. */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int
daemon_start(struct daemon *d, const struct config *cfg)
{
	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	/* A fresh identity per start: descriptors of a previous run are
	 * recognised as stale, never written through. */
	if (getrandom(d->id, sizeof(d->id), 0) != sizeof(d->id)) {
		log_error("daemon_start: getrandom: %s", strerror(errno));
		return -1;
	}
	descriptor_hex(d->id, sizeof(d->id), d->id_hex);
	d->started = daemon_now();
	d->listen_fd = -1;
	d->next_conn_id = 1;
	d->next_region_id = 1;
	d->next_generation = 1;
	d->next_peer_id = 1;
	d->next_token = 1;
	TAILQ_INIT(&d->conns);
	TAILQ_INIT(&d->dirty_conns);
	TAILQ_INIT(&d->peers);
	TAILQ_INIT(&d->quarantine);
	idmap_init(&d->regions);
	idmap_init(&d->ops_by_token);
	d->base = event_base_new();
	if (d->base == NULL) {
		log_error("daemon_start: event_base_new failed");
		return -1;
	}
	if (worker_start(d) < 0)
		goto err_base;
	if (peer_system_start(d) < 0)
		goto err_worker;
	return 0;

err_worker:
	peer_system_stop(d);
	worker_stop(d);
err_base:
	event_base_free(d->base);
	d->base = NULL;
	return -1;
}

void
daemon_stop(struct daemon *d)
{
	/* Whatever is still in flight fails now. */
	conn_server_stop(d);
	peer_system_stop(d);
	conn_flush_dirty(d);
	while (!TAILQ_EMPTY(&d->conns))
		conn_close(TAILQ_FIRST(&d->conns), "daemon shutting down");
	worker_drain(d, 1.0);
	region_quarantine_drain_all(d);
	op_pool_cleanup(d);
	free(d->decode_arena);
	d->decode_arena = NULL;
	worker_stop(d);
	idmap_cleanup(&d->regions);
	idmap_cleanup(&d->ops_by_token);
	event_base_free(d->base);
	d->base = NULL;
}
