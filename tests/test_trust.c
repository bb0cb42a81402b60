/* SPDX-License-Identifier: BSD-2-Clause */
/* Trust: who may connect, per-client limits, peers from disallowed
 * networks. Real daemons; tests that change uid need root. */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "descriptor.h"
#include "harness.h"
#include "rma.h"
#include "status_call.h"

#define WAIT_MS 10000

static struct daemon_proc dp;

static void
stop(void)
{
	if (dp.pid > 0)
		harness_daemon_stop(&dp, SIGTERM);
}

/* rma_connect as nobody:nogroup in a child; returns its status. */
static rma_status_t
connect_as_nobody(const char *socket)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		rma_client_t *c;
		rma_status_t st;
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		st = rma_connect(socket, &c);
		if (st == RMA_OK)
			rma_disconnect(c);
		_exit(-st);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_ne(WEXITSTATUS(status), 100);
	return -WEXITSTATUS(status);
}

START_TEST(test_socket_mode)
{
	struct stat st;

	harness_daemon_start(&dp, NULL);
	ck_assert_int_eq(stat(dp.socket, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	stop();
}
END_TEST

START_TEST(test_allow_lists)
{
	static const char *const only_root[] = {
	    "--allow-users", "0", "--socket-group", "nogroup", NULL};
	static const char *const nogroup[] = {
	    "--allow-groups", "nogroup", "--socket-group", "nogroup", NULL};
	rma_client_t *c;

	if (geteuid() != 0) {
		fprintf(stderr, "trust: allow lists skipped: needs root\n");
		return;
	}
	/* The socket admits nogroup, the daemon's allow list does not. */
	harness_daemon_start(&dp, only_root);
	ck_assert_int_eq(connect_as_nobody(dp.socket), RMA_ERR_PERMISSION);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK); /* root may */
	rma_disconnect(c);
	stop();

	harness_daemon_start(&dp, nogroup);
	ck_assert_int_eq(connect_as_nobody(dp.socket), RMA_OK);
	stop();

	/* Without the socket group, the file mode keeps nobody out. */
	harness_daemon_start(&dp, NULL);
	ck_assert_int_eq(connect_as_nobody(dp.socket), RMA_ERR_PERMISSION);
	stop();
}
END_TEST

START_TEST(test_region_limits)
{
	static const char *const flags[] = {"--max-regions", "2",
					    "--max-region-bytes", "1M", NULL};
	rma_client_t *c, *other;
	rma_region_t *r1, *r2, *r3;

	harness_daemon_start(&dp, flags);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 2 << 20, &r1), RMA_ERR_LIMIT);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "max_region_bytes"));
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r1), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r3), RMA_ERR_LIMIT);
	ck_assert_ptr_nonnull(strstr(rma_last_error(c), "max_regions"));
	/* Limits are per client, and freeing gives room back. */
	ck_assert_int_eq(rma_connect(dp.socket, &other), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(other, 4096, &r3), RMA_OK);
	rma_disconnect(other);
	ck_assert_int_eq(rma_region_free(c, r2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r2), RMA_OK);
	/* Imports are bounded by the same limit. */
	{
		rma_peer_t *self;
		rma_remote_t *rem[3];
		ck_assert_int_eq(rma_peer_connect(c, dp.listen, &self), RMA_OK);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r1),
						   &rem[0]),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r2),
						   &rem[1]),
				 RMA_OK);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r1),
						   &rem[2]),
				 RMA_ERR_LIMIT);
		rma_remote_release(c, rem[0]);
		ck_assert_int_eq(rma_remote_import(c, self,
						   rma_region_descriptor(r1),
						   &rem[2]),
				 RMA_OK);
	}
	rma_disconnect(c);
	stop();
}
END_TEST

struct tally {
	int done, ok, limit;
};

static void
tally_cb(rma_request_t *req, rma_status_t st, void *arg)
{
	struct tally *t = arg;

	t->done++;
	t->ok += st == RMA_OK;
	t->limit += st == RMA_ERR_LIMIT;
}

START_TEST(test_in_flight_limit)
{
	static const char *const flags[] = {"--max-in-flight", "4", NULL};
	struct daemon_proc owner;
	rma_client_t *c, *co;
	rma_region_t *r, *ro;
	rma_peer_t *p;
	rma_remote_t *rem;
	struct tally t = {0, 0, 0};
	double deadline;

	harness_daemon_start(&dp, flags);
	harness_daemon_start(&owner, NULL);
	ck_assert_int_eq(rma_connect(owner.socket, &co), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(co, 1 << 20, &ro), RMA_OK);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 1 << 20, &r), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(c, owner.listen, &p), RMA_OK);
	ck_assert_int_eq(
	    rma_remote_import(c, p, rma_region_descriptor(ro), &rem), RMA_OK);
	/* 200 large puts in one burst: the daemon takes 4 at a time. */
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(
		    rma_put(c, r, 0, rem, 0, 1 << 20, 0, tally_cb, &t, NULL),
		    RMA_OK);
	deadline = harness_now() + 20;
	while (t.done < 200 && harness_now() < deadline) {
		harness_wait_fd(rma_fd(c), deadline - harness_now());
		ck_assert_int_eq(rma_progress(c), RMA_OK);
	}
	ck_assert_int_eq(t.done, 200);
	ck_assert_int_gt(t.limit, 0);
	ck_assert_int_gt(t.ok, 0);
	ck_assert_int_eq(t.ok + t.limit, 200);
	/* The client was not disconnected for it. */
	ck_assert_int_eq(rma_put_sync(c, r, 0, rem, 0, 8, 0, WAIT_MS), RMA_OK);
	rma_disconnect(c);
	rma_disconnect(co);
	harness_daemon_stop(&owner, SIGTERM);
	stop();
}
END_TEST

START_TEST(test_peer_from_disallowed_network)
{
	static const char *const strict[] = {"--peer-allow", "10.0.0.0/8",
					     NULL};
	struct daemon_proc initiator;
	rma_client_t *c;
	rma_peer_t *p;
	rma_status_t st;
	double t0;

	harness_daemon_start(&dp, strict);
	harness_daemon_start(&initiator, NULL);
	ck_assert_int_eq(rma_connect(initiator.socket, &c), RMA_OK);
	t0 = harness_now();
	st = rma_peer_connect(c, dp.listen, &p);
	ck_assert_msg(st == RMA_ERR_REJECTED || st == RMA_ERR_UNREACHABLE ||
			  st == RMA_ERR_CONNECTION_RESET ||
			  st == RMA_ERR_TIMEOUT,
		      "connect from 127.0.0.1 to a 10/8-only daemon: %s",
		      rma_strerror(st));
	ck_assert_double_lt(harness_now() - t0, 8.0);
	rma_disconnect(c);
	harness_daemon_stop(&initiator, SIGTERM);
	stop();
}
END_TEST

/* Thousands of clients that connect and drop (some mid-frame) cost the
 * daemon nothing that stays, and a real client is served throughout. */
START_TEST(test_connection_churn)
{
	enum { N = 3000 };
	static const uint8_t partial[] = {0, 0, 0, 50, 8, 1, 0x12};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	rma_client_t *c;
	rma_region_t *r;
	int before, after = -1;
	double deadline;

	harness_daemon_start(&dp, NULL);
	ck_assert_int_eq(rma_connect(dp.socket, &c), RMA_OK);
	before = harness_fd_count(dp.pid);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", dp.socket);
	for (int i = 0; i < N; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		if (i % 3 == 1)
			ck_assert_int_eq(write(fd, partial, sizeof(partial)),
					 (ssize_t)sizeof(partial));
		close(fd);
		if (i % 500 == 0) { /* served all along */
			ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
			ck_assert_int_eq(rma_region_free(c, r), RMA_OK);
		}
	}
	deadline = harness_now() + 10;
	/* The daemon drops each connection on its next turn. */
	while (harness_now() < deadline &&
	       (after = harness_fd_count(dp.pid)) > before) {
		ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
		ck_assert_int_eq(rma_region_free(c, r), RMA_OK);
	}
	ck_assert_int_le(after, before);
	rma_disconnect(c);
	stop();
}
END_TEST

/* ---- who serves the socket, and where it lives ----------------------------
 */

/* A private TMPDIR, so that the per-user directory ${TMPDIR}/rmad-0 is
 * this test's own; no XDG_RUNTIME_DIR or RMAD_SOCKET, as under cron. */
static char tmp[32];
static char user_dir[48];
static char user_sock[64];

static void
use_private_tmpdir(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/rmad-trust.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	ck_assert_int_eq(chmod(tmp, 0755), 0);
	setenv("TMPDIR", tmp, 1);
	unsetenv("XDG_RUNTIME_DIR");
	unsetenv("RMAD_SOCKET");
	snprintf(user_dir, sizeof(user_dir), "%s/rmad-%u", tmp,
		 (unsigned)getuid());
	snprintf(user_sock, sizeof(user_sock), "%s/rmad.sock", user_dir);
}

static void
remove_private_tmpdir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

static void
become_nobody(void)
{
	if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
		_exit(100);
}

/* A fake daemon at path: bound by root (so it may sit in root's
 * directory) and listening as nobody, which is who SO_PEERCRED then
 * names. It accepts one client and exits 0 if that client sent nothing,
 * 1 if it sent bytes, 2 if nobody came within 10 s. */
static pid_t
fake_daemon_as_nobody(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int ready[2];
	pid_t pid;
	char b;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(pipe(ready), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int lfd = socket(AF_UNIX, SOCK_STREAM, 0), fd;
		char buf[256];
		ssize_t n, total = 0;
		if (lfd < 0 ||
		    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(101);
		become_nobody();
		if (listen(lfd, 8) < 0 || write(ready[1], "r", 1) != 1)
			_exit(102);
		if (!harness_wait_fd(lfd, 10.0))
			_exit(2);
		fd = accept(lfd, NULL, NULL);
		while (harness_wait_fd(fd, 10.0) &&
		       (n = read(fd, buf, sizeof(buf))) > 0)
			total += n;
		_exit(total > 0 ? 1 : 0);
	}
	close(ready[1]);
	ck_assert(harness_wait_fd(ready[0], 10.0));
	ck_assert_int_eq(read(ready[0], &b, 1), 1);
	close(ready[0]);
	return pid;
}

START_TEST(test_fake_daemon_refused)
{
	rma_client_t *c;
	pid_t fake;
	int status;

	if (geteuid() != 0) {
		fprintf(stderr, "trust: fake daemon skipped: needs root\n");
		return;
	}
	use_private_tmpdir();
	ck_assert_int_eq(mkdir(user_dir, 0700), 0);
	fake = fake_daemon_as_nobody(user_sock);
	/* The default path is the fake's, and connect() reaches it ... */
	ck_assert_str_eq(rma_default_socket(), user_sock);
	/* ... but the library says no before sending anything. */
	ck_assert_int_eq(rma_connect(NULL, &c), RMA_ERR_PERMISSION);
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(NULL), "served by uid 65534"));
	ck_assert_ptr_nonnull(strstr(rma_last_error(NULL), user_sock));
	ck_assert_int_eq(waitpid(fake, &status, 0), fake);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0); /* came, said nothing */
	remove_private_tmpdir();
}
END_TEST

/* The per-user directory is used only while it is the user's alone. */
START_TEST(test_user_dir_checked)
{
	rma_client_t *c;
	char real[160];

	if (geteuid() != 0) {
		fprintf(stderr, "trust: user dir skipped: needs root\n");
		return;
	}
	use_private_tmpdir();
	memset(&dp, 0, sizeof(dp));
	snprintf(dp.socket, sizeof(dp.socket), "%s", user_sock);
	dp.port = harness_free_port();
	snprintf(dp.listen, sizeof(dp.listen), "127.0.0.1:%u", dp.port);
	harness_daemon_restart(&dp, NULL); /* rmad makes the directory */
	{
		struct stat st;
		ck_assert_int_eq(lstat(user_dir, &st), 0);
		ck_assert(S_ISDIR(st.st_mode));
		ck_assert_int_eq(st.st_mode & 07777, 0700);
	}
	ck_assert_int_eq(rma_connect(NULL, &c), RMA_OK);
	rma_disconnect(c);

	ck_assert_int_eq(chmod(user_dir, 0755), 0);
	ck_assert_int_eq(rma_connect(user_sock, &c), RMA_ERR_PERMISSION);
	ck_assert_ptr_nonnull(strstr(rma_last_error(NULL), "mode 0755"));
	ck_assert_int_eq(chmod(user_dir, 0700), 0);

	ck_assert_int_eq(chown(user_dir, 65534, 65534), 0);
	ck_assert_int_eq(rma_connect(user_sock, &c), RMA_ERR_PERMISSION);
	ck_assert_ptr_nonnull(
	    strstr(rma_last_error(NULL), "belongs to uid 65534"));
	ck_assert_int_eq(chown(user_dir, 0, 0), 0);

	snprintf(real, sizeof(real), "%s/real", tmp);
	ck_assert_int_eq(rename(user_dir, real), 0);
	ck_assert_int_eq(symlink(real, user_dir), 0);
	ck_assert_int_eq(rma_connect(user_sock, &c), RMA_ERR_PERMISSION);
	ck_assert_ptr_nonnull(strstr(rma_last_error(NULL), "not a directory"));
	ck_assert_int_eq(unlink(user_dir), 0);
	ck_assert_int_eq(rename(real, user_dir), 0);

	ck_assert_int_eq(rma_connect(user_sock, &c), RMA_OK);
	rma_disconnect(c);
	stop();
	remove_private_tmpdir();
}
END_TEST

/* Runs rmad on socket, which it must refuse: returns its exit status and
 * leaves its stderr in err. */
static int
rmad_refused(const char *socket, char *err, size_t err_len)
{
	struct daemon_proc p = {0};
	int out[2], status = -1;
	ssize_t n;
	size_t len = 0;

	ck_assert_int_eq(pipe(out), 0);
	p.pid = fork();
	ck_assert_int_ge(p.pid, 0);
	if (p.pid == 0) {
		dup2(out[1], 2);
		execl(getenv("RMAD_BIN"), "rmad", "--socket", socket,
		      "--listen", "127.0.0.1:0", "--log-level", "error",
		      (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	while (len + 1 < err_len && harness_wait_fd(out[0], 10.0) &&
	       (n = read(out[0], err + len, err_len - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = '\0';
	close(out[0]);
	ck_assert_msg(harness_daemon_wait_exit(&p, 10.0, &status),
		      "rmad kept running on %s", socket);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(test_daemon_keeps_off_others_paths)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char open_dir[40], err[1024];
	struct stat st;
	pid_t pid;
	int status, fd;

	if (geteuid() != 0) {
		fprintf(stderr, "trust: others' paths skipped: needs root\n");
		return;
	}
	use_private_tmpdir();
	/* A stale socket of nobody's in a directory anyone may write. */
	snprintf(open_dir, sizeof(open_dir), "%s/open", tmp);
	ck_assert_int_eq(mkdir(open_dir, 01777), 0);
	ck_assert_int_eq(chmod(open_dir, 01777), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/rmad.sock", open_dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		become_nobody();
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		_exit(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0
									: 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(status, 0);
	ck_assert_int_eq(rmad_refused(sa.sun_path, err, sizeof(err)), 77);
	ck_assert_ptr_nonnull(strstr(err, "belongs to uid 65534"));
	ck_assert_int_eq(lstat(sa.sun_path, &st), 0); /* still there */
	ck_assert_int_eq(st.st_uid, 65534);

	/* Not a socket at all. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/file", tmp);
	fd = open(sa.sun_path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(rmad_refused(sa.sun_path, err, sizeof(err)), 77);
	ck_assert_ptr_nonnull(strstr(err, "not a socket"));
	ck_assert_int_eq(lstat(sa.sun_path, &st), 0);

	/* The per-user directory, someone else's. */
	ck_assert_int_eq(mkdir(user_dir, 0700), 0);
	ck_assert_int_eq(chown(user_dir, 65534, 65534), 0);
	ck_assert_int_eq(rmad_refused(user_sock, err, sizeof(err)), 77);
	ck_assert_ptr_nonnull(strstr(err, "belongs to uid 65534"));
	remove_private_tmpdir();
}
END_TEST

/* ---- out of descriptors ----------------------------------------------------
 */

/* CPU time (user + system) of a process, in clock ticks. */
static long
cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long utime, stime;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')'); /* the name may hold spaces */
	ck_assert_ptr_nonnull(p);
	/* fields 14 and 15, counted from the state (field 3) */
	ck_assert_int_eq(sscanf(p + 2,
				"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
				"%lu %lu",
				&utime, &stime),
			 2);
	return (long)(utime + stime);
}

struct fd_goal {
	pid_t pid;
	int count;
};

static int
daemon_fds_reach(void *arg)
{
	struct fd_goal *g = arg;

	return harness_fd_count(g->pid) >= g->count;
}

/* With every descriptor taken, rmad stops accepting instead of spinning
 * on the readable listener, and accepts again once clients leave. */
START_TEST(test_accept_pauses_out_of_fds)
{
	enum { EXTRA = 8, CLIENTS = 40 };
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct rlimit lim;
	struct fd_goal goal;
	int fds[CLIENTS];
	rma_client_t *c;
	rma_region_t *r;
	rma_status_t st;
	long before, used;
	double deadline;

	harness_daemon_start(&dp, NULL);
	goal.pid = dp.pid;
	goal.count = harness_fd_count(dp.pid) + EXTRA;
	lim.rlim_cur = lim.rlim_max = (rlim_t)goal.count;
	ck_assert_int_eq(prlimit(dp.pid, RLIMIT_NOFILE, &lim, NULL), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", dp.socket);
	for (int i = 0; i < CLIENTS; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(
		    connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	/* The daemon accepts until its table is full; the rest wait. */
	ck_assert(harness_until(10.0, daemon_fds_reach, &goal));
	before = cpu_ticks(dp.pid);
	deadline = harness_now() + 1.0;
	while (harness_now() < deadline)
		harness_pause(1.0, deadline); /* the window measured */
	used = cpu_ticks(dp.pid) - before;
	ck_assert_msg(used * 10 < sysconf(_SC_CLK_TCK),
		      "rmad used %ld ticks in 1 s while out of fds", used);

	for (int i = 0; i < CLIENTS; i++)
		close(fds[i]);
	deadline = harness_now() + 10.0;
	while ((st = rma_connect(dp.socket, &c)) != RMA_OK &&
	       harness_now() < deadline)
		harness_pause(0.05, deadline);
	ck_assert_int_eq(st, RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c, 4096, &r), RMA_OK);
	ck_assert_int_eq(rma_region_free(c, r), RMA_OK);
	rma_disconnect(c);
	stop();
}
END_TEST

/* Runs argv with stdout and stderr captured (NUL-terminated, caller
 * frees); returns the wait status. Fails the test after 10 s. */
static int
run_capture(const char *const *argv, char **out_p, char **err_p)
{
	int out_pipe[2], err_pipe[2], status;
	char *buf[2] = {NULL, NULL};
	size_t len[2] = {0, 0};
	bool open_[2] = {true, true};
	double deadline = harness_now() + 10;
	pid_t pid;

	ck_assert_int_eq(pipe2(out_pipe, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(err_pipe, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(out_pipe[1], 1);
		dup2(err_pipe[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(out_pipe[1]);
	close(err_pipe[1]);
	while (open_[0] || open_[1]) {
		struct pollfd pfd[2] = {
		    {.fd = open_[0] ? out_pipe[0] : -1, .events = POLLIN},
		    {.fd = open_[1] ? err_pipe[0] : -1, .events = POLLIN}};
		double left = deadline - harness_now();
		ck_assert_msg(left > 0, "%s did not finish within 10 s",
			      argv[0]);
		if (poll(pfd, 2, (int)(left * 1000) + 1) <= 0)
			continue;
		for (int k = 0; k < 2; k++) {
			char chunk[4096];
			ssize_t n;
			if (!open_[k] || pfd[k].revents == 0)
				continue;
			n = read(pfd[k].fd, chunk, sizeof(chunk));
			if (n <= 0) {
				open_[k] = false;
				continue;
			}
			buf[k] = realloc(buf[k], len[k] + (size_t)n + 1);
			ck_assert_ptr_nonnull(buf[k]);
			memcpy(buf[k] + len[k], chunk, (size_t)n);
			len[k] += (size_t)n;
		}
	}
	close(out_pipe[0]);
	close(err_pipe[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	for (int k = 0; k < 2; k++)
		if (buf[k] == NULL)
			buf[k] = calloc(1, 1);
		else
			buf[k][len[k]] = '\0';
	*out_p = buf[0];
	*err_p = buf[1];
	return status;
}

/* Every way a 64-bit secret could be written out: decimal, hex (either
 * case; zero-padded forms contain these), and its bytes as a protobuf
 * varint or as 8 bytes in either order. */
static bool
holds_secret(const void *data, size_t len, uint64_t v)
{
	char text[4][32];
	uint8_t bin[3][10];
	size_t bin_len[3];
	uint64_t x = v;

	snprintf(text[0], sizeof(text[0]), "%" PRIu64, v);
	snprintf(text[1], sizeof(text[1]), "%" PRIx64, v);
	snprintf(text[2], sizeof(text[2]), "%" PRIX64, v);
	snprintf(text[3], sizeof(text[3]), "%" PRId64, (int64_t)v);
	bin_len[0] = 0;
	do {
		bin[0][bin_len[0]++] =
		    (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
		x >>= 7;
	} while (x != 0);
	for (int i = 0; i < 8; i++) {
		bin[1][i] = (uint8_t)(v >> (8 * i));
		bin[2][i] = (uint8_t)(v >> (8 * (7 - i)));
	}
	bin_len[1] = bin_len[2] = 8;
	for (int i = 0; i < 4; i++)
		if (memmem(data, len, text[i], strlen(text[i])) != NULL)
			return true;
	for (int i = 0; i < 3; i++)
		if (memmem(data, len, bin[i], bin_len[i]) != NULL)
			return true;
	return false;
}

/* GET /metrics over a plain socket; the body (and headers), to free. */
static char *
metrics_get(uint16_t port)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	double deadline = harness_now() + 10;
	char *text = NULL;
	size_t len = 0;
	int fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(write(fd, req, sizeof(req) - 1),
			 (ssize_t)sizeof(req) - 1);
	for (;;) {
		char chunk[4096];
		ssize_t n;
		ck_assert_msg(harness_wait_fd(fd, deadline - harness_now()),
			      "no /metrics answer within 10 s");
		n = read(fd, chunk, sizeof(chunk));
		if (n <= 0)
			break;
		text = realloc(text, len + (size_t)n + 1);
		ck_assert_ptr_nonnull(text);
		memcpy(text + len, chunk, (size_t)n);
		len += (size_t)n;
	}
	close(fd);
	ck_assert_ptr_nonnull(text);
	text[len] = '\0';
	return text;
}

/* A descriptor built from what status shows, the generation guessed. */
static void
forge_from_status(const char *daemon_id_hex, uint64_t region_id,
		  uint64_t length, uint64_t generation, char *out)
{
	struct descriptor d = {
	    .region_id = region_id, .generation = generation, .length = length};

	ck_assert_uint_eq(strlen(daemon_id_hex), 2 * DAEMON_ID_SIZE);
	for (int i = 0; i < DAEMON_ID_SIZE; i++) {
		unsigned byte;
		ck_assert_int_eq(sscanf(daemon_id_hex + 2 * i, "%2x", &byte),
				 1);
		d.daemon_id[i] = (uint8_t)byte;
	}
	descriptor_format(&d, out);
}

/* Issue 10 item 3: status showed every region's generation, and any local
 * client forged descriptors from it and read and wrote another client's
 * region. What makes a descriptor valid now reaches its owner only. */
/* Every view of rmactl (human and JSON) on socket and the metrics page on
 * mport: none shows the descriptor desc or its secret generation. */
static void
views_hide_secret(const char *socket, uint16_t mport, const char *desc,
		  uint64_t generation)
{
	static const char *const views[][3] = {
	    {"status", NULL},	   {"status", "--json"}, {"regions", NULL},
	    {"regions", "--json"}, {"ops", "--json"},	 {"clients", "--json"},
	};
	const char *rmactl = getenv("RMACTL_BIN");
	char *out, *err, *metrics;

	ck_assert_ptr_nonnull(rmactl);
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
		const char *argv[] = {rmactl,	   "--socket",	socket,
				      views[i][0], views[i][1], NULL};
		int status = run_capture(argv, &out, &err);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "rmactl %s %s: %s", views[i][0],
			      views[i][1] ? views[i][1] : "", err);
		ck_assert_msg(!holds_secret(out, strlen(out), generation),
			      "rmactl %s %s shows A's generation", views[i][0],
			      views[i][1] ? views[i][1] : "");
		ck_assert_ptr_null(strstr(out, desc));
		free(out);
		free(err);
	}
	metrics = metrics_get(mport);
	ck_assert_ptr_nonnull(strstr(metrics, "rmad_regions"));
	ck_assert_msg(!holds_secret(metrics, strlen(metrics), generation),
		      "/metrics shows A's generation");
	free(metrics);
}

START_TEST(test_descriptor_secret)
{
	uint16_t mport = harness_free_port();
	char mlisten[32], text[DESCRIPTOR_TEXT_SIZE];
	const char *flags[] = {"--metrics-listen", mlisten, NULL};
	struct daemon_proc other;
	rma_client_t *a, *b, *b2;
	rma_region_t *ra, *rb;
	rma_peer_t *self, *far;
	rma_remote_t *rem;
	struct descriptor secret;
	Rma__V1__Reply *reply;
	const Rma__V1__StatusReply *st;
	uint8_t *raw, pattern[65536];
	size_t raw_len;
	uint64_t guesses[4];
	int n_forged = 0;
	snprintf(mlisten, sizeof(mlisten), "127.0.0.1:%u", mport);
	harness_daemon_start(&dp, flags);
	harness_daemon_start(&other, NULL);

	/* A owns a region; its descriptor's generation is the secret. */
	ck_assert_int_eq(rma_connect(dp.socket, &a), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(a, sizeof(pattern), &ra), RMA_OK);
	harness_fill(pattern, sizeof(pattern), 77);
	memcpy(rma_region_ptr(ra), pattern, sizeof(pattern));
	ck_assert_int_eq(descriptor_parse(rma_region_descriptor(ra),
					  strlen(rma_region_descriptor(ra)),
					  &secret),
			 0);
	/* The search can find it where it is: in the descriptor itself. */
	ck_assert(holds_secret(rma_region_descriptor(ra),
			       strlen(rma_region_descriptor(ra)),
			       secret.generation));

	/* B, another client of the same daemon, with a region and an
	 * operation of its own so that every table has rows. */
	ck_assert_int_eq(rma_connect(dp.socket, &b), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(b, 4096, &rb), RMA_OK);

	/* The raw status reply, as B receives it. */
	reply = status_call(b);
	st = reply->status_reply;
	ck_assert_uint_ge(st->n_regions, 2);
	raw_len = rma__v1__reply__get_packed_size(reply);
	raw = malloc(raw_len);
	ck_assert_ptr_nonnull(raw);
	rma__v1__reply__pack(reply, raw);
	ck_assert_msg(!holds_secret(raw, raw_len, secret.generation),
		      "the raw status reply holds A's generation");
	free(raw);

	/* What rmactl prints, every view, human and JSON; the metrics page. */
	views_hide_secret(dp.socket, mport, rma_region_descriptor(ra),
			  secret.generation);

	/* B forges from what status shows: daemon id, region id, length,
	 * and a guessed generation. Through its own daemon, and through
	 * another one, every guess is refused. */
	guesses[0] = 0;
	guesses[1] = 1;
	ck_assert_int_eq(getentropy(&guesses[2], sizeof(guesses[2])), 0);
	ck_assert_int_eq(rma_connect(other.socket, &b2), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(b, dp.listen, &self), RMA_OK);
	ck_assert_int_eq(rma_peer_connect(b2, dp.listen, &far), RMA_OK);
	for (size_t i = 0; i < st->n_regions; i++) {
		const Rma__V1__RegionInfo *r = st->regions[i];
		guesses[3] = r->region_id;
		for (int g = 0; g < 4; g++) {
			forge_from_status(st->daemon_id, r->region_id,
					  r->length, guesses[g], text);
			ck_assert_int_eq(rma_remote_import(b, self, text, &rem),
					 RMA_ERR_STALE_DESCRIPTOR);
			ck_assert_int_eq(rma_remote_import(b2, far, text, &rem),
					 RMA_ERR_STALE_DESCRIPTOR);
			n_forged++;
		}
	}
	ck_assert_int_ge(n_forged, 8);
	/* The forging path works: with the secret, the same fields pass. */
	{
		const Rma__V1__RegionInfo *mine = NULL;
		for (size_t i = 0; i < st->n_regions; i++)
			if (st->regions[i]->region_id == secret.region_id)
				mine = st->regions[i];
		ck_assert_ptr_nonnull(mine);
		forge_from_status(st->daemon_id, mine->region_id, mine->length,
				  secret.generation, text);
		ck_assert_int_eq(rma_remote_import(b2, far, text, &rem),
				 RMA_OK);
		rma_remote_release(b2, rem);
	}
	rma__v1__reply__free_unpacked(reply, NULL);
	/* A's bytes are as A wrote them. */
	ck_assert_mem_eq(rma_region_ptr(ra), pattern, sizeof(pattern));

	rma_disconnect(b2);
	rma_disconnect(b);
	rma_disconnect(a);
	harness_daemon_stop(&other, SIGTERM);
	stop();
}
END_TEST

/* Issue 10 item 4: rma_protocol = ucx over tcp hands a peer the daemon's
 * memory. Refused at start and by --check-config (EX_CONFIG, 78) unless
 * rma_protocol_unchecked, which is then warned about. */
START_TEST(test_ucx_over_tcp_refused)
{
	const char *rmad = getenv("RMAD_BIN");
	const char *check[] = {rmad,  "--rma-protocol", "ucx", "--transports",
			       "tcp", "--check-config", NULL};
	const char *check_ok[] = {rmad,
				  "--rma-protocol",
				  "ucx",
				  "--transports",
				  "tcp",
				  "--rma-protocol-unchecked",
				  "--check-config",
				  NULL};
	const char *check_rdma[] = {
	    rmad,	 "--rma-protocol", "ucx", "--transports",
	    "rc,ud:aux", "--check-config", NULL};
	const char *check_bad_value[] = {rmad, "--max-inbound-peers", "0",
					 "--check-config", NULL};
	const char *check_usage[] = {rmad, "--no-such-flag", NULL};
	char sock[108];
	const char *start[] = {rmad,	   "--socket",	  sock,
			       "--listen", "127.0.0.1:0", "--rma-protocol",
			       "ucx",	   NULL};
	char *out, *err;
	int status;

	ck_assert_ptr_nonnull(rmad);
	unsetenv("UCX_TLS");
	status = run_capture(check, &out, &err);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 78,
		      "--check-config ucx over tcp: status %d", status);
	ck_assert_msg(strstr(err, "do not check remote keys") &&
			  strstr(err, "rma_protocol_unchecked = yes"),
		      "%s", err);
	free(out);
	free(err);

	status = run_capture(check_ok, &out, &err);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
	ck_assert_ptr_nonnull(strstr(out, "rma_protocol_unchecked = yes"));
	ck_assert_msg(strstr(err, "warning") && strstr(err, "any address"),
		      "%s", err);
	free(out);
	free(err);

	status = run_capture(check_rdma, &out, &err);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", err);
	ck_assert_ptr_null(strstr(err, "warning: rma_protocol"));
	free(out);
	free(err);

	/* every configuration error is EX_CONFIG; an unknown flag EX_USAGE */
	status = run_capture(check_bad_value, &out, &err);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 78);
	free(out);
	free(err);
	status = run_capture(check_usage, &out, &err);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 64);
	free(out);
	free(err);

	/* Starting it for real fails the same way, before serving. */
	snprintf(sock, sizeof(sock), "/tmp/rmad-test-%d-ucx.sock",
		 (int)getpid());
	status = run_capture(start, &out, &err);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 78,
		      "start: status %d: %s", status, err);
	ck_assert_ptr_nonnull(strstr(err, "do not check remote keys"));
	ck_assert_int_eq(access(sock, F_OK), -1);
	free(out);
	free(err);

	/* With the override it starts, and says what a peer can do. */
	{
		static const char *const unchecked[] = {
		    "--rma-protocol", "ucx",  "--rma-protocol-unchecked",
		    "--log-level",    "warn", NULL};
		harness_daemon_start(&dp, unchecked);
		stop();
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("trust");
	TCase *tc = tcase_create("trust");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_socket_mode);
	tcase_add_test(tc, test_allow_lists);
	tcase_add_test(tc, test_region_limits);
	tcase_add_test(tc, test_in_flight_limit);
	tcase_add_test(tc, test_peer_from_disallowed_network);
	tcase_add_test(tc, test_connection_churn);
	tcase_add_test(tc, test_fake_daemon_refused);
	tcase_add_test(tc, test_user_dir_checked);
	tcase_add_test(tc, test_daemon_keeps_off_others_paths);
	tcase_add_test(tc, test_accept_pauses_out_of_fds);
	tcase_add_test(tc, test_descriptor_secret);
	tcase_add_test(tc, test_ucx_over_tcp_refused);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
