/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: held descriptor numbers (daemon/fdhold.c). A socket UCX accepted
 * and then closed keeps its number taken until worker 0 returned from a
 * progress call begun after the close, so that no connection accepted in
 * between gets the number (and an event UCX queued for the old one). */
#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "fdhold.h"

struct pair {
	int listener, client, accepted;
};

/* A loopback connection: the client's end and the accepted one. */
static void
pair_open(struct pair *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	p->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(p->listener, 0);
	ck_assert_int_eq(bind(p->listener, (struct sockaddr *)&sa, len), 0);
	ck_assert_int_eq(listen(p->listener, 4), 0);
	ck_assert_int_eq(getsockname(p->listener, (struct sockaddr *)&sa, &len),
			 0);
	p->client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(p->client, (struct sockaddr *)&sa, len), 0);
	p->accepted = accept(p->listener, NULL, NULL);
	ck_assert_int_ge(p->accepted, 0);
}

/* Another connection to the same listener, not accepted yet: its
 * client's end is made first, so that accept takes the lowest number. */
static int
pair_connect(struct pair *p)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int c;

	ck_assert_int_eq(getsockname(p->listener, (struct sockaddr *)&sa, &len),
			 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&sa, len), 0);
	return c;
}

static int
pair_accept(struct pair *p)
{
	int fd = accept(p->listener, NULL, NULL);

	ck_assert_int_ge(fd, 0);
	return fd;
}

/* Worker 0's mailbox, as the daemon gives it (worker.c). */
static int
wake_open(void)
{
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	ck_assert_int_ge(efd, 0);
	fdhold_wake_on(efd);
	return efd;
}

/* How many wake-ups were written since the last call. */
static uint64_t
wakes(int efd)
{
	uint64_t n = 0;

	if (read(efd, &n, sizeof(n)) < 0)
		return 0;
	return n;
}

static bool
fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Without the hold the kernel gives the number again at once: what the
 * tests below rely on to tell. */
START_TEST(test_untracked_number_comes_back)
{
	struct pair p;
	int n;

	pair_open(&p);
	n = p.accepted;
	pair_connect(&p);
	ck_assert(!fdhold_close(n));
	close(n);
	ck_assert_int_eq(pair_accept(&p), n);
}
END_TEST

START_TEST(test_held_until_a_progress_after_the_close)
{
	struct pair p;
	uint64_t before;
	char c;
	int n, efd = wake_open();

	pair_open(&p);
	n = p.accepted;
	pair_connect(&p);
	pair_connect(&p);
	fdhold_track(n);
	before = fdhold_mark();
	ck_assert(fdhold_close(n));
	/* worker 0 is woken to progress, whether busy or idle */
	ck_assert_uint_eq(wakes(efd), 1);
	/* the socket is closed: its peer reads the end */
	ck_assert_int_eq(read(p.client, &c, 1), 0);
	/* its number is not: the next connection gets another one */
	ck_assert(fd_open(n));
	ck_assert_int_ne(pair_accept(&p), n);
	/* a progress call begun before the close releases nothing */
	fdhold_release(before);
	ck_assert(fd_open(n));
	/* one begun after it does */
	fdhold_release(fdhold_mark());
	ck_assert(!fd_open(n));
	ck_assert_int_eq(pair_accept(&p), n);
}
END_TEST

/* Held once: after the release the number is untracked again, and a
 * second close of it is the caller's. */
START_TEST(test_tracked_once)
{
	struct pair p;
	int n;

	wake_open();
	pair_open(&p);
	n = p.accepted;
	fdhold_track(n);
	ck_assert(fdhold_close(n));
	fdhold_release(fdhold_mark());
	ck_assert(!fdhold_close(n));
}
END_TEST

/* Before worker 0 starts there is no placeholder: nothing is held (and
 * the daemon's descriptor count does not grow by one at the first
 * close), the caller closes. */
START_TEST(test_nothing_held_before_worker_0)
{
	struct pair p;
	int n;

	pair_open(&p);
	n = p.accepted;
	pair_connect(&p);
	fdhold_track(n);
	ck_assert(!fdhold_close(n));
	close(n);
	ck_assert_int_eq(pair_accept(&p), n);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fdhold");
	TCase *tc = tcase_create("fdhold");

	/* first: the placeholder is process-wide, opened by wake_open (the
	 * tests share one process under CK_FORK=no) */
	tcase_add_test(tc, test_nothing_held_before_worker_0);
	tcase_add_test(tc, test_untracked_number_comes_back);
	tcase_add_test(tc, test_held_until_a_progress_after_the_close);
	tcase_add_test(tc, test_tracked_once);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
