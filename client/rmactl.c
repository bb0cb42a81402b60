/* rmactl: the operator's CLI for rmad. Every failure prints exactly one
 * line, "rmactl: CMD: WHAT[: DETAIL]", and exits with a sysexits code that
 * scripts can test (see rmactl_usage). */
#include "rma.h"
#include "rma_internal.h"
#include "descriptor.h"
#include "rmactl.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#define RMACTL_TIMEOUT_DEFAULT_S 60
/* A descriptor line is short; anything longer is not one. */
#define RMACTL_DESCRIPTOR_MAX 4096

static const char *rmactl_socket;

static const char rmactl_usage_text[] =
    "usage: rmactl [--socket PATH] COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  status [--json]\n"
    "      daemon, peers, clients, regions and counters\n"
    "  expose --size BYTES [--fill FILE] [--descriptor-out FILE]\n"
    "         [--dump-on-exit FILE]\n"
    "      allocate a region, print its descriptor, serve it until\n"
    "      SIGINT or SIGTERM\n"
    "  put --peer HOST:PORT --descriptor FILE [--offset N]\n"
    "      [--timeout SECONDS] DATAFILE\n"
    "      write DATAFILE into the remote region at offset N\n"
    "  get --peer HOST:PORT --descriptor FILE [--offset N] --length N\n"
    "      [--out FILE] [--timeout SECONDS]\n"
    "      read N bytes of the remote region into FILE or stdout\n"
    "\n"
    "options:\n"
    "  --socket PATH  daemon socket (default: $RMAD_SOCKET, else\n"
    "                 $XDG_RUNTIME_DIR/rmad.sock, else /tmp/rmad-UID.sock)\n"
    "  --help         this text; `rmactl COMMAND --help` for one command\n"
    "Sizes and offsets take K, M, G, T suffixes (powers of 1024).\n"
    "\n"
    "exit status:\n"
    "  0   success\n"
    "  64  EX_USAGE        bad command line\n"
    "  65  EX_DATAERR      bad or stale descriptor, out of bounds, bad\n"
    "                      input file (empty, bigger than the region)\n"
    "  68  EX_NOHOST       peer unreachable, unknown, rejected, reset,\n"
    "                      or not an rmad\n"
    "  69  EX_UNAVAILABLE  no daemon at the socket, daemon gone or\n"
    "                      shutting down\n"
    "  70  EX_SOFTWARE     any other failure\n"
    "  74  EX_IOERR        a file could not be read or written\n"
    "  75  EX_TEMPFAIL     timed out, canceled, or a limit was reached\n"
    "  77  EX_NOPERM       permission denied\n";

static const char *const rmactl_cmd_usage[] = {
    "usage: rmactl [--socket PATH] status [--json]\n",
    "usage: rmactl [--socket PATH] expose --size BYTES [--fill FILE]\n"
    "       [--descriptor-out FILE] [--dump-on-exit FILE]\n",
    "usage: rmactl [--socket PATH] put --peer HOST:PORT --descriptor FILE\n"
    "       [--offset N] [--timeout SECONDS] DATAFILE\n",
    "usage: rmactl [--socket PATH] get --peer HOST:PORT --descriptor FILE\n"
    "       [--offset N] --length N [--out FILE] [--timeout SECONDS]\n",
};

enum { RMACTL_STATUS, RMACTL_EXPOSE, RMACTL_PUT, RMACTL_GET };
static const char *const rmactl_cmd_names[] = {"status", "expose", "put",
					       "get"};

/* ---- errors ---- */

static int
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

static int rmactl_errx(int code, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
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
static int
rmactl_fail(const char *cmd, rma_status_t st, const rma_client_t *client)
{
	const char *what = rma_strerror(st);
	const char *detail = rma_last_error(client);

	if (detail == NULL || detail[0] == '\0' || strcmp(detail, what) == 0)
		return rmactl_errx(rmactl_exit_code(st), cmd, "%s", what);
	return rmactl_errx(rmactl_exit_code(st), cmd, "%s: %s", what, detail);
}

static int rmactl_usage_error(int cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
rmactl_usage_error(int cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("rmactl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see rmactl%s%s --help)\n", cmd >= 0 ? " " : "",
		cmd >= 0 ? rmactl_cmd_names[cmd] : "");
	return EX_USAGE;
}

/* ---- arguments ---- */

/* Bytes with an optional K/M/G/T suffix (powers of 1024, "KiB" and "KB"
 * too); only digits before it. */
static int
rmactl_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case '\0':
		break;
	default:
		return -1;
	}
	if (shift != 0) {
		end++;
		if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
			end += strlen(end);
	}
	if (*end != '\0' || (shift != 0 && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int
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
static int
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

/* ---- files ---- */

/* Read an fd to its end into a malloc'd buffer. */
static int
rmactl_read_fd(int fd, uint8_t **buf_p, size_t *len_p)
{
	size_t cap = 64 * 1024, len = 0;
	struct stat st;
	uint8_t *buf, *nbuf;
	ssize_t n;

	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (buf == NULL)
		return -1;
	for (;;) {
		if (len == cap) {
			nbuf = realloc(buf, cap * 2);
			if (nbuf == NULL) {
				errno = ENOMEM;
				goto err_free;
			}
			buf = nbuf;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto err_free;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*buf_p = buf;
	*len_p = len;
	return 0;

err_free:
	n = errno;
	free(buf);
	errno = (int)n;
	return -1;
}

/* Read a whole file (or stream) into a malloc'd buffer. */
static int
rmactl_read_file(const char *path, uint8_t **buf_p, size_t *len_p)
{
	int fd, rc, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = rmactl_read_fd(fd, buf_p, len_p);
	err = errno;
	close(fd);
	errno = err;
	return rc;
}

/* Exactly len bytes; a file that shrank meanwhile is an error. */
static int
rmactl_read_exact(int fd, void *dst, size_t len)
{
	uint8_t *p = dst;
	ssize_t n;

	while (len > 0) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
rmactl_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Write a file under a temporary name in its directory and rename it into
 * place, so a reader waiting for it never sees half of it. */
static int
rmactl_write_file_atomic(const char *path, const void *p, size_t n)
{
	char *tmp;
	int fd, err;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -1;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		goto err_free;
	/* mkostemp makes it 0600; a descriptor or a dump is no secret */
	fchmod(fd, 0644);
	if (rmactl_write_all(fd, p, n) < 0)
		goto err_unlink;
	if (close(fd) < 0) {
		fd = -1;
		goto err_unlink;
	}
	if (rename(tmp, path) < 0) {
		fd = -1;
		goto err_unlink;
	}
	free(tmp);
	return 0;

err_unlink:
	err = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	errno = err;
err_free:
	err = errno;
	free(tmp);
	errno = err;
	return -1;
}

/* The first line of the file, trimmed, checked as a descriptor. */
static int
rmactl_read_descriptor(const char *cmd, const char *path, char **desc_p)
{
	struct descriptor d;
	uint8_t *buf;
	size_t len, start, end;
	char *desc;

	if (rmactl_read_file(path, &buf, &len) < 0)
		return rmactl_errx(EX_IOERR, cmd, "cannot read %s: %s", path,
				   strerror(errno));
	for (end = 0; end < len && buf[end] != '\n'; end++)
		;
	for (start = 0;
	     start < end && (buf[start] == ' ' || buf[start] == '\t'); start++)
		;
	while (end > start && (buf[end - 1] == '\r' || buf[end - 1] == ' ' ||
			       buf[end - 1] == '\t'))
		end--;
	if (end == start || end - start > RMACTL_DESCRIPTOR_MAX ||
	    memchr(buf + start, '\0', end - start) != NULL ||
	    descriptor_parse((const char *)buf + start, end - start, &d) < 0) {
		free(buf);
		return rmactl_errx(EX_DATAERR, cmd,
				   "bad descriptor: %s does not start with "
				   "a valid descriptor line",
				   path);
	}
	desc = strndup((const char *)buf + start, end - start);
	free(buf);
	if (desc == NULL)
		return rmactl_errx(EX_SOFTWARE, cmd, "out of memory");
	*desc_p = desc;
	return 0;
}

/* ---- status ---- */

static void
rmactl_print_bytes(char *buf, size_t len, uint64_t v)
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

static const char *
rmactl_peer_state(int state)
{
	switch (state) {
	case RMA__V1__PEER_STATE__PEER_CONNECTING:
		return "connecting";
	case RMA__V1__PEER_STATE__PEER_UP:
		return "up";
	case RMA__V1__PEER_STATE__PEER_DOWN:
		return "down";
	default:
		return "?";
	}
}

static const char *
rmactl_or_dash(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : "-";
}

static void
rmactl_status_human(const Rma__V1__StatusReply *s)
{
	const Rma__V1__Counters *k = s->counters;
	uint64_t up = s->uptime_ms / 1000;
	char b1[32];

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

	printf("\npeers (%zu)\n", s->n_peers);
	if (s->n_peers > 0)
		printf("  %4s  %-22s %-10s %-3s %-32s %10s %10s %7s %8s  %s\n",
		       "ID", "ADDRESS", "STATE", "DIR", "DAEMON", "OPS",
		       "BYTES", "ERRORS", "INFLIGHT", "LAST ERROR");
	for (size_t i = 0; i < s->n_peers; i++) {
		const Rma__V1__PeerInfo *p = s->peers[i];

		rmactl_print_bytes(b1, sizeof(b1), p->bytes);
		printf("  %4u  %-22s %-10s %-3s %-32s %10" PRIu64
		       " %10s %7" PRIu64 " %8" PRIu64 "  %s\n",
		       p->peer_id, rmactl_or_dash(p->address),
		       rmactl_peer_state(p->state), p->inbound ? "in" : "out",
		       rmactl_or_dash(p->daemon_id), p->ops, b1, p->errors,
		       p->in_flight, rmactl_or_dash(p->last_error));
	}

	printf("\nclients (%zu)\n", s->n_clients);
	if (s->n_clients > 0)
		printf("  %4s %7s %6s %6s %-24s %7s %10s %8s %10s\n", "ID",
		       "PID", "UID", "GID", "NAME", "REGIONS", "BYTES",
		       "INFLIGHT", "OPS");
	for (size_t i = 0; i < s->n_clients; i++) {
		const Rma__V1__ClientInfo *c = s->clients[i];

		rmactl_print_bytes(b1, sizeof(b1), c->region_bytes);
		printf("  %4u %7d %6u %6u %-24s %7u %10s %8" PRIu64
		       " %10" PRIu64 "\n",
		       c->client_id, c->pid, c->uid, c->gid,
		       rmactl_or_dash(c->name), c->regions, b1, c->in_flight,
		       c->ops);
	}

	printf("\nregions (%zu)\n", s->n_regions);
	if (s->n_regions > 0)
		printf("  %8s %6s %12s %6s %8s\n", "ID", "GEN", "LENGTH",
		       "CLIENT", "INFLIGHT");
	for (size_t i = 0; i < s->n_regions; i++) {
		const Rma__V1__RegionInfo *r = s->regions[i];

		printf("  %8" PRIu64 " %6" PRIu64 " %12" PRIu64 " %6u %8" PRIu64
		       "\n",
		       r->region_id, r->generation, r->length, r->client_id,
		       r->in_flight);
	}

	if (k != NULL) {
		printf("\ncounters\n");
		printf("  ops            put %" PRIu64 ", get %" PRIu64
		       ", flush %" PRIu64 ", failed %" PRIu64 "\n",
		       k->ops_put, k->ops_get, k->ops_flush, k->ops_failed);
		printf("  bytes          put %" PRIu64 ", get %" PRIu64 "\n",
		       k->bytes_put, k->bytes_get);
		printf("  clients        %" PRIu64 " accepted, %" PRIu64
		       " protocol errors\n",
		       k->clients_accepted, k->protocol_errors);
		printf("  regions        %" PRIu64 " created\n",
		       k->regions_created);
		printf("  resolves       %" PRIu64 " served\n",
		       k->resolves_served);
	}
}

static int
rmactl_status(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__StatusRequest body = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Reply *reply;
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
						  "status: bad option %s",
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
	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &body;
	st = rma_client_call(client, &req, &reply);
	if (st != RMA_OK) {
		rc = rmactl_fail("status", st, client);
		goto out_disconnect;
	}
	if (reply->body_case != RMA__V1__REPLY__BODY_STATUS_REPLY) {
		rc = rmactl_errx(EX_SOFTWARE, "status",
				 "protocol error: no status in the reply");
		goto out_free_reply;
	}
	if (json)
		rmactl_json_print(stdout, &reply->status_reply->base);
	else
		rmactl_status_human(reply->status_reply);
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = rmactl_errx(EX_IOERR, "status", "write to stdout: %s",
				 strerror(errno));

out_free_reply:
	rma__v1__reply__free_unpacked(reply, NULL);
out_disconnect:
	rma_disconnect(client);
	return rc;
}

/* ---- expose ---- */

/* Wait for SIGINT/SIGTERM while the daemon serves the region; progress
 * the client meanwhile so a vanished daemon is noticed. */
static int
rmactl_expose_wait(rma_client_t *client, int sfd)
{
	struct signalfd_siginfo si;
	struct pollfd pfd[2];
	rma_status_t st;
	ssize_t n;

	for (;;) {
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = rma_fd(client);
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return rmactl_errx(EX_SOFTWARE, "expose", "poll: %s",
					   strerror(errno));
		}
		if (pfd[0].revents & POLLIN) {
			n = read(sfd, &si, sizeof(si));
			if (n == (ssize_t)sizeof(si))
				return 0;
		}
		if (pfd[1].revents) {
			st = rma_progress(client);
			if (st != RMA_OK)
				return rmactl_fail("expose", st, client);
		}
	}
}

static int
rmactl_expose(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"size", required_argument, NULL, 's'},
	    {"fill", required_argument, NULL, 'f'},
	    {"descriptor-out", required_argument, NULL, 'd'},
	    {"dump-on-exit", required_argument, NULL, 'D'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *fill = NULL, *desc_out = NULL, *dump = NULL;
	uint8_t *fill_buf = NULL;
	size_t fill_len = 0;
	uint64_t size = 0;
	rma_client_t *client;
	rma_region_t *region;
	rma_status_t st;
	sigset_t mask;
	char *line;
	int c, sfd, rc = 0;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (rmactl_parse_size(optarg, &size) < 0 || size == 0)
				return rmactl_usage_error(
				    RMACTL_EXPOSE, "expose: bad size \"%s\"",
				    optarg);
			break;
		case 'f':
			fill = optarg;
			break;
		case 'd':
			desc_out = optarg;
			break;
		case 'D':
			dump = optarg;
			break;
		case 'h':
			fputs(rmactl_cmd_usage[RMACTL_EXPOSE], stdout);
			return 0;
		default:
			return rmactl_usage_error(RMACTL_EXPOSE,
						  "expose: bad option %s",
						  argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_usage_error(RMACTL_EXPOSE,
					  "expose: unexpected argument %s",
					  argv[optind]);
	if (size == 0)
		return rmactl_usage_error(RMACTL_EXPOSE,
					  "expose: --size is required");
	if (size > SIZE_MAX)
		return rmactl_errx(EX_DATAERR, "expose", "size too big");

	if (fill != NULL) {
		if (rmactl_read_file(fill, &fill_buf, &fill_len) < 0)
			return rmactl_errx(EX_IOERR, "expose",
					   "cannot read %s: %s", fill,
					   strerror(errno));
		if (fill_len > size) {
			free(fill_buf);
			return rmactl_errx(EX_DATAERR, "expose",
					   "%s is %zu bytes, bigger than the "
					   "region (%" PRIu64 " bytes)",
					   fill, fill_len, size);
		}
	}

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK) {
		rc = rmactl_fail("expose", st, NULL);
		goto out_free_fill;
	}
	st = rma_region_alloc(client, (size_t)size, &region);
	if (st != RMA_OK) {
		rc = rmactl_fail("expose", st, client);
		goto out_disconnect;
	}
	if (fill_len > 0)
		memcpy(rma_region_ptr(region), fill_buf, fill_len);
	free(fill_buf);
	fill_buf = NULL;

	/* Blocked before the descriptor is out, as a script may signal us as
	 * soon as it reads it; not earlier, so that ^C still interrupts a
	 * connect to a stuck daemon. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
		rc = rmactl_errx(EX_SOFTWARE, "expose", "signalfd: %s",
				 strerror(errno));
		goto out_free_region;
	}

	if (asprintf(&line, "%s\n", rma_region_descriptor(region)) < 0) {
		rc = rmactl_errx(EX_SOFTWARE, "expose", "out of memory");
		goto out_close_sfd;
	}
	if (desc_out != NULL) {
		if (rmactl_write_file_atomic(desc_out, line, strlen(line)) < 0)
			rc = rmactl_errx(EX_IOERR, "expose",
					 "cannot write %s: %s", desc_out,
					 strerror(errno));
	} else if (fputs(line, stdout) == EOF || fflush(stdout) != 0) {
		rc = rmactl_errx(EX_IOERR, "expose", "write to stdout: %s",
				 strerror(errno));
	}
	free(line);
	if (rc != 0)
		goto out_close_sfd;

	rc = rmactl_expose_wait(client, sfd);
	if (rc == 0 && dump != NULL &&
	    rmactl_write_file_atomic(dump, rma_region_ptr(region),
				     rma_region_length(region)) < 0)
		rc = rmactl_errx(EX_IOERR, "expose", "cannot write %s: %s",
				 dump, strerror(errno));

out_close_sfd:
	close(sfd);
out_free_region:
	/* a gone daemon already freed it: nothing to report twice */
	rma_region_free(client, region);
out_disconnect:
	rma_disconnect(client);
out_free_fill:
	free(fill_buf);
	return rc;
}

/* ---- put and get ---- */

struct rmactl_xfer {
	const char *cmd;
	const char *peer;
	const char *descriptor_file;
	uint64_t offset;
	uint64_t length;
	int have_length;
	const char *out;
	int timeout_ms;
	const char *datafile;
};

static int
rmactl_xfer_args(int which, int argc, char **argv, struct rmactl_xfer *x)
{
	static const struct option opts[] = {
	    {"peer", required_argument, NULL, 'p'},
	    {"descriptor", required_argument, NULL, 'd'},
	    {"offset", required_argument, NULL, 'o'},
	    {"length", required_argument, NULL, 'l'},
	    {"out", required_argument, NULL, 'O'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, is_get = which == RMACTL_GET;

	x->timeout_ms = RMACTL_TIMEOUT_DEFAULT_S * 1000;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			x->peer = optarg;
			break;
		case 'd':
			x->descriptor_file = optarg;
			break;
		case 'o':
			if (rmactl_parse_size(optarg, &x->offset) < 0)
				return rmactl_usage_error(
				    which, "%s: bad offset \"%s\"", x->cmd,
				    optarg);
			break;
		case 'l':
			if (!is_get)
				goto bad_option;
			if (rmactl_parse_size(optarg, &x->length) < 0 ||
			    x->length == 0)
				return rmactl_usage_error(
				    which, "%s: bad length \"%s\"", x->cmd,
				    optarg);
			x->have_length = 1;
			break;
		case 'O':
			if (!is_get)
				goto bad_option;
			x->out = optarg;
			break;
		case 't':
			if (rmactl_parse_timeout(optarg, &x->timeout_ms) < 0)
				return rmactl_usage_error(
				    which, "%s: bad timeout \"%s\"", x->cmd,
				    optarg);
			break;
		case 'h':
			fputs(rmactl_cmd_usage[which], stdout);
			return -1;
		default:
			goto bad_option;
		}
	}
	if (x->peer == NULL || x->descriptor_file == NULL)
		return rmactl_usage_error(which,
					  "%s: --peer and --descriptor are "
					  "required",
					  x->cmd);
	if (rmactl_check_address(x->peer) < 0)
		return rmactl_usage_error(which,
					  "%s: bad peer address \"%s\" (want "
					  "HOST:PORT)",
					  x->cmd, x->peer);
	if (is_get) {
		if (!x->have_length)
			return rmactl_usage_error(
			    which, "%s: --length is required", x->cmd);
		if (x->length > SIZE_MAX)
			return rmactl_usage_error(which, "%s: length too big",
						  x->cmd);
		if (optind != argc)
			return rmactl_usage_error(which,
						  "%s: unexpected argument %s",
						  x->cmd, argv[optind]);
	} else {
		if (optind + 1 != argc)
			return rmactl_usage_error(
			    which, "%s: want one DATAFILE", x->cmd);
		x->datafile = argv[optind];
	}
	return 0;

bad_option:
	return rmactl_usage_error(which, "%s: bad option %s", x->cmd,
				  argv[optind - 1]);
}

/* Connect, reach the peer and import the descriptor. */
static int
rmactl_xfer_open(const struct rmactl_xfer *x, const char *desc,
		 rma_client_t **client_p, rma_remote_t **remote_p)
{
	rma_client_t *client;
	rma_peer_t *peer;
	rma_status_t st;
	int rc;

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK)
		return rmactl_fail(x->cmd, st, NULL);
	st = rma_peer_connect(client, x->peer, &peer);
	if (st == RMA_OK)
		st = rma_remote_import(client, peer, desc, remote_p);
	if (st != RMA_OK) {
		rc = rmactl_fail(x->cmd, st, client);
		rma_disconnect(client);
		return rc;
	}
	*client_p = client;
	return 0;
}

static int
rmactl_put(int argc, char **argv)
{
	struct rmactl_xfer x = {.cmd = "put"};
	rma_client_t *client;
	rma_remote_t *remote;
	rma_region_t *region;
	rma_status_t st;
	uint8_t *data = NULL;
	struct stat sb;
	size_t len;
	char *desc;
	int rc, fd;

	rc = rmactl_xfer_args(RMACTL_PUT, argc, argv, &x);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_read_descriptor(x.cmd, x.descriptor_file, &desc);
	if (rc != 0)
		return rc;
	/* A regular file goes straight into the region (no second copy of
	 * a big file in memory); a pipe is read up front. */
	fd = open(x.datafile, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "cannot read %s: %s",
				 x.datafile, strerror(errno));
		goto out_close_fd;
	}
	if (S_ISREG(sb.st_mode)) {
		len = (size_t)sb.st_size;
	} else if (rmactl_read_fd(fd, &data, &len) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "cannot read %s: %s",
				 x.datafile, strerror(errno));
		goto out_close_fd;
	}
	if (len == 0) {
		rc = rmactl_errx(EX_DATAERR, x.cmd,
				 "%s is empty, nothing to put", x.datafile);
		goto out_free_data;
	}

	rc = rmactl_xfer_open(&x, desc, &client, &remote);
	if (rc != 0)
		goto out_free_data;
	st = rma_region_alloc(client, len, &region);
	if (st != RMA_OK) {
		rc = rmactl_fail(x.cmd, st, client);
		goto out_release;
	}
	if (data != NULL) {
		memcpy(rma_region_ptr(region), data, len);
	} else if (rmactl_read_exact(fd, rma_region_ptr(region), len) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "cannot read %s: %s",
				 x.datafile, strerror(errno));
		goto out_free_region;
	}
	/* remote completion: exit 0 means the bytes are at the target */
	st = rma_put_sync(client, region, 0, remote, x.offset, len,
			  RMA_FLAG_REMOTE_COMPLETION, x.timeout_ms);
	if (st != RMA_OK)
		rc = rmactl_fail(x.cmd, st, client);

out_free_region:
	rma_region_free(client, region);
out_release:
	rma_remote_release(client, remote);
	rma_disconnect(client);
out_free_data:
	free(data);
out_close_fd:
	if (fd >= 0)
		close(fd);
	free(desc);
	return rc;
}

static int
rmactl_get(int argc, char **argv)
{
	struct rmactl_xfer x = {.cmd = "get"};
	rma_client_t *client;
	rma_remote_t *remote;
	rma_region_t *region;
	rma_status_t st;
	char *desc;
	int rc, fd;

	rc = rmactl_xfer_args(RMACTL_GET, argc, argv, &x);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	rc = rmactl_read_descriptor(x.cmd, x.descriptor_file, &desc);
	if (rc != 0)
		return rc;
	rc = rmactl_xfer_open(&x, desc, &client, &remote);
	if (rc != 0)
		goto out_free_desc;
	st = rma_region_alloc(client, (size_t)x.length, &region);
	if (st != RMA_OK) {
		rc = rmactl_fail(x.cmd, st, client);
		goto out_release;
	}
	st = rma_get_sync(client, region, 0, remote, x.offset, x.length,
			  x.timeout_ms);
	if (st != RMA_OK) {
		rc = rmactl_fail(x.cmd, st, client);
		goto out_free_region;
	}

	/* only now: a failed get leaves an existing --out file alone */
	if (x.out != NULL) {
		fd =
		    open(x.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || rmactl_write_all(fd, rma_region_ptr(region),
					       (size_t)x.length) < 0) {
			rc = rmactl_errx(EX_IOERR, x.cmd, "cannot write %s: %s",
					 x.out, strerror(errno));
			if (fd >= 0)
				close(fd);
		} else if (close(fd) < 0) {
			rc = rmactl_errx(EX_IOERR, x.cmd, "cannot write %s: %s",
					 x.out, strerror(errno));
		}
	} else if (rmactl_write_all(STDOUT_FILENO, rma_region_ptr(region),
				    (size_t)x.length) < 0) {
		rc = rmactl_errx(EX_IOERR, x.cmd, "write to stdout: %s",
				 strerror(errno));
	}

out_free_region:
	rma_region_free(client, region);
out_release:
	rma_remote_release(client, remote);
	rma_disconnect(client);
out_free_desc:
	free(desc);
	return rc;
}

/* ---- main ---- */

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} rmactl_commands[] = {
    {"status", rmactl_status},
    {"expose", rmactl_expose},
    {"put", rmactl_put},
    {"get", rmactl_get},
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
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
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
		default:
			return rmactl_usage_error(-1, "bad option %s",
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
