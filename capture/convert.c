/*
 * convert.c: the reorder buffer, allocation ids and link resolution that
 * turn captured records into a valid trace (see convert.h for the why).
 *
 * Reorder buffer: a binary min-heap of record pointers ordered by (start,
 * arrival sequence), so equal start times keep their arrival order and the
 * output is deterministic for a given arrival order. A record that arrives
 * after the watermark has passed its start is emitted at once with its start
 * raised to the last emitted start (the trace must not go back in time); it
 * is counted as late.
 *
 * Ids: the n-th emitted 'a' record gets id n. Three maps serve the links:
 * corr -> id and addr -> id for allocations emitted so far, addr -> corr for
 * the live ones. A freed allocation stays resolvable for RETIRE_NS after its
 * free: a stream-ordered free is stamped when the host calls it, which can be
 * before a kernel launched earlier on that stream starts.
 */
#include "convert.h"

#include <stdlib.h>
#include <string.h>

#include "../sim/u64map.h"
#include "../sim/vec.h"

#define RETIRE_NS 10000000000ull

struct conv_entry {
	struct trace_rec rec;
	char *name;
	uint64_t seq;
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
	struct conv_entry **heap;
	size_t nheap, capheap;
	uint64_t seq;
	uint64_t last_start;
	int emitted_any;
	struct u64map pending_links;  /* kernel corr -> struct conv_linkset * */
	struct u64map corr_id;        /* alloc corr -> id */
	struct u64map addr_id;        /* alloc base address -> latest id */
	struct u64map live_corr;      /* live alloc base address -> corr */
	struct conv_retire *ret;      /* FIFO of freed allocations */
	size_t ret_head, ret_len, ret_cap;
	struct cap_stats st;
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
	u64map_init(&c->pending_links);
	u64map_init(&c->corr_id);
	u64map_init(&c->addr_id);
	u64map_init(&c->live_corr);
	return c;
}

/* Copy the record and its name into the heap. */
int cap_conv_push(struct cap_conv *c, const struct cap_rec *r)
{
	struct conv_entry *e = malloc(sizeof(*e));
	if (!e)
		return -1;
	e->rec = r->rec;
	e->name = NULL;
	if (r->name && !(e->name = strdup(r->name)))
		goto fail;
	if (VEC_RESERVE(c->heap, c->capheap, c->nheap + 1, 1024) < 0)
		goto fail;
	if (e->rec.end < e->rec.start)
		e->rec.end = e->rec.start;
	e->seq = c->seq++;
	c->heap[c->nheap++] = e;
	heap_up(c, c->nheap - 1);
	c->st.pushed++;
	return 0;
fail:
	free(e->name);
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

/* Turn the launch's link set into sorted, distinct allocation ids. */
static void resolve_links(struct cap_conv *c, struct trace_rec *rec)
{
	struct trace_kernel *k = &rec->u.kernel;
	uint64_t v;
	k->nlinks = 0;
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
			dup |= k->links[j] == id;
		if (!dup && k->nlinks < TRACE_MAX_LINKS)
			k->links[k->nlinks++] = id;
	}
	qsort(k->links, k->nlinks, sizeof(k->links[0]), cmp_u64);
	c->st.links += k->nlinks;
	free(ls);
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
	uint32_t sid = e->name ? c->sink.intern(c->sink.ctx, e->name) : TRACE_NO_STRING;
	switch (rec->type) {
	case TREC_ALLOC: {
		struct trace_mem *m = &rec->u.mem;
		m->id = c->st.allocs++;
		m->source = sid;
		if (m->corr)
			u64map_put(&c->corr_id, m->corr, m->id);
		u64map_put(&c->addr_id, m->addr, m->id);
		u64map_put(&c->live_corr, m->addr, m->corr);
		break;
	}
	case TREC_FREE: {
		struct trace_mem *m = &rec->u.mem;
		struct conv_retire r = {rec->start, m->addr, 0, 0};
		m->id = 0;
		m->source = sid;
		if (u64map_get(&c->addr_id, m->addr, &r.id)) {
			u64map_del(&c->live_corr, m->addr, &r.corr);
			retire_push(c, &r);
		}
		break;
	}
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
	c->st.emitted++;
	return c->sink.record(c->sink.ctx, rec);
}

static int emit_while(struct cap_conv *c, int all, uint64_t watermark)
{
	int rc = 0;
	while (c->nheap && (all || c->heap[0]->rec.start < watermark)) {
		struct conv_entry *e = c->heap[0];
		c->heap[0] = c->heap[--c->nheap];
		heap_down(c, 0);
		int r = emit_one(c, e);
		free(e->name);
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

/* Release everything: nothing more will arrive. */
int cap_conv_emit_all(struct cap_conv *c)
{
	return emit_while(c, 1, 0);
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
	for (size_t i = 0; i < c->nheap; i++) {
		free(c->heap[i]->name);
		free(c->heap[i]);
	}
	free(c->heap);
	for (size_t i = 0; i < c->pending_links.cap; i++)
		if (c->pending_links.keys[i] != U64MAP_EMPTY)
			free((void *)(uintptr_t)c->pending_links.vals[i]);
	u64map_free(&c->pending_links);
	u64map_free(&c->corr_id);
	u64map_free(&c->addr_id);
	u64map_free(&c->live_corr);
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
