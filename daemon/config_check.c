/* SPDX-License-Identifier: BSD-2-Clause */
/* What can only be judged once every option is set: rma_protocol = ucx
 * over transports whose NIC does not check remote keys is refused unless
 * the risk is accepted, socket_group must name a group of this host, and
 * peer_key_file is read (and refused if others may read it) into the
 * cluster key, and the addresses and devices the start binds must be
 * this host's. Runs after the file, the environment
 * and the flags, before the daemon starts or --check-config prints. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The cluster key: BLAKE2b-256 of the file's content, trailing white
 * space and newlines stripped (so `base64 > file` and an editor's final
 * newline give the same key). The file is a secret: a group or world
 * readable one is refused rather than trusted. */
static int
config_check_peer_key(struct config *cfg, char *err, size_t err_len)
{
	enum { KEY_FILE_MAX = 64 * 1024 };
	const char *path = cfg->peer_key_file;
	unsigned char *buf = NULL;
	struct stat st;
	size_t n = 0;
	ssize_t got;
	int fd, rc = -1;

	cfg->peer_key_set = false;
	if (path[0] == '\0')
		return 0;
	if (sodium_init() < 0)
		return config_error(err, err_len,
				    "peer_key_file: libsodium failed to start");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return config_error(err, err_len, "peer_key_file: %s: %s", path,
				    strerror(errno));
	if (fstat(fd, &st) < 0) {
		config_error(err, err_len, "peer_key_file: %s: %s", path,
			     strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		config_error(err, err_len, "peer_key_file: %s is not a file",
			     path);
		goto out_close;
	}
	if ((st.st_mode & 077) != 0) {
		config_error(err, err_len,
			     "peer_key_file: %s has mode %04o: group or others "
			     "may read or write it (chmod 600 it)",
			     path, (unsigned)(st.st_mode & 07777));
		goto out_close;
	}
	if (st.st_size > KEY_FILE_MAX) {
		config_error(err, err_len,
			     "peer_key_file: %s is larger than %d bytes", path,
			     KEY_FILE_MAX);
		goto out_close;
	}
	buf = malloc(KEY_FILE_MAX + 1);
	if (buf == NULL) {
		config_error(err, err_len, "peer_key_file: out of memory");
		goto out_close;
	}
	while ((got = read(fd, buf + n, KEY_FILE_MAX + 1 - n)) > 0)
		n += (size_t)got;
	if (got < 0 || n > KEY_FILE_MAX) {
		config_error(err, err_len, "peer_key_file: %s: %s", path,
			     got < 0 ? strerror(errno) : "file too large");
		goto out_free;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
			 buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	if (n < CONFIG_PEER_KEY_SIZE) {
		config_error(err, err_len,
			     "peer_key_file: %s holds %zu bytes, at least %d "
			     "needed (head -c 32 /dev/urandom | base64 > %s)",
			     path, n, CONFIG_PEER_KEY_SIZE, path);
		goto out_free;
	}
	crypto_generichash(cfg->peer_key, sizeof(cfg->peer_key), buf, n, NULL,
			   0);
	cfg->peer_key_set = true;
	rc = 0;
out_free:
	sodium_memzero(buf, KEY_FILE_MAX + 1);
	free(buf);
out_close:
	close(fd);
	return rc;
}

bool
config_check_transports(const char *tls)
{
	/* UCX 1.13's verbs/mlx5 transports and the aliases naming only
	 * them (ucp_tl_aliases): the NIC checks the remote key of every
	 * access. Everything else (tcp, shared memory, cuda/rocm ipc,
	 * "all", "^..." exclusions) is emulated or unchecked. */
	static const char *const checked[] = {
	    "ib",      "rc",   "rc_v",	   "rc_x",    "rc_verbs",
	    "rc_mlx5", "dc",   "dc_x",	   "dc_mlx5", "ud",
	    "ud_v",    "ud_x", "ud_verbs", "ud_mlx5",
	};
	char buf[256], *save, *item;
	int n = 0;

	if (strlen(tls) >= sizeof(buf))
		return false;
	snprintf(buf, sizeof(buf), "%s", tls);
	for (item = strtok_r(buf, ", \t", &save); item != NULL;
	     item = strtok_r(NULL, ", \t", &save)) {
		char *aux = strchr(item, ':');
		bool ok = false;

		if (aux != NULL && strcmp(aux, ":aux") == 0)
			*aux = '\0';
		for (size_t i = 0; i < sizeof(checked) / sizeof(checked[0]);
		     i++)
			ok = ok || strcmp(item, checked[i]) == 0;
		if (!ok)
			return false;
		n++;
	}
	return n > 0;
}

/* The transports UCX will use: UCX_TLS wins over the option, as in
 * worker_context_create. */
static const char *
config_check_effective_tls(const struct config *cfg)
{
	const char *env = getenv("UCX_TLS");

	return env != NULL ? env : cfg->transports;
}

bool
config_check_rma_unchecked(const struct config *cfg, char *msg, size_t len)
{
	const char *tls = config_check_effective_tls(cfg);

	if (!cfg->ucx_rma || config_check_transports(tls))
		return false;
	snprintf(msg, len,
		 "rma_protocol = ucx over transports '%s', which do not check "
		 "remote keys: any daemon that connects (from peer_allow) can "
		 "read and write any address of this daemon's memory, not "
		 "only its regions",
		 tls[0] != '\0' ? tls : "all");
	return true;
}

/* server_start gives the socket to this group: a name that does not
 * resolve would fail there, after the daemon said its config was fine. */
static int
config_check_socket_group(const struct config *cfg, char *err, size_t err_len)
{
	const struct group *gr;

	if (cfg->socket_group[0] == '\0')
		return 0;
	errno = 0;
	gr = getgrnam(cfg->socket_group);
	if (gr != NULL)
		return 0;
	if (errno != 0 && errno != ENOENT && errno != ESRCH && errno != EBADF &&
	    errno != EPERM)
		return config_error(err, err_len,
				    "socket_group: cannot look up '%s': %s",
				    cfg->socket_group, strerror(errno));
	return config_error(err, err_len,
			    "socket_group: no group '%s' on this host (see "
			    "getent group)",
			    cfg->socket_group);
}

/* What the start binds and opens on this host: the listen address (and
 * the interfaces net_devices = auto finds for it), the devices named,
 * the metrics address. A file that passes here and fails at start would
 * leave a restarted daemon with nothing to run on. */
static int
config_check_host(const struct config *cfg, char *err, size_t err_len)
{
	char host[64], devices[512];
	uint16_t port;

	if (netdev_check_address("listen", cfg->listen_host, err, err_len) < 0)
		return -1;
	if (strcmp(cfg->net_devices, "auto") == 0 &&
	    getenv("UCX_NET_DEVICES") == NULL &&
	    netdev_resolve(cfg, devices, sizeof(devices), err, err_len) < 0)
		return -1;
	if (netdev_check_devices(cfg, err, err_len) < 0)
		return -1;
	if (cfg->metrics_listen[0] != '\0' &&
	    config_parse_hostport(cfg->metrics_listen, host, sizeof(host),
				  &port) == 0 &&
	    netdev_check_address("metrics_listen", host, err, err_len) < 0)
		return -1;
	return 0;
}

int
config_check(struct config *cfg, char *err, size_t err_len)
{
	char msg[320];

	if (config_check_rma_unchecked(cfg, msg, sizeof(msg)) &&
	    !cfg->ucx_rma_unchecked)
		return config_error(err, err_len,
				    "%s. Use rma_protocol = am, RDMA "
				    "transports only (rc, dc, ud, ib), or set "
				    "rma_protocol_unchecked = yes to accept "
				    "this",
				    msg);
	if (config_check_socket_group(cfg, err, err_len) < 0)
		return -1;
	if (strcmp(cfg->fd_store, "auto") != 0 &&
	    strcmp(cfg->fd_store, "yes") != 0 &&
	    strcmp(cfg->fd_store, "no") != 0)
		return config_error(err, err_len,
				    "fd_store: expected auto, yes or no, got "
				    "'%s'",
				    cfg->fd_store);
	/* the state record, the client socket, the last good configuration
	 * and at least one region */
	if (cfg->fd_store_max < 4 || cfg->fd_store_max > CONFIG_FD_STORE_MAX)
		return config_error(err, err_len,
				    "fd_store_max %u: from 4 (rmad keeps 3 fds "
				    "of its own in the store) to %u",
				    cfg->fd_store_max, CONFIG_FD_STORE_MAX);
	if (config_check_host(cfg, err, err_len) < 0)
		return -1;
	return config_check_peer_key(cfg, err, err_len);
}
