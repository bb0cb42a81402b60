/* SPDX-License-Identifier: BSD-2-Clause */
/* The load of tests/restart_load.sh: C clients on each of two hosts (rmad
 * A and rmad B), one thread each, put and get back, without pause, slots
 * of regions on the other host while the script takes the daemons over.
 *
 * Every client owns one region (written to DIR/desc.H.K, H = a or b) and
 * imports the other host's regions from those files. In every region,
 * slot s belongs to client s % C of the other host: nobody else writes it,
 * so what it must hold is known exactly (the writer's last put that
 * completed). A put carries a new version each time, a retry too: a
 * failed put that landed after its successful retry would show as the
 * older version. Each put (with remote completion) is followed by a get
 * of the same slot, compared with that version.
 *
 * A failure is either one of the statuses rma.h documents as retriable
 * after a take-over (retried until it succeeds, counted per status) or
 * an error (counted, reported, and the run fails). A request still in
 * flight after WAIT_MS is an error too: nothing may hang.
 *
 * SIGUSR1 ends the load; then every slot is checked in its owner's
 * mapping, fresh clients import the descriptor files again and read and
 * write every region through them, DIR/expect.H.K gets what each region's
 * slots must hold (for the script's rmactl to compare), DIR/verified is
 * written, and the clients stay until SIGUSR2 (so their regions do).
 * DIR/progress is "MARK MIN TOTAL": the number last read from DIR/mark,
 * the fewest operations any client completed since (each counted from
 * its own count when the mark changed), all operations completed; then
 * per client its count, what it does and its last failure. Exit 0 when
 * no byte was lost or misplaced and nothing failed other than
 * retriably.
 *
 * Usage: restart_load DIR SOCK_A ADDR_A SOCK_B ADDR_B CLIENTS SECONDS */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rma.h"
#include "monotime.h"

#define MAX_CLIENTS 8
#define SLOT 4096u
#define SLOTS_PER_WRITER 4u
#define WAIT_MS 20000
/* How long one operation may keep failing retriably before it counts as
 * an error: longer than a take-over, shorter than the script's budget. */
#define RETRY_S 20.0
#define N_STATUS 32 /* -rma_status_t, for counting */

struct loader;

struct client {
	struct loader *l;
	int host, k; /* host 0 (A) or 1 (B), index on that host */
	rma_client_t *c;
	rma_region_t *region; /* owned: slots, then the put and get areas */
	rma_peer_t *peer;     /* the other host's daemon */
	rma_remote_t *remote[MAX_CLIENTS];
	uint32_t version;
	/* last version of each of our slots whose put completed, per
	 * region of the other host; 0 never written; UINT32_MAX unknown */
	uint32_t last_ok[MAX_CLIENTS][SLOTS_PER_WRITER];
	uint64_t puts_ok, gets_ok, retried_ok, bad_slots, errors;
	uint64_t retriable[N_STATUS];
	volatile uint64_t done; /* operations completed */
	uint64_t at_mark;	/* done when the mark last changed */
	/* what it does now, for DIR/progress: 'p'ut, 'g'et, 'r'etry
	 * pause; and the last failure */
	volatile char doing;
	volatile int last_failure;
	char first_error[256];
	pthread_t thread;
};

struct loader {
	const char *dir;
	const char *sock[2], *addr[2];
	int n; /* clients per host */
	long mark;
	double deadline;
	struct client cl[2][MAX_CLIENTS];
};

static volatile sig_atomic_t stop_load, stop_all;
static const char host_name[2] = {'a', 'b'};

static void
on_signal(int sig)
{
	if (sig == SIGUSR1)
		stop_load = 1;
	else
		stop_all = 1;
}

/* Waits min(seconds, time left until deadline): the pause between two
 * tries of something that has its own deadline. */
static void
pause_until(double seconds, double deadline)
{
	double left = deadline - monotime_s();

	if (left > seconds)
		left = seconds;
	if (left > 0)
		poll(NULL, 0, (int)(left * 1000) + 1);
}

static size_t
region_size(int n)
{
	return ((size_t)n * SLOTS_PER_WRITER + 2) * SLOT;
}

static size_t
slots_size(int n)
{
	return (size_t)n * SLOTS_PER_WRITER * SLOT;
}

/* Offset of writer k's slot j in any region. */
static uint64_t
slot_offset(int n, int k, unsigned j)
{
	return ((uint64_t)j * (uint64_t)n + (uint64_t)k) * SLOT;
}

/* What writer (host, k) puts into slot j of region i at version v: a
 * header that names it (so a misplaced slot says whose it is), then
 * bytes that depend on all of it. Version 0: never written, zeros. */
static void
pattern(uint8_t *buf, int host, int k, int i, unsigned j, uint32_t v)
{
	uint32_t h[4] = {0x524c4f44u, (uint32_t)(host << 16 | k << 8 | i), j,
			 v};
	uint32_t x = (h[1] * 2654435761u) ^ (j * 40503u) ^ (v * 97u) ^ 1u;

	if (v == 0) {
		memset(buf, 0, SLOT);
		return;
	}
	memcpy(buf, h, sizeof(h));
	for (size_t n = sizeof(h); n < SLOT; n++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[n] = (uint8_t)x;
	}
}

/* Who wrote a slot, from its header, for the report. */
static void
describe(const uint8_t *buf, char *out, size_t len)
{
	uint32_t h[4];

	memcpy(h, buf, sizeof(h));
	if (h[0] == 0x524c4f44u && h[1] >> 16 < 2)
		snprintf(out, len, "host %c client %u region %u slot %u v%u",
			 host_name[h[1] >> 16], (h[1] >> 8) & 0xff, h[1] & 0xff,
			 h[2], h[3]);
	else
		snprintf(out, len, "no header (%08x)", h[0]);
}

/* The statuses rma.h and the README name for an operation caught by a
 * take-over: RESTARTED and SHUTDOWN (the client's own daemon was taken
 * over), CONNECTION_RESET, CANCELED and UNREACHABLE (the endpoint to a
 * daemon taken over failed, or it was not listening yet), REJECTED (the
 * old process refuses new connections while it drains). Each a
 * transport status, which rma.h says to retry. */
static int
retriable(rma_status_t st)
{
	return st == RMA_ERR_RESTARTED || st == RMA_ERR_SHUTDOWN ||
	       st == RMA_ERR_CONNECTION_RESET || st == RMA_ERR_CANCELED ||
	       st == RMA_ERR_UNREACHABLE || st == RMA_ERR_REJECTED;
}

static void client_error(struct client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
client_error(struct client *c, const char *fmt, ...)
{
	va_list ap;

	c->errors++;
	if (c->first_error[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(c->first_error, sizeof(c->first_error), fmt, ap);
	va_end(ap);
	/* at once: a stalled run is ended from outside */
	fprintf(stderr, "restart_load: client %c%d: %s\n", host_name[c->host],
		c->k, c->first_error);
}

/* One put or get of slot j of region i, waited for. A request not
 * completed within WAIT_MS is reported as RMA_INPROGRESS. */
static rma_status_t
client_op(struct client *c, int put, int i, unsigned j, char *detail,
	  size_t len)
{
	int n = c->l->n;
	uint64_t local = slots_size(n) + (put ? 0 : SLOT);
	uint64_t remote = slot_offset(n, c->k, j);
	rma_request_t *req = NULL;
	rma_status_t st;

	detail[0] = '\0';
	if (put)
		st = rma_put(c->c, c->region, local, c->remote[i], remote, SLOT,
			     RMA_FLAG_REMOTE_COMPLETION, NULL, NULL, &req);
	else
		st = rma_get(c->c, c->region, local, c->remote[i], remote, SLOT,
			     NULL, NULL, &req);
	if (st != RMA_OK) {
		snprintf(detail, len, "%s", rma_last_error(c->c));
		return st;
	}
	st = rma_request_wait(c->c, req, WAIT_MS);
	if (!rma_request_is_completed(req))
		st = RMA_INPROGRESS;
	else if (st != RMA_OK)
		snprintf(detail, len, "%s", rma_request_detail(req));
	rma_request_release(req);
	return st;
}

/* Runs one operation until it succeeds: 0, or -1 after an error. */
static int
client_until_ok(struct client *c, int put, int i, unsigned j)
{
	double deadline = monotime_s() + RETRY_S;
	uint8_t *mine = rma_region_ptr(c->region);
	uint8_t *out = mine + slots_size(c->l->n);
	int tries = 0;
	char detail[200];

	for (;;) {
		rma_status_t st;

		if (put) {
			/* every try a new version: see the file comment */
			c->version++;
			pattern(out, c->host, c->k, i, j, c->version);
		} else {
			memset(out + SLOT, 0xee, SLOT);
		}
		c->doing = put ? 'p' : 'g';
		st = client_op(c, put, i, j, detail, sizeof(detail));
		c->doing = 'r';
		if (st != RMA_OK)
			c->last_failure = st;
		if (st == RMA_OK) {
			if (put)
				c->last_ok[i][j] = c->version;
			c->retried_ok += tries > 0;
			return 0;
		}
		if (put) /* it may or may not have landed */
			c->last_ok[i][j] = UINT32_MAX;
		if (st == RMA_INPROGRESS) {
			client_error(c,
				     "%s of slot %u still in flight after "
				     "%d ms",
				     put ? "put" : "get", j, WAIT_MS);
			return -1;
		}
		if (!retriable(st)) {
			client_error(c, "%s of slot %u: %s (%s)",
				     put ? "put" : "get", j, rma_strerror(st),
				     detail);
			return -1;
		}
		c->retriable[-st]++;
		tries++;
		if (monotime_s() > deadline) {
			client_error(c,
				     "%s of slot %u failed for %.0f s, last "
				     "%s (%s)",
				     put ? "put" : "get", j, RETRY_S,
				     rma_strerror(st), detail);
			return -1;
		}
		/* A retry at once would only meet the same take-over. */
		pause_until(0.002, deadline);
	}
}

static void *
client_run(void *arg)
{
	struct client *c = arg;
	int n = c->l->n;
	uint8_t *mine = rma_region_ptr(c->region);
	uint8_t want[SLOT];
	char who[128];
	uint64_t op = 0;

	while (!stop_load && monotime_s() < c->l->deadline) {
		int i = (int)(op % (uint64_t)n);
		unsigned j = (unsigned)(op / (uint64_t)n % SLOTS_PER_WRITER);

		op++;
		if (client_until_ok(c, 1, i, j) < 0)
			break;
		c->puts_ok++;
		if (client_until_ok(c, 0, i, j) < 0)
			break;
		c->gets_ok++;
		pattern(want, c->host, c->k, i, j, c->last_ok[i][j]);
		if (memcmp(mine + slots_size(n) + SLOT, want, SLOT) != 0) {
			describe(mine + slots_size(n) + SLOT, who, sizeof(who));
			c->bad_slots++;
			client_error(c,
				     "get of slot %u of region %d after "
				     "v%u completed: found %s",
				     j, i, c->last_ok[i][j], who);
		}
		__atomic_store_n(&c->done, c->done + 2, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int
read_descriptor(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t got;

	if (f == NULL)
		return -1;
	got = fread(out, 1, len - 1, f);
	fclose(f);
	out[got] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	return got > 0 ? 0 : -1;
}

static int
write_file(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096], tmp[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f == NULL)
		return -1;
	if (fwrite(buf, 1, len, f) != len) {
		fclose(f);
		return -1;
	}
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path); /* readers see all of it or nothing */
}

/* Connect, own a region, say its descriptor. */
static int
loader_client_open(struct loader *l, int h, int k)
{
	struct client *c = &l->cl[h][k];
	const char *d;
	char name[32];

	c->l = l;
	c->host = h;
	c->k = k;
	if (rma_connect(l->sock[h], &c->c) != RMA_OK ||
	    rma_region_alloc(c->c, region_size(l->n), &c->region) != RMA_OK) {
		fprintf(stderr, "restart_load: client %c%d: %s\n", host_name[h],
			k, rma_last_error(c->c));
		return -1;
	}
	d = rma_region_descriptor(c->region);
	snprintf(name, sizeof(name), "desc.%c.%d", host_name[h], k);
	return write_file(l->dir, name, d, strlen(d));
}

/* Import the other host's regions from their descriptor files. */
static int
import_all(struct loader *l, rma_client_t *cc, int h, rma_peer_t **peer_p,
	   rma_remote_t **remotes)
{
	char path[4096], desc[RMA_DESCRIPTOR_MAX];
	rma_status_t st;

	st = rma_peer_connect(cc, l->addr[1 - h], peer_p);
	if (st != RMA_OK) {
		fprintf(stderr, "restart_load: %c: peer %s: %s (%s)\n",
			host_name[h], l->addr[1 - h], rma_strerror(st),
			rma_last_error(cc));
		return -1;
	}
	for (int i = 0; i < l->n; i++) {
		snprintf(path, sizeof(path), "%s/desc.%c.%d", l->dir,
			 host_name[1 - h], i);
		if (read_descriptor(path, desc, sizeof(desc)) < 0) {
			fprintf(stderr, "restart_load: cannot read %s\n", path);
			return -1;
		}
		st = rma_remote_import(cc, *peer_p, desc, &remotes[i]);
		if (st != RMA_OK) {
			fprintf(stderr,
				"restart_load: %c: import %s: %s (%s)\n",
				host_name[h], path, rma_strerror(st),
				rma_last_error(cc));
			return -1;
		}
	}
	return 0;
}

/* What slot s of region i of host h must hold, by its writer's ledger. */
static uint32_t
expected_version(struct loader *l, int h, int i, size_t s)
{
	struct client *w = &l->cl[1 - h][s % (size_t)l->n];

	return w->last_ok[i][s / (size_t)l->n];
}

/* Every slot of every region, in its owner's mapping. */
static uint64_t
verify_mappings(struct loader *l, uint64_t *checked_p)
{
	uint8_t want[SLOT];
	uint64_t bad = 0;
	char who[128];

	for (int h = 0; h < 2; h++) {
		for (int i = 0; i < l->n; i++) {
			const uint8_t *mem = rma_region_ptr(l->cl[h][i].region);

			for (size_t s = 0; s < slots_size(l->n) / SLOT; s++) {
				uint32_t v = expected_version(l, h, i, s);
				int k = (int)(s % (size_t)l->n);
				unsigned j = (unsigned)(s / (size_t)l->n);

				if (v == UINT32_MAX)
					continue; /* its writer failed: counted
						   */
				(*checked_p)++;
				pattern(want, 1 - h, k, i, j, v);
				if (memcmp(mem + s * SLOT, want, SLOT) == 0)
					continue;
				describe(mem + s * SLOT, who, sizeof(who));
				fprintf(stderr,
					"restart_load: LOST/MISPLACED: region "
					"%c%d slot %zu: want host %c client %d "
					"v%u, found %s\n",
					host_name[h], i, s, host_name[1 - h], k,
					v, who);
				bad++;
			}
		}
	}
	return bad;
}

/* Fresh clients on each host import the descriptor files again, read
 * every region whole (it must equal its owner's mapping) and write one
 * slot of each (which then shows in the owner's mapping): the
 * descriptors handed out before the take-overs all still work. Their
 * writes update the writers' ledgers (the fresh client writes with the
 * slot's owner's identity). */
static int
verify_descriptors(struct loader *l)
{
	size_t len = slots_size(l->n);
	int bad = 0;

	for (int h = 0; h < 2; h++) {
		rma_remote_t *remotes[MAX_CLIENTS];
		rma_region_t *buf;
		rma_client_t *cc;
		rma_peer_t *peer;

		if (rma_connect(l->sock[h], &cc) != RMA_OK) {
			fprintf(stderr,
				"restart_load: fresh client on %c: %s\n",
				host_name[h], rma_last_error(NULL));
			return -1;
		}
		if (rma_region_alloc(cc, len + SLOT, &buf) != RMA_OK ||
		    import_all(l, cc, h, &peer, remotes) < 0) {
			rma_disconnect(cc);
			return -1;
		}
		for (int i = 0; i < l->n && !bad; i++) {
			struct client *owner = &l->cl[1 - h][i];
			struct client *w = &l->cl[h][0]; /* slot 0's writer */
			uint8_t *mem = rma_region_ptr(buf);
			rma_status_t st;

			st = rma_get_sync(cc, buf, 0, remotes[i], 0, len,
					  WAIT_MS);
			if (st != RMA_OK ||
			    memcmp(mem, rma_region_ptr(owner->region), len)) {
				fprintf(stderr,
					"restart_load: get of region %c%d "
					"through its descriptor file: %s\n",
					host_name[1 - h], i,
					st != RMA_OK ? rma_strerror(st)
						     : "bytes differ");
				bad = 1;
				break;
			}
			w->version++;
			pattern(mem + len, h, 0, i, 0, w->version);
			st = rma_put_sync(cc, buf, len, remotes[i], 0, SLOT,
					  RMA_FLAG_REMOTE_COMPLETION, WAIT_MS);
			if (st != RMA_OK ||
			    memcmp(mem + len, rma_region_ptr(owner->region),
				   SLOT)) {
				fprintf(stderr,
					"restart_load: put to region %c%d "
					"through its descriptor file: %s\n",
					host_name[1 - h], i,
					st != RMA_OK ? rma_strerror(st)
						     : "not in the mapping");
				bad = 1;
				break;
			}
			w->last_ok[i][0] = w->version;
		}
		rma_disconnect(cc);
		if (bad)
			return -1;
	}
	return 0;
}

/* DIR/mark holds a number the script changes after each take-over:
 * from then on, progress counts each client's operations since. */
static void
read_mark(struct loader *l)
{
	char path[4096];
	long serial = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/mark", l->dir);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	if (fscanf(f, "%ld", &serial) != 1)
		serial = -1;
	fclose(f);
	if (serial < 0 || serial == l->mark)
		return;
	l->mark = serial;
	for (int h = 0; h < 2; h++)
		for (int k = 0; k < l->n; k++)
			l->cl[h][k].at_mark = __atomic_load_n(&l->cl[h][k].done,
							      __ATOMIC_RELAXED);
}

static void
write_progress(struct loader *l)
{
	uint64_t min = UINT64_MAX, total = 0;
	char line[1024], clients[900];
	size_t at = 0;

	for (int h = 0; h < 2; h++) {
		for (int k = 0; k < l->n; k++) {
			uint64_t d = __atomic_load_n(&l->cl[h][k].done,
						     __ATOMIC_RELAXED);
			total += d;
			if (d - l->cl[h][k].at_mark < min)
				min = d - l->cl[h][k].at_mark;
			at += (size_t)snprintf(
			    clients + at, sizeof(clients) - at,
			    " %c%d:%" PRIu64 ":%c:%s", host_name[h], k, d,
			    l->cl[h][k].doing,
			    rma_strerror(l->cl[h][k].last_failure));
			if (at >= sizeof(clients))
				at = sizeof(clients) - 1;
		}
	}
	snprintf(line, sizeof(line), "%ld %" PRIu64 " %" PRIu64 "%s\n", l->mark,
		 min, total, clients);
	write_file(l->dir, "progress", line, strlen(line));
}

static void
report(struct loader *l, uint64_t bad_mapped, uint64_t checked)
{
	uint64_t puts = 0, gets = 0, retried_ok = 0, errors = 0, bad = 0;
	uint64_t by_status[N_STATUS] = {0}, retries = 0;

	for (int h = 0; h < 2; h++) {
		for (int k = 0; k < l->n; k++) {
			struct client *c = &l->cl[h][k];

			puts += c->puts_ok;
			gets += c->gets_ok;
			retried_ok += c->retried_ok;
			errors += c->errors;
			bad += c->bad_slots;
			for (int s = 0; s < N_STATUS; s++) {
				by_status[s] += c->retriable[s];
				retries += c->retriable[s];
			}
			printf("restart_load: client %c%d: %" PRIu64
			       " puts, %" PRIu64 " gets completed, %" PRIu64
			       " after a retry, %" PRIu64 " errors%s%s\n",
			       host_name[h], k, c->puts_ok, c->gets_ok,
			       c->retried_ok, c->errors,
			       c->first_error[0] ? ": " : "", c->first_error);
		}
	}
	printf("restart_load: %" PRIu64 " puts and %" PRIu64
	       " gets completed; %" PRIu64 " operations completed after "
	       "%" PRIu64 " retriable failures (",
	       puts, gets, retried_ok, retries);
	for (int s = 0, first = 1; s < N_STATUS; s++) {
		if (by_status[s] == 0)
			continue;
		printf("%s%s %" PRIu64, first ? "" : ", ",
		       rma_strerror((rma_status_t)-s), by_status[s]);
		first = 0;
	}
	printf("); %" PRIu64 " other errors; %" PRIu64 " wrong gets; %" PRIu64
	       " of %" PRIu64 " slots wrong in their owners' mappings\n",
	       errors - bad, bad, bad_mapped, checked);
}

int
main(int argc, char **argv)
{
	struct loader l = {0};
	uint64_t bad_mapped = 0, checked = 0, errors = 0;
	struct sigaction sa = {.sa_handler = on_signal};
	double deadline;
	int rc = 1;

	if (argc != 8) {
		fprintf(stderr, "usage: restart_load DIR SOCK_A ADDR_A SOCK_B "
				"ADDR_B CLIENTS SECONDS\n");
		return 2;
	}
	l.dir = argv[1];
	l.sock[0] = argv[2];
	l.addr[0] = argv[3];
	l.sock[1] = argv[4];
	l.addr[1] = argv[5];
	l.n = atoi(argv[6]);
	l.deadline = monotime_s() + atof(argv[7]);
	if (l.n < 1 || l.n > MAX_CLIENTS)
		return 2;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	for (int h = 0; h < 2; h++)
		for (int k = 0; k < l.n; k++)
			if (loader_client_open(&l, h, k) < 0)
				goto out;
	for (int h = 0; h < 2; h++) {
		for (int k = 0; k < l.n; k++) {
			struct client *c = &l.cl[h][k];
			if (import_all(&l, c->c, h, &c->peer, c->remote) < 0)
				goto out;
		}
	}
	for (int h = 0; h < 2; h++)
		for (int k = 0; k < l.n; k++)
			pthread_create(&l.cl[h][k].thread, NULL, client_run,
				       &l.cl[h][k]);
	l.mark = -1;
	while (!stop_load && !stop_all && monotime_s() < l.deadline) {
		read_mark(&l);
		write_progress(&l);
		pause_until(0.01, l.deadline);
	}
	stop_load = 1;
	for (int h = 0; h < 2; h++)
		for (int k = 0; k < l.n; k++)
			pthread_join(l.cl[h][k].thread, NULL);
	write_progress(&l);

	bad_mapped = verify_mappings(&l, &checked);
	report(&l, bad_mapped, checked);
	for (int h = 0; h < 2; h++)
		for (int k = 0; k < l.n; k++)
			errors += l.cl[h][k].errors;
	if (verify_descriptors(&l) < 0)
		goto out;
	/* what each region's slots must hold now, for rmactl */
	for (int h = 0; h < 2; h++) {
		for (int i = 0; i < l.n; i++) {
			char name[32];
			snprintf(name, sizeof(name), "expect.%c.%d",
				 host_name[h], i);
			if (write_file(l.dir, name,
				       rma_region_ptr(l.cl[h][i].region),
				       slots_size(l.n)) < 0)
				goto out;
		}
	}
	bad_mapped += verify_mappings(&l, &checked);
	if (write_file(l.dir, "verified", "ok\n", 3) < 0)
		goto out;
	printf("restart_load: descriptor files of all %d regions read and "
	       "written by fresh clients\n",
	       2 * l.n);
	fflush(stdout);
	/* The regions live as long as their owners: until SIGUSR2. */
	deadline = monotime_s() + 60.0;
	while (!stop_all && monotime_s() < deadline) {
		for (int h = 0; h < 2; h++)
			for (int k = 0; k < l.n; k++)
				rma_progress(l.cl[h][k].c);
		pause_until(0.01, deadline);
	}
	rc = bad_mapped == 0 && errors == 0 ? 0 : 1;
out:
	for (int h = 0; h < 2; h++)
		for (int k = 0; k < l.n; k++)
			if (l.cl[h][k].c != NULL)
				rma_disconnect(l.cl[h][k].c);
	fflush(stdout);
	return rc;
}
