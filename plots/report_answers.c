/*
 * report_answers.c: the report's first page (report_int.h): per group of
 * one workload and model, the answers users ask for, as short summaries
 * (every run's row is in runs.csv):
 * - what was compared (traces, batches, capacities, settings);
 * - the best setting per capacity: lowest peak reserved among the runs that
 *   did not run out of memory (an OOM run's peak is where it stopped, so it
 *   is never best and never counts in a saving);
 * - the largest batch that fits per capacity, settings with the same
 *   outcome in one row, with the verdict on the next batch;
 * - the non-monotonic points (peak reserved falls while the batch grows)
 *   with the term that moved: the workload (the floor falls too), the
 *   policy's rounding (allocated falls, the floor does not), or the
 *   allocator (only reserved falls: its segments and caching);
 * - the cost in time of each setting where the runs were timed
 *   (`--timing`: predicted step times);
 * - the OOM runs per verdict.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "../sim/engine.h"
#include "../sim/oom_text.h"
#include "report_int.h"

#define CELL 4096

/* Append to the cell BUF (CELL bytes). */
static void cat(char *buf, const char *fmt, const char *a, const char *b)
{
	size_t l = strlen(buf);
	if (l < CELL)
		snprintf(buf + l, CELL - l, fmt, a, b);
}

static int is_ref(const char *setting)
{
	return !strncmp(setting, "optimal ", 8) || !strncmp(setting, "cuda_malloc ", 12);
}

/* ------------------------------------------------------------ compared */

static void answer_groups(struct report *r)
{
	static const char *const heads[] = {"group (workload model)", "traces", "batch sizes",
		"capacities", "settings", "step times", "folders"};
	page_heading(&r->p, 3, "groups", "What was compared");
	page_para(&r->p, "One group per workload and model, from the traces' labels (workload=, "
		  "model=, batch=): programs that share a model name are never mixed. A trace "
		  "without a workload label groups under its model alone. The group's name links "
		  "to its figures.");
	tab_begin(&r->p, 7, heads);
	for (int k = 0; k < r->ngroups; k++) {
		const struct rgroup *g = &r->groups[k];
		char tr[32], bs[512] = "", cs[256] = "", st[32], folders[1024] = "", href[24], b[32];
		char (*names)[128] = NULL;
		int ns = group_settings(r, g, &names);
		free(names);
		snprintf(tr, sizeof tr, "%d", g->ntraces);
		for (int i = 0; i < g->nbatches; i++) {
			size_t l = strlen(bs);
			snprintf(bs + l, sizeof bs - l, "%s%ld", i ? ", " : "", g->batches[i]);
		}
		if (!g->nbatches)
			snprintf(bs, sizeof bs, "(no batch label)");
		else if (g->dup_batch)
			snprintf(bs + strlen(bs), sizeof bs - strlen(bs), " (several traces at one "
				 "batch: no batch answers)");
		for (int i = 0; i < g->ncaps; i++) {
			size_t l = strlen(cs);
			snprintf(cs + l, sizeof cs - l, "%s%s", i ? ", " : "", cap_str(g->caps[i], b, sizeof b));
		}
		snprintf(st, sizeof st, "%d", ns > 0 ? ns : 0);
		for (int i = 0; i < g->n; i++) {
			const struct plot_run *x = &r->runs[g->idx[i]];
			char f[300];
			const char *sl = strrchr(x->trace_path, '/');
			snprintf(f, sizeof f, "%.*s", sl ? (int)(sl - x->trace_path) : 1,
				 sl ? x->trace_path : ".");
			/* whole items only: traces/torch is not traces/torch-truth */
			int seen = 0;
			size_t fl = strlen(f);
			for (const char *q = folders; *q && !seen;) {
				size_t l = strcspn(q, ",");
				seen = l == fl && !strncmp(q, f, fl);
				q += l;
				q += *q ? 2 : 0; /* ", " */
			}
			if (!seen && strlen(folders) + strlen(f) + 3 < sizeof folders) {
				if (*folders)
					strcat(folders, ", ");
				strcat(folders, f);
			}
		}
		snprintf(href, sizeof href, "#%s", g->anchor);
		const char *cells[] = {g->name, tr, bs, cs, st, g->timed ? "predicted" : "not timed",
				       folders};
		tab_row_link(&r->p, cells, href);
	}
	tab_end(&r->p);
}

/* ------------------------------------------------------------ best */

struct score {
	const char *setting;
	int ntr, nok;          /* runs, runs without OOM */
	double logsum;         /* of peak reserved / floor, runs without OOM */
	int nratio;
	double lo, hi;
};

static double geo(const struct score *s) { return s->nratio ? exp(s->logsum / s->nratio) : 0; }

static int cmp_score(const void *a, const void *b)
{
	const struct score *x = a, *y = b;
	if (x->nok != y->nok)
		return y->nok - x->nok;
	double gx = geo(x), gy = geo(y);
	if (gx != gy)
		return gx < gy ? -1 : 1;
	return strcmp(x->setting, y->setting);
}

static void score_of(const struct report *r, const struct rgroup *g, const char *setting,
		     uint64_t cap, struct score *s)
{
	memset(s, 0, sizeof *s);
	s->setting = setting;
	for (int t = 0; t < g->ntraces; t++) {
		const struct plot_run *x = group_find(r, g, g->crcs[t], setting, cap);
		if (!x)
			continue;
		s->ntr++;
		if (x->oom)
			continue;
		s->nok++;
		uint64_t fl = report_floor(r, g->crcs[t]);
		if (!fl)
			continue;
		double q = (double)x->peak_reserved / (double)fl;
		s->logsum += log(q);
		s->lo = s->nratio && s->lo < q ? s->lo : q;
		s->hi = s->nratio && s->hi > q ? s->hi : q;
		s->nratio++;
	}
}

/* "-4.1% peak reserved over 6 batches" against the policy's default, on the
 * traces where both ran without OOM; where the default ran out of memory,
 * say so instead of counting a saving. */
static void vs_default(const struct report *r, const struct rgroup *g, const char *best,
		       uint64_t cap, char *out, size_t len)
{
	char def[128];
	const char *sp = strchr(best, ' ');
	snprintf(def, sizeof def, "%.*s (default)", sp ? (int)(sp - best) : 0, best);
	if (!strcmp(def, best)) {
		snprintf(out, len, "is the policy's default");
		return;
	}
	double ls = 0;
	int nb = 0, def_oom = 0;
	for (int t = 0; t < g->ntraces; t++) {
		const struct plot_run *a = group_find(r, g, g->crcs[t], best, cap);
		const struct plot_run *d = group_find(r, g, g->crcs[t], def, cap);
		if (!a || !d || a->oom)
			continue;
		if (d->oom) {
			def_oom++;
			continue;
		}
		if (a->peak_reserved && d->peak_reserved) {
			ls += log((double)a->peak_reserved / (double)d->peak_reserved);
			nb++;
		}
	}
	if (!nb && !def_oom) {
		snprintf(out, len, "%s not stored", def);
		return;
	}
	size_t l = 0;
	out[0] = '\0';
	if (nb)
		l = (size_t)snprintf(out, len, "%+.1f%% peak reserved vs %s (geometric mean, %d "
				     "trace%s)", 100.0 * (exp(ls / nb) - 1.0), def, nb, nb > 1 ? "s" : "");
	if (def_oom && l < len)
		snprintf(out + l, len - l, "%s%s runs out of memory at %d trace%s where this "
			 "does not", nb ? "; " : "", def, def_oom, def_oom > 1 ? "s" : "");
}

static void answer_best(struct report *r)
{
	static const char *const heads[] = {"group", "capacity", "best setting",
		"peak reserved / floor", "runs without OOM", "against its policy's default",
		"next best", "worst without OOM"};
	page_heading(&r->p, 3, "best", "Best setting per group and capacity");
	page_para(&r->p, "Lowest peak reserved relative to the floor (the optimal policy's peak, "
		  "else the peak of live requests), as the geometric mean over the group's traces, "
		  "among the caching allocators; settings that run every trace without OOM rank "
		  "first. An OOM run's peak is where it stopped: it is never best and never counts "
		  "in a saving. Left out: optimal (the floor itself) and cuda_malloc (no caching: "
		  "its cost is time, below).");
	tab_begin(&r->p, 8, heads);
	for (int k = 0; k < r->ngroups; k++) {
		const struct rgroup *g = &r->groups[k];
		char (*names)[128] = NULL;
		int ns = group_settings(r, g, &names);
		struct score *sc = calloc((size_t)(ns > 0 ? ns : 1), sizeof *sc);
		if (ns < 0 || !sc) {
			free(names);
			free(sc);
			continue;
		}
		for (int c = 0; c < g->ncaps; c++) {
			int nsc = 0;
			for (int j = 0; j < ns; j++)
				if (!is_ref(names[j]))
					score_of(r, g, names[j], g->caps[c], &sc[nsc++]);
			qsort(sc, (size_t)nsc, sizeof *sc, cmp_score);
			char cap[32], q[96], ok[32], vs[320], next[200], worst[200];
			cap_str(g->caps[c], cap, sizeof cap);
			const struct score *b = nsc && sc[0].nok ? &sc[0] : NULL;
			if (!b) {
				const char *cells[] = {g->name, cap, "none: every run ran out of memory",
						       "-", "0", "-", "-", "-"};
				tab_row(&r->p, cells);
				continue;
			}
			if (b->nratio)
				snprintf(q, sizeof q, "%.3f (%.3f to %.3f)", geo(b), b->lo, b->hi);
			else
				snprintf(q, sizeof q, "floor not known");
			snprintf(ok, sizeof ok, "%d of %d", b->nok, b->ntr);
			vs_default(r, g, b->setting, g->caps[c], vs, sizeof vs);
			snprintf(next, sizeof next, "-");
			if (nsc > 1 && sc[1].nok)
				snprintf(next, sizeof next, "%s (%.3f%s)", sc[1].setting, geo(&sc[1]),
					 sc[1].nok < sc[1].ntr ? ", some OOM" : "");
			/* the highest ratio among the settings that ran every trace */
			const struct score *w = NULL;
			for (int j = 1; j < nsc; j++)
				if (sc[j].nok == sc[j].ntr && sc[j].nratio && (!w || geo(&sc[j]) > geo(w)))
					w = &sc[j];
			snprintf(worst, sizeof worst, "-");
			if (w)
				snprintf(worst, sizeof worst, "%s (%.3f)", w->setting, geo(w));
			const char *cells[] = {g->name, cap, b->setting, q, ok, vs, next, worst};
			tab_row(&r->p, cells);
		}
		free(sc);
		free(names);
	}
	tab_end(&r->p);
}

/* ------------------------------------------------------------ batch */

struct fitc {
	long fit, fail;          /* largest batch with every smaller one fitting; next batch */
	int again;               /* a batch above FAIL fits again */
	int nrun;                /* stored runs of the setting at this capacity */
	const char *verdict;     /* of the run at FAIL */
	const struct plot_run *fail_run;
	char settings[CELL];
	int nset;
};

static void fit_of(const struct report *r, const struct rgroup *g, const char *setting,
		   uint64_t cap, struct fitc *f)
{
	memset(f, 0, sizeof *f);
	f->verdict = "";
	for (int b = 0; b < g->nbatches; b++) {
		uint32_t crc = group_trace_at(r, g, g->batches[b]);
		const struct plot_run *x = crc ? group_find(r, g, crc, setting, cap) : NULL;
		if (!x)
			continue;
		f->nrun++;
		if (!f->fail && !x->oom)
			f->fit = g->batches[b];
		else if (!f->fail) {
			f->fail = g->batches[b];
			f->fail_run = x;
			f->verdict = x->oom_verdict;
		} else if (!x->oom)
			f->again = 1;
	}
}

static const char *verdict_text(const struct plot_run *x, char *buf, size_t len)
{
	return oom_explain(x->oom_verdict, x->oom_bytes, x->oom_allocated, x->oom_reserved,
			   x->oom_limit, x->capacity, x->oom_largest_free, x->oom_cached_free, buf,
			   len);
}

static void answer_maxbatch(struct report *r)
{
	static const char *const heads[] = {"group", "capacity", "settings",
		"largest batch that fits", "next batch", "why the next batch fails"};
	page_heading(&r->p, 3, "maxbatch", "Largest batch that fits, per capacity");
	page_para(&r->p, "Among the stored batch sizes (no extrapolation): the largest batch with "
		  "every smaller stored batch running without OOM, and the verdict on the next one "
		  "(the first setting's run; settings with the same outcome share a row). "
		  "`gpumemsim maxbatch` searches between the stored sizes.");
	tab_begin(&r->p, 6, heads);
	for (int k = 0; k < r->ngroups; k++) {
		const struct rgroup *g = &r->groups[k];
		if (!g->nbatches)
			continue;
		if (g->dup_batch) {
			const char *cells[] = {g->name, "-", "-", "-", "-", "several traces at one "
					       "batch size: see the figures per trace"};
			tab_row(&r->p, cells);
			continue;
		}
		char (*names)[128] = NULL;
		int ns = group_settings(r, g, &names);
		struct fitc *cl = calloc((size_t)(ns > 0 ? ns : 1), sizeof *cl);
		if (ns < 0 || !cl) {
			free(names);
			free(cl);
			continue;
		}
		for (int c = 0; c < g->ncaps; c++) {
			int ncl = 0;
			for (int j = 0; j < ns; j++) {
				struct fitc f;
				fit_of(r, g, names[j], g->caps[c], &f);
				if (!f.nrun) /* not run at this capacity */
					continue;
				int m = -1;
				for (int i = 0; i < ncl && m < 0; i++)
					if (cl[i].fit == f.fit && cl[i].fail == f.fail &&
					    cl[i].again == f.again && !strcmp(cl[i].verdict, f.verdict))
						m = i;
				if (m < 0) {
					m = ncl++;
					cl[m] = f;
				}
				cat(cl[m].settings, "%s%s", cl[m].nset++ ? ", " : "", names[j]);
			}
			/* the best outcome first */
			for (int i = 1; i < ncl; i++)
				for (int j = i; j > 0 && (cl[j - 1].fail && (!cl[j].fail ||
							  cl[j].fit > cl[j - 1].fit)); j--) {
					struct fitc t = cl[j];
					cl[j] = cl[j - 1];
					cl[j - 1] = t;
				}
			char cap[32];
			cap_str(g->caps[c], cap, sizeof cap);
			for (int i = 0; i < ncl; i++) {
				char fit[64], next[32], why[CELL], set[CELL];
				if (ncl == 1 && !cl[i].fail)
					snprintf(set, sizeof set, "all %d settings", cl[i].nset);
				else if (!cl[i].fail)
					snprintf(set, sizeof set, "the %d settings not listed below",
						 cl[i].nset);
				else
					snprintf(set, sizeof set, "%s", cl[i].settings);
				if (!cl[i].fail) {
					snprintf(fit, sizeof fit, "%ld (every stored batch)", cl[i].fit);
					snprintf(next, sizeof next, "-");
					snprintf(why, sizeof why, "-");
				} else {
					if (cl[i].fit)
						snprintf(fit, sizeof fit, "%ld", cl[i].fit);
					else
						snprintf(fit, sizeof fit, "none (its smallest run, batch "
							 "%ld, fails)", cl[i].fail);
					snprintf(next, sizeof next, "%ld", cl[i].fail);
					char v[1024];
					verdict_text(cl[i].fail_run, v, sizeof v);
					why[0] = '\0';
					if (cl[i].nset > 1) {
						char s1[128];
						plot_run_setting(cl[i].fail_run, s1, sizeof s1);
						cat(why, "%s%s: ", s1, "");
					}
					cat(why, "%s%s", v, cl[i].again ? " (a larger stored batch fits "
					    "again)" : "");
				}
				const char *cells[] = {g->name, cap, set, fit, next, why};
				tab_row(&r->p, cells);
			}
			memset(cl, 0, (size_t)ns * sizeof *cl);
		}
		free(cl);
		free(names);
	}
	tab_end(&r->p);
}

/* ------------------------------------------------------------ non-monotonic */

enum cause { C_WORKLOAD, C_ROUNDING, C_ALLOCATOR };

struct fall {
	const struct rgroup *g;
	long b1, b2;
	enum cause cause;
	uint64_t f1, f2;           /* the floors at b1, b2 */
	char caps[128];
	char settings[CELL];
	int nset, merged;
};

static const char *cause_text(const struct fall *f, char *buf, size_t len)
{
	char a[32], b[32];
	size_fmt(f->f1, a, sizeof a);
	size_fmt(f->f2, b, sizeof b);
	switch (f->cause) {
	case C_WORKLOAD:
		snprintf(buf, len, "the workload: the floor (what is live at the peak) falls too, "
			 "%s -> %s: the program asks for less (e.g. another cuDNN algorithm and "
			 "workspace at this batch)", a, b);
		break;
	case C_ROUNDING:
		snprintf(buf, len, "the policy's rounding: peak allocated falls while the floor "
			 "grows (%s -> %s): the requests round to fewer bytes", a, b);
		break;
	default:
		snprintf(buf, len, "the allocator: only reserved falls (the floor grows, %s -> %s, "
			 "and allocated does not fall): its segments and caching happen to fit "
			 "better", a, b);
	}
	return buf;
}

static void answer_nonmono(struct report *r)
{
	static const char *const heads[] = {"group", "capacity", "batch", "settings (fall in peak "
		"reserved)", "what moved"};
	page_heading(&r->p, 3, "nonmono", "Where peak memory falls as the batch grows");
	int nf = 0, cap_f = 64;
	struct fall *fs = calloc((size_t)cap_f, sizeof *fs);
	for (int k = 0; k < r->ngroups && fs; k++) {
		const struct rgroup *g = &r->groups[k];
		char (*names)[128] = NULL;
		int ns = g->dup_batch ? -1 : group_settings(r, g, &names);
		for (int c = 0; c < g->ncaps && ns > 0; c++) {
			for (int j = 0; j < ns; j++) {
				const struct plot_run *prev = NULL;
				long pb = 0;
				for (int b = 0; b < g->nbatches; b++) {
					uint32_t crc = group_trace_at(r, g, g->batches[b]);
					const struct plot_run *x = crc ? group_find(r, g, crc, names[j],
										     g->caps[c]) : NULL;
					/* adjacent stored batches, both without OOM */
					if (!x || x->oom) {
						prev = NULL;
						continue;
					}
					if (prev && x->peak_reserved < prev->peak_reserved) {
						struct fall f = {.g = g, .b1 = pb, .b2 = g->batches[b]};
						f.f1 = report_floor(r, prev->trace_crc32);
						f.f2 = report_floor(r, crc);
						f.cause = f.f2 < f.f1 ? C_WORKLOAD
							: x->peak_allocated < prev->peak_allocated ? C_ROUNDING
							: C_ALLOCATOR;
						cap_str(g->caps[c], f.caps, sizeof f.caps);
						int m = -1;
						for (int i = 0; i < nf && m < 0; i++)
							if (fs[i].g == g && fs[i].b1 == f.b1 && fs[i].b2 == f.b2 &&
							    fs[i].cause == f.cause && !strcmp(fs[i].caps, f.caps))
								m = i;
						if (m < 0) {
							if (nf == cap_f) {
								struct fall *t = realloc(fs, 2 * (size_t)cap_f * sizeof *fs);
								if (!t)
									break;
								fs = t;
								cap_f *= 2;
							}
							m = nf++;
							fs[m] = f;
						}
						char amt[160], d[32];
						snprintf(amt, sizeof amt, "%s -%s", names[j],
							 size_fmt(prev->peak_reserved - x->peak_reserved, d, sizeof d));
						cat(fs[m].settings, "%s%s", fs[m].nset++ ? ", " : "", amt);
					}
					prev = x;
					pb = g->batches[b];
				}
			}
		}
		free(names);
	}
	/* the same fall at several capacities: one row naming them */
	for (int i = 0; i < nf; i++)
		for (int j = i + 1; j < nf && !fs[i].merged; j++)
			if (!fs[j].merged && fs[j].g == fs[i].g && fs[j].b1 == fs[i].b1 &&
			    fs[j].b2 == fs[i].b2 && fs[j].cause == fs[i].cause &&
			    !strcmp(fs[j].settings, fs[i].settings)) {
				char add[sizeof fs[0].caps];
				size_t l = strlen(fs[i].caps);
				memcpy(add, fs[j].caps, sizeof add);
				snprintf(fs[i].caps + l, sizeof fs[i].caps - l, ", %s", add);
				fs[j].merged = 1;
			}
	if (!nf) {
		page_para(&r->p, "Peak reserved never falls from one stored batch to the next among "
			  "the runs without OOM.");
		free(fs);
		return;
	}
	page_para(&r->p, "Peak reserved falls from one stored batch size to the next (both runs "
		  "without OOM; OOM runs are not compared). What moved: the workload when the floor "
		  "falls too; the policy's rounding when allocated falls but the floor does not; the "
		  "allocator when only reserved falls. `gpumemsim explain batch` splits a step by "
		  "layer and term.");
	tab_begin(&r->p, 5, heads);
	for (int i = 0; i < nf; i++) {
		if (fs[i].merged)
			continue;
		char b[64], why[512];
		snprintf(b, sizeof b, "%ld -> %ld", fs[i].b1, fs[i].b2);
		const char *cells[] = {fs[i].g->name, fs[i].caps, b, fs[i].settings,
				       cause_text(&fs[i], why, sizeof why)};
		tab_row(&r->p, cells);
	}
	tab_end(&r->p);
	free(fs);
}

/* ------------------------------------------------------------ time */

/* A ratio as a change: "+3.2%", or "58.6x" from twice on. */
static const char *change(double q, char *buf, size_t len)
{
	if (q >= 2.0)
		snprintf(buf, len, "%.1fx", q);
	else
		snprintf(buf, len, "%+.1f%%", 100.0 * (q - 1.0));
	return buf;
}

/* How many timed runs the host bounds: their step times carry the host's
 * speed, which differs from process to process (docs/timing.md, "GPU-bound
 * and host-bound"); runs stored before the busy share was kept are not
 * counted. */
static void time_bound_note(struct report *r)
{
	int known = 0, host = 0;
	for (int i = 0; i < r->nruns; i++) {
		int h = plot_run_host_bound(&r->runs[i]);
		if (h < 0)
			continue;
		known++;
		host += h;
	}
	if (!known)
		return;
	char text[512];
	snprintf(text, sizeof text, "%d of %d timed runs are host-bound (the GPU busy under %.0f%% "
		 "of the step): their step time rests on the host's speed, which differs by up to "
		 "25%% between processes of one program; GPU-bound predictions were within a few "
		 "percent on the H200 (docs/timing.md, \"GPU-bound and host-bound\").",
		 host, known, 100 * SIM_GPU_BOUND);
	page_para(&r->p, text);
}

static void answer_time(struct report *r)
{
	int ntimed = 0;
	for (int k = 0; k < r->ngroups; k++)
		ntimed += r->groups[k].timed;
	page_heading(&r->p, 3, "time", "Cost in time of each setting");
	if (!ntimed) {
		page_para(&r->p, "No run has a predicted step time: sweep with --timing (or `gpumemsim "
			  "run --timing`) to see what each setting costs in time.");
		return;
	}
	page_para(&r->p, "Predicted step time (`--timing`: the timeline model, docs/timing.md) "
		  "and peak reserved against pytorch (default), as "
		  "geometric means over the group's traces where both ran without OOM, at the "
		  "group's largest capacity. Groups without timed runs are left out.");
	const char **heads = calloc((size_t)ntimed + 1, sizeof *heads);
	const struct rgroup **tg = calloc((size_t)ntimed + 1, sizeof *tg);
	char (*names)[128] = NULL;
	int ns = -1, nt = 0;
	if (!heads || !tg)
		goto out;
	heads[nt] = "setting";
	for (int k = 0; k < r->ngroups; k++)
		if (r->groups[k].timed && nt < 16) {
			tg[nt] = &r->groups[k];
			heads[++nt] = r->groups[k].name;
		}
	/* the settings of the first timed group, then any others */
	ns = group_settings(r, tg[0], &names);
	if (ns < 0)
		goto out;
	tab_begin(&r->p, nt + 1, heads);
	for (int j = 0; j < ns; j++) {
		if (!strncmp(names[j], "optimal ", 8))
			continue;
		char cell[16][256];
		const char *cells[17] = {names[j]};
		for (int t = 0; t < nt && t < 16; t++) {
			const struct rgroup *g = tg[t];
			uint64_t cap = g->caps[0];
			double lt = 0, lm = 0, lo = 0, hi = 0;
			int nb = 0;
			for (int i = 0; i < g->ntraces; i++) {
				const struct plot_run *a = group_find(r, g, g->crcs[i], names[j], cap);
				const struct plot_run *d = group_find(r, g, g->crcs[i], "pytorch (default)",
								      cap);
				if (!a || !d || a->oom || d->oom || !a->timed || !d->timed ||
				    !a->step_time_ns || !d->step_time_ns)
					continue;
				lt += log((double)a->step_time_ns / (double)d->step_time_ns);
				lm += log((double)a->peak_reserved / (double)d->peak_reserved);
				double ms = (double)d->step_time_ns / 1e6;
				lo = nb && lo < ms ? lo : ms;
				hi = nb && hi > ms ? hi : ms;
				nb++;
			}
			if (!nb)
				snprintf(cell[t], sizeof cell[t], "-");
			else if (!strcmp(names[j], "pytorch (default)"))
				snprintf(cell[t], sizeof cell[t], "reference: %.1f to %.1f ms a step", lo, hi);
			else {
				char a[32], b[32];
				snprintf(cell[t], sizeof cell[t], "%s time, %s memory",
					 change(exp(lt / nb), a, sizeof a), change(exp(lm / nb), b, sizeof b));
			}
			cells[t + 1] = cell[t];
		}
		tab_row(&r->p, cells);
	}
	tab_end(&r->p);
	time_bound_note(r);
out:
	free(names);
	free(heads);
	free(tg);
}

/* ------------------------------------------------------------ OOMs */

static void answer_ooms(struct report *r)
{
	static const char *const heads[] = {"group", "capacity", "runs", "out of memory",
		"by verdict"};
	static const char *const kinds[] = {"capacity", "limit", "fragmentation", "foreign", ""};
	int any = 0;
	page_heading(&r->p, 3, "ooms", "Runs out of memory, by verdict");
	for (int k = 0; k < r->ngroups; k++) {
		const struct rgroup *g = &r->groups[k];
		for (int c = 0; c < g->ncaps; c++) {
			int nr = 0, no = 0, per[5] = {0};
			for (int i = 0; i < g->n; i++) {
				const struct plot_run *x = &r->runs[g->idx[i]];
				if (x->capacity != g->caps[c])
					continue;
				nr++;
				if (!x->oom)
					continue;
				no++;
				int v = 4;
				for (int q = 0; q < 4; q++)
					if (!strcmp(x->oom_verdict, kinds[q]))
						v = q;
				per[v]++;
			}
			if (!no)
				continue;
			if (!any) {
				page_para(&r->p, "capacity: live plus the request exceed the device; "
					  "limit: they exceed the allocator's own limit (a memory fraction, "
					  "a preallocated pool); fragmentation: enough is free but not in "
					  "one piece; foreign: memory outside the framework's allocator "
					  "left no room. Every OOM run's verdict in words is in runs.csv.");
				tab_begin(&r->p, 5, heads);
				any = 1;
			}
			char cap[32], a[16], b[16], v[256] = "";
			snprintf(a, sizeof a, "%d", nr);
			snprintf(b, sizeof b, "%d", no);
			for (int q = 0; q < 5; q++)
				if (per[q]) {
					size_t l = strlen(v);
					snprintf(v + l, sizeof v - l, "%s%s %d", l ? ", " : "",
						 q < 4 ? kinds[q] : "no verdict", per[q]);
				}
			const char *cells[] = {g->name, cap_str(g->caps[c], cap, sizeof cap), a, b, v};
			tab_row(&r->p, cells);
		}
	}
	if (any)
		tab_end(&r->p);
	else
		page_para(&r->p, "No selected run ran out of memory.");
}

int report_answers(struct report *r)
{
	page_heading(&r->p, 2, "answers", "Answers");
	answer_groups(r);
	answer_best(r);
	answer_maxbatch(r);
	answer_nonmono(r);
	answer_time(r);
	answer_ooms(r);
	return 0;
}
