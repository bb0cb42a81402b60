/* SPDX-License-Identifier: BSD-2-Clause */
/* Prometheus text exposition (format 0.0.4) at GET /metrics, served by
 * evhttp from worker 0's loop: a scrape renders a snapshot (snapshot.h),
 * taken under one world stop, as status.c does; what only the page
 * counts is recorded by metrics.c. */
#include "daemon.h"
#include "metrics.h"
#include "metrics_series.h"
#include "snapshot.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/http.h>

static const char *const metrics_kind_names[METRICS_KINDS] = {
    "put", "get", "flush", "atomic"};

/* ---- exposition ----------------------------------------------------- */

/* A label value: backslash, double quote and newline escaped. */
static void
metrics_label(struct evbuffer *out, const char *s)
{
	evbuffer_add(out, "\"", 1);
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(out, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, s, 1);
	}
	evbuffer_add(out, "\"", 1);
}

static void
metrics_head(struct evbuffer *out, const char *name, const char *type,
	     const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
			    name, type);
}

static void
metrics_scalar(struct evbuffer *out, const char *name, const char *type,
	       const char *help, unsigned long long v)
{
	metrics_head(out, name, type, help);
	evbuffer_add_printf(out, "%s %llu\n", name, v);
}

/* The standard process_* metrics (the Prometheus client libraries'
 * names), from getrusage, getrlimit and /proc/self; one that cannot be
 * read is left out, not given as 0. */
static void
metrics_process(struct evbuffer *out)
{
	struct rusage ru;
	struct rlimit rl;
	unsigned long long start_ticks = 0, btime = 0, rss_pages;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	char line[512], *p;
	FILE *f;
	DIR *dir;

	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		metrics_head(out, "process_cpu_seconds_total", "counter",
			     "User and system CPU time spent, in seconds.");
		evbuffer_add_printf(
		    out, "process_cpu_seconds_total %.6f\n",
		    (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
			    1e6);
	}
	f = fopen("/proc/self/statm", "re");
	if (f != NULL) {
		if (fscanf(f, "%*u %llu", &rss_pages) == 1 && page > 0)
			metrics_scalar(out, "process_resident_memory_bytes",
				       "gauge",
				       "Resident memory size in bytes.",
				       rss_pages * (unsigned long long)page);
		fclose(f);
	}
	dir = opendir("/proc/self/fd");
	if (dir != NULL) {
		unsigned long long n = 0;
		while (readdir(dir) != NULL)
			n++;
		closedir(dir);
		/* ".", ".." and the directory's own fd */
		metrics_scalar(out, "process_open_fds", "gauge",
			       "Number of open file descriptors.",
			       n >= 3 ? n - 3 : 0);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		metrics_scalar(out, "process_max_fds", "gauge",
			       "Maximum number of open file descriptors.",
			       (unsigned long long)rl.rlim_cur);
	/* start time: field 22 of /proc/self/stat (clock ticks after boot;
	 * the name in field 2 may hold spaces, hence after the last ')'),
	 * plus btime of /proc/stat */
	f = fopen("/proc/self/stat", "re");
	if (f != NULL) {
		if (fgets(line, sizeof(line), f) != NULL &&
		    (p = strrchr(line, ')')) != NULL)
			sscanf(
			    p + 2,
			    "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			    "%*s %*s %*s %*s %*s %*s %*s %llu",
			    &start_ticks);
		fclose(f);
	}
	f = fopen("/proc/stat", "re");
	if (f != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "btime %llu", &btime) == 1)
				break;
		fclose(f);
	}
	if (start_ticks != 0 && btime != 0 && tick > 0) {
		metrics_head(out, "process_start_time_seconds", "gauge",
			     "Start time of the process since the Unix epoch, "
			     "in seconds.");
		evbuffer_add_printf(out, "process_start_time_seconds %.2f\n",
				    (double)btime +
					(double)start_ticks / (double)tick);
	}
}

/* A counter split in two by one label. */
static void
metrics_split(struct evbuffer *out, const char *name, const char *help,
	      const char *label, const char *a, unsigned long long va,
	      const char *b, unsigned long long vb)
{
	metrics_head(out, name, "counter", help);
	evbuffer_add_printf(out, "%s{%s=\"%s\"} %llu\n%s{%s=\"%s\"} %llu\n",
			    name, label, a, va, name, label, b, vb);
}

static void
metrics_by_series(struct evbuffer *out, const struct metrics *m,
		  const char *name, const char *help, size_t field)
{
	metrics_head(out, name, "counter", help);
	for (size_t i = 0; i < m->n_series; i++) {
		const uint64_t *v =
		    (const uint64_t *)((const char *)&m->series[i] + field);
		for (int k = 0; k < METRICS_KINDS; k++) {
			if (m->series[i].ops[k] == 0)
				continue;
			evbuffer_add_printf(out, "%s{op=\"%s\",peer=", name,
					    metrics_kind_names[k]);
			metrics_label(out, m->series[i].peer);
			evbuffer_add_printf(out, "} %llu\n",
					    (unsigned long long)v[k]);
		}
	}
}

/* A peer is named by what outlives its connection, and what both ends
 * of one link agree on: the far daemon's listen address and id, and the
 * initiator's worker (its lane: each worker has its own endpoint). An
 * inbound peer's source port is new at every reconnect, so it is not used:
 * a reconnect keeps its series, and a gone peer's series go with it. */
static void
metrics_peer_labels(struct evbuffer *out, const char *name,
		    const struct peer_info *p)
{
	evbuffer_add_printf(out, "%s{peer=", name);
	metrics_label(out, p->listen);
	evbuffer_add_printf(out, ",daemon_id=");
	metrics_label(out, p->daemon_id);
	evbuffer_add_printf(out, ",direction=\"%s\",worker=\"%u\"",
			    p->inbound ? "in" : "out",
			    p->inbound ? (uint32_t)p->lane : p->worker);
}

/* Inbound peers show once their handshake named them, and while they are
 * up: one replaced by a reconnect (down, closed at the next tick) would
 * repeat its successor's labels. */
static bool
metrics_peer_shown(const struct peer_info *p)
{
	return !p->inbound ||
	       (p->known && p->state == RMA__V1__PEER_STATE__PEER_UP);
}

/* A value in a snapshot or a peer_info: its offset and size (4 or 8). */
struct metrics_field {
	size_t offset, size;
};

#define METRICS_FIELD(type, f)                                                 \
	{                                                                      \
		offsetof(type, f), sizeof(((type *)NULL)->f)                   \
	}
#define METRICS_SNAP(f) METRICS_FIELD(struct snapshot, f)
#define METRICS_PEER(f) METRICS_FIELD(struct peer_info, f)

static unsigned long long
metrics_field_get(const void *base, struct metrics_field f)
{
	const char *p = (const char *)base + f.offset;

	if (f.size == sizeof(uint32_t))
		return *(const uint32_t *)p;
	return *(const uint64_t *)p;
}

/* One unlabelled sample per family. */
struct metrics_scalar_def {
	const char *name, *type, *help;
	struct metrics_field field;
};

/* One sample per shown peer; which: 0 all, 1 inbound, -1 outbound. */
struct metrics_peer_def {
	const char *name, *type, *help;
	int which;
	struct metrics_field field;
};

#define METRICS_COUNTER(f) METRICS_SNAP(world.counters.f)

static const struct metrics_scalar_def metrics_ops_scalars[] = {
    {"rmad_operations_failed_total", "counter",
     "Failed operations, including those refused before reaching UCX (bad "
     "range, stale descriptor, limits).",
     METRICS_COUNTER(ops_failed)},
    {"rmad_operations_in_flight", "gauge",
     "Operations accepted and not yet completed.",
     METRICS_SNAP(world.ops_in_flight)},
};

static const struct metrics_peer_def metrics_peer_in_flight[] = {
    {"rmad_peer_operations_in_flight", "gauge",
     "Operations in flight on each peer.", 0, METRICS_PEER(in_flight)},
};

static const struct metrics_peer_def metrics_peer_defs[] = {
    {"rmad_peer_served_bytes_total", "counter",
     "Bytes this daemon wrote and read for a peer daemon.", 1,
     METRICS_PEER(served_bytes)},
    {"rmad_peer_refused_total", "counter",
     "Requests of a peer daemon answered with an error (stale descriptor, "
     "out of bounds, malformed).",
     1, METRICS_PEER(refused)},
    {"rmad_peer_connect_attempts_total", "counter",
     "Connects started to this peer daemon since it was first asked for.", -1,
     METRICS_PEER(connect_attempts)},
    {"rmad_peer_connect_failures_total", "counter",
     "Connects to this peer daemon that never came up.", -1,
     METRICS_PEER(connect_failures)},
};

/* The sums, forgotten peers' connects included: a name of their own, not
 * an unlabelled sample among the per-peer ones. Then the daemon's own. */
static const struct metrics_scalar_def metrics_daemon_scalars[] = {
    {"rmad_connect_attempts_total", "counter",
     "Connects to peer daemons started, by this process.",
     METRICS_COUNTER(connect_attempts)},
    {"rmad_connect_failures_total", "counter",
     "Connects to peer daemons that never came up (refused, unreachable, "
     "timed out, or no rmad).",
     METRICS_COUNTER(connect_failures)},
    {"rmad_peers_evicted_total", "counter",
     "Peers that never answered, forgotten to make room for new ones.",
     METRICS_COUNTER(peers_evicted)},
    {"rmad_target_refused_total", "counter",
     "Requests of peer daemons answered with an error.",
     METRICS_COUNTER(target_refused)},
    {"rmad_clients", "gauge", "Local clients connected.",
     METRICS_SNAP(n_clients)},
    {"rmad_clients_accepted_total", "counter",
     "Local client connections accepted.", METRICS_COUNTER(clients_accepted)},
    {"rmad_clients_refused_per_uid_total", "counter",
     "Local client connections refused: their user already held "
     "max_clients_per_uid.",
     METRICS_COUNTER(clients_refused_uid)},
    {"rmad_protocol_errors_total", "counter",
     "Clients cut off for protocol errors.", METRICS_COUNTER(protocol_errors)},
    {"rmad_regions", "gauge", "Regions registered with UCX.",
     METRICS_SNAP(n_regions)},
    {"rmad_region_bytes", "gauge", "Bytes of memory registered in regions.",
     METRICS_SNAP(region_bytes)},
    {"rmad_regions_created_total", "counter", "Regions created.",
     METRICS_COUNTER(regions_created)},
    {"rmad_restarts", "gauge",
     "Take-overs and restarts from systemd's fd store this daemon identity "
     "went through.",
     METRICS_SNAP(world.restarts)},
};

static const struct metrics_scalar_def metrics_store_scalars[] = {
    {"rmad_store_recoveries_total", "counter",
     "Starts that rebuilt the regions from systemd's fd store after the "
     "previous process died.",
     METRICS_SNAP(world.store_recoveries)},
    {"rmad_fd_store_regions", "gauge", "Regions kept in systemd's fd store.",
     METRICS_SNAP(fd_stored)},
    {"rmad_fd_store_capacity", "gauge",
     "Regions systemd's fd store has room for (0: not under systemd, or "
     "fd_store = no).",
     METRICS_SNAP(fd_capacity)},
    {"rmad_regions_recovered_total", "counter",
     "Regions this process took over from its predecessor.",
     METRICS_SNAP(world.regions_recovered)},
    {"rmad_regions_reattached_total", "counter",
     "Regions taken over that their owners claimed back.",
     METRICS_SNAP(world.regions_reattached)},
    {"rmad_regions_orphaned", "gauge",
     "Regions taken over whose owners have not come back.",
     METRICS_SNAP(regions_orphaned)},
    {"rmad_resolves_served_total", "counter",
     "Descriptor resolutions answered for other daemons.",
     METRICS_COUNTER(resolves_served)},
    {"rmad_target_puts_total", "counter", "Puts served for other daemons.",
     METRICS_COUNTER(target_puts)},
    {"rmad_target_gets_total", "counter", "Gets served for other daemons.",
     METRICS_COUNTER(target_gets)},
    {"rmad_target_atomics_total", "counter",
     "Atomics applied (or refused) for other daemons.",
     METRICS_COUNTER(target_atomics)},
};

static const struct metrics_scalar_def metrics_guard_scalars[] = {
    {"rmad_peer_messages_dropped_total", "counter",
     "Messages from other daemons refused unread: unknown id, rendezvous, an "
     "endpoint rmad did not accept, the wrong direction, or before the "
     "handshake.",
     METRICS_COUNTER(am_dropped)},
    {"rmad_peers_cut_off_total", "counter",
     "Peer daemons disconnected for not reading their answers.",
     METRICS_COUNTER(peers_cut_off)},
    {"rmad_inbound_refused_total", "counter",
     "Daemon connections refused: not in peer_allow, over max_inbound_peers "
     "or max_inbound_per_address, shutting down, or older than a connection "
     "of the same origin.",
     METRICS_COUNTER(inbound_refused)},
    {"rmad_ucx_accept_refused_total", "counter",
     "Connections to UCX's own sockets closed at accept: a local socket of "
     "another user, or not from peer_allow (listener), a live endpoint's "
     "host (interfaces) or this host.",
     METRICS_SNAP(ucx_accept_refused)},
    {"rmad_ucx_accept_refused_local_user_total", "counter",
     "Of those, connections from a local socket of another user than rmad's "
     "(or root), or from one closed.",
     METRICS_SNAP(ucx_accept_refused_local_user)},
    {"rmad_peer_auth_failures_total", "counter",
     "Daemon connections that failed the cluster key proof or held no key "
     "when one is required.",
     METRICS_COUNTER(auth_failures)},
};

#define METRICS_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void
metrics_scalars(struct evbuffer *out, const struct snapshot *s,
		const struct metrics_scalar_def *defs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		metrics_scalar(out, defs[i].name, defs[i].type, defs[i].help,
			       metrics_field_get(s, defs[i].field));
}

static void
metrics_peer_values(struct evbuffer *out, const struct snapshot *s,
		    const struct metrics_peer_def *defs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		metrics_head(out, defs[i].name, defs[i].type, defs[i].help);
		for (size_t k = 0; k < s->n_peers; k++) {
			const struct peer_info *p = &s->peers[k];

			if (!metrics_peer_shown(p) ||
			    (defs[i].which > 0 && !p->inbound) ||
			    (defs[i].which < 0 && p->inbound))
				continue;
			metrics_peer_labels(out, defs[i].name, p);
			evbuffer_add_printf(
			    out, "} %llu\n",
			    metrics_field_get(p, defs[i].field));
		}
	}
}

static void
metrics_render_info(struct evbuffer *out, const struct snapshot *s)
{
	metrics_head(out, "rmad_info", "gauge",
		     "This daemon: version, UCX version, identity (new at "
		     "every start).");
	evbuffer_add_printf(out, "rmad_info{version=");
	metrics_label(out, RMA_VERSION);
	evbuffer_add_printf(out, ",ucx_version=");
	metrics_label(out, s->ucx_version);
	evbuffer_add_printf(out, ",daemon_id=");
	metrics_label(out, s->daemon_id);
	evbuffer_add_printf(out, "} 1\n");
	metrics_head(out, "rmad_uptime_seconds", "gauge",
		     "Seconds since the daemon started.");
	evbuffer_add_printf(out, "rmad_uptime_seconds %.3f\n", s->uptime);
}

static void
metrics_render_ops(struct evbuffer *out, const struct snapshot *s)
{
	static const struct metrics empty;
	const struct metrics *merged = s->series ? s->series : &empty;

	metrics_by_series(out, merged, "rmad_operations_total",
			  "Operations completed, by kind and peer.",
			  offsetof(struct metrics_series, ops));
	metrics_by_series(out, merged, "rmad_operation_errors_total",
			  "Operations completed with an error, by kind and "
			  "peer.",
			  offsetof(struct metrics_series, errors));
	metrics_by_series(out, merged, "rmad_operation_bytes_total",
			  "Bytes moved by successful operations, by kind and "
			  "peer.",
			  offsetof(struct metrics_series, bytes));
	metrics_scalars(out, s, metrics_ops_scalars,
			METRICS_LEN(metrics_ops_scalars));
}

static void
metrics_render_latency(struct evbuffer *out, const struct metrics_latency *l)
{
	metrics_head(out, "rmad_operation_duration_seconds", "histogram",
		     "Time from accepting an operation to its completion.");
	for (int k = 0; k < METRICS_KINDS; k++) {
		uint64_t cum = 0;
		for (size_t b = 0; b <= METRICS_BUCKETS; b++) {
			cum += l->buckets[k][b];
			evbuffer_add_printf(
			    out,
			    "rmad_operation_duration_seconds_bucket{op=\"%s\","
			    "le=\"",
			    metrics_kind_names[k]);
			if (b < METRICS_BUCKETS)
				evbuffer_add_printf(out, "%g",
						    metrics_bounds[b]);
			else
				evbuffer_add_printf(out, "+Inf");
			evbuffer_add_printf(out, "\"} %llu\n",
					    (unsigned long long)cum);
		}
		evbuffer_add_printf(out,
				    "rmad_operation_duration_seconds_sum{op="
				    "\"%s\"} %.9f\n"
				    "rmad_operation_duration_seconds_count{op="
				    "\"%s\"} %llu\n",
				    metrics_kind_names[k], l->sum[k],
				    metrics_kind_names[k],
				    (unsigned long long)l->count[k]);
	}
}

/* The peer families whose samples are not one value each. */
static void
metrics_render_peer_states(struct evbuffer *out, const struct snapshot *s)
{
	static const Rma__V1__PeerState states[] = {
	    RMA__V1__PEER_STATE__PEER_CONNECTING, RMA__V1__PEER_STATE__PEER_UP,
	    RMA__V1__PEER_STATE__PEER_DOWN};

	metrics_head(out, "rmad_peer_up", "gauge",
		     "1 when the endpoint to this peer daemon is up.");
	for (size_t k = 0; k < s->n_peers; k++) {
		if (!metrics_peer_shown(&s->peers[k]))
			continue;
		metrics_peer_labels(out, "rmad_peer_up", &s->peers[k]);
		evbuffer_add_printf(out, "} %d\n",
				    s->peers[k].state ==
					RMA__V1__PEER_STATE__PEER_UP);
	}
	metrics_head(out, "rmad_peer_state", "gauge",
		     "State of each peer daemon (1 for the current one).");
	for (size_t k = 0; k < s->n_peers; k++) {
		if (!metrics_peer_shown(&s->peers[k]))
			continue;
		for (size_t i = 0; i < METRICS_LEN(states); i++) {
			metrics_peer_labels(out, "rmad_peer_state",
					    &s->peers[k]);
			evbuffer_add_printf(out, ",state=\"%s\"} %d\n",
					    peer_state_name(states[i]),
					    s->peers[k].state == states[i]);
		}
	}
}

static void
metrics_render_peer_served(struct evbuffer *out, const struct snapshot *s)
{
	static const char *const ops[] = {"put", "get", "resolve"};

	metrics_head(out, "rmad_peer_served_operations_total", "counter",
		     "Requests this daemon served for a peer daemon, by kind "
		     "(refused ones included).");
	for (size_t k = 0; k < s->n_peers; k++) {
		const struct peer_info *p = &s->peers[k];
		const uint64_t v[] = {p->served_puts, p->served_gets,
				      p->served_resolves};

		if (!metrics_peer_shown(p) || !p->inbound)
			continue;
		for (size_t i = 0; i < METRICS_LEN(ops); i++) {
			metrics_peer_labels(
			    out, "rmad_peer_served_operations_total", p);
			evbuffer_add_printf(out, ",op=\"%s\"} %llu\n", ops[i],
					    (unsigned long long)v[i]);
		}
	}
}

static void
metrics_render_peers(struct evbuffer *out, const struct snapshot *s)
{
	metrics_render_peer_states(out, s);
	metrics_peer_values(out, s, metrics_peer_in_flight,
			    METRICS_LEN(metrics_peer_in_flight));
	metrics_render_peer_served(out, s);
	metrics_peer_values(out, s, metrics_peer_defs,
			    METRICS_LEN(metrics_peer_defs));
}

static void
metrics_render_daemon(struct metrics *m, struct evbuffer *out,
		      const struct snapshot *s)
{
	const struct counters *sum = &s->world.counters;

	metrics_scalars(out, s, metrics_daemon_scalars,
			METRICS_LEN(metrics_daemon_scalars));
	metrics_scalar(out, "rmad_config_rejected", "gauge",
		       "1 while rmad runs on the last configuration that "
		       "worked because the one it was started with was "
		       "refused (rmactl status says why), else 0.",
		       s->world.config_refused[0] != '\0');
	metrics_scalars(out, s, metrics_store_scalars,
			METRICS_LEN(metrics_store_scalars));
	metrics_split(out, "rmad_notifications_total",
		      "Notifications handed to the owners of this daemon's "
		      "regions, by path: the owner's shared ring, or events "
		      "over its socket (ring full, or no ring).",
		      "path", "ring", sum->notify_ring, "socket",
		      sum->notify_socket);
	metrics_split(out, "rmad_notify_wakeups_total",
		      "Owners asleep woken for notifications in their ring: "
		      "at once, or held back to carry more (after a wake-up "
		      "that found a stream, the next comes 500 us later at "
		      "the earliest).",
		      "when", "at_once", sum->notify_wakeups, "held",
		      sum->notify_wakeups_held);
	metrics_scalars(out, s, metrics_guard_scalars,
			METRICS_LEN(metrics_guard_scalars));
	metrics_scalar(out, "rmad_metrics_scrapes_total", "counter",
		       "Requests for /metrics.", m->scrapes);
}

/* From the snapshot alone: the world runs meanwhile. */
static void
metrics_render(struct metrics *m, struct evbuffer *out,
	       const struct snapshot *s)
{
	metrics_render_info(out, s);
	metrics_render_ops(out, s);
	metrics_render_latency(out, &s->latency);
	metrics_render_peers(out, s);
	metrics_render_daemon(m, out, s);
	metrics_process(out);
}

static void
metrics_on_request(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();
	const struct snapshot_hooks *h = m->d->world->snapshot;
	struct snapshot snap;

	if (body == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	if (path == NULL || strcmp(path, "/metrics") != 0) {
		evhttp_add_header(headers, "Content-Type",
				  "text/plain; charset=utf-8");
		evbuffer_add_printf(body, "rmad: metrics are at /metrics\n");
		evhttp_send_reply(req, HTTP_NOTFOUND, "Not Found", body);
		evbuffer_free(body);
		return;
	}
	m->scrapes++;
	h->take(m->d, 0, true, &snap);
	metrics_render(m, body, &snap);
	h->release(&snap);
	evhttp_add_header(headers, "Content-Type",
			  "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

int
metrics_start(struct daemon *d)
{
	struct metrics *m;
	struct evhttp_bound_socket *bound;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[64];
	uint16_t port;

	if (d->cfg->metrics_listen[0] == '\0')
		return 0;
	if (config_parse_hostport(d->cfg->metrics_listen, host, sizeof(host),
				  &port) < 0) {
		log_error("metrics_start: metrics_listen: expected HOST:PORT, "
			  "got '%s'",
			  d->cfg->metrics_listen);
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		log_error("metrics_start: out of memory");
		return -1;
	}
	m->d = d;
	m->http = evhttp_new(d->base);
	if (m->http == NULL) {
		log_error("metrics_start: evhttp_new failed");
		goto err_free;
	}
	/* a scraper sends a small GET; anything else is refused early */
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(m->http, 8192);
	evhttp_set_max_body_size(m->http, 0);
	evhttp_set_timeout(m->http, 10);
	evhttp_set_gencb(m->http, metrics_on_request, m);
	bound = evhttp_bind_socket_with_handle(m->http, host, port);
	if (bound == NULL) {
		log_error("metrics_start: cannot listen on %s for metrics",
			  d->cfg->metrics_listen);
		goto err_http;
	}
	/* port 0 takes a free one: say which */
	if (getsockname(evhttp_bound_socket_get_fd(bound),
			(struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET)
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	snprintf(m->url, sizeof(m->url),
		 strchr(host, ':') ? "http://[%s]:%u/metrics"
				   : "http://%s:%u/metrics",
		 host, port);
	/* Every worker records its own operations. */
	world_stop(d);
	d->metrics = m;
	for (uint32_t i = 1; i < d->world->n; i++) {
		struct daemon *wd = d->world->workers[i];
		wd->metrics = calloc(1, sizeof(*wd->metrics));
		if (wd->metrics != NULL)
			wd->metrics->d = wd;
	}
	world_resume(d);
	log_info("metrics_start: serving %s", m->url);
	return 0;

err_http:
	evhttp_free(m->http);
err_free:
	free(m);
	return -1;
}

void
metrics_stop(struct daemon *d)
{
	if (d->metrics == NULL)
		return;
	world_stop(d);
	for (uint32_t i = 0; i < d->world->n; i++) {
		struct metrics *m = d->world->workers[i]->metrics;
		if (m == NULL)
			continue;
		d->world->workers[i]->metrics = NULL;
		if (m->http != NULL)
			evhttp_free(m->http);
		free(m->series);
		free(m);
	}
	world_resume(d);
}
