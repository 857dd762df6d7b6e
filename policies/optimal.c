/*
 * optimal.c: the offline lower bound. It sees the whole trace first (the
 * engine's pre-pass), so it knows every buffer's size and lifetime.
 *
 * Two figures come out of the pre-pass:
 *  - live_peak_bytes: the peak of live requested bytes, the floor no
 *    allocator can beat;
 *  - a placement plan: an offset for every request inside one arena, the
 *    dynamic storage allocation problem (NP-hard in general; Garey and
 *    Johnson). Two deterministic heuristics are run and the smaller plan
 *    kept: (a) best fit in trace order over the free gaps of the arena
 *    (ordered set of gaps by (size, offset), neighbours merged), O(n log n);
 *    (b) for at most 2048 buffers, "greedy by size" (largest first, each at
 *    the lowest offset that no time-overlapping placed buffer occupies), the
 *    heuristic TFLite and MLIR use, which is usually tighter but O(n^2).
 * Sizes are rounded up to 256 B so every address keeps cudaMalloc's
 * alignment. The replay serves each request at its planned offset inside ONE
 * device allocation of the plan's size, made at the first request. A request
 * the plan does not know, or whose planned range is still occupied (the
 * replay diverged from the trace order), gets its own device allocation and
 * counts as a plan miss.
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/u64map.h"

#define OP_ROUND 256ull
#define OP_NEVER UINT32_MAX      /* a buffer the trace never frees */
#define OP_GREEDY_MAX 2048       /* buffers (b) still handles quickly */
#define OP_FREE_BIT 0x80000000u  /* event list: the entry is a free */
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

struct op_buf { uint64_t id, size, off; uint32_t start, end; };

struct op_state {
	struct sim_device *dev;
	struct op_buf *bufs;
	uint32_t nbufs, capbufs;
	uint32_t *events;              /* buffer index, | OP_FREE_BIT for a free */
	uint32_t nevents, capevents;
	struct u64map by_addr;         /* pre-pass: trace addr -> live buffer */
	struct u64map by_id;           /* trace id -> buffer */
	uint64_t live, live_peak, plan_bytes, plan_a, plan_b;
	int planned, too_many;
	/* replay */
	uint64_t arena;                /* 0 until the first request */
	struct pset live_iv;           /* (offset, 0) -> size of served blocks */
	struct u64map fallback;        /* addr -> bytes of own device allocations */
	uint64_t arena_live, misses;
};

static const struct policy_knob op_knobs[] = {{NULL, NULL, NULL}};

static uint64_t op_round(uint64_t n)
{
	return n ? (n + OP_ROUND - 1) & ~(OP_ROUND - 1) : OP_ROUND;
}

static int op_push_event(struct op_state *s, uint32_t v)
{
	if (s->nevents == s->capevents) {
		uint32_t ncap = s->capevents ? s->capevents * 2 : 1024;
		uint32_t *ne = realloc(s->events, (size_t)ncap * sizeof *ne);
		if (!ne)
			return -1;
		s->events = ne;
		s->capevents = ncap;
	}
	s->events[s->nevents++] = v;
	return 0;
}

static void op_end(struct op_state *s, uint32_t i)
{
	s->bufs[i].end = s->nevents;
	s->live -= s->bufs[i].size;  /* floor counts requested bytes */
}

static int op_prepass(void *st, const struct trace_rec *rec)
{
	struct op_state *s = st;
	const struct trace_mem *m = &rec->u.mem;
	uint64_t v;
	if (s->planned || (rec->type != TREC_ALLOC && rec->type != TREC_FREE))
		return 0;
	if (m->kind == TMEM_PAGEABLE || m->kind == TMEM_PINNED || m->addr == U64MAP_EMPTY)
		return 0;   /* host memory: the engine skips it too */
	if (rec->type == TREC_FREE) {
		if (!u64map_del(&s->by_addr, m->addr, &v))
			return 0;
		op_end(s, (uint32_t)v);
		return op_push_event(s, (uint32_t)v | OP_FREE_BIT);
	}
	if (s->nbufs >= OP_FREE_BIT - 1)
		return -1;
	if (u64map_get(&s->by_addr, m->addr, &v)) {
		op_end(s, (uint32_t)v);   /* re-allocated without a free: ends here */
		if (op_push_event(s, (uint32_t)v | OP_FREE_BIT) < 0)
			return -1;
	}
	if (s->nbufs == s->capbufs) {
		uint32_t ncap = s->capbufs ? s->capbufs * 2 : 1024;
		struct op_buf *nb = realloc(s->bufs, (size_t)ncap * sizeof *nb);
		if (!nb)
			return -1;
		s->bufs = nb;
		s->capbufs = ncap;
	}
	uint32_t i = s->nbufs;
	s->bufs[i] = (struct op_buf){m->id, m->bytes, 0, s->nevents, OP_NEVER};
	if (u64map_put(&s->by_addr, m->addr, i) < 0 || op_push_event(s, i) < 0)
		return -1;
	if (!u64map_get(&s->by_id, m->id, &v) && u64map_put(&s->by_id, m->id, i) < 0)
		return -1;
	s->nbufs++;
	s->live += m->bytes;
	if (s->live > s->live_peak)
		s->live_peak = s->live;
	return 0;
}

/* ------------------------------------------- (a) best fit in trace order */

/* Gaps below the top, by (size, offset); the maps find neighbours. */
static int op_plan_bestfit(struct op_state *s, uint64_t *out)
{
	struct pset gaps = {0};
	struct u64map gsize, gend;     /* gap start -> size, gap end -> start */
	uint64_t top = 0, peak = 0, sz, st2;
	int rc = -1;
	u64map_init(&gsize);
	u64map_init(&gend);
	for (uint32_t e = 0; e < s->nevents; e++) {
		uint32_t i = s->events[e] & ~OP_FREE_BIT;
		uint64_t size = op_round(s->bufs[i].size);
		if (!(s->events[e] & OP_FREE_BIT)) {
			uint32_t n = ps_lower_bound(&gaps, size, 0);
			if (n) {
				uint64_t g = gaps.n[n].k2, gs = gaps.n[n].k1;
				ps_erase(&gaps, gs, g);
				u64map_del(&gsize, g, NULL);
				u64map_del(&gend, g + gs, NULL);
				if (gs > size && (ps_insert(&gaps, gs - size, g + size, 0) < 0 ||
						  u64map_put(&gsize, g + size, gs - size) < 0 ||
						  u64map_put(&gend, g + gs, g + size) < 0))
					goto out;
				s->bufs[i].off = g;
			} else {
				s->bufs[i].off = top;
				top += size;
				if (top > peak)
					peak = top;
			}
			continue;
		}
		uint64_t a = s->bufs[i].off;
		if (u64map_get(&gend, a, &st2)) {          /* merge with the gap below */
			u64map_get(&gsize, st2, &sz);
			ps_erase(&gaps, sz, st2);
			u64map_del(&gsize, st2, NULL);
			u64map_del(&gend, a, NULL);
			size += sz;
			a = st2;
		}
		if (u64map_get(&gsize, a + size, &sz)) {   /* and the gap above */
			ps_erase(&gaps, sz, a + size);
			u64map_del(&gsize, a + size, NULL);
			u64map_del(&gend, a + size + sz, NULL);
			size += sz;
		}
		if (a + size == top) {
			top = a;
			continue;
		}
		if (ps_insert(&gaps, size, a, 0) < 0 || u64map_put(&gsize, a, size) < 0 ||
		    u64map_put(&gend, a + size, a) < 0)
			goto out;
	}
	*out = peak;
	rc = 0;
out:
	ps_free_all(&gaps);
	u64map_free(&gsize);
	u64map_free(&gend);
	return rc;
}

/* ------------------------------------------------ (b) greedy by size */

static int op_cmp_size(const void *a, const void *b, void *arg)
{
	const struct op_buf *bufs = arg;
	const struct op_buf *x = &bufs[*(const uint32_t *)a];
	const struct op_buf *y = &bufs[*(const uint32_t *)b];
	uint64_t sx = op_round(x->size), sy = op_round(y->size);
	if (sx != sy)
		return sx > sy ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

static int op_cmp_off(const struct op_buf *bufs, const uint32_t *a, const uint32_t *b)
{
	const struct op_buf *x = &bufs[*a];
	const struct op_buf *y = &bufs[*b];
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Offsets into OFF[] (not bufs[].off, which holds plan (a)). */
static int op_plan_greedy(struct op_state *s, uint64_t *off, uint64_t *out)
{
	uint32_t n = s->nbufs, *order = malloc((n + 1) * sizeof *order),
		 *placed = malloc((n + 1) * sizeof *placed), np = 0;
	struct op_buf *tmp = malloc((n + 1) * sizeof *tmp);
	uint64_t peak = 0;
	if (!order || !placed || !tmp) {
		free(order); free(placed); free(tmp);
		return -1;
	}
	memcpy(tmp, s->bufs, n * sizeof *tmp);
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof *order, op_cmp_size, tmp);
	for (uint32_t k = 0; k < n; k++) {
		struct op_buf *b = &tmp[order[k]];
		uint64_t size = op_round(b->size), cand = 0;
		/* placed is kept sorted by offset: first fit among conflicts */
		for (uint32_t j = 0; j < np; j++) {
			const struct op_buf *p = &tmp[placed[j]];
			if (p->start >= b->end || b->start >= p->end)
				continue;       /* lifetimes do not overlap */
			if (p->off >= cand + size)
				break;          /* the gap below p fits */
			if (p->off + op_round(p->size) > cand)
				cand = p->off + op_round(p->size);
		}
		b->off = cand;
		off[order[k]] = cand;
		if (cand + size > peak)
			peak = cand + size;
		/* insert into placed by offset */
		uint32_t pos = np;
		while (pos > 0 && op_cmp_off(tmp, &placed[pos - 1], &order[k]) > 0) {
			placed[pos] = placed[pos - 1];
			pos--;
		}
		placed[pos] = order[k];
		np++;
	}
	*out = peak;
	free(order);
	free(placed);
	free(tmp);
	return 0;
}

static int op_prepass_done(void *st, char *err, size_t errlen)
{
	struct op_state *s = st;
	uint64_t a = 0, b = UINT64_MAX;
	if (s->planned)
		return 0;
	if (op_plan_bestfit(s, &a) < 0)
		goto nomem;
	s->plan_a = a;
	if (s->nbufs && s->nbufs <= OP_GREEDY_MAX) {
		uint64_t *off = malloc(s->nbufs * sizeof *off);
		if (!off || op_plan_greedy(s, off, &b) < 0) {
			free(off);
			goto nomem;
		}
		if (b < a)
			for (uint32_t i = 0; i < s->nbufs; i++)
				s->bufs[i].off = off[i];
		free(off);
	}
	s->plan_b = b == UINT64_MAX ? 0 : b;
	s->plan_bytes = b < a ? b : a;
	s->planned = 1;
	free(s->events);            /* the replay needs only offsets */
	s->events = NULL;
	s->nevents = s->capevents = 0;
	u64map_free(&s->by_addr);
	return 0;
nomem:
	snprintf(err, errlen, "optimal: out of memory while planning %u buffers", s->nbufs);
	return -1;
}

/* ----------------------------------------------------------- replay */

/* Is [off, off+size) clear of every live block in the arena? */
static int op_clear(const struct op_state *s, uint64_t off, uint64_t size)
{
	uint32_t p = ps_before(&s->live_iv, off + 1, 0);
	if (p && s->live_iv.n[p].k1 + s->live_iv.n[p].val > off)
		return 0;
	uint32_t q = ps_lower_bound(&s->live_iv, off + 1, 0);
	return !q || s->live_iv.n[q].k1 >= off + size;
}

static int op_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct op_state *s = st;
	uint64_t size = op_round(req->bytes), v;
	if (req->bytes > (1ull << 50))
		return POLICY_OOM;
	if (s->planned && s->plan_bytes && u64map_get(&s->by_id, req->id, &v) &&
	    size <= op_round(s->bufs[v].size)) {
		uint64_t off = s->bufs[v].off;
		if (!s->arena && device_malloc(s->dev, s->plan_bytes, req->stream, &s->arena) != DEVICE_OK) {
			s->arena = 0;
			return POLICY_OOM;
		}
		if (op_clear(s, off, size) && ps_insert(&s->live_iv, off, 0, size) == 0) {
			s->arena_live += size;
			res->addr = s->arena + off;
			res->block_bytes = size;
			return POLICY_OK;
		}
	}
	uint64_t addr;
	if (device_malloc(s->dev, size, req->stream, &addr) != DEVICE_OK)
		return POLICY_OOM;
	if (u64map_put(&s->fallback, addr, size) < 0) {
		device_free(s->dev, addr, size);
		return POLICY_OOM;
	}
	s->misses++;
	res->addr = addr;
	res->block_bytes = size;
	return POLICY_OK;
}

static void op_free(void *st, uint64_t addr, uint64_t block_bytes, uint32_t stream)
{
	struct op_state *s = st;
	uint64_t size;
	(void)block_bytes;
	(void)stream;
	if (u64map_del(&s->fallback, addr, &size)) {
		device_free(s->dev, addr, size);
		return;
	}
	if (s->arena && addr >= s->arena && addr < s->arena + s->plan_bytes) {
		uint32_t n = ps_lower_bound(&s->live_iv, addr - s->arena, 0);
		if (n && s->live_iv.n[n].k1 == addr - s->arena) {
			s->arena_live -= s->live_iv.n[n].val;
			ps_erase(&s->live_iv, addr - s->arena, 0);
		}
	}
}

static int op_init(void *st, const char *conf, const struct policy_env *env,
		   char *err, size_t errlen)
{
	struct op_state *s = st;
	struct conf_kv kv;
	const char *cur = conf;
	int r = conf_next(&cur, &kv, err, errlen);
	if (r < 0)
		return -1;
	if (r > 0)
		return conf_unknown("optimal", op_knobs, kv.key, err, errlen);
	memset(s, 0, sizeof *s);
	s->dev = env->dev;
	u64map_init(&s->by_addr);
	u64map_init(&s->by_id);
	u64map_init(&s->fallback);
	return 0;
}

/* In-order walk: the largest gap between live blocks inside the arena. */
static uint64_t op_largest_gap(const struct op_state *s, uint32_t t, uint64_t *cursor)
{
	if (!t)
		return 0;
	uint64_t best = op_largest_gap(s, s->live_iv.n[t].l, cursor);
	uint64_t off = s->live_iv.n[t].k1;
	if (off > *cursor && off - *cursor > best)
		best = off - *cursor;
	*cursor = off + s->live_iv.n[t].val;
	uint64_t r = op_largest_gap(s, s->live_iv.n[t].r, cursor);
	return r > best ? r : best;
}

static void op_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct op_state *s = st;
	uint64_t cursor = 0, gap = 0;
	if (s->arena) {
		gap = op_largest_gap(s, s->live_iv.root, &cursor);
		if (s->plan_bytes - cursor > gap)
			gap = s->plan_bytes - cursor;
	}
	emit(ctx, "live_peak_bytes", (int64_t)s->live_peak);
	emit(ctx, "plan_bytes", (int64_t)s->plan_bytes);
	emit(ctx, "plan_overhead_ppm",
	     s->live_peak ? (int64_t)((double)s->plan_bytes / (double)s->live_peak * 1e6 + 0.5) : 0);
	emit(ctx, "plan_bestfit_bytes", (int64_t)s->plan_a);
	emit(ctx, "plan_greedy_bytes", (int64_t)s->plan_b);
	emit(ctx, "num_buffers", (int64_t)s->nbufs);
	emit(ctx, "plan_misses", (int64_t)s->misses);
	emit(ctx, "largest_free_block", (int64_t)gap);
	emit(ctx, "cached_free_bytes", s->arena ? (int64_t)(s->plan_bytes - s->arena_live) : 0);
}

static void op_fini(void *st)
{
	struct op_state *s = st;
	if (s->arena)
		device_free(s->dev, s->arena, s->plan_bytes);
	for (size_t i = 0; i < s->fallback.cap; i++)
		if (s->fallback.keys && s->fallback.keys[i] != U64MAP_EMPTY)
			device_free(s->dev, s->fallback.keys[i], s->fallback.vals[i]);
	free(s->bufs);
	free(s->events);
	ps_free_all(&s->live_iv);
	u64map_free(&s->by_addr);
	u64map_free(&s->by_id);
	u64map_free(&s->fallback);
	memset(s, 0, sizeof *s);
}

const struct alloc_policy policy_optimal = {
	.iversion = POLICY_IFACE_VERSION,
	.name = "optimal",
	.description = "offline lower bound: peak live bytes and a planned placement in one arena",
	.state_size = sizeof(struct op_state),
	.knobs = op_knobs,
	.init = op_init,
	.alloc = op_alloc,
	.free = op_free,
	.stats = op_stats,
	.prepass = op_prepass,
	.prepass_done = op_prepass_done,
	.fini = op_fini,
};
