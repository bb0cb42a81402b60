/* SPDX-License-Identifier: BSD-2-Clause */
/* Operations and completions as fixed-layout records: Submit.packed and
 * Completions.packed carry arrays of them, so the common case costs no
 * protobuf decoding per operation (protobuf-c spent two thirds of the
 * daemon's time on 8-byte operations). Little-endian, whatever the host.
 *
 * Operation, 64 bytes: op_id, region_id, offset, remote_id,
 * remote_offset, length (8 each), kind, flags, peer_id, reserved (4 each;
 * reserved is 0). An ATOMIC operation has no local region and no peer:
 * its record carries operand at 8, compare at 16 and atomic_op at 56
 * instead (the rest as above, length = the word's width). A PUT with
 * OP_FLAG_NOTIFY carries notify_value at 56 (peer id and reserved).
 * Completion, 24 bytes: op_id, bytes (8 each), status
 * (wire Status, 4), reserved (4, 0). A completion with a detail text goes
 * or a value (an atomic's old value other than 0) goes as a Completion
 * message instead.
 * Notification, 40 bytes: region_id, offset, length, value (8 each),
 * sender (4: an index into Notifications.daemon_ids), reserved (4, 0). */
#ifndef RMA_OPREC_H
#define RMA_OPREC_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

#include "rma.pb-c.h"

#define OPREC_SIZE 64
#define COMPREC_SIZE 24
#define NOTIFREC_SIZE 40

/* RMA__V1__OP__INIT, one store a field: the initialiser (and
 * rma__v1__op__init's copy of it) compiled to rep stos or rep movs, whose
 * start-up was 3-5% of an 8-byte put's time in librma and in rmad. The
 * assertion is there so that a new field of Op is not left out. */
_Static_assert(sizeof(void *) != 8 || sizeof(Rma__V1__Op) == 120,
	       "a new field of Op: set it in oprec_op_init");

static inline void
oprec_op_init(Rma__V1__Op *op)
{
	op->base.descriptor = &rma__v1__op__descriptor;
	op->base.n_unknown_fields = 0;
	op->base.unknown_fields = NULL;
	op->op_id = 0;
	op->kind = RMA__V1__OP_KIND__PUT;
	op->region_id = 0;
	op->offset = 0;
	op->remote_id = 0;
	op->remote_offset = 0;
	op->length = 0;
	op->flags = 0;
	op->peer_id = 0;
	op->atomic_op = RMA__V1__ATOMIC_OP__ATOMIC_ADD;
	op->operand = 0;
	op->compare = 0;
	op->notify_value = 0;
}

void oprec_encode(uint8_t *p, const Rma__V1__Op *op);

static inline void
oprec_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	__builtin_memcpy(p, &v, sizeof(v));
}

static inline void
oprec_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	__builtin_memcpy(p, &v, sizeof(v));
}

/* oprec_encode, numbered op_id whatever op->op_id says (librma numbers
 * an operation as it submits it, without a copy of the message). Inline:
 * librma encodes every operation, and the caller's op is mostly
 * constants the compiler can fold. */
static inline void
oprec_encode_id(uint8_t *p, const Rma__V1__Op *op, uint64_t op_id)
{
	int atomic = op->kind == RMA__V1__OP_KIND__ATOMIC;

	oprec_put64(p, op_id);
	oprec_put64(p + 8, atomic ? op->operand : op->region_id);
	oprec_put64(p + 16, atomic ? op->compare : op->offset);
	oprec_put64(p + 24, op->remote_id);
	oprec_put64(p + 32, op->remote_offset);
	oprec_put64(p + 40, op->length);
	oprec_put32(p + 48, (uint32_t)op->kind);
	oprec_put32(p + 52, op->flags);
	if (op->kind == RMA__V1__OP_KIND__PUT &&
	    (op->flags & RMA__V1__OP_FLAG__OP_FLAG_NOTIFY)) {
		oprec_put64(p + 56, op->notify_value);
		return;
	}
	oprec_put32(p + 56, atomic ? (uint32_t)op->atomic_op : op->peer_id);
	oprec_put32(p + 60, 0);
}
/* Fills op (initialised here); -1 if reserved bytes are not 0. */
int oprec_decode(const uint8_t *p, Rma__V1__Op *op);

struct comprec {
	uint64_t op_id;
	uint64_t bytes;
	int32_t status; /* Rma__V1__Status */
};

void comprec_encode(uint8_t *p, const struct comprec *c);
void comprec_decode(const uint8_t *p, struct comprec *c);

struct notifrec {
	uint64_t region_id;
	uint64_t offset;
	uint64_t length;
	uint64_t value;
	uint32_t sender; /* index into Notifications.daemon_ids */
};

void notifrec_encode(uint8_t *p, const struct notifrec *n);
/* -1 if reserved bytes are not 0. */
int notifrec_decode(const uint8_t *p, struct notifrec *n);

#endif
