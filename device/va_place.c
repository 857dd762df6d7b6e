/*
 * va_place.c: the driver's virtual-address placement (see va_place.h for the
 * rules and docs/policies.md for the evidence).
 *
 * Free ranges sit in treaps keyed by address, one for the released ranges
 * and one per chunk; each node keeps the largest free range of its subtree,
 * so "the highest (lowest) range of at least N bytes" is one descent.
 * Priorities are a hash of the address, so the shape (and every result) is
 * the same on every run. "The newest chunk with a free range of N bytes" is
 * one descent of a max-tree over chunk ids in creation order; released
 * chunks keep their id until half of the ids are dead, then the live ones
 * are renumbered in order.
 */
#include "va_place.h"

#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

struct va_node {
	uint64_t a, len, maxlen, prio;
	uint32_t l, r;
};

struct va_chunk {
	uint64_t start, size;
	uint32_t root; /* free ranges inside */
	uint32_t live; /* allocations inside (the context's own counts one) */
	int keep;      /* a context chunk: never released */
	int dead;      /* released */
};

#define MiB (1ull << 20)

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
	v->up = bottom;
	v->floor = v->over = top;
	u64map_init(&v->at);
}

void va_fini(struct va_space *v)
{
	free(v->n);
	free(v->ch);
	free(v->mx);
	u64map_free(&v->at);
	memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------- treaps */

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

static int insert(struct va_space *v, uint32_t *root, uint64_t a, uint64_t len)
{
	uint32_t x, l, r;
	if (v->freelist) {
		x = v->freelist;
		v->freelist = v->n[x].l;
	} else {
		size_t need = v->nn ? v->nn + 1 : 2;
		if (need > UINT32_MAX || VEC_RESERVE(v->n, v->cap, need, 64) < 0) {
			v->oom = 1;
			return -1;
		}
		if (!v->nn)
			memset(&v->n[0], 0, sizeof v->n[0]); /* the null sentinel */
		x = (uint32_t)(need - 1);
		v->nn = need;
	}
	v->n[x] = (struct va_node){a, len, len, mix(a), 0, 0};
	split(v->n, *root, a, &l, &r);
	*root = merge(v->n, merge(v->n, l, x), r);
	return 0;
}

/* Remove the node with key A (which must exist). */
static void remove_key(struct va_space *v, uint32_t *root, uint64_t a)
{
	uint32_t l, m, r;
	split(v->n, *root, a, &l, &m);
	split(v->n, m, a + 1, &m, &r);
	v->n[m].l = v->freelist;
	v->freelist = m;
	*root = merge(v->n, l, r);
}

/* The node whose range ends exactly at A, or 0. */
static uint32_t ending_at(const struct va_space *v, uint32_t t, uint64_t a)
{
	uint32_t best = 0;
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
static uint32_t starting_at(const struct va_space *v, uint32_t t, uint64_t a)
{
	while (t && v->n[t].a != a)
		t = a < v->n[t].a ? v->n[t].l : v->n[t].r;
	return t;
}

/* The highest-addressed free range of at least LEN bytes, or 0. */
static uint32_t highest_fit(const struct va_space *v, uint32_t t, uint64_t len)
{
	const struct va_node *n = v->n;
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

/* The lowest-addressed free range of at least LEN bytes, or 0. */
static uint32_t lowest_fit(const struct va_space *v, uint32_t t, uint64_t len)
{
	const struct va_node *n = v->n;
	if (!t || n[t].maxlen < len)
		return 0;
	for (;;) {
		if (n[n[t].l].maxlen >= len)
			t = n[t].l;
		else if (n[t].len >= len)
			return t;
		else
			t = n[t].r;
	}
}

/* Add [ADDR, ADDR + BYTES) to the treap at ROOT, joined with the free
 * ranges it touches; the joined range in *ADDR, *BYTES. */
static int add_free(struct va_space *v, uint32_t *root, uint64_t *addr, uint64_t *bytes, int floor_rule)
{
	uint64_t a = *addr, len = *bytes;
	uint32_t p = ending_at(v, *root, a), s;
	if (p) {
		uint64_t pa = v->n[p].a;
		len += v->n[p].len;
		remove_key(v, root, pa);
		a = pa;
	}
	if ((s = starting_at(v, *root, a + len)) != 0) {
		uint64_t sa = v->n[s].a, slen = v->n[s].len;
		remove_key(v, root, sa);
		len += slen;
	}
	*addr = a;
	*bytes = len;
	if (floor_rule && a == v->floor) { /* back to the fresh space */
		v->floor += len;
		return 0;
	}
	return insert(v, root, a, len);
}

/* ------------------------------------------------------------- chunks */

static uint64_t chunk_max(const struct va_space *v, size_t id)
{
	const struct va_chunk *c = &v->ch[id];
	return c->dead ? 0 : v->n ? v->n[c->root].maxlen : 0;
}

static void mx_set(struct va_space *v, size_t id)
{
	size_t i = v->mxn + id;
	v->mx[i] = chunk_max(v, id);
	for (i /= 2; i; i /= 2)
		v->mx[i] = v->mx[2 * i] > v->mx[2 * i + 1] ? v->mx[2 * i] : v->mx[2 * i + 1];
}

static void mx_rebuild(struct va_space *v)
{
	for (size_t i = 0; i < v->mxn; i++)
		v->mx[v->mxn + i] = i < v->nch ? chunk_max(v, i) : 0;
	for (size_t i = v->mxn - 1; i; i--)
		v->mx[i] = v->mx[2 * i] > v->mx[2 * i + 1] ? v->mx[2 * i] : v->mx[2 * i + 1];
}

/* Renumber the live chunks 0.. in creation order. */
static int compact(struct va_space *v)
{
	uint32_t *to = malloc(v->nch * sizeof *to);
	size_t j = 0;
	if (!to)
		return -1;
	for (size_t i = 0; i < v->nch; i++) {
		if (v->ch[i].dead)
			continue;
		to[i] = (uint32_t)j;
		v->ch[j++] = v->ch[i];
	}
	for (size_t i = 0; i < v->at.cap; i++)
		if (v->at.keys[i] != U64MAP_EMPTY)
			v->at.vals[i] = to[v->at.vals[i]];
	free(to);
	v->nch = j;
	v->ndead = 0;
	mx_rebuild(v);
	return 0;
}

/* Room for one more chunk id. */
static int chunk_room(struct va_space *v)
{
	if (v->nch < v->mxn)
		return 0;
	if (v->nch && v->ndead * 2 >= v->nch && compact(v) == 0 && v->nch < v->mxn)
		return 0;
	size_t n = v->mxn ? 2 * v->mxn : 16;
	if (n > UINT32_MAX)
		return -1;
	uint64_t *mx = malloc(2 * n * sizeof *mx);
	if (!mx || VEC_RESERVE(v->ch, v->capch, n, 16) < 0) {
		free(mx);
		return -1;
	}
	free(v->mx);
	v->mx = mx;
	v->mxn = n;
	mx_rebuild(v);
	return 0;
}

/* A new chunk [START, START + SIZE) whose first allocation (BYTES) sits at
 * its low end. */
static int new_chunk(struct va_space *v, uint64_t start, uint64_t size, uint64_t bytes, int keep)
{
	if (chunk_room(v) < 0) {
		v->oom = 1;
		return -1;
	}
	size_t id = v->nch++;
	v->ch[id] = (struct va_chunk){start, size, 0, 1, keep, 0};
	if (size > bytes)
		(void)insert(v, &v->ch[id].root, start + bytes, size - bytes);
	mx_set(v, id);
	if (!keep && u64map_put(&v->at, start, id) < 0)
		v->oom = 1; /* never given back */
	return 0;
}

/* The newest chunk with a free range of LEN bytes, or -1. */
static long newest_fit(const struct va_space *v, uint64_t len)
{
	size_t i = 1;
	if (!v->mxn || v->mx[1] < len)
		return -1;
	while (i < v->mxn)
		i = v->mx[2 * i + 1] >= len ? 2 * i + 1 : 2 * i;
	return (long)(i - v->mxn);
}

static uint64_t take_in_chunk(struct va_space *v, size_t id, uint64_t bytes)
{
	struct va_chunk *c = &v->ch[id];
	uint32_t k = lowest_fit(v, c->root, bytes);
	uint64_t a = v->n[k].a, len = v->n[k].len;
	remove_key(v, &c->root, a);
	if (len > bytes)
		(void)insert(v, &c->root, a + bytes, len - bytes);
	c->live++;
	mx_set(v, id);
	if (u64map_put(&v->at, a, id) < 0)
		v->oom = 1;
	return a;
}

static uint64_t chunk_size(uint64_t bytes)
{
	return bytes > UINT64_MAX - VA_CHUNK ? bytes : (bytes + VA_CHUNK - 1) / VA_CHUNK * VA_CHUNK;
}

/* Past the modelled space: bump upward from the top. */
static uint64_t over(struct va_space *v, uint64_t size)
{
	uint64_t a = v->over;
	v->over += size;
	return a;
}

uint64_t va_take(struct va_space *v, uint64_t bytes)
{
	long id;
	uint64_t a, size;
	if (!bytes)
		bytes = 1;
	if ((id = newest_fit(v, bytes)) >= 0)
		return take_in_chunk(v, (size_t)id, bytes);
	size = chunk_size(bytes);
	/* a released range strictly larger than the chunk: the highest one,
	 * at its high end */
	uint32_t k = size < UINT64_MAX ? highest_fit(v, v->root, size + 1) : 0;
	if (k) {
		uint64_t ka = v->n[k].a, klen = v->n[k].len;
		remove_key(v, &v->root, ka);
		(void)insert(v, &v->root, ka, klen - size);
		a = ka + klen - size;
	} else if (v->floor - v->up >= size) {
		v->floor -= size;
		a = v->floor;
	} else {
		a = over(v, size);
	}
	(void)new_chunk(v, a, size, bytes, 0);
	return a;
}

uint64_t va_reserve(struct va_space *v, uint64_t bytes)
{
	long id;
	uint64_t a, size;
	if (!bytes)
		bytes = 1;
	if ((id = newest_fit(v, bytes)) >= 0)
		return take_in_chunk(v, (size_t)id, bytes);
	size = chunk_size(bytes);
	if (v->floor - v->up >= size) {
		a = v->up;
		v->up += size;
	} else {
		a = over(v, size);
	}
	(void)new_chunk(v, a, size, bytes, 0);
	return a;
}

int va_add_context(struct va_space *v)
{
	/* measured: the first fresh chunk ends 488 MiB below the context's
	 * 24 MiB free range, whose chunk holds 8 MiB of the context's own;
	 * 2 MiB free 74 MiB below that range, in a newer chunk */
	const uint64_t span = 512 * MiB;
	if (v->floor - v->up < span)
		return 0;
	v->floor -= span;
	uint64_t t = v->floor;
	v->ctx = t;
	if (new_chunk(v, t + 480 * MiB, 32 * MiB, 8 * MiB, 1) < 0 ||
	    new_chunk(v, t + 414 * MiB, 2 * MiB, 0, 1) < 0)
		return -1;
	return 0;
}

int va_context_release(struct va_space *v)
{
	if (!v->ctx)
		return 0;
	int rc = new_chunk(v, v->ctx, 414 * MiB, 0, 1);
	v->ctx = 0;
	return rc;
}

int va_give(struct va_space *v, uint64_t addr, uint64_t bytes)
{
	uint64_t id;
	if (!bytes)
		bytes = 1;
	if (!u64map_del(&v->at, addr, &id) || id >= v->nch)
		return -1;
	struct va_chunk *c = &v->ch[id];
	uint64_t a = addr, len = bytes;
	int rc = add_free(v, &c->root, &a, &len, 0);
	if (c->live)
		c->live--;
	if (!c->live && !c->keep && rc == 0 && a == c->start && len == c->size) {
		/* the chunk is empty: release it */
		remove_key(v, &c->root, a);
		c->dead = 1;
		v->ndead++;
		rc = add_free(v, &v->root, &a, &len, 1);
	}
	mx_set(v, id);
	return rc;
}

static size_t count(const struct va_node *n, uint32_t t)
{
	return t ? 1 + count(n, n[t].l) + count(n, n[t].r) : 0;
}

size_t va_free_ranges(const struct va_space *v)
{
	return v->n ? count(v->n, v->root) : 0;
}

size_t va_chunks(const struct va_space *v)
{
	return v->nch - v->ndead;
}
