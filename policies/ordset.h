/*
 * ordset.h: the ordered sets the block-based policies keep their free
 * pieces in (bfc, cuda_async, buddy, optimal), in one place.
 *
 * ordset: an intrusive, non-recursive treap (Seidel and Aragon, "Randomized
 * search trees", 1996) threaded through the policy's own node array. Node i
 * is element i, handle 0 means none, so a policy's arrays may be realloc'd
 * freely. Each element embeds a struct ordset_node as its FIRST member
 * (named `node`; policies check it with ORDSET_FIRST_MEMBER); the set sees
 * the array through struct ordset_nodes (base and stride).
 *  - key: (k1, k2), compared lexicographically; equal keys are allowed and
 *    the later insert goes after (to the right of) the earlier;
 *  - links to the parent, so an element leaves its set by handle with no
 *    search and joining one allocates nothing;
 *  - invariants: in-order sequence sorted by key (BST); pri of a parent >=
 *    pri of its children (heap); n[n[x].l].p == x and n[n[x].r].p == x;
 *    the root's p is 0. ordset_check() verifies all of them (tests);
 *  - priorities are a hash of the key (splitmix64 finaliser), not a random
 *    stream: the shape, like every result, is the same on every run and
 *    does not depend on insertion history. Expected O(log n) descent,
 *    O(1) expected rotations per insert or erase.
 *
 * sizeset: elements keyed (k1, k2) = (size, address) for best fit. Sizes
 * below SIZESET_CLASSES units (k1 >> shift) each get their own ordset (by
 * address, usually a node or two), found through a two-level bitmap of
 * non-empty classes (a 64-ary summary word over the 64-bit words, as in
 * TLSF's first/second level maps, Masmano et al. 2004), so a best-fit
 * search is a few word scans instead of a descent through every free
 * piece; larger sizes share one ordset by (size, address). Invariant: bit c
 * of bits is set iff root[c] != 0, bit w of words iff bits[w] != 0.
 *
 * Everything on the hot path is static inline: each policy's copy sees its
 * own constant stride, so it compiles to the same code as a set written
 * for that node type alone.
 */
#ifndef POLICIES_ORDSET_H
#define POLICIES_ORDSET_H

#include <stddef.h>
#include <stdint.h>

/* The links and key an element embeds (as its first member, `node`). */
struct ordset_node {
	uint64_t k1, k2;        /* key, lexicographic */
	uint32_t l, r, p, pri;  /* children, parent (0 = none), heap priority */
};

/* A view of a policy's node array: element i at base + i * stride. */
struct ordset_nodes {
	char *base;
	size_t stride;
};

/* The view of array ARR (a pointer to elements whose first member is node). */
#define ORDSET_NODES(arr) ((struct ordset_nodes){(char *)(arr), sizeof *(arr)})

/* Compile-time check that TYPE can be seen through ORDSET_NODES. */
#define ORDSET_FIRST_MEMBER(type) \
	_Static_assert(offsetof(type, node) == 0, #type ": node must come first")

static inline struct ordset_node *ordset_at(struct ordset_nodes n, uint32_t i)
{
	return (struct ordset_node *)(n.base + (size_t)i * n.stride);
}

/* A node's heap priority: a hash of its key. */
static inline uint32_t ordset_prio(uint64_t k1, uint64_t k2)
{
	uint64_t x = k1 * 0x9e3779b97f4a7c15ull ^ (k2 + 0x632be59bd9b4e019ull);
	x ^= x >> 31; x *= 0xbf58476d1ce4e5b9ull; x ^= x >> 29;
	x *= 0x94d049bb133111ebull; x ^= x >> 32;
	return (uint32_t)x;
}

static inline int ordset_lt(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2)
{
	return a1 < b1 || (a1 == b1 && a2 < b2);
}

/* Lift X above its parent, keeping the in-order sequence. */
static inline void ordset_rotate_up(struct ordset_nodes n, uint32_t *root, uint32_t x)
{
	struct ordset_node *nx = ordset_at(n, x);
	uint32_t p = nx->p, c;
	struct ordset_node *np = ordset_at(n, p);
	uint32_t g = np->p;
	if (np->l == x) {
		c = nx->r;
		np->l = c;
		nx->r = p;
	} else {
		c = nx->l;
		np->r = c;
		nx->l = p;
	}
	if (c)
		ordset_at(n, c)->p = p;
	np->p = x;
	nx->p = g;
	if (!g)
		*root = x;
	else if (ordset_at(n, g)->l == p)
		ordset_at(n, g)->l = x;
	else
		ordset_at(n, g)->r = x;
}

/* Restore the heap order after X was linked in as a leaf. */
static inline void ordset_sift_up(struct ordset_nodes n, uint32_t *root, uint32_t x)
{
	struct ordset_node *nx = ordset_at(n, x);
	while (nx->p && ordset_at(n, nx->p)->pri < nx->pri)
		ordset_rotate_up(n, root, x);
}

/* Add X, whose key is set and which is in no set. */
static inline void ordset_insert(struct ordset_nodes n, uint32_t *root, uint32_t x)
{
	struct ordset_node *nx = ordset_at(n, x);
	uint64_t k1 = nx->k1, k2 = nx->k2;
	uint32_t cur = *root, par = 0;
	int left = 0;
	while (cur) {
		const struct ordset_node *nc = ordset_at(n, cur);
		par = cur;
		left = ordset_lt(k1, k2, nc->k1, nc->k2);
		cur = left ? nc->l : nc->r;
	}
	nx->l = nx->r = 0;
	nx->p = par;
	nx->pri = ordset_prio(k1, k2);
	if (!par)
		*root = x;
	else if (left)
		ordset_at(n, par)->l = x;
	else
		ordset_at(n, par)->r = x;
	ordset_sift_up(n, root, x);
}

/* Take X out of its set (rotate it down to a leaf, then unlink it). */
static inline void ordset_erase(struct ordset_nodes n, uint32_t *root, uint32_t x)
{
	struct ordset_node *nx = ordset_at(n, x);
	while (nx->l && nx->r)
		ordset_rotate_up(n, root, ordset_at(n, nx->l)->pri > ordset_at(n, nx->r)->pri
					  ? nx->l : nx->r);
	uint32_t c = nx->l ? nx->l : nx->r, p = nx->p;
	if (c)
		ordset_at(n, c)->p = p;
	if (!p)
		*root = c;
	else if (ordset_at(n, p)->l == x)
		ordset_at(n, p)->l = c;
	else
		ordset_at(n, p)->r = c;
}

/* The smallest element >= (k1, k2), or 0. */
static inline uint32_t ordset_lower_bound(struct ordset_nodes n, uint32_t root,
					  uint64_t k1, uint64_t k2)
{
	uint32_t cur = root, best = 0;
	while (cur) {
		const struct ordset_node *nc = ordset_at(n, cur);
		if (ordset_lt(nc->k1, nc->k2, k1, k2)) {
			cur = nc->r;
		} else {
			best = cur;
			cur = nc->l;
		}
	}
	return best;
}

/* The smallest element, or 0. */
static inline uint32_t ordset_first(struct ordset_nodes n, uint32_t root)
{
	uint32_t cur = root;
	while (cur && ordset_at(n, cur)->l)
		cur = ordset_at(n, cur)->l;
	return cur;
}

/* The largest element, or 0. */
static inline uint32_t ordset_last(struct ordset_nodes n, uint32_t root)
{
	uint32_t cur = root;
	while (cur && ordset_at(n, cur)->r)
		cur = ordset_at(n, cur)->r;
	return cur;
}

/*
 * Check every ordset invariant of the tree at ROOT (tests, debugging):
 * 0 and the element count in *COUNT, or -1 at the first violation.
 */
int ordset_check(struct ordset_nodes n, uint32_t root, size_t *count);

/* ------------------------------------------------- sizes, bitmapped */

#define SIZESET_CLASSES (1u << 16)

struct sizeset {
	uint32_t *root;          /* [SIZESET_CLASSES] ordset per exact size class */
	uint64_t *bits;          /* [SIZESET_CLASSES / 64] bit c: root[c] != 0 */
	uint64_t *words;         /* [SIZESET_CLASSES / 4096] bit w: bits[w] != 0 */
	uint32_t big, count;     /* ordset of sizes >= SIZESET_CLASSES; elements */
	unsigned shift;          /* class of k1: k1 >> shift */
};

/*
 * An empty set whose size class is k1 >> SHIFT (8 when k1 is in bytes, a
 * multiple of 256; 0 when k1 already counts 256 B units). 0, or -1 when out
 * of memory.
 */
int sizeset_init(struct sizeset *x, unsigned shift);

/* Free the set's tables (not its elements: they live in the policy). */
void sizeset_free(struct sizeset *x);

/* An element of the largest size, or 0. */
uint32_t sizeset_largest(struct ordset_nodes n, const struct sizeset *x);

static inline void sizeset_insert(struct ordset_nodes n, struct sizeset *x, uint32_t h)
{
	uint64_t c = ordset_at(n, h)->k1 >> x->shift;
	x->count++;
	if (c >= SIZESET_CLASSES) {
		ordset_insert(n, &x->big, h);
		return;
	}
	if (!x->root[c]) {
		x->bits[c >> 6] |= 1ull << (c & 63);
		x->words[c >> 12] |= 1ull << ((c >> 6) & 63);
	}
	ordset_insert(n, &x->root[c], h);
}

static inline void sizeset_erase(struct ordset_nodes n, struct sizeset *x, uint32_t h)
{
	uint64_t c = ordset_at(n, h)->k1 >> x->shift;
	x->count--;
	if (c >= SIZESET_CLASSES) {
		ordset_erase(n, &x->big, h);
		return;
	}
	ordset_erase(n, &x->root[c], h);
	if (!x->root[c]) {
		x->bits[c >> 6] &= ~(1ull << (c & 63));
		if (!x->bits[c >> 6])
			x->words[c >> 12] &= ~(1ull << ((c >> 6) & 63));
	}
}

/* The smallest non-empty class >= C (C < SIZESET_CLASSES), or SIZESET_CLASSES. */
static inline uint64_t sizeset_class_from(const struct sizeset *x, uint64_t c)
{
	uint64_t w = c >> 6, bits = x->bits[w] & (~0ull << (c & 63));
	if (bits)
		return w << 6 | (uint64_t)__builtin_ctzll(bits);
	uint64_t sw = w >> 6, sbits = x->words[sw] & ((~0ull << (w & 63)) << 1);
	while (!sbits) {
		if (++sw == SIZESET_CLASSES / 4096)
			return SIZESET_CLASSES;
		sbits = x->words[sw];
	}
	w = sw << 6 | (uint64_t)__builtin_ctzll(sbits);
	return w << 6 | (uint64_t)__builtin_ctzll(x->bits[w]);
}

/* Best fit: the element with the smallest (k1, k2) >= (k1, 0), or 0. */
static inline uint32_t sizeset_find(struct ordset_nodes n, const struct sizeset *x, uint64_t k1)
{
	uint64_t c = k1 >> x->shift;
	if (c < SIZESET_CLASSES && (c = sizeset_class_from(x, c)) < SIZESET_CLASSES)
		return ordset_first(n, x->root[c]);
	return ordset_lower_bound(n, x->big, k1, 0);
}

#endif /* POLICIES_ORDSET_H */
