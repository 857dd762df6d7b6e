/*
 * va_place.c: the driver's virtual-address placement (see va_place.h for the
 * rules and docs/policies.md for the evidence).
 *
 * Free ranges above the floor sit in a treap keyed by address; each node
 * keeps the largest free range of its subtree, so "the highest range of at
 * least N bytes" is one descent. Priorities are a hash of the address, so the
 * shape (and every result) is the same on every run.
 */
#include "va_place.h"

#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

struct va_node {
	uint64_t a, len, maxlen, prio;
	uint32_t l, r;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void va_init(struct va_space *v, uint64_t bottom, uint64_t top)
{
	memset(v, 0, sizeof *v);
	v->bottom = bottom;
	v->floor = v->over = top;
}

void va_fini(struct va_space *v)
{
	free(v->n);
	memset(v, 0, sizeof *v);
}

static void upd(struct va_node *n, uint32_t x)
{
	uint64_t m = n[x].len;
	if (n[n[x].l].maxlen > m)
		m = n[n[x].l].maxlen;
	if (n[n[x].r].maxlen > m)
		m = n[n[x].r].maxlen;
	n[x].maxlen = m;
}

/* Split T into keys < KEY (*L) and >= KEY (*R). */
static void split(struct va_node *n, uint32_t t, uint64_t key, uint32_t *l, uint32_t *r)
{
	if (!t) {
		*l = *r = 0;
	} else if (n[t].a < key) {
		split(n, n[t].r, key, &n[t].r, r);
		upd(n, t);
		*l = t;
	} else {
		split(n, n[t].l, key, l, &n[t].l);
		upd(n, t);
		*r = t;
	}
}

static uint32_t merge(struct va_node *n, uint32_t l, uint32_t r)
{
	if (!l || !r)
		return l ? l : r;
	if (n[l].prio > n[r].prio) {
		n[l].r = merge(n, n[l].r, r);
		upd(n, l);
		return l;
	}
	n[r].l = merge(n, l, n[r].l);
	upd(n, r);
	return r;
}

static int insert(struct va_space *v, uint64_t a, uint64_t len)
{
	uint32_t x, l, r;
	if (v->freelist) {
		x = v->freelist;
		v->freelist = v->n[x].l;
	} else {
		size_t need = v->nn ? v->nn + 1 : 2;
		if (need > UINT32_MAX || VEC_RESERVE(v->n, v->cap, need, 64) < 0)
			return -1;
		if (!v->nn)
			memset(&v->n[0], 0, sizeof v->n[0]); /* the null sentinel */
		x = (uint32_t)(need - 1);
		v->nn = need;
	}
	v->n[x] = (struct va_node){a, len, len, mix(a), 0, 0};
	split(v->n, v->root, a, &l, &r);
	v->root = merge(v->n, merge(v->n, l, x), r);
	return 0;
}

/* Remove the node with key A (which must exist). */
static void remove_key(struct va_space *v, uint64_t a)
{
	uint32_t l, m, r;
	split(v->n, v->root, a, &l, &m);
	split(v->n, m, a + 1, &m, &r);
	v->n[m].l = v->freelist;
	v->freelist = m;
	v->root = merge(v->n, l, r);
}

/* The node whose range ends exactly at A, or 0. */
static uint32_t ending_at(const struct va_space *v, uint64_t a)
{
	uint32_t t = v->root, best = 0;
	while (t) {
		if (v->n[t].a < a) {
			best = t;
			t = v->n[t].r;
		} else {
			t = v->n[t].l;
		}
	}
	return best && v->n[best].a + v->n[best].len == a ? best : 0;
}

/* The node starting exactly at A, or 0. */
static uint32_t starting_at(const struct va_space *v, uint64_t a)
{
	uint32_t t = v->root;
	while (t && v->n[t].a != a)
		t = a < v->n[t].a ? v->n[t].l : v->n[t].r;
	return t;
}

/* The highest-addressed free range of at least LEN bytes, or 0. */
static uint32_t highest_fit(const struct va_space *v, uint64_t len)
{
	const struct va_node *n = v->n;
	uint32_t t = v->root;
	if (!t || n[t].maxlen < len)
		return 0;
	for (;;) {
		if (n[n[t].r].maxlen >= len)
			t = n[t].r;
		else if (n[t].len >= len)
			return t;
		else
			t = n[t].l;
	}
}

uint64_t va_take(struct va_space *v, uint64_t bytes)
{
	uint32_t k = highest_fit(v, bytes);
	if (k) {
		uint64_t a = v->n[k].a, len = v->n[k].len;
		remove_key(v, a);
		/* the rest keeps its place; if it cannot be recorded it is
		 * simply never reused */
		if (len > bytes)
			(void)insert(v, a + bytes, len - bytes);
		return a;
	}
	if (v->floor - v->bottom >= bytes) {
		v->floor -= bytes;
		return v->floor;
	}
	uint64_t a = v->over; /* the modelled space is full: past the top */
	v->over += bytes;
	return a;
}

int va_give(struct va_space *v, uint64_t addr, uint64_t bytes)
{
	uint32_t p = ending_at(v, addr), s;
	if (p) {
		uint64_t pa = v->n[p].a;
		bytes += v->n[p].len;
		remove_key(v, pa);
		addr = pa;
	}
	if ((s = starting_at(v, addr + bytes)) != 0) {
		uint64_t sa = v->n[s].a, slen = v->n[s].len;
		remove_key(v, sa);
		bytes += slen;
	}
	if (addr == v->floor) { /* back to the fresh space */
		v->floor += bytes;
		return 0;
	}
	return insert(v, addr, bytes);
}

static size_t count(const struct va_node *n, uint32_t t)
{
	return t ? 1 + count(n, n[t].l) + count(n, n[t].r) : 0;
}

size_t va_free_ranges(const struct va_space *v)
{
	return count(v->n, v->root);
}
