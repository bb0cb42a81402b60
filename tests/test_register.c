/* SPDX-License-Identifier: BSD-2-Clause */
/* End to end: memory the application already shares, registered by fd
 * (rma_region_register_fd). Two real rmad processes on loopback: a's
 * client registers a sealed memfd it maps itself; b's client puts, gets,
 * atomics and notifying puts into it; a registered region as the local
 * side; the same daemon; the read-only descriptor; the owner trying to
 * shrink the file; limits; a take-over, which the region does not
 * survive. Bytes are checked in the owner's own mapping of the file. */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"
#include "rma.pb-c.h"

#define SZ (1u << 20)
#define WAIT_MS 20000

HARNESS_PAIR(pair);
/* a's client's memory file, mapped by the test as an application would,
 * and the region and remote made of [SZ, 3 SZ) of it */
static int file = -1;
static uint8_t *mine;
static rma_region_t *reg;
static rma_remote_t *remote_reg;

static int
sealed_memfd(size_t size)
{
	int fd = memfd_create("app-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

static void
setup_with(const char *const *flags)
{
	harness_pair_start(&pair, SZ, flags);
	file = sealed_memfd(4 * SZ);
	mine = mmap(NULL, 4 * SZ, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
	ck_assert_ptr_ne(mine, MAP_FAILED);
	ck_assert_msg(rma_region_register_fd(ca, file, SZ, 2 * SZ, &reg) ==
			  RMA_OK,
		      "register: %s", rma_last_error(ca));
	ck_assert_uint_eq(rma_region_length(reg), 2 * SZ);
	ck_assert_int_eq(rma_remote_import(cb, peer_a,
					   rma_region_descriptor(reg),
					   &remote_reg),
			 RMA_OK);
	ck_assert_uint_eq(rma_remote_length(remote_reg), 2 * SZ);
}

static void
setup(void)
{
	setup_with(NULL);
}

static void
teardown(void)
{
	harness_pair_stop(&pair);
	if (mine != NULL)
		munmap(mine, 4 * SZ);
	if (file >= 0)
		close(file);
	mine = NULL;
	file = -1;
	reg = NULL;
}

/* Puts into the registered region from another daemon land in the
 * owner's own mapping at the offset; gets read what the owner wrote;
 * rma_region_ptr() is the same memory. */
START_TEST(test_between_daemons)
{
	uint8_t *src = rma_region_ptr(rb);

	/* the caller may close its fd once registered */
	close(file);
	file = -1;
	harness_fill(src, SZ, 1);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_reg, 4096, SZ - 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(mine + SZ + 4096, src, SZ - 4096), 0);
	ck_assert_ptr_ne(rma_region_ptr(reg), NULL);
	ck_assert_int_eq(
	    memcmp((uint8_t *)rma_region_ptr(reg) + 4096, src, SZ - 4096), 0);
	harness_fill(mine + 2 * SZ, SZ, 2);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, remote_reg, SZ, SZ, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(src, mine + 2 * SZ, SZ), 0);
	/* the last byte, and one past it */
	ck_assert_int_eq(
	    rma_put_sync(cb, rb, 0, remote_reg, 2 * SZ - 1, 1, 0, WAIT_MS),
	    RMA_OK);
	ck_assert_int_eq(
	    rma_put_sync(cb, rb, 0, remote_reg, 2 * SZ - 1, 2, 0, WAIT_MS),
	    RMA_ERR_OUT_OF_BOUNDS);
	ck_assert_uint_eq(mine[3 * SZ - 1], src[0]);
}
END_TEST

/* A registered region as the local side: put from it, get into it. */
START_TEST(test_local_side)
{
	int f = sealed_memfd(SZ);
	uint8_t *app = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	uint8_t *theirs = rma_region_ptr(ra);
	rma_region_t *local;

	ck_assert_ptr_ne(app, MAP_FAILED);
	ck_assert_int_eq(rma_region_register_fd(cb, f, 0, SZ, &local), RMA_OK);
	harness_fill(app, SZ, 3);
	ck_assert_int_eq(
	    rma_put_sync(cb, local, 0, remote_a, 0, SZ, 0, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(theirs, app, SZ), 0);
	harness_fill(theirs, SZ, 4);
	ck_assert_int_eq(rma_get_sync(cb, local, 0, remote_a, 0, SZ, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(theirs, app, SZ), 0);
	ck_assert_int_eq(rma_region_free(cb, local), RMA_OK);
	/* the application's mapping and file are still its own */
	app[0] ^= 1;
	munmap(app, SZ);
	close(f);
}
END_TEST

/* Another client of the owner's daemon: the transfer is local to it. */
START_TEST(test_same_daemon)
{
	rma_client_t *c2;
	rma_region_t *r2;
	rma_peer_t *self;
	rma_remote_t *rem;
	uint8_t *p2;

	ck_assert_int_eq(rma_connect(da.socket, &c2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c2, SZ, &r2), RMA_OK);
	p2 = rma_region_ptr(r2);
	ck_assert_int_eq(rma_peer_connect(c2, da.listen, &self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(c2, self, rma_region_descriptor(reg), &rem),
	    RMA_OK);
	harness_fill(p2, SZ, 5);
	ck_assert_int_eq(rma_put_sync(c2, r2, 0, rem, SZ, SZ, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(mine + 2 * SZ, p2, SZ), 0);
	harness_fill(mine + SZ, 4096, 6);
	ck_assert_int_eq(rma_get_sync(c2, r2, 0, rem, 0, 4096, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(p2, mine + SZ, 4096), 0);
	rma_disconnect(c2);
}
END_TEST

START_TEST(test_atomics)
{
	uint64_t old = 0, word;

	memset(mine + SZ + 64, 0, 8);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(rma_atomic_sync(cb, remote_reg, 64,
						 RMA_ATOMIC_FETCH_ADD, 8, 3, 0,
						 &old, WAIT_MS),
				 RMA_OK);
	ck_assert_uint_eq(old, 27);
	memcpy(&word, mine + SZ + 64, 8);
	ck_assert_uint_eq(word, 30);
	ck_assert_int_eq(rma_atomic_sync(cb, remote_reg, 64, RMA_ATOMIC_CSWAP,
					 8, 99, 30, &old, WAIT_MS),
			 RMA_OK);
	memcpy(&word, mine + SZ + 64, 8);
	ck_assert_uint_eq(word, 99);
}
END_TEST

static int
notified(void *arg)
{
	rma_notification_t *n = arg;

	return rma_notify_next(ca, n) == 1;
}

START_TEST(test_notification)
{
	uint8_t *src = rma_region_ptr(rb);
	rma_notification_t n;
	rma_request_t *req;

	memcpy(src, "hello, registered", 18);
	ck_assert_int_eq(rma_put_notify(cb, rb, 0, remote_reg, 512, 18, 4242, 0,
					NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_request_wait(cb, req, WAIT_MS), RMA_OK);
	rma_request_release(req);
	ck_assert(harness_until(10, notified, &n));
	ck_assert_ptr_eq(n.region, reg);
	ck_assert_uint_eq(n.offset, 512);
	ck_assert_uint_eq(n.length, 18);
	ck_assert_uint_eq(n.value, 4242);
	ck_assert_str_eq((char *)mine + SZ + 512, "hello, registered");
}
END_TEST

START_TEST(test_read_only_descriptor)
{
	uint8_t *src = rma_region_ptr(rb);
	rma_remote_t *ro;

	ck_assert_int_eq(rma_remote_import(cb, peer_a,
					   rma_region_read_only_descriptor(reg),
					   &ro),
			 RMA_OK);
	harness_fill(mine + SZ, 8192, 7);
	ck_assert_int_eq(rma_get_sync(cb, rb, 0, ro, 0, 8192, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(src, mine + SZ, 8192), 0);
	src[0] = (uint8_t)~mine[SZ];
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, ro, 0, 8, 0, WAIT_MS),
			 RMA_ERR_PERMISSION);
	ck_assert_int_ne(src[0], mine[SZ]); /* nothing written */
}
END_TEST

/* The owner cannot shrink the file under the daemons' mapping: the
 * seal refuses it; the daemon goes on serving. An unsealed memfd is
 * refused, with a detail that says what to do. */
START_TEST(test_owner_cannot_truncate)
{
	uint8_t *src = rma_region_ptr(rb);
	rma_region_t *r;
	int f;

	ck_assert_int_eq(ftruncate(file, 0), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ftruncate(file, SZ + 4096), -1);
	ck_assert_int_eq(ftruncate(file, 8 * SZ), 0); /* growing is fine */
	harness_fill(src, SZ, 8);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, remote_reg, SZ, SZ,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(mine + 2 * SZ, src, SZ), 0);
	ck_assert_int_eq(kill(da.pid, 0), 0);
	f = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(f, SZ), 0);
	ck_assert_int_eq(rma_region_register_fd(ca, f, 0, SZ, &r),
			 RMA_ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(rma_last_error(ca), "F_SEAL_SHRINK"));
	ck_assert_int_eq(ftruncate(f, 0), 0); /* not sealed by the attempt */
	close(f);
	f = open("/dev/zero", O_RDWR);
	ck_assert_int_eq(rma_region_register_fd(ca, f, 0, SZ, &r),
			 RMA_ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(rma_last_error(ca), "character device"));
	close(f);
	ck_assert_int_eq(rma_region_register_fd(ca, -1, 0, SZ, &r),
			 RMA_ERR_INVALID);
	/* a closed fd fails the call, not the connection */
	f = sealed_memfd(SZ);
	close(f);
	ck_assert_int_eq(rma_region_register_fd(ca, f, 0, SZ, &r),
			 RMA_ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(rma_last_error(ca), "not open"));
	ck_assert_int_eq(rma_region_alloc(ca, 4096, &r), RMA_OK);
}
END_TEST

/* Lines of `rmactl status` on a's socket holding a (and b, if not
 * NULL). */
static int
rmactl_count(const char *a, const char *b)
{
	const char *rmactl = getenv("RMACTL_BIN");
	char cmd[512], line[512];
	FILE *f;
	int n = 0;

	ck_assert_ptr_nonnull(rmactl);
	snprintf(cmd, sizeof(cmd), "%s --socket %s status", rmactl, da.socket);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, a) != NULL && (b == NULL || strstr(line, b));
	ck_assert_int_eq(pclose(f), 0);
	return n;
}

/* rmactl status (the daemon's StatusReply) lists it as registered. */
START_TEST(test_listed)
{
	Rma__V1__StatusReply *s;
	size_t len, registered = 0, allocated = 0;
	void *buf;

	ck_assert_int_eq(rma_daemon_status(ca, &buf, &len), RMA_OK);
	s = rma__v1__status_reply__unpack(NULL, len, buf);
	ck_assert_ptr_nonnull(s);
	for (size_t i = 0; i < s->n_regions; i++) {
		registered += s->regions[i]->registered;
		allocated += !s->regions[i]->registered;
		if (s->regions[i]->registered)
			ck_assert_uint_eq(s->regions[i]->length, 2 * SZ);
	}
	ck_assert_uint_eq(registered, 1);
	ck_assert_uint_eq(allocated, 1);
	rma__v1__status_reply__free_unpacked(s, NULL);
	free(buf);
	/* rmactl's table: KIND fd for it, alloc for the other */
	ck_assert_int_eq(rmactl_count(" 2.0 MiB ", " fd"), 1);
	ck_assert_int_eq(rmactl_count(" alloc", NULL), 1);
}
END_TEST

/* A take-over: the allocated region goes on, the registered one does
 * not (rma.h says why); the owner's bytes stay, operations naming it
 * fail clearly. */
START_TEST(test_take_over)
{
	static const char *const flags[] = {"--take-over", NULL};
	uint8_t *src = rma_region_ptr(rb);
	rma_remote_t *again, *rem_b;
	rma_peer_t *peer_b;
	double deadline;
	rma_status_t st;

	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &peer_b), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, peer_b, rma_region_descriptor(rb), &rem_b),
	    RMA_OK);
	memcpy(mine + SZ, "kept", 5);
	harness_daemon_take_over(&da, flags, 10.0);
	/* the owner's client re-attaches at its next call */
	deadline = harness_now() + 10;
	while (rma_reattach_count(ca) == 0 && harness_now() < deadline) {
		rma_wait(ca, 10);
	}
	ck_assert_uint_ge(rma_reattach_count(ca), 1);
	ck_assert_str_eq((char *)mine + SZ, "kept");
	ck_assert_int_eq(rma_put_sync(ca, reg, 0, rem_b, 0, 8, 0, WAIT_MS),
			 RMA_ERR_NO_REGION);
	st = rma_remote_import(cb, peer_a, rma_region_descriptor(reg), &again);
	ck_assert_msg(st == RMA_ERR_STALE_DESCRIPTOR || st == RMA_ERR_NO_REGION,
		      "import after the take-over: %s", rma_strerror(st));
	/* the allocated one survived */
	deadline = harness_now() + 10;
	do {
		st = rma_put_sync(cb, rb, 0, remote_a, 0, 8, 0, WAIT_MS);
	} while (st != RMA_OK && harness_now() < deadline);
	ck_assert_int_eq(st, RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), src, 8), 0);
	ck_assert_int_eq(rma_region_free(ca, reg), RMA_OK);
}
END_TEST

static void
setup_limits(void)
{
	static const char *const flags[] = {"--max-regions", "2", NULL};

	setup_with(flags);
}

/* The same per-client limits as rma_region_alloc: a has its allocated
 * region and reg; a third of either kind is refused. */
START_TEST(test_limits)
{
	rma_region_t *r;

	ck_assert_int_eq(rma_region_register_fd(ca, file, 0, 4096, &r),
			 RMA_ERR_LIMIT);
	ck_assert_int_eq(rma_region_alloc(ca, 4096, &r), RMA_ERR_LIMIT);
	ck_assert_int_eq(rma_region_free(ca, reg), RMA_OK);
	ck_assert_int_eq(rma_region_register_fd(ca, file, 0, 4096, &r), RMA_OK);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("register");
	TCase *tc = tcase_create("register");
	TCase *lim = tcase_create("limits");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_between_daemons);
	tcase_add_test(tc, test_local_side);
	tcase_add_test(tc, test_same_daemon);
	tcase_add_test(tc, test_atomics);
	tcase_add_test(tc, test_notification);
	tcase_add_test(tc, test_read_only_descriptor);
	tcase_add_test(tc, test_owner_cannot_truncate);
	tcase_add_test(tc, test_listed);
	tcase_add_test(tc, test_take_over);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(lim, setup_limits, teardown);
	tcase_set_timeout(lim, 60);
	tcase_add_test(lim, test_limits);
	suite_add_tcase(s, lim);
	return check_main_run(s);
}
