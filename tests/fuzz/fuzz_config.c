/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the configuration file (daemon/config_load.c, config.c,
 * config_value.c), as rmad --config reads it.
 *
 * The input is the file. When it loads, what config_print writes must
 * set again, line by line, into a fresh configuration that prints the
 * same (as a saved configuration is read back, config_saved.c). When it
 * is refused, the reason names the file. Then every "name = value" line
 * of the input goes through config_set alone: a value refused must leave
 * the configuration as it was, and say which option (or that there is
 * none by that name). Any difference aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

static void
fuzz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_config: %s: %s\n", what, detail);
	abort();
}

static char *
fuzz_print(const struct config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (f == NULL)
		fuzz_fail("open_memstream", "no memory");
	config_print(f, cfg);
	if (fclose(f) != 0)
		fuzz_fail("fclose", "no memory");
	return text;
}

/* The loaded configuration printed, set again, printed the same. */
static void
fuzz_round_trip(const struct config *a)
{
	char *ta = fuzz_print(a), *copy = strdup(ta), *line, *save, *tb;
	char err[512];
	struct config b;

	config_defaults(&b);
	for (line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strstr(line, " = ");

		if (eq == NULL)
			continue;
		*eq = '\0';
		if (config_set(&b, line, eq + 3, err, sizeof(err)) < 0)
			fuzz_fail("a printed value is refused", err);
	}
	tb = fuzz_print(&b);
	if (strcmp(ta, tb) != 0)
		fuzz_fail("printed, set and printed again differs", tb);
	free(ta);
	free(tb);
	free(copy);
}

/* Every "name = value" line alone: a refusal changes nothing. */
static void
fuzz_each_line(const char *text)
{
	char *copy = strdup(text), *line, *save, err[512];
	struct config cfg, before;

	config_defaults(&cfg);
	for (line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '='), *name = line, *value, *end;

		if (eq == NULL)
			continue;
		*eq = '\0';
		value = eq + 1;
		while (*name == ' ')
			name++;
		for (end = eq; end > name && end[-1] == ' ';)
			*--end = '\0';
		while (*value == ' ')
			value++;
		before = cfg;
		err[0] = '\0';
		if (config_set(&cfg, name, value, err, sizeof(err)) == 0)
			continue;
		if (memcmp(&cfg, &before, sizeof(cfg)) != 0)
			fuzz_fail("a refused value changed the configuration",
				  err);
		/* the option as the table spells it: op-timeout is op_timeout
		 */
		for (char *p = name; *p != '\0'; p++)
			if (*p == '-')
				*p = '_';
		if (strncmp(err, "unknown option '", 16) != 0 &&
		    (strncmp(err, name, strlen(name)) != 0 ||
		     err[strlen(name)] != ':'))
			fuzz_fail("a refusal names no option", err);
	}
	free(copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512] = "", *text;
	struct config cfg;
	int fd = memfd_create("fuzz_config", MFD_CLOEXEC);

	if (fd < 0 || (size > 0 && write(fd, data, size) != (ssize_t)size))
		fuzz_fail("memfd", "cannot hold the input");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	config_defaults(&cfg);
	if (config_load_file(&cfg, path, err, sizeof(err)) == 0)
		fuzz_round_trip(&cfg);
	else if (strncmp(err, path, strlen(path)) != 0)
		fuzz_fail("a refused file is not named", err);
	close(fd);
	text = strndup((const char *)data, size);
	if (text == NULL)
		fuzz_fail("strndup", "no memory");
	fuzz_each_line(text);
	free(text);
	return 0;
}
