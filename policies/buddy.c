/*
 * buddy.c: a classic binary buddy allocator (Knowlton 1965; Knuth, TAOCP
 * vol. 1, 2.5) over device chunks, as a simple, well-understood reference
 * policy with a known worst case (internal fragmentation up to 2x).
 *
 * Blocks are min_block << k bytes (order k). A request takes the smallest
 * order that holds it; the lowest-addressed free block of the smallest
 * sufficient order is split in halves down to that order (the upper halves
 * become free buddies). A freed block merges with its buddy (offset XOR
 * size inside its chunk) while the buddy is free, up to the whole chunk.
 * Chunks are device allocations of chunk_size bytes (a request larger than
 * chunk_size gets its own chunk of the next power of two); wholly free
 * chunks stay cached until empty_cache, or until a device allocation fails
 * (then they are released and the allocation retried once).
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/u64map.h"
/* ------------------------------------------ ordered set of key pairs */

/*
 * A treap keyed by (k1, k2) with a u64 payload, nodes in one growable array
 * addressed by index (0 = none) so realloc never invalidates a reference.
 * Priorities are a hash of the key, so the shape (and every result) is the
 * same on every run. Expected O(log n) per operation.
 */
struct ps_node { uint64_t k1, k2, val; uint32_t l, r, pri; };
struct pset { struct ps_node *n; uint32_t cap, used, freelist, root; uint64_t count; };

static uint32_t ps_hash(uint64_t a, uint64_t b)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
	x ^= x >> 31; x *= 0xbf58476d1ce4e5b9ull; x ^= x >> 29;
	x *= 0x94d049bb133111ebull; x ^= x >> 32;
	return (uint32_t)x;
}

static int ps_lt(const struct ps_node *a, uint64_t k1, uint64_t k2)
{
	return a->k1 < k1 || (a->k1 == k1 && a->k2 < k2);
}

static void ps_free_all(struct pset *s)
{
	free(s->n);
	memset(s, 0, sizeof *s);
}

/* Trees with keys < (k1,k2) into *L, the rest into *R. */
static void ps_split(struct pset *s, uint32_t t, uint64_t k1, uint64_t k2,
		     uint32_t *l, uint32_t *r)
{
	if (!t) { *l = *r = 0; return; }
	if (ps_lt(&s->n[t], k1, k2)) {
		ps_split(s, s->n[t].r, k1, k2, &s->n[t].r, r);
		*l = t;
	} else {
		ps_split(s, s->n[t].l, k1, k2, l, &s->n[t].l);
		*r = t;
	}
}

static uint32_t ps_merge(struct pset *s, uint32_t a, uint32_t b)
{
	if (!a || !b)
		return a ? a : b;
	if (s->n[a].pri > s->n[b].pri) {
		s->n[a].r = ps_merge(s, s->n[a].r, b);
		return a;
	}
	s->n[b].l = ps_merge(s, a, s->n[b].l);
	return b;
}

static uint32_t ps_ins(struct pset *s, uint32_t t, uint32_t x)
{
	if (!t)
		return x;
	if (s->n[x].pri > s->n[t].pri) {
		ps_split(s, t, s->n[x].k1, s->n[x].k2, &s->n[x].l, &s->n[x].r);
		return x;
	}
	if (ps_lt(&s->n[x], s->n[t].k1, s->n[t].k2))
		s->n[t].l = ps_ins(s, s->n[t].l, x);
	else
		s->n[t].r = ps_ins(s, s->n[t].r, x);
	return t;
}

/* Insert a key not present. 0, or -1 when out of memory. */
static int ps_insert(struct pset *s, uint64_t k1, uint64_t k2, uint64_t val)
{
	uint32_t x = s->freelist;
	if (x) {
		s->freelist = s->n[x].l;
	} else {
		if (s->used + 1 >= s->cap) {
			uint32_t ncap = s->cap ? s->cap * 2 : 64;
			struct ps_node *nn = realloc(s->n, (size_t)ncap * sizeof *nn);
			if (!nn)
				return -1;
			s->n = nn;
			s->cap = ncap;
		}
		x = ++s->used;
	}
	s->n[x] = (struct ps_node){k1, k2, val, 0, 0, ps_hash(k1, k2)};
	s->root = ps_ins(s, s->root, x);
	s->count++;
	return 0;
}

static uint32_t ps_del(struct pset *s, uint32_t t, uint64_t k1, uint64_t k2, int *found)
{
	if (!t)
		return 0;
	struct ps_node *n = &s->n[t];
	if (n->k1 == k1 && n->k2 == k2) {
		uint32_t m = ps_merge(s, n->l, n->r);
		s->n[t].l = s->freelist;
		s->freelist = t;
		*found = 1;
		return m;
	}
	if (ps_lt(n, k1, k2))
		s->n[t].r = ps_del(s, n->r, k1, k2, found);
	else
		s->n[t].l = ps_del(s, n->l, k1, k2, found);
	return t;
}

/* Remove (k1,k2); 1 if it was there. */
static int ps_erase(struct pset *s, uint64_t k1, uint64_t k2)
{
	int found = 0;
	s->root = ps_del(s, s->root, k1, k2, &found);
	s->count -= (uint64_t)found;
	return found;
}

/* The smallest node >= (k1,k2), or 0. */
static uint32_t ps_lower_bound(const struct pset *s, uint64_t k1, uint64_t k2)
{
	uint32_t t = s->root, best = 0;
	while (t) {
		if (ps_lt(&s->n[t], k1, k2)) {
			t = s->n[t].r;
		} else {
			best = t;
			t = s->n[t].l;
		}
	}
	return best;
}

/* The largest node < (k1,k2), or 0. */
static uint32_t ps_before(const struct pset *s, uint64_t k1, uint64_t k2)
{
	uint32_t t = s->root, best = 0;
	while (t) {
		if (ps_lt(&s->n[t], k1, k2)) {
			best = t;
			t = s->n[t].r;
		} else {
			t = s->n[t].l;
		}
	}
	return best;
}

/* ------------------------------------------------------------ state */

struct bd_chunk { uint64_t base; uint32_t top; uint32_t used; /* used: slot in use */ };

struct bd_state {
	struct sim_device *dev;
	uint64_t min_block, chunk_size;
	unsigned min_shift;
	struct pset free_blocks;        /* (order, addr) -> chunk slot */
	struct bd_chunk *chunks;
	uint32_t nchunks, capchunks;
	struct u64map live;             /* addr -> chunk slot << 8 | order */
	uint64_t in_use, pool, peak_pool, live_chunks, device_chunks;
};

static const struct policy_knob bd_knobs[] = {
	{"min_block", "<bytes>", "smallest block, a power of two >= 256 (default 256)"},
	{"chunk_size", "<bytes|size>", "device allocation size, a power of two >= min_block "
	 "(default 1GiB)"},
	{NULL, NULL, NULL}};

static unsigned bd_log2(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }
static int bd_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* Release every wholly free chunk; returns how many. */
static int bd_release_free_chunks(struct bd_state *s)
{
	int n = 0;
	for (uint32_t i = 0; i < s->nchunks; i++) {
		struct bd_chunk *c = &s->chunks[i];
		if (!c->used || !ps_erase(&s->free_blocks, c->top, c->base))
			continue;
		device_free(s->dev, c->base, s->min_block << c->top);
		s->pool -= s->min_block << c->top;
		c->used = 0;
		s->live_chunks--;
		n++;
	}
	return n;
}

static int bd_new_chunk(struct bd_state *s, unsigned order, uint32_t stream)
{
	unsigned top = bd_log2(s->chunk_size) - s->min_shift;
	if (order > top)
		top = order;
	uint64_t bytes = s->min_block << top, addr;
	uint32_t slot = 0;
	while (slot < s->nchunks && s->chunks[slot].used)
		slot++;
	if (slot == s->nchunks && s->nchunks == s->capchunks) {
		uint32_t ncap = s->capchunks ? s->capchunks * 2 : 16;
		struct bd_chunk *nc = realloc(s->chunks, (size_t)ncap * sizeof *nc);
		if (!nc)
			return -1;
		s->chunks = nc;
		s->capchunks = ncap;
	}
	if (device_malloc(s->dev, bytes, stream, &addr) != DEVICE_OK &&
	    (!bd_release_free_chunks(s) || device_malloc(s->dev, bytes, stream, &addr) != DEVICE_OK))
		return -1;
	if (ps_insert(&s->free_blocks, top, addr, slot) < 0) {
		device_free(s->dev, addr, bytes);
		return -1;
	}
	if (slot == s->nchunks)
		s->nchunks++;
	s->chunks[slot] = (struct bd_chunk){addr, top, 1};
	s->pool += bytes;
	if (s->pool > s->peak_pool)
		s->peak_pool = s->pool;
	s->live_chunks++;
	s->device_chunks++;
	return 0;
}

static int bd_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct bd_state *s = st;
	if (req->bytes > (1ull << 50))
		return POLICY_OOM;
	uint64_t need = req->bytes > s->min_block ? req->bytes : s->min_block;
	unsigned k = bd_log2(need - 1) + 1 - s->min_shift;
	if (need == s->min_block)
		k = 0;
	uint32_t n = ps_lower_bound(&s->free_blocks, k, 0);
	if (!n) {
		if (bd_new_chunk(s, k, req->stream) < 0)
			return POLICY_OOM;
		n = ps_lower_bound(&s->free_blocks, k, 0);
	}
	unsigned j = (unsigned)s->free_blocks.n[n].k1;
	uint64_t addr = s->free_blocks.n[n].k2;
	uint32_t slot = (uint32_t)s->free_blocks.n[n].val;
	if (u64map_put(&s->live, addr, (uint64_t)slot << 8 | k) < 0)
		return POLICY_OOM;
	ps_erase(&s->free_blocks, j, addr);
	while (j > k) {
		j--;
		if (ps_insert(&s->free_blocks, j, addr + (s->min_block << j), slot) < 0)
			break;  /* out of host memory: that half is never reused */
	}
	uint64_t bytes = s->min_block << k;
	s->in_use += bytes;
	res->addr = addr;
	res->block_bytes = bytes;
	return POLICY_OK;
}

static void bd_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct bd_state *s = st;
	uint64_t v;
	(void)stream;
	(void)block_bytes;
	if (!u64map_del(&s->live, addr, &v))
		return;
	unsigned k = (unsigned)(v & 0xff);
	uint32_t slot = (uint32_t)(v >> 8);
	const struct bd_chunk *c = &s->chunks[slot];
	s->in_use -= s->min_block << k;
	while (k < c->top) {
		uint64_t buddy = c->base + ((addr - c->base) ^ (s->min_block << k));
		if (!ps_erase(&s->free_blocks, k, buddy))
			break;
		if (buddy < addr)
			addr = buddy;
		k++;
	}
	ps_insert(&s->free_blocks, k, addr, slot);
}

static void bd_control(void *st, enum policy_control ctl, uint64_t arg)
{
	(void)arg;
	if (ctl == POLICY_CTL_EMPTY_CACHE)
		bd_release_free_chunks(st);
}

static int bd_init(void *st, const char *conf, const struct policy_env *env,
		   char *err, size_t errlen)
{
	struct bd_state *s = st;
	struct conf_kv kv;
	const char *cur = conf;
	int r;
	uint64_t min_block = 256, chunk = 1ull << 30;
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		if (!strcmp(kv.key, "min_block")) {
			if (conf_size(kv.value, &min_block) < 0 || !bd_pow2(min_block) ||
			    min_block < 256 || min_block > (1ull << 40)) {
				snprintf(err, errlen, "buddy: knob 'min_block': '%s' is not a power "
					 "of two between 256 B and 1 TiB", kv.value);
				return -1;
			}
		} else if (!strcmp(kv.key, "chunk_size")) {
			if (conf_size(kv.value, &chunk) < 0 || !bd_pow2(chunk) || chunk > (1ull << 50)) {
				snprintf(err, errlen, "buddy: knob 'chunk_size': '%s' is not a power "
					 "of two up to 1 PiB", kv.value);
				return -1;
			}
		} else {
			return conf_unknown("buddy", bd_knobs, kv.key, err, errlen);
		}
	}
	if (r < 0)
		return -1;
	if (chunk < min_block) {
		snprintf(err, errlen, "buddy: knob 'chunk_size' (%llu) is smaller than min_block (%llu)",
			 (unsigned long long)chunk, (unsigned long long)min_block);
		return -1;
	}
	memset(s, 0, sizeof *s);
	s->dev = env->dev;
	s->min_block = min_block;
	s->min_shift = bd_log2(min_block);
	s->chunk_size = chunk;
	u64map_init(&s->live);
	return 0;
}

static void bd_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct bd_state *s = st;
	uint32_t top = ps_before(&s->free_blocks, UINT64_MAX, UINT64_MAX);
	emit(ctx, "allocated_bytes", (int64_t)s->in_use);
	emit(ctx, "pool_bytes", (int64_t)s->pool);
	emit(ctx, "peak_pool_bytes", (int64_t)s->peak_pool);
	emit(ctx, "num_chunks", (int64_t)s->live_chunks);
	emit(ctx, "num_device_alloc", (int64_t)s->device_chunks);
	emit(ctx, "free_blocks", (int64_t)s->free_blocks.count);
	emit(ctx, "largest_free_block",
	     top ? (int64_t)(s->min_block << s->free_blocks.n[top].k1) : 0);
	emit(ctx, "cached_free_bytes", (int64_t)(s->pool - s->in_use));
}

static void bd_fini(void *st)
{
	struct bd_state *s = st;
	for (uint32_t i = 0; i < s->nchunks; i++)
		if (s->chunks[i].used)
			device_free(s->dev, s->chunks[i].base, s->min_block << s->chunks[i].top);
	free(s->chunks);
	ps_free_all(&s->free_blocks);
	u64map_free(&s->live);
	memset(s, 0, sizeof *s);
}

const struct alloc_policy policy_buddy = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "buddy",
	.description = "binary buddy allocator over device chunks (reference policy)",
	.state_size = sizeof(struct bd_state),
	.knobs = bd_knobs,
	.init = bd_init,
	.alloc = bd_alloc,
	.free = bd_free,
	.control = bd_control,
	.stats = bd_stats,
	.fini = bd_fini,
};
