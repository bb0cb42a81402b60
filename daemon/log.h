/* SPDX-License-Identifier: BSD-2-Clause */
/* Levelled logging to stderr; under systemd (stderr is the stream that
 * JOURNAL_STREAM names) each line carries a <N> priority prefix instead of
 * a timestamp. */
#ifndef RMAD_LOG_H
#define RMAD_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum log_level {
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARN,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG
};

void log_init(enum log_level level);
int log_level_parse(const char *name, enum log_level *level_p);
const char *log_level_name(enum log_level level);
int log_enabled(enum log_level level);
/* UCX's log lines go through log_msg from now on. */
void log_ucx_start(void);

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A line of the start, before log_init, as a person reads it on a
 * terminal ("rmad: ..."), with its <N> priority when stderr is the
 * journal. */
void log_startup(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One rate limit for a log line that a stranger can trigger without end
 * (refused connections, failed proofs). Shared by every worker thread
 * that reaches the same line, so its clock is an atomic. */
struct log_limit {
	_Atomic uint64_t next_ns; /* CLOCK_MONOTONIC; 0: never logged */
};

/* True at most once per @interval_s for @l, in whichever thread asks
 * first; false for every other caller until then. */
bool log_limit_pass(struct log_limit *l, double interval_s);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_enabled(LOG_LEVEL_DEBUG))                              \
			log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__);                 \
	} while (0)

#endif
