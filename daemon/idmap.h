/* SPDX-License-Identifier: BSD-2-Clause */
/* Open-addressing map from nonzero 64-bit ids to pointers: region, remote
 * and peer tables look ids up on every operation. */
#ifndef RMAD_IDMAP_H
#define RMAD_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap_slot {
	uint64_t key; /* 0 = empty, UINT64_MAX = removed */
	void *value;
};

struct idmap {
	struct idmap_slot *slots;
	size_t cap; /* power of two */
	size_t count;
	size_t used; /* count + removed slots */
};

void idmap_init(struct idmap *m);
void idmap_cleanup(struct idmap *m);
void *idmap_get(const struct idmap *m, uint64_t key);
int idmap_put(struct idmap *m, uint64_t key, void *value);
void *idmap_remove(struct idmap *m, uint64_t key);

/* Iterate: for (size_t i = 0; idmap_next(m, &i, &v);) */
int idmap_next(const struct idmap *m, size_t *pos, void **value_p);

#endif
