/* SPDX-License-Identifier: BSD-2-Clause */
/* Remote atomics and read-only descriptors end to end: three real rmad
 * processes on loopback (UCX over tcp), clients through librma in threads
 * of their own (a client handle is not thread-safe; one per thread is
 * the documented way). The owner's region is checked in its own mapping.
 * RMAD_PROTOCOL=ucx runs it all with rma_protocol = ucx. */
#include <check.h>

#include "check_main.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descriptor.h"
#include "harness.h"
#include "rma.h"

#define NDAEMONS 3
#define REGION_SIZE 4096
#define WAIT_MS 20000
#define COUNTER_OFF 64
#define LOCK_OFF 128
#define INSIDE_OFF 136
#define PLAIN_OFF 144

static struct daemon_proc dp[NDAEMONS];
static rma_client_t *owner;
static rma_region_t *region;
static char desc[256], ro_desc[256];

static void
setup(void)
{
	static const char *const flags[] = {"--connect-timeout", "2",
					    "--max-in-flight", "100000", NULL};

	for (int i = 0; i < NDAEMONS; i++)
		harness_daemon_start(&dp[i], flags);
	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	snprintf(desc, sizeof(desc), "%s", rma_region_descriptor(region));
	snprintf(ro_desc, sizeof(ro_desc), "%s",
		 rma_region_read_only_descriptor(region));
}

static void
teardown(void)
{
	if (owner != NULL)
		rma_disconnect(owner);
	owner = NULL;
	for (int i = NDAEMONS; i-- > 0;)
		if (dp[i].pid > 0)
			harness_daemon_stop(&dp[i], SIGTERM);
}

/* A client of daemon `via` with the owner's region imported through
 * daemon 0's listen address (via 0: the same-daemon path). */
struct user {
	int via;
	rma_client_t *c;
	rma_remote_t *rem;
};

static void
user_open(struct user *u, int via, const char *descriptor)
{
	rma_peer_t *peer;

	u->via = via;
	ck_assert_int_eq(rma_connect(dp[via].socket, &u->c), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(u->c, dp[0].listen, &peer), RMA_OK);
	ck_assert_int_eq(rma_remote_import(u->c, peer, descriptor, &u->rem),
			 RMA_OK);
}

static void
user_close(struct user *u)
{
	rma_disconnect(u->c);
}

static volatile uint64_t *
word(size_t off)
{
	return (volatile uint64_t *)((char *)rma_region_ptr(region) + off);
}

/* ---- K clients on 3 daemons fetch-add one counter N times each ---- */

#define K_CLIENTS 6
#define N_ADDS 3000
#define WINDOW 64

struct adder {
	struct user u;
	uint64_t *olds; /* the old values its adds returned */
	size_t n_olds;
	int failures;
	int local_adds; /* owner-side: __atomic adds on the mapping */
};

static void
adder_done(rma_request_t *req, rma_status_t st, void *arg)
{
	struct adder *a = arg;

	if (st != RMA_OK) {
		a->failures++;
		return;
	}
	a->olds[a->n_olds++] = rma_request_value(req);
}

static void *
adder_run(void *arg)
{
	struct adder *a = arg;
	size_t issued = 0;

	while (a->n_olds + (size_t)a->failures < N_ADDS) {
		while (issued < N_ADDS &&
		       issued - a->n_olds - (size_t)a->failures < WINDOW) {
			if (rma_atomic(a->u.c, a->u.rem, COUNTER_OFF,
				       RMA_ATOMIC_FETCH_ADD, 8, 1, 0,
				       adder_done, a, NULL) != RMA_OK) {
				a->failures++;
			}
			issued++;
		}
		if (rma_progress(a->u.c) != RMA_OK)
			break;
		if (a->n_olds + (size_t)a->failures < issued)
			harness_wait_fd(rma_fd(a->u.c), 1.0);
	}
	return NULL;
}

static int remote_running;

/* The owner adds to the same word through its own mapping for as long as
 * the remote adds go on (and at least local_adds times). */
static void *
owner_adder_run(void *arg)
{
	struct adder *a = arg;
	int done = 0;

	while (done < a->local_adds ||
	       __atomic_load_n(&remote_running, __ATOMIC_ACQUIRE)) {
		__atomic_fetch_add(word(COUNTER_OFF), 1, __ATOMIC_SEQ_CST);
		done++;
	}
	a->local_adds = done;
	return NULL;
}

static int
cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static void
run_counter(int local_adds)
{
	struct adder ad[K_CLIENTS], owner_ad = {.local_adds = local_adds};
	pthread_t th[K_CLIENTS], owner_th;
	uint64_t *all = calloc(K_CLIENTS * N_ADDS, sizeof(*all));
	size_t n = 0;

	ck_assert_ptr_nonnull(all);
	*word(COUNTER_OFF) = 0;
	memset(ad, 0, sizeof(ad));
	for (int k = 0; k < K_CLIENTS; k++) {
		user_open(&ad[k].u, k % NDAEMONS, desc);
		ad[k].olds = calloc(N_ADDS, sizeof(uint64_t));
		ck_assert_ptr_nonnull(ad[k].olds);
	}
	remote_running = 1;
	for (int k = 0; k < K_CLIENTS; k++)
		ck_assert_int_eq(
		    pthread_create(&th[k], NULL, adder_run, &ad[k]), 0);
	if (local_adds > 0)
		ck_assert_int_eq(
		    pthread_create(&owner_th, NULL, owner_adder_run, &owner_ad),
		    0);
	for (int k = 0; k < K_CLIENTS; k++)
		pthread_join(th[k], NULL);
	__atomic_store_n(&remote_running, 0, __ATOMIC_RELEASE);
	if (local_adds > 0)
		pthread_join(owner_th, NULL);
	for (int k = 0; k < K_CLIENTS; k++) {
		ck_assert_msg(ad[k].failures == 0,
			      "client %d (daemon %d): %d adds failed: %s", k,
			      ad[k].u.via, ad[k].failures,
			      rma_last_error(ad[k].u.c));
		ck_assert_uint_eq(ad[k].n_olds, N_ADDS);
		memcpy(all + n, ad[k].olds, N_ADDS * sizeof(uint64_t));
		n += N_ADDS;
		free(ad[k].olds);
		user_close(&ad[k].u);
	}
	ck_assert_uint_eq(*word(COUNTER_OFF),
			  (uint64_t)K_CLIENTS * N_ADDS +
			      (uint64_t)owner_ad.local_adds);
	/* Without the owner's adds, every remote add saw a distinct old
	 * value: exactly 0 .. K*N-1. With them, still distinct. */
	qsort(all, n, sizeof(*all), cmp_u64);
	for (size_t i = 1; i < n; i++)
		ck_assert_msg(all[i] != all[i - 1],
			      "two adds returned the same old value %llu",
			      (unsigned long long)all[i]);
	if (local_adds == 0)
		ck_assert_uint_eq(all[n - 1], n - 1);
	free(all);
}

START_TEST(test_counter_k_clients_3_daemons)
{
	run_counter(0);
}
END_TEST

START_TEST(test_counter_with_owner_local_atomics)
{
	run_counter(1000);
}
END_TEST

/* ---- a lock built on compare-and-swap ---- */

#define LOCKERS 4
#define LOCK_ROUNDS 150

struct locker {
	struct user u;
	uint64_t id;
	int violations;
	int errors;
	rma_region_t *scratch;
};

static rma_status_t
locker_atomic(struct locker *l, size_t off, rma_atomic_op_t op, uint64_t v,
	      uint64_t cmp, uint64_t *old)
{
	return rma_atomic_sync(l->u.c, l->u.rem, off, op, 8, v, cmp, old,
			       WAIT_MS);
}

static void *
locker_run(void *arg)
{
	struct locker *l = arg;
	uint64_t *s = rma_region_ptr(l->scratch);

	for (int r = 0; r < LOCK_ROUNDS; r++) {
		uint64_t old = 1, inside;

		/* acquire: swap 0 -> id */
		while (old != 0) {
			if (locker_atomic(l, LOCK_OFF, RMA_ATOMIC_CSWAP, l->id,
					  0, &old) != RMA_OK) {
				l->errors++;
				return NULL;
			}
		}
		if (locker_atomic(l, INSIDE_OFF, RMA_ATOMIC_FETCH_ADD, 1, 0,
				  &inside) != RMA_OK)
			l->errors++;
		if (inside != 0)
			l->violations++;
		/* a plain (non-atomic) read-modify-write by get and put:
		 * only the lock keeps increments from being lost */
		if (rma_get_sync(l->u.c, l->scratch, 0, l->u.rem, PLAIN_OFF, 8,
				 WAIT_MS) != RMA_OK)
			l->errors++;
		s[0]++;
		if (rma_put_sync(l->u.c, l->scratch, 0, l->u.rem, PLAIN_OFF, 8,
				 RMA_FLAG_REMOTE_COMPLETION, WAIT_MS) != RMA_OK)
			l->errors++;
		if (locker_atomic(l, INSIDE_OFF, RMA_ATOMIC_FETCH_ADD,
				  (uint64_t)-1, 0, &inside) != RMA_OK)
			l->errors++;
		if (inside != 1)
			l->violations++;
		/* release: only the holder may */
		if (locker_atomic(l, LOCK_OFF, RMA_ATOMIC_SWAP, 0, 0, &old) !=
		    RMA_OK)
			l->errors++;
		if (old != l->id)
			l->violations++;
	}
	return NULL;
}

START_TEST(test_cswap_lock)
{
	struct locker lk[LOCKERS];
	pthread_t th[LOCKERS];

	memset(lk, 0, sizeof(lk));
	for (int k = 0; k < LOCKERS; k++) {
		user_open(&lk[k].u, k % NDAEMONS, desc);
		lk[k].id = (uint64_t)k + 1;
		ck_assert_int_eq(
		    rma_region_alloc(lk[k].u.c, 4096, &lk[k].scratch), RMA_OK);
	}
	for (int k = 0; k < LOCKERS; k++)
		ck_assert_int_eq(
		    pthread_create(&th[k], NULL, locker_run, &lk[k]), 0);
	for (int k = 0; k < LOCKERS; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < LOCKERS; k++) {
		ck_assert_int_eq(lk[k].errors, 0);
		ck_assert_int_eq(lk[k].violations, 0);
		user_close(&lk[k].u);
	}
	ck_assert_uint_eq(*word(PLAIN_OFF), (uint64_t)LOCKERS * LOCK_ROUNDS);
	ck_assert_uint_eq(*word(LOCK_OFF), 0);
	ck_assert_uint_eq(*word(INSIDE_OFF), 0);
}
END_TEST

/* ---- widths, values, and errors that touch nothing ---- */

static int immediate_calls;

static void
count_call(rma_request_t *req, rma_status_t st, void *arg)
{
	(void)req;
	(void)st;
	(void)arg;
	immediate_calls++;
}

START_TEST(test_values_and_errors)
{
	for (int via = 0; via < 2; via++) {
		struct user u;
		uint64_t old = 42;
		rma_request_t *req = NULL;
		rma_region_t *mine;

		user_open(&u, via, desc);
		*word(0) = 0x1111111122222222ull;
		ck_assert_int_eq(rma_atomic_sync(u.c, u.rem, 0,
						 RMA_ATOMIC_FETCH_ADD, 4, 1, 0,
						 &old, WAIT_MS),
				 RMA_OK);
		ck_assert_uint_eq(old, 0x22222222u);
		ck_assert_uint_eq(*word(0), 0x1111111122222223ull);
		ck_assert_int_eq(rma_atomic_sync(u.c, u.rem, 4,
						 RMA_ATOMIC_CSWAP, 4, 7,
						 0x11111111u, &old, WAIT_MS),
				 RMA_OK);
		ck_assert_uint_eq(old, 0x11111111u);
		ck_assert_uint_eq(*word(0), 0x0000000722222223ull);
		ck_assert_int_eq(rma_atomic_sync(u.c, u.rem, 0, RMA_ATOMIC_XOR,
						 8, ~0ull, 0, &old, WAIT_MS),
				 RMA_OK);
		ck_assert_uint_eq(old, 0x0000000722222223ull);
		ck_assert_uint_eq(*word(0), ~0x0000000722222223ull);

		/* misaligned and outside: completed before rma_atomic
		 * returns, callback run, nothing touched */
		*word(8) = 5;
		immediate_calls = 0;
		ck_assert_int_eq(rma_atomic(u.c, u.rem, 9, RMA_ATOMIC_ADD, 8, 1,
					    0, count_call, NULL, &req),
				 RMA_OK);
		ck_assert_int_eq(immediate_calls, 1);
		ck_assert_int_eq(rma_request_status(req), RMA_ERR_INVALID);
		rma_request_release(req);
		ck_assert_int_eq(rma_atomic(u.c, u.rem, REGION_SIZE,
					    RMA_ATOMIC_ADD, 4, 1, 0, count_call,
					    NULL, &req),
				 RMA_OK);
		ck_assert_int_eq(immediate_calls, 2);
		ck_assert_int_eq(rma_request_status(req),
				 RMA_ERR_OUT_OF_BOUNDS);
		rma_request_release(req);
		ck_assert_int_eq(rma_atomic(u.c, u.rem, 8, RMA_ATOMIC_ADD, 2, 1,
					    0, NULL, NULL, NULL),
				 RMA_ERR_INVALID);
		ck_assert_int_eq(rma_atomic(u.c, u.rem, 8, (rma_atomic_op_t)10,
					    8, 1, 0, NULL, NULL, NULL),
				 RMA_ERR_INVALID);
		/* the same for puts: outside the resolved length */
		ck_assert_int_eq(rma_region_alloc(u.c, 64, &mine), RMA_OK);
		ck_assert_int_eq(rma_put(u.c, mine, 0, u.rem, REGION_SIZE - 4,
					 8, 0, count_call, NULL, &req),
				 RMA_OK);
		ck_assert_int_eq(immediate_calls, 3);
		ck_assert_int_eq(rma_request_status(req),
				 RMA_ERR_OUT_OF_BOUNDS);
		rma_request_release(req);
		ck_assert_uint_eq(*word(8), 5);
		ck_assert_uint_eq(rma_in_flight(u.c), 0);
		user_close(&u);
	}
}
END_TEST

/* ---- cancel ---- */

static rma_status_t cancel_seen[8];

static void
cancel_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	(void)req;
	cancel_seen[(intptr_t)arg] = st;
}

START_TEST(test_cancel)
{
	for (int via = 0; via < 2; via++) {
		rma_request_t *req[8];
		struct user u;

		user_open(&u, via, desc);
		*word(0) = 0;
		for (int i = 0; i < 8; i++) {
			cancel_seen[i] = RMA_INPROGRESS;
			ck_assert_int_eq(
			    rma_atomic(u.c, u.rem, 0, RMA_ATOMIC_ADD, 8,
				       (uint64_t)1 << i, 0, cancel_cb,
				       (void *)(intptr_t)i, &req[i]),
			    RMA_OK);
		}
		/* the first went out at once (nothing was in flight); the
		 * others wait in the batch behind it */
		ck_assert_int_eq(rma_request_cancel(u.c, req[0]),
				 RMA_INPROGRESS);
		ck_assert_int_eq(rma_request_cancel(u.c, req[3]), RMA_OK);
		ck_assert_int_eq(cancel_seen[3], RMA_ERR_CANCELED);
		ck_assert_int_eq(rma_request_status(req[3]), RMA_ERR_CANCELED);
		ck_assert_int_eq(rma_request_cancel(u.c, req[7]), RMA_OK);
		ck_assert_int_eq(rma_request_cancel(u.c, req[7]),
				 RMA_ERR_INVALID);
		for (int i = 0; i < 8; i++) {
			rma_status_t want =
			    i == 3 || i == 7 ? RMA_ERR_CANCELED : RMA_OK;
			ck_assert_int_eq(rma_request_wait(u.c, req[i], WAIT_MS),
					 want);
			ck_assert_int_eq(cancel_seen[i], want);
			rma_request_release(req[i]);
		}
		ck_assert_uint_eq(*word(0), 0xffu & ~0x88u);
		ck_assert_uint_eq(rma_in_flight(u.c), 0);
		user_close(&u);
	}
}
END_TEST

/* ---- vectored transfers ---- */

static int vec_calls;
static rma_status_t vec_status;

static void
vec_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	(void)req;
	(void)arg;
	vec_calls++;
	vec_status = st;
}

START_TEST(test_vectored)
{
	for (int via = 0; via < 2; via++) {
		/* small pieces, one big one (travels alone), odd offsets */
		static const rma_iov_t iov[] = {
		    {0, 1000, 8},    {16, 1100, 1},	{100, 1200, 300},
		    {500, 3000, 96}, {600, 2000, 1000}, {1700, 1500, 7},
		};
		const size_t n = sizeof(iov) / sizeof(iov[0]);
		uint64_t total = 0;
		rma_region_t *mine;
		rma_request_t *req;
		uint8_t *l, *r = (uint8_t *)rma_region_ptr(region);
		struct user u;

		user_open(&u, via, desc);
		ck_assert_int_eq(rma_region_alloc(u.c, 4096, &mine), RMA_OK);
		l = rma_region_ptr(mine);
		harness_fill(l, 4096, 17 + via);
		memset(r + 1000, 0, 3000);
		vec_calls = 0;
		ck_assert_int_eq(rma_putv(u.c, mine, u.rem, iov, n,
					  RMA_FLAG_REMOTE_COMPLETION, vec_cb,
					  NULL, &req),
				 RMA_OK);
		ck_assert_int_eq(rma_request_wait(u.c, req, WAIT_MS), RMA_OK);
		ck_assert_int_eq(vec_calls, 1);
		for (size_t i = 0; i < n; i++) {
			ck_assert_msg(memcmp(r + iov[i].remote_offset,
					     l + iov[i].offset,
					     iov[i].length) == 0,
				      "putv piece %zu differs", i);
			total += iov[i].length;
		}
		ck_assert_uint_eq(rma_request_bytes(req), total);
		rma_request_release(req);

		/* back the other way, into a cleared local region */
		memset(l, 0, 4096);
		ck_assert_int_eq(
		    rma_getv(u.c, mine, u.rem, iov, n, vec_cb, NULL, &req),
		    RMA_OK);
		ck_assert_int_eq(rma_request_wait(u.c, req, WAIT_MS), RMA_OK);
		ck_assert_int_eq(vec_calls, 2);
		for (size_t i = 0; i < n; i++)
			ck_assert_msg(memcmp(r + iov[i].remote_offset,
					     l + iov[i].offset,
					     iov[i].length) == 0,
				      "getv piece %zu differs", i);
		rma_request_release(req);

		/* one piece outside: completed at once, nothing moved */
		{
			rma_iov_t bad[] = {{0, 3500, 8}, {0, 4090, 8}};
			*word(3496) = 0;
			ck_assert_int_eq(rma_putv(u.c, mine, u.rem, bad, 2, 0,
						  vec_cb, NULL, &req),
					 RMA_OK);
			ck_assert_int_eq(vec_calls, 3);
			ck_assert_int_eq(vec_status, RMA_ERR_OUT_OF_BOUNDS);
			rma_request_release(req);
			ck_assert_int_eq(rma_flush_sync(u.c, NULL, WAIT_MS),
					 RMA_OK);
			ck_assert_uint_eq(*word(3496), 0);
			ck_assert_uint_eq(rma_in_flight(u.c), 0);
		}
		/* cancel: a vectored request behind one in flight is still in
		 * the batch; all of it is canceled */
		{
			rma_request_t *first;
			ck_assert_int_eq(rma_put(u.c, mine, 0, u.rem, 0, 8, 0,
						 NULL, NULL, &first),
					 RMA_OK);
			memset(r + 1000, 0, 3000);
			ck_assert_int_eq(rma_putv(u.c, mine, u.rem, iov, n, 0,
						  vec_cb, NULL, &req),
					 RMA_OK);
			ck_assert_int_eq(rma_request_cancel(u.c, req), RMA_OK);
			ck_assert_int_eq(vec_calls, 4);
			ck_assert_int_eq(vec_status, RMA_ERR_CANCELED);
			ck_assert_int_eq(rma_request_wait(u.c, first, WAIT_MS),
					 RMA_OK);
			ck_assert_int_eq(rma_flush_sync(u.c, NULL, WAIT_MS),
					 RMA_OK);
			for (size_t i = 0; i < 3000; i++)
				ck_assert_msg(r[1000 + i] == 0,
					      "canceled putv wrote at %zu",
					      1000 + i);
			rma_request_release(first);
			rma_request_release(req);
		}
		user_close(&u);
	}
}
END_TEST

/* ---- read-only descriptors ---- */

static void
check_read_only(const char *descriptor, rma_status_t want_put)
{
	for (int via = 0; via < 2; via++) {
		struct user u;
		rma_region_t *mine;
		uint64_t old;

		user_open(&u, via, descriptor);
		ck_assert_int_eq(rma_region_alloc(u.c, 64, &mine), RMA_OK);
		*word(256) = 0xabcdef;
		ck_assert_int_eq(
		    rma_get_sync(u.c, mine, 0, u.rem, 256, 8, WAIT_MS), RMA_OK);
		ck_assert_uint_eq(*(uint64_t *)rma_region_ptr(mine), 0xabcdef);
		memset(rma_region_ptr(mine), 0x5a, 64);
		ck_assert_int_eq(rma_put_sync(u.c, mine, 0, u.rem, 256, 8,
					      RMA_FLAG_REMOTE_COMPLETION,
					      WAIT_MS),
				 want_put);
		ck_assert_int_eq(rma_atomic_sync(u.c, u.rem, 256,
						 RMA_ATOMIC_SWAP, 8, 1, 0, &old,
						 WAIT_MS),
				 want_put);
		/* a small put travels in a batch, a big one alone */
		ck_assert_int_eq(
		    rma_put_sync(u.c, mine, 0, u.rem, 264, 64, 0, WAIT_MS),
		    want_put);
		ck_assert_uint_eq(*word(256), 0xabcdef);
		ck_assert_uint_eq(*word(264), 0);
		user_close(&u);
	}
}

START_TEST(test_read_only_descriptor)
{
	struct descriptor d;

	ck_assert_int_eq(strncmp(ro_desc, "rmar:", 5), 0);
	ck_assert_int_eq(strlen(ro_desc), strlen(desc));
	check_read_only(ro_desc, RMA_ERR_PERMISSION);

	/* forged: the full prefix alone fails the checksum ... */
	{
		char forged[256];
		struct user u;
		rma_peer_t *peer;
		rma_remote_t *rem;

		snprintf(forged, sizeof(forged), "rma1:%s", ro_desc + 5);
		ck_assert_int_eq(rma_connect(dp[1].socket, &u.c), RMA_OK);
		ck_assert_int_eq(rma_peer_connect(u.c, dp[0].listen, &peer),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(u.c, peer, forged, &rem),
				 RMA_ERR_BAD_DESCRIPTOR);
		rma_disconnect(u.c);
	}
	/* ... and with a recomputed one it still carries the read-only
	 * secret, which the owner serves reads only through */
	{
		char forged[DESCRIPTOR_TEXT_SIZE];

		ck_assert_int_eq(descriptor_parse(ro_desc, strlen(ro_desc), &d),
				 0);
		ck_assert_int_eq(d.read_only, 1);
		d.read_only = 0;
		descriptor_format(&d, forged);
		ck_assert_int_eq(strncmp(forged, "rma1:", 5), 0);
		check_read_only(forged, RMA_ERR_PERMISSION);
	}
	/* the full descriptor still writes */
	{
		struct user u;
		uint64_t old;

		user_open(&u, 1, desc);
		ck_assert_int_eq(rma_atomic_sync(u.c, u.rem, 256,
						 RMA_ATOMIC_SWAP, 8, 7, 0, &old,
						 WAIT_MS),
				 RMA_OK);
		ck_assert_uint_eq(*word(256), 7);
		user_close(&u);
	}
	/* freed: both descriptors are stale */
	ck_assert_int_eq(rma_region_free(owner, region), RMA_OK);
	{
		struct user u;
		rma_peer_t *peer;
		rma_remote_t *rem;

		ck_assert_int_eq(rma_connect(dp[1].socket, &u.c), RMA_OK);
		ck_assert_int_eq(rma_peer_connect(u.c, dp[0].listen, &peer),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(u.c, peer, ro_desc, &rem),
				 RMA_ERR_STALE_DESCRIPTOR);
		rma_disconnect(u.c);
	}
}
END_TEST

static Suite *
atomic_suite(void)
{
	Suite *s = suite_create("atomic");
	TCase *tc = tcase_create("e2e");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_counter_k_clients_3_daemons);
	tcase_add_test(tc, test_counter_with_owner_local_atomics);
	tcase_add_test(tc, test_cswap_lock);
	tcase_add_test(tc, test_values_and_errors);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_vectored);
	tcase_add_test(tc, test_read_only_descriptor);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_main_run(atomic_suite());
}
