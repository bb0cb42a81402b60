/* SPDX-License-Identifier: BSD-2-Clause */
/* SIGHUP, end to end: a real rmad started with --config FILE, the file
 * rewritten, SIGHUP, and the change seen from outside: a client's region
 * limit, the log lines, a listener that stays where it was, an invalid
 * file that changes nothing, flags that keep winning over the file, a
 * port bound for listen = HOST:0 that is no change, and a peer_allow
 * that refuses the next daemon. Every wait has a deadline. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "rma.h"

#define WAIT_S 10.0
#define MAX_TRY 64 /* regions a client tries to hold */

static char dir[64], conf[128], logpath[128];
static struct daemon_proc dr, others[2];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/rmad-reload.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/rmad.conf", dir);
	snprintf(logpath, sizeof(logpath), "%s/rmad.log", dir);
}

static void
teardown(void)
{
	char cmd[128];

	harness_daemon_kill(&dr);
	for (int i = 0; i < 2; i++)
		harness_daemon_kill(&others[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "teardown: %s failed\n", cmd);
}

static void
write_conf(const char *fmt, ...)
{
	char tmp[160];
	va_list ap;
	FILE *f;

	/* renamed into place: the daemon never reads half a file */
	snprintf(tmp, sizeof(tmp), "%s.new", conf);
	f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fputs("[rmad]\n", f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, conf), 0);
}

/* rmad --config conf (its stderr into logpath), with no --listen: the
 * file names it, so a reload can try to change it. */
static void
spawn(struct daemon_proc *p, const char *const *extra)
{
	const char *bin = getenv("RMAD_BIN");
	const char *argv[16];
	char fdarg[16];
	int pipefd[2], argc = 0, logfd;
	pid_t parent = getpid();
	char buf[8];

	ck_assert_ptr_nonnull(bin);
	snprintf(p->socket, sizeof(p->socket), "%s/rmad.sock", dir);
	ck_assert_int_eq(pipe(pipefd), 0);
	snprintf(fdarg, sizeof(fdarg), "%d", pipefd[1]);
	argv[argc++] = bin;
	argv[argc++] = "--config";
	argv[argc++] = conf;
	argv[argc++] = "--socket";
	argv[argc++] = p->socket;
	argv[argc++] = "--ready-fd";
	argv[argc++] = fdarg;
	/* RMAD_WORKERS: every worker's copy must change, not only the
	 * first's (clients are spread over the workers) */
	if (getenv("RMAD_WORKERS") != NULL) {
		argv[argc++] = "--workers";
		argv[argc++] = getenv("RMAD_WORKERS");
	}
	for (int i = 0; extra != NULL && extra[i] != NULL; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
	ck_assert_int_ge(logfd, 0);
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(logfd, STDERR_FILENO);
		close(pipefd[0]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	close(pipefd[1]);
	ck_assert_msg(harness_wait_fd(pipefd[0], WAIT_S) &&
			  read(pipefd[0], buf, sizeof(buf)) > 0,
		      "rmad did not become ready within %.0f s", WAIT_S);
	close(pipefd[0]);
}

struct log_wait {
	const char *needle;
	int times; /* occurrences wanted */
};

static int
log_has(void *arg)
{
	const struct log_wait *w = arg;
	char line[1024];
	int seen = 0;
	FILE *f = fopen(logpath, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		seen += strstr(line, w->needle) != NULL;
	fclose(f);
	return seen >= w->times;
}

static int
log_count(const char *needle)
{
	int n = 0;

	for (struct log_wait w = {needle, 1}; log_has(&w); w.times++)
		n = w.times;
	return n;
}

/* The log shows needle (once more than `before` times) within WAIT_S. */
static void
log_wait(const char *needle, int before)
{
	struct log_wait w = {needle, before + 1};

	ck_assert_msg(harness_until(WAIT_S, log_has, &w),
		      "no '%s' in the log within %.0f s", needle, WAIT_S);
}

/* Lines that end a reload: its summary, or its refusal. */
static int
reloads_logged(void)
{
	return log_count("changes applied, ") +
	       log_count("config_reload: no changes") +
	       log_count("reload refused");
}

static int
reload_done(void *arg)
{
	return reloads_logged() > *(int *)arg;
}

/* SIGHUP, and wait for the reload to end. */
static void
hup(void)
{
	int before = reloads_logged();

	ck_assert_int_eq(kill(dr.pid, SIGHUP), 0);
	ck_assert_msg(harness_until(WAIT_S, reload_done, &before),
		      "SIGHUP: no reload logged within %.0f s", WAIT_S);
}

/* Regions one client can hold (RMA_ERR_LIMIT after them). */
static int
regions_allowed(const char *socket)
{
	rma_region_t *r[MAX_TRY];
	rma_client_t *c;
	rma_status_t st = RMA_OK;
	int n;

	ck_assert_int_eq(rma_connect(socket, &c), RMA_OK);
	for (n = 0; n < MAX_TRY; n++) {
		st = rma_region_alloc(c, 4096, &r[n]);
		if (st != RMA_OK)
			break;
	}
	ck_assert_msg(st == RMA_ERR_LIMIT, "alloc %d: %s (%s)", n,
		      rma_strerror(st), rma_last_error(c));
	rma_disconnect(c);
	return n;
}

/* 0 if something accepts TCP connections on 127.0.0.1:port. */
static int
tcp_connect(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return rc == 0 ? 0 : -errno;
}

START_TEST(test_limits_log_level_listen_invalid)
{
	uint16_t port = harness_free_port(), port2 = harness_free_port();
	char line[160];

	write_conf("listen = 127.0.0.1:%u\nlog_level = info\nmax_regions = "
		   "3\n",
		   port);
	spawn(&dr, NULL);
	ck_assert_int_eq(regions_allowed(dr.socket), 3);

	/* limits and the log level take effect */
	write_conf("listen = 127.0.0.1:%u\nlog_level = debug\nmax_regions = "
		   "5\n",
		   port);
	hup();
	log_wait("config_reload: max_regions: 3 -> 5", 0);
	log_wait("config_reload: log_level: info -> debug", 0);
	log_wait("config_reload: 2 changes applied, 0 need a restart", 0);
	ck_assert_int_eq(regions_allowed(dr.socket), 5);

	/* listen needs a restart: refused with a warning, the rest applies */
	write_conf("listen = 127.0.0.1:%u\nlog_level = debug\nmax_regions = "
		   "2\n",
		   port2);
	hup();
	snprintf(line, sizeof(line),
		 "config_reload: listen: 127.0.0.1:%u -> 127.0.0.1:%u needs a "
		 "restart; keeping 127.0.0.1:%u",
		 port, port2, port);
	log_wait(line, 0);
	log_wait("rmad warn: config_reload: listen:", 0);
	log_wait("config_reload: 1 changes applied, 1 need a restart", 0);
	ck_assert_int_eq(regions_allowed(dr.socket), 2);
	ck_assert_int_eq(tcp_connect(port), 0);
	ck_assert_int_eq(tcp_connect(port2), -ECONNREFUSED);

	/* an invalid file changes nothing, not even its valid lines */
	write_conf("listen = 127.0.0.1:%u\nmax_regions = 7\nlog_level = "
		   "loud\n",
		   port);
	hup();
	log_wait("rmad error: main_on_hup: reload refused, configuration "
		 "unchanged: ",
		 0);
	log_wait("log_level: expected error, warn, info or debug, got 'loud'",
		 0);
	ck_assert_int_eq(regions_allowed(dr.socket), 2);
	ck_assert_int_eq(log_count("max_regions: 2 -> 7"), 0);
	/* and the daemon still serves, on its old address */
	ck_assert_int_eq(tcp_connect(port), 0);
	ck_assert_int_eq(kill(dr.pid, 0), 0);
}
END_TEST

/* A flag keeps winning over the file, at start and on reload. */
START_TEST(test_flags_win)
{
	static const char *const flags[] = {"--max-regions", "3", NULL};
	uint16_t port = harness_free_port();

	write_conf("listen = 127.0.0.1:%u\nmax_regions = 1\n", port);
	spawn(&dr, flags);
	ck_assert_int_eq(regions_allowed(dr.socket), 3);
	write_conf("listen = 127.0.0.1:%u\nmax_regions = 6\n", port);
	hup();
	log_wait("config_reload: no changes", 0);
	ck_assert_int_eq(regions_allowed(dr.socket), 3);
}
END_TEST

/* listen = HOST:0: the port the daemon bound is what it learned, not
 * what it was given, so the same file reloads with no listen change (a
 * reload compares configurations as given). */
START_TEST(test_listen_any_port)
{
	write_conf("listen = 127.0.0.1:0\nmax_regions = 3\n");
	spawn(&dr, NULL);
	log_wait("main: rmad ", 0);
	ck_assert_int_eq(log_count(", listening on 127.0.0.1:"), 1);
	ck_assert_int_eq(log_count(", listening on 127.0.0.1:0\n"), 0);
	write_conf("listen = 127.0.0.1:0\nmax_regions = 4\n");
	hup();
	log_wait("config_reload: max_regions: 3 -> 4", 0);
	log_wait("config_reload: 1 changes applied, 0 need a restart", 0);
	ck_assert_int_eq(log_count("config_reload: listen:"), 0);
	ck_assert_int_eq(regions_allowed(dr.socket), 4);
}
END_TEST

/* peer_allow applies to the next connection: a daemon on 127.0.0.1 is
 * let in before, refused after peer_allow = 10.0.0.0/8 and SIGHUP. */
START_TEST(test_peer_allow)
{
	uint16_t port = harness_free_port();
	char address[32];
	rma_client_t *cb, *cc;
	rma_peer_t *peer;
	rma_status_t st;

	snprintf(address, sizeof(address), "127.0.0.1:%u", port);
	write_conf("listen = %s\n", address);
	spawn(&dr, NULL);
	harness_daemon_start(&others[0], NULL);
	ck_assert_int_eq(rma_connect(others[0].socket, &cb), RMA_OK);
	st = rma_peer_connect(cb, address, &peer);
	ck_assert_msg(st == RMA_OK, "before: %s (%s)", rma_strerror(st),
		      rma_last_error(cb));
	rma_disconnect(cb);

	write_conf("listen = %s\npeer_allow = 10.0.0.0/8\n", address);
	hup();
	log_wait("config_reload: peer_allow: 127.0.0.0/8,::1/128 -> "
		 "10.0.0.0/8",
		 0);
	harness_daemon_start(&others[1], NULL);
	ck_assert_int_eq(rma_connect(others[1].socket, &cc), RMA_OK);
	st = rma_peer_connect(cc, address, &peer);
	ck_assert_msg(st == RMA_ERR_REJECTED, "after: %s (%s)",
		      rma_strerror(st), rma_last_error(cc));
	rma_disconnect(cc);
}
END_TEST

/* A key file's new content is a new cluster key: said, never shown. */
START_TEST(test_peer_key_not_printed)
{
	static const char key1[] = "first-cluster-key-0123456789abcdef";
	static const char key2[] = "second-cluster-key-0123456789abcdef";
	uint16_t port = harness_free_port();
	char key[128];
	FILE *f;

	snprintf(key, sizeof(key), "%s/peer.key", dir);
	f = fopen(key, "w");
	ck_assert_ptr_nonnull(f);
	fputs(key1, f);
	fclose(f);
	ck_assert_int_eq(chmod(key, 0600), 0);
	write_conf("listen = 127.0.0.1:%u\npeer_key_file = %s\n", port, key);
	spawn(&dr, NULL);
	f = fopen(key, "w");
	ck_assert_ptr_nonnull(f);
	fputs(key2, f);
	fclose(f);
	hup();
	log_wait("config_reload: peer key: replaced (from ", 0);
	ck_assert_int_eq(log_count("cluster-key"), 0);
	/* a key file others may read is refused: the old key stays */
	ck_assert_int_eq(chmod(key, 0644), 0);
	hup();
	log_wait("reload refused, configuration unchanged: peer_key_file:", 0);
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
	Suite *s = suite_create("reload");

	ADD(s, test_limits_log_level_listen_invalid);
	ADD(s, test_flags_win);
	ADD(s, test_listen_any_port);
	ADD(s, test_peer_allow);
	ADD(s, test_peer_key_not_printed);
	return check_main_run(s);
}
