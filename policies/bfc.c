/*
 * bfc.c: TensorFlow/XLA's best-fit-with-coalescing allocator (TSL
 * BFCAllocator, xla/tsl/framework/bfc_allocator.cc), as TensorFlow and JAX
 * use it on the GPU.
 *
 * Rules modelled (checked against bfc_allocator.cc and TF's gpu_device.cc):
 *  - requests round up to 256 B (kMinAllocationSize);
 *  - free chunks sit in 21 bins by size (bin i: [256*2^i, 256*2^(i+1)), the
 *    last >= 256 MiB), each ordered by (size, address); FindChunkPtr takes the
 *    first chunk >= the request in the request's bin, then in larger bins.
 *    Because bins partition sizes in order, that is exactly the smallest
 *    (size, address) >= (request, 0) over all free chunks, which the free
 *    set here finds without walking bins (per exact size below 16 MiB,
 *    through a bitmap; one ordered set above);
 *  - split when chunk >= 2 * request or chunk - request >= the internal
 *    fragmentation limit (fragmentation_fraction * limit, 128 MiB when 0);
 *    the request takes the low end, the tail goes back to a bin;
 *  - free merges with free neighbours of the same region; regions never
 *    merge (the GPU sub-allocator does not support coalescing);
 *  - Extend: fail at once if the request exceeds limit - pool; double the
 *    next region size until it fits the request, else double it after a
 *    success; region = min(next size, room left); the first region is
 *    min(limit, 2 MiB) with allow_growth, the whole limit without; the
 *    first failing device allocation starts a 0.9x back-off loop, once per
 *    allocator;
 *  - garbage collection (TF_ENABLE_GPU_GARBAGE_COLLECTION, on in TF, off in
 *    XLA's Options default): before an OOM, if wholly free regions plus the
 *    room left could hold the request, free them and Extend again;
 *  - limit: memory_limit, else per_process_gpu_memory_fraction * capacity,
 *    else capacity - MinSystemMemory (225 MiB under 2 GiB, else 500 / 1050 /
 *    1536 / 1800 MiB for compute capability <= 6 / 7 / 8 / newer).
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"
#include "ordset.h"

#define BFC_MIN_ALLOC 256ull
#define BFC_NUM_BINS 21
#define BFC_MIB (1ull << 20)
#define BFC_DEFAULT_FRAG (128ull << 20)
#define BFC_UNKNOWN_CAPACITY (80ull << 30)  /* when neither trace nor CLI says */

/*
 * A chunk: a piece of a region, live or free. Free chunks are also the
 * elements of the free set (a sizeset, ordset.h), keyed (k1, k2) =
 * (size, ptr), which is why size and ptr alias the node's key.
 */
struct bfc_chunk {
	union {
		struct ordset_node node;    /* free-set links and key (while free) */
		struct { uint64_t size, ptr; };
	};
	uint32_t prev, next;    /* neighbours inside the region, 0 = none */
	uint32_t region;        /* index into regions */
	uint32_t in_use;        /* also the free-slot link when unused */
};
ORDSET_FIRST_MEMBER(struct bfc_chunk);

/* ------------------------------------------------------------ state */

struct bfc_region { uint64_t ptr, size; uint32_t first; uint32_t live_chunks; };

struct bfc_state {
	struct sim_device *dev;
	/* options */
	int allow_growth, garbage_collection;
	double fragmentation_fraction;
	uint64_t memory_limit, max_frag;
	/* TSL's members */
	uint64_t curr_region_bytes, total_region_bytes;
	int started_backpedal;
	struct bfc_chunk *chunks;      /* slot 0 unused */
	uint32_t nchunks, free_slots;
	size_t capchunks;
	struct bfc_region *regions;
	uint32_t nregions;
	size_t capregions;
	struct sizeset free_set;       /* free chunks by (size, ptr): the bins */
	struct u64map in_use;          /* ptr -> chunk, chunks handed out */
	/* stats, as memory_stats() names them */
	uint64_t bytes_in_use, peak_bytes_in_use, peak_pool_bytes;
	uint64_t largest_alloc_size, num_allocs, num_gc, num_extends;
	uint64_t last_region;          /* size of the region taken last */
	policy_decision_fn dec;        /* decisions sink (policy.h), or NULL */
	void *dec_ctx;
};

static const struct policy_knob bfc_knobs[] = {
	{"preset", "tensorflow|jax|jax_growth",
	 "defaults of TensorFlow (whole limit, GC on), JAX (75% preallocated) or JAX with "
	 "XLA_PYTHON_CLIENT_PREALLOCATE=false"},
	{"allow_growth", "true|false", "grow in doubling regions from 2 MiB instead of one region"},
	{"per_process_gpu_memory_fraction", "<0..1>", "limit = fraction x capacity"},
	{"memory_limit", "<bytes|size>", "limit in bytes (\"10GiB\" accepted)"},
	{"memory_limit_mb", "<MiB>", "limit in MiB (TF's virtual device memory_limit)"},
	{"garbage_collection", "true|false", "free wholly free regions before an OOM"},
	{"fragmentation_fraction", "<0..1>",
	 "split limit = fraction x limit (0: 128 MiB), BFCAllocator::Options"},
	{NULL, NULL, NULL}};

static uint64_t bfc_round(uint64_t n)
{
	return n ? (n + BFC_MIN_ALLOC - 1) & ~(BFC_MIN_ALLOC - 1) : BFC_MIN_ALLOC;
}

/* Bin of a (rounded) size, as BinNumForSize computes it. */
static int bfc_bin(uint64_t size)
{
	uint64_t v = size >> 8;
	int b = v ? 63 - __builtin_clzll(v) : 0;
	return b < BFC_NUM_BINS - 1 ? b : BFC_NUM_BINS - 1;
}

static uint64_t bfc_min_system_memory(uint64_t avail, int cc_major)
{
	if (avail < (1ull << 31))
		return 225 * BFC_MIB;
	if (cc_major <= 6)
		return 500 * BFC_MIB;
	if (cc_major <= 7)
		return 1050 * BFC_MIB;
	if (cc_major <= 8)
		return 1536 * BFC_MIB;
	return 1800 * BFC_MIB;
}

/* ----------------------------------------------------------- chunks */

static uint32_t bfc_new_chunk(struct bfc_state *s)
{
	if (s->free_slots) {
		uint32_t h = s->free_slots;
		s->free_slots = s->chunks[h].in_use;
		return h;
	}
	if (VEC_RESERVE(s->chunks, s->capchunks, (size_t)s->nchunks + 2, 256) < 0)
		return 0;
	return ++s->nchunks;
}

static void bfc_del_chunk(struct bfc_state *s, uint32_t h)
{
	s->chunks[h].in_use = s->free_slots;
	s->free_slots = h;
}

/* ------------------------------------------------------------ growth */

/* The pool's free space now, into D (policy.h): what could not serve. */
static void bfc_free_space(const struct bfc_state *s, struct policy_decision *d)
{
	uint32_t top = sizeset_largest(ORDSET_NODES(s->chunks), &s->free_set);
	d->free_bytes = s->total_region_bytes - s->bytes_in_use;
	d->largest_free = top ? s->chunks[top].size : 0;
	d->free_blocks = s->free_set.count;
}

/* TSL's Extend: one more region, sized by the doubling rule. */
static int bfc_extend(struct bfc_state *s, uint64_t rounded, uint32_t stream, uint64_t id)
{
	uint64_t avail = s->memory_limit - s->total_region_bytes;
	avail = avail / BFC_MIN_ALLOC * BFC_MIN_ALLOC;
	if (rounded > avail)
		return 0;
	int increased = 0;
	uint64_t next = s->curr_region_bytes;  /* the rule's next size, before doubling */
	while (rounded > s->curr_region_bytes) {
		s->curr_region_bytes *= 2;
		increased = 1;
	}
	uint64_t bytes = s->curr_region_bytes < avail ? s->curr_region_bytes : avail;
	uint64_t addr = 0, planned = bytes;
	struct policy_decision d = {.kind = POLICY_DEC_GROW, .what = "region"};
	if (s->dec) {
		d.why = bytes < s->curr_region_bytes ? "the room left under the limit"
			: !s->nregions && !increased ? (s->allow_growth ? "the first region's size"
							: "the whole limit")
			: increased ? "doubled until the request fit"
			: next == 2 * s->last_region ? "twice the last region" : "the next region size";
		d.request = rounded;
		d.req_id = id;
		d.prev_bytes = next;
		bfc_free_space(s, &d);
	}
	int ok = device_malloc(s->dev, bytes, stream, &addr) == DEVICE_OK;
	if (!ok && !s->started_backpedal) {
		s->started_backpedal = 1;
		while (!ok) {
			bytes = bfc_round((uint64_t)((double)bytes * 0.9));
			if (bytes < rounded)
				break;
			ok = device_malloc(s->dev, bytes, stream, &addr) == DEVICE_OK;
		}
	}
	if (!ok)
		return 0;
	if (!increased)
		s->curr_region_bytes *= 2;
	if (VEC_RESERVE(s->regions, s->capregions, (size_t)s->nregions + 1, 16) < 0)
		goto undo;
	uint32_t h = bfc_new_chunk(s);
	if (!h)
		goto undo;
	s->chunks[h] = (struct bfc_chunk){.size = bytes, .ptr = addr, .region = s->nregions};
	sizeset_insert(ORDSET_NODES(s->chunks), &s->free_set, h);
	s->regions[s->nregions++] = (struct bfc_region){addr, bytes, h, 0};
	s->total_region_bytes += bytes;
	if (s->total_region_bytes > s->peak_pool_bytes)
		s->peak_pool_bytes = s->total_region_bytes;
	s->num_extends++;
	s->last_region = bytes;
	if (s->dec) {
		if (bytes != planned)
			d.why = "0.9x back-off after a failed device allocation";
		d.addr = addr;
		d.bytes = bytes;
		d.held = s->total_region_bytes;
		d.count = s->nregions;
		s->dec(s->dec_ctx, &d);
	}
	return 1;
undo:
	device_free(s->dev, addr, bytes);
	return 0;
}

/* Return region I (wholly free: one free chunk) to the device. */
static void bfc_drop_region(struct bfc_state *s, uint32_t i)
{
	struct bfc_region *r = &s->regions[i];
	uint32_t h = r->first;
	sizeset_erase(ORDSET_NODES(s->chunks), &s->free_set, h);
	bfc_del_chunk(s, h);
	device_free(s->dev, r->ptr, r->size);
	s->total_region_bytes -= r->size;
	if (s->dec) {
		struct policy_decision d = {
			.kind = POLICY_DEC_RELEASE, .what = "region",
			.why = "garbage collection: wholly free before an OOM", .addr = r->ptr,
			.bytes = r->size, .held = s->total_region_bytes, .count = s->nregions - 1};
		s->dec(s->dec_ctx, &d);
	}
	/* keep creation order; renumber the chunks of later regions */
	memmove(r, r + 1, (size_t)(s->nregions - i - 1) * sizeof *r);
	s->nregions--;
	for (uint32_t j = i; j < s->nregions; j++)
		for (uint32_t c = s->regions[j].first; c; c = s->chunks[c].next)
			s->chunks[c].region = j;
}

/* TSL's DeallocateFreeRegions. 1 when something was freed. */
static int bfc_gc(struct bfc_state *s, uint64_t rounded)
{
	if (!s->garbage_collection)
		return 0;
	uint64_t free_bytes = 0;
	for (uint32_t i = 0; i < s->nregions; i++)
		if (!s->regions[i].live_chunks)
			free_bytes += s->regions[i].size;
	if (!free_bytes || rounded > s->memory_limit - s->total_region_bytes + free_bytes)
		return 0;
	for (uint32_t i = s->nregions; i-- > 0;)
		if (!s->regions[i].live_chunks)
			bfc_drop_region(s, i);
	s->num_gc++;
	return 1;
}

/* -------------------------------------------------------- alloc/free */

/* TSL's FindChunkPtr: best fit, then the split rule. */
static int bfc_find(struct bfc_state *s, uint64_t rounded, struct alloc_result *res)
{
	uint32_t h = sizeset_find(ORDSET_NODES(s->chunks), &s->free_set, rounded);
	if (!h)
		return 0;
	struct bfc_chunk *c = &s->chunks[h];
	sizeset_erase(ORDSET_NODES(s->chunks), &s->free_set, h);
	if (c->size >= rounded * 2 || c->size - rounded >= s->max_frag) {
		uint32_t t = bfc_new_chunk(s);  /* 0 when out of memory: hand out the whole chunk */
		c = &s->chunks[h];              /* chunks may have moved */
		if (t) {
			s->chunks[t] = (struct bfc_chunk){.size = c->size - rounded,
							  .ptr = c->ptr + rounded, .prev = h,
							  .next = c->next, .region = c->region};
			sizeset_insert(ORDSET_NODES(s->chunks), &s->free_set, t);
			if (c->next)
				s->chunks[c->next].prev = t;
			c->next = t;
			c->size = rounded;
		}
	}
	if (u64map_put(&s->in_use, c->ptr, h) < 0) {
		sizeset_insert(ORDSET_NODES(s->chunks), &s->free_set, h);
		return 0;
	}
	c->in_use = 1;
	s->regions[c->region].live_chunks++;
	s->num_allocs++;
	s->bytes_in_use += c->size;
	if (s->bytes_in_use > s->peak_bytes_in_use)
		s->peak_bytes_in_use = s->bytes_in_use;
	if (c->size > s->largest_alloc_size)
		s->largest_alloc_size = c->size;
	res->addr = c->ptr;
	res->block_bytes = c->size;
	return 1;
}

static int bfc_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct bfc_state *s = st;
	uint64_t rounded = bfc_round(req->bytes);
	if (req->bytes > UINT64_MAX / 4)
		return POLICY_OOM;
	if (bfc_find(s, rounded, res))
		return POLICY_OK;
	if (bfc_extend(s, rounded, req->stream, req->id) && bfc_find(s, rounded, res))
		return POLICY_OK;
	if (bfc_gc(s, rounded) && bfc_extend(s, rounded, req->stream, req->id) &&
	    bfc_find(s, rounded, res))
		return POLICY_OK;
	return POLICY_OOM;
}

static void bfc_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct bfc_state *s = st;
	uint64_t hv;
	(void)block_bytes;
	(void)stream;
	if (!u64map_del(&s->in_use, addr, &hv))
		return;     /* not ours: the engine never does this */
	uint32_t h = (uint32_t)hv;
	struct bfc_chunk *c = &s->chunks[h];
	c->in_use = 0;
	s->bytes_in_use -= c->size;
	s->regions[c->region].live_chunks--;
	uint32_t nx = c->next;
	if (nx && !s->chunks[nx].in_use) {
		struct bfc_chunk *n = &s->chunks[nx];
		sizeset_erase(ORDSET_NODES(s->chunks), &s->free_set, nx);
		c->size += n->size;
		c->next = n->next;
		if (n->next)
			s->chunks[n->next].prev = h;
		bfc_del_chunk(s, nx);
	}
	uint32_t pv = c->prev;
	if (pv && !s->chunks[pv].in_use) {
		struct bfc_chunk *p = &s->chunks[pv];
		sizeset_erase(ORDSET_NODES(s->chunks), &s->free_set, pv);
		p->size += c->size;
		p->next = c->next;
		if (c->next)
			s->chunks[c->next].prev = pv;
		bfc_del_chunk(s, h);
		h = pv;
		c = p;
	}
	sizeset_insert(ORDSET_NODES(s->chunks), &s->free_set, h);
}

/* ---------------------------------------------------------- set up */

static int bfc_cc_major(const struct policy_env *env)
{
	const char *cc = env->header ? env->header->compute_capability : NULL;
	if (!cc || !*cc)
		return 9;   /* unknown: the newest rule */
	return atoi(cc);
}

static int bfc_init(void *st, const char *conf, const struct policy_env *env,
		    char *err, size_t errlen)
{
	struct bfc_state *s = st;
	struct conf_kv kv;
	const char *cur = conf;
	int r, preset = 0; /* 0 tensorflow, 1 jax, 2 jax_growth */
	int growth = -1, gc = -1;
	double fraction = 0, fragf = 0;
	uint64_t limit = 0;
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		if (!strcmp(kv.key, "preset")) {
			if (!strcmp(kv.value, "tensorflow"))
				preset = 0;
			else if (!strcmp(kv.value, "jax"))
				preset = 1;
			else if (!strcmp(kv.value, "jax_growth"))
				preset = 2;
			else {
				snprintf(err, errlen, "bfc: knob 'preset': '%s' is not "
					 "tensorflow, jax or jax_growth", kv.value);
				return -1;
			}
		} else if (!strcmp(kv.key, "allow_growth")) {
			if (conf_bool(&kv, &growth, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "garbage_collection")) {
			if (conf_bool(&kv, &gc, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "per_process_gpu_memory_fraction")) {
			if (conf_double(&kv, 0.0, 1.0, &fraction, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "fragmentation_fraction")) {
			if (conf_double(&kv, 0.0, 1.0, &fragf, err, errlen) < 0)
				return -1;
		} else if (!strcmp(kv.key, "memory_limit")) {
			if (conf_size(kv.value, &limit) < 0 || !limit) {
				snprintf(err, errlen, "bfc: knob 'memory_limit': '%s' is not a "
					 "positive size (bytes, or e.g. 10GiB)", kv.value);
				return -1;
			}
		} else if (!strcmp(kv.key, "memory_limit_mb")) {
			uint64_t mb;
			if (conf_u64(&kv, &mb, err, errlen) < 0)
				return -1;
			if (!mb || mb > (UINT64_MAX >> 21)) {
				snprintf(err, errlen, "bfc: knob 'memory_limit_mb': %s is out of range",
					 kv.value);
				return -1;
			}
			limit = mb * BFC_MIB;
		} else {
			return conf_unknown("bfc", bfc_knobs, kv.key, err, errlen);
		}
	}
	if (r < 0)
		return -1;

	uint64_t cap = env->capacity ? env->capacity : device_capacity(env->dev);
	if (!cap)
		cap = BFC_UNKNOWN_CAPACITY;
	if (preset && fraction == 0)
		fraction = 0.75;   /* XLA_PYTHON_CLIENT_MEM_FRACTION default */
	if (!limit) {
		if (fraction > 0)
			limit = (uint64_t)((double)cap * fraction);
		else {
			uint64_t reserve = bfc_min_system_memory(cap, bfc_cc_major(env));
			limit = cap > reserve ? cap - reserve : cap;
		}
	}
	limit = limit / BFC_MIN_ALLOC * BFC_MIN_ALLOC;
	if (!limit) {
		snprintf(err, errlen, "bfc: the memory limit rounds to 0 bytes");
		return -1;
	}
	memset(s, 0, sizeof *s);
	if (sizeset_init(&s->free_set, 8) < 0) {
		snprintf(err, errlen, "bfc: out of memory");
		return -1;
	}
	s->dev = env->dev;
	s->allow_growth = growth >= 0 ? growth : preset == 2;
	s->garbage_collection = gc >= 0 ? gc : preset == 0;
	s->fragmentation_fraction = fragf;
	s->memory_limit = limit;
	s->max_frag = fragf > 0 ? (uint64_t)(fragf * (double)limit) : BFC_DEFAULT_FRAG;
	s->curr_region_bytes = s->allow_growth ? bfc_round(limit < 2 * BFC_MIB ? limit : 2 * BFC_MIB)
					       : bfc_round(limit);
	u64map_init(&s->in_use);
	return 0;
}

static void bfc_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct bfc_state *s = st;
	uint32_t top = sizeset_largest(ORDSET_NODES(s->chunks), &s->free_set);
	emit(ctx, "bytes_in_use", (int64_t)s->bytes_in_use);
	emit(ctx, "peak_bytes_in_use", (int64_t)s->peak_bytes_in_use);
	emit(ctx, "pool_bytes", (int64_t)s->total_region_bytes);
	emit(ctx, "peak_pool_bytes", (int64_t)s->peak_pool_bytes);
	emit(ctx, "bytes_limit", (int64_t)s->memory_limit);
	emit(ctx, "limit_bytes", (int64_t)s->memory_limit);
	emit(ctx, "num_regions", (int64_t)s->nregions);
	emit(ctx, "num_extends", (int64_t)s->num_extends);
	emit(ctx, "largest_alloc_size", (int64_t)s->largest_alloc_size);
	emit(ctx, "num_allocs", (int64_t)s->num_allocs);
	emit(ctx, "num_garbage_collections", (int64_t)s->num_gc);
	emit(ctx, "largest_free_block", top ? (int64_t)s->chunks[top].size : 0);
	emit(ctx, "largest_free_bin", top ? bfc_bin(s->chunks[top].size) : -1);
	emit(ctx, "cached_free_bytes", (int64_t)(s->total_region_bytes - s->bytes_in_use));
	emit(ctx, "free_chunks", (int64_t)s->free_set.count);
}

/* The decisions hook (policy.h): regions taken and given back; the limit
 * as the standing rule. */
static void bfc_decisions(void *st, policy_decision_fn fn, void *ctx)
{
	struct bfc_state *s = st;
	s->dec = fn;
	s->dec_ctx = ctx;
	if (fn) {
		struct policy_decision d = {
			.kind = POLICY_DEC_RULE, .what = "limit",
			.why = s->allow_growth ? "memory limit; regions from 2 MiB, doubling"
					       : "memory limit; one region of the whole limit",
			.bytes = s->memory_limit, .held = s->total_region_bytes, .count = s->nregions};
		fn(ctx, &d);
	}
}

static void bfc_fini(void *st)
{
	struct bfc_state *s = st;
	for (uint32_t i = 0; i < s->nregions; i++)
		device_free(s->dev, s->regions[i].ptr, s->regions[i].size);
	free(s->chunks);
	free(s->regions);
	sizeset_free(&s->free_set);
	u64map_free(&s->in_use);
	memset(s, 0, sizeof *s);
}

const struct alloc_policy policy_bfc = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "bfc",
	.description = "TensorFlow/XLA best-fit-with-coalescing allocator (TSL BFCAllocator)",
	.state_size = sizeof(struct bfc_state),
	.knobs = bfc_knobs,
	.init = bfc_init,
	.alloc = bfc_alloc,
	.free = bfc_free,
	.stats = bfc_stats,
	.fini = bfc_fini,
	.decisions = bfc_decisions,
};
