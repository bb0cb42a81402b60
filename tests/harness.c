/* SPDX-License-Identifier: BSD-2-Clause */
#include "harness.h"
#include "rma.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double
harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
harness_pair_start(const struct harness_pair *p, size_t size,
		   const char *const *flags)
{
	harness_daemon_start(p->da, flags);
	harness_daemon_start(p->db, flags);
	ck_assert_int_eq(rma_connect(p->da->socket, p->ca), RMA_OK);
	ck_assert_int_eq(rma_connect(p->db->socket, p->cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(*p->ca, size, p->ra), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(*p->cb, size, p->rb), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(*p->cb, p->da->listen, p->peer_a),
			 RMA_OK);
	ck_assert_int_eq(rma_remote_import(*p->cb, *p->peer_a,
					   rma_region_descriptor(*p->ra),
					   p->remote_a),
			 RMA_OK);
}

void
harness_pair_stop(const struct harness_pair *p)
{
	if (*p->cb)
		rma_disconnect(*p->cb);
	if (*p->ca)
		rma_disconnect(*p->ca);
	*p->cb = *p->ca = NULL;
	if (p->db->pid > 0)
		harness_daemon_stop(p->db, SIGTERM);
	if (p->da->pid > 0)
		harness_daemon_stop(p->da, SIGTERM);
}

uint16_t
harness_free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

int
harness_have_ipv6_loopback(void)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6,
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

void
harness_fill(void *buf, size_t n, uint32_t seed)
{
	uint8_t *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* Forks and execs rmad on p->socket and p->listen; 1 once it wrote
 * "ready", 0 if it exited or stayed silent for `seconds` (then it is
 * killed and reaped). */
static int
harness_daemon_spawn(struct daemon_proc *p, const char *const *extra,
		     double seconds)
{
	const char *bin = getenv("RMAD_BIN");
	char fdarg[16];
	const char *argv[32];
	int pipefd[2], argc = 0, ready;
	pid_t parent = getpid();
	char buf[16];

	ck_assert_ptr_nonnull(bin);
	ck_assert_int_eq(pipe2(pipefd, 0), 0);
	snprintf(fdarg, sizeof(fdarg), "%d", pipefd[1]);
	argv[argc++] = bin;
	argv[argc++] = "--socket";
	argv[argc++] = p->socket;
	argv[argc++] = "--listen";
	argv[argc++] = p->listen;
	argv[argc++] = "--ready-fd";
	argv[argc++] = fdarg;
	argv[argc++] = "--log-level";
	argv[argc++] =
	    getenv("RMAD_LOG_LEVEL") ? getenv("RMAD_LOG_LEVEL") : "warn";
	/* RMAD_PROTOCOL runs a whole suite with another rma_protocol. */
	if (getenv("RMAD_PROTOCOL") != NULL) {
		argv[argc++] = "--rma-protocol";
		argv[argc++] = getenv("RMAD_PROTOCOL");
	}
	/* ucx over tcp is refused unless the risk is accepted explicitly. */
	if (getenv("RMAD_PROTOCOL_UNCHECKED") != NULL)
		argv[argc++] = "--rma-protocol-unchecked";
	/* RMAD_WORKERS runs a whole suite with worker threads. */
	if (getenv("RMAD_WORKERS") != NULL) {
		argv[argc++] = "--workers";
		argv[argc++] = getenv("RMAD_WORKERS");
	}
	for (int i = 0; extra && extra[i] && argc < 31; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		/* A test that fails in Check's fork mode exits without its
		 * teardown: its daemons must not outlive it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		close(pipefd[0]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	ready = harness_wait_fd(pipefd[0], seconds) &&
		read(pipefd[0], buf, sizeof(buf)) > 0;
	close(pipefd[0]);
	if (!ready) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
		p->pid = 0;
	}
	return ready;
}

/* This process's directory for sockets: made by mkdtemp, then mode 0711
 * (others may reach a socket in it, as tests of other users do, but not
 * add a name), so that rmad, which refuses a socket directory other users
 * can write, serves there; removed at exit with what is left in it. */
static char harness_dir[32];

static void
harness_dir_remove(void)
{
	DIR *dir = opendir(harness_dir);
	struct dirent *e;
	char path[sizeof(harness_dir) + 256];

	/* what daemons killed without a clean stop left there: sockets,
	 * "<socket>.takeover" among them */
	while (dir != NULL && (e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", harness_dir, e->d_name);
		unlink(path);
	}
	if (dir != NULL)
		closedir(dir);
	rmdir(harness_dir);
}

const char *
harness_socket_dir(void)
{
	static pid_t made_by;

	/* Check's fork mode: each test's process makes its own. */
	if (made_by != getpid()) {
		snprintf(harness_dir, sizeof(harness_dir),
			 "/tmp/rmad-test.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(harness_dir));
		ck_assert_int_eq(chmod(harness_dir, 0711), 0);
		if (made_by == 0)
			atexit(harness_dir_remove);
		made_by = getpid();
	}
	return harness_dir;
}

void
harness_daemon_start(struct daemon_proc *p, const char *const *extra)
{
	harness_daemon_start_on(p, "127.0.0.1", extra);
}

void
harness_daemon_start_on(struct daemon_proc *p, const char *host,
			const char *const *extra)
{
	static int serial;

	int attempts = 0;
	bool ready;

	memset(p, 0, sizeof(*p));
	snprintf(p->socket, sizeof(p->socket), "%s/%d-%d.sock",
		 harness_socket_dir(), (int)getpid(), serial++);
	/* A free port can be taken by another test before rmad binds it:
	 * then rmad exits at once, and another port is tried. */
	do {
		p->port = harness_free_port();
		ck_assert_int_lt(snprintf(p->listen, sizeof(p->listen), "%s:%u",
					  host, p->port),
				 sizeof(p->listen));
		ready = harness_daemon_spawn(p, extra, 10.0);
	} while (!ready && ++attempts < 3);
	ck_assert_msg(ready, "rmad did not become ready within 10 s");
}

void
harness_daemon_restart(struct daemon_proc *p, const char *const *extra)
{
	double deadline = harness_now() + 10.0;

	ck_assert_int_eq(p->pid, 0);
	/* The old listener's port may take a moment to be free again. */
	while (!harness_daemon_spawn(p, extra, deadline - harness_now())) {
		ck_assert_msg(harness_now() < deadline,
			      "rmad did not restart on %s within 10 s",
			      p->listen);
		harness_pause(0.05, deadline);
	}
}

void
harness_daemon_take_over(struct daemon_proc *p, const char *const *extra,
			 double seconds)
{
	struct daemon_proc old = *p;
	int status = -1;

	p->pid = 0;
	harness_daemon_restart(p, extra);
	old.socket[0] = '\0'; /* the path is the successor's now */
	ck_assert_msg(harness_daemon_wait_exit(&old, seconds, &status),
		      "the old rmad did not exit after the hand-over");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the old rmad exited with status %d", status);
}

int
harness_daemon_wait_exit(struct daemon_proc *p, double seconds, int *status_p)
{
	int pidfd, exited;

	if (p->pid <= 0)
		return 0;
	pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	ck_assert_int_ge(pidfd, 0);
	exited = harness_wait_fd(pidfd, seconds);
	close(pidfd);
	if (!exited)
		return 0;
	waitpid(p->pid, status_p, 0);
	p->pid = 0;
	unlink(p->socket);
	return 1;
}

void
harness_daemon_kill(struct daemon_proc *p)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGKILL);
	kill(p->pid, SIGCONT); /* harmless if it was not stopped */
	waitpid(p->pid, NULL, 0);
	p->pid = 0;
	unlink(p->socket);
}

int
harness_daemon_stop(struct daemon_proc *p, int sig)
{
	int status = -1;
	int pidfd;

	if (p->pid <= 0)
		return -1;
	/* A pidfd turns readable when the process exits: poll it with the
	 * deadline instead of sleeping. */
	pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	ck_assert_int_ge(pidfd, 0);
	kill(p->pid, sig);
	if (!harness_wait_fd(pidfd, 5.0)) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &status, 0);
		close(pidfd);
		ck_abort_msg("rmad did not exit within 5 s of signal %d", sig);
	}
	close(pidfd);
	waitpid(p->pid, &status, 0);
	p->pid = 0;
	unlink(p->socket);
	return status;
}

int
harness_wait_fd(int fd, double seconds)
{
	double deadline = harness_now() + seconds;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	/* At least one look, so that 0 seconds asks "readable now?". */
	for (;;) {
		double left = deadline - harness_now();
		if (poll(&pfd, 1, left > 0 ? (int)(left * 1000) + 1 : 0) > 0)
			return 1;
		if (harness_now() >= deadline)
			return 0;
	}
}

void
harness_pause(double seconds, double deadline)
{
	double left = deadline - harness_now();

	if (left > seconds)
		left = seconds;
	if (left > 0)
		poll(NULL, 0, (int)(left * 1000) + 1); /* bounded by deadline */
}

int
harness_until(double seconds, int (*cond)(void *), void *arg)
{
	double deadline = harness_now() + seconds;

	for (;;) {
		if (cond(arg))
			return 1;
		if (harness_now() >= deadline)
			return 0;
		harness_pause(0.005, deadline);
	}
}

int
harness_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((e = readdir(dir)) != NULL)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

long
harness_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}
