/* SPDX-License-Identifier: BSD-2-Clause */
/* What a worker records for the metrics page, private to metrics.c,
 * which records it (one call from op_finish), and metrics_http.c, which
 * serves it. */
#ifndef RMAD_METRICS_SERIES_H
#define RMAD_METRICS_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

struct evhttp;
struct peer;

/* Totals of one peer address ("local": copies within this daemon; "all":
 * flushes of every peer). Kept after the peer itself is gone, as counters
 * must be. */
struct metrics_series {
	char peer[96];
	uint64_t ops[METRICS_KINDS];
	uint64_t errors[METRICS_KINDS];
	uint64_t bytes[METRICS_KINDS];
};

struct metrics {
	struct daemon *d;
	struct evhttp *http; /* worker 0's only */
	char url[160];
	struct metrics_series *series;
	size_t n_series, cap_series;
	const struct peer *last_peer; /* lookup cache: last op's peer... */
	size_t last_series;	      /* ...and its series */
	uint64_t scrapes;
};

#endif
