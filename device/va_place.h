/*
 * va_place.h: where the driver puts a cudaMalloc in virtual address space
 * (the synthetic addresses of device.c).
 *
 * Why it matters: PyTorch's caching allocator breaks ties between equal-sized
 * free blocks by address, so which segment the driver placed lower decides
 * which block is reused. The rules below were learnt from the segment
 * addresses of the recorded PyTorch runs on an H200 (docs/policies.md,
 * "Synthetic addresses"):
 *  - footprints are whole 2 MiB pages;
 *  - fresh address space is taken top-down: a range that reuses nothing is
 *    placed just below the lowest range handed out so far;
 *  - freed ranges coalesce with free neighbours; a range freed at the bottom
 *    of what was handed out goes back to the fresh space;
 *  - a request that fits a freed range reuses one: the highest-addressed
 *    freed range that is large enough, from its low end.
 * Deterministic, O(log n) per call (a treap of free ranges by address, each
 * node holding the largest free range of its subtree).
 */
#ifndef SIM_VA_PLACE_H
#define SIM_VA_PLACE_H

#include <stddef.h>
#include <stdint.h>

struct va_node;

struct va_space {
	uint64_t bottom;   /* fresh space is [bottom, floor) */
	uint64_t floor;    /* lowest address handed out (top at start) */
	uint64_t over;     /* past the bottom: bump upward from the top */
	uint32_t root;     /* treap of freed ranges above floor; 0 = empty */
	struct va_node *n; /* node 0 is the null sentinel */
	size_t nn, cap;
	uint32_t freelist; /* recycled nodes, linked through .l */
};

/* The space [BOTTOM, TOP): fresh ranges come from TOP downward. */
void va_init(struct va_space *v, uint64_t bottom, uint64_t top);
void va_fini(struct va_space *v);

/* A range of BYTES (a multiple of the page the caller rounds to). */
uint64_t va_take(struct va_space *v, uint64_t bytes);

/* Give back [ADDR, ADDR + BYTES), a range va_take returned (or a part of
 * one). Returns -1 when out of memory (the range is then not reused). */
int va_give(struct va_space *v, uint64_t addr, uint64_t bytes);

/* Freed ranges held (for tests). */
size_t va_free_ranges(const struct va_space *v);

#endif /* SIM_VA_PLACE_H */
