/* SPDX-License-Identifier: BSD-2-Clause */
/* Atomics on region words: see atomic.h. Sequentially consistent, the
 * strongest order, so a lock built on CSWAP needs no further fence around
 * its critical section, on the target or in the owner. */
#include "atomic.h"
#include "bounds.h"

int
atomic_valid(Rma__V1__AtomicOp op, uint64_t width)
{
	if (width != 4 && width != 8)
		return 0;
	return (unsigned)op <= RMA__V1__ATOMIC_OP__ATOMIC_FETCH_XOR;
}

int
atomic_fits(uint64_t offset, uint64_t width, uint64_t length)
{
	return width != 0 && offset % width == 0 &&
	       bounds_within(offset, width, length);
}

#define ATOMIC_APPLY(T, w, op, operand, compare)                               \
	do {                                                                   \
		T v = (T)(operand), c = (T)(compare);                          \
		switch (op) {                                                  \
		case RMA__V1__ATOMIC_OP__ATOMIC_ADD:                           \
		case RMA__V1__ATOMIC_OP__ATOMIC_FETCH_ADD:                     \
			return __atomic_fetch_add(w, v, __ATOMIC_SEQ_CST);     \
		case RMA__V1__ATOMIC_OP__ATOMIC_SWAP:                          \
			return __atomic_exchange_n(w, v, __ATOMIC_SEQ_CST);    \
		case RMA__V1__ATOMIC_OP__ATOMIC_CSWAP:                         \
			/* c becomes the old value either way */               \
			__atomic_compare_exchange_n(                           \
			    w, &c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);  \
			return c;                                              \
		case RMA__V1__ATOMIC_OP__ATOMIC_AND:                           \
		case RMA__V1__ATOMIC_OP__ATOMIC_FETCH_AND:                     \
			return __atomic_fetch_and(w, v, __ATOMIC_SEQ_CST);     \
		case RMA__V1__ATOMIC_OP__ATOMIC_OR:                            \
		case RMA__V1__ATOMIC_OP__ATOMIC_FETCH_OR:                      \
			return __atomic_fetch_or(w, v, __ATOMIC_SEQ_CST);      \
		case RMA__V1__ATOMIC_OP__ATOMIC_XOR:                           \
		case RMA__V1__ATOMIC_OP__ATOMIC_FETCH_XOR:                     \
			return __atomic_fetch_xor(w, v, __ATOMIC_SEQ_CST);     \
		default:                                                       \
			return 0;                                              \
		}                                                              \
	} while (0)

static uint64_t
atomic_apply32(uint32_t *w, Rma__V1__AtomicOp op, uint64_t operand,
	       uint64_t compare)
{
	ATOMIC_APPLY(uint32_t, w, op, operand, compare);
}

static uint64_t
atomic_apply64(uint64_t *w, Rma__V1__AtomicOp op, uint64_t operand,
	       uint64_t compare)
{
	ATOMIC_APPLY(uint64_t, w, op, operand, compare);
}

uint64_t
atomic_apply(void *addr, Rma__V1__AtomicOp op, uint64_t width, uint64_t operand,
	     uint64_t compare)
{
	if (width == 4)
		return atomic_apply32(addr, op, operand, compare);
	return atomic_apply64(addr, op, operand, compare);
}
