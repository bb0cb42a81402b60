/* SPDX-License-Identifier: BSD-2-Clause */
/* The option table's shape, private to config.c (the table, each type's
 * parser and printer) and config_load.c (the file, the flags, --help). */
#ifndef RMAD_CONFIG_OPTION_H
#define RMAD_CONFIG_OPTION_H

#include "config.h"

struct config_option;

/* One type of value: parsed into the option's field (written only when
 * the value is good; -1 with why in err otherwise), and printed back in
 * the syntax the parser takes. */
struct config_type {
	int (*parse)(struct config *cfg, const struct config_option *o,
		     const char *value, char *err, size_t err_len);
	void (*print)(FILE *f, const struct config *cfg,
		      const struct config_option *o);
	bool value_optional; /* as a flag, the value may be left out (yes) */
};

struct config_option {
	const char *name;
	const struct config_type *type;
	size_t offset, size; /* the field */
	size_t count;	     /* lists: the offset of the item count, else 0 */
	uint64_t max;	     /* numbers: the largest value, 0 = the field's */
	/* choices: the words for false and true */
	const char *const *words;
	bool flag_only;
	/* A running daemon takes a new value on SIGHUP (config_reload.c):
	 * read afresh at each use, or at each new client or peer. The rest
	 * shaped what was built at start (socket, listener, UCX, threads). */
	bool reload;
	const char *help;
};

/* The options; a table of another length does not compile. */
#define CONFIG_N_OPTIONS 37
extern const struct config_option config_options[CONFIG_N_OPTIONS];

/* "op-timeout" names op_timeout too. NULL if no option has the name. */
const struct config_option *config_find(const char *name);
void config_print_value(FILE *f, const struct config *cfg,
			const struct config_option *o);

#endif
