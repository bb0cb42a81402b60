/* SPDX-License-Identifier: BSD-2-Clause */
/* net_devices = auto: the UCX devices (UCX_NET_DEVICES) behind the listen
 * address, so that daemons talk over the interfaces that address is on and
 * not over every interface UCX finds: the interfaces holding the address
 * (the loopback ones for a 127/8 address no interface names; "all" for a
 * wildcard address) and the RDMA ports behind them, found through sysfs.
 * And for config_check: the devices named and the addresses to bind are
 * this host's. */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Appends name to the comma list in out unless it is there already. */
static int
netdev_list_add(char *out, size_t len, const char *name)
{
	size_t have = strlen(out), n = strlen(name);
	const char *p = out;

	while ((p = strstr(p, name)) != NULL) {
		if ((p == out || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return 0;
		p += n;
	}
	if (have + (have > 0) + n + 1 > len)
		return -1;
	snprintf(out + have, len - have, "%s%s", have > 0 ? "," : "", name);
	return 0;
}

/* The RDMA ports behind a network interface (RoCE, IPoIB), as UCX names
 * them: device:port, found through sysfs. */
static int
netdev_add_rdma_ports(const char *ifname, char *out, size_t len)
{
	char path[PATH_MAX], name[NAME_MAX + 32];
	unsigned port = 0;
	struct dirent *e;
	FILE *f;
	DIR *dir;
	int rc = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/dev_port", ifname);
	f = fopen(path, "r");
	if (f != NULL) {
		if (fscanf(f, "%u", &port) != 1)
			port = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/device/infiniband",
		 ifname);
	dir = opendir(path);
	if (dir == NULL)
		return 0;
	while (rc == 0 && (e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "%s:%u", e->d_name, port + 1);
		rc = netdev_list_add(out, len, name);
	}
	closedir(dir);
	return rc;
}

static bool
netdev_addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

static bool
netdev_addr_wildcard(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(
	    &((const struct sockaddr_in6 *)a)->sin6_addr);
}

static bool
netdev_addr_loopback(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return (ntohl(
			    ((const struct sockaddr_in *)a)->sin_addr.s_addr) >>
			24) == 127;
	return IN6_IS_ADDR_LOOPBACK(
	    &((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* Interfaces holding one of the listen host's addresses: those with the
 * address itself, or for a loopback address that no interface names
 * (127.0.0.2), the loopback interfaces. */
int
netdev_resolve(const struct config *cfg, char *out, size_t len, char *err,
	       size_t err_len)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *ai;
	struct ifaddrs *ifs, *ifa;
	int rc, pass;

	if (strcmp(cfg->net_devices, "auto") != 0) {
		snprintf(out, len, "%s",
			 cfg->net_devices[0] != '\0' ? cfg->net_devices
						     : "all");
		return 0;
	}
	rc = getaddrinfo(cfg->listen_host, NULL, &hints, &res);
	if (rc != 0)
		return config_error(err, err_len,
				    "net_devices = auto: cannot resolve listen "
				    "host %s: %s",
				    cfg->listen_host, gai_strerror(rc));
	if (getifaddrs(&ifs) < 0) {
		freeaddrinfo(res);
		return config_error(err, err_len,
				    "net_devices = auto: getifaddrs: %s",
				    strerror(errno));
	}
	out[0] = '\0';
	rc = 0;
	for (ai = res; ai != NULL && rc == 0; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		if (netdev_addr_wildcard(ai->ai_addr)) {
			snprintf(out, len, "all");
			goto out;
		}
		/* Exact address first; a loopback one held by no interface
		 * goes to the loopback interfaces. */
		for (pass = 0; pass < 2 && rc == 0; pass++) {
			bool found = false;
			for (ifa = ifs; ifa != NULL && rc == 0;
			     ifa = ifa->ifa_next) {
				if (ifa->ifa_addr == NULL ||
				    !(ifa->ifa_flags & IFF_UP))
					continue;
				if (pass == 0
					? !netdev_addr_equal(ifa->ifa_addr,
							     ai->ai_addr)
					: !(netdev_addr_loopback(ai->ai_addr) &&
					    (ifa->ifa_flags & IFF_LOOPBACK)))
					continue;
				found = true;
				rc = netdev_list_add(out, len, ifa->ifa_name);
				if (rc == 0)
					rc = netdev_add_rdma_ports(
					    ifa->ifa_name, out, len);
			}
			if (found)
				break;
		}
	}
	if (rc < 0)
		config_error(err, err_len,
			     "net_devices = auto: device list too long");
	else if (out[0] == '\0')
		rc = config_error(err, err_len,
				  "net_devices = auto: no interface holds the "
				  "listen address %s (set net_devices)",
				  cfg->listen_host);
out:
	freeifaddrs(ifs);
	freeaddrinfo(res);
	return rc;
}

int
netdev_auto(const struct config *cfg, char *out, size_t len)
{
	char err[256];

	if (netdev_resolve(cfg, out, len, err, sizeof(err)) < 0) {
		log_error("netdev_auto: %s", err);
		return -1;
	}
	return 0;
}

/* One device of a UCX_NET_DEVICES list: an interface (eth1), or an RDMA
 * port as UCX names it (mlx5_0:1). */
static bool
netdev_exists(const char *name)
{
	char path[PATH_MAX], dev[NAME_MAX + 1];
	const char *colon = strchr(name, ':');
	unsigned port;

	if (colon == NULL)
		return if_nametoindex(name) != 0;
	if ((size_t)(colon - name) > NAME_MAX ||
	    sscanf(colon + 1, "%u", &port) != 1)
		return false;
	snprintf(dev, sizeof(dev), "%.*s", (int)(colon - name), name);
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u", dev,
		 port);
	return access(path, F_OK) == 0;
}

int
netdev_check_devices(const struct config *cfg, char *err, size_t err_len)
{
	const char *env = getenv("UCX_NET_DEVICES");
	const char *list = env != NULL ? env : cfg->net_devices;
	char buf[sizeof(cfg->net_devices)], *save, *item;

	/* auto is checked by netdev_resolve; an exclusion (^eth0) may name
	 * what is not there */
	if (env == NULL && strcmp(list, "auto") == 0)
		return 0;
	if (list[0] == '^' || strlen(list) >= sizeof(buf))
		return 0;
	snprintf(buf, sizeof(buf), "%s", list);
	for (item = strtok_r(buf, ", \t", &save); item != NULL;
	     item = strtok_r(NULL, ", \t", &save)) {
		if (strcmp(item, "all") == 0 || netdev_exists(item))
			continue;
		return config_error(
		    err, err_len,
		    "%s: no device '%s' on this host (ip link "
		    "lists the interfaces, ibv_devinfo the "
		    "RDMA ports)",
		    env != NULL ? "UCX_NET_DEVICES" : "net_devices", item);
	}
	return 0;
}

/* A socket bound to host (port 0: the daemon a take-over replaces may
 * hold the port) tells whether host is an address of this host, as the
 * listener's bind will. */
int
netdev_check_address(const char *what, const char *host, char *err,
		     size_t err_len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai;
	int fd, rc, saved;

	rc = getaddrinfo(host, "0", &hints, &ai);
	if (rc != 0)
		return config_error(err, err_len, "%s: cannot resolve %s: %s",
				    what, host, gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		saved = errno;
		freeaddrinfo(ai);
		return config_error(err, err_len, "%s: %s: socket: %s", what,
				    host, strerror(saved));
	}
	rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
	saved = errno;
	close(fd);
	freeaddrinfo(ai);
	if (rc == 0)
		return 0;
	if (saved == EADDRNOTAVAIL)
		return config_error(err, err_len,
				    "%s: %s is not an address of this host "
				    "(ip -br addr lists them)",
				    what, host);
	return config_error(err, err_len, "%s: cannot bind %s: %s", what, host,
			    strerror(saved));
}
