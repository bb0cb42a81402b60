/* SPDX-License-Identifier: BSD-2-Clause */
/* Faults of a client: one killed mid-transfer, one killed with its
 * operations stuck on a frozen peer, the owner of the target region
 * killed mid-transfer, and a client that never reads. The daemon must
 * drain, give back regions and descriptors, and serve the others. Real
 * rmad processes on loopback (faults_common.h); the times that matter are
 * printed ("faults: ..." on stderr). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "descriptor.h"
#include "faults_common.h"
#include "frame.h"
#include "raw_frame.h"

/* ---- a client killed mid-transfer --------------------------------------- */

/* A client process on `socket` that imports desc through peer, then (once
 * go_fd, if not -1, is readable) submits 4000 puts of 64 KiB with flags,
 * says so on ready_fd and waits to be killed, never reading. */
static void
doomed_client(int ready_fd, int go_fd, const char *socket, const char *peer,
	      const char *desc, unsigned flags)
{
	rma_client_t *c;
	rma_region_t *r[4];
	rma_peer_t *p;
	rma_remote_t *rem;
	double deadline = harness_now() + 10;
	char x;

	if (rma_connect(socket, &c) != RMA_OK)
		_exit(10);
	for (int i = 0; i < 4; i++)
		if (rma_region_alloc(c, REGION, &r[i]) != RMA_OK)
			_exit(11);
	if (rma_peer_connect(c, peer, &p) != RMA_OK ||
	    rma_remote_import(c, p, desc, &rem) != RMA_OK)
		_exit(12);
	if (go_fd >= 0) {
		if (write(ready_fd, "i", 1) != 1 ||
		    !harness_wait_fd(go_fd, 10) || read(go_fd, &x, 1) != 1)
			_exit(13);
	}
	for (int i = 0; i < 4000; i++)
		if (rma_put(c, r[i % 4], 0, rem, 0, 65536, flags, NULL, NULL,
			    NULL) != RMA_OK)
			_exit(14);
	while (c->pending_n > 0 && harness_now() < deadline)
		rma_progress(c);
	if (write(ready_fd, "x", 1) != 1)
		_exit(15);
	/* Never reads its completions; killed long before this passes. */
	harness_pause(30, harness_now() + 30);
	_exit(0);
}

START_TEST(test_client_killed_mid_transfer)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb, *r;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct baseline b = {0};
	size_t regions, clients;
	int pipefd[2], wstatus;
	pid_t child;
	char x;
	double t0;

	/* The endpoint to A exists before the baseline is taken. */
	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 65536, 1);
	baseline_take(&b, cb, &db);
	ck_assert_int_gt(b.fds, 0);

	ck_assert_int_eq(pipe(pipefd), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(pipefd[0]);
		doomed_client(pipefd[1], -1, db.socket, da.listen,
			      rma_region_descriptor(ra), 0);
	}
	close(pipefd[1]);
	ck_assert_msg(harness_wait_fd(pipefd[0], 10) &&
			  read(pipefd[0], &x, 1) == 1,
		      "the client did not get its puts out");
	status_counts(cb, &regions, &clients);
	ck_assert_uint_eq(regions, b.regions + 4);
	ck_assert_uint_eq(clients, b.clients + 1);
	kill(child, SIGKILL);
	t0 = harness_now();
	ck_assert_int_eq(waitpid(child, &wstatus, 0), child);
	ck_assert(WIFSIGNALED(wstatus));
	close(pipefd[0]);

	ck_assert_msg(harness_until(10, back_to_baseline, &b),
		      "after 10 s: %zu regions (was %zu), %zu clients (was "
		      "%zu), %d fds (was %d), %llu ops in flight",
		      b.now_regions, b.regions, b.now_clients, b.clients,
		      b.now_fds, b.fds, (unsigned long long)b.now_in_flight);
	fprintf(stderr,
		"faults: client kill -> drained, regions and fds back: %.1f "
		"ms\n",
		ms(harness_now() - t0));
	/* B keeps serving. */
	put_and_check(cb, rb, rema, ra, 4096, 65536, 2);
	ck_assert_int_eq(rma_region_alloc(cb, 4096, &r), RMA_OK);
	ck_assert_int_eq(rma_region_free(cb, r), RMA_OK);
}
END_TEST

/* ---- a client killed with its operations stuck on a frozen peer --------- */

/* A doomed client on B that puts to A once A is frozen; killed once its
 * puts are out and in flight. Returns when it is reaped, at *t0_p. */
static void
kill_client_stuck_on_frozen(rma_client_t *cb, const rma_region_t *ra,
			    double *t0_p)
{
	int ready[2], go[2];
	pid_t child;
	char x;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(ready[0]);
		close(go[1]);
		doomed_client(ready[1], go[0], db.socket, da.listen,
			      rma_region_descriptor(ra),
			      RMA_FLAG_REMOTE_COMPLETION);
	}
	close(ready[1]);
	close(go[0]);
	ck_assert(harness_wait_fd(ready[0], 10) && read(ready[0], &x, 1) == 1);
	kill(da.pid, SIGSTOP);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	ck_assert_msg(harness_wait_fd(ready[0], 10) &&
			  read(ready[0], &x, 1) == 1,
		      "the client did not get its puts out");
	ck_assert_uint_gt(status_peer(cb, da.listen).in_flight, 0);
	kill(child, SIGKILL);
	*t0_p = harness_now();
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	close(ready[0]);
	close(go[1]);
}

START_TEST(test_client_killed_on_frozen_peer)
{
	static const char *const flags_b[] = {"--op-timeout", "1", NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct baseline b = {0};
	int attempts = 0;
	double t0, worst = 0;
	rma_status_t st;

	two_daemons(NULL, flags_b, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 65536, 1);
	baseline_take(&b, cb, &db);
	kill_client_stuck_on_frozen(cb, ra, &t0);
	/* Its regions wait for its operations, which fail at the deadline
	 * and take the endpoint (and its descriptors) along: fewer fds
	 * until the peer is back. */
	ck_assert_msg(harness_until(5, back_to_baseline, &b),
		      "after 5 s: %zu regions (was %zu), %zu clients (was "
		      "%zu), %d fds (was %d), %llu ops in flight",
		      b.now_regions, b.regions, b.now_clients, b.clients,
		      b.now_fds, b.fds, (unsigned long long)b.now_in_flight);
	fprintf(stderr,
		"faults: client kill with puts stuck on a frozen peer -> "
		"drained, regions and fds back: %.1f ms (op timeout 1 s)\n",
		ms(harness_now() - t0));
	kill(da.pid, SIGCONT);
	if (!put_until_ok(cb, rb, rema, 0, 65536, harness_now() + 10, &attempts,
			  &worst, &st)) {
		assert_alive(&da, 0,
			     "once thawed, its initiator having "
			     "force-closed the endpoint");
		ck_abort_msg("no put succeeded within 10 s of SIGCONT: %s",
			     rma_strerror(st));
	}
	ck_assert_msg(harness_until(5, back_to_baseline, &b),
		      "5 s after the peer came back: %d fds (was %d)",
		      b.now_fds, b.fds);
}
END_TEST

/* ---- the owner of the target region killed mid-transfer ----------------- */

static void
doomed_owner(int fd, const char *socket)
{
	char desc[DESCRIPTOR_TEXT_SIZE] = "";
	rma_client_t *c;
	rma_region_t *r;

	if (rma_connect(socket, &c) != RMA_OK ||
	    rma_region_alloc(c, REGION, &r) != RMA_OK)
		_exit(10);
	snprintf(desc, sizeof(desc), "%s", rma_region_descriptor(r));
	if (write(fd, desc, sizeof(desc)) != (ssize_t)sizeof(desc))
		_exit(11);
	harness_pause(30, harness_now() + 30); /* killed long before */
	_exit(0);
}

/* Forks a doomed owner on A; its pid, and its region's descriptor. */
static pid_t
owner_start(char desc[DESCRIPTOR_TEXT_SIZE])
{
	int pipefd[2];
	pid_t child;

	ck_assert_int_eq(pipe(pipefd), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(pipefd[0]);
		doomed_owner(pipefd[1], da.socket);
	}
	close(pipefd[1]);
	ck_assert_msg(harness_wait_fd(pipefd[0], 10) &&
			  read(pipefd[0], desc, DESCRIPTOR_TEXT_SIZE) ==
			      (ssize_t)DESCRIPTOR_TEXT_SIZE,
		      "the owner did not send its descriptor");
	close(pipefd[0]);
	return child;
}

START_TEST(test_owner_killed_mid_transfer)
{
	enum { N = 2000, SZ = 65536 };
	char desc[DESCRIPTOR_TEXT_SIZE];
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rem, *rema;
	struct tally t = {0};
	struct baseline b = {0};
	rma_status_t st = RMA_OK;
	pid_t child;
	double t0, deadline;

	two_daemons(NULL, NULL, &ca, &ra, &cb, &rb, &pa, &rema);
	/* The lanes a transfer opens exist before the baseline is taken. */
	put_and_check(cb, rb, rema, ra, 0, SZ, 4);
	baseline_take(&b, ca, &da);
	child = owner_start(desc);
	ck_assert_int_eq(rma_remote_import(cb, pa, desc, &rem), RMA_OK);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, rem,
					 (uint64_t)(i % 16) * SZ, SZ, 0,
					 tally_cb, &t, NULL),
				 RMA_OK);
	send_pending(cb);
	kill(child, SIGKILL);
	t0 = harness_now();
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	progress_until(cb, &t.done, N, 10);
	ck_assert_msg(
	    t.reset + t.canceled + t.timeout + t.shutdown + t.gone == 0 &&
		(t.other == 0 || t.other_status == RMA_ERR_STALE_DESCRIPTOR),
	    "puts to a dying owner: %d reset, %d other (%s)", t.reset, t.other,
	    rma_strerror(t.other_status));
	/* The owner's daemon tells the initiator: then puts are refused. */
	deadline = t0 + 5;
	while (harness_now() < deadline) {
		st = rma_put_sync(cb, rb, 0, rem, 0, 8, 0, WAIT_MS);
		if (st != RMA_OK)
			break;
		harness_pause(0.01, deadline);
	}
	fprintf(stderr, "faults: owner kill -> its region refused: %.1f ms\n",
		ms(harness_now() - t0));
	ck_assert_msg(st == RMA_ERR_STALE_DESCRIPTOR,
		      "put after the owner died: %s", rma_strerror(st));
	ck_assert_msg(harness_until(10, back_to_baseline, &b),
		      "after 10 s: %zu regions (was %zu), %zu clients (was "
		      "%zu), %d fds (was %d), %llu ops in flight",
		      b.now_regions, b.regions, b.now_clients, b.clients,
		      b.now_fds, b.fds, (unsigned long long)b.now_in_flight);
	/* Both daemons live on and serve. */
	ck_assert_int_eq(harness_daemon_wait_exit(&da, 0, NULL), 0);
	put_and_check(cb, rb, rema, ra, 0, SZ, 5);
	ck_assert_int_eq(rma_remote_import(cb, pa, desc, &rem),
			 RMA_ERR_STALE_DESCRIPTOR);
}
END_TEST

/* ---- a client that never reads ------------------------------------------ */

enum { STUCK_OPS = 256 };

/* A Submit frame of ops naming a region the client does not have: each
 * one costs the daemon nothing but a completion, which is what piles up. */
static uint8_t *
unknown_region_submit(size_t *len_p)
{
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__Submit submit = RMA__V1__SUBMIT__INIT;
	Rma__V1__Op ops[STUCK_OPS], *op_ptrs[STUCK_OPS];
	uint8_t *buf;

	for (int i = 0; i < STUCK_OPS; i++) {
		rma__v1__op__init(&ops[i]);
		ops[i].op_id = (uint64_t)i + 1;
		ops[i].kind = RMA__V1__OP_KIND__PUT;
		ops[i].region_id = 424242;
		ops[i].remote_id = 1;
		ops[i].length = 8;
		op_ptrs[i] = &ops[i];
	}
	submit.n_ops = STUCK_OPS;
	submit.ops = op_ptrs;
	req.id = 2;
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &submit;
	buf = raw_frame_pack(&req.base, len_p);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

/* A raw client on B, past its Hello, that will only ever write. */
static int
writer_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t hello_len;
	uint8_t *hello_buf = raw_frame_hello(1, "never-reads", &hello_len);
	int fd;

	ck_assert_ptr_nonnull(hello_buf);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", db.socket);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(fd, hello_buf, hello_len, MSG_NOSIGNAL),
			 (ssize_t)hello_len);
	ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	free(hello_buf);
	return fd;
}

/* What the writer saw: when the daemon stopped reading it, when it cut it
 * off, the daemon's largest RSS meanwhile. */
struct writer_run {
	double stuck_at, closed_at;
	long rss_max;
	uint64_t frames;
};

/* The daemon stopped reading the writer: the others are served. */
static void
assert_others_served(rma_client_t *cb, rma_region_t *rb, rma_remote_t *rema,
		     const rma_region_t *ra, uint64_t frames)
{
	double t = harness_now();
	size_t regions, clients;

	status_counts(cb, &regions, &clients);
	ck_assert_uint_eq(clients, 2);
	put_and_check(cb, rb, rema, ra, 8192, 65536, 2);
	fprintf(stderr,
		"faults: while a client is stuck (%llu frames sent): status "
		"and put took %.1f ms\n",
		(unsigned long long)frames, ms(harness_now() - t));
	ck_assert_double_lt(harness_now() - t, 1.0);
}

/* Writes the submit frame again and again, never reading, for at most
 * 15 s or until the daemon closes the connection. */
static void
write_until_cut_off(int fd, const uint8_t *buf, size_t len,
		    struct writer_run *w, rma_client_t *cb, rma_region_t *rb,
		    rma_remote_t *rema, const rma_region_t *ra)
{
	double deadline = harness_now() + 15;
	size_t at = 0;

	while (harness_now() < deadline) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int rc = poll(&pfd, 1, 100);
		long rss = harness_rss_kib(db.pid);
		ssize_t n;

		if (rss > w->rss_max)
			w->rss_max = rss;
		if (rc > 0 && (pfd.revents & (POLLHUP | POLLERR))) {
			w->closed_at = harness_now();
			return;
		}
		if (rc == 0 && w->stuck_at == 0) {
			w->stuck_at = harness_now();
			assert_others_served(cb, rb, rema, ra, w->frames);
			continue;
		}
		if (rc <= 0)
			continue;
		n = send(fd, buf + at, len - at, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			w->closed_at = harness_now();
			return;
		}
		ck_assert_msg(n >= 0 || errno == EAGAIN || errno == EINTR,
			      "send: %s", strerror(errno));
		if (n > 0) {
			at += (size_t)n;
			if (at == len) {
				at = 0;
				w->frames++;
			}
		}
	}
}

START_TEST(test_client_not_reading)
{
	static const char *const flags_b[] = {"--op-timeout", "1", NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *pa;
	rma_remote_t *rema;
	struct writer_run w = {0};
	uint8_t *submit_buf;
	size_t submit_len, regions, clients;
	long rss0;
	int fd;

	two_daemons(NULL, flags_b, &ca, &ra, &cb, &rb, &pa, &rema);
	put_and_check(cb, rb, rema, ra, 0, 4096, 1);
	rss0 = w.rss_max = harness_rss_kib(db.pid);
	ck_assert_int_gt(rss0, 0);
	submit_buf = unknown_region_submit(&submit_len);
	fd = writer_connect();

	write_until_cut_off(fd, submit_buf, submit_len, &w, cb, rb, rema, ra);
	ck_assert_msg(w.stuck_at > 0, "the daemon never stopped reading");
	ck_assert_msg(w.closed_at > 0, "the daemon never cut the client off");
	fprintf(stderr,
		"faults: stuck client cut off %.1f ms after its writes "
		"stalled (op timeout 1 s); daemon RSS %ld -> max %ld KiB\n",
		ms(w.closed_at - w.stuck_at), rss0, w.rss_max);
	ck_assert_double_lt(w.closed_at - w.stuck_at, 3.0);
	ck_assert_int_lt(w.rss_max - rss0, 100 * 1024);
	close(fd);
	free(submit_buf);
	status_counts(cb, &regions, &clients);
	ck_assert_uint_eq(clients, 1);
	put_and_check(cb, rb, rema, ra, 0, 65536, 3);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("faults-clients");

	FAULTS_ADD(s, test_client_killed_mid_transfer);
	FAULTS_ADD(s, test_client_killed_on_frozen_peer);
	FAULTS_ADD(s, test_owner_killed_mid_transfer);
	FAULTS_ADD(s, test_client_not_reading);
	return check_main_run(s);
}
