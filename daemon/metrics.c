/* SPDX-License-Identifier: BSD-2-Clause */
/* Prometheus text exposition (format 0.0.4) at GET /metrics, served by
 * evhttp from worker 0's loop: a scrape stops the world and reads every
 * worker's state directly, with no copy. Counters that status.c does not
 * keep (by operation kind and peer, the latency histogram) are recorded
 * by one call from op_finish, in each worker's own struct metrics. */
#include "daemon.h"
#include "metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/http.h>

/* Label values are peer addresses, chosen by clients: bound the series. */
#define METRICS_SERIES_MAX 256
#define METRICS_OTHER "other"

/* Upper bounds of the latency buckets, seconds; +Inf follows. */
const double metrics_bounds[METRICS_BUCKETS] = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
    0.0025,  0.005,    0.01,	0.025,	0.05,	 0.1,	 0.25,
    0.5,     1.0,      2.5,	5.0,	10.0,
};

static const char *const metrics_kind_names[METRICS_KINDS] = {
    "put", "get", "flush", "atomic"};

/* Totals of one peer address ("local": copies within this daemon; "all":
 * flushes of every peer). Kept after the peer itself is gone, as counters
 * must be. */
struct metrics_series {
	char peer[96];
	uint64_t ops[METRICS_KINDS];
	uint64_t errors[METRICS_KINDS];
	uint64_t bytes[METRICS_KINDS];
};

struct metrics {
	struct daemon *d;
	struct evhttp *http; /* worker 0's only */
	char url[160];
	struct metrics_series *series;
	size_t n_series, cap_series;
	const struct peer *last_peer;	/* lookup cache: last op's peer... */
	size_t last_series;		/* ...and its series */
	struct metrics_latency latency; /* render: every worker's, merged */
	uint64_t scrapes;
};

static struct metrics_series *
metrics_series_get(struct metrics *m, const struct peer *p, const char *name)
{
	struct metrics_series *s;

	if (m->last_series < m->n_series && m->last_peer == p &&
	    strcmp(m->series[m->last_series].peer, name) == 0)
		return &m->series[m->last_series];
	if (m->n_series >= METRICS_SERIES_MAX)
		name = METRICS_OTHER;
	for (size_t i = 0; i < m->n_series; i++) {
		if (strcmp(m->series[i].peer, name) == 0) {
			m->last_peer = p;
			m->last_series = i;
			return &m->series[i];
		}
	}
	if (m->n_series == m->cap_series) {
		size_t cap = m->cap_series ? 2 * m->cap_series : 16;
		s = realloc(m->series, cap * sizeof(*s));
		if (s == NULL)
			return NULL;
		m->series = s;
		m->cap_series = cap;
	}
	s = &m->series[m->n_series];
	memset(s, 0, sizeof(*s));
	snprintf(s->peer, sizeof(s->peer), "%s", name);
	m->last_peer = p;
	m->last_series = m->n_series++;
	return s;
}

void
metrics_observe_op(struct daemon *d, const struct op *op,
		   Rma__V1__Status status)
{
	struct metrics *m = d->metrics;
	struct metrics_series *s;
	const char *name;
	double secs;
	size_t b;
	int k;

	if (op->kind < 0 || op->kind >= METRICS_KINDS)
		return;
	k = (int)op->kind;
	secs = daemon_op_clock(d) - op->started;
	if (secs < 0)
		secs = 0;
	for (b = 0; b < METRICS_BUCKETS && secs > metrics_bounds[b]; b++)
		;
	d->latency.buckets[k][b]++;
	d->latency.count[k]++;
	d->latency.sum[k] += secs;
	if (m == NULL)
		return;
	if (op->peer != NULL)
		name = op->peer->address;
	else
		name = op->kind == RMA__V1__OP_KIND__FLUSH ? "all" : "local";
	s = metrics_series_get(m, op->peer, name);
	if (s != NULL) {
		s->ops[k]++;
		if (status == RMA__V1__STATUS__OK)
			s->bytes[k] += op->length;
		else
			s->errors[k]++;
	}
}

void
metrics_latency_add(struct metrics_latency *into,
		    const struct metrics_latency *from)
{
	for (int k = 0; k < METRICS_KINDS; k++) {
		for (size_t b = 0; b <= METRICS_BUCKETS; b++)
			into->buckets[k][b] += from->buckets[k][b];
		into->count[k] += from->count[k];
		into->sum[k] += from->sum[k];
	}
}

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

/* One worker's series added into the scrape's merged ones, by peer. */
static void
metrics_merge_series(struct metrics *into, const struct metrics *m)
{
	for (size_t i = 0; i < m->n_series; i++) {
		const struct metrics_series *from = &m->series[i];
		struct metrics_series *s =
		    metrics_series_get(into, NULL, from->peer);
		if (s == NULL)
			continue;
		for (int k = 0; k < METRICS_KINDS; k++) {
			s->ops[k] += from->ops[k];
			s->errors[k] += from->errors[k];
			s->bytes[k] += from->bytes[k];
		}
	}
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
		    const struct peer *p)
{
	char listen[96];

	peer_listen_address(p, listen, sizeof(listen));
	evbuffer_add_printf(out, "%s{peer=", name);
	metrics_label(out, listen);
	evbuffer_add_printf(out, ",daemon_id=");
	metrics_label(out, p->remote_id_hex);
	evbuffer_add_printf(out, ",direction=\"%s\",worker=\"%u\"",
			    p->inbound ? "in" : "out",
			    p->inbound ? p->lane : p->d->index);
}

/* Inbound peers show once their handshake named them, and while they are
 * up: one replaced by a reconnect (down, closed at the next tick) would
 * repeat its successor's labels. */
static bool
metrics_peer_shown(const struct peer *p)
{
	return !p->inbound ||
	       (p->known && p->state == RMA__V1__PEER_STATE__PEER_UP);
}

/* Every peer of every worker. */
#define METRICS_FOREACH_PEER(w, p)                                             \
	for (uint32_t wi_ = 0; wi_ < (w)->n; wi_++)                            \
		TAILQ_FOREACH(p, &(w)->workers[wi_]->peers, link)              \
	if (metrics_peer_shown(p))

/* Called with the world stopped. */
static void
metrics_render(struct metrics *m, struct evbuffer *out)
{
	static const Rma__V1__PeerState states[] = {
	    RMA__V1__PEER_STATE__PEER_CONNECTING, RMA__V1__PEER_STATE__PEER_UP,
	    RMA__V1__PEER_STATE__PEER_DOWN};
	struct daemon *d = m->d;
	struct world *w = d->world;
	unsigned long long clients = 0, regions = 0, region_bytes = 0;
	unsigned long long orphans = 0;
	unsigned long long in_flight = 0;
	uint32_t stored, store_capacity;
	struct counters sum = {0};
	struct metrics merged = {0}; /* every worker's series and buckets */
	struct conn *c;
	struct peer *p;
	struct region *r;
	size_t pos = 0;

	for (uint32_t i = 0; i < w->n; i++) {
		const struct daemon *wd = w->workers[i];
		const struct counters *k = &wd->counters;

		TAILQ_FOREACH(c, &wd->conns, link)
		clients++;
		in_flight += wd->ops_in_flight;
		sum.ops_failed += k->ops_failed;
		sum.clients_accepted += k->clients_accepted;
		sum.protocol_errors += k->protocol_errors;
		sum.regions_created += k->regions_created;
		sum.resolves_served += k->resolves_served;
		sum.target_puts += k->target_puts;
		sum.target_gets += k->target_gets;
		sum.target_atomics += k->target_atomics;
		sum.notify_ring += k->notify_ring;
		sum.notify_socket += k->notify_socket;
		sum.notify_wakeups += k->notify_wakeups;
		sum.notify_wakeups_held += k->notify_wakeups_held;
		sum.am_dropped += k->am_dropped;
		sum.peers_cut_off += k->peers_cut_off;
		sum.inbound_refused += k->inbound_refused;
		sum.auth_failures += k->auth_failures;
		sum.connect_attempts += k->connect_attempts;
		sum.connect_failures += k->connect_failures;
		sum.target_refused += k->target_refused;
		sum.peers_evicted += k->peers_evicted;
		if (wd->metrics != NULL)
			metrics_merge_series(&merged, wd->metrics);
		metrics_latency_add(&merged.latency, &wd->latency);
	}
	fdstore_count(d, &stored, &store_capacity);
	while (idmap_next(&w->regions, &pos, (void **)&r)) {
		regions++;
		region_bytes += r->length;
		if (r->orphan)
			orphans++;
	}

	metrics_head(out, "rmad_info", "gauge",
		     "This daemon: version, UCX version, identity (new at "
		     "every start).");
	evbuffer_add_printf(out, "rmad_info{version=");
	metrics_label(out, RMA_VERSION);
	evbuffer_add_printf(out, ",ucx_version=");
	metrics_label(out, d->ucx_version);
	evbuffer_add_printf(out, ",daemon_id=");
	metrics_label(out, d->id_hex);
	evbuffer_add_printf(out, "} 1\n");
	metrics_head(out, "rmad_uptime_seconds", "gauge",
		     "Seconds since the daemon started.");
	evbuffer_add_printf(out, "rmad_uptime_seconds %.3f\n",
			    daemon_now() - d->started);

	metrics_by_series(out, &merged, "rmad_operations_total",
			  "Operations completed, by kind and peer.",
			  offsetof(struct metrics_series, ops));
	metrics_by_series(out, &merged, "rmad_operation_errors_total",
			  "Operations completed with an error, by kind and "
			  "peer.",
			  offsetof(struct metrics_series, errors));
	metrics_by_series(out, &merged, "rmad_operation_bytes_total",
			  "Bytes moved by successful operations, by kind and "
			  "peer.",
			  offsetof(struct metrics_series, bytes));
	metrics_scalar(out, "rmad_operations_failed_total", "counter",
		       "Failed operations, including those refused before "
		       "reaching UCX (bad range, stale descriptor, limits).",
		       sum.ops_failed);
	metrics_scalar(out, "rmad_operations_in_flight", "gauge",
		       "Operations accepted and not yet completed.", in_flight);

	metrics_head(out, "rmad_operation_duration_seconds", "histogram",
		     "Time from accepting an operation to its completion.");
	for (int k = 0; k < METRICS_KINDS; k++) {
		uint64_t cum = 0;
		for (size_t b = 0; b <= METRICS_BUCKETS; b++) {
			cum += merged.latency.buckets[k][b];
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
		evbuffer_add_printf(
		    out,
		    "rmad_operation_duration_seconds_sum{op="
		    "\"%s\"} %.9f\n"
		    "rmad_operation_duration_seconds_count{op="
		    "\"%s\"} %llu\n",
		    metrics_kind_names[k], merged.latency.sum[k],
		    metrics_kind_names[k],
		    (unsigned long long)merged.latency.count[k]);
	}

	metrics_head(out, "rmad_peer_up", "gauge",
		     "1 when the endpoint to this peer daemon is up.");
	METRICS_FOREACH_PEER(w, p)
	{
		metrics_peer_labels(out, "rmad_peer_up", p);
		evbuffer_add_printf(out, "} %d\n",
				    p->state == RMA__V1__PEER_STATE__PEER_UP);
	}
	metrics_head(out, "rmad_peer_state", "gauge",
		     "State of each peer daemon (1 for the current one).");
	METRICS_FOREACH_PEER(w, p)
	{
		for (size_t i = 0; i < sizeof(states) / sizeof(states[0]);
		     i++) {
			metrics_peer_labels(out, "rmad_peer_state", p);
			evbuffer_add_printf(out, ",state=\"%s\"} %d\n",
					    peer_state_name(states[i]),
					    p->state == states[i]);
		}
	}
	metrics_head(out, "rmad_peer_operations_in_flight", "gauge",
		     "Operations in flight on each peer.");
	METRICS_FOREACH_PEER(w, p)
	{
		metrics_peer_labels(out, "rmad_peer_operations_in_flight", p);
		evbuffer_add_printf(out, "} %llu\n",
				    (unsigned long long)p->in_flight);
	}

	metrics_head(out, "rmad_peer_served_operations_total", "counter",
		     "Requests this daemon served for a peer daemon, by kind "
		     "(refused ones included).");
	METRICS_FOREACH_PEER(w, p)
	{
		const uint64_t v[] = {p->served_puts, p->served_gets,
				      p->served_resolves};
		static const char *const ops[] = {"put", "get", "resolve"};
		if (!p->inbound)
			continue;
		for (size_t i = 0; i < 3; i++) {
			metrics_peer_labels(
			    out, "rmad_peer_served_operations_total", p);
			evbuffer_add_printf(out, ",op=\"%s\"} %llu\n", ops[i],
					    (unsigned long long)v[i]);
		}
	}
	metrics_head(out, "rmad_peer_served_bytes_total", "counter",
		     "Bytes this daemon wrote and read for a peer daemon.");
	METRICS_FOREACH_PEER(w, p)
	{
		if (!p->inbound)
			continue;
		metrics_peer_labels(out, "rmad_peer_served_bytes_total", p);
		evbuffer_add_printf(out, "} %llu\n",
				    (unsigned long long)p->served_bytes);
	}
	metrics_head(out, "rmad_peer_refused_total", "counter",
		     "Requests of a peer daemon answered with an error (stale "
		     "descriptor, out of bounds, malformed).");
	METRICS_FOREACH_PEER(w, p)
	{
		if (!p->inbound)
			continue;
		metrics_peer_labels(out, "rmad_peer_refused_total", p);
		evbuffer_add_printf(out, "} %llu\n",
				    (unsigned long long)p->refused);
	}
	metrics_head(out, "rmad_peer_connect_attempts_total", "counter",
		     "Connects started to this peer daemon since it was first "
		     "asked for.");
	METRICS_FOREACH_PEER(w, p)
	{
		if (p->inbound)
			continue;
		metrics_peer_labels(out, "rmad_peer_connect_attempts_total", p);
		evbuffer_add_printf(out, "} %llu\n",
				    (unsigned long long)p->connect_attempts);
	}
	metrics_head(out, "rmad_peer_connect_failures_total", "counter",
		     "Connects to this peer daemon that never came up.");
	METRICS_FOREACH_PEER(w, p)
	{
		if (p->inbound)
			continue;
		metrics_peer_labels(out, "rmad_peer_connect_failures_total", p);
		evbuffer_add_printf(out, "} %llu\n",
				    (unsigned long long)p->connect_failures);
	}
	/* The sums, forgotten peers' connects included: a name of their
	 * own, not an unlabelled sample among the per-peer ones. */
	metrics_scalar(out, "rmad_connect_attempts_total", "counter",
		       "Connects to peer daemons started, by this process.",
		       sum.connect_attempts);
	metrics_scalar(out, "rmad_connect_failures_total", "counter",
		       "Connects to peer daemons that never came up (refused, "
		       "unreachable, timed out, or no rmad).",
		       sum.connect_failures);
	metrics_scalar(out, "rmad_peers_evicted_total", "counter",
		       "Peers that never answered, forgotten to make room for "
		       "new ones.",
		       sum.peers_evicted);
	metrics_scalar(out, "rmad_target_refused_total", "counter",
		       "Requests of peer daemons answered with an error.",
		       sum.target_refused);

	metrics_scalar(out, "rmad_clients", "gauge", "Local clients connected.",
		       clients);
	metrics_scalar(out, "rmad_clients_accepted_total", "counter",
		       "Local client connections accepted.",
		       sum.clients_accepted);
	metrics_scalar(out, "rmad_protocol_errors_total", "counter",
		       "Clients cut off for protocol errors.",
		       sum.protocol_errors);
	metrics_scalar(out, "rmad_regions", "gauge",
		       "Regions registered with UCX.", regions);
	metrics_scalar(out, "rmad_region_bytes", "gauge",
		       "Bytes of memory registered in regions.", region_bytes);
	metrics_scalar(out, "rmad_regions_created_total", "counter",
		       "Regions created.", sum.regions_created);
	metrics_scalar(out, "rmad_restarts", "gauge",
		       "Take-overs and restarts from systemd's fd store this "
		       "daemon identity went through.",
		       w->restarts);
	metrics_scalar(out, "rmad_config_rejected", "gauge",
		       "1 while rmad runs on the last configuration that "
		       "worked because the one it was started with was "
		       "refused (rmactl status says why), else 0.",
		       w->config_refused[0] != '\0');
	metrics_scalar(out, "rmad_store_recoveries_total", "counter",
		       "Starts that rebuilt the regions from systemd's fd "
		       "store after the previous process died.",
		       w->store_recoveries);
	metrics_scalar(out, "rmad_fd_store_regions", "gauge",
		       "Regions kept in systemd's fd store.", stored);
	metrics_scalar(out, "rmad_fd_store_capacity", "gauge",
		       "Regions systemd's fd store has room for (0: not "
		       "under systemd, or fd_store = no).",
		       store_capacity);
	metrics_scalar(out, "rmad_regions_recovered_total", "counter",
		       "Regions this process took over from its predecessor.",
		       w->regions_recovered);
	metrics_scalar(out, "rmad_regions_reattached_total", "counter",
		       "Regions taken over that their owners claimed back.",
		       w->regions_reattached);
	metrics_scalar(out, "rmad_regions_orphaned", "gauge",
		       "Regions taken over whose owners have not come back.",
		       orphans);
	metrics_scalar(out, "rmad_resolves_served_total", "counter",
		       "Descriptor resolutions answered for other daemons.",
		       sum.resolves_served);
	metrics_scalar(out, "rmad_target_puts_total", "counter",
		       "Puts served for other daemons.", sum.target_puts);
	metrics_scalar(out, "rmad_target_gets_total", "counter",
		       "Gets served for other daemons.", sum.target_gets);
	metrics_scalar(out, "rmad_target_atomics_total", "counter",
		       "Atomics applied (or refused) for other daemons.",
		       sum.target_atomics);
	metrics_split(out, "rmad_notifications_total",
		      "Notifications handed to the owners of this daemon's "
		      "regions, by path: the owner's shared ring, or events "
		      "over its socket (ring full, or no ring).",
		      "path", "ring", sum.notify_ring, "socket",
		      sum.notify_socket);
	metrics_split(out, "rmad_notify_wakeups_total",
		      "Owners asleep woken for notifications in their ring: "
		      "at once, or held back to carry more (after a wake-up "
		      "that found a stream, the next comes 500 us later at "
		      "the earliest).",
		      "when", "at_once", sum.notify_wakeups, "held",
		      sum.notify_wakeups_held);
	metrics_scalar(out, "rmad_peer_messages_dropped_total", "counter",
		       "Messages from other daemons refused unread: unknown "
		       "id, rendezvous, an endpoint rmad did not accept, the "
		       "wrong direction, or before the handshake.",
		       sum.am_dropped);
	metrics_scalar(out, "rmad_peers_cut_off_total", "counter",
		       "Peer daemons disconnected for not reading their "
		       "answers.",
		       sum.peers_cut_off);
	metrics_scalar(out, "rmad_inbound_refused_total", "counter",
		       "Daemon connections refused: not in peer_allow, over "
		       "max_inbound_peers or max_inbound_per_address, shutting "
		       "down, or older than a connection of the same origin.",
		       sum.inbound_refused);
	metrics_scalar(out, "rmad_ucx_accept_refused_total", "counter",
		       "Connections to UCX's own sockets closed at accept: "
		       "a local socket of another user, or not from "
		       "peer_allow (listener), a live endpoint's host "
		       "(interfaces) or this host.",
		       guard_refused());
	metrics_scalar(out, "rmad_ucx_accept_refused_local_user_total",
		       "counter",
		       "Of those, connections from a local socket of another "
		       "user than rmad's (or root), or from one closed.",
		       guard_refused_local_user());
	metrics_scalar(out, "rmad_peer_auth_failures_total", "counter",
		       "Daemon connections that failed the cluster key proof "
		       "or held no key when one is required.",
		       sum.auth_failures);
	metrics_scalar(out, "rmad_metrics_scrapes_total", "counter",
		       "Requests for /metrics.", m->scrapes);
	metrics_process(out);
	free(merged.series);
}

static void
metrics_on_request(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();

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
	world_stop(m->d);
	metrics_render(m, body);
	world_resume(m->d);
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

	if (d->cfg.metrics_listen[0] == '\0')
		return 0;
	if (config_parse_hostport(d->cfg.metrics_listen, host, sizeof(host),
				  &port) < 0) {
		log_error("metrics_start: metrics_listen: expected HOST:PORT, "
			  "got '%s'",
			  d->cfg.metrics_listen);
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
			  d->cfg.metrics_listen);
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
