/* SPDX-License-Identifier: BSD-2-Clause */
/* What the fault tests share (test_faults_peers.c, test_faults_clients.c,
 * test_faults_daemon.c): up to three real rmad processes on loopback, the
 * clients a test opened, completions counted by status, the status request
 * read back, and the usual two-daemon setup. Every wait has a deadline;
 * the times that matter are printed ("faults: ..." on stderr). */
#ifndef RMA_TEST_FAULTS_COMMON_H
#define RMA_TEST_FAULTS_COMMON_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "rma.h"
#include "rma_internal.h"

#define WAIT_MS 10000
#define REGION (1u << 20)

/* The daemons of the running test; teardown stops whichever runs. */
extern struct daemon_proc da, db, dc;

/* Registers c to be disconnected at teardown; returns c. */
rma_client_t *faults_track(rma_client_t *c);

/* Completions by status, and when the first and last arrived. */
struct tally {
	int done, ok, reset, canceled, timeout, shutdown, gone, other;
	/* reached the daemon after a kill: the reconnect was refused */
	int unreachable;
	rma_status_t other_status;
	double first, last;
};

/* An rma_request_cb counting into the struct tally at arg. */
void tally_cb(rma_request_t *req, rma_status_t st, void *arg);

/* Progress until *done reaches want or the deadline passes; the client may
 * go away meanwhile (its requests then complete with DAEMON_GONE). */
void progress_until(rma_client_t *c, const int *done, int want, double seconds);
/* Sends the submissions the library still coalesces. */
void send_pending(rma_client_t *c);

struct peer_view {
	int found;
	int state; /* Rma__V1__PeerState */
	uint64_t in_flight;
	char last_error[200];
};

/* The daemon's outbound peer at address, as the status request shows it. */
struct peer_view status_peer(rma_client_t *c, const char *address);
void status_counts(rma_client_t *c, size_t *regions, size_t *clients);

/* A client on d with one region of REGION bytes. */
void client_with_region(const struct daemon_proc *d, rma_client_t **c_p,
			rma_region_t **r_p);
void import_from(rma_client_t *c, const struct daemon_proc *owner,
		 const rma_region_t *r, rma_peer_t **peer_p,
		 rma_remote_t **rem_p);
/* A put whose bytes are then checked in the owner's mapping. */
void put_and_check(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
		   const rma_region_t *target, uint64_t off, size_t n,
		   uint32_t seed);
/* Retries a put on the same handle until it succeeds; 0 past deadline. */
int put_until_ok(rma_client_t *c, rma_region_t *local, rma_remote_t *rem,
		 uint64_t off, size_t n, double deadline, int *attempts_p,
		 double *worst_p, rma_status_t *st_p);

double ms(double seconds);
/* Fails the test, saying how, if the daemon exits within seconds. */
void assert_alive(struct daemon_proc *d, double seconds, const char *what);

/* The usual setup: daemons A and B, a client with a region on each, and
 * B's client holding a remote on A's region. */
void two_daemons(const char *const *flags_a, const char *const *flags_b,
		 rma_client_t **ca, rma_region_t **ra, rma_client_t **cb,
		 rma_region_t **rb, rma_peer_t **pa, rma_remote_t **rema);

/* What a daemon holds for its clients, before and after one is killed;
 * the baseline has nothing in flight. */
struct baseline {
	rma_client_t *c;
	pid_t pid;
	size_t regions, clients;
	int fds;
	size_t now_regions, now_clients;
	int now_fds;
	uint64_t now_in_flight;
};

/* Takes the baseline of daemon d through client c. */
void baseline_take(struct baseline *b, rma_client_t *c,
		   const struct daemon_proc *d);
/* harness_until condition: regions, clients and operations in flight
 * back to the baseline, and no more fds than it had. */
int back_to_baseline(void *arg);

/* Adds test as a case of its own named name (CK_RUN_CASE=name runs just
 * that one), with the teardown that stops every daemon. */
void faults_add(Suite *s, const char *name, const TTest *test);
#define FAULTS_ADD(s, t) faults_add(s, #t, t)

#endif
