/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: the frame reader and writer (proto/frame.c). */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"
#include "frame.h"
#include "rma.pb-c.h"

static size_t
pack_hello(uint32_t version, const char *name, uint8_t *out)
{
	Rma__V1__Hello hello = RMA__V1__HELLO__INIT;
	Rma__V1__Request req = RMA__V1__REQUEST__INIT;

	hello.protocol_version = version;
	hello.client_name = (char *)name;
	req.id = version;
	req.body_case = RMA__V1__REQUEST__BODY_HELLO;
	req.hello = &hello;
	frame_pack(&req.base, out);
	return frame_packed_size(&req.base);
}

static void
feed(struct frame_reader *r, const uint8_t *data, size_t n)
{
	while (n > 0) {
		uint8_t *p;
		size_t avail;
		ck_assert_int_eq(frame_reader_space(r, &p, &avail), 0);
		ck_assert_uint_gt(avail, 0);
		if (avail > n)
			avail = n;
		memcpy(p, data, avail);
		frame_reader_commit(r, avail);
		data += avail;
		n -= avail;
	}
}

static void
check_hello(const uint8_t *payload, size_t len, uint32_t version)
{
	Rma__V1__Request *req = rma__v1__request__unpack(NULL, len, payload);

	ck_assert_ptr_nonnull(req);
	ck_assert_int_eq(req->body_case, RMA__V1__REQUEST__BODY_HELLO);
	ck_assert_uint_eq(req->hello->protocol_version, version);
	ck_assert_str_eq(req->hello->client_name, "test");
	rma__v1__request__free_unpacked(req, NULL);
}

START_TEST(test_byte_by_byte)
{
	struct frame_reader r;
	uint8_t buf[256];
	size_t n = pack_hello(7, "test", buf);
	const uint8_t *payload;
	size_t len;

	frame_reader_init(&r, 1024);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(frame_reader_next(&r, &payload, &len),
				 FRAME_MORE);
		feed(&r, buf + i, 1);
	}
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
	ck_assert_uint_eq(len, n - FRAME_HEADER_SIZE);
	check_hello(payload, len, 7);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_MORE);
	ck_assert_uint_eq(frame_reader_pending(&r), 0);
	frame_reader_cleanup(&r);
}
END_TEST

START_TEST(test_many_frames_one_read)
{
	struct frame_reader r;
	uint8_t buf[64 * 1024];
	size_t n = 0;
	const uint8_t *payload;
	size_t len;
	uint32_t want = 1;

	for (uint32_t v = 1; v <= 500; v++)
		n += pack_hello(v, "test", buf + n);
	frame_reader_init(&r, 1024);
	feed(&r, buf, n);
	while (frame_reader_next(&r, &payload, &len) == FRAME_READY)
		check_hello(payload, len, want++);
	ck_assert_uint_eq(want, 501);
	frame_reader_cleanup(&r);
}
END_TEST

START_TEST(test_split_across_reads)
{
	struct frame_reader r;
	uint8_t buf[1024];
	size_t n = pack_hello(1, "test", buf);
	const uint8_t *payload;
	size_t len;

	n += pack_hello(2, "test", buf + n);
	frame_reader_init(&r, 1024);
	/* first frame and half of the second */
	feed(&r, buf, n - 5);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
	check_hello(payload, len, 1);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_MORE);
	feed(&r, buf + n - 5, 5);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
	check_hello(payload, len, 2);
	frame_reader_cleanup(&r);
}
END_TEST

START_TEST(test_oversize_rejected_before_allocating)
{
	struct frame_reader r;
	const uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff}; /* 4 GiB - 1 */
	const uint8_t *payload;
	uint8_t *p;
	size_t len, avail;

	frame_reader_init(&r, 1024);
	feed(&r, huge, 4);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_OVERSIZE);
	ck_assert_int_eq(frame_reader_space(&r, &p, &avail), FRAME_OVERSIZE);
	ck_assert_uint_le(r.cap, 64 * 1024);
	frame_reader_cleanup(&r);
}
END_TEST

START_TEST(test_limit_is_inclusive)
{
	struct frame_reader r;
	uint8_t *buf = calloc(1, 4 + 1025);
	const uint8_t *payload;
	size_t len;

	frame_reader_init(&r, 1024);
	buf[2] = 0x04; /* 1024 */
	feed(&r, buf, 4 + 1024);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
	ck_assert_uint_eq(len, 1024);
	buf[3] = 0x01; /* 1025 */
	feed(&r, buf, 4);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_OVERSIZE);
	frame_reader_cleanup(&r);
	free(buf);
}
END_TEST

START_TEST(test_empty_frame)
{
	struct frame_reader r;
	const uint8_t zero[4] = {0};
	const uint8_t *payload;
	size_t len = 99;

	frame_reader_init(&r, 1024);
	feed(&r, zero, 4);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
	ck_assert_uint_eq(len, 0);
	frame_reader_cleanup(&r);
}
END_TEST

START_TEST(test_large_frame_grows_buffer)
{
	struct frame_reader r;
	size_t n = 300 * 1024;
	uint8_t *buf = malloc(4 + n);
	const uint8_t *payload;
	size_t len;

	buf[0] = (uint8_t)(n >> 24);
	buf[1] = (uint8_t)(n >> 16);
	buf[2] = (uint8_t)(n >> 8);
	buf[3] = (uint8_t)n;
	for (size_t i = 0; i < n; i++)
		buf[4 + i] = (uint8_t)(i * 7);
	frame_reader_init(&r, 1 << 20);
	feed(&r, buf, 4 + n);
	ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
	ck_assert_uint_eq(len, n);
	ck_assert_int_eq(memcmp(payload, buf + 4, n), 0);
	frame_reader_cleanup(&r);
	free(buf);
}
END_TEST

/* common/fdpass.c: fds ride on the message's first byte; more than
 * FDPASS_MAX are refused with nothing sent, never sent as bare bytes. */
START_TEST(test_fdpass)
{
	int sv[2], fds[FDPASS_MAX + 1], got = -1;
	union fdpass_buf cb;
	char byte = 0;
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cb.buf,
			    .msg_controllen = sizeof(cb.buf)};
	struct cmsghdr *cm;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	for (int i = 0; i <= FDPASS_MAX; i++)
		fds[i] = sv[0];
	errno = 0;
	ck_assert_int_eq(fdpass_send(sv[0], "x", 1, fds, FDPASS_MAX + 1, 0),
			 -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(recv(sv[1], &byte, 1, MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, EAGAIN);

	ck_assert_int_eq(fdpass_send(sv[0], "y", 1, fds, 1, 0), 1);
	ck_assert_int_eq(recvmsg(sv[1], &mh, 0), 1);
	ck_assert_int_eq(byte, 'y');
	cm = CMSG_FIRSTHDR(&mh);
	ck_assert_ptr_nonnull(cm);
	ck_assert_int_eq(cm->cmsg_type, SCM_RIGHTS);
	ck_assert_uint_eq(cm->cmsg_len, CMSG_LEN(sizeof(int)));
	memcpy(&got, CMSG_DATA(cm), sizeof(got));
	ck_assert_int_ge(got, 0);
	close(got);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("frame");

	tcase_add_test(tc, test_byte_by_byte);
	tcase_add_test(tc, test_many_frames_one_read);
	tcase_add_test(tc, test_split_across_reads);
	tcase_add_test(tc, test_oversize_rejected_before_allocating);
	tcase_add_test(tc, test_limit_is_inclusive);
	tcase_add_test(tc, test_empty_frame);
	tcase_add_test(tc, test_large_frame_grows_buffer);
	tcase_add_test(tc, test_fdpass);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
