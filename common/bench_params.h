/* SPDX-License-Identifier: BSD-2-Clause */
/* The knobs `rmactl bench` and bench/raw_ucx share (--size, --count,
 * --window, --warmup): parsed, bounded and defaulted in one place, so the
 * two run the same loop over the same numbers and bench/compare can set
 * them side by side. Each program words its own usage errors. */
#ifndef RMA_BENCH_PARAMS_H
#define RMA_BENCH_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_WINDOW_DEFAULT 16
#define BENCH_WINDOW_MAX 65536
#define BENCH_COUNT_MAX 100000000ull

/* The short options the knobs have in both programs' option tables. */
enum bench_param {
	BENCH_PARAM_SIZE = 's',
	BENCH_PARAM_COUNT = 'n',
	BENCH_PARAM_WINDOW = 'w',
	BENCH_PARAM_WARMUP = 'W',
};

/* Their getopt_long(3) entries, for both option tables (<getopt.h>). */
/* clang-format off */
#define BENCH_PARAM_OPTIONS                                                   \
	{"size", required_argument, NULL, BENCH_PARAM_SIZE},                  \
	{"count", required_argument, NULL, BENCH_PARAM_COUNT},                \
	{"window", required_argument, NULL, BENCH_PARAM_WINDOW},              \
	{"warmup", required_argument, NULL, BENCH_PARAM_WARMUP}
/* clang-format on */

struct bench_params {
	uint64_t size, count, window, warmup;
	bool have_count, have_warmup; /* given: not defaulted */
};

/* All zero but the window (BENCH_WINDOW_DEFAULT). */
void bench_params_init(struct bench_params *p);

/* Sets the knob `param` from `arg` (a size_parse() number: 4K, 1M...).
 * Returns 0, or -1 when arg is no number or out of the knob's bounds
 * (size 1..SIZE_MAX, count 1..BENCH_COUNT_MAX, window
 * 1..BENCH_WINDOW_MAX, warmup 0..BENCH_COUNT_MAX); p is then unchanged
 * but for the knob itself. */
int bench_params_set(struct bench_params *p, enum bench_param param,
		     const char *arg);

/* Fills what was not given, from a size already set (not 0): a count of
 * about a second at usual rates, bounded in ops and bytes; a warm-up that
 * connects the lanes without costing much. */
void bench_params_default(struct bench_params *p);

#endif
