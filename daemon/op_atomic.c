/* SPDX-License-Identifier: BSD-2-Clause */
/* Atomics as the initiator: a remote word's add, swap, compare-and-swap,
 * and, or, xor, validated like a put, applied at once when the region is
 * this daemon's own, otherwise sent in the peer's batch (op_batch.c) and
 * applied by the owning daemon (atomic.c). */
#include "op_int.h"
#include "am.h"
#include "atomic.h"
#include "bounds.h"

#include <stdio.h>
#include <string.h>

/* An atomic on the same daemon: applied here, at once. */
static void
op_atomic_local(struct conn *c, const Rma__V1__Op *o,
		const struct resolved *res)
{
	struct region *target = op_local_target(c, o, res, true);
	uint64_t old;

	if (target == NULL)
		return;
	old = atomic_apply((char *)target->addr + o->remote_offset,
			   o->atomic_op, o->length, o->operand, o->compare);
	c->ops++;
	conn_complete_value(c, o->op_id, RMA__V1__STATUS__OK, o->length, old,
			    NULL);
}

/* Atomics travel in rmad's batches in both rma_protocol modes: the
 * target's CPU applies them to the region after its checks
 * (ucp_atomic_op_nbx over tcp is emulated by UCX on raw addresses, which
 * the target could not check; and batched, they are faster here than
 * UCX's own, see bench/compare). */
void
op_start_atomic(struct conn *c, const Rma__V1__Op *o, bool unparked)
{
	struct remote *rem;
	struct resolved *res;
	struct op *op;

	c->d->counters.ops_atomic++;
	if (!atomic_valid(o->atomic_op, o->length)) {
		op_fail(c, o, RMA__V1__STATUS__ERR_INVALID,
			"atomic operation %d on a word of %llu bytes: the "
			"width must be 4 or 8 and the operation known",
			(int)o->atomic_op, (unsigned long long)o->length);
		return;
	}
	rem = op_remote(c, o);
	if (rem == NULL)
		return;
	res = rem->res;
	if (o->remote_offset % o->length != 0) {
		op_fail(c, o, RMA__V1__STATUS__ERR_INVALID,
			"remote offset %llu is not aligned to the word's %llu "
			"bytes",
			(unsigned long long)o->remote_offset,
			(unsigned long long)o->length);
		return;
	}
	if (!atomic_fits(o->remote_offset, o->length, res->length)) {
		op_fail_remote_bounds(c, o, "word", res);
		return;
	}
	if (rem->peer == NULL) {
		op_atomic_local(c, o, res);
		return;
	}
	op = op_begin_remote(c, o, rem, unparked);
	if (op == NULL)
		return;
	op->atomic = (struct am_batch_atomic){
	    .op = (uint32_t)o->atomic_op,
	    .operand = o->operand,
	    .compare = o->compare,
	};
	op_batch_add(op, res, o->remote_offset);
	op_end_submit(op);
}
