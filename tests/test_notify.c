/* SPDX-License-Identifier: BSD-2-Clause */
/* Notifying puts end to end: real rmad processes on loopback (UCX over
 * tcp), the owner and the initiators through librma, each client in a
 * thread of its own (a handle is not thread-safe), and rmactl for the CLI.
 * Ordering per initiator over 100k notifications from a peer daemon and
 * from the owner's own daemon, also with an owner that stalls (the ring
 * overflows onto the socket and back); an owner asleep in poll() woken
 * for every notification, and once for all that came while it slept;
 * an owner spinning on its ring as notifications are published; a slow
 * owner whose full queue makes puts fail with LIMIT, their bytes
 * not applied; one initiator that fills its share of the owner's bound
 * while the others still put; an owner that dies under a stream of puts;
 * the lines of `rmactl expose --notifications`. Each check decides on
 * counts and order: a wait's deadline only tells "never" from "late".
 * RMAD_PROTOCOL=ucx runs it all with rma_protocol = ucx. */
#include <check.h>

#include "check_main.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"
#include "status_call.h"

extern char **environ;

#define REGION_SIZE 65536
#define WAIT_MS 20000
/* How long an owner asleep in poll() may wait for a wake-up that must
 * come: a deadline for one that never comes, far beyond the 500 us a
 * wake-up may be held back and a loaded machine's delays. */
#define WAKE_DEADLINE 30.0
/* The daemon's bound on the notifications one client holds, and one
 * initiator's share of it: half of what the others leave free. */
#define QUEUE_MAX 4096
#define SHARE_ALONE (QUEUE_MAX / 2)

static struct daemon_proc dp[2];

static void
setup(void)
{
	/* two workers: the owner's connection may be on the other one
	 * than the inbound peers (worker 0) */
	static const char *const flags[] = {"--connect-timeout",
					    "2",
					    "--max-in-flight",
					    "100000",
					    "--workers",
					    "2",
					    NULL};

	for (int i = 0; i < 2; i++)
		harness_daemon_start(&dp[i], flags);
}

/* One worker (the default): the owner is served where the puts are
 * applied, and the daemon writes into its ring as it applies them, with
 * jobs only for what the ring cannot take then (notification.c). */
static void
setup_one_worker(void)
{
	static const char *const flags[] = {"--connect-timeout", "2",
					    "--max-in-flight", "100000", NULL};

	for (int i = 0; i < 2; i++)
		harness_daemon_start(&dp[i], flags);
}

static void
teardown(void)
{
	for (int i = 2; i-- > 0;) {
		if (dp[i].pid <= 0)
			continue;
		/* a failed check may have left it stopped */
		kill(dp[i].pid, SIGCONT);
		harness_daemon_stop(&dp[i], SIGTERM);
	}
}

struct user {
	rma_client_t *c;
	rma_remote_t *rem;
	rma_region_t *src;
};

/* A client of daemon `via` with desc imported through daemon 0. */
static void
user_open(struct user *u, int via, const char *desc)
{
	rma_peer_t *peer;

	ck_assert_int_eq(rma_connect(dp[via].socket, &u->c), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(u->c, dp[0].listen, &peer), RMA_OK);
	ck_assert_int_eq(rma_remote_import(u->c, peer, desc, &u->rem), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(u->c, 4096, &u->src), RMA_OK);
}

static rma_status_t
put_notify_sync(struct user *u, uint64_t src_off, uint64_t off, uint64_t len,
		uint64_t value)
{
	rma_request_t *req = NULL;
	rma_status_t st;

	st = rma_put_notify(u->c, u->src, src_off, u->rem, off, len, value, 0,
			    NULL, NULL, &req);
	if (st != RMA_OK)
		return st;
	st = rma_request_wait(u->c, req, WAIT_MS);
	rma_request_release(req);
	return st;
}

/* ---- ordering over 100k notifications ---- */

#define N_PER 50000
#define WINDOW 128
#define SLOTS 256

/* One initiator: puts of 8 bytes until N_PER of them succeeded, the
 * value = the sequence number, the bytes = the same number, into its own
 * half of the region. A put may fail with LIMIT when the owner falls
 * behind (the bound, by design); such a one must never be notified, and
 * every one that succeeded must be. */
#define SEQ_MAX (8 * N_PER)

struct sender;
struct sent {
	struct sender *s;
	uint64_t seq;
};

struct sender {
	struct user u;
	int via;
	uint64_t base; /* its half */
	uint64_t done, ok, limited, failures;
	uint64_t issued;
	int backoff;	   /* the owner is behind: let it catch up */
	struct sent *sent; /* [SEQ_MAX] */
	uint8_t *refused;  /* [SEQ_MAX]: failed with LIMIT */
	uint8_t *notified; /* [SEQ_MAX]: the owner heard of it */
};

static void
sender_done(rma_request_t *req, rma_status_t st, void *arg)
{
	struct sent *x = arg;
	struct sender *s = x->s;

	(void)req;
	s->done++;
	if (st == RMA_OK)
		s->ok++;
	else if (st == RMA_ERR_LIMIT)
		s->refused[x->seq] = 1, s->limited++, s->backoff = 1;
	else
		s->failures++;
}

static void *
sender_run(void *arg)
{
	struct sender *s = arg;
	double deadline = harness_now() + 120;

	while (s->ok < N_PER && s->failures == 0 && harness_now() < deadline) {
		/* as a user of LIMIT would: drain, pause, go on */
		if (s->backoff && s->done == s->issued) {
			harness_pause(0.005, deadline);
			s->backoff = 0;
		}
		while (!s->backoff && s->issued < SEQ_MAX &&
		       s->issued - s->done < WINDOW &&
		       s->ok + (s->issued - s->done) < N_PER) {
			uint64_t seq = s->issued, slot = seq % SLOTS;
			uint64_t *src = (uint64_t *)rma_region_ptr(s->u.src);
			/* the source word of a slot is rewritten only once
			 * the put that used it last has completed */
			src[slot] = seq;
			s->sent[seq].s = s;
			s->sent[seq].seq = seq;
			if (rma_put_notify(s->u.c, s->u.src, slot * 8, s->u.rem,
					   s->base + slot * 8, 8, seq, 0,
					   sender_done, &s->sent[seq],
					   NULL) != RMA_OK) {
				s->failures++;
				s->done++;
			}
			s->issued++;
		}
		if (rma_progress(s->u.c) != RMA_OK)
			break;
		if (s->done < s->issued)
			harness_wait_fd(rma_fd(s->u.c), 1.0);
	}
	return NULL;
}

/* What the owner saw of each initiator (who: 0 the peer's, 1 the local
 * one's), across the notifications it took. */
struct order_seen {
	char ids[2][64];
	uint64_t last[2], next[2];
	uint64_t bad_bytes;
};

/* One notification taken: from one initiator, in the order its puts were
 * applied, its bytes there already. */
static void
order_take(struct order_seen *o, struct sender *s, rma_region_t *region,
	   const rma_notification_t *n)
{
	int who;
	uint64_t w;

	ck_assert_ptr_eq(n->region, region);
	ck_assert_uint_eq(n->length, 8);
	who = n->offset >= SLOTS * 8;
	if (o->ids[who][0] == '\0')
		snprintf(o->ids[who], sizeof(o->ids[who]), "%s", n->daemon_id);
	ck_assert_str_eq(n->daemon_id, o->ids[who]);
	/* in the order the initiator's puts were applied */
	ck_assert_uint_lt(n->value, SEQ_MAX);
	if (o->next[who] > 0)
		ck_assert_uint_gt(n->value, o->last[who]);
	o->last[who] = n->value;
	o->next[who]++;
	s[who].notified[n->value] = 1;
	ck_assert_uint_eq(n->offset, s[who].base + (n->value % SLOTS) * 8);
	/* the bytes are there already: this put's value, or a later one's
	 * of the same slot */
	memcpy(&w, (char *)rma_region_ptr(region) + n->offset, 8);
	if (w < n->value || (w - n->value) % SLOTS != 0)
		o->bad_bytes++;
}

/* Initiator i's puts all went, and each was notified exactly when it
 * succeeded. */
static void
order_check_sender(const struct order_seen *o, const struct sender *s, int i)
{
	ck_assert_uint_eq(s->failures, 0);
	ck_assert_uint_eq(s->ok, N_PER);
	ck_assert_uint_eq(o->next[i], N_PER);
	for (uint64_t q = 0; q < s->issued; q++)
		ck_assert_msg(s->notified[q] != s->refused[q],
			      "initiator %d put %" PRIu64
			      ": notified %d, refused %d",
			      i, q, s->notified[q], s->refused[q]);
	fprintf(stderr, "initiator %d: %" PRIu64 " refused with LIMIT\n", i,
		s->limited);
}

/* Both initiators stream N_PER notifying puts at the owner; it takes
 * them with rma_notify_next, and every stall_every of them it stops for
 * stall seconds (0: never) without touching its handle. An owner without
 * ring (RMA_RING=0) is told over the socket only. */
static void
order_run(uint64_t stall_every, double stall, bool ring)
{
	struct sender s[2] = {{.via = 1, .base = 0},
			      {.via = 0, .base = SLOTS * 8}};
	struct order_seen o = {{"", ""}, {0, 0}, {0, 0}, 0};
	rma_client_t *owner;
	rma_region_t *region;
	pthread_t th[2];
	uint64_t got = 0;
	double deadline;
	const char *desc;

	rma_client_t *spare;

	/* Clients go to the workers in turn: the owner on worker 1, away
	 * from the inbound peers (worker 0), the local initiator on 0. */
	ck_assert_int_eq(rma_connect(dp[0].socket, &spare), RMA_OK);
	if (!ring)
		ck_assert_int_eq(setenv("RMA_RING", "0", 1), 0);
	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	unsetenv("RMA_RING");
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	memset(rma_region_ptr(region), 0xff, REGION_SIZE);
	desc = rma_region_descriptor(region);
	for (int i = 0; i < 2; i++) {
		s[i].sent = calloc(SEQ_MAX, sizeof(*s[i].sent));
		s[i].refused = calloc(SEQ_MAX, 1);
		s[i].notified = calloc(SEQ_MAX, 1);
		ck_assert(s[i].sent && s[i].refused && s[i].notified);
		user_open(&s[i].u, s[i].via, desc);
		ck_assert_int_eq(
		    pthread_create(&th[i], NULL, sender_run, &s[i]), 0);
	}
	deadline = harness_now() + 150;
	while (got < 2 * N_PER && harness_now() < deadline) {
		rma_notification_t n;
		int r = rma_notify_next(owner, &n);

		ck_assert_int_ge(r, 0);
		if (r == 0) {
			harness_wait_fd(rma_fd(owner), 0.5);
			continue;
		}
		got++;
		if (stall_every > 0 && got % stall_every == 0)
			harness_pause(stall, deadline);
		order_take(&o, s, region, &n);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		order_check_sender(&o, &s[i], i);
	ck_assert_uint_eq(got, 2 * N_PER);
	ck_assert_uint_eq(o.bad_bytes, 0);
	/* the peer's id and our own daemon's */
	ck_assert_str_ne(o.ids[0], o.ids[1]);
	ck_assert_str_eq(o.ids[0], rma_daemon_id(s[0].u.c));
	ck_assert_str_eq(o.ids[1], rma_daemon_id(owner));
	for (int i = 0; i < 2; i++) {
		rma_disconnect(s[i].u.c);
		free(s[i].sent);
		free(s[i].refused);
		free(s[i].notified);
	}
	rma_disconnect(owner);
	rma_disconnect(spare);
}

START_TEST(test_order_100k)
{
	order_run(0, 0, true);
}
END_TEST

/* An owner with a shared ring (the default) is told through it while it
 * has room: 256 notifications. An owner that stops for a while makes the
 * daemon fall back to Notifications events over the socket, and then go
 * back to the ring once those are taken; the stalls here (20 ms, a few
 * thousand puts at these rates) force that many times over, under a
 * stream that never stops, so a notification that overtook one sent the
 * other way would break the order checked in order_run. */
START_TEST(test_order_ring_and_socket)
{
	order_run(4000, 0.02, true);
}
END_TEST

START_TEST(test_order_socket_only)
{
	order_run(4000, 0.02, false);
}
END_TEST

/* ---- a slow owner: its full queue refuses puts, bytes not applied ---- */

/* The owner's next notification into *n, waiting on its fd until
 * deadline (harness_now's clock). */
static void
notify_next_by(rma_client_t *owner, rma_notification_t *n, double deadline)
{
	for (;;) {
		int r = rma_notify_next(owner, n);

		ck_assert_int_ge(r, 0);
		if (r == 1)
			return;
		ck_assert_msg(harness_now() < deadline,
			      "no notification before the deadline");
		harness_wait_fd(rma_fd(owner), 0.5);
	}
}

static void
slow_owner(int via)
{
	rma_client_t *owner;
	rma_region_t *region;
	struct user u;
	rma_notification_t n;
	uint8_t *mem;
	uint64_t ok = 0, taken = 0;
	rma_status_t st;
	double deadline;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	mem = rma_region_ptr(region);
	user_open(&u, via, rma_region_descriptor(region));
	memset(rma_region_ptr(u.src), 0xab, 4096);

	/* The owner takes nothing: the one initiator's share of puts are
	 * notified... */
	for (uint64_t i = 0; i < SHARE_ALONE; i++) {
		st = put_notify_sync(&u, 0, 8, 8, i);
		ck_assert_msg(st == RMA_OK, "put %" PRIu64 ": %s (%s)", i,
			      rma_strerror(st), rma_last_error(u.c));
		ok++;
	}
	/* ...and the next is refused whole, its bytes not written */
	st = put_notify_sync(&u, 0, 1024, 64, 77);
	ck_assert_int_eq(st, RMA_ERR_LIMIT);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(mem[1024 + i], 0);
	/* a plain put is not bound by notifications (complete at the
	 * target before its bytes are looked at: with rma_protocol = ucx a
	 * plain put completes once sent) */
	ck_assert_int_eq(rma_put_sync(u.c, u.src, 0, u.rem, 2048, 8,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_uint_eq(mem[2048], 0xab);

	/* The owner catches up: every notification is there, in order,
	 * and once taken (acknowledged) notifying puts go through again. */
	deadline = harness_now() + 30;
	while (taken < ok && harness_now() < deadline) {
		int r = rma_notify_next(owner, &n);
		ck_assert_int_ge(r, 0);
		if (r == 0) {
			harness_wait_fd(rma_fd(owner), 0.5);
			continue;
		}
		ck_assert_uint_eq(n.value, taken);
		taken++;
	}
	ck_assert_uint_eq(taken, ok);
	/* The acknowledgement and the put come over two connections, and
	 * the daemon may take the put first (polling the initiator's ring):
	 * refused then, bytes not written, it is put again to a deadline,
	 * as rma_put_notify says. */
	deadline = harness_now() + 10;
	while ((st = put_notify_sync(&u, 0, 1024, 64, 78)) == RMA_ERR_LIMIT &&
	       harness_now() < deadline) {
		ck_assert_uint_eq(mem[1024], 0);
		ck_assert_int_eq(rma_progress(owner), RMA_OK);
	}
	ck_assert_int_eq(st, RMA_OK);
	ck_assert_uint_eq(mem[1024], 0xab);
	notify_next_by(owner, &n, harness_now() + 10);
	ck_assert_uint_eq(n.value, 78);
	ck_assert_uint_eq(n.offset, 1024);
	ck_assert_uint_eq(n.length, 64);
	rma_disconnect(u.c);
	rma_disconnect(owner);
}

START_TEST(test_slow_owner_peer)
{
	slow_owner(1);
}
END_TEST

START_TEST(test_slow_owner_local)
{
	slow_owner(0);
}
END_TEST

/* A window of notifying puts from a peer's client, more than its share:
 * the daemon takes a batch's puts to one owner as a run (their places in
 * the bound and their ring slots at once), and the run still ends at
 * the share: exactly the first SHARE_ALONE are applied and notified, in
 * order, the rest refused whole with their bytes not written. */
#define BATCH_OVER 64

struct batch_put {
	rma_status_t st;
	bool done;
};

static void
batch_put_done(rma_request_t *req, rma_status_t st, void *arg)
{
	struct batch_put *b = arg;

	(void)req;
	b->st = st;
	b->done = true;
}

START_TEST(test_batch_run_ends_at_share)
{
	enum { N = SHARE_ALONE + BATCH_OVER };
	static struct batch_put puts[N];
	rma_client_t *owner;
	rma_region_t *region;
	rma_notification_t n;
	struct user u;
	uint8_t *mem;
	uint64_t done = 0, taken = 0;
	rma_status_t st;
	double deadline;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	mem = rma_region_ptr(region);
	user_open(&u, 1, rma_region_descriptor(region));
	memset(rma_region_ptr(u.src), 0xab, 4096);
	memset(puts, 0, sizeof(puts));

	for (uint64_t i = 0; i < N; i++)
		ck_assert_int_eq(rma_put_notify(u.c, u.src, 0, u.rem, i * 8, 8,
						i, 0, batch_put_done, &puts[i],
						NULL),
				 RMA_OK);
	deadline = harness_now() + 60;
	while (done < N) {
		ck_assert(harness_now() < deadline);
		st = rma_wait(u.c, 500);
		ck_assert_msg(st == RMA_OK || st == RMA_ERR_TIMEOUT, "wait: %s",
			      rma_strerror(st));
		for (done = 0; done < N && puts[done].done; done++)
			;
	}
	for (uint64_t i = 0; i < N; i++) {
		if (i < SHARE_ALONE) {
			ck_assert_msg(puts[i].st == RMA_OK,
				      "put %" PRIu64 ": %s", i,
				      rma_strerror(puts[i].st));
			ck_assert_uint_eq(mem[i * 8], 0xab);
		} else {
			ck_assert_msg(puts[i].st == RMA_ERR_LIMIT,
				      "put %" PRIu64 ": %s", i,
				      rma_strerror(puts[i].st));
			ck_assert_uint_eq(mem[i * 8], 0);
		}
	}
	/* every one applied is notified once, in order, and nothing else */
	deadline = harness_now() + 30;
	while (taken < SHARE_ALONE) {
		notify_next_by(owner, &n, deadline);
		ck_assert_uint_eq(n.value, taken);
		ck_assert_uint_eq(n.offset, taken * 8);
		taken++;
	}
	/* the next applied put is the next notification: none came between */
	deadline = harness_now() + 10;
	while ((st = put_notify_sync(&u, 0, REGION_SIZE - 8, 8, 999)) ==
	       RMA_ERR_LIMIT) {
		ck_assert(harness_now() < deadline);
		ck_assert_int_eq(rma_progress(owner), RMA_OK);
	}
	ck_assert_int_eq(st, RMA_OK);
	notify_next_by(owner, &n, harness_now() + 10);
	ck_assert_uint_eq(n.value, 999);
	rma_disconnect(u.c);
	rma_disconnect(owner);
}
END_TEST

/* ---- one initiator cannot starve the others ---- */

/* Notifying puts of 8 bytes, one at a time, from u at base + 8 (i % 64)
 * with value first + i, until one fails: how many succeeded, and the
 * status of the one that failed in *st_p. */
static uint64_t
fill_share(struct user *u, uint64_t base, uint64_t first, rma_status_t *st_p)
{
	uint64_t ok = 0;
	rma_status_t st;

	while ((st = put_notify_sync(u, 0, base + (ok % 64) * 8, 8,
				     first + ok)) == RMA_OK) {
		ok++;
		ck_assert_uint_le(ok, QUEUE_MAX);
	}
	*st_p = st;
	return ok;
}

/* The owner takes want notifications: from each initiator (told by its
 * value's range) in the order its puts were applied, into the region it
 * put to, named by its daemon. */
struct taker {
	rma_region_t *region;
	const char *daemon_id;
	uint64_t first, count, taken;
};

static void
owner_take_all(rma_client_t *owner, struct taker *t, int n_t)
{
	uint64_t want = 0, got = 0;
	double deadline = harness_now() + 30;
	rma_notification_t n;

	for (int i = 0; i < n_t; i++)
		want += t[i].count;
	while (got < want) {
		int r = rma_notify_next(owner, &n), i;

		ck_assert_int_ge(r, 0);
		if (r == 0) {
			ck_assert_msg(harness_now() < deadline,
				      "%" PRIu64 " of %" PRIu64
				      " notifications taken",
				      got, want);
			harness_wait_fd(rma_fd(owner), 0.5);
			continue;
		}
		for (i = 0; i < n_t; i++)
			if (n.value >= t[i].first &&
			    n.value < t[i].first + t[i].count)
				break;
		ck_assert_int_lt(i, n_t);
		ck_assert_uint_eq(n.value, t[i].first + t[i].taken);
		ck_assert_ptr_eq(n.region, t[i].region);
		ck_assert_str_eq(n.daemon_id, t[i].daemon_id);
		t[i].taken++;
		got++;
	}
}

/* One initiator (a client of the peer daemon) fills its share of the
 * owner's bound with notifying puts to region A while the owner takes
 * nothing; the owner's other initiators (another client of the same peer
 * daemon, two clients of the owner's own) still put with notification to
 * region B, each up to its own share: half of what the others leave free
 * (2048 alone, then 1024, 512, 256). Whoever is over its share gets
 * LIMIT, its bytes not written, and its places come back once the owner
 * took (acknowledged) its notifications. The peer daemon (u[0], u[1])
 * holds 3072 here, the most a group may beside nobody: a third client
 * of it gets nothing, though 128 would be its own share. */
#define SHARERS 4

START_TEST(test_share_per_initiator)
{
	rma_client_t *owner;
	rma_region_t *a, *b;
	struct user u[SHARERS], third;
	struct taker t[SHARERS];
	/* u[0] through the peer daemon to a; the others to b: u[1]
	 * through the peer daemon, u[2] and u[3] clients of the owner's */
	const int via[SHARERS] = {1, 1, 0, 0};
	uint64_t held = 0;
	rma_status_t st;
	uint8_t *mem_a;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &a), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &b), RMA_OK);
	mem_a = rma_region_ptr(a);
	for (int i = 0; i < SHARERS; i++) {
		t[i].region = i == 0 ? a : b;
		t[i].first = (uint64_t)i * 100000;
		t[i].taken = 0;
		user_open(&u[i], via[i], rma_region_descriptor(t[i].region));
		t[i].daemon_id = rma_daemon_id(u[i].c);
		memset(rma_region_ptr(u[i].src), 0xab, 4096);
	}

	/* Each in turn takes its share of what the others left, and not
	 * one more: the first all of its 2048 alone... */
	for (int i = 0; i < SHARERS; i++) {
		t[i].count =
		    fill_share(&u[i], (uint64_t)i * 1024, t[i].first, &st);
		ck_assert_int_eq(st, RMA_ERR_LIMIT);
		ck_assert_uint_eq(t[i].count, (QUEUE_MAX - held) / 2);
		held += t[i].count;
		/* ...its refused put written nowhere */
		if (i == 0) {
			ck_assert_int_eq(put_notify_sync(&u[0], 0, 2048, 64, 7),
					 RMA_ERR_LIMIT);
			for (int k = 0; k < 64; k++)
				ck_assert_uint_eq(mem_a[2048 + k], 0);
		}
	}
	ck_assert_uint_eq(held, 3840);
	/* each is over the share the others left it */
	for (int i = 0; i < SHARERS; i++)
		ck_assert_int_eq(put_notify_sync(&u[i], 0, 0, 8, 7),
				 RMA_ERR_LIMIT);
	user_open(&third, 1, rma_region_descriptor(b));
	ck_assert_int_eq(put_notify_sync(&third, 0, 0, 8, 7), RMA_ERR_LIMIT);
	rma_disconnect(third.c);

	/* The owner takes everything, each initiator's in its order; the
	 * status call after it answers once the daemon had the last
	 * acknowledgement (one connection, in order), so that the places
	 * are back: each initiator puts again. */
	owner_take_all(owner, t, SHARERS);
	rma__v1__reply__free_unpacked(status_call(owner), NULL);
	for (int i = 0; i < SHARERS; i++)
		ck_assert_int_eq(put_notify_sync(&u[i], 0, (uint64_t)i * 1024,
						 8, t[i].first + t[i].count),
				 RMA_OK);
	for (int i = 0; i < SHARERS; i++)
		rma_disconnect(u[i].c);
	rma_disconnect(owner);
}
END_TEST

/* A peer's client numbers are the peer's word: however many it names,
 * they take at most half of the free share slots (32 of 64 alone), and
 * the owner's own clients still find a place. Once the owner took the
 * notifications, the slots come back. */
#define PEER_NAMES 34

START_TEST(test_share_peer_names)
{
	static struct user u[PEER_NAMES + 1];
	static struct taker t[PEER_NAMES + 1];
	rma_client_t *owner;
	rma_region_t *a;
	int ok = 0, n_t = 0;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &a), RMA_OK);
	for (int i = 0; i <= PEER_NAMES; i++) {
		/* the last one a client of the owner's daemon */
		user_open(&u[i], i < PEER_NAMES ? 1 : 0,
			  rma_region_descriptor(a));
		memset(rma_region_ptr(u[i].src), 0xab, 4096);
	}
	for (int i = 0; i <= PEER_NAMES; i++) {
		rma_status_t st =
		    put_notify_sync(&u[i], 0, (uint64_t)i * 8, 8, 1000 + i);

		if (i < 32 || i == PEER_NAMES) {
			ck_assert_msg(st == RMA_OK, "put %d: %s", i,
				      rma_strerror(st));
			t[n_t++] =
			    (struct taker){.region = a,
					   .daemon_id = rma_daemon_id(u[i].c),
					   .first = 1000 + (uint64_t)i,
					   .count = 1};
			ok++;
		} else {
			ck_assert_msg(st == RMA_ERR_LIMIT, "put %d: %s", i,
				      rma_strerror(st));
		}
	}
	ck_assert_int_eq(ok, 33);
	owner_take_all(owner, t, n_t);
	rma__v1__reply__free_unpacked(status_call(owner), NULL);
	ck_assert_int_eq(put_notify_sync(&u[PEER_NAMES - 1], 0, 8, 8, 5000),
			 RMA_OK);
	for (int i = 0; i <= PEER_NAMES; i++)
		rma_disconnect(u[i].c);
	rma_disconnect(owner);
}
END_TEST

/* ---- an owner asleep in poll() is woken for what came ---- */

#define WOKEN_PUTS 2000
#define WOKEN_WINDOW 64

static void
woken_done(rma_request_t *req, rma_status_t st, void *arg)
{
	uint64_t *done = arg;

	(void)req;
	ck_assert_int_eq(st, RMA_OK);
	(*done)++;
}

/* The daemon may hold an owner's wake-up back while it is busy (ring.c);
 * it must still come once the puts stop: the owner here only ever
 * sleeps in poll() on rma_fd, and each sleep must end within seconds,
 * not at the deadline, until every notification is taken. */
START_TEST(test_owner_woken)
{
	rma_client_t *owner;
	rma_region_t *region;
	struct user u;
	rma_notification_t n;
	uint64_t issued = 0, done = 0, taken = 0;
	double deadline = harness_now() + 60;
	rma_status_t st;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	user_open(&u, 1, rma_region_descriptor(region));
	while (done < WOKEN_PUTS && harness_now() < deadline) {
		while (issued < WOKEN_PUTS && issued - done < WOKEN_WINDOW) {
			ck_assert_int_eq(rma_put_notify(u.c, u.src, 0, u.rem,
							(issued % 512) * 8, 8,
							issued, 0, woken_done,
							&done, NULL),
					 RMA_OK);
			issued++;
		}
		st = rma_wait(u.c, 1000);
		ck_assert_msg(st == RMA_OK || st == RMA_ERR_TIMEOUT, "wait: %s",
			      rma_strerror(st));
	}
	ck_assert_uint_eq(done, WOKEN_PUTS);
	while (taken < WOKEN_PUTS) {
		int r = rma_notify_next(owner, &n);

		ck_assert_int_ge(r, 0);
		if (r == 1) {
			ck_assert_uint_eq(n.value, taken);
			taken++;
			continue;
		}
		ck_assert_msg(harness_wait_fd(rma_fd(owner), WAKE_DEADLINE) ==
				  1,
			      "owner not woken with %" PRIu64
			      " of %d notifications taken",
			      taken, WOKEN_PUTS);
	}
	rma_disconnect(u.c);
	rma_disconnect(owner);
}
END_TEST

/* Bursts of puts, each ending with one notifying put, the owner asleep
 * in poll() after each: the notification comes while the target daemon
 * polls (a burst's traffic), so it may hold the owner's wake-up back;
 * the burst then stops, and the held wake-up must go out when the daemon
 * stops polling, or the owner sleeps on. */
START_TEST(test_owner_woken_one_by_one)
{
	rma_client_t *owner;
	rma_region_t *region;
	struct user u;
	rma_notification_t n;
	uint64_t done = 0;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	user_open(&u, 1, rma_region_descriptor(region));
	for (uint64_t i = 0; i < 20; i++) {
		double deadline = harness_now() + 10;
		int r;

		for (int k = 0; k < WOKEN_WINDOW - 1; k++)
			ck_assert_int_eq(rma_put(u.c, u.src, 0, u.rem,
						 4096 + (uint64_t)k * 8, 8, 0,
						 woken_done, &done, NULL),
					 RMA_OK);
		ck_assert_int_eq(rma_put_notify(u.c, u.src, 0, u.rem, i * 8, 8,
						i, 0, woken_done, &done, NULL),
				 RMA_OK);
		while (done < (i + 1) * WOKEN_WINDOW &&
		       harness_now() < deadline)
			rma_wait(u.c, 1000);
		ck_assert_uint_eq(done, (i + 1) * WOKEN_WINDOW);
		while ((r = rma_notify_next(owner, &n)) == 0)
			ck_assert_msg(
			    harness_wait_fd(rma_fd(owner), WAKE_DEADLINE) == 1,
			    "owner not woken for notification %" PRIu64, i);
		ck_assert_int_eq(r, 1);
		ck_assert_uint_eq(n.value, i);
	}
	rma_disconnect(u.c);
	rma_disconnect(owner);
}
END_TEST

/* The notification counters of daemon 0 (status). */
struct notify_counts {
	uint64_t ring, socket, at_once, held;
};

static struct notify_counts
notify_counts(rma_client_t *c)
{
	Rma__V1__Reply *reply = status_call(c);
	const Rma__V1__Counters *k = reply->status_reply->counters;
	struct notify_counts n = {k->notifications_ring,
				  k->notifications_socket, k->notify_wakeups,
				  k->notify_wakeups_held};

	rma__v1__reply__free_unpacked(reply, NULL);
	return n;
}

/* Takes want notifications, sleeping in poll() on rma_fd between them:
 * each sleep must end within seconds (a wake-up held back still comes).
 * Each one taken is counted in *taken_p (if not NULL), and said on
 * taken_fd (an eventfd, if >= 0) to a sender that waits for it. */
static void
owner_take_told(rma_client_t *owner, uint64_t first, uint64_t want,
		uint64_t *taken_p, int taken_fd)
{
	rma_notification_t n;
	uint64_t taken = 0, one = 1;

	while (taken < want) {
		int r = rma_notify_next(owner, &n);

		ck_assert_int_ge(r, 0);
		if (r == 1) {
			ck_assert_uint_eq(n.value, first + taken);
			taken++;
			if (taken_p != NULL)
				__atomic_store_n(taken_p, taken,
						 __ATOMIC_RELEASE);
			if (taken_fd >= 0)
				ck_assert_int_eq(
				    write(taken_fd, &one, sizeof(one)),
				    sizeof(one));
			continue;
		}
		ck_assert_msg(harness_wait_fd(rma_fd(owner), WAKE_DEADLINE) ==
				  1,
			      "owner not woken with %" PRIu64 " of %" PRIu64
			      " notifications taken",
			      taken, want);
	}
}

static void
owner_take(rma_client_t *owner, uint64_t first, uint64_t want)
{
	owner_take_told(owner, first, want, NULL, -1);
}

/* A sender never more than STREAM_LEAD puts ahead of what the owner
 * took: with the owner's acknowledgements (every 256 taken) that keeps
 * the notifications the daemon holds from it far below its share, so
 * that an owner that a loaded machine leaves without a CPU for a while
 * slows the stream down rather than making its puts fail with LIMIT
 * (which is right for the daemon, and wrong for what this checks). */
#define STREAM_LEAD 1024

struct stream_sender {
	struct user u;
	uint64_t window; /* puts in flight; 0: WOKEN_WINDOW */
	uint64_t first, count, issued, done;
	uint64_t taken; /* by the owner: written by its thread */
	int taken_fd;	/* eventfd: the owner took one */
};

static void *
stream_sender_run(void *arg)
{
	struct stream_sender *s = arg;
	uint64_t window = s->window != 0 ? s->window : WOKEN_WINDOW;
	/* long: one put at a time on a loaded machine is slow */
	double deadline = harness_now() + 150;

	while (s->done < s->count && harness_now() < deadline) {
		uint64_t taken = __atomic_load_n(&s->taken, __ATOMIC_ACQUIRE);

		while (s->issued < s->count && s->issued - s->done < window &&
		       s->issued - taken < STREAM_LEAD) {
			uint64_t v = s->first + s->issued;

			ck_assert_int_eq(rma_put_notify(s->u.c, s->u.src, 0,
							s->u.rem, (v % 512) * 8,
							8, v, 0, woken_done,
							&s->done, NULL),
					 RMA_OK);
			s->issued++;
		}
		if (s->done < s->issued) {
			rma_wait(s->u.c, 1000);
		} else if (harness_wait_fd(s->taken_fd, 1.0)) {
			uint64_t n;

			ck_assert_int_eq(read(s->taken_fd, &n, sizeof(n)),
					 sizeof(n));
		}
	}
	return NULL;
}

#define STREAM_PUTS 20000

/* A stream of notifying puts from a peer to an owner that sleeps in
 * poll() whenever it has taken everything: every notification arrives,
 * in order, and each sleep ends (a wake-up held back still comes). How
 * many wake-ups the daemon held back (ring.c, RING_NOTIFY_HOLD) depends
 * on how the stream and the owner were scheduled: printed, not checked
 * (test_owner_wakeup_carries_all checks what a wake-up promises). */
START_TEST(test_owner_stream)
{
	rma_client_t *owner;
	rma_region_t *region;
	struct notify_counts before, after;
	struct stream_sender s = {.count = STREAM_PUTS};
	uint64_t delivered;
	pthread_t th;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	user_open(&s.u, 1, rma_region_descriptor(region));
	s.taken_fd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(s.taken_fd, 0);
	before = notify_counts(owner);
	ck_assert_int_eq(pthread_create(&th, NULL, stream_sender_run, &s), 0);
	owner_take_told(owner, 0, STREAM_PUTS, &s.taken, s.taken_fd);
	pthread_join(th, NULL);
	ck_assert_uint_eq(s.done, STREAM_PUTS);
	after = notify_counts(owner);
	delivered = (after.ring - before.ring) + (after.socket - before.socket);
	fprintf(stderr,
		"stream: %" PRIu64 " notifications (%" PRIu64
		" through the ring), owner woken %" PRIu64
		" times at once, %" PRIu64 " held\n",
		delivered, after.ring - before.ring,
		after.at_once - before.at_once, after.held - before.held);
	ck_assert_uint_eq(delivered, STREAM_PUTS);
	close(s.taken_fd);
	rma_disconnect(s.u.c);
	rma_disconnect(owner);
}
END_TEST

/* An owner that spins on its ring (rma_poll, while a put of its own to
 * a stopped daemon stays in flight) as a client of its daemon puts to it
 * one notifying put at a time, each published on its own. A look that
 * finds the ring empty may meet the daemon publishing: librma took the
 * notification it then found for one past the ring's tail, and failed
 * the owner (here about once in 4,000 notifications; `rmactl expose`,
 * asleep in poll() between them, once in millions). Every notification
 * must arrive, in order, the owner never failing, and every put's bytes
 * be there. */
#define SPIN_PUTS 60000
#define SPIN_MARK 0x5350494e4f574e52ull

/* Every thread of pid onto cpu. */
static void
spin_pin_pid(pid_t pid, int cpu)
{
	char path[64];
	cpu_set_t set;
	struct dirent *e;
	DIR *dir;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] != '.')
			ck_assert_int_eq(sched_setaffinity(atoi(e->d_name),
							   sizeof(set), &set),
					 0);
	}
	closedir(dir);
}

/* The daemon and the sender on one CPU, the owner on another, when we
 * have two: the owner's looks then meet the daemon's publishes as they
 * would on CPUs of their own (unpinned, on a busy machine with two, the
 * three seldom ran so, and the owner failed a tenth as often). */
static void
spin_pin(pid_t daemon, pthread_t sender)
{
	cpu_set_t ours, set;
	int cpu[2], n = 0;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(ours), &ours), 0);
	for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &ours))
			cpu[n++] = i;
	if (n < 2)
		return;
	spin_pin_pid(daemon, cpu[0]);
	CPU_ZERO(&set);
	CPU_SET(cpu[0], &set);
	ck_assert_int_eq(pthread_setaffinity_np(sender, sizeof(set), &set), 0);
	CPU_ZERO(&set);
	CPU_SET(cpu[1], &set);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
}

static void
stuck_done(rma_request_t *req, rma_status_t st, void *arg)
{
	(void)req;
	*(rma_status_t *)arg = st;
}

START_TEST(test_owner_spins)
{
	struct stream_sender s = {.count = SPIN_PUTS, .window = 1};
	rma_client_t *owner, *holder;
	rma_region_t *region, *held;
	rma_remote_t *far;
	rma_peer_t *peer;
	rma_notification_t n;
	/* the stuck put's status: 1 until it completes */
	rma_status_t stuck = (rma_status_t)1;
	const uint64_t *words;
	uint64_t taken = 0, one = 1;
	double deadline = harness_now() + 150;
	rma_status_t st;
	pthread_t th;
	int r;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	/* the owner's own put, to a region of daemon 1, which then stops:
	 * in flight all along, so that rma_poll spins on the ring */
	ck_assert_int_eq(rma_connect(dp[1].socket, &holder), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(holder, 4096, &held), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(owner, dp[1].listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(owner, peer, rma_region_descriptor(held), &far),
	    RMA_OK);
	ck_assert_int_eq(kill(dp[1].pid, SIGSTOP), 0);
	ck_assert_int_eq(rma_put(owner, region, 0, far, 0, 8,
				 RMA_FLAG_REMOTE_COMPLETION, stuck_done, &stuck,
				 NULL),
			 RMA_OK);
	/* the notifying puts: a client of daemon 0 */
	user_open(&s.u, 0, rma_region_descriptor(region));
	*(uint64_t *)rma_region_ptr(s.u.src) = SPIN_MARK;
	s.taken_fd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(s.taken_fd, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, stream_sender_run, &s), 0);
	spin_pin(dp[0].pid, th);
	while (taken < SPIN_PUTS && harness_now() < deadline) {
		st = rma_poll(owner, 1000);
		ck_assert_msg(st == RMA_OK || st == RMA_ERR_TIMEOUT,
			      "owner failed with %" PRIu64 " of %d "
			      "notifications taken: %s: %s",
			      taken, SPIN_PUTS, rma_strerror(st),
			      rma_last_error(owner));
		while ((r = rma_notify_next(owner, &n)) == 1) {
			ck_assert_uint_eq(n.value, taken);
			taken++;
			__atomic_store_n(&s.taken, taken, __ATOMIC_RELEASE);
			/* the sender waits only a lead away: a system call
			 * per notification would slow the owner's looks */
			if (taken % 256 == 0 || taken == SPIN_PUTS)
				ck_assert_int_eq(
				    write(s.taken_fd, &one, sizeof(one)),
				    sizeof(one));
		}
		ck_assert_msg(r == 0,
			      "owner failed with %" PRIu64 " of %d "
			      "notifications taken: %s: %s",
			      taken, SPIN_PUTS, rma_strerror(r),
			      rma_last_error(owner));
	}
	ck_assert_int_eq(kill(dp[1].pid, SIGCONT), 0);
	pthread_join(th, NULL);
	ck_assert_uint_eq(taken, SPIN_PUTS);
	ck_assert_uint_eq(s.done, SPIN_PUTS);
	words = rma_region_ptr(region);
	for (int i = 0; i < 512; i++)
		ck_assert_uint_eq(words[i], SPIN_MARK);
	/* The stuck put completes: at the target now that it runs again,
	 * or at the daemon's deadline (op_timeout) had the stream outlasted
	 * it; never with the owner's connection. */
	while (stuck == (rma_status_t)1 && harness_now() < deadline)
		ck_assert_int_ne(rma_wait(owner, 1000), RMA_ERR_DAEMON_GONE);
	ck_assert_msg(stuck == RMA_OK || stuck == RMA_ERR_TIMEOUT,
		      "the stuck put ended with %s", rma_strerror(stuck));
	close(s.taken_fd);
	rma_disconnect(s.u.c);
	rma_disconnect(holder);
	rma_disconnect(owner);
}
END_TEST

/* What a wake-up promises, on counts alone: an owner asleep is woken
 * once for whatever comes until it looks again, not once per
 * notification. The owner arms (rma_progress) and then does not touch
 * its handle while a peer's CARRY_PUTS notifying puts complete and the
 * daemon's counters show every one delivered (a status call of another
 * client): exactly one wake-up went out for all of them, however the
 * puts and the daemon were scheduled. The owner then takes them all, in
 * order. */
#define CARRY_PUTS 1000

struct delivered_wait {
	rma_client_t *observer;
	struct notify_counts before;
	uint64_t want;
};

static int
all_delivered(void *arg)
{
	struct delivered_wait *w = arg;
	struct notify_counts now = notify_counts(w->observer);

	return (now.ring - w->before.ring) + (now.socket - w->before.socket) >=
	       w->want;
}

START_TEST(test_owner_wakeup_carries_all)
{
	rma_client_t *owner;
	rma_region_t *region;
	struct delivered_wait w = {.want = CARRY_PUTS};
	struct notify_counts after;
	struct user u;
	uint64_t issued = 0, done = 0;
	double deadline = harness_now() + 60;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_connect(dp[0].socket, &w.observer), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	user_open(&u, 1, rma_region_descriptor(region));
	/* asleep: the daemon is to wake it for what comes next */
	ck_assert_int_eq(rma_progress(owner), RMA_OK);
	w.before = notify_counts(w.observer);
	while (done < CARRY_PUTS && harness_now() < deadline) {
		while (issued < CARRY_PUTS && issued - done < WOKEN_WINDOW) {
			ck_assert_int_eq(rma_put_notify(u.c, u.src, 0, u.rem,
							(issued % 512) * 8, 8,
							issued, 0, woken_done,
							&done, NULL),
					 RMA_OK);
			issued++;
		}
		rma_wait(u.c, 1000);
	}
	ck_assert_uint_eq(done, CARRY_PUTS);
	ck_assert_msg(harness_until(30, all_delivered, &w),
		      "the daemon did not deliver %d notifications",
		      CARRY_PUTS);
	after = notify_counts(w.observer);
	ck_assert_uint_eq((after.at_once - w.before.at_once) +
			      (after.held - w.before.held),
			  1);
	owner_take(owner, 0, CARRY_PUTS);
	rma_disconnect(u.c);
	rma_disconnect(w.observer);
	rma_disconnect(owner);
}
END_TEST

#define PING_PONGS 200

/* One notification at a time, the next put only once the owner took the
 * last (a ping-pong): never held back, each wakes the owner at once. */
START_TEST(test_ping_pong_not_held)
{
	rma_client_t *owner;
	rma_region_t *region;
	struct notify_counts before, after;
	struct user u;

	ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(owner, REGION_SIZE, &region), RMA_OK);
	user_open(&u, 1, rma_region_descriptor(region));
	before = notify_counts(owner);
	for (uint64_t i = 0; i < PING_PONGS; i++) {
		ck_assert_int_eq(put_notify_sync(&u, 0, i * 8, 8, i), RMA_OK);
		owner_take(owner, i, 1);
	}
	after = notify_counts(owner);
	ck_assert_uint_eq(after.ring - before.ring, PING_PONGS);
	ck_assert_uint_eq(after.held, before.held);
	ck_assert_uint_gt(after.at_once, before.at_once);
	rma_disconnect(u.c);
	rma_disconnect(owner);
}
END_TEST

/* ---- rmactl: expose --notifications, put --notify ---- */

static pid_t
spawn(char *const argv[], int out_fd)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ),
			 0);
	posix_spawn_file_actions_destroy(&fa);
	return pid;
}

static int
run(char *const argv[])
{
	int status;
	pid_t pid = spawn(argv, -1);

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int
file_exists(void *arg)
{
	struct stat sb;

	return stat(arg, &sb) == 0 && sb.st_size > 0;
}

static int
read_desc(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (f == NULL)
		return -1;
	ok = fgets(buf, (int)n, f) != NULL;
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return ok ? 0 : -1;
}

/* rmactl expose --notifications on daemon 0, its stdout a pipe. */
static pid_t
expose_start(char *dir, char *desc_path, size_t n, int *out_fd)
{
	char *rmactl = getenv("RMACTL_BIN");
	int p[2];
	pid_t pid;

	ck_assert_ptr_nonnull(rmactl);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(desc_path, n, "%s/desc", dir);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	{
		char *argv[] = {rmactl,
				"--socket",
				dp[0].socket,
				"expose",
				"--size",
				"4096",
				"--descriptor-out",
				desc_path,
				"--notifications",
				NULL};
		pid = spawn(argv, p[1]);
	}
	close(p[1]);
	*out_fd = p[0];
	ck_assert_msg(harness_until(10, file_exists, desc_path),
		      "expose wrote no descriptor");
	return pid;
}

/* One line from fd within seconds, without its newline. */
static int
read_line(int fd, char *buf, size_t n, double seconds)
{
	size_t len = 0;
	double deadline = harness_now() + seconds;

	while (len + 1 < n) {
		double left = deadline - harness_now();
		if (!harness_wait_fd(fd, left > 0 ? left : 0))
			return -1;
		if (read(fd, buf + len, 1) != 1)
			return -1;
		if (buf[len] == '\n') {
			buf[len] = '\0';
			return 0;
		}
		len++;
	}
	return -1;
}

START_TEST(test_cli_lines)
{
	char dir[] = "/tmp/rma-notify-cli-XXXXXX";
	char desc_path[128], data_path[160], line[256], want[64];
	char *rmactl = getenv("RMACTL_BIN");
	int out_fd, status;
	pid_t expose;
	FILE *f;

	expose = expose_start(dir, desc_path, sizeof(desc_path), &out_fd);
	snprintf(data_path, sizeof(data_path), "%s/data", dir);
	f = fopen(data_path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("hello", f);
	fclose(f);
	for (int i = 0; i < 3; i++) {
		/* from the peer daemon, then from the owner's own */
		int via = i == 1 ? 0 : 1;
		char off[16], val[32];
		snprintf(off, sizeof(off), "%d", 100 + i);
		snprintf(val, sizeof(val), "%s",
			 i == 2 ? "18446744073709551615" : "42");
		char *argv[] = {
		    rmactl,	"--socket",   dp[via].socket, "put",
		    "--peer",	dp[0].listen, "--descriptor", desc_path,
		    "--offset", off,	      "--notify",     val,
		    data_path,	NULL};
		ck_assert_int_eq(run(argv), 0);
		ck_assert_int_eq(read_line(out_fd, line, sizeof(line), 10), 0);
		snprintf(want, sizeof(want), "%s 5 %s ", off, val);
		ck_assert_msg(strncmp(line, want, strlen(want)) == 0,
			      "line \"%s\", want \"%s...\"", line, want);
	}
	/* A plain put prints nothing: the next line is that of the
	 * notifying put after it, from the same daemon (one initiator's
	 * notifications come in the order its puts were applied). */
	{
		char *plain[] = {
		    rmactl,    "--socket",   dp[1].socket,   "put",
		    "--peer",  dp[0].listen, "--descriptor", desc_path,
		    data_path, NULL};
		char *notify[] = {rmactl,	  "--socket", dp[1].socket,
				  "put",	  "--peer",   dp[0].listen,
				  "--descriptor", desc_path,  "--offset",
				  "200",	  "--notify", "43",
				  data_path,	  NULL};

		ck_assert_int_eq(run(plain), 0);
		ck_assert_int_eq(run(notify), 0);
		ck_assert_int_eq(read_line(out_fd, line, sizeof(line), 10), 0);
		ck_assert_msg(strncmp(line, "200 5 43 ", 9) == 0,
			      "line \"%s\", want \"200 5 43 ...\"", line);
	}
	kill(expose, SIGTERM);
	ck_assert_int_eq(waitpid(expose, &status, 0), expose);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(out_fd);
	unlink(desc_path);
	unlink(data_path);
	rmdir(dir);
}
END_TEST

/* ---- an owner that dies under a stream of notifying puts ---- */

struct streamer {
	struct user u;
	volatile int stop;
	uint64_t ok, failed, other;
	rma_status_t last;
};

static void
streamer_done(rma_request_t *req, rma_status_t st, void *arg)
{
	struct streamer *s = arg;

	(void)req;
	if (st == RMA_OK) {
		s->ok++;
	} else {
		s->failed++;
		s->last = st;
		/* what a gone owner may give: its region is gone */
		if (st != RMA_ERR_STALE_DESCRIPTOR && st != RMA_ERR_NO_REGION &&
		    st != RMA_ERR_LIMIT)
			s->other++;
	}
}

START_TEST(test_owner_dies)
{
	char dir[] = "/tmp/rma-notify-die-XXXXXX";
	char desc_path[128], desc[256], line[256];
	struct streamer s = {.stop = 0};
	uint64_t issued = 0;
	int out_fd, status, lines = 0;
	pid_t expose;
	double deadline;

	expose = expose_start(dir, desc_path, sizeof(desc_path), &out_fd);
	ck_assert_int_eq(read_desc(desc_path, desc, sizeof(desc)), 0);
	user_open(&s.u, 1, desc);
	/* puts flow and are notified... */
	deadline = harness_now() + 60;
	while (s.failed == 0 && harness_now() < deadline) {
		while (issued - s.ok - s.failed < 32) {
			if (rma_put_notify(s.u.c, s.u.src, 0, s.u.rem, 0, 8,
					   issued, 0, streamer_done, &s,
					   NULL) != RMA_OK)
				s.other++;
			issued++;
		}
		ck_assert_int_eq(rma_progress(s.u.c), RMA_OK);
		harness_wait_fd(rma_fd(s.u.c), 0.05);
		/* ...until the owner is killed in the middle of them */
		if (lines < 10 && read_line(out_fd, line, sizeof(line), 0) == 0)
			lines++;
		if (lines == 10 && expose > 0) {
			kill(expose, SIGKILL);
			ck_assert_int_eq(waitpid(expose, &status, 0), expose);
			expose = 0;
		}
	}
	ck_assert_int_eq(expose, 0);
	/* everything issued completes, none hangs, no odd status */
	deadline = harness_now() + 30;
	while (s.ok + s.failed + s.other < issued && harness_now() < deadline) {
		ck_assert_int_eq(rma_progress(s.u.c), RMA_OK);
		harness_wait_fd(rma_fd(s.u.c), 0.5);
	}
	ck_assert_uint_eq(s.ok + s.failed, issued);
	ck_assert_msg(s.other == 0, "a put ended with %s",
		      rma_strerror(s.last));
	ck_assert_uint_gt(s.ok, 0);
	/* the region went with its owner: a clean error at the initiator */
	ck_assert_int_eq(put_notify_sync(&s.u, 0, 0, 8, 1),
			 RMA_ERR_STALE_DESCRIPTOR);
	rma_disconnect(s.u.c);
	/* both daemons are alive and serve a new owner */
	{
		rma_client_t *owner;
		rma_region_t *region;
		rma_notification_t n;
		struct user u;
		int r;

		ck_assert_int_eq(rma_connect(dp[0].socket, &owner), RMA_OK);
		ck_assert_int_eq(rma_region_alloc(owner, 4096, &region),
				 RMA_OK);
		user_open(&u, 1, rma_region_descriptor(region));
		ck_assert_int_eq(put_notify_sync(&u, 0, 0, 8, 5), RMA_OK);
		deadline = harness_now() + 10;
		while ((r = rma_notify_next(owner, &n)) == 0 &&
		       harness_now() < deadline)
			harness_wait_fd(rma_fd(owner), 0.5);
		ck_assert_int_eq(r, 1);
		ck_assert_uint_eq(n.value, 5);
		rma_disconnect(u.c);
		rma_disconnect(owner);
	}
	close(out_fd);
	unlink(desc_path);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("notify");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_order_100k);
	tcase_add_test(tc, test_order_ring_and_socket);
	tcase_add_test(tc, test_order_socket_only);
	tcase_add_test(tc, test_owner_woken);
	tcase_add_test(tc, test_owner_woken_one_by_one);
	tcase_add_test(tc, test_owner_stream);
	tcase_add_test(tc, test_owner_wakeup_carries_all);
	tcase_add_test(tc, test_ping_pong_not_held);
	tcase_add_test(tc, test_slow_owner_peer);
	tcase_add_test(tc, test_slow_owner_local);
	tcase_add_test(tc, test_batch_run_ends_at_share);
	tcase_add_test(tc, test_share_per_initiator);
	tcase_add_test(tc, test_share_peer_names);
	tcase_add_test(tc, test_cli_lines);
	tcase_add_test(tc, test_owner_dies);
	suite_add_tcase(s, tc);
	tc = tcase_create("one-worker");
	tcase_add_checked_fixture(tc, setup_one_worker, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_order_100k);
	tcase_add_test(tc, test_order_ring_and_socket);
	tcase_add_test(tc, test_owner_spins);
	tcase_add_test(tc, test_slow_owner_local);
	tcase_add_test(tc, test_owner_dies);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
