/* SPDX-License-Identifier: BSD-2-Clause */
#include "descriptor.h"

#include <ctype.h>
#include <string.h>

#define BODY_SIZE (DAEMON_ID_SIZE + 3 * 8)

uint32_t
descriptor_crc32(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

static void
put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t
get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

void
descriptor_hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
descriptor_unhex(const char *text, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		/* a NUL is no digit: text is never read past it */
		int hi = hex_value(text[2 * i]);
		int lo = hi < 0 ? -1 : hex_value(text[2 * i + 1]);

		if (lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* A full descriptor's checksum is over its body alone (as before there
 * were read-only ones); a read-only one's over a mode byte and the body. */
static uint32_t
descriptor_checksum(const uint8_t *body, int read_only)
{
	uint8_t moded[1 + BODY_SIZE];

	if (!read_only)
		return descriptor_crc32(body, BODY_SIZE);
	moded[0] = 1;
	memcpy(moded + 1, body, BODY_SIZE);
	return descriptor_crc32(moded, sizeof(moded));
}

void
descriptor_format(const struct descriptor *d, char *out)
{
	const char *prefix =
	    d->read_only ? DESCRIPTOR_PREFIX_READ_ONLY : DESCRIPTOR_PREFIX;
	uint8_t raw[BODY_SIZE + 4];
	uint32_t crc;

	memcpy(raw, d->daemon_id, DAEMON_ID_SIZE);
	put_u64(raw + DAEMON_ID_SIZE, d->region_id);
	put_u64(raw + DAEMON_ID_SIZE + 8, d->generation);
	put_u64(raw + DAEMON_ID_SIZE + 16, d->length);
	crc = descriptor_checksum(raw, d->read_only);
	for (int i = 0; i < 4; i++)
		raw[BODY_SIZE + i] = (uint8_t)(crc >> (24 - 8 * i));
	memcpy(out, prefix, strlen(prefix));
	descriptor_hex(raw, sizeof(raw), out + strlen(prefix));
}

int
descriptor_parse(const char *text, size_t len, struct descriptor *d)
{
	const size_t prefix = strlen(DESCRIPTOR_PREFIX);
	uint8_t raw[BODY_SIZE + 4];
	uint32_t crc;
	int read_only;

	while (len > 0 && isspace((unsigned char)text[0])) {
		text++;
		len--;
	}
	while (len > 0 && isspace((unsigned char)text[len - 1]))
		len--;
	if (len != prefix + 2 * sizeof(raw))
		return -1;
	if (memcmp(text, DESCRIPTOR_PREFIX, prefix) == 0)
		read_only = 0;
	else if (memcmp(text, DESCRIPTOR_PREFIX_READ_ONLY, prefix) == 0)
		read_only = 1;
	else
		return -1;
	text += prefix;
	if (descriptor_unhex(text, sizeof(raw), raw) < 0)
		return -1;
	crc = (uint32_t)raw[BODY_SIZE] << 24 |
	      (uint32_t)raw[BODY_SIZE + 1] << 16 |
	      (uint32_t)raw[BODY_SIZE + 2] << 8 | raw[BODY_SIZE + 3];
	if (crc != descriptor_checksum(raw, read_only))
		return -1;
	memset(d, 0, sizeof(*d)); /* padding too: callers compare whole */
	d->read_only = read_only;
	memcpy(d->daemon_id, raw, DAEMON_ID_SIZE);
	d->region_id = get_u64(raw + DAEMON_ID_SIZE);
	d->generation = get_u64(raw + DAEMON_ID_SIZE + 8);
	d->length = get_u64(raw + DAEMON_ID_SIZE + 16);
	return 0;
}
