/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl: the operator's CLI for rmad. Every failure prints exactly one
 * line, "rmactl: CMD: WHAT[: DETAIL]", and exits with a sysexits code that
 * scripts can test (see rmactl_usage_text). */
#include "rma.h"
#include "rma.pb-c.h"
#include "rmactl.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

const char *rmactl_socket;

static const char rmactl_usage_text[] =
    "usage: rmactl [--socket PATH] COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  status [--json]\n"
    "      daemon, peers, clients, users, regions and counters\n"
    "  expose --size BYTES [--fill FILE] [--descriptor-out FILE]\n"
    "         [--read-only-descriptor-out FILE] [--dump-on-exit FILE]\n"
    "         [--notifications]\n"
    "      allocate a region, print its descriptor, serve it until\n"
    "      SIGINT or SIGTERM; --notifications prints OFFSET LENGTH VALUE\n"
    "      DAEMON_ID for each notifying put as it arrives\n"
    "  put --peer HOST:PORT --descriptor FILE [--offset N]\n"
    "      [--notify VALUE] [--timeout SECONDS] DATAFILE\n"
    "      write DATAFILE into the remote region at offset N (and notify\n"
    "      its owner with VALUE)\n"
    "  get --peer HOST:PORT --descriptor FILE [--offset N] --length N\n"
    "      [--out FILE] [--timeout SECONDS]\n"
    "      read N bytes of the remote region into FILE or stdout\n"
    "  atomic --peer HOST:PORT --descriptor FILE --offset N --op OP\n"
    "         --value V [--compare C] [--width 64|32] [--timeout SECONDS]\n"
    "      apply OP (add, fetch-add, swap, cswap, and, or, xor, fetch-and,\n"
    "      fetch-or, fetch-xor) to the remote word at offset N; print its\n"
    "      old value in decimal\n"
    "  bench --peer HOST:PORT --descriptor FILE --op "
    "put|put-notify|get|ATOMIC\n"
    "        --size BYTES [--count N] [--window N] [--warmup N] "
    "[--remote-completion]\n"
    "        [--timeout SECONDS] [--json]\n"
    "      operations on the remote region, window in flight: ops/s,\n"
    "      bytes/s, latency p50/p99\n"
    "  peers | clients | users | regions | ops [--json]\n"
    "      one part of status: peer daemons, local clients, what each\n"
    "      local user holds against the per-uid limits, registered\n"
    "      regions, operations in flight (oldest first, with their age)\n"
    "  ping [--count N] [--json]\n"
    "      time connect+hello and N status round trips to the daemon\n"
    "  top [--interval SECONDS] [--count N] [--json]\n"
    "      live ops/s, bytes/s, errors, in flight and latency, per peer\n"
    "      and per client, every second (q or ^C quits)\n"
    "  wait [--timeout SECONDS] [--peer HOST:PORT] [--file FILE]\n"
    "      until the daemon answers (and reaches the peer, or FILE is\n"
    "      there); exit 75 after the timeout (default 30)\n"
    "\n"
    "options:\n"
    "  --socket PATH  daemon socket (default: $RMAD_SOCKET, else your own\n"
    "                 daemon's $XDG_RUNTIME_DIR/rmad.sock or\n"
    "                 ${TMPDIR:-/tmp}/rmad-UID/rmad.sock"
    " if it exists, else the\n"
    "                 system's /run/rmad/rmad.sock)\n"
    "  --help         this text; `rmactl COMMAND --help` for one command\n"
    "Sizes and offsets take K, M, G, T suffixes (powers of 1024).\n"
    "--json documents start with \"schema_version\": 1; 64-bit integers\n"
    "are strings (proto3 JSON mapping), enum values the tables' words.\n"
    "\n"
    "exit status:\n"
    "  0   success\n"
    "  64  EX_USAGE        bad command line\n"
    "  65  EX_DATAERR      bad or stale descriptor, out of bounds, bad\n"
    "                      input file (empty, bigger than the region)\n"
    "  66  EX_NOINPUT      an input file cannot be opened (missing,\n"
    "                      not readable, a directory)\n"
    "  68  EX_NOHOST       peer unreachable, unknown, rejected, reset,\n"
    "                      or not an rmad\n"
    "  69  EX_UNAVAILABLE  no daemon at the socket, daemon gone or\n"
    "                      shutting down\n"
    "  70  EX_SOFTWARE     any other failure\n"
    "  73  EX_CANTCREAT    an output file cannot be written\n"
    "  74  EX_IOERR        reading an open input file or writing stdout\n"
    "                      failed\n"
    "  75  EX_TEMPFAIL     timed out, canceled, or a limit was reached\n"
    "  77  EX_NOPERM       permission denied\n";

const char *const rmactl_cmd_usage[] = {
    "usage: rmactl [--socket PATH] status [--json]\n",
    "usage: rmactl [--socket PATH] expose --size BYTES [--fill FILE]\n"
    "       [--descriptor-out FILE] [--read-only-descriptor-out FILE]\n"
    "       [--dump-on-exit FILE] [--notifications]\n"
    "  --read-only-descriptor-out FILE  also write a descriptor that\n"
    "                       allows gets only (puts and atomics through it\n"
    "                       are refused with PERMISSION)\n"
    "  --notifications      print a line per notifying put as it arrives:\n"
    "                       OFFSET LENGTH VALUE DAEMON_ID (decimal, the\n"
    "                       id in hex); needs --descriptor-out\n",
    "usage: rmactl [--socket PATH] put --peer HOST:PORT --descriptor FILE\n"
    "       [--offset N] [--notify VALUE] [--timeout SECONDS] DATAFILE\n"
    "  --notify VALUE       tell the region's owner (a 64-bit VALUE) once\n"
    "                       the bytes are in; a full notification queue\n"
    "                       fails the put (exit 75), bytes not written\n",
    "usage: rmactl [--socket PATH] get --peer HOST:PORT --descriptor FILE\n"
    "       [--offset N] --length N [--out FILE] [--timeout SECONDS]\n",
    "usage: rmactl [--socket PATH] bench --peer HOST:PORT --descriptor FILE\n"
    "       --op put|put-notify|get|ATOMIC --size BYTES [--count N]\n"
    "       [--window N] [--warmup N] [--remote-completion]\n"
    "       [--from-buffer] [--timeout SECONDS] [--json]\n"
    "  --op put-notify      puts that notify the region's owner (rmactl\n"
    "                       expose takes them), the op number as value;\n"
    "                       one refused as the owner's queue is full is\n"
    "                       put again after 1 ms\n"
    "  --op ATOMIC          an atomic of rmactl atomic (fetch-add, add,\n"
    "                       swap, and, ...; not cswap) adding or applying\n"
    "                       1, on --size 8 (default) or 4 byte words\n"
    "  --count N            measured operations (default: 256 MiB worth,\n"
    "                       16 to 100000)\n"
    "  --window N           operations in flight (default 16)\n"
    "  --warmup N           unmeasured operations first (default: 4 MiB\n"
    "                       worth, at most the window; from a buffer, at\n"
    "                       least the staging area's worth)\n"
    "  --remote-completion  a put completes once its data is at the target\n"
    "  --from-buffer        puts or gets from a malloc'd buffer\n"
    "                       (rma_put_buf, rma_get_buf: through librma's\n"
    "                       staging area) instead of a region\n"
    "  --timeout SECONDS    give up when nothing completes for this long\n"
    "                       (default 60)\n"
    "  --json               one JSON object: schema_version, op, size,\n"
    "                       count, window, seconds, ops_per_s, bytes_per_s,\n"
    "                       p50_us, p99_us, ...\n"
    "Latency is per operation, submit to completion; a put's bytes/s\n"
    "counts a final flush (the data is at the target).\n",
    "usage: rmactl [--socket PATH] atomic --peer HOST:PORT --descriptor "
    "FILE\n"
    "       --offset N --op OP --value V [--compare C] [--width 64|32]\n"
    "       [--timeout SECONDS]\n"
    "  OP is add, fetch-add, swap, cswap, and, or, xor, fetch-and,\n"
    "  fetch-or or fetch-xor; cswap needs --compare. The word (8 bytes,\n"
    "  or 4 with --width 32) must be aligned: N a multiple of its size.\n"
    "  V and C are decimal or 0x hex. Prints the word's old value in\n"
    "  decimal, for every OP (cswap swapped when it equals C).\n",
};

static const char *const rmactl_cmd_names[] = {"status", "expose", "put",
					       "get",	 "bench",  "atomic"};

/* ---- errors ---- */

int
rmactl_exit_code(rma_status_t st)
{
	switch (st) {
	case RMA_OK:
		return 0;
	case RMA_ERR_DAEMON_GONE:
	case RMA_ERR_SHUTDOWN:
		return EX_UNAVAILABLE;
	case RMA_ERR_PERMISSION:
		return EX_NOPERM;
	case RMA_ERR_BAD_DESCRIPTOR:
	case RMA_ERR_STALE_DESCRIPTOR:
	case RMA_ERR_OUT_OF_BOUNDS:
		return EX_DATAERR;
	case RMA_ERR_UNREACHABLE:
	case RMA_ERR_NO_PEER:
	case RMA_ERR_REJECTED:
	case RMA_ERR_NOT_RMAD:
	case RMA_ERR_CONNECTION_RESET:
		return EX_NOHOST;
	case RMA_ERR_TIMEOUT:
	case RMA_ERR_CANCELED:
	case RMA_ERR_LIMIT:
		return EX_TEMPFAIL;
	default:
		return EX_SOFTWARE;
	}
}

int rmactl_errx(int code, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int
rmactl_errx(int code, const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rmactl: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* One line for a library failure, with the daemon's detail if any. */
int
rmactl_fail(const char *cmd, rma_status_t st, const rma_client_t *client)
{
	const char *what = rma_strerror(st);
	const char *detail = rma_last_error(client);

	if (detail == NULL || detail[0] == '\0' || strcmp(detail, what) == 0)
		return rmactl_errx(rmactl_exit_code(st), cmd, "%s", what);
	/* no connection yet: librma's detail says what the socket is; "daemon
	 * gone" would be wrong for one that never was */
	if (client == NULL)
		return rmactl_errx(rmactl_exit_code(st), cmd, "%s", detail);
	return rmactl_errx(rmactl_exit_code(st), cmd, "%s: %s", what, detail);
}

int
rmactl_status_get(const char *cmd, rma_client_t *client,
		  Rma__V1__StatusReply **status_p)
{
	Rma__V1__StatusReply *s;
	rma_status_t st;
	size_t len;
	void *buf;

	st = rma_daemon_status(client, &buf, &len);
	if (st != RMA_OK)
		return rmactl_fail(cmd, st, client);
	s = rma__v1__status_reply__unpack(NULL, len, buf);
	free(buf);
	if (s == NULL)
		return rmactl_errx(
		    EX_SOFTWARE, cmd,
		    "protocol error: the status does not unpack");
	*status_p = s;
	return 0;
}

int rmactl_usage_error(int cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

int
rmactl_usage_error(int cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("rmactl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see rmactl%s%s --help\n", cmd >= 0 ? " " : "",
		cmd >= 0 ? rmactl_cmd_names[cmd] : "");
	return EX_USAGE;
}

/* ---- text for the tables ---- */

void
rmactl_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", v);
	else
		snprintf(buf, len, "%.1f %s", d, units[u]);
}

const char *
rmactl_or_dash(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : "-";
}

/* The words come from the .proto, as in JSON, so that a table and --json
 * never name one state two ways. */
const char *
rmactl_peer_state(int state)
{
	const char *w =
	    rmactl_json_enum_word(&rma__v1__peer_state__descriptor, state);

	return w != NULL ? w : "?";
}

const char *
rmactl_op_kind(int kind)
{
	const char *w =
	    rmactl_json_enum_word(&rma__v1__op_kind__descriptor, kind);

	return w != NULL ? w : "?";
}

/* ---- arguments ---- */

int
rmactl_parse_timeout(const char *s, int *ms_p)
{
	double secs;
	char *end;

	errno = 0;
	secs = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(secs > 0) ||
	    secs * 1000 > INT_MAX)
		return -1;
	*ms_p = (int)(secs * 1000);
	if (*ms_p == 0)
		*ms_p = 1;
	return 0;
}

/* host:port, host possibly a bracketed IPv6 literal. */
int
rmactl_check_address(const char *addr)
{
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;

	if (colon == NULL || colon == addr)
		return -1;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || port < 1 ||
	    port > 65535)
		return -1;
	return 0;
}

/* ---- main ---- */

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} rmactl_commands[] = {
    {"status", rmactl_status_run},   {"expose", rmactl_expose_run},
    {"put", rmactl_xfer_put},	     {"get", rmactl_xfer_get},
    {"peers", rmactl_ops_peers},     {"clients", rmactl_ops_clients},
    {"regions", rmactl_ops_regions}, {"ops", rmactl_ops_ops},
    {"users", rmactl_ops_users},     {"ping", rmactl_ops_ping},
    {"bench", rmactl_bench_run},     {"top", rmactl_top_run},
    {"atomic", rmactl_atomic_run},   {"wait", rmactl_wait_run},
};

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *cmd;
	int c;

	/* a reader that went away is an EPIPE error, not a silent death */
	signal(SIGPIPE, SIG_IGN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			rmactl_socket = optarg;
			break;
		case 'h':
			fputs(rmactl_usage_text, stdout);
			return 0;
		case 'V':
			printf("rmactl %s\n", RMA_VERSION);
			return 0;
		case ':':
			return rmactl_usage_error(-1, "option %s needs a value",
						  argv[optind - 1]);
		default:
			return rmactl_usage_error(-1, "unknown option %s",
						  argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return rmactl_usage_error(-1, "no command");
	cmd = argv[optind];
	for (size_t i = 0;
	     i < sizeof(rmactl_commands) / sizeof(rmactl_commands[0]); i++) {
		if (strcmp(cmd, rmactl_commands[i].name) == 0) {
			argc -= optind;
			argv += optind;
			/* 0 makes getopt start over on the new vector */
			optind = 0;
			return rmactl_commands[i].run(argc, argv);
		}
	}
	return rmactl_usage_error(-1, "unknown command \"%s\"", cmd);
}
