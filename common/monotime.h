/* SPDX-License-Identifier: BSD-2-Clause */
/* The monotonic clock as the programs beside the daemon read it (rmactl,
 * the benchmarks, the library, the tests): seconds as a double for
 * deadlines and rates, nanoseconds for latencies. Inline, since the
 * benchmark loops read it per burst. */
#ifndef RMA_MONOTIME_H
#define RMA_MONOTIME_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t
monotime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double
monotime_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
