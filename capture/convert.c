/*
 * convert.c: the reorder buffer, allocation ids, link resolution and
 * lifetime bookkeeping that turn captured records into a valid trace (see
 * convert.h for the why).
 *
 * Reorder buffer: a binary min-heap of record pointers ordered by (start,
 * arrival sequence), so equal start times keep their arrival order and the
 * output is deterministic for a given arrival order. A record that arrives
 * after the watermark has passed its start is emitted at once with its start
 * raised to the last emitted start (the trace must not go back in time); it
 * is counted as late.
 *
 * Ids: the n-th emitted 'a' record gets id n. Three maps serve the links:
 * corr -> id and addr -> id for allocations emitted so far, and the live
 * table (addr -> what is live there). A freed allocation stays resolvable
 * for RETIRE_NS after its free: a stream-ordered free is stamped when the
 * host calls it, which can be before a kernel launched earlier on that
 * stream starts.
 *
 * Lifetimes. Every emitted 'f' closes a live 'a' and no 'a' lands on a live
 * address, whatever order CUPTI delivered them in. Each record keeps its
 * original start (before any late clamp) so that the repairs can tell which
 * allocation a free belongs to:
 *  - an 'a' at a live address: the earlier allocation's free is missing or
 *    late (the driver reused the address, so it was released): a free is
 *    written for it first. For module globals that is a reload whose unload
 *    was not seen; otherwise a repair, counted;
 *  - an 'f' older than the allocation live at its address belongs to one
 *    already closed that way: dropped, counted;
 *  - an 'f' of an address not live waits (orphan) until an 'a' at that
 *    address older than it is emitted, and is written right after it; an
 *    orphan never claimed is dropped at the end, counted;
 *  - a module unload frees the statics matched to that module.
 */
#include "convert.h"

#include <stdlib.h>
#include <string.h>

#include "../base/strpool.h"
#include "../base/u64map.h"
#include "../base/vec.h"

#define RETIRE_NS 10000000000ull

/* An internal record type in the heap: a module unload (rec.u.mem.id holds
 * the module id, ctx its context). Never written. */
#define CONV_MODULE_UNLOAD TREC_COUNT

/* Placeholder addresses for allocations CUPTI reports at address 0 (a
 * graph's memory pool): far above any device address, 4 GiB apart. */
#define CONV_NO_ADDR_BASE 0xfff0000000000000ull

/* A record held for ordering. Its name is an id in the converter's pool:
 * held records repeat a few hundred names (kernels, API calls, sources)
 * millions of times, so a copy each made the names most of what a long
 * hold (cap_conv_watermark) kept in memory. */
#define CONV_NO_NAME UINT32_MAX
struct conv_entry {
	struct trace_rec rec;
	uint32_t name;      /* id in cap_conv.names, or CONV_NO_NAME */
	uint64_t seq;
	uint64_t orig;      /* start as it arrived, before any late clamp */
	uint32_t ctx;
};

/* What is live at an address. */
struct conv_live {
	uint64_t addr, bytes, orig, corr;
	uint32_t kind, stream, flags;
	uint32_t module;    /* statics: the module it belongs to */
	int has_module;
};

/* A module load seen in a resource callback. */
struct conv_module {
	uint64_t t;
	uint32_t ctx, module;
};

struct conv_retire {
	uint64_t t, addr, id, corr;
};

struct conv_linkset {
	size_t n;
	struct cap_link links[];
};

struct cap_conv {
	struct cap_sink sink;
	struct strpool names;         /* the names of held records */
	struct conv_entry **heap;
	size_t nheap, capheap;
	uint64_t seq;
	uint64_t last_start;
	int emitted_any;
	struct u64map pending_links;  /* kernel corr -> struct conv_linkset * */
	struct u64map corr_id;        /* alloc corr -> id */
	struct u64map addr_id;        /* alloc base address -> latest id */
	struct u64map live_idx;       /* live alloc base address -> index in live[] */
	struct conv_live *live;       /* slots; free ones chained through free_slots */
	size_t nlive, caplive;
	uint64_t *free_slots;
	size_t nfree_slots, capfree_slots;
	struct u64map orphan_idx;     /* address -> index in orphans[] */
	struct trace_rec *orphans;    /* frees waiting for their allocation */
	size_t norphans, caporphans;
	struct conv_module *mods;     /* module loads, sorted by time */
	size_t nmods, capmods;
	struct conv_retire *ret;      /* FIFO of freed allocations */
	size_t ret_head, ret_len, ret_cap;
	struct cap_stats st;
	uint64_t links[TRACE_MAX_LINKS]; /* the emitted kernel's links (trace.h) */
};

/* Heap order: earlier start first, then earlier arrival. */
static int entry_less(const struct conv_entry *a, const struct conv_entry *b)
{
	if (a->rec.start != b->rec.start)
		return a->rec.start < b->rec.start;
	return a->seq < b->seq;
}

static void heap_up(struct cap_conv *c, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!entry_less(c->heap[i], c->heap[p]))
			break;
		struct conv_entry *t = c->heap[i];
		c->heap[i] = c->heap[p];
		c->heap[p] = t;
		i = p;
	}
}

static void heap_down(struct cap_conv *c, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < c->nheap && entry_less(c->heap[l], c->heap[m]))
			m = l;
		if (r < c->nheap && entry_less(c->heap[r], c->heap[m]))
			m = r;
		if (m == i)
			break;
		struct conv_entry *t = c->heap[i];
		c->heap[i] = c->heap[m];
		c->heap[m] = t;
		i = m;
	}
}

/* A converter with empty maps and heap; the sink is copied. */
struct cap_conv *cap_conv_new(const struct cap_sink *sink)
{
	struct cap_conv *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sink = *sink;
	strpool_init(&c->names);
	u64map_init(&c->pending_links);
	u64map_init(&c->corr_id);
	u64map_init(&c->addr_id);
	u64map_init(&c->live_idx);
	u64map_init(&c->orphan_idx);
	return c;
}

/* Copy the record and its name into the heap. */
int cap_conv_push(struct cap_conv *c, const struct cap_rec *r)
{
	struct conv_entry *e = malloc(sizeof(*e));
	if (!e)
		return -1;
	e->rec = r->rec;
	e->name = CONV_NO_NAME;
	if (r->name && strpool_add(&c->names, r->name, &e->name) < 0)
		goto fail;
	if (VEC_RESERVE(c->heap, c->capheap, c->nheap + 1, 1024) < 0)
		goto fail;
	if (e->rec.end < e->rec.start)
		e->rec.end = e->rec.start;
	e->seq = c->seq++;
	e->orig = e->rec.start;
	e->ctx = r->ctx;
	c->heap[c->nheap++] = e;
	heap_up(c, c->nheap - 1);
	c->st.pushed++;
	return 0;
fail:
	free(e);
	return -1;
}

/* Store a copy of the link set until its kernel record is emitted. */
int cap_conv_link(struct cap_conv *c, uint64_t kernel_corr,
		  const struct cap_link *links, size_t n)
{
	if (n == 0 || kernel_corr == U64MAP_EMPTY)
		return 0;
	struct conv_linkset *ls = malloc(sizeof(*ls) + n * sizeof(ls->links[0]));
	if (!ls)
		return -1;
	ls->n = n;
	memcpy(ls->links, links, n * sizeof(links[0]));
	uint64_t old;
	if (u64map_del(&c->pending_links, kernel_corr, &old))
		free((void *)(uintptr_t)old);
	if (u64map_put(&c->pending_links, kernel_corr, (uint64_t)(uintptr_t)ls) < 0) {
		free(ls);
		return -1;
	}
	return 0;
}

static int retire_push(struct cap_conv *c, const struct conv_retire *r)
{
	if (c->ret_len == c->ret_cap) {
		size_t ncap = c->ret_cap ? c->ret_cap * 2 : 256;
		struct conv_retire *n = malloc(ncap * sizeof(*n));
		if (!n)
			return -1;
		for (size_t i = 0; i < c->ret_len; i++)
			n[i] = c->ret[(c->ret_head + i) % c->ret_cap];
		free(c->ret);
		c->ret = n;
		c->ret_cap = ncap;
		c->ret_head = 0;
	}
	c->ret[(c->ret_head + c->ret_len) % c->ret_cap] = *r;
	c->ret_len++;
	return 0;
}

/* Forget allocations freed more than RETIRE_NS before NOW, unless their
 * address or correlation id was reused by a later allocation. */
static void retire_until(struct cap_conv *c, uint64_t now)
{
	while (c->ret_len) {
		struct conv_retire *r = &c->ret[c->ret_head];
		if (r->t + RETIRE_NS > now)
			break;
		uint64_t v;
		if (r->corr && u64map_get(&c->corr_id, r->corr, &v) && v == r->id)
			u64map_del(&c->corr_id, r->corr, NULL);
		if (u64map_get(&c->addr_id, r->addr, &v) && v == r->id)
			u64map_del(&c->addr_id, r->addr, NULL);
		c->ret_head = (c->ret_head + 1) % c->ret_cap;
		c->ret_len--;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Turn the launch's link set into sorted, distinct allocation ids, in the
 * converter's own array (valid until the next kernel is emitted: the sink
 * takes the record at once). */
static void resolve_links(struct cap_conv *c, struct trace_rec *rec)
{
	struct trace_kernel *k = &rec->u.kernel;
	uint64_t *links = c->links, v;
	k->nlinks = 0;
	k->links = links;
	if (!u64map_del(&c->pending_links, k->corr, &v))
		return;
	struct conv_linkset *ls = (struct conv_linkset *)(uintptr_t)v;
	for (size_t i = 0; i < ls->n; i++) {
		uint64_t id;
		int ok = ls->links[i].alloc_corr &&
			 u64map_get(&c->corr_id, ls->links[i].alloc_corr, &id);
		if (!ok)
			ok = u64map_get(&c->addr_id, ls->links[i].addr, &id);
		if (!ok) {
			c->st.links_unresolved++;
			continue;
		}
		int dup = 0;
		for (uint32_t j = 0; j < k->nlinks; j++)
			dup |= links[j] == id;
		if (!dup && k->nlinks < TRACE_MAX_LINKS)
			links[k->nlinks++] = id;
	}
	qsort(links, k->nlinks, sizeof(links[0]), cmp_u64);
	c->st.links += k->nlinks;
	free(ls);
}

/* Hand one record to the sink (every written record goes through here). */
static int sink_out(struct cap_conv *c, const struct trace_rec *rec)
{
	c->st.emitted++;
	return c->sink.record(c->sink.ctx, rec);
}

static int is_static_kind(uint32_t kind)
{
	return kind == TMEM_DEVICE_STATIC || kind == TMEM_MANAGED_STATIC;
}

/* The module a static allocation at time T on context CTX belongs to: the
 * load nearest in time on that context, else (the context ids CUPTI gives
 * the two do not agree) the load nearest in time. 0 when no load was seen. */
static int module_of(const struct cap_conv *c, uint32_t ctx, uint64_t t, uint32_t *module)
{
	size_t lo = 0, hi = c->nmods;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->mods[mid].t < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct conv_module *best = NULL, *any = NULL;
	uint64_t dist = 0, adist = 0;
	size_t from = lo > 64 ? lo - 64 : 0, to = lo + 64 < c->nmods ? lo + 64 : c->nmods;
	for (size_t i = from; i < to; i++) {
		const struct conv_module *m = &c->mods[i];
		uint64_t d = m->t > t ? m->t - t : t - m->t;
		if (!any || d < adist)
			any = m, adist = d;
		if (m->ctx == ctx && (!best || d < dist))
			best = m, dist = d;
	}
	if (!best)
		best = any;
	if (!best)
		return 0;
	*module = best->module;
	return 1;
}

int cap_conv_module(struct cap_conv *c, enum cap_module_op op, uint32_t ctx, uint32_t module,
		    uint64_t t)
{
	if (op == CAP_MODULE_LOADED) {
		if (VEC_RESERVE(c->mods, c->capmods, c->nmods + 1, 64) < 0)
			return -1;
		size_t i = c->nmods;
		while (i > 0 && c->mods[i - 1].t > t)   /* callbacks of threads racing */
			i--;
		memmove(&c->mods[i + 1], &c->mods[i], (c->nmods - i) * sizeof(*c->mods));
		c->mods[i] = (struct conv_module){t, ctx, module};
		c->nmods++;
		c->st.modules_loaded++;
		return 0;
	}
	struct cap_rec r;
	memset(&r, 0, sizeof(r));
	r.rec.type = (enum trace_rec_type)CONV_MODULE_UNLOAD;
	r.rec.start = r.rec.end = t;
	r.rec.u.mem.id = module;
	r.ctx = ctx;
	if (cap_conv_push(c, &r) < 0)
		return -1;
	c->st.pushed--;   /* not a record of the trace */
	return 0;
}

/* The live allocation in SLOT ends at time T: it stays resolvable for
 * links a while (retire), its slot is reused. */
static void end_live(struct cap_conv *c, uint64_t slot, uint64_t t)
{
	const struct conv_live *l = &c->live[slot];
	struct conv_retire r = {t, l->addr, 0, l->corr};
	if (u64map_get(&c->addr_id, l->addr, &r.id))
		retire_push(c, &r);
	u64map_del(&c->live_idx, l->addr, NULL);
	if (VEC_RESERVE(c->free_slots, c->capfree_slots, c->nfree_slots + 1, 256) == 0)
		c->free_slots[c->nfree_slots++] = slot;
}

/* Write the free that ends the live allocation in SLOT at time T. */
static int close_live(struct cap_conv *c, uint64_t slot, uint64_t t)
{
	struct conv_live *l = &c->live[slot];
	struct trace_rec f;
	memset(&f, 0, sizeof(f));
	f.type = TREC_FREE;
	f.start = f.end = t;
	f.u.mem.addr = l->addr;
	f.u.mem.bytes = l->bytes;
	f.u.mem.stream = (l->flags & TMEM_F_ASYNC) ? l->stream : TRACE_NO_STREAM;
	f.u.mem.kind = l->kind;
	f.u.mem.flags = l->flags;
	f.u.mem.source = TRACE_NO_STRING;
	end_live(c, slot, t);
	return sink_out(c, &f);
}

/* Record the allocation just emitted as live. */
static void open_live(struct cap_conv *c, const struct trace_rec *rec, uint64_t orig, uint32_t ctx)
{
	const struct trace_mem *m = &rec->u.mem;
	uint64_t slot;
	if (c->nfree_slots) {
		slot = c->free_slots[--c->nfree_slots];
	} else {
		if (VEC_RESERVE(c->live, c->caplive, c->nlive + 1, 1024) < 0)
			return;
		slot = c->nlive++;
	}
	struct conv_live *l = &c->live[slot];
	memset(l, 0, sizeof(*l));
	l->addr = m->addr;
	l->bytes = m->bytes;
	l->orig = orig;
	l->corr = m->corr;
	l->kind = m->kind;
	l->stream = m->stream;
	l->flags = m->flags;
	if (is_static_kind(m->kind))
		l->has_module = module_of(c, ctx, orig, &l->module);
	u64map_put(&c->live_idx, m->addr, slot);   /* out of memory: not tracked */
}

static int cmp_live_addr(const void *a, const void *b)
{
	const struct conv_live *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* A module unloads at T: free its live statics, in address order. */
static int unload_module(struct cap_conv *c, uint32_t module, uint64_t t)
{
	uint64_t *slots = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	c->st.modules_unloaded++;
	for (size_t i = 0; i < c->live_idx.cap; i++) {
		if (c->live_idx.keys[i] == U64MAP_EMPTY)
			continue;
		const struct conv_live *l = &c->live[c->live_idx.vals[i]];
		if (!l->has_module || l->module != module || !is_static_kind(l->kind))
			continue;
		if (VEC_RESERVE(slots, cap, n + 1, 16) < 0)
			break;
		slots[n++] = c->live_idx.vals[i];
	}
	/* address order: the map's order is its hashing, not the trace's */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && cmp_live_addr(&c->live[slots[j - 1]], &c->live[slots[j]]) > 0; j--) {
			uint64_t tmp = slots[j];
			slots[j] = slots[j - 1];
			slots[j - 1] = tmp;
		}
	for (size_t i = 0; i < n; i++) {
		int r = close_live(c, slots[i], t);
		c->st.module_frees++;
		if (r < 0 && rc == 0)
			rc = r;
	}
	free(slots);
	return rc;
}

/* Take the orphan free at ADDR out of the table into *OUT; 0 if none. */
static int orphan_take(struct cap_conv *c, uint64_t addr, struct trace_rec *out)
{
	uint64_t i;
	if (!c->orphan_idx.count || !u64map_del(&c->orphan_idx, addr, &i))
		return 0;
	*out = c->orphans[i];
	/* keep the array dense: move the last orphan into slot i */
	if (i != c->norphans - 1) {
		c->orphans[i] = c->orphans[c->norphans - 1];
		u64map_put(&c->orphan_idx, c->orphans[i].u.mem.addr, i);
	}
	c->norphans--;
	return 1;
}

/* A free whose allocation is not live: keep it until one older than it
 * is emitted at that address. ORIG goes in rec.end (a free has no length). */
static void orphan_put(struct cap_conv *c, const struct trace_rec *rec, uint64_t orig)
{
	struct trace_rec old;
	if (orphan_take(c, rec->u.mem.addr, &old))
		c->st.frees_dropped++;
	if (VEC_RESERVE(c->orphans, c->caporphans, c->norphans + 1, 64) < 0) {
		c->st.frees_dropped++;
		return;
	}
	c->orphans[c->norphans] = *rec;
	c->orphans[c->norphans].end = orig;
	if (u64map_put(&c->orphan_idx, rec->u.mem.addr, c->norphans) < 0) {
		c->st.frees_dropped++;
		return;
	}
	c->norphans++;
}

static int emit_alloc(struct cap_conv *c, struct conv_entry *e)
{
	struct trace_rec *rec = &e->rec;
	struct trace_mem *m = &rec->u.mem;
	uint64_t slot;
	int rc = 0;
	if (m->addr == 0 && m->kind == TMEM_DEVICE) {
		/* A CUDA graph's memory pool (its memory nodes' reservation, made
		 * at the first launch) comes without an address: each gets its
		 * own placeholder, so two graphs' pools are both live. */
		m->addr = CONV_NO_ADDR_BASE + (c->st.graph_pools++ << 32);
		m->flags |= TMEM_F_POOL;
	}
	if (u64map_get(&c->live_idx, m->addr, &slot)) {
		if (is_static_kind(m->kind) && is_static_kind(c->live[slot].kind))
			c->st.static_replaced++;
		else
			c->st.live_replaced++;
		rc = close_live(c, slot, rec->start);
	}
	struct trace_rec orphan;
	int has_orphan = orphan_take(c, m->addr, &orphan);
	if (has_orphan && orphan.end < e->orig) {
		c->st.frees_dropped++;   /* a free older than this allocation */
		has_orphan = 0;
	}
	m->id = c->st.allocs++;
	if (m->corr)
		u64map_put(&c->corr_id, m->corr, m->id);
	u64map_put(&c->addr_id, m->addr, m->id);
	open_live(c, rec, e->orig, e->ctx);
	int r = sink_out(c, rec);
	if (r < 0 && rc == 0)
		rc = r;
	if (has_orphan && u64map_get(&c->live_idx, m->addr, &slot)) {
		/* its free was delivered first: it ends here */
		c->st.frees_reordered++;
		r = close_live(c, slot, rec->start);
		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}

/* Returns 1 when the free is to be written, 0 when it was kept or dropped. */
static int take_free(struct cap_conv *c, struct conv_entry *e)
{
	struct trace_rec *rec = &e->rec;
	struct trace_mem *m = &rec->u.mem;
	uint64_t slot;
	if (!u64map_get(&c->live_idx, m->addr, &slot)) {
		orphan_put(c, rec, e->orig);
		return 0;
	}
	struct conv_live *l = &c->live[slot];
	if (e->orig < l->orig) {
		c->st.frees_dropped++;   /* of an allocation closed already */
		return 0;
	}
	end_live(c, slot, rec->start);
	m->id = 0;
	return 1;
}

/* Fill in ids and strings, keep the maps current, hand to the sink. */
static int emit_one(struct cap_conv *c, struct conv_entry *e)
{
	struct trace_rec *rec = &e->rec;
	if (c->emitted_any && rec->start < c->last_start) {
		uint64_t len = rec->end - rec->start;
		rec->start = c->last_start;
		rec->end = rec->start + len;
		c->st.late++;
	}
	c->last_start = rec->start;
	c->emitted_any = 1;
	retire_until(c, rec->start);
	if ((unsigned)rec->type == CONV_MODULE_UNLOAD)
		return unload_module(c, (uint32_t)rec->u.mem.id, rec->start);
	uint32_t sid = e->name != CONV_NO_NAME ? c->sink.intern(c->sink.ctx, strpool_str(&c->names, e->name))
					       : TRACE_NO_STRING;
	switch (rec->type) {
	case TREC_ALLOC:
		rec->u.mem.source = sid;
		return emit_alloc(c, e);
	case TREC_FREE:
		rec->u.mem.source = sid;
		if (!take_free(c, e))
			return 0;
		break;
	case TREC_KERNEL:
		rec->u.kernel.name = sid;
		resolve_links(c, rec);
		break;
	case TREC_RANGE:
		rec->u.range.name = sid;
		break;
	case TREC_API:
		rec->u.api.name = sid;
		break;
	default:
		break;
	}
	return sink_out(c, rec);
}

static int emit_while(struct cap_conv *c, int all, uint64_t watermark)
{
	int rc = 0;
	while (c->nheap && (all || c->heap[0]->rec.start < watermark)) {
		struct conv_entry *e = c->heap[0];
		c->heap[0] = c->heap[--c->nheap];
		heap_down(c, 0);
		int r = emit_one(c, e);
		free(e);
		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}

/* Release everything older than WATERMARK, oldest first. */
int cap_conv_emit_until(struct cap_conv *c, uint64_t watermark)
{
	return emit_while(c, 0, watermark);
}

uint64_t cap_conv_watermark(const struct cap_conv *c, uint64_t now, uint64_t lag,
			    const struct cap_open_range *open, size_t nopen, uint64_t hold,
			    uint64_t max_pending)
{
	if (now <= lag)
		return 0;
	uint64_t wm = now - lag;
	if (c->nheap >= max_pending)
		return wm;
	for (size_t i = 0; i < nopen; i++) {
		uint64_t t = open[i].start;
		int passed = c->emitted_any && t < c->last_start;   /* late whatever we do */
		if (t < wm && now - t <= hold && !passed)
			wm = t;
	}
	return wm;
}

/* Release everything: nothing more will arrive, so frees still waiting
 * for their allocation never had one in this trace. */
int cap_conv_emit_all(struct cap_conv *c)
{
	int rc = emit_while(c, 1, 0);
	c->st.frees_dropped += c->norphans;
	c->norphans = 0;
	u64map_free(&c->orphan_idx);
	u64map_init(&c->orphan_idx);
	return rc;
}

/* Counters so far; pending is the reorder buffer's size now. */
void cap_conv_stats(const struct cap_conv *c, struct cap_stats *out)
{
	*out = c->st;
	out->pending = c->nheap;
}

/* Free queued records and link sets never claimed by a kernel record. */
void cap_conv_free(struct cap_conv *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nheap; i++)
		free(c->heap[i]);
	strpool_free(&c->names);
	free(c->heap);
	for (size_t i = 0; i < c->pending_links.cap; i++)
		if (c->pending_links.keys[i] != U64MAP_EMPTY)
			free((void *)(uintptr_t)c->pending_links.vals[i]);
	u64map_free(&c->pending_links);
	u64map_free(&c->corr_id);
	u64map_free(&c->addr_id);
	u64map_free(&c->live_idx);
	u64map_free(&c->orphan_idx);
	free(c->live);
	free(c->free_slots);
	free(c->orphans);
	free(c->mods);
	free(c->ret);
	free(c);
}

/* See convert.h. */
int cap_record_parse(const char *list, unsigned *bits)
{
	static const struct { const char *name; unsigned bit; } kinds[] = {
		{"kernels", CAP_REC_KERNELS}, {"memory", CAP_REC_MEMORY}, {"copies", CAP_REC_COPIES},
		{"syncs", CAP_REC_SYNCS}, {"nvtx", CAP_REC_NVTX}, {"all", CAP_REC_ALL}};
	const size_t nkinds = sizeof(kinds) / sizeof(kinds[0]);
	unsigned b = 0;
	if (!list || !*list)
		return -1;
	while (*list) {
		size_t l = strcspn(list, ",");
		size_t k;
		for (k = 0; k < nkinds; k++)
			if (strlen(kinds[k].name) == l && !strncmp(kinds[k].name, list, l))
				break;
		if (k == nkinds)
			return -1;
		b |= kinds[k].bit;
		list += l + (list[l] == ',');
	}
	*bits = b;
	return 0;
}
