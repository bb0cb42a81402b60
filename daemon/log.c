#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
