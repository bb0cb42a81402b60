/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl status: the daemon's StatusReply, for people or as JSON. */
#include "rma.h"
#include "rma.pb-c.h"
#include "rmactl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <sysexits.h>

/* Who the daemon is, how long it has been up, what it runs on. */
static void
rmactl_status_human_daemon(const Rma__V1__StatusReply *s)
{
	uint64_t up = s->uptime_ms / 1000;

	printf("daemon      %s (pid %d, version %s)\n",
	       rmactl_or_dash(s->daemon_id), s->pid,
	       rmactl_or_dash(s->version));
	printf("ucx         %s\n", rmactl_or_dash(s->ucx_version));
	printf("transports  %s\n", rmactl_or_dash(s->transports));
	printf("listen      %s\n", rmactl_or_dash(s->listen_address));
	printf("uptime      %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64
	       "\n",
	       up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
	printf("progress    %s\n", rmactl_or_dash(s->progress_mode));
	printf("workers     %u\n", s->workers);
	printf("restarts    %u kept (regions recovered %" PRIu64
	       ", re-attached %" PRIu64 ", orphans now %" PRIu64 ")\n",
	       s->restarts, s->regions_recovered, s->regions_reattached,
	       s->regions_orphaned);
	if (s->config_refused != NULL && s->config_refused[0] != '\0')
		printf("config      REFUSED, running on the last configuration "
		       "that worked: %s\n",
		       s->config_refused);
}

static void
rmactl_status_human_clients(const Rma__V1__StatusReply *s)
{
	char b1[32];

	printf("\nclients (%zu)\n", s->n_clients);
	if (s->n_clients > 0)
		printf("  %4s %7s %6s %6s %-24s %7s %10s %8s %10s\n", "ID",
		       "PID", "UID", "GID", "NAME", "REGIONS", "BYTES",
		       "INFLIGHT", "OPS");
	for (size_t i = 0; i < s->n_clients; i++) {
		const Rma__V1__ClientInfo *c = s->clients[i];

		rmactl_bytes(b1, sizeof(b1), c->region_bytes);
		printf("  %4u %7d %6u %6u %-24s %7u %10s %8" PRIu64
		       " %10" PRIu64 "\n",
		       c->client_id, c->pid, c->uid, c->gid,
		       rmactl_or_dash(c->name), c->regions, b1, c->in_flight,
		       c->ops);
	}
}

static void
rmactl_status_human_regions(const Rma__V1__StatusReply *s)
{
	char b1[32];

	printf("\nregions (%zu)\n", s->n_regions);
	if (s->n_regions > 0)
		printf("  %8s %10s %6s %8s %5s\n", "ID", "LENGTH", "CLIENT",
		       "INFLIGHT", "KIND");
	for (size_t i = 0; i < s->n_regions; i++) {
		const Rma__V1__RegionInfo *r = s->regions[i];

		char owner[16];

		/* client 0: taken over, its owner not back yet */
		if (r->client_id == 0)
			snprintf(owner, sizeof(owner), "orphan");
		else
			snprintf(owner, sizeof(owner), "%u", r->client_id);
		rmactl_bytes(b1, sizeof(b1), r->length);
		/* fd: the client's own memory file (rma_region_register_fd) */
		printf("  %8" PRIu64 " %10s %6s %8" PRIu64 " %5s\n",
		       r->region_id, b1, owner, r->in_flight,
		       r->registered ? "fd" : "alloc");
	}
}

static void
rmactl_status_human_counters(const Rma__V1__Counters *k)
{
	char b1[32], b2[32];

	printf("\ncounters\n");
	printf("  ops            put %" PRIu64 ", get %" PRIu64
	       ", atomic %" PRIu64 ", flush %" PRIu64 ", failed %" PRIu64 "\n",
	       k->ops_put, k->ops_get, k->ops_atomic, k->ops_flush,
	       k->ops_failed);
	rmactl_bytes(b1, sizeof(b1), k->bytes_put);
	rmactl_bytes(b2, sizeof(b2), k->bytes_get);
	printf("  bytes          put %s, get %s\n", b1, b2);
	printf("  clients        %" PRIu64 " accepted, %" PRIu64
	       " protocol errors\n",
	       k->clients_accepted, k->protocol_errors);
	printf("  regions        %" PRIu64 " created\n", k->regions_created);
	printf("  resolves       %" PRIu64 " served\n", k->resolves_served);
	printf("  served         put %" PRIu64 ", get %" PRIu64
	       ", atomic %" PRIu64 " for other daemons, %" PRIu64 " refused\n",
	       k->target_puts, k->target_gets, k->target_atomics,
	       k->target_refused);
	printf("  notifications  %" PRIu64 " through rings, %" PRIu64
	       " over sockets; owners woken %" PRIu64 " at once, %" PRIu64
	       " held\n",
	       k->notifications_ring, k->notifications_socket,
	       k->notify_wakeups, k->notify_wakeups_held);
	printf("  connects       %" PRIu64 " started, %" PRIu64
	       " never came up\n",
	       k->peer_connect_attempts, k->peer_connect_failures);
	printf("  peers          %" PRIu64 " messages dropped, %" PRIu64
	       " cut off, %" PRIu64 " connections refused, %" PRIu64
	       " key proofs failed\n",
	       k->peer_messages_dropped, k->peers_cut_off, k->inbound_refused,
	       k->peer_auth_failures);
	printf("  ucx sockets    %" PRIu64 " connections refused at "
	       "accept, %" PRIu64 " of them from other local users\n",
	       k->ucx_accept_refused, k->ucx_accept_refused_local_user);
}

static void
rmactl_status_human(const Rma__V1__StatusReply *s)
{
	rmactl_status_human_daemon(s);

	printf("\npeers (%zu)\n", s->n_peers);
	/* rmactl peers --wide and status --json have every detail */
	if (s->n_peers > 0)
		rmactl_peers_print(s, 0, "  ");

	rmactl_status_human_clients(s);
	printf("\nusers (%zu)\n", s->n_users);
	if (s->n_users > 0)
		rmactl_users_print(s, "  ");
	rmactl_status_human_regions(s);
	if (s->counters != NULL)
		rmactl_status_human_counters(s->counters);
}

int
rmactl_status_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	Rma__V1__StatusReply *s;
	rma_client_t *client;
	rma_status_t st;
	int json = 0, c, rc = 0;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			fputs(rmactl_cmd_usage[RMACTL_STATUS], stdout);
			return 0;
		default:
			return rmactl_usage_error(RMACTL_STATUS,
						  "status: unknown option %s",
						  argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_usage_error(RMACTL_STATUS,
					  "status: unexpected argument %s",
					  argv[optind]);

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK)
		return rmactl_fail("status", st, NULL);
	rc = rmactl_status_get("status", client, &s);
	if (rc != 0)
		goto out_disconnect;
	if (json)
		rmactl_json_print(stdout, &s->base);
	else
		rmactl_status_human(s);
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = rmactl_errx(EX_IOERR, "status", "write to stdout: %s",
				 strerror(errno));
	rma__v1__status_reply__free_unpacked(s, NULL);
out_disconnect:
	rma_disconnect(client);
	return rc;
}
