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

#include "../base/u64map.h"
#include "../base/vec.h"
#include "ordset.h"


/*
 * A free block: an element of its order's ordset (ordset.h), keyed
 * (address, 0), so the lowest-addressed block of an order is its first.
 * node.l is the free-slot link while the node is unused.
 */
struct bd_node {
	struct ordset_node node;
	uint32_t slot, order;   /* chunk slot, order */
};
ORDSET_FIRST_MEMBER(struct bd_node);

/* ------------------------------------------------------------ state */

struct bd_chunk { uint64_t base; uint32_t top; uint32_t used; /* used: slot in use */ };

struct bd_state {
	struct sim_device *dev;
	uint64_t min_block, chunk_size;
	unsigned min_shift;
	/* free blocks: a set by address per order, and their addresses */
	struct bd_node *nodes;          /* slot 0 unused */
	uint32_t nnodes, free_nodes;
	size_t capnodes;
	uint32_t root[64];              /* per order */
	uint64_t orders;                /* bit k: root[k] != 0 */
	uint64_t nfree;
	struct u64map free_at;          /* free block address -> node */
	struct bd_chunk *chunks;
	uint32_t nchunks;
	size_t capchunks;
	struct u64map live;             /* addr -> chunk slot << 8 | order */
	uint64_t in_use, pool, peak_pool, live_chunks, device_chunks;
};

static const struct policy_knob bd_knobs[] = {
	{"min_block", "<bytes>", "smallest block, a power of two >= 256 (default 256)"},
	{"chunk_size", "<bytes|size>", "device allocation size, a power of two >= min_block "
	 "(default 1GiB)"},
	{NULL, NULL, NULL}};

static unsigned bd_log2(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }

/* Make the block (ORDER, ADDR) of chunk SLOT free. 0, or -1 when out of memory. */
static int bd_free_add(struct bd_state *s, unsigned order, uint64_t addr, uint32_t slot)
{
	uint32_t h = s->free_nodes;
	if (h) {
		s->free_nodes = s->nodes[h].node.l;
	} else {
		if (VEC_RESERVE(s->nodes, s->capnodes, (size_t)s->nnodes + 2, 256) < 0)
			return -1;
		h = ++s->nnodes;
	}
	if (u64map_put(&s->free_at, addr, h) < 0) {
		s->nodes[h].node.l = s->free_nodes;
		s->free_nodes = h;
		return -1;
	}
	s->nodes[h] = (struct bd_node){.node.k1 = addr, .slot = slot, .order = order};
	ordset_insert(ORDSET_NODES(s->nodes), &s->root[order], h);
	s->orders |= 1ull << order;
	s->nfree++;
	return 0;
}

/* Take free block H out of the free set. */
static void bd_free_remove(struct bd_state *s, uint32_t h)
{
	unsigned order = s->nodes[h].order;
	u64map_del(&s->free_at, s->nodes[h].node.k1, NULL);
	ordset_erase(ORDSET_NODES(s->nodes), &s->root[order], h);
	if (!s->root[order])
		s->orders &= ~(1ull << order);
	s->nodes[h].node.l = s->free_nodes;
	s->free_nodes = h;
	s->nfree--;
}

/* The free block (ORDER, ADDR), or 0. */
static uint32_t bd_free_lookup(const struct bd_state *s, unsigned order, uint64_t addr)
{
	uint64_t h;
	if (!u64map_get(&s->free_at, addr, &h) || s->nodes[h].order != order)
		return 0;
	return (uint32_t)h;
}
static int bd_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* Release every wholly free chunk; returns how many. */
static int bd_release_free_chunks(struct bd_state *s)
{
	int n = 0;
	for (uint32_t i = 0; i < s->nchunks; i++) {
		struct bd_chunk *c = &s->chunks[i];
		uint32_t h = c->used ? bd_free_lookup(s, c->top, c->base) : 0;
		if (!h)
			continue;
		bd_free_remove(s, h);
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
	if (slot == s->nchunks && VEC_RESERVE(s->chunks, s->capchunks, (size_t)slot + 1, 16) < 0)
		return -1;
	if (device_malloc(s->dev, bytes, stream, &addr) != DEVICE_OK &&
	    (!bd_release_free_chunks(s) || device_malloc(s->dev, bytes, stream, &addr) != DEVICE_OK))
		return -1;
	if (bd_free_add(s, top, addr, slot) < 0) {
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
	uint64_t fit = s->orders & (~0ull << k);
	if (!fit) {
		if (bd_new_chunk(s, k, req->stream) < 0)
			return POLICY_OOM;
		fit = s->orders & (~0ull << k);
	}
	unsigned j = (unsigned)__builtin_ctzll(fit);
	uint32_t n = ordset_first(ORDSET_NODES(s->nodes), s->root[j]);
	uint64_t addr = s->nodes[n].node.k1;
	uint32_t slot = s->nodes[n].slot;
	if (u64map_put(&s->live, addr, (uint64_t)slot << 8 | k) < 0)
		return POLICY_OOM;
	bd_free_remove(s, n);
	while (j > k) {
		j--;
		if (bd_free_add(s, j, addr + (s->min_block << j), slot) < 0)
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
		uint32_t h = bd_free_lookup(s, k, buddy);
		if (!h)
			break;
		bd_free_remove(s, h);
		if (buddy < addr)
			addr = buddy;
		k++;
	}
	bd_free_add(s, k, addr, slot);   /* out of host memory: never reused */
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
	u64map_init(&s->free_at);
	return 0;
}

static void bd_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct bd_state *s = st;

	emit(ctx, "allocated_bytes", (int64_t)s->in_use);
	emit(ctx, "pool_bytes", (int64_t)s->pool);
	emit(ctx, "peak_pool_bytes", (int64_t)s->peak_pool);
	emit(ctx, "num_chunks", (int64_t)s->live_chunks);
	emit(ctx, "num_device_alloc", (int64_t)s->device_chunks);
	emit(ctx, "free_blocks", (int64_t)s->nfree);
	emit(ctx, "largest_free_block",
	     s->orders ? (int64_t)(s->min_block << bd_log2(s->orders)) : 0);
	emit(ctx, "cached_free_bytes", (int64_t)(s->pool - s->in_use));
}

static void bd_fini(void *st)
{
	struct bd_state *s = st;
	for (uint32_t i = 0; i < s->nchunks; i++)
		if (s->chunks[i].used)
			device_free(s->dev, s->chunks[i].base, s->min_block << s->chunks[i].top);
	free(s->chunks);
	free(s->nodes);
	u64map_free(&s->free_at);
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
