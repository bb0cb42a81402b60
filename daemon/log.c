/* SPDX-License-Identifier: BSD-2-Clause */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ucs/debug/log_def.h>

static enum log_level log_current = LOG_LEVEL_INFO;
static int log_journal;

static const char *const log_names[] = {"error", "warn", "info", "debug"};
/* syslog priorities for the journal's <N> prefix */
static const int log_priorities[] = {3, 4, 6, 7};

/* systemd sets JOURNAL_STREAM to "DEV:INO" of the stream it connected to
 * the journal; stderr gets <N> prefixes only while it is that stream (not
 * once a shell started from a service redirected it to a file). */
static int
log_stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (env == NULL || sscanf(env, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void
log_init(enum log_level level)
{
	log_current = level;
	log_journal = log_stderr_is_journal();
}

int
log_level_parse(const char *name, enum log_level *level_p)
{
	for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
		if (strcmp(name, log_names[i]) == 0) {
			*level_p = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

const char *
log_level_name(enum log_level level)
{
	return log_names[level];
}

bool
log_limit_pass(struct log_limit *l, double interval_s)
{
	struct timespec ts;
	uint64_t now, next;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	next = atomic_load_explicit(&l->next_ns, memory_order_relaxed);
	if (next != 0 && now < next)
		return false;
	/* Of the threads that saw the same expired clock, one wins. */
	return atomic_compare_exchange_strong_explicit(
	    &l->next_ns, &next, now + (uint64_t)(interval_s * 1e9),
	    memory_order_relaxed, memory_order_relaxed);
}

int
log_enabled(enum log_level level)
{
	return level <= log_current;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_journal) {
		fprintf(stderr, "<%d>%s\n", log_priorities[level], line);
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		fprintf(stderr, "%02d:%02d:%02d.%03ld rmad %s: %s\n",
			tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			log_names[level], line);
	}
}

void
log_startup(enum log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_stderr_is_journal())
		fprintf(stderr, "<%d>rmad: %s\n", log_priorities[level], line);
	else
		fprintf(stderr, "rmad: %s\n", line);
}

/* UCX's own lines ("Device is busy", transport warnings) would go to
 * stdout in UCX's format, a second timestamp and no priority: the journal
 * took its warnings for info. They go through log_msg instead, at the
 * matching level, and no further (UCS_LOG_FUNC_RC_STOP: UCX's default
 * handler is never reached). UCX filters by UCX_LOG_LEVEL (warn by
 * default) before calling here. */
static ucs_log_func_rc_t
log_ucx_handler(const char *file, unsigned line, const char *function,
		ucs_log_level_t level,
		const ucs_log_component_config_t *comp_conf, const char *format,
		va_list ap)
{
	enum log_level mine;
	const char *base;
	char text[768];

	(void)function;
	(void)comp_conf;
	if (level <= UCS_LOG_LEVEL_ERROR)
		mine = LOG_LEVEL_ERROR;
	else if (level == UCS_LOG_LEVEL_WARN)
		mine = LOG_LEVEL_WARN;
	else if (level <= UCS_LOG_LEVEL_INFO || level == UCS_LOG_LEVEL_PRINT)
		mine = LOG_LEVEL_INFO;
	else
		mine = LOG_LEVEL_DEBUG;
	if (!log_enabled(mine))
		return UCS_LOG_FUNC_RC_STOP;
	vsnprintf(text, sizeof(text), format, ap);
	base = strrchr(file, '/');
	log_msg(mine, "ucx: %s:%u %s", base ? base + 1 : file, line, text);
	return UCS_LOG_FUNC_RC_STOP;
}

void
log_ucx_start(void)
{
	static int pushed;

	/* Once per process: handlers stack up in UCX. */
	if (pushed)
		return;
	pushed = 1;
	ucs_log_push_handler(log_ucx_handler);
}
