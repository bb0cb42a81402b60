/* SPDX-License-Identifier: BSD-2-Clause */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#define FRAME_READER_INITIAL (64 * 1024)

int
frame_reader_init(struct frame_reader *r, uint32_t max_frame)
{
	memset(r, 0, sizeof(*r));
	r->max_frame = max_frame ? max_frame : FRAME_MAX_DEFAULT;
	return 0;
}

void
frame_reader_cleanup(struct frame_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

static uint32_t
frame_get_length(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int
frame_reader_reserve(struct frame_reader *r, size_t need)
{
	size_t cap;
	uint8_t *buf;

	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->cap - r->end >= need)
		return 0;
	cap = r->cap ? r->cap : FRAME_READER_INITIAL;
	while (cap - r->end < need)
		cap *= 2;
	buf = realloc(r->buf, cap);
	if (buf == NULL)
		return FRAME_NO_MEMORY;
	r->buf = buf;
	r->cap = cap;
	return 0;
}

int
frame_reader_space(struct frame_reader *r, uint8_t **p, size_t *avail)
{
	size_t pending = r->end - r->start;
	size_t need = 1;

	/* A partial frame whose length is known: make room for all of it, so
	 * one receive can complete it. The length was checked by _next. */
	if (pending >= FRAME_HEADER_SIZE) {
		size_t whole = FRAME_HEADER_SIZE +
			       (size_t)frame_get_length(r->buf + r->start);
		if (whole > r->max_frame + (size_t)FRAME_HEADER_SIZE)
			return FRAME_OVERSIZE;
		need = whole - pending;
	}
	if (r->cap - r->end < need || r->start == r->end ||
	    r->cap - r->end < FRAME_READER_INITIAL / 4) {
		int rc = frame_reader_reserve(r, need);
		if (rc < 0)
			return rc;
	}
	*p = r->buf + r->end;
	*avail = r->cap - r->end;
	return 0;
}

void
frame_reader_commit(struct frame_reader *r, size_t n)
{
	r->end += n;
}

int
frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *len)
{
	size_t pending = r->end - r->start;
	uint32_t n;

	if (pending < FRAME_HEADER_SIZE)
		return FRAME_MORE;
	n = frame_get_length(r->buf + r->start);
	if (n > r->max_frame)
		return FRAME_OVERSIZE;
	if (pending - FRAME_HEADER_SIZE < n)
		return FRAME_MORE;
	*payload = r->buf + r->start + FRAME_HEADER_SIZE;
	*len = n;
	r->start += FRAME_HEADER_SIZE + n;
	if (r->start == r->end)
		r->start = r->end = 0;
	return FRAME_READY;
}

size_t
frame_reader_pending(const struct frame_reader *r)
{
	return r->end - r->start;
}

size_t
frame_packed_size(const ProtobufCMessage *msg)
{
	return FRAME_HEADER_SIZE + protobuf_c_message_get_packed_size(msg);
}

void
frame_pack(const ProtobufCMessage *msg, uint8_t *out)
{
	size_t n = protobuf_c_message_pack(msg, out + FRAME_HEADER_SIZE);

	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
}
