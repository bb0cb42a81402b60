/* SPDX-License-Identifier: BSD-2-Clause */
/* Protocol: the daemon's handlers driven over a socketpair, in process,
 * with a real UCX worker but no peers: malformed, truncated, oversize and
 * unknown input gets an error reply (and a close where the stream cannot
 * be trusted any more), and other clients keep working. */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "fdpass.h"
#include "oprec.h"
#include "raw_frame.h"

static struct daemon d;

static void
setup(void)
{
	struct config cfg;

	config_defaults(&cfg);
	cfg.listen_port = 0; /* any free port: no peers in these tests */
	cfg.log_level = LOG_LEVEL_ERROR;
	log_init(cfg.log_level);
	ck_assert_int_eq(daemon_start(&d, &cfg), 0);
}

static void
teardown(void)
{
	daemon_stop(&d);
}

static int
client_new(void)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	conn_create(&d, sv[0]);
	return sv[1];
}

static void
send_raw(int fd, const void *buf, size_t n)
{
	ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
}

static void
send_request(int fd, Rma__V1__Request *req)
{
	size_t n;
	uint8_t *buf = raw_frame_pack(&req->base, &n);

	ck_assert_ptr_nonnull(buf);
	send_raw(fd, buf, n);
	free(buf);
}

/* Runs the daemon's loop until fd has data or EOF, for at most 5 s. */
static int
pump(int fd, void *arg)
{
	double deadline = daemon_now() + 5;

	(void)arg;
	while (daemon_now() < deadline) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		event_base_loop(d.base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 1) > 0)
			return 1;
	}
	return 0;
}

/* Reads one DaemonMessage; *fd_p gets a passed fd or -1. NULL on EOF. */
static Rma__V1__DaemonMessage *
recv_message(int fd, int *fd_p)
{
	Rma__V1__DaemonMessage *m = NULL;
	int rc = raw_frame_recv(fd, pump, NULL, fd_p, &m);

	ck_assert_msg(rc >= 0, "no whole DaemonMessage frame within 5 s");
	return m;
}

static Rma__V1__Reply *
expect_reply(int fd, uint64_t id, Rma__V1__Status status,
	     Rma__V1__DaemonMessage **m_p)
{
	Rma__V1__DaemonMessage *m = recv_message(fd, NULL);

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->kind_case, RMA__V1__DAEMON_MESSAGE__KIND_REPLY);
	ck_assert_uint_eq(m->reply->id, id);
	ck_assert_msg(m->reply->status == status, "status %d, want %d: %s",
		      m->reply->status, status, m->reply->detail);
	if (status != RMA__V1__STATUS__OK)
		ck_assert_uint_gt(strlen(m->reply->detail), 0);
	*m_p = m;
	return m->reply;
}

static void
expect_closed(int fd)
{
	char c;

	ck_assert(pump(fd, NULL));
	ck_assert_int_eq(read(fd, &c, 1), 0);
}

static void
hello(int fd, uint32_t version, Rma__V1__Status want)
{
	Rma__V1__Hello h = RMA__V1__HELLO__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;

	h.protocol_version = version;
	h.client_name = "test";
	req.id = 1;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &h;
	send_request(fd, &req);
	expect_reply(fd, 1, want, &m);
	if (want == RMA__V1__STATUS__OK)
		ck_assert_str_eq(m->reply->hello->daemon_id, d.id_hex);
	rma__v1__daemon_message__free_unpacked(m, NULL);
}

static void
status_ok(int fd)
{
	Rma__V1__StatusRequest s = RMA__V1__STATUS_REQUEST__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;

	req.id = 77;
	req.body_case = RMA__V1__REQUEST__BODY_STATUS;
	req.status = &s;
	send_request(fd, &req);
	expect_reply(fd, 77, RMA__V1__STATUS__OK, &m);
	ck_assert_str_eq(m->reply->status_reply->daemon_id, d.id_hex);
	rma__v1__daemon_message__free_unpacked(m, NULL);
}

START_TEST(test_hello_and_status)
{
	int fd = client_new();

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	status_ok(fd);
	close(fd);
}
END_TEST

START_TEST(test_wrong_version_closed)
{
	int fd = client_new();

	hello(fd, RMA_PROTOCOL_VERSION + 1, RMA__V1__STATUS__ERR_VERSION);
	expect_closed(fd);
	close(fd);
}
END_TEST

START_TEST(test_request_before_hello)
{
	int fd = client_new();
	Rma__V1__DaemonMessage *m;

	{
		Rma__V1__StatusRequest s = RMA__V1__STATUS_REQUEST__INIT;
		Rma__V1__Request req = RMA__V1__REQUEST__INIT;
		req.id = 5;
		req.body_case = RMA__V1__REQUEST__BODY_STATUS;
		req.status = &s;
		send_request(fd, &req);
	}
	expect_reply(fd, 5, RMA__V1__STATUS__ERR_PROTOCOL, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(fd);
	close(fd);
}
END_TEST

START_TEST(test_garbage_closed_others_unaffected)
{
	int bad = client_new(), good = client_new();
	const uint8_t garbage[] = {0,	 0,    0,    6,	   0xff,
				   0xff, 0xff, 0xff, 0xff, 0xff};
	Rma__V1__DaemonMessage *m;

	hello(good, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	send_raw(bad, garbage, sizeof(garbage));
	expect_reply(bad, 0, RMA__V1__STATUS__ERR_PROTOCOL, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(bad);
	status_ok(good);
	close(bad);
	close(good);
}
END_TEST

START_TEST(test_oversize_length_closed)
{
	int fd = client_new();
	const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
	Rma__V1__DaemonMessage *m;

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	send_raw(fd, huge, sizeof(huge));
	expect_reply(fd, 0, RMA__V1__STATUS__ERR_PROTOCOL, &m);
	ck_assert_ptr_nonnull(strstr(m->reply->detail, "maximum"));
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(fd);
	close(fd);
}
END_TEST

START_TEST(test_truncated_frame_then_close)
{
	int fd = client_new(), good = client_new();
	const uint8_t partial[] = {0, 0, 0, 100, 8, 1};

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	send_raw(fd, partial, sizeof(partial));
	close(fd);
	/* The daemon notices the close, drops the client, serves others. */
	hello(good, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	status_ok(good);
	ck_assert_int_eq(TAILQ_FIRST(&d.conns)->id, 2);
	close(good);
}
END_TEST

START_TEST(test_unknown_request_answered)
{
	int fd = client_new();
	/* field 15 (unknown to rma.v1.Request), varint 1: body not set */
	const uint8_t unknown[] = {0, 0, 0, 4, 0x08, 0x09, 0x78, 0x01};
	Rma__V1__DaemonMessage *m;

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	send_raw(fd, unknown, sizeof(unknown));
	expect_reply(fd, 9, RMA__V1__STATUS__ERR_UNKNOWN_REQUEST, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	status_ok(fd); /* still served */
	close(fd);
}
END_TEST

static int
count_devnull(void)
{
	char path[64], target[64];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t len;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = '\0';
			n += strcmp(target, "/dev/null") == 0;
		}
	}
	return n;
}

START_TEST(test_client_fd_refused_and_closed)
{
	int fd = client_new();
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	uint8_t frame[4] = {0, 0, 0, 0};
	Rma__V1__DaemonMessage *m;
	int before = count_devnull();

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	ck_assert_int_eq(fdpass_send(fd, frame, sizeof(frame), &devnull, 1, 0),
			 4);
	close(devnull);
	/* the empty frame is answered (it names no request), then the fd
	 * that came with it, which only region_register takes, ends the
	 * connection */
	expect_reply(fd, 0, RMA__V1__STATUS__ERR_UNKNOWN_REQUEST, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_reply(fd, 0, RMA__V1__STATUS__ERR_PROTOCOL, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(fd);
	/* The daemon closed the copy it was passed. */
	ck_assert_int_eq(count_devnull(), before - 1);
	close(fd);
}
END_TEST

static uint64_t
region_alloc(int fd, uint64_t length, int *memfd_p, char *descriptor)
{
	Rma__V1__RegionAlloc ra = RMA__V1__REGION_ALLOC__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;
	uint64_t id;

	ra.length = length;
	req.id = 10;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_ALLOC;
	req.region_alloc = &ra;
	send_request(fd, &req);
	m = recv_message(fd, memfd_p);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->reply->status, RMA__V1__STATUS__OK);
	ck_assert_int_ge(*memfd_p, 0);
	id = m->reply->region_alloc->region_id;
	if (descriptor)
		strcpy(descriptor, m->reply->region_alloc->descriptor);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	return id;
}

START_TEST(test_region_is_sealed_memfd)
{
	int fd = client_new(), memfd;
	struct stat st;
	int seals;

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	region_alloc(fd, 12345, &memfd, NULL);
	ck_assert_int_eq(fstat(memfd, &st), 0);
	ck_assert_int_eq(st.st_size, 12345);
	seals = fcntl(memfd, F_GET_SEALS);
	ck_assert(seals & F_SEAL_SHRINK);
	ck_assert(seals & F_SEAL_GROW);
	ck_assert(seals & F_SEAL_SEAL);
	ck_assert_int_eq(ftruncate(memfd, 10), -1);
	close(memfd);
	close(fd);
}
END_TEST

static Rma__V1__Completion *
submit_one(int fd, Rma__V1__Op *op, Rma__V1__DaemonMessage **m_p)
{
	Rma__V1__Op *ops[1] = {op};
	Rma__V1__Submit s = RMA__V1__SUBMIT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;

	s.n_ops = 1;
	s.ops = ops;
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &s;
	send_request(fd, &req);
	m = recv_message(fd, NULL);
	ck_assert_int_eq(m->kind_case, RMA__V1__DAEMON_MESSAGE__KIND_EVENT);
	ck_assert_int_eq(m->event->body_case, RMA__V1__EVENT__BODY_COMPLETIONS);
	*m_p = m;
	if (m->event->completions->n_completions == 1)
		return m->event->completions->completions[0];
	/* no detail text: a record */
	static Rma__V1__Completion from_record;
	struct comprec rec;

	ck_assert_uint_eq(m->event->completions->n_completions, 0);
	ck_assert_uint_eq(m->event->completions->packed.len, COMPREC_SIZE);
	comprec_decode(m->event->completions->packed.data, &rec);
	rma__v1__completion__init(&from_record);
	from_record.op_id = rec.op_id;
	from_record.status = rec.status;
	from_record.bytes = rec.bytes;
	return &from_record;
}

/* Operations as records (what librma sends): completed in order, OK ones
 * as records too, an error with its text as a message; a record with its
 * reserved bytes set fails alone; a torn record array closes the client. */
START_TEST(test_packed_records)
{
	int fd = client_new(), memfd;
	Rma__V1__Op ops[3];
	Rma__V1__Submit s = RMA__V1__SUBMIT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;
	uint8_t packed[3 * OPREC_SIZE];
	struct comprec rec;
	uint64_t mine;

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	mine = region_alloc(fd, 4096, &memfd, NULL);
	for (int i = 0; i < 3; i++) {
		rma__v1__op__init(&ops[i]);
		ops[i].op_id = 10 + (uint64_t)i;
		ops[i].kind = RMA__V1__OP_KIND__FLUSH; /* flush all: OK */
	}
	ops[1].kind = RMA__V1__OP_KIND__PUT; /* no such remote */
	ops[1].region_id = mine;
	ops[1].length = 8;
	ops[1].remote_id = 99;
	for (int i = 0; i < 3; i++)
		oprec_encode(packed + i * OPREC_SIZE, &ops[i]);
	s.packed.data = packed;
	s.packed.len = sizeof(packed);
	req.body_case = RMA__V1__REQUEST__BODY_SUBMIT;
	req.submit = &s;
	send_request(fd, &req);

	m = recv_message(fd, NULL);
	ck_assert_uint_eq(m->event->completions->packed.len, COMPREC_SIZE);
	comprec_decode(m->event->completions->packed.data, &rec);
	ck_assert_uint_eq(rec.op_id, 10);
	ck_assert_int_eq(rec.status, RMA__V1__STATUS__OK);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	m = recv_message(fd, NULL);
	ck_assert_uint_eq(m->event->completions->n_completions, 1);
	ck_assert_uint_eq(m->event->completions->completions[0]->op_id, 11);
	ck_assert_int_eq(m->event->completions->completions[0]->status,
			 RMA__V1__STATUS__ERR_NO_PEER);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	m = recv_message(fd, NULL);
	comprec_decode(m->event->completions->packed.data, &rec);
	ck_assert_uint_eq(rec.op_id, 12);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	/* reserved bytes set: that operation fails, the client stays */
	packed[OPREC_SIZE - 1] = 1;
	s.packed.len = OPREC_SIZE;
	send_request(fd, &req);
	m = recv_message(fd, NULL);
	ck_assert_uint_eq(m->event->completions->n_completions, 1);
	ck_assert_int_eq(m->event->completions->completions[0]->status,
			 RMA__V1__STATUS__ERR_PROTOCOL);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	/* half a record: a protocol error, and the client is cut off */
	s.packed.len = OPREC_SIZE / 2;
	send_request(fd, &req);
	m = recv_message(fd, NULL);
	ck_assert_int_eq(m->kind_case, RMA__V1__DAEMON_MESSAGE__KIND_REPLY);
	ck_assert_int_eq(m->reply->status, RMA__V1__STATUS__ERR_PROTOCOL);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(fd);
	close(memfd);
}
END_TEST

START_TEST(test_op_errors_are_completions)
{
	int fd = client_new(), other = client_new(), memfd, ofd;
	Rma__V1__Op op = RMA__V1__OP__INIT;
	Rma__V1__DaemonMessage *m;
	Rma__V1__Completion *c;
	uint64_t mine, theirs;

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	hello(other, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	mine = region_alloc(fd, 4096, &memfd, NULL);
	theirs = region_alloc(other, 4096, &ofd, NULL);

	op.op_id = 1;
	op.kind = RMA__V1__OP_KIND__PUT;
	op.region_id = theirs; /* another client's region */
	op.length = 8;
	c = submit_one(fd, &op, &m);
	ck_assert_uint_eq(c->op_id, 1);
	ck_assert_int_eq(c->status, RMA__V1__STATUS__ERR_NO_REGION);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	op.op_id = 2;
	op.region_id = mine;
	op.offset = 4090; /* past the end */
	c = submit_one(fd, &op, &m);
	ck_assert_int_eq(c->status, RMA__V1__STATUS__ERR_OUT_OF_BOUNDS);
	ck_assert_ptr_nonnull(strstr(c->detail, "outside region"));
	rma__v1__daemon_message__free_unpacked(m, NULL);

	op.op_id = 3;
	op.offset = 0;
	op.remote_id = 99; /* never imported */
	c = submit_one(fd, &op, &m);
	ck_assert_int_eq(c->status, RMA__V1__STATUS__ERR_NO_PEER);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	op.op_id = 4;
	op.kind = 42; /* unknown kind */
	c = submit_one(fd, &op, &m);
	ck_assert_int_eq(c->status, RMA__V1__STATUS__ERR_INVALID);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	op.op_id = 5;
	op.kind = RMA__V1__OP_KIND__FLUSH;
	op.peer_id = 12345;
	c = submit_one(fd, &op, &m);
	ck_assert_int_eq(c->status, RMA__V1__STATUS__ERR_NO_PEER);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	op.op_id = 6;
	op.peer_id = 0; /* flush all: nothing to flush, completes */
	c = submit_one(fd, &op, &m);
	ck_assert_int_eq(c->status, RMA__V1__STATUS__OK);
	rma__v1__daemon_message__free_unpacked(m, NULL);

	close(memfd);
	close(ofd);
	close(fd);
	close(other);
}
END_TEST

START_TEST(test_region_free_not_owner)
{
	int fd = client_new(), other = client_new(), memfd;
	Rma__V1__RegionFree rf = RMA__V1__REGION_FREE__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	hello(other, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	rf.region_id = region_alloc(fd, 100, &memfd, NULL);
	req.id = 3;
	req.body_case = RMA__V1__REQUEST__BODY_REGION_FREE;
	req.region_free = &rf;
	send_request(other, &req);
	expect_reply(other, 3, RMA__V1__STATUS__ERR_NO_REGION, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	send_request(fd, &req);
	expect_reply(fd, 3, RMA__V1__STATUS__OK, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	send_request(fd, &req); /* twice */
	expect_reply(fd, 3, RMA__V1__STATUS__ERR_NO_REGION, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	ck_assert_uint_eq(d.world->regions.count, 0);
	close(memfd);
	close(fd);
	close(other);
}
END_TEST

START_TEST(test_import_refusals)
{
	int fd = client_new(), memfd;
	Rma__V1__RemoteImport ri = RMA__V1__REMOTE_IMPORT__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;
	char text[DESCRIPTOR_TEXT_SIZE];

	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	region_alloc(fd, 100, &memfd, text);
	req.id = 4;
	req.body_case = RMA__V1__REQUEST__BODY_REMOTE_IMPORT;
	req.remote_import = &ri;
	ri.peer_id = 1;
	ri.descriptor = "rma1:nonsense";
	send_request(fd, &req);
	expect_reply(fd, 4, RMA__V1__STATUS__ERR_BAD_DESCRIPTOR, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	ri.descriptor = text; /* valid, but no such peer */
	send_request(fd, &req);
	expect_reply(fd, 4, RMA__V1__STATUS__ERR_NO_PEER, &m);
	rma__v1__daemon_message__free_unpacked(m, NULL);
	close(memfd);
	close(fd);
}
END_TEST

/* Cancel: ids of nothing parked change nothing and get no reply (the
 * next reply is the status's); too many ids in one is a protocol error
 * that closes the connection after its reply. */
START_TEST(test_cancel)
{
	int fd = client_new();
	Rma__V1__Cancel k = RMA__V1__CANCEL__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;
	Rma__V1__DaemonMessage *m;
	uint64_t ids[1025];

	for (size_t i = 0; i < 1025; i++)
		ids[i] = i + 1;
	hello(fd, RMA_PROTOCOL_VERSION, RMA__V1__STATUS__OK);
	k.op_ids = ids;
	k.n_op_ids = 3;
	req.id = 5;
	req.body_case = RMA__V1__REQUEST__BODY_CANCEL;
	req.cancel = &k;
	send_request(fd, &req);
	status_ok(fd);
	k.n_op_ids = 1025;
	req.id = 6;
	send_request(fd, &req);
	expect_reply(fd, 6, RMA__V1__STATUS__ERR_PROTOCOL, &m);
	ck_assert_ptr_nonnull(strstr(m->reply->detail, "Cancel"));
	rma__v1__daemon_message__free_unpacked(m, NULL);
	expect_closed(fd);
	close(fd);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("protocol");
	TCase *tc = tcase_create("protocol");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_hello_and_status);
	tcase_add_test(tc, test_wrong_version_closed);
	tcase_add_test(tc, test_request_before_hello);
	tcase_add_test(tc, test_garbage_closed_others_unaffected);
	tcase_add_test(tc, test_oversize_length_closed);
	tcase_add_test(tc, test_truncated_frame_then_close);
	tcase_add_test(tc, test_unknown_request_answered);
	tcase_add_test(tc, test_client_fd_refused_and_closed);
	tcase_add_test(tc, test_region_is_sealed_memfd);
	tcase_add_test(tc, test_op_errors_are_completions);
	tcase_add_test(tc, test_packed_records);
	tcase_add_test(tc, test_region_free_not_owner);
	tcase_add_test(tc, test_import_refusals);
	tcase_add_test(tc, test_cancel);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
