/*
 * engine_peak.c: the engine's NVTX context (the innermost range open at
 * each allocation, the ranges kept for the results) and the live set at
 * the peak, classified by kind and layer (see engine.c, engine.h).
 */
#include "engine_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/vec.h"

/* ------------------------------------------------- NVTX context */

/* The phase a range name announces; PH_NONE inherits the parent's. */
unsigned phase_of(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	const char *tail = len >= 4 ? n + len - 4 : "";
	if (!n)
		return PH_NONE;
	if (strcasestr(n, "backward") || !strcmp(tail, ".bwd") || !strcmp(tail, "_bwd"))
		return PH_BWD;
	if (strcasestr(n, "forward") || !strcmp(tail, ".fwd") || !strcmp(tail, "_fwd"))
		return PH_FWD;
	if (strcasestr(n, "optim"))
		return PH_OPT;
	if (!strncasecmp(n, "build", 5) || !strncasecmp(n, "init", 4) || !strncasecmp(n, "setup", 5))
		return PH_BUILD;
	return PH_NONE;
}

/* The ctx index of (NAME, PHASE); 0 (no range) when out of memory. */
uint32_t ctx_intern(struct engine *e, const char *name, unsigned phase)
{
	uint64_t key = (uint64_t)(uintptr_t)name | (uint64_t)phase << 56, v;
	if (u64map_get(&e->ctx_idx, key, &v))
		return (uint32_t)v;
	if (VEC_RESERVE(e->ctxs, e->cap_ctx, e->nctx + 1, 64) < 0)
		return 0;
	if (e->nctx >= CTX_STATIC - 1 || u64map_put(&e->ctx_idx, key, e->nctx) < 0)
		return 0;
	e->ctxs[e->nctx].name = name;
	e->ctxs[e->nctx].phase = phase;
	return e->nctx++;
}

/* The context new allocations get: the innermost open range, else none. */
void nv_refresh(struct engine *e)
{
	if (e->nnvo) {
		e->cur_ctx = e->nvo[e->nnvo - 1].ctx;
		e->cur_end = e->nvo[e->nnvo - 1].end;
	} else {
		e->cur_ctx = ctx_intern(e, NULL, e->seen_step ? PH_NONE : PH_PRESTEP);
		e->cur_end = UINT64_MAX;
	}
}

int range_cmp_name(const void *a, const void *b)
{
	const struct sim_range *x = a, *y = b;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

int range_cmp_time(const void *a, const void *b)
{
	const struct sim_range *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* Merge ranges of the same name and depth less than GAP ns apart (a
 * timeline bucket cannot tell them apart), then put them in time order. */
void ranges_merge(struct sim_result *r, uint64_t gap)
{
	size_t k = 0;
	if (!r->nranges)
		return;
	qsort(r->ranges, r->nranges, sizeof *r->ranges, range_cmp_name);
	for (size_t i = 1; i < r->nranges; i++) {
		struct sim_range *o = &r->ranges[k], *x = &r->ranges[i];
		if (x->depth == o->depth && !strcmp(x->name, o->name) &&
		    (x->t <= o->end || x->t - o->end < gap)) {
			if (x->end > o->end)
				o->end = x->end;
			continue;
		}
		r->ranges[++k] = *x;
	}
	r->nranges = k + 1;
	qsort(r->ranges, r->nranges, sizeof *r->ranges, range_cmp_time);
}

/* Keep one closed top-level range; when the table is full, merge with a
 * gap of one timeline bucket, doubling until half of it is free. */
void range_keep(struct engine *e, const char *name, uint32_t depth, uint64_t t,
		       uint64_t end)
{
	struct sim_result *r = e->res;
	if (r->nranges == e->ranges_cap) {
		if (e->ranges_cap < SIM_MAX_RANGES) {
			if (VEC_RESERVE(r->ranges, e->ranges_cap, r->nranges + 1, 64) < 0)
				return;
		} else {
			uint64_t gap = 1ull << e->tl_shift;
			for (int i = 0; i < 64 && r->nranges > SIM_MAX_RANGES / 2; i++, gap *= 2)
				ranges_merge(r, gap);
			if (r->nranges == SIM_MAX_RANGES)
				return; /* distinct names fill it: later ones are not kept */
		}
	}
	struct sim_range *x = &r->ranges[r->nranges++];
	x->t = t;
	x->end = end;
	x->depth = depth;
	snprintf(x->name, sizeof x->name, "%s", name ? name : "");
}

/* A range opens: it becomes the context of allocations until it ends. */
void nv_push(struct engine *e, const struct eng_rec *er, uint64_t now)
{
	const struct trace_rec *rec = &er->r;
	const char *name = er->rname;
	if (!name || rec->end < rec->start)
		return;
	if (is_step_name(name))
		e->seen_step = 1;
	unsigned ph = phase_of(name);
	if (ph == PH_NONE && e->nnvo)
		ph = e->ctxs[e->nvo[e->nnvo - 1].ctx].phase & 7u;
	if (!e->seen_step)
		ph |= PH_PRESTEP;
	if (rec->u.range.depth >= 1 && !e->nnvo)
		step_orphan_begin(e, now); /* its parent's record comes late */
	if (e->nnvo == MAX_NV_OPEN)
		return; /* deeper nesting keeps its parent's context */
	struct nv_open *o = &e->nvo[e->nnvo++];
	o->end = rec->end;
	o->t = now - e->t0;
	o->ctx = ctx_intern(e, name, ph);
	o->depth = rec->u.range.depth;
	if (e->nnvo == 1 || rec->end < e->nvo_min)
		e->nvo_min = rec->end;
	nv_refresh(e);
}

/* Close the ranges whose trace end is at or before UNTIL (the host is at
 * simulated NOW), keeping the top-level ones in the result. */
void nv_pop(struct engine *e, uint64_t until, uint64_t now)
{
	int k = 0;
	e->nvo_min = UINT64_MAX;
	for (int i = 0; i < e->nnvo; i++) {
		struct nv_open o = e->nvo[i];
		if (o.end > until) {
			e->nvo[k++] = o;
			if (o.end < e->nvo_min)
				e->nvo_min = o.end;
			continue;
		}
		if (is_step_name(e->ctxs[o.ctx].name) && (!e->last_step_end || o.t >= e->last_step_t)) {
			e->last_step_t = o.t;
			e->last_step_end = o.end;
		}
		if (o.depth <= 1) {
			uint64_t end = o.end + e->delay - e->t0, lim = now - e->t0;
			if ((int64_t)(end - o.t) < 0)
				end = o.t;
			if ((int64_t)(end - lim) > 0)
				end = lim > o.t ? lim : o.t;
			range_keep(e, e->ctxs[o.ctx].name, o.depth, o.t, end);
		}
	}
	e->nnvo = k;
	nv_refresh(e);
}

/* An allocation live at the current peak is freed: remember it. */
/* ------------------------------------------------ live at the peak */

const char *sim_live_kind_name(enum sim_live_kind k)
{
	switch (k) {
	case SIM_LK_WEIGHTS: return "weights";
	case SIM_LK_OPTIMIZER: return "optimizer_state";
	case SIM_LK_ACTIVATIONS: return "activations";
	case SIM_LK_GRADIENTS: return "gradients";
	case SIM_LK_WORKSPACE: return "workspace";
	case SIM_LK_LIBRARY: return "library_workspace";
	case SIM_LK_OTHER: return "other";
	case SIM_LK_COUNT: break;
	}
	return "unknown";
}

/* The heuristics of docs/schema.md (peak_live), first match wins. */
enum sim_live_kind pk_classify(const struct engine *e, uint32_t ctx, int freed,
				      int within, unsigned free_phase)
{
	const struct nv_ctx *c = &e->ctxs[ctx & ~CTX_LIB];
	unsigned ph = c->phase & 7u;
	if (freed && within && c->name)
		return SIM_LK_WORKSPACE;
	if (!freed && (ctx & CTX_LIB))
		return SIM_LK_LIBRARY;
	if (ph == PH_OPT)
		return SIM_LK_OPTIMIZER;
	if (ph == PH_BWD)
		return SIM_LK_GRADIENTS;
	if (ph == PH_FWD)
		return !freed || free_phase != PH_FWD ? SIM_LK_ACTIVATIONS : SIM_LK_OTHER;
	if (!freed && (ph == PH_BUILD || (c->phase & PH_PRESTEP)))
		return SIM_LK_WEIGHTS;
	return SIM_LK_OTHER;
}

struct pk_item { uint64_t bytes, line; uint32_t ctx; enum sim_live_kind kind; };

int pk_item_cmp(const void *a, const void *b)
{
	const struct pk_item *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Items by line (one allocation per 'a' record line). */
static int pk_live_item_cmp(const void *a, const void *b)
{
	const struct sim_live_item *x = a, *y = b;
	return x->line < y->line ? -1 : x->line > y->line;
}

struct pk_layer { const char *name; uint64_t total; uint64_t bytes[SIM_LK_COUNT], n[SIM_LK_COUNT]; };

int pk_layer_cmp(const void *a, const void *b)
{
	const struct pk_layer *x = a, *y = b;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

void pk_row(struct sim_result *r, uint32_t rank, enum sim_live_kind kind, uint64_t bytes,
		   uint64_t count, uint64_t line, const char *layer)
{
	struct sim_live *l = &r->peak_live[r->npeak_live++];
	l->rank = rank;
	l->kind = kind;
	l->bytes = bytes;
	l->count = count;
	l->line = line;
	snprintf(l->layer, sizeof l->layer, "%s", layer && layer[0] ? layer : "(no range)");
}

/* Rebuild the set live at the peak: entries still live that were
 * allocated by then, plus those freed since; the largest and the totals
 * per (layer, kind) go into the result. Out of memory leaves it empty. */
void pk_finish(struct engine *e)
{
	struct sim_result *r = e->res;
	struct pk_item *it = NULL;
	struct pk_layer *ly = NULL;
	uint32_t *ctx_layer = NULL;
	struct u64map lmap;
	size_t n = 0, cap = e->npk, nly = 0;
	u64map_init(&lmap);
	if (!e->peak_res_seen || e->pk_lost || !e->nctx)
		goto out;
	for (size_t i = 0; e->live.slot && i <= e->live.mask; i++)
		if (e->live.slot[i].addr != LIVE_EMPTY && e->live.slot[i].line <= e->pk_line)
			cap++;
	it = malloc((cap ? cap : 1) * sizeof *it);
	ctx_layer = malloc(e->nctx * sizeof *ctx_layer);
	ly = calloc(e->nctx, sizeof *ly);
	if (!it || !ctx_layer || !ly)
		goto out;
	for (size_t i = 0; e->live.slot && i <= e->live.mask; i++) {
		const struct live_ent *le = &e->live.slot[i];
		if (le->addr == LIVE_EMPTY || le->line > e->pk_line)
			continue;
		uint32_t ctx = le->ctx & ~CTX_STATIC;
		it[n++] = (struct pk_item){le->block, le->line, ctx,
					   pk_classify(e, ctx, 0, 0, PH_NONE)};
	}
	for (size_t i = 0; i < e->npk; i++) {
		const struct pk_gone *g = &e->pk[i];
		/* freed after the last step ended: program teardown, as good
		 * as never freed */
		int freed = !e->last_step_end || g->free_t < e->last_step_end;
		it[n++] = (struct pk_item){g->block, g->line, g->ctx,
					   pk_classify(e, g->ctx, freed, g->within, g->free_phase)};
	}
	qsort(it, n, sizeof *it, pk_item_cmp);
	/* one layer per range name */
	for (uint32_t c = 0; c < e->nctx; c++) {
		uint64_t key = (uint64_t)(uintptr_t)e->ctxs[c].name, v;
		if (!u64map_get(&lmap, key, &v)) {
			v = nly;
			ly[nly++].name = e->ctxs[c].name;
			if (u64map_put(&lmap, key, v) < 0)
				goto out;
		}
		ctx_layer[c] = (uint32_t)v;
	}
	for (size_t i = 0; i < n; i++) {
		struct pk_layer *l = &ly[ctx_layer[it[i].ctx & ~CTX_LIB]];
		l->total += it[i].bytes;
		l->bytes[it[i].kind] += it[i].bytes;
		l->n[it[i].kind]++;
	}
	qsort(ly, nly, sizeof *ly, pk_layer_cmp);
	while (nly && !ly[nly - 1].total)
		nly--;
	/* layers past the kept ones fold into one */
	size_t keep = e->o->peak_layers ? e->o->peak_layers : SIM_PEAK_LAYERS;
	if (nly > keep) {
		struct pk_layer *o = &ly[keep];
		for (size_t j = keep + 1; j < nly; j++)
			for (int k = 0; k < SIM_LK_COUNT; k++) {
				o->bytes[k] += ly[j].bytes[k];
				o->n[k] += ly[j].n[k];
			}
		o->name = "(other layers)";
		nly = keep + 1;
	}
	size_t top = n < SIM_PEAK_TOP ? n : SIM_PEAK_TOP, nrow = top + nly * SIM_LK_COUNT + 1;
	/* the items, when asked for, sit after the rows in the same block, so
	 * that sim_result_free (which frees peak_live) frees them too */
	size_t nitem = e->o->peak_items ? n : 0;
	r->peak_live = calloc(1, nrow * sizeof *r->peak_live + nitem * sizeof *r->peak_item);
	if (!r->peak_live)
		goto out;
	if (nitem) {
		r->peak_item = (struct sim_live_item *)(r->peak_live + nrow);
		for (size_t i = 0; i < n; i++)
			r->peak_item[i] = (struct sim_live_item){it[i].line, it[i].bytes, it[i].kind};
		qsort(r->peak_item, n, sizeof *r->peak_item, pk_live_item_cmp);
		r->npeak_item = n;
	}
	for (size_t i = 0; i < top; i++)
		pk_row(r, (uint32_t)(i + 1), it[i].kind, it[i].bytes, 1, it[i].line,
		       e->ctxs[it[i].ctx & ~CTX_LIB].name);
	for (size_t j = 0; j < nly; j++)
		for (int k = 0; k < SIM_LK_COUNT; k++)
			if (ly[j].n[k])
				pk_row(r, 0, (enum sim_live_kind)k, ly[j].bytes[k], ly[j].n[k], 0,
				       ly[j].name);
out:
	u64map_free(&lmap);
	free(it);
	free(ly);
	free(ctx_layer);
}

