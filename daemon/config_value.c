/* SPDX-License-Identifier: BSD-2-Clause */
/* The values of configuration options, as the file, the flags and the
 * reload parse them: HOST:PORT, CIDR lists, users and groups by name or
 * number (a number that does not fit is an error, never a wrap), and
 * booleans. Every parser reports through config_error into the caller's
 * buffer. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
config_error(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* "host:port" with an optional [v6] host. A host with a bracket left in
 * it ("([::1]:7" once read as host "([::1]") would print as
 * "[([::1]]:7", which reads back as nothing: refused. */
int
config_parse_hostport(const char *s, char *host, size_t host_len,
		      uint16_t *port_p)
{
	const char *colon;
	const char *h = s;
	size_t hl;
	char *end;
	long port;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':')
			return -1;
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= host_len || memchr(h, '[', hl) != NULL ||
	    memchr(h, ']', hl) != NULL)
		return -1;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || *end != '\0' || end == colon + 1 || port < 0 ||
	    port > 65535)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port_p = (uint16_t)port;
	return 0;
}

/* addr[/prefix], host bits or not. */
static int
config_cidr_read(const char *s, struct cidr *c)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	long prefix;
	char *end;

	if (n == 0 || n >= sizeof(addr))
		return -1;
	memcpy(addr, s, n);
	addr[n] = '\0';
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, addr, c->addr) == 1)
		c->family = AF_INET;
	else if (inet_pton(AF_INET6, addr, c->addr) == 1)
		c->family = AF_INET6;
	else
		return -1;
	prefix = c->family == AF_INET ? 32 : 128;
	if (slash != NULL) {
		long max = prefix;
		errno = 0;
		prefix = strtol(slash + 1, &end, 10);
		if (errno || *end != '\0' || end == slash + 1 || prefix < 0 ||
		    prefix > max)
			return -1;
	}
	c->prefix = (int)prefix;
	return 0;
}

/* Clears c's host bits; true if any was set. */
static bool
config_cidr_clear_host(struct cidr *c)
{
	bool set = false;

	for (int i = 0, bits = c->prefix; i < 16; i++, bits -= 8) {
		uint8_t mask = bits >= 8  ? 0xff
			       : bits > 0 ? (uint8_t)(0xff << (8 - bits))
					  : 0;
		set = set || (c->addr[i] & ~mask) != 0;
		c->addr[i] &= mask;
	}
	return set;
}

int
config_parse_cidr(const char *s, struct cidr *c)
{
	/* 10.0.0.1/8 is an address, not a network: refused, for the
	 * writer may have meant 10.0.0.1/32 (config_cidr_network says) */
	if (config_cidr_read(s, c) < 0 || config_cidr_clear_host(c))
		return -1;
	return 0;
}

int
config_cidr_network(const char *list, char *item, size_t item_len, char *net,
		    size_t net_len)
{
	char buf[1024], *save, *it, text[INET6_ADDRSTRLEN];
	struct cidr c;

	snprintf(buf, sizeof(buf), "%s", list);
	for (it = strtok_r(buf, ", \t", &save); it != NULL;
	     it = strtok_r(NULL, ", \t", &save)) {
		if (config_cidr_read(it, &c) < 0 ||
		    !config_cidr_clear_host(&c) ||
		    inet_ntop(c.family, c.addr, text, sizeof(text)) == NULL)
			continue;
		snprintf(item, item_len, "%s", it);
		snprintf(net, net_len, "%s/%d", text, c.prefix);
		return 1;
	}
	return 0;
}

bool
config_cidr_match(const struct cidr *c, int family, const uint8_t *addr)
{
	int bits = c->prefix;

	if (family != c->family)
		return false;
	for (int i = 0; bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
		if ((addr[i] & mask) != (c->addr[i] & mask))
			return false;
	}
	return true;
}

/* Splits a comma or space separated list, calling fn for each item. */
int
config_each(const char *list, int (*fn)(const char *item, void *arg), void *arg)
{
	char buf[1024], *save, *item;

	if (strlen(list) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", list);
	for (item = strtok_r(buf, ", \t", &save); item != NULL;
	     item = strtok_r(NULL, ", \t", &save)) {
		if (fn(item, arg) < 0)
			return -1;
	}
	return 0;
}

int
config_add_cidr(const char *item, void *arg)
{
	struct config *cfg = arg;

	if (cfg->n_peer_allow == CONFIG_LIST_MAX)
		return -1;
	return config_parse_cidr(item, &cfg->peer_allow[cfg->n_peer_allow++]);
}

/* A user or group by name or number; (uid_t)-1 is never valid, and a
 * number that does not fit is an error, not a wrap to some other id. */
int
config_parse_id(const char *item, bool group, unsigned *id_p)
{
	struct passwd *pw;
	struct group *gr;
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(item, &end, 10);
	if (end != item && *end == '\0') {
		if (errno != 0 || item[0] == '-' || v >= UINT32_MAX)
			return -1;
		*id_p = (unsigned)v;
		return 0;
	}
	if (group) {
		gr = getgrnam(item);
		if (gr == NULL)
			return -1;
		*id_p = gr->gr_gid;
	} else {
		pw = getpwnam(item);
		if (pw == NULL)
			return -1;
		*id_p = pw->pw_uid;
	}
	return 0;
}

int
config_add_user(const char *item, void *arg)
{
	struct config *cfg = arg;
	unsigned id;

	if (cfg->n_allow_uids == CONFIG_LIST_MAX ||
	    config_parse_id(item, false, &id) < 0)
		return -1;
	cfg->allow_uids[cfg->n_allow_uids++] = (uid_t)id;
	return 0;
}

int
config_add_group(const char *item, void *arg)
{
	struct config *cfg = arg;
	unsigned id;

	if (cfg->n_allow_gids == CONFIG_LIST_MAX ||
	    config_parse_id(item, true, &id) < 0)
		return -1;
	cfg->allow_gids[cfg->n_allow_gids++] = (gid_t)id;
	return 0;
}

int
config_parse_bool(const char *value, bool *b_p)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(value, yes[i]) == 0) {
			*b_p = true;
			return 0;
		}
		if (strcasecmp(value, no[i]) == 0) {
			*b_p = false;
			return 0;
		}
	}
	return -1;
}
