/*
 * va_place.c: the driver's virtual-address placement (see va_place.h for the
 * rules and docs/policies.md for the evidence).
 *
 * Released ranges sit in a treap keyed by address; each node keeps the
 * largest free range of its subtree, so "the highest range of at least N
 * bytes" is one descent. Priorities are a hash of the address a node was
 * made for, so the shape is the same on every run (no result depends on
 * the shape: every query answers from the set of ranges alone). Nodes come
 * from a pool (a free list). A range that shrinks or grows without passing
 * a neighbour keeps its node: its key and length change in place and only
 * the largest-range figures on its path are brought up to date.
 *
 * Inside a chunk the free ranges are a small array sorted by address (the
 * first RNG_IN inside the chunk itself), with the chunk's largest range kept
 * beside it. With whole 2 MiB pages a 32 MiB chunk has at most 8, and a scan
 * of a cache line or two beats any tree. A chunk made for a large first
 * allocation that was freed while later ones live can hold many more: past
 * RNG_MAX its ranges move to a treap like the released ones (a free is
 * O(log n); the best fit of a take visits only subtrees with room and stops
 * at the first exact fit). Arrays of released chunks are kept for the next
 * chunk.
 *
 * "The newest chunk with a free range of N bytes" is one descent of a
 * max-tree over chunk ids in creation order; an update stops climbing where
 * a node's figure does not change. Released chunks keep their id until half
 * of the ids are dead, then the live ones are renumbered in order.
 *
 * An allocation's chunk (for va_give) is found by direct index when it
 * starts on a 2 MiB page below the top (chunks are taken top-down, so the
 * table spans what is in use), by hash otherwise (reservations from the
 * bottom, ranges past the top, addresses off a page).
 */
#include "va_place.h"

#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

struct va_node {
	uint64_t a, len, maxlen, prio;
	uint32_t l, r;
};

struct va_rng {
	uint64_t a, len;
};

#define RNG_IN 4     /* free ranges held in the chunk itself */
#define RNG_FIRST 8  /* ranges in a chunk's first array past those */
#define RNG_MAX 128  /* more free ranges than this: the chunk's become a treap */

struct va_chunk {
	uint64_t start, size;
	uint64_t maxlen;   /* the largest free range inside; 0 when dead or full */
	struct va_rng *r;  /* array form past RNG_IN ranges (capr > 0) */
	uint32_t nr, capr; /* array form: ranges, and r's room (0: in `in`) */
	uint32_t root;     /* treap form: free ranges inside; 0 = empty */
	uint32_t live;     /* allocations inside (the context's own counts one) */
	uint8_t tree;      /* treap form: more than RNG_MAX free ranges once */
	uint8_t keep;      /* a context chunk: never released */
	uint8_t dead;      /* released */
	struct va_rng in[RNG_IN]; /* array form, up to RNG_IN ranges */
};

/* Array form: the free ranges inside C, by address. */
static inline struct va_rng *rng(struct va_chunk *c)
{
	return c->capr ? c->r : c->in;
}

#define MiB (1ull << 20)
/* Allocations starting on a 2 MiB page below the top are found by direct
 * index (pt), the others by hash (at); PT_MAX pages at most. */
#define PT_PAGE (2ull << 20)
#define PT_MAX (1u << 20)

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
	v->ctx_chunk = SIZE_MAX;
	v->up = bottom;
	v->floor = v->over = top;
	v->pt_top = top > UINT64_MAX - (PT_PAGE - 1) ? top & ~(PT_PAGE - 1)
						       : (top + PT_PAGE - 1) & ~(PT_PAGE - 1);
	u64map_init(&v->at);
}

void va_fini(struct va_space *v)
{
	for (size_t i = 0; i < v->nch; i++)
		free(v->ch[i].r);
	for (size_t i = 0; i < v->nspare; i++)
		free(v->spare[i]);
	free(v->spare);
	free(v->n);
	free(v->ch);
	free(v->mx);
	free(v->pt);
	u64map_free(&v->at);
	memset(v, 0, sizeof *v);
}

/* ------------------------------------------- the treap of released ranges */

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

/* The node with key KEY changed its length (or its key, without passing
 * another): bring the largest-range figures on its path up to date. */
static void fix_path(struct va_node *n, uint32_t t, uint64_t key)
{
	if (!t)
		return;
	if (key < n[t].a)
		fix_path(n, n[t].l, key);
	else if (key > n[t].a)
		fix_path(n, n[t].r, key);
	upd(n, t);
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

/* The smallest free range of at least LEN bytes, the lowest-addressed of
 * equal ones, into *BEST (0: none yet), in subtree T: in address order,
 * skipping subtrees without room, and stopping at the first exact fit (the
 * lowest). Returns 1 when it found an exact fit. O(ranges with room) at
 * worst; only chunks past RNG_MAX free ranges come here. */
static int best_fit(const struct va_space *v, uint32_t t, uint64_t len, uint32_t *best)
{
	const struct va_node *n = v->n;
	if (!t || n[t].maxlen < len)
		return 0;
	if (best_fit(v, n[t].l, len, best))
		return 1;
	if (n[t].len >= len && (!*best || n[t].len < n[*best].len)) {
		*best = t;
		if (n[t].len == len)
			return 1;
	}
	return best_fit(v, n[t].r, len, best);
}

/* Add [ADDR, ADDR + BYTES) to the treap at ROOT, joined with the free
 * ranges it touches; the joined range in *ADDR, *BYTES. FLOOR_RULE (the
 * released ranges): a joined range that starts at the floor goes back to
 * the fresh space. A join keeps the node of the range below (or above):
 * its key moves down past nothing. */
static int add_free(struct va_space *v, uint32_t *root, uint64_t *addr, uint64_t *bytes, int floor_rule)
{
	uint64_t a = *addr, len = *bytes;
	uint32_t p = ending_at(v, *root, a);
	uint32_t s = starting_at(v, *root, a + len);
	if (p) {
		a = v->n[p].a;
		len += v->n[p].len;
	}
	if (s)
		len += v->n[s].len;
	*addr = a;
	*bytes = len;
	if (floor_rule && a == v->floor) { /* back to the fresh space */
		if (p)
			remove_key(v, root, v->n[p].a);
		if (s)
			remove_key(v, root, v->n[s].a);
		v->floor += len;
		return 0;
	}
	if (p) {
		if (s)
			remove_key(v, root, v->n[s].a);
		v->n[p].len = len;
		fix_path(v->n, *root, a);
		return 0;
	}
	if (s) {
		v->n[s].a = a;
		v->n[s].len = len;
		fix_path(v->n, *root, a);
		return 0;
	}
	return insert(v, root, a, len);
}

/* ------------------------------------------- allocation address -> chunk */

/* The page table grows to hold slot K (below PT_MAX): the slot, or NULL. */
static uint32_t *pt_grow(struct va_space *v, uint64_t k)
{
	size_t n = v->pt_n ? 2 * v->pt_n : 1024;
	while (n <= k)
		n *= 2;
	uint32_t *pt = realloc(v->pt, n * sizeof *pt);
	if (!pt)
		return NULL;
	memset(pt + v->pt_n, 0, (n - v->pt_n) * sizeof *pt);
	v->pt = pt;
	v->pt_n = n;
	return &v->pt[k];
}

/* The page table's slot for A, or NULL when A is not a page below the top
 * or (GROW 0) past the table. */
static inline uint32_t *pt_slot(struct va_space *v, uint64_t a, int grow)
{
	if ((a & (PT_PAGE - 1)) || a >= v->pt_top)
		return NULL;
	uint64_t k = (v->pt_top - a) / PT_PAGE - 1;
	if (k < v->pt_n)
		return &v->pt[k];
	return grow && k < PT_MAX ? pt_grow(v, k) : NULL;
}

static int at_put(struct va_space *v, uint64_t a, size_t id)
{
	uint32_t *s = pt_slot(v, a, 1);
	if (s) {
		*s = (uint32_t)id + 1;
		return 0;
	}
	return u64map_put(&v->at, a, id);
}

/* 1 with the chunk id of the allocation at A (now forgotten), else 0. */
static int at_del(struct va_space *v, uint64_t a, uint64_t *id)
{
	uint32_t *s = pt_slot(v, a, 0);
	if (s && *s) {
		*id = *s - 1;
		*s = 0;
		return 1;
	}
	return v->at.count && u64map_del(&v->at, a, id);
}

/* ------------------------------------------------------------- chunks */

static void mx_set(struct va_space *v, size_t id)
{
	uint64_t *mx = v->mx;
	size_t i = v->mxn + id;
	uint64_t m = v->ch[id].maxlen;
	if (mx[i] == m)
		return;
	mx[i] = m;
	for (i /= 2; i; i /= 2) {
		m = mx[2 * i] > mx[2 * i + 1] ? mx[2 * i] : mx[2 * i + 1];
		if (mx[i] == m)
			break; /* the figures above are unchanged */
		mx[i] = m;
	}
}

static void mx_rebuild(struct va_space *v)
{
	for (size_t i = 0; i < v->mxn; i++)
		v->mx[v->mxn + i] = i < v->nch ? v->ch[i].maxlen : 0;
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
	if (v->ctx_chunk != SIZE_MAX)
		v->ctx_chunk = to[v->ctx_chunk];   /* a context chunk never dies */
	for (size_t i = 0; i < v->at.cap; i++)
		if (v->at.keys[i] != U64MAP_EMPTY)
			v->at.vals[i] = to[v->at.vals[i]];
	for (size_t i = 0; i < v->pt_n; i++)
		if (v->pt[i])
			v->pt[i] = to[v->pt[i] - 1] + 1;
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

/* Room for one more free range in chunk C (array form). */
static int rng_room(struct va_space *v, struct va_chunk *c)
{
	if (c->nr < (c->capr ? c->capr : RNG_IN))
		return 0;
	struct va_rng *r;
	if (!c->capr) { /* out of the chunk */
		r = v->nspare ? v->spare[--v->nspare] : malloc(RNG_FIRST * sizeof *r);
		if (!r) {
			v->oom = 1;
			return -1;
		}
		memcpy(r, c->in, c->nr * sizeof *r);
		c->r = r;
		c->capr = RNG_FIRST;
		return 0;
	}
	size_t cap = 2 * (size_t)c->capr;
	r = realloc(c->r, cap * sizeof *r);
	if (!r) {
		v->oom = 1;
		return -1;
	}
	c->r = r;
	c->capr = (uint32_t)cap;
	return 0;
}

/* Chunk C is released or becomes a treap: keep its array (a first-sized
 * one) for the next chunk. */
static void rng_drop(struct va_space *v, struct va_chunk *c)
{
	if (!c->capr) {
		c->nr = 0;
		return;
	}
	if (c->capr == RNG_FIRST && VEC_RESERVE(v->spare, v->capspare, v->nspare + 1, 16) == 0)
		v->spare[v->nspare++] = c->r;
	else
		free(c->r);
	c->r = NULL;
	c->nr = c->capr = 0;
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
	struct va_chunk *c = &v->ch[id];
	*c = (struct va_chunk){.start = start, .size = size, .live = 1, .keep = (uint8_t)keep};
	if (size > bytes) {
		c->in[0] = (struct va_rng){start + bytes, size - bytes};
		c->nr = 1;
		c->maxlen = size - bytes;
	}
	v->mx[v->mxn + id] = ~c->maxlen; /* differs: mx_set writes it */
	mx_set(v, id);
	if (!keep && at_put(v, start, id) < 0)
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

static uint64_t rng_max(const struct va_chunk *c)
{
	uint64_t m = 0;
	const struct va_rng *r = c->capr ? c->r : c->in;
	for (uint32_t i = 0; i < c->nr; i++)
		if (r[i].len > m)
			m = r[i].len;
	return m;
}

/* BYTES at the low end of the best-fitting free range of chunk ID: the
 * smallest that holds them, the lowest of equal ones (there is one:
 * newest_fit said so). */
static uint64_t take_in_chunk(struct va_space *v, size_t id, uint64_t bytes)
{
	struct va_chunk *c = &v->ch[id];
	uint64_t a, len;
	if (c->tree) {
		uint32_t k = 0;
		best_fit(v, c->root, bytes, &k);
		a = v->n[k].a;
		len = v->n[k].len;
		if (len > bytes) { /* the key moves up past nothing */
			v->n[k].a = a + bytes;
			v->n[k].len = len - bytes;
			fix_path(v->n, c->root, a + bytes);
		} else {
			remove_key(v, &c->root, a);
		}
		c->live++;
		c->maxlen = v->n[c->root].maxlen;
		mx_set(v, id);
	} else {
		struct va_rng *r = rng(c);
		uint32_t i = c->nr;
		for (uint32_t j = 0; j < c->nr && (i == c->nr || r[i].len != bytes); j++)
			if (r[j].len >= bytes && (i == c->nr || r[j].len < r[i].len))
				i = j;
		a = r[i].a;
		len = r[i].len;
		if (len > bytes) {
			r[i].a = a + bytes;
			r[i].len = len - bytes;
		} else {
			memmove(r + i, r + i + 1, (c->nr - i - 1) * sizeof *r);
			c->nr--;
		}
		c->live++;
		if (len == c->maxlen) {
			c->maxlen = rng_max(c);
			mx_set(v, id);
		}
	}
	if (at_put(v, a, id) < 0)
		v->oom = 1;
	return a;
}

/* Chunk C's free ranges become a treap. */
static int to_tree(struct va_space *v, struct va_chunk *c)
{
	uint32_t root = 0;
	struct va_rng *r = rng(c);
	for (uint32_t i = 0; i < c->nr; i++)
		if (insert(v, &root, r[i].a, r[i].len) < 0)
			return -1; /* (nodes taken stay unused) */
	rng_drop(v, c);
	c->root = root;
	c->tree = 1;
	return 0;
}

/* Give [ADDR, ADDR + BYTES) back to chunk C, joined with the free ranges it
 * touches; the joined range in *ADDR, *BYTES. */
static int give_in_chunk(struct va_space *v, struct va_chunk *c, uint64_t *addr, uint64_t *bytes)
{
	if (c->tree) {
		int rc = add_free(v, &c->root, addr, bytes, 0);
		c->maxlen = v->n[c->root].maxlen;
		return rc;
	}
	struct va_rng *r = rng(c);
	uint64_t a = *addr, len = *bytes, end = a + len;
	uint32_t lo = 0, n = c->nr;
	if (n <= 16) { /* the first range at or above A */
		for (uint32_t i = 0; i < n; i++)
			lo += r[i].a < a;
	} else {
		for (uint32_t hi = n; lo < hi;) {
			uint32_t mid = (lo + hi) / 2;
			if (r[mid].a < a)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	int p = lo > 0 && r[lo - 1].a + r[lo - 1].len == a;
	int s = lo < n && r[lo].a == end;
	uint32_t k;
	if (p && s) {
		k = lo - 1;
		r[k].len += len + r[lo].len;
		memmove(r + lo, r + lo + 1, (n - lo - 1) * sizeof *r);
		c->nr--;
	} else if (p) {
		k = lo - 1;
		r[k].len += len;
	} else if (s) {
		k = lo;
		r[k].a = a;
		r[k].len += len;
	} else if (n == RNG_MAX) {
		if (to_tree(v, c) < 0) {
			v->oom = 1;
			return -1;
		}
		return give_in_chunk(v, c, addr, bytes);
	} else {
		if (rng_room(v, c) < 0)
			return -1;
		r = rng(c);
		k = lo;
		memmove(r + k + 1, r + k, (n - k) * sizeof *r);
		r[k] = (struct va_rng){a, len};
		c->nr++;
	}
	*addr = r[k].a;
	*bytes = r[k].len;
	if (r[k].len > c->maxlen)
		c->maxlen = r[k].len;
	return 0;
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

static uint64_t take_plain(struct va_space *v, uint64_t bytes)
{
	long id;
	uint64_t a, size;
	if (!bytes)
		bytes = 1;
	if ((id = newest_fit(v, bytes)) >= 0)
		return take_in_chunk(v, (size_t)id, bytes);
	size = chunk_size(bytes);
	/* a released range strictly larger than the chunk: the highest one,
	 * at its high end (the range keeps its node, shorter) */
	uint32_t k = size < UINT64_MAX ? highest_fit(v, v->root, size + 1) : 0;
	if (k) {
		v->n[k].len -= size;
		a = v->n[k].a + v->n[k].len;
		fix_path(v->n, v->root, v->n[k].a);
	} else if (v->floor - v->up >= size) {
		v->floor -= size;
		a = v->floor;
	} else {
		a = over(v, size);
	}
	(void)new_chunk(v, a, size, bytes, 0);
	return a;
}

/* After the first allocation once the libraries loaded: their own page,
 * then the context's 414 MiB free, in its own (old) chunk. */
static void libraries_settle(struct va_space *v)
{
	struct va_chunk *c = &v->ch[v->ctx_chunk];
	uint64_t a = c->start, len = VA_CONTEXT_LOW;
	v->ctx = VA_CTX_FREE;
	(void)take_plain(v, VA_LIBRARY_PAGE);   /* never given back */
	if (give_in_chunk(v, c, &a, &len) < 0)
		v->oom = 1;
	mx_set(v, v->ctx_chunk);
}

uint64_t va_take(struct va_space *v, uint64_t bytes)
{
	uint64_t a = take_plain(v, bytes);
	if (v->ctx == VA_CTX_LOADED)
		libraries_settle(v);
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
	/* the 414 MiB at the bottom: the context's oldest chunk, held whole
	 * until va_context_release */
	if (new_chunk(v, t, VA_CONTEXT_LOW, VA_CONTEXT_LOW, 1) < 0)
		return -1;
	v->ctx_chunk = v->nch - 1;
	v->ctx = VA_CTX_HELD;
	if (new_chunk(v, t + 480 * MiB, 32 * MiB, 8 * MiB, 1) < 0 ||
	    new_chunk(v, t + VA_CONTEXT_LOW, 2 * MiB, 0, 1) < 0)
		return -1;
	return 0;
}

int va_context_release(struct va_space *v)
{
	if (v->ctx != VA_CTX_HELD)
		return 0;
	v->ctx = VA_CTX_LOADED;   /* va_take finishes it */
	if (v->floor - v->up > VA_LIBRARY_SKIP)
		v->floor -= VA_LIBRARY_SKIP;  /* the libraries' modules */
	return 0;
}

int va_give(struct va_space *v, uint64_t addr, uint64_t bytes)
{
	uint64_t id;
	if (!bytes)
		bytes = 1;
	if (!at_del(v, addr, &id) || id >= v->nch)
		return -1;
	struct va_chunk *c = &v->ch[id];
	uint64_t a = addr, len = bytes;
	int rc = give_in_chunk(v, c, &a, &len);
	if (c->live)
		c->live--;
	if (!c->live && !c->keep && rc == 0 && a == c->start && len == c->size) {
		/* the chunk is empty: release it */
		if (c->tree)
			remove_key(v, &c->root, a);
		rng_drop(v, c);
		c->maxlen = 0;
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
