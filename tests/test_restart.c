/* Hand-over (daemon/handover.c): a real rmad is taken over by a second
 * one started with --take-over on the same socket and port. A remote
 * initiator's descriptor stays valid, its writes land in the memory the
 * first owner mapped (the same memfd), and an orphan region nobody comes
 * back for goes stale after reattach_timeout. */
#include <check.h>

#include "check_main.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"

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

int
main(void)
{
	Suite *s = suite_create("restart");
	TCase *tc = tcase_create("take-over");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_take_over_keeps_descriptors);
	tcase_add_test(tc, test_take_over_twice);
	tcase_add_test(tc, test_orphan_goes_stale);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
