/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit: daemon/config.c, config_load.c, config_check.c and netdev.c
 * alone. Every option's value printed and read back, a refused value
 * changing nothing; the pieces judged after parsing (the cluster key
 * file, rma_protocol over transports that check no keys, net_devices =
 * auto) and the flags that drive them. */
#include <check.h>

#include "check_main.h"
#include <getopt.h>
#include <grp.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/rmad-test-config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	unsetenv("UCX_TLS");
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A key file with content and mode; returns its path (static buffer). */
static const char *
key_file(const char *name, const char *content, mode_t mode)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

/* config_check on defaults plus one peer_key_file; 0 or -1, err set. */
static int
check_key(const char *path, struct config *cfg, char *err, size_t len)
{
	config_defaults(cfg);
	ck_assert_int_eq(config_set(cfg, "peer_key_file", path, err, len), 0);
	err[0] = '\0';
	return config_check(cfg, err, len);
}

START_TEST(test_defaults)
{
	struct config cfg;
	char err[256];

	config_defaults(&cfg);
	ck_assert_str_eq(cfg.net_devices, "auto");
	ck_assert_uint_eq(cfg.max_inbound_peers, 1024);
	ck_assert_uint_eq(cfg.max_inbound_per_address, 64);
	ck_assert(!cfg.ucx_rma_unchecked);
	ck_assert(!cfg.peer_key_set);
	ck_assert_str_eq(cfg.peer_key_file, "");
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), 0);
	ck_assert(!cfg.peer_key_set);

	ck_assert_int_eq(
	    config_set(&cfg, "max_inbound_peers", "7", err, sizeof(err)), 0);
	ck_assert_int_eq(
	    config_set(&cfg, "max-inbound-per-address", "3", err, sizeof(err)),
	    0);
	ck_assert_uint_eq(cfg.max_inbound_peers, 7);
	ck_assert_uint_eq(cfg.max_inbound_per_address, 3);
	ck_assert_int_eq(
	    config_set(&cfg, "max_inbound_peers", "0", err, sizeof(err)), -1);
	ck_assert_int_eq(
	    config_set(&cfg, "max_inbound_per_address", "-1", err, sizeof(err)),
	    -1);
	ck_assert_int_eq(config_set(&cfg, "max_inbound_per_address",
				    "5000000000", err, sizeof(err)),
			 -1);
}
END_TEST

START_TEST(test_bool)
{
	struct config cfg;
	char err[256];

	config_defaults(&cfg);
	ck_assert_int_eq(
	    config_set(&cfg, "rma_protocol_unchecked", "yes", err, sizeof(err)),
	    0);
	ck_assert(cfg.ucx_rma_unchecked);
	ck_assert_int_eq(
	    config_set(&cfg, "rma_protocol_unchecked", "No", err, sizeof(err)),
	    0);
	ck_assert(!cfg.ucx_rma_unchecked);
	ck_assert_int_eq(config_set(&cfg, "rma_protocol_unchecked", "maybe",
				    err, sizeof(err)),
			 -1);
	ck_assert_ptr_nonnull(strstr(err, "expected yes or no"));
	ck_assert(!cfg.ucx_rma_unchecked);
}
END_TEST

START_TEST(test_transports_check_keys)
{
	static const char *const checked[] = {
	    "rc",	"rc_v",	     "rc_x",	  "rc_mlx5",
	    "rc_verbs", "dc",	     "dc_x",	  "dc_mlx5",
	    "ud",	"ud_v",	     "ud_x",	  "ud_mlx5",
	    "ib",	"rc,ud:aux", "rc_x dc_x", "rc_verbs,ud_verbs:aux",
	};
	static const char *const unchecked[] = {
	    "tcp",  "",	      "all",	 "sm",	   "shm",      "posix",
	    "sysv", "cma",    "self",	 "knem",   "xpmem",    "mm",
	    "^tcp", "^rc",    "rc,tcp",	 "tcp,rc", "cuda_ipc", "cuda",
	    "RC",   "rc:foo", "tcp:aux", ",",	   "rocm",
	};

	for (size_t i = 0; i < sizeof(checked) / sizeof(checked[0]); i++)
		ck_assert_msg(config_check_transports(checked[i]),
			      "'%s' should check keys", checked[i]);
	for (size_t i = 0; i < sizeof(unchecked) / sizeof(unchecked[0]); i++)
		ck_assert_msg(!config_check_transports(unchecked[i]),
			      "'%s' should not count as checking keys",
			      unchecked[i]);
}
END_TEST

START_TEST(test_rma_protocol_check)
{
	struct config cfg;
	char err[512], msg[320];

	config_defaults(&cfg);
	/* am over tcp: nothing to judge */
	ck_assert(!config_check_rma_unchecked(&cfg, msg, sizeof(msg)));
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), 0);

	ck_assert_int_eq(
	    config_set(&cfg, "rma_protocol", "ucx", err, sizeof(err)), 0);
	ck_assert(config_check_rma_unchecked(&cfg, msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "'tcp'"));
	ck_assert_ptr_nonnull(strstr(msg, "any address"));
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "rma_protocol_unchecked = yes"));
	ck_assert_ptr_nonnull(strstr(err, "do not check remote keys"));

	/* accepted once the risk is: still reported for the warning */
	cfg.ucx_rma_unchecked = true;
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), 0);
	ck_assert(config_check_rma_unchecked(&cfg, msg, sizeof(msg)));
	cfg.ucx_rma_unchecked = false;

	/* RDMA transports: the NIC checks keys */
	ck_assert_int_eq(
	    config_set(&cfg, "transports", "rc,ud:aux", err, sizeof(err)), 0);
	ck_assert(!config_check_rma_unchecked(&cfg, msg, sizeof(msg)));
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), 0);
	/* ...unless UCX_TLS, which wins over the option, says otherwise */
	setenv("UCX_TLS", "rc,tcp", 1);
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "'rc,tcp'"));
	setenv("UCX_TLS", "", 1);
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "'all'"));
	setenv("UCX_TLS", "dc_x", 1);
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), 0);
	unsetenv("UCX_TLS");
}
END_TEST

START_TEST(test_peer_key)
{
	static const char key44[] =
	    "q6Vx0r0mYl1n8zXvEJ0w6o5b7kXU4Gm0bS3zq9Qy2Vc=";
	uint8_t want[CONFIG_PEER_KEY_SIZE];
	struct config cfg, cfg2;
	char err[512], sub[160];
	const char *path;

	ck_assert_int_ge(sodium_init(), 0);
	crypto_generichash(want, sizeof(want), (const uint8_t *)key44,
			   strlen(key44), NULL, 0);

	/* what the docs say to do: base64 with a newline, mode 0600 */
	snprintf(sub, sizeof(sub), "%s\n", key44);
	path = key_file("good", sub, 0600);
	ck_assert_int_eq(check_key(path, &cfg, err, sizeof(err)), 0);
	ck_assert(cfg.peer_key_set);
	ck_assert_mem_eq(cfg.peer_key, want, sizeof(want));
	/* trailing white space does not change the key; 0400 is fine */
	snprintf(sub, sizeof(sub), "%s \r\n\t\n", key44);
	path = key_file("spaces", sub, 0400);
	ck_assert_int_eq(check_key(path, &cfg2, err, sizeof(err)), 0);
	ck_assert_mem_eq(cfg2.peer_key, want, sizeof(want));
	/* another content, another key */
	path = key_file("other",
			"Q6Vx0r0mYl1n8zXvEJ0w6o5b7kXU4Gm0bS3zq9Qy2Vc=", 0600);
	ck_assert_int_eq(check_key(path, &cfg2, err, sizeof(err)), 0);
	ck_assert(memcmp(cfg2.peer_key, want, sizeof(want)) != 0);

	/* readable or writable by group or others: refused */
	path = key_file("open", key44, 0640);
	ck_assert_int_eq(check_key(path, &cfg, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "0640") && strstr(err, "chmod 600"), "%s",
		      err);
	ck_assert(!cfg.peer_key_set);
	path = key_file("world", key44, 0602);
	ck_assert_int_eq(check_key(path, &cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "group or others"));

	/* too short, once the newline is gone */
	path = key_file("short", "0123456789abcdef0123456789abcde\n", 0600);
	ck_assert_int_eq(check_key(path, &cfg, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "31 bytes") && strstr(err, "at least 32"),
		      "%s", err);
	path = key_file("exact", "0123456789abcdef0123456789abcdef", 0600);
	ck_assert_int_eq(check_key(path, &cfg, err, sizeof(err)), 0);

	/* missing, or not a file */
	snprintf(sub, sizeof(sub), "%s/none", dir);
	ck_assert_int_eq(check_key(sub, &cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "No such file"));
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_int_eq(check_key(dir, &cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a file"));

	/* the key never shows in the printed configuration */
	{
		char *text = NULL, hex[2 * CONFIG_PEER_KEY_SIZE + 1];
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		path = key_file("good", key44, 0600);
		ck_assert_int_eq(check_key(path, &cfg, err, sizeof(err)), 0);
		config_print(f, &cfg);
		fclose(f);
		descriptor_hex(cfg.peer_key, sizeof(cfg.peer_key), hex);
		ck_assert_ptr_nonnull(strstr(text, path));
		ck_assert_ptr_null(strstr(text, hex));
		ck_assert_ptr_null(strstr(text, key44));
		free(text);
	}
}
END_TEST

/* Whether an interface named name is up on this host. */
static bool
have_interface(const char *name, int family)
{
	struct ifaddrs *ifs, *ifa;
	bool found = false;

	ck_assert_int_eq(getifaddrs(&ifs), 0);
	for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next)
		found = found || (ifa->ifa_addr != NULL &&
				  ifa->ifa_addr->sa_family == family &&
				  strcmp(ifa->ifa_name, name) == 0);
	freeifaddrs(ifs);
	return found;
}

static int
devices_for(const char *listen, const char *net_devices, char *out, size_t len)
{
	struct config cfg;
	char err[256];

	config_defaults(&cfg);
	ck_assert_int_eq(config_set(&cfg, "listen", listen, err, sizeof(err)),
			 0);
	if (net_devices != NULL)
		ck_assert_int_eq(config_set(&cfg, "net_devices", net_devices,
					    err, sizeof(err)),
				 0);
	out[0] = '\0';
	return netdev_auto(&cfg, out, len);
}

START_TEST(test_auto_net_devices)
{
	char out[512];

	ck_assert(have_interface("lo", AF_INET));
	ck_assert_int_eq(devices_for("127.0.0.1:1", NULL, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "lo");
	/* a loopback address no interface names still goes to lo */
	ck_assert_int_eq(devices_for("127.0.0.2:1", "auto", out, sizeof(out)),
			 0);
	ck_assert_str_eq(out, "lo");
	ck_assert_int_eq(devices_for("localhost:1", "auto", out, sizeof(out)),
			 0);
	ck_assert_str_eq(out, "lo");
	if (have_interface("lo", AF_INET6)) {
		ck_assert_int_eq(
		    devices_for("[::1]:1", "auto", out, sizeof(out)), 0);
		ck_assert_str_eq(out, "lo");
		ck_assert_int_eq(
		    devices_for("[::]:1", "auto", out, sizeof(out)), 0);
		ck_assert_str_eq(out, "all");
	}
	/* a wildcard listen address: every device */
	ck_assert_int_eq(devices_for("0.0.0.0:1", "auto", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "all");
	/* explicit values pass through; empty and all mean every device */
	ck_assert_int_eq(devices_for("127.0.0.1:1", "", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "all");
	ck_assert_int_eq(devices_for("127.0.0.1:1", "all", out, sizeof(out)),
			 0);
	ck_assert_str_eq(out, "all");
	ck_assert_int_eq(
	    devices_for("127.0.0.1:1", "eth9,mlx5_0:1", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "eth9,mlx5_0:1");
	/* an address this host does not hold (TEST-NET-1): refused */
	ck_assert_int_eq(devices_for("192.0.2.1:1", "auto", out, sizeof(out)),
			 -1);
}
END_TEST

/* config_parse_args on a flag vector; stderr carries its complaints. */
static int
parse(struct config *cfg, const char *const *args)
{
	char *argv[16];
	int argc = 0;

	argv[argc++] = (char *)"rmad";
	for (int i = 0; args[i] != NULL; i++)
		argv[argc++] = (char *)args[i];
	argv[argc] = NULL;
	config_defaults(cfg);
	optind = 0; /* glibc: start over */
	return config_parse_args(cfg, argc, argv, NULL, 0);
}

START_TEST(test_parse_args)
{
	static const char *const ucx[] = {"--rma-protocol", "ucx", NULL};
	static const char *const ucx_ok[] = {"--rma-protocol", "ucx",
					     "--rma-protocol-unchecked", NULL};
	static const char *const ucx_yes[] = {
	    "--rma-protocol", "ucx", "--rma-protocol-unchecked=yes", NULL};
	static const char *const ucx_no[] = {
	    "--rma-protocol", "ucx", "--rma-protocol-unchecked=no", NULL};
	static const char *const ucx_rc[] = {"--rma-protocol", "ucx",
					     "--transports", "rc", NULL};
	static const char *const bogus[] = {"--bogus", NULL};
	static const char *const stray[] = {"stray", NULL};
	static const char *const zero[] = {"--max-inbound-peers", "0", NULL};
	static const char *const limits[] = {
	    "--max-inbound-peers", "9", "--max-inbound-per-address", "2", NULL};
	struct config cfg;

	ck_assert_int_eq(parse(&cfg, ucx), -1);
	ck_assert_int_eq(parse(&cfg, ucx_ok), 0);
	ck_assert(cfg.ucx_rma && cfg.ucx_rma_unchecked);
	ck_assert_int_eq(parse(&cfg, ucx_yes), 0);
	ck_assert_int_eq(parse(&cfg, ucx_no), -1);
	ck_assert_int_eq(parse(&cfg, ucx_rc), 0);
	ck_assert_int_eq(parse(&cfg, bogus), CONFIG_USAGE);
	ck_assert_int_eq(parse(&cfg, stray), CONFIG_USAGE);
	ck_assert_int_eq(parse(&cfg, zero), -1);
	ck_assert_int_eq(parse(&cfg, limits), 0);
	ck_assert_uint_eq(cfg.max_inbound_peers, 9);
	ck_assert_uint_eq(cfg.max_inbound_per_address, 2);
}
END_TEST

START_TEST(test_config_file)
{
	struct config cfg;
	char conf[128], key[128], body[512];
	const char *args[] = {"--config", conf, NULL};
	FILE *f;

	snprintf(key, sizeof(key), "%s",
		 key_file("k", "0123456789abcdef0123456789abcdef\n", 0600));
	snprintf(conf, sizeof(conf), "%s/rmad.conf", dir);
	snprintf(body, sizeof(body),
		 "[rmad]\npeer_key_file = %s\nmax_inbound_peers = 10\n"
		 "max_inbound_per_address = 5\nnet_devices = lo\n"
		 "rma_protocol = ucx\nrma_protocol_unchecked = yes\n",
		 key);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fputs(body, f);
	fclose(f);
	ck_assert_int_eq(parse(&cfg, args), 0);
	ck_assert(cfg.peer_key_set);
	ck_assert_uint_eq(cfg.max_inbound_peers, 10);
	ck_assert_uint_eq(cfg.max_inbound_per_address, 5);
	ck_assert_str_eq(cfg.net_devices, "lo");
	ck_assert(cfg.ucx_rma_unchecked);
	/* the key file loosened: the whole configuration is refused */
	ck_assert_int_eq(chmod(key, 0644), 0);
	ck_assert_int_eq(parse(&cfg, args), -1);
	ck_assert(!cfg.peer_key_set);
}
END_TEST

/* socket_group is given to the socket only once the daemon starts: a
 * group this host lacks is a configuration error at --check-config. */
START_TEST(test_socket_group)
{
	struct group *own = getgrgid(getgid());
	struct config cfg;
	char err[256];

	ck_assert_ptr_nonnull(own);
	config_defaults(&cfg);
	ck_assert_int_eq(
	    config_set(&cfg, "socket_group", own->gr_name, err, sizeof(err)),
	    0);
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(config_set(&cfg, "socket_group",
				    "rmad-no-such-group-i14", err, sizeof(err)),
			 0);
	err[0] = '\0';
	ck_assert_int_eq(config_check(&cfg, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "socket_group: no group "
				  "'rmad-no-such-group-i14'") != NULL,
		      "err: %s", err);
}
END_TEST

/* --config naming a directory read as an empty file: the daemon ran on
 * defaults. It is refused; a missing file as before. */
START_TEST(test_config_dir)
{
	const char *args[] = {"--config", dir, NULL};
	char missing[128];
	const char *args_missing[] = {"--config", missing, NULL};
	struct config cfg;

	ck_assert_int_eq(parse(&cfg, args), -1);
	snprintf(missing, sizeof(missing), "%s/none.conf", dir);
	ck_assert_int_eq(parse(&cfg, args_missing), -1);
}
END_TEST

/* config_load_file on body; its error (or "") in err. */
static int
load_text(const char *body, char *err, size_t len)
{
	char path[128];
	struct config cfg;
	FILE *f;

	snprintf(path, sizeof(path), "%s/text.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(body, f);
	fclose(f);
	config_defaults(&cfg);
	err[0] = '\0';
	return config_load_file(&cfg, path, err, len);
}

/* What inih would let pass and the daemon must not: a key given twice
 * (the last won), a key before any section, a network with host bits
 * set (10.0.0.1/8 allows 10/8, while the writer may have meant one
 * host). Each is refused, saying where and why. */
START_TEST(test_config_file_refusals)
{
	char err[512];

	ck_assert_int_eq(load_text("[rmad]\nmax_regions = 5\n"
				   "log_level = info\nmax_regions = 7\n",
				   err, sizeof(err)),
			 -1);
	ck_assert_msg(strstr(err, ":4: 'max_regions' given twice") != NULL,
		      "%s", err);
	ck_assert_int_eq(
	    load_text("max_regions = 5\n[rmad]\n", err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, ":1: 'max_regions' before any section") !=
			  NULL,
		      "%s", err);
	ck_assert_int_eq(load_text("[rmad]\npeer_allow = 127.0.0.0/8, "
				   "10.1.2.3/16\n",
				   err, sizeof(err)),
			 -1);
	ck_assert_msg(strstr(err, "peer_allow: 10.1.2.3/16 has host bits set: "
				  "the network is 10.1.0.0/16") != NULL,
		      "%s", err);
	ck_assert_int_eq(
	    load_text("[rmad]\npeer_allow = fd00::1/64\n", err, sizeof(err)),
	    -1);
	ck_assert_msg(strstr(err, "the network is fd00::/64") != NULL, "%s",
		      err);
	ck_assert_int_eq(load_text("[rmad]\npeer_allow = 10.1.2.3/32, "
				   "10.0.0.0/8, ::1/128, fd00::/64\n"
				   "max_regions = 5\n",
				   err, sizeof(err)),
			 0);
}
END_TEST

/* Every file option changed at once: config_diff names each, marked
 * reloadable exactly for the keys rmad(8) SIGNALS lists, and
 * config_take_reloadable copies those and nothing else. */
static const char *const reloadable[] = {"log_level",
					 "op_timeout",
					 "connect_timeout",
					 "shutdown_timeout",
					 "max_frame",
					 "max_queued_bytes",
					 "peer_allow",
					 "peer_key_file",
					 "max_inbound_peers",
					 "max_inbound_per_address",
					 "allow_users",
					 "allow_groups",
					 "progress_spin",
					 "ring",
					 "ring_spin",
					 "max_regions",
					 "max_region_bytes",
					 "max_in_flight",
					 "max_clients_per_uid",
					 "max_regions_per_uid",
					 "max_region_bytes_per_uid",
					 NULL};

struct diff_seen {
	int n, n_reload;
	bool wrong;
};

static void
diff_note(const char *name, bool reload, const char *old, const char *new,
	  void *arg)
{
	struct diff_seen *seen = arg;
	bool listed = false;

	for (int i = 0; reloadable[i] != NULL; i++)
		listed |= strcmp(reloadable[i], name) == 0;
	if (listed != reload || strcmp(old, new) == 0) {
		fprintf(stderr, "diff: %s reload=%d listed=%d\n", name, reload,
			listed);
		seen->wrong = true;
	}
	seen->n++;
	seen->n_reload += reload;
}

START_TEST(test_reload_diff)
{
	static const char *const changes[][2] = {
	    {"socket", "/tmp/other.sock"},
	    {"socket_group", "root"},
	    {"listen", "127.0.0.2:1"},
	    {"log_level", "debug"},
	    {"op_timeout", "3"},
	    {"connect_timeout", "2"},
	    {"shutdown_timeout", "1"},
	    {"max_frame", "64K"},
	    {"max_queued_bytes", "1M"},
	    {"transports", "tcp,sm"},
	    {"net_devices", "lo"},
	    {"peer_allow", "10.0.0.0/8"},
	    {"peer_key_file", "/nonexistent"},
	    {"max_inbound_peers", "5"},
	    {"max_inbound_per_address", "2"},
	    {"allow_users", "0"},
	    {"allow_groups", "0"},
	    {"progress_mode", "polling"},
	    {"progress_spin", "30"},
	    {"ring", "no"},
	    {"ring_spin", "0"},
	    {"rma_protocol", "ucx"},
	    {"rma_protocol_unchecked", "yes"},
	    {"max_regions", "2"},
	    {"max_region_bytes", "1M"},
	    {"max_in_flight", "3"},
	    {"max_clients_per_uid", "4"},
	    {"max_regions_per_uid", "5"},
	    {"max_region_bytes_per_uid", "2M"},
	    {"workers", "2"},
	    {"metrics_listen", "127.0.0.1:9"},
	};
	size_t n = sizeof(changes) / sizeof(changes[0]);
	struct config a, b, c;
	struct diff_seen seen = {0, 0, false};
	int n_listed = 0;

	config_defaults(&a);
	config_defaults(&b);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(
		    config_set(&b, changes[i][0], changes[i][1], NULL, 0), 0);
	b.peer_key_set = true;
	memset(b.peer_key, 7, sizeof(b.peer_key));
	config_diff(&a, &b, diff_note, &seen);
	for (int i = 0; reloadable[i] != NULL; i++)
		n_listed++;
	ck_assert(!seen.wrong);
	ck_assert_int_eq(seen.n, (int)n); /* every file option seen */
	ck_assert_int_eq(seen.n_reload, n_listed);

	/* taken: the reloadable ones all, the rest not at all */
	c = a;
	config_take_reloadable(&c, &b);
	ck_assert_uint_eq(c.max_regions, 2);
	ck_assert_uint_eq(c.n_peer_allow, 1);
	ck_assert_uint_eq(c.n_allow_uids, 1);
	ck_assert(c.peer_key_set);
	ck_assert_int_eq(c.peer_key[0], 7);
	seen = (struct diff_seen){0, 0, false};
	config_diff(&c, &b, diff_note, &seen);
	ck_assert_int_eq(seen.n_reload, 0);
	ck_assert_int_eq(seen.n, (int)n - n_listed);
	ck_assert_str_eq(c.listen_host, a.listen_host);
	ck_assert_uint_eq(c.workers, a.workers);
}
END_TEST

/* config_print's text, and the option names in it (each "name = "). */
static char *
print_text(const struct config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	config_print(f, cfg);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

/* Every line of text set again on cfg, as config_saved_decode does. */
static void
set_text(struct config *cfg, const char *text)
{
	char *copy = strdup(text), *line, *save, err[256];

	for (line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strstr(line, " = ");

		if (eq == NULL)
			continue;
		*eq = '\0';
		ck_assert_msg(config_set(cfg, line, eq + 3, err, sizeof(err)) ==
				  0,
			      "%s = %s: %s", line, eq + 3, err);
	}
	free(copy);
}

/* What config_print writes, config_set reads back to the same: for the
 * defaults and for a value of every type that is not one. */
/* HOST:PORT as listen and metrics_listen take it: a bracket is only
 * ever around the whole host (the config fuzzer found "([::1]:7"
 * accepted, then printed as a value that did not read back). */
START_TEST(test_hostport_forms)
{
	static const char *const good[] = {"127.0.0.1:7", "[::1]:7", "::1:7",
					   "host.example:0", "[fe80::1]:65535"};
	static const char *const bad[] = {
	    "([::1]:7", "[::1]]:7", "a[b:7",	  "a]b:7", "[[::1]:7",
	    "[]:7",	"[::1]7",   "127.0.0.1:", ":7",	   "h:65536"};
	struct config c;
	char err[256];
	char *printed;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		config_defaults(&c);
		ck_assert_msg(
		    config_set(&c, "listen", good[i], err, sizeof(err)) == 0,
		    "listen = %s refused: %s", good[i], err);
		ck_assert_int_eq(
		    config_set(&c, "metrics_listen", good[i], err, sizeof(err)),
		    0);
		printed = print_text(&c);
		config_defaults(&c);
		set_text(&c, printed);
		free(printed);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		config_defaults(&c);
		ck_assert_msg(
		    config_set(&c, "listen", bad[i], err, sizeof(err)) < 0,
		    "listen = %s accepted", bad[i]);
		ck_assert_ptr_nonnull(strstr(err, "expected HOST:PORT"));
		ck_assert_msg(config_set(&c, "metrics_listen", bad[i], err,
					 sizeof(err)) < 0,
			      "metrics_listen = %s accepted", bad[i]);
	}
}
END_TEST

START_TEST(test_print_set_round_trip)
{
	static const char *const values[][2] = {
	    {"socket", "/tmp/x.sock"},
	    {"listen", "[::1]:7"},
	    {"log_level", "debug"},
	    {"op_timeout", "0.25"},
	    {"max_frame", "8K"},
	    {"max_queued_bytes", "1G"},
	    {"peer_allow", "10.0.0.0/8,fd00::/8"},
	    {"allow_users", "0,7"},
	    {"allow_groups", "0"},
	    {"progress_mode", "polling"},
	    {"progress_spin", "0"},
	    {"ring", "no"},
	    {"rma_protocol", "ucx"},
	    {"workers", "64"},
	    {"metrics_listen", "127.0.0.1:9"},
	    {"fd_store_max", "1M"},
	};
	struct config a, b;
	char *ta, *tb;

	config_defaults(&a);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		ck_assert_int_eq(
		    config_set(&a, values[i][0], values[i][1], NULL, 0), 0);
	for (int round = 0; round < 2; round++) {
		if (round == 1)
			config_defaults(&a);
		ta = print_text(&a);
		config_defaults(&b);
		set_text(&b, ta);
		tb = print_text(&b);
		ck_assert_str_eq(ta, tb);
		free(ta);
		free(tb);
	}
}
END_TEST

/* A value refused leaves the configuration as it was, for every option
 * (a list too, and max_frame out of its range). */
START_TEST(test_refused_changes_nothing)
{
	static const char *const bad[] = {"",
					  "abc",
					  "-1",
					  "0",
					  "1K",
					  "4G",
					  "257M",
					  "65",
					  "99999999999999999999",
					  "1e3",
					  "86401",
					  "1000001",
					  "10.1.2.3/16",
					  "10.0.0.0/8,x",
					  "0,-1",
					  "root,no-such-user-here",
					  "x:y",
					  ":",
					  "yes!",
					  "polling2"};
	char long_value[400], err[256];
	struct config a, before;
	char *names = NULL, *line, *save;
	int options = 0;

	memset(long_value, 'x', sizeof(long_value) - 1);
	long_value[sizeof(long_value) - 1] = '\0';
	config_defaults(&a);
	/* lists that are not empty, so that emptying one shows */
	ck_assert_int_eq(config_set(&a, "allow_users", "0", NULL, 0), 0);
	ck_assert_int_eq(config_set(&a, "allow_groups", "0", NULL, 0), 0);
	names = print_text(&a);
	for (line = strtok_r(names, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strstr(line, " = ");
		int refused = 0;

		if (eq == NULL)
			continue;
		*eq = '\0';
		options++;
		for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
			const char *v = i < sizeof(bad) / sizeof(bad[0])
					    ? bad[i]
					    : long_value;

			before = a;
			err[0] = '\0';
			if (config_set(&a, line, v, err, sizeof(err)) == 0) {
				a = before;
				continue;
			}
			refused++;
			ck_assert_msg(memcmp(&a, &before, sizeof(a)) == 0,
				      "%s = '%.20s' refused (%s), but changed "
				      "the configuration",
				      line, v, err);
			ck_assert_msg(strncmp(err, line, strlen(line)) == 0,
				      "%s: the error names another: %s", line,
				      err);
		}
		ck_assert_msg(refused > 0, "%s refused nothing", line);
	}
	free(names);
	ck_assert_int_ge(options, 30);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_bool);
	tcase_add_test(tc, test_transports_check_keys);
	tcase_add_test(tc, test_rma_protocol_check);
	tcase_add_test(tc, test_peer_key);
	tcase_add_test(tc, test_auto_net_devices);
	tcase_add_test(tc, test_parse_args);
	tcase_add_test(tc, test_config_file);
	tcase_add_test(tc, test_socket_group);
	tcase_add_test(tc, test_config_dir);
	tcase_add_test(tc, test_config_file_refusals);
	tcase_add_test(tc, test_reload_diff);
	tcase_add_test(tc, test_hostport_forms);
	tcase_add_test(tc, test_print_set_round_trip);
	tcase_add_test(tc, test_refused_changes_nothing);
	suite_add_tcase(s, tc);
	return check_main_run(s);
}
