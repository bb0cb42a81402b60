/* SPDX-License-Identifier: BSD-2-Clause */
/* Fixed-layout operation, completion and notification records: see
 * oprec.h. */
#include "oprec.h"

#include <endian.h>
#include <stdbool.h>
#include <string.h>

static uint64_t
get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t
get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

void
oprec_encode(uint8_t *p, const Rma__V1__Op *op)
{
	oprec_encode_id(p, op, op->op_id);
}

int
oprec_decode(const uint8_t *p, Rma__V1__Op *op)
{
	/* Read before op is written: p may alias op for all the compiler
	 * knows, so fields read between the init and the stores kept every
	 * zero of the init that a field overwrites (nine stores a
	 * record). */
	uint64_t op_id = get64(p), region_id = get64(p + 8),
		 offset = get64(p + 16), remote_id = get64(p + 24),
		 remote_offset = get64(p + 32), length = get64(p + 40);
	uint32_t kind = get32(p + 48), flags = get32(p + 52),
		 peer_id = get32(p + 56);

	oprec_op_init(op);
	op->op_id = op_id;
	op->region_id = region_id;
	op->offset = offset;
	op->remote_id = remote_id;
	op->remote_offset = remote_offset;
	op->length = length;
	op->kind = (Rma__V1__OpKind)kind;
	op->flags = flags;
	op->peer_id = peer_id;
	if (op->kind == RMA__V1__OP_KIND__PUT &&
	    (op->flags & RMA__V1__OP_FLAG__OP_FLAG_NOTIFY)) {
		/* a put has no peer id: the value takes its place */
		op->notify_value = get64(p + 56);
		op->peer_id = 0;
		return 0;
	}
	if (op->kind == RMA__V1__OP_KIND__ATOMIC) {
		/* no local region: the old value comes back by value */
		op->operand = op->region_id;
		op->compare = op->offset;
		op->atomic_op = (Rma__V1__AtomicOp)op->peer_id;
		op->region_id = op->offset = 0;
		op->peer_id = 0;
	}
	return get32(p + 60) == 0 ? 0 : -1;
}

void
comprec_encode(uint8_t *p, const struct comprec *c)
{
	oprec_put64(p, c->op_id);
	oprec_put64(p + 8, c->bytes);
	oprec_put32(p + 16, (uint32_t)c->status);
	oprec_put32(p + 20, 0);
}

void
comprec_decode(const uint8_t *p, struct comprec *c)
{
	c->op_id = get64(p);
	c->bytes = get64(p + 8);
	c->status = (int32_t)get32(p + 16);
}

void
notifrec_encode(uint8_t *p, const struct notifrec *n)
{
	oprec_put64(p, n->region_id);
	oprec_put64(p + 8, n->offset);
	oprec_put64(p + 16, n->length);
	oprec_put64(p + 24, n->value);
	oprec_put32(p + 32, n->sender);
	oprec_put32(p + 36, 0);
}

int
notifrec_decode(const uint8_t *p, struct notifrec *n)
{
	n->region_id = get64(p);
	n->offset = get64(p + 8);
	n->length = get64(p + 16);
	n->value = get64(p + 24);
	n->sender = get32(p + 32);
	return get32(p + 36) == 0 ? 0 : -1;
}
