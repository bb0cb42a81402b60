/* SPDX-License-Identifier: BSD-2-Clause */
/* Where the options' values come from: the INI file (in [rmad], each
 * key once), the environment (RMAD_SOCKET) and the flags, in that order,
 * then the checks; --help, --version and --check-config. A reload goes
 * through the same steps on the same argv. */
#include "config_option.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct config_ini {
	struct config *cfg;
	bool seen[CONFIG_N_OPTIONS]; /* given once already in this file */
	char err[256];
};

static int
config_ini_handler(void *user, const char *section, const char *name,
		   const char *value)
{
	struct config_ini *ci = user;
	const struct config_option *o;

	/* inih gives the section: "" before the first header */
	if (section[0] == '\0') {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "'%s' before any section (options go in "
				 "[rmad])",
				 name);
		return 0;
	}
	if (strcmp(section, "rmad") != 0) {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "unknown section [%s] (options go in [rmad])",
				 section);
		return 0;
	}
	o = config_find(name);
	if (o != NULL && o->flag_only) {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "'%s' is a command-line flag only", name);
		return 0;
	}
	/* The last of two would win unseen: refuse the second. inih also
	 * calls again for an indented line (a continuation). */
	if (o != NULL && ci->seen[o - config_options]) {
		if (ci->err[0] == '\0')
			snprintf(ci->err, sizeof(ci->err),
				 "'%s' given twice (or continued on an "
				 "indented line): keep one",
				 name);
		return 0;
	}
	if (o != NULL)
		ci->seen[o - config_options] = true;
	if (config_set(ci->cfg, name, value,
		       ci->err[0] == '\0' ? ci->err : NULL,
		       sizeof(ci->err)) < 0)
		return 0;
	return 1;
}

int
config_load_file(struct config *cfg, const char *path, char *err,
		 size_t err_len)
{
	struct config_ini ci = {.cfg = cfg};
	struct stat st;
	FILE *f;
	int line;

	f = fopen(path, "re");
	if (f == NULL)
		return config_error(err, err_len,
				    "cannot open config file %s: %s", path,
				    strerror(errno));
	/* a directory opens and reads as empty: it would run on defaults */
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return config_error(err, err_len,
				    "config file %s is a directory: --config "
				    "takes the file (e.g. %s/rmad.conf)",
				    path, path);
	}
	line = ini_parse_file(f, config_ini_handler, &ci);
	fclose(f);
	if (line != 0)
		return config_error(err, err_len, "%s:%d: %s", path, line,
				    ci.err[0] ? ci.err : "syntax error");
	return 0;
}

/* --check-config: what the options turn into on this host, and what the
 * daemon would warn about at start. */
static void
config_print_resolved(FILE *out, FILE *warn, const struct config *cfg)
{
	char buf[512], err[256];

	if (strcmp(cfg->net_devices, "auto") == 0) {
		if (netdev_resolve(cfg, buf, sizeof(buf), err, sizeof(err)) ==
		    0)
			fprintf(out, "# net_devices = auto: %s\n", buf);
		else
			fprintf(warn, "rmad: warning: %s\n", err);
	}
	if (cfg->peer_key_set)
		fprintf(out, "# peer key: read from %s\n", cfg->peer_key_file);
	if (config_check_rma_unchecked(cfg, buf, sizeof(buf)))
		fprintf(warn, "rmad: warning: %s (rma_protocol_unchecked)\n",
			buf);
}

static void
config_usage(FILE *f)
{
	struct config def;

	config_defaults(&def);
	fprintf(f, "usage: rmad [--config FILE] [--check-config] [options]\n\n"
		   "Every option is also a key of the config file's [rmad] "
		   "section\n(with _ for -); flags override the file.\n\n");
	for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
		char flag[64];
		const char *p;
		size_t k = 0;
		for (p = config_options[i].name; *p && k < sizeof(flag) - 1;
		     p++)
			flag[k++] = *p == '_' ? '-' : *p;
		flag[k] = '\0';
		fprintf(f, "  --%-18s %s", flag, config_options[i].help);
		if (!config_options[i].flag_only) {
			fprintf(f, " [");
			config_print_value(f, &def, &config_options[i]);
			fprintf(f, "]");
		}
		/* docs_complete.sh holds README and rmad(8) to this */
		if (config_options[i].reload)
			fprintf(f, " (reloadable)");
		fprintf(f, "\n");
	}
	fprintf(f, "  --%-18s %s\n", "config FILE",
		"read options from FILE (INI)");
	fprintf(f, "  --%-18s %s\n", "check-config",
		"validate, print the effective configuration, exit");
	fprintf(f, "  --version, --help\n");
}

enum { OPT_CONFIG = 1000, OPT_CHECK, OPT_VERSION, OPT_HELP };

/* getopt's table: every option as a flag (with - for _), then the
 * actions. */
struct config_flags {
	struct option longopts[CONFIG_N_OPTIONS + 5];
	char names[CONFIG_N_OPTIONS][64];
};

static void
config_flags_init(struct config_flags *fl)
{
	size_t n = 0;

	for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
		size_t k = 0;
		for (const char *p = config_options[i].name;
		     *p && k < sizeof(fl->names[i]) - 1; p++)
			fl->names[i][k++] = *p == '_' ? '-' : *p;
		fl->names[i][k] = '\0';
		fl->longopts[n++] = (struct option){
		    fl->names[i],
		    config_options[i].type->value_optional ? optional_argument
							   : required_argument,
		    NULL, (int)i};
	}
	fl->longopts[n++] =
	    (struct option){"config", required_argument, NULL, OPT_CONFIG};
	fl->longopts[n++] =
	    (struct option){"check-config", no_argument, NULL, OPT_CHECK};
	fl->longopts[n++] =
	    (struct option){"version", no_argument, NULL, OPT_VERSION};
	fl->longopts[n++] =
	    (struct option){"help", no_argument, NULL, OPT_HELP};
	fl->longopts[n] = (struct option){NULL, 0, NULL, 0};
}

/* The file, then the environment, then the flags, then the checks: what
 * a start does, and a reload again on the same argv (so flags keep
 * winning over the file). 0, or -1 / CONFIG_USAGE with err. lenient:
 * every error skipped, no checks (config_parse_lenient). */
static int
config_build(struct config *cfg, const struct config_flags *fl, int argc,
	     char **argv, const char *config_path, bool lenient, char *err,
	     size_t err_len)
{
	const char *env = getenv("RMAD_SOCKET");
	char why[512];
	int opt;

	if (config_path != NULL &&
	    config_load_file(cfg, config_path, err, err_len) < 0 && !lenient)
		return -1;
	if (env != NULL && env[0] != '\0')
		config_set(cfg, "socket", env, NULL, 0);
	optind = 0; /* glibc: start over */
	/* ":": a flag without its value is told apart from an unknown one */
	while ((opt = getopt_long(argc, argv, ":", fl->longopts, NULL)) != -1) {
		if (opt >= 0 && (size_t)opt < CONFIG_N_OPTIONS) {
			/* --rma-protocol-unchecked alone means yes */
			const char *value = optarg != NULL ? optarg : "yes";
			if (config_set(cfg, config_options[opt].name, value,
				       why, sizeof(why)) < 0 &&
			    !lenient) {
				/* the option as typed: dashes, not the
				 * config key's underscores */
				for (char *q = why; *q != '\0' && *q != ':';
				     q++)
					if (*q == '_')
						*q = '-';
				return config_error(err, err_len, "--%s", why);
			}
		} else if ((opt == '?' || opt == ':') && !lenient) {
			/* said here, not by getopt: at error priority; one
			 * line, not the 42 of --help */
			config_error(err, err_len,
				     opt == ':'
					 ? "option '%s' needs a value; "
					   "see rmad --help"
					 : "unknown option '%s'; see rmad "
					   "--help",
				     argv[optind - 1]);
			return CONFIG_USAGE;
		}
	}
	if (lenient)
		return 0;
	if (optind < argc) {
		config_error(err, err_len, "unexpected argument '%s'",
			     argv[optind]);
		return CONFIG_USAGE;
	}
	return config_check(cfg, err, err_len);
}

/* The first pass over argv: --config and the actions. */
static int
config_scan(const struct config_flags *fl, int argc, char **argv,
	    const char **config_path_p, bool *check_p)
{
	int opt;

	opterr = 0;
	optind = 0; /* glibc: start over */
	while ((opt = getopt_long(argc, argv, "", fl->longopts, NULL)) != -1) {
		if (opt == OPT_CONFIG)
			*config_path_p = optarg;
		else if (opt == OPT_CHECK)
			*check_p = true;
		else if (opt == OPT_VERSION || opt == OPT_HELP)
			return opt;
	}
	return 0;
}

int
config_parse_args(struct config *cfg, int argc, char **argv, char *why,
		  size_t why_len)
{
	struct config_flags fl;
	const char *config_path = NULL;
	char err[512];
	bool check = false;
	int rc;

	config_flags_init(&fl);
	rc = config_scan(&fl, argc, argv, &config_path, &check);
	if (rc == OPT_VERSION) {
		printf("rmad %s\n", RMA_VERSION);
		return 1;
	} else if (rc == OPT_HELP) {
		config_usage(stdout);
		return 1;
	}
	opterr = 0; /* config_build says what getopt would */
	rc = config_build(cfg, &fl, argc, argv, config_path, false, err,
			  sizeof(err));
	if (rc < 0) {
		/* at error priority in the journal: a unit that fails to
		 * start says why under journalctl -p err */
		log_startup(LOG_LEVEL_ERROR, "%s", err);
		if (why != NULL)
			snprintf(why, why_len, "%s", err);
		return rc;
	}
	if (check) {
		config_print(stdout, cfg);
		config_print_resolved(stdout, stderr, cfg);
		return 1;
	}
	return 0;
}

int
config_reread(int argc, char **argv, struct config *next, char *err,
	      size_t err_len)
{
	struct config_flags fl;
	const char *config_path = NULL;
	bool check = false;

	config_flags_init(&fl);
	config_scan(&fl, argc, argv, &config_path, &check);
	if (config_path == NULL)
		return 1;
	config_defaults(next);
	/* argv was accepted at start: getopt has nothing to say */
	return config_build(next, &fl, argc, argv, config_path, false, err,
			    err_len) < 0
		   ? -1
		   : 0;
}

void
config_parse_lenient(struct config *cfg, int argc, char **argv)
{
	struct config_flags fl;
	const char *config_path = NULL;
	bool check = false;
	char err[512];
	int saved_opterr = opterr;

	config_flags_init(&fl);
	config_scan(&fl, argc, argv, &config_path, &check);
	config_defaults(cfg);
	opterr = 0; /* config_parse_args said what was wrong */
	config_build(cfg, &fl, argc, argv, config_path, true, err, sizeof(err));
	opterr = saved_opterr;
}
