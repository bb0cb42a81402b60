/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl peers, clients, users, regions, ops and ping: one table each out of
 * the daemon's StatusReply (or JSON of that part of it), and the round trip to
 * the daemon. Exit codes are rmactl's (rmactl --help). */
#include "rma.h"
#include "rma.pb-c.h"
#include "rmactl.h"
#include "monotime.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#define RMACTL_OPS_PING_MAX 1000000

enum rmactl_ops_view {
	VIEW_PEERS,
	VIEW_CLIENTS,
	VIEW_USERS,
	VIEW_REGIONS,
	VIEW_OPS
};

static const struct {
	const char *name;
	const char *usage;
	const char *const json_fields[5];
} rmactl_ops_views[] = {
    [VIEW_PEERS] =
	{"peers",
	 "usage: rmactl [--socket PATH] peers [--wide | --json]\n"
	 "  other daemons by listen address: state, direction, operations,\n"
	 "  bytes, what this host served them, in flight, last error;\n"
	 "  --wide adds the connection's address, worker thread, daemon id,\n"
	 "  errors, age of the oldest operation, drops, refusals and\n"
	 "  connect tries, one line each\n",
	 {"peers", NULL}},
    [VIEW_CLIENTS] =
	{"clients",
	 "usage: rmactl [--socket PATH] clients [--json]\n"
	 "  local clients: pid, uid, gid, name, worker thread,\n"
	 "  ring or socket, regions, bytes, in flight, age of the oldest,\n"
	 "  operations\n",
	 {"clients", NULL}},
    [VIEW_USERS] =
	{"users",
	 "usage: rmactl [--socket PATH] users [--json]\n"
	 "  each local user (uid) holding connections or regions: clients,\n"
	 "  regions and region bytes, against max_clients_per_uid,\n"
	 "  max_regions_per_uid and max_region_bytes_per_uid (an orphan\n"
	 "  counts for nobody until its owner claims it)\n",
	 {"users", "max_clients_per_uid", "max_regions_per_uid",
	  "max_region_bytes_per_uid", NULL}},
    [VIEW_REGIONS] = {"regions",
		      "usage: rmactl [--socket PATH] regions [--json]\n"
		      "  registered regions: id, length, owning\n"
		      "  client, in flight\n",
		      {"regions", NULL}},
    [VIEW_OPS] = {"ops",
		  "usage: rmactl [--socket PATH] ops [--json]\n"
		  "  operations in flight on peers, oldest first (at most\n"
		  "  1000 listed), with their age; the total counts all\n",
		  {"ops_in_flight", "ops", NULL}},
};

static const char rmactl_ops_ping_usage[] =
    "usage: rmactl [--socket PATH] ping [--count N] [--json]\n"
    "  connect and hello, then N status round trips (default 1):\n"
    "  times in milliseconds\n";

static int rmactl_ops_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
rmactl_ops_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rmactl: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see rmactl %s --help\n", cmd);
	return EX_USAGE;
}

/* An age in the unit that reads best; "-" for none. */
static void
rmactl_ops_age(char *buf, size_t len, uint64_t us, int known)
{
	if (!known)
		snprintf(buf, len, "-");
	else if (us < 1000)
		snprintf(buf, len, "%" PRIu64 "us", us);
	else if (us < 1000000)
		snprintf(buf, len, "%.1fms", (double)us / 1e3);
	else
		snprintf(buf, len, "%.1fs", (double)us / 1e6);
}

/* The oldest listed operation of a peer (peer_id) or client (client_id):
 * ops come oldest first, so the first match. */
static const Rma__V1__OpInfo *
rmactl_ops_oldest(const Rma__V1__StatusReply *s, uint32_t peer_id,
		  uint32_t client_id)
{
	for (size_t i = 0; i < s->n_ops; i++) {
		if ((peer_id != 0 && s->ops[i]->peer_id == peer_id) ||
		    (client_id != 0 && s->ops[i]->client_id == client_id))
			return s->ops[i];
	}
	return NULL;
}

/* "refused, 12s ago: peer ...": when the last error happened. */
void
rmactl_peer_last_error(char *buf, size_t len, const struct Rma__V1__PeerInfo *p)
{
	struct timespec ts;
	uint64_t now_ms;

	if (p->last_error == NULL || p->last_error[0] == '\0') {
		snprintf(buf, len, "-");
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	if (p->last_error_unix_ms == 0 || p->last_error_unix_ms > now_ms)
		snprintf(buf, len, "%s", p->last_error);
	else
		snprintf(buf, len, "%" PRIu64 "s ago: %s",
			 (now_ms - p->last_error_unix_ms) / 1000,
			 p->last_error);
}

/* The address a peer is known by: its listen address, as /metrics and
 * JSON name it (an inbound peer's source port changes with each
 * connection), else the one it was dialled or accepted at. */
static const char *
rmactl_peer_address(const Rma__V1__PeerInfo *p)
{
	if (p->listen_address != NULL && p->listen_address[0] != '\0')
		return p->listen_address;
	return rmactl_or_dash(p->address);
}

/* The narrow table fits RMACTL_COLUMNS; a longer last error is cut
 * there (--wide and --json have it whole). */
#define RMACTL_COLUMNS 100

static void
rmactl_peers_print_narrow(const Rma__V1__StatusReply *s, const char *indent)
{
	char bytes[32], served[32], err[256];
	int room;

	printf("%s%4s  %-21s %-10s %-3s %8s %10s %8s %10s %8s\n", indent, "ID",
	       "ADDRESS", "STATE", "DIR", "OPS", "BYTES", "SERVED", "SRV-BYTES",
	       "INFLIGHT");
	for (size_t i = 0; i < s->n_peers; i++) {
		const Rma__V1__PeerInfo *p = s->peers[i];

		rmactl_bytes(bytes, sizeof(bytes), p->bytes);
		rmactl_bytes(served, sizeof(served), p->served_bytes);
		printf("%s%4u  %-21s %-10s %-3s %8" PRIu64 " %10s %8" PRIu64
		       " %10s %8" PRIu64 "\n",
		       indent, p->peer_id, rmactl_peer_address(p),
		       rmactl_peer_state(p->state), p->inbound ? "in" : "out",
		       p->ops, bytes,
		       p->served_puts + p->served_gets + p->served_resolves,
		       served, p->in_flight);
		rmactl_peer_last_error(err, sizeof(err), p);
		if (strcmp(err, "-") == 0)
			continue;
		/* "      last error: " is 18 columns after the indent */
		room = RMACTL_COLUMNS - (int)strlen(indent) - 18;
		if ((int)strlen(err) > room && room > 3)
			printf("%s      last error: %.*s...\n", indent,
			       room - 3, err);
		else
			printf("%s      last error: %s\n", indent, err);
	}
}

static void
rmactl_peers_print_wide(const Rma__V1__StatusReply *s, const char *indent)
{
	char bytes[32], age[32], served_bytes[32], tries[32], err[256];

	printf("%s%4s  %-22s %-22s %-10s %-3s %3s %-32s %10s %10s %7s %8s "
	       "%8s %7s %8s %10s %7s %7s  %s\n",
	       indent, "ID", "ADDRESS", "CONNECTION", "STATE", "DIR", "WKR",
	       "DAEMON", "OPS", "BYTES", "ERRORS", "INFLIGHT", "OLDEST",
	       "DROPPED", "SERVED", "SRV-BYTES", "REFUSED", "TRIES",
	       "LAST ERROR");
	for (size_t i = 0; i < s->n_peers; i++) {
		const Rma__V1__PeerInfo *p = s->peers[i];
		const Rma__V1__OpInfo *o = rmactl_ops_oldest(s, p->peer_id, 0);

		rmactl_bytes(bytes, sizeof(bytes), p->bytes);
		rmactl_bytes(served_bytes, sizeof(served_bytes),
			     p->served_bytes);
		rmactl_ops_age(age, sizeof(age), o ? o->age_us : 0, o != NULL);
		/* attempts/failures of connects: outbound only */
		if (p->inbound)
			snprintf(tries, sizeof(tries), "-");
		else
			snprintf(tries, sizeof(tries), "%" PRIu64 "/%" PRIu64,
				 p->connect_attempts, p->connect_failures);
		rmactl_peer_last_error(err, sizeof(err), p);
		printf("%s%4u  %-22s %-22s %-10s %-3s %3u %-32s %10" PRIu64
		       " %10s %7" PRIu64 " %8" PRIu64 " %8s %7" PRIu64
		       " %8" PRIu64 " %10s %7" PRIu64 " %7s  %s\n",
		       indent, p->peer_id, rmactl_peer_address(p),
		       rmactl_or_dash(p->address), rmactl_peer_state(p->state),
		       p->inbound ? "in" : "out", p->worker,
		       rmactl_or_dash(p->daemon_id), p->ops, bytes, p->errors,
		       p->in_flight, age, p->dropped,
		       p->served_puts + p->served_gets + p->served_resolves,
		       served_bytes, p->refused, tries, err);
	}
}

void
rmactl_peers_print(const Rma__V1__StatusReply *s, int wide, const char *indent)
{
	if (wide)
		rmactl_peers_print_wide(s, indent);
	else
		rmactl_peers_print_narrow(s, indent);
}

static void
rmactl_ops_print_clients(const Rma__V1__StatusReply *s)
{
	char bytes[32], age[32];

	if (s->n_clients == 0) {
		printf("no clients\n");
		return;
	}
	printf("%4s %7s %6s %6s %-24s %3s %-6s %7s %10s %8s %8s %10s\n", "ID",
	       "PID", "UID", "GID", "NAME", "WKR", "VIA", "REGIONS", "BYTES",
	       "INFLIGHT", "OLDEST", "OPS");
	for (size_t i = 0; i < s->n_clients; i++) {
		const Rma__V1__ClientInfo *c = s->clients[i];
		const Rma__V1__OpInfo *o =
		    rmactl_ops_oldest(s, 0, c->client_id);

		rmactl_bytes(bytes, sizeof(bytes), c->region_bytes);
		rmactl_ops_age(age, sizeof(age), o ? o->age_us : 0, o != NULL);
		printf("%4u %7d %6u %6u %-24s %3u %-6s %7u %10s %8" PRIu64
		       " %8s %10" PRIu64 "\n",
		       c->client_id, c->pid, c->uid, c->gid,
		       rmactl_or_dash(c->name), c->worker,
		       c->ring ? "ring" : "socket", c->regions, bytes,
		       c->in_flight, age, c->ops);
	}
}

void
rmactl_users_print(const Rma__V1__StatusReply *s, const char *indent)
{
	char held[32], max[32], bytes[80];

	printf("%s%6s %11s %13s %21s\n", indent, "UID", "CLIENTS", "REGIONS",
	       "BYTES");
	for (size_t i = 0; i < s->n_users; i++) {
		const Rma__V1__UserInfo *u = s->users[i];
		char clients[32], regions[48];

		snprintf(clients, sizeof(clients), "%u/%u", u->clients,
			 s->max_clients_per_uid);
		snprintf(regions, sizeof(regions), "%" PRIu64 "/%u", u->regions,
			 s->max_regions_per_uid);
		rmactl_bytes(held, sizeof(held), u->region_bytes);
		rmactl_bytes(max, sizeof(max), s->max_region_bytes_per_uid);
		snprintf(bytes, sizeof(bytes), "%s/%s", held, max);
		printf("%s%6u %11s %13s %21s\n", indent, u->uid, clients,
		       regions, bytes);
	}
}

static void
rmactl_ops_print_regions(const Rma__V1__StatusReply *s)
{
	uint64_t total = 0;
	char bytes[32];

	if (s->n_regions == 0) {
		printf("no regions\n");
		return;
	}
	printf("%8s %10s %6s %8s %5s\n", "ID", "LENGTH", "CLIENT", "INFLIGHT",
	       "KIND");
	for (size_t i = 0; i < s->n_regions; i++) {
		const Rma__V1__RegionInfo *r = s->regions[i];

		total += r->length;
		rmactl_bytes(bytes, sizeof(bytes), r->length);
		/* fd: the client's own memory file (rma_region_register_fd) */
		printf("%8" PRIu64 " %10s %6u %8" PRIu64 " %5s\n", r->region_id,
		       bytes, r->client_id, r->in_flight,
		       r->registered ? "fd" : "alloc");
	}
	rmactl_bytes(bytes, sizeof(bytes), total);
	printf("%zu regions, %s registered\n", s->n_regions, bytes);
}

static void
rmactl_ops_print_ops(const Rma__V1__StatusReply *s)
{
	char age[32], length[32];

	if (s->ops_in_flight == 0) {
		printf("no operations in flight\n");
		return;
	}
	if (s->n_ops > 0)
		printf("%20s %6s %7s %-5s %4s  %-22s %10s %8s\n", "OP",
		       "CLIENT", "PID", "KIND", "PEER", "ADDRESS", "LENGTH",
		       "AGE");
	for (size_t i = 0; i < s->n_ops; i++) {
		const Rma__V1__OpInfo *o = s->ops[i];

		rmactl_ops_age(age, sizeof(age), o->age_us, 1);
		rmactl_bytes(length, sizeof(length), o->length);
		printf("%20" PRIu64 " %6u %7d %-5s %4u  %-22s %10s %8s\n",
		       o->op_id, o->client_id, o->client_pid,
		       rmactl_op_kind(o->kind), o->peer_id,
		       rmactl_or_dash(o->peer_address), length, age);
	}
	printf("%" PRIu64 " operations in flight, %zu listed%s\n",
	       s->ops_in_flight, s->n_ops,
	       s->n_ops < s->ops_in_flight
		   ? " (the oldest; the rest are local or newer)"
		   : "");
}

static int
rmactl_ops_view(enum rmactl_ops_view view, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"wide", no_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *cmd = rmactl_ops_views[view].name;
	Rma__V1__StatusReply *s;
	rma_client_t *client;
	rma_status_t st;
	int json = 0, wide = 0, c, rc;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'w':
			if (view != VIEW_PEERS)
				return rmactl_ops_usage_error(
				    cmd, "unknown option %s", argv[optind - 1]);
			wide = 1;
			break;
		case 'h':
			fputs(rmactl_ops_views[view].usage, stdout);
			return 0;
		default:
			return rmactl_ops_usage_error(cmd, "unknown option %s",
						      argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_ops_usage_error(cmd, "unexpected argument %s",
					      argv[optind]);

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK)
		return rmactl_fail(cmd, st, NULL);
	rc = rmactl_status_get(cmd, client, &s);
	if (rc != 0)
		goto out_disconnect;
	if (json) {
		rmactl_json_print_fields(stdout, &s->base,
					 rmactl_ops_views[view].json_fields);
	} else {
		switch (view) {
		case VIEW_PEERS:
			if (s->n_peers == 0)
				printf("no peers\n");
			else
				rmactl_peers_print(s, wide, "");
			break;
		case VIEW_CLIENTS:
			rmactl_ops_print_clients(s);
			break;
		case VIEW_USERS:
			if (s->n_users == 0)
				printf("no users\n");
			else
				rmactl_users_print(s, "");
			break;
		case VIEW_REGIONS:
			rmactl_ops_print_regions(s);
			break;
		case VIEW_OPS:
			rmactl_ops_print_ops(s);
			break;
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = rmactl_errx(EX_IOERR, cmd, "write to stdout: %s",
				 strerror(errno));
	rma__v1__status_reply__free_unpacked(s, NULL);
out_disconnect:
	rma_disconnect(client);
	return rc;
}

int
rmactl_ops_peers(int argc, char **argv)
{
	return rmactl_ops_view(VIEW_PEERS, argc, argv);
}

int
rmactl_ops_clients(int argc, char **argv)
{
	return rmactl_ops_view(VIEW_CLIENTS, argc, argv);
}

int
rmactl_ops_users(int argc, char **argv)
{
	return rmactl_ops_view(VIEW_USERS, argc, argv);
}

int
rmactl_ops_regions(int argc, char **argv)
{
	return rmactl_ops_view(VIEW_REGIONS, argc, argv);
}

int
rmactl_ops_ops(int argc, char **argv)
{
	return rmactl_ops_view(VIEW_OPS, argc, argv);
}

int
rmactl_ops_ping(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"count", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	double t0, hello_ms, min = 0, max = 0, sum = 0;
	const char *socket_path;
	Rma__V1__StatusReply *s;
	char version[64] = "";
	rma_client_t *client;
	rma_status_t st;
	uint64_t count = 1;
	int json = 0, c, rc = 0;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (size_parse(optarg, &count) < 0 || count == 0 ||
			    count > RMACTL_OPS_PING_MAX)
				return rmactl_ops_usage_error(
				    "ping", "--count: expected 1 to %d, got %s",
				    RMACTL_OPS_PING_MAX, optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			fputs(rmactl_ops_ping_usage, stdout);
			return 0;
		default:
			return rmactl_ops_usage_error(
			    "ping", "unknown option %s", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_ops_usage_error("ping", "unexpected argument %s",
					      argv[optind]);

	/* the path rma_connect takes */
	socket_path =
	    rmactl_socket != NULL ? rmactl_socket : rma_default_socket();
	t0 = monotime_s();
	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK)
		return rmactl_fail("ping", st, NULL);
	hello_ms = (monotime_s() - t0) * 1e3;
	for (uint64_t i = 0; i < count; i++) {
		double ms;

		t0 = monotime_s();
		rc = rmactl_status_get("ping", client, &s);
		if (rc != 0)
			goto out_disconnect;
		ms = (monotime_s() - t0) * 1e3;
		if (i == 0)
			snprintf(version, sizeof(version), "%s", s->version);
		rma__v1__status_reply__free_unpacked(s, NULL);
		if (i == 0 || ms < min)
			min = ms;
		if (ms > max)
			max = ms;
		sum += ms;
	}
	if (json) {
		printf("{\n  \"schema_version\": %d,\n  \"socket\": ",
		       RMACTL_JSON_SCHEMA);
		rmactl_json_quote(stdout, socket_path);
		printf(",\n  \"daemon_id\": ");
		rmactl_json_quote(stdout, rma_daemon_id(client));
		printf(",\n  \"version\": ");
		rmactl_json_quote(stdout, version);
		printf(",\n  \"hello_ms\": %.3f,\n  \"count\": %" PRIu64
		       ",\n  \"status_min_ms\": %.3f,\n"
		       "  \"status_avg_ms\": %.3f,\n"
		       "  \"status_max_ms\": %.3f\n}\n",
		       hello_ms, count, min, sum / (double)count, max);
	} else {
		printf("rmad %s (daemon %s) at %s: connect+hello %.3f ms, "
		       "status min/avg/max %.3f/%.3f/%.3f ms (%" PRIu64 ")\n",
		       rmactl_or_dash(version),
		       rmactl_or_dash(rma_daemon_id(client)),
		       rmactl_or_dash(socket_path), hello_ms, min,
		       sum / (double)count, max, count);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = rmactl_errx(EX_IOERR, "ping", "write to stdout: %s",
				 strerror(errno));
out_disconnect:
	rma_disconnect(client);
	return rc;
}
