/* SPDX-License-Identifier: BSD-2-Clause */
/* Atomic operations on a word of region memory, with the CPU's atomic
 * instructions: atomic with respect to each other, whichever initiator
 * asked, and to the owning process's own __atomic operations on its
 * mapping of the same pages. */
#ifndef RMAD_ATOMIC_H
#define RMAD_ATOMIC_H

#include <stdint.h>

#include "rma.pb-c.h"

/* Whether (op, width) names an operation: width 4 or 8, op known. */
int atomic_valid(Rma__V1__AtomicOp op, uint64_t width);

/* Whether [offset, offset + width) is an aligned word inside length bytes
 * (regions start page-aligned, so the offset's alignment is the word's). */
int atomic_fits(uint64_t offset, uint64_t width, uint64_t length);

/* Applies op to the word at addr (checked with atomic_valid and
 * atomic_fits) and returns its old value, zero-extended for width 4. */
uint64_t atomic_apply(void *addr, Rma__V1__AtomicOp op, uint64_t width,
		      uint64_t operand, uint64_t compare);

#endif
