/*
 * u64map.c: see u64map.h. The hash is a 64-bit multiplicative mix (the
 * finaliser of splitmix64), good enough for addresses that share low bits.
 */
#include "u64map.h"

#include <stdlib.h>

static inline size_t slot_of(uint64_t k, size_t mask)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ULL;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebULL;
	k ^= k >> 31;
	return (size_t)k & mask;
}

void u64map_init(struct u64map *m)
{
	m->keys = m->vals = NULL;
	m->cap = m->count = 0;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	u64map_init(m);
}

static int grow(struct u64map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	uint64_t *nk = malloc(ncap * sizeof *nk), *nv = malloc(ncap * sizeof *nv);
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	for (size_t i = 0; i < ncap; i++)
		nk[i] = U64MAP_EMPTY;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] == U64MAP_EMPTY)
			continue;
		size_t j = slot_of(m->keys[i], ncap - 1);
		while (nk[j] != U64MAP_EMPTY)
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	/* keep the load under 1/2: probes stay short */
	if ((m->count + 1) * 2 > m->cap && grow(m) < 0)
		return -1;
	size_t mask = m->cap - 1, i = slot_of(key, mask);
	while (m->keys[i] != U64MAP_EMPTY) {
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
		i = (i + 1) & mask;
	}
	m->keys[i] = key;
	m->vals[i] = val;
	m->count++;
	return 0;
}

int u64map_get(const struct u64map *m, uint64_t key, uint64_t *val)
{
	if (!m->cap)
		return 0;
	size_t mask = m->cap - 1, i = slot_of(key, mask);
	while (m->keys[i] != U64MAP_EMPTY) {
		if (m->keys[i] == key) {
			*val = m->vals[i];
			return 1;
		}
		i = (i + 1) & mask;
	}
	return 0;
}

int u64map_del(struct u64map *m, uint64_t key, uint64_t *val)
{
	if (!m->cap)
		return 0;
	size_t mask = m->cap - 1, i = slot_of(key, mask);
	while (m->keys[i] != key) {
		if (m->keys[i] == U64MAP_EMPTY)
			return 0;
		i = (i + 1) & mask;
	}
	if (val)
		*val = m->vals[i];
	/* backward shift: pull later entries of the cluster into the hole when
	 * their home slot is not between the hole and them */
	size_t hole = i, j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (m->keys[j] == U64MAP_EMPTY)
			break;
		size_t home = slot_of(m->keys[j], mask);
		int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
		if (movable) {
			m->keys[hole] = m->keys[j];
			m->vals[hole] = m->vals[j];
			hole = j;
		}
	}
	m->keys[hole] = U64MAP_EMPTY;
	m->count--;
	return 1;
}
