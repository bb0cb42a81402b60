/* SPDX-License-Identifier: BSD-2-Clause */
/* Remote descriptor: the printable claim a client hands to other hosts,
 * "rma1:" followed by hex of {daemon id, region id, generation, length,
 * crc32}. It names a region; it grants nothing. The initiating daemon
 * resolves it with the owner before any byte moves.
 *
 * A read-only descriptor is "rmar:" and the same body, its crc32 taken
 * over a mode byte (1) and the body, so the prefix cannot be changed
 * alone. Its generation is the region's second secret, which its owner
 * serves gets only through: the mode is what the owner knows the secret
 * grants, not what the text says (anyone can recompute a crc32). */
#ifndef RMA_DESCRIPTOR_H
#define RMA_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

#define DAEMON_ID_SIZE 16
#define DESCRIPTOR_PREFIX "rma1:"
#define DESCRIPTOR_PREFIX_READ_ONLY "rmar:" /* as long as the other */
/* prefix + 2 hex digits per byte of the 44-byte body + NUL */
#define DESCRIPTOR_TEXT_SIZE (5 + 2 * (DAEMON_ID_SIZE + 3 * 8 + 4) + 1)

struct descriptor {
	uint8_t daemon_id[DAEMON_ID_SIZE];
	uint64_t region_id;
	uint64_t generation;
	uint64_t length;
	int read_only; /* "rmar:": made for gets only */
};

/* out must hold DESCRIPTOR_TEXT_SIZE bytes. */
void descriptor_format(const struct descriptor *d, char *out);

/* Accepts surrounding whitespace. Returns 0, or -1 when the text is not a
 * well-formed descriptor of this version with a matching checksum. */
int descriptor_parse(const char *text, size_t len, struct descriptor *d);

uint32_t descriptor_crc32(const uint8_t *p, size_t n);

/* Hex for daemon ids in status and logs; out holds 2 * n + 1 bytes. */
void descriptor_hex(const uint8_t *p, size_t n, char *out);
/* The n bytes that 2 * n hex digits of text (either case) say, in out;
 * -1 if text has fewer or another character among them. */
int descriptor_unhex(const char *text, size_t n, uint8_t *out);

#endif
