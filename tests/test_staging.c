/* SPDX-License-Identifier: BSD-2-Clause */
/* Transfers from and to any buffer (rma_put_buf, rma_get_buf, through
 * librma's staging area), end to end: two real rmad processes and a
 * same-daemon remote. The staging area is made small (RMA_STAGING_SIZE =
 * 256K: pieces of 64 KiB, four in flight) so that sizes cross pieces and
 * the whole area. Bytes are verified in the owner's mapping, or in the
 * caller's buffer. */
#include <check.h>

#include "check_main.h"
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"

#define REGION_SIZE (8u << 20)
#define STAGING "256K"
#define PIECE (64u << 10)
#define WAIT_MS 20000
/* Puts whose bytes are checked: complete at the target in both modes
 * (with rma_protocol = ucx a put completes when UCX has it) */
#define RC RMA_FLAG_REMOTE_COMPLETION

HARNESS_PAIR(pair);
static rma_peer_t *peer_b;
static rma_remote_t *remote_b;

static void
setup(void)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};

	setenv("RMA_STAGING_SIZE", STAGING, 1);
	harness_pair_start(&pair, REGION_SIZE, flags);
	/* b's own region through b: the same daemon copies */
	ck_assert_int_eq(rma_peer_connect(cb, db.listen, &peer_b), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer_b, rma_region_descriptor(rb), &remote_b),
	    RMA_OK);
}

static void
teardown(void)
{
	harness_pair_stop(&pair);
}

/* 1 B, odd, one piece exactly, one byte more, many pieces, more than the
 * whole area. */
static const size_t sizes[] = {1,	  7,	  4099,		  PIECE,
			       PIECE + 1, 200003, (1u << 20) + 13};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSIZE ((1u << 20) + 13)

enum kind { STACK, HEAP, FILEMAP, NKINDS };

/* A buffer of n bytes of the given kind (the stack one is the caller's). */
static uint8_t *
buf_get(enum kind k, uint8_t *stack, size_t n)
{
	char path[] = "/tmp/rmad-staging.XXXXXX";
	void *p;
	int fd;

	switch (k) {
	case STACK:
		return stack;
	case HEAP:
		p = malloc(n);
		ck_assert_ptr_nonnull(p);
		return p;
	default:
		fd = mkstemp(path);
		ck_assert_int_ge(fd, 0);
		unlink(path);
		ck_assert_int_eq(ftruncate(fd, (off_t)n), 0);
		p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ck_assert_ptr_ne(p, MAP_FAILED);
		close(fd);
		return p;
	}
}

static void
buf_put(enum kind k, uint8_t *p, size_t n)
{
	if (k == HEAP)
		free(p);
	else if (k == FILEMAP)
		munmap(p, n);
}

/* Every kind x size x direction against remote (owner's bytes at
 * owner). */
static void
kinds_sizes(rma_remote_t *remote, uint8_t *owner)
{
	static uint8_t stack[MAXSIZE];

	for (int k = 0; k < NKINDS; k++) {
		for (size_t i = 0; i < NSIZES; i++) {
			size_t n = sizes[i], roff = 4096 * i + 3;
			uint8_t *buf = buf_get(k, stack, n);
			uint32_t seed = (uint32_t)(k * 100 + i);
			rma_status_t st;

			harness_fill(buf, n, seed);
			memset(owner + roff, 0, n);
			ck_assert_int_eq(rma_put_buf_sync(cb, buf, n, remote,
							  roff, RC, WAIT_MS),
					 RMA_OK);
			ck_assert_msg(memcmp(owner + roff, buf, n) == 0,
				      "put of %zu bytes (kind %d) differs", n,
				      k);
			harness_fill(owner + roff, n, seed + 7);
			memset(buf, 0, n);
			st =
			    rma_get_buf_sync(cb, buf, n, remote, roff, WAIT_MS);
			ck_assert_msg(st == RMA_OK,
				      "get of %zu bytes (kind %d): %s (%s), "
				      "%zu in flight",
				      n, k, rma_strerror(st),
				      rma_last_error(cb), rma_in_flight(cb));
			ck_assert_msg(memcmp(owner + roff, buf, n) == 0,
				      "get of %zu bytes (kind %d) differs", n,
				      k);
			buf_put(k, buf, n);
		}
	}
}

START_TEST(test_kinds_sizes_two_daemons)
{
	kinds_sizes(remote_a, rma_region_ptr(ra));
}
END_TEST

START_TEST(test_kinds_sizes_same_daemon)
{
	kinds_sizes(remote_b, rma_region_ptr(rb));
}
END_TEST

struct tally {
	int done, ok;
	uint64_t bytes;
};

static void
tally_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	struct tally *t = arg;

	t->done++;
	t->ok += st == RMA_OK;
	t->bytes += rma_request_bytes(req);
}

static void
progress_until(const int *done, int want, double seconds)
{
	double deadline = harness_now() + seconds;

	while (*done < want && harness_now() < deadline)
		ck_assert_int_eq(rma_wait(cb, 100) == RMA_ERR_DAEMON_GONE, 0);
	ck_assert_int_eq(*done, want);
}

/* A small put copies at the call: the buffer freed, or overwritten, right
 * after does not matter. */
START_TEST(test_small_put_buffer_free_at_return)
{
	enum { N = 300, SZ = 777 };
	uint8_t *a = rma_region_ptr(ra), *want = malloc(N * SZ);
	struct tally t = {0};
	uint8_t reused[SZ];

	ck_assert_ptr_nonnull(want);
	harness_fill(want, N * SZ, 5);
	memset(a, 0, N * SZ);
	for (int i = 0; i < N; i++) {
		uint8_t *p = malloc(SZ);

		ck_assert_ptr_nonnull(p);
		memcpy(p, want + i * SZ, SZ);
		/* every other one from a stack buffer written again next */
		if (i % 2) {
			memcpy(reused, p, SZ);
			free(p);
			p = reused;
		}
		ck_assert_int_eq(rma_put_buf(cb, p, SZ, remote_a,
					     (uint64_t)i * SZ, RC, tally_cb, &t,
					     NULL),
				 RMA_OK);
		memset(p, 0xee, SZ);
		if (p != reused)
			free(p);
	}
	progress_until(&t.done, N, 30);
	ck_assert_int_eq(t.ok, N);
	ck_assert_uint_eq(t.bytes, (uint64_t)N * SZ);
	ck_assert_int_eq(memcmp(a, want, N * SZ), 0);
	free(want);
}
END_TEST

/* Many transfers at once, far over the area: they queue, in order, and
 * every byte lands where it should; then as many gets. */
START_TEST(test_many_over_capacity)
{
	enum { N = 600 };
	uint8_t *a = rma_region_ptr(ra);
	size_t len[N], off[N], total = 0;
	struct tally t = {0};
	uint8_t *src, *dst;

	for (int i = 0; i < N; i++) {
		len[i] =
		    i % 25 == 0 ? 2 * PIECE + 17 : (size_t)(i * 131 % 9000 + 1);
		off[i] = total;
		total += len[i];
	}
	ck_assert_uint_le(total, REGION_SIZE);
	src = malloc(total);
	dst = calloc(1, total);
	ck_assert(src != NULL && dst != NULL);
	harness_fill(src, total, 11);
	memset(a, 0, total);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_put_buf(cb, src + off[i], len[i], remote_a,
					     off[i], RC, tally_cb, &t, NULL),
				 RMA_OK);
	progress_until(&t.done, N, 60);
	ck_assert_int_eq(t.ok, N);
	ck_assert_uint_eq(t.bytes, total);
	ck_assert_int_eq(memcmp(a, src, total), 0);

	/* the same in gets, into the slices of one buffer */
	harness_fill(a, total, 12);
	memset(&t, 0, sizeof(t));
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(rma_get_buf(cb, dst + off[i], len[i], remote_a,
					     off[i], tally_cb, &t, NULL),
				 RMA_OK);
	progress_until(&t.done, N, 60);
	ck_assert_int_eq(t.ok, N);
	ck_assert_int_eq(memcmp(a, dst, total), 0);
	free(src);
	free(dst);
}
END_TEST

/* The queue keeps the order of the calls: with the target stopped, a big
 * put fills the area (four pieces in flight, the rest waiting) and a small
 * put and a get called after it wait behind it, though each would fit
 * alone; once it is canceled and the target goes on, they follow. */
START_TEST(test_queue_order)
{
	size_t n = 1u << 20;
	uint8_t *big = malloc(n), small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t got[8] = {0};
	rma_request_t *rx, *ry, *rz;

	ck_assert_ptr_nonnull(big);
	harness_fill(big, n, 6);
	memset(rma_region_ptr(ra), 0, n + 64);
	memset((uint8_t *)rma_region_ptr(ra) + n + 64, 0x5a, 8);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(
	    rma_put_buf(cb, big, n, remote_a, 0, RC, NULL, NULL, &rx), RMA_OK);
	ck_assert_int_eq(rma_in_flight(cb), 4);
	ck_assert_int_eq(
	    rma_put_buf(cb, small, 8, remote_a, n, RC, NULL, NULL, &ry),
	    RMA_OK);
	ck_assert_int_eq(
	    rma_get_buf(cb, got, 8, remote_a, n + 64, NULL, NULL, &rz), RMA_OK);
	ck_assert_int_eq(rma_progress(cb), RMA_OK);
	ck_assert_int_eq(rma_in_flight(cb), 4);
	ck_assert(!rma_request_is_completed(ry) &&
		  !rma_request_is_completed(rz));
	ck_assert_int_eq(rma_request_cancel(cb, rx), RMA_OK);
	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	ck_assert_int_eq(rma_request_wait(cb, rx, WAIT_MS), RMA_ERR_CANCELED);
	/* exactly the four pieces issued before the cancel */
	ck_assert_uint_eq(rma_request_bytes(rx), 4 * PIECE);
	ck_assert_int_eq(rma_request_wait(cb, ry, WAIT_MS), RMA_OK);
	ck_assert_int_eq(rma_request_wait(cb, rz, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), big, 4 * PIECE), 0);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(ra) + n, small, 8),
			 0);
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(got[i], 0x5a);
	rma_request_release(rx);
	rma_request_release(ry);
	rma_request_release(rz);
	free(big);
}
END_TEST

/* Cancel right after the call: pieces not issued yet (more than the area
 * holds) never are; the request completes CANCELED, having moved less
 * than all. */
START_TEST(test_cancel_queued_pieces)
{
	size_t n = 4u << 20;
	uint8_t *src = malloc(n);
	rma_request_t *req;
	struct tally t = {0};

	ck_assert_ptr_nonnull(src);
	harness_fill(src, n, 3);
	ck_assert_int_eq(
	    rma_put_buf(cb, src, n, remote_a, 0, RC, tally_cb, &t, &req),
	    RMA_OK);
	ck_assert_int_eq(rma_request_cancel(cb, req), RMA_OK);
	ck_assert_int_eq(rma_request_wait(cb, req, WAIT_MS), RMA_ERR_CANCELED);
	ck_assert_uint_lt(rma_request_bytes(req), n);
	ck_assert_int_eq(t.done, 1);
	rma_request_release(req);
	ck_assert_int_eq(rma_in_flight(cb), 0);
	/* the area is whole again: a transfer of all of it works */
	ck_assert_int_eq(rma_put_buf_sync(cb, src, n, remote_a, 0, RC, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), src, n), 0);
	ck_assert_int_eq(t.done, 1);
	free(src);
}
END_TEST

/* A get into a buffer while the remote daemon dies: it fails clearly, no
 * hang, and the client goes on working. The target is stopped first, so
 * the get is certainly in flight when it dies. */
START_TEST(test_get_while_daemon_dies)
{
	size_t n = 4u << 20;
	uint8_t *dst = calloc(1, n), *src = malloc(PIECE);
	rma_request_t *req;
	rma_status_t st;

	ck_assert(dst != NULL && src != NULL);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_get_buf(cb, dst, n, remote_a, 0, NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_progress(cb), RMA_OK);
	harness_daemon_kill(&da);
	st = rma_request_wait(cb, req, WAIT_MS);
	ck_assert_msg(st != RMA_OK && st != RMA_ERR_TIMEOUT,
		      "get ended with %s", rma_strerror(st));
	ck_assert_str_ne(rma_request_detail(req), "");
	rma_request_release(req);
	ck_assert_int_eq(rma_in_flight(cb), 0);
	/* still usable: the same daemon's region, the whole area again */
	harness_fill(src, PIECE, 8);
	ck_assert_int_eq(
	    rma_put_buf_sync(cb, src, PIECE, remote_b, 0, RC, WAIT_MS), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), src, PIECE), 0);
	ck_assert_int_eq(rma_get_buf_sync(cb, dst, n, remote_b, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), dst, n), 0);
	free(dst);
	free(src);
}
END_TEST

/* The queue is bounded: with the target stopped, the area stays full, and
 * past 4096 waiting transfers the call says LIMIT; nothing is lost. */
START_TEST(test_queue_limit)
{
	enum { N = 4200, SZ = PIECE + 1 };
	uint8_t *src = malloc(SZ);
	struct tally t = {0};
	int queued = 0;
	rma_status_t st = RMA_OK;

	ck_assert_ptr_nonnull(src);
	harness_fill(src, SZ, 4);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	while (queued < N) {
		st = rma_put_buf(cb, src, SZ, remote_a, 0, RC, tally_cb, &t,
				 NULL);
		if (st != RMA_OK)
			break;
		queued++;
	}
	ck_assert_int_eq(st, RMA_ERR_LIMIT);
	ck_assert_str_ne(rma_last_error(cb), "");
	/* 4096 wait; the first ones hold the area */
	ck_assert_int_ge(queued, 4096);
	ck_assert_int_lt(queued, 4096 + 8);
	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	progress_until(&t.done, queued, 60);
	ck_assert_int_eq(t.ok, queued);
	free(src);
}
END_TEST

/* What the library refuses, and the ranges it decides alone. */
START_TEST(test_bad_arguments)
{
	uint8_t buf[16] = {0};
	rma_request_t *req;

	ck_assert_int_eq(
	    rma_put_buf(cb, NULL, 8, remote_a, 0, 0, NULL, NULL, NULL),
	    RMA_ERR_INVALID);
	ck_assert_int_eq(rma_get_buf(cb, buf, 0, remote_a, 0, NULL, NULL, NULL),
			 RMA_ERR_INVALID);
	ck_assert_int_eq(
	    rma_put_buf(cb, buf, 8, remote_a, 0, 0x80, NULL, NULL, NULL),
	    RMA_ERR_INVALID);
	ck_assert_int_eq(rma_put_buf(cb, buf, 8, NULL, 0, 0, NULL, NULL, NULL),
			 RMA_ERR_INVALID);
	ck_assert_int_eq(
	    rma_put_buf(NULL, buf, 8, remote_a, 0, 0, NULL, NULL, NULL),
	    RMA_ERR_INVALID);
	ck_assert_int_eq(rma_get_buf(cb, buf, 16, remote_a, REGION_SIZE - 8,
				     NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_request_status(req), RMA_ERR_OUT_OF_BOUNDS);
	rma_request_release(req);
	ck_assert_int_eq(rma_in_flight(cb), 0);
}
END_TEST

/* RMA_STAGING_SIZE is the environment's: what is not a size in range
 * fails the call, clearly, and a good one then works. */
START_TEST(test_staging_size_env)
{
	static const char *const bad[] = {
	    "abc",	"-1",  "0",
	    "1K",	"12Q", "2G",
	    "4M ",	" 4M", "99999999999999999999",
	    "0x100000", "255K"};
	uint8_t buf[64];

	harness_fill(buf, sizeof(buf), 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("RMA_STAGING_SIZE", bad[i], 1);
		ck_assert_int_eq(rma_put_buf(cb, buf, sizeof(buf), remote_a, 0,
					     0, NULL, NULL, NULL),
				 RMA_ERR_INVALID);
		ck_assert_msg(strstr(rma_last_error(cb), "RMA_STAGING_SIZE"),
			      "%s: %s", bad[i], rma_last_error(cb));
	}
	ck_assert_int_eq(rma_in_flight(cb), 0);
	setenv("RMA_STAGING_SIZE", "1m", 1);
	ck_assert_int_eq(
	    rma_put_buf_sync(cb, buf, sizeof(buf), remote_a, 0, RC, WAIT_MS),
	    RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), buf, sizeof(buf)), 0);
}
END_TEST

/* fork(): the child's transfers fail at once; the parent's go on. */
START_TEST(test_fork_child_refused)
{
	uint8_t buf[256];
	int status;
	pid_t pid;

	harness_fill(buf, sizeof(buf), 9);
	ck_assert_int_eq(
	    rma_put_buf_sync(cb, buf, sizeof(buf), remote_a, 0, RC, WAIT_MS),
	    RMA_OK);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = rma_put_buf(cb, buf, sizeof(buf), remote_a, 0, 0, NULL,
				     NULL, NULL) == RMA_ERR_INVALID &&
			 rma_get_buf(cb, buf, sizeof(buf), remote_a, 0, NULL,
				     NULL, NULL) == RMA_ERR_INVALID;

		rma_disconnect(cb);
		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(
	    rma_get_buf_sync(cb, buf, sizeof(buf), remote_a, 0, WAIT_MS),
	    RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), buf, sizeof(buf)), 0);
}
END_TEST

/* A flush completed with RMA_OK means every operation submitted to its
 * peer before it has completed (rma.h). A big put through the staging
 * area returned RMA_OK with most of its pieces still waiting for room:
 * a flush called after it completes only once the put has, every byte
 * at the target. The target is stopped so that the put has exactly four
 * pieces out when the flush is called. */
struct flush_seen {
	rma_request_t *put;
	int put_done_at_flush; /* -1 until the flush completes */
};

static void
flush_seen_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	struct flush_seen *f = arg;

	(void)req;
	(void)st;
	f->put_done_at_flush = rma_request_is_completed(f->put);
}

START_TEST(test_flush_after_queued_put)
{
	size_t n = 1u << 20;
	uint8_t *src = malloc(n);
	struct flush_seen f = {NULL, -1};
	rma_request_t *freq;

	ck_assert_ptr_nonnull(src);
	harness_fill(src, n, 41);
	memset(rma_region_ptr(ra), 0, n);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(
	    rma_put_buf(cb, src, n, remote_a, 0, RC, NULL, NULL, &f.put),
	    RMA_OK);
	ck_assert_int_eq(rma_in_flight(cb), 4);
	ck_assert_int_eq(rma_flush(cb, peer_a, flush_seen_cb, &f, &freq),
			 RMA_OK);
	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	ck_assert_int_eq(rma_request_wait(cb, freq, WAIT_MS), RMA_OK);
	ck_assert_msg(f.put_done_at_flush == 1,
		      "the flush completed before the put it follows "
		      "(%llu of %zu bytes moved)",
		      (unsigned long long)rma_request_bytes(f.put), n);
	ck_assert_int_eq(rma_request_status(f.put), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), src, n), 0);
	rma_request_release(freq);
	rma_request_release(f.put);
	/* with nothing queued, a flush is the plain one */
	ck_assert_int_eq(rma_flush_sync(cb, peer_a, WAIT_MS), RMA_OK);
	ck_assert_int_eq(rma_in_flight(cb), 0);
	free(src);
}
END_TEST

/* rma_remote_release() says operations already submitted on a remote are
 * not affected: a big put that returned RMA_OK, its remote released
 * while most of its pieces still wait for staging room, moves every
 * byte. The target is stopped so that exactly four pieces are in flight
 * when the release goes. Then the same for a get. */
START_TEST(test_remote_released_mid_transfer)
{
	size_t n = 1u << 20;
	uint8_t *src = malloc(n), *back = calloc(1, n);
	rma_remote_t *mine;
	rma_request_t *req;

	ck_assert(src != NULL && back != NULL);
	harness_fill(src, n, 31);
	memset(rma_region_ptr(ra), 0, n);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer_a, rma_region_descriptor(ra), &mine),
	    RMA_OK);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_put_buf(cb, src, n, mine, 0, RC, NULL, NULL, &req),
			 RMA_OK);
	ck_assert_int_eq(rma_in_flight(cb), 4);
	rma_remote_release(cb, mine);
	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	ck_assert_msg(rma_request_wait(cb, req, WAIT_MS) == RMA_OK,
		      "put on a released remote: %s (%s), %llu of %zu bytes",
		      rma_strerror(rma_request_status(req)),
		      rma_request_detail(req),
		      (unsigned long long)rma_request_bytes(req), n);
	ck_assert_uint_eq(rma_request_bytes(req), n);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), src, n), 0);
	rma_request_release(req);

	ck_assert_int_eq(
	    rma_remote_import(cb, peer_a, rma_region_descriptor(ra), &mine),
	    RMA_OK);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_get_buf(cb, back, n, mine, 0, NULL, NULL, &req),
			 RMA_OK);
	rma_remote_release(cb, mine);
	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	ck_assert_msg(rma_request_wait(cb, req, WAIT_MS) == RMA_OK,
		      "get on a released remote: %s (%s)",
		      rma_strerror(rma_request_status(req)),
		      rma_request_detail(req));
	ck_assert_int_eq(memcmp(back, src, n), 0);
	rma_request_release(req);
	ck_assert_int_eq(rma_in_flight(cb), 0);
	free(src);
	free(back);
}
END_TEST

/* A take-over of the client's daemon cuts a transfer under way (its
 * pieces complete RESTARTED or SHUTDOWN, none is issued again); the
 * staging area is re-attached as any region is, and transfers go on. */
START_TEST(test_take_over_mid_transfer)
{
	static const char *const flags[] = {"--take-over", "--connect-timeout",
					    "2", NULL};
	size_t n = 4u << 20;
	uint8_t *src = malloc(n), *back = calloc(1, n);
	rma_request_t *req;
	rma_status_t st;

	ck_assert(src != NULL && back != NULL);
	harness_fill(src, n, 21);
	ck_assert_int_eq(
	    rma_put_buf(cb, src, n, remote_a, 0, RC, NULL, NULL, &req), RMA_OK);
	/* nothing completed yet: the client made no progress */
	ck_assert_int_eq(rma_in_flight(cb), 4);
	harness_daemon_take_over(&db, flags, 10);
	st = rma_request_wait(cb, req, WAIT_MS);
	ck_assert_msg(st == RMA_ERR_RESTARTED || st == RMA_ERR_SHUTDOWN,
		      "cut transfer ended with %s", rma_strerror(st));
	ck_assert_uint_lt(rma_request_bytes(req), n);
	rma_request_release(req);
	ck_assert_int_eq(rma_in_flight(cb), 0);
	ck_assert_uint_eq(rma_reattach_count(cb), 1);
	ck_assert_int_eq(rma_put_buf_sync(cb, src, n, remote_a, 0, RC, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(ra), src, n), 0);
	ck_assert_int_eq(rma_get_buf_sync(cb, back, n, remote_a, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(back, src, n), 0);
	free(src);
	free(back);
}
END_TEST

/* A get_buf_sync that times out gives the buffer back: the transfer is
 * canceled, and its pieces in flight, completing later, write nothing
 * into it. The target is stopped, so the get cannot complete in time. */
START_TEST(test_get_sync_timeout_gives_buffer_back)
{
	size_t n = 1u << 20;
	uint8_t *dst = malloc(n);

	ck_assert_ptr_nonnull(dst);
	harness_fill(rma_region_ptr(ra), n, 31);
	ck_assert_int_eq(kill(da.pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_get_buf_sync(cb, dst, n, remote_a, 0, 200),
			 RMA_ERR_TIMEOUT);
	/* the four pieces issued are still in flight, the rest dropped */
	ck_assert_int_eq(rma_in_flight(cb), 4);
	memset(dst, 0x77, n);
	ck_assert_int_eq(kill(da.pid, SIGCONT), 0);
	for (double end = harness_now() + 20;
	     rma_in_flight(cb) > 0 && harness_now() < end;)
		ck_assert_int_ne(rma_wait(cb, 100), RMA_ERR_DAEMON_GONE);
	ck_assert_int_eq(rma_in_flight(cb), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(dst[i], 0x77);
	/* and the area is whole again */
	ck_assert_int_eq(rma_get_buf_sync(cb, dst, n, remote_a, 0, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp(dst, rma_region_ptr(ra), n), 0);
	free(dst);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("staging");
	TCase *tc = tcase_create("staging");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_kinds_sizes_two_daemons);
	tcase_add_test(tc, test_kinds_sizes_same_daemon);
	tcase_add_test(tc, test_small_put_buffer_free_at_return);
	tcase_add_test(tc, test_many_over_capacity);
	tcase_add_test(tc, test_queue_order);
	tcase_add_test(tc, test_cancel_queued_pieces);
	tcase_add_test(tc, test_get_while_daemon_dies);
	tcase_add_test(tc, test_queue_limit);
	tcase_add_test(tc, test_bad_arguments);
	tcase_add_test(tc, test_staging_size_env);
	tcase_add_test(tc, test_fork_child_refused);
	tcase_add_test(tc, test_flush_after_queued_put);
	tcase_add_test(tc, test_remote_released_mid_transfer);
	tcase_add_test(tc, test_take_over_mid_transfer);
	tcase_add_test(tc, test_get_sync_timeout_gives_buffer_back);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
