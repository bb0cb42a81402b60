/* SPDX-License-Identifier: BSD-2-Clause */
/* Faults of the other daemon: a peer killed with thousands of operations
 * in flight, an initiator killed while its target is busy, a peer frozen
 * (SIGSTOP) then continued, a peer restarted on its port, connects to
 * nowhere. Real rmad processes on loopback (faults_common.h); the times
 * that matter are printed ("faults: ..." on stderr). Links the static
 * library: the tests look at rma_internal.h's state (PeerEvents recorded
 * on a peer, submissions still coalesced). */
#include <check.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "descriptor.h"
#include "faults_common.h"
#include "status_call.h"

/* ---- a peer killed with thousands of operations in flight --------------- */

enum { KILL_PUTS = 4000, KILL_GETS = 1000, KILL_SZ = 65536 };

/* Puts, gets and a flush, all on the peer about to die; then SIGKILL to A:
 * every one completes within 2 s, failed as reset or canceled. */
static void
kill_peer_under_ops(rma_client_t *cb, rma_region_t *rb, rma_remote_t *rema,
		    rma_peer_t *pa)
{
	enum { ALL = KILL_PUTS + KILL_GETS + 1 };
	struct tally t = {0};
	double t0;

	for (int i = 0; i < KILL_PUTS; i++)
		ck_assert_int_eq(
		    rma_put(cb, rb, 0, rema, 0, KILL_SZ, 0, tally_cb, &t, NULL),
		    RMA_OK);
	for (int i = 0; i < KILL_GETS; i++)
		ck_assert_int_eq(rma_get(cb, rb, KILL_SZ, rema, KILL_SZ,
					 KILL_SZ, tally_cb, &t, NULL),
				 RMA_OK);
	ck_assert_int_eq(rma_flush(cb, pa, tally_cb, &t, NULL), RMA_OK);
	send_pending(cb);
	t0 = harness_now();
	kill(da.pid, SIGKILL);
	progress_until(cb, &t.done, ALL, 10);
	fprintf(stderr,
		"faults: peer kill -> last completion: %.1f ms (%d of %d "
		"failed: %d reset, %d canceled, %d unreachable)\n",
		ms(t.last - t0), ALL - t.ok, ALL, t.reset, t.canceled,
		t.unreachable);
	/* Operations that reach the daemon after the peer died wait for one
	 * reconnect, which is refused: they fail as unreachable. */
	ck_assert_msg(t.timeout + t.shutdown + t.gone + t.other == 0,
		      "unexpected completions: %d timeout, %d other (%s)",
		      t.timeout, t.other, rma_strerror(t.other_status));
	ck_assert_msg(t.ok < KILL_PUTS, "every put finished before the kill");
	ck_assert_double_lt(t.last - t0, 2.0);
	ck_assert(harness_daemon_wait_exit(&da, 5, NULL));
}

/* The library recorded the daemon's PeerEvent; a new operation on the
 * dead peer fails at once, and the status says why. */
static void
assert_dead_peer_known(rma_client_t *cb, rma_region_t *rb, rma_remote_t *rema,
		       const rma_peer_t *pa, const rma_peer_t *pc)
{
	struct peer_view v;
	rma_status_t st;
	double t1;

	ck_assert_int_eq(pa->state, RMA__V1__PEER_STATE__PEER_DOWN);
	/* Lost, or (once operations that arrived later made the daemon try
	 * again) refused: the last event says which. */
	ck_assert_msg(pa->status == RMA_ERR_CONNECTION_RESET ||
			  pa->status == RMA_ERR_CANCELED ||
			  pa->status == RMA_ERR_UNREACHABLE,
		      "peer event status %s", rma_strerror(pa->status));
	ck_assert(pa->detail != NULL && pa->detail[0] != '\0');
	ck_assert_int_eq(pc->state, RMA__V1__PEER_STATE__PEER_UP);

	t1 = harness_now();
	st = rma_put_sync(cb, rb, 0, rema, 0, 8, 0, WAIT_MS);
	ck_assert_msg(st != RMA_OK && st != RMA_ERR_TIMEOUT,
		      "put to a dead peer: %s", rma_strerror(st));
	ck_assert_double_lt(harness_now() - t1, 1.0);
	v = status_peer(cb, da.listen);
	ck_assert(v.found);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_str_ne(v.last_error, "");
}

START_TEST(test_peer_killed_in_flight)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};
	rma_client_t *ca, *cb, *cc, *cb2;
	rma_region_t *ra, *rb, *rc, *r2;
	rma_peer_t *pa, *pc;
	rma_remote_t *rema, *remc;

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

	kill_peer_under_ops(cb, rb, rema, pa);
	assert_dead_peer_known(cb, rb, rema, pa, pc);

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

/* ---- the initiating daemon killed with puts in flight to a target ------- */

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

/* ---- a frozen peer: deadlines, then reconnect with the same handle ------ */

enum { FROZEN_N = 500, FROZEN_SZ = 4096 };

/* The two clients of B, each with a remote on its own region of A. */
struct frozen_pair {
	rma_client_t *ca, *cb, *cb2;
	rma_region_t *ra, *ra2, *rb, *rb2;
	rma_peer_t *pa, *pa2;
	rma_remote_t *rema, *rema2;
};

/* Remote completion: nothing completes without the frozen peer. A first
 * batch now, a second one half a deadline later: the first times out,
 * the second goes with the force-closed endpoint. */
static void
freeze_with_two_batches(struct frozen_pair *f)
{
	struct tally t1 = {0}, t2 = {0};
	double t0, deadline;

	kill(da.pid, SIGSTOP);
	t0 = harness_now();
	for (int i = 0; i < FROZEN_N; i++)
		ck_assert_int_eq(
		    rma_put(f->cb, f->rb, (uint64_t)(i % 256) * FROZEN_SZ,
			    f->rema, (uint64_t)(i % 256) * FROZEN_SZ, FROZEN_SZ,
			    RMA_FLAG_REMOTE_COMPLETION, tally_cb, &t1, NULL),
		    RMA_OK);
	send_pending(f->cb);
	deadline = t0 + 0.5;
	while (harness_now() < deadline) {
		harness_wait_fd(rma_fd(f->cb2), deadline - harness_now());
		ck_assert_int_eq(rma_progress(f->cb2), RMA_OK);
	}
	for (int i = 0; i < FROZEN_N; i++)
		ck_assert_int_eq(rma_put(f->cb2, f->rb2, 0, f->rema2, 0,
					 FROZEN_SZ, RMA_FLAG_REMOTE_COMPLETION,
					 tally_cb, &t2, NULL),
				 RMA_OK);
	send_pending(f->cb2);
	progress_until(f->cb, &t1.done, FROZEN_N, 6);
	progress_until(f->cb2, &t2.done, FROZEN_N, 6);
	fprintf(stderr,
		"faults: peer SIGSTOP -> timeout: %.1f ms (op timeout 1 s; "
		"first batch %d timed out; second batch %d canceled, %d timed "
		"out, last at %.1f ms)\n",
		ms(t1.first - t0), t1.timeout, t2.canceled, t2.timeout,
		ms(t2.last - t0));
	ck_assert_int_eq(t1.timeout, FROZEN_N);
	ck_assert_msg(t2.ok + t2.reset + t2.shutdown + t2.gone + t2.other == 0,
		      "unexpected completions: %d ok, %d reset, %d other (%s)",
		      t2.ok, t2.reset, t2.other, rma_strerror(t2.other_status));
	ck_assert_int_gt(t2.canceled, 0);
	ck_assert_double_ge(t1.first - t0, 0.9);
	ck_assert_double_lt(t1.last - t0, 2.0);
	ck_assert_double_lt(t2.last - t0, 2.0);
}

/* Down, with the reason, in the PeerEvent and in the status; an explicit
 * connect to the frozen peer fails within the connect deadline, and says
 * why. */
static void
assert_frozen_peer_down(struct frozen_pair *f)
{
	struct peer_view v;
	rma_peer_t *again;
	rma_status_t st;
	double t0;

	ck_assert_int_eq(f->pa->state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_int_eq(f->pa->status, RMA_ERR_TIMEOUT);
	ck_assert(f->pa->detail != NULL &&
		  strstr(f->pa->detail, "within") != NULL);
	ck_assert_int_eq(f->pa2->state, RMA__V1__PEER_STATE__PEER_DOWN);
	v = status_peer(f->cb, da.listen);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_msg(strstr(v.last_error, "within") != NULL, "last error: %s",
		      v.last_error);

	t0 = harness_now();
	st = rma_peer_connect(f->cb, da.listen, &again);
	ck_assert_msg(st != RMA_OK, "connect to a frozen peer succeeded");
	ck_assert_double_lt(harness_now() - t0, 3.0);
	ck_assert_str_ne(rma_last_error(f->cb), "");
	v = status_peer(f->cb, da.listen);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_str_ne(v.last_error, "");
}

/* Thawed: the same remote handles work again, same clients. */
static void
thaw_and_put_again(struct frozen_pair *f)
{
	rma_status_t st = RMA_ERR_INTERNAL;
	double t0, deadline, worst = 0;
	int attempts = 0;

	kill(da.pid, SIGCONT);
	t0 = harness_now();
	deadline = t0 + 10;
	harness_fill(rma_region_ptr(f->rb), FROZEN_SZ, 77);
	harness_fill(rma_region_ptr(f->rb2), FROZEN_SZ, 78);
	ck_assert_msg(put_until_ok(f->cb, f->rb, f->rema, 100, FROZEN_SZ,
				   deadline, &attempts, &worst, &st),
		      "no put succeeded within 10 s: %s (%s)", rma_strerror(st),
		      rma_last_error(f->cb));
	fprintf(stderr,
		"faults: SIGCONT -> put ok again: %.1f ms (%d attempts, failed "
		"ones took at most %.1f ms)\n",
		ms(harness_now() - t0), attempts, ms(worst));
	ck_assert_msg(put_until_ok(f->cb2, f->rb2, f->rema2, 200, FROZEN_SZ,
				   deadline, &attempts, &worst, &st),
		      "second client: no put succeeded within 10 s: %s (%s)",
		      rma_strerror(st), rma_last_error(f->cb2));
	ck_assert_double_lt(worst, 1.5);
}

START_TEST(test_peer_frozen_then_continued)
{
	static const char *const flags_b[] = {"--op-timeout", "1",
					      "--connect-timeout", "1", NULL};
	struct inbound_count inbound = {0};
	struct frozen_pair f;
	rma_peer_t *again;

	two_daemons(NULL, flags_b, &f.ca, &f.ra, &f.cb, &f.rb, &f.pa, &f.rema);
	ck_assert_int_eq(rma_region_alloc(f.ca, REGION, &f.ra2), RMA_OK);
	client_with_region(&db, &f.cb2, &f.rb2);
	import_from(f.cb2, &da, f.ra2, &f.pa2, &f.rema2);
	put_and_check(f.cb, f.rb, f.rema, f.ra, 0, FROZEN_SZ, 1);
	put_and_check(f.cb2, f.rb2, f.rema2, f.ra2, 0, FROZEN_SZ, 2);

	freeze_with_two_batches(&f);
	assert_frozen_peer_down(&f);
	thaw_and_put_again(&f);
	/* The reconnect was announced: the peer is up again for the client. */
	ck_assert_int_eq(rma_progress(f.cb), RMA_OK);
	ck_assert_int_eq(rma_peer_status(f.pa), RMA_OK);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(f.ra) + 100,
				rma_region_ptr(f.rb), FROZEN_SZ),
			 0);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(f.ra2) + 200,
				rma_region_ptr(f.rb2), FROZEN_SZ),
			 0);
	ck_assert_int_eq(status_peer(f.cb, da.listen).state,
			 RMA__V1__PEER_STATE__PEER_UP);
	ck_assert_int_eq(rma_peer_connect(f.cb, da.listen, &again), RMA_OK);
	ck_assert_ptr_eq(again, f.pa);
	ck_assert_int_eq(f.pa->state, RMA__V1__PEER_STATE__PEER_UP);
	/* A, thawed, holds one inbound peer (B), not one per connect that
	 * B gave up on while A was frozen. */
	inbound.c = f.ca;
	ck_assert_msg(harness_until(5, one_inbound_peer, &inbound),
		      "A shows %d inbound peers 5 s after it was thawed",
		      inbound.n);
}
END_TEST

/* ---- a descriptor resolved through a frozen peer ------------------------ */

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
	faults_track(ca);
	ck_assert_int_eq(rma_region_alloc(ca, (size_t)N * SZ, &ra), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	faults_track(cb);
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

/* ---- a peer restarted on the same port ---------------------------------- */

/* Leaves a connection in TIME_WAIT on 127.0.0.1:port, as a daemon killed
 * while peers were connected to its listener does when its side closed
 * first: for a minute, only a listener with SO_REUSEADDR can bind. */
static void
time_wait_on(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct sockaddr_in me = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	socklen_t len = sizeof(sa);
	int one = 1, lfd, fd, afd;
	char c;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	afd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(afd, 0);
	close(fd); /* the active close: TIME_WAIT is on this side */
	ck_assert(harness_wait_fd(afd, 5) && read(afd, &c, 1) == 0);
	close(afd);
	close(lfd);
}

/* The old handle: a peer error until reconnected, then stale. The new
 * daemon's first region has the old one's id and generation: nothing of
 * the old handle's puts may land there. */
static void
assert_old_handle_stale(rma_client_t *cb, rma_region_t *rb, rma_remote_t *rema,
			rma_peer_t *pa, const rma_region_t *ra2,
			const char *old_desc, double t0)
{
	static const uint8_t zeros[8];
	double deadline = t0 + 10;
	rma_status_t st = RMA_OK;
	rma_remote_t *rem2;

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
	ck_assert_mem_eq(rma_region_ptr(ra2), zeros, sizeof(zeros));
	ck_assert_int_eq(rma_remote_import(cb, pa, old_desc, &rem2),
			 RMA_ERR_STALE_DESCRIPTOR);
	ck_assert_msg(strstr(rma_last_error(cb), "restarted") != NULL,
		      "import of an old descriptor: %s", rma_last_error(cb));
}

START_TEST(test_peer_restarted)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};
	char old_desc[DESCRIPTOR_TEXT_SIZE + 1];
	rma_client_t *ca, *cb, *ca2;
	rma_region_t *ra, *rb, *ra2;
	rma_peer_t *pa, *again;
	rma_remote_t *rema, *rem2;
	double t0;

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
	assert_old_handle_stale(cb, rb, rema, pa, ra2, old_desc, t0);

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

/* ---- connects to nowhere stay visible, and say why ----------------------- */

START_TEST(test_failed_connects_visible)
{
	enum { N = 50 };
	uint16_t ports[N];
	rma_client_t *c;
	rma_peer_t *p;
	Rma__V1__Reply *reply;
	size_t down = 0;

	harness_daemon_start(&db, NULL);
	ck_assert_int_eq(rma_connect(db.socket, &c), RMA_OK);
	for (int i = 0; i < N; i++) {
		char addr[32];
		uint16_t port;
		bool again;

		/* N distinct addresses: a free port may come back twice. */
		do {
			port = harness_free_port();
			again = false;
			for (int k = 0; k < i; k++)
				again |= ports[k] == port;
		} while (again);
		ports[i] = port;
		snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
		ck_assert_int_ne(rma_peer_connect(c, addr, &p), RMA_OK);
	}
	/* Each stays in the table (bounded by PEER_MAX, the oldest that
	 * never connected going first) with its attempts and last error. */
	reply = status_call(c);
	for (size_t i = 0; i < reply->status_reply->n_peers; i++) {
		const Rma__V1__PeerInfo *pi = reply->status_reply->peers[i];
		if (pi->inbound)
			continue;
		ck_assert_int_eq(pi->state, RMA__V1__PEER_STATE__PEER_DOWN);
		ck_assert_str_ne(pi->last_error, "");
		ck_assert_uint_ge(pi->connect_attempts, 1);
		ck_assert_uint_ge(pi->connect_failures, 1);
		down++;
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	ck_assert_uint_eq(down, N);
	rma_disconnect(c);
}
END_TEST

/* ---- canceling operations parked for a peer that is down ---------------- */

/* Whether req completed, making progress meanwhile. */
static int
cancel_done(void *arg)
{
	rma_request_t *req = arg;

	rma_progress(req->client);
	harness_wait_fd(rma_fd(req->client), 0.01);
	return rma_request_is_completed(req);
}

/* A frozen peer, found down after one op timed out: the next ops park,
 * waiting for the reconnect (10 s connect deadline) within their own
 * deadline (3 s). rma_request_cancel() on one of them completes it with
 * RMA_ERR_CANCELED at once (not a timeout 3 s later), and so it does for
 * a vectored one's parked pieces; the other waits on and completes with
 * its own status, and what was canceled never writes once the peer is
 * back. */
START_TEST(test_cancel_parked)
{
	static const char *const flags_b[] = {"--op-timeout", "3",
					      "--connect-timeout", "10", NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	rma_request_t *parked, *other, *vec;
	rma_iov_t pieces[] = {{0, 6000, 8}, {8, 6100, 8}};
	rma_status_t st;
	double t0;
	int attempts;
	double worst;

	two_daemons(NULL, flags_b, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 4096, 1);
	memset(rma_region_ptr(ra), 0, 8192);

	kill(da.pid, SIGSTOP);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rema, 0, 8,
				      RMA_FLAG_REMOTE_COMPLETION, 10000),
			 RMA_ERR_TIMEOUT);
	/* down now: these two park */
	harness_fill(rma_region_ptr(rb), 8, 9);
	ck_assert_int_eq(rma_put(cb, rb, 0, rema, 4096, 8,
				 RMA_FLAG_REMOTE_COMPLETION, NULL, NULL,
				 &parked),
			 RMA_OK);
	ck_assert_int_eq(rma_put(cb, rb, 0, rema, 0, 8,
				 RMA_FLAG_REMOTE_COMPLETION, NULL, NULL,
				 &other),
			 RMA_OK);
	ck_assert_int_eq(rma_putv(cb, rb, rema, pieces, 2, 0, NULL, NULL, &vec),
			 RMA_OK);
	send_pending(cb);
	/* they reached the daemon and wait there */
	t0 = harness_now();
	while (harness_now() < t0 + 0.3)
		cancel_done(parked);
	ck_assert_msg(!rma_request_is_completed(parked),
		      "a parked put completed before the cancel: %s",
		      rma_strerror(rma_request_status(parked)));
	ck_assert(parked->sent);

	t0 = harness_now();
	ck_assert_int_eq(rma_request_cancel(cb, parked), RMA_INPROGRESS);
	ck_assert_msg(harness_until(2, cancel_done, parked),
		      "a canceled parked put still pending after 2 s");
	fprintf(stderr,
		"faults: cancel of a parked put -> completed: %.1f ms\n",
		ms(harness_now() - t0));
	ck_assert_int_eq(rma_request_status(parked), RMA_ERR_CANCELED);
	ck_assert_ptr_nonnull(strstr(rma_request_detail(parked), "canceled"));
	ck_assert_double_lt(harness_now() - t0, 1.0);
	/* a vectored request's parked pieces, asked back as one */
	t0 = harness_now();
	ck_assert(!rma_request_is_completed(vec));
	ck_assert_int_eq(rma_request_cancel(cb, vec), RMA_INPROGRESS);
	ck_assert_msg(harness_until(2, cancel_done, vec),
		      "a canceled parked putv still pending after 2 s");
	ck_assert_int_eq(rma_request_status(vec), RMA_ERR_CANCELED);
	ck_assert_double_lt(harness_now() - t0, 1.0);
	rma_request_release(vec);
	/* the other one waited on: its own status, after its deadline */
	ck_assert(!rma_request_is_completed(other));
	ck_assert_msg(harness_until(10, cancel_done, other),
		      "the parked put not canceled never completed");
	st = rma_request_status(other);
	ck_assert_msg(st != RMA_OK && st != RMA_ERR_CANCELED,
		      "the other parked put: %s", rma_strerror(st));
	/* canceling a completed request is refused, not repeated */
	ck_assert_int_eq(rma_request_cancel(cb, parked), RMA_ERR_INVALID);
	rma_request_release(parked);
	rma_request_release(other);

	/* back: the canceled put's bytes never arrive */
	kill(da.pid, SIGCONT);
	harness_fill(rma_region_ptr(rb), 8, 11);
	ck_assert_msg(put_until_ok(cb, rb, rema, 100, 8, harness_now() + 15,
				   &attempts, &worst, &st),
		      "no put after SIGCONT: %s", rma_strerror(st));
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(((uint8_t *)rma_region_ptr(ra))[4096 + i], 0);
		ck_assert_int_eq(((uint8_t *)rma_region_ptr(ra))[6000 + i], 0);
		ck_assert_int_eq(((uint8_t *)rma_region_ptr(ra))[6100 + i], 0);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("faults-peers");

	FAULTS_ADD(s, test_peer_killed_in_flight);
	FAULTS_ADD(s, test_initiator_killed_in_flight);
	FAULTS_ADD(s, test_peer_frozen_then_continued);
	FAULTS_ADD(s, test_import_from_frozen_peer);
	FAULTS_ADD(s, test_peer_restarted);
	FAULTS_ADD(s, test_failed_connects_visible);
	FAULTS_ADD(s, test_big_gets_on_frozen_peer);
	FAULTS_ADD(s, test_cancel_parked);
	return check_main_run(s);
}
