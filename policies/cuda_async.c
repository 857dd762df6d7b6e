/*
 * cuda_async.c: the CUDA stream-ordered memory pool (cudaMallocAsync /
 * cudaFreeAsync on the device's default pool), as PyTorch's
 * backend:cudaMallocAsync and TF_GPU_ALLOCATOR=cuda_malloc_async use it.
 *
 * What the CUDA documentation states, and this model follows:
 *  - a freed block is reusable at once by later work on the same stream
 *    (stream order); by other streams only after a dependency: modelled as
 *    "after the next synchronisation" (POLICY_CTL_SYNC), the conservative
 *    reading (opportunistic reuse once the free completed is not modelled);
 *  - cudaMemPoolAttrReleaseThreshold (knob release_threshold, default 0, as
 *    CUDA's; PyTorch's backend sets UINT64_MAX): at a synchronisation the
 *    pool returns reserved memory above the threshold to the system;
 *    empty_cache (PyTorch calls cudaMemPoolTrimTo(0)) returns all of it;
 *  - host cost (--timing): a request the pool serves is a pool call
 *    (device_pool_call), one that grows the pool costs the growth.
 *
 * What is an ASSUMPTION, to be measured with CUPTI MEMORY_POOL records and
 * cudaMemPoolAttrReservedMemCurrent (the granularity is not documented):
 *  - the pool is one large virtual range; physical memory is mapped into it
 *    in 2 MiB pages (device_map), a page stays mapped while any block
 *    touches it and, once idle, until a trim; trims release the
 *    highest-addressed idle pages first;
 *  - requests round up to 256 B; placement is best fit by (size, address)
 *    among free ranges of the request's stream first, then among ranges
 *    free to every stream, then at the top of the range; free ranges of the
 *    same availability merge with their neighbours;
 *  - when mapping would exceed the capacity, the pool trims every idle page
 *    and tries once more before reporting an OOM.
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/u64map.h"
#include "../base/vec.h"
#include "ordset.h"

#define CA_ROUND 256ull
#define CA_PAGE (2ull << 20)
#define CA_VA_BYTES (1ull << 40)   /* the pool's virtual range: 1 TiB */
#define CA_GLOBAL 0ull             /* availability class: every stream */


/*
 * A segment of [base, top): a live block or a free range. Segments tile the
 * used part of the range in address order (prev/next), so a freed block
 * finds its neighbours without a lookup. A free range is a node of its
 * availability class's set (free to every stream, or to one stream until
 * the next synchronisation), keyed (size, offset) for best fit.
 */
struct ca_seg {
	union {
		struct ordset_node node;    /* set links and key, while free */
		struct { uint64_t units, off; };  /* size / 256, (address - base) / 256 */
	};
	uint64_t cls;           /* availability class, while free */
	uint32_t prev, next;    /* address neighbours, 0 = none; next: free-slot link */
	uint32_t is_free;
};
ORDSET_FIRST_MEMBER(struct ca_seg);

/* ------------------------------------------------------------ state */

struct ca_class { uint64_t cls; struct sizeset ix; };

struct ca_state {
	struct sim_device *dev;
	uint64_t release_threshold;
	uint64_t base, top;          /* virtual range; top: first never-used byte */
	struct ca_seg *segs;         /* slot 0 unused */
	uint32_t nsegs, free_slots;
	size_t capsegs;
	uint32_t last;               /* the segment ending at top, 0 = none */
	struct sizeset global;       /* ranges free to every stream */
	struct ca_class *cl;         /* ranges free to one stream, by class */
	uint32_t ncl;
	size_t capcl;
	struct u64map live;          /* block addr -> segment */
	uint32_t *pages;             /* page number -> users * 2 + mapped */
	uint64_t *idle;              /* bit per page: mapped, no users (pages[] == 1) */
	uint64_t npages;             /* entries of pages[] (all past them are 0) */
	uint64_t mapped_pages, busy_pages;
	uint64_t used, used_high, reserved_high;
	uint64_t trims, syncs;
	/* decisions (policy.h): the sink, the request being mapped for, why
	 * the trim under way happens */
	policy_decision_fn dec;
	void *dec_ctx;
	struct policy_decision grow;
	const char *trim_why;
};

/* Report a decision about [A, A + N) pages (policy.h). */
static void ca_report(struct ca_state *s, enum policy_decision_kind kind, uint64_t a, uint64_t n)
{
	struct policy_decision d = {.kind = kind, .what = "trim", .why = s->trim_why};
	if (kind == POLICY_DEC_GROW)
		d = s->grow;
	d.addr = a;
	d.bytes = n;
	d.held = s->mapped_pages * CA_PAGE;
	d.count = s->mapped_pages;
	s->dec(s->dec_ctx, &d);
}

static const struct policy_knob ca_knobs[] = {
	{"release_threshold", "<bytes|size|max>",
	 "bytes kept across a sync (cudaMemPoolAttrReleaseThreshold; PyTorch's backend: max)"},
	{NULL, NULL, NULL}};

static uint64_t ca_cls(uint32_t stream) { return (uint64_t)stream + 1; }

/* ------------------------------------------------------- segments */

/* A fresh segment slot, or 0 when out of memory. */
static uint32_t ca_new_seg(struct ca_state *s)
{
	if (s->free_slots) {
		uint32_t h = s->free_slots;
		s->free_slots = s->segs[h].next;
		return h;
	}
	if (VEC_RESERVE(s->segs, s->capsegs, (size_t)s->nsegs + 2, 256) < 0)
		return 0;
	return ++s->nsegs;
}

/* Unlink H from the address list and recycle its slot. */
static void ca_drop_seg(struct ca_state *s, uint32_t h)
{
	struct ca_seg *g = &s->segs[h];
	if (g->prev)
		s->segs[g->prev].next = g->next;
	if (g->next)
		s->segs[g->next].prev = g->prev;
	else
		s->last = g->prev;
	g->next = s->free_slots;
	s->free_slots = h;
}

/* The set of class CLS; a new one when CREATE. NULL when there is none (or
 * no memory for it). Classes stay sorted by number. */
static struct sizeset *ca_index(struct ca_state *s, uint64_t cls, int create)
{
	if (cls == CA_GLOBAL)
		return &s->global;
	uint32_t lo = 0, hi = s->ncl;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (s->cl[mid].cls < cls)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->ncl && s->cl[lo].cls == cls)
		return &s->cl[lo].ix;
	if (!create)
		return NULL;
	if (VEC_RESERVE(s->cl, s->capcl, (size_t)s->ncl + 1, 4) < 0)
		return NULL;
	struct sizeset ix;
	if (sizeset_init(&ix, 0) < 0)
		return NULL;
	memmove(&s->cl[lo + 1], &s->cl[lo], (s->ncl - lo) * sizeof *s->cl);
	s->cl[lo] = (struct ca_class){cls, ix};
	s->ncl++;
	return &s->cl[lo].ix;
}

/* Take free range H out of its set. */
static void ca_set_erase(struct ca_state *s, uint32_t h)
{
	sizeset_erase(ORDSET_NODES(s->segs), ca_index(s, s->segs[h].cls, 0), h);
	s->segs[h].is_free = 0;
}

/* Make segment H a range free to class CLS, merged with same-class free
 * neighbours; a free-to-all range reaching the top lowers the top instead. */
static void ca_range_add(struct ca_state *s, uint32_t h, uint64_t cls)
{
	struct ca_seg *g = &s->segs[h];
	uint32_t pv = g->prev, nx = g->next;
	if (pv && s->segs[pv].is_free && s->segs[pv].cls == cls) {
		ca_set_erase(s, pv);
		g->off = s->segs[pv].off;
		g->units += s->segs[pv].units;
		ca_drop_seg(s, pv);
	}
	if (nx && s->segs[nx].is_free && s->segs[nx].cls == cls) {
		ca_set_erase(s, nx);
		g->units += s->segs[nx].units;
		ca_drop_seg(s, nx);
	}
	if (cls == CA_GLOBAL && !g->next) {
		s->top = s->base + g->off * CA_ROUND;
		ca_drop_seg(s, h);
		return;
	}
	struct sizeset *ix = ca_index(s, cls, 1);
	if (!ix)
		return;    /* out of host memory: the range is simply lost */
	g = &s->segs[h];
	g->is_free = 1;
	g->cls = cls;
	sizeset_insert(ORDSET_NODES(s->segs), ix, h);
}

/* Best fit in class CLS: the range's segment, or 0. */
static uint32_t ca_fit(struct ca_state *s, uint64_t cls, uint64_t size)
{
	struct sizeset *ix = ca_index(s, cls, 0);
	return ix ? sizeset_find(ORDSET_NODES(s->segs), ix, size / CA_ROUND) : 0;
}

/* ---------------------------------------------------------- pages */

/* pages[] covers page P (zero-filled growth). 0, or -1 when out of memory. */
static int ca_pages_cover(struct ca_state *s, uint64_t p)
{
	if (p < s->npages)
		return 0;
	uint64_t n = s->npages ? s->npages : 1024;
	while (n <= p)
		n *= 2;
	uint32_t *np = realloc(s->pages, n * sizeof *np);
	if (!np)
		return -1;
	s->pages = np;
	uint64_t *ni = realloc(s->idle, n / 64 * sizeof *ni);
	if (!ni)
		return -1;
	s->idle = ni;
	memset(np + s->npages, 0, (n - s->npages) * sizeof *np);
	memset(ni + s->npages / 64, 0, (n - s->npages) / 64 * sizeof *ni);
	s->npages = n;
	return 0;
}

/* Pages of [a, a+size) not mapped yet (pages[] covers them). */
static uint64_t ca_unmapped(const struct ca_state *s, uint64_t a, uint64_t size)
{
	uint64_t n = 0;
	for (uint64_t p = (a - s->base) / CA_PAGE; p <= (a + size - 1 - s->base) / CA_PAGE; p++)
		n += !(s->pages[p] & 1);
	return n;
}

static void ca_set_idle(struct ca_state *s, uint64_t p, int idle)
{
	if (idle)
		s->idle[p / 64] |= 1ull << (p % 64);
	else
		s->idle[p / 64] &= ~(1ull << (p % 64));
}

/* Unmap idle pages, highest first, until reserved <= KEEP; adjacent pages
 * go in one call. */
static void ca_trim(struct ca_state *s, uint64_t keep)
{
	uint64_t run_lo = 0, run_n = 0, w = s->npages / 64;
	while (w > 0 && s->mapped_pages > s->busy_pages && s->mapped_pages * CA_PAGE > keep) {
		if (!s->idle[w - 1]) {
			w--;
			continue;
		}
		uint64_t p = (w - 1) * 64 + (uint64_t)(63 - __builtin_clzll(s->idle[w - 1]));
		ca_set_idle(s, p, 0);
		s->pages[p] = 0;
		s->mapped_pages--;
		if (run_n && p + 1 == run_lo) {
			run_lo = p;
			run_n++;
		} else {
			if (run_n) {
				device_unmap(s->dev, s->base + run_lo * CA_PAGE, run_n * CA_PAGE, 0);
				if (s->dec)
					ca_report(s, POLICY_DEC_RELEASE, s->base + run_lo * CA_PAGE,
						  run_n * CA_PAGE);
			}
			run_lo = p;
			run_n = 1;
		}
	}
	if (run_n) {
		device_unmap(s->dev, s->base + run_lo * CA_PAGE, run_n * CA_PAGE, 0);
		s->trims++;
		if (s->dec)
			ca_report(s, POLICY_DEC_RELEASE, s->base + run_lo * CA_PAGE, run_n * CA_PAGE);
	}
}

/* Map the unmapped pages of [a, a+size) in runs. 0, or -1 (device OOM). */
static int ca_map(struct ca_state *s, uint64_t a, uint64_t size, uint32_t stream)
{
	uint64_t first = (a - s->base) / CA_PAGE, last = (a + size - 1 - s->base) / CA_PAGE;
	for (uint64_t p = first; p <= last;) {
		if (s->pages[p] & 1) {
			p++;
			continue;
		}
		uint64_t q = p;
		while (q + 1 <= last && !(s->pages[q + 1] & 1))
			q++;
		if (device_map(s->dev, s->base + p * CA_PAGE, (q - p + 1) * CA_PAGE, 0, stream) != DEVICE_OK)
			return -1;
		for (uint64_t i = p; i <= q; i++) {
			s->pages[i] = 1;
			ca_set_idle(s, i, 1);   /* idle until the users are counted */
		}
		s->mapped_pages += q - p + 1;
		if (s->dec)
			ca_report(s, POLICY_DEC_GROW, s->base + p * CA_PAGE, (q - p + 1) * CA_PAGE);
		p = q + 1;
	}
	return 0;
}

/* Add DELTA (+1/-1) users to the pages of [a, a+size). */
static void ca_use(struct ca_state *s, uint64_t a, uint64_t size, int delta)
{
	uint64_t first = (a - s->base) / CA_PAGE, last = (a + size - 1 - s->base) / CA_PAGE;
	for (uint64_t p = first; p <= last; p++) {
		uint32_t v = s->pages[p];
		if (delta > 0) {
			if (v == 1) {
				s->busy_pages++;
				ca_set_idle(s, p, 0);
			}
			v += 2;
		} else if (v >= 2) {
			v -= 2;
			if (v == 1) {
				s->busy_pages--;
				ca_set_idle(s, p, 1);
			}
		}
		s->pages[p] = v;
	}
}

/* -------------------------------------------------------- alloc/free */

static int ca_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct ca_state *s = st;
	if (req->bytes > CA_VA_BYTES)
		return POLICY_OOM;
	uint64_t size = req->bytes ? (req->bytes + CA_ROUND - 1) & ~(CA_ROUND - 1) : CA_ROUND;
	uint64_t cap = device_capacity(s->dev), a;
	uint32_t h = ca_fit(s, ca_cls(req->stream), size);
	if (!h)
		h = ca_fit(s, CA_GLOBAL, size);
	int from_top = !h;
	if (from_top) {
		a = s->top;
		if (a + size > s->base + CA_VA_BYTES)
			return POLICY_OOM;
	} else {
		a = s->base + s->segs[h].off * CA_ROUND;
	}
	if (ca_pages_cover(s, (a + size - 1 - s->base) / CA_PAGE) < 0)
		return POLICY_OOM;
	if (s->dec) {
		struct policy_decision *d = &s->grow;
		uint32_t top = sizeset_largest(ORDSET_NODES(s->segs), &s->global);
		memset(d, 0, sizeof *d);
		d->kind = POLICY_DEC_GROW;
		d->what = "map";
		d->why = from_top ? "no free range fits: the pool's top" : "pages of a free range unmapped";
		d->request = size;
		d->req_id = req->id;
		d->free_bytes = (s->mapped_pages - s->busy_pages) * CA_PAGE;
		d->largest_free = top ? s->segs[top].units * CA_ROUND : 0;
		d->free_blocks = s->global.count;
	}
	if (cap) {
		uint64_t need = ca_unmapped(s, a, size) * CA_PAGE;
		if (device_reserved(s->dev) + need > cap) {
			s->trim_why = "trim to 0 before mapping past the capacity";
			ca_trim(s, 0);
			need = ca_unmapped(s, a, size) * CA_PAGE;
			if (device_reserved(s->dev) + need > cap)
				return POLICY_OOM;
		}
	}
	uint64_t cls = 0;
	if (from_top) {
		h = ca_new_seg(s);
		if (!h)
			return POLICY_OOM;
		s->segs[h] = (struct ca_seg){.units = size / CA_ROUND, .off = (a - s->base) / CA_ROUND,
					     .prev = s->last};
		if (s->last)
			s->segs[s->last].next = h;
		s->last = h;
		s->top = a + size;
	} else {
		struct ca_seg *g = &s->segs[h];
		uint64_t rsize = g->units * CA_ROUND;
		cls = g->cls;
		ca_set_erase(s, h);
		g->units = size / CA_ROUND;
		if (rsize > size) {
			uint32_t t = ca_new_seg(s);
			g = &s->segs[h];     /* segs may have moved */
			if (!t) {
				g->units = rsize / CA_ROUND;
				ca_range_add(s, h, cls);
				return POLICY_OOM;
			}
			s->segs[t] = (struct ca_seg){.units = (rsize - size) / CA_ROUND,
						     .off = (a + size - s->base) / CA_ROUND,
						     .prev = h, .next = g->next};
			if (g->next)
				s->segs[g->next].prev = t;
			else
				s->last = t;
			g->next = t;
			ca_range_add(s, t, cls);
		}
	}
	uint64_t mapped_before = s->mapped_pages;
	if (ca_map(s, a, size, req->stream) < 0 || u64map_put(&s->live, a, h) < 0) {
		ca_range_add(s, h, from_top ? CA_GLOBAL : cls);
		return POLICY_OOM;
	}
	ca_use(s, a, size, +1);
	s->used += size;
	if (s->used > s->used_high)
		s->used_high = s->used;
	if (s->mapped_pages * CA_PAGE > s->reserved_high)
		s->reserved_high = s->mapped_pages * CA_PAGE;
	res->addr = a;
	res->block_bytes = size;
	/* a cudaMallocAsync that grew the pool cost what growing did (its
	 * device_map); one the pool served from memory it held, a pool call */
	if (s->mapped_pages == mapped_before)
		device_pool_call(s->dev, 0);
	return POLICY_OK;
}

static void ca_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct ca_state *s = st;
	uint64_t h;
	(void)block_bytes;
	if (!u64map_del(&s->live, addr, &h))
		return;
	uint64_t size = s->segs[h].units * CA_ROUND;
	ca_use(s, addr, size, -1);
	s->used -= size;
	ca_range_add(s, (uint32_t)h, ca_cls(stream));
	device_pool_call(s->dev, 1);
}

/* Every pending per-stream range becomes free to all streams. */
static void ca_publish(struct ca_state *s)
{
	for (uint32_t i = 0; i < s->ncl; i++) {
		uint32_t h;
		while ((h = sizeset_find(ORDSET_NODES(s->segs), &s->cl[i].ix, 0)) != 0) {
			ca_set_erase(s, h);
			ca_range_add(s, h, CA_GLOBAL);
		}
	}
}

static void ca_control(void *st, enum policy_control ctl, uint64_t arg)
{
	struct ca_state *s = st;
	(void)arg;
	if (ctl == POLICY_CTL_SYNC || ctl == POLICY_CTL_EMPTY_CACHE) {
		s->syncs++;
		ca_publish(s);
		s->trim_why = ctl == POLICY_CTL_SYNC ? "above the release threshold at a sync"
						     : "empty_cache (trim to 0)";
		ca_trim(s, ctl == POLICY_CTL_SYNC ? s->release_threshold : 0);
	}
}

/* ---------------------------------------------------------- set up */

static int ca_init(void *st, const char *conf, const struct policy_env *env,
		   char *err, size_t errlen)
{
	struct ca_state *s = st;
	struct conf_kv kv;
	const char *cur = conf;
	int r;
	uint64_t threshold = 0;
	while ((r = conf_next(&cur, &kv, err, errlen)) > 0) {
		if (!strcmp(kv.key, "release_threshold")) {
			/* "max": UINT64_MAX, what PyTorch's backend sets */
			if (!strcmp(kv.value, "max"))
				threshold = UINT64_MAX;
			else if (conf_size(kv.value, &threshold) < 0) {
				snprintf(err, errlen, "cuda_async: knob 'release_threshold': '%s' is "
					 "not a size (bytes, or e.g. 4GiB) or max", kv.value);
				return -1;
			}
		} else {
			return conf_unknown("cuda_async", ca_knobs, kv.key, err, errlen);
		}
	}
	if (r < 0)
		return -1;
	memset(s, 0, sizeof *s);
	if (sizeset_init(&s->global, 0) < 0) {
		snprintf(err, errlen, "cuda_async: out of memory");
		return -1;
	}
	s->dev = env->dev;
	s->release_threshold = threshold;
	s->base = s->top = device_reserve_va(env->dev, CA_VA_BYTES);
	u64map_init(&s->live);
	return 0;
}

static void ca_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct ca_state *s = st;
	uint32_t top = sizeset_largest(ORDSET_NODES(s->segs), &s->global);
	emit(ctx, "reserved_mem_current", (int64_t)(s->mapped_pages * CA_PAGE));
	emit(ctx, "reserved_mem_high", (int64_t)s->reserved_high);
	emit(ctx, "used_mem_current", (int64_t)s->used);
	emit(ctx, "used_mem_high", (int64_t)s->used_high);
	/* max (UINT64_MAX) shows as the largest value a stat holds */
	emit(ctx, "release_threshold",
	     s->release_threshold > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)s->release_threshold);
	emit(ctx, "largest_free_block",
	     top ? (int64_t)s->segs[top].units * (int64_t)CA_ROUND : 0);
	emit(ctx, "cached_free_bytes", (int64_t)((s->mapped_pages - s->busy_pages) * CA_PAGE));
	emit(ctx, "num_trims", (int64_t)s->trims);
}

/* The decisions hook (policy.h): pages mapped for a request, trims; the
 * release threshold as the standing rule. */
static void ca_decisions(void *st, policy_decision_fn fn, void *ctx)
{
	struct ca_state *s = st;
	s->dec = fn;
	s->dec_ctx = ctx;
	if (fn) {
		struct policy_decision d = {
			.kind = POLICY_DEC_RULE, .what = "release_threshold",
			.why = "reserved bytes kept across a sync (cudaMemPoolAttrReleaseThreshold)",
			.bytes = s->release_threshold, .held = s->mapped_pages * CA_PAGE};
		fn(ctx, &d);
	}
}

static void ca_fini(void *st)
{
	struct ca_state *s = st;
	if (s->mapped_pages)
		device_unmap(s->dev, s->base, s->mapped_pages * CA_PAGE, 0);
	free(s->segs);
	free(s->pages);
	sizeset_free(&s->global);
	for (uint32_t i = 0; i < s->ncl; i++)
		sizeset_free(&s->cl[i].ix);
	free(s->cl);
	u64map_free(&s->live);
	free(s->idle);
	memset(s, 0, sizeof *s);
}

const struct alloc_policy policy_cuda_async = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "cuda_async",
	.description = "CUDA stream-ordered pool (cudaMallocAsync) with a release threshold",
	.state_size = sizeof(struct ca_state),
	.knobs = ca_knobs,
	.init = ca_init,
	.alloc = ca_alloc,
	.free = ca_free,
	.control = ca_control,
	.stats = ca_stats,
	.fini = ca_fini,
	.decisions = ca_decisions,
};
