/* SPDX-License-Identifier: BSD-2-Clause */
/* The last configuration that worked (daemon/config_saved.c, main.c): a
 * take-over whose own configuration is refused (a typo, an address or a
 * device this host lacks) runs on its predecessor's instead, with the
 * same identity and regions (a peer still reads a client's region
 * through the descriptor it had), and says so in status and /metrics; a
 * start with nothing to keep still exits 78; --check-config refuses what
 * the start would. Real rmad processes; decided on bytes and counts,
 * every wait with a deadline. */
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "rma.h"
#include "status_call.h"

extern char **environ;

#define SZ (256u << 10)
#define WAIT_MS 10000
/* TEST-NET-1 (RFC 5737): never an address of this host */
#define NOT_HERE "192.0.2.1"

static struct daemon_proc da, db;
static rma_client_t *ca, *cb;
static rma_region_t *ra, *rb;
static rma_peer_t *peer_a;
static rma_remote_t *remote_a;
static char dir[64], metrics_addr[32], desc[256];
static uint16_t metrics_port;

static void
setup(void)
{
	const char *flags[] = {"--connect-timeout", "2", "--metrics-listen",
			       metrics_addr, NULL};

	snprintf(dir, sizeof(dir), "/tmp/rmad-lastgood.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	metrics_port = harness_free_port();
	snprintf(metrics_addr, sizeof(metrics_addr), "127.0.0.1:%u",
		 metrics_port);
	harness_daemon_start(&da, flags);
	flags[2] = NULL;
	harness_daemon_start(&db, flags);
	ck_assert_int_eq(rma_connect(da.socket, &ca), RMA_OK);
	ck_assert_int_eq(rma_connect(db.socket, &cb), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(ca, SZ, &ra), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(cb, SZ, &rb), RMA_OK);
	harness_fill(rma_region_ptr(ra), SZ, 1);
	snprintf(desc, sizeof(desc), "%s", rma_region_descriptor(ra));
	ck_assert_int_eq(rma_peer_connect(cb, da.listen, &peer_a), RMA_OK);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, desc, &remote_a),
			 RMA_OK);
}

static void
teardown(void)
{
	char cmd[128];

	if (cb)
		rma_disconnect(cb);
	if (ca)
		rma_disconnect(ca);
	cb = ca = NULL;
	harness_daemon_kill(&db);
	harness_daemon_kill(&da);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "teardown: %s failed\n", cmd);
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* GET /metrics on the daemon's metrics port: the value of name, or -1
 * when it is not there. Every read has the deadline. */
static long
metric(const char *name)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(metrics_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	static char buf[1 << 20];
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	double deadline = harness_now() + 10.0;
	size_t n = 0;
	ssize_t got;
	long v = -1;
	char key[128], *p;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(write(fd, req, sizeof(req) - 1), sizeof(req) - 1);
	while (n < sizeof(buf) - 1) {
		ck_assert_msg(harness_wait_fd(fd, deadline - harness_now()),
			      "no metrics within 10 s");
		got = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	buf[n] = '\0';
	snprintf(key, sizeof(key), "\n%s ", name);
	p = strstr(buf, key);
	if (p != NULL)
		v = strtol(p + strlen(key), NULL, 10);
	return v;
}

/* The status reply's daemon id and config_refused, copied. */
static void
status_of(const char *socket, char *id, size_t id_len, char *refused,
	  size_t refused_len)
{
	rma_client_t *c;
	Rma__V1__Reply *reply;

	ck_assert_int_eq(rma_connect(socket, &c), RMA_OK);
	reply = status_call(c);
	snprintf(id, id_len, "%s", reply->status_reply->daemon_id);
	snprintf(refused, refused_len, "%s",
		 reply->status_reply->config_refused
		     ? reply->status_reply->config_refused
		     : "");
	rma__v1__reply__free_unpacked(reply, NULL);
	rma_disconnect(c);
}

/* A take-over given extra (a configuration it must refuse) comes up on
 * its predecessor's configuration: the same identity, ra's bytes read by
 * the peer through the descriptor it imported before, a new region
 * served, and the refusal (containing why) in status and /metrics. */
static void
falls_back(const char *const *extra, const char *why)
{
	char id_before[64], id_after[64], refused[512];
	uint8_t *src = rma_region_ptr(rb);
	double deadline;
	rma_status_t st;
	rma_remote_t *again;
	rma_region_t *fresh;
	rma_client_t *c2;

	status_of(da.socket, id_before, sizeof(id_before), refused,
		  sizeof(refused));
	ck_assert_str_eq(refused, "");

	harness_daemon_take_over(&da, extra, 10.0);

	status_of(da.socket, id_after, sizeof(id_after), refused,
		  sizeof(refused));
	ck_assert_str_eq(id_after, id_before);
	ck_assert_msg(strstr(refused, why) != NULL,
		      "status says '%s', not why ('%s')", refused, why);
	ck_assert_int_eq(metric("rmad_config_rejected"), 1);
	/* the old descriptor still reads ra's bytes (retriable statuses
	 * while the peer connection comes back) */
	deadline = harness_now() + 10.0;
	do {
		memset(src, 0, SZ);
		st = rma_get_sync(cb, rb, 0, remote_a, 0, SZ, WAIT_MS);
		if (st == RMA_OK || st == RMA_ERR_STALE_DESCRIPTOR)
			break;
		harness_pause(0.02, deadline);
	} while (harness_now() < deadline);
	ck_assert_msg(st == RMA_OK, "get through the old descriptor: %s",
		      rma_strerror(st));
	ck_assert_int_eq(memcmp(src, rma_region_ptr(ra), SZ), 0);
	ck_assert_int_eq(rma_remote_import(cb, peer_a, desc, &again), RMA_OK);
	rma_remote_release(cb, again);
	/* it serves: a new client, a new region */
	ck_assert_int_eq(rma_connect(da.socket, &c2), RMA_OK);
	ck_assert_int_eq(rma_region_alloc(c2, 4096, &fresh), RMA_OK);
	rma_disconnect(c2);
}

START_TEST(test_take_over_with_a_typo)
{
	char conf[128];
	const char *extra[] = {"--take-over", "--config", conf, NULL};

	snprintf(conf, sizeof(conf), "%s/rmad.conf", dir);
	write_file(conf, "[rmad]\nlog_level = info\nlisen = 127.0.0.1:1\n");
	falls_back(extra, "unknown option 'lisen'");
}
END_TEST

START_TEST(test_take_over_address_not_here)
{
	const char *extra[] = {"--take-over", "--listen", NOT_HERE ":13337",
			       NULL};

	falls_back(extra, NOT_HERE " is not an address of this host");
}
END_TEST

START_TEST(test_take_over_device_missing)
{
	const char *extra[] = {"--take-over", "--net-devices", "rmadnosuch0",
			       NULL};

	falls_back(extra, "no device 'rmadnosuch0'");
}
END_TEST

/* The key file gone (or another one named): the successor keeps the
 * key its predecessor runs with. */
START_TEST(test_take_over_key_unreadable)
{
	char key[128];
	const char *extra[] = {"--take-over", "--peer-key-file", key, NULL};

	snprintf(key, sizeof(key), "%s/gone.key", dir);
	falls_back(extra, "peer_key_file: ");
}
END_TEST

/* A configuration that passes the checks and still does not start
 * (transports UCX does not know): the take-over starts again on its
 * predecessor's. */
START_TEST(test_take_over_start_fails)
{
	const char *extra[] = {"--take-over", "--transports", "rmad_no_such_tl",
			       NULL};

	falls_back(extra, "did not start on it");
}
END_TEST

/* A second take-over with nothing wrong runs on what it was given, and
 * no refusal is left over. */
START_TEST(test_take_over_after_fall_back)
{
	const char *bad[] = {"--take-over", "--listen", NOT_HERE ":13337",
			     NULL};
	const char *good[] = {"--take-over", "--metrics-listen", metrics_addr,
			      NULL};
	char id[64], refused[512];

	harness_daemon_take_over(&da, bad, 10.0);
	harness_daemon_take_over(&da, good, 10.0);
	status_of(da.socket, id, sizeof(id), refused, sizeof(refused));
	ck_assert_str_eq(refused, "");
	ck_assert_int_eq(metric("rmad_config_rejected"), 0);
}
END_TEST

/* rmad with args (stderr into err_path); its exit status, within 10 s. */
static int
run_rmad(const char *const *args, const char *err_path)
{
	const char *argv[24];
	posix_spawn_file_actions_t fa;
	int argc = 0, status = -1, pidfd;
	pid_t pid;

	argv[argc++] = getenv("RMAD_BIN");
	for (int i = 0; args[i] != NULL && argc < 23; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, err_path,
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_eq(
	    posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ),
	    0);
	posix_spawn_file_actions_destroy(&fa);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	ck_assert_int_ge(pidfd, 0);
	if (!harness_wait_fd(pidfd, 10.0))
		kill(pid, SIGKILL);
	close(pidfd);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "rmad did not exit within 10 s");
	return WEXITSTATUS(status);
}

static void
expect_78(const char *const *args, const char *why)
{
	char err_path[128], text[2048] = "";
	FILE *f;
	size_t n;

	snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
	ck_assert_int_eq(run_rmad(args, err_path), 78);
	f = fopen(err_path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	ck_assert_msg(strstr(text, why) != NULL, "stderr '%s' lacks '%s'", text,
		      why);
}

/* Nothing to keep (no fd store, no predecessor): a refused
 * configuration still ends the start with EX_CONFIG. */
START_TEST(test_nothing_to_keep_exits_78)
{
	char conf[128], sock[160];
	const char *typo[] = {"--socket", sock, "--config", conf, NULL};
	const char *addr[] = {"--socket", sock, "--listen", NOT_HERE ":13337",
			      NULL};

	snprintf(conf, sizeof(conf), "%s/rmad.conf", dir);
	snprintf(sock, sizeof(sock), "%s/r.sock", dir);
	write_file(conf, "[rmad]\nlisen = 127.0.0.1:1\n");
	expect_78(typo, "unknown option 'lisen'");
	expect_78(addr, "not an address of this host");
}
END_TEST

/* --check-config refuses what the start would refuse. */
START_TEST(test_check_config_refuses_what_start_would)
{
	char key[128], open_key[128];
	const char *listen[] = {"--listen", NOT_HERE ":13337", "--check-config",
				NULL};
	const char *metrics[] = {"--metrics-listen", NOT_HERE ":9464",
				 "--check-config", NULL};
	const char *device[] = {"--net-devices", "lo,rmadnosuch0",
				"--check-config", NULL};
	const char *rdma[] = {"--net-devices", "rmadnosuch_0:1",
			      "--check-config", NULL};
	const char *missing[] = {"--peer-key-file", key, "--check-config",
				 NULL};
	const char *is_dir[] = {"--peer-key-file", dir, "--check-config", NULL};
	const char *readable[] = {"--peer-key-file", open_key, "--check-config",
				  NULL};
	const char *good[] = {"--net-devices",	"lo", "--listen", "127.0.0.1:0",
			      "--check-config", NULL};
	char err_path[128];

	snprintf(key, sizeof(key), "%s/no-such.key", dir);
	snprintf(open_key, sizeof(open_key), "%s/open.key", dir);
	write_file(open_key, "0123456789abcdef0123456789abcdef\n");
	ck_assert_int_eq(chmod(open_key, 0644), 0);
	expect_78(listen,
		  "listen: " NOT_HERE " is not an address of this host");
	expect_78(metrics, "metrics_listen: " NOT_HERE " is not an address");
	expect_78(device, "net_devices: no device 'rmadnosuch0'");
	expect_78(rdma, "net_devices: no device 'rmadnosuch_0:1'");
	expect_78(missing, "No such file or directory");
	expect_78(is_dir, "is not a file");
	expect_78(readable, "group or others may read");
	snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
	ck_assert_int_eq(run_rmad(good, err_path), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("lastgood");
	TCase *tc = tcase_create("take-over");
	TCase *plain = tcase_create("plain");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_take_over_with_a_typo);
	tcase_add_test(tc, test_take_over_address_not_here);
	tcase_add_test(tc, test_take_over_device_missing);
	tcase_add_test(tc, test_take_over_key_unreadable);
	tcase_add_test(tc, test_take_over_start_fails);
	tcase_add_test(tc, test_take_over_after_fall_back);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(plain, setup, teardown);
	tcase_set_timeout(plain, 60);
	tcase_add_test(plain, test_nothing_to_keep_exits_78);
	tcase_add_test(plain, test_check_config_refuses_what_start_would);
	suite_add_tcase(s, plain);
	return check_main_run(s);
}
