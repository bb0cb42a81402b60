/* SPDX-License-Identifier: BSD-2-Clause */
/* The configuration: its options (config.c), where their values come
 * from (config_load.c), the values' syntax (config_value.c), what is
 * judged once all are set (config_check.c), net_devices = auto
 * (netdev.c) and SIGHUP's report (config_reload.c). */
#ifndef RMAD_CONFIG_H
#define RMAD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "log.h"

/* ---- config.c, config_load.c ------------------------------------------- */

#define CONFIG_LIST_MAX 32
#define CONFIG_WORKERS_MAX 64
/* fd_store_max: a region per fd; more would only grow the state record */
#define CONFIG_FD_STORE_MAX 1048576
#define CONFIG_PEER_KEY_SIZE 32 /* BLAKE2b output, bytes */
/* config_parse_args: a flag that does not exist, or a stray argument. */
#define CONFIG_USAGE (-2)

struct cidr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	int prefix;
};

struct config {
	char socket_path[108];
	char socket_group[64];
	/* socket_path's directory may be one other users can write (they can
	 * then pose as rmad there, see socket_path_check_private) */
	bool socket_dir_shared;
	char listen_host[64];
	uint16_t listen_port;
	enum log_level log_level;
	double op_timeout;	/* seconds until an operation fails */
	double connect_timeout; /* seconds for connect + handshake */
	double shutdown_timeout;
	uint32_t max_frame;
	uint64_t max_queued_bytes; /* outbound bytes queued for one client */
	char transports[64];	   /* UCX_TLS */
	/* UCX_NET_DEVICES: "auto" (interfaces holding the listen address),
	 * "all" or "" (every device), or a list; see netdev_auto */
	char net_devices[128];
	struct cidr peer_allow[CONFIG_LIST_MAX];
	size_t n_peer_allow;
	uid_t allow_uids[CONFIG_LIST_MAX];
	size_t n_allow_uids;
	gid_t allow_gids[CONFIG_LIST_MAX];
	size_t n_allow_gids;
	uint32_t max_regions;	   /* per client */
	uint64_t max_region_bytes; /* per client */
	uint32_t max_in_flight;	   /* per client */
	/* uidlimit.c: what one user's clients hold together */
	uint32_t max_clients_per_uid;
	uint32_t max_regions_per_uid;
	uint64_t max_region_bytes_per_uid;
	bool polling;		   /* progress mode: busy-poll the worker */
	uint32_t progress_spin_us; /* blocking: poll this long before sleeping
				      while operations are in flight */
	bool ring;		   /* offer clients a shared-memory ring */
	uint32_t ring_spin_us;	   /* poll a ring this long after traffic */
	bool ucx_rma;		   /* rma_protocol = ucx: ucp_put/get_nbx */
	/* rma_protocol_unchecked: ucx_rma although the transports do not
	 * check remote keys (any peer can read and write the daemon) */
	bool ucx_rma_unchecked;
	char peer_key_file[256]; /* "" = no cluster key */
	bool peer_key_set;	 /* peer_key holds the key from peer_key_file */
	uint8_t peer_key[CONFIG_PEER_KEY_SIZE];
	uint32_t max_inbound_peers; /* endpoints other daemons opened, total */
	uint32_t max_inbound_per_address; /* ... per source IP address */
	int ready_fd;		 /* written and closed once serving, -1 */
	uint32_t workers;	 /* worker threads, the main one included */
	char metrics_listen[96]; /* HOST:PORT for /metrics, "" = off */
	bool take_over;		 /* handover.c: take over a running rmad */
	double reattach_timeout; /* handover.c: seconds a handed-over region
				    waits for its owner */
	char fd_store[8];	 /* fdstore.c: "auto", "yes" or "no" */
	uint32_t fd_store_max;	 /* fdstore.c: FileDescriptorStoreMax= */
};

void config_defaults(struct config *cfg);
/* Returns 0, 1 when the caller should exit 0 (--help, --check-config),
 * -1 on a bad value, config file or combination (exit EX_CONFIG, 78),
 * CONFIG_USAGE on an unknown flag (exit EX_USAGE, 64); errors are
 * already reported on stderr (at error priority for the journal), and
 * for -1 also written to why (if not NULL). */
int config_parse_args(struct config *cfg, int argc, char **argv, char *why,
		      size_t why_len);
/* After config_parse_args refused: what argv and the file say as far as
 * they parse, unchecked (errors skipped). Only for where to find what a
 * start keeps (socket, take_over, fd_store, log level), never to run on. */
void config_parse_lenient(struct config *cfg, int argc, char **argv);
int config_set(struct config *cfg, const char *name, const char *value,
	       char *err, size_t err_len);
/* 0, or -1 with why in err. */
int config_load_file(struct config *cfg, const char *path, char *err,
		     size_t err_len);
/* SIGHUP: defaults, the --config file named in argv, the environment and
 * the flags again, then the checks, into next. 0, -1 with err, or 1 when
 * argv names no config file (nothing to reload). */
int config_reread(int argc, char **argv, struct config *next, char *err,
		  size_t err_len);
/* Calls fn for each file option whose value differs between a and b, with
 * both values as text and whether a running daemon can take the new one
 * (the peer key itself is not an option: compare peer_key apart). */
typedef void (*config_diff_fn)(const char *name, bool reloadable,
			       const char *old, const char *new, void *arg);
void config_diff(const struct config *a, const struct config *b,
		 config_diff_fn fn, void *arg);
/* Copies what a running daemon can take from next into cur (the peer key
 * read from peer_key_file with it); the rest of cur stays. */
void config_take_reloadable(struct config *cur, const struct config *next);
void config_print(FILE *f, const struct config *cfg);
int config_parse_hostport(const char *s, char *host, size_t host_len,
			  uint16_t *port_p);
int config_parse_cidr(const char *s, struct cidr *c);
/* The first item of list with host bits set (10.0.0.1/8), and the
 * network it names (10.0.0.0/8): 1; else 0. */
int config_cidr_network(const char *list, char *item, size_t item_len,
			char *net, size_t net_len);
bool config_cidr_match(const struct cidr *c, int family, const uint8_t *addr);
/* Formats the message into err (if any) and returns -1; for config*.c and
 * netdev.c. */
int config_error(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* config_value.c: fn on each comma-separated item of list; the adders
 * append to the struct config at arg. */
int config_each(const char *list, int (*fn)(const char *item, void *arg),
		void *arg);
int config_add_cidr(const char *item, void *arg);
int config_add_user(const char *item, void *arg);
int config_add_group(const char *item, void *arg);
int config_parse_id(const char *item, bool group, unsigned *id_p);
int config_parse_bool(const char *value, bool *b_p);

/* ---- config_reload.c: SIGHUP ------------------------------------------- */

/* Logs what a reload from old to next changes: one line per key (info),
 * a warning per key that needs a restart, the cluster key as set,
 * replaced or removed (never its value), then a summary. */
/* Logs what changed; returns how many changes need a restart. */
unsigned config_reload_report(const struct config *old,
			      const struct config *next);

/* ---- config_check.c: what is judged once every option is set ----------- */

/* Reads peer_key_file into peer_key, refuses rma_protocol = ucx over
 * transports that do not check remote keys unless rma_protocol_unchecked.
 * 0 or -1 with err. */
int config_check(struct config *cfg, char *err, size_t err_len);
/* True if every transport in tls (UCX_TLS syntax) is an RDMA one whose
 * NIC checks remote keys. */
bool config_check_transports(const char *tls);
/* rma_protocol = ucx over transports that do not check keys: true, with
 * what a peer can then do in msg. */
bool config_check_rma_unchecked(const struct config *cfg, char *msg,
				size_t len);

/* ---- netdev.c: net_devices = auto ------------------------------------- */

/* UCX_NET_DEVICES for net_devices: "all", the list as given, or for
 * "auto" the interfaces holding the listen address (all for a wildcard
 * address) and the RDMA ports behind them. -1 with err if none does. */
int netdev_resolve(const struct config *cfg, char *out, size_t len, char *err,
		   size_t err_len);
/* netdev_resolve, the error logged. */
int netdev_auto(const struct config *cfg, char *out, size_t len);
/* What the start would refuse (config_check): a device of an explicit
 * net_devices (or UCX_NET_DEVICES) list this host lacks; a host (what:
 * the option) that is not an address of this host. 0, or -1 with err. */
int netdev_check_devices(const struct config *cfg, char *err, size_t err_len);
int netdev_check_address(const char *what, const char *host, char *err,
			 size_t err_len);

#endif
