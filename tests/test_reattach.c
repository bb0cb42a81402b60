/* SPDX-License-Identifier: BSD-2-Clause */
/* Re-attach as a program with its own event loop sees it (client/client.c,
 * client/connect.c): rma_fd() registered once in an epoll set of the
 * test's keeps waking it across take-overs of the client's daemon;
 * rma_on_reattach() and rma_reattach_count() count them; a path that is
 * absent or refuses for a while (a daemon restarting) is tried again
 * within RMA_REATTACH_TIMEOUT_MS. The daemon goes away by take-over
 * (rmad --take-over) or by SIGKILL under tests/service/fdstore_sink,
 * which restarts it with systemd's fd store as systemd would.
 *
 * Everything is decided on counts and order: connect(2) is wrapped here
 * (librma is linked statically, so its calls come to this definition) to
 * count the attempts the client made on a path and how they failed, and
 * a helper thread changes the path only after the client saw it fail. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "rma.h"

#define SZ 65536
#define TAKE_OVERS 8
#define WAIT_S 10.0

static struct daemon_proc da, db;

/* ---- connect(2), counted ---- */

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond = PTHREAD_COND_INITIALIZER;
static char watch_path[108];
static int watch_refused, watch_absent, watch_ok;

int
connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
	int rc = (int)syscall(SYS_connect, fd, sa, len);
	int err = errno;

	if (sa->sa_family == AF_UNIX && watch_path[0] != '\0' &&
	    strcmp(un->sun_path, watch_path) == 0) {
		pthread_mutex_lock(&watch_lock);
		if (rc == 0)
			watch_ok++;
		else if (err == ECONNREFUSED)
			watch_refused++;
		else if (err == ENOENT)
			watch_absent++;
		pthread_cond_broadcast(&watch_cond);
		pthread_mutex_unlock(&watch_lock);
	}
	errno = err;
	return rc;
}

/* Until *count >= want, WAIT_S at most: 1 if it got there. */
static int
watch_until(const int *count, int want)
{
	struct timespec ts;
	int ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)WAIT_S;
	pthread_mutex_lock(&watch_lock);
	while (*count < want &&
	       pthread_cond_timedwait(&watch_cond, &watch_lock, &ts) == 0)
		;
	ok = *count >= want;
	pthread_mutex_unlock(&watch_lock);
	return ok;
}

/* ---- daemons ---- */

/* rmad under fdstore_sink (systemd's fd store and Restart=): its main
 * PID and its READY=1 are lines of the sink's log. */
static struct sink {
	pid_t pid; /* the sink's */
	char dir[64], log[96], notify[96], socket[108], listen[32];
} sk;

/* Lines of the sink's log starting with prefix; the rest of the last
 * one in last. */
static int
sink_count(const char *prefix, char *last, size_t len)
{
	char line[512];
	int n = 0;
	FILE *f = fopen(sk.log, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		n++;
		if (last != NULL)
			snprintf(last, len, "%s", line + strlen(prefix));
	}
	fclose(f);
	return n;
}

static int
sink_ready_cond(void *arg)
{
	return sink_count("READY=1", NULL, 0) >= *(int *)arg;
}

static void
sink_wait_ready(int n)
{
	ck_assert_msg(harness_until(20.0, sink_ready_cond, &n),
		      "rmad start %d under the sink did not say READY=1", n);
}

static void
sink_start(void)
{
	const char *rmad = getenv("RMAD_BIN"), *bin = getenv("FDSTORE_SINK");

	ck_assert_ptr_nonnull(rmad);
	ck_assert_ptr_nonnull(bin);
	snprintf(sk.dir, sizeof(sk.dir), "/tmp/rmad-reattach.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sk.dir));
	snprintf(sk.log, sizeof(sk.log), "%s/sink.log", sk.dir);
	snprintf(sk.notify, sizeof(sk.notify), "%s/notify", sk.dir);
	snprintf(sk.socket, sizeof(sk.socket), "%s/rmad.sock", sk.dir);
	snprintf(sk.listen, sizeof(sk.listen), "127.0.0.1:%u",
		 harness_free_port());
	sk.pid = fork();
	ck_assert_int_ge(sk.pid, 0);
	if (sk.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (!freopen(sk.log, "w", stdout))
			_exit(126);
		execl(bin, bin, "-m", "64", "-t", "300", "-l", "", sk.notify,
		      "--", rmad, "--socket", sk.socket, "--listen", sk.listen,
		      "--log-level", "warn", "--connect-timeout", "2",
		      (char *)NULL);
		_exit(127);
	}
	sink_wait_ready(1);
}

/* SIGKILL the rmad serving now; returns once its successor is ready
 * (the client has not noticed yet). */
static void
sink_crash(void)
{
	int n = sink_count("READY=1", NULL, 0);
	char last[64] = "0";

	sink_count("started ", last, sizeof(last));
	ck_assert_int_gt(atoi(last), 0);
	ck_assert_int_eq(kill((pid_t)atoi(last), SIGKILL), 0);
	sink_wait_ready(n + 1);
}

static void
sink_stop(void)
{
	double deadline = harness_now() + WAIT_S;
	char cmd[128];

	if (sk.pid <= 0)
		return;
	kill(sk.pid, SIGTERM); /* systemctl stop */
	while (waitpid(sk.pid, NULL, WNOHANG) == 0) {
		if (harness_now() > deadline) {
			kill(sk.pid, SIGKILL);
			waitpid(sk.pid, NULL, 0);
			break;
		}
		harness_pause(0.01, deadline);
	}
	sk.pid = 0;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", sk.dir);
	ck_assert_int_ge(system(cmd), -1);
}

static void
teardown(void)
{
	sink_stop();
	if (db.pid > 0)
		harness_daemon_stop(&db, SIGTERM);
	if (da.pid > 0)
		harness_daemon_stop(&da, SIGTERM);
}

/* A successor of da with --take-over; waits for the old one's clean
 * exit, so that its close is in the client's socket. */
static void
take_over(void)
{
	static const char *const flags[] = {"--take-over", NULL};

	harness_daemon_take_over(&da, flags, WAIT_S);
}

/* ---- the program's own event loop ---- */

static void
on_reattach(rma_client_t *client, uint64_t count, void *user_data)
{
	uint64_t *calls = user_data;

	ck_assert_uint_eq(count, rma_reattach_count(client));
	(*calls)++;
}

/* One turn: epoll_wait on the loop's set (which holds rma_fd(), added
 * once), then rma_progress(). Fails the test if nothing wakes it within
 * WAIT_S while the test waits for something. */
static void
loop_turn(int ep, rma_client_t *c, const char *waiting_for)
{
	struct epoll_event ev;
	rma_status_t st;
	int n;

	do
		n = epoll_wait(ep, &ev, 1, (int)(WAIT_S * 1000));
	while (n < 0 && errno == EINTR);
	ck_assert_msg(n == 1,
		      "the event loop was not woken within %.0f s while "
		      "waiting for %s (reattaches %llu)",
		      WAIT_S, waiting_for,
		      (unsigned long long)rma_reattach_count(c));
	st = rma_progress(c);
	ck_assert_msg(st == RMA_OK, "rma_progress: %s (%s)", rma_strerror(st),
		      rma_last_error(c));
}

/* A put issued and completed through the loop alone; retried while it
 * ends in a status rma.h calls retriable at a take-over. */
static void
loop_put(int ep, rma_client_t *c, rma_region_t *r, rma_remote_t *remote,
	 uint8_t seed)
{
	rma_request_t *req;
	rma_status_t st;

	for (int attempt = 0; attempt < 10; attempt++) {
		memset(rma_region_ptr(r), seed, 4096);
		st = rma_put(c, r, 0, remote, 0, 4096, 0, NULL, NULL, &req);
		if (st == RMA_ERR_RESTARTED)
			continue;
		ck_assert_msg(st == RMA_OK, "rma_put: %s (%s)",
			      rma_strerror(st), rma_last_error(c));
		while (!rma_request_is_completed(req))
			loop_turn(ep, c, "a put's completion");
		st = rma_request_status(req);
		rma_request_release(req);
		if (st == RMA_OK)
			return;
		ck_assert_msg(st == RMA_ERR_RESTARTED || st == RMA_ERR_SHUTDOWN,
			      "the put completed %s", rma_strerror(st));
	}
	ck_abort_msg("no put completed in 10 attempts");
}

/* A program that registered rma_fd() once in its own epoll set: every
 * take-over of its daemon wakes it (the old connection's end), it
 * re-attaches in rma_progress(), and the completions of its next puts,
 * on the new connection, wake it too. Before rma_fd() was the client's
 * own epoll instance, the registration went with the old socket and the
 * loop slept through the first completion after a take-over. */
static void
epoll_loop_across(const char *socket, void (*restart)(void))
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};
	struct epoll_event ev = {.events = EPOLLIN};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *peer;
	rma_remote_t *remote;
	uint64_t calls = 0;
	int ep, fd;

	harness_daemon_start(&db, flags);
	ck_assert_int_eq(rma_connect(socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, peer, rma_region_descriptor(rb), &remote),
	    RMA_OK);
	ck_assert_int_eq(rma_on_reattach(ca, on_reattach, &calls), RMA_OK);

	ep = epoll_create1(EPOLL_CLOEXEC);
	ck_assert_int_ge(ep, 0);
	fd = rma_fd(ca);
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);

	loop_put(ep, ca, ra, remote, 1);
	for (int i = 1; i <= TAKE_OVERS; i++) {
		restart();
		/* the old connection's end wakes the loop; the re-attach
		 * happens in the rma_progress() that follows */
		while (rma_reattach_count(ca) < (uint64_t)i)
			loop_turn(ep, ca, "the end of the old connection");
		ck_assert_uint_eq(rma_reattach_count(ca), i);
		ck_assert_uint_eq(calls, i);
		ck_assert_int_eq(rma_fd(ca), fd);
		loop_put(ep, ca, ra, remote, (uint8_t)(i + 1));
		ck_assert_int_eq(((uint8_t *)rma_region_ptr(rb))[4095],
				 (uint8_t)(i + 1));
	}
	ck_assert_uint_eq(calls, TAKE_OVERS);
	ck_assert_uint_eq(rma_reattach_count(ca), TAKE_OVERS);
	close(ep);
	rma_disconnect(ca);
	rma_disconnect(cb);
}

START_TEST(test_epoll_loop_across_take_overs)
{
	harness_daemon_start(&da, NULL);
	epoll_loop_across(da.socket, take_over);
}
END_TEST

/* The same through 8 crashes (SIGKILL) that the fd store survives, as
 * under systemd with Restart=. */
START_TEST(test_epoll_loop_across_crashes)
{
	sink_start();
	epoll_loop_across(sk.socket, sink_crash);
}
END_TEST

/* ---- a path absent or refusing for a while ---- */

struct flip {
	char target[108]; /* what the path points to again */
	int refusing_fd;
	int ok;
};

/* A Unix socket bound at path and not listening: connect(2) to it is
 * refused. */
static int
refusing_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* After the client was refused at the path: absent (unlinked) until it
 * found it so, then back (a symlink to the daemon's socket). */
static void *
flip_refused_absent_back(void *arg)
{
	struct flip *f = arg;

	if (!watch_until(&watch_refused, 1))
		return NULL;
	close(f->refusing_fd);
	unlink(watch_path);
	if (!watch_until(&watch_absent, 1))
		return NULL;
	if (symlink(f->target, watch_path) != 0)
		return NULL;
	f->ok = 1;
	return NULL;
}

/* The daemon's path refuses, then is absent, then is back, all within
 * RMA_REATTACH_TIMEOUT_MS after a take-over: the client tries again
 * until it gets there and re-attaches (it gave up at the first refusal
 * before). */
START_TEST(test_refused_and_absent_are_tried_again)
{
	struct flip f = {0};
	rma_client_t *c;
	rma_region_t *r, *r2;
	pthread_t t;
	rma_status_t st;

	setenv("RMA_REATTACH_TIMEOUT_MS", "30000", 1);
	harness_daemon_start(&da, NULL);
	snprintf(watch_path, sizeof(watch_path), "%.100s.link", da.socket);
	unlink(watch_path);
	ck_assert_int_eq(symlink(da.socket, watch_path), 0);
	ck_assert_int_eq(rma_connect(watch_path, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, SZ, &r), RMA_OK);
	memset(rma_region_ptr(r), 7, SZ);

	/* the path refuses from before the take-over on */
	unlink(watch_path);
	f.refusing_fd = refusing_socket(watch_path);
	snprintf(f.target, sizeof(f.target), "%s", da.socket);
	take_over();
	ck_assert_int_eq(pthread_create(&t, NULL, flip_refused_absent_back, &f),
			 0);
	st = rma_progress(c);
	pthread_join(t, NULL);
	ck_assert_msg(f.ok,
		      "the client was not refused, then did not find "
		      "the path absent (refused %d, absent %d)",
		      watch_refused, watch_absent);
	ck_assert_msg(st == RMA_OK, "rma_progress: %s (%s)", rma_strerror(st),
		      rma_last_error(c));
	ck_assert_uint_eq(rma_reattach_count(c), 1);
	ck_assert_int_ge(watch_refused, 1);
	ck_assert_int_ge(watch_absent, 1);
	/* the region is back, the client works */
	ck_assert_int_eq(((uint8_t *)rma_region_ptr(r))[SZ - 1], 7);
	ck_assert_int_eq(rma_region_alloc(c, SZ, &r2), RMA_OK);
	rma_disconnect(c);
	unlink(watch_path);
	watch_path[0] = '\0';
}
END_TEST

struct progress_arg {
	rma_client_t *c;
	rma_status_t st;
};

/* rma_progress() in a thread of its own: the daemon is started by the
 * main thread (a daemon's PR_SET_PDEATHSIG follows the thread that forked
 * it). */
static void *
progress_thread(void *arg)
{
	struct progress_arg *a = arg;

	a->st = rma_progress(a->c);
	return NULL;
}

/* kill -9 of the daemon leaves its path refusing; a new one started on
 * it within the deadline is reached: it is not the same daemon (no fd
 * store here), so the client says so, rather than that nobody was
 * there. */
START_TEST(test_killed_daemon_replaced_is_reached)
{
	struct progress_arg a = {0};
	rma_client_t *c;
	pthread_t t;
	int refused;

	setenv("RMA_REATTACH_TIMEOUT_MS", "30000", 1);
	harness_daemon_start(&da, NULL);
	snprintf(watch_path, sizeof(watch_path), "%s", da.socket);
	ck_assert_int_eq(rma_connect(da.socket, &c), RMA_OK);
	/* the socket file stays: connecting to it is refused */
	kill(da.pid, SIGKILL);
	waitpid(da.pid, NULL, 0);
	da.pid = 0;
	a.c = c;
	ck_assert_int_eq(pthread_create(&t, NULL, progress_thread, &a), 0);
	refused = watch_until(&watch_refused, 1);
	if (refused)
		harness_daemon_restart(&da, NULL);
	pthread_join(t, NULL);
	ck_assert_msg(refused, "the client was never refused");
	ck_assert_int_eq(a.st, RMA_ERR_DAEMON_GONE);
	ck_assert_msg(strstr(rma_last_error(c), "not taken over") != NULL,
		      "the client did not reach the new daemon: %s",
		      rma_last_error(c));
	ck_assert_uint_eq(rma_reattach_count(c), 0);
	rma_disconnect(c);
	watch_path[0] = '\0';
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("reattach");
	TCase *tc = tcase_create("reattach");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_epoll_loop_across_take_overs);
	tcase_add_test(tc, test_epoll_loop_across_crashes);
	tcase_add_test(tc, test_refused_and_absent_are_tried_again);
	tcase_add_test(tc, test_killed_daemon_replaced_is_reached);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
