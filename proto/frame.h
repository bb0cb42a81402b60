/* SPDX-License-Identifier: BSD-2-Clause */
/* Framing shared by daemon and client: a 4-byte big-endian length, then one
 * protobuf message. The reader never trusts a declared length past its
 * maximum and never allocates more than one frame's worth. */
#ifndef RMA_FRAME_H
#define RMA_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define FRAME_HEADER_SIZE 4
#define FRAME_MAX_DEFAULT (1u << 20)
/* Hello.protocol_version; bumped on any incompatible change. */
#define RMA_PROTOCOL_VERSION 2

struct frame_reader {
	uint8_t *buf;
	size_t start; /* first unconsumed byte */
	size_t end;   /* one past the last received byte */
	size_t cap;
	uint32_t max_frame;
};

enum frame_result {
	FRAME_MORE = 0,	     /* need more bytes */
	FRAME_READY = 1,     /* a whole frame is available */
	FRAME_OVERSIZE = -1, /* declared length above the maximum */
	FRAME_NO_MEMORY = -2,
};

int frame_reader_init(struct frame_reader *r, uint32_t max_frame);
void frame_reader_cleanup(struct frame_reader *r);

/* Room to receive into: at least one byte, more when a frame is pending. */
int frame_reader_space(struct frame_reader *r, uint8_t **p, size_t *avail);
void frame_reader_commit(struct frame_reader *r, size_t n);

/* Next whole frame: the payload stays valid until the next reader call. */
int frame_reader_next(struct frame_reader *r, const uint8_t **payload,
		      size_t *len);

/* Bytes buffered but not yet returned as frames. */
size_t frame_reader_pending(const struct frame_reader *r);

size_t frame_packed_size(const ProtobufCMessage *msg);
/* Writes header and message to out, which holds frame_packed_size bytes. */
void frame_pack(const ProtobufCMessage *msg, uint8_t *out);

#endif
