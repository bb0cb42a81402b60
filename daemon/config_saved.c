/* SPDX-License-Identifier: BSD-2-Clause */
/* The last configuration that worked, kept where the regions are kept:
 * under systemd in the fd store beside the state record (fdstore.c), as
 * a sealed memfd named store-config-<n>; for a take-over, sent by the
 * predecessor with its regions (handover.c). A start whose own
 * configuration is refused (a typo, an address not on this host, a
 * device missing, a key file unreadable) while it has regions to keep
 * runs on this one instead of exiting and losing them (main.c).
 *
 * The encoding is the configuration file as --check-config prints it
 * (text, so an rmad of another version reads it as it reads a file) and
 * the cluster key: a header, then the text. */
#include "daemon.h"
#include "config_saved.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_SAVED_MAGIC 0x524d4143u /* "RMAC" */
#define CONFIG_SAVED_VERSION 1u
#define CONFIG_SAVED_NAME SDNOTIFY_STORE_PREFIX "config-"
/* Far above any configuration's text (about 3 KiB). */
#define CONFIG_SAVED_MAX (64u * 1024)

struct config_saved_head {
	uint32_t magic, version;
	uint32_t text_len;
	uint32_t key_set;
	uint8_t key[CONFIG_PEER_KEY_SIZE];
};

int
config_saved_encode(const struct config *cfg, struct config_saved *out)
{
	struct config_saved_head head = {.magic = CONFIG_SAVED_MAGIC,
					 .version = CONFIG_SAVED_VERSION};
	struct config copy = *cfg;
	char *text = NULL;
	size_t text_len = 0;
	FILE *f;

	copy.take_over = false;
	f = open_memstream(&text, &text_len);
	if (f == NULL)
		return -1;
	config_print(f, &copy);
	if (fclose(f) != 0 || text_len > CONFIG_SAVED_MAX) {
		free(text);
		return -1;
	}
	head.text_len = (uint32_t)text_len;
	head.key_set = cfg->peer_key_set;
	memcpy(head.key, cfg->peer_key, sizeof(head.key));
	out->len = sizeof(head) + text_len;
	out->blob = malloc(out->len);
	if (out->blob == NULL) {
		free(text);
		return -1;
	}
	memcpy(out->blob, &head, sizeof(head));
	memcpy(out->blob + sizeof(head), text, text_len);
	free(text);
	return 0;
}

/* One "name = value" line of the text. An option this rmad does not know
 * (a newer one saved it) is skipped; a value it refuses is an error. */
static int
config_saved_line(struct config *cfg, char *line, char *err, size_t err_len)
{
	char *eq = strstr(line, " = ");

	if (line[0] == '\0' || line[0] == '[' || line[0] == '#')
		return 0;
	if (eq == NULL)
		return config_error(err, err_len, "saved configuration: '%s'",
				    line);
	*eq = '\0';
	if (config_set(cfg, line, eq + 3, err, err_len) == 0)
		return 0;
	if (strncmp(err, "unknown option", 14) == 0) {
		log_warn("config_saved_decode: %s: skipped", err);
		return 0;
	}
	return -1;
}

int
config_saved_decode(const uint8_t *blob, size_t len, struct config *cfg,
		    char *err, size_t err_len)
{
	struct config_saved_head head;
	struct config next;
	char *text, *line, *save;
	int rc = 0;

	if (len < sizeof(head))
		return config_error(err, err_len,
				    "saved configuration: cut short");
	memcpy(&head, blob, sizeof(head));
	if (head.magic != CONFIG_SAVED_MAGIC ||
	    head.version != CONFIG_SAVED_VERSION ||
	    head.text_len != len - sizeof(head))
		return config_error(err, err_len,
				    "saved configuration: not version %u of "
				    "rmad's",
				    CONFIG_SAVED_VERSION);
	text = strndup((const char *)blob + sizeof(head), head.text_len);
	if (text == NULL)
		return config_error(err, err_len, "out of memory");
	config_defaults(&next);
	for (line = strtok_r(text, "\n", &save); line != NULL && rc == 0;
	     line = strtok_r(NULL, "\n", &save))
		rc = config_saved_line(&next, line, err, err_len);
	free(text);
	if (rc < 0)
		return -1;
	next.peer_key_set = head.key_set != 0;
	memcpy(next.peer_key, head.key, sizeof(next.peer_key));
	next.take_over = cfg->take_over;
	next.ready_fd = cfg->ready_fd;
	*cfg = next;
	return 0;
}

static void
config_saved_name(uint64_t generation, char *out, size_t len)
{
	snprintf(out, len, CONFIG_SAVED_NAME "%" PRIu64, generation);
}

static void
config_saved_remove(uint64_t generation)
{
	char name[64];

	config_saved_name(generation, name, sizeof(name));
	fdstore_drop(name);
}

/* The whole memfd; -1 if it is not one of ours. */
static int
config_saved_read(int fd, struct config_saved *saved)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || st.st_size < 1 ||
	    (size_t)st.st_size > CONFIG_SAVED_MAX + 1024)
		return -1;
	saved->blob = malloc((size_t)st.st_size);
	if (saved->blob == NULL)
		return -1;
	saved->len = (size_t)st.st_size;
	if (pread(fd, saved->blob, saved->len, 0) != (ssize_t)saved->len) {
		free(saved->blob);
		saved->blob = NULL;
		return -1;
	}
	return 0;
}

void
config_saved_take(struct sdnotify_fds *passed, struct config_saved *saved)
{
	const size_t prefix = strlen(CONFIG_SAVED_NAME);
	uint64_t best = 0;
	int best_i = -1;

	memset(saved, 0, sizeof(*saved));
	for (size_t i = 0; i < passed->n; i++) {
		uint64_t g;
		char *end;

		if (passed->fds[i] < 0 ||
		    strncmp(passed->names[i], CONFIG_SAVED_NAME, prefix) != 0)
			continue;
		g = strtoull(passed->names[i] + prefix, &end, 10);
		if (*end == '\0' && g > best) {
			best = g;
			best_i = (int)i;
		}
	}
	for (size_t i = 0; i < passed->n; i++) {
		if (passed->fds[i] < 0 ||
		    strncmp(passed->names[i], CONFIG_SAVED_NAME, prefix) != 0)
			continue;
		if ((int)i == best_i &&
		    config_saved_read(passed->fds[i], saved) == 0)
			saved->generation = best;
		else
			fdstore_drop(passed->names[i]);
		close(passed->fds[i]);
		passed->fds[i] = -1;
	}
	if (saved->blob == NULL && best_i >= 0)
		log_error("config_saved_take: %s is unreadable: dropped",
			  passed->names[best_i]);
}

/* A memfd nobody can change any more holding blob. */
static int
config_saved_memfd(const struct config_saved *s)
{
	int fd = memfd_create("rmad-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (write(fd, s->blob, s->len) != (ssize_t)s->len ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) <
		0) {
		close(fd);
		return -1;
	}
	return fd;
}

void
config_saved_store(struct config_saved *saved, const struct config *cfg)
{
	struct config_saved next = {0};
	char name[64];
	int fd, r;

	if (config_saved_encode(cfg, &next) < 0) {
		log_error("config_saved_store: out of memory");
		return;
	}
	if (saved->blob != NULL && saved->generation != 0 &&
	    saved->len == next.len &&
	    memcmp(saved->blob, next.blob, next.len) == 0) {
		config_saved_free(&next);
		return;
	}
	next.generation = saved->generation + 1;
	/* the older one out first: with the store full of regions, one fd
	 * more would be dropped (and a crash in between only costs the
	 * fall-back of the start after it) */
	if (saved->generation != 0)
		config_saved_remove(saved->generation);
	saved->generation = 0;
	fd = config_saved_memfd(&next);
	if (fd < 0) {
		log_error("config_saved_store: memfd: %s", strerror(errno));
		config_saved_free(&next);
		return;
	}
	config_saved_name(next.generation, name, sizeof(name));
	r = fdstore_keep(name, fd);
	close(fd); /* systemd's copy is the one that counts */
	if (r < 0) {
		log_error("config_saved_store: systemd did not take %s: a "
			  "restart with a configuration it refuses would not "
			  "run on this one",
			  name);
		config_saved_free(&next);
		return;
	}
	config_saved_free(saved);
	*saved = next;
	log_info("config_saved_store: this configuration kept in systemd's "
		 "fd store as the last that worked (%s)",
		 name);
}

void
config_saved_free(struct config_saved *saved)
{
	free(saved->blob);
	saved->blob = NULL;
	saved->len = 0;
}
