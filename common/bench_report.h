/* SPDX-License-Identifier: BSD-2-Clause */
/* One report for `rmactl bench` and bench/raw_ucx, so the two are read
 * and compared the same way (bench/compare parses the JSON). */
#ifndef RMA_BENCH_REPORT_H
#define RMA_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>

/* "schema_version" of the JSON report, as rmactl's other JSON documents
 * carry (RMACTL_JSON_SCHEMA): raised when a field changes meaning. */
#define BENCH_REPORT_SCHEMA 1

struct bench_result {
	const char *tool; /* "rmad" or "raw_ucx" */
	bool get;
	const char *op; /* NULL: "get" or "put" by get; else the op's name */
	uint64_t size, count, window;
	bool remote_completion;
	double seconds;
	uint64_t *latency_ns; /* count entries; sorted in place */
};

/* Prints one JSON object or a readable summary on stdout; returns 0, or
 * -1 when stdout could not be written. */
int bench_report_print(struct bench_result *r, bool json);

#endif
