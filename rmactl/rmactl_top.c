/* SPDX-License-Identifier: BSD-2-Clause */
/* rmactl top: the daemon's traffic as rates, refreshed every interval.
 * Each refresh is one status round trip; rates are the difference of two
 * StatusReplys' counters over the time between them, so a first snapshot
 * is taken before the first refresh and every refresh shows rates. On a
 * terminal the screen is cleared and redrawn and q quits; otherwise (or
 * with --json, one object per line) refreshes follow one another. */
#include "rma.h"
#include "rma.pb-c.h"
#include "rmactl.h"
#include "monotime.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sysexits.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define RMACTL_TOP_COUNT_MAX 100000000

static const char rmactl_top_usage[] =
    "usage: rmactl [--socket PATH] top [--interval SECONDS] [--count N]\n"
    "       [--json]\n"
    "  operations/s, bytes/s, errors/s and in flight, for the daemon, per\n"
    "  peer and per client, and p50/p99 latency of the interval (when the\n"
    "  daemon reports its histogram), refreshed every interval; q or ^C\n"
    "  quits\n"
    "  --interval SECONDS  time between refreshes (default 1)\n"
    "  --count N           exit after N refreshes (default: until q, ^C)\n"
    "  --json              one JSON object per refresh, one per line\n";

struct rmactl_top {
	double interval;
	uint64_t count;
	int json;
	int screen;		  /* clear and redraw: stdout is a terminal */
	int raw;		  /* q is read from stdin */
	int tio_set;		  /* stdin in non-canonical mode... */
	struct termios saved_tio; /* ...restored at exit */
	int sfd;		  /* SIGINT, SIGTERM */
	rma_client_t *client;
	Rma__V1__StatusReply *prev; /* the snapshot rates are taken against */
	double prev_t;
};

/* One line of rates. */
struct rmactl_top_rate {
	double ops, bytes, errors;
};

/* A counter's growth; a counter that went back (the daemon restarted, or
 * the object is new) counts from zero. */
static double
rmactl_top_delta(uint64_t now, uint64_t before)
{
	return (double)(now >= before ? now - before : now);
}

static const Rma__V1__PeerInfo *
rmactl_top_prev_peer(const struct rmactl_top *t, uint32_t id)
{
	const Rma__V1__StatusReply *s = t->prev;

	for (size_t i = 0; i < s->n_peers; i++)
		if (s->peers[i]->peer_id == id)
			return s->peers[i];
	return NULL;
}

static const Rma__V1__ClientInfo *
rmactl_top_prev_client(const struct rmactl_top *t, uint32_t id)
{
	const Rma__V1__StatusReply *s = t->prev;

	for (size_t i = 0; i < s->n_clients; i++)
		if (s->clients[i]->client_id == id)
			return s->clients[i];
	return NULL;
}

static const Rma__V1__LatencyHistogram *
rmactl_top_prev_hist(const struct rmactl_top *t, int kind)
{
	const Rma__V1__StatusReply *s = t->prev;

	for (size_t i = 0; i < s->n_latency; i++)
		if ((int)s->latency[i]->kind == kind)
			return s->latency[i];
	return NULL;
}

/* p (0..1) of the operations that finished between two histograms, in
 * microseconds, interpolated inside its bucket as Prometheus'
 * histogram_quantile does; -1 when none finished. */
static double
rmactl_top_quantile(const Rma__V1__LatencyHistogram *now,
		    const Rma__V1__LatencyHistogram *before, double p)
{
	double total = 0, cum = 0, rank, d, lo;
	size_t n = now->n_counts;

	if (n != now->n_bounds + 1)
		return -1;
	if (before != NULL && before->n_counts != n)
		before = NULL;
	for (size_t b = 0; b < n; b++)
		total += rmactl_top_delta(now->counts[b],
					  before ? before->counts[b] : 0);
	if (total == 0)
		return -1;
	rank = p * total;
	for (size_t b = 0; b < n; b++) {
		d = rmactl_top_delta(now->counts[b],
				     before ? before->counts[b] : 0);
		if (cum + d >= rank && d > 0) {
			lo = b > 0 ? now->bounds[b - 1] : 0;
			/* above the last bound: all we know is its floor */
			if (b == n - 1)
				return lo * 1e6;
			return (lo + (now->bounds[b] - lo) * (rank - cum) / d) *
			       1e6;
		}
		cum += d;
	}
	return -1;
}

/* ---- output ---- */

static void
rmactl_top_rate_text(char *buf, size_t len, double v)
{
	if (v < 1000)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1e6)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.2fM", v / 1e6);
}

static void
rmactl_top_bytes_text(char *buf, size_t len, double v)
{
	rmactl_bytes(buf, len, (uint64_t)(v + 0.5));
	strncat(buf, "/s", len - strlen(buf) - 1);
}

static void
rmactl_top_us_text(char *buf, size_t len, double us)
{
	if (us < 0)
		snprintf(buf, len, "-");
	else if (us < 1000)
		snprintf(buf, len, "%.0fus", us);
	else if (us < 1e6)
		snprintf(buf, len, "%.1fms", us / 1e3);
	else
		snprintf(buf, len, "%.2fs", us / 1e6);
}

/* The latency percentiles of this interval, one kind after another. */
static void
rmactl_top_human_latency(const struct rmactl_top *t,
			 const Rma__V1__StatusReply *s)
{
	char p50[32], p99[32];

	printf("latency");
	if (s->n_latency == 0)
		printf(" -  (not reported by this daemon)");
	for (size_t i = 0; i < s->n_latency; i++) {
		const Rma__V1__LatencyHistogram *h = s->latency[i];
		const Rma__V1__LatencyHistogram *hb =
		    rmactl_top_prev_hist(t, (int)h->kind);

		rmactl_top_us_text(p50, sizeof(p50),
				   rmactl_top_quantile(h, hb, 0.50));
		rmactl_top_us_text(p99, sizeof(p99),
				   rmactl_top_quantile(h, hb, 0.99));
		printf("  %s p50 %s p99 %s", rmactl_op_kind((int)h->kind), p50,
		       p99);
	}
}

static void
rmactl_top_human_peers(const struct rmactl_top *t,
		       const Rma__V1__StatusReply *s, double dt)
{
	char r[32], b[32], e[32];

	printf("\n\npeers (%zu)\n", s->n_peers);
	if (s->n_peers > 0)
		printf("  %4s  %-22s %-10s %-3s %9s %13s %8s %8s\n", "ID",
		       "ADDRESS", "STATE", "DIR", "OPS/S", "BYTES/S",
		       "ERRORS/S", "INFLIGHT");
	for (size_t i = 0; i < s->n_peers; i++) {
		const Rma__V1__PeerInfo *p = s->peers[i];
		const Rma__V1__PeerInfo *q =
		    rmactl_top_prev_peer(t, p->peer_id);

		rmactl_top_rate_text(r, sizeof(r),
				     rmactl_top_delta(p->ops, q ? q->ops : 0) /
					 dt);
		rmactl_top_bytes_text(
		    b, sizeof(b),
		    rmactl_top_delta(p->bytes, q ? q->bytes : 0) / dt);
		rmactl_top_rate_text(
		    e, sizeof(e),
		    rmactl_top_delta(p->errors, q ? q->errors : 0) / dt);
		printf("  %4u  %-22s %-10s %-3s %9s %13s %8s %8" PRIu64 "\n",
		       p->peer_id, rmactl_or_dash(p->address),
		       rmactl_peer_state(p->state), p->inbound ? "in" : "out",
		       r, b, e, p->in_flight);
	}
}

static void
rmactl_top_human_clients(const struct rmactl_top *t,
			 const Rma__V1__StatusReply *s, double dt)
{
	char r[32], b[32], e[32];
	int bytes_counted = 0;

	/* a daemon that does not count client bytes leaves them all 0 */
	for (size_t i = 0; i < s->n_clients; i++)
		bytes_counted |= s->clients[i]->bytes != 0;
	printf("\nclients (%zu)\n", s->n_clients);
	if (s->n_clients > 0)
		printf("  %4s %7s %-24s %9s %13s %8s %8s\n", "ID", "PID",
		       "NAME", "OPS/S", "BYTES/S", "ERRORS/S", "INFLIGHT");
	for (size_t i = 0; i < s->n_clients; i++) {
		const Rma__V1__ClientInfo *c = s->clients[i];
		const Rma__V1__ClientInfo *q =
		    rmactl_top_prev_client(t, c->client_id);

		rmactl_top_rate_text(r, sizeof(r),
				     rmactl_top_delta(c->ops, q ? q->ops : 0) /
					 dt);
		if (bytes_counted) {
			rmactl_top_bytes_text(
			    b, sizeof(b),
			    rmactl_top_delta(c->bytes, q ? q->bytes : 0) / dt);
			rmactl_top_rate_text(
			    e, sizeof(e),
			    rmactl_top_delta(c->errors, q ? q->errors : 0) /
				dt);
		} else {
			snprintf(b, sizeof(b), "-");
			snprintf(e, sizeof(e), "-");
		}
		printf("  %4u %7d %-24s %9s %13s %8s %8" PRIu64 "\n",
		       c->client_id, c->pid, rmactl_or_dash(c->name), r, b, e,
		       c->in_flight);
	}
}

static void
rmactl_top_human(const struct rmactl_top *t, const Rma__V1__StatusReply *s,
		 double dt)
{
	const Rma__V1__StatusReply *o = t->prev;
	const Rma__V1__Counters *k = s->counters, *ko = o->counters;
	struct rmactl_top_rate all = {0};
	char r[32], b[32], e[32];
	time_t now = time(NULL);
	char clock[16];

	strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now));
	if (k != NULL && ko != NULL) {
		all.ops = (rmactl_top_delta(k->ops_put, ko->ops_put) +
			   rmactl_top_delta(k->ops_get, ko->ops_get) +
			   rmactl_top_delta(k->ops_flush, ko->ops_flush)) /
			  dt;
		all.bytes = (rmactl_top_delta(k->bytes_put, ko->bytes_put) +
			     rmactl_top_delta(k->bytes_get, ko->bytes_get)) /
			    dt;
		all.errors =
		    rmactl_top_delta(k->ops_failed, ko->ops_failed) / dt;
	}
	if (t->screen)
		fputs("\033[H\033[2J", stdout);
	rmactl_top_rate_text(r, sizeof(r), all.ops);
	rmactl_top_bytes_text(b, sizeof(b), all.bytes);
	rmactl_top_rate_text(e, sizeof(e), all.errors);
	printf("rmad %s  %s  every %gs%s\n", rmactl_or_dash(s->daemon_id),
	       clock, t->interval, t->screen ? "  (q quits)" : "");
	printf("ops/s %s  bytes/s %s  errors/s %s  in flight %" PRIu64 "\n", r,
	       b, e, s->ops_in_flight);
	if (k != NULL && ko != NULL) {
		rmactl_top_rate_text(
		    r, sizeof(r),
		    (rmactl_top_delta(k->target_puts, ko->target_puts) +
		     rmactl_top_delta(k->target_gets, ko->target_gets)) /
			dt);
		printf("served for other daemons: ops/s %s\n", r);
	}
	rmactl_top_human_latency(t, s);
	rmactl_top_human_peers(t, s, dt);
	rmactl_top_human_clients(t, s, dt);
	if (!t->screen)
		putchar('\n');
}

/* A rate as a JSON number, rounded to what a reader can use. */
static void
rmactl_top_json_rate(const char *name, double v)
{
	printf(", \"%s\": %.1f", name, v);
}

static void
rmactl_top_json(const struct rmactl_top *t, const Rma__V1__StatusReply *s,
		double dt)
{
	const Rma__V1__StatusReply *o = t->prev;
	const Rma__V1__Counters *k = s->counters, *ko = o->counters;
	int bytes_counted = 0;

	printf("{\"schema_version\": %d, \"daemon_id\": ", RMACTL_JSON_SCHEMA);
	rmactl_json_quote(stdout, s->daemon_id);
	printf(", \"interval_s\": %.3f", dt);
	if (k != NULL && ko != NULL) {
		rmactl_top_json_rate(
		    "ops_per_s",
		    (rmactl_top_delta(k->ops_put, ko->ops_put) +
		     rmactl_top_delta(k->ops_get, ko->ops_get) +
		     rmactl_top_delta(k->ops_flush, ko->ops_flush)) /
			dt);
		rmactl_top_json_rate(
		    "bytes_per_s",
		    (rmactl_top_delta(k->bytes_put, ko->bytes_put) +
		     rmactl_top_delta(k->bytes_get, ko->bytes_get)) /
			dt);
		rmactl_top_json_rate(
		    "errors_per_s",
		    rmactl_top_delta(k->ops_failed, ko->ops_failed) / dt);
		rmactl_top_json_rate(
		    "served_ops_per_s",
		    (rmactl_top_delta(k->target_puts, ko->target_puts) +
		     rmactl_top_delta(k->target_gets, ko->target_gets)) /
			dt);
	}
	printf(", \"in_flight\": \"%" PRIu64 "\", \"latency\": [",
	       s->ops_in_flight);
	for (size_t i = 0; i < s->n_latency; i++) {
		const Rma__V1__LatencyHistogram *h = s->latency[i];
		const Rma__V1__LatencyHistogram *hb =
		    rmactl_top_prev_hist(t, (int)h->kind);
		double p50 = rmactl_top_quantile(h, hb, 0.50);
		double p99 = rmactl_top_quantile(h, hb, 0.99);

		printf("%s{\"kind\": \"%s\"", i ? ", " : "",
		       rmactl_op_kind((int)h->kind));
		/* none finished in the interval: no figure, not 0 */
		if (p50 >= 0)
			printf(", \"p50_us\": %.1f, \"p99_us\": %.1f", p50,
			       p99);
		printf("}");
	}
	printf("], \"peers\": [");
	for (size_t i = 0; i < s->n_peers; i++) {
		const Rma__V1__PeerInfo *p = s->peers[i];
		const Rma__V1__PeerInfo *q =
		    rmactl_top_prev_peer(t, p->peer_id);

		printf("%s{\"peer_id\": %u, \"address\": ", i ? ", " : "",
		       p->peer_id);
		rmactl_json_quote(stdout, p->address);
		printf(", \"state\": \"%s\", \"inbound\": %s, \"daemon_id\": ",
		       rmactl_peer_state(p->state),
		       p->inbound ? "true" : "false");
		rmactl_json_quote(stdout, p->daemon_id);
		rmactl_top_json_rate(
		    "ops_per_s", rmactl_top_delta(p->ops, q ? q->ops : 0) / dt);
		rmactl_top_json_rate(
		    "bytes_per_s",
		    rmactl_top_delta(p->bytes, q ? q->bytes : 0) / dt);
		rmactl_top_json_rate(
		    "errors_per_s",
		    rmactl_top_delta(p->errors, q ? q->errors : 0) / dt);
		printf(", \"in_flight\": \"%" PRIu64 "\"}", p->in_flight);
	}
	for (size_t i = 0; i < s->n_clients; i++)
		bytes_counted |= s->clients[i]->bytes != 0;
	printf("], \"clients\": [");
	for (size_t i = 0; i < s->n_clients; i++) {
		const Rma__V1__ClientInfo *c = s->clients[i];
		const Rma__V1__ClientInfo *q =
		    rmactl_top_prev_client(t, c->client_id);

		printf("%s{\"client_id\": %u, \"pid\": %d, \"name\": ",
		       i ? ", " : "", c->client_id, c->pid);
		rmactl_json_quote(stdout, c->name);
		rmactl_top_json_rate(
		    "ops_per_s", rmactl_top_delta(c->ops, q ? q->ops : 0) / dt);
		if (bytes_counted) {
			rmactl_top_json_rate(
			    "bytes_per_s",
			    rmactl_top_delta(c->bytes, q ? q->bytes : 0) / dt);
			rmactl_top_json_rate(
			    "errors_per_s",
			    rmactl_top_delta(c->errors, q ? q->errors : 0) /
				dt);
		}
		printf(", \"in_flight\": \"%" PRIu64 "\"}", c->in_flight);
	}
	printf("]}\n");
}

/* ---- the loop ---- */

static int
rmactl_top_status(struct rmactl_top *t, Rma__V1__StatusReply **status_p)
{
	return rmactl_status_get("top", t->client, status_p);
}

/* Waits for the deadline (1: refresh), a signal or q (0: quit); a failure
 * is its exit code, negated. */
static int
rmactl_top_wait(struct rmactl_top *t, double deadline)
{
	struct pollfd pfd[2] = {{.fd = t->sfd, .events = POLLIN},
				{.fd = STDIN_FILENO, .events = POLLIN}};
	double left;
	char c;
	int n;

	for (;;) {
		left = deadline - monotime_s();
		if (left <= 0)
			return 1;
		n = poll(pfd, t->raw ? 2 : 1, (int)(left * 1000) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -rmactl_errx(EX_SOFTWARE, "top", "poll: %s",
					    strerror(errno));
		if (pfd[0].revents & POLLIN)
			return 0;
		if (t->raw && (pfd[1].revents & (POLLIN | POLLHUP))) {
			if (read(STDIN_FILENO, &c, 1) != 1)
				t->raw = 0; /* the terminal went: keep going */
			else if (c == 'q' || c == 'Q')
				return 0;
		}
	}
}

static int
rmactl_top_run_loop(struct rmactl_top *t)
{
	Rma__V1__StatusReply *cur;
	double deadline, now;
	int rc;

	rc = rmactl_top_status(t, &t->prev);
	if (rc != 0)
		return rc;
	t->prev_t = monotime_s();
	deadline = t->prev_t;
	for (uint64_t i = 0; t->count == 0 || i < t->count; i++) {
		deadline += t->interval;
		rc = rmactl_top_wait(t, deadline);
		if (rc <= 0)
			return -rc;
		rc = rmactl_top_status(t, &cur);
		if (rc != 0)
			return rc;
		now = monotime_s();
		if (strcmp(cur->daemon_id, t->prev->daemon_id) != 0)
			fprintf(stderr, "rmactl: top: the daemon restarted\n");
		if (t->json)
			rmactl_top_json(t, cur, now - t->prev_t);
		else
			rmactl_top_human(t, cur, now - t->prev_t);
		rma__v1__status_reply__free_unpacked(t->prev, NULL);
		t->prev = cur;
		t->prev_t = now;
		if (fflush(stdout) != 0 || ferror(stdout))
			return rmactl_errx(EX_IOERR, "top",
					   "write to stdout: %s",
					   strerror(errno));
		/* a slow refresh does not make the next ones come in a burst */
		if (deadline < now)
			deadline = now;
	}
	return 0;
}

static int
rmactl_top_args(int argc, char **argv, struct rmactl_top *t)
{
	static const struct option opts[] = {
	    {"interval", required_argument, NULL, 'i'},
	    {"count", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, ms;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (rmactl_parse_timeout(optarg, &ms) < 0)
				return rmactl_errx(EX_USAGE, "top",
						   "--interval: expected "
						   "seconds > 0, got %s "
						   "(see rmactl top --help)",
						   optarg);
			t->interval = ms / 1000.0;
			break;
		case 'c':
			if (size_parse(optarg, &t->count) < 0 ||
			    t->count == 0 || t->count > RMACTL_TOP_COUNT_MAX)
				return rmactl_errx(EX_USAGE, "top",
						   "--count: expected 1 to %d, "
						   "got %s (see rmactl top "
						   "--help",
						   RMACTL_TOP_COUNT_MAX,
						   optarg);
			break;
		case 'j':
			t->json = 1;
			break;
		case 'h':
			fputs(rmactl_top_usage, stdout);
			return -1;
		default:
			return rmactl_errx(EX_USAGE, "top",
					   "unknown option %s; see rmactl top "
					   "--help",
					   argv[optind - 1]);
		}
	}
	if (optind != argc)
		return rmactl_errx(EX_USAGE, "top",
				   "unexpected argument %s (see rmactl top "
				   "--help",
				   argv[optind]);
	return 0;
}

int
rmactl_top_run(int argc, char **argv)
{
	struct rmactl_top t = {.interval = 1, .sfd = -1};
	struct termios tio;
	sigset_t mask;
	rma_status_t st;
	int rc;

	rc = rmactl_top_args(argc, argv, &t);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	st = rma_connect(rmactl_socket, &t.client);
	if (st != RMA_OK)
		return rmactl_fail("top", st, NULL);
	/* ^C and SIGTERM end the loop like q, so the terminal is restored.
	 * A shell starts background commands with SIGINT ignored, and an
	 * ignored signal never reaches the signalfd: take it back. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
	    (t.sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
		rc = rmactl_errx(EX_SOFTWARE, "top", "signalfd: %s",
				 strerror(errno));
		goto out_disconnect;
	}
	t.screen = !t.json && isatty(STDOUT_FILENO);
	/* q without Enter, and not echoed over the table */
	if (t.screen && isatty(STDIN_FILENO) &&
	    tcgetattr(STDIN_FILENO, &t.saved_tio) == 0) {
		tio = t.saved_tio;
		tio.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		tio.c_cc[VMIN] = 1;
		tio.c_cc[VTIME] = 0;
		t.tio_set = tcsetattr(STDIN_FILENO, TCSANOW, &tio) == 0;
		t.raw = t.tio_set;
	}
	rc = rmactl_top_run_loop(&t);
	if (t.tio_set)
		tcsetattr(STDIN_FILENO, TCSANOW, &t.saved_tio);
	if (t.prev != NULL)
		rma__v1__status_reply__free_unpacked(t.prev, NULL);
	close(t.sfd);
out_disconnect:
	rma_disconnect(t.client);
	return rc;
}
