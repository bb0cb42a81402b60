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

#define IDMAP_REMOVED UINT64_MAX

void idmap_init(struct idmap *m);
void idmap_cleanup(struct idmap *m);

static inline size_t
idmap_hash(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

/* Inline: three lookups an operation (its region, its remote, the
 * target region of a same-daemon copy), where the call was most of the
 * cost. */
static inline void *
idmap_get(const struct idmap *m, uint64_t key)
{
	if (m->cap == 0 || key == 0 || key == IDMAP_REMOVED)
		return NULL;
	for (size_t i = idmap_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return m->slots[i].value;
		if (m->slots[i].key == 0)
			return NULL;
	}
}

int idmap_put(struct idmap *m, uint64_t key, void *value);
void *idmap_remove(struct idmap *m, uint64_t key);

/* Iterate: for (size_t i = 0; idmap_next(m, &i, &v);) */
int idmap_next(const struct idmap *m, size_t *pos, void **value_p);

#endif
