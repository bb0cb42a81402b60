/* SPDX-License-Identifier: BSD-2-Clause */
/* Hand-over (daemon/handover.c): a real rmad is taken over by a second
 * one started with --take-over on the same socket and port. A remote
 * initiator's descriptor stays valid, its writes land in the memory the
 * first owner mapped (the same memfd), and an orphan region nobody comes
 * back for goes stale after reattach_timeout. */
#include <check.h>
#include <poll.h>
#include <pthread.h>

#include "check_main.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"
#include "status_call.h"

extern char **environ;

#define SZ (1u << 20)
#define WAIT_MS 10000

static struct daemon_proc da, db;
static rma_client_t *ca, *cb;
static rma_region_t *ra, *rb;
static rma_peer_t *peer_a;
static rma_remote_t *remote_a;

static void
setup(void)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};

	harness_daemon_start(&da, flags);
	harness_daemon_start(&db, flags);
	ck_assert_int_eq(rma_connect(da.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	harness_fill(rma_region_ptr(ra), SZ, 1);
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &peer_a), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer_a, rma_region_descriptor(ra), &remote_a),
	    RMA_OK);
}

static void
teardown(void)
{
	if (cb)
		rma_disconnect(cb);
	if (ca)
		rma_disconnect(ca);
	cb = ca = NULL;
	if (db.pid > 0)
		harness_daemon_stop(&db, SIGTERM);
	if (da.pid > 0)
		harness_daemon_stop(&da, SIGTERM);
}

/* Starts a successor of da with extra flags; waits for the old one's
 * clean exit. da then names the successor. */
static void
take_over(const char *const *extra)
{
	struct daemon_proc old = da;
	int status = -1;

	da.pid = 0;
	harness_daemon_restart(&da, extra);
	old.socket[0] = '\0'; /* the path is the successor's now */
	ck_assert_msg(harness_daemon_wait_exit(&old, 10.0, &status),
		      "the old rmad did not exit after the hand-over");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the old rmad exited with status %d", status);
}

/* A put through remote_a, retried (as the documented retriable statuses
 * allow) until it completes; the first failure is reported in *first. */
static rma_status_t
put_until_ok(uint64_t off, double seconds, rma_status_t *first)
{
	double deadline = harness_now() + seconds;
	rma_status_t st;

	*first = RMA_OK;
	for (;;) {
		st = rma_put_sync(cb, rb, off, remote_a, off, 4096, 0, WAIT_MS);
		if (st == RMA_OK || harness_now() > deadline ||
		    st == RMA_ERR_STALE_DESCRIPTOR)
			return st;
		if (*first == RMA_OK)
			*first = st;
		harness_pause(0.01, deadline);
	}
}

START_TEST(test_take_over_keeps_descriptors)
{
	static const char *const flags[] = {"--take-over", NULL};
	uint8_t *mine = rma_region_ptr(ra);
	uint8_t *src = rma_region_ptr(rb);
	rma_status_t first, st;
	rma_region_t *fresh;
	rma_remote_t *again;
	rma_client_t *c2;
	double t0;

	ck_assert_int_eq(rma_get_sync(cb, rb, 0, remote_a, 0, SZ, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(src, mine, SZ), 0);

	t0 = harness_now();
	take_over(flags);
	harness_fill(src, SZ, 2);
	st = put_until_ok(8192, 10.0, &first);
	ck_assert_msg(st == RMA_OK, "put after the take-over: %s (first %s)",
		      rma_strerror(st), rma_strerror(first));
	fprintf(stderr,
		"take-over: first remote put %.1f ms after the "
		"successor started (first failure: %s)\n",
		(harness_now() - t0) * 1e3, rma_strerror(first));
	/* The bytes land in the mapping the first owner still holds. */
	ck_assert_int_eq(memcmp(mine + 8192, src + 8192, 4096), 0);
	/* Bytes written before the hand-over are all still there. */
	harness_fill(src, SZ, 1);
	ck_assert_int_eq(memcmp(mine, src, 8192), 0);
	ck_assert_int_eq(memcmp(mine + 12288, src + 12288, SZ - 12288), 0);
	/* The descriptor imports again: same identity, not stale. */
	ck_assert_int_eq(
	    rma_remote_import(cb, peer_a, rma_region_descriptor(ra), &again),
	    RMA_OK);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, again, 0, SZ, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(src, mine, SZ), 0);
	/* The successor serves the same socket. */
	ck_assert_int_eq(rma_connect(da.socket, &c2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c2, 4096, &fresh), RMA_OK);
	ck_assert_str_ne(rma_region_descriptor(fresh),
			 rma_region_descriptor(ra));
	rma_disconnect(c2);
}
END_TEST

START_TEST(test_take_over_twice)
{
	static const char *const flags[] = {"--take-over", NULL};
	uint8_t *mine = rma_region_ptr(ra);
	uint8_t *src = rma_region_ptr(rb);
	rma_status_t first;

	take_over(flags);
	take_over(flags);
	harness_fill(src, SZ, 3);
	ck_assert_int_eq(put_until_ok(0, 10.0, &first), RMA_OK);
	ck_assert_int_eq(memcmp(mine, src, 4096), 0);
}
END_TEST

/* A read-only descriptor survives too, and still grants gets only. */
START_TEST(test_take_over_keeps_read_only)
{
	static const char *const flags[] = {"--take-over", NULL};
	char text[256];
	rma_remote_t *ro;

	snprintf(text, sizeof(text), "%s", rma_region_read_only_descriptor(ra));
	take_over(flags);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, text, &ro), RMA_OK);
	memcpy(rma_region_ptr(ra), "readonly", 8);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, ro, 0, 8, 10000), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), "readonly", 8), 0);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, ro, 0, 8,
				      RMA_FLAG_REMOTE_COMPLETION, 10000),
			 RMA_ERR_PERMISSION);
	rma_remote_release(cb, ro);
}
END_TEST

START_TEST(test_orphan_goes_stale)
{
	static const char *const flags[] = {"--take-over", "--reattach-timeout",
					    "0.5", NULL};
	rma_status_t first, st;
	double deadline;

	take_over(flags);
	ck_assert_int_eq(put_until_ok(0, 10.0, &first), RMA_OK);
	/* Nobody came back for the region: past the deadline it is freed
	 * and its descriptor stale, as after a free by its owner. */
	deadline = harness_now() + 10.0;
	do {
		st = rma_put_sync(cb, rb, 0, remote_a, 0, 4096, 0, WAIT_MS);
		harness_pause(0.05, deadline);
	} while (st == RMA_OK && harness_now() < deadline);
	ck_assert_int_eq(st, RMA_ERR_STALE_DESCRIPTOR);
}
END_TEST

/* Take-overs one after the other, each process living less than the
 * orphan deadline (2 s), for longer than it: the deadline goes from one
 * process to the next, so the orphan (ra: ca never calls the library) is
 * freed 2 s after the first take-over, not 2 s after the last. */
START_TEST(test_orphan_deadline_survives_take_overs)
{
	static const char *const flags[] = {"--take-over", "--reattach-timeout",
					    "2", NULL};
	rma_status_t first, st = RMA_OK;
	double t0, deadline;
	int n = 0;

	take_over(flags);
	t0 = harness_now();
	ck_assert_int_eq(put_until_ok(0, 10.0, &first), RMA_OK);
	while (harness_now() < t0 + 3.0) {
		take_over(flags);
		n++;
	}
	/* the last process took no orphan, or frees it at once */
	deadline = harness_now() + 1.0;
	do {
		st = rma_put_sync(cb, rb, 0, remote_a, 0, 4096, 0, WAIT_MS);
		if (st == RMA_ERR_STALE_DESCRIPTOR)
			break;
		harness_pause(0.02, deadline);
	} while (harness_now() < deadline);
	ck_assert_msg(st == RMA_ERR_STALE_DESCRIPTOR,
		      "the orphan outlived its deadline through %d more "
		      "take-overs: %s",
		      n, rma_strerror(st));
}
END_TEST

/* Waits until ca's connection has news (the old process closed it), then
 * lets the library run: it re-attaches within its deadline. */
static rma_status_t
progress_after_close(rma_client_t *c)
{
	struct pollfd pfd = {.fd = rma_fd(c), .events = POLLIN};

	ck_assert_int_eq(poll(&pfd, 1, WAIT_MS), 1);
	return rma_progress(c);
}

/* The owner of region id on the daemon c talks to, as status shows it:
 * the client id, and that client's pid (0 and 0 for an orphan). */
static void
region_owner(rma_client_t *c, uint64_t id, uint32_t *client_p, int *pid_p)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__StatusReply *st = reply->status_reply;

	*client_p = 0;
	*pid_p = 0;
	for (size_t i = 0; i < st->n_regions; i++)
		if (st->regions[i]->region_id == id)
			*client_p = st->regions[i]->client_id;
	for (size_t i = 0; i < st->n_clients; i++)
		if (*client_p != 0 && st->clients[i]->client_id == *client_p)
			*pid_p = st->clients[i]->pid;
	rma__v1__reply__free_unpacked(reply, NULL);
}

/* A local client with a region survives a take-over: same mapping, same
 * bytes, remote puts still land in it, it owns the region again (not an
 * orphan, so the orphan deadline does not free it), its peer and remote
 * were connected and imported again, and its own operations work. */
START_TEST(test_local_client_reattaches)
{
	static const char *const flags[] = {"--take-over", "--reattach-timeout",
					    "2", NULL};
	uint8_t *mine = rma_region_ptr(ra);
	uint8_t *src = rma_region_ptr(rb);
	const char *desc_before = rma_region_descriptor(ra);
	char desc[256];
	rma_peer_t *peer_b;
	rma_remote_t *remote_b;
	rma_request_t *req;
	rma_status_t first, st;
	uint32_t owner;
	int pid;
	double t0, deadline;

	snprintf(desc, sizeof(desc), "%s", desc_before);
	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &peer_b), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, peer_b, rma_region_descriptor(rb), &remote_b),
	    RMA_OK);
	/* An operation issued just before the take-over: it completes,
	 * OK if the old process finished it, else with a retriable status
	 * (test_in_flight_at_take_over makes sure it cannot finish). */
	ck_assert_int_eq(
	    rma_put(ca, ra, 0, remote_b, 0, 4096, 0, NULL, NULL, &req), RMA_OK);

	t0 = harness_now();
	take_over(flags);
	/* Another client cannot claim ca's region without its secret. */
	{
		Rma__V1__Request q = RMA__V1__REQUEST__INIT;
		Rma__V1__RegionReattach body = RMA__V1__REGION_REATTACH__INIT;
		Rma__V1__Reply *reply = NULL;
		rma_client_t *thief;

		ck_assert_int_eq(rma_connect(da.socket, &thief), RMA_OK);
		body.region_id = ((struct rma_region *)ra)->region_id;
		body.generation = ((struct rma_region *)ra)->generation ^ 2;
		q.body_case = RMA__V1__REQUEST__BODY_REGION_REATTACH;
		q.region_reattach = &body;
		ck_assert_int_eq(rma_client_call(thief, &q, &reply),
				 RMA_ERR_NO_REGION);
		rma_disconnect(thief);
	}
	st = progress_after_close(ca);
	ck_assert_msg(st == RMA_OK, "progress after the take-over: %s (%s)",
		      rma_strerror(st), rma_last_error(ca));
	fprintf(stderr,
		"take-over: local client back %.1f ms after the "
		"successor started\n",
		(harness_now() - t0) * 1e3);
	st = rma_request_wait(ca, req, WAIT_MS);
	ck_assert_msg(st == RMA_OK || st == RMA_ERR_RESTARTED ||
			  st == RMA_ERR_SHUTDOWN,
		      "the put issued before completed %s", rma_strerror(st));
	rma_request_release(req);

	/* Same mapping, same bytes, same descriptor. */
	ck_assert_ptr_eq(rma_region_ptr(ra), mine);
	harness_fill(src, SZ, 1);
	ck_assert_int_eq(memcmp(mine, src, SZ), 0);
	ck_assert_str_eq(rma_region_descriptor(ra), desc);

	/* Owned by ca again, not an orphan; status counts it. */
	region_owner(ca, ((struct rma_region *)ra)->region_id, &owner, &pid);
	ck_assert_uint_ne(owner, 0);
	ck_assert_int_eq(pid, getpid());
	{
		Rma__V1__Reply *reply = status_call(ca);
		Rma__V1__StatusReply *sr = reply->status_reply;

		ck_assert_uint_eq(sr->restarts, 1);
		ck_assert_uint_eq(sr->regions_recovered, 1);
		ck_assert_uint_eq(sr->regions_reattached, 1);
		ck_assert_uint_eq(sr->regions_orphaned, 0);
		rma__v1__reply__free_unpacked(reply, NULL);
	}

	/* A remote initiator's put lands where ca sees it. */
	harness_fill(src, SZ, 7);
	ck_assert_int_eq(put_until_ok(4096, 10.0, &first), RMA_OK);
	ck_assert_int_eq(memcmp(mine + 4096, src + 4096, 4096), 0);

	/* ca's own operations, through the remote imported again. */
	harness_fill(mine, 8192, 9);
	ck_assert_int_eq(rma_put_sync(ca, ra, 0, remote_b, 65536, 8192,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(src + 65536, mine, 8192), 0);
	memset(mine, 0, 8192);
	ck_assert_int_eq(
	    rma_get_sync(ca, ra, 0, remote_b, 65536, 8192, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(src + 65536, mine, 8192), 0);

	/* Past the orphan deadline (2 s) the region still serves. */
	deadline = harness_now() + 3.0;
	harness_pause(3.0, deadline);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_a, 0, 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(mine, src, 4096), 0);
	/* And a new region on the same connection. */
	{
		rma_region_t *fresh;
		ck_assert_int_eq(rma_region_alloc(ca, 4096, &fresh), RMA_OK);
		rma_region_free(ca, fresh);
	}
}
END_TEST

/* RegionFree of an orphan with its secret, as librma sends it when a
 * take-over cut the free (client/region.c). */
static rma_status_t
free_orphan(rma_client_t *c, const rma_region_t *r, uint64_t generation)
{
	Rma__V1__Request q = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionFree body = RMA__V1__REGION_FREE__INIT;
	Rma__V1__Reply *reply = NULL;
	rma_status_t st;

	body.region_id = ((const struct rma_region *)r)->region_id;
	body.generation = generation;
	q.body_case = RMA__V1__REQUEST__BODY_REGION_FREE;
	q.region_free = &body;
	st = rma_client_call(c, &q, &reply);
	if (st == RMA_OK)
		rma__v1__reply__free_unpacked(reply, NULL);
	return st;
}

/* The owner's free reaches the new process before its re-attach: with the
 * region's secret it frees the orphan (not without, nor with another
 * secret). The owner then comes back with its other region: the freed one
 * alone is lost (RMA_ERR_NO_REGION, its mapping still readable memory). */
START_TEST(test_free_orphan_then_reattach_the_rest)
{
	static const char *const flags[] = {"--take-over", NULL};
	rma_region_t *ra2;
	rma_client_t *c2;
	rma_status_t st, first;
	uint64_t gen;
	uint32_t owner;
	int pid;

	ck_assert_int_eq(rma_region_alloc(ca, 4096, &ra2), RMA_OK);
	memcpy(rma_region_ptr(ra2), "kept", 4);
	gen = ((struct rma_region *)ra2)->generation;
	take_over(flags);
	ck_assert_int_eq(rma_connect(da.socket, &c2), RMA_OK);
	ck_assert_int_eq(free_orphan(c2, ra2, 0), RMA_ERR_NO_REGION);
	ck_assert_int_eq(free_orphan(c2, ra2, gen ^ 2), RMA_ERR_NO_REGION);
	ck_assert_int_eq(free_orphan(c2, ra2, gen), RMA_OK);
	ck_assert_int_eq(free_orphan(c2, ra2, gen), RMA_ERR_NO_REGION);
	rma_disconnect(c2);

	st = progress_after_close(ca);
	ck_assert_msg(st == RMA_OK, "re-attach without one region: %s (%s)",
		      rma_strerror(st), rma_last_error(ca));
	region_owner(ca, ((struct rma_region *)ra)->region_id, &owner, &pid);
	ck_assert_int_eq(pid, getpid());
	ck_assert_ptr_nonnull(rma_region_ptr(ra2));
	ck_assert_int_eq(memcmp(rma_region_ptr(ra2), "kept", 4), 0);
	{
		rma_peer_t *self;
		rma_remote_t *own;

		ck_assert_int_eq(rma_peer_connect(ca, da.listen, &self),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(
				     ca, self, rma_region_descriptor(ra), &own),
				 RMA_OK);
		ck_assert_int_eq(rma_get_sync(ca, ra2, 0, own, 0, 4, WAIT_MS),
				 RMA_ERR_NO_REGION);
		ck_assert_int_eq(rma_get_sync(ca, ra, 0, own, 4096, 4, WAIT_MS),
				 RMA_OK);
	}
	ck_assert_int_eq(rma_region_free(ca, ra2), RMA_OK);
	ck_assert_int_eq(rma_region_free(ca, ra2), RMA_ERR_NO_REGION);
	/* ra is served as before */
	harness_fill(rma_region_ptr(rb), SZ, 4);
	ck_assert_int_eq(put_until_ok(0, 10.0, &first), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), rma_region_ptr(rb), 4096),
			 0);
}
END_TEST

/* An operation that cannot finish before the take-over (its target, db,
 * is stopped): the old process gives up on it at the hand-over
 * (SHUTDOWN), or, had it not answered, the library completes it RESTARTED
 * once back; either way a retry after the take-over works. */
START_TEST(test_in_flight_at_take_over)
{
	static const char *const flags[] = {"--take-over", NULL};
	rma_peer_t *peer_b;
	rma_remote_t *remote_b;
	rma_request_t *req;
	rma_status_t st;

	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &peer_b), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, peer_b, rma_region_descriptor(rb), &remote_b),
	    RMA_OK);
	ck_assert_int_eq(kill(db.pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_put(ca, ra, 0, remote_b, 0, 4096,
				 RMA_FLAG_REMOTE_COMPLETION, NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_progress(ca), RMA_OK);
	take_over(flags);
	ck_assert_int_eq(kill(db.pid, SIGCONT), 0);
	st = rma_request_wait(ca, req, WAIT_MS);
	ck_assert_msg(st == RMA_ERR_SHUTDOWN || st == RMA_ERR_RESTARTED,
		      "the put in flight completed %s", rma_strerror(st));
	rma_request_release(req);
	ck_assert_int_eq(rma_put_sync(ca, ra, 0, remote_b, 0, 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
}
END_TEST

/* A daemon restarted (new identity), not taken over: the client must not
 * re-attach to it, and says so with DAEMON_GONE. */
START_TEST(test_restart_is_not_take_over)
{
	rma_status_t st;

	harness_daemon_stop(&da, SIGTERM);
	harness_daemon_restart(&da, NULL);
	st = progress_after_close(ca);
	ck_assert_int_eq(st, RMA_ERR_DAEMON_GONE);
	/* the new process was up before ca looked: it answered, as
	 * another daemon */
	ck_assert_msg(strstr(rma_last_error(ca), "not taken over") != NULL,
		      "detail: %s", rma_last_error(ca));
}
END_TEST

/* RMA_NO_REATTACH=1: today's behaviour, the client is gone and its
 * region goes stale at the orphan deadline. */
START_TEST(test_no_reattach_opt_out)
{
	static const char *const flags[] = {"--take-over", "--reattach-timeout",
					    "0.5", NULL};
	rma_client_t *c;
	rma_region_t *r;
	rma_remote_t *rem;
	rma_status_t st;
	double deadline;

	setenv("RMA_NO_REATTACH", "1", 1);
	ck_assert_int_eq(rma_connect(da.socket, &c), RMA_OK);
	unsetenv("RMA_NO_REATTACH");
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer_a, rma_region_descriptor(r), &rem),
	    RMA_OK);
	take_over(flags);
	ck_assert_int_eq(progress_after_close(c), RMA_ERR_DAEMON_GONE);
	deadline = harness_now() + 10.0;
	do {
		st = rma_put_sync(cb, rb, 0, rem, 0, 64, 0, WAIT_MS);
		harness_pause(0.05, deadline);
	} while (st != RMA_ERR_STALE_DESCRIPTOR && harness_now() < deadline);
	ck_assert_int_eq(st, RMA_ERR_STALE_DESCRIPTOR);
	rma_disconnect(c);
}
END_TEST

/* Nothing to take over: the new process exits 1 and serves nothing; a
 * take-over refused before it began leaves the old process serving. */
START_TEST(test_take_over_needs_a_daemon)
{
	char *argv[] = {
	    getenv("RMAD_BIN"), "--socket",    da.socket, "--listen",
	    da.listen,		"--take-over", NULL};
	struct daemon_proc p = {0};
	int status = -1;

	harness_daemon_stop(&da, SIGTERM);
	ck_assert_int_eq(
	    posix_spawn(&p.pid, argv[0], NULL, NULL, argv, environ), 0);
	ck_assert_msg(harness_daemon_wait_exit(&p, 10.0, &status),
		      "rmad --take-over without a daemon did not exit");
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}
END_TEST

/* Load during hand-overs of da: three threads, each with its own client,
 * put 4 KiB (remote completion) without pause and check every completed
 * put in the target's mapping:
 *   remote  cb -> ra  (db's client; da, the target, is restarted)
 *   local   ca2 -> ra (da's client, through da to its own region: the
 *                      client re-attaches; da is initiator and target)
 *   initiator ca -> rb (da's client to db's region: the initiating
 *                      daemon is the one restarted; ca re-attaches)
 * For each, per take-over: the time from the old process's exit (its
 * pidfd) to the first put completed after it, i.e. by the new process,
 * and the longest gap between two completed puts around it (which also
 * counts the old process's drain). Rounds from env RMAD_RESTART_ROUNDS
 * (bench/restart_blackout.sh asks for 20); a JSON line at the end. */
#define LOAD_SPAN (256u * 1024u)
#define LOAD_SERIES 3
#define MAX_ROUNDS 64

struct load {
	const char *name;
	rma_client_t *c;
	rma_region_t *src;
	uint64_t src_off;
	rma_remote_t *dst;
	uint64_t dst_off;
	uint8_t *dst_mem; /* the target region's mapping (same process) */
	volatile int stop;
	volatile double stopped_at; /* the old process's exit; 0 before */
	volatile double first_after;
	volatile uint64_t ok;
	double last_ok, worst_gap;
	uint64_t failed, bad_bytes;
	rma_status_t first_failure, bad_failure;
	uint32_t seed;
};

/* The statuses rma.h documents for an operation caught by a take-over:
 * the client's own daemon (RESTARTED, SHUTDOWN) or a peer's endpoint
 * (CONNECTION_RESET, CANCELED, UNREACHABLE, REJECTED, TIMEOUT). */
static int
load_retriable(rma_status_t st)
{
	return st == RMA_ERR_RESTARTED || st == RMA_ERR_SHUTDOWN ||
	       st == RMA_ERR_CONNECTION_RESET || st == RMA_ERR_CANCELED ||
	       st == RMA_ERR_UNREACHABLE || st == RMA_ERR_REJECTED ||
	       st == RMA_ERR_TIMEOUT;
}

static void *
load_run(void *arg)
{
	struct load *l = arg;
	uint8_t *src = rma_region_ptr(l->src);

	l->last_ok = harness_now();
	while (!l->stop) {
		uint64_t off = (uint64_t)(l->seed % (LOAD_SPAN / 4096)) * 4096;
		rma_status_t st;

		harness_fill(src + l->src_off + off, 4096, l->seed);
		st = rma_put_sync(l->c, l->src, l->src_off + off, l->dst,
				  l->dst_off + off, 4096,
				  RMA_FLAG_REMOTE_COMPLETION, WAIT_MS);
		if (st == RMA_OK) {
			double now = harness_now();
			if (now - l->last_ok > l->worst_gap)
				l->worst_gap = now - l->last_ok;
			l->last_ok = now;
			if (l->stopped_at > 0 && l->first_after == 0 &&
			    now > l->stopped_at)
				l->first_after = now;
			/* Flushed: the owner's mapping has it. */
			if (memcmp(l->dst_mem + l->dst_off + off,
				   src + l->src_off + off, 4096) != 0)
				l->bad_bytes++;
			l->seed++;
			__atomic_store_n(&l->ok, l->ok + 1, __ATOMIC_RELAXED);
		} else {
			l->failed++;
			if (l->first_failure == RMA_OK)
				l->first_failure = st;
			if (!load_retriable(st)) {
				l->bad_failure = st;
				break;
			}
		}
	}
	return NULL;
}

struct exit_watch {
	int pidfd;
	struct load *loads;
};

/* Marks the old process's exit in every load, as its pidfd says. */
static void *
exit_watch_run(void *arg)
{
	struct exit_watch *w = arg;

	if (harness_wait_fd(w->pidfd, 15.0)) {
		double t = harness_now();
		for (int s = 0; s < LOAD_SERIES; s++)
			w->loads[s].stopped_at = t;
	}
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* min, median, p90, max of v[0..n) in ms (v is sorted). */
static void
dist(double *v, int n, double out[4])
{
	int p90 = (n * 9) / 10 < n ? (n * 9) / 10 : n - 1;

	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	out[0] = v[0] * 1e3;
	out[1] = v[n / 2] * 1e3;
	out[2] = v[p90] * 1e3;
	out[3] = v[n - 1] * 1e3;
}

static int
loads_reached(struct load *loads, const uint64_t *at_least, int need_first)
{
	for (int s = 0; s < LOAD_SERIES; s++)
		if (loads[s].ok < at_least[s] ||
		    (need_first && loads[s].first_after == 0))
			return 0;
	return 1;
}

START_TEST(test_blackout_under_load)
{
	static const char *const flags[] = {"--take-over", NULL};
	static const char *const keys[LOAD_SERIES] = {
	    "remote_target_restarted", "local_target_restarted",
	    "local_initiator_restarted"};
	const char *env = getenv("RMAD_RESTART_ROUNDS");
	int rounds = env ? atoi(env) : 3;
	static double stop_to_first[LOAD_SERIES][MAX_ROUNDS];
	static double gaps[LOAD_SERIES][MAX_ROUNDS];
	struct load loads[LOAD_SERIES];
	rma_peer_t *peer_b, *peer_self;
	rma_remote_t *remote_b, *remote_self;
	rma_region_t *src2;
	rma_client_t *ca2;
	char json[2048];
	size_t at = 0;

	ck_assert_int_ge(rounds, 1);
	ck_assert_int_le(rounds, MAX_ROUNDS);
	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &peer_b), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, peer_b, rma_region_descriptor(rb), &remote_b),
	    RMA_OK);
	ck_assert_int_eq(rma_connect(da.socket, &ca2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca2, LOAD_SPAN, &src2), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(ca2, da.listen, &peer_self), RMA_OK);
	ck_assert_int_eq(rma_remote_import(ca2, peer_self,
					   rma_region_descriptor(ra),
					   &remote_self),
			 RMA_OK);

	for (int i = 0; i < rounds; i++) {
		struct exit_watch w = {.loads = loads};
		uint64_t want[LOAD_SERIES];
		pthread_t t[LOAD_SERIES], wt;
		double deadline;

		/* disjoint ranges: see the comment above */
		loads[0] = (struct load){.name = "remote (target restarted)",
					 .c = cb,
					 .src = rb,
					 .dst = remote_a,
					 .dst_mem = rma_region_ptr(ra)};
		loads[1] = (struct load){.name = "local (target restarted)",
					 .c = ca2,
					 .src = src2,
					 .dst = remote_self,
					 .dst_off = 2 * LOAD_SPAN,
					 .dst_mem = rma_region_ptr(ra)};
		loads[2] = (struct load){.name = "local (initiator restarted)",
					 .c = ca,
					 .src = ra,
					 .src_off = LOAD_SPAN,
					 .dst = remote_b,
					 .dst_off = 2 * LOAD_SPAN,
					 .dst_mem = rma_region_ptr(rb)};
		for (int s = 0; s < LOAD_SERIES; s++) {
			loads[s].seed = 100u + 1000u * (uint32_t)s;
			ck_assert_int_eq(
			    pthread_create(&t[s], NULL, load_run, &loads[s]),
			    0);
			want[s] = 20;
		}
		deadline = harness_now() + 10.0;
		while (!loads_reached(loads, want, 0) &&
		       harness_now() < deadline)
			harness_pause(0.005, deadline);
		w.pidfd = (int)syscall(SYS_pidfd_open, da.pid, 0);
		ck_assert_int_ge(w.pidfd, 0);
		ck_assert_int_eq(pthread_create(&wt, NULL, exit_watch_run, &w),
				 0);
		take_over(flags);
		pthread_join(wt, NULL);
		close(w.pidfd);
		for (int s = 0; s < LOAD_SERIES; s++)
			want[s] = loads[s].ok + 20;
		deadline = harness_now() + 10.0;
		while (!loads_reached(loads, want, 1) &&
		       harness_now() < deadline)
			harness_pause(0.005, deadline);
		for (int s = 0; s < LOAD_SERIES; s++)
			loads[s].stop = 1;
		for (int s = 0; s < LOAD_SERIES; s++)
			pthread_join(t[s], NULL);
		for (int s = 0; s < LOAD_SERIES; s++) {
			struct load *l = &loads[s];

			ck_assert_msg(l->bad_failure == RMA_OK,
				      "round %d, %s: failure %s is not "
				      "retriable",
				      i, l->name, rma_strerror(l->bad_failure));
			ck_assert_msg(l->stopped_at > 0 && l->first_after > 0,
				      "round %d, %s: no put completed after "
				      "the take-over",
				      i, l->name);
			ck_assert_uint_eq(l->bad_bytes, 0);
			stop_to_first[s][i] = l->first_after - l->stopped_at;
			gaps[s][i] = l->worst_gap;
			fprintf(stderr,
				"blackout round %2d  %-28s %6.1f ms  gap %6.1f "
				"ms  %5llu ok  %llu failed (first: %s)\n",
				i, l->name, stop_to_first[s][i] * 1e3,
				l->worst_gap * 1e3, (unsigned long long)l->ok,
				(unsigned long long)l->failed,
				rma_strerror(l->first_failure));
		}
	}
	at += (size_t)snprintf(json + at, sizeof(json) - at,
			       "{\"bench\": \"restart_blackout\", "
			       "\"rounds\": %d",
			       rounds);
	for (int s = 0; s < LOAD_SERIES; s++) {
		double a[4], b[4];

		dist(stop_to_first[s], rounds, a);
		dist(gaps[s], rounds, b);
		fprintf(stderr,
			"blackout over %d take-overs, %-28s exit -> first put "
			"min %.1f median %.1f p90 %.1f max %.1f ms; longest "
			"gap min %.1f median %.1f p90 %.1f max %.1f ms\n",
			rounds, loads[s].name, a[0], a[1], a[2], a[3], b[0],
			b[1], b[2], b[3]);
		at += (size_t)snprintf(
		    json + at, sizeof(json) - at,
		    ", \"%s\": {\"exit_to_first_ms\": {\"min\": %.1f, "
		    "\"median\": %.1f, \"p90\": %.1f, \"max\": %.1f}, "
		    "\"gap_ms\": {\"min\": %.1f, \"median\": %.1f, \"p90\": "
		    "%.1f, \"max\": %.1f}}",
		    keys[s], a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
	}
	fprintf(stderr, "blackout json: %s}\n", json);
	rma_disconnect(ca2);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("restart");
	TCase *tc = tcase_create("take-over");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_take_over_keeps_descriptors);
	tcase_add_test(tc, test_take_over_twice);
	tcase_add_test(tc, test_take_over_keeps_read_only);
	tcase_add_test(tc, test_orphan_goes_stale);
	tcase_add_test(tc, test_blackout_under_load);
	tcase_add_test(tc, test_take_over_needs_a_daemon);
	tcase_add_test(tc, test_local_client_reattaches);
	tcase_add_test(tc, test_no_reattach_opt_out);
	tcase_add_test(tc, test_restart_is_not_take_over);
	tcase_add_test(tc, test_in_flight_at_take_over);
	tcase_add_test(tc, test_free_orphan_then_reattach_the_rest);
	tcase_add_test(tc, test_orphan_deadline_survives_take_overs);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
