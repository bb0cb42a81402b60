/* SPDX-License-Identifier: BSD-2-Clause */
/* Sizes as operators write them, for the daemon's config, rmactl and the
 * benchmarks alike. */
#ifndef RMA_SIZE_H
#define RMA_SIZE_H

#include <stdint.h>

/* Digits with an optional K, M, G or T suffix (powers of 1024; "KiB" and
 * "KB" too). Returns 0, or -1 when malformed or above 2^64 - 1. */
int size_parse(const char *s, uint64_t *out);

#endif
