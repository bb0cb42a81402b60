/* Trust: who may connect, per-client limits, peers from disallowed
 * networks. Real daemons; tests that change uid need root. */
#include <check.h>

#include "check_main.h"
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "rma.h"

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
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
