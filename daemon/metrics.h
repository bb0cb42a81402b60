/* SPDX-License-Identifier: BSD-2-Clause */
/* Prometheus metrics over HTTP (libevent's evhttp) on metrics_listen; off
 * when that option is empty, and then every call here costs a NULL test.
 * metrics.c records, metrics_http.c serves the page. */
#ifndef RMAD_METRICS_H
#define RMAD_METRICS_H

#include "rma.pb-c.h"

struct daemon;
struct peer;
struct metrics;

#define METRICS_KINDS 4	   /* Rma__V1__OpKind: PUT, GET, FLUSH, ATOMIC */
#define METRICS_BUCKETS 19 /* latency bucket bounds; +Inf follows */

/* Latency by operation kind, kept by every worker whether metrics are
 * served or not (status hands it to `rmactl top`). Buckets are not
 * cumulative. */
struct metrics_latency {
	uint64_t buckets[METRICS_KINDS][METRICS_BUCKETS + 1];
	uint64_t count[METRICS_KINDS];
	double sum[METRICS_KINDS];
};

/* The buckets' upper bounds, seconds. */
extern const double metrics_bounds[METRICS_BUCKETS];

/* Binds metrics_listen and serves GET /metrics from the daemon's loop. */
int metrics_start(struct daemon *d);
void metrics_stop(struct daemon *d);
/* One operation finished (called from op_finish): counts it by kind and
 * peer, and its latency since it was accepted into the histogram. */
struct metrics_op {
	Rma__V1__OpKind kind;
	double started; /* daemon_now() when the client's op was accepted */
	const struct peer *peer; /* NULL for local copies and flush-all */
	uint64_t length;
};
void metrics_observe_op(struct daemon *d, const struct metrics_op *op,
			Rma__V1__Status status);
void metrics_latency_add(struct metrics_latency *into,
			 const struct metrics_latency *from);

#endif
