/* SPDX-License-Identifier: BSD-2-Clause */
/* Hand-over (daemon/handover.c): a real rmad is taken over by a second
 * one started with --take-over on the same socket and port. A remote
 * initiator's descriptor stays valid, its writes land in the memory the
 * first owner mapped (the same memfd), and an orphan region nobody comes
 * back for goes stale after reattach_timeout. */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include "check_main.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handover_wire.h"
#include "harness.h"
#include "rma.h"
#include "status_call.h"

extern char **environ;

#define SZ (1u << 20)
#define WAIT_MS 10000

HARNESS_PAIR(pair);

static void
setup(void)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};

	harness_pair_start(&pair, SZ, flags);
	harness_fill(rma_region_ptr(ra), SZ, 1);
}

static void
teardown(void)
{
	harness_pair_stop(&pair);
}

/* A put through remote_a, retried (as the documented retriable statuses
 * allow) until it completes; the first failure is reported in *first. */
static rma_status_t
put_to_until_ok(rma_remote_t *remote, uint64_t off, double seconds,
		rma_status_t *first)
{
	double deadline = harness_now() + seconds;
	rma_status_t st;

	*first = RMA_OK;
	for (;;) {
		st = rma_put_sync(cb, rb, off, remote, off, 4096, 0, WAIT_MS);
		if (st == RMA_OK || harness_now() > deadline ||
		    st == RMA_ERR_STALE_DESCRIPTOR)
			return st;
		if (*first == RMA_OK)
			*first = st;
		harness_pause(0.01, deadline);
	}
}

static rma_status_t
put_until_ok(uint64_t off, double seconds, rma_status_t *first)
{
	return put_to_until_ok(remote_a, off, seconds, first);
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
	harness_daemon_take_over(&da, flags, 10.0);
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

	harness_daemon_take_over(&da, flags, 10.0);
	harness_daemon_take_over(&da, flags, 10.0);
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
	harness_daemon_take_over(&da, flags, 10.0);
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

	harness_daemon_take_over(&da, flags, 10.0);
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

	harness_daemon_take_over(&da, flags, 10.0);
	t0 = harness_now();
	ck_assert_int_eq(put_until_ok(0, 10.0, &first), RMA_OK);
	while (harness_now() < t0 + 3.0) {
		harness_daemon_take_over(&da, flags, 10.0);
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
/* A client other than r's owner asks to re-attach r with a wrong secret:
 * refused as a region it has not. */
static void
reattach_refused_without_secret(rma_region_t *r)
{
	Rma__V1__Request q = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionReattach body = RMA__V1__REGION_REATTACH__INIT;
	Rma__V1__Reply *reply = NULL;
	rma_client_t *thief;

	ck_assert_int_eq(rma_connect(da.socket, &thief), RMA_OK);
	body.region_id = ((struct rma_region *)r)->region_id;
	body.generation = ((struct rma_region *)r)->generation ^ 2;
	q.body_case = RMA__V1__REQUEST__BODY_REGION_REATTACH;
	q.region_reattach = &body;
	ck_assert_int_eq(rma_client_call(thief, &q, &reply), RMA_ERR_NO_REGION);
	rma_disconnect(thief);
}

/* Status after one take-over whose one region came back to its owner. */
static void
status_after_one_reattach(rma_client_t *c)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__StatusReply *sr = reply->status_reply;

	ck_assert_uint_eq(sr->restarts, 1);
	ck_assert_uint_eq(sr->regions_recovered, 1);
	ck_assert_uint_eq(sr->regions_reattached, 1);
	ck_assert_uint_eq(sr->regions_orphaned, 0);
	rma__v1__reply__free_unpacked(reply, NULL);
}

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
	harness_daemon_take_over(&da, flags, 10.0);
	/* Another client cannot claim ca's region without its secret. */
	reattach_refused_without_secret(ra);
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
	status_after_one_reattach(ca);

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
 * take-over cut the free (client/rma_region.c). */
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
	harness_daemon_take_over(&da, flags, 10.0);
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

/* ca's put of 4 KiB into region r of daemon t, with remote completion,
 * sent while t is stopped (SIGSTOP): it stays in flight until t goes on. */
static rma_request_t *
put_to_stopped(const struct daemon_proc *t, rma_region_t *r,
	       rma_remote_t **remote_p)
{
	rma_request_t *req;
	rma_peer_t *peer;

	ck_assert_int_eq(rma_peer_connect(ca, t->listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, peer, rma_region_descriptor(r), remote_p),
	    RMA_OK);
	ck_assert_int_eq(kill(t->pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_put(ca, ra, 0, *remote_p, 0, 4096,
				 RMA_FLAG_REMOTE_COMPLETION, NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_progress(ca), RMA_OK);
	return req;
}

/* An operation that cannot finish before the take-over (its target, db,
 * is stopped): the old process gives up on it at the hand-over
 * (SHUTDOWN), or, had it not answered, the library completes it RESTARTED
 * once back; either way a retry after the take-over works. */
START_TEST(test_in_flight_at_take_over)
{
	static const char *const flags[] = {"--take-over", NULL};
	rma_remote_t *remote_b;
	rma_request_t *req;
	rma_status_t st;

	req = put_to_stopped(&db, rb, &remote_b);
	harness_daemon_take_over(&da, flags, 10.0);
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

/* What a remote initiator (cb, on db) sees of a region whose owner left the
 * old process during its hand-over, while that process still runs. */
struct leaving {
	rma_client_t *owner; /* on da, RMA_NO_REATTACH: leaves at the goodbye */
	rma_remote_t *remote; /* cb's import of its region */
	const char *desc;
	pid_t held_by; /* stopped: its continuing lets the old process go */
	int stale;
	rma_status_t put_st, import_st;
};

static void *
leaving_run(void *arg)
{
	struct leaving *l = arg;
	struct pollfd pfd = {.fd = rma_fd(l->owner), .events = POLLIN};
	double deadline = harness_now() + 20.0;
	rma_remote_t *again = NULL;
	rma_status_t st;

	/* The old process says goodbye; the owner leaves it, as a client
	 * re-attaching to the successor does. */
	l->put_st = RMA_ERR_TIMEOUT;
	if (poll(&pfd, 1, (int)((deadline - harness_now()) * 1000)) != 1)
		return NULL;
	(void)rma_progress(l->owner);
	rma_disconnect(l->owner);
	/* The old process, held by ca's operation to the stopped dc (and
	 * its shutdown_timeout of 60 s), still serves until we let it go:
	 * once it has seen the owner go, it answers for the region with
	 * SHUTDOWN (retry), never STALE (final). */
	do {
		st = rma_put_sync(cb, rb, 0, l->remote, 0, 4096, 0, WAIT_MS);
		l->stale += st == RMA_ERR_STALE_DESCRIPTOR;
	} while (st == RMA_OK && harness_now() < deadline);
	l->put_st = st;
	kill(l->held_by, SIGCONT); /* the old process may go now */
	if (st != RMA_ERR_SHUTDOWN)
		return NULL;
	/* An import is answered by the successor: asked of the old process
	 * before it exits, it gets no answer there, and db asks again. */
	do {
		st = rma_remote_import(cb, peer_a, l->desc, &again);
		l->stale += st == RMA_ERR_STALE_DESCRIPTOR;
	} while (st != RMA_OK && st != RMA_ERR_STALE_DESCRIPTOR &&
		 harness_now() < deadline);
	l->import_st = st;
	return NULL;
}

/* A region whose owner leaves the old process during the hand-over, before
 * that process exits, lives on in the successor: the old process must not
 * tell a peer it is gone (a peer takes that as final: the back-to-back
 * take-overs of restart_load.sh saw it). */
START_TEST(test_owner_leaves_during_hand_over)
{
	static const char *const lingering[] = {
	    "--take-over", "--shutdown-timeout", "60", NULL};
	static const char *const flags[] = {"--take-over", NULL};
	struct daemon_proc dc = {0};
	struct leaving l = {0};
	rma_client_t *cc;
	rma_region_t *rc, *mine;
	rma_remote_t *remote_c;
	rma_request_t *req;
	rma_status_t first, st;
	pthread_t t;
	char desc[256];

	/* A process that, handing over, waits for its operations up to
	 * 60 s: the window below ends when the test lets it. */
	harness_daemon_take_over(&da, lingering, 10.0);
	ck_assert_int_eq(progress_after_close(ca), RMA_OK);
	setenv("RMA_NO_REATTACH", "1", 1);
	ck_assert_int_eq(rma_connect(da.socket, &l.owner), RMA_OK);
	unsetenv("RMA_NO_REATTACH");
	ck_assert_int_eq(rma_region_alloc(l.owner, 8192, &mine), RMA_OK);
	snprintf(desc, sizeof(desc), "%s", rma_region_descriptor(mine));
	l.desc = desc;
	ck_assert_int_eq(rma_remote_import(cb, peer_a, desc, &l.remote),
			 RMA_OK);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, l.remote, 0, 4096, 0, WAIT_MS),
			 RMA_OK);

	/* ca's put to a stopped daemon keeps the old process serving after
	 * it has said goodbye, until leaving_run continues dc. */
	harness_daemon_start(&dc, NULL);
	ck_assert_int_eq(rma_connect(dc.socket, &cc), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cc, 4096, &rc), RMA_OK);
	req = put_to_stopped(&dc, rc, &remote_c);
	l.held_by = dc.pid;

	ck_assert_int_eq(pthread_create(&t, NULL, leaving_run, &l), 0);
	harness_daemon_take_over(&da, flags, 30.0);
	pthread_join(t, NULL);
	ck_assert_int_eq(kill(dc.pid, SIGCONT), 0);
	ck_assert_msg(l.stale == 0 && l.put_st == RMA_ERR_SHUTDOWN,
		      "a put to a region handed over: %d stale; the last "
		      "failed %s",
		      l.stale, rma_strerror(l.put_st));
	ck_assert_msg(l.import_st == RMA_OK, "the import in the hand-over: %s",
		      rma_strerror(l.import_st));

	/* The successor has the region (an orphan now): the descriptor
	 * imported before works, and the bytes are there. */
	harness_fill(rma_region_ptr(rb), 8192, 7);
	st = put_to_until_ok(l.remote, 4096, 10.0, &first);
	ck_assert_msg(st == RMA_OK, "put after the hand-over: %s (first %s)",
		      rma_strerror(st), rma_strerror(first));
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, l.remote, 4096, 4096, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb),
				(uint8_t *)rma_region_ptr(rb) + 4096, 4096),
			 0);

	/* dc went on before the old process exited: the put may have
	 * completed there, or ca heard of it as any put the take-over cut */
	st = rma_request_wait(ca, req, WAIT_MS);
	ck_assert_msg(st == RMA_OK || st == RMA_ERR_SHUTDOWN ||
			  st == RMA_ERR_RESTARTED,
		      "the put in flight completed %s", rma_strerror(st));
	rma_request_release(req);
	rma_disconnect(cc);
	harness_daemon_stop(&dc, SIGTERM);
}
END_TEST

/* A successor from before deadlines went on CLOCK_BOOTTIME asks for them
 * without HANDOVER_TAKES_BOOTTIME and reads them on the wall clock: an
 * orphan's time left must reach it as a wall-clock deadline (a boot-time
 * one reads as long past, and it would free the orphan at once). The
 * older successor is faked here, asking as one did. */
START_TEST(test_older_successor_gets_wall_clock_deadlines)
{
	static const char *const flags[] = {"--reattach-timeout", "60", NULL};
	static const char *const again[] = {"--take-over", "--reattach-timeout",
					    "60", NULL};
	struct handover_msg ask = {HANDOVER_MAGIC, HANDOVER_VERSION,
				   HANDOVER_ASK, 0};
	struct handover_ask body = {.takes = HANDOVER_TAKES_DEADLINES};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct iovec iov[2] = {{&ask, sizeof(ask)}, {&body, sizeof(body)}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	struct daemon_proc dx = {0};
	struct handover_msg m = {0};
	uint64_t until[HANDOVER_CHUNK], buf[HANDOVER_CHUNK * 16];
	size_t n_until = 0, n_fds;
	struct timespec ts;
	uint64_t wall;
	rma_client_t *c;
	rma_region_t *r;
	int fd, status = -1;
	ssize_t n;

	harness_daemon_start(&dx, flags);
	setenv("RMA_NO_REATTACH", "1", 1);
	ck_assert_int_eq(rma_connect(dx.socket, &c), RMA_OK);
	unsetenv("RMA_NO_REATTACH");
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
	/* its owner does not come back: an orphan, 60 s to go */
	harness_daemon_take_over(&dx, again, 10.0);
	rma_disconnect(c);

	ck_assert_int_lt(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s",
				  dx.socket, HANDOVER_SUFFIX),
			 (int)sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL),
			 (ssize_t)(sizeof(ask) + sizeof(body)));
	ck_assert_int_eq(harness_wait_fd(fd, 10.0), 1);
	do {
		m.magic = 0; /* the end of the stream leaves m as it is */
		n = handover_wire_recv(fd, &m, buf, sizeof(buf), NULL, 0,
				       &n_fds);
		ck_assert_msg(n >= 0 && m.magic == HANDOVER_MAGIC,
			      "the hand-over broke off");
		if (m.kind == HANDOVER_DEADLINES) {
			ck_assert_uint_le(n_until + m.count, HANDOVER_CHUNK);
			memcpy(until + n_until, buf, m.count * sizeof(*until));
			n_until += m.count;
		}
	} while (m.kind != HANDOVER_END);
	clock_gettime(CLOCK_REALTIME, &ts);
	wall = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	ck_assert_uint_eq(m.count, 1);
	ck_assert_uint_eq(n_until, 1);
	ck_assert_msg(until[0] > wall + 30000 && until[0] <= wall + 60000,
		      "deadline %llu ms, the wall clock %llu ms: not 60 s of "
		      "wall-clock time left",
		      (unsigned long long)until[0], (unsigned long long)wall);
	close(fd);
	ck_assert(harness_daemon_wait_exit(&dx, 15.0, &status));
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
	harness_daemon_take_over(&da, flags, 10.0);
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

/* One round's puts, each series: only retriable failures, one put done
 * after the take-over, the bytes right; its blackout and longest gap go
 * into round i of stop_to_first and gaps. */
static void
blackout_round_check(struct load *loads, int i,
		     double stop_to_first[][MAX_ROUNDS],
		     double gaps[][MAX_ROUNDS])
{
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

/* The blackouts over every round, each series: their spread, as text
 * and as one JSON line. */
static void
blackout_report(const struct load *loads, int rounds,
		double stop_to_first[][MAX_ROUNDS], double gaps[][MAX_ROUNDS])
{
	static const char *const keys[LOAD_SERIES] = {
	    "remote_target_restarted", "local_target_restarted",
	    "local_initiator_restarted"};
	char json[2048];
	size_t at = 0;

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
}

START_TEST(test_blackout_under_load)
{
	static const char *const flags[] = {"--take-over", NULL};
	const char *env = getenv("RMAD_RESTART_ROUNDS");
	int rounds = env ? atoi(env) : 3;
	static double stop_to_first[LOAD_SERIES][MAX_ROUNDS];
	static double gaps[LOAD_SERIES][MAX_ROUNDS];
	struct load loads[LOAD_SERIES];
	rma_peer_t *peer_b, *peer_self;
	rma_remote_t *remote_b, *remote_self;
	rma_region_t *src2;
	rma_client_t *ca2;

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
		harness_daemon_take_over(&da, flags, 10.0);
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
		blackout_round_check(loads, i, stop_to_first, gaps);
	}
	blackout_report(loads, rounds, stop_to_first, gaps);
	rma_disconnect(ca2);
}
END_TEST

/* ---- a predecessor that is not one (issue 23, finding 4) -----------------
 *
 * rmad --take-over takes an identity, regions and the client socket from
 * whoever answers at "<socket>.takeover". tests/adversary/fake_predecessor
 * answers there as another user, or as this one with memfds it can still
 * shrink. A successor refuses another user's predecessor (exit 1: it was
 * asked to take over, and starting fresh beside a socket someone else
 * controls would hide that), takes from its own user's everything but a
 * memfd without rmad's seals, and takes from no directory others can
 * write unless socket_dir_shared says so. */

struct fake {
	pid_t pid;
	int out_fd; /* its lines */
	int in_fd;  /* its commands; closing it ends it */
};

/* Its next line, within seconds: 1, or 0 (EOF or time out). */
static int
fake_line(struct fake *f, char *buf, size_t len, double seconds)
{
	double deadline = harness_now() + seconds;
	size_t n = 0;
	char c;

	while (n + 1 < len &&
	       harness_wait_fd(f->out_fd, deadline - harness_now()) &&
	       read(f->out_fd, &c, 1) == 1) {
		if (c == '\n') {
			buf[n] = '\0';
			return 1;
		}
		buf[n++] = c;
	}
	buf[n] = '\0';
	return 0;
}

/* The fake at sock, as nobody through setpriv when as_nobody, with args. */
static void
fake_start(struct fake *f, const char *sock, int as_nobody,
	   const char *const *args)
{
	const char *bin = getenv("FAKE_PREDECESSOR_BIN");
	const char *argv[16];
	int out[2], in[2], argc = 0;
	char line[32];

	ck_assert_ptr_nonnull(bin);
	if (as_nobody) {
		argv[argc++] = "setpriv";
		argv[argc++] = "--reuid=65534";
		argv[argc++] = "--regid=65534";
		argv[argc++] = "--clear-groups";
	}
	argv[argc++] = bin;
	argv[argc++] = sock;
	for (int i = 0; args != NULL && args[i] != NULL && argc < 15; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	f->pid = fork();
	ck_assert_int_ge(f->pid, 0);
	if (f->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], 0);
		dup2(out[1], 1);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	f->out_fd = out[0];
	f->in_fd = in[1];
	ck_assert_msg(fake_line(f, line, sizeof(line), 10.0) &&
			  strcmp(line, "listening") == 0,
		      "the fake predecessor did not start: '%s'", line);
}

/* Its answer to cmd. */
static void
fake_ask(struct fake *f, const char *cmd, char *answer, size_t len)
{
	ck_assert_int_eq(write(f->in_fd, cmd, strlen(cmd)),
			 (ssize_t)strlen(cmd));
	ck_assert_msg(fake_line(f, answer, len, 10.0),
		      "the fake predecessor did not answer %s", cmd);
}

/* Ends it (EOF on its stdin); its exit status. */
static int
fake_stop(struct fake *f)
{
	struct daemon_proc p = {.pid = f->pid};
	int status = -1;

	close(f->in_fd);
	ck_assert_msg(harness_daemon_wait_exit(&p, 10.0, &status),
		      "the fake predecessor did not exit");
	close(f->out_fd);
	f->pid = 0;
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* rmad on sock (a fresh port), with extra flags. 1 once ready (p names
 * it), or 0 once it exited (*status_p). Its stderr so far in err. */
static int
rmad_run(struct daemon_proc *p, const char *sock, const char *const *extra,
	 int *status_p, char *err, size_t err_len)
{
	const char *argv[24];
	char fdarg[16];
	int ready[2], errp[2], argc = 0, pidfd, is_ready;
	size_t len = 0;
	ssize_t n;
	char b[8];

	memset(p, 0, sizeof(*p));
	snprintf(p->socket, sizeof(p->socket), "%s", sock);
	p->port = harness_free_port();
	snprintf(p->listen, sizeof(p->listen), "127.0.0.1:%u", p->port);
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
	snprintf(fdarg, sizeof(fdarg), "%d", ready[1]);
	argv[argc++] = getenv("RMAD_BIN");
	argv[argc++] = "--socket";
	argv[argc++] = sock;
	argv[argc++] = "--listen";
	argv[argc++] = p->listen;
	argv[argc++] = "--ready-fd";
	argv[argc++] = fdarg;
	argv[argc++] = "--log-level";
	argv[argc++] = "warn";
	for (int i = 0; extra != NULL && extra[i] != NULL && argc < 23; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ready[0]);
		dup2(errp[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(ready[1]);
	close(errp[1]);
	pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	ck_assert_int_ge(pidfd, 0);
	{
		struct pollfd w[2] = {{ready[0], POLLIN, 0},
				      {pidfd, POLLIN, 0}};
		double deadline = harness_now() + 15.0;

		while (poll(w, 2, 100) == 0 && harness_now() < deadline)
			continue;
	}
	is_ready = read(ready[0], b, sizeof(b)) > 0;
	close(ready[0]);
	close(pidfd);
	if (!is_ready) {
		p->socket[0] = '\0'; /* not its to unlink */
		ck_assert_msg(harness_daemon_wait_exit(p, 10.0, status_p),
			      "rmad on %s neither became ready nor exited",
			      sock);
	}
	/* what it logged before it said ready, or all of it */
	while (len + 1 < err_len &&
	       harness_wait_fd(errp[0], is_ready ? 0 : 10.0) &&
	       (n = read(errp[0], err + len, err_len - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = '\0';
	close(errp[0]);
	return is_ready;
}

/* rmad --take-over at sock, which must be refused: its stderr in err. */
static void
successor_refused(const char *sock, const char *const *extra, char *err,
		  size_t err_len)
{
	struct daemon_proc p;
	int status = -1;

	ck_assert_msg(!rmad_run(&p, sock, extra, &status, err, err_len),
		      "rmad --take-over took over from the fake: %s", err);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		      "status %d: %s", status, err);
	ck_assert_msg(access(sock, F_OK) < 0, "%s is served", sock);
}

static void
remove_dir(const char *dir)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A predecessor of another uid, in a directory only root can write: it
 * bound the path as root and listens as nobody, which is who SO_PEERCRED
 * then names. */
START_TEST(test_take_over_refuses_another_uid)
{
	static const char *const as_nobody[] = {"--as-uid", "65534", NULL};
	static const char *const take[] = {"--take-over", NULL};
	char dir[] = "/tmp/rmad-fake.XXXXXX", sock[64], err[4096];
	struct fake f;

	if (geteuid() != 0) {
		fprintf(stderr, "restart: another uid skipped: needs root\n");
		return;
	}
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/rmad.sock", dir);
	fake_start(&f, sock, 0, as_nobody);
	successor_refused(sock, take, err, sizeof(err));
	ck_assert_msg(strstr(err, "served by uid 65534") &&
			  strstr(err, "nothing taken over"),
		      "%s", err);
	/* refused before it asked: nothing was handed over */
	ck_assert_int_eq(fake_stop(&f), 3);
	remove_dir(dir);
}
END_TEST

/* A predecessor of our own uid hands, as the client socket, something
 * that is not a listening Unix stream socket with a path: the successor
 * takes none of it (exit 1) rather than serve on it. */
START_TEST(test_take_over_refuses_foreign_listen_fd)
{
	static const char *const kinds[] = {"pipe", "dgram", "idle",
					    "nameless"};
	static const char *const take[] = {"--take-over", NULL};
	char dir[] = "/tmp/rmad-fake.XXXXXX", sock[64], err[4096];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/rmad.sock", dir);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *args[] = {"--listen-fd", kinds[i], NULL};
		struct fake f;

		fake_start(&f, sock, 0, args);
		successor_refused(sock, take, err, sizeof(err));
		ck_assert_msg(strstr(err, "not a listening Unix stream socket"),
			      "%s: %s", kinds[i], err);
		ck_assert_int_eq(fake_stop(&f), 0);
	}
	remove_dir(dir);
}
END_TEST

/* A directory anyone may write (sticky, as /tmp): nobody binds
 * "<socket>.takeover" there; the successor refuses the directory, and
 * with socket_dir_shared still refuses the predecessor's uid. */
START_TEST(test_take_over_refuses_shared_dir)
{
	static const char *const take[] = {"--take-over", NULL};
	static const char *const take_shared[] = {"--take-over",
						  "--socket-dir-shared", NULL};
	char dir[] = "/tmp/rmad-fake.XXXXXX", sock[64], err[4096];
	struct fake f;

	if (geteuid() != 0) {
		fprintf(stderr, "restart: shared dir skipped: needs root\n");
		return;
	}
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 01777), 0);
	snprintf(sock, sizeof(sock), "%s/rmad.sock", dir);
	fake_start(&f, sock, 1, NULL);

	successor_refused(sock, take, err, sizeof(err));
	ck_assert_msg(strstr(err, "writable by all users") &&
			  strstr(err, "not taking over"),
		      "%s", err);
	successor_refused(sock, take_shared, err, sizeof(err));
	ck_assert_msg(strstr(err, "served by uid 65534"), "%s", err);
	ck_assert_int_eq(fake_stop(&f), 3);
	remove_dir(dir);
}
END_TEST

/* A predecessor of our own uid hands region 1 in a memfd it can still
 * shrink, region 2 sealed: the successor serves without region 1, and
 * lives when the fake cuts every memfd it holds. */
START_TEST(test_take_over_refuses_unsealed_memfd)
{
	static const char *const args[] = {"--regions", "2", "--unsealed", "1",
					   NULL};
	static const char *const take[] = {"--take-over", NULL};
	char dir[] = "/tmp/rmad-fake.XXXXXX", sock[64], err[4096];
	char line[160], desc[2][RMA_DESCRIPTOR_MAX];
	uint8_t *src = rma_region_ptr(rb);
	rma_remote_t *r1, *r2;
	rma_peer_t *peer;
	rma_status_t st;
	struct fake f;
	int status;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/rmad.sock", dir);
	fake_start(&f, sock, 0, args);
	ck_assert_msg(rmad_run(&da, sock, take, &status, err, sizeof(err)),
		      "the successor did not start: %s", err);
	for (int i = 0; i < 2; i++) {
		unsigned id;

		ck_assert(fake_line(&f, line, sizeof(line), 10.0));
		ck_assert_int_eq(sscanf(line, "region %u %127s", &id, desc[i]),
				 2);
		ck_assert_uint_eq(id, (unsigned)i + 1);
	}
	ck_assert(fake_line(&f, line, sizeof(line), 10.0));
	ck_assert_str_eq(line, "handed 2");
	ck_assert_msg(strstr(err, "region_adopt: region 1: memfd not sealed") &&
			  strstr(err, "1 of 2 regions could not be mapped"),
		      "%s", err);
	ck_assert_ptr_null(strstr(err, "region_adopt: region 2"));

	/* Region 2 is served, in the memory its predecessor handed over. */
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &peer), RMA_OK);
	ck_assert_int_eq(rma_remote_import(cb, peer, desc[1], &r2), RMA_OK);
	harness_fill(src, 64, 7);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, r2, 0, 64, 0, WAIT_MS),
			 RMA_OK);
	{
		char want[64];

		snprintf(want, sizeof(want),
			 "bytes 2 %02x%02x%02x%02x%02x%02x%02x%02x", src[0],
			 src[1], src[2], src[3], src[4], src[5], src[6],
			 src[7]);
		fake_ask(&f, "r 2\n", line, sizeof(line));
		ck_assert_str_eq(line, want);
	}
	/* Region 1 is not. */
	st = rma_remote_import(cb, peer, desc[0], &r1);
	if (st == RMA_OK)
		st = rma_put_sync(cb, rb, 0, r1, 0, 64, 0, WAIT_MS);
	ck_assert_int_eq(st, RMA_ERR_STALE_DESCRIPTOR);
	/* The fake cuts what it can: region 1's memfd, not region 2's;
	 * puts into region 2 go on, and the successor lives. */
	fake_ask(&f, "t\n", line, sizeof(line));
	ck_assert_str_eq(line, "truncated 1");
	harness_fill(src, 64, 8);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, r2, 32, 64, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(rma_get_sync(cb, rb, 4096, r2, 32, 64, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(src, src + 4096, 64), 0);
	ck_assert_int_eq(harness_daemon_wait_exit(&da, 0, NULL), 0);
	ck_assert_int_eq(fake_stop(&f), 0);
	harness_daemon_stop(&da, SIGTERM);
	remove_dir(dir);
}
END_TEST

/* A fresh rmad, no take-over: a socket directory others can write is
 * refused (77) unless socket_dir_shared; so is one under a directory
 * others can write that is not sticky; one under a sticky one is fine. */
START_TEST(test_socket_dir_shared)
{
	static const char *const shared[] = {"--socket-dir-shared", NULL};
	char top[] = "/tmp/rmad-dir.XXXXXX", dir[64], sock[96], err[4096];
	struct daemon_proc p;
	int status;

	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(dir, sizeof(dir), "%s/d", top);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(sock, sizeof(sock), "%s/rmad.sock", dir);

	/* writable by all users, sticky or not */
	ck_assert_int_eq(chmod(dir, 01777), 0);
	ck_assert(!rmad_run(&p, sock, NULL, &status, err, sizeof(err)));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 77,
		      "status %d: %s", status, err);
	ck_assert_msg(strstr(err, "writable by all users (mode 1777)") &&
			  strstr(err, "socket_dir_shared"),
		      "%s", err);
	ck_assert_int_eq(access(sock, F_OK), -1);
	ck_assert_msg(rmad_run(&p, sock, shared, &status, err, sizeof(err)),
		      "refused with socket_dir_shared: %s", err);
	ck_assert_msg(strstr(err, "all the same"), "%s", err);
	harness_daemon_stop(&p, SIGTERM);

	/* writable by a group with other members (nogroup: sync, nobody) */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(dir, (uid_t)-1, 65534), 0);
		ck_assert_int_eq(chmod(dir, 0770), 0);
		ck_assert(!rmad_run(&p, sock, NULL, &status, err, sizeof(err)));
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 77 &&
				  strstr(err, "writable by group nogroup"),
			      "status %d: %s", status, err);
		ck_assert_int_eq(chown(dir, (uid_t)-1, 0), 0);
	}

	/* its own, under one anyone may write: sticky is fine, else not */
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_int_eq(chmod(top, 01777), 0);
	ck_assert_msg(rmad_run(&p, sock, NULL, &status, err, sizeof(err)),
		      "refused under a sticky directory: %s", err);
	harness_daemon_stop(&p, SIGTERM);
	ck_assert_int_eq(chmod(top, 0777), 0);
	ck_assert(!rmad_run(&p, sock, NULL, &status, err, sizeof(err)));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 77 &&
			  strstr(err, "not sticky"),
		      "status %d: %s", status, err);
	ck_assert_int_eq(chmod(top, 0700), 0);
	remove_dir(top);
}
END_TEST

/* Only db, its client and region: the successor under test is da. */
static void
setup_peer(void)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};

	harness_daemon_start(&db, flags);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
}

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
	tcase_add_test(tc, test_older_successor_gets_wall_clock_deadlines);
	tcase_add_test(tc, test_local_client_reattaches);
	tcase_add_test(tc, test_no_reattach_opt_out);
	tcase_add_test(tc, test_restart_is_not_take_over);
	tcase_add_test(tc, test_in_flight_at_take_over);
	tcase_add_test(tc, test_owner_leaves_during_hand_over);
	tcase_add_test(tc, test_free_orphan_then_reattach_the_rest);
	tcase_add_test(tc, test_orphan_deadline_survives_take_overs);
	suite_add_tcase(s, tc);

	tc = tcase_create("fake predecessor");
	tcase_add_checked_fixture(tc, setup_peer, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_take_over_refuses_unsealed_memfd);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket directory");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_take_over_refuses_another_uid);
	tcase_add_test(tc, test_take_over_refuses_shared_dir);
	tcase_add_test(tc, test_take_over_refuses_foreign_listen_fd);
	tcase_add_test(tc, test_socket_dir_shared);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
