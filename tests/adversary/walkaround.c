/* SPDX-License-Identifier: BSD-2-Clause */
/* The walkaround. Every UCX tcp interface listens on a port of its own,
 * next to rmad's listener, and UCX 1.13 creates an endpoint by itself when
 * another worker connects there with a worker address (wireup). We have
 * no address of the daemon's worker, but on the same host ours differs
 * from it only in the tcp interface ports (uct_tcp_iface_get_address packs
 * the port, in network order, as the whole iface address; the device
 * address is the IP, the same for both) and the worker uuid. So: pack our
 * own address, find our ports and the daemon's with `ss`, swap each of
 * ours for the daemon's port on the same IP, change the uuid (or UCX takes
 * the address for our own worker), and create an endpoint from it. */
#include "walkaround.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WALKAROUND_PORTS 32

struct walkaround_port {
	char ip[128];
	uint16_t port;
};

/* Listening tcp sockets of pid, from `ss -ltnpH`. */
static size_t
walkaround_ports(pid_t pid, struct walkaround_port *out, size_t max)
{
	char line[512], needle[32];
	size_t n = 0;
	FILE *f = popen("ss -ltnpH 2>/dev/null", "r");

	if (f == NULL)
		return 0;
	snprintf(needle, sizeof(needle), "pid=%d,", (int)pid);
	while (fgets(line, sizeof(line), f) != NULL && n < max) {
		char local[128], *colon;
		if (strstr(line, needle) == NULL)
			continue;
		/* State Recv-Q Send-Q Local:Port Peer:Port Process */
		if (sscanf(line, "%*s %*s %*s %127s", local) != 1)
			continue;
		colon = strrchr(local, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		snprintf(out[n].ip, sizeof(out[n].ip), "%s", local);
		out[n].port = (uint16_t)atoi(colon + 1);
		n++;
	}
	pclose(f);
	return n;
}

ucs_status_t
walkaround_connect(ucp_worker_h worker, pid_t pid, uint16_t listener,
		   ucp_err_handler_cb_t cb, void *arg, char *why,
		   size_t why_size, ucp_ep_h *ep_p)
{
	struct walkaround_port ours[WALKAROUND_PORTS], theirs[WALKAROUND_PORTS];
	ucp_ep_params_t params = {
	    .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
			  UCP_EP_PARAM_FIELD_ERR_HANDLER |
			  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
	    .err_mode = UCP_ERR_HANDLING_MODE_PEER,
	    .err_handler.cb = cb,
	    .err_handler.arg = arg,
	};
	ucp_address_t *addr;
	size_t addr_len, n_ours, n_theirs, patched = 0;
	char done[256] = "";
	uint8_t *copy;
	ucs_status_t st;

	st = ucp_worker_get_address(worker, &addr, &addr_len);
	if (st != UCS_OK) {
		snprintf(why, why_size, "ucp_worker_get_address: %s",
			 ucs_status_string(st));
		return st;
	}
	copy = malloc(addr_len);
	if (copy == NULL) {
		ucp_worker_release_address(worker, addr);
		return UCS_ERR_NO_MEMORY;
	}
	memcpy(copy, addr, addr_len);
	ucp_worker_release_address(worker, addr);
	n_ours = walkaround_ports(getpid(), ours, WALKAROUND_PORTS);
	n_theirs = walkaround_ports(pid, theirs, WALKAROUND_PORTS);
	if (n_ours == 0 || n_theirs == 0) {
		snprintf(why, why_size,
			 "ss found %zu tcp ports of ours, %zu of pid %d",
			 n_ours, n_theirs, (int)pid);
		st = UCS_ERR_UNREACHABLE;
		goto out;
	}
	for (size_t i = 0; i < n_ours; i++) {
		uint16_t from = htons(ours[i].port), to = 0;
		for (size_t j = 0; j < n_theirs; j++) {
			/* one interface per IP; the listener is not one */
			if (strcmp(theirs[j].ip, ours[i].ip) == 0 &&
			    theirs[j].port != listener)
				to = htons(theirs[j].port);
		}
		if (to == 0)
			continue;
		/* the port's two bytes, wherever they sit in the blob */
		for (size_t at = 0; at + 2 <= addr_len; at++) {
			if (memcmp(copy + at, &from, 2) == 0) {
				memcpy(copy + at, &to, 2);
				patched++;
			}
		}
		snprintf(done + strlen(done), sizeof(done) - strlen(done),
			 "%s%.60s:%u->%u", done[0] ? " " : "", ours[i].ip,
			 ours[i].port, ntohs(to));
	}
	if (patched == 0) {
		snprintf(why, why_size, "no port of ours found in our address");
		st = UCS_ERR_UNREACHABLE;
		goto out;
	}
	/* The uuid follows the one-byte header of a version 1 address. */
	for (size_t i = 1; i < 9 && i < addr_len; i++)
		copy[i] ^= 0x5a;
	params.address = (const ucp_address_t *)copy;
	st = ucp_ep_create(worker, &params, ep_p);
	if (st != UCS_OK) {
		snprintf(why, why_size, "ucp_ep_create: %s (%s)",
			 ucs_status_string(st), done);
		goto out;
	}
	snprintf(why, why_size, "endpoint from a patched address (%s)", done);
out:
	free(copy);
	return st;
}
