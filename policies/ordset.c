/*
 * ordset.c: the cold half of the shared ordered sets (ordset.h states the
 * algorithm and its invariants): setting up and freeing a sizeset, its
 * largest element (statistics only), and the invariant checker the tests
 * run after every operation.
 */
#include "ordset.h"

#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

/* Walk the tree at ROOT with an explicit stack (a degenerate tree cannot
 * overflow the C stack); each entry carries the parent it must link to and
 * the key bounds its ancestors impose. Counts the nodes into *COUNT. */
static int ordset_check_tree(struct ordset_nodes n, uint32_t root, size_t *count)
{
	struct frame { uint32_t x, p; int has_lo, has_hi; uint64_t lo1, lo2, hi1, hi2; };
	size_t cap = 64, top = 0;
	struct frame *st = malloc(cap * sizeof *st);
	int rc = 0;
	if (!st)
		return -1;
	if (root)
		st[top++] = (struct frame){root, 0, 0, 0, 0, 0, 0, 0};
	while (top) {
		struct frame f = st[--top];
		const struct ordset_node *nx = ordset_at(n, f.x);
		(*count)++;
		if (nx->p != f.p ||
		    (f.has_lo && ordset_lt(nx->k1, nx->k2, f.lo1, f.lo2)) ||
		    (f.has_hi && ordset_lt(f.hi1, f.hi2, nx->k1, nx->k2)) ||
		    (f.p && ordset_at(n, f.p)->pri < nx->pri)) {
			rc = -1;
			goto out;
		}
		if (VEC_RESERVE(st, cap, top + 2, 64) < 0) {
			rc = -1;
			goto out;
		}
		if (nx->l)
			st[top++] = (struct frame){nx->l, f.x, f.has_lo, 1, f.lo1, f.lo2, nx->k1, nx->k2};
		if (nx->r)
			st[top++] = (struct frame){nx->r, f.x, 1, f.has_hi, nx->k1, nx->k2, f.hi1, f.hi2};
	}
out:
	free(st);
	return rc;
}

/* Tests call this after every change to a set: it must find any broken link. */
int ordset_check(struct ordset_nodes n, uint32_t root, size_t *count)
{
	*count = 0;
	return ordset_check_tree(n, root, count);
}

/* One calloc holds the roots and both bitmap levels. */
int sizeset_init(struct sizeset *x, unsigned shift)
{
	size_t bytes = SIZESET_CLASSES * sizeof(uint32_t) +
		       (SIZESET_CLASSES / 64 + SIZESET_CLASSES / 4096) * sizeof(uint64_t);
	memset(x, 0, sizeof *x);
	x->root = calloc(1, bytes);
	if (!x->root)
		return -1;
	x->bits = (uint64_t *)(x->root + SIZESET_CLASSES);
	x->words = x->bits + SIZESET_CLASSES / 64;
	x->shift = shift;
	return 0;
}

/* Safe on a set that was zeroed or already freed. */
void sizeset_free(struct sizeset *x)
{
	free(x->root);
	memset(x, 0, sizeof *x);
}

/* The big ordset first (every size there beats every class), else the
 * highest set bit of both bitmap levels. */
uint32_t sizeset_largest(struct ordset_nodes n, const struct sizeset *x)
{
	if (x->big)
		return ordset_last(n, x->big);
	if (!x->root)
		return 0;
	for (uint32_t sw = SIZESET_CLASSES / 4096; sw-- > 0;) {
		if (!x->words[sw])
			continue;
		uint64_t w = (uint64_t)sw << 6 | (uint64_t)(63 - __builtin_clzll(x->words[sw]));
		return x->root[w << 6 | (uint64_t)(63 - __builtin_clzll(x->bits[w]))];
	}
	return 0;
}
