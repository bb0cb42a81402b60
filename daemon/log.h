/* SPDX-License-Identifier: BSD-2-Clause */
/* Levelled logging to stderr; under systemd (stderr is the stream that
 * JOURNAL_STREAM names) each line carries a <N> priority prefix instead of
 * a timestamp. */
#ifndef RMAD_LOG_H
#define RMAD_LOG_H

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

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_enabled(LOG_LEVEL_DEBUG))                              \
			log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__);                 \
	} while (0)

#endif
