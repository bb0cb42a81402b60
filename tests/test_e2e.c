/* SPDX-License-Identifier: BSD-2-Clause */
/* End to end: two real rmad processes on loopback (UCX over tcp), clients
 * through librma. Bytes are verified in the owner's mapping. */
#include <check.h>

#include "check_main.h"
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "descriptor.h"
#include "harness.h"
#include "rma.h"

#define REGION_SIZE ((16u << 20) + 8192)
#define WAIT_MS 20000

HARNESS_PAIR(pair);

static void
setup(void)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};

	harness_pair_start(&pair, REGION_SIZE, flags);
	ck_assert_int_eq(rma_peer_status(peer_a), RMA_OK);
	ck_assert_uint_eq(rma_remote_length(remote_a), REGION_SIZE);
}

static void
teardown(void)
{
	harness_pair_stop(&pair);
}

START_TEST(test_put_get_sizes_and_offsets)
{
	/* 65472 and 65473: one fragment of UCX's tcp transport (64 KiB
	 * with rmad's settings) with a put's header, and one byte more (two
	 * pieces, op_send_am) */
	static const size_t sizes[] = {1,     7,     4096,     65472,
				       65473, 65537, 1u << 20, 16u << 20};
	static const size_t offsets[] = {0, 3, 4097};
	uint8_t *a = rma_region_ptr(ra), *b = rma_region_ptr(rb);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (size_t j = 0; j < sizeof(offsets) / sizeof(offsets[0]);
		     j++) {
			size_t n = sizes[i], off = offsets[j];
			if (off + 1 + n > REGION_SIZE)
				continue;
			harness_fill(b + off + 1, n, (uint32_t)(i * 10 + j));
			ck_assert_int_eq(
			    rma_put_sync(cb, rb, off + 1, remote_a, off, n,
					 RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			    RMA_OK);
			ck_assert_msg(memcmp(a + off, b + off + 1, n) == 0,
				      "put of %zu bytes at %zu differs", n,
				      off);
			/* and back, into a cleared range */
			memset(b, 0, n);
			ck_assert_int_eq(
			    rma_get_sync(cb, rb, 0, remote_a, off, n, WAIT_MS),
			    RMA_OK);
			ck_assert_msg(memcmp(a + off, b, n) == 0,
				      "get of %zu bytes at %zu differs", n,
				      off);
		}
	}
}
END_TEST

struct counter {
	int done;
	int ok;
};

static void
count_cb(rma_request_t *req, rma_status_t status, void *user_data)
{
	struct counter *c = user_data;

	c->done++;
	c->ok += status == RMA_OK;
}

static void
progress_until(rma_client_t *c, const int *done, int want, double seconds)
{
	double deadline = harness_now() + seconds;

	while (*done < want && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	ck_assert_int_eq(*done, want);
}

START_TEST(test_many_in_flight)
{
	enum { N = 4000, SZ = 64 };
	uint8_t *a = rma_region_ptr(ra), *b = rma_region_ptr(rb);
	struct counter cnt = {0, 0};

	harness_fill(b, N * SZ, 99);
	memset(a, 0, N * SZ);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, (uint64_t)i * SZ, remote_a,
					 (uint64_t)i * SZ, SZ, 0, count_cb,
					 &cnt, NULL),
				 RMA_OK);
	ck_assert_uint_gt(rma_in_flight(cb), 0);
	progress_until(cb, &cnt.done, N, 30);
	ck_assert_int_eq(cnt.ok, N);
	ck_assert_int_eq(rma_flush_sync(cb, peer_a, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(a, b, N * SZ), 0);

	/* gets in flight, into another part of b */
	cnt.done = cnt.ok = 0;
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_get(cb, rb, (1u << 20) + (uint64_t)i * SZ,
					 remote_a, (uint64_t)i * SZ, SZ,
					 count_cb, &cnt, NULL),
				 RMA_OK);
	progress_until(cb, &cnt.done, N, 30);
	ck_assert_int_eq(cnt.ok, N);
	ck_assert_int_eq(memcmp(a, b + (1u << 20), N * SZ), 0);
}
END_TEST

/* rma_poll: no spin with nothing in flight, however long it may be; a
 * put taken by polls alone; and once a poll returned, the daemon wakes
 * rma_fd() for what comes next (the spin tells it not to). */
static void
count_notification(rma_client_t *c, const rma_notification_t *n, void *arg)
{
	(*(int *)arg)++;
}

/* A notifying put into cb's region rb by another client of b, from a
 * thread of its own while cb polls: its status. */
struct notifier {
	rma_client_t *c;
	rma_region_t *src;
	rma_status_t st;
};

static void *
notifier_run(void *arg)
{
	struct notifier *nt = arg;
	rma_peer_t *self;
	rma_remote_t *rem;
	rma_request_t *req;

	nt->st = rma_peer_connect(nt->c, db.listen, &self);
	if (nt->st == RMA_OK)
		nt->st = rma_remote_import(nt->c, self,
					   rma_region_descriptor(rb), &rem);
	if (nt->st != RMA_OK)
		return NULL;
	nt->st = rma_put_notify(nt->c, nt->src, 0, rem, 64, 8, 7, 0, NULL, NULL,
				&req);
	if (nt->st == RMA_OK) {
		nt->st = rma_request_wait(nt->c, req, WAIT_MS);
		rma_request_release(req);
	}
	rma_remote_release(nt->c, rem);
	return NULL;
}

START_TEST(test_poll)
{
	struct counter cnt = {0, 0};
	double deadline = harness_now() + 20;
	struct notifier nt = {NULL, NULL, RMA_OK};
	pthread_t thread;
	int notes = 0;
	rma_status_t st;

	ck_assert_int_eq(rma_poll(NULL, 0), RMA_ERR_INVALID);
	/* INT_MAX us would outlast the test's timeout */
	ck_assert_int_eq(rma_poll(cb, INT_MAX), RMA_ERR_TIMEOUT);
	ck_assert_int_eq(
	    rma_put(cb, rb, 0, remote_a, 0, 8, 0, count_cb, &cnt, NULL),
	    RMA_OK);
	while (cnt.done == 0 && harness_now() < deadline) {
		st = rma_poll(cb, 1000);
		ck_assert(st == RMA_OK || st == RMA_ERR_TIMEOUT);
	}
	ck_assert_int_eq(cnt.done, 1);
	ck_assert_int_eq(cnt.ok, 1);
	/* a wake-up of the daemon's still on its way is taken first */
	while (rma_poll(cb, 0) == RMA_OK && harness_now() < deadline)
		;

	/* The target stopped: nothing can come during the spin. Complete
	 * at the target, so that rma_protocol = ucx waits for it too. */
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_put(cb, rb, 0, remote_a, 8, 8,
				 RMA_FLAG_REMOTE_COMPLETION, count_cb, &cnt,
				 NULL),
			 RMA_OK);
	ck_assert_int_eq(rma_poll(cb, 1000), RMA_ERR_TIMEOUT);
	ck_assert_int_eq(cnt.done, 1);

	/* A notification alone, taken from the ring during the spin (the
	 * put above stays in flight, so rma_poll spins), is something that
	 * came. */
	rma_notify_callback(cb, count_notification, &notes);
	ck_assert_int_eq(rma_connect(db.socket, &nt.c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(nt.c, 4096, &nt.src), RMA_OK);
	ck_assert_int_eq(pthread_create(&thread, NULL, notifier_run, &nt), 0);
	while (notes == 0 && harness_now() < deadline) {
		st = rma_poll(cb, 100000);
		ck_assert_int_eq(st, (notes > 0 ? RMA_OK : RMA_ERR_TIMEOUT));
	}
	ck_assert_int_eq(pthread_join(thread, NULL), 0);
	ck_assert_int_eq(nt.st, RMA_OK);
	ck_assert_int_eq(notes, 1);
	ck_assert_int_eq(cnt.done, 1);
	rma_notify_callback(cb, NULL, NULL);
	rma_disconnect(nt.c);

	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	ck_assert(harness_wait_fd(rma_fd(cb), 20));
	progress_until(cb, &cnt.done, 2, 20);
	ck_assert_int_eq(cnt.ok, 2);
}
END_TEST

START_TEST(test_requests_and_flush)
{
	enum { N = 100 };
	rma_request_t *reqs[N], *flush;
	uint8_t *a = rma_region_ptr(ra), *b = rma_region_ptr(rb);

	harness_fill(b, N * 1000, 5);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, (uint64_t)i * 1000, remote_a,
					 (uint64_t)i * 1000, 1000, 0, NULL,
					 NULL, &reqs[i]),
				 RMA_OK);
	ck_assert_int_eq(rma_flush(cb, peer_a, NULL, NULL, &flush), RMA_OK);
	ck_assert_int_eq(rma_request_wait(cb, flush, WAIT_MS), RMA_OK);
	/* A flush completes after everything before it. */
	for (int i = 0; i < N; i++) {
		ck_assert(rma_request_is_completed(reqs[i]));
		ck_assert_int_eq(rma_request_status(reqs[i]), RMA_OK);
		ck_assert_uint_eq(rma_request_bytes(reqs[i]), 1000);
		rma_request_release(reqs[i]);
	}
	rma_request_release(flush);
	ck_assert_int_eq(memcmp(a, b, N * 1000), 0);
	ck_assert_int_eq(rma_flush_sync(cb, NULL, WAIT_MS), RMA_OK);
}
END_TEST

START_TEST(test_out_of_bounds)
{
	rma_request_t *req;

	ck_assert_int_eq(
	    rma_put_sync(cb, rb, 0, remote_a, REGION_SIZE - 10, 11, 0, WAIT_MS),
	    RMA_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(
	    rma_get_sync(cb, rb, REGION_SIZE - 1, remote_a, 0, 2, WAIT_MS),
	    RMA_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(rma_put(cb, rb, 0, remote_a, UINT64_MAX - 1, 4, 0,
				 NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_request_wait(cb, req, WAIT_MS),
			 RMA_ERR_OUT_OF_BOUNDS);
	ck_assert_ptr_nonnull(strstr(rma_request_detail(req), "outside"));
	rma_request_release(req);
	/* an empty transfer is refused by the call itself */
	ck_assert_int_eq(
	    rma_put(cb, rb, 0, remote_a, 0, 0, 0, NULL, NULL, &req),
	    RMA_ERR_INVALID);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, remote_a, 0, 0, WAIT_MS),
			 RMA_ERR_INVALID);
	ck_assert_uint_eq(rma_in_flight(cb), 0);
	/* still usable afterwards */
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS),
			 RMA_OK);
}
END_TEST

static void
forge(const char *text, int64_t dlen, int64_t did, int64_t dgen, char *out)
{
	struct descriptor d;

	ck_assert_int_eq(descriptor_parse(text, strlen(text), &d), 0);
	d.length += (uint64_t)dlen;
	d.region_id += (uint64_t)did;
	d.generation += (uint64_t)dgen;
	descriptor_format(&d, out);
}

START_TEST(test_descriptor_refusals)
{
	char text[DESCRIPTOR_TEXT_SIZE];
	rma_remote_t *rem;

	snprintf(text, sizeof(text), "%s", rma_region_descriptor(ra));
	text[20] = text[20] == 'a' ? 'b' : 'a';
	ck_assert_int_eq(rma_remote_import(cb, peer_a, text, &rem),
			 RMA_ERR_BAD_DESCRIPTOR);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, "hello", &rem),
			 RMA_ERR_BAD_DESCRIPTOR);
	/* Too long to be one: refused by the library over
	 * RMA_DESCRIPTOR_MAX (2 MiB would not even fit in a frame), by the
	 * daemon under it. */
	{
		size_t big = 2u << 20;
		char *huge = malloc(big + 1);

		ck_assert_ptr_nonnull(huge);
		memset(huge, 'f', big);
		huge[big] = '\0';
		ck_assert_int_eq(rma_remote_import(cb, peer_a, huge, &rem),
				 RMA_ERR_BAD_DESCRIPTOR);
		huge[RMA_DESCRIPTOR_MAX] = '\0';
		ck_assert_int_eq(rma_remote_import(cb, peer_a, huge, &rem),
				 RMA_ERR_BAD_DESCRIPTOR);
		free(huge);
	}
	/* Forged with a valid checksum: a far larger region... */
	forge(rma_region_descriptor(ra), 1ll << 40, 0, 0, text);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, text, &rem),
			 RMA_ERR_BAD_DESCRIPTOR);
	/* ...another region id, another generation. */
	forge(rma_region_descriptor(ra), 0, 1, 0, text);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, text, &rem),
			 RMA_ERR_STALE_DESCRIPTOR);
	forge(rma_region_descriptor(ra), 0, 0, 1, text);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, text, &rem),
			 RMA_ERR_STALE_DESCRIPTOR);
}
END_TEST

START_TEST(test_freed_region)
{
	char text[DESCRIPTOR_TEXT_SIZE];
	rma_remote_t *rem;
	rma_status_t st = RMA_OK;
	double deadline;

	snprintf(text, sizeof(text), "%s", rma_region_descriptor(ra));
	ck_assert_int_eq(rma_region_free(ca, ra), RMA_OK);
	ra = NULL;
	/* The owner's FREED notice races the import: a cached answer may
	 * still be given, but not for long. */
	deadline = harness_now() + 5;
	while ((st = rma_remote_import(cb, peer_a, text, &rem)) == RMA_OK &&
	       harness_now() < deadline) {
		rma_remote_release(cb, rem);
		harness_pause(0.01, deadline);
	}
	ck_assert_int_eq(st, RMA_ERR_STALE_DESCRIPTOR);
	st = RMA_OK;
	/* The owner tells the initiator; once it has, puts are refused. */
	deadline = harness_now() + 5;
	while (harness_now() < deadline) {
		st = rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS);
		if (st != RMA_OK)
			break;
	}
	ck_assert_int_eq(st, RMA_ERR_STALE_DESCRIPTOR);
	/* A freed local region's handle stays safe to name: the library
	 * refuses it (run under valgrind: no invalid read). */
	ck_assert_int_eq(rma_region_free(cb, rb), RMA_OK);
	ck_assert_ptr_null(rma_region_ptr(rb));
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS),
			 RMA_ERR_NO_REGION);
	{
		/* completed at once, before rma_get returns */
		struct counter cnt = {0, 0};

		ck_assert_int_eq(
		    rma_get(cb, rb, 0, remote_a, 0, 8, count_cb, &cnt, NULL),
		    RMA_OK);
		ck_assert_int_eq(cnt.done, 1);
		ck_assert_int_eq(cnt.ok, 0);
		ck_assert_int_eq(rma_in_flight(cb), 0);
	}
	ck_assert_int_eq(rma_region_free(cb, rb), RMA_ERR_NO_REGION);
	ck_assert_int_eq(rma_region_alloc(cb, 4096, &rb), RMA_OK);
}
END_TEST

/* rma_connect_timeout: a real daemon answers well within it; the same
 * daemon stopped (SIGSTOP) accepts at the kernel's level and never
 * answers, and the call returns at its deadline. */
START_TEST(test_connect_timeout)
{
	rma_client_t *c2;
	double t0;

	ck_assert_int_eq(rma_connect_timeout(db.socket, 2000, &c2), RMA_OK);
	rma_disconnect(c2);
	ck_assert_int_eq(kill(db.pid, SIGSTOP), 0);
	t0 = harness_now();
	ck_assert_int_eq(rma_connect_timeout(db.socket, 300, &c2),
			 RMA_ERR_TIMEOUT);
	ck_assert_double_ge(harness_now() - t0, 0.29);
	ck_assert_double_lt(harness_now() - t0, 3.0);
	ck_assert_ptr_nonnull(strstr(rma_last_error(NULL), "did not answer"));
	ck_assert_int_eq(kill(db.pid, SIGCONT), 0);
	ck_assert_int_eq(rma_connect_timeout(db.socket, WAIT_MS, &c2), RMA_OK);
	rma_disconnect(c2);
}
END_TEST

/* A listener on loopback; its address is written to addr. */
static int
listen_loopback(char *addr, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t salen = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 8), 0);
	getsockname(lfd, (struct sockaddr *)&sa, &salen);
	snprintf(addr, len, "127.0.0.1:%u", ntohs(sa.sin_port));
	return lfd;
}

/* A server that greets every connection first, as SSH and SMTP do. */
static pid_t
banner_server(int lfd)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(60); /* outlives no test */
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			if (fd >= 0 &&
			    write(fd, "SSH-2.0-OpenSSH_9.2\r\n", 21) < 0)
				_exit(1);
		}
	}
	return pid;
}

START_TEST(test_unreachable_and_not_rmad)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};
	struct daemon_proc dc = {0};
	char addr[32];
	rma_peer_t *p;
	rma_status_t st;
	double t0;
	pid_t banner;
	int lfd;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", harness_free_port());
	t0 = harness_now();
	ck_assert_int_eq(rma_peer_connect(cb, addr, &p), RMA_ERR_UNREACHABLE);
	ck_assert_double_lt(harness_now() - t0, 3.0);
	ck_assert_int_eq(rma_peer_connect(cb, "not-an-address", &p),
			 RMA_ERR_INVALID);

	/* Something listens and greets first: no rmad does that, so it
	 * is NOT_RMAD, bounded by the daemon's connect timeout (2 s). */
	lfd = listen_loopback(addr, sizeof(addr));
	banner = banner_server(lfd);
	st = rma_peer_connect(cb, addr, &p);
	ck_assert_msg(st == RMA_ERR_NOT_RMAD, "connect to a banner: %s (%s)",
		      rma_strerror(st), rma_last_error(cb));
	ck_assert_ptr_nonnull(strstr(rma_last_error(cb), "not an rmad"));
	kill(banner, SIGKILL);
	waitpid(banner, NULL, 0);
	close(lfd);

	/* Something accepts and says nothing: that may be an rmad too busy
	 * to answer, so it is a TIMEOUT that says what was seen. */
	lfd = listen_loopback(addr, sizeof(addr));
	st = rma_peer_connect(cb, addr, &p);
	ck_assert_msg(st == RMA_ERR_TIMEOUT,
		      "connect to a silent listener: "
		      "%s (%s)",
		      rma_strerror(st), rma_last_error(cb));
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(cb), "something accepted the connection"));
	close(lfd);

	/* A real rmad that cannot answer (stopped): TIMEOUT, never
	 * NOT_RMAD. */
	harness_daemon_start(&dc, flags);
	ck_assert_int_eq(kill(dc.pid, SIGSTOP), 0);
	st = rma_peer_connect(cb, dc.listen, &p);
	ck_assert_msg(st == RMA_ERR_TIMEOUT,
		      "connect to a stopped rmad: %s "
		      "(%s)",
		      rma_strerror(st), rma_last_error(cb));
	ck_assert_int_eq(kill(dc.pid, SIGCONT), 0);
	harness_daemon_kill(&dc);

	/* The good peer is unaffected. */
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS),
			 RMA_OK);
}
END_TEST

START_TEST(test_local_descriptor)
{
	rma_client_t *cb2;
	rma_region_t *r2;
	rma_peer_t *self;
	rma_remote_t *rem;
	uint8_t *b = rma_region_ptr(rb), *p2;

	ck_assert_int_eq(rma_connect(db.socket, &cb2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb2, 1 << 20, &r2), RMA_OK);
	p2 = rma_region_ptr(r2);
	ck_assert_int_eq(rma_peer_connect(cb, db.listen, &self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, self, rma_region_descriptor(r2), &rem),
	    RMA_OK);
	harness_fill(b, 1 << 20, 3);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rem, 0, 1 << 20,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(p2, b, 1 << 20), 0);
	harness_fill(p2 + 100, 5000, 4);
	ck_assert_int_eq(rma_get_sync(cb, rb, 7, rem, 100, 5000, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(p2 + 100, b + 7, 5000), 0);
	ck_assert_int_eq(
	    rma_put_sync(cb, rb, 0, rem, (1 << 20) - 1, 2, 0, WAIT_MS),
	    RMA_ERR_OUT_OF_BOUNDS);
	rma_remote_release(cb, rem);
	rma_disconnect(cb2);
}
END_TEST

/* A put within one region of the same daemon, its ranges overlapping:
 * the target range ends with the source's bytes as they were (as
 * memmove), and the source's bytes outside the target are untouched. */
START_TEST(test_local_put_overlap)
{
	uint8_t *b = rma_region_ptr(rb), before[64];
	rma_peer_t *self;
	rma_remote_t *rem;

	ck_assert_int_eq(rma_peer_connect(cb, db.listen, &self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, self, rma_region_descriptor(rb), &rem),
	    RMA_OK);
	for (size_t i = 0; i < sizeof(before); i++)
		b[i] = before[i] = (uint8_t)(i + 1);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rem, 8, 32, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(b, before, 8), 0);
	ck_assert_int_eq(memcmp(b + 8, before, 32), 0);
	ck_assert_int_eq(memcmp(b + 40, before + 40, 24), 0);
	/* and downwards */
	memcpy(b, before, sizeof(before));
	ck_assert_int_eq(rma_put_sync(cb, rb, 8, rem, 0, 32, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(b, before + 8, 32), 0);
	ck_assert_int_eq(memcmp(b + 32, before + 32, 32), 0);
	rma_remote_release(cb, rem);
}
END_TEST

START_TEST(test_daemon_gone)
{
	enum { N = 500 };
	rma_request_t *reqs[N];
	struct counter cnt = {0, 0};
	int st;

	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, remote_a, 0, 32768, 0,
					 count_cb, &cnt, &reqs[i]),
				 RMA_OK);
	harness_daemon_stop(&db, SIGKILL);
	/* Every outstanding request completes; none hangs. */
	for (int i = 0; i < N; i++) {
		rma_status_t s = rma_request_wait(cb, reqs[i], WAIT_MS);
		ck_assert(s == RMA_OK || s == RMA_ERR_DAEMON_GONE);
		rma_request_release(reqs[i]);
	}
	ck_assert_int_eq(cnt.done, N);
	/* Known gone: completed before rma_put/rma_get return, callback
	 * already run (rma.h, "Immediate completion"). */
	ck_assert_int_eq(
	    rma_put(cb, rb, 0, remote_a, 0, 8, 0, count_cb, &cnt, &reqs[0]),
	    RMA_OK);
	ck_assert_int_eq(cnt.done, N + 1);
	ck_assert_int_eq(rma_request_status(reqs[0]), RMA_ERR_DAEMON_GONE);
	rma_request_release(reqs[0]);
	ck_assert_int_eq(
	    rma_get(cb, rb, 0, remote_a, 0, 8, count_cb, &cnt, NULL), RMA_OK);
	ck_assert_int_eq(cnt.done, N + 2);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS),
			 RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(rma_progress(cb), RMA_ERR_DAEMON_GONE);
	st = 0;
	(void)st;
}
END_TEST

START_TEST(test_peer_killed)
{
	enum { N = 2000 };
	struct counter cnt = {0, 0};
	double t0;

	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put(cb, rb, 0, remote_a, 0, 65536, 0,
					 count_cb, &cnt, NULL),
				 RMA_OK);
	rma_progress(cb);
	t0 = harness_now();
	harness_daemon_stop(&da, SIGKILL);
	progress_until(cb, &cnt.done, N, 10);
	ck_assert_double_lt(harness_now() - t0, 10.0);
	/* Some may have finished before the kill; none is lost. */
	ck_assert_int_lt(cnt.ok, N);
	/* The client heard that the peer went down, and why. */
	ck_assert_int_ne(rma_peer_status(peer_a), RMA_OK);
	ck_assert_uint_gt(strlen(rma_peer_detail(peer_a)), 0);
	/* New operations fail at once with the peer's error... */
	ck_assert_int_ne(rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS),
			 RMA_OK);
	/* ...and the daemon serves everything else. */
	{
		rma_region_t *r;
		ck_assert_int_eq(rma_region_alloc(cb, 4096, &r), RMA_OK);
		ck_assert_int_eq(rma_region_free(cb, r), RMA_OK);
	}
}
END_TEST

START_TEST(test_sigterm_exits_zero)
{
	int status;

	rma_disconnect(cb);
	cb = NULL;
	status = harness_daemon_stop(&db, SIGTERM);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("e2e");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_put_get_sizes_and_offsets);
	tcase_add_test(tc, test_many_in_flight);
	tcase_add_test(tc, test_poll);
	tcase_add_test(tc, test_requests_and_flush);
	tcase_add_test(tc, test_out_of_bounds);
	tcase_add_test(tc, test_descriptor_refusals);
	tcase_add_test(tc, test_freed_region);
	tcase_add_test(tc, test_connect_timeout);
	tcase_add_test(tc, test_unreachable_and_not_rmad);
	tcase_add_test(tc, test_local_descriptor);
	tcase_add_test(tc, test_local_put_overlap);
	tcase_add_test(tc, test_daemon_gone);
	tcase_add_test(tc, test_peer_killed);
	tcase_add_test(tc, test_sigterm_exits_zero);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
