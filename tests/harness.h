/* SPDX-License-Identifier: BSD-2-Clause */
/* End-to-end helpers: real rmad processes, started and awaited with a
 * deadline (the daemon writes "ready" to a pipe), stopped by signals. */
#ifndef RMA_TEST_HARNESS_H
#define RMA_TEST_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

struct daemon_proc {
	pid_t pid;
	uint16_t port;
	char socket[108];
	char listen[32];
};

/* This process's directory for daemons' sockets (mode 0711, made on
 * first use, removed at exit with what is left in it). */
const char *harness_socket_dir(void);
/* Starts build/daemon/rmad (env RMAD_BIN) on a fresh socket (in
 * harness_socket_dir()) and a free port, extra flags appended; fails the
 * test unless ready within 10 s. */
void harness_daemon_start(struct daemon_proc *p, const char *const *extra);
/* The same, listening on host (numeric, IPv6 in brackets: "[::]") and a
 * free port; p->listen is then "host:port". */
void harness_daemon_start_on(struct daemon_proc *p, const char *host,
			     const char *const *extra);
/* Sends sig and waits (5 s) for the exit; returns the wait status. */
int harness_daemon_stop(struct daemon_proc *p, int sig);

/* Starts rmad again on the same socket and port (after a stop or kill),
 * retrying while the port is not free yet; fails the test after 10 s. */
void harness_daemon_restart(struct daemon_proc *p, const char *const *extra);
/* Starts a successor of *p (extra names --take-over) on its socket and
 * port, then waits up to seconds for the predecessor's clean exit (status
 * 0), failing the test otherwise; *p then names the successor. */
void harness_daemon_take_over(struct daemon_proc *p, const char *const *extra,
			      double seconds);
/* 1 once the daemon exited within seconds (reaped, *status_p set if not
 * NULL), 0 if it is still running. */
int harness_daemon_wait_exit(struct daemon_proc *p, double seconds,
			     int *status_p);
/* SIGKILL (stopped or not) and reap; nothing if not running. */
void harness_daemon_kill(struct daemon_proc *p);

/* The two-daemon fixture, over the test's own variables: daemons a and b
 * started with flags, a client of each with a region of size bytes, and
 * b's client connected to a (peer_a), importing a's region (remote_a).
 * harness_pair_stop disconnects both clients and stops both daemons
 * (SIGTERM), whatever of it was started. */
struct harness_pair {
	struct daemon_proc *da, *db;
	struct rma_client **ca, **cb;
	struct rma_region **ra, **rb;
	struct rma_peer **peer_a;
	struct rma_remote **remote_a;
};

void harness_pair_start(const struct harness_pair *p, size_t size,
			const char *const *flags);
void harness_pair_stop(const struct harness_pair *p);

/* A test file's fixture variables, and the harness_pair naming them. */
#define HARNESS_PAIR(name)                                                     \
	static struct daemon_proc da, db;                                      \
	static struct rma_client *ca, *cb;                                     \
	static struct rma_region *ra, *rb;                                     \
	static struct rma_peer *peer_a;                                        \
	static struct rma_remote *remote_a;                                    \
	static const struct harness_pair name = {                              \
	    .da = &da,                                                         \
	    .db = &db,                                                         \
	    .ca = &ca,                                                         \
	    .cb = &cb,                                                         \
	    .ra = &ra,                                                         \
	    .rb = &rb,                                                         \
	    .peer_a = &peer_a,                                                 \
	    .remote_a = &remote_a,                                             \
	}

/* A TCP port nobody listens on (bound then closed). */
uint16_t harness_free_port(void);
/* 1 if this machine has an IPv6 loopback (a TCP socket binds to ::1). */
int harness_have_ipv6_loopback(void);
double harness_now(void);
/* 1 once fd is readable, 0 after seconds (0: readable right now?). */
int harness_wait_fd(int fd, double seconds);
/* Waits min(seconds, time left until deadline): the pause between two
 * checks of a condition that has its own deadline. */
void harness_pause(double seconds, double deadline);
/* Checks cond every 5 ms; 1 once true, 0 if still false after seconds. */
int harness_until(double seconds, int (*cond)(void *), void *arg);
/* Open descriptors of a process (/proc/PID/fd), -1 if unreadable. */
int harness_fd_count(pid_t pid);
/* Resident memory of a process in KiB (VmRSS), -1 if unreadable. */
long harness_rss_kib(pid_t pid);
void harness_fill(void *buf, size_t n, uint32_t seed);

#endif
