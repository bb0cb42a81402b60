/* SPDX-License-Identifier: BSD-2-Clause */
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

void
idmap_init(struct idmap *m)
{
	memset(m, 0, sizeof(*m));
}

void
idmap_cleanup(struct idmap *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static int
idmap_resize(struct idmap *m, size_t cap)
{
	struct idmap_slot *old = m->slots;
	size_t old_cap = m->cap;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (m->slots == NULL) {
		m->slots = old;
		return -1;
	}
	m->cap = cap;
	m->count = m->used = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].key != 0 && old[i].key != IDMAP_REMOVED)
			idmap_put(m, old[i].key, old[i].value);
	}
	free(old);
	return 0;
}

int
idmap_put(struct idmap *m, uint64_t key, void *value)
{
	size_t i;

	if (key == 0 || key == IDMAP_REMOVED)
		return -1;
	if ((m->used + 1) * 4 >= m->cap * 3) {
		size_t cap = m->cap ? m->cap : 16;
		while ((m->count + 1) * 2 >= cap)
			cap *= 2;
		if (idmap_resize(m, cap) < 0)
			return -1;
	}
	for (i = idmap_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key) {
			m->slots[i].value = value;
			return 0;
		}
		if (m->slots[i].key == 0)
			break;
	}
	m->slots[i].key = key;
	m->slots[i].value = value;
	m->count++;
	m->used++;
	return 0;
}

void *
idmap_remove(struct idmap *m, uint64_t key)
{
	if (m->cap == 0 || key == 0 || key == IDMAP_REMOVED)
		return NULL;
	for (size_t i = idmap_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key) {
			void *value = m->slots[i].value;
			m->slots[i].key = IDMAP_REMOVED;
			m->slots[i].value = NULL;
			m->count--;
			return value;
		}
		if (m->slots[i].key == 0)
			return NULL;
	}
}

int
idmap_next(const struct idmap *m, size_t *pos, void **value_p)
{
	for (; *pos < m->cap; (*pos)++) {
		uint64_t key = m->slots[*pos].key;
		if (key != 0 && key != IDMAP_REMOVED) {
			*value_p = m->slots[(*pos)++].value;
			return 1;
		}
	}
	return 0;
}
