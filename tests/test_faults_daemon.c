/* SPDX-License-Identifier: BSD-2-Clause */
/* Faults of the daemon itself: SIGTERM with operations stuck on a frozen
 * peer (drain, then fail them), a second signal (exit at once), SIGKILL
 * under a client waiting in rma_request_wait. Real rmad processes on
 * loopback (faults_common.h); the times that matter are printed
 * ("faults: ..." on stderr). */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "faults_common.h"

/* The clients' re-attach deadline here (RMA_REATTACH_TIMEOUT_MS). */
#define REATTACH_MS "300"
#define REATTACH_S 0.3

/* ---- SIGTERM with operations stuck on a frozen peer --------------------- */

/* A frozen A, and N remote-completion puts from B's client in flight;
 * pa_p and desc_p, if given: A as B's client knows it, and the
 * descriptor of A's region. */
static void
stuck_puts(const char *const *flags_b, int n, struct tally *t,
	   rma_client_t **cb_p, rma_region_t **rb_p, rma_remote_t **rem_p,
	   rma_peer_t **pa_p, const char **desc_p)
{
	rma_client_t *ca;
	rma_region_t *ra;
	rma_peer_t *pa;

	two_daemons(NULL, flags_b, &ca, &ra, cb_p, rb_p, &pa, rem_p);
	if (pa_p != NULL)
		*pa_p = pa;
	if (desc_p != NULL)
		*desc_p = rma_region_descriptor(ra);
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

	stuck_puts(flags_b, N, &t, &cb, &rb, &rema, NULL, NULL);
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
	rma_peer_t *pa, *nobody;
	rma_remote_t *again;
	const char *desc;
	double t1;

	stuck_puts(flags_b, N, &t, &cb, &rb, &rema, &pa, &desc);
	kill(db.pid, SIGTERM);
	/* The first signal was handled once the socket is gone. */
	ck_assert(harness_until(5, socket_gone, db.socket));
	/* Draining, it dials nobody: an endpoint started now would be torn
	 * down unanswered (UCX 1.13 aborted at its worker's destroy on one
	 * still connecting). A new peer and an import are refused. */
	ck_assert_int_eq(rma_peer_connect(cb, "127.0.0.1:9", &nobody),
			 RMA_ERR_SHUTDOWN);
	ck_assert_int_eq(rma_remote_import(cb, pa, desc, &again),
			 RMA_ERR_SHUTDOWN);
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

/* ---- the daemon killed under a waiting client --------------------------- */

enum { WAITER_N = 300 };

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

/* Waits on the last of reqs while a thread kills B under the wait: the
 * waiter wakes within 1 s of the re-attach deadline (the client tries
 * the refusing path until then, a restart may bring the daemon back),
 * every request failed with DAEMON_GONE. */
static void
kill_under_wait(rma_client_t *cb, rma_request_t **reqs, const struct tally *t)
{
	struct killer k;
	pthread_t thread;
	rma_status_t st;
	double woke;

	k.tid = (pid_t)syscall(SYS_gettid);
	k.victim = db.pid;
	k.killed_at = 0;
	ck_assert_int_eq(pthread_create(&thread, NULL, killer_main, &k), 0);
	st = rma_request_wait(cb, reqs[WAITER_N - 1], 20000);
	woke = harness_now();
	pthread_join(thread, NULL);
	ck_assert_int_eq(st, RMA_ERR_DAEMON_GONE);
	fprintf(stderr, "faults: daemon kill -> waiter woke: %.1f ms\n",
		ms(woke - k.killed_at));
	ck_assert_double_lt(woke - k.killed_at, 1.0 + REATTACH_S);
	for (int i = 0; i < WAITER_N; i++) {
		ck_assert(rma_request_is_completed(reqs[i]));
		ck_assert_int_eq(rma_request_status(reqs[i]),
				 RMA_ERR_DAEMON_GONE);
		rma_request_release(reqs[i]);
	}
	ck_assert_int_eq(t->done, WAITER_N);
	ck_assert_int_eq(t->gone, WAITER_N);
}

/* A new daemon on a new socket serves a new client, to which the old
 * client's handles (rb, rema, pa) mean nothing. */
static void
assert_old_handles_foreign(rma_region_t *rb, rma_remote_t *rema, rma_peer_t *pa)
{
	rma_client_t *cn;
	rma_region_t *rn;
	rma_remote_t *remn, *rem_old;
	rma_peer_t *self;
	rma_request_t *req;

	harness_daemon_start(&dc, NULL);
	ck_assert_int_eq(rma_connect(dc.socket, &cn), RMA_OK);
	faults_track(cn);
	ck_assert_int_eq(rma_region_alloc(cn, 4096, &rn), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cn, dc.listen, &self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cn, self, rma_region_descriptor(rn), &remn),
	    RMA_OK);
	strcpy(rma_region_ptr(rn), "fresh");
	ck_assert_int_eq(rma_put_sync(cn, rn, 0, remn, 100, 6, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_str_eq((char *)rma_region_ptr(rn) + 100, "fresh");
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

START_TEST(test_daemon_killed_under_waiter)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_remote_t *rema;
	rma_peer_t *pa;
	rma_request_t *reqs[WAITER_N];
	struct tally t = {0};

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	kill(da.pid, SIGSTOP); /* nothing completes by itself */
	for (int i = 0; i < WAITER_N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, rema, 0, 4096,
					 RMA_FLAG_REMOTE_COMPLETION, tally_cb,
					 &t, &reqs[i]),
				 RMA_OK);
	send_pending(cb);
	kill_under_wait(cb, reqs, &t);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rema, 0, 8, 0, WAIT_MS),
			 RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(rma_progress(cb), RMA_ERR_DAEMON_GONE);
	ck_assert(harness_daemon_wait_exit(&db, 5, NULL));
	assert_old_handles_foreign(rb, rema, pa);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("faults-daemon");

	/* Every daemon here goes for good: its clients try to get back
	 * (it might be restarting) only this long. */
	setenv("RMA_REATTACH_TIMEOUT_MS", REATTACH_MS, 1);

	FAULTS_ADD(s, test_sigterm_drains_then_fails);
	FAULTS_ADD(s, test_second_signal_exits_at_once);
	FAULTS_ADD(s, test_daemon_killed_under_waiter);
	return check_main_run(s);
}
