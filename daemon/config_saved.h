/* SPDX-License-Identifier: BSD-2-Clause */
/* The last configuration that worked (config_saved.c). */
#ifndef RMAD_CONFIG_SAVED_H
#define RMAD_CONFIG_SAVED_H

#include <stddef.h>
#include <stdint.h>

struct config;
struct sdnotify_fds;

/* One saved configuration: its encoding, and under systemd the fd store
 * name it has there (store-config-<generation>). */
struct config_saved {
	uint8_t *blob; /* NULL: none */
	size_t len;
	uint64_t generation; /* 0: not in the store */
};

/* cfg as a saved configuration: every option of the file as text
 * (config_print), and the cluster key read from peer_key_file, so that a
 * key file gone unreadable since does not stop a fall-back. take_over
 * and the flag-only options are left out: they say how this process
 * starts, not what it runs on. 0, or -1 without memory. */
int config_saved_encode(const struct config *cfg, struct config_saved *out);
/* The configuration a blob holds, into cfg (its take_over and ready_fd
 * stay: this start's). 0, or -1 with err. */
int config_saved_decode(const uint8_t *blob, size_t len, struct config *cfg,
			char *err, size_t err_len);
/* The newest store-config-<n> systemd passed, out of passed (older ones
 * are closed and removed from the store). Nothing when there is none. */
void config_saved_take(struct sdnotify_fds *passed, struct config_saved *saved);
/* cfg into systemd's fd store as a sealed memfd, unless saved holds the
 * same already (the older one leaves the store first: one fd more
 * than FileDescriptorStoreMax= would be dropped). saved then describes
 * cfg's. */
void config_saved_store(struct config_saved *saved, const struct config *cfg);
void config_saved_free(struct config_saved *saved);

#endif
