/* Failures, for real: peers killed, frozen and restarted, clients killed or
 * not reading, daemons terminated or killed with operations in flight.
 * Real rmad processes on loopback; every wait has a deadline, and the
 * times that matter are measured and printed ("faults: ..." on stderr).
 * Links the static library: the tests look at rma_internal.h's state
 * (PeerEvents recorded on a peer, submissions still coalesced). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "descriptor.h"
#include "frame.h"
#include "harness.h"
#include "rma.h"
#include "rma_internal.h"
#include "status_call.h"

#define WAIT_MS 10000
#define REGION (1u << 20)

static struct daemon_proc da, db, dc;
static rma_client_t *clients[16];
static int n_clients;

static rma_client_t *
track(rma_client_t *c)
{
	ck_assert_int_lt(n_clients, 16);
	clients[n_clients++] = c;
	return c;
}

/* Clients go first; then every daemon still running, whatever it went
 * through, must shut down cleanly on SIGTERM (exit 0: under the
 * sanitizers that also means no leak and no error). */
static void
teardown(void)
{
	struct daemon_proc *ds[] = {&da, &db, &dc};
	const char *bad = NULL;
	int status;

	for (int i = 0; i < n_clients; i++)
		rma_disconnect(clients[i]);
	n_clients = 0;
	for (int i = 0; i < 3; i++) {
		if (ds[i]->pid > 0) {
			kill(ds[i]->pid, SIGCONT);
			kill(ds[i]->pid, SIGTERM);
		}
	}
	for (int i = 0; i < 3; i++) {
		if (ds[i]->pid <= 0)
			continue;
		if (!harness_daemon_wait_exit(ds[i], 10, &status)) {
			harness_daemon_kill(ds[i]);
			bad = "an rmad did not exit within 10 s of SIGTERM";
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			bad = "an rmad did not exit 0 on SIGTERM";
		}
	}
	ck_assert_msg(bad == NULL, "%s", bad);
}

/* ---- helpers ------------------------------------------------------------ */

/* Completions by status, and when the first and last arrived. */
struct tally {
	int done, ok, reset, canceled, timeout, shutdown, gone, other;
	rma_status_t other_status;
	double first, last;
};

static void
tally_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	struct tally *t = arg;
	double now = harness_now();

	if (t->done++ == 0)
		t->first = now;
	t->last = now;
	switch (st) {
	case RMA_OK:
		t->ok++;
		break;
	case RMA_ERR_CONNECTION_RESET:
		t->reset++;
		break;
	case RMA_ERR_CANCELED:
		t->canceled++;
		break;
	case RMA_ERR_TIMEOUT:
		t->timeout++;
		break;
	case RMA_ERR_SHUTDOWN:
		t->shutdown++;
		break;
	case RMA_ERR_DAEMON_GONE:
		t->gone++;
		break;
	default:
		t->other++;
		t->other_status = st;
		break;
	}
}

/* Progress until *done reaches want or the deadline passes; the client may
 * go away meanwhile (its requests then complete with DAEMON_GONE). */
static void
progress_until(rma_client_t *c, const int *done, int want, double seconds)
{
	double deadline = harness_now() + seconds;

	while (*done < want && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		rma_progress(c);
	}
	ck_assert_msg(*done == want,
		      "%d of %d requests completed within %.0f s", *done, want,
		      seconds);
}

/* Sends the submissions the library still coalesces. */
static void
send_pending(rma_client_t *c)
{
	double deadline = harness_now() + 10;

	while (c->pending_n > 0 && harness_now() < deadline)
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	ck_assert_uint_eq(c->pending_n, 0);
}

struct peer_view {
	int found;
	int state; /* Rma__V1__PeerState */
	uint64_t in_flight;
	char last_error[200];
};

/* The daemon's outbound peer at address, as the status request shows it. */
static struct peer_view
status_peer(rma_client_t *c, const char *address)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__StatusReply *st = reply->status_reply;
	struct peer_view v = {0};

	for (size_t i = 0; i < st->n_peers; i++) {
		Rma__V1__PeerInfo *p = st->peers[i];
		if (p->inbound || strcmp(p->address, address) != 0)
			continue;
		v.found = 1;
		v.state = p->state;
		v.in_flight = p->in_flight;
		snprintf(v.last_error, sizeof(v.last_error), "%s",
			 p->last_error ? p->last_error : "");
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	return v;
}

static void
status_counts(rma_client_t *c, size_t *regions, size_t *clients)
{
	Rma__V1__Reply *reply = status_call(c);

	*regions = reply->status_reply->n_regions;
	*clients = reply->status_reply->n_clients;
	rma__v1__reply__free_unpacked(reply, NULL);
}

/* A client on d with one region of REGION bytes. */
static void
client_with_region(const struct daemon_proc *d, rma_client_t **c_p,
		   rma_region_t **r_p)
{
	ck_assert_int_eq(rma_connect(d->socket, c_p), RMA_OK);
	track(*c_p);
	ck_assert_int_eq(rma_region_alloc(*c_p, REGION, r_p), RMA_OK);
}

static void
import_from(rma_client_t *c, const struct daemon_proc *owner,
	    const rma_region_t *r, rma_peer_t **peer_p, rma_remote_t **rem_p)
{
	ck_assert_int_eq(rma_peer_connect(c, owner->listen, peer_p), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(c, *peer_p, rma_region_descriptor(r), rem_p),
	    RMA_OK);
}

/* A put whose bytes are then checked in the owner's mapping. */
static void
put_and_check(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
	      const rma_region_t *target, uint64_t off, size_t n, uint32_t seed)
{
	uint8_t *src = rma_region_ptr(local);

	harness_fill(src, n, seed);
	ck_assert_int_eq(rma_put_sync(c, local, 0, rem, off, n,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(
	    memcmp((uint8_t *)rma_region_ptr(target) + off, src, n), 0);
}

static double
ms(double seconds)
{
	return seconds * 1000.0;
}

/* Fails the test, saying how, if the daemon exits within seconds. */
static void
assert_alive(struct daemon_proc *d, double seconds, const char *what)
{
	int status = 0;

	if (!harness_daemon_wait_exit(d, seconds, &status))
		return;
	if (WIFSIGNALED(status))
		ck_abort_msg("rmad on %s died of signal %d %s", d->listen,
			     WTERMSIG(status), what);
	ck_abort_msg("rmad on %s exited with status %d %s", d->listen,
		     WEXITSTATUS(status), what);
}

/* The usual setup: daemons A and B, a client with a region on each, and
 * B's client holding a remote on A's region. */
static void
two_daemons(const char *const *flags_a, const char *const *flags_b,
	    rma_client_t **ca, rma_region_t **ra, rma_client_t **cb,
	    rma_region_t **rb, rma_peer_t **pa, rma_remote_t **rema)
{
	harness_daemon_start(&da, flags_a);
	harness_daemon_start(&db, flags_b);
	client_with_region(&da, ca, ra);
	client_with_region(&db, cb, rb);
	import_from(*cb, &da, *ra, pa, rema);
}

/* ---- 1. a peer killed with thousands of operations in flight ------------ */

START_TEST(test_peer_killed_in_flight)
{
	enum { N = 4000, GETS = 1000, SZ = 65536 };
	static const char *const flags[] = {"--connect-timeout", "2", NULL};
	rma_client_t *ca, *cb, *cc, *cb2;
	rma_region_t *ra, *rb, *rc, *r2;
	rma_peer_t *pa, *pc;
	rma_remote_t *rema, *remc;
	struct tally t = {0};
	struct peer_view v;
	rma_status_t st;
	double t0, t1;

	harness_daemon_start(&da, flags);
	harness_daemon_start(&db, flags);
	harness_daemon_start(&dc, flags);
	client_with_region(&da, &ca, &ra);
	client_with_region(&dc, &cc, &rc);
	client_with_region(&db, &cb, &rb);
	import_from(cb, &da, ra, &pa, &rema);
	import_from(cb, &dc, rc, &pc, &remc);
	put_and_check(cb, rb, rema, ra, 0, 4096, 1);
	put_and_check(cb, rb, remc, rc, 0, 4096, 2);

	/* Puts, gets and a flush, all on the peer about to die. */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(
		    rma_put(cb, rb, 0, rema, 0, SZ, 0, tally_cb, &t, NULL),
		    RMA_OK);
	for (int i = 0; i < GETS; i++)
		ck_assert_int_eq(
		    rma_get(cb, rb, SZ, rema, SZ, SZ, tally_cb, &t, NULL),
		    RMA_OK);
	ck_assert_int_eq(rma_flush(cb, pa, tally_cb, &t, NULL), RMA_OK);
	send_pending(cb);
	t0 = harness_now();
	kill(da.pid, SIGKILL);
	progress_until(cb, &t.done, N + GETS + 1, 10);
	fprintf(stderr,
		"faults: peer kill -> last completion: %.1f ms (%d of %d "
		"failed: %d reset, %d canceled)\n",
		ms(t.last - t0), N + GETS + 1 - t.ok, N + GETS + 1, t.reset,
		t.canceled);
	ck_assert_msg(t.timeout + t.shutdown + t.gone + t.other == 0,
		      "unexpected completions: %d timeout, %d other (%s)",
		      t.timeout, t.other, rma_strerror(t.other_status));
	ck_assert_msg(t.ok < N, "every put finished before the kill");
	ck_assert_double_lt(t.last - t0, 2.0);
	ck_assert(harness_daemon_wait_exit(&da, 5, NULL));

	/* The library recorded the daemon's PeerEvent. */
	ck_assert_int_eq(pa->state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_msg(pa->status == RMA_ERR_CONNECTION_RESET ||
			  pa->status == RMA_ERR_CANCELED,
		      "peer event status %s", rma_strerror(pa->status));
	ck_assert(pa->detail != NULL && pa->detail[0] != '\0');
	ck_assert_int_eq(pc->state, RMA__V1__PEER_STATE__PEER_UP);

	/* A new operation on the dead peer fails at once. */
	t1 = harness_now();
	st = rma_put_sync(cb, rb, 0, rema, 0, 8, 0, WAIT_MS);
	ck_assert_msg(st != RMA_OK && st != RMA_ERR_TIMEOUT,
		      "put to a dead peer: %s", rma_strerror(st));
	ck_assert_double_lt(harness_now() - t1, 1.0);
	v = status_peer(cb, da.listen);
	ck_assert(v.found);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_str_ne(v.last_error, "");

	/* The other peer, from the same client, and other clients, work. */
	put_and_check(cb, rb, remc, rc, 12345, 65536, 3);
	memset(rma_region_ptr(rb), 0, 65536);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, remc, 12345, 65536, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb),
				(uint8_t *)rma_region_ptr(rc) + 12345, 65536),
			 0);
	client_with_region(&db, &cb2, &r2);
	ck_assert_int_eq(status_peer(cb2, dc.listen).state,
			 RMA__V1__PEER_STATE__PEER_UP);
}
END_TEST

struct inbound_count {
	rma_client_t *c;
	int n;
	int gone; /* the daemon stopped answering */
};

static int
one_inbound_peer(void *arg)
{
	struct inbound_count *ic = arg;
	Rma__V1__Reply *reply = status_call(ic->c);

	ic->n = 0;
	for (size_t i = 0; i < reply->status_reply->n_peers; i++)
		ic->n += reply->status_reply->peers[i]->inbound;
	rma__v1__reply__free_unpacked(reply, NULL);
	return ic->n == 1;
}

/* ---- 1b. the initiating daemon killed with puts in flight to a target ---- */

static int
no_inbound_peer_or_dead(void *arg)
{
	struct inbound_count *ic = arg;

	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__StatusRequest body = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Reply *reply = NULL;

	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &body;
	if (rma_client_call(ic->c, &req, &reply) != RMA_OK)
		return ic->gone = 1; /* A is gone: the caller says how */
	ic->n = 0;
	for (size_t i = 0; i < reply->status_reply->n_peers; i++)
		ic->n += reply->status_reply->peers[i]->inbound;
	rma__v1__reply__free_unpacked(reply, NULL);
	return ic->n == 0;
}

START_TEST(test_initiator_killed_in_flight)
{
	enum { N = 4000, SZ = 65536 };
	rma_client_t *ca, *cb, *cc;
	rma_region_t *ra, *rb, *rc;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct inbound_count inbound = {0};
	double t0;

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, SZ, 1);
	/* A busy target (here: a stopped one) has the puts of the
	 * initiator waiting in its socket buffers when the initiator dies. */
	kill(da.pid, SIGSTOP);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, rema,
					 (uint64_t)(i % 8) * SZ, SZ,
					 i % 2 ? RMA_FLAG_REMOTE_COMPLETION : 0,
					 NULL, NULL, NULL),
				 RMA_OK);
	send_pending(cb);
	t0 = harness_now();
	harness_daemon_stop(&db, SIGKILL);
	kill(da.pid, SIGCONT);
	/* The target forgets the dead initiator and lives on. */
	inbound.c = ca;
	ck_assert_msg(harness_until(5, no_inbound_peer_or_dead, &inbound),
		      "A still shows %d inbound peers 5 s after B died",
		      inbound.n);
	assert_alive(&da, inbound.gone ? 2 : 0,
		     "after the daemon putting to it was killed");
	fprintf(stderr, "faults: initiator kill -> target forgot it: %.1f ms\n",
		ms(harness_now() - t0));
	harness_daemon_start(&dc, NULL);
	client_with_region(&dc, &cc, &rc);
	import_from(cc, &da, ra, &pa, &rema);
	put_and_check(cc, rc, rema, ra, 0, SZ, 2);
}
END_TEST

/* ---- 2. a frozen peer: deadlines, then reconnect with the same handle ---- */

/* Retries a put on the same handle until it succeeds; 0 past deadline. */
static int
put_until_ok(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
	     uint64_t off, size_t n, double deadline, int *attempts_p,
	     double *worst_p, rma_status_t *st_p)
{
	for (;;) {
		double a = harness_now();
		rma_status_t st =
		    rma_put_sync(c, local, 0, rem, off, n,
				 RMA_FLAG_REMOTE_COMPLETION, WAIT_MS);
		(*attempts_p)++;
		*st_p = st;
		if (st == RMA_OK)
			return 1;
		if (harness_now() - a > *worst_p)
			*worst_p = harness_now() - a;
		if (harness_now() >= deadline)
			return 0;
		harness_pause(0.02, deadline);
	}
}

START_TEST(test_peer_frozen_then_continued)
{
	struct inbound_count inbound = {0};
	enum { N = 500, SZ = 4096 };
	static const char *const flags_b[] = {"--op-timeout", "1",
					      "--connect-timeout", "1", NULL};
	rma_client_t *ca, *cb, *cb2;
	rma_region_t *ra, *ra2, *rb, *rb2;
	rma_peer_t *pa, *pa2, *again;
	rma_remote_t *rema, *rema2;
	struct tally t1 = {0}, t2 = {0};
	struct peer_view v;
	rma_status_t st = RMA_ERR_INTERNAL;
	double t0, deadline, worst = 0;
	int attempts = 0;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, flags_b);
	client_with_region(&da, &ca, &ra);
	ck_assert_int_eq(rma_region_alloc(ca, REGION, &ra2), RMA_OK);
	client_with_region(&db, &cb, &rb);
	client_with_region(&db, &cb2, &rb2);
	import_from(cb, &da, ra, &pa, &rema);
	import_from(cb2, &da, ra2, &pa2, &rema2);
	put_and_check(cb, rb, rema, ra, 0, SZ, 1);
	put_and_check(cb2, rb2, rema2, ra2, 0, SZ, 2);

	kill(da.pid, SIGSTOP);
	t0 = harness_now();
	/* Remote completion: nothing completes without the frozen peer.
	 * A first batch now, a second one half a deadline later: the first
	 * times out, the second goes with the force-closed endpoint. */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, (uint64_t)(i % 256) * SZ, rema,
					 (uint64_t)(i % 256) * SZ, SZ,
					 RMA_FLAG_REMOTE_COMPLETION, tally_cb,
					 &t1, NULL),
				 RMA_OK);
	send_pending(cb);
	deadline = t0 + 0.5;
	while (harness_now() < deadline) {
		harness_wait_fd(rma_fd(cb2), deadline - harness_now());
		ck_assert_int_eq(rma_progress(cb2), RMA_OK);
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb2, rb2, 0, rema2, 0, SZ,
					 RMA_FLAG_REMOTE_COMPLETION, tally_cb,
					 &t2, NULL),
				 RMA_OK);
	send_pending(cb2);
	progress_until(cb, &t1.done, N, 6);
	progress_until(cb2, &t2.done, N, 6);
	fprintf(stderr,
		"faults: peer SIGSTOP -> timeout: %.1f ms (op timeout 1 s; "
		"first batch %d timed out; second batch %d canceled, %d timed "
		"out, last at %.1f ms)\n",
		ms(t1.first - t0), t1.timeout, t2.canceled, t2.timeout,
		ms(t2.last - t0));
	ck_assert_int_eq(t1.timeout, N);
	ck_assert_msg(t2.ok + t2.reset + t2.shutdown + t2.gone + t2.other == 0,
		      "unexpected completions: %d ok, %d reset, %d other (%s)",
		      t2.ok, t2.reset, t2.other, rma_strerror(t2.other_status));
	ck_assert_int_gt(t2.canceled, 0);
	ck_assert_double_ge(t1.first - t0, 0.9);
	ck_assert_double_lt(t1.last - t0, 2.0);
	ck_assert_double_lt(t2.last - t0, 2.0);

	/* Down, with the reason, in the PeerEvent and in the status. */
	ck_assert_int_eq(pa->state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_int_eq(pa->status, RMA_ERR_TIMEOUT);
	ck_assert(pa->detail != NULL && strstr(pa->detail, "within") != NULL);
	ck_assert_int_eq(pa2->state, RMA__V1__PEER_STATE__PEER_DOWN);
	v = status_peer(cb, da.listen);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_msg(strstr(v.last_error, "within") != NULL, "last error: %s",
		      v.last_error);

	/* An explicit connect to the frozen peer fails within the connect
	 * deadline, and says why. */
	deadline = harness_now();
	st = rma_peer_connect(cb, da.listen, &again);
	ck_assert_msg(st != RMA_OK, "connect to a frozen peer succeeded");
	ck_assert_double_lt(harness_now() - deadline, 3.0);
	ck_assert_str_ne(rma_last_error(cb), "");
	v = status_peer(cb, da.listen);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_str_ne(v.last_error, "");

	/* Thawed: the same remote handles work again, same clients. */
	kill(da.pid, SIGCONT);
	t0 = harness_now();
	deadline = t0 + 10;
	harness_fill(rma_region_ptr(rb), SZ, 77);
	harness_fill(rma_region_ptr(rb2), SZ, 78);
	ck_assert_msg(put_until_ok(cb, rb, rema, 100, SZ, deadline, &attempts,
				   &worst, &st),
		      "no put succeeded within 10 s: %s (%s)", rma_strerror(st),
		      rma_last_error(cb));
	fprintf(stderr,
		"faults: SIGCONT -> put ok again: %.1f ms (%d attempts, failed "
		"ones took at most %.1f ms)\n",
		ms(harness_now() - t0), attempts, ms(worst));
	ck_assert_msg(put_until_ok(cb2, rb2, rema2, 200, SZ, deadline,
				   &attempts, &worst, &st),
		      "second client: no put succeeded within 10 s: %s (%s)",
		      rma_strerror(st), rma_last_error(cb2));
	ck_assert_double_lt(worst, 1.5);
	/* The reconnect was announced: the peer is up again for the client. */
	ck_assert_int_eq(rma_progress(cb), RMA_OK);
	ck_assert_int_eq(rma_peer_status(pa), RMA_OK);
	ck_assert_int_eq(
	    memcmp((uint8_t *)rma_region_ptr(ra) + 100, rma_region_ptr(rb), SZ),
	    0);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(ra2) + 200,
				rma_region_ptr(rb2), SZ),
			 0);
	v = status_peer(cb, da.listen);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_UP);
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &again), RMA_OK);
	ck_assert_ptr_eq(again, pa);
	ck_assert_int_eq(pa->state, RMA__V1__PEER_STATE__PEER_UP);
	/* A, thawed, holds one inbound peer (B), not one per connect that
	 * B gave up on while A was frozen. */
	inbound.c = ca;
	ck_assert_msg(harness_until(5, one_inbound_peer, &inbound),
		      "A shows %d inbound peers 5 s after it was thawed",
		      inbound.n);
}
END_TEST

/* ---- 2b. a descriptor resolved through a frozen peer --------------------- */

START_TEST(test_import_from_frozen_peer)
{
	static const char *const flags_b[] = {"--op-timeout", "1",
					      "--connect-timeout", "1", NULL};
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__RemoteImport body = RMA__V1__REMOTE_IMPORT__INIT;
	Rma__V1__Reply *reply = NULL;
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_status_t st;
	double t0;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, flags_b);
	client_with_region(&da, &ca, &ra);
	client_with_region(&db, &cb, &rb);
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &pa), RMA_OK);
	kill(da.pid, SIGSTOP);
	/* The resolve waits for the owner's answer, which never comes: it
	 * must fail like an operation would, not wait for good. */
	body.peer_id = pa->peer_id;
	body.descriptor = (char *)rma_region_descriptor(ra);
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_IMPORT;
	req.remote_import = &body;
	t0 = harness_now();
	st = client_call(cb, &req, 5000, &reply, NULL);
	fprintf(stderr, "faults: import through a frozen peer -> %s: %.1f ms\n",
		rma_strerror(st), ms(harness_now() - t0));
	if (reply != NULL)
		rma__v1__reply__free_unpacked(reply, NULL);
	ck_assert_msg(st != RMA_OK, "import through a frozen peer succeeded");
	ck_assert_msg(harness_now() - t0 < 2.5,
		      "import through a frozen peer got no answer from rmad "
		      "within 2.5 s (op timeout 1 s): %s",
		      rma_strerror(st));
}
END_TEST

/* Leaves a connection in TIME_WAIT on 127.0.0.1:port, as a daemon killed
 * while peers were connected to its listener does when its side closed
 * first: for a minute, only a listener with SO_REUSEADDR can bind. */
static void
time_wait_on(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int one = 1, lfd, fd, afd;
	char c;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	{
		struct sockaddr_in me = {.sin_family = AF_INET,
					 .sin_port = htons(port)};
		me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)),
				 0);
	}
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	afd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(afd, 0);
	close(fd); /* the active close: TIME_WAIT is on this side */
	ck_assert(harness_wait_fd(afd, 5) && read(afd, &c, 1) == 0);
	close(afd);
	close(lfd);
}

/* ---- 3. a peer restarted on the same port ------------------------------- */

START_TEST(test_peer_restarted)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};
	static const uint8_t zeros[8];
	char old_desc[DESCRIPTOR_TEXT_SIZE + 1];
	rma_client_t *ca, *cb, *ca2;
	rma_region_t *ra, *rb, *ra2;
	rma_peer_t *pa, *again;
	rma_remote_t *rema, *rem2;
	rma_status_t st = RMA_OK;
	double t0, deadline;

	two_daemons(flags, flags, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 4096, 1);
	snprintf(old_desc, sizeof(old_desc), "%s", rma_region_descriptor(ra));

	harness_daemon_stop(&da, SIGKILL);
	t0 = harness_now();
	/* What a crash leaves behind when A's side of a connection closed
	 * first (seen with rmactl on loopback and between namespaces). */
	time_wait_on(da.port);
	harness_daemon_restart(&da, flags);
	fprintf(stderr,
		"faults: peer restart on its port: ready after %.1f ms\n",
		ms(harness_now() - t0));
	client_with_region(&da, &ca2, &ra2);
	ck_assert_str_ne(rma_daemon_id(ca2), rma_daemon_id(ca));

	/* The old handle: a peer error until reconnected, then stale. */
	deadline = t0 + 10;
	while (harness_now() < deadline) {
		st = rma_put_sync(cb, rb, 0, rema, 0, 8, 0, WAIT_MS);
		if (st != RMA_ERR_CONNECTION_RESET && st != RMA_ERR_CANCELED &&
		    st != RMA_ERR_UNREACHABLE && st != RMA_ERR_TIMEOUT &&
		    st != RMA_ERR_REJECTED)
			break;
		harness_pause(0.02, deadline);
	}
	fprintf(stderr, "faults: peer restart -> old handle stale: %.1f ms\n",
		ms(harness_now() - t0));
	ck_assert_msg(st == RMA_ERR_STALE_DESCRIPTOR, "old handle: %s (%s)",
		      rma_strerror(st), rma_last_error(cb));
	/* The new daemon's first region has the old one's id and generation:
	 * nothing of the old handle's puts may land there. */
	ck_assert_mem_eq(rma_region_ptr(ra2), zeros, sizeof(zeros));
	ck_assert_int_eq(rma_remote_import(cb, pa, old_desc, &rem2),
			 RMA_ERR_STALE_DESCRIPTOR);
	ck_assert_msg(strstr(rma_last_error(cb), "restarted") != NULL,
		      "import of an old descriptor: %s", rma_last_error(cb));

	/* The new daemon's regions work, through the same peer handle. */
	ck_assert_int_eq(
	    rma_remote_import(cb, pa, rma_region_descriptor(ra2), &rem2),
	    RMA_OK);
	put_and_check(cb, rb, rem2, ra2, 777, 100000, 2);
	memset(rma_region_ptr(rb), 0, 100000);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, rem2, 777, 100000, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb),
				(uint8_t *)rma_region_ptr(ra2) + 777, 100000),
			 0);
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &again), RMA_OK);
	ck_assert_ptr_eq(again, pa);
	ck_assert_str_eq(pa->daemon_id, rma_daemon_id(ca2));
	/* The old daemon's client is gone for good. */
	ck_assert_int_eq(rma_progress(ca), RMA_ERR_DAEMON_GONE);
}
END_TEST

/* ---- 5. a client killed mid-transfer ------------------------------------ */

/* A client process on `socket` that imports desc through peer, then (once
 * go_fd, if not -1, is readable) submits 4000 puts of 64 KiB with flags,
 * says so on ready_fd and waits to be killed, never reading. */
static void
doomed_client(int ready_fd, int go_fd, const char *socket, const char *peer,
	      const char *desc, unsigned flags)
{
	rma_client_t *c;
	rma_region_t *r[4];
	rma_peer_t *p;
	rma_remote_t *rem;
	double deadline = harness_now() + 10;
	char x;

	if (rma_connect(socket, &c) != RMA_OK)
		_exit(10);
	for (int i = 0; i < 4; i++)
		if (rma_region_alloc(c, REGION, &r[i]) != RMA_OK)
			_exit(11);
	if (rma_peer_connect(c, peer, &p) != RMA_OK ||
	    rma_remote_import(c, p, desc, &rem) != RMA_OK)
		_exit(12);
	if (go_fd >= 0) {
		if (write(ready_fd, "i", 1) != 1 ||
		    !harness_wait_fd(go_fd, 10) || read(go_fd, &x, 1) != 1)
			_exit(13);
	}
	for (int i = 0; i < 4000; i++)
		if (rma_put(c, r[i % 4], 0, rem, 0, 65536, flags, NULL, NULL,
			    NULL) != RMA_OK)
			_exit(14);
	while (c->pending_n > 0 && harness_now() < deadline)
		rma_progress(c);
	if (write(ready_fd, "x", 1) != 1)
		_exit(15);
	/* Never reads its completions; killed long before this passes. */
	harness_pause(30, harness_now() + 30);
	_exit(0);
}

/* What a daemon holds for its clients, before and after one is killed;
 * the baseline has nothing in flight. */
struct baseline {
	rma_client_t *c;
	pid_t pid;
	size_t regions, clients;
	int fds;
	size_t now_regions, now_clients;
	int now_fds;
	uint64_t now_in_flight;
};

static int
back_to_baseline(void *arg)
{
	struct baseline *b = arg;
	Rma__V1__Reply *reply = status_call(b->c);

	b->now_regions = reply->status_reply->n_regions;
	b->now_clients = reply->status_reply->n_clients;
	b->now_in_flight = reply->status_reply->ops_in_flight;
	rma__v1__reply__free_unpacked(reply, NULL);
	b->now_fds = harness_fd_count(b->pid);
	return b->now_regions == b->regions && b->now_clients == b->clients &&
	       b->now_fds == b->fds && b->now_in_flight == 0;
}

START_TEST(test_client_killed_mid_transfer)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb, *r;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct baseline b = {0};
	size_t regions, clients;
	int pipefd[2], wstatus;
	pid_t child;
	char x;
	double t0;

	/* The endpoint to A exists before the baseline is taken. */
	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 65536, 1);
	b.c = cb;
	b.pid = db.pid;
	status_counts(cb, &b.regions, &b.clients);
	b.fds = harness_fd_count(db.pid);
	ck_assert_int_gt(b.fds, 0);

	ck_assert_int_eq(pipe(pipefd), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(pipefd[0]);
		doomed_client(pipefd[1], -1, db.socket, da.listen,
			      rma_region_descriptor(ra), 0);
	}
	close(pipefd[1]);
	ck_assert_msg(harness_wait_fd(pipefd[0], 10) &&
			  read(pipefd[0], &x, 1) == 1,
		      "the client did not get its puts out");
	status_counts(cb, &regions, &clients);
	ck_assert_uint_eq(regions, b.regions + 4);
	ck_assert_uint_eq(clients, b.clients + 1);
	kill(child, SIGKILL);
	t0 = harness_now();
	ck_assert_int_eq(waitpid(child, &wstatus, 0), child);
	ck_assert(WIFSIGNALED(wstatus));
	close(pipefd[0]);

	ck_assert_msg(harness_until(10, back_to_baseline, &b),
		      "after 10 s: %zu regions (was %zu), %zu clients (was "
		      "%zu), %d fds (was %d), %llu ops in flight",
		      b.now_regions, b.regions, b.now_clients, b.clients,
		      b.now_fds, b.fds, (unsigned long long)b.now_in_flight);
	fprintf(stderr,
		"faults: client kill -> drained, regions and fds back: %.1f "
		"ms\n",
		ms(harness_now() - t0));
	/* B keeps serving. */
	put_and_check(cb, rb, rema, ra, 4096, 65536, 2);
	ck_assert_int_eq(rma_region_alloc(cb, 4096, &r), RMA_OK);
	ck_assert_int_eq(rma_region_free(cb, r), RMA_OK);
}
END_TEST

static int
back_to_baseline_but_fds(void *arg)
{
	struct baseline *b = arg;

	back_to_baseline(b);
	return b->now_regions == b->regions && b->now_clients == b->clients &&
	       b->now_in_flight == 0 && b->now_fds <= b->fds;
}

/* ---- 5c. a client killed with its operations stuck on a frozen peer ---- */

START_TEST(test_client_killed_on_frozen_peer)
{
	static const char *const flags_b[] = {"--op-timeout", "1", NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct baseline b = {0};
	int ready[2], go[2], attempts = 0, fds;
	double t0, worst = 0;
	rma_status_t st;
	pid_t child;
	char x;

	two_daemons(NULL, flags_b, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 65536, 1);
	b.c = cb;
	b.pid = db.pid;
	status_counts(cb, &b.regions, &b.clients);
	b.fds = harness_fd_count(db.pid);

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(ready[0]);
		close(go[1]);
		doomed_client(ready[1], go[0], db.socket, da.listen,
			      rma_region_descriptor(ra),
			      RMA_FLAG_REMOTE_COMPLETION);
	}
	close(ready[1]);
	close(go[0]);
	ck_assert(harness_wait_fd(ready[0], 10) && read(ready[0], &x, 1) == 1);
	kill(da.pid, SIGSTOP);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	ck_assert_msg(harness_wait_fd(ready[0], 10) &&
			  read(ready[0], &x, 1) == 1,
		      "the client did not get its puts out");
	ck_assert_uint_gt(status_peer(cb, da.listen).in_flight, 0);
	kill(child, SIGKILL);
	t0 = harness_now();
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	close(ready[0]);
	close(go[1]);
	/* Its regions wait for its operations, which fail at the deadline
	 * and take the endpoint (and its descriptors) along: fds are
	 * compared once the peer is back. */
	fds = b.fds;
	ck_assert_msg(harness_until(5, back_to_baseline_but_fds, &b),
		      "after 5 s: %zu regions (was %zu), %zu clients (was "
		      "%zu), %d fds (was %d), %llu ops in flight",
		      b.now_regions, b.regions, b.now_clients, b.clients,
		      b.now_fds, b.fds, (unsigned long long)b.now_in_flight);
	fprintf(stderr,
		"faults: client kill with puts stuck on a frozen peer -> "
		"drained, regions and fds back: %.1f ms (op timeout 1 s)\n",
		ms(harness_now() - t0));
	b.fds = fds;
	kill(da.pid, SIGCONT);
	if (!put_until_ok(cb, rb, rema, 0, 65536, harness_now() + 10, &attempts,
			  &worst, &st)) {
		assert_alive(&da, 0,
			     "once thawed, its initiator having "
			     "force-closed the endpoint");
		ck_abort_msg("no put succeeded within 10 s of SIGCONT: %s",
			     rma_strerror(st));
	}
	ck_assert_msg(harness_until(5, back_to_baseline, &b),
		      "5 s after the peer came back: %d fds (was %d)",
		      b.now_fds, b.fds);
}
END_TEST

/* ---- 5b. the owner of the target region killed mid-transfer -------------- */

static void
doomed_owner(int fd, const char *socket)
{
	char desc[DESCRIPTOR_TEXT_SIZE] = "";
	rma_client_t *c;
	rma_region_t *r;

	if (rma_connect(socket, &c) != RMA_OK ||
	    rma_region_alloc(c, REGION, &r) != RMA_OK)
		_exit(10);
	snprintf(desc, sizeof(desc), "%s", rma_region_descriptor(r));
	if (write(fd, desc, sizeof(desc)) != (ssize_t)sizeof(desc))
		_exit(11);
	harness_pause(30, harness_now() + 30); /* killed long before */
	_exit(0);
}

START_TEST(test_owner_killed_mid_transfer)
{
	enum { N = 2000, SZ = 65536 };
	char desc[DESCRIPTOR_TEXT_SIZE];
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rem, *rema;
	struct tally t = {0};
	struct baseline b = {0};
	rma_status_t st = RMA_OK;
	int pipefd[2];
	pid_t child;
	double t0, deadline;

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	/* The lanes a transfer opens exist before the baseline is taken. */
	put_and_check(cb, rb, rema, ra, 0, SZ, 4);
	b.c = ca;
	b.pid = da.pid;
	status_counts(ca, &b.regions, &b.clients);
	b.fds = harness_fd_count(da.pid);

	ck_assert_int_eq(pipe(pipefd), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(pipefd[0]);
		doomed_owner(pipefd[1], da.socket);
	}
	close(pipefd[1]);
	ck_assert_msg(harness_wait_fd(pipefd[0], 10) &&
			  read(pipefd[0], desc, sizeof(desc)) ==
			      (ssize_t)sizeof(desc),
		      "the owner did not send its descriptor");
	close(pipefd[0]);
	ck_assert_int_eq(rma_remote_import(cb, pa, desc, &rem), RMA_OK);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, rem,
					 (uint64_t)(i % 16) * SZ, SZ, 0,
					 tally_cb, &t, NULL),
				 RMA_OK);
	send_pending(cb);
	kill(child, SIGKILL);
	t0 = harness_now();
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	progress_until(cb, &t.done, N, 10);
	ck_assert_msg(
	    t.reset + t.canceled + t.timeout + t.shutdown + t.gone == 0 &&
		(t.other == 0 || t.other_status == RMA_ERR_STALE_DESCRIPTOR),
	    "puts to a dying owner: %d reset, %d other (%s)", t.reset, t.other,
	    rma_strerror(t.other_status));
	/* The owner's daemon tells the initiator: then puts are refused. */
	deadline = t0 + 5;
	while (harness_now() < deadline) {
		st = rma_put_sync(cb, rb, 0, rem, 0, 8, 0, WAIT_MS);
		if (st != RMA_OK)
			break;
		harness_pause(0.01, deadline);
	}
	fprintf(stderr, "faults: owner kill -> its region refused: %.1f ms\n",
		ms(harness_now() - t0));
	ck_assert_msg(st == RMA_ERR_STALE_DESCRIPTOR,
		      "put after the owner died: %s", rma_strerror(st));
	ck_assert_msg(harness_until(10, back_to_baseline, &b),
		      "after 10 s: %zu regions (was %zu), %zu clients (was "
		      "%zu), %d fds (was %d), %llu ops in flight",
		      b.now_regions, b.regions, b.now_clients, b.clients,
		      b.now_fds, b.fds, (unsigned long long)b.now_in_flight);
	/* Both daemons live on and serve. */
	ck_assert_int_eq(harness_daemon_wait_exit(&da, 0, NULL), 0);
	put_and_check(cb, rb, rema, ra, 0, SZ, 5);
	ck_assert_int_eq(rma_remote_import(cb, pa, desc, &rem),
			 RMA_ERR_STALE_DESCRIPTOR);
}
END_TEST

/* ---- 6. a client that never reads -------------------------------------- */

static size_t
pack_request(const Rma__V1__Request *req, uint8_t **buf_p)
{
	size_t n = frame_packed_size(&req->base);

	*buf_p = malloc(n);
	ck_assert_ptr_nonnull(*buf_p);
	frame_pack(&req->base, *buf_p);
	return n;
}

START_TEST(test_client_not_reading)
{
	enum { OPS = 256 };
	static const char *const flags_b[] = {"--op-timeout", "1", NULL};
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Hello hello = RMA__V1__HELLO__INIT;
	Rma__V1__Submit submit = RMA__V1__SUBMIT__INIT;
	Rma__V1__Op ops[OPS], *op_ptrs[OPS];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	uint8_t *hello_buf, *submit_buf;
	size_t hello_len, submit_len, at = 0, regions, clients;
	long rss0, rss, rss_max;
	double deadline, stuck_at = 0, closed_at = 0, t;
	uint64_t frames = 0;
	int fd;

	two_daemons(NULL, flags_b, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 4096, 1);
	rss0 = rss_max = harness_rss_kib(db.pid);
	ck_assert_int_gt(rss0, 0);

	hello.protocol_version = RMA_PROTOCOL_VERSION;
	hello.client_name = "never-reads";
	req.id = 1;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &hello;
	hello_len = pack_request(&req, &hello_buf);
	/* Ops naming a region the client does not have: each one costs the
	 * daemon nothing but a completion, which is what piles up. */
	for (int i = 0; i < OPS; i++) {
		rma__v1__op__init(&ops[i]);
		ops[i].op_id = (uint64_t)i + 1;
		ops[i].kind = RMA__V1__OP_KIND__PUT;
		ops[i].region_id = 424242;
		ops[i].remote_id = 1;
		ops[i].length = 8;
		op_ptrs[i] = &ops[i];
	}
	submit.n_ops = OPS;
	submit.ops = op_ptrs;
	req.id = 2;
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &submit;
	submit_len = pack_request(&req, &submit_buf);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", db.socket);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(fd, hello_buf, hello_len, MSG_NOSIGNAL),
			 (ssize_t)hello_len);
	ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);

	deadline = harness_now() + 15;
	while (harness_now() < deadline) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		ssize_t n;
		int rc = poll(&pfd, 1, 100);

		rss = harness_rss_kib(db.pid);
		if (rss > rss_max)
			rss_max = rss;
		if (rc > 0 && (pfd.revents & (POLLHUP | POLLERR))) {
			closed_at = harness_now();
			break;
		}
		if (rc == 0 && stuck_at == 0) {
			/* The daemon stopped reading us. Others are served. */
			stuck_at = harness_now();
			t = harness_now();
			status_counts(cb, &regions, &clients);
			ck_assert_uint_eq(clients, 2);
			put_and_check(cb, rb, rema, ra, 8192, 65536, 2);
			fprintf(stderr,
				"faults: while a client is stuck (%llu frames "
				"sent): status and put took %.1f ms\n",
				(unsigned long long)frames,
				ms(harness_now() - t));
			ck_assert_double_lt(harness_now() - t, 1.0);
			continue;
		}
		if (rc <= 0)
			continue;
		n = send(fd, submit_buf + at, submit_len - at,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			closed_at = harness_now();
			break;
		}
		ck_assert_msg(n >= 0 || errno == EAGAIN || errno == EINTR,
			      "send: %s", strerror(errno));
		if (n > 0) {
			at += (size_t)n;
			if (at == submit_len) {
				at = 0;
				frames++;
			}
		}
	}
	ck_assert_msg(stuck_at > 0, "the daemon never stopped reading");
	ck_assert_msg(closed_at > 0, "the daemon never cut the client off");
	fprintf(stderr,
		"faults: stuck client cut off %.1f ms after its writes "
		"stalled (op timeout 1 s); daemon RSS %ld -> max %ld KiB\n",
		ms(closed_at - stuck_at), rss0, rss_max);
	ck_assert_double_lt(closed_at - stuck_at, 3.0);
	ck_assert_int_lt(rss_max - rss0, 100 * 1024);
	close(fd);
	free(hello_buf);
	free(submit_buf);
	status_counts(cb, &regions, &clients);
	ck_assert_uint_eq(clients, 1);
	put_and_check(cb, rb, rema, ra, 0, 65536, 3);
}
END_TEST

/* ---- 7. SIGTERM with operations stuck on a frozen peer ------------------- */

/* A frozen A, and N remote-completion puts from B's client in flight. */
static void
stuck_puts(const char *const *flags_b, int n, struct tally *t,
	   rma_client_t **cb_p, rma_region_t **rb_p, rma_remote_t **rem_p)
{
	rma_client_t *ca;
	rma_region_t *ra;
	rma_peer_t *pa;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, flags_b);
	client_with_region(&da, &ca, &ra);
	client_with_region(&db, cb_p, rb_p);
	import_from(*cb_p, &da, ra, &pa, rem_p);
	put_and_check(*cb_p, *rb_p, *rem_p, ra, 0, 4096, 1);
	kill(da.pid, SIGSTOP);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(rma_put(*cb_p, *rb_p, 0, *rem_p, 0, 4096,
					 RMA_FLAG_REMOTE_COMPLETION, tally_cb,
					 t, NULL),
				 RMA_OK);
	send_pending(*cb_p);
	ck_assert_uint_eq(status_peer(*cb_p, da.listen).in_flight, (uint64_t)n);
	ck_assert_int_eq(t->done, 0);
}

static int
shutdown_told(void *arg)
{
	rma_client_t *c = arg;

	rma_progress(c);
	return c->shutdown_detail != NULL;
}

START_TEST(test_sigterm_drains_then_fails)
{
	enum { N = 500 };
	static const char *const flags_b[] = {"--shutdown-timeout", "1", NULL};
	rma_client_t *cb;
	rma_region_t *rb;
	rma_remote_t *rema;
	struct tally t = {0};
	rma_status_t st;
	double t0, exited;
	int status = -1;

	stuck_puts(flags_b, N, &t, &cb, &rb, &rema);
	t0 = harness_now();
	kill(db.pid, SIGTERM);
	/* Clients are told, and new work is refused while draining. */
	ck_assert(harness_until(5, shutdown_told, cb));
	st = rma_put_sync(cb, rb, 0, rema, 0, 8, 0, WAIT_MS);
	ck_assert_msg(st == RMA_ERR_SHUTDOWN || st == RMA_ERR_DAEMON_GONE,
		      "put while shutting down: %s", rma_strerror(st));
	progress_until(cb, &t.done, N, 10);
	ck_assert_msg(t.ok + t.reset + t.timeout + t.other == 0,
		      "unexpected completions: %d ok, %d reset, %d timeout, %d "
		      "other (%s)",
		      t.ok, t.reset, t.timeout, t.other,
		      rma_strerror(t.other_status));
	ck_assert(harness_daemon_wait_exit(&db, 10, &status));
	exited = harness_now() - t0;
	fprintf(stderr,
		"faults: SIGTERM -> exit: %.1f ms, last request %.1f ms "
		"(shutdown timeout 1 s; %d shutdown, %d canceled, %d gone)\n",
		ms(exited), ms(t.last - t0), t.shutdown, t.canceled, t.gone);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_double_ge(exited, 0.9); /* it did drain */
	ck_assert_double_lt(exited, 1.0 + 3.0);
	ck_assert_int_eq(rma_progress(cb), RMA_ERR_DAEMON_GONE);
}
END_TEST

static int
socket_gone(void *arg)
{
	return access(arg, F_OK) != 0;
}

START_TEST(test_second_signal_exits_at_once)
{
	enum { N = 200 };
	static const char *const flags_b[] = {"--shutdown-timeout", "30", NULL};
	rma_client_t *cb;
	rma_region_t *rb;
	rma_remote_t *rema;
	struct tally t = {0};
	double t1;

	stuck_puts(flags_b, N, &t, &cb, &rb, &rema);
	kill(db.pid, SIGTERM);
	/* The first signal was handled once the socket is gone. */
	ck_assert(harness_until(5, socket_gone, db.socket));
	t1 = harness_now();
	kill(db.pid, SIGINT);
	ck_assert_msg(harness_daemon_wait_exit(&db, 2, NULL),
		      "rmad still running 2 s after a second signal");
	fprintf(stderr, "faults: second signal -> exit: %.1f ms\n",
		ms(harness_now() - t1));
	ck_assert_double_lt(harness_now() - t1, 1.0);
	progress_until(cb, &t.done, N, 5);
	ck_assert_int_eq(t.ok + t.reset + t.timeout + t.other, 0);
}
END_TEST

/* ---- 8. the daemon killed under a waiting client ------------------------- */

struct killer {
	pid_t tid;    /* the thread that waits */
	pid_t victim; /* the daemon */
	double killed_at;
};

/* True while the thread sits in poll(): it waits for the daemon. */
static int
thread_in_poll(void *arg)
{
	const struct killer *k = arg;
	char path[64], buf[64];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)k->tid);
	f = fopen(path, "r");
	if (f == NULL)
		return 1; /* no such file here: kill now, the wait still ends */
	if (fgets(buf, sizeof(buf), f) != NULL)
		nr = strtol(buf, NULL, 10);
	fclose(f);
#ifdef SYS_poll
	if (nr == SYS_poll)
		return 1;
#endif
	return nr == SYS_ppoll;
}

static void *
killer_main(void *arg)
{
	struct killer *k = arg;

	harness_until(10, thread_in_poll, k);
	k->killed_at = harness_now();
	kill(k->victim, SIGKILL);
	return NULL;
}

START_TEST(test_daemon_killed_under_waiter)
{
	enum { N = 300 };
	rma_client_t *cb, *cn;
	rma_region_t *rb, *rn;
	rma_remote_t *rema, *remn, *rem_old;
	rma_peer_t *self, *pa;
	rma_request_t *reqs[N], *req;
	struct tally t = {0};
	struct killer k;
	pthread_t thread;
	rma_status_t st;
	double woke;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, NULL);
	{
		rma_client_t *ca;
		rma_region_t *ra;
		client_with_region(&da, &ca, &ra);
		client_with_region(&db, &cb, &rb);
		import_from(cb, &da, ra, &pa, &rema);
	}
	kill(da.pid, SIGSTOP); /* nothing completes by itself */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, rema, 0, 4096,
					 RMA_FLAG_REMOTE_COMPLETION, tally_cb,
					 &t, &reqs[i]),
				 RMA_OK);
	send_pending(cb);

	k.tid = (pid_t)syscall(SYS_gettid);
	k.victim = db.pid;
	k.killed_at = 0;
	ck_assert_int_eq(pthread_create(&thread, NULL, killer_main, &k), 0);
	st = rma_request_wait(cb, reqs[N - 1], 20000);
	woke = harness_now();
	pthread_join(thread, NULL);
	ck_assert_int_eq(st, RMA_ERR_DAEMON_GONE);
	fprintf(stderr, "faults: daemon kill -> waiter woke: %.1f ms\n",
		ms(woke - k.killed_at));
	ck_assert_double_lt(woke - k.killed_at, 1.0);
	for (int i = 0; i < N; i++) {
		ck_assert(rma_request_is_completed(reqs[i]));
		ck_assert_int_eq(rma_request_status(reqs[i]),
				 RMA_ERR_DAEMON_GONE);
		rma_request_release(reqs[i]);
	}
	ck_assert_int_eq(t.done, N);
	ck_assert_int_eq(t.gone, N);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rema, 0, 8, 0, WAIT_MS),
			 RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(rma_progress(cb), RMA_ERR_DAEMON_GONE);
	ck_assert(harness_daemon_wait_exit(&db, 5, NULL));

	/* A new daemon on a new socket serves a new client... */
	harness_daemon_start(&dc, NULL);
	ck_assert_int_eq(rma_connect(dc.socket, &cn), RMA_OK);
	track(cn);
	ck_assert_int_eq(rma_region_alloc(cn, 4096, &rn), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cn, dc.listen, &self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cn, self, rma_region_descriptor(rn), &remn),
	    RMA_OK);
	strcpy(rma_region_ptr(rn), "fresh");
	ck_assert_int_eq(rma_put_sync(cn, rn, 0, remn, 100, 6, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_str_eq((char *)rma_region_ptr(rn) + 100, "fresh");
	/* ...to which the old client's handles mean nothing. */
	ck_assert_int_eq(rma_put(cn, rb, 0, remn, 0, 8, 0, NULL, NULL, &req),
			 RMA_ERR_INVALID);
	ck_assert_int_eq(rma_put(cn, rn, 0, rema, 0, 8, 0, NULL, NULL, &req),
			 RMA_ERR_INVALID);
	ck_assert_int_eq(rma_get(cn, rb, 0, remn, 0, 8, NULL, NULL, &req),
			 RMA_ERR_INVALID);
	ck_assert_int_eq(rma_region_free(cn, rb), RMA_ERR_INVALID);
	ck_assert_int_eq(
	    rma_remote_import(cn, pa, rma_region_descriptor(rn), &rem_old),
	    RMA_ERR_INVALID);
	ck_assert_int_eq(rma_flush(cn, pa, NULL, NULL, &req), RMA_ERR_INVALID);
}
END_TEST

/* ---- big gets on a frozen peer ------------------------------------------ */

/* Gets of 1 MiB (answers of many fragments) on a frozen peer time out;
 * thawed, the peer answers them anyway, which nobody waits for any more;
 * then a new get works and brings the right bytes. */
START_TEST(test_big_gets_on_frozen_peer)
{
	enum { N = 8, SZ = 1 << 20 };
	static const char *const flags_b[] = {"--op-timeout", "1", NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct tally t = {0};
	rma_status_t st = RMA_ERR_INTERNAL;
	Rma__V1__Reply *reply;
	double deadline;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, flags_b);
	ck_assert_int_eq(rma_connect(da.socket, &ca), RMA_OK);
	track(ca);
	ck_assert_int_eq(rma_region_alloc(ca, (size_t)N * SZ, &ra), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	track(cb);
	ck_assert_int_eq(rma_region_alloc(cb, (size_t)N * SZ, &rb), RMA_OK);
	import_from(cb, &da, ra, &pa, &rema);
	harness_fill(rma_region_ptr(ra), (size_t)N * SZ, 7);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, rema, 0, SZ, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra), SZ), 0);

	kill(da.pid, SIGSTOP);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_get(cb, rb, (uint64_t)i * SZ, rema,
					 (uint64_t)i * SZ, SZ, tally_cb, &t,
					 NULL),
				 RMA_OK);
	send_pending(cb);
	progress_until(cb, &t.done, N, 5);
	ck_assert_int_eq(t.ok, 0);
	ck_assert_int_eq(t.timeout + t.canceled, N);
	kill(da.pid, SIGCONT);

	/* The same handle works again once the peer is back. */
	memset(rma_region_ptr(rb), 0, SZ);
	deadline = harness_now() + 10;
	while (harness_now() < deadline) {
		st = rma_get_sync(cb, rb, 0, rema, 3 * SZ, SZ, WAIT_MS);
		if (st == RMA_OK)
			break;
		harness_pause(0.05, deadline);
	}
	ck_assert_int_eq(st, RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb),
				(uint8_t *)rma_region_ptr(ra) + 3 * SZ, SZ),
			 0);
	reply = status_call(cb);
	ck_assert_uint_eq(reply->status_reply->ops_in_flight, 0);
	rma__v1__reply__free_unpacked(reply, NULL);
	assert_alive(&db, 0, "after big gets on a frozen peer");
}
END_TEST

/* One case per test, so that CK_RUN_CASE=test_name runs just that one. */
static void
add(Suite *s, const char *name, const TTest *test)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 40);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
}

#define ADD(s, t) add(s, #t, t)

/* ---- connects to nowhere leave nothing behind -----------------------------
 */

START_TEST(test_failed_connects_not_kept)
{
	enum { N = 50 };
	rma_client_t *c;
	rma_peer_t *p;
	Rma__V1__Reply *reply;
	size_t outbound = 0;
	double deadline;

	harness_daemon_start(&db, NULL);
	ck_assert_int_eq(rma_connect(db.socket, &c), RMA_OK);
	for (int i = 0; i < N; i++) {
		char addr[32];
		snprintf(addr, sizeof(addr), "127.0.0.1:%u",
			 harness_free_port());
		ck_assert_int_ne(rma_peer_connect(c, addr, &p), RMA_OK);
	}
	/* The failed endpoints are closed on the daemon's next turn. */
	deadline = harness_now() + 5;
	do {
		outbound = 0;
		reply = status_call(c);
		for (size_t i = 0; i < reply->status_reply->n_peers; i++)
			outbound += !reply->status_reply->peers[i]->inbound;
		rma__v1__reply__free_unpacked(reply, NULL);
	} while (outbound > 0 && harness_now() < deadline);
	ck_assert_uint_eq(outbound, 0);
	rma_disconnect(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("faults");
	SRunner *sr;
	int failed;

	ADD(s, test_peer_killed_in_flight);
	ADD(s, test_initiator_killed_in_flight);
	ADD(s, test_peer_frozen_then_continued);
	ADD(s, test_import_from_frozen_peer);
	ADD(s, test_peer_restarted);
	ADD(s, test_client_killed_mid_transfer);
	ADD(s, test_client_killed_on_frozen_peer);
	ADD(s, test_owner_killed_mid_transfer);
	ADD(s, test_client_not_reading);
	ADD(s, test_sigterm_drains_then_fails);
	ADD(s, test_second_signal_exits_at_once);
	ADD(s, test_daemon_killed_under_waiter);
	ADD(s, test_failed_connects_not_kept);
	ADD(s, test_big_gets_on_frozen_peer);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
