/* SPDX-License-Identifier: BSD-2-Clause */
/* Configuration: one table of options serves the command line
 * (--name VALUE), the INI file (name = VALUE, in [rmad]) and
 * --check-config. Defaults work with no file; flags override the file.
 * Here: the table, each value's syntax (host:port, networks, users and
 * groups, sizes, seconds), the file, the flags and the printing; what
 * needs every option set is config_check.c's, net_devices = auto is
 * netdev.c's. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "frame.h"
#include "size.h"
#include "socket_path.h"

enum config_type {
	CT_STRING,
	CT_HOSTPORT,
	CT_LEVEL,
	CT_SECONDS,
	CT_BYTES,
	CT_COUNT,
	CT_MICROS, /* microseconds, 0 allowed */
	CT_FD,
	CT_CIDRS,
	CT_USERS,
	CT_GROUPS,
	CT_PROGRESS,
	CT_RMA,
	CT_BOOL, /* yes/no; as a flag, the value is optional (yes) */
};

struct config_option {
	const char *name;
	enum config_type type;
	size_t offset;
	size_t size; /* CT_STRING buffer size */
	bool flag_only;
	/* A running daemon takes a new value on SIGHUP (config_reload.c):
	 * read afresh at each use, or at each new client or peer. The rest
	 * shaped what was built at start (socket, listener, UCX, threads). */
	bool reload;
	const char *help;
};

#define OPT_(n, t, field, reload, h)                                           \
	{                                                                      \
		n, t, offsetof(struct config, field),                          \
		    sizeof(((struct config *)0)->field), false, reload, h      \
	}
#define OPT(n, t, field, h) OPT_(n, t, field, false, h)
/* Reloadable on SIGHUP. */
#define ROPT(n, t, field, h) OPT_(n, t, field, true, h)

static const struct config_option config_options[] = {
    OPT("socket", CT_STRING, socket_path,
	"client socket path (env RMAD_SOCKET)"),
    OPT("socket_group", CT_STRING, socket_group,
	"group owning the client socket (mode 0660)"),
    OPT("socket_dir_shared", CT_BOOL, socket_dir_shared,
	"allow a socket directory other users can write (all users, a group "
	"with members besides this user and root, or a directory above it "
	"that is not sticky): they can then pose as this rmad to its clients "
	"and to its successor (--take-over)"),
    OPT("listen", CT_HOSTPORT, listen_host,
	"HOST:PORT of the UCX listener for other daemons"),
    ROPT("log_level", CT_LEVEL, log_level, "error, warn, info or debug"),
    ROPT("op_timeout", CT_SECONDS, op_timeout,
	 "seconds before an operation fails with a timeout"),
    ROPT("connect_timeout", CT_SECONDS, connect_timeout,
	 "seconds for a peer connect and handshake"),
    ROPT("shutdown_timeout", CT_SECONDS, shutdown_timeout,
	 "seconds to drain operations on SIGTERM"),
    ROPT("max_frame", CT_BYTES, max_frame, "largest client frame"),
    ROPT("max_queued_bytes", CT_BYTES, max_queued_bytes,
	 "output queued for one client before it is cut off"),
    OPT("transports", CT_STRING, transports,
	"UCX transports between daemons (UCX_TLS)"),
    OPT("net_devices", CT_STRING, net_devices,
	"UCX network devices (UCX_NET_DEVICES): auto = the interfaces "
	"holding the listen address, all = every device, or a list"),
    ROPT("peer_allow", CT_CIDRS, peer_allow,
	 "networks other daemons may connect from (CIDR list)"),
    ROPT("peer_key_file", CT_STRING, peer_key_file,
	 "file holding the cluster key peers prove (mode 0600, at least 32 "
	 "bytes), empty = none"),
    ROPT("max_inbound_peers", CT_COUNT, max_inbound_peers,
	 "endpoints other daemons may open to this one, in total"),
    ROPT("max_inbound_per_address", CT_COUNT, max_inbound_per_address,
	 "endpoints other daemons may open from one IP address"),
    ROPT("allow_users", CT_USERS, allow_uids,
	 "users who may connect (names or uids), empty = anyone who can open "
	 "the socket"),
    ROPT("allow_groups", CT_GROUPS, allow_gids,
	 "groups whose members may connect (names or gids)"),
    OPT("progress_mode", CT_PROGRESS, polling,
	"blocking (idle CPU ~0) or polling (lowest latency, one busy core)"),
    ROPT("progress_spin", CT_MICROS, progress_spin_us,
	 "blocking mode: microseconds to keep polling UCX before sleeping "
	 "while operations are in flight (0 = sleep at once)"),
    ROPT("ring", CT_BOOL, ring,
	 "offer each client a shared-memory ring for its operations and "
	 "completions (no = the socket only)"),
    ROPT("ring_spin", CT_MICROS, ring_spin_us,
	 "microseconds to keep polling a client's ring after its last "
	 "traffic before sleeping (longer = lower latency, more CPU)"),
    OPT("rma_protocol", CT_RMA, ucx_rma,
	"am (rmad's messages; the target checks every access) or ucx "
	"(ucp_put/get_nbx, for RDMA fabrics)"),
    OPT("rma_protocol_unchecked", CT_BOOL, ucx_rma_unchecked,
	"allow rma_protocol = ucx over transports that do not check remote "
	"keys (tcp, shared memory): any peer can then read and write all of "
	"this daemon's memory"),
    ROPT("max_regions", CT_COUNT, max_regions, "regions per client"),
    ROPT("max_region_bytes", CT_BYTES, max_region_bytes,
	 "registered bytes per client"),
    ROPT("max_in_flight", CT_COUNT, max_in_flight,
	 "operations in flight per client"),
    OPT("workers", CT_COUNT, workers,
	"worker threads, each with its own loop, UCX worker and clients"),
    OPT("metrics_listen", CT_STRING, metrics_listen,
	"HOST:PORT serving Prometheus metrics at /metrics, empty = off"),
    OPT("take_over", CT_BOOL, take_over,
	"take the regions, identity and client socket over from the rmad "
	"serving the same socket, which then exits (upgrade without "
	"disruption)"),
    ROPT("reattach_timeout", CT_SECONDS, reattach_timeout,
	 "seconds a taken-over region waits for its owner before it is "
	 "freed"),
    OPT("fd_store", CT_STRING, fd_store,
	"keep every region's memory in systemd's file descriptor store so "
	"that a crash or watchdog restart keeps it: auto (when NOTIFY_SOCKET "
	"is set), yes (required) or no"),
    OPT("fd_store_max", CT_COUNT, fd_store_max,
	"FileDescriptorStoreMax= of the unit: the store holds this many fds, "
	"3 of them rmad's own, the rest one per region (regions past it are "
	"refused)"),
    {"ready_fd", CT_FD, offsetof(struct config, ready_fd), sizeof(int), true,
     false, "write \"ready\\n\" to this fd once serving"},
};

#define N_OPTIONS (sizeof(config_options) / sizeof(config_options[0]))

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

static const struct config_option *
config_find(const char *name)
{
	for (size_t i = 0; i < N_OPTIONS; i++) {
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
	char *field;
	uint64_t bytes;
	uint32_t micros;
	char *end;
	double secs;

	if (o == NULL)
		return config_error(err, err_len, "unknown option '%s'", name);
	field = (char *)cfg + o->offset;
	switch (o->type) {
	case CT_STRING:
		if (strlen(value) >= o->size)
			return config_error(err, err_len,
					    "%s: value longer than %zu bytes",
					    o->name, o->size - 1);
		if (o->offset == offsetof(struct config, metrics_listen) &&
		    value[0] != '\0') {
			char host[64];
			uint16_t port;
			if (config_parse_hostport(value, host, sizeof(host),
						  &port) < 0)
				return config_error(err, err_len,
						    "%s: expected HOST:PORT "
						    "(or empty), got '%s'",
						    o->name, value);
		}
		memcpy(field, value, strlen(value) + 1);
		return 0;
	case CT_HOSTPORT:
		if (config_parse_hostport(value, cfg->listen_host,
					  sizeof(cfg->listen_host),
					  &cfg->listen_port) < 0)
			return config_error(err, err_len,
					    "%s: expected HOST:PORT, got '%s'",
					    o->name, value);
		return 0;
	case CT_LEVEL:
		if (log_level_parse(value, &cfg->log_level) < 0)
			return config_error(err, err_len,
					    "%s: expected error, warn, info or "
					    "debug, got '%s'",
					    o->name, value);
		return 0;
	case CT_SECONDS:
		errno = 0;
		secs = strtod(value, &end);
		if (errno || *end != '\0' || end == value || !(secs > 0) ||
		    secs > 86400)
			return config_error(
			    err, err_len,
			    "%s: expected seconds in (0, 86400], "
			    "got '%s'",
			    o->name, value);
		memcpy(field, &secs, sizeof(secs));
		return 0;
	case CT_MICROS:
		if (size_parse(value, &bytes) < 0 || bytes > 1000000)
			return config_error(err, err_len,
					    "%s: expected microseconds in [0, "
					    "1000000], got '%s'",
					    o->name, value);
		micros = (uint32_t)bytes;
		memcpy(field, &micros, sizeof(micros));
		return 0;
	case CT_BYTES:
	case CT_COUNT:
		if (size_parse(value, &bytes) < 0 || bytes == 0)
			return config_error(err, err_len,
					    "%s: expected a positive number%s, "
					    "got '%s'",
					    o->name,
					    o->type == CT_BYTES
						? " of bytes (K, M, G suffixes)"
						: "",
					    value);
		if (o->offset == offsetof(struct config, workers) &&
		    bytes > CONFIG_WORKERS_MAX)
			return config_error(err, err_len,
					    "%s: at most %d, got '%s'", o->name,
					    CONFIG_WORKERS_MAX, value);
		if (o->size == sizeof(uint32_t)) {
			uint32_t v32 = (uint32_t)bytes;
			if (bytes > UINT32_MAX)
				return config_error(err, err_len,
						    "%s: %s is too large",
						    o->name, value);
			memcpy(field, &v32, sizeof(v32));
		} else {
			memcpy(field, &bytes, sizeof(bytes));
		}
		if (o->offset == offsetof(struct config, max_frame) &&
		    (cfg->max_frame < 4096 || cfg->max_frame > (256u << 20)))
			return config_error(err, err_len,
					    "max_frame: expected 4K to 256M");
		return 0;
	case CT_FD:
		errno = 0;
		bytes = strtoull(value, &end, 10);
		if (errno || *end != '\0' || end == value || bytes > 65535)
			return config_error(err, err_len,
					    "%s: expected a file descriptor",
					    o->name);
		cfg->ready_fd = (int)bytes;
		return 0;
	case CT_CIDRS: {
		char host[INET6_ADDRSTRLEN + 8], net[INET6_ADDRSTRLEN + 8];

		cfg->n_peer_allow = 0;
		if (config_each(value, config_add_cidr, cfg) == 0)
			return 0;
		if (config_cidr_network(value, host, sizeof(host), net,
					sizeof(net)))
			return config_error(err, err_len,
					    "%s: %s has host bits set: the "
					    "network is %s (or write one host "
					    "as /32, /128)",
					    o->name, host, net);
		return config_error(err, err_len,
				    "%s: expected a list of networks like "
				    "10.0.0.0/8, got '%s'",
				    o->name, value);
	}
	case CT_USERS:
		cfg->n_allow_uids = 0;
		if (config_each(value, config_add_user, cfg) < 0)
			return config_error(err, err_len,
					    "%s: unknown user in '%s'", o->name,
					    value);
		return 0;
	case CT_PROGRESS:
		if (strcmp(value, "blocking") != 0 &&
		    strcmp(value, "polling") != 0)
			return config_error(err, err_len,
					    "%s: expected blocking or polling, "
					    "got '%s'",
					    o->name, value);
		cfg->polling = strcmp(value, "polling") == 0;
		return 0;
	case CT_RMA:
		if (strcmp(value, "am") != 0 && strcmp(value, "ucx") != 0)
			return config_error(err, err_len,
					    "%s: expected am or ucx, got '%s'",
					    o->name, value);
		cfg->ucx_rma = strcmp(value, "ucx") == 0;
		return 0;
	case CT_BOOL:
		if (config_parse_bool(value, (bool *)field) < 0)
			return config_error(err, err_len,
					    "%s: expected yes or no, got '%s'",
					    o->name, value);
		return 0;
	case CT_GROUPS:
		cfg->n_allow_gids = 0;
		if (config_each(value, config_add_group, cfg) < 0)
			return config_error(err, err_len,
					    "%s: unknown group in '%s'",
					    o->name, value);
		return 0;
	}
	return config_error(err, err_len, "%s: unhandled type", o->name);
}

struct config_ini {
	struct config *cfg;
	bool seen[N_OPTIONS]; /* given once already in this file */
	char err[256];
};

static int
config_ini_handler(void *user, const char *section, const char *name,
		   const char *value)
{
	struct config_ini *ci = user;
	const struct config_option *o;

	/* inih gives the section: "" before the first header */
	if (section[0] == '\0') {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "'%s' before any section (options go in "
				 "[rmad])",
				 name);
		return 0;
	}
	if (strcmp(section, "rmad") != 0) {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "unknown section [%s] (options go in [rmad])",
				 section);
		return 0;
	}
	o = config_find(name);
	if (o != NULL && o->flag_only) {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "'%s' is a command-line flag only", name);
		return 0;
	}
	/* The last of two would win unseen: refuse the second. inih also
	 * calls again for an indented line (a continuation). */
	if (o != NULL && ci->seen[o - config_options]) {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "'%s' given twice (or continued on an "
				 "indented line): keep one",
				 name);
		return 0;
	}
	if (o != NULL)
		ci->seen[o - config_options] = true;
	if (config_set(ci->cfg, name, value,
		       ci->err[0] == '\0' ? ci->err : NULL,
		       sizeof(ci->err)) < 0)
		return 0;
	return 1;
}

int
config_load_file(struct config *cfg, const char *path, char *err,
		 size_t err_len)
{
	struct config_ini ci = {.cfg = cfg};
	struct stat st;
	FILE *f;
	int line;

	f = fopen(path, "re");
	if (f == NULL)
		return config_error(err, err_len,
				    "cannot open config file %s: %s", path,
				    strerror(errno));
	/* a directory opens and reads as empty: it would run on defaults */
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return config_error(err, err_len,
				    "config file %s is a directory: --config "
				    "takes the file (e.g. %s/rmad.conf)",
				    path, path);
	}
	line = ini_parse_file(f, config_ini_handler, &ci);
	fclose(f);
	if (line != 0)
		return config_error(err, err_len, "%s:%d: %s", path, line,
				    ci.err[0] ? ci.err : "syntax error");
	return 0;
}

static void
config_print_value(FILE *f, const struct config *cfg,
		   const struct config_option *o)
{
	const char *field = (const char *)cfg + o->offset;
	double secs;
	uint64_t v64;
	uint32_t v32;

	switch (o->type) {
	case CT_STRING:
		fprintf(f, "%s", field);
		break;
	case CT_HOSTPORT:
		fprintf(f, strchr(cfg->listen_host, ':') ? "[%s]:%u" : "%s:%u",
			cfg->listen_host, cfg->listen_port);
		break;
	case CT_LEVEL:
		fprintf(f, "%s", log_level_name(cfg->log_level));
		break;
	case CT_SECONDS:
		memcpy(&secs, field, sizeof(secs));
		fprintf(f, "%g", secs);
		break;
	case CT_MICROS:
	case CT_BYTES:
	case CT_COUNT:
		if (o->size == sizeof(uint32_t)) {
			memcpy(&v32, field, sizeof(v32));
			v64 = v32;
		} else {
			memcpy(&v64, field, sizeof(v64));
		}
		fprintf(f, "%llu", (unsigned long long)v64);
		break;
	case CT_FD:
		fprintf(f, "%d", cfg->ready_fd);
		break;
	case CT_CIDRS:
		for (size_t i = 0; i < cfg->n_peer_allow; i++) {
			char buf[INET6_ADDRSTRLEN];
			const struct cidr *c = &cfg->peer_allow[i];
			inet_ntop(c->family, c->addr, buf, sizeof(buf));
			fprintf(f, "%s%s/%d", i ? "," : "", buf, c->prefix);
		}
		break;
	case CT_USERS:
		for (size_t i = 0; i < cfg->n_allow_uids; i++)
			fprintf(f, "%s%u", i ? "," : "",
				(unsigned)cfg->allow_uids[i]);
		break;
	case CT_PROGRESS:
		fprintf(f, "%s", cfg->polling ? "polling" : "blocking");
		break;
	case CT_RMA:
		fprintf(f, "%s", cfg->ucx_rma ? "ucx" : "am");
		break;
	case CT_BOOL:
		fprintf(f, "%s", *(const bool *)field ? "yes" : "no");
		break;
	case CT_GROUPS:
		for (size_t i = 0; i < cfg->n_allow_gids; i++)
			fprintf(f, "%s%u", i ? "," : "",
				(unsigned)cfg->allow_gids[i]);
		break;
	}
}

void
config_print(FILE *f, const struct config *cfg)
{
	fprintf(f, "[rmad]\n");
	for (size_t i = 0; i < N_OPTIONS; i++) {
		if (config_options[i].flag_only)
			continue;
		fprintf(f, "%s = ", config_options[i].name);
		config_print_value(f, cfg, &config_options[i]);
		fprintf(f, "\n");
	}
}

/* --check-config: what the options turn into on this host, and what the
 * daemon would warn about at start. */
static void
config_print_resolved(FILE *out, FILE *warn, const struct config *cfg)
{
	char buf[512], err[256];

	if (strcmp(cfg->net_devices, "auto") == 0) {
		if (netdev_resolve(cfg, buf, sizeof(buf), err, sizeof(err)) ==
		    0)
			fprintf(out, "# net_devices = auto: %s\n", buf);
		else
			fprintf(warn, "rmad: warning: %s\n", err);
	}
	if (cfg->peer_key_set)
		fprintf(out, "# peer key: read from %s\n", cfg->peer_key_file);
	if (config_check_rma_unchecked(cfg, buf, sizeof(buf)))
		fprintf(warn, "rmad: warning: %s (rma_protocol_unchecked)\n",
			buf);
}

static void
config_usage(FILE *f)
{
	struct config def;

	config_defaults(&def);
	fprintf(f, "usage: rmad [--config FILE] [--check-config] [options]\n\n"
		   "Every option is also a key of the config file's [rmad] "
		   "section\n(with _ for -); flags override the file.\n\n");
	for (size_t i = 0; i < N_OPTIONS; i++) {
		char flag[64];
		const char *p;
		size_t k = 0;
		for (p = config_options[i].name; *p && k < sizeof(flag) - 1;
		     p++)
			flag[k++] = *p == '_' ? '-' : *p;
		flag[k] = '\0';
		fprintf(f, "  --%-18s %s", flag, config_options[i].help);
		if (!config_options[i].flag_only) {
			fprintf(f, " [");
			config_print_value(f, &def, &config_options[i]);
			fprintf(f, "]");
		}
		/* docs_complete.sh holds README and rmad(8) to this */
		if (config_options[i].reload)
			fprintf(f, " (reloadable)");
		fprintf(f, "\n");
	}
	fprintf(f, "  --%-18s %s\n", "config FILE",
		"read options from FILE (INI)");
	fprintf(f, "  --%-18s %s\n", "check-config",
		"validate, print the effective configuration, exit");
	fprintf(f, "  --version, --help\n");
}

enum { OPT_CONFIG = 1000, OPT_CHECK, OPT_VERSION, OPT_HELP };

/* getopt's table: every option as a flag (with - for _), then the
 * actions. */
struct config_flags {
	struct option longopts[N_OPTIONS + 5];
	char names[N_OPTIONS][64];
};

static void
config_flags_init(struct config_flags *fl)
{
	size_t n = 0;

	for (size_t i = 0; i < N_OPTIONS; i++) {
		size_t k = 0;
		for (const char *p = config_options[i].name;
		     *p && k < sizeof(fl->names[i]) - 1; p++)
			fl->names[i][k++] = *p == '_' ? '-' : *p;
		fl->names[i][k] = '\0';
		fl->longopts[n++] = (struct option){
		    fl->names[i],
		    config_options[i].type == CT_BOOL ? optional_argument
						      : required_argument,
		    NULL, (int)i};
	}
	fl->longopts[n++] =
	    (struct option){"config", required_argument, NULL, OPT_CONFIG};
	fl->longopts[n++] =
	    (struct option){"check-config", no_argument, NULL, OPT_CHECK};
	fl->longopts[n++] =
	    (struct option){"version", no_argument, NULL, OPT_VERSION};
	fl->longopts[n++] =
	    (struct option){"help", no_argument, NULL, OPT_HELP};
	fl->longopts[n] = (struct option){NULL, 0, NULL, 0};
}

/* The file, then the environment, then the flags, then the checks: what
 * a start does, and a reload again on the same argv (so flags keep
 * winning over the file). 0, or -1 / CONFIG_USAGE with err. lenient:
 * every error skipped, no checks (config_parse_lenient). */
static int
config_build(struct config *cfg, const struct config_flags *fl, int argc,
	     char **argv, const char *config_path, bool lenient, char *err,
	     size_t err_len)
{
	const char *env = getenv("RMAD_SOCKET");
	char why[512];
	int opt;

	if (config_path != NULL &&
	    config_load_file(cfg, config_path, err, err_len) < 0 && !lenient)
		return -1;
	if (env != NULL && env[0] != '\0')
		config_set(cfg, "socket", env, NULL, 0);
	optind = 0; /* glibc: start over */
	/* ":": a flag without its value is told apart from an unknown one */
	while ((opt = getopt_long(argc, argv, ":", fl->longopts, NULL)) != -1) {
		if (opt >= 0 && (size_t)opt < N_OPTIONS) {
			/* --rma-protocol-unchecked alone means yes */
			const char *value = optarg != NULL ? optarg : "yes";
			if (config_set(cfg, config_options[opt].name, value,
				       why, sizeof(why)) < 0 &&
			    !lenient) {
				/* the option as typed: dashes, not the
				 * config key's underscores */
				for (char *q = why; *q != '\0' && *q != ':';
				     q++)
					if (*q == '_')
						*q = '-';
				return config_error(err, err_len, "--%s", why);
			}
		} else if ((opt == '?' || opt == ':') && !lenient) {
			/* said here, not by getopt: at error priority; one
			 * line, not the 42 of --help */
			config_error(err, err_len,
				     opt == ':'
					 ? "option '%s' needs a value; "
					   "see rmad --help"
					 : "unknown option '%s'; see rmad "
					   "--help",
				     argv[optind - 1]);
			return CONFIG_USAGE;
		}
	}
	if (lenient)
		return 0;
	if (optind < argc) {
		config_error(err, err_len, "unexpected argument '%s'",
			     argv[optind]);
		return CONFIG_USAGE;
	}
	return config_check(cfg, err, err_len);
}

/* The first pass over argv: --config and the actions. */
static int
config_scan(const struct config_flags *fl, int argc, char **argv,
	    const char **config_path_p, bool *check_p)
{
	int opt;

	opterr = 0;
	optind = 0; /* glibc: start over */
	while ((opt = getopt_long(argc, argv, "", fl->longopts, NULL)) != -1) {
		if (opt == OPT_CONFIG)
			*config_path_p = optarg;
		else if (opt == OPT_CHECK)
			*check_p = true;
		else if (opt == OPT_VERSION || opt == OPT_HELP)
			return opt;
	}
	return 0;
}

int
config_parse_args(struct config *cfg, int argc, char **argv, char *why,
		  size_t why_len)
{
	struct config_flags fl;
	const char *config_path = NULL;
	char err[512];
	bool check = false;
	int rc;

	config_flags_init(&fl);
	rc = config_scan(&fl, argc, argv, &config_path, &check);
	if (rc == OPT_VERSION) {
		printf("rmad %s\n", RMA_VERSION);
		return 1;
	} else if (rc == OPT_HELP) {
		config_usage(stdout);
		return 1;
	}
	opterr = 0; /* config_build says what getopt would */
	rc = config_build(cfg, &fl, argc, argv, config_path, false, err,
			  sizeof(err));
	if (rc < 0) {
		/* at error priority in the journal: a unit that fails to
		 * start says why under journalctl -p err */
		log_startup(LOG_LEVEL_ERROR, "%s", err);
		if (why != NULL)
			snprintf(why, why_len, "%s", err);
		return rc;
	}
	if (check) {
		config_print(stdout, cfg);
		config_print_resolved(stdout, stderr, cfg);
		return 1;
	}
	return 0;
}

int
config_reread(int argc, char **argv, struct config *next, char *err,
	      size_t err_len)
{
	struct config_flags fl;
	const char *config_path = NULL;
	bool check = false;

	config_flags_init(&fl);
	config_scan(&fl, argc, argv, &config_path, &check);
	if (config_path == NULL)
		return 1;
	config_defaults(next);
	/* argv was accepted at start: getopt has nothing to say */
	return config_build(next, &fl, argc, argv, config_path, false, err,
			    err_len) < 0
		   ? -1
		   : 0;
}

void
config_parse_lenient(struct config *cfg, int argc, char **argv)
{
	struct config_flags fl;
	const char *config_path = NULL;
	bool check = false;
	char err[512];
	int saved_opterr = opterr;

	config_flags_init(&fl);
	config_scan(&fl, argc, argv, &config_path, &check);
	config_defaults(cfg);
	opterr = 0; /* config_parse_args said what was wrong */
	config_build(cfg, &fl, argc, argv, config_path, true, err, sizeof(err));
	opterr = saved_opterr;
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
	for (size_t i = 0; i < N_OPTIONS; i++) {
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
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct config_option *o = &config_options[i];

		if (!o->reload)
			continue;
		memcpy((char *)cur + o->offset, (const char *)next + o->offset,
		       o->size);
		switch (o->type) {
		case CT_CIDRS:
			cur->n_peer_allow = next->n_peer_allow;
			break;
		case CT_USERS:
			cur->n_allow_uids = next->n_allow_uids;
			break;
		case CT_GROUPS:
			cur->n_allow_gids = next->n_allow_gids;
			break;
		default:
			break;
		}
	}
	/* what config_check read from peer_key_file goes with it */
	cur->peer_key_set = next->peer_key_set;
	memcpy(cur->peer_key, next->peer_key, sizeof(cur->peer_key));
}
