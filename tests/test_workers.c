/* SPDX-License-Identifier: BSD-2-Clause */
/* Worker threads (--workers N): clients spread across workers, transfers
 * between clients of different workers (a local copy), between daemons
 * whose clients sit on different workers, a region freed on one worker
 * going stale for a remote initiator (the notice leaves from worker 0),
 * status gathering every worker, and a clean SIGTERM. Real rmad
 * processes over loopback. */
#include <check.h>

#include "check_main.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "rma.h"
#include "rma_internal.h"
#include "status_call.h"

#define N_CLIENTS 4
#define REGION (1u << 20)
#define WAIT_MS 20000

/* Puts n bytes of a pattern from local to rem, then reads them back into
 * another part of local with a get; both checked in the owner's memory. */
static void
put_get_check(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
	      uint8_t *owner_mem, size_t n, uint32_t seed)
{
	uint8_t *l = rma_region_ptr(local);

	harness_fill(l, n, seed);
	ck_assert_int_eq(rma_put_sync(c, local, 0, rem, 0, n,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(owner_mem, l, n), 0);
	harness_fill(owner_mem + n, n, seed + 1);
	ck_assert_int_eq(rma_get_sync(c, local, n, rem, n, n, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(l + n, owner_mem + n, n), 0);
}

START_TEST(test_workers)
{
	static const char *const three[] = {"--workers", "3", NULL};
	static const char *const two[] = {"--workers", "2", NULL};
	struct daemon_proc dw, dr;
	rma_client_t *c[N_CLIENTS], *x, *y;
	rma_region_t *r[N_CLIENTS], *rx, *ry;
	rma_peer_t *self, *px, *py;
	rma_remote_t *local_rem, *rem_x, *rem_y;
	Rma__V1__Reply *reply;
	Rma__V1__StatusReply *st;
	unsigned on_worker[3] = {0};
	rma_status_t s = RMA_OK;
	double deadline;
	int status;

	harness_daemon_start(&dw, three);
	harness_daemon_start(&dr, two);
	for (int i = 0; i < N_CLIENTS; i++) {
		ck_assert_int_eq(rma_connect(dw.socket, &c[i]), RMA_OK);
		ck_assert_int_eq(rma_region_alloc(c[i], 2 * REGION, &r[i]),
				 RMA_OK);
	}

	/* Handed out in turn: 0, 1, 2, 0. */
	reply = status_call(c[0]);
	st = reply->status_reply;
	ck_assert_uint_eq(st->workers, 3);
	ck_assert_uint_eq(st->n_clients, N_CLIENTS);
	ck_assert_uint_eq(st->n_regions, N_CLIENTS);
	for (size_t i = 0; i < st->n_clients; i++) {
		ck_assert_uint_lt(st->clients[i]->worker, 3);
		on_worker[st->clients[i]->worker]++;
	}
	ck_assert_uint_eq(on_worker[0], 2);
	ck_assert_uint_eq(on_worker[1], 1);
	ck_assert_uint_eq(on_worker[2], 1);
	rma__v1__reply__free_unpacked(reply, NULL);

	/* A client of worker 1 copies to and from a region of worker 2. */
	ck_assert_int_eq(rma_peer_connect(c[1], dw.listen, &self), RMA_OK);
	ck_assert_int_eq(rma_remote_import(c[1], self,
					   rma_region_descriptor(r[2]),
					   &local_rem),
			 RMA_OK);
	put_get_check(c[1], r[1], local_rem, rma_region_ptr(r[2]), 65536, 1);

	/* Two clients of the other daemon, on its two workers, reach
	 * regions of workers 1 and 2 here. */
	ck_assert_int_eq(rma_connect(dr.socket, &x), RMA_OK);
	ck_assert_int_eq(rma_connect(dr.socket, &y), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(x, 2 * REGION, &rx), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(y, 2 * REGION, &ry), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(x, dw.listen, &px), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(y, dw.listen, &py), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(x, px, rma_region_descriptor(r[2]), &rem_x),
	    RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(y, py, rma_region_descriptor(r[1]), &rem_y),
	    RMA_OK);
	put_get_check(x, rx, rem_x, rma_region_ptr(r[2]), REGION, 2);
	put_get_check(y, ry, rem_y, rma_region_ptr(r[1]), 4096, 3);

	/* Each of the other daemon's workers opened its own endpoint. */
	reply = status_call(x);
	st = reply->status_reply;
	ck_assert_uint_eq(st->workers, 2);
	ck_assert_uint_eq(st->n_peers, 2);
	ck_assert_uint_ne(st->peers[0]->worker, st->peers[1]->worker);
	rma__v1__reply__free_unpacked(reply, NULL);

	/* Worker 1 frees its region: y learns through worker 0's notice
	 * (an import of the same text fails at once), x is unaffected. */
	ck_assert_int_eq(rma_region_free(c[1], r[1]), RMA_OK);
	deadline = harness_now() + 5;
	while (harness_now() < deadline) {
		s = rma_put_sync(y, ry, 0, rem_y, 0, 8, 0, WAIT_MS);
		if (s != RMA_OK)
			break;
	}
	ck_assert_int_eq(s, RMA_ERR_STALE_DESCRIPTOR);
	put_get_check(x, rx, rem_x, rma_region_ptr(r[2]), 8, 4);

	reply = status_call(c[3]);
	ck_assert_uint_eq(reply->status_reply->n_regions, N_CLIENTS - 1);
	rma__v1__reply__free_unpacked(reply, NULL);

	rma_disconnect(x);
	rma_disconnect(y);
	for (int i = 0; i < N_CLIENTS; i++)
		rma_disconnect(c[i]);
	status = harness_daemon_stop(&dw, SIGTERM);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	status = harness_daemon_stop(&dr, SIGTERM);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* Many clients on every worker at once, each with operations in flight to
 * another worker's region, while one of them asks for status repeatedly:
 * stopping the world mid-traffic loses nothing. */
START_TEST(test_workers_status_under_load)
{
	static const char *const four[] = {"--workers", "4", NULL};
	enum { N = 8, OPS = 2000 };
	struct daemon_proc dw;
	rma_client_t *c[N];
	rma_region_t *r[N];
	rma_peer_t *self[N];
	rma_remote_t *rem[N];
	rma_request_t *req[N];
	int status;

	harness_daemon_start(&dw, four);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(rma_connect(dw.socket, &c[i]), RMA_OK);
		ck_assert_int_eq(rma_region_alloc(c[i], 2 * REGION, &r[i]),
				 RMA_OK);
		harness_fill(rma_region_ptr(r[i]), REGION, (uint32_t)i);
	}
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(rma_peer_connect(c[i], dw.listen, &self[i]),
				 RMA_OK);
		ck_assert_int_eq(
		    rma_remote_import(c[i], self[i],
				      rma_region_descriptor(r[(i + 1) % N]),
				      &rem[i]),
		    RMA_OK);
	}
	/* Client i gets OPS 8-byte pieces of the first half of region i+1
	 * (never written) into the second half of its own, every client at
	 * once, then a flush; status in between. */
	for (int k = 0; k < OPS; k++) {
		for (int i = 0; i < N; i++) {
			uint64_t off = (uint64_t)(k * 8) % REGION;
			ck_assert_int_eq(rma_get(c[i], r[i], REGION + off,
						 rem[i], off, 8, NULL, NULL,
						 NULL),
					 RMA_OK);
		}
		if (k % 500 == 0) {
			Rma__V1__Reply *reply = status_call(c[k % N]);
			ck_assert_uint_eq(reply->status_reply->n_clients, N);
			rma__v1__reply__free_unpacked(reply, NULL);
		}
	}
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_flush(c[i], NULL, NULL, NULL, &req[i]),
				 RMA_OK);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(rma_request_wait(c[i], req[i], WAIT_MS),
				 RMA_OK);
		rma_request_release(req[i]);
	}
	for (int i = 0; i < N; i++) {
		uint8_t *mine = (uint8_t *)rma_region_ptr(r[i]) + REGION;
		uint8_t *theirs = rma_region_ptr(r[(i + 1) % N]);
		size_t n = OPS * 8 < REGION ? OPS * 8 : REGION;
		ck_assert_int_eq(memcmp(mine, theirs, n), 0);
	}
	for (int i = 0; i < N; i++)
		rma_disconnect(c[i]);
	status = harness_daemon_stop(&dw, SIGTERM);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* SIGTERM while clients of every worker hold regions and have
 * operations in flight: each worker drains, the daemon exits 0, and the
 * clients learn it. */
START_TEST(test_workers_sigterm_with_clients)
{
	static const char *const three[] = {"--workers", "3", NULL};
	enum { N = 3, OPS = 500 };
	struct daemon_proc dw;
	rma_client_t *c[N];
	rma_region_t *r[N];
	rma_peer_t *self;
	rma_remote_t *rem;
	int status;

	harness_daemon_start(&dw, three);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(rma_connect(dw.socket, &c[i]), RMA_OK);
		ck_assert_int_eq(rma_region_alloc(c[i], REGION, &r[i]), RMA_OK);
	}
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(rma_peer_connect(c[i], dw.listen, &self),
				 RMA_OK);
		ck_assert_int_eq(
		    rma_remote_import(c[i], self,
				      rma_region_descriptor(r[(i + 1) % N]),
				      &rem),
		    RMA_OK);
		for (int k = 0; k < OPS; k++)
			ck_assert_int_eq(rma_put(c[i], r[i], 0, rem, 0, 4096, 0,
						 NULL, NULL, NULL),
					 RMA_OK);
		ck_assert_int_eq(rma_progress(c[i]), RMA_OK);
	}
	status = harness_daemon_stop(&dw, SIGTERM);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < N; i++) {
		rma_status_t st = rma_flush_sync(c[i], NULL, WAIT_MS);
		ck_assert_msg(
		    st == RMA_ERR_DAEMON_GONE || st == RMA_ERR_SHUTDOWN,
		    "flush after the daemon exited: %s", rma_strerror(st));
		rma_disconnect(c[i]);
	}
}
END_TEST

/* Clients on every worker at once create and free regions and ask for
 * status, each of which stops the world: stops that meet one another
 * must take turns, never deadlock, and lose nothing. */
struct churn {
	const char *socket;
	int rounds;
	int failures;
};

static void *
churn_thread(void *arg)
{
	struct churn *ch = arg;
	rma_client_t *c;
	rma_region_t *r;

	if (rma_connect(ch->socket, &c) != RMA_OK) {
		ch->failures++;
		return NULL;
	}
	for (int i = 0; i < ch->rounds; i++) {
		Rma__V1__Request req = RMA__V1__REQUEST__INIT;
		Rma__V1__StatusRequest body = RMA__V1__STATUS_REQUEST__INIT;
		Rma__V1__Reply *reply = NULL;

		if (rma_region_alloc(c, 4096, &r) != RMA_OK ||
		    rma_region_free(c, r) != RMA_OK)
			ch->failures++;
		req.body_case = RMA__V1__REQUEST__BODY_STATUS;
		req.status = &body;
		if (rma_client_call(c, &req, &reply) != RMA_OK)
			ch->failures++;
		else
			rma__v1__reply__free_unpacked(reply, NULL);
	}
	rma_disconnect(c);
	return NULL;
}

START_TEST(test_workers_concurrent_stops)
{
	static const char *const four[] = {"--workers", "4", NULL};
	enum { THREADS = 6, ROUNDS = 150 };
	struct daemon_proc dw;
	pthread_t t[THREADS];
	struct churn ch[THREADS];
	rma_client_t *c;
	Rma__V1__Reply *reply;
	int status;

	harness_daemon_start(&dw, four);
	for (int i = 0; i < THREADS; i++) {
		ch[i] = (struct churn){dw.socket, ROUNDS, 0};
		ck_assert_int_eq(
		    pthread_create(&t[i], NULL, churn_thread, &ch[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(ch[i].failures, 0);
	}
	ck_assert_int_eq(rma_connect(dw.socket, &c), RMA_OK);
	reply = status_call(c);
	ck_assert_uint_eq(reply->status_reply->n_regions, 0);
	ck_assert_uint_eq(reply->status_reply->counters->regions_created,
			  THREADS * ROUNDS);
	rma__v1__reply__free_unpacked(reply, NULL);
	rma_disconnect(c);
	status = harness_daemon_stop(&dw, SIGTERM);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("workers");
	TCase *tc = tcase_create("workers");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_workers);
	tcase_add_test(tc, test_workers_status_under_load);
	tcase_add_test(tc, test_workers_sigterm_with_clients);
	tcase_add_test(tc, test_workers_concurrent_stops);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
