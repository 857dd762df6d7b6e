/*
 * batch_fit_live.c: the batch-size what-if's live-set analysis: what is
 * live at a line of a loaded capture, split into workspaces (by NVTX range)
 * and memory of foreign libraries (by library); maxbatch and explain batch
 * use it to say why memory runs out or moves.
 */
#include "batch_fit_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- live-set tracker */

static void group_add(struct bf_group *g, size_t *ng, const char *name, uint64_t bytes)
{
	for (size_t i = 0; i < *ng; i++)
		if (!strcmp(g[i].name, name)) {
			g[i].bytes += bytes;
			return;
		}
	size_t at = *ng;
	if (*ng == BF_MAX_GROUPS) {
		/* full: replace the smallest if this one is larger */
		at = 0;
		for (size_t i = 1; i < *ng; i++)
			if (g[i].bytes < g[at].bytes)
				at = i;
		if (g[at].bytes >= bytes)
			return;
	} else {
		(*ng)++;
	}
	snprintf(g[at].name, sizeof g[at].name, "%s", name);
	g[at].bytes = bytes;
}

static int cmp_group(const void *a, const void *b)
{
	const struct bf_group *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Live state after LINE, or at the peak of live bytes when LINE is 0. */
int bf_live_at(const struct bf_trace *t, uint64_t line, struct bf_live *out)
{
	uint8_t *live = calloc(t->nalloc ? t->nalloc : 1, 1);
	if (!live)
		return -1;
	memset(out, 0, sizeof *out);
	uint64_t cur = 0, peak = 0, peak_line = 0;
	if (line == 0) {
		size_t site = 0;
		for (size_t i = 0; i < t->nrec; i++) {
			const struct trace_rec *r = &t->rec[i];
			if (r->type == TREC_ALLOC) {
				cur += r->u.mem.bytes;
				live[site++] = 1;
			} else if (r->type == TREC_FREE && t->free_site[i] != NO_IDX &&
				   live[t->free_site[i]]) {
				live[t->free_site[i]] = 0;
				cur -= t->rec[t->alloc_rec[t->free_site[i]]].u.mem.bytes;
			}
			if (cur > peak) {
				peak = cur;
				peak_line = r->line;
			}
		}
		line = peak_line;
		memset(live, 0, t->nalloc ? t->nalloc : 1);
	}
	size_t site = 0;
	for (size_t i = 0; i < t->nrec && t->rec[i].line <= line; i++) {
		const struct trace_rec *r = &t->rec[i];
		if (r->type == TREC_ALLOC)
			live[site++] = 1;
		else if (r->type == TREC_FREE && t->free_site[i] != NO_IDX)
			live[t->free_site[i]] = 0;
	}
	out->line = line;
	for (size_t s = 0; s < t->nalloc; s++) {
		if (!live[s])
			continue;
		const struct trace_rec *a = &t->rec[t->alloc_rec[s]];
		uint64_t b = a->u.mem.bytes;
		out->total += b;
		out->nlive++;
		if (t->alloc_ws[s]) {
			out->workspace += b;
			const char *rn = tstr(t, t->alloc_range[s]);
			const char *src = tstr(t, a->u.mem.source);
			group_add(out->ws, &out->nws, rn ? rn : (src ? src : "-"), b);
		}
		if (t->alloc_foreign[s]) {
			out->foreign += b;
			group_add(out->libs, &out->nlibs, tstr(t, a->u.mem.source), b);
		}
	}
	qsort(out->ws, out->nws, sizeof *out->ws, cmp_group);
	qsort(out->libs, out->nlibs, sizeof *out->libs, cmp_group);
	free(live);
	return 0;
}
