/*
 * u64map.h: an open-addressing hash map from uint64_t to uint64_t.
 *
 * Linear probing with backward-shift deletion (no tombstones), so lookups
 * stay short however many inserts and deletes a long trace makes, and the
 * memory is proportional to the live entries, not to the trace length.
 * UINT64_MAX is reserved as the empty marker and cannot be a key.
 */
#ifndef SIM_U64MAP_H
#define SIM_U64MAP_H

#include <stddef.h>
#include <stdint.h>

#define U64MAP_EMPTY UINT64_MAX

struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	size_t cap;     /* power of two, or 0 */
	size_t count;
};

void u64map_init(struct u64map *m);
void u64map_free(struct u64map *m);
/* Insert or replace. Returns 0, or -1 when out of memory. */
int u64map_put(struct u64map *m, uint64_t key, uint64_t val);
/* 1 with *val if present, else 0. */
int u64map_get(const struct u64map *m, uint64_t key, uint64_t *val);
/* Remove; 1 with *val (if val != NULL) when it was present, else 0. */
int u64map_del(struct u64map *m, uint64_t key, uint64_t *val);

#endif /* SIM_U64MAP_H */
