/*
 * test_ordset.c: the shared ordered sets (policies/ordset.h) against brute
 * force: after every insert and erase of a long random sequence the treap
 * invariants hold (ordset_check) and lower_bound / first / last agree with
 * a linear scan; the sizeset's best fit and largest element agree with a
 * scan over the same elements, for both key scales (shift 8 and 0) and for
 * sizes past the bitmap; equal sizes go lowest address first; the tree shape
 * does not depend on the order of insertion.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/ordset.h"

struct tnode {
	struct ordset_node node;
	int in;                 /* in the set under test */
};
ORDSET_FIRST_MEMBER(struct tnode);

#define NNODES 600

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int key_lt(const struct tnode *a, uint64_t k1, uint64_t k2)
{
	return a->node.k1 < k1 || (a->node.k1 == k1 && a->node.k2 < k2);
}

/* Brute-force lower bound over the elements in the set: the smallest key
 * >= (k1, k2); returns the key through *b1, *b2, 0 when none. */
static int scan_lower_bound(const struct tnode *t, uint64_t k1, uint64_t k2,
			    uint64_t *b1, uint64_t *b2)
{
	int found = 0;
	for (uint32_t i = 1; i < NNODES; i++) {
		if (!t[i].in || key_lt(&t[i], k1, k2))
			continue;
		if (!found || key_lt(&t[i], *b1, *b2)) {
			*b1 = t[i].node.k1;
			*b2 = t[i].node.k2;
			found = 1;
		}
	}
	return found;
}

Test(ordset, random_ops_keep_invariants_and_order)
{
	struct tnode *t = calloc(NNODES, sizeof *t);
	struct ordset_nodes n = ORDSET_NODES(t);
	uint32_t root = 0;
	size_t live = 0, count;
	rng_state = 0x2545f4914f6cdd1dull;
	for (int step = 0; step < 6000; step++) {
		uint32_t i = 1 + (uint32_t)(rng() % (NNODES - 1));
		if (t[i].in) {
			ordset_erase(n, &root, i);
			t[i].in = 0;
			live--;
		} else {
			t[i].node.k1 = rng() % 50;        /* many equal k1 */
			t[i].node.k2 = rng() % 1000;
			ordset_insert(n, &root, i);
			t[i].in = 1;
			live++;
		}
		cr_assert_eq(ordset_check(n, root, &count), 0, "step %d", step);
		cr_assert_eq(count, live, "step %d", step);
		uint64_t q1 = rng() % 52, q2 = rng() % 1001, b1 = 0, b2 = 0;
		uint32_t h = ordset_lower_bound(n, root, q1, q2);
		if (scan_lower_bound(t, q1, q2, &b1, &b2)) {
			cr_assert_neq(h, 0u);
			cr_assert(t[h].in);
			cr_assert_eq(t[h].node.k1, b1);
			cr_assert_eq(t[h].node.k2, b2);
		} else {
			cr_assert_eq(h, 0u, "step %d", step);
		}
	}
	/* first and last against a scan; then walk in order by lower bounds */
	uint64_t f1 = 0, f2 = 0;
	cr_assert(scan_lower_bound(t, 0, 0, &f1, &f2));
	uint32_t first = ordset_first(n, root), last = ordset_last(n, root);
	cr_assert_eq(t[first].node.k1, f1);
	cr_assert_eq(t[first].node.k2, f2);
	for (uint32_t i = 1; i < NNODES; i++)
		if (t[i].in)
			cr_assert(!key_lt(&t[last], t[i].node.k1, t[i].node.k2));
	cr_assert_eq(ordset_first(n, 0), 0u);
	cr_assert_eq(ordset_last(n, 0), 0u);
	free(t);
}

Test(ordset, shape_is_independent_of_insertion_order)
{
	struct tnode a[65], b[65];
	memset(a, 0, sizeof a);
	memset(b, 0, sizeof b);
	uint32_t ra = 0, rb = 0;
	for (uint32_t i = 1; i <= 64; i++) {
		a[i].node.k1 = b[i].node.k1 = i * 7 % 64;
		a[i].node.k2 = b[i].node.k2 = i;
	}
	for (uint32_t i = 1; i <= 64; i++)
		ordset_insert(ORDSET_NODES(a), &ra, i);
	for (uint32_t i = 64; i >= 1; i--)
		ordset_insert(ORDSET_NODES(b), &rb, i);
	cr_assert_eq(ra, rb);
	for (uint32_t i = 1; i <= 64; i++) {
		cr_assert_eq(a[i].node.l, b[i].node.l, "node %u", i);
		cr_assert_eq(a[i].node.r, b[i].node.r, "node %u", i);
		cr_assert_eq(a[i].node.p, b[i].node.p, "node %u", i);
	}
}

Test(ordset, rotate_and_sift_up_keep_a_hand_linked_leaf_valid)
{
	/* optimal.c links a leaf itself after its own descent, then sifts it */
	struct tnode t[40];
	memset(t, 0, sizeof t);
	struct ordset_nodes n = ORDSET_NODES(t);
	uint32_t root = 0;
	size_t count;
	for (uint32_t x = 1; x < 40; x++) {
		uint64_t key = (x * 17) % 40;
		uint32_t cur = root, par = 0;
		int left = 0;
		while (cur) {
			par = cur;
			left = key < t[cur].node.k1;
			cur = left ? t[cur].node.l : t[cur].node.r;
		}
		t[x].node = (struct ordset_node){.k1 = key, .p = par, .pri = ordset_prio(key, 0)};
		if (!par)
			root = x;
		else if (left)
			t[par].node.l = x;
		else
			t[par].node.r = x;
		ordset_sift_up(n, &root, x);
		cr_assert_eq(ordset_check(n, root, &count), 0);
		cr_assert_eq(count, x);
	}
	cr_assert_eq(t[ordset_first(n, root)].node.k1, 1u);   /* keys 1..39 */
	cr_assert_eq(t[ordset_last(n, root)].node.k1, 39u);
}

Test(ordset, check_finds_broken_links)
{
	struct tnode t[8];
	memset(t, 0, sizeof t);
	struct ordset_nodes n = ORDSET_NODES(t);
	uint32_t root = 0;
	size_t count;
	for (uint32_t i = 1; i < 8; i++) {
		t[i].node.k1 = i;
		ordset_insert(n, &root, i);
	}
	cr_assert_eq(ordset_check(n, root, &count), 0);
	cr_assert_eq(count, 7u);
	uint32_t x = ordset_first(n, root);
	t[x].node.k1 = 100;                      /* out of order */
	cr_assert_eq(ordset_check(n, root, &count), -1);
	t[x].node.k1 = 1;
	uint32_t saved = t[x].node.p;
	t[x].node.p = 0;                         /* wrong parent */
	cr_assert_eq(ordset_check(n, root, &count), -1);
	t[x].node.p = saved;
	t[root].node.pri = 0;                    /* heap order */
	cr_assert_eq(ordset_check(n, root, &count), -1);
}

/* Best fit by scan: the smallest (k1, k2) with k1 >= want, 0 when none. */
static uint32_t scan_best_fit(const struct tnode *t, uint32_t nn, uint64_t want)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < nn; i++)
		if (t[i].in && t[i].node.k1 >= want &&
		    (!best || key_lt(&t[i], t[best].node.k1, t[best].node.k2)))
			best = i;
	return best;
}

static void sizeset_against_scan(unsigned shift, uint64_t unit)
{
	enum { NN = 800 };
	struct tnode *t = calloc(NN, sizeof *t);
	struct ordset_nodes n = ORDSET_NODES(t);
	struct sizeset x;
	cr_assert_eq(sizeset_init(&x, shift), 0);
	cr_assert_eq(sizeset_find(n, &x, unit), 0u);
	cr_assert_eq(sizeset_largest(n, &x), 0u);
	uint32_t live = 0;
	rng_state = 0x9e3779b97f4a7c15ull + shift;
	for (int step = 0; step < 8000; step++) {
		uint32_t i = 1 + (uint32_t)(rng() % (NN - 1));
		if (t[i].in) {
			sizeset_erase(n, &x, i);
			t[i].in = 0;
			live--;
		} else {
			/* classes spread over the whole bitmap, some past it (big) */
			uint64_t cls = rng() % 4 ? rng() % 300 : rng() % (SIZESET_CLASSES + 5000);
			if (rng() % 3 == 0)
				cls = (rng() % 16) * 4096 + 4095;   /* word and summary edges */
			t[i].node.k1 = cls * unit;
			t[i].node.k2 = rng() % 100000;
			sizeset_insert(n, &x, i);
			t[i].in = 1;
			live++;
		}
		cr_assert_eq(x.count, live);
		uint64_t want = (rng() % 2 ? rng() % 400 : rng() % (SIZESET_CLASSES + 6000)) * unit;
		uint32_t got = sizeset_find(n, &x, want), exp = scan_best_fit(t, NN, want);
		if (!exp) {
			cr_assert_eq(got, 0u, "step %d want %lu", step, (unsigned long)want);
			continue;
		}
		cr_assert_neq(got, 0u, "step %d", step);
		cr_assert_eq(t[got].node.k1, t[exp].node.k1, "step %d", step);
		cr_assert_eq(t[got].node.k2, t[exp].node.k2, "step %d", step);
	}
	uint32_t top = sizeset_largest(n, &x);
	uint64_t maxk = 0;
	for (uint32_t i = 1; i < NN; i++)
		if (t[i].in && t[i].node.k1 > maxk)
			maxk = t[i].node.k1;
	cr_assert_neq(top, 0u);
	cr_assert_eq(t[top].node.k1, maxk);
	/* empty it again: bitmaps must clear with the last element of a class */
	for (uint32_t i = 1; i < NN; i++)
		if (t[i].in) {
			sizeset_erase(n, &x, i);
			t[i].in = 0;
		}
	cr_assert_eq(x.count, 0u);
	cr_assert_eq(x.big, 0u);
	for (uint32_t w = 0; w < SIZESET_CLASSES / 4096; w++)
		cr_assert_eq(x.words[w], 0u);
	cr_assert_eq(sizeset_find(n, &x, 0), 0u);
	cr_assert_eq(sizeset_largest(n, &x), 0u);
	sizeset_free(&x);
	sizeset_free(&x);   /* twice is harmless */
	cr_assert_null(x.root);
	free(t);
}

Test(sizeset, best_fit_matches_scan_byte_keys)
{
	sizeset_against_scan(8, 256);
}

Test(sizeset, best_fit_matches_scan_unit_keys)
{
	sizeset_against_scan(0, 1);
}

Test(sizeset, equal_sizes_lowest_address_first)
{
	struct tnode t[6];
	memset(t, 0, sizeof t);
	struct ordset_nodes n = ORDSET_NODES(t);
	struct sizeset x;
	cr_assert_eq(sizeset_init(&x, 8), 0);
	uint64_t addrs[] = {0, 0x5000, 0x1000, 0x3000, 0x2000, 0x4000};
	for (uint32_t i = 1; i < 6; i++) {
		t[i].node.k1 = 1024;
		t[i].node.k2 = addrs[i];
		sizeset_insert(n, &x, i);
	}
	uint32_t h = sizeset_find(n, &x, 512);
	cr_assert_eq(t[h].node.k2, 0x1000u);
	sizeset_erase(n, &x, h);
	h = sizeset_find(n, &x, 1024);
	cr_assert_eq(t[h].node.k2, 0x2000u);
	cr_assert_eq(sizeset_find(n, &x, 1280), 0u);
	sizeset_free(&x);
}
