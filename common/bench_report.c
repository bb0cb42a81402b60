/* SPDX-License-Identifier: BSD-2-Clause */
#include "bench_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int
bench_report_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Nearest rank: the smallest value with at least p of them at or below. */
static double
bench_report_percentile_us(const uint64_t *sorted, uint64_t n, double p)
{
	uint64_t rank = (uint64_t)(p * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)sorted[rank - 1] / 1000.0;
}

int
bench_report_print(struct bench_result *r, bool json)
{
	const char *op = r->op != NULL ? r->op : r->get ? "get" : "put";
	double ops = (double)r->count / r->seconds;
	double bytes = ops * (double)r->size;
	double sum = 0, p50, p99, mean, min, max;

	qsort(r->latency_ns, r->count, sizeof(*r->latency_ns),
	      bench_report_cmp);
	for (uint64_t i = 0; i < r->count; i++)
		sum += (double)r->latency_ns[i];
	p50 = bench_report_percentile_us(r->latency_ns, r->count, 0.50);
	p99 = bench_report_percentile_us(r->latency_ns, r->count, 0.99);
	mean = sum / (double)r->count / 1000.0;
	min = (double)r->latency_ns[0] / 1000.0;
	max = (double)r->latency_ns[r->count - 1] / 1000.0;
	if (json)
		printf("{\"schema_version\": %d, \"tool\": \"%s\", \"op\": "
		       "\"%s\", \"size\": %" PRIu64 ", \"count\": %" PRIu64
		       ", \"window\": %" PRIu64
		       ", \"remote_completion\": %s, \"seconds\": %.6f, "
		       "\"ops_per_s\": %.1f, \"bytes_per_s\": %.1f, "
		       "\"p50_us\": %.3f, \"p99_us\": %.3f, \"mean_us\": %.3f, "
		       "\"min_us\": %.3f, \"max_us\": %.3f}\n",
		       BENCH_REPORT_SCHEMA, r->tool, op, r->size, r->count,
		       r->window, r->remote_completion ? "true" : "false",
		       r->seconds, ops, bytes, p50, p99, mean, min, max);
	else
		printf("%s %" PRIu64 " B x %" PRIu64 ", window %" PRIu64
		       "%s: %.3f s\n"
		       "  %.0f ops/s, %.1f MiB/s\n"
		       "  latency (us): p50 %.1f, p99 %.1f, mean %.1f, "
		       "min %.1f, max %.1f\n",
		       op, r->size, r->count, r->window,
		       r->remote_completion ? ", remote completion" : "",
		       r->seconds, ops, bytes / (1 << 20), p50, p99, mean, min,
		       max);
	return fflush(stdout) != 0 || ferror(stdout) ? -1 : 0;
}
