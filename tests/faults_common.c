/* SPDX-License-Identifier: BSD-2-Clause */
/* What the fault tests share: the daemons of the running test, their
 * teardown, and the helpers of faults_common.h. */
#include "faults_common.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "status_call.h"

struct daemon_proc da, db, dc;
static rma_client_t *clients[16];
static int n_clients;

rma_client_t *
faults_track(rma_client_t *c)
{
	ck_assert_int_lt(n_clients, 16);
	clients[n_clients++] = c;
	return c;
}

/* Clients go first; then every daemon still running, whatever it went
 * through, must shut down cleanly on SIGTERM (exit 0: under the
 * sanitizers that also means no leak and no error). */
static void
faults_teardown(void)
{
	struct daemon_proc *ds[] = {&da, &db, &dc};
	const char *bad = NULL;
	int status;

	for (int i = 0; i < n_clients; i++)
		rma_disconnect(clients[i]);
	n_clients = 0;
	for (int i = 0; i < 3; i++) {
		if (ds[i]->pid > 0) {
			kill(ds[i]->pid, SIGCONT);
			kill(ds[i]->pid, SIGTERM);
		}
	}
	for (int i = 0; i < 3; i++) {
		if (ds[i]->pid <= 0)
			continue;
		if (!harness_daemon_wait_exit(ds[i], 10, &status)) {
			harness_daemon_kill(ds[i]);
			bad = "an rmad did not exit within 10 s of SIGTERM";
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			bad = "an rmad did not exit 0 on SIGTERM";
		}
	}
	ck_assert_msg(bad == NULL, "%s", bad);
}

void
tally_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	struct tally *t = arg;
	double now = harness_now();

	if (t->done++ == 0)
		t->first = now;
	t->last = now;
	switch (st) {
	case RMA_OK:
		t->ok++;
		break;
	case RMA_ERR_CONNECTION_RESET:
		t->reset++;
		break;
	case RMA_ERR_CANCELED:
		t->canceled++;
		break;
	case RMA_ERR_UNREACHABLE:
		t->unreachable++;
		break;
	case RMA_ERR_TIMEOUT:
		t->timeout++;
		break;
	case RMA_ERR_SHUTDOWN:
		t->shutdown++;
		break;
	case RMA_ERR_DAEMON_GONE:
		t->gone++;
		break;
	default:
		t->other++;
		t->other_status = st;
		break;
	}
}

/* Progress until *done reaches want or the deadline passes; the client may
 * go away meanwhile (its requests then complete with DAEMON_GONE). */
void
progress_until(rma_client_t *c, const int *done, int want, double seconds)
{
	double deadline = harness_now() + seconds;

	while (*done < want && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		rma_progress(c);
	}
	ck_assert_msg(*done == want,
		      "%d of %d requests completed within %.0f s", *done, want,
		      seconds);
}

/* Sends the submissions the library still coalesces. */
void
send_pending(rma_client_t *c)
{
	double deadline = harness_now() + 10;

	while (c->pending_n > 0 && harness_now() < deadline)
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	ck_assert_uint_eq(c->pending_n, 0);
}

/* The daemon's outbound peer at address, as the status request shows it. */
struct peer_view
status_peer(rma_client_t *c, const char *address)
{
	Rma__V1__Reply *reply = status_call(c);
	Rma__V1__StatusReply *st = reply->status_reply;
	struct peer_view v = {0};

	for (size_t i = 0; i < st->n_peers; i++) {
		Rma__V1__PeerInfo *p = st->peers[i];
		if (p->inbound || strcmp(p->address, address) != 0)
			continue;
		v.found = 1;
		v.state = p->state;
		v.in_flight = p->in_flight;
		snprintf(v.last_error, sizeof(v.last_error), "%s",
			 p->last_error ? p->last_error : "");
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	return v;
}

void
status_counts(rma_client_t *c, size_t *regions, size_t *clients)
{
	Rma__V1__Reply *reply = status_call(c);

	*regions = reply->status_reply->n_regions;
	*clients = reply->status_reply->n_clients;
	rma__v1__reply__free_unpacked(reply, NULL);
}

/* A client on d with one region of REGION bytes. */
void
client_with_region(const struct daemon_proc *d, rma_client_t **c_p,
		   rma_region_t **r_p)
{
	ck_assert_int_eq(rma_connect(d->socket, c_p), RMA_OK);
	faults_track(*c_p);
	ck_assert_int_eq(rma_region_alloc(*c_p, REGION, r_p), RMA_OK);
}

void
import_from(rma_client_t *c, const struct daemon_proc *owner,
	    const rma_region_t *r, rma_peer_t **peer_p, rma_remote_t **rem_p)
{
	ck_assert_int_eq(rma_peer_connect(c, owner->listen, peer_p), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(c, *peer_p, rma_region_descriptor(r), rem_p),
	    RMA_OK);
}

/* A put whose bytes are then checked in the owner's mapping. */
void
put_and_check(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
	      const rma_region_t *target, uint64_t off, size_t n, uint32_t seed)
{
	uint8_t *src = rma_region_ptr(local);

	harness_fill(src, n, seed);
	ck_assert_int_eq(rma_put_sync(c, local, 0, rem, off, n,
				      RMA_FLAG_REMOTE_COMPLETION, WAIT_MS),
			 RMA_OK);
	ck_assert_int_eq(
	    memcmp((uint8_t *)rma_region_ptr(target) + off, src, n), 0);
}

double
ms(double seconds)
{
	return seconds * 1000.0;
}

/* Fails the test, saying how, if the daemon exits within seconds. */
void
assert_alive(struct daemon_proc *d, double seconds, const char *what)
{
	int status = 0;

	if (!harness_daemon_wait_exit(d, seconds, &status))
		return;
	if (WIFSIGNALED(status))
		ck_abort_msg("rmad on %s died of signal %d %s", d->listen,
			     WTERMSIG(status), what);
	ck_abort_msg("rmad on %s exited with status %d %s", d->listen,
		     WEXITSTATUS(status), what);
}

/* The usual setup: daemons A and B, a client with a region on each, and
 * B's client holding a remote on A's region. */
void
two_daemons(const char *const *flags_a, const char *const *flags_b,
	    rma_client_t **ca, rma_region_t **ra, rma_client_t **cb,
	    rma_region_t **rb, rma_peer_t **pa, rma_remote_t **rema)
{
	harness_daemon_start(&da, flags_a);
	harness_daemon_start(&db, flags_b);
	client_with_region(&da, ca, ra);
	client_with_region(&db, cb, rb);
	import_from(*cb, &da, *ra, pa, rema);
}

/* Retries a put on the same handle until it succeeds; 0 past deadline. */
int
put_until_ok(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
	     uint64_t off, size_t n, double deadline, int *attempts_p,
	     double *worst_p, rma_status_t *st_p)
{
	for (;;) {
		double a = harness_now();
		rma_status_t st =
		    rma_put_sync(c, local, 0, rem, off, n,
				 RMA_FLAG_REMOTE_COMPLETION, WAIT_MS);
		(*attempts_p)++;
		*st_p = st;
		if (st == RMA_OK)
			return 1;
		if (harness_now() - a > *worst_p)
			*worst_p = harness_now() - a;
		if (harness_now() >= deadline)
			return 0;
		harness_pause(0.02, deadline);
	}
}

int
back_to_baseline(void *arg)
{
	struct baseline *b = arg;
	Rma__V1__Reply *reply = status_call(b->c);

	b->now_regions = reply->status_reply->n_regions;
	b->now_clients = reply->status_reply->n_clients;
	b->now_in_flight = reply->status_reply->ops_in_flight;
	rma__v1__reply__free_unpacked(reply, NULL);
	b->now_fds = harness_fd_count(b->pid);
	/* Not one fd more: a leak. One fewer is no leak, and happens: an fd
	 * the baseline caught in passing (a socket UCX's async thread was
	 * closing, the guard's netlink query at an accept) is gone later. */
	return b->now_regions == b->regions && b->now_clients == b->clients &&
	       b->now_fds <= b->fds && b->now_in_flight == 0;
}

void
baseline_take(struct baseline *b, rma_client_t *c, const struct daemon_proc *d)
{
	b->c = c;
	b->pid = d->pid;
	status_counts(c, &b->regions, &b->clients);
	b->fds = harness_fd_count(d->pid);
}

void
faults_add(Suite *s, const char *name, const TTest *test)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, NULL, faults_teardown);
	tcase_set_timeout(tc, 40);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
}
