/* SPDX-License-Identifier: BSD-2-Clause */
/* What the metrics page counts that status.c does not (by operation kind
 * and peer, the latency histogram): recorded by one call from op_finish,
 * in each worker's own struct metrics, and merged for a snapshot
 * (snapshot.h). metrics_http.c serves the page. */
#include "daemon.h"
#include "metrics.h"
#include "metrics_series.h"
#include "snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Label values are peer addresses, chosen by clients: bound the series. */
#define METRICS_SERIES_MAX 256
#define METRICS_OTHER "other"

/* Upper bounds of the latency buckets, seconds; +Inf follows. */
const double metrics_bounds[METRICS_BUCKETS] = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
    0.0025,  0.005,    0.01,	0.025,	0.05,	 0.1,	 0.25,
    0.5,     1.0,      2.5,	5.0,	10.0,
};

static struct metrics_series *
metrics_series_get(struct metrics *m, const struct peer *p, const char *name)
{
	struct metrics_series *s;

	if (m->last_series < m->n_series && m->last_peer == p &&
	    strcmp(m->series[m->last_series].peer, name) == 0)
		return &m->series[m->last_series];
	if (m->n_series >= METRICS_SERIES_MAX)
		name = METRICS_OTHER;
	for (size_t i = 0; i < m->n_series; i++) {
		if (strcmp(m->series[i].peer, name) == 0) {
			m->last_peer = p;
			m->last_series = i;
			return &m->series[i];
		}
	}
	if (m->n_series == m->cap_series) {
		size_t cap = m->cap_series ? 2 * m->cap_series : 16;
		s = realloc(m->series, cap * sizeof(*s));
		if (s == NULL)
			return NULL;
		m->series = s;
		m->cap_series = cap;
	}
	s = &m->series[m->n_series];
	memset(s, 0, sizeof(*s));
	snprintf(s->peer, sizeof(s->peer), "%s", name);
	m->last_peer = p;
	m->last_series = m->n_series++;
	return s;
}

void
metrics_observe_op(struct daemon *d, const struct metrics_op *op,
		   Rma__V1__Status status)
{
	struct metrics *m = d->metrics;
	struct metrics_series *s;
	const char *name;
	double secs;
	size_t b;
	int k;

	if (op->kind < 0 || op->kind >= METRICS_KINDS)
		return;
	k = (int)op->kind;
	secs = daemon_op_clock(d) - op->started;
	if (secs < 0)
		secs = 0;
	for (b = 0; b < METRICS_BUCKETS && secs > metrics_bounds[b]; b++)
		;
	d->latency.buckets[k][b]++;
	d->latency.count[k]++;
	d->latency.sum[k] += secs;
	if (m == NULL)
		return;
	if (op->peer != NULL)
		name = op->peer->address;
	else
		name = op->kind == RMA__V1__OP_KIND__FLUSH ? "all" : "local";
	s = metrics_series_get(m, op->peer, name);
	if (s != NULL) {
		s->ops[k]++;
		if (status == RMA__V1__STATUS__OK)
			s->bytes[k] += op->length;
		else
			s->errors[k]++;
	}
}

void
metrics_latency_add(struct metrics_latency *into,
		    const struct metrics_latency *from)
{
	for (int k = 0; k < METRICS_KINDS; k++) {
		for (size_t b = 0; b <= METRICS_BUCKETS; b++)
			into->buckets[k][b] += from->buckets[k][b];
		into->count[k] += from->count[k];
		into->sum[k] += from->sum[k];
	}
}

/* One worker's series added into the snapshot's merged ones, by peer. */
static void
metrics_merge_series(struct metrics *into, const struct metrics *m)
{
	for (size_t i = 0; i < m->n_series; i++) {
		const struct metrics_series *from = &m->series[i];
		struct metrics_series *s =
		    metrics_series_get(into, NULL, from->peer);
		if (s == NULL)
			continue;
		for (int k = 0; k < METRICS_KINDS; k++) {
			s->ops[k] += from->ops[k];
			s->errors[k] += from->errors[k];
			s->bytes[k] += from->bytes[k];
		}
	}
}

/* For snapshot.c, with the world stopped. */
void
metrics_info_fill(const struct daemon *wd, struct metrics **merged_p,
		  struct metrics_latency *latency)
{
	metrics_latency_add(latency, &wd->latency);
	if (merged_p == NULL || wd->metrics == NULL)
		return;
	if (*merged_p == NULL)
		*merged_p = calloc(1, sizeof(**merged_p));
	if (*merged_p != NULL)
		metrics_merge_series(*merged_p, wd->metrics);
}

void
metrics_info_free(struct metrics *merged)
{
	if (merged == NULL)
		return;
	free(merged->series);
	free(merged);
}
