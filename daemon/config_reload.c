/* SPDX-License-Identifier: BSD-2-Clause */
/* SIGHUP: the configuration read again, and what changed told.
 *
 * A reload runs the start's parsing again on the same argv (defaults,
 * the --config file, the environment, the flags, the checks), so flags
 * keep winning over the file as they did at start, and a file that would
 * not start the daemon is refused as a whole: nothing of it applies.
 * What a running daemon can take (config.c marks those options) goes
 * into a new configuration that replaces the one every worker reads,
 * inside one world stop (daemon.c); what shaped the daemon at start
 * (socket, listener, UCX, threads) keeps its old value until a restart.
 * Old and new are compared as given, not as learned at start (the port
 * bound for listen = HOST:0, UCX_TLS over transports). The cluster key
 * is compared but never printed. */
#include "config.h"

#include <string.h>

struct config_reload_tally {
	unsigned applied, kept;
};

static const char *
config_reload_shown(const char *value)
{
	return value[0] != '\0' ? value : "(empty)";
}

static void
config_reload_line(const char *name, bool reloadable, const char *old,
		   const char *new, void *arg)
{
	struct config_reload_tally *t = arg;

	if (reloadable) {
		log_info("config_reload: %s: %s -> %s", name,
			 config_reload_shown(old), config_reload_shown(new));
		t->applied++;
	} else {
		log_warn("config_reload: %s: %s -> %s needs a restart; "
			 "keeping %s",
			 name, config_reload_shown(old),
			 config_reload_shown(new), config_reload_shown(old));
		t->kept++;
	}
}

unsigned
config_reload_report(const struct config *old, const struct config *next)
{
	struct config_reload_tally t = {0, 0};

	config_diff(old, next, config_reload_line, &t);
	/* the same file may hold another key: say so, never what it is */
	if (old->peer_key_set != next->peer_key_set ||
	    memcmp(old->peer_key, next->peer_key, sizeof(old->peer_key)) != 0) {
		if (!next->peer_key_set)
			log_info("config_reload: peer key: removed");
		else
			log_info("config_reload: peer key: %s (from %s)",
				 old->peer_key_set ? "replaced" : "set",
				 next->peer_key_file);
		t.applied++;
	}
	if (t.applied + t.kept == 0)
		log_info("config_reload: no changes");
	else
		log_info("config_reload: %u changes applied, %u need a restart",
			 t.applied, t.kept);
	return t.kept;
}
