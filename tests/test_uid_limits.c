/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-user limits (daemon/uidlimit.c): max_clients_per_uid,
 * max_regions_per_uid and max_region_bytes_per_uid hold over all of one
 * uid's connections, give room back when it is freed, and leave other
 * users alone. A real rmad with small limits. */
#include <check.h>

#include "check_main.h"
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"
#include "rma.pb-c.h"

#define NOBODY 65534
#define KIB 1024u

static struct daemon_proc dp;

static void
daemon_with(const char *clients, const char *regions, const char *bytes)
{
	const char *const flags[] = {"--max-clients-per-uid", clients,
				     "--max-regions-per-uid", regions,
				     "--max-region-bytes-per-uid", bytes,
				     /* nobody (in nogroup) may connect */
				     "--socket-group", "nogroup",
				     /* a silent refused client goes after */
				     "--connect-timeout", "1", NULL};

	harness_daemon_start(&dp, flags);
}

static void
teardown(void)
{
	harness_daemon_stop(&dp, SIGTERM);
}

/* st is RMA_ERR_LIMIT and the detail (of client c, or of the failed
 * connect when NULL) names option. */
static void
assert_limit(rma_client_t *c, rma_status_t st, const char *option)
{
	const char *why = rma_last_error(c);

	ck_assert_msg(st == RMA_ERR_LIMIT, "status %d (%s), not RMA_ERR_LIMIT",
		      (int)st, why ? why : "");
	ck_assert_msg(why != NULL && strstr(why, option) != NULL,
		      "detail '%s' does not name %s", why ? why : "(none)",
		      option);
}

/* A connection that sends nothing is closed by the daemon (EOF) within
 * a deadline. */
static void
silent_closed(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char byte;
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_msg(harness_wait_fd(fd, 10) == 1,
		      "a silent connection over the limit was not closed");
	ck_assert_int_eq(read(fd, &byte, 1), 0);
	close(fd);
}

START_TEST(test_clients_per_uid)
{
	rma_client_t *c[4] = {0};
	double deadline;
	rma_status_t st;

	daemon_with("3", "16", "1M");
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(rma_connect(dp.socket, &c[i]), RMA_OK);
	assert_limit(NULL, rma_connect(dp.socket, &c[3]),
		     "max_clients_per_uid");
	ck_assert_ptr_null(c[3]);
	/* one over the limit that never speaks holds no fd for long */
	silent_closed(dp.socket);

	/* The daemon hears the close on its own time: retry to a deadline. */
	rma_disconnect(c[0]);
	c[0] = NULL;
	deadline = harness_now() + 10;
	while ((st = rma_connect(dp.socket, &c[3])) == RMA_ERR_LIMIT &&
	       harness_now() < deadline)
		harness_pause(0.01, deadline);
	ck_assert_msg(st == RMA_OK, "no room after a close: %d (%s)", (int)st,
		      rma_last_error(NULL));
	for (int i = 1; i < 4; i++)
		rma_disconnect(c[i]);
}
END_TEST

/* A re-attach the new process refuses (the uid already at its
 * max_clients_per_uid there) ends at once with the daemon's reason: the
 * same answer would come back until RMA_REATTACH_TIMEOUT_MS, here far
 * beyond the test's own timeout. */
START_TEST(test_reattach_refused_ends_at_once)
{
	const char *const successor[] = {
	    "--take-over", "--max-clients-per-uid", "1", "--socket-group",
	    "nogroup",	   "--connect-timeout",	    "1", NULL};
	struct pollfd pfd;
	rma_client_t *c, *first;
	rma_region_t *r;
	rma_status_t st;

	daemon_with("2", "16", "1M");
	setenv("RMA_REATTACH_TIMEOUT_MS", "600000", 1);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	unsetenv("RMA_REATTACH_TIMEOUT_MS");
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
	harness_daemon_take_over(&dp, successor, 10.0);
	/* the uid's one connection to the new process */
	ck_assert_int_eq(rma_connect(dp.socket, &first), RMA_OK);

	pfd = (struct pollfd){.fd = rma_fd(c), .events = POLLIN};
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	st = rma_progress(c);
	ck_assert_msg(st == RMA_ERR_DAEMON_GONE, "re-attach over the limit: %s",
		      rma_strerror(st));
	ck_assert_msg(strstr(rma_last_error(c), "max_clients_per_uid") != NULL,
		      "detail '%s' does not give the daemon's reason",
		      rma_last_error(c));
	rma_disconnect(c);
	rma_disconnect(first);
}
END_TEST

START_TEST(test_regions_per_uid)
{
	rma_client_t *a, *b;
	rma_region_t *ra[2], *rb[2];
	double deadline;
	rma_status_t st;

	daemon_with("8", "3", "1M");
	ck_assert_int_eq(rma_connect(dp.socket, &a), RMA_OK);
	ck_assert_int_eq(rma_connect(dp.socket, &b), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(a, 4 * KIB, &ra[0]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(a, 4 * KIB, &ra[1]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(b, 4 * KIB, &rb[0]), RMA_OK);
	/* b holds one region, far below max_regions: the uid holds three */
	assert_limit(b, rma_region_alloc(b, 4 * KIB, &rb[1]),
		     "max_regions_per_uid");
	ck_assert_int_eq(rma_region_free(a, ra[0]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(b, 4 * KIB, &rb[1]), RMA_OK);
	/* a closing gives its regions back too */
	assert_limit(b, rma_region_alloc(b, 4 * KIB, &ra[0]),
		     "max_regions_per_uid");
	rma_disconnect(a);
	ck_assert_int_eq(rma_connect(dp.socket, &a), RMA_OK);
	/* The daemon hears the close on its own time: LIMIT until then. */
	deadline = harness_now() + 10;
	while ((st = rma_region_alloc(a, 4 * KIB, &ra[0])) == RMA_ERR_LIMIT &&
	       harness_now() < deadline)
		harness_pause(0.01, deadline);
	ck_assert_msg(st == RMA_OK, "no room after a close: %d (%s)", (int)st,
		      rma_last_error(a));
	rma_disconnect(a);
	rma_disconnect(b);
}
END_TEST

START_TEST(test_region_bytes_per_uid)
{
	rma_client_t *a, *b;
	rma_region_t *ra, *rb[2];

	daemon_with("8", "16", "64K");
	ck_assert_int_eq(rma_connect(dp.socket, &a), RMA_OK);
	ck_assert_int_eq(rma_connect(dp.socket, &b), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(a, 48 * KIB, &ra), RMA_OK);
	assert_limit(b, rma_region_alloc(b, 32 * KIB, &rb[0]),
		     "max_region_bytes_per_uid");
	ck_assert_int_eq(rma_region_alloc(b, 16 * KIB, &rb[0]), RMA_OK);
	assert_limit(b, rma_region_alloc(b, 4 * KIB, &rb[1]),
		     "max_region_bytes_per_uid");
	ck_assert_int_eq(rma_region_free(a, ra), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(b, 32 * KIB, &rb[1]), RMA_OK);
	rma_disconnect(a);
	rma_disconnect(b);
}
END_TEST

/* In a child as nobody: connect and make a region while root holds all
 * it may. The exit status says what failed. */
static int
as_nobody(const char *socket)
{
	rma_client_t *c;
	rma_region_t *r;
	gid_t g = NOBODY;

	alarm(20);
	if (setgroups(1, &g) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	    setresuid(NOBODY, NOBODY, NOBODY) < 0)
		return 2;
	if (rma_connect(socket, &c) != RMA_OK) {
		fprintf(stderr, "nobody: connect: %s\n", rma_last_error(NULL));
		return 3;
	}
	if (rma_region_alloc(c, 32 * KIB, &r) != RMA_OK) {
		fprintf(stderr, "nobody: alloc: %s\n", rma_last_error(c));
		return 4;
	}
	rma_disconnect(c);
	return 0;
}

/* What status says uid holds (every count -1 when it has no entry), and
 * the limits. */
struct held {
	int64_t clients, regions, bytes;
	uint64_t max_clients, max_regions, max_bytes;
};

static struct held
users_held(rma_client_t *c, uid_t uid)
{
	struct held h = {-1, -1, -1, 0, 0, 0};
	Rma__V1__StatusReply *st;
	size_t len;
	void *buf;

	ck_assert_int_eq(rma_daemon_status(c, &buf, &len), RMA_OK);
	st = rma__v1__status_reply__unpack(NULL, len, buf);
	ck_assert_ptr_nonnull(st);
	for (size_t i = 0; i < st->n_users; i++) {
		if (st->users[i]->uid != uid)
			continue;
		ck_assert_int_eq(h.clients, -1); /* one entry per uid */
		h.clients = st->users[i]->clients;
		h.regions = (int64_t)st->users[i]->regions;
		h.bytes = (int64_t)st->users[i]->region_bytes;
	}
	h.max_clients = st->max_clients_per_uid;
	h.max_regions = st->max_regions_per_uid;
	h.max_bytes = st->max_region_bytes_per_uid;
	rma__v1__status_reply__free_unpacked(st, NULL);
	free(buf);
	return h;
}

/* Status lists each user with what max_*_per_uid count (rmactl users):
 * every connection and region of the uid, over clients, and the limits;
 * a user holding nothing is not listed. */
START_TEST(test_status_lists_users)
{
	rma_client_t *c[2];
	rma_region_t *r[3];
	struct held h;
	double end;

	daemon_with("3", "16", "1M");
	ck_assert_int_eq(rma_connect(dp.socket, &c[0]), RMA_OK);
	ck_assert_int_eq(rma_connect(dp.socket, &c[1]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c[0], 4 * KIB, &r[0]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c[0], 8 * KIB, &r[1]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c[1], 64 * KIB, &r[2]), RMA_OK);
	h = users_held(c[0], geteuid());
	ck_assert_int_eq(h.clients, 2);
	ck_assert_int_eq(h.regions, 3);
	ck_assert_int_eq(h.bytes, 76 * KIB);
	ck_assert_uint_eq(h.max_clients, 3);
	ck_assert_uint_eq(h.max_regions, 16);
	ck_assert_uint_eq(h.max_bytes, 1024 * KIB);
	ck_assert_int_eq(users_held(c[0], NOBODY).clients, -1);

	ck_assert_int_eq(rma_region_free(c[0], r[1]), RMA_OK);
	h = users_held(c[0], geteuid());
	ck_assert_int_eq(h.regions, 2);
	ck_assert_int_eq(h.bytes, 68 * KIB);
	rma_disconnect(c[1]);
	/* c[1]'s close and its region reach the table on the daemon's
	 * time: ask until they have */
	end = harness_now() + 10;
	while (h = users_held(c[0], geteuid()),
	       (h.clients != 1 || h.regions != 1) && harness_now() < end)
		harness_pause(0.01, end);
	ck_assert_int_eq(h.clients, 1);
	ck_assert_int_eq(h.regions, 1);
	ck_assert_int_eq(h.bytes, 4 * KIB);
	rma_disconnect(c[0]);
}
END_TEST

START_TEST(test_other_uid_unaffected)
{
	rma_client_t *c[2];
	rma_region_t *r;
	int status;
	pid_t pid;

	if (geteuid() != 0) {
		printf("test_other_uid_unaffected: skipped, needs root to "
		       "run a client as uid %d\n",
		       NOBODY);
		return;
	}
	daemon_with("2", "1", "32K");
	ck_assert_int_eq(rma_connect(dp.socket, &c[0]), RMA_OK);
	ck_assert_int_eq(rma_connect(dp.socket, &c[1]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c[0], 32 * KIB, &r), RMA_OK);
	/* root is counted as any user */
	assert_limit(c[1], rma_region_alloc(c[1], 4 * KIB, &r),
		     "max_regions_per_uid");
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(as_nobody(dp.socket));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "uid %d's client failed (status 0x%x)", NOBODY, status);
	rma_disconnect(c[0]);
	rma_disconnect(c[1]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("uid-limits");
	TCase *tc = tcase_create("per uid");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_clients_per_uid);
	tcase_add_test(tc, test_reattach_refused_ends_at_once);
	tcase_add_test(tc, test_regions_per_uid);
	tcase_add_test(tc, test_region_bytes_per_uid);
	tcase_add_test(tc, test_other_uid_unaffected);
	tcase_add_test(tc, test_status_lists_users);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
