/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl wait: return once the daemon answers, a peer is reachable
 * through it, or a file (a descriptor) is there; fail after a deadline.
 * It is the readiness step of a script or of a block pasted into a shell:
 * a daemon started with & is not listening yet when the next line runs,
 * and neither is the descriptor that a backgrounded expose will write. */
#include "rma.h"
#include "rmactl.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>

/* Between two tries: short next to a daemon's start-up, then doubling up
 * to the maximum, as each failed try at a peer is a warning in the
 * daemon's log. Every wait is bounded by --timeout. */
#define RMACTL_WAIT_INTERVAL_MS 50
#define RMACTL_WAIT_INTERVAL_MAX_MS 800
#define RMACTL_WAIT_DEFAULT_MS 30000

static const char rmactl_wait_usage[] =
    "usage: rmactl [--socket PATH] wait [--timeout SECONDS] [--peer "
    "HOST:PORT]\n"
    "       [--file FILE]\n"
    "  wait until the daemon answers; with --peer, also until the daemon\n"
    "  reaches that peer; with --file, until FILE exists and is not empty\n"
    "  (with --file alone the daemon is not asked)\n"
    "  --timeout SECONDS  give up after this long (default 30): exit 75\n";

struct rmactl_wait {
	const char *peer;
	const char *file;
	bool daemon;
	struct timespec deadline;
	int timeout_ms;
	int interval_ms;
	/* what the last try said, for the message on timeout */
	char last[512];
};

static void
rmactl_wait_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Sleeps one interval, never past the deadline; false once it has
 * passed. */
static bool
rmactl_wait_pause(struct rmactl_wait *w)
{
	struct timespec now, nap;
	long left_ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left_ms = (long)(w->deadline.tv_sec - now.tv_sec) * 1000 +
		  (w->deadline.tv_nsec - now.tv_nsec) / 1000000L;
	if (left_ms <= 0)
		return false;
	if (left_ms > w->interval_ms)
		left_ms = w->interval_ms;
	nap.tv_sec = left_ms / 1000;
	nap.tv_nsec = (left_ms % 1000) * 1000000L;
	while (nanosleep(&nap, &nap) < 0 && errno == EINTR)
		;
	if (w->interval_ms < RMACTL_WAIT_INTERVAL_MAX_MS)
		w->interval_ms *= 2;
	return true;
}

/* Whether a status can change by waiting: no daemon yet, a peer not
 * listening yet. A refusal or a bad address will not. */
static bool
rmactl_wait_retriable(rma_status_t st)
{
	switch (st) {
	case RMA_ERR_DAEMON_GONE:
	case RMA_ERR_SHUTDOWN:
	case RMA_ERR_UNREACHABLE:
	case RMA_ERR_CONNECTION_RESET:
	case RMA_ERR_TIMEOUT:
	case RMA_ERR_NO_PEER:
		return true;
	default:
		return false;
	}
}

static void
rmactl_wait_note(struct rmactl_wait *w, const char *what, rma_status_t st,
		 const char *detail)
{
	if (detail != NULL && detail[0] != '\0' &&
	    strcmp(detail, rma_strerror(st)) != 0)
		snprintf(w->last, sizeof(w->last), "%s: %s: %s", what,
			 rma_strerror(st), detail);
	else
		snprintf(w->last, sizeof(w->last), "%s: %s", what,
			 rma_strerror(st));
}

/* One try at the daemon (and the peer): RMA_OK, or the status to wait
 * on or to give up with; *client_p is set when the daemon answered. */
static rma_status_t
rmactl_wait_try(struct rmactl_wait *w, rma_client_t **client_p)
{
	rma_client_t *client;
	rma_peer_t *peer;
	rma_status_t st;

	st = rma_connect(rmactl_socket, &client);
	if (st != RMA_OK) {
		/* librma's detail alone, as rmactl_fail: "daemon gone" is
		 * wrong for a socket that never existed */
		snprintf(w->last, sizeof(w->last), "daemon: %s",
			 rma_last_error(NULL));
		*client_p = NULL;
		return st;
	}
	*client_p = client;
	if (w->peer == NULL)
		return RMA_OK;
	st = rma_peer_connect(client, w->peer, &peer);
	if (st != RMA_OK)
		rmactl_wait_note(w, w->peer, st, rma_last_error(client));
	return st;
}

static int
rmactl_wait_daemon(struct rmactl_wait *w)
{
	rma_client_t *client;
	rma_status_t st;

	for (;;) {
		st = rmactl_wait_try(w, &client);
		if (st != RMA_OK && !rmactl_wait_retriable(st)) {
			int rc = rmactl_fail("wait", st, client);
			if (client != NULL)
				rma_disconnect(client);
			return rc;
		}
		/* a new client per try: a peer that failed stays failed in
		 * the old one until the daemon reconnects it */
		if (client != NULL)
			rma_disconnect(client);
		if (st == RMA_OK)
			return 0;
		if (!rmactl_wait_pause(w))
			return rmactl_errx(EX_TEMPFAIL, "wait",
					   "timed out after %g s: %s",
					   w->timeout_ms / 1000.0, w->last);
	}
}

static int
rmactl_wait_file(struct rmactl_wait *w)
{
	struct stat sb;
	bool there;

	for (;;) {
		there = stat(w->file, &sb) == 0;
		if (there && sb.st_size > 0)
			return 0;
		if (!rmactl_wait_pause(w))
			return rmactl_errx(EX_TEMPFAIL, "wait",
					   "timed out after %g s: %s is %s",
					   w->timeout_ms / 1000.0, w->file,
					   there ? "empty" : "not there");
	}
}

int
rmactl_wait_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"timeout", required_argument, NULL, 't'},
	    {"peer", required_argument, NULL, 'p'},
	    {"file", required_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rmactl_wait w = {.daemon = true,
				.timeout_ms = RMACTL_WAIT_DEFAULT_MS,
				.interval_ms = RMACTL_WAIT_INTERVAL_MS};
	int c, rc;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (rmactl_parse_timeout(optarg, &w.timeout_ms) < 0)
				return rmactl_errx(EX_USAGE, "wait",
						   "bad timeout \"%s\" (see "
						   "rmactl wait --help)",
						   optarg);
			break;
		case 'p':
			if (rmactl_check_address(optarg) < 0)
				return rmactl_errx(EX_USAGE, "wait",
						   "bad peer address \"%s\", "
						   "want HOST:PORT (see rmactl "
						   "wait --help)",
						   optarg);
			w.peer = optarg;
			break;
		case 'f':
			w.file = optarg;
			break;
		case 'h':
			fputs(rmactl_wait_usage, stdout);
			return 0;
		default:
			return rmactl_errx(EX_USAGE, "wait",
					   "unknown option %s; see rmactl wait "
					   "--help",
					   argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_errx(EX_USAGE, "wait",
				   "unexpected argument %s (see rmactl wait "
				   "--help",
				   argv[optind]);
	/* --file alone: the file's writer already had the daemon */
	w.daemon = w.file == NULL || w.peer != NULL;
	rmactl_wait_deadline(&w.deadline, w.timeout_ms);
	if (w.file != NULL && (rc = rmactl_wait_file(&w)) != 0)
		return rc;
	w.interval_ms = RMACTL_WAIT_INTERVAL_MS;
	if (w.daemon)
		return rmactl_wait_daemon(&w);
	return 0;
}
