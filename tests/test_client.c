/* SPDX-License-Identifier: BSD-2-Clause */
/* librma against a fake daemon on a socketpair (a thread of this test):
 * hello, memfd passing, batching and completion by op_id, callbacks,
 * timeouts, a daemon that goes away with operations in flight, and a
 * daemon that breaks the protocol. No UCX, no rmad. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdpass.h"
#include "rma_internal.h"

enum fake_mode {
	FAKE_NORMAL,
	FAKE_HOLD,	  /* keep completions until fake_release() */
	FAKE_SILENT,	  /* answer no region allocation */
	FAKE_MANY_FDS,	  /* a region reply with 20 fds */
	FAKE_OVERSIZE,	  /* a frame header over the limit */
	FAKE_GARBAGE,	  /* a frame that does not decode */
	FAKE_NO_FD,	  /* a region reply without its fd */
	FAKE_BAD_VERSION, /* refuse hello */
};

static struct {
	int fd;
	pthread_t thread;
	enum fake_mode mode;
	pthread_mutex_t lock;
	pthread_cond_t held_more; /* signalled when nheld grows */
	uint64_t held[20000];
	int nheld;
	int submits;
	int max_batch;
	int fail_status; /* wire status of completions */
	int requests;	 /* every request frame read */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER,
	  .held_more = PTHREAD_COND_INITIALIZER};

static void
fake_send_raw(const void *buf, size_t n, const int *fds, int nfds)
{
	pthread_mutex_lock(&fake.lock);
	/* the client may be gone already: a failed send is its business */
	(void)!fdpass_send(fake.fd, buf, n, fds, (size_t)nfds, 0);
	pthread_mutex_unlock(&fake.lock);
}

static void
fake_send(Rma__V1__DaemonMessage *m, const int *fds, int nfds)
{
	size_t n = frame_packed_size(&m->base);
	uint8_t *buf = malloc(n);

	ck_assert_ptr_nonnull(buf);
	frame_pack(&m->base, buf);
	fake_send_raw(buf, n, fds, nfds);
	free(buf);
}

static void
fake_reply(Rma__V1__Reply *r, const int *fds, int nfds)
{
	Rma__V1__DaemonMessage m = RMA__V1__DAEMON_MESSAGE__INIT;

	m.kind_case = RMA__V1__DAEMON_MESSAGE__KIND_REPLY;
	m.reply = r;
	fake_send(&m, fds, nfds);
}

static void
fake_complete(const uint64_t *ids, int n, int status, const char *detail)
{
	Rma__V1__DaemonMessage m = RMA__V1__DAEMON_MESSAGE__INIT;
	Rma__V1__Event ev = RMA__V1__EVENT__INIT;
	Rma__V1__Completions cs = RMA__V1__COMPLETIONS__INIT;
	Rma__V1__Completion *c = calloc(n, sizeof(*c));
	Rma__V1__Completion **pc = calloc(n, sizeof(*pc));
	uint8_t *packed = calloc(n, COMPREC_SIZE);

	/* as the daemon does: records, unless there is a detail text */
	for (int i = 0; i < n; i++) {
		struct comprec rec = {ids[i], 8, status};
		rma__v1__completion__init(&c[i]);
		c[i].op_id = ids[i];
		c[i].status = status;
		c[i].bytes = 8;
		c[i].detail = (char *)detail;
		pc[i] = &c[i];
		comprec_encode(packed + i * COMPREC_SIZE, &rec);
	}
	if (detail[0] != '\0') {
		cs.n_completions = n;
		cs.completions = pc;
	} else {
		cs.packed.data = packed;
		cs.packed.len = (size_t)n * COMPREC_SIZE;
	}
	ev.body_case = RMA__V1__EVENT__BODY_COMPLETIONS;
	ev.completions = &cs;
	m.kind_case = RMA__V1__DAEMON_MESSAGE__KIND_EVENT;
	m.event = &ev;
	fake_send(&m, NULL, 0);
	free(c);
	free(pc);
	free(packed);
}

static void
fake_region(Rma__V1__Request *q, Rma__V1__Reply *rp)
{
	Rma__V1__RegionAllocReply a = RMA__V1__REGION_ALLOC_REPLY__INIT;
	uint8_t bad[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	uint8_t garbage[8] = {0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff};
	int fds[20] = {0}, nfds = 1;

	switch (fake.mode) {
	case FAKE_SILENT:
		return;
	case FAKE_OVERSIZE:
		fake_send_raw(bad, sizeof(bad), NULL, 0);
		return;
	case FAKE_GARBAGE:
		fake_send_raw(garbage, sizeof(garbage), NULL, 0);
		return;
	case FAKE_MANY_FDS:
		nfds = 20;
		break;
	case FAKE_NO_FD:
		nfds = 0;
		break;
	default:
		break;
	}
	for (int i = 0; i < nfds; i++) {
		fds[i] = memfd_create("fake", MFD_CLOEXEC);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(ftruncate(fds[i], q->region_alloc->length), 0);
	}
	a.region_id = 42;
	a.generation = 1;
	a.length = q->region_alloc->length;
	a.descriptor = "rma1:fake";
	rp->body_case = RMA__V1__REPLY__BODY_REGION_ALLOC;
	rp->region_alloc = &a;
	fake_reply(rp, fds, nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void
fake_submit(Rma__V1__Submit *s)
{
	uint64_t ids[REQUEST_BATCH_MAX];
	int hold;

	/* librma sends records only (oprec.h) */
	size_t n = s->packed.len / OPREC_SIZE;
	Rma__V1__Op op;

	ck_assert_uint_eq(s->n_ops, 0);
	ck_assert_uint_eq(s->packed.len % OPREC_SIZE, 0);
	ck_assert_uint_le(n, REQUEST_BATCH_MAX);
	pthread_mutex_lock(&fake.lock);
	fake.submits++;
	if ((int)n > fake.max_batch)
		fake.max_batch = (int)n;
	hold = fake.mode == FAKE_HOLD;
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(
		    oprec_decode(s->packed.data + i * OPREC_SIZE, &op), 0);
		if (hold)
			fake.held[fake.nheld++] = op.op_id;
		ids[i] = op.op_id;
	}
	pthread_cond_broadcast(&fake.held_more);
	pthread_mutex_unlock(&fake.lock);
	if (!hold)
		fake_complete(ids, (int)n, fake.fail_status,
			      fake.fail_status ? "fake detail" : "");
}

static void
fake_request(Rma__V1__Request *q)
{
	Rma__V1__Reply rp = RMA__V1__REPLY__INIT;
	Rma__V1__HelloReply h = RMA__V1__HELLO_REPLY__INIT;
	Rma__V1__PeerConnectReply pc = RMA__V1__PEER_CONNECT_REPLY__INIT;
	Rma__V1__RemoteImportReply ri = RMA__V1__REMOTE_IMPORT_REPLY__INIT;

	rp.id = q->id;
	pthread_mutex_lock(&fake.lock);
	fake.requests++;
	pthread_mutex_unlock(&fake.lock);
	switch (q->body_case) {
	case RMA__V1__REQUEST__BODY_HELLO:
		ck_assert_uint_eq(q->hello->protocol_version,
				  RMA_PROTOCOL_VERSION);
		if (fake.mode == FAKE_BAD_VERSION) {
			rp.status = RMA__V1__STATUS__ERR_VERSION;
			rp.detail = "protocol 1 not supported";
		} else {
			h.daemon_id = "fake";
			h.max_frame = FRAME_MAX_DEFAULT;
			rp.body_case = RMA__V1__REPLY__BODY_HELLO;
			rp.hello = &h;
		}
		fake_reply(&rp, NULL, 0);
		break;
	case RMA__V1__REQUEST__BODY_REGION_ALLOC:
		fake_region(q, &rp);
		break;
	case RMA__V1__REQUEST__BODY_PEER_CONNECT:
		if (strcmp(q->peer_connect->address, "127.0.0.2:1") == 0) {
			rp.status = RMA__V1__STATUS__ERR_UNREACHABLE;
			rp.detail = "nobody there";
		} else {
			pc.peer_id = 1;
			pc.daemon_id = "other";
			rp.body_case = RMA__V1__REPLY__BODY_PEER_CONNECT;
			rp.peer_connect = &pc;
		}
		fake_reply(&rp, NULL, 0);
		break;
	case RMA__V1__REQUEST__BODY_REMOTE_IMPORT:
		ri.remote_id = 7;
		ri.length = 4096;
		rp.body_case = RMA__V1__REPLY__BODY_REMOTE_IMPORT;
		rp.remote_import = &ri;
		fake_reply(&rp, NULL, 0);
		break;
	case RMA__V1__REQUEST__BODY_SUBMIT:
		ck_assert_uint_eq(q->id, 0);
		fake_submit(q->submit);
		break;
	default:
		fake_reply(&rp, NULL, 0);
		break;
	}
}

static void *
fake_main(void *arg)
{
	struct frame_reader r;
	const uint8_t *payload;
	Rma__V1__Request *q;
	uint8_t *p;
	size_t avail, len;
	ssize_t n;

	(void)arg;
	frame_reader_init(&r, 0);
	for (;;) {
		ck_assert_int_eq(frame_reader_space(&r, &p, &avail), 0);
		n = read(fake.fd, p, avail);
		if (n <= 0)
			break;
		frame_reader_commit(&r, (size_t)n);
		while (frame_reader_next(&r, &payload, &len) == FRAME_READY) {
			q = rma__v1__request__unpack(NULL, len, payload);
			ck_assert_ptr_nonnull(q);
			fake_request(q);
			rma__v1__request__free_unpacked(q, NULL);
		}
	}
	frame_reader_cleanup(&r);
	return NULL;
}

static rma_status_t
fake_start(enum fake_mode mode, rma_client_t **c_p)
{
	int sv[2];

	fake.mode = mode;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	fake.fd = sv[1];
	ck_assert_int_eq(pthread_create(&fake.thread, NULL, fake_main, NULL),
			 0);
	return rma_client_attach(sv[0], "test", c_p);
}

static void
fake_kill(void)
{
	shutdown(fake.fd, SHUT_RDWR);
}

static void
fake_stop(void)
{
	fake_kill();
	pthread_join(fake.thread, NULL);
	close(fake.fd);
}

/* the usual set-up: a client, a region, a peer and a remote */
static rma_client_t *c;
static rma_region_t *reg;
static rma_peer_t *peer;
static rma_remote_t *rem;

static void
setup_client(enum fake_mode mode)
{
	ck_assert_int_eq(fake_start(mode, &c), RMA_OK);
	ck_assert_str_eq(rma_daemon_id(c), "fake");
	ck_assert_int_eq(rma_region_alloc(c, 4096, &reg), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(c, "127.0.0.1:1", &peer), RMA_OK);
	ck_assert_int_eq(rma_remote_import(c, peer, "rma1:fake", &rem), RMA_OK);
}

static int ncb;

static void
count_cb(rma_request_t *req, rma_status_t st, void *ud)
{
	(void)req;
	(void)st;
	ncb++;
	(*(int *)ud)++;
}

START_TEST(test_region_and_handles)
{
	rma_peer_t *again;
	uint8_t *p;

	setup_client(FAKE_NORMAL);
	p = rma_region_ptr(reg);
	memset(p, 0xab, 4096);
	ck_assert_uint_eq(p[4095], 0xab);
	ck_assert_uint_eq(rma_region_length(reg), 4096);
	ck_assert_str_eq(rma_region_descriptor(reg), "rma1:fake");
	ck_assert_uint_eq(rma_remote_length(rem), 4096);
	ck_assert_int_eq(rma_peer_connect(c, "127.0.0.1:1", &again), RMA_OK);
	ck_assert_ptr_eq(again, peer);
	ck_assert_int_eq(rma_peer_connect(c, "127.0.0.2:1", &again),
			 RMA_ERR_UNREACHABLE);
	ck_assert_str_eq(rma_last_error(c), "nobody there");
	rma_remote_release(c, rem);
	ck_assert_int_eq(rma_region_free(c, reg), RMA_OK);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

START_TEST(test_sync_ops_and_errors)
{
	setup_client(FAKE_NORMAL);
	ck_assert_int_eq(rma_put_sync(c, reg, 0, rem, 0, 8,
				      RMA_FLAG_REMOTE_COMPLETION, 1000),
			 RMA_OK);
	ck_assert_int_eq(fake.submits, 1);
	fake.fail_status = RMA__V1__STATUS__ERR_OUT_OF_BOUNDS;
	ck_assert_int_eq(rma_get_sync(c, reg, 0, rem, 16, 8, 1000),
			 RMA_ERR_OUT_OF_BOUNDS);
	ck_assert_str_eq(rma_last_error(c), "fake detail");
	fake.fail_status = 0;
	ck_assert_int_eq(rma_flush_sync(c, peer, 1000), RMA_OK);
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0x80, NULL, NULL, NULL),
			 RMA_ERR_INVALID);
	ck_assert_str_eq(rma_strerror(RMA_ERR_OUT_OF_BOUNDS), "out of bounds");
	ck_assert_str_eq(rma_strerror(RMA_ERR_DAEMON_GONE), "daemon gone");
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* Under load submissions coalesce (at most 256 a frame), completions in
 * any order find their requests, a repeated one is ignored, and every
 * callback runs once. */
START_TEST(test_batching)
{
	rma_request_t *first;
	int count = 0, n = 10001;

	setup_client(FAKE_HOLD);
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, &first), RMA_OK);
	for (int i = 1; i < n; i++)
		ck_assert_int_eq(
		    rma_get(c, reg, 0, rem, 0, 8, count_cb, &count, NULL),
		    RMA_OK);
	ck_assert_uint_eq(rma_in_flight(c), n);
	ck_assert_int_eq(rma_request_wait(c, first, 50), RMA_ERR_TIMEOUT);
	ck_assert(!rma_request_is_completed(first));
	/* the fake has all of them once it has read them */
	{
		struct timespec deadline;
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 5;
		pthread_mutex_lock(&fake.lock);
		while (fake.nheld < n &&
		       pthread_cond_timedwait(&fake.held_more, &fake.lock,
					      &deadline) == 0)
			;
		pthread_mutex_unlock(&fake.lock);
	}
	ck_assert_int_eq(fake.nheld, n);
	ck_assert_int_eq(fake.max_batch, REQUEST_BATCH_MAX);
	ck_assert_int_lt(fake.submits, 60);
	/* newest first; the client reads between chunks, as the socket
	 * buffer does not hold them all */
	for (int hi = n; hi > 0; hi -= 1000) {
		int lo = hi > 1000 ? hi - 1000 : 0;
		fake_complete(fake.held + lo, hi - lo, 0, "");
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	fake_complete(fake.held, 1, 0, "");
	ck_assert_int_eq(rma_request_wait(c, first, 5000), RMA_OK);
	ck_assert_uint_eq(rma_request_bytes(first), 8);
	while (count < n)
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	ck_assert_int_eq(count, n);
	ck_assert_uint_eq(rma_in_flight(c), 0);
	rma_request_release(first);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

static int resubmitted;

static void
resubmit_cb(rma_request_t *req, rma_status_t st, void *ud)
{
	intptr_t left = (intptr_t)ud;

	(void)req;
	ck_assert_int_eq(st, RMA_OK);
	resubmitted++;
	if (left > 0)
		ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, resubmit_cb,
					 (void *)(left - 1), NULL),
				 RMA_OK);
}

/* An event-loop user: submissions from callbacks go out without anyone
 * calling anything but poll and rma_progress. */
START_TEST(test_callbacks_resubmit)
{
	struct pollfd pfd;

	setup_client(FAKE_NORMAL);
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, resubmit_cb, (void *)50, NULL),
	    RMA_OK);
	while (resubmitted < 51) {
		pfd.fd = rma_fd(c);
		pfd.events = POLLIN;
		ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	rma_disconnect(c);
	fake_stop();
}
END_TEST

START_TEST(test_call_timeout)
{
	Rma__V1__Request q = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionAlloc body = RMA__V1__REGION_ALLOC__INIT;
	Rma__V1__Reply *reply;
	int fd;

	setup_client(FAKE_NORMAL);
	fake.mode = FAKE_SILENT;
	body.length = 100;
	q.body_case = RMA__V1__REQUEST__BODY_REGION_ALLOC;
	q.region_alloc = &body;
	ck_assert_int_eq(client_call(c, &q, 100, &reply, &fd), RMA_ERR_TIMEOUT);
	fake.mode = FAKE_NORMAL;
	ck_assert_int_eq(client_call(c, &q, 1000, &reply, &fd), RMA_OK);
	ck_assert_int_ge(fd, 0);
	close(fd);
	rma__v1__reply__free_unpacked(reply, NULL);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* The daemon goes away with operations in flight: all complete with
 * RMA_ERR_DAEMON_GONE, waiters return, later calls fail at once. */
START_TEST(test_daemon_gone)
{
	rma_request_t *held;
	rma_region_t *r2;
	int count = 0;

	setup_client(FAKE_HOLD);
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, &held), RMA_OK);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(
		    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, NULL),
		    RMA_OK);
	fake_kill();
	ck_assert_int_eq(rma_request_wait(c, held, 5000), RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(count, 101);
	/* known gone: a put completes at once (see test_immediate_gone) */
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, NULL), RMA_OK);
	ck_assert_int_eq(count, 102);
	ck_assert_int_eq(rma_progress(c), RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(rma_region_alloc(c, 10, &r2), RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(rma_region_free(c, reg), RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(count, 102);
	rma_disconnect(c);
	/* a held request outlives its client */
	ck_assert_int_eq(rma_request_status(held), RMA_ERR_DAEMON_GONE);
	rma_request_release(held);
	fake_stop();
}
END_TEST

START_TEST(test_disconnect_in_flight)
{
	rma_request_t *held;
	int count = 0;

	setup_client(FAKE_HOLD);
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, &held), RMA_OK);
	for (int i = 0; i < 999; i++)
		ck_assert_int_eq(
		    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, NULL),
		    RMA_OK);
	rma_disconnect(c);
	ck_assert_int_eq(count, 1000);
	ck_assert_int_eq(rma_request_status(held), RMA_ERR_DAEMON_GONE);
	rma_request_release(held);
	fake_stop();
}
END_TEST

static const struct {
	enum fake_mode mode;
	const char *detail;
} protocol_cases[] = {
    {FAKE_MANY_FDS, "truncated"},
    {FAKE_OVERSIZE, "over"},
    {FAKE_GARBAGE, "undecodable"},
    {FAKE_NO_FD, "without its file descriptor"},
};

START_TEST(test_protocol_errors)
{
	rma_region_t *r;

	ck_assert_int_eq(fake_start(protocol_cases[_i].mode, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_ERR_PROTOCOL);
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(c), protocol_cases[_i].detail));
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_ERR_DAEMON_GONE);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

START_TEST(test_version_refused)
{
	ck_assert_int_eq(fake_start(FAKE_BAD_VERSION, &c), RMA_ERR_VERSION);
	ck_assert_str_eq(rma_last_error(NULL), "protocol 1 not supported");
	fake_stop();
}
END_TEST

START_TEST(test_connect_errors)
{
	char want[64];

	ck_assert_int_eq(rma_connect("/nonexistent/rmad.sock", &c),
			 RMA_ERR_DAEMON_GONE);
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(NULL),
		   "socket /nonexistent/rmad.sock does not exist"));
	setenv("RMAD_SOCKET", "/x/y.sock", 1);
	ck_assert_str_eq(rma_default_socket(), "/x/y.sock");
	unsetenv("RMAD_SOCKET");
	setenv("XDG_RUNTIME_DIR", "/run/user/5", 1);
	ck_assert_str_eq(rma_default_socket(), "/run/user/5/rmad.sock");
	/* Without it (cron, ssh without a session): the per-user directory,
	 * which the system service's socket wins over while it is absent. */
	unsetenv("XDG_RUNTIME_DIR");
	setenv("TMPDIR", "/x", 1);
	snprintf(want, sizeof(want), "/x/rmad-%u/rmad.sock",
		 (unsigned)getuid());
	if (access("/run/rmad/rmad.sock", F_OK) != 0)
		ck_assert_str_eq(rma_default_socket(), want);
	ck_assert_int_eq(rma_connect(want, &c), RMA_ERR_DAEMON_GONE);
}
END_TEST

/* Wait (5 s at most) until the fake has read n held operations; returns
 * how many Submit frames they came in. */
static int
fake_wait_held(int n)
{
	struct timespec deadline;
	int submits;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	pthread_mutex_lock(&fake.lock);
	while (fake.nheld < n &&
	       pthread_cond_timedwait(&fake.held_more, &fake.lock, &deadline) ==
		   0)
		;
	ck_assert_int_eq(fake.nheld, n);
	submits = fake.submits;
	pthread_mutex_unlock(&fake.lock);
	return submits;
}

static int
fake_submits(void)
{
	int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.submits;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

/* rma.h, "Batching": sent at once while nothing is in flight; then batched
 * until 256, or until rma_progress() or a call that asks the daemon
 * something, which sends the batch before its own request. The socket
 * keeps order, so once the fake holds n operations every frame before
 * them has been counted. */
START_TEST(test_batching_rule)
{
	rma_region_t *r2;

	setup_client(FAKE_HOLD);
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, NULL, NULL, NULL),
			 RMA_OK);
	ck_assert_int_eq(fake_wait_held(1), 1);
	for (int i = 0; i < 255; i++)
		ck_assert_int_eq(
		    rma_put(c, reg, 0, rem, 0, 8, 0, NULL, NULL, NULL), RMA_OK);
	ck_assert_uint_eq(c->pending_n, 255);
	/* the 256th fills the batch, which goes out as one frame */
	ck_assert_int_eq(rma_get(c, reg, 0, rem, 0, 8, NULL, NULL, NULL),
			 RMA_OK);
	ck_assert_uint_eq(c->pending_n, 0);
	ck_assert_int_eq(fake_wait_held(257), 2);
	ck_assert_int_eq(fake.max_batch, 256);
	/* one more waits for rma_progress() */
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, NULL, NULL, NULL),
			 RMA_OK);
	ck_assert_uint_eq(c->pending_n, 1);
	ck_assert_int_eq(rma_progress(c), RMA_OK);
	ck_assert_int_eq(fake_wait_held(258), 3);
	/* or for a call to the daemon, which sends it first */
	ck_assert_int_eq(rma_flush(c, NULL, NULL, NULL, NULL), RMA_OK);
	ck_assert_uint_eq(c->pending_n, 1);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r2), RMA_OK);
	ck_assert_int_eq(fake_submits(), 4);
	ck_assert_int_eq(fake_wait_held(259), 4);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* Immediate completion (rma.h, rma_put): what the library decides
 * without the daemon completes before the call returns, the callback in
 * the caller's thread, the request handed back already completed, and
 * the daemon hears nothing. */
struct immediate {
	pthread_t caller;
	int calls;
	int in_caller; /* callbacks run in the caller's thread */
	rma_status_t st;
};

static void
immediate_cb(rma_request_t *req, rma_status_t st, void *ud)
{
	struct immediate *im = ud;

	(void)req;
	im->calls++;
	im->in_caller += pthread_equal(pthread_self(), im->caller) != 0;
	im->st = st;
}

/* One call (its return value and request, taken before this is called):
 * returned RMA_OK, its callback ran once, here, with want. */
static void
immediate_check(struct immediate *im, rma_status_t ret, rma_request_t *req,
		rma_status_t want)
{
	ck_assert_int_eq(ret, RMA_OK);
	ck_assert_int_eq(im->calls, 1);
	ck_assert_int_eq(im->in_caller, 1);
	ck_assert_int_eq(im->st, want);
	ck_assert(rma_request_is_completed(req));
	ck_assert_int_eq(rma_request_status(req), want);
	rma_request_release(req);
	memset(im, 0, sizeof(*im));
	im->caller = pthread_self();
}

START_TEST(test_immediate_freed)
{
	struct immediate im = {.caller = pthread_self()};
	rma_iov_t iov = {.offset = 0, .remote_offset = 0, .length = 8};
	rma_request_t *req;
	rma_status_t st;
	int submits;

	setup_client(FAKE_NORMAL);
	submits = fake_submits();
	ck_assert_int_eq(rma_region_free(c, reg), RMA_OK);
	st = rma_put(c, reg, 0, rem, 0, 8, 0, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_NO_REGION);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "freed"));
	st = rma_get(c, reg, 0, rem, 0, 8, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_NO_REGION);
	st =
	    rma_put_notify(c, reg, 0, rem, 0, 8, 7, 0, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_NO_REGION);
	st = rma_putv(c, reg, rem, &iov, 1, 0, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_NO_REGION);
	/* no request asked for: the callback still runs, here */
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, immediate_cb, &im, NULL), RMA_OK);
	ck_assert_int_eq(im.calls, 1);
	ck_assert_int_eq(im.in_caller, 1);
	ck_assert_int_eq(rma_in_flight(c), 0);
	ck_assert_int_eq(rma_progress(c), RMA_OK);
	ck_assert_int_eq(fake_submits(), submits);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

START_TEST(test_immediate_gone)
{
	struct immediate im = {.caller = pthread_self()};
	rma_iov_t iov = {.offset = 0, .remote_offset = 0, .length = 8};
	rma_request_t *req;
	rma_status_t st;

	setup_client(FAKE_NORMAL);
	fake_kill();
	/* the connection is known dead once progress saw it */
	ck_assert_int_eq(rma_progress(c), RMA_ERR_DAEMON_GONE);
	st = rma_put(c, reg, 0, rem, 0, 8, 0, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_DAEMON_GONE);
	st = rma_get(c, reg, 0, rem, 0, 8, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_DAEMON_GONE);
	st = rma_atomic(c, rem, 0, RMA_ATOMIC_FETCH_ADD, 8, 1, 0, immediate_cb,
			&im, &req);
	immediate_check(&im, st, req, RMA_ERR_DAEMON_GONE);
	st = rma_getv(c, reg, rem, &iov, 1, immediate_cb, &im, &req);
	immediate_check(&im, st, req, RMA_ERR_DAEMON_GONE);
	/* arguments wrong whatever: still an error, no request, no call */
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 0, 0, immediate_cb, &im, NULL),
	    RMA_ERR_INVALID);
	ck_assert_int_eq(im.calls, 0);
	ck_assert_int_eq(rma_in_flight(c), 0);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* A freed region's handle stays a tombstone until rma_disconnect: what
 * would read freed memory reads as a freed region (run under valgrind or
 * ASan to see the difference). */
START_TEST(test_freed_region_handle)
{
	setup_client(FAKE_NORMAL);
	ck_assert_int_eq(rma_region_free(c, reg), RMA_OK);
	ck_assert_ptr_null(rma_region_ptr(reg));
	ck_assert_uint_eq(rma_region_length(reg), 0);
	ck_assert_str_eq(rma_region_descriptor(reg), "");
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, NULL, NULL, NULL),
			 RMA_OK); /* completed at once: test_immediate_freed */
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "freed"));
	ck_assert_int_eq(rma_get_sync(c, reg, 0, rem, 0, 8, 1000),
			 RMA_ERR_NO_REGION);
	ck_assert_int_eq(rma_region_free(c, reg), RMA_ERR_NO_REGION);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "already freed"));
	ck_assert_int_eq(fake_submits(), 0);
	/* freed handles of a gone daemon read the same */
	ck_assert_int_eq(rma_region_alloc(c, 4096, &reg), RMA_OK);
	fake_kill();
	ck_assert_int_eq(rma_region_free(c, reg), RMA_ERR_DAEMON_GONE);
	ck_assert_ptr_null(rma_region_ptr(reg));
	ck_assert_int_eq(rma_region_free(c, reg), RMA_ERR_NO_REGION);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* An empty transfer is refused by the call, before anything is sent. */
START_TEST(test_zero_length)
{
	setup_client(FAKE_NORMAL);
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 0, 0, NULL, NULL, NULL),
			 RMA_ERR_INVALID);
	ck_assert_str_eq(rma_last_error(c),
			 "put of 0 bytes: length must be at least 1");
	ck_assert_int_eq(rma_get_sync(c, reg, 0, rem, 0, 0, 1000),
			 RMA_ERR_INVALID);
	ck_assert_str_eq(rma_last_error(c),
			 "get of 0 bytes: length must be at least 1");
	ck_assert_uint_eq(rma_in_flight(c), 0);
	ck_assert_int_eq(fake_submits(), 0);
	ck_assert_int_eq(rma_put_sync(c, reg, 0, rem, 0, 1, 0, 1000), RMA_OK);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* Text too long to be a descriptor (2 MiB: over the frame limit too) is a
 * bad descriptor, not a bad request; RMA_DESCRIPTOR_MAX still goes to the
 * daemon, which here says yes to anything. */
START_TEST(test_descriptor_too_long)
{
	size_t big = 2u << 20;
	char *text = malloc(big + 1);
	rma_remote_t *r2;

	ck_assert_ptr_nonnull(text);
	setup_client(FAKE_NORMAL);
	memset(text, 'a', big);
	text[big] = '\0';
	ck_assert_int_eq(rma_remote_import(c, peer, text, &r2),
			 RMA_ERR_BAD_DESCRIPTOR);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "not a descriptor"));
	text[RMA_DESCRIPTOR_MAX + 1] = '\0';
	ck_assert_int_eq(rma_remote_import(c, peer, text, &r2),
			 RMA_ERR_BAD_DESCRIPTOR);
	text[RMA_DESCRIPTOR_MAX] = '\0';
	ck_assert_int_eq(rma_remote_import(c, peer, text, &r2), RMA_OK);
	rma_remote_release(c, r2);
	free(text);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

/* A listening socket whose owner accepts connections (in a thread) and
 * never answers: not an rmad, or an rmad that is stopped. */
static struct {
	int lfd;
	pthread_t thread;
	int fds[64];
	int nfds;
	char dir[64];
	char path[96];
} mute;

static void *
mute_main(void *arg)
{
	int fd;

	(void)arg;
	while ((fd = accept(mute.lfd, NULL, NULL)) >= 0) {
		if (mute.nfds < 64)
			mute.fds[mute.nfds++] = fd;
		else
			close(fd);
	}
	return NULL;
}

static void
mute_start(int backlog, int accepting)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	snprintf(mute.dir, sizeof(mute.dir), "/tmp/i14lib-mute-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(mute.dir));
	snprintf(mute.path, sizeof(mute.path), "%s/rmad.sock", mute.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", mute.path);
	mute.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(mute.lfd, 0);
	ck_assert_int_eq(bind(mute.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(mute.lfd, backlog), 0);
	if (accepting)
		ck_assert_int_eq(
		    pthread_create(&mute.thread, NULL, mute_main, NULL), 0);
}

static void
mute_stop(int accepting)
{
	/* wakes accept() with EINVAL */
	shutdown(mute.lfd, SHUT_RDWR);
	if (accepting)
		pthread_join(mute.thread, NULL);
	close(mute.lfd);
	for (int i = 0; i < mute.nfds; i++)
		close(mute.fds[i]);
	unlink(mute.path);
	rmdir(mute.dir);
}

static int64_t
elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (int64_t)(t1.tv_sec - t0->tv_sec) * 1000 +
	       (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

START_TEST(test_connect_timeout_mute)
{
	struct timespec t0;
	int64_t ms;

	mute_start(16, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(rma_connect_timeout(mute.path, 300, &c),
			 RMA_ERR_TIMEOUT);
	ms = elapsed_ms(&t0);
	ck_assert_int_ge(ms, 290);
	ck_assert_int_lt(ms, 3000);
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(NULL), "did not answer hello within 300"));
	/* rma_connect: the documented default, not 30 s */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(rma_connect(mute.path, &c), RMA_ERR_TIMEOUT);
	ms = elapsed_ms(&t0);
	ck_assert_int_ge(ms, RMA_CONNECT_TIMEOUT_DEFAULT_MS - 10);
	ck_assert_int_lt(ms, RMA_CONNECT_TIMEOUT_DEFAULT_MS + 3000);
	mute_stop(1);
}
END_TEST

/* A listener that stopped accepting, its backlog full: connect(2) itself
 * would block, for as long as the daemon does not accept. */
START_TEST(test_connect_timeout_backlog)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timespec t0;
	int64_t ms;
	int fd;

	mute_start(0, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", mute.path);
	for (;;) {
		ck_assert_int_lt(mute.nfds, 64);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(fd, 0);
		mute.fds[mute.nfds++] = fd;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			break;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(rma_connect_timeout(mute.path, 300, &c),
			 RMA_ERR_TIMEOUT);
	ms = elapsed_ms(&t0);
	ck_assert_int_ge(ms, 290);
	ck_assert_int_lt(ms, 3000);
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(NULL), "accepted no connection"));
	mute_stop(0);
}
END_TEST

/* ---- take-overs: the fake daemon on a socket path ----
 * One connection after the other, as a daemon and its successors serve
 * one path (rmad --take-over hands the listening socket on): librma
 * connects again and re-attaches. Each connection follows its line of
 * the script: at the first request of kind cut, it stops answering and
 * closes (after the client sent more, unread: a reset, with unread);
 * a RegionFree gets free_status, then the cut if free_cuts. */
#define TAKER_CONNS 8

struct taker_line {
	Rma__V1__Request__BodyCase cut;
	int unread;	 /* close only once more is queued, unread */
	int free_status; /* wire status of a RegionFree answer */
	int free_cuts;	 /* ... and then the close */
};

static struct {
	int lfd;
	pthread_t thread;
	char dir[64];
	char path[96];
	struct taker_line line[TAKER_CONNS];
	/* what it saw, per connection (under fake.lock) */
	int conns;
	int reattaches[TAKER_CONNS];
	int frees[TAKER_CONNS];
	uint64_t free_generation[TAKER_CONNS];
} taker;

/* Until the client sent more than was read: bounded, as every wait. */
static void
taker_wait_unread(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
}

/* One request on connection i: 1 when the connection is to close. */
static int
taker_request(int i, Rma__V1__Request *q)
{
	const struct taker_line *l = &taker.line[i];
	Rma__V1__Reply rp = RMA__V1__REPLY__INIT;

	pthread_mutex_lock(&fake.lock);
	if (q->body_case == RMA__V1__REQUEST__BODY_REGION_REATTACH)
		taker.reattaches[i]++;
	if (q->body_case == RMA__V1__REQUEST__BODY_REGION_FREE) {
		taker.frees[i]++;
		taker.free_generation[i] = q->region_free->generation;
	}
	pthread_mutex_unlock(&fake.lock);
	if (q->body_case == RMA__V1__REQUEST__BODY_REGION_FREE &&
	    l->free_status != 0) {
		rp.id = q->id;
		rp.status = l->free_status;
		rp.detail = "fake: free it in the next process";
		fake_reply(&rp, NULL, 0);
		return l->free_cuts;
	}
	if (l->cut != 0 && q->body_case == l->cut) {
		if (l->unread)
			taker_wait_unread(fake.fd);
		return 1;
	}
	fake_request(q);
	return 0;
}

/* All of n bytes, or 0 at the end of the stream. */
static int
taker_read_full(int fd, uint8_t *p, size_t n)
{
	ssize_t k;

	while (n > 0) {
		k = read(fd, p, n);
		if (k <= 0)
			return 0;
		p += k;
		n -= (size_t)k;
	}
	return 1;
}

/* One frame at a time, never more: what the client sends after the
 * request that cuts stays unread in the socket (a reset at the close). */
static void
taker_serve(int i)
{
	uint8_t head[4], *payload;
	Rma__V1__Request *q;
	uint32_t len;
	int cut = 0;

	while (!cut && taker_read_full(fake.fd, head, sizeof(head))) {
		len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 |
		      (uint32_t)head[2] << 8 | head[3];
		payload = malloc(len ? len : 1);
		ck_assert_ptr_nonnull(payload);
		if (!taker_read_full(fake.fd, payload, len)) {
			free(payload);
			break;
		}
		q = rma__v1__request__unpack(NULL, len, payload);
		ck_assert_ptr_nonnull(q);
		cut = taker_request(i, q);
		rma__v1__request__free_unpacked(q, NULL);
		free(payload);
	}
}

static void *
taker_main(void *arg)
{
	int fd;

	(void)arg;
	while ((fd = accept4(taker.lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		int i;

		pthread_mutex_lock(&fake.lock);
		i = taker.conns < TAKER_CONNS - 1 ? taker.conns
						  : TAKER_CONNS - 1;
		taker.conns++;
		fake.fd = fd;
		pthread_mutex_unlock(&fake.lock);
		taker_serve(i);
		/* what is left unread makes this a reset for the client */
		pthread_mutex_lock(&fake.lock);
		fake.fd = -1;
		pthread_mutex_unlock(&fake.lock);
		close(fd);
	}
	return NULL;
}

/* The fake on a path, and a client of it with a region (region id 42,
 * generation 1) and a remote. */
static void
taker_start(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	fake.mode = FAKE_NORMAL;
	fake.fail_status = 0;
	snprintf(taker.dir, sizeof(taker.dir), "/tmp/rma-reattach-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(taker.dir));
	snprintf(taker.path, sizeof(taker.path), "%s/rmad.sock", taker.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", taker.path);
	taker.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(taker.lfd, 0);
	ck_assert_int_eq(bind(taker.lfd, (struct sockaddr *)&sa, sizeof(sa)),
			 0);
	ck_assert_int_eq(listen(taker.lfd, 8), 0);
	ck_assert_int_eq(pthread_create(&taker.thread, NULL, taker_main, NULL),
			 0);
	unsetenv("RMA_NO_REATTACH");
	setenv("RMA_REATTACH_TIMEOUT_MS", "5000", 1);
	ck_assert_int_eq(rma_connect_timeout(taker.path, 5000, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &reg), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(c, "127.0.0.1:1", &peer), RMA_OK);
	ck_assert_int_eq(rma_remote_import(c, peer, "rma1:fake", &rem), RMA_OK);
}

static void
taker_stop(void)
{
	rma_disconnect(c);
	c = NULL;
	/* wakes accept() with EINVAL, and the connection's read */
	shutdown(taker.lfd, SHUT_RDWR);
	pthread_mutex_lock(&fake.lock);
	if (fake.fd >= 0)
		shutdown(fake.fd, SHUT_RDWR);
	pthread_mutex_unlock(&fake.lock);
	pthread_join(taker.thread, NULL);
	close(taker.lfd);
	unlink(taker.path);
	rmdir(taker.dir);
	unsetenv("RMA_REATTACH_TIMEOUT_MS");
	memset(&taker, 0, sizeof(taker));
}

static int
taker_conns(void)
{
	int n;

	pthread_mutex_lock(&fake.lock);
	n = taker.conns;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

static int ncalls;

static void
once_cb(rma_request_t *req, rma_status_t st, void *ud)
{
	(void)req;
	(void)st;
	(void)ud;
	ncalls++;
}

/* The daemon closes with the client's requests unread: the client reads
 * ECONNRESET, which is a close like any (a take-over, a kill that systemd
 * restarts): it re-attaches, not RMA_ERR_DAEMON_GONE. */
START_TEST(test_reset_is_a_close)
{
	rma_request_t *req;
	rma_peer_t *other;

	taker.line[0].cut = RMA__V1__REQUEST__BODY_SUBMIT;
	taker.line[0].unread = 1;
	taker_start();
	ncalls = 0;
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, once_cb, NULL, &req),
			 RMA_OK);
	/* queued behind the Submit the fake will not read */
	ck_assert_int_eq(rma_peer_connect(c, "127.0.0.1:2", &other),
			 RMA_ERR_RESTARTED);
	ck_assert_uint_eq(c->reattaches, 1);
	ck_assert_int_eq(rma_request_wait(c, req, 5000), RMA_ERR_RESTARTED);
	ck_assert_int_eq(ncalls, 1);
	rma_request_release(req);
	ck_assert_int_eq(taker_conns(), 2);
	ck_assert_int_eq(taker.reattaches[1], 1);
	ck_assert_int_eq(rma_put_sync(c, reg, 0, rem, 0, 8, 0, 5000), RMA_OK);
	taker_stop();
}
END_TEST

/* Taken over again while re-attaching (the second connection closes at
 * the RegionReattach): the re-attach starts over on a third, within its
 * deadline, and the operation cut completes once. */
START_TEST(test_reclose_while_reattaching)
{
	rma_request_t *req;
	struct timespec t0;

	taker.line[0].cut = RMA__V1__REQUEST__BODY_SUBMIT;
	taker.line[1].cut = RMA__V1__REQUEST__BODY_REGION_REATTACH;
	taker_start();
	ncalls = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, once_cb, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_request_wait(c, req, 5000), RMA_ERR_RESTARTED);
	ck_assert_int_lt(elapsed_ms(&t0), 5000);
	ck_assert_int_eq(ncalls, 1);
	rma_request_release(req);
	ck_assert_int_eq(taker_conns(), 3);
	ck_assert_int_eq(taker.reattaches[1], 1);
	ck_assert_int_eq(taker.reattaches[2], 1);
	ck_assert_uint_eq(c->reattaches, 1);
	ck_assert_int_eq(rma_put_sync(c, reg, 0, rem, 0, 8, 0, 5000), RMA_OK);
	ck_assert_int_eq(rma_region_free(c, reg), RMA_OK);
	taker_stop();
}
END_TEST

/* The take-over is noticed as an operation is submitted (the send fails:
 * the old process is gone): it completes once, RESTARTED, and the handle
 * the caller got stays valid until released (run under ASan too). */
START_TEST(test_submit_meets_take_over)
{
	rma_request_t *req;
	int done = 0;

	taker_start();
	/* the old process goes; the client has not read anything yet */
	pthread_mutex_lock(&fake.lock);
	shutdown(fake.fd, SHUT_RDWR);
	pthread_mutex_unlock(&fake.lock);
	/* until the fake closed it (it then waits in accept) */
	{
		struct timespec t0;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			pthread_mutex_lock(&fake.lock);
			done = fake.fd < 0;
			pthread_mutex_unlock(&fake.lock);
			if (done)
				break;
			ck_assert_int_lt(elapsed_ms(&t0), 5000);
			poll(NULL, 0, 1);
		}
	}
	ncalls = 0;
	ck_assert_int_eq(rma_put(c, reg, 0, rem, 0, 8, 0, once_cb, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_request_wait(c, req, 5000), RMA_ERR_RESTARTED);
	ck_assert_int_eq(rma_request_is_completed(req), 1);
	ck_assert_int_eq(rma_request_status(req), RMA_ERR_RESTARTED);
	ck_assert_int_eq(ncalls, 1);
	ck_assert_int_eq(rma_progress(c), RMA_OK);
	ck_assert_int_eq(ncalls, 1);
	rma_request_release(req);
	ck_assert_uint_eq(c->reattaches, 1);
	ck_assert_int_eq(rma_put_sync(c, reg, 0, rem, 0, 8, 0, 5000), RMA_OK);
	taker_stop();
}
END_TEST

/* A free cut by a take-over. 0: the old process closes without an
 * answer; 1: it answers RESTARTED (it handed the region on) and closes,
 * and the new one no longer has it. Either way librma frees it again in
 * the new process with its secret, and the free succeeds. */
START_TEST(test_free_cut_by_take_over)
{
	if (_i == 0) {
		taker.line[0].cut = RMA__V1__REQUEST__BODY_REGION_FREE;
	} else {
		taker.line[0].free_status = RMA__V1__STATUS__ERR_RESTARTED;
		taker.line[0].free_cuts = 1;
		taker.line[1].free_status = RMA__V1__STATUS__ERR_NO_REGION;
	}
	taker_start();
	ck_assert_int_eq(rma_region_free(c, reg), RMA_OK);
	ck_assert_ptr_null(rma_region_ptr(reg));
	ck_assert_int_eq(taker_conns(), 2);
	/* not claimed back: freed */
	ck_assert_int_eq(taker.reattaches[1], 0);
	ck_assert_int_eq(taker.frees[1], 1);
	ck_assert_uint_eq(taker.free_generation[1], 1);
	ck_assert_uint_eq(c->reattaches, 1);
	taker_stop();
}
END_TEST

static int
fake_requests(void)
{
	int n;

	pthread_mutex_lock(&fake.lock);
	n = fake.requests;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

/* In a child of fork(): each call on the inherited client fails with
 * RMA_ERR_INVALID and says whose the client is. 0, or the number of the
 * first check that failed (no check.h here: this is a child of the
 * test's process). */
static int
fork_child_calls(rma_request_t *held)
{
	rma_iov_t iov = {.offset = 0, .remote_offset = 0, .length = 8};
	rma_request_t *req = NULL;
	rma_region_t *r2 = NULL;
	rma_peer_t *p2 = NULL;
	rma_remote_t *rem2 = NULL;
	rma_notification_t n;
	Rma__V1__Request q = RMA__V1__REQUEST__INIT;
	Rma__V1__RegionAlloc body = RMA__V1__REGION_ALLOC__INIT;
	Rma__V1__Reply *reply = NULL;
	uint64_t old = 0;
	int count = 0, step = 0;
	rma_status_t st[24];

	body.length = 64;
	q.body_case = RMA__V1__REQUEST__BODY_REGION_ALLOC;
	q.region_alloc = &body;
	/* first what would read the completion waiting in the socket */
	st[0] = rma_progress(c);
	st[1] = rma_wait(c, 0);
	st[2] = rma_request_wait(c, held, 0);
	st[3] = rma_request_cancel(c, held);
	st[4] = rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, &req);
	st[5] =
	    rma_put_notify(c, reg, 0, rem, 0, 8, 1, 0, count_cb, &count, &req);
	st[6] = rma_get(c, reg, 0, rem, 0, 8, count_cb, &count, &req);
	st[7] = rma_flush(c, peer, count_cb, &count, &req);
	st[8] = rma_atomic(c, rem, 0, RMA_ATOMIC_ADD, 8, 1, 0, count_cb, &count,
			   &req);
	st[9] = rma_putv(c, reg, rem, &iov, 1, 0, count_cb, &count, &req);
	st[10] = rma_getv(c, reg, rem, &iov, 1, count_cb, &count, &req);
	st[11] = rma_put_sync(c, reg, 0, rem, 0, 8, 0, 1000);
	st[12] = rma_get_sync(c, reg, 0, rem, 0, 8, 1000);
	st[13] = rma_flush_sync(c, NULL, 1000);
	st[14] =
	    rma_atomic_sync(c, rem, 0, RMA_ATOMIC_ADD, 8, 1, 0, &old, 1000);
	st[15] = rma_region_alloc(c, 64, &r2);
	st[16] = rma_region_free(c, reg);
	st[17] = rma_peer_connect(c, "127.0.0.1:1", &p2);
	st[18] = rma_remote_import(c, peer, "rma1:fake", &rem2);
	st[19] = rma_notify_next(c, &n);
	st[20] = rma_client_call(c, &q, &reply);
	st[21] = rma_poll(c, 0);
	for (step = 0; step <= 21; step++)
		if (st[step] != RMA_ERR_INVALID)
			return 1 + step;
	if (strstr(rma_last_error(c), "belongs to the parent process") == NULL)
		return 30;
	/* nothing started, no callback ran, no output written */
	if (count != 0 || req != NULL || r2 != NULL || p2 != NULL ||
	    rem2 != NULL || reply != NULL || old != 0)
		return 31;
	/* the mapping is the parent's memory as well: still readable */
	if (((uint8_t *)rma_region_ptr(reg))[0] != 0x5a)
		return 32;
	rma_remote_release(c, rem);
	/* only the child's copy: nothing sent, no shutdown(2) */
	rma_disconnect(c);
	if (rma_request_status(held) != RMA_ERR_INVALID)
		return 33;
	return 0;
}

/* After fork() the child's calls on the parent's client fail, and touch
 * nothing of the connection: a completion waiting in the socket at the
 * fork is still the parent's, the fake daemon reads no request from the
 * child, and the parent goes on as before. */
START_TEST(test_fork_child_refused)
{
	rma_request_t *held;
	struct pollfd pfd;
	int sv[2], status, before, submits, count = 0;
	char verdict = -1;
	pid_t pid;

	setup_client(FAKE_HOLD);
	memset(rma_region_ptr(reg), 0x5a, 4096);
	ck_assert_int_eq(
	    rma_put(c, reg, 0, rem, 0, 8, 0, count_cb, &count, &held), RMA_OK);
	/* the daemon has it and answers; the answer waits in the socket */
	{
		struct timespec deadline;
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 5;
		pthread_mutex_lock(&fake.lock);
		while (fake.nheld < 1 &&
		       pthread_cond_timedwait(&fake.held_more, &fake.lock,
					      &deadline) == 0)
			;
		pthread_mutex_unlock(&fake.lock);
	}
	ck_assert_int_eq(fake.nheld, 1);
	fake.mode = FAKE_NORMAL;
	fake_complete(fake.held, 1, 0, "");
	pfd.fd = rma_fd(c);
	pfd.events = POLLIN;
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	before = fake_requests();
	submits = fake.submits;

	ck_assert_int_eq(pipe2(sv, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char v = (char)fork_child_calls(held);

		(void)!write(sv[1], &v, 1);
		_exit(0);
	}
	close(sv[1]);
	pfd.fd = sv[0];
	pfd.events = POLLIN;
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	ck_assert_int_eq(read(sv[0], &verdict, 1), 1);
	close(sv[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(verdict == 0, "child's check %d failed", verdict);

	/* the parent's completion was left to it, and its client works */
	ck_assert_int_eq(rma_request_wait(c, held, 5000), RMA_OK);
	ck_assert_uint_eq(rma_request_bytes(held), 8);
	ck_assert_int_eq(count, 1);
	rma_request_release(held);
	ck_assert_int_eq(rma_put_sync(c, reg, 0, rem, 0, 8, 0, 5000), RMA_OK);
	ck_assert_int_eq(rma_get_sync(c, reg, 0, rem, 0, 8, 5000), RMA_OK);
	/* two Submits: the child's calls never reached the daemon */
	ck_assert_int_eq(fake_requests(), before + 2);
	ck_assert_int_eq(fake.submits, submits + 2);
	ck_assert_uint_eq(((uint8_t *)rma_region_ptr(reg))[4095], 0x5a);
	ck_assert_int_eq(rma_region_free(c, reg), RMA_OK);
	rma_disconnect(c);
	fake_stop();
}
END_TEST

static Suite *
client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("fake daemon");

	tcase_add_test(tc, test_region_and_handles);
	tcase_add_test(tc, test_sync_ops_and_errors);
	tcase_add_test(tc, test_batching);
	tcase_add_test(tc, test_callbacks_resubmit);
	tcase_add_test(tc, test_call_timeout);
	tcase_add_test(tc, test_daemon_gone);
	tcase_add_test(tc, test_disconnect_in_flight);
	tcase_add_loop_test(tc, test_protocol_errors, 0,
			    sizeof(protocol_cases) / sizeof(protocol_cases[0]));
	tcase_add_test(tc, test_version_refused);
	tcase_add_test(tc, test_connect_errors);
	tcase_add_test(tc, test_batching_rule);
	tcase_add_test(tc, test_freed_region_handle);
	tcase_add_test(tc, test_immediate_freed);
	tcase_add_test(tc, test_immediate_gone);
	tcase_add_test(tc, test_zero_length);
	tcase_add_test(tc, test_descriptor_too_long);
	tcase_add_test(tc, test_connect_timeout_mute);
	tcase_add_test(tc, test_connect_timeout_backlog);
	tcase_add_test(tc, test_reset_is_a_close);
	tcase_add_test(tc, test_reclose_while_reattaching);
	tcase_add_test(tc, test_submit_meets_take_over);
	tcase_add_loop_test(tc, test_free_cut_by_take_over, 0, 2);
	tcase_add_test(tc, test_fork_child_refused);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(client_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
