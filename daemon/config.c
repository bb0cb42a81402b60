/* SPDX-License-Identifier: BSD-2-Clause */
/* Configuration: one table of options serves the command line
 * (--name VALUE), the INI file (name = VALUE, in [rmad]) and
 * --check-config. Defaults work with no file; flags override the file.
 * Here: the table, one parser and printer per type of value (seconds,
 * sizes, counts, choices, lists...), setting, printing and comparing
 * options. Where values come from (the file, the environment, the flags)
 * is config_load.c's; each value's syntax (host:port, networks, users and
 * groups) config_value.c's; what needs every option set config_check.c's;
 * net_devices = auto netdev.c's. */
#include "config_option.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "size.h"
#include "socket_path.h"

static void *
config_field(struct config *cfg, const struct config_option *o)
{
	return (char *)cfg + o->offset;
}

static const void *
config_field_const(const struct config *cfg, const struct config_option *o)
{
	return (const char *)cfg + o->offset;
}

/* ---- text ---------------------------------------------------------------
 */

static int
config_parse_string(struct config *cfg, const struct config_option *o,
		    const char *value, char *err, size_t err_len)
{
	if (strlen(value) >= o->size)
		return config_error(err, err_len,
				    "%s: value longer than %zu bytes", o->name,
				    o->size - 1);
	memcpy(config_field(cfg, o), value, strlen(value) + 1);
	return 0;
}

static void
config_print_string(FILE *f, const struct config *cfg,
		    const struct config_option *o)
{
	fprintf(f, "%s", (const char *)config_field_const(cfg, o));
}

static const struct config_type config_string = {
    .parse = config_parse_string,
    .print = config_print_string,
};

/* metrics_listen: HOST:PORT, or empty for none. */
static int
config_parse_endpoint(struct config *cfg, const struct config_option *o,
		      const char *value, char *err, size_t err_len)
{
	char host[64];
	uint16_t port;

	if (strlen(value) >= o->size)
		return config_error(err, err_len,
				    "%s: value longer than %zu bytes", o->name,
				    o->size - 1);
	if (value[0] != '\0' &&
	    config_parse_hostport(value, host, sizeof(host), &port) < 0)
		return config_error(err, err_len,
				    "%s: expected HOST:PORT (or empty), got "
				    "'%s'",
				    o->name, value);
	return config_parse_string(cfg, o, value, err, err_len);
}

static const struct config_type config_endpoint = {
    .parse = config_parse_endpoint,
    .print = config_print_string,
};

/* listen: two fields, listen_host and listen_port. */
static int
config_parse_listen(struct config *cfg, const struct config_option *o,
		    const char *value, char *err, size_t err_len)
{
	char host[sizeof(cfg->listen_host)];
	uint16_t port;

	if (config_parse_hostport(value, host, sizeof(host), &port) < 0)
		return config_error(err, err_len,
				    "%s: expected HOST:PORT, got '%s'", o->name,
				    value);
	memcpy(cfg->listen_host, host, sizeof(host));
	cfg->listen_port = port;
	return 0;
}

static void
config_print_listen(FILE *f, const struct config *cfg,
		    const struct config_option *o)
{
	fprintf(f, strchr(cfg->listen_host, ':') ? "[%s]:%u" : "%s:%u",
		cfg->listen_host, cfg->listen_port);
}

static const struct config_type config_listen = {
    .parse = config_parse_listen,
    .print = config_print_listen,
};

/* ---- words --------------------------------------------------------------
 */

static int
config_parse_level(struct config *cfg, const struct config_option *o,
		   const char *value, char *err, size_t err_len)
{
	if (log_level_parse(value, &cfg->log_level) < 0)
		return config_error(err, err_len,
				    "%s: expected error, warn, info or debug, "
				    "got '%s'",
				    o->name, value);
	return 0;
}

static void
config_print_level(FILE *f, const struct config *cfg,
		   const struct config_option *o)
{
	fprintf(f, "%s", log_level_name(cfg->log_level));
}

static const struct config_type config_level = {
    .parse = config_parse_level,
    .print = config_print_level,
};

static int
config_parse_bool_value(struct config *cfg, const struct config_option *o,
			const char *value, char *err, size_t err_len)
{
	if (config_parse_bool(value, config_field(cfg, o)) < 0)
		return config_error(err, err_len,
				    "%s: expected yes or no, got '%s'", o->name,
				    value);
	return 0;
}

static void
config_print_bool(FILE *f, const struct config *cfg,
		  const struct config_option *o)
{
	fprintf(f, "%s",
		*(const bool *)config_field_const(cfg, o) ? "yes" : "no");
}

static const struct config_type config_bool = {
    .parse = config_parse_bool_value,
    .print = config_print_bool,
    .value_optional = true,
};

/* One of two words onto a bool: o->words[0] is false, [1] true. */
static int
config_parse_choice(struct config *cfg, const struct config_option *o,
		    const char *value, char *err, size_t err_len)
{
	bool *b = config_field(cfg, o);

	if (strcmp(value, o->words[0]) != 0 && strcmp(value, o->words[1]) != 0)
		return config_error(err, err_len,
				    "%s: expected %s or %s, got '%s'", o->name,
				    o->words[0], o->words[1], value);
	*b = strcmp(value, o->words[1]) == 0;
	return 0;
}

static void
config_print_choice(FILE *f, const struct config *cfg,
		    const struct config_option *o)
{
	fprintf(f, "%s", o->words[*(const bool *)config_field_const(cfg, o)]);
}

static const struct config_type config_choice = {
    .parse = config_parse_choice,
    .print = config_print_choice,
};

static const char *const config_progress_words[] = {"blocking", "polling"};
static const char *const config_rma_words[] = {"am", "ucx"};

/* ---- numbers ------------------------------------------------------------
 */

/* A uint32_t or uint64_t field, as its size says. */
static void
config_number_store(struct config *cfg, const struct config_option *o,
		    uint64_t v)
{
	uint32_t v32 = (uint32_t)v;

	if (o->size == sizeof(uint32_t))
		memcpy(config_field(cfg, o), &v32, sizeof(v32));
	else
		memcpy(config_field(cfg, o), &v, sizeof(v));
}

static uint64_t
config_number_load(const struct config *cfg, const struct config_option *o)
{
	uint32_t v32;
	uint64_t v;

	if (o->size == sizeof(uint32_t)) {
		memcpy(&v32, config_field_const(cfg, o), sizeof(v32));
		return v32;
	}
	memcpy(&v, config_field_const(cfg, o), sizeof(v));
	return v;
}

static void
config_print_number(FILE *f, const struct config *cfg,
		    const struct config_option *o)
{
	fprintf(f, "%llu", (unsigned long long)config_number_load(cfg, o));
}

/* A positive number (K, M, G suffixes taken) that fits the option's
 * bound and its field, into *v_p; what says what it counts. */
static int
config_positive(const struct config_option *o, const char *value,
		const char *what, uint64_t *v_p, char *err, size_t err_len)
{
	uint64_t v;

	if (size_parse(value, &v) < 0 || v == 0)
		return config_error(err, err_len,
				    "%s: expected a positive number%s, got "
				    "'%s'",
				    o->name, what, value);
	if (o->max != 0 && v > o->max)
		return config_error(err, err_len, "%s: at most %llu, got '%s'",
				    o->name, (unsigned long long)o->max, value);
	if (o->size == sizeof(uint32_t) && v > UINT32_MAX)
		return config_error(err, err_len, "%s: %s is too large",
				    o->name, value);
	*v_p = v;
	return 0;
}

static int
config_parse_count(struct config *cfg, const struct config_option *o,
		   const char *value, char *err, size_t err_len)
{
	uint64_t v;

	if (config_positive(o, value, "", &v, err, err_len) < 0)
		return -1;
	config_number_store(cfg, o, v);
	return 0;
}

static const struct config_type config_count = {
    .parse = config_parse_count,
    .print = config_print_number,
};

#define CONFIG_BYTES_WHAT " of bytes (K, M, G suffixes)"

static int
config_parse_bytes(struct config *cfg, const struct config_option *o,
		   const char *value, char *err, size_t err_len)
{
	uint64_t v;

	if (config_positive(o, value, CONFIG_BYTES_WHAT, &v, err, err_len) < 0)
		return -1;
	config_number_store(cfg, o, v);
	return 0;
}

static const struct config_type config_bytes = {
    .parse = config_parse_bytes,
    .print = config_print_number,
};

/* max_frame: bytes, and a frame the protocol can carry. */
static int
config_parse_frame(struct config *cfg, const struct config_option *o,
		   const char *value, char *err, size_t err_len)
{
	uint64_t v;

	if (config_positive(o, value, CONFIG_BYTES_WHAT, &v, err, err_len) < 0)
		return -1;
	if (v < 4096 || v > (256u << 20))
		return config_error(err, err_len,
				    "max_frame: expected 4K to 256M");
	config_number_store(cfg, o, v);
	return 0;
}

static const struct config_type config_frame = {
    .parse = config_parse_frame,
    .print = config_print_number,
};

/* Microseconds, 0 allowed. */
static int
config_parse_micros(struct config *cfg, const struct config_option *o,
		    const char *value, char *err, size_t err_len)
{
	uint64_t v;

	if (size_parse(value, &v) < 0 || v > o->max)
		return config_error(err, err_len,
				    "%s: expected microseconds in [0, %llu], "
				    "got '%s'",
				    o->name, (unsigned long long)o->max, value);
	config_number_store(cfg, o, v);
	return 0;
}

static const struct config_type config_micros = {
    .parse = config_parse_micros,
    .print = config_print_number,
};

static int
config_parse_seconds(struct config *cfg, const struct config_option *o,
		     const char *value, char *err, size_t err_len)
{
	char *end;
	double secs;

	errno = 0;
	secs = strtod(value, &end);
	if (errno || *end != '\0' || end == value || !(secs > 0) ||
	    secs > (double)o->max)
		return config_error(err, err_len,
				    "%s: expected seconds in (0, %llu], got "
				    "'%s'",
				    o->name, (unsigned long long)o->max, value);
	memcpy(config_field(cfg, o), &secs, sizeof(secs));
	return 0;
}

static void
config_print_seconds(FILE *f, const struct config *cfg,
		     const struct config_option *o)
{
	double secs;

	memcpy(&secs, config_field_const(cfg, o), sizeof(secs));
	fprintf(f, "%g", secs);
}

static const struct config_type config_seconds = {
    .parse = config_parse_seconds,
    .print = config_print_seconds,
};

/* A descriptor this process inherited (an int field). */
static int
config_parse_fd(struct config *cfg, const struct config_option *o,
		const char *value, char *err, size_t err_len)
{
	unsigned long long v;
	char *end;
	int fd;

	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno || *end != '\0' || end == value || v > o->max)
		return config_error(err, err_len,
				    "%s: expected a file descriptor", o->name);
	fd = (int)v;
	memcpy(config_field(cfg, o), &fd, sizeof(fd));
	return 0;
}

static void
config_print_fd(FILE *f, const struct config *cfg,
		const struct config_option *o)
{
	int fd;

	memcpy(&fd, config_field_const(cfg, o), sizeof(fd));
	fprintf(f, "%d", fd);
}

static const struct config_type config_fd = {
    .parse = config_parse_fd,
    .print = config_print_fd,
};

/* ---- lists --------------------------------------------------------------
 */

/* Each item of value through add, into a copy: a refused list leaves the
 * one before. 0 or -1. */
static int
config_parse_list(struct config *cfg, const struct config_option *o,
		  const char *value, int (*add)(const char *item, void *arg))
{
	struct config next = *cfg;
	const size_t none = 0;

	memcpy((char *)&next + o->count, &none, sizeof(none));
	if (config_each(value, add, &next) < 0)
		return -1;
	memcpy(config_field(cfg, o), config_field_const(&next, o), o->size);
	memcpy((char *)cfg + o->count, (const char *)&next + o->count,
	       sizeof(size_t));
	return 0;
}

static int
config_parse_cidrs(struct config *cfg, const struct config_option *o,
		   const char *value, char *err, size_t err_len)
{
	char host[INET6_ADDRSTRLEN + 8], net[INET6_ADDRSTRLEN + 8];

	if (config_parse_list(cfg, o, value, config_add_cidr) == 0)
		return 0;
	if (config_cidr_network(value, host, sizeof(host), net, sizeof(net)))
		return config_error(err, err_len,
				    "%s: %s has host bits set: the network is "
				    "%s (or write one host as /32, /128)",
				    o->name, host, net);
	return config_error(err, err_len,
			    "%s: expected a list of networks like "
			    "10.0.0.0/8, got '%s'",
			    o->name, value);
}

static void
config_print_cidrs(FILE *f, const struct config *cfg,
		   const struct config_option *o)
{
	for (size_t i = 0; i < cfg->n_peer_allow; i++) {
		const struct cidr *c = &cfg->peer_allow[i];
		char buf[INET6_ADDRSTRLEN];

		inet_ntop(c->family, c->addr, buf, sizeof(buf));
		fprintf(f, "%s%s/%d", i ? "," : "", buf, c->prefix);
	}
}

static const struct config_type config_cidrs = {
    .parse = config_parse_cidrs,
    .print = config_print_cidrs,
};

static int
config_parse_users(struct config *cfg, const struct config_option *o,
		   const char *value, char *err, size_t err_len)
{
	if (config_parse_list(cfg, o, value, config_add_user) < 0)
		return config_error(err, err_len, "%s: unknown user in '%s'",
				    o->name, value);
	return 0;
}

static int
config_parse_groups(struct config *cfg, const struct config_option *o,
		    const char *value, char *err, size_t err_len)
{
	if (config_parse_list(cfg, o, value, config_add_group) < 0)
		return config_error(err, err_len, "%s: unknown group in '%s'",
				    o->name, value);
	return 0;
}

/* allow_users, allow_groups: numbers, as many as the count says. */
static void
config_print_ids(FILE *f, const struct config *cfg,
		 const struct config_option *o)
{
	const unsigned *ids = config_field_const(cfg, o);
	size_t n;

	memcpy(&n, (const char *)cfg + o->count, sizeof(n));
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%u", i ? "," : "", ids[i]);
}

static const struct config_type config_users = {
    .parse = config_parse_users,
    .print = config_print_ids,
};
static const struct config_type config_groups = {
    .parse = config_parse_groups,
    .print = config_print_ids,
};

_Static_assert(sizeof(uid_t) == sizeof(unsigned) &&
		   sizeof(gid_t) == sizeof(unsigned),
	       "config_print_ids reads uids and gids as unsigned");

/* ---- the table ----------------------------------------------------------
 */

#define CONFIG_FIELD(field)                                                    \
	.offset = offsetof(struct config, field),                              \
	.size = sizeof(((struct config *)0)->field)
#define OPT_(n, t, field, rl, h)                                               \
	{                                                                      \
		.name = n, .type = &t, CONFIG_FIELD(field), .reload = rl,      \
		.help = h                                                      \
	}
#define OPT(n, t, field, h) OPT_(n, t, field, false, h)
/* Reloadable on SIGHUP. */
#define ROPT(n, t, field, h) OPT_(n, t, field, true, h)
/* Numbers with a bound of their own. */
#define NOPT(n, t, field, rl, m, h)                                            \
	{                                                                      \
		.name = n, .type = &t, CONFIG_FIELD(field), .max = m,          \
		.reload = rl, .help = h                                        \
	}
#define SECONDS_MAX 86400
/* Lists: the field and its count. */
#define LOPT(n, t, field, nfield, h)                                           \
	{                                                                      \
		.name = n, .type = &t, CONFIG_FIELD(field),                    \
		.count = offsetof(struct config, nfield), .reload = true,      \
		.help = h                                                      \
	}
/* Two words onto a bool. */
#define COPT(n, w, field, h)                                                   \
	{                                                                      \
		.name = n, .type = &config_choice, CONFIG_FIELD(field),        \
		.words = w, .help = h                                          \
	}

const struct config_option config_options[] = {
    OPT("socket", config_string, socket_path,
	"client socket path (env RMAD_SOCKET)"),
    OPT("socket_group", config_string, socket_group,
	"group owning the client socket (mode 0660)"),
    OPT("socket_dir_shared", config_bool, socket_dir_shared,
	"allow a socket directory other users can write (all users, a group "
	"with members besides this user and root, or a directory above it "
	"that is not sticky): they can then pose as this rmad to its clients "
	"and to its successor (--take-over)"),
    OPT("listen", config_listen, listen_host,
	"HOST:PORT of the UCX listener for other daemons"),
    ROPT("log_level", config_level, log_level, "error, warn, info or debug"),
    NOPT("op_timeout", config_seconds, op_timeout, true, SECONDS_MAX,
	 "seconds before an operation fails with a timeout"),
    NOPT("connect_timeout", config_seconds, connect_timeout, true, SECONDS_MAX,
	 "seconds for a peer connect and handshake"),
    NOPT("shutdown_timeout", config_seconds, shutdown_timeout, true,
	 SECONDS_MAX, "seconds to drain operations on SIGTERM"),
    ROPT("max_frame", config_frame, max_frame, "largest client frame"),
    ROPT("max_queued_bytes", config_bytes, max_queued_bytes,
	 "output queued for one client before it is cut off"),
    OPT("transports", config_string, transports,
	"UCX transports between daemons (UCX_TLS)"),
    OPT("net_devices", config_string, net_devices,
	"UCX network devices (UCX_NET_DEVICES): auto = the interfaces "
	"holding the listen address, all = every device, or a list"),
    LOPT("peer_allow", config_cidrs, peer_allow, n_peer_allow,
	 "networks other daemons may connect from (CIDR list)"),
    ROPT("peer_key_file", config_string, peer_key_file,
	 "file holding the cluster key peers prove (mode 0600, at least 32 "
	 "bytes), empty = none"),
    ROPT("max_inbound_peers", config_count, max_inbound_peers,
	 "endpoints other daemons may open to this one, in total"),
    ROPT("max_inbound_per_address", config_count, max_inbound_per_address,
	 "endpoints other daemons may open from one IP address"),
    LOPT("allow_users", config_users, allow_uids, n_allow_uids,
	 "users who may connect (names or uids), empty = anyone who can open "
	 "the socket"),
    LOPT("allow_groups", config_groups, allow_gids, n_allow_gids,
	 "groups whose members may connect (names or gids)"),
    COPT("progress_mode", config_progress_words, polling,
	 "blocking (idle CPU ~0) or polling (lowest latency, one busy core)"),
    NOPT("progress_spin", config_micros, progress_spin_us, true, 1000000,
	 "blocking mode: microseconds to keep polling UCX before sleeping "
	 "while operations are in flight (0 = sleep at once)"),
    ROPT("ring", config_bool, ring,
	 "offer each client a shared-memory ring for its operations and "
	 "completions (no = the socket only)"),
    NOPT("ring_spin", config_micros, ring_spin_us, true, 1000000,
	 "microseconds to keep polling a client's ring after its last "
	 "traffic before sleeping (longer = lower latency, more CPU)"),
    COPT("rma_protocol", config_rma_words, ucx_rma,
	 "am (rmad's messages; the target checks every access) or ucx "
	 "(ucp_put/get_nbx, for RDMA fabrics)"),
    OPT("rma_protocol_unchecked", config_bool, ucx_rma_unchecked,
	"allow rma_protocol = ucx over transports that do not check remote "
	"keys (tcp, shared memory): any peer can then read and write all of "
	"this daemon's memory"),
    ROPT("max_regions", config_count, max_regions, "regions per client"),
    ROPT("max_region_bytes", config_bytes, max_region_bytes,
	 "registered bytes per client"),
    ROPT("max_in_flight", config_count, max_in_flight,
	 "operations in flight per client"),
    ROPT("max_clients_per_uid", config_count, max_clients_per_uid,
	 "connections one user (uid, root too) may hold at once"),
    ROPT("max_regions_per_uid", config_count, max_regions_per_uid,
	 "regions one user's clients may hold together"),
    ROPT("max_region_bytes_per_uid", config_bytes, max_region_bytes_per_uid,
	 "registered bytes one user's clients may hold together"),
    NOPT("workers", config_count, workers, false, CONFIG_WORKERS_MAX,
	 "worker threads, each with its own loop, UCX worker and clients"),
    OPT("metrics_listen", config_endpoint, metrics_listen,
	"HOST:PORT serving Prometheus metrics at /metrics, empty = off"),
    OPT("take_over", config_bool, take_over,
	"take the regions, identity and client socket over from the rmad "
	"serving the same socket, which then exits (upgrade without "
	"disruption)"),
    NOPT("reattach_timeout", config_seconds, reattach_timeout, true,
	 SECONDS_MAX,
	 "seconds a taken-over region waits for its owner before it is "
	 "freed"),
    OPT("fd_store", config_string, fd_store,
	"keep every region's memory in systemd's file descriptor store so "
	"that a crash or watchdog restart keeps it: auto (when NOTIFY_SOCKET "
	"is set), yes (required) or no"),
    OPT("fd_store_max", config_count, fd_store_max,
	"FileDescriptorStoreMax= of the unit: the store holds this many fds, "
	"3 of them rmad's own, the rest one per region (regions past it are "
	"refused)"),
    {.name = "ready_fd",
     .type = &config_fd,
     CONFIG_FIELD(ready_fd),
     .max = 65535,
     .flag_only = true,
     .help = "write \"ready\\n\" to this fd once serving"},
};

void
config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	socket_path_default(cfg->socket_path, sizeof(cfg->socket_path));
	snprintf(cfg->listen_host, sizeof(cfg->listen_host), "127.0.0.1");
	cfg->listen_port = 13337;
	cfg->log_level = LOG_LEVEL_INFO;
	cfg->op_timeout = 30.0;
	cfg->connect_timeout = 5.0;
	cfg->shutdown_timeout = 5.0;
	cfg->max_frame = FRAME_MAX_DEFAULT;
	cfg->max_queued_bytes = 64u << 20;
	snprintf(cfg->transports, sizeof(cfg->transports), "tcp");
	snprintf(cfg->net_devices, sizeof(cfg->net_devices), "auto");
	config_set(cfg, "peer_allow", "127.0.0.0/8,::1/128", NULL, 0);
	cfg->max_regions = 1024;
	cfg->max_region_bytes = (uint64_t)64 << 30;
	cfg->max_in_flight = 65536;
	cfg->max_clients_per_uid = 256;
	cfg->max_regions_per_uid = 16384;
	/* four clients at their max_region_bytes */
	cfg->max_region_bytes_per_uid = (uint64_t)256 << 30;
	cfg->max_inbound_peers = 1024;
	cfg->max_inbound_per_address = 64;
	cfg->ready_fd = -1;
	cfg->workers = 1;
	/* ring_spin's polling covers it, without blocking the loop */
	cfg->progress_spin_us = 0;
	cfg->ring = true;
	cfg->ring_spin_us = 100;
	cfg->reattach_timeout = 60.0;
	snprintf(cfg->fd_store, sizeof(cfg->fd_store), "auto");
	cfg->fd_store_max = 4096;
}

const struct config_option *
config_find(const char *name)
{
	for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
		const char *a = config_options[i].name, *b = name;
		/* "op-timeout" and "op_timeout" are the same option */
		while (*a && (*a == *b || (*a == '_' && *b == '-'))) {
			a++;
			b++;
		}
		if (*a == '\0' && *b == '\0')
			return &config_options[i];
	}
	return NULL;
}

int
config_set(struct config *cfg, const char *name, const char *value, char *err,
	   size_t err_len)
{
	const struct config_option *o = config_find(name);

	if (o == NULL)
		return config_error(err, err_len, "unknown option '%s'", name);
	return o->type->parse(cfg, o, value, err, err_len);
}

void
config_print_value(FILE *f, const struct config *cfg,
		   const struct config_option *o)
{
	o->type->print(f, cfg, o);
}

void
config_print(FILE *f, const struct config *cfg)
{
	fprintf(f, "[rmad]\n");
	for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
		if (config_options[i].flag_only)
			continue;
		fprintf(f, "%s = ", config_options[i].name);
		config_print_value(f, cfg, &config_options[i]);
		fprintf(f, "\n");
	}
}

/* One option's value as config_print writes it; NULL without memory. */
static char *
config_value_text(const struct config *cfg, const struct config_option *o)
{
	char *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);

	if (f == NULL)
		return NULL;
	config_print_value(f, cfg, o);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

void
config_diff(const struct config *a, const struct config *b, config_diff_fn fn,
	    void *arg)
{
	for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
		const struct config_option *o = &config_options[i];
		char *va, *vb;

		if (o->flag_only)
			continue;
		va = config_value_text(a, o);
		vb = config_value_text(b, o);
		if (va != NULL && vb != NULL && strcmp(va, vb) != 0)
			fn(o->name, o->reload, va, vb, arg);
		free(va);
		free(vb);
	}
}

void
config_take_reloadable(struct config *cur, const struct config *next)
{
	for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
		const struct config_option *o = &config_options[i];

		if (!o->reload)
			continue;
		memcpy((char *)cur + o->offset, (const char *)next + o->offset,
		       o->size);
		if (o->count != 0)
			memcpy((char *)cur + o->count,
			       (const char *)next + o->count, sizeof(size_t));
	}
	/* what config_check read from peer_key_file goes with it */
	cur->peer_key_set = next->peer_key_set;
	memcpy(cur->peer_key, next->peer_key, sizeof(cur->peer_key));
}
