/* Prometheus metrics over HTTP (libevent's evhttp) on metrics_listen; off
 * when that option is empty, and then every call here costs a NULL test. */
#ifndef RMAD_METRICS_H
#define RMAD_METRICS_H

#include "rma.pb-c.h"

struct daemon;
struct op;
struct metrics;

/* Binds metrics_listen and serves GET /metrics from the daemon's loop. */
int metrics_start(struct daemon *d);
void metrics_stop(struct daemon *d);
/* One operation finished (called from op_finish): counts it by kind and
 * peer, and its latency since it was accepted into the histogram. */
void metrics_observe_op(struct daemon *d, const struct op *op,
			Rma__V1__Status status);

#endif
