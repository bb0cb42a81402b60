/* SPDX-License-Identifier: BSD-2-Clause */
/* Range checks used before any byte moves. */
#ifndef RMAD_BOUNDS_H
#define RMAD_BOUNDS_H

#include <stdbool.h>
#include <stdint.h>

/* [offset, offset + length) lies within a region of size bytes, without
 * overflow for any 64-bit inputs. */
static inline bool
bounds_within(uint64_t offset, uint64_t length, uint64_t size)
{
	return offset <= size && length <= size - offset;
}

#endif
