/* SPDX-License-Identifier: BSD-2-Clause */
/* Regions survive a crash through systemd's fd store (daemon/fdstore.c):
 * rmad runs under fdstore_sink, which keeps the store and restarts it as
 * systemd does. A SIGKILLed rmad comes back with the same identity; its
 * client re-attaches, a second daemon reads and writes the same bytes
 * through the descriptors it had; kills at random points of a burst of
 * allocations and frees leave a consistent table; a store that is full
 * refuses the next region with RMA_ERR_LIMIT. */
#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../check_main.h"
#include "../harness.h"
#include "../status_call.h"
#include "rma.h"

#define WAIT_MS 10000

struct sup {
	pid_t pid; /* fdstore_sink's */
	char dir[64], log[96], notify[96], socket[108], listen[32];
	uint16_t metrics_port;
	/* rmad's --config FILE, unless "" */
	char config[64];
	int unseal; /* FDSTORE_SINK_UNSEAL: a region back without seals */
};

static struct sup sa;
static struct daemon_proc db;

/* fdstore_sink -m max around rmad with fd_store_max max; with
 * activation, the sink holds the client socket as rmad.socket would
 * (else rmad keeps its own in the store); metrics on a port of its own. */
static void
sup_start_as(struct sup *s, unsigned max, unsigned rmad_max, int activation)
{
	char m[16], rm[16], port[16], rmad_log[128], own[128], metrics[32];
	const char *rmad = getenv("RMAD_BIN"), *sink = getenv("FDSTORE_SINK");
	uint16_t p = harness_free_port();

	ck_assert_msg(rmad && sink, "RMAD_BIN and FDSTORE_SINK must be set");
	snprintf(s->dir, sizeof(s->dir), "/tmp/rmad-fdstore.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(s->dir));
	snprintf(s->log, sizeof(s->log), "%s/sink.log", s->dir);
	snprintf(s->notify, sizeof(s->notify), "%s/notify", s->dir);
	snprintf(s->socket, sizeof(s->socket), "%s/rmad.sock", s->dir);
	snprintf(s->listen, sizeof(s->listen), "127.0.0.1:%u", p);
	snprintf(rmad_log, sizeof(rmad_log), "%s/rmad.log", s->dir);
	snprintf(m, sizeof(m), "%u", max);
	snprintf(rm, sizeof(rm), "%u", rmad_max);
	snprintf(port, sizeof(port), "%u", p);
	s->metrics_port = harness_free_port();
	snprintf(metrics, sizeof(metrics), "127.0.0.1:%u", s->metrics_port);
	/* with activation, rmad must not make a socket of its own */
	snprintf(own, sizeof(own), "%s/%s", s->dir,
		 activation ? "not-this.sock" : "rmad.sock");
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (s->unseal)
			setenv("FDSTORE_SINK_UNSEAL", "1", 1);
		if (!freopen(s->log, "w", stdout) ||
		    !freopen(rmad_log, "w", stderr))
			_exit(126);
		execl(sink, sink, "-m", m, "-t", "100", "-l",
		      activation ? s->socket : "", s->notify, "--", rmad,
		      "--socket", own, "--listen", s->listen, "--log-level",
		      "info", "--connect-timeout", "2", "--reattach-timeout",
		      "3", "--fd-store-max", rm, "--metrics-listen", metrics,
		      s->config[0] != '\0' ? "--config" : (char *)NULL,
		      s->config, (char *)NULL);
		_exit(127);
	}
}

static void
sup_start(struct sup *s, unsigned max, int activation)
{
	sup_start_as(s, max, max, activation);
}

/* Lines of the sink's log that start with prefix; the last one's rest
 * into last (if not NULL). */
static int
sup_count(const struct sup *s, const char *prefix, char *last, size_t len)
{
	char line[512];
	int n = 0;
	FILE *f = fopen(s->log, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		n++;
		if (last != NULL)
			snprintf(last, len, "%s", line + strlen(prefix));
	}
	fclose(f);
	return n;
}

struct count_arg {
	const struct sup *s;
	const char *prefix;
	int n;
};

static int
sup_count_cond(void *arg)
{
	struct count_arg *a = arg;

	return sup_count(a->s, a->prefix, NULL, 0) >= a->n;
}

/* The sink logs what it got on its own time: at least n such lines
 * within 10 s. */
static int
sup_wait_count(const struct sup *s, const char *prefix, int n)
{
	struct count_arg a = {s, prefix, n};

	return harness_until(10.0, sup_count_cond, &a);
}

static pid_t
sup_main_pid(const struct sup *s)
{
	char last[64] = "0";

	sup_count(s, "started ", last, sizeof(last));
	return (pid_t)atoi(last);
}

struct ready_arg {
	const struct sup *s;
	int n;
};

static int
sup_ready_cond(void *arg)
{
	struct ready_arg *a = arg;

	return sup_count(a->s, "READY=1", NULL, 0) >= a->n;
}

/* The n-th start of rmad said READY=1. */
static void
sup_wait_ready(const struct sup *s, int n)
{
	struct ready_arg a = {s, n};
	char cmd[256];

	if (harness_until(20.0, sup_ready_cond, &a))
		return;
	snprintf(cmd, sizeof(cmd), "cat %s/sink.log %s/rmad.log >&2", s->dir,
		 s->dir);
	ck_assert_int_ge(system(cmd), -1);
	ck_abort_msg("rmad start %d did not say READY=1", n);
}

/* SIGKILL the rmad serving now; wait for the next one. */
static void
sup_crash(const struct sup *s)
{
	int n = sup_count(s, "READY=1", NULL, 0);

	ck_assert_int_eq(kill(sup_main_pid(s), SIGKILL), 0);
	sup_wait_ready(s, n + 1);
}

static void
sup_stop(struct sup *s)
{
	char cmd[128];

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	{
		double deadline = harness_now() + 10.0;
		while (waitpid(s->pid, NULL, WNOHANG) == 0) {
			if (harness_now() > deadline) {
				kill(s->pid, SIGKILL);
				waitpid(s->pid, NULL, 0);
				break;
			}
			harness_pause(0.01, deadline);
		}
	}
	s->pid = 0;
	s->unseal = 0;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
	ck_assert_int_ge(system(cmd), -1);
	if (s->config[0] != '\0')
		unlink(s->config);
	s->config[0] = '\0';
}

static void
setup(void)
{
	static const char *const flags[] = {"--connect-timeout", "2", NULL};

	setenv("RMA_REATTACH_TIMEOUT_MS", "15000", 1);
	harness_daemon_start(&db, flags);
}

static void
teardown(void)
{
	sup_stop(&sa);
	if (db.pid > 0)
		harness_daemon_stop(&db, SIGTERM);
}

/* The library notices the closed connection and re-attaches. */
static void
reattach(rma_client_t *c)
{
	struct pollfd pfd = {.fd = rma_fd(c), .events = POLLIN};
	rma_status_t st;

	ck_assert_int_eq(poll(&pfd, 1, WAIT_MS), 1);
	st = rma_progress(c);
	ck_assert_msg(st == RMA_OK, "re-attach after the crash: %s (%s)",
		      rma_strerror(st), rma_last_error(c));
}

/* A get or put from the second daemon, retried while its peer comes back
 * (the retriable statuses); a stale descriptor ends it at once. */
static rma_status_t
remote_io(rma_client_t *c, rma_region_t *local, rma_remote_t *rem, size_t len,
	  int put)
{
	double deadline = harness_now() + 15.0;
	rma_status_t st;

	for (;;) {
		st = put ? rma_put_sync(c, local, 0, rem, 0, len, 0, WAIT_MS)
			 : rma_get_sync(c, local, 0, rem, 0, len, WAIT_MS);
		if (st == RMA_OK || st == RMA_ERR_STALE_DESCRIPTOR ||
		    st == RMA_ERR_NO_REGION || harness_now() > deadline)
			return st;
		harness_pause(0.02, deadline);
	}
}

static void
status_counts(rma_client_t *c, uint32_t *restarts, uint64_t *recovered,
	      size_t *orphans)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__StatusReply *st = reply->status_reply;

	*restarts = st->restarts;
	*recovered = st->regions_recovered;
	*orphans = 0;
	for (size_t i = 0; i < st->n_regions; i++)
		if (st->regions[i]->client_id == 0)
			(*orphans)++;
	rma__v1__reply__free_unpacked(reply, NULL);
}

#define SZ (256u << 10)
#define NA 3

/* GET /metrics; the value of the sample name (no labels), -1 if absent. */
static long long
metric(const struct sup *s, const char *name)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(s->metrics_port)};
	static char page[1 << 20];
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	size_t n = 0;
	ssize_t k;
	char *p, key[128];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(write(fd, req, sizeof(req) - 1), sizeof(req) - 1);
	while (n < sizeof(page) - 1 &&
	       (k = read(fd, page + n, sizeof(page) - 1 - n)) > 0)
		n += (size_t)k;
	close(fd);
	page[n] = '\0';
	snprintf(key, sizeof(key), "\n%s ", name);
	p = strstr(page, key);
	return p != NULL ? atoll(p + strlen(key)) : -1;
}

START_TEST(test_crash_keeps_regions)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra[NA], *rb;
	rma_remote_t *rem[NA];
	rma_peer_t *peer;
	uint8_t *want = malloc(SZ);
	uint32_t restarts;
	uint64_t recovered;
	size_t orphans;

	sup_start(&sa, 64, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	for (int i = 0; i < NA; i++) {
		ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra[i]), RMA_OK);
		harness_fill(rma_region_ptr(ra[i]), SZ, 10 + i);
		ck_assert_int_eq(rma_remote_import(cb, peer,
						   rma_region_descriptor(ra[i]),
						   &rem[i]),
				 RMA_OK);
	}
	ck_assert_msg(sup_wait_count(&sa, "stored store-region-", NA),
		      "the regions are not in the store");

	sup_crash(&sa);
	reattach(ca);
	status_counts(ca, &restarts, &recovered, &orphans);
	ck_assert_uint_eq(restarts, 1);
	ck_assert_uint_eq(recovered, NA);
	ck_assert_uint_eq(orphans, 0);

	/* The new process serves the same memory under the old
	 * descriptors: what the owner wrote before the crash, and after. */
	for (int i = 0; i < NA; i++) {
		ck_assert_int_eq(remote_io(cb, rb, rem[i], SZ, 0), RMA_OK);
		harness_fill(want, SZ, 10 + i);
		ck_assert_int_eq(memcmp(rma_region_ptr(rb), want, SZ), 0);
	}
	harness_fill(rma_region_ptr(ra[0]), SZ, 20);
	ck_assert_int_eq(remote_io(cb, rb, rem[0], SZ, 0), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra[0]), SZ),
			 0);
	harness_fill(rma_region_ptr(rb), SZ, 30);
	ck_assert_int_eq(remote_io(cb, rb, rem[1], SZ, 1), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra[1]), SZ),
			 0);
	/* A freed region leaves the store, and its descriptor goes stale
	 * for the peer. */
	ck_assert_int_eq(rma_region_free(ca, ra[2]), RMA_OK);
	{
		rma_status_t st = remote_io(cb, rb, rem[2], SZ, 0);
		ck_assert_msg(st == RMA_ERR_STALE_DESCRIPTOR ||
				  st == RMA_ERR_NO_REGION,
			      "a freed region: %s", rma_strerror(st));
	}
	ck_assert_msg(sup_wait_count(&sa, "removed store-region-", 1),
		      "the freed region is still in the store");
	rma_disconnect(cb);
	rma_disconnect(ca);
	free(want);
}
END_TEST

/* fd_store_max above the unit's store: rmad warns at start; the region
 * systemd dropped comes back without its fd, and is dropped with an error;
 * its owner re-attaches the others (re-attach is per region): the lost
 * one fails with RMA_ERR_NO_REGION, its mapping still the application's,
 * and the others are served. */
START_TEST(test_store_smaller_than_config)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra[3], *rb;
	rma_remote_t *rem;
	rma_peer_t *peer;
	char grep[256];

	/* 5: the state, the socket, the configuration, 2 regions */
	sup_start_as(&sa, 5, 7, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra[i]), RMA_OK);
		harness_fill(rma_region_ptr(ra[i]), SZ, 70 + i);
	}
	ck_assert_msg(sup_wait_count(&sa, "full store-region-", 1),
		      "the stand-in did not drop the third region");
	memcpy(rma_region_ptr(ra[2]), "lost", 4);
	sup_crash(&sa);
	snprintf(grep, sizeof(grep),
		 "grep -q 'above the unit.s FileDescriptorStoreMax=5' "
		 "%s/rmad.log && grep -q 'has a record but systemd passed "
		 "no fd' %s/rmad.log",
		 sa.dir, sa.dir);
	ck_assert_msg(system(grep) == 0, "no warning, or no error, logged");
	reattach(ca);
	{
		rma_remote_t *own;
		rma_peer_t *self;
		uint8_t *p = rma_region_ptr(ra[2]);

		/* the lost region's memory is still the application's */
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(memcmp(p, "lost", 4), 0);
		p[0] = 1;
		ck_assert_int_eq(rma_peer_connect(ca, sa.listen, &self),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(ca, self,
						   rma_region_descriptor(ra[0]),
						   &own),
				 RMA_OK);
		ck_assert_int_eq(rma_get_sync(ca, ra[2], 0, own, 0, 8, WAIT_MS),
				 RMA_ERR_NO_REGION);
		ck_assert_int_eq(
		    rma_get_sync(ca, ra[1], 0, own, 0, SZ, WAIT_MS), RMA_OK);
		ck_assert_int_eq(
		    memcmp(rma_region_ptr(ra[1]), rma_region_ptr(ra[0]), SZ),
		    0);
		ck_assert_int_eq(rma_region_free(ca, ra[2]), RMA_OK);
	}

	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer, rma_region_descriptor(ra[0]), &rem),
	    RMA_OK);
	ck_assert_int_eq(remote_io(cb, rb, rem, SZ, 0), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra[0]), SZ),
			 0);
	ck_assert_int_ne(
	    rma_remote_import(cb, peer, rma_region_descriptor(ra[2]), &rem),
	    RMA_OK);
	rma_disconnect(cb);
	rma_disconnect(ca);
}
END_TEST

/* The name (store-region-<id>) of the n-th region the sink stored. */
static void
sup_stored_name(const struct sup *s, int n, char *name, size_t len)
{
	static const char prefix[] = "stored ";
	char line[128];
	int k = 0;
	FILE *f = fopen(s->log, "r");

	name[0] = '\0';
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "stored store-region-", 20) != 0 || ++k != n)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(name, len, "%s", line + strlen(prefix));
		break;
	}
	fclose(f);
}

/* FDSTOREREMOVE of that region ("removed NAME N"). */
static int
sup_removed(const struct sup *s, const char *name)
{
	char prefix[160];

	snprintf(prefix, sizeof(prefix), "removed %s ", name);
	return sup_count(s, prefix, NULL, 0);
}

struct removed_arg {
	const struct sup *s;
	const char *name;
};

static int
removed_cond(void *arg)
{
	struct removed_arg *a = arg;

	return sup_removed(a->s, a->name) > 0;
}

/* Both logs, for a failure that depends on what rmad did when. */
static void
sup_show_logs(const struct sup *s)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "cat %s/sink.log %s/rmad.log >&2", s->dir,
		 s->dir);
	ck_assert_int_ge(system(cmd), -1);
}

/* rmad crash-looping: each start restores the orphans with the deadline
 * they got when they first became orphans, not reattach_timeout (3 s)
 * from that start. Restarts, each process living well under the timeout,
 * until the orphan goes: it must go after its deadline and during the
 * loop (a deadline renewed at each start would keep it for ever), while
 * the region whose owner re-attaches after every crash stays. Each region
 * is told by its own name in the sink's log (the orphan's was stored
 * first); only the deadline itself is a matter of time. */
START_TEST(test_orphan_deadline_survives_crash_loop)
{
	rma_client_t *gone, *ca;
	rma_region_t *left, *kept;
	char orphan[128], owned[128];
	double first, ready;
	int crashes = 0;

	sup_start(&sa, 64, 0);
	sup_wait_ready(&sa, 1);
	setenv("RMA_NO_REATTACH", "1", 1);
	ck_assert_int_eq(rma_connect(sa.socket, &gone), RMA_OK);
	unsetenv("RMA_NO_REATTACH");
	ck_assert_int_eq(rma_region_alloc(gone, SZ, &left), RMA_OK);
	ck_assert_msg(sup_wait_count(&sa, "stored store-region-", 1),
		      "the orphan-to-be is not in the store");
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &kept), RMA_OK);
	ck_assert_msg(sup_wait_count(&sa, "stored store-region-", 2),
		      "the regions are not in the store");
	sup_stored_name(&sa, 1, orphan, sizeof(orphan));
	sup_stored_name(&sa, 2, owned, sizeof(owned));
	ck_assert_str_ne(orphan, owned);
	/* Before the kill: the orphan's deadline comes from the restart
	 * after it (at least first + 3 s); that restart said READY by
	 * ready (at most ready + 3 s). */
	first = harness_now();
	sup_crash(&sa);
	ready = harness_now();
	/* the owner that comes back each time keeps its region */
	reattach(ca);
	for (;;) {
		/* The log first, the clock after it: a removal seen here was
		 * made by now, however long this process waited in between
		 * on a loaded machine. */
		int went = sup_removed(&sa, orphan) > 0;
		double now = harness_now();

		if (sup_removed(&sa, owned) != 0) {
			sup_show_logs(&sa);
			ck_abort_msg("%s, re-attached after every crash, was "
				     "removed (%d crashes)",
				     owned, crashes + 1);
		}
		if (went) {
			if (now < first + 2.8) {
				sup_show_logs(&sa);
				ck_abort_msg("the orphan %s went %.2f s after "
					     "the crash, before its deadline",
					     orphan, now - first);
			}
			break;
		}
		/* a generous bound: the deadline is ready + 3 s at most */
		if (now > ready + 15.0) {
			sup_show_logs(&sa);
			ck_abort_msg("the orphan %s outlived its deadline "
				     "through %d crashes",
				     orphan, crashes + 1);
		}
		sup_crash(&sa);
		reattach(ca);
		crashes++;
	}
	harness_fill(rma_region_ptr(kept), SZ, 5);
	ck_assert_int_eq(rma_region_free(ca, kept), RMA_OK);
	{
		struct removed_arg a = {&sa, owned};
		ck_assert_msg(harness_until(10.0, removed_cond, &a),
			      "the re-attached region was not freed");
	}
	ck_assert_int_eq(sup_removed(&sa, orphan), 1);
	ck_assert_int_eq(sup_removed(&sa, owned), 1);
	ck_assert_int_eq(sup_count(&sa, "removed store-region-", NULL, 0), 2);
	rma_disconnect(gone);
	rma_disconnect(ca);
}
END_TEST

/* rmad.socket passes the client socket first, the store after it: both
 * are told apart by name, the socket is not stored, and the metrics count
 * the recovery. */
START_TEST(test_crash_with_socket_activation)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra[2], *rb;
	rma_remote_t *rem;
	rma_peer_t *peer;

	rma_client_t *gone;
	rma_region_t *left;

	sup_start(&sa, 64, 1);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra[i]), RMA_OK);
		harness_fill(rma_region_ptr(ra[i]), SZ, 60 + i);
	}
	/* a client that will not come back: its region is an orphan after
	 * the crash, freed (and out of the store) after reattach_timeout */
	setenv("RMA_NO_REATTACH", "1", 1);
	ck_assert_int_eq(rma_connect(sa.socket, &gone), RMA_OK);
	unsetenv("RMA_NO_REATTACH");
	ck_assert_int_eq(rma_region_alloc(gone, SZ, &left), RMA_OK);
	ck_assert_int_eq(metric(&sa, "rmad_store_recoveries_total"), 0);
	ck_assert_int_eq(metric(&sa, "rmad_fd_store_regions"), 3);
	ck_assert_int_eq(metric(&sa, "rmad_fd_store_capacity"), 61);

	sup_crash(&sa);
	reattach(ca);
	ck_assert_int_eq(sup_count(&sa, "stored store-listen", NULL, 0), 0);
	ck_assert_int_eq(access(sa.socket, F_OK), 0);
	{
		char own[128];
		snprintf(own, sizeof(own), "%s/not-this.sock", sa.dir);
		ck_assert_msg(access(own, F_OK) != 0,
			      "rmad made a socket besides the activated one");
	}
	ck_assert_int_eq(metric(&sa, "rmad_store_recoveries_total"), 1);
	ck_assert_int_eq(metric(&sa, "rmad_restarts"), 1);
	ck_assert_int_eq(metric(&sa, "rmad_regions_recovered_total"), 3);
	ck_assert_msg(sup_wait_count(&sa, "removed store-region-", 1),
		      "the orphan was not freed after reattach_timeout");
	ck_assert_int_eq(metric(&sa, "rmad_fd_store_regions"), 2);
	ck_assert_int_eq(metric(&sa, "rmad_regions_orphaned"), 0);
	rma_disconnect(gone);

	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer, rma_region_descriptor(ra[1]), &rem),
	    RMA_OK);
	ck_assert_int_eq(remote_io(cb, rb, rem, SZ, 0), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra[1]), SZ),
			 0);
	rma_disconnect(cb);
	rma_disconnect(ca);
}
END_TEST

/* systemctl restart (SIGTERM, a job queued: the store is kept) comes
 * back with the regions; systemctl stop (SIGTERM, no job) empties the
 * store. */
START_TEST(test_restart_keeps_stop_releases)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_remote_t *rem;
	rma_peer_t *peer;
	uint32_t restarts;
	uint64_t recovered;
	size_t orphans;
	char line[64];

	sup_start(&sa, 64, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra), RMA_OK);
	harness_fill(rma_region_ptr(ra), SZ, 50);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer, rma_region_descriptor(ra), &rem),
	    RMA_OK);

	ck_assert_int_eq(kill(sa.pid, SIGUSR1), 0);
	sup_wait_ready(&sa, 2);
	ck_assert_int_eq(sup_count(&sa, "exited ", line, sizeof(line)), 1);
	ck_assert_msg(strstr(line, " 0\n") != NULL,
		      "rmad exited %s after SIGTERM", line);
	ck_assert_int_eq(sup_count(&sa, "released", NULL, 0), 0);
	reattach(ca);
	status_counts(ca, &restarts, &recovered, &orphans);
	ck_assert_uint_eq(restarts, 1);
	ck_assert_uint_eq(recovered, 1);
	ck_assert_uint_eq(orphans, 0);
	ck_assert_int_eq(remote_io(cb, rb, rem, SZ, 0), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra), SZ), 0);

	/* stop: everything stored goes (the state, the socket, the
	 * configuration, the region) */
	ck_assert_int_eq(kill(sa.pid, SIGTERM), 0);
	{
		double deadline = harness_now() + 15.0;
		while (sup_count(&sa, "released ", line, sizeof(line)) == 0 &&
		       harness_now() < deadline)
			harness_pause(0.01, deadline);
	}
	ck_assert_str_eq(line, "4\n");
	rma_disconnect(cb);
	rma_disconnect(ca);
}
END_TEST

/* ---- a configuration refused at restart --------------------------------- */

static void
write_config(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static int
config_accepted(void *arg)
{
	return metric(arg, "rmad_config_rejected") == 0;
}

/* systemctl restart with a typo in the file: rmad comes back on the last
 * configuration that worked (kept in the store beside the state), with
 * the same identity and the region a peer reads through the descriptor
 * it had; status, /metrics and STATUS= say what was refused. Once the
 * file is fixed, a reload clears it. */
START_TEST(test_restart_with_a_typo_keeps_regions)
{
	rma_client_t *ca, *cb;
	rma_region_t *ra, *rb;
	rma_remote_t *rem;
	rma_peer_t *peer;
	Rma__V1__Reply *reply;
	char id[64];
	int fd;

	snprintf(sa.config, sizeof(sa.config), "/tmp/rmad-fdstore.XXXXXX");
	fd = mkstemp(sa.config);
	ck_assert_int_ge(fd, 0);
	close(fd);
	write_config(sa.config, "[rmad]\nmax_regions = 100\n");
	sup_start(&sa, 64, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_msg(sup_wait_count(&sa, "stored store-config-", 1),
		      "the configuration is not in the store");
	ck_assert_int_eq(metric(&sa, "rmad_config_rejected"), 0);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra), RMA_OK);
	harness_fill(rma_region_ptr(ra), SZ, 60);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer, rma_region_descriptor(ra), &rem),
	    RMA_OK);
	reply = status_call(ca);
	snprintf(id, sizeof(id), "%s", reply->status_reply->daemon_id);
	rma__v1__reply__free_unpacked(reply, NULL);

	write_config(sa.config, "[rmad]\nmax_regions = 100\nmax_regoins = 5\n");
	ck_assert_int_eq(kill(sa.pid, SIGUSR1), 0);
	sup_wait_ready(&sa, 2);
	ck_assert_int_eq(sup_count(&sa, "released", NULL, 0), 0);
	reattach(ca);
	reply = status_call(ca);
	ck_assert_str_eq(reply->status_reply->daemon_id, id);
	ck_assert_uint_eq(reply->status_reply->regions_recovered, 1);
	ck_assert_msg(reply->status_reply->config_refused != NULL &&
			  strstr(reply->status_reply->config_refused,
				 "unknown option 'max_regoins'") != NULL,
		      "status says '%s'", reply->status_reply->config_refused);
	rma__v1__reply__free_unpacked(reply, NULL);
	ck_assert_int_eq(metric(&sa, "rmad_config_rejected"), 1);
	ck_assert_int_ge(sup_count(&sa, "STATUS=CONFIG REFUSED", NULL, 0), 1);
	ck_assert_int_eq(remote_io(cb, rb, rem, SZ, 0), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(ra), SZ), 0);

	/* fixed and reloaded (systemctl reload): on the file again */
	write_config(sa.config, "[rmad]\nmax_regions = 100\n");
	ck_assert_int_eq(kill(sup_main_pid(&sa), SIGHUP), 0);
	ck_assert_msg(harness_until(10.0, config_accepted, &sa),
		      "the refusal outlived a reload of the fixed file");
	rma_disconnect(cb);
	rma_disconnect(ca);
}
END_TEST

/* ---- kills at random points of a burst --------------------------------- */

#define ROUNDS 20
#define BURST_SZ 16384u
#define BURST_MAX 20000

struct burst_region {
	rma_region_t *r; /* NULL once freed */
	char desc[256];
	uint32_t seed;
	int state; /* 1 live, 2 freed */
};

static struct burst_region br[BURST_MAX];
static size_t n_br;
/* how calls cut by a kill ended: RESTARTED, anything else */
static int n_restarted, n_other;

static void
burst_count(rma_status_t st)
{
	if (st == RMA_ERR_RESTARTED)
		n_restarted++;
	else if (st != RMA_OK && n_other++ == 0)
		fprintf(stderr, "a call cut by a kill: %s\n", rma_strerror(st));
}

/* One step of the burst: allocate (and write a pattern) or free. */
static void
burst_step(rma_client_t *c, uint32_t *seed)
{
	static size_t live[BURST_MAX];
	size_t n_live = 0;
	rma_status_t st;

	for (size_t i = 0; i < n_br; i++)
		if (br[i].state == 1)
			live[n_live++] = i;
	/* between 8 and 40 live regions, mostly */
	if (n_br < BURST_MAX &&
	    (n_live < 8 || (n_live < 40 && rand() % 2 == 0))) {
		rma_region_t *r;

		st = rma_region_alloc(c, BURST_SZ, &r);
		ck_assert_msg(st != RMA_ERR_DAEMON_GONE, "alloc: %s",
			      rma_last_error(c));
		burst_count(st);
		if (st != RMA_OK)
			return; /* not made, or an orphan nobody claims */
		br[n_br].r = r;
		br[n_br].seed = (*seed)++;
		br[n_br].state = 1;
		snprintf(br[n_br].desc, sizeof(br[n_br].desc), "%s",
			 rma_region_descriptor(r));
		harness_fill(rma_region_ptr(r), BURST_SZ, br[n_br].seed);
		n_br++;
		return;
	}
	if (n_live == 0)
		return;
	{
		struct burst_region *b = &br[live[rand() % n_live]];

		/* a free cut by the kill too: librma frees it again in the
		 * next process, never leaving it an orphan */
		st = rma_region_free(c, b->r);
		ck_assert_msg(st == RMA_OK, "free: %s (%s)", rma_strerror(st),
			      rma_last_error(c));
		b->state = 2;
		b->r = NULL;
	}
}

START_TEST(test_kills_during_burst)
{
	rma_client_t *ca, *cb;
	rma_region_t *rb;
	rma_peer_t *peer;
	uint8_t *want = malloc(BURST_SZ);
	uint32_t seed = 100;
	size_t n_live = 0, n_freed = 0;

	srand((unsigned)time(NULL));
	sup_start(&sa, 4096, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	for (int round = 0; round < ROUNDS; round++) {
		pid_t pid = sup_main_pid(&sa);
		struct ready_arg a = {&sa, round + 2};
		double deadline = harness_now() + 20.0;
		/* the random point of the burst the kill falls on: after
		 * that many steps, while the next ones are under way (the
		 * signal is not waited for) */
		int kill_at = rand() % 40, steps = 0;

		/* the burst goes on through the kill and the re-attach */
		while (steps <= kill_at + 5 || !sup_ready_cond(&a)) {
			if (steps == kill_at)
				kill(pid, SIGKILL);
			burst_step(ca, &seed);
			steps++;
			ck_assert_msg(harness_now() < deadline,
				      "round %d: no restart", round);
		}
	}

	/* Every region the client saw made and not freed is there with its
	 * bytes; every freed one is gone. Seen from another daemon. */
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, BURST_SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	for (size_t i = 0; i < n_br; i++) {
		rma_remote_t *rem = NULL;
		rma_status_t st;

		st = rma_remote_import(cb, peer, br[i].desc, &rem);
		if (br[i].state == 2) {
			if (st == RMA_OK)
				st = remote_io(cb, rb, rem, BURST_SZ, 0);
			ck_assert_msg(st != RMA_OK,
				      "freed region %zu still served", i);
			n_freed++;
		} else {
			ck_assert_msg(st == RMA_OK, "live region %zu: %s (%s)",
				      i, rma_strerror(st), rma_last_error(cb));
			ck_assert_int_eq(remote_io(cb, rb, rem, BURST_SZ, 0),
					 RMA_OK);
			harness_fill(want, BURST_SZ, br[i].seed);
			ck_assert_msg(
			    memcmp(rma_region_ptr(rb), want, BURST_SZ) == 0,
			    "live region %zu: other bytes", i);
			n_live++;
		}
		if (rem != NULL)
			rma_remote_release(cb, rem);
	}
	fprintf(stderr,
		"%d kills: %zu regions made, %zu live and checked, %zu "
		"freed and gone; calls cut: %d RESTARTED, %d other\n",
		ROUNDS, n_br, n_live, n_freed, n_restarted, n_other);
	ck_assert_uint_gt(n_live, 0);
	ck_assert_uint_gt(n_freed, 0);
	ck_assert_int_eq(sup_count(&sa, "full ", NULL, 0), 0);
	rma_disconnect(cb);
	rma_disconnect(ca);
	free(want);
}
END_TEST

/* ---- the store's limit ---------------------------------------------- */

START_TEST(test_store_limit)
{
	/* 6 fds: the state, the client socket, the configuration, 3
	 * regions */
	enum { MAX = 6, FIT = MAX - 3 };
	rma_client_t *ca, *cb;
	rma_region_t *ra[FIT + 1], *extra, *rb;
	rma_remote_t *rem;
	rma_peer_t *peer;
	uint8_t *want = malloc(SZ);
	uint32_t restarts;
	uint64_t recovered;
	size_t orphans;

	sup_start(&sa, MAX, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	for (int i = 0; i < FIT; i++) {
		ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra[i]), RMA_OK);
		harness_fill(rma_region_ptr(ra[i]), SZ, 40 + i);
	}
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &extra), RMA_ERR_LIMIT);
	ck_assert_msg(strstr(rma_last_error(ca), "fd store") != NULL,
		      "no reason given: %s", rma_last_error(ca));
	/* systemd dropped nothing: each fd was refused before it came */
	ck_assert_int_eq(sup_count(&sa, "full ", NULL, 0), 0);

	sup_crash(&sa);
	reattach(ca);
	status_counts(ca, &restarts, &recovered, &orphans);
	ck_assert_uint_eq(recovered, FIT);
	ck_assert_uint_eq(orphans, 0);
	/* Still full after the restart; a free makes room again. */
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &extra), RMA_ERR_LIMIT);
	ck_assert_int_eq(rma_region_free(ca, ra[0]), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra[FIT]), RMA_OK);
	ck_assert_int_eq(sup_count(&sa, "full ", NULL, 0), 0);

	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(cb, peer, rma_region_descriptor(ra[2]), &rem),
	    RMA_OK);
	ck_assert_int_eq(remote_io(cb, rb, rem, SZ, 0), RMA_OK);
	harness_fill(want, SZ, 42);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), want, SZ), 0);
	rma_disconnect(cb);
	rma_disconnect(ca);
	free(want);
}
END_TEST

/* A region whose memfd comes back from the store without rmad's seals
 * (a store that holds something other than what rmad gave it) is not
 * adopted: its holder could shrink it under a write, and rmad would die
 * of SIGBUS. rmad comes back without that region and with the others. */
START_TEST(test_unsealed_region_refused)
{
	rma_client_t *ca, *cb;
	rma_region_t *r1, *r2, *rb;
	rma_remote_t *rem;
	rma_peer_t *peer;
	char d1[RMA_DESCRIPTOR_MAX], d2[RMA_DESCRIPTOR_MAX], cmd[256];
	rma_status_t st;

	sa.unseal = 1;
	sup_start(&sa, 64, 0);
	sup_wait_ready(&sa, 1);
	ck_assert_int_eq(rma_connect(sa.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, 4096, &rb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, 4096, &r1), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, 4096, &r2), RMA_OK);
	harness_fill(rma_region_ptr(r2), 4096, 21);
	snprintf(d1, sizeof(d1), "%s", rma_region_descriptor(r1));
	snprintf(d2, sizeof(d2), "%s", rma_region_descriptor(r2));
	ck_assert(sup_wait_count(&sa, "stored store-region-", 2));

	sup_crash(&sa);
	ck_assert_int_eq(sup_count(&sa, "unsealed store-region-", NULL, 0), 1);
	snprintf(cmd, sizeof(cmd),
		 "grep -q 'region_adopt: region [0-9]*: memfd not sealed' "
		 "%s/rmad.log",
		 sa.dir);
	ck_assert_msg(system(cmd) == 0, "no refusal in %s/rmad.log", sa.dir);
	/* the first region is gone, the second is served */
	ck_assert_int_eq(rma_peer_connect(cb, sa.listen, &peer), RMA_OK);
	st = rma_remote_import(cb, peer, d1, &rem);
	if (st == RMA_OK)
		st = remote_io(cb, rb, rem, 64, 0);
	ck_assert_int_eq(st, RMA_ERR_STALE_DESCRIPTOR);
	ck_assert_int_eq(rma_remote_import(cb, peer, d2, &rem), RMA_OK);
	ck_assert_int_eq(remote_io(cb, rb, rem, 4096, 0), RMA_OK);
	ck_assert_int_eq(memcmp(rma_region_ptr(rb), rma_region_ptr(r2), 4096),
			 0);
	rma_disconnect(cb);
	rma_disconnect(ca);
}
END_TEST

static Suite *
fdstore_suite(void)
{
	Suite *s = suite_create("fdstore");
	TCase *tc = tcase_create("crash");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_crash_keeps_regions);
	tcase_add_test(tc, test_store_limit);
	tcase_add_test(tc, test_crash_with_socket_activation);
	tcase_add_test(tc, test_store_smaller_than_config);
	tcase_add_test(tc, test_restart_keeps_stop_releases);
	tcase_add_test(tc, test_restart_with_a_typo_keeps_regions);
	tcase_add_test(tc, test_kills_during_burst);
	tcase_add_test(tc, test_orphan_deadline_survives_crash_loop);
	tcase_add_test(tc, test_unsealed_region_refused);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return check_main_run(fdstore_suite());
}
