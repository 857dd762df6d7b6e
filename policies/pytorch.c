/*
 * pytorch.c: PyTorch's CUDA caching allocator (native backend), as
 * c10/cuda/CUDACachingAllocator.cpp behaves in torch 2.x, rule for rule
 * (see /work/shared/reference/allocators.md and docs/validation.md, which
 * shows the replay reproducing 54 recorded runs).
 *
 * Algorithm.
 *  - A request of n bytes is rounded (round_size: 512 B granules, or
 *    roundup_power2_divisions steps) and served from the small pool
 *    (<= 1 MiB) or the large pool. Each pool is an ordered set of free
 *    blocks keyed (stream, size, address): best fit is the first block at or
 *    after (stream, rounded, 0), so among equal sizes the lowest address
 *    wins. Oversize rules (max_split_size_mb, max_non_split_rounding_mb)
 *    may reject that block.
 *  - On a miss: garbage collection (only with a memory fraction and
 *    garbage_collection_threshold), then a new segment (2 MiB small, 20 MiB
 *    below 10 MiB, else the request rounded up to 2 MiB); if that fails,
 *    release cached oversize blocks of this stream, then every wholly free
 *    segment (a "retry"), then OOM.
 *  - A block is split when the remainder is worth keeping (small pool:
 *    >= 512 B; large: remainder > 1 MiB and request < max_split_size;
 *    expandable segments: >= 512 B). The allocation takes the low end.
 *  - A freed block merges with free neighbours in its segment and goes back
 *    to its pool under its original stream.
 *  - expandable_segments: one virtual range per (stream, pool), mapped in
 *    pages (2 MiB small, 20 MiB large) on demand; free blocks stay mapped
 *    until empty_cache or the release before an OOM unmaps whole free pages.
 *
 * Invariants: every byte of a segment (or mapped range) belongs to exactly
 * one block; blocks of a segment form an address-ordered doubly linked
 * list; a free mapped block sits in its pool's free-block index, an
 * unmapped one in `unmapped`, an allocated one in the `active` address map.
 *
 * Data structures: a pool's free blocks are indexed per stream (a sorted
 * array of streams), then per size class (exact 512 B classes below 2 MiB,
 * 64 log-spaced classes per power of two above), each class a treap by
 * (size, addr); a two-level bitmap of non-empty classes finds the next
 * class in a few word scans. Walking classes in order gives exactly the
 * (stream, size, addr) order of PyTorch's set, so best fit, the oversize
 * releases and the garbage-collection walk see the blocks in the same
 * order as before; best fit costs O(1) word scans plus a descent of a
 * class treap, which rarely holds more than a few blocks. Unmapped blocks
 * sit in one treap per pool by (stream, addr). The treaps are
 * non-recursive, linked to the parent (priorities from a fixed xorshift
 * sequence, so runs are reproducible), threaded through the blocks
 * themselves; blocks come from a free list and leave a set by handle.
 *
 * Not modelled: cross-stream frees (record_stream events; the traces carry
 * none yet), CUDA graph private pools, the free-memory callbacks.
 */
#include "pytorch_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"

static void stat_add(struct pt_stat *s, uint64_t v)
{
	s->cur += v;
	if (s->cur > s->peak)
		s->peak = s->cur;
}

static void stat_sub(struct pt_stat *s, uint64_t v)
{
	s->cur -= v <= s->cur ? v : s->cur;
}

static int block_is_split(const struct pt_block *b)
{
	return b->prev || b->next;
}


static struct pt_block *block_new(struct pytorch_state *s)
{
	if (!s->free_list) {
		if (VEC_RESERVE(s->chunks, s->capchunks, s->nchunks + 1, 16) < 0)
			return NULL;
		struct pt_block *c = calloc(BLOCKS_PER_CHUNK, sizeof *c);
		if (!c)
			return NULL;
		s->chunks[s->nchunks++] = c;
		for (size_t i = 0; i < BLOCKS_PER_CHUNK; i++) {
			c[i].next = s->free_list;
			s->free_list = &c[i];
		}
	}
	struct pt_block *b = s->free_list;
	s->free_list = b->next;
	memset(b, 0, sizeof *b);
	b->live = 1;
	/* xorshift32: a fixed sequence, so the tree shape is reproducible */
	uint32_t x = s->rng;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	s->rng = x;
	b->prio = x;
	return b;
}

static void block_delete(struct pytorch_state *s, struct pt_block *b)
{
	b->live = 0;
	b->next = s->free_list;
	s->free_list = b;
}

/* ------------------------------------------------------------- treap */

/*
 * Non-recursive treaps linked to the parent, so a block leaves its set by
 * handle (no search from the root) and every operation is a loop. The
 * heap keeps the larger prio on top; ties in key cannot happen (addresses
 * are unique inside a pool). Not the index-based ordset.h the block
 * policies share: blocks here are pointers into slabs, referenced as
 * pointers throughout. The same code serves the unmapped sets (ordered by
 * (stream, addr): SIZED 0) and the size classes of the free-block index
 * (one stream each, ordered by (size, addr): SIZED 1).
 */

/*
 * 1 when (stream, size, addr) A sorts before B; SIZED 0 leaves size out
 * (order by address). Written without branches: in a descent the outcome
 * is a coin toss, so a mispredicted jump per level would cost more than
 * the few extra compares.
 */
static inline int key_lt(uint32_t as, uint64_t az, uint64_t aa,
			 uint32_t bs, uint64_t bz, uint64_t ba, int sized)
{
	az = sized ? az : 0;
	bz = sized ? bz : 0;
	return (as < bs) | ((as == bs) & ((az < bz) | ((az == bz) & (aa < ba))));
}

/* Lift X above its parent, keeping the in-order sequence. */
static void rotate_up(struct pt_block **root, struct pt_block *x)
{
	struct pt_block *p = x->up, *g = p->up, *c;
	if (p->l == x) {
		c = x->r;
		p->l = c;
		x->r = p;
	} else {
		c = x->l;
		p->r = c;
		x->l = p;
	}
	if (c)
		c->up = p;
	p->up = x;
	x->up = g;
	if (!g)
		*root = x;
	else if (g->l == p)
		g->l = x;
	else
		g->r = x;
}

static inline void tr_insert(struct pt_block **root, struct pt_block *b, int sized)
{
	struct pt_block *cur = *root, *par = NULL;
	int left = 0;
	while (cur) {
		par = cur;
		left = key_lt(b->stream, b->size, b->addr, cur->stream, cur->size, cur->addr,
			      sized);
		cur = left ? cur->l : cur->r;
	}
	b->l = b->r = NULL;
	b->up = par;
	if (!par)
		*root = b;
	else if (left)
		par->l = b;
	else
		par->r = b;
	while (b->up && b->up->prio < b->prio)
		rotate_up(root, b);
}

static inline void tr_unlink(struct pt_block **root, struct pt_block *b)
{
	while (b->l && b->r)
		rotate_up(root, b->l->prio > b->r->prio ? b->l : b->r);
	struct pt_block *c = b->l ? b->l : b->r, *p = b->up;
	if (c)
		c->up = p;
	if (!p)
		*root = c;
	else if (p->l == b)
		p->l = c;
	else
		p->r = c;
	b->l = b->r = b->up = NULL;
}

/* The first block >= key (stream, size, addr) in the treap at T, or NULL. */
static inline struct pt_block *tr_lower_bound(struct pt_block *t, uint32_t stream,
					      uint64_t size, uint64_t addr, int sized)
{
	struct pt_block *best = NULL;
	while (t) {
		int lt = key_lt(t->stream, t->size, t->addr, stream, size, addr, sized);
		best = lt ? best : t;
		t = lt ? t->r : t->l;
	}
	return best;
}

static inline struct pt_block *tr_first(struct pt_block *t)
{
	while (t && t->l)
		t = t->l;
	return t;
}

static inline struct pt_block *tr_last(struct pt_block *t)
{
	while (t && t->r)
		t = t->r;
	return t;
}

/* The block after B (which is in a treap) in its treap's order. */
static struct pt_block *tr_next(const struct pt_block *b)
{
	if (b->r)
		return tr_first(b->r);
	while (b->up && b->up->r == b)
		b = b->up;
	return b->up;
}

/* The block before B in its treap's order. */
static struct pt_block *tr_prev(const struct pt_block *b)
{
	if (b->l)
		return tr_last(b->l);
	while (b->up && b->up->l == b)
		b = b->up;
	return b->up;
}

static void tree_insert(struct pt_tree *tr, struct pt_block *b)
{
	tr_insert(&tr->root, b, 0);
	b->set = tr;
	tr->n++;
}

/* Take B out of TR; 0 when it was not there. */
static int tree_remove(struct pt_tree *tr, struct pt_block *b)
{
	if (b->set != tr)
		return 0;
	tr_unlink(&tr->root, b);
	b->set = NULL;
	tr->n--;
	return 1;
}

/* --------------------------------------------- the free-block index */

/*
 * A pool's free mapped blocks, keyed (stream, size, addr) like PyTorch's
 * BlockPool set, but split by stream and then by size class, with a
 * two-level bitmap of the non-empty classes (as in TLSF, Masmano et al.
 * 2004). Best fit is then a look at the request's own class and a few word
 * scans for the next non-empty one, instead of a descent through every
 * free block of the pool; each class treap usually holds a block or two.
 */

static inline uint32_t pt_class(uint64_t size)
{
	uint64_t u = size >> 9;
	if (u < (1u << PT_LIN_LOG))
		return (uint32_t)u;
	int e = 63 - __builtin_clzll(u);
	return (1u << PT_LIN_LOG) + (uint32_t)(e - PT_LIN_LOG) * PT_SUB +
	       (uint32_t)((u >> (e - PT_SUB_LOG)) - PT_SUB);
}

/* The smallest non-empty class >= C in X, or PT_NCLS. */
static inline uint32_t sidx_class_from(const struct pt_sidx *x, uint32_t c)
{
	if (c >= PT_NCLS)
		return PT_NCLS;
	uint32_t w = c >> 6;
	uint64_t m = x->bits[w] & (~0ull << (c & 63));
	if (m)
		return w << 6 | (uint32_t)__builtin_ctzll(m);
	uint32_t sw = w >> 6;
	uint64_t sm = x->summ[sw] & ((~0ull << (w & 63)) << 1);
	while (!sm) {
		if (++sw == PT_NSUMM)
			return PT_NCLS;
		sm = x->summ[sw];
	}
	w = sw << 6 | (uint32_t)__builtin_ctzll(sm);
	return w << 6 | (uint32_t)__builtin_ctzll(x->bits[w]);
}

/* The largest non-empty class < C in X (C <= PT_NCLS), or PT_NCLS. */
static uint32_t sidx_class_before(const struct pt_sidx *x, uint32_t c)
{
	if (c == 0)
		return PT_NCLS;
	c--;
	uint32_t w = c >> 6;
	uint64_t m = x->bits[w] & (~0ull >> (63 - (c & 63)));
	if (m)
		return w << 6 | (uint32_t)(63 - __builtin_clzll(m));
	uint32_t sw = w >> 6;
	uint64_t sm = (w & 63) ? x->summ[sw] & (~0ull >> (64 - (w & 63))) : 0;
	while (!sm) {
		if (sw-- == 0)
			return PT_NCLS;
		sm = x->summ[sw];
	}
	w = sw << 6 | (uint32_t)(63 - __builtin_clzll(sm));
	return w << 6 | (uint32_t)(63 - __builtin_clzll(x->bits[w]));
}

/* sidx_get past its cache: binary search, then maybe a new index. */
static struct pt_sidx *sidx_lookup(struct pt_pool *p, uint32_t stream, int create)
{
	size_t lo = 0, hi = p->nsx;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->sx[mid]->stream < stream)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nsx && p->sx[lo]->stream == stream)
		return p->last = p->sx[lo];
	if (!create)
		return NULL;
	if (VEC_RESERVE(p->sx, p->capsx, p->nsx + 1, 4) < 0)
		return NULL;
	struct pt_sidx *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->stream = stream;
	memmove(p->sx + lo + 1, p->sx + lo, (p->nsx - lo) * sizeof *p->sx);
	p->sx[lo] = x;
	p->nsx++;
	return p->last = x;
}

/* The index of STREAM in pool P, or NULL; with CREATE, a new empty one
 * (NULL only when out of memory). Most requests repeat the last stream. */
static inline struct pt_sidx *sidx_get(struct pt_pool *p, uint32_t stream, int create)
{
	if (p->last && p->last->stream == stream)
		return p->last;
	return sidx_lookup(p, stream, create);
}

/* The first block of X's stream with (size, addr) >= (SIZE, 0), or NULL. */
static inline struct pt_block *sidx_lower_bound(const struct pt_sidx *x, uint64_t size)
{
	uint32_t c = pt_class(size);
	if (c >= PT_NCLS)
		return NULL;
	if (x->root[c]) {
		struct pt_block *t = tr_lower_bound(x->root[c], x->stream, size, 0, 1);
		if (t)
			return t;
	}
	c = sidx_class_from(x, c + 1);
	return c < PT_NCLS ? tr_first(x->root[c]) : NULL;
}

/* The block after B (in an index) within its stream, or NULL. */
static struct pt_block *sidx_next(const struct pt_block *b)
{
	struct pt_block *t = tr_next(b);
	if (t)
		return t;
	uint32_t c = sidx_class_from(b->sx, b->cls + 1);
	return c < PT_NCLS ? tr_first(b->sx->root[c]) : NULL;
}

/* The block before B (in an index) within its stream, or NULL. */
static struct pt_block *sidx_prev(const struct pt_block *b)
{
	struct pt_block *t = tr_prev(b);
	if (t)
		return t;
	uint32_t c = sidx_class_before(b->sx, b->cls);
	return c < PT_NCLS ? tr_last(b->sx->root[c]) : NULL;
}

/* The last block of X's stream, or NULL. */
static struct pt_block *sidx_last(const struct pt_sidx *x)
{
	uint32_t c = sidx_class_before(x, PT_NCLS);
	return c < PT_NCLS ? tr_last(x->root[c]) : NULL;
}

/* The pool's free blocks in (stream, size, addr) order, into a malloc'd
 * array (for walks that free); NULL when out of memory. */
static struct pt_block **pool_snapshot(const struct pt_pool *p, size_t *n)
{
	*n = 0;
	struct pt_block **a = malloc((p->nfree ? p->nfree : 1) * sizeof *a);
	if (!a)
		return NULL;
	for (size_t i = 0; i < p->nsx; i++) {
		const struct pt_sidx *x = p->sx[i];
		for (uint32_t c = sidx_class_from(x, 0); c < PT_NCLS; c = sidx_class_from(x, c + 1))
			for (struct pt_block *b = tr_first(x->root[c]); b; b = tr_next(b))
				a[(*n)++] = b;
	}
	return a;
}

void pool_free_index(struct pt_pool *p)
{
	for (size_t i = 0; i < p->nsx; i++)
		free(p->sx[i]);
	free(p->sx);
	p->sx = NULL;
	p->nsx = p->capsx = 0;
	p->last = NULL;
}

/* --------------------------------------------------- pool membership */

static struct pt_pool *pool_of(struct pytorch_state *s, const struct pt_block *b)
{
	return b->small ? &s->small : &s->large;
}

/* Put a free mapped block into its pool (BlockPool::insert_into_blocks: its
 * garbage-collection age starts now). */
static void pool_insert(struct pytorch_state *s, struct pt_block *b)
{
	struct pt_pool *p = pool_of(s, b);
	struct pt_sidx *x = sidx_get(p, b->stream, 1);
	if (!x) {
		s->oom_error = 1;  /* the block stays out of every set: stop */
		return;
	}
	uint32_t c = pt_class(b->size);
	b->gc_base = p->search_count;
	b->sx = x;
	b->cls = c;
	if (!x->root[c]) {
		x->bits[c >> 6] |= 1ull << (c & 63);
		x->summ[c >> 12] |= 1ull << ((c >> 6) & 63);
	}
	tr_insert(&x->root[c], b, 1);
	p->nfree++;
	if (!b->eseg && block_is_split(b))
		stat_add(&s->inactive_split, b->size);
}

static void pool_remove(struct pytorch_state *s, struct pt_block *b)
{
	struct pt_sidx *x = b->sx;
	if (!x)
		return;
	uint32_t c = b->cls;
	tr_unlink(&x->root[c], b);
	if (!x->root[c]) {
		x->bits[c >> 6] &= ~(1ull << (c & 63));
		if (!x->bits[c >> 6])
			x->summ[c >> 12] &= ~(1ull << ((c >> 6) & 63));
	}
	b->sx = NULL;
	pool_of(s, b)->nfree--;
	if (!b->eseg && block_is_split(b))
		stat_sub(&s->inactive_split, b->size);
}

/* ------------------------------------------------------------ sizes */

int ilog2_u64(uint64_t v)
{
	return 63 - __builtin_clzll(v);
}

static uint64_t pt_divisions(const struct pytorch_state *s, uint64_t size)
{
	int log_size = ilog2_u64(size);
	int idx = log_size > 20 ? log_size - 20 : 0;
	if (idx > PT_DIV_INTERVALS - 1)
		idx = PT_DIV_INTERVALS - 1;
	return s->divisions[idx];
}

static uint64_t pt_round_size(const struct pytorch_state *s, uint64_t size)
{
	if (size < PT_MIN_BLOCK)
		return PT_MIN_BLOCK;
	uint64_t d = pt_divisions(s, size);
	if (d > 1 && size > PT_MIN_BLOCK * d) {
		if ((size & (size - 1)) == 0)
			return size;
		uint64_t floor2 = 1ull << ilog2_u64(size);
		uint64_t step = floor2 >> ilog2_u64(d);
		if (step == 0)
			return floor2 << 1;
		uint64_t low = size & ~(step - 1);
		return low == size ? size : low + step;
	}
	return PT_MIN_BLOCK * ((size + PT_MIN_BLOCK - 1) / PT_MIN_BLOCK);
}

static uint64_t pt_allocation_size(uint64_t size)
{
	if (size <= PT_SMALL_SIZE)
		return PT_SMALL_BUFFER;
	if (size < PT_MIN_LARGE_ALLOC)
		return PT_LARGE_BUFFER;
	return PT_ROUND_LARGE * ((size + PT_ROUND_LARGE - 1) / PT_ROUND_LARGE);
}

/* --------------------------------------------------------- segments */

/* Report a decision (policy.h) about [ADDR, ADDR + BYTES): a GROW carries
 * the request in s->grow. */
static void report(struct pytorch_state *s, enum policy_decision_kind kind, const char *what,
		   uint64_t addr, uint64_t bytes)
{
	struct policy_decision d = {.kind = kind, .why = s->rel_why};
	if (kind == POLICY_DEC_GROW)
		d = s->grow;
	d.kind = kind;
	d.what = what;
	d.addr = addr;
	d.bytes = bytes;
	d.held = s->total_reserved;
	d.count = s->num_device_alloc - s->num_device_free;
	s->dec(s->dec_ctx, &d);
}

/* cudaFree of a whole unsplit cached block (release_block). */
static void release_block(struct pytorch_state *s, struct pt_block *b)
{
	pool_remove(s, b);
	device_free(s->dev, b->addr, b->size);
	s->total_reserved -= b->size;
	stat_sub(&s->reserved, b->size);
	s->num_device_free++;
	if (s->dec)
		report(s, POLICY_DEC_RELEASE, "segment", b->addr, b->size);
	block_delete(s, b);
}

/* cudaMalloc a new segment for the request (alloc_block). */
static int alloc_segment(struct pytorch_state *s, uint64_t alloc_size, uint32_t stream,
			 int small, struct pt_block **out)
{
	uint64_t addr;
	if (device_malloc(s->dev, alloc_size, stream, &addr) != DEVICE_OK)
		return -1;
	struct pt_block *b = block_new(s);
	if (!b) {
		device_free(s->dev, addr, alloc_size);
		s->oom_error = 1;
		return -1;
	}
	b->addr = addr;
	b->size = alloc_size;
	b->stream = stream;
	b->small = (uint8_t)small;
	b->mapped = 1;
	s->total_reserved += alloc_size;
	stat_add(&s->reserved, alloc_size);
	s->num_device_alloc++;
	if (s->dec)
		report(s, POLICY_DEC_GROW, "segment", addr, alloc_size);
	*out = b;
	return 0;
}

/* ------------------------------------------------ expandable segments */

/* Merge free neighbour SRC into DST when both are free and equally mapped
 * (try_merge_blocks); returns the bytes absorbed. */
static uint64_t try_merge(struct pytorch_state *s, struct pt_block *dst, struct pt_block *src)
{
	if (!src || src->allocated || dst->mapped != src->mapped)
		return 0;
	if (src->mapped)
		pool_remove(s, src);
	else
		tree_remove(&pool_of(s, src)->unmapped, src);
	if (dst->prev == src) {
		dst->addr = src->addr;
		dst->prev = src->prev;
		if (dst->prev)
			dst->prev->next = dst;
	} else {
		dst->next = src->next;
		if (dst->next)
			dst->next->prev = dst;
	}
	dst->size += src->size;
	uint64_t sub = src->size;
	block_delete(s, src);
	return sub;
}

/* Map the pages covering the first BYTES of unmapped block B (map_block). */
static int map_block(struct pytorch_state *s, struct pt_block *b, uint64_t bytes)
{
	struct pt_eseg *e = b->eseg;
	struct pt_pool *p = pool_of(s, b);
	uint64_t off = b->addr - e->base;
	uint64_t first = off / e->page;
	uint64_t last = (off + bytes + e->page - 1) / e->page;
	uint64_t maddr = e->base + first * e->page;
	uint64_t msize = (last - first) * e->page;
	if (msize == 0 || device_map(s->dev, maddr, msize, e->page, b->stream) != DEVICE_OK)
		return -1;
	tree_remove(&p->unmapped, b);
	b->mapped = 1;
	if (msize < b->size) {
		struct pt_block *rest = block_new(s);
		if (!rest) {
			s->oom_error = 1;
			return -1;
		}
		rest->addr = b->addr + msize;
		rest->size = b->size - msize;
		rest->stream = b->stream;
		rest->small = b->small;
		rest->eseg = e;
		rest->mapped = 0;
		rest->prev = b;
		rest->next = b->next;
		if (b->next)
			b->next->prev = rest;
		b->next = rest;
		tree_insert(&p->unmapped, rest);
		b->size = msize;
	}
	try_merge(s, b, b->prev);
	try_merge(s, b, b->next);
	pool_insert(s, b);
	s->total_reserved += msize;
	stat_add(&s->reserved, msize);
	s->num_device_alloc++;
	if (s->dec)
		report(s, POLICY_DEC_GROW, "map", maddr, msize);
	return 0;
}

static int allocatable(const struct pt_block *b)
{
	return b && !b->allocated;
}

/* find_expandable_block: a free/unmapped run with room for SIZE, or a new
 * virtual segment. */
static struct pt_block *find_expandable(struct pytorch_state *s, struct pt_pool *p,
					uint32_t stream, uint64_t size)
{
	for (struct pt_block *c = tr_lower_bound(p->unmapped.root, stream, 0, 0, 0);
	     c && c->stream == stream; c = tr_next(c)) {
		struct pt_block *start = allocatable(c->prev) ? c->prev : c;
		uint64_t bytes = 0;
		for (struct pt_block *b = start; bytes < size && allocatable(b); b = b->next)
			bytes += b->size;
		if (bytes >= size)
			return start;
	}
	struct pt_eseg *e = calloc(1, sizeof *e);
	struct pt_block *b = block_new(s);
	if (!e || !b) {
		free(e);
		if (b)
			block_delete(s, b);
		s->oom_error = 1;
		return NULL;
	}
	e->page = p->small ? PT_SMALL_BUFFER : PT_LARGE_BUFFER;
	/* PyTorch reserves 1 1/8 of the device's memory per segment */
	uint64_t want = s->capacity + s->capacity / 8;
	if (!want)
		want = 1ull << 40;
	e->size = (want + e->page - 1) / e->page * e->page;
	e->base = device_reserve_va(s->dev, e->size);
	e->stream = stream;
	e->small = p->small;
	e->next_seg = s->esegs;
	s->esegs = e;
	b->addr = e->base;
	b->size = e->size;
	b->stream = stream;
	b->small = (uint8_t)p->small;
	b->eseg = e;
	b->mapped = 0;
	tree_insert(&p->unmapped, b);
	return b;
}

/* try_allocate_expandable_block: map enough pages for SIZE, return the free
 * mapped block (out of the pool) that covers it. */
static struct pt_block *alloc_expandable(struct pytorch_state *s, struct pt_pool *p,
					 uint32_t stream, uint64_t size)
{
	struct pt_block *c = find_expandable(s, p, stream, size);
	if (!c)
		return NULL;
	if (!c->mapped) {
		/* map_block merges C's free predecessor into C: C survives */
		if (map_block(s, c, c->size < size ? c->size : size) < 0)
			return NULL;
	}
	while (c->size < size) {
		struct pt_block *n = c->next;
		uint64_t rem = size - c->size;
		if (map_block(s, n, rem < n->size ? rem : n->size) < 0)
			return NULL;
		c = n;  /* C (free, mapped) was merged into N */
	}
	pool_remove(s, c);
	return c;
}

/* unmap_block: unmap the whole pages inside free block B. */
static void unmap_block(struct pytorch_state *s, struct pt_block *b)
{
	struct pt_eseg *e = b->eseg;
	struct pt_pool *p = pool_of(s, b);
	uint64_t off = b->addr - e->base;
	uint64_t first = (off + e->page - 1) / e->page;
	uint64_t last = (off + b->size) / e->page;
	if (first >= last)
		return;
	uint64_t uaddr = e->base + first * e->page, usize = (last - first) * e->page;
	pool_remove(s, b);
	uint64_t before = uaddr - b->addr;
	if (before > 0) {
		struct pt_block *f = block_new(s);
		if (!f) {
			s->oom_error = 1;
			pool_insert(s, b);
			return;
		}
		f->addr = b->addr;
		f->size = before;
		f->stream = b->stream;
		f->small = b->small;
		f->eseg = e;
		f->mapped = 1;
		f->prev = b->prev;
		if (f->prev)
			f->prev->next = f;
		f->next = b;
		b->prev = f;
		pool_insert(s, f);
	}
	uint64_t after = b->size - before - usize;
	if (after > 0) {
		struct pt_block *f = block_new(s);
		if (!f) {
			s->oom_error = 1;
			return;
		}
		f->addr = uaddr + usize;
		f->size = after;
		f->stream = b->stream;
		f->small = b->small;
		f->eseg = e;
		f->mapped = 1;
		f->next = b->next;
		if (f->next)
			f->next->prev = f;
		f->prev = b;
		b->next = f;
		pool_insert(s, f);
	}
	b->addr = uaddr;
	b->size = usize;
	b->mapped = 0;
	try_merge(s, b, b->prev);
	try_merge(s, b, b->next);
	tree_insert(&p->unmapped, b);
	device_unmap(s->dev, uaddr, usize, e->page);
	s->total_reserved -= usize;
	stat_sub(&s->reserved, usize);
	s->num_device_free++;
	if (s->dec)
		report(s, POLICY_DEC_RELEASE, "unmap", uaddr, usize);
}

/* ---------------------------------------------------------- releases */

/* release_blocks: free every unsplit cached segment of pool P, unmap every
 * free expandable range; drop virtual segments left wholly unmapped. */
static void release_pool(struct pytorch_state *s, struct pt_pool *p)
{
	size_t n;
	struct pt_block **a = pool_snapshot(p, &n);
	if (!a) {
		s->oom_error = 1;
		return;
	}
	size_t nun = 0;
	for (size_t i = 0; i < n; i++) {
		struct pt_block *b = a[i];
		if (b->eseg)
			a[nun++] = b;   /* unmap after the walk, as PyTorch does */
		else if (!block_is_split(b))
			release_block(s, b);
	}
	for (size_t i = 0; i < nun; i++) {
		struct pt_block *b = a[i];
		unmap_block(s, b);
		if (!b->prev && !b->next && !b->mapped) {
			/* the whole virtual range is unmapped: give it back */
			struct pt_eseg **pe = &s->esegs;
			while (*pe && *pe != b->eseg)
				pe = &(*pe)->next_seg;
			if (*pe)
				*pe = (*pe)->next_seg;
			tree_remove(&p->unmapped, b);
			free(b->eseg);
			block_delete(s, b);
		}
	}
	free(a);
}

/* release_cached_blocks: both pools, large first (empty_cache). */
static void release_cached(struct pytorch_state *s)
{
	release_pool(s, &s->large);
	release_pool(s, &s->small);
}

/* release_available_cached_blocks: with max_split_size set, free cached
 * oversize blocks of this stream: the smallest big enough, else the largest
 * first until enough is freed. */
static int release_available(struct pytorch_state *s, struct pt_pool *p, uint32_t stream,
			     uint64_t size)
{
	if (s->max_split == PT_UNLIMITED)
		return 0;
	uint64_t key = size < s->max_split ? s->max_split : size;
	struct pt_sidx *x = sidx_get(p, stream, 0);
	if (!x)
		return 0;
	struct pt_block *it = sidx_lower_bound(x, key);
	if (!it || it->eseg) {
		/* from the block before it in the stream, largest first */
		struct pt_block *cur = it ? sidx_prev(it) : sidx_last(x);
		if (!cur)
			return 0;
		uint64_t released = 0;
		while (cur && released < key && cur->size >= s->max_split) {
			struct pt_block *prev = sidx_prev(cur);
			if (!cur->eseg) {
				released += cur->size;
				release_block(s, cur);
			}
			cur = prev;
		}
		return released >= key;
	}
	release_block(s, it);
	return 1;
}

/* release_available with its releases named. */
static int release_oversize(struct pytorch_state *s, struct pt_pool *p, uint32_t stream,
			    uint64_t size)
{
	s->rel_why = "oversize cached blocks freed for a request (max_split_size)";
	int r = release_available(s, p, stream, size);
	s->rel_why = NULL;
	return r;
}

/* garbage_collect_cached_blocks: above threshold x allowed, free unsplit
 * cached large blocks at least as old as the mean, until enough is back. */
static void garbage_collect(struct pytorch_state *s)
{
	uint64_t thresh = (uint64_t)(s->gc_threshold * (double)s->allowed);
	if (s->total_reserved <= thresh)
		return;
	uint64_t target = s->total_reserved - thresh, reclaimed = 0;
	struct pt_pool *p = &s->large;
	uint64_t total_age = 0;
	int64_t count = 0;
	size_t n;
	struct pt_block **a = pool_snapshot(p, &n);
	if (!a) {
		s->oom_error = 1;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (!block_is_split(a[i])) {
			total_age += p->search_count - a[i]->gc_base;
			count++;
		}
	}
	int freed = 1;
	while (reclaimed < target && freed && count > 0) {
		double age_threshold = (double)total_age / (double)count;
		freed = 0;
		size_t keep = 0;
		for (size_t i = 0; i < n; i++) {
			struct pt_block *b = a[i];
			uint64_t age = p->search_count - b->gc_base;
			if (!block_is_split(b) && !b->eseg && (double)age >= age_threshold) {
				freed = 1;
				reclaimed += b->size;
				total_age -= age;
				count--;
				s->num_gc_frees++;
				release_block(s, b);
			} else {
				a[keep++] = b;
			}
		}
		n = keep;
	}
	free(a);
}

/* --------------------------------------------------------- alloc/free */

/* get_free_block: best fit in the pool, honouring the oversize rules. */
static struct pt_block *get_free_block(struct pytorch_state *s, struct pt_pool *p,
				       uint32_t stream, uint64_t size)
{
	if (s->set_fraction && s->gc_threshold > 0.0)
		p->search_count++;
	struct pt_sidx *x = sidx_get(p, stream, 0);
	struct pt_block *it = x ? sidx_lower_bound(x, size) : NULL;
	if (!it)
		return NULL;
	if (it->eseg) {
		/* an expandable block counts as the size it can grow to */
		for (;;) {
			struct pt_block *nx = sidx_next(it);
			if (!it->eseg || !nx)
				break;
			uint64_t es_nx = nx->size + (nx->next && !nx->next->mapped ? nx->next->size : 0);
			uint64_t es_it = it->size + (it->next && !it->next->mapped ? it->next->size : 0);
			if (es_nx >= es_it)
				break;
			it = nx;
		}
	}
	if (size < s->max_split && it->size >= s->max_split)
		return NULL;
	if (size >= s->max_split && it->size >= size + s->max_non_split_rounding)
		return NULL;
	pool_remove(s, it);
	return it;
}

static int should_split(const struct pytorch_state *s, const struct pt_block *b, uint64_t size)
{
	uint64_t rem = b->size - size;
	if (b->small || s->expandable)
		return rem >= PT_MIN_BLOCK;
	if (rem > PT_SMALL_SIZE)
		return size < s->max_split;
	return 0;
}

/* The free blocks of pool P on STREAM: bytes, the largest, how many. */
static void pool_free_space(const struct pt_pool *p, uint32_t stream, uint64_t *bytes,
			    uint64_t *largest, uint64_t *count)
{
	*bytes = *largest = *count = 0;
	for (size_t i = 0; i < p->nsx; i++) {
		const struct pt_sidx *x = p->sx[i];
		if (!x || x->stream != stream)
			continue;
		for (uint32_t c = sidx_class_from(x, 0); c < PT_NCLS; c = sidx_class_from(x, c + 1))
			for (struct pt_block *b = tr_first(x->root[c]); b; b = tr_next(b)) {
				if (b->size > *largest)
					*largest = b->size;
				*bytes += b->size;
				(*count)++;
			}
	}
}

/* What a segment (or mapping) about to be taken for a request of SIZE
 * reports: the request, the cached blocks that could not serve it, and
 * why not (s->grow; policy.h). */
static void grow_context(struct pytorch_state *s, const struct pt_pool *p, uint32_t stream,
			 uint64_t size, uint64_t id)
{
	struct policy_decision *d = &s->grow;
	memset(d, 0, sizeof *d);
	d->request = size;
	d->req_id = id;
	pool_free_space(p, stream, &d->free_bytes, &d->largest_free, &d->free_blocks);
	d->why = !d->free_blocks ? (p->small ? "nothing cached in the small pool"
					     : "nothing cached in the large pool")
		 : d->largest_free >= size ? "cached blocks too large to split (max_split_size)"
		 : "no cached block large enough";
}

static int pt_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct pytorch_state *s = st;
	uint64_t size = pt_round_size(s, req->bytes);
	int small = size <= PT_SMALL_SIZE;
	struct pt_pool *p = small ? &s->small : &s->large;
	uint64_t alloc_size = pt_allocation_size(size);
	uint32_t stream = req->stream;
	if (s->oom_error)
		return POLICY_OOM;

	struct pt_block *b = get_free_block(s, p, stream, size);
	if (!b) {
		if (s->dec)
			grow_context(s, p, stream, size, req->id);
		if (s->set_fraction && s->gc_threshold > 0.0) {
			s->rel_why = "garbage collection (garbage_collection_threshold)";
			garbage_collect(s);
		}
		for (int attempt = 0; attempt < 3 && !b; attempt++) {
			if (attempt == 1 && !release_oversize(s, p, stream, size))
				continue;
			if (attempt == 1)
				s->grow.why = "after freeing oversize cached blocks (max_split_size)";
			if (attempt == 2) {
				s->rel_why = "OOM retry: the whole cache freed";
				release_cached(s);
				s->num_alloc_retries++;
				s->grow.why = "after freeing the whole cache (OOM retry)";
			}
			if (s->set_fraction && s->total_reserved + alloc_size > s->allowed)
				continue;
			if (s->expandable)
				b = alloc_expandable(s, p, stream, size);
			else if (alloc_segment(s, alloc_size, stream, small, &b) < 0)
				b = NULL;
		}
	}
	if (!b) {
		s->num_ooms++;
		return POLICY_OOM;
	}

	if (should_split(s, b, size)) {
		struct pt_block *rest = block_new(s);
		if (!rest) {
			s->oom_error = 1;
			pool_insert(s, b);
			return POLICY_OOM;
		}
		uint32_t prio = rest->prio;
		*rest = *b;
		rest->prio = prio;
		rest->l = rest->r = rest->up = NULL;
		rest->set = NULL;
		rest->sx = NULL;
		rest->addr = b->addr + size;
		rest->size = b->size - size;
		rest->prev = b;
		if (rest->next)
			rest->next->prev = rest;
		b->next = rest;
		b->size = size;
		pool_insert(s, rest);
	}
	b->allocated = 1;
	b->requested = req->bytes;
	if (u64map_put(&s->active, b->addr, (uint64_t)(uintptr_t)b) < 0) {
		s->oom_error = 1;
		return POLICY_OOM;
	}
	stat_add(&s->allocated, b->size);
	stat_add(&s->active_b, b->size);
	stat_add(&s->requested, b->requested);
	s->num_allocs++;
	res->addr = b->addr;
	res->block_bytes = b->size;
	return POLICY_OK;
}

static void pt_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct pytorch_state *s = st;
	uint64_t v;
	(void)block_bytes;
	(void)stream;
	if (!u64map_del(&s->active, addr, &v))
		return;  /* not ours: the engine reports unknown frees */
	struct pt_block *b = (struct pt_block *)(uintptr_t)v;
	stat_sub(&s->allocated, b->size);
	stat_sub(&s->active_b, b->size);
	stat_sub(&s->requested, b->requested);
	b->allocated = 0;
	try_merge(s, b, b->prev);
	try_merge(s, b, b->next);
	pool_insert(s, b);
	s->num_frees++;
}

static void pt_control(void *st, enum policy_control ctl, uint64_t arg)
{
	struct pytorch_state *s = st;
	(void)arg;
	if (ctl == POLICY_CTL_EMPTY_CACHE) {
		s->rel_why = "empty_cache";
		release_cached(s);
	}
}

/* The decisions hook (policy.h): segments cudaMalloc'd after a failed
 * best fit, with the cached blocks that could not serve; expandable maps
 * and unmaps; every release (empty_cache, GC, oversize, OOM retry). The
 * limits in force are the standing rules. */
/* Largest free block and all cached free bytes, for the engine's OOM report. */
static void free_walk(const struct pt_pool *p, uint64_t *largest, uint64_t *sum)
{
	for (size_t i = 0; i < p->nsx; i++) {
		const struct pt_sidx *x = p->sx[i];
		for (uint32_t c = sidx_class_from(x, 0); c < PT_NCLS; c = sidx_class_from(x, c + 1)) {
			for (struct pt_block *b = tr_first(x->root[c]); b; b = tr_next(b)) {
				if (b->size > *largest)
					*largest = b->size;
				*sum += b->size;
			}
		}
	}
}

static void pt_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct pytorch_state *s = st;
	uint64_t largest = 0, cached = 0;
	free_walk(&s->small, &largest, &cached);
	free_walk(&s->large, &largest, &cached);
	emit(ctx, "allocated_bytes.all.current", (int64_t)s->allocated.cur);
	emit(ctx, "allocated_bytes.all.peak", (int64_t)s->allocated.peak);
	emit(ctx, "reserved_bytes.all.current", (int64_t)s->reserved.cur);
	emit(ctx, "reserved_bytes.all.peak", (int64_t)s->reserved.peak);
	emit(ctx, "active_bytes.all.current", (int64_t)s->active_b.cur);
	emit(ctx, "active_bytes.all.peak", (int64_t)s->active_b.peak);
	emit(ctx, "inactive_split_bytes.all.current", (int64_t)s->inactive_split.cur);
	emit(ctx, "inactive_split_bytes.all.peak", (int64_t)s->inactive_split.peak);
	emit(ctx, "requested_bytes.all.current", (int64_t)s->requested.cur);
	emit(ctx, "requested_bytes.all.peak", (int64_t)s->requested.peak);
	emit(ctx, "num_device_alloc", (int64_t)s->num_device_alloc);
	emit(ctx, "num_device_free", (int64_t)s->num_device_free);
	emit(ctx, "num_alloc_retries", (int64_t)s->num_alloc_retries);
	emit(ctx, "num_ooms", (int64_t)s->num_ooms);
	emit(ctx, "largest_free_block", (int64_t)largest);
	if (s->set_fraction) /* the engine judges OOMs against this, not the device */
		emit(ctx, "limit_bytes", (int64_t)s->allowed);
	emit(ctx, "cached_free_bytes", (int64_t)cached);
}

const struct alloc_policy policy_pytorch = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "pytorch",
	.description = "PyTorch CUDA caching allocator (native backend), exact to torch 2.x rules",
	.state_size = sizeof(struct pytorch_state),
	.knobs = pytorch_knobs,
	.init = pt_init,
	.alloc = pt_alloc,
	.free = pt_free,
	.control = pt_control,
	.stats = pt_stats,
	.fini = pt_fini,
	.decisions = pt_decisions,
};
