#include "daemon.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "socket_path.h"

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
	cfg->ready_fd = -1;
}

static void
config_usage(FILE *f)
{
	fprintf(f,
		"usage: rmad [options]\n"
		"  --socket PATH          client socket (env RMAD_SOCKET; default\n"
		"                         $XDG_RUNTIME_DIR/rmad.sock or /tmp/rmad-UID.sock)\n"
		"  --listen HOST:PORT     UCX listener for other daemons (127.0.0.1:13337)\n"
		"  --log-level LEVEL      error, warn, info (default) or debug\n"
		"  --op-timeout SECONDS   fail an operation after this long (30)\n"
		"  --connect-timeout SECONDS  peer connect + handshake deadline (5)\n"
		"  --shutdown-timeout SECONDS drain time on SIGTERM (5)\n"
		"  --max-frame BYTES      largest client frame (1048576)\n"
		"  --transports LIST      UCX transports between daemons (tcp)\n"
		"  --net-devices LIST     UCX network devices (default: all)\n"
		"  --ready-fd FD          write \"ready\\n\" to FD once serving\n"
		"  --version, --help\n");
}

/* "host:port" with an optional [v6] host. */
int
config_parse_hostport(const char *s, char *host, size_t host_len,
		      uint16_t *port_p)
{
	const char *colon;
	const char *h = s;
	size_t hl;
	char *end;
	long port;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':')
			return -1;
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= host_len)
		return -1;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || *end != '\0' || end == colon + 1 || port <= 0 ||
	    port > 65535)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port_p = (uint16_t)port;
	return 0;
}

static int
config_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || *end != '\0' || end == s || !(v > 0) || v > 86400)
		return -1;
	*out = v;
	return 0;
}

int
config_parse_args(struct config *cfg, int argc, char **argv)
{
	enum {
		OPT_SOCKET = 256, OPT_LISTEN, OPT_LOG_LEVEL, OPT_OP_TIMEOUT,
		OPT_CONNECT_TIMEOUT, OPT_SHUTDOWN_TIMEOUT, OPT_MAX_FRAME,
		OPT_TRANSPORTS, OPT_NET_DEVICES, OPT_READY_FD, OPT_VERSION,
		OPT_HELP,
	};
	static const struct option options[] = {
		{"socket", required_argument, NULL, OPT_SOCKET},
		{"listen", required_argument, NULL, OPT_LISTEN},
		{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
		{"op-timeout", required_argument, NULL, OPT_OP_TIMEOUT},
		{"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
		{"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT},
		{"max-frame", required_argument, NULL, OPT_MAX_FRAME},
		{"transports", required_argument, NULL, OPT_TRANSPORTS},
		{"net-devices", required_argument, NULL, OPT_NET_DEVICES},
		{"ready-fd", required_argument, NULL, OPT_READY_FD},
		{"version", no_argument, NULL, OPT_VERSION},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	const char *env = getenv("RMAD_SOCKET");
	int opt;

	if (env != NULL && env[0] != '\0')
		snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", env);
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		char *end;
		unsigned long v;
		switch (opt) {
		case OPT_SOCKET:
			if (strlen(optarg) >= sizeof(cfg->socket_path)) {
				fprintf(stderr, "rmad: --socket: path too long\n");
				return -1;
			}
			snprintf(cfg->socket_path, sizeof(cfg->socket_path),
				 "%s", optarg);
			break;
		case OPT_LISTEN:
			if (config_parse_hostport(optarg, cfg->listen_host,
						  sizeof(cfg->listen_host),
						  &cfg->listen_port) < 0) {
				fprintf(stderr,
					"rmad: --listen: expected HOST:PORT, got '%s'\n",
					optarg);
				return -1;
			}
			break;
		case OPT_LOG_LEVEL:
			if (log_level_parse(optarg, &cfg->log_level) < 0) {
				fprintf(stderr,
					"rmad: --log-level: expected error, warn, info or debug\n");
				return -1;
			}
			break;
		case OPT_OP_TIMEOUT:
		case OPT_CONNECT_TIMEOUT:
		case OPT_SHUTDOWN_TIMEOUT:
			if (config_parse_seconds(optarg,
						 opt == OPT_OP_TIMEOUT ? &cfg->op_timeout
						 : opt == OPT_CONNECT_TIMEOUT
							 ? &cfg->connect_timeout
							 : &cfg->shutdown_timeout) < 0) {
				fprintf(stderr,
					"rmad: %s: expected seconds in (0, 86400], got '%s'\n",
					argv[optind - 1], optarg);
				return -1;
			}
			break;
		case OPT_MAX_FRAME:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end != '\0' || v < 4096 || v > (256u << 20)) {
				fprintf(stderr,
					"rmad: --max-frame: expected bytes in [4096, 268435456]\n");
				return -1;
			}
			cfg->max_frame = (uint32_t)v;
			break;
		case OPT_TRANSPORTS:
			snprintf(cfg->transports, sizeof(cfg->transports), "%s",
				 optarg);
			break;
		case OPT_NET_DEVICES:
			snprintf(cfg->net_devices, sizeof(cfg->net_devices), "%s",
				 optarg);
			break;
		case OPT_READY_FD:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end != '\0' || v > 65535) {
				fprintf(stderr, "rmad: --ready-fd: expected a file descriptor\n");
				return -1;
			}
			cfg->ready_fd = (int)v;
			break;
		case OPT_VERSION:
			printf("rmad %s\n", RMA_VERSION);
			return 1;
		case OPT_HELP:
			config_usage(stdout);
			return 1;
		default:
			config_usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rmad: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}
