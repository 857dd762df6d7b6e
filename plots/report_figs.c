/*
 * report_figs.c: the report's figures (report_int.h), per group of one
 * workload and model, each for one capacity that its caption names:
 * - peak reserved against batch size, at each stored capacity;
 * - fragmentation per setting at the group's largest capacity, at most 8
 *   traces a figure (the figure's own limit), so big groups get several;
 * - per trace: the settings compared at each capacity; memory over time at
 *   the largest capacity, for each policy's default setting and the
 *   trace's lowest-peak setting (a sweep stores 20 and more runs a trace,
 *   too many lines for one timeline); step time against memory where the
 *   runs were timed; what is live at the peak where it was recorded.
 * Every figure is drawn; one that gnuplot cannot draw (gnuplot missing)
 * leaves a sentence in its place saying why, counted in figure_notes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_int.h"

#define FRAG_CHUNK 8

static int count_row(void *ctx, int ncols, const char *const *cols)
{
	(void)ncols;
	(void)cols;
	++*(int *)ctx;
	return 1;
}

/* One figure of the runs WHERE selects (ANDed with the user's selection),
 * inlined in the page and linked from the Markdown. */
static int add_figure(struct report *r, enum plot_kind kind, const char *where,
		      const char *caption)
{
	char out[4200], err[1024], name[40];
	char *w = NULL;
	int ok = r->user_where ? asprintf(&w, "(%s) AND (%s)", r->user_where, where)
			       : asprintf(&w, "%s", where);
	if (ok < 0) {
		snprintf(r->err, r->errlen, "out of memory");
		return -1;
	}
	snprintf(name, sizeof name, "fig-%03d-%s.png", r->nfigs + 1, plot_kind_name(kind));
	snprintf(out, sizeof out, "%s/%s", r->dir, name);
	struct plot_request req = {
		.kind = kind,
		.sel = {.where = w, .label_key = r->sel->label_key,
			.label_value = r->sel->label_value},
		.out = out,
	};
	int rc = plot_make(r->s, &req, err, sizeof err);
	free(w);
	if (rc < 0) {
		char note[1400];
		/* no temporary paths in the page: it stays the same from run to run */
		snprintf(note, sizeof note, "(figure not drawn: %s: %s)", caption,
			 strstr(err, "gnuplot failed") ? "gnuplot failed (its message went to "
			 "stderr)" : err);
		page_para(&r->p, note);
		r->notes++;
		return 0;
	}
	r->nfigs++;
	if (page_figure(&r->p, out, name, caption) < 0) {
		snprintf(r->err, r->errlen, "reading %s failed", out);
		return -1;
	}
	return 0;
}

/* "trace_crc32 IN (1,2) AND capacity=N" for traces CRCS[FROM..TO). */
static char *where_traces(const uint32_t *crcs, int from, int to, uint64_t cap)
{
	size_t len = 64 + 12 * (size_t)(to - from), k;
	char *w = malloc(len);
	if (!w)
		return NULL;
	k = (size_t)snprintf(w, len, "trace_crc32 IN (");
	for (int i = from; i < to; i++)
		k += (size_t)snprintf(w + k, len - k, "%s%" PRIu32, i > from ? "," : "", crcs[i]);
	snprintf(w + k, len - k, ") AND capacity=%" PRIu64, cap);
	return w;
}

static int group_figure(struct report *r, enum plot_kind kind, const uint32_t *crcs, int from,
			int to, uint64_t cap, const char *caption)
{
	char *w = where_traces(crcs, from, to, cap);
	if (!w) {
		snprintf(r->err, r->errlen, "out of memory");
		return -1;
	}
	int rc = add_figure(r, kind, w, caption);
	free(w);
	return rc;
}

/* Whether group G has runs of traces CRCS[FROM..TO) at CAP (at BATCHES
 * distinct batch sizes when not NULL). */
static int has_runs(const struct report *r, const struct rgroup *g, const uint32_t *crcs,
		    int from, int to, uint64_t cap, int *batches)
{
	long seen[64];
	int n = 0, ns = 0;
	for (int i = 0; i < g->n; i++) {
		const struct plot_run *x = &r->runs[g->idx[i]];
		int in = 0;
		for (int t = from; t < to && !in; t++)
			in = x->trace_crc32 == crcs[t];
		if (!in || x->capacity != cap)
			continue;
		n++;
		long b = run_batch(x);
		int dup = 0;
		for (int k = 0; k < ns && !dup; k++)
			dup = seen[k] == b;
		if (b > 0 && !dup && ns < 64)
			seen[ns++] = b;
	}
	if (batches)
		*batches = ns;
	return n > 0;
}

/* The timeline's runs of trace CRC at CAP: each policy's default setting,
 * and the lowest peak reserved without OOM among the caching allocators
 * when that is not a default. "id IN (...)" into W; the best setting's
 * name into BEST ("" when a default). Returns how many. */
static int timeline_runs(const struct report *r, const struct rgroup *g, uint32_t crc,
			 uint64_t cap, char *w, size_t wlen, char *best, size_t blen)
{
	const struct plot_run *b = NULL;
	int n = 0;
	size_t k = (size_t)snprintf(w, wlen, "id IN (");
	best[0] = '\0';
	for (int i = 0; i < g->n; i++) {
		const struct plot_run *x = &r->runs[g->idx[i]];
		if (x->trace_crc32 != crc || x->capacity != cap || x->oom ||
		    !strcmp(x->policy, "optimal") || !strcmp(x->policy, "cuda_malloc"))
			continue;
		if (!b || x->peak_reserved < b->peak_reserved)
			b = x;
	}
	for (int i = 0; i < g->n && n < 12; i++) {
		const struct plot_run *x = &r->runs[g->idx[i]];
		if (x->trace_crc32 != crc || x->capacity != cap || (*x->conf && x != b))
			continue;
		k += (size_t)snprintf(w + k, wlen - k, "%s%" PRId64, n ? "," : "", x->id);
		n++;
	}
	snprintf(w + k, wlen - k, ")");
	if (b && *b->conf)
		plot_run_setting(b, best, blen);
	return n;
}

static int has_live(struct report *r, const char *where_ids)
{
	char sql[4400], err[256];
	int found = 0;
	snprintf(sql, sizeof sql, "SELECT 1 FROM peak_live WHERE run_id IN (SELECT id FROM runs "
		 "WHERE %s) LIMIT 1", where_ids);
	return store_query(r->s, sql, NULL, 0, count_row, &found, err, sizeof err) >= 0 && found;
}

static int trace_figures(struct report *r, const struct rgroup *g, int t)
{
	const struct plot_run *x = NULL;
	char cap[32], cap0[32], buf[1200], tt[400];
	for (int i = 0; i < g->n && !x; i++)
		if (r->runs[g->idx[i]].trace_crc32 == g->crcs[t])
			x = &r->runs[g->idx[i]];
	if (!x)
		return 0;
	if (*x->batch)
		snprintf(tt, sizeof tt, "%s (batch %s)", trace_base(x), x->batch);
	else
		snprintf(tt, sizeof tt, "%s", trace_base(x));
	fprintf(r->p.html, "<h4>");
	html_esc(r->p.html, tt);
	fprintf(r->p.html, "</h4>\n");
	fputs("#### ", r->p.md);
	md_esc(r->p.md, tt);
	fputs("\n\n", r->p.md);
	for (int c = 0; c < g->ncaps; c++) {
		if (!has_runs(r, g, g->crcs, t, t + 1, g->caps[c], NULL))
			continue;
		snprintf(buf, sizeof buf, "Settings compared, %s, at %s", tt,
			 cap_str(g->caps[c], cap, sizeof cap));
		if (group_figure(r, PLOT_COMPARE, g->crcs, t, t + 1, g->caps[c], buf) < 0)
			return -1;
	}
	uint64_t c0 = g->caps[0];
	cap_str(c0, cap0, sizeof cap0);
	char ids[2048], best[128];
	if (timeline_runs(r, g, g->crcs[t], c0, ids, sizeof ids, best, sizeof best) > 0) {
		snprintf(buf, sizeof buf, "Memory over time, %s, at %s: each policy's default "
			 "setting%s%s%s", tt, cap0, *best ? " and the lowest-peak setting (" : "",
			 best, *best ? ")" : "");
		if (add_figure(r, PLOT_TIMELINE, ids, buf) < 0)
			return -1;
		if (has_live(r, ids)) {
			snprintf(buf, sizeof buf, "What is live at the peak, by kind and layer, %s, at "
				 "%s (the timeline's runs)", tt, cap0);
			if (add_figure(r, PLOT_LIVE, ids, buf) < 0)
				return -1;
		}
	}
	int timed = 0;
	for (int i = 0; i < g->n; i++) {
		const struct plot_run *y = &r->runs[g->idx[i]];
		timed += y->trace_crc32 == g->crcs[t] && y->capacity == c0 && y->timed &&
			 y->step_time_ns > 0 && strcmp(y->policy, "optimal");
	}
	if (timed) {
		snprintf(buf, sizeof buf, "Predicted step time against peak reserved (Pareto), %s, "
			 "at %s", tt, cap0);
		if (group_figure(r, PLOT_PARETO, g->crcs, t, t + 1, c0, buf) < 0)
			return -1;
	}
	return 0;
}

int report_figures(struct report *r)
{
	char buf[1400], cap[32];
	page_heading(&r->p, 2, "figures", "Figures");
	page_para(&r->p, "Per group, then per trace; each caption names the device capacity its "
		  "runs had. Sizes in GiB (2^30 bytes). Timelines shade the NVTX phases (forward, "
		  "backward, optimizer) of their first run. A run far above the others (a "
		  "preallocating allocator such as the BFC reserving most of the device) is drawn "
		  "off scale, its value in the key.");
	for (int k = 0; k < r->ngroups; k++) {
		const struct rgroup *g = &r->groups[k];
		snprintf(buf, sizeof buf, "Figures: %s", g->name);
		page_heading(&r->p, 3, g->anchor, buf);
		/* where at least two batch sizes ran at that capacity */
		for (int c = 0; c < g->ncaps && g->nbatches >= 2 && !g->dup_batch; c++) {
			int nb = 0;
			if (has_runs(r, g, g->crcs, 0, g->ntraces, g->caps[c], &nb) && nb >= 2) {
				snprintf(buf, sizeof buf, "Peak reserved against batch size, %s, at %s",
					 g->name, cap_str(g->caps[c], cap, sizeof cap));
				if (group_figure(r, PLOT_BATCH, g->crcs, 0, g->ntraces, g->caps[c],
						 buf) < 0)
					return -1;
			}
		}
		for (int t = 0; t < g->ntraces; t += FRAG_CHUNK) {
			int to = t + FRAG_CHUNK < g->ntraces ? t + FRAG_CHUNK : g->ntraces;
			char part[64] = "";
			if (!has_runs(r, g, g->crcs, t, to, g->caps[0], NULL))
				continue;
			if (g->ntraces > FRAG_CHUNK)
				snprintf(part, sizeof part, ", traces %d to %d of %d", t + 1, to,
					 g->ntraces);
			snprintf(buf, sizeof buf, "Fragmentation per setting, %s%s, at %s", g->name, part,
				 cap_str(g->caps[0], cap, sizeof cap));
			if (group_figure(r, PLOT_FRAG, g->crcs, t, to, g->caps[0], buf) < 0)
				return -1;
		}
		for (int t = 0; t < g->ntraces; t++)
			if (trace_figures(r, g, t) < 0)
				return -1;
	}
	return 0;
}
