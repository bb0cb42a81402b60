/* Trust: who may connect, per-client limits, peers from disallowed
 * networks. Real daemons; tests that change uid need root. */
#include <check.h>

#include "check_main.h"
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"

#define WAIT_MS 10000

static struct daemon_proc dp;

static void
stop(void)
{
	if (dp.pid > 0)
		harness_daemon_stop(&dp, SIGTERM);
}

/* rma_connect as nobody:nogroup in a child; returns its status. */
static rma_status_t
connect_as_nobody(const char *socket)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		rma_client_t *c;
		rma_status_t st;
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		st = rma_connect(socket, &c);
		if (st == RMA_OK)
			rma_disconnect(c);
		_exit(-st);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_ne(WEXITSTATUS(status), 100);
	return -WEXITSTATUS(status);
}

START_TEST(test_socket_mode)
{
	struct stat st;

	harness_daemon_start(&dp, NULL);
	ck_assert_int_eq(stat(dp.socket, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	stop();
}
END_TEST

START_TEST(test_allow_lists)
{
	static const char *const only_root[] = {
	    "--allow-users", "0", "--socket-group", "nogroup", NULL};
	static const char *const nogroup[] = {
	    "--allow-groups", "nogroup", "--socket-group", "nogroup", NULL};
	rma_client_t *c;

	if (geteuid() != 0) {
		fprintf(stderr, "trust: allow lists skipped: needs root\n");
		return;
	}
	/* The socket admits nogroup, the daemon's allow list does not. */
	harness_daemon_start(&dp, only_root);
	ck_assert_int_eq(connect_as_nobody(dp.socket), RMA_ERR_PERMISSION);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK); /* root may */
	rma_disconnect(c);
	stop();

	harness_daemon_start(&dp, nogroup);
	ck_assert_int_eq(connect_as_nobody(dp.socket), RMA_OK);
	stop();

	/* Without the socket group, the file mode keeps nobody out. */
	harness_daemon_start(&dp, NULL);
	ck_assert_int_eq(connect_as_nobody(dp.socket), RMA_ERR_PERMISSION);
	stop();
}
END_TEST

START_TEST(test_region_limits)
{
	static const char *const flags[] = {"--max-regions", "2",
					    "--max-region-bytes", "1M", NULL};
	rma_client_t *c, *other;
	rma_region_t *r1, *r2, *r3;

	harness_daemon_start(&dp, flags);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 2 << 20, &r1), RMA_ERR_LIMIT);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "max_region_bytes"));
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r1), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r3), RMA_ERR_LIMIT);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "max_regions"));
	/* Limits are per client, and freeing gives room back. */
	ck_assert_int_eq(rma_connect(dp.socket, &other), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(other, 4096, &r3), RMA_OK);
	rma_disconnect(other);
	ck_assert_int_eq(rma_region_free(c, r2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r2), RMA_OK);
	/* Imports are bounded by the same limit. */
	{
		rma_peer_t *self;
		rma_remote_t *rem[3];
		ck_assert_int_eq(rma_peer_connect(c, dp.listen, &self), RMA_OK);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r1),
						   &rem[0]),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r2),
						   &rem[1]),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r1),
						   &rem[2]),
				 RMA_ERR_LIMIT);
		rma_remote_release(c, rem[0]);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r1),
						   &rem[2]),
				 RMA_OK);
	}
	rma_disconnect(c);
	stop();
}
END_TEST

struct tally {
	int done, ok, limit;
};

static void
tally_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	struct tally *t = arg;

	t->done++;
	t->ok += st == RMA_OK;
	t->limit += st == RMA_ERR_LIMIT;
}

START_TEST(test_in_flight_limit)
{
	static const char *const flags[] = {"--max-in-flight", "4", NULL};
	struct daemon_proc owner;
	rma_client_t *c, *co;
	rma_region_t *r, *ro;
	rma_peer_t *p;
	rma_remote_t *rem;
	struct tally t = {0, 0, 0};
	double deadline;

	harness_daemon_start(&dp, flags);
	harness_daemon_start(&owner, NULL);
	ck_assert_int_eq(rma_connect(owner.socket, &co), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(co, 1 << 20, &ro), RMA_OK);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 1 << 20, &r), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(c, owner.listen, &p), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(c, p, rma_region_descriptor(ro), &rem), RMA_OK);
	/* 200 large puts in one burst: the daemon takes 4 at a time. */
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(
		    rma_put(c, r, 0, rem, 0, 1 << 20, 0, tally_cb, &t, NULL),
		    RMA_OK);
	deadline = harness_now() + 20;
	while (t.done < 200 && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	ck_assert_int_eq(t.done, 200);
	ck_assert_int_gt(t.limit, 0);
	ck_assert_int_gt(t.ok, 0);
	ck_assert_int_eq(t.ok + t.limit, 200);
	/* The client was not disconnected for it. */
	ck_assert_int_eq(rma_put_sync(c, r, 0, rem, 0, 8, 0, WAIT_MS), RMA_OK);
	rma_disconnect(c);
	rma_disconnect(co);
	harness_daemon_stop(&owner, SIGTERM);
	stop();
}
END_TEST

START_TEST(test_peer_from_disallowed_network)
{
	static const char *const strict[] = {"--peer-allow", "10.0.0.0/8",
					     NULL};
	struct daemon_proc initiator;
	rma_client_t *c;
	rma_peer_t *p;
	rma_status_t st;
	double t0;

	harness_daemon_start(&dp, strict);
	harness_daemon_start(&initiator, NULL);
	ck_assert_int_eq(rma_connect(initiator.socket, &c), RMA_OK);
	t0 = harness_now();
	st = rma_peer_connect(c, dp.listen, &p);
	ck_assert_msg(st == RMA_ERR_REJECTED || st == RMA_ERR_UNREACHABLE ||
			  st == RMA_ERR_CONNECTION_RESET ||
			  st == RMA_ERR_TIMEOUT,
		      "connect from 127.0.0.1 to a 10/8-only daemon: %s",
		      rma_strerror(st));
	ck_assert_double_lt(harness_now() - t0, 8.0);
	rma_disconnect(c);
	harness_daemon_stop(&initiator, SIGTERM);
	stop();
}
END_TEST

/* Thousands of clients that connect and drop (some mid-frame) cost the
 * daemon nothing that stays, and a real client is served throughout. */
START_TEST(test_connection_churn)
{
	enum { N = 3000 };
	static const uint8_t partial[] = {0, 0, 0, 50, 8, 1, 0x12};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	rma_client_t *c;
	rma_region_t *r;
	int before, after = -1;
	double deadline;

	harness_daemon_start(&dp, NULL);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	before = harness_fd_count(dp.pid);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", dp.socket);
	for (int i = 0; i < N; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		if (i % 3 == 1)
			ck_assert_int_eq(write(fd, partial, sizeof(partial)),
					 (ssize_t)sizeof(partial));
		close(fd);
		if (i % 500 == 0) { /* served all along */
			ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
			ck_assert_int_eq(rma_region_free(c, r), RMA_OK);
		}
	}
	deadline = harness_now() + 10;
	/* The daemon drops each connection on its next turn. */
	while (harness_now() < deadline &&
	       (after = harness_fd_count(dp.pid)) > before) {
		ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
		ck_assert_int_eq(rma_region_free(c, r), RMA_OK);
	}
	ck_assert_int_le(after, before);
	rma_disconnect(c);
	stop();
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("trust");
	TCase *tc = tcase_create("trust");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_socket_mode);
	tcase_add_test(tc, test_allow_lists);
	tcase_add_test(tc, test_region_limits);
	tcase_add_test(tc, test_in_flight_limit);
	tcase_add_test(tc, test_peer_from_disallowed_network);
	tcase_add_test(tc, test_connection_churn);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
