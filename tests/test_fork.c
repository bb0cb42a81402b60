/* SPDX-License-Identifier: BSD-2-Clause */
/* fork() with a client connected, against a real rmad and its shared
 * ring: the child's calls on the parent's client fail with
 * RMA_ERR_INVALID ("belongs to the parent process") and take nothing of
 * the parent's ring or socket; the parent's operations, in flight at the
 * fork and issued after it, all complete, with their bytes (issue 23,
 * finding 7). test_client.c has the same against a fake daemon, every
 * call of rma.h included. */
#include <check.h>

#include "check_main.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"

#define REGION_SIZE (1u << 20)
#define WAIT_MS 20000
#define N_BEFORE 64
#define N_FLIGHT 256 /* pieces of one putv: one batch, sent at once */
#define PIECE 512

static struct daemon_proc d;
static rma_client_t *owner, *c;
static rma_region_t *target, *src;
static rma_peer_t *self;
static rma_remote_t *rem;

static void
setup(void)
{
	harness_daemon_start(&d, NULL);
	ck_assert_int_eq(rma_connect(d.socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &target), RMA_OK);
	ck_assert_int_eq(rma_connect(d.socket, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, REGION_SIZE, &src), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(c, d.listen, &self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(c, self, rma_region_descriptor(target), &rem),
	    RMA_OK);
}

static void
teardown(void)
{
	if (c != NULL)
		rma_disconnect(c);
	if (owner != NULL)
		rma_disconnect(owner);
	c = owner = NULL;
	if (d.pid > 0)
		harness_daemon_stop(&d, SIGTERM);
}

struct counter {
	int done, ok;
	uint64_t bytes;
};

static void
count_cb(rma_request_t *req, rma_status_t status, void *user_data)
{
	struct counter *n = user_data;

	n->done++;
	n->ok += status == RMA_OK;
	n->bytes += rma_request_bytes(req);
}

static int
landed(void *arg)
{
	size_t upto = *(const size_t *)arg;

	return memcmp(rma_region_ptr(target), rma_region_ptr(src), upto) == 0;
}

/* In the child: 0, or the number of the first check that failed (no
 * check.h here, this is a child of the test's process). */
static int
child_calls(struct counter *flight)
{
	rma_iov_t iov = {.offset = 0, .remote_offset = 0, .length = 8};
	rma_region_t *r2 = NULL;
	rma_request_t *req = NULL;
	struct counter mine = {0, 0, 0};
	uint64_t old = 0;
	rma_status_t st[12];
	int step;

	/* first what would reap the ring or read the socket */
	st[0] = rma_progress(c);
	st[1] = rma_wait(c, 100);
	st[2] = rma_put(c, src, 0, rem, REGION_SIZE - 8, 8, 0, count_cb, &mine,
			&req);
	st[3] = rma_get(c, src, 0, rem, 0, 8, count_cb, &mine, &req);
	st[4] = rma_putv(c, src, rem, &iov, 1, 0, count_cb, &mine, &req);
	st[5] = rma_flush_sync(c, NULL, 1000);
	st[6] = rma_atomic_sync(c, rem, REGION_SIZE - 16, RMA_ATOMIC_ADD, 8, 1,
				0, &old, 1000);
	st[7] = rma_region_alloc(c, 4096, &r2);
	st[8] = rma_region_free(c, src);
	st[9] = rma_poll(c, 100);
	for (step = 0; step <= 9; step++)
		if (st[step] != RMA_ERR_INVALID)
			return 1 + step;
	if (strstr(rma_last_error(c), "belongs to the parent process") == NULL)
		return 20;
	if (mine.done != 0 || req != NULL || r2 != NULL || old != 0)
		return 21;
	/* nothing of the parent's completions was taken here */
	if (flight->done != 0)
		return 22;
	rma_disconnect(c); /* the child's copy; its requests end here */
	c = NULL;
	if (flight->done != 1 || flight->ok != 0)
		return 23;
	return 0;
}

START_TEST(test_fork_child_refused_parent_unharmed)
{
	struct counter before = {0, 0, 0}, flight = {0, 0, 0};
	uint8_t *s = rma_region_ptr(src), *t = rma_region_ptr(target);
	rma_iov_t iov[N_FLIGHT];
	size_t upto;
	double deadline;
	int sv[2], status;
	char verdict = -1;
	pid_t pid;

	harness_fill(s, REGION_SIZE, 23);
	/* before the fork: waited for */
	for (int i = 0; i < N_BEFORE; i++)
		ck_assert_int_eq(rma_put(c, src, (uint64_t)i * PIECE, rem,
					 (uint64_t)i * PIECE, PIECE, 0,
					 count_cb, &before, NULL),
				 RMA_OK);
	deadline = harness_now() + 20;
	while (before.done < N_BEFORE && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	ck_assert_int_eq(before.ok, N_BEFORE);
	ck_assert_uint_eq(before.bytes, N_BEFORE * PIECE);
	/* in flight at the fork: landed at the owner, the completions of
	 * its pieces in the ring or the socket, not taken yet */
	for (int i = 0; i < N_FLIGHT; i++)
		iov[i] = (rma_iov_t){(uint64_t)(N_BEFORE + i) * PIECE,
				     (uint64_t)(N_BEFORE + i) * PIECE, PIECE};
	ck_assert_int_eq(
	    rma_putv(c, src, rem, iov, N_FLIGHT, 0, count_cb, &flight, NULL),
	    RMA_OK);
	upto = (size_t)(N_BEFORE + N_FLIGHT) * PIECE;
	ck_assert(harness_until(20, landed, &upto));
	ck_assert_int_eq(flight.done, 0);

	ck_assert_int_eq(pipe2(sv, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char v = (char)child_calls(&flight);

		(void)!write(sv[1], &v, 1);
		_exit(0);
	}
	close(sv[1]);
	ck_assert_int_eq(harness_wait_fd(sv[0], 20), 1);
	ck_assert_int_eq(read(sv[0], &verdict, 1), 1);
	close(sv[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(verdict == 0, "child's check %d failed", verdict);

	/* every completion in flight at the fork comes to the parent */
	deadline = harness_now() + 20;
	while (flight.done < 1 && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	ck_assert_int_eq(flight.done, 1);
	ck_assert_int_eq(flight.ok, 1);
	ck_assert_uint_eq(flight.bytes, (uint64_t)N_FLIGHT * PIECE);
	ck_assert_uint_eq(rma_in_flight(c), 0);
	/* and after the fork the parent goes on, bytes checked both ways */
	ck_assert_int_eq(rma_put_sync(c, src, upto, rem, upto, 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(t, s, upto + 4096), 0);
	memset(s, 0, upto + 4096);
	ck_assert_int_eq(rma_get_sync(c, src, 0, rem, 0, upto + 4096, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(t, s, upto + 4096), 0);
	/* none of the child's operations reached the owner */
	for (size_t i = REGION_SIZE - 16; i < REGION_SIZE; i++)
		ck_assert_uint_eq(t[i], 0);
	ck_assert_int_eq(rma_region_free(c, src), RMA_OK);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fork");
	TCase *tc = tcase_create("fork");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fork_child_refused_parent_unharmed);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
