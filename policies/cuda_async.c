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
 *  - cudaMemPoolAttrReleaseThreshold (knob release_threshold, default 0):
 *    at a synchronisation the pool returns reserved memory above the
 *    threshold to the system; empty_cache (PyTorch calls cudaMemPoolTrimTo(0))
 *    returns all of it.
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

#include "../sim/u64map.h"

#define CA_ROUND 256ull
#define CA_PAGE (2ull << 20)
#define CA_VA_BYTES (1ull << 40)   /* the pool's virtual range: 1 TiB */
#define CA_GLOBAL 0ull             /* availability class: every stream */
/*
 * A segment of [base, top): a live block or a free range. Segments tile the
 * used part of the range in address order (prev/next), so a freed block
 * finds its neighbours without a lookup. Free ranges are also the nodes of
 * the free set, keyed by (class, size/256 << 32 | offset/256): best fit by
 * (size, address) within an availability class.
 */
struct ca_seg {
	uint64_t k1, k2;        /* free-set key, while free */
	uint32_t l, r, p, pri;  /* free-set links, while free */
	uint64_t start, size;
	uint32_t prev, next;    /* address neighbours, 0 = none; next: free-slot link */
	uint32_t is_free, unused;
};

/* ------------------------------------- intrusive ordered set (treap) */

/*
 * The free ranges form a treap threaded through the segment array itself
 * (node i is segment i, 0 = none), keyed by (k1, k2) and linked to the
 * parent, so a range leaves the set by handle with no search and joining it
 * allocates nothing. Priorities are a hash of the key: the shape, like every
 * result, is the same on every run. Expected O(log n) search, O(1)
 * rotations.
 */
static uint32_t tr_prio(uint64_t a, uint64_t b)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
	x ^= x >> 31; x *= 0xbf58476d1ce4e5b9ull; x ^= x >> 29;
	x *= 0x94d049bb133111ebull; x ^= x >> 32;
	return (uint32_t)x;
}

static inline int tr_lt(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2)
{
	return a1 < b1 || (a1 == b1 && a2 < b2);
}

/* Lift X above its parent, keeping the in-order sequence. */
static void tr_rotate_up(struct ca_seg *n, uint32_t *root, uint32_t x)
{
	uint32_t p = n[x].p, g = n[p].p, c;
	if (n[p].l == x) {
		c = n[x].r;
		n[p].l = c;
		n[x].r = p;
	} else {
		c = n[x].l;
		n[p].r = c;
		n[x].l = p;
	}
	if (c)
		n[c].p = p;
	n[p].p = x;
	n[x].p = g;
	if (!g)
		*root = x;
	else if (n[g].l == p)
		n[g].l = x;
	else
		n[g].r = x;
}

/* Add X, whose key is set and not in the set yet. */
static void tr_insert(struct ca_seg *n, uint32_t *root, uint32_t x)
{
	uint64_t k1 = n[x].k1, k2 = n[x].k2;
	uint32_t cur = *root, par = 0;
	int left = 0;
	while (cur) {
		par = cur;
		left = tr_lt(k1, k2, n[cur].k1, n[cur].k2);
		cur = left ? n[cur].l : n[cur].r;
	}
	n[x].l = n[x].r = 0;
	n[x].p = par;
	n[x].pri = tr_prio(k1, k2);
	if (!par)
		*root = x;
	else if (left)
		n[par].l = x;
	else
		n[par].r = x;
	while (n[x].p && n[n[x].p].pri < n[x].pri)
		tr_rotate_up(n, root, x);
}

/* Take X out of the set. */
static void tr_erase(struct ca_seg *n, uint32_t *root, uint32_t x)
{
	while (n[x].l && n[x].r)
		tr_rotate_up(n, root, n[n[x].l].pri > n[n[x].r].pri ? n[x].l : n[x].r);
	uint32_t c = n[x].l ? n[x].l : n[x].r, p = n[x].p;
	if (c)
		n[c].p = p;
	if (!p)
		*root = c;
	else if (n[p].l == x)
		n[p].l = c;
	else
		n[p].r = c;
}

/* The smallest element >= (k1,k2), or 0. */
static uint32_t tr_lower_bound(const struct ca_seg *n, uint32_t root, uint64_t k1, uint64_t k2)
{
	uint32_t cur = root, best = 0;
	while (cur) {
		if (tr_lt(n[cur].k1, n[cur].k2, k1, k2)) {
			cur = n[cur].r;
		} else {
			best = cur;
			cur = n[cur].l;
		}
	}
	return best;
}

/* The largest element, or 0. */
static uint32_t tr_last(const struct ca_seg *n, uint32_t root)
{
	uint32_t cur = root;
	while (cur && n[cur].r)
		cur = n[cur].r;
	return cur;
}

/* The smallest element, or 0. */
static uint32_t tr_first(const struct ca_seg *n, uint32_t root)
{
	uint32_t cur = root;
	while (cur && n[cur].l)
		cur = n[cur].l;
	return cur;
}

/* The largest element < (k1,k2), or 0. */
static uint32_t tr_before(const struct ca_seg *n, uint32_t root, uint64_t k1, uint64_t k2)
{
	uint32_t cur = root, best = 0;
	while (cur) {
		if (tr_lt(n[cur].k1, n[cur].k2, k1, k2)) {
			best = cur;
			cur = n[cur].r;
		} else {
			cur = n[cur].l;
		}
	}
	return best;
}

/* ------------------------------------------------------------ state */

struct ca_heap { uint64_t *a; size_t n, cap; };   /* max-heap of page numbers */

struct ca_state {
	struct sim_device *dev;
	uint64_t release_threshold;
	uint64_t base, top;          /* virtual range; top: first never-used byte */
	struct pset ranges;          /* (class, size/256 << 32 | off/256) free ranges */
	struct u64map fsize, fcls;   /* free range start -> size, class */
	struct u64map fend;          /* free range end -> start */
	struct u64map live;          /* block addr -> size */
	struct u64map pages;         /* page number -> users * 2 + mapped */
	struct ca_heap idle;         /* candidates for trimming (lazy) */
	uint64_t mapped_pages, busy_pages;
	uint64_t used, used_high, reserved_high;
	uint64_t trims, syncs;
};

static const struct policy_knob ca_knobs[] = {
	{"release_threshold", "<bytes|size>",
	 "reserved bytes the pool keeps across a synchronisation (cudaMemPoolAttrReleaseThreshold)"},
	{NULL, NULL, NULL}};

static uint64_t ca_cls(uint32_t stream) { return (uint64_t)stream + 1; }

static uint64_t ca_key2(const struct ca_state *s, uint64_t addr, uint64_t size)
{
	return (size / CA_ROUND) << 32 | (addr - s->base) / CA_ROUND;
}

static int ca_heap_push(struct ca_heap *h, uint64_t v)
{
	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 64;
		uint64_t *na = realloc(h->a, ncap * sizeof *na);
		if (!na)
			return -1;
		h->a = na;
		h->cap = ncap;
	}
	size_t i = h->n++;
	while (i && h->a[(i - 1) / 2] < v) {
		h->a[i] = h->a[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->a[i] = v;
	return 0;
}

static uint64_t ca_heap_pop(struct ca_heap *h)
{
	uint64_t top = h->a[0], v = h->a[--h->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		uint64_t mv = v;
		if (l < h->n && h->a[l] > mv) { m = l; mv = h->a[l]; }
		if (r < h->n && h->a[r] > mv) m = r;
		if (m == i)
			break;
		h->a[i] = h->a[m];
		i = m;
	}
	if (h->n)
		h->a[i] = v;
	return top;
}

/* ----------------------------------------------------- free ranges */

static void ca_range_remove(struct ca_state *s, uint64_t start)
{
	uint64_t size, cls;
	u64map_del(&s->fsize, start, &size);
	u64map_del(&s->fcls, start, &cls);
	u64map_del(&s->fend, start + size, NULL);
	ps_erase(&s->ranges, cls, ca_key2(s, start, size));
}

/* Make [a, a+size) free to class CLS, merged with same-class neighbours;
 * a range reaching the top lowers the top instead. */
static void ca_range_add(struct ca_state *s, uint64_t a, uint64_t size, uint64_t cls)
{
	uint64_t pstart, psize, pcls, nsize, ncls;
	if (u64map_get(&s->fend, a, &pstart) && u64map_get(&s->fcls, pstart, &pcls) &&
	    pcls == cls) {
		u64map_get(&s->fsize, pstart, &psize);
		ca_range_remove(s, pstart);
		a = pstart;
		size += psize;
	}
	if (u64map_get(&s->fsize, a + size, &nsize) && u64map_get(&s->fcls, a + size, &ncls) &&
	    ncls == cls) {
		ca_range_remove(s, a + size);
		size += nsize;
	}
	if (cls == CA_GLOBAL && a + size == s->top) {
		s->top = a;
		return;
	}
	if (ps_insert(&s->ranges, cls, ca_key2(s, a, size), a) < 0)
		return;    /* out of host memory: the range is simply lost */
	u64map_put(&s->fsize, a, size);
	u64map_put(&s->fcls, a, cls);
	u64map_put(&s->fend, a + size, a);
}

/* Best fit in class CLS: the range's start, or UINT64_MAX. */
static uint64_t ca_fit(const struct ca_state *s, uint64_t cls, uint64_t size)
{
	uint32_t n = ps_lower_bound(&s->ranges, cls, (size / CA_ROUND) << 32);
	if (!n || s->ranges.n[n].k1 != cls)
		return UINT64_MAX;
	return s->ranges.n[n].val;
}

/* ---------------------------------------------------------- pages */

static uint64_t ca_page_info(const struct ca_state *s, uint64_t p)
{
	uint64_t v = 0;
	u64map_get(&s->pages, p, &v);
	return v;
}

/* Pages of [a, a+size) not mapped yet. */
static uint64_t ca_unmapped(const struct ca_state *s, uint64_t a, uint64_t size)
{
	uint64_t n = 0;
	for (uint64_t p = (a - s->base) / CA_PAGE; p <= (a + size - 1 - s->base) / CA_PAGE; p++)
		n += !(ca_page_info(s, p) & 1);
	return n;
}

/* Unmap idle pages, highest first, until reserved <= KEEP. */
static void ca_trim(struct ca_state *s, uint64_t keep)
{
	uint64_t run_lo = 0, run_n = 0;
	while (s->idle.n && s->mapped_pages * CA_PAGE > keep) {
		uint64_t p = ca_heap_pop(&s->idle), v = ca_page_info(s, p);
		if (v != 1)
			continue;   /* stale: busy again or already unmapped */
		u64map_del(&s->pages, p, NULL);
		s->mapped_pages--;
		if (run_n && p + 1 == run_lo) {
			run_lo = p;
			run_n++;
			continue;
		}
		if (run_n)
			device_unmap(s->dev, s->base + run_lo * CA_PAGE, run_n * CA_PAGE);
		run_lo = p;
		run_n = 1;
	}
	if (run_n) {
		device_unmap(s->dev, s->base + run_lo * CA_PAGE, run_n * CA_PAGE);
		s->trims++;
	}
	/* the heap holds stale entries too: rebuild when they dominate */
	if (s->idle.n > 4 * s->mapped_pages + 1024) {
		s->idle.n = 0;
		for (size_t i = 0; i < s->pages.cap; i++)
			if (s->pages.keys[i] != U64MAP_EMPTY && s->pages.vals[i] == 1)
				ca_heap_push(&s->idle, s->pages.keys[i]);
	}
}

/* Map the unmapped pages of [a, a+size) in runs. 0, or -1 (device OOM). */
static int ca_map(struct ca_state *s, uint64_t a, uint64_t size, uint32_t stream)
{
	uint64_t first = (a - s->base) / CA_PAGE, last = (a + size - 1 - s->base) / CA_PAGE;
	for (uint64_t p = first; p <= last;) {
		if (ca_page_info(s, p) & 1) {
			p++;
			continue;
		}
		uint64_t q = p;
		while (q + 1 <= last && !(ca_page_info(s, q + 1) & 1))
			q++;
		if (device_map(s->dev, s->base + p * CA_PAGE, (q - p + 1) * CA_PAGE, stream) != DEVICE_OK)
			return -1;
		for (uint64_t i = p; i <= q; i++) {
			u64map_put(&s->pages, i, 1);
			ca_heap_push(&s->idle, i);   /* idle until the users are counted */
		}
		s->mapped_pages += q - p + 1;
		p = q + 1;
	}
	return 0;
}

/* Add DELTA (+1/-1) users to the pages of [a, a+size). */
static void ca_use(struct ca_state *s, uint64_t a, uint64_t size, int delta)
{
	uint64_t first = (a - s->base) / CA_PAGE, last = (a + size - 1 - s->base) / CA_PAGE;
	for (uint64_t p = first; p <= last; p++) {
		uint64_t v = ca_page_info(s, p);
		if (delta > 0) {
			if (v == 1)
				s->busy_pages++;
			v += 2;
		} else if (v >= 2) {
			v -= 2;
			if (v == 1) {
				s->busy_pages--;
				ca_heap_push(&s->idle, p);
			}
		}
		u64map_put(&s->pages, p, v);
	}
}

/* -------------------------------------------------------- alloc/free */

static int ca_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct ca_state *s = st;
	if (req->bytes > CA_VA_BYTES)
		return POLICY_OOM;
	uint64_t size = req->bytes ? (req->bytes + CA_ROUND - 1) & ~(CA_ROUND - 1) : CA_ROUND;
	uint64_t a = ca_fit(s, ca_cls(req->stream), size), cap = device_capacity(s->dev);
	if (a == UINT64_MAX)
		a = ca_fit(s, CA_GLOBAL, size);
	int from_top = a == UINT64_MAX;
	if (from_top) {
		a = s->top;
		if (a + size > s->base + CA_VA_BYTES)
			return POLICY_OOM;
	}
	if (cap) {
		uint64_t need = ca_unmapped(s, a, size) * CA_PAGE;
		if (device_reserved(s->dev) + need > cap) {
			ca_trim(s, 0);
			need = ca_unmapped(s, a, size) * CA_PAGE;
			if (device_reserved(s->dev) + need > cap)
				return POLICY_OOM;
		}
	}
	uint64_t cls = 0;
	if (from_top) {
		s->top = a + size;
	} else {
		uint64_t rsize;
		u64map_get(&s->fsize, a, &rsize);
		u64map_get(&s->fcls, a, &cls);
		ca_range_remove(s, a);
		if (rsize > size)
			ca_range_add(s, a + size, rsize - size, cls);
	}
	if (ca_map(s, a, size, req->stream) < 0 || u64map_put(&s->live, a, size) < 0) {
		ca_range_add(s, a, size, from_top ? CA_GLOBAL : cls);
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
	return POLICY_OK;
}

static void ca_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct ca_state *s = st;
	uint64_t size;
	(void)block_bytes;
	if (!u64map_del(&s->live, addr, &size))
		return;
	ca_use(s, addr, size, -1);
	s->used -= size;
	ca_range_add(s, addr, size, ca_cls(stream));
}

/* Every pending per-stream range becomes free to all streams. */
static void ca_publish(struct ca_state *s)
{
	uint32_t n;
	while ((n = ps_lower_bound(&s->ranges, 1, 0)) != 0) {
		uint64_t a = s->ranges.n[n].val, size;
		u64map_get(&s->fsize, a, &size);
		ca_range_remove(s, a);
		ca_range_add(s, a, size, CA_GLOBAL);
	}
}

static void ca_control(void *st, enum policy_control ctl, uint64_t arg)
{
	struct ca_state *s = st;
	(void)arg;
	if (ctl == POLICY_CTL_SYNC || ctl == POLICY_CTL_EMPTY_CACHE) {
		s->syncs++;
		ca_publish(s);
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
			if (conf_size(kv.value, &threshold) < 0) {
				snprintf(err, errlen, "cuda_async: knob 'release_threshold': '%s' is "
					 "not a size (bytes, or e.g. 4GiB)", kv.value);
				return -1;
			}
		} else {
			return conf_unknown("cuda_async", ca_knobs, kv.key, err, errlen);
		}
	}
	if (r < 0)
		return -1;
	memset(s, 0, sizeof *s);
	s->dev = env->dev;
	s->release_threshold = threshold;
	s->base = s->top = device_reserve_va(env->dev, CA_VA_BYTES);
	u64map_init(&s->fsize);
	u64map_init(&s->fcls);
	u64map_init(&s->fend);
	u64map_init(&s->live);
	u64map_init(&s->pages);
	return 0;
}

static void ca_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct ca_state *s = st;
	uint32_t top = ps_before(&s->ranges, CA_GLOBAL + 1, 0);
	emit(ctx, "reserved_mem_current", (int64_t)(s->mapped_pages * CA_PAGE));
	emit(ctx, "reserved_mem_high", (int64_t)s->reserved_high);
	emit(ctx, "used_mem_current", (int64_t)s->used);
	emit(ctx, "used_mem_high", (int64_t)s->used_high);
	emit(ctx, "release_threshold", (int64_t)s->release_threshold);
	emit(ctx, "largest_free_block",
	     top && s->ranges.n[top].k1 == CA_GLOBAL ? (int64_t)(s->ranges.n[top].k2 >> 32) * (int64_t)CA_ROUND : 0);
	emit(ctx, "cached_free_bytes", (int64_t)((s->mapped_pages - s->busy_pages) * CA_PAGE));
	emit(ctx, "num_trims", (int64_t)s->trims);
}

static void ca_fini(void *st)
{
	struct ca_state *s = st;
	if (s->mapped_pages)
		device_unmap(s->dev, s->base, s->mapped_pages * CA_PAGE);
	ps_free_all(&s->ranges);
	u64map_free(&s->fsize);
	u64map_free(&s->fcls);
	u64map_free(&s->fend);
	u64map_free(&s->live);
	u64map_free(&s->pages);
	free(s->idle.a);
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
};
