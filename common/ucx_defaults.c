/* SPDX-License-Identifier: BSD-2-Clause */
/* rmad's UCX settings, and why (measured on loopback, UCX 1.13.1; see the
 * README's "UCX settings"). */
#include "ucx_defaults.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "size.h"

/* rmad's tcp fragment (below). */
#define UCX_DEFAULTS_TX_SEG "64k"

const struct ucx_default ucx_defaults[] = {
    /* UCX 1.13's tcp zero-copy sends trip an assertion (abort) when their
     * endpoint fails mid-send; copies do not. Seen here with a peer
     * killed under 64 KiB puts. */
    {"UCX_ZCOPY_THRESH", "ZCOPY_THRESH", "inf"},
    /* The tcp transport's fragment: every active message bigger than
     * this travels in pieces that UCX reassembles into a buffer of its
     * own (one more copy of every byte), and each piece costs a send and
     * a handler call. UCX's 8 KiB default held 1 MiB transfers to about
     * a quarter of a TCP stream here; 64 KiB more than doubled them.
     * Not more: UCX 1.13's receiver does not check a fragment's length
     * against its receive buffer (UCX_TCP_RX_SEG_SIZE, 64 KiB by
     * default), so a bigger fragment would overrun a peer left at UCX's
     * default, and UCX itself refuses a TX segment above the RX one. */
    {"UCX_TCP_TX_SEG_SIZE", "TX_SEG_SIZE", UCX_DEFAULTS_TX_SEG},
    /* The tcp receive buffer: UCX reads up to this much per recv and
     * hands every whole fragment in it to its handler. At 64 KiB a
     * 64 KiB fragment took two recvs and an epoll_wait each; at 1 MiB a
     * receiver that falls behind takes a backlog of fragments in one
     * call: 1 MiB puts cost the target 12 system calls where they cost
     * 37, and a third less CPU. Only the receiving side's memory: the
     * buffer (twice this, from a pool) is taken while a message is half
     * read, and a peer's fragments stay bound by its TX segment. */
    {"UCX_TCP_RX_SEG_SIZE", "RX_SEG_SIZE", "1m"},
    {NULL, NULL, NULL},
};

/* UCX's own default, should the value in force not parse. */
#define UCX_DEFAULTS_TCP_SEG 8192

/* The ucp_am_hdr_t before a single-fragment message and the
 * ucp_am_reply_ftr_t after it (ucp_am.c, UCX 1.13). */
#define UCX_DEFAULTS_AM_OVERHEAD 16

const char *
ucx_defaults_effective(const struct ucx_default *u, int *from_env)
{
	const char *env = getenv(u->env);

	*from_env = env != NULL;
	if (env != NULL)
		return env;
	/* UCX 1.13's tcp bounds a zero-copy fragment by this side's RX
	 * segment, not its TX one (uct_tcp_iface_query: am.max_zcopy), so
	 * with zero-copy sends on, a big RX segment here would send
	 * fragments that overrun a peer at UCX's defaults: the RX segment
	 * then stays the TX one. */
	if (strcmp(u->env, "UCX_TCP_RX_SEG_SIZE") == 0 &&
	    getenv("UCX_ZCOPY_THRESH") != NULL) {
		const char *tx = getenv("UCX_TCP_TX_SEG_SIZE");

		return tx != NULL ? tx : UCX_DEFAULTS_TX_SEG;
	}
	return u->value;
}

/* UCX's memory units: digits with k, m or g, then optionally b. */
static int
ucx_defaults_memunits(const char *s, uint64_t *out)
{
	char buf[32];
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n + 1);
	if (n > 1 && (buf[n - 1] == 'b' || buf[n - 1] == 'B') &&
	    strchr("kKmMgG", buf[n - 2]) != NULL)
		buf[n - 1] = '\0';
	return size_parse(buf, out);
}

size_t
ucx_defaults_am_fragment(size_t header_length)
{
	uint64_t seg = UCX_DEFAULTS_TCP_SEG;
	int from_env;

	for (const struct ucx_default *u = ucx_defaults; u->name; u++) {
		uint64_t v;
		if (strcmp(u->env, "UCX_TCP_TX_SEG_SIZE") == 0 &&
		    ucx_defaults_memunits(ucx_defaults_effective(u, &from_env),
					  &v) == 0 &&
		    v <= SIZE_MAX)
			seg = v;
	}
	if (seg <= UCX_DEFAULTS_AM_OVERHEAD + header_length)
		return 1;
	return (size_t)seg - UCX_DEFAULTS_AM_OVERHEAD - header_length;
}
