/* SPDX-License-Identifier: BSD-2-Clause */
/* Trust between daemons, end to end: the keyed handshake (same key, no
 * key on one side, another key), a daemon asked to connect to itself, and
 * what a client hears when its peer is killed. Real rmad processes on
 * loopback; every wait has a deadline. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "rma.h"
#include "rma_internal.h"
#include "status_call.h"

#define WAIT_MS 10000
#define REGION (1u << 20)

static struct daemon_proc da, db;
static rma_client_t *clients[8];
static int n_clients;
static char key_a[64], key_b[64];

/* A key file of 48 random bytes, mode 0600, in a fresh temp file. */
static void
make_key(char *path, size_t len)
{
	uint8_t bytes[48];
	int fd, rnd;

	snprintf(path, len, "/tmp/rmad-peers-key.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	rnd = open("/dev/urandom", O_RDONLY);
	ck_assert_int_ge(rnd, 0);
	ck_assert_int_eq(read(rnd, bytes, sizeof(bytes)), sizeof(bytes));
	close(rnd);
	ck_assert_int_eq(write(fd, bytes, sizeof(bytes)), sizeof(bytes));
	ck_assert_int_eq(fchmod(fd, 0600), 0);
	close(fd);
}

static void
setup(void)
{
	make_key(key_a, sizeof(key_a));
	make_key(key_b, sizeof(key_b));
}

/* Clients first; then every daemon still running must exit 0 on
 * SIGTERM. */
static void
teardown(void)
{
	struct daemon_proc *ds[] = {&da, &db};
	const char *bad = NULL;
	int status;

	for (int i = 0; i < n_clients; i++)
		if (clients[i] != NULL)
			rma_disconnect(clients[i]);
	n_clients = 0;
	for (int i = 0; i < 2; i++) {
		if (ds[i]->pid <= 0)
			continue;
		kill(ds[i]->pid, SIGTERM);
		if (!harness_daemon_wait_exit(ds[i], 10, &status)) {
			harness_daemon_kill(ds[i]);
			bad = "an rmad did not exit within 10 s of SIGTERM";
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			bad = "an rmad did not exit 0 on SIGTERM";
		}
	}
	unlink(key_a);
	unlink(key_b);
	ck_assert_msg(bad == NULL, "%s", bad);
}

static rma_client_t *
client_of(const struct daemon_proc *d)
{
	rma_client_t *c;

	ck_assert_int_lt(n_clients, 8);
	ck_assert_int_eq(rma_connect(d->socket, &c), RMA_OK);
	clients[n_clients++] = c;
	return c;
}

static rma_region_t *
region_of(rma_client_t *c)
{
	rma_region_t *r;

	ck_assert_int_eq(rma_region_alloc(c, REGION, &r), RMA_OK);
	return r;
}

/* Daemons a and b (with these flags), a client and a region on each;
 * b's client imports a's region through a's address. */
static void
pair_start(const char *const *flags, rma_client_t **ca, rma_client_t **cb,
	   rma_region_t **ra, rma_region_t **rb, rma_peer_t **peer,
	   rma_remote_t **rem)
{
	harness_daemon_start(&da, flags);
	harness_daemon_start(&db, flags);
	*ca = client_of(&da);
	*cb = client_of(&db);
	*ra = region_of(*ca);
	*rb = region_of(*cb);
	ck_assert_int_eq(rma_peer_connect(*cb, da.listen, peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(*cb, *peer, rma_region_descriptor(*ra), rem),
	    RMA_OK);
}

/* The daemon's counters, through status. */
static Rma__V1__Counters
counters_of(rma_client_t *c)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__Counters k = *reply->status_reply->counters;

	rma__v1__reply__free_unpacked(reply, NULL);
	return k;
}

/* Peers of the daemon as status lists them: how many inbound, and the
 * last error of the outbound one at address (if any). */
struct peer_view {
	int inbound, inbound_up, outbound_found;
	Rma__V1__PeerState state;
	char last_error[256];
};

static struct peer_view
peers_of(rma_client_t *c, const char *address)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__StatusReply *s = reply->status_reply;
	struct peer_view v = {0};

	for (size_t i = 0; i < s->n_peers; i++) {
		const Rma__V1__PeerInfo *p = s->peers[i];

		if (p->inbound) {
			v.inbound++;
			v.inbound_up +=
			    p->state == RMA__V1__PEER_STATE__PEER_UP;
		} else if (strcmp(p->address, address) == 0) {
			v.outbound_found = 1;
			v.state = p->state;
			snprintf(v.last_error, sizeof(v.last_error), "%s",
				 p->last_error);
		}
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	return v;
}

/* A put of length bytes from src's region to dst's region through the
 * peer address, then a get back, compared. */
static void
round_trip(rma_client_t *src, rma_region_t *rs, const char *address,
	   rma_region_t *rd, uint64_t offset, size_t length, uint32_t seed)
{
	rma_peer_t *peer;
	rma_remote_t *rem;

	ck_assert_int_eq(rma_peer_connect(src, address, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(src, peer, rma_region_descriptor(rd), &rem),
	    RMA_OK);
	harness_fill(rma_region_ptr(rs), length, seed);
	ck_assert_int_eq(rma_put_sync(src, rs, 0, rem, offset, length,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(rd) + offset,
				rma_region_ptr(rs), length),
			 0);
	memset((uint8_t *)rma_region_ptr(rs) + length, 0, length);
	ck_assert_int_eq(
	    rma_get_sync(src, rs, length, rem, offset, length, WAIT_MS),
	    RMA_OK);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(rs) + length,
				rma_region_ptr(rs), length),
			 0);
	rma_remote_release(src, rem);
}

/* ---- the keyed handshake ------------------------------------------------ */

START_TEST(test_same_key_round_trip)
{
	const char *keyed[] = {"--peer-key-file", key_a, NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;

	harness_daemon_start(&da, keyed);
	harness_daemon_start(&db, keyed);
	ca = client_of(&da);
	cb = client_of(&db);
	ra = region_of(ca);
	rb = region_of(cb);
	round_trip(cb, rb, da.listen, ra, 777, 65536, 1);
	/* and the other way, over a connection a opens */
	round_trip(ca, ra, db.listen, rb, 12345, 4096, 2);
	ck_assert_uint_eq(counters_of(ca).peer_auth_failures, 0);
	ck_assert_uint_eq(counters_of(cb).peer_auth_failures, 0);
	ck_assert_int_eq(peers_of(ca, db.listen).state,
			 RMA__V1__PEER_STATE__PEER_UP);
}
END_TEST

/* Every lane proves the key: with two workers, each client of b is
 * served by another one, and each worker opens its own connection to a
 * (its lane), with a handshake of its own, whose nonce the other worker
 * records in the same set of b's own (handshake.c). */
/* Keyed a, and b with two workers: a client of b on each, a round trip
 * each to a's region (seeds seed, seed + 1), so that both lanes of b are
 * connected to a. */
static void
keyed_two_lanes(rma_client_t **ca_p, rma_region_t **ra_p, uint32_t seed)
{
	const char *keyed[] = {"--peer-key-file", key_a, "--workers", "2",
			       NULL};
	rma_client_t *cb1, *cb2;
	rma_region_t *rb1, *rb2;

	harness_daemon_start(&da, keyed);
	harness_daemon_start(&db, keyed);
	*ca_p = client_of(&da);
	cb1 = client_of(&db);
	cb2 = client_of(&db);
	*ra_p = region_of(*ca_p);
	rb1 = region_of(cb1);
	rb2 = region_of(cb2);
	round_trip(cb1, rb1, da.listen, *ra_p, 0, 65536, seed);
	round_trip(cb2, rb2, da.listen, *ra_p, 65536, 65536, seed + 1);
	ck_assert_uint_eq(counters_of(cb1).peer_auth_failures, 0);
}

START_TEST(test_same_key_every_lane)
{
	rma_client_t *ca;
	rma_region_t *ra;

	keyed_two_lanes(&ca, &ra, 4);
	ck_assert_uint_eq(counters_of(ca).peer_auth_failures, 0);
	/* one connection per lane of b, each accepted */
	ck_assert_int_eq(peers_of(ca, db.listen).inbound, 2);
}
END_TEST

/* A successor (rmad --take-over) proves the key too, with a floor above
 * zero (am_hello.floor) in both sides' transcripts. (That the floor
 * closes what the predecessor left is partition.sh's variant e and the
 * hostile retire class: here the predecessor closes its connections as
 * it exits.) */
START_TEST(test_same_key_after_take_over)
{
	const char *successor[] = {"--peer-key-file", key_a, "--workers", "2",
				   "--take-over",     NULL};
	rma_client_t *ca, *cb3;
	rma_region_t *ra, *rb3;

	keyed_two_lanes(&ca, &ra, 6);
	harness_daemon_take_over(&db, successor, 10.0);
	cb3 = client_of(&db);
	rb3 = region_of(cb3);
	round_trip(cb3, rb3, da.listen, ra, 131072, 65536, 8);
	ck_assert_uint_eq(counters_of(ca).peer_auth_failures, 0);
	/* of b's connections only the successor's one is up */
	ck_assert_int_eq(peers_of(ca, db.listen).inbound_up, 1);
}
END_TEST

/* A connect that must be refused: RMA_ERR_REJECTED, in bounded time,
 * with a detail that names the cluster key. */
static void
connect_refused(rma_client_t *c, const char *address)
{
	rma_peer_t *peer;
	double t0 = harness_now();
	rma_status_t st = rma_peer_connect(c, address, &peer);

	ck_assert_msg(st == RMA_ERR_REJECTED, "connect: %s (%s)",
		      rma_strerror(st), rma_last_error(c));
	ck_assert_msg(strstr(rma_last_error(c), "cluster key") != NULL,
		      "detail without 'cluster key': %s", rma_last_error(c));
	ck_assert_double_lt(harness_now() - t0, 3.0);
}

START_TEST(test_keyed_to_unkeyed_refused)
{
	const char *keyed[] = {"--peer-key-file", key_a, NULL};
	rma_client_t *ca, *cb;

	harness_daemon_start(&da, keyed);
	harness_daemon_start(&db, NULL);
	ca = client_of(&da);
	cb = client_of(&db);
	connect_refused(ca, db.listen); /* keyed initiator */
	connect_refused(cb, da.listen); /* keyed target */
	/* The keyed target counts the stranger that proved nothing. */
	ck_assert_uint_ge(counters_of(ca).peer_auth_failures, 1);
	/* Nothing of either was left up. */
	ck_assert_int_ne(peers_of(ca, db.listen).state,
			 RMA__V1__PEER_STATE__PEER_UP);
	ck_assert_int_ne(peers_of(cb, da.listen).state,
			 RMA__V1__PEER_STATE__PEER_UP);
}
END_TEST

static uint64_t
auth_failures(rma_client_t *a, rma_client_t *b)
{
	return counters_of(a).peer_auth_failures +
	       counters_of(b).peer_auth_failures;
}

START_TEST(test_other_key_refused)
{
	const char *ka[] = {"--peer-key-file", key_a, NULL};
	const char *kb[] = {"--peer-key-file", key_b, NULL};
	rma_client_t *ca, *cb, *cb2;
	rma_region_t *ra;
	rma_peer_t *peer;
	rma_status_t st;
	uint64_t before_a, before_b;

	harness_daemon_start(&da, ka);
	harness_daemon_start(&db, kb);
	ca = client_of(&da);
	cb = client_of(&db);
	ra = region_of(ca);
	before_a = counters_of(ca).peer_auth_failures;
	before_b = counters_of(cb).peer_auth_failures;
	st = rma_peer_connect(cb, da.listen, &peer);
	ck_assert_msg(st == RMA_ERR_REJECTED, "connect: %s (%s)",
		      rma_strerror(st), rma_last_error(cb));
	ck_assert_msg(strstr(rma_last_error(cb), "cluster key") != NULL,
		      "detail: %s", rma_last_error(cb));
	/* The side that found the wrong proof counts it: the initiator
	 * checks the target's proof before it sends its own. */
	ck_assert_uint_gt(counters_of(cb).peer_auth_failures, before_b);
	fprintf(
	    stderr,
	    "peers: other key: auth failures initiator +%llu, target "
	    "+%llu\n",
	    (unsigned long long)(counters_of(cb).peer_auth_failures - before_b),
	    (unsigned long long)(counters_of(ca).peer_auth_failures -
				 before_a));
	/* The descriptor alone is no way in. */
	cb2 = client_of(&db);
	ck_assert_int_ne(rma_peer_connect(cb2, da.listen, &peer), RMA_OK);
	ck_assert_uint_ge(auth_failures(ca, cb), 2);
	(void)ra;
}
END_TEST

/* ---- a daemon connecting to itself -------------------------------------- */

START_TEST(test_connect_to_self)
{
	const char *keyed[] = {"--peer-key-file", key_a, NULL};
	rma_client_t *c1, *c2;
	rma_region_t *r1, *r2;
	struct peer_view v;

	harness_daemon_start(&da, keyed);
	c1 = client_of(&da);
	c2 = client_of(&da);
	r1 = region_of(c1);
	r2 = region_of(c2);
	round_trip(c1, r1, da.listen, r2, 4000, 100000, 3);
	v = peers_of(c1, da.listen);
	ck_assert(v.outbound_found);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_UP);
	/* No endpoint was opened: nothing came in through the listener. */
	ck_assert_int_eq(v.inbound, 0);
	ck_assert_uint_eq(counters_of(c1).inbound_refused, 0);
}
END_TEST

/* ---- IPv6 addresses ------------------------------------------------------ */

/* UCX 1.13 overran a heap buffer of either daemon when the connection
 * between them was IPv6 (peer_sockaddr_usable): a client's IPv6 peer
 * address is refused by its own daemon, at once and as unreachable, and
 * the daemon dialed (target) sees nothing of it. */
static void
connect_ipv6_refused(rma_client_t *c, struct daemon_proc *target,
		     const char *address)
{
	rma_peer_t *peer;
	double t0 = harness_now();
	rma_status_t st = rma_peer_connect(c, address, &peer);

	/* Before the status: a dead target is the better clue. */
	ck_assert_msg(!harness_daemon_wait_exit(target, 0, NULL),
		      "rmad on %s died when dialed as %s", target->listen,
		      address);
	ck_assert_msg(st == RMA_ERR_UNREACHABLE, "connect %s: %s (%s)", address,
		      rma_strerror(st), rma_last_error(c));
	ck_assert_msg(strstr(rma_last_error(c), "IPv4") != NULL,
		      "detail without 'IPv4': %s", rma_last_error(c));
	ck_assert_double_lt(harness_now() - t0, 3.0);
}

/* Dialed as [::1] and as ::ffff:127.0.0.1, the target daemon (listening
 * on listen_host) must live on and serve puts and gets, through its
 * IPv4-mapped address, its IPv4 one, and out to b by b's mapped one. */
static void
ipv6_dialed(const char *listen_host)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	char v6[64], mapped[64];

	if (!harness_have_ipv6_loopback()) {
		fprintf(stderr, "skipped: no IPv6 loopback on this machine\n");
		return;
	}
	harness_daemon_start_on(&da, listen_host, NULL);
	harness_daemon_start(&db, NULL);
	ca = client_of(&da);
	cb = client_of(&db);
	ra = region_of(ca);
	rb = region_of(cb);
	snprintf(v6, sizeof(v6), "[::1]:%u", da.port);
	connect_ipv6_refused(cb, &da, v6);
	connect_ipv6_refused(cb, &da, v6); /* again: nothing was left over */
	ck_assert_msg(!harness_daemon_wait_exit(&db, 0, NULL),
		      "rmad died dialing %s", v6);
	snprintf(mapped, sizeof(mapped), "[::ffff:127.0.0.1]:%u", da.port);
	round_trip(cb, rb, mapped, ra, 4096, 65536, 6);
	snprintf(v6, sizeof(v6), "127.0.0.1:%u", da.port);
	round_trip(cb, rb, v6, ra, 0, 4096, 7);
	snprintf(mapped, sizeof(mapped), "[::ffff:127.0.0.1]:%u", db.port);
	round_trip(ca, ra, mapped, rb, 8192, 4096, 8);
	ck_assert_uint_eq(counters_of(ca).inbound_refused, 0);
}

START_TEST(test_ipv6_dial_to_wildcard_listener)
{
	ipv6_dialed("[::]");
}
END_TEST

START_TEST(test_ipv6_dial_to_ipv4_listener)
{
	ipv6_dialed("127.0.0.1");
}
END_TEST

/* ---- a killed peer ------------------------------------------------------ */

struct down_wait {
	rma_client_t *c;
	rma_peer_t *peer;
};

static int
peer_event_down(void *arg)
{
	struct down_wait *w = arg;

	rma_progress(w->c);
	return rma_peer_status(w->peer) != RMA_OK;
}

START_TEST(test_killed_peer_is_connection_lost)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *peer;
	rma_remote_t *rem;
	struct down_wait w;
	struct peer_view v;
	double deadline;

	pair_start(NULL, &ca, &cb, &ra, &rb, &peer, &rem);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rem, 0, 65536,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	harness_daemon_kill(&da);
	da.pid = 0;

	/* The client holding a remote on it hears, and so does status. */
	w.c = cb;
	w.peer = peer;
	ck_assert_msg(harness_until(5, peer_event_down, &w),
		      "no peer event within 5 s of the kill");
	ck_assert_msg(strstr(rma_peer_detail(peer), "connection lost") != NULL,
		      "peer detail: %s", rma_peer_detail(peer));
	ck_assert_msg(strstr(rma_peer_detail(peer), "Endpoint timeout") == NULL,
		      "peer detail: %s", rma_peer_detail(peer));
	deadline = harness_now() + 5;
	do {
		v = peers_of(cb, da.listen);
		if (v.state == RMA__V1__PEER_STATE__PEER_DOWN)
			break;
		harness_pause(0.02, deadline);
	} while (harness_now() < deadline);
	ck_assert_int_eq(v.state, RMA__V1__PEER_STATE__PEER_DOWN);
	ck_assert_msg(strstr(v.last_error, "connection lost") != NULL,
		      "last error: %s", v.last_error);
	ck_assert_msg(strstr(v.last_error, "Endpoint timeout") == NULL,
		      "last error: %s", v.last_error);
	/* A put on the dead peer fails as lost, never as a timeout. */
	ck_assert_int_ne(rma_put_sync(cb, rb, 0, rem, 0, 8,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_msg(strstr(rma_peer_detail(peer), "Endpoint timeout") == NULL,
		      "peer detail: %s", rma_peer_detail(peer));
}
END_TEST

/* After a timeout closed the endpoint, the next operation waits for the
 * reconnect within its own deadline and succeeds, instead of failing at
 * once with the timeout of the operation before it. */
START_TEST(test_next_op_waits_for_reconnect)
{
	static const char *const fast[] = {"--op-timeout", "1", NULL};
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *peer;
	rma_remote_t *rem;
	double t0;

	pair_start(fast, &ca, &cb, &ra, &rb, &peer, &rem);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rem, 0, 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	/* Frozen: the put times out and b closes the endpoint. */
	kill(da.pid, SIGSTOP);
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rem, 0, 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_ERR_TIMEOUT);
	kill(da.pid, SIGCONT);
	/* The next one reconnects, confirms the region and lands. */
	harness_fill(rma_region_ptr(rb), 4096, 42);
	t0 = harness_now();
	ck_assert_int_eq(rma_put_sync(cb, rb, 0, rem, 8192, 4096,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_double_lt(harness_now() - t0, 1.5);
	ck_assert_int_eq(memcmp((uint8_t *)rma_region_ptr(ra) + 8192,
				rma_region_ptr(rb), 4096),
			 0);
	rma_remote_release(cb, rem);
}
END_TEST

/* A peer that never comes back: the waiting operation fails with the
 * reconnect's own cause, in about one reconnect, not at its deadline. */
START_TEST(test_dead_peer_fails_with_real_cause)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_peer_t *peer;
	rma_remote_t *rem;
	rma_status_t st;

	pair_start(NULL, &ca, &cb, &ra, &rb, &peer, &rem);
	harness_daemon_kill(&da);
	da.pid = 0;
	st = rma_put_sync(cb, rb, 0, rem, 0, 8, RMA_FLAG_REMOTE_COMPLETION,
			  WAIT_MS);
	ck_assert_msg(st != RMA_OK && st != RMA_ERR_TIMEOUT,
		      "put to a dead peer: %s", rma_strerror(st));
	rma_remote_release(cb, rem);
}
END_TEST

/* A daemon's own descriptor imported through a peer that is another
 * daemon is refused: it would write this daemon's region, not the
 * peer's. Through the daemon's own address it works. */
START_TEST(test_own_descriptor_only_through_self)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra;
	rma_peer_t *to_b, *to_self;
	rma_remote_t *rem;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, NULL);
	ca = client_of(&da);
	cb = client_of(&db);
	ra = region_of(ca);
	(void)cb;
	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &to_b), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, to_b, rma_region_descriptor(ra), &rem),
	    RMA_ERR_BAD_DESCRIPTOR);
	ck_assert_ptr_nonnull(strstr(rma_last_error(ca), "this daemon"));
	ck_assert_ptr_nonnull(strstr(rma_last_error(ca), "wrong peer"));
	ck_assert_int_eq(rma_peer_connect(ca, da.listen, &to_self), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(ca, to_self, rma_region_descriptor(ra), &rem),
	    RMA_OK);
	rma_remote_release(ca, rem);
}
END_TEST

/* A descriptor imported through a peer that is not its owner (here the
 * importing daemon's own address) is BAD_DESCRIPTOR, "wrong peer", not
 * STALE ("region freed or owner restarted"): the region is there, the
 * peer is wrong. Once the owner is a peer, the detail names its address;
 * through it the import works. */
START_TEST(test_import_through_wrong_peer)
{
	char text[256];
	rma_client_t *ca, *cb;
	rma_region_t *rb;
	rma_peer_t *to_self, *to_b;
	rma_remote_t *rem;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, NULL);
	ca = client_of(&da);
	cb = client_of(&db);
	rb = region_of(cb);
	snprintf(text, sizeof(text), "%s", rma_region_descriptor(rb));
	ck_assert_int_eq(rma_peer_connect(ca, da.listen, &to_self), RMA_OK);
	ck_assert_int_eq(rma_remote_import(ca, to_self, text, &rem),
			 RMA_ERR_BAD_DESCRIPTOR);
	ck_assert_msg(strstr(rma_last_error(ca), "wrong peer") != NULL, "%s",
		      rma_last_error(ca));
	ck_assert_int_eq(rma_peer_connect(ca, db.listen, &to_b), RMA_OK);
	ck_assert_int_eq(rma_remote_import(ca, to_b, text, &rem), RMA_OK);
	rma_remote_release(ca, rem);
	ck_assert_int_eq(rma_remote_import(ca, to_self, text, &rem),
			 RMA_ERR_BAD_DESCRIPTOR);
	ck_assert_msg(strstr(rma_last_error(ca), db.listen) != NULL,
		      "the owner's address %s not in: %s", db.listen,
		      rma_last_error(ca));
}
END_TEST

/* Importing a descriptor again after its owner restarted: STALE at the
 * first try, never a connection status or INVALID ("connecting"). */
START_TEST(test_reimport_after_owner_restart)
{
	char text[256];
	rma_client_t *ca, *cb;
	rma_region_t *ra;
	rma_peer_t *peer;
	rma_remote_t *rem;

	harness_daemon_start(&da, NULL);
	harness_daemon_start(&db, NULL);
	ca = client_of(&da);
	cb = client_of(&db);
	ra = region_of(ca);
	snprintf(text, sizeof(text), "%s", rma_region_descriptor(ra));
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &peer), RMA_OK);
	ck_assert_int_eq(rma_remote_import(cb, peer, text, &rem), RMA_OK);
	rma_remote_release(cb, rem);
	rma_disconnect(ca);
	clients[0] = NULL;
	harness_daemon_stop(&da, SIGKILL);
	harness_daemon_restart(&da, NULL);
	ck_assert_int_eq(rma_remote_import(cb, peer, text, &rem),
			 RMA_ERR_STALE_DESCRIPTOR);
	/* and again, now that the peer is known to have restarted */
	ck_assert_int_eq(rma_remote_import(cb, peer, text, &rem),
			 RMA_ERR_STALE_DESCRIPTOR);
}
END_TEST

static void
add(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

#define ADD(s, t) add(s, #t, t)

int
main(void)
{
	Suite *s = suite_create("peers");

	ADD(s, test_same_key_round_trip);
	ADD(s, test_same_key_every_lane);
	ADD(s, test_same_key_after_take_over);
	ADD(s, test_keyed_to_unkeyed_refused);
	ADD(s, test_other_key_refused);
	ADD(s, test_connect_to_self);
	ADD(s, test_ipv6_dial_to_wildcard_listener);
	ADD(s, test_ipv6_dial_to_ipv4_listener);
	ADD(s, test_next_op_waits_for_reconnect);
	ADD(s, test_own_descriptor_only_through_self);
	ADD(s, test_import_through_wrong_peer);
	ADD(s, test_reimport_after_owner_restart);
	ADD(s, test_dead_peer_fails_with_real_cause);
	ADD(s, test_killed_peer_is_connection_lost);
	return check_main_run(s);
}
