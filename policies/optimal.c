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

#include "../base/u64map.h"
#include "../base/vec.h"
#include "ordset.h"

#define OP_ROUND 256ull
#define OP_NEVER UINT32_MAX      /* a buffer the trace never frees */
#define OP_GREEDY_MAX 2048       /* buffers (b) still handles quickly */
#define OP_FREE_BIT 0x80000000u  /* event list: the entry is a free */


/*
 * A node: in the planner, a segment of [0, top) (a placed buffer or a gap;
 * gaps are keyed (size, offset) in a sizeset for best fit); in the replay, a
 * block served from the arena, keyed (offset, 0) in an ordset (ordset.h).
 */
struct op_node {
	struct ordset_node node; /* set links and key; node.l: free-slot link when unused */
	uint32_t prev, next;    /* planner: address neighbours, 0 = none */
	uint64_t size;          /* replay: block bytes; planner: 1 for a gap */
};
ORDSET_FIRST_MEMBER(struct op_node);

/* ------------------------------------------------------------ state */

struct op_buf { uint64_t id, size, off; uint32_t start, end; };

struct op_state {
	struct sim_device *dev;
	struct op_buf *bufs;
	uint32_t nbufs;
	size_t capbufs;
	uint32_t *events;              /* buffer index, | OP_FREE_BIT for a free */
	uint32_t nevents;
	size_t capevents;
	struct u64map by_addr;         /* pre-pass: trace addr -> live buffer */
	struct u64map by_id;           /* trace id -> buffer (only once ids_sorted is 0) */
	int ids_sorted;                /* ids strictly increase: found by bisection */
	uint64_t live, live_peak, plan_bytes, plan_a, plan_b;
	int planned, too_many;
	/* replay */
	uint64_t arena;                /* 0 until the first request */
	struct op_node *nodes;         /* live_iv's nodes, slot 0 unused */
	uint32_t nnodes, free_nodes;
	size_t capnodes;
	uint32_t live_iv;              /* root: blocks served from the arena, by offset */
	struct u64map served;          /* offset -> node of live_iv */
	uint32_t cursor;               /* the buffer the next request most likely is */
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
	if (VEC_RESERVE(s->events, s->capevents, (size_t)s->nevents + 1, 1024) < 0)
		return -1;
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
	if (trace_mem_kind_host(m->kind) || m->addr == U64MAP_EMPTY)
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
	if (VEC_RESERVE(s->bufs, s->capbufs, (size_t)s->nbufs + 1, 1024) < 0)
		return -1;
	uint32_t i = s->nbufs;
	s->bufs[i] = (struct op_buf){m->id, m->bytes, 0, s->nevents, OP_NEVER};
	if (u64map_put(&s->by_addr, m->addr, i) < 0 || op_push_event(s, i) < 0)
		return -1;
	if (s->ids_sorted && i && m->id <= s->bufs[i - 1].id) {
		/* ids out of order: from now on a map finds them (first wins) */
		for (uint32_t j = 0; j < i; j++)
			if (u64map_put(&s->by_id, s->bufs[j].id, j) < 0)
				return -1;
		s->ids_sorted = 0;
	}
	if (!s->ids_sorted && !u64map_get(&s->by_id, m->id, &v) &&
	    u64map_put(&s->by_id, m->id, i) < 0)
		return -1;
	s->nbufs++;
	s->live += m->bytes;
	if (s->live > s->live_peak)
		s->live_peak = s->live;
	return 0;
}

/* ------------------------------------------- (a) best fit in trace order */

struct op_planner {
	struct op_node *n;             /* segments, slot 0 unused */
	uint32_t used, free_slots, last;
	size_t cap;
	struct sizeset gaps;           /* gaps below the top, by (size, offset) */
};

/* A segment slot, or 0 when out of memory. */
static uint32_t op_seg_new(struct op_planner *pl)
{
	if (pl->free_slots) {
		uint32_t h = pl->free_slots;
		pl->free_slots = pl->n[h].node.l;
		return h;
	}
	if (VEC_RESERVE(pl->n, pl->cap, (size_t)pl->used + 2, 1024) < 0)
		return 0;
	return ++pl->used;
}

/* Unlink H from the address list and recycle its slot. */
static void op_seg_drop(struct op_planner *pl, uint32_t h)
{
	struct op_node *g = &pl->n[h];
	if (g->prev)
		pl->n[g->prev].next = g->next;
	if (g->next)
		pl->n[g->next].prev = g->prev;
	else
		pl->last = g->prev;
	g->node.l = pl->free_slots;
	pl->free_slots = h;
}

/*
 * Segments (placed buffers and gaps, k1 = size, k2 = offset) tile [0, top)
 * in address order, so a freed buffer finds its neighbouring gaps without a
 * lookup; gaps are merged with their neighbours and a gap reaching the top
 * lowers it.
 */
static int op_plan_bestfit(struct op_state *s, uint64_t *out)
{
	struct op_planner pl = {0};
	uint32_t *seg_of = malloc(((size_t)s->nbufs + 1) * sizeof *seg_of);
	uint64_t top = 0, peak = 0;
	int rc = -1;
	if (!seg_of || sizeset_init(&pl.gaps, 8) < 0)
		goto out;
	for (uint32_t e = 0; e < s->nevents; e++) {
		uint32_t i = s->events[e] & ~OP_FREE_BIT;
		uint64_t size = op_round(s->bufs[i].size);
		if (!(s->events[e] & OP_FREE_BIT)) {
			uint32_t h = sizeset_find(ORDSET_NODES(pl.n), &pl.gaps, size);
			if (h) {
				uint64_t g = pl.n[h].node.k2, gs = pl.n[h].node.k1;
				sizeset_erase(ORDSET_NODES(pl.n), &pl.gaps, h);
				pl.n[h].node.k1 = size;
				pl.n[h].size = 0;
				if (gs > size) {
					uint32_t t = op_seg_new(&pl);
					if (!t)
						goto out;
					pl.n[t] = (struct op_node){.node.k1 = gs - size, .node.k2 = g + size, .size = 1,
								   .prev = h, .next = pl.n[h].next};
					if (pl.n[h].next)
						pl.n[pl.n[h].next].prev = t;
					else
						pl.last = t;
					pl.n[h].next = t;
					sizeset_insert(ORDSET_NODES(pl.n), &pl.gaps, t);
				}
				s->bufs[i].off = g;
			} else {
				h = op_seg_new(&pl);
				if (!h)
					goto out;
				pl.n[h] = (struct op_node){.node.k1 = size, .node.k2 = top, .prev = pl.last};
				if (pl.last)
					pl.n[pl.last].next = h;
				pl.last = h;
				s->bufs[i].off = top;
				top += size;
				if (top > peak)
					peak = top;
			}
			seg_of[i] = h;
			continue;
		}
		uint32_t h = seg_of[i], pv = pl.n[h].prev, nx = pl.n[h].next;
		if (pv && pl.n[pv].size) {             /* merge with the gap below */
			sizeset_erase(ORDSET_NODES(pl.n), &pl.gaps, pv);
			pl.n[h].node.k1 += pl.n[pv].node.k1;
			pl.n[h].node.k2 = pl.n[pv].node.k2;
			op_seg_drop(&pl, pv);
		}
		if (nx && pl.n[nx].size) {             /* and the gap above */
			sizeset_erase(ORDSET_NODES(pl.n), &pl.gaps, nx);
			pl.n[h].node.k1 += pl.n[nx].node.k1;
			op_seg_drop(&pl, nx);
		}
		if (!pl.n[h].next) {
			top = pl.n[h].node.k2;
			op_seg_drop(&pl, h);
			continue;
		}
		pl.n[h].size = 1;
		sizeset_insert(ORDSET_NODES(pl.n), &pl.gaps, h);
	}
	*out = peak;
	rc = 0;
out:
	free(seg_of);
	free(pl.n);
	sizeset_free(&pl.gaps);
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

/* The buffer planned for request ID (the first with that id): 1 with *V, or 0. */
static int op_find_buf(const struct op_state *s, uint64_t id, uint32_t *v)
{
	if (!s->ids_sorted) {
		uint64_t x;
		if (!u64map_get(&s->by_id, id, &x))
			return 0;
		*v = (uint32_t)x;
		return 1;
	}
	uint32_t lo = 0, hi = s->nbufs;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->bufs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == s->nbufs || s->bufs[lo].id != id)
		return 0;
	*v = lo;
	return 1;
}

/*
 * Serve [off, off+size) of the arena when it is clear of every live block:
 * one descent finds both neighbours and the place to link the new node.
 * 1 when placed, 0 when occupied or out of memory.
 */
static int op_place(struct op_state *s, uint64_t off, uint64_t size)
{
	uint32_t cur = s->live_iv, par = 0, pred = 0, succ = 0;
	int left = 0;
	while (cur) {
		par = cur;
		left = off < s->nodes[cur].node.k1;
		if (left) {
			succ = cur;
			cur = s->nodes[cur].node.l;
		} else {
			pred = cur;
			cur = s->nodes[cur].node.r;
		}
	}
	if (pred && s->nodes[pred].node.k1 + s->nodes[pred].size > off)
		return 0;
	if (succ && s->nodes[succ].node.k1 < off + size)
		return 0;
	uint32_t x = s->free_nodes;
	if (x) {
		s->free_nodes = s->nodes[x].node.l;
	} else {
		if (VEC_RESERVE(s->nodes, s->capnodes, (size_t)s->nnodes + 2, 256) < 0)
			return 0;
		x = ++s->nnodes;
	}
	if (u64map_put(&s->served, off, x) < 0) {
		s->nodes[x].node.l = s->free_nodes;
		s->free_nodes = x;
		return 0;
	}
	s->nodes[x] = (struct op_node){.node = {.k1 = off, .p = par, .pri = ordset_prio(off, 0)},
				       .size = size};
	if (!par)
		s->live_iv = x;
	else if (left)
		s->nodes[par].node.l = x;
	else
		s->nodes[par].node.r = x;
	ordset_sift_up(ORDSET_NODES(s->nodes), &s->live_iv, x);
	return 1;
}

static int op_alloc(void *st, const struct alloc_request *req, struct alloc_result *res)
{
	struct op_state *s = st;
	uint64_t size = op_round(req->bytes);
	uint32_t v = 0;
	int known = 0;
	if (req->bytes > (1ull << 50))
		return POLICY_OOM;
	if (s->planned && s->plan_bytes) {
		/* ids that only increase are unique: requests in trace order are
		 * the buffer after the last one found */
		uint32_t c = s->cursor;
		if (s->ids_sorted && c < s->nbufs && s->bufs[c].id == req->id) {
			v = c;
			known = 1;
		} else {
			known = op_find_buf(s, req->id, &v);
		}
		if (known)
			s->cursor = v + 1;
	}
	if (known && size <= op_round(s->bufs[v].size)) {
		uint64_t off = s->bufs[v].off;
		if (!s->arena && device_malloc(s->dev, s->plan_bytes, req->stream, &s->arena) != DEVICE_OK) {
			s->arena = 0;
			return POLICY_OOM;
		}
		if (op_place(s, off, size)) {
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
		uint64_t n;
		if (u64map_del(&s->served, addr - s->arena, &n)) {
			s->arena_live -= s->nodes[n].size;
			ordset_erase(ORDSET_NODES(s->nodes), &s->live_iv, n);
			s->nodes[n].node.l = s->free_nodes;
			s->free_nodes = n;
		}
	}
}

static int op_init(void *st, const char *conf, const struct policy_env *env,
		   char *err, size_t errlen)
{
	struct op_state *s = st;
	if (conf_none("optimal", conf, err, errlen) < 0)
		return -1;
	memset(s, 0, sizeof *s);
	s->dev = env->dev;
	s->ids_sorted = 1;
	u64map_init(&s->by_addr);
	u64map_init(&s->by_id);
	u64map_init(&s->fallback);
	u64map_init(&s->served);
	return 0;
}

/* In-order walk: the largest gap between live blocks inside the arena. */
static uint64_t op_largest_gap(const struct op_state *s, uint32_t t, uint64_t *cursor)
{
	if (!t)
		return 0;
	uint64_t best = op_largest_gap(s, s->nodes[t].node.l, cursor);
	uint64_t off = s->nodes[t].node.k1;
	if (off > *cursor && off - *cursor > best)
		best = off - *cursor;
	*cursor = off + s->nodes[t].size;
	uint64_t r = op_largest_gap(s, s->nodes[t].node.r, cursor);
	return r > best ? r : best;
}

static void op_stats(void *st, policy_stat_fn emit, void *ctx)
{
	struct op_state *s = st;
	uint64_t cursor = 0, gap = 0;
	if (s->arena) {
		gap = op_largest_gap(s, s->live_iv, &cursor);
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
	free(s->nodes);
	u64map_free(&s->by_addr);
	u64map_free(&s->by_id);
	u64map_free(&s->fallback);
	u64map_free(&s->served);
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
