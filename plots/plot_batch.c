/*
 * plot_batch.c: `gpumemsim plot batch`: peak reserved against the trace's
 * batch label, one workload and model, one line per setting, the floor,
 * non-monotonic points circled and OOM runs crossed. The title names the
 * capacity; a selection of several capacities draws the latest run of each
 * setting and batch and says so (the report draws one capacity a figure).
 *
 * Never mixed: two workloads or models, or two traces at one batch size
 * (two captures of the same thing), are an error that says how to narrow
 * the selection, since a line through them would show the mixing as a
 * rise or fall. An OOM run's peak is where it stopped, not its need: it is
 * crossed, never circled as non-monotonic, and never the floor (where every
 * run of a batch ran out of memory the floor is not known there: a
 * triangle on the capacity says so).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "plot_int.h"

#define BATCH_MAX_SERIES 64

struct bpoint { long batch; const struct plot_run *r; };

static int cmp_bpoint(const void *a, const void *b)
{
	const struct bpoint *x = a, *y = b;
	if (x->batch != y->batch)
		return x->batch < y->batch ? -1 : 1;
	return x->r->id < y->r->id ? -1 : x->r->id > y->r->id;
}

static int parse_batch(const char *s, long *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	long v = strtol(s, &end, 10);
	if (*end || v <= 0)
		return -1;
	*out = v;
	return 0;
}

/* The selection's batch points, checked for mixing; -1 with ERR. */
static int collect(const struct plot_run *runs, int n, struct bpoint *pts, int *np,
		   long *batches, int *nb, char *err, size_t errlen)
{
	const struct plot_run *first = NULL;
	*np = *nb = 0;
	for (int i = 0; i < n; i++) {
		long b;
		if (parse_batch(runs[i].batch, &b) < 0)
			continue;
		if (first && (strcmp(first->model, runs[i].model) ||
			      strcmp(first->workload, runs[i].workload))) {
			snprintf(err, errlen, "peak against batch size compares one workload and model; "
				 "the selection holds '%s %s' and '%s %s': narrow it, e.g. --label "
				 "model=%s --where \"json_extract(labels_json,'$.workload')='%s'\"",
				 first->workload, first->model, runs[i].workload, runs[i].model,
				 first->model, first->workload);
			return -1;
		}
		first = first ? first : &runs[i];
		for (int k = 0; k < *np; k++)
			if (pts[k].batch == b && pts[k].r->trace_crc32 != runs[i].trace_crc32) {
				snprintf(err, errlen, "two traces at batch %ld ('%s', '%s'): peak against "
					 "batch size takes one trace per batch; narrow the selection, "
					 "e.g. --where \"trace_path NOT LIKE '%s'\"", b,
					 pts[k].r->trace_path, runs[i].trace_path, runs[i].trace_path);
				return -1;
			}
		pts[*np].batch = b;
		pts[(*np)++].r = &runs[i];
		int seen = 0;
		for (int k = 0; k < *nb; k++)
			seen |= batches[k] == b;
		if (!seen && *nb < 64)
			batches[(*nb)++] = b;
	}
	if (!*np) {
		snprintf(err, errlen, "no selected run has a numeric 'batch' label (the trace's "
			 "`L batch=N` line): nothing to plot against batch size");
		return -1;
	}
	qsort(pts, (size_t)*np, sizeof *pts, cmp_bpoint);
	for (int i = 1; i < *nb; i++) /* few distinct batches: insertion sort */
		for (int k = i; k > 0 && batches[k - 1] > batches[k]; k--) {
			long t = batches[k];
			batches[k] = batches[k - 1];
			batches[k - 1] = t;
		}
	return 0;
}

struct bstate {
	double live_top, data_top;
	double series_max[BATCH_MAX_SERIES];
	int nmarks, nooms, nabove, any_floor, from_opt_all;
};

/* batch.dat (one block per series), nonmonotonic.dat, oom.dat. */
static int write_series(struct fig *f, const struct bpoint *pts, int np, char (*series)[160],
			int ns, struct bstate *st, char *err, size_t errlen)
{
	FILE *d = fig_file(f, "batch.dat", err, errlen);
	FILE *marks = d ? fig_file(f, "nonmonotonic.dat", err, errlen) : NULL;
	FILE *ooms = marks ? fig_file(f, "oom.dat", err, errlen) : NULL;
	int bad = !ooms;
	if (!bad) {
		fputs("# batch peak_reserved_GiB peak_allocated_GiB oom; one block per setting\n", d);
		fputs("# batch peak_reserved_GiB: the peak fell while the batch grew (runs without "
		      "OOM)\n", marks);
		fputs("# batch peak_reserved_GiB: a simulated OOM at this batch\n", ooms);
	}
	for (int k = 0; k < ns && !bad; k++) {
		double prev = -1;
		char b2[160];
		if (k)
			fputs("\n\n", d);
		fprintf(d, "# %s\n", series[k]);
		for (int i = 0; i < np; i++) {
			if (strcmp(plot_run_setting(pts[i].r, b2, sizeof b2), series[k]))
				continue;
			/* several runs at one batch (capacities): the latest counts */
			int later = 0;
			for (int j = i + 1; j < np && pts[j].batch == pts[i].batch && !later; j++) {
				char b3[160];
				later = !strcmp(plot_run_setting(pts[j].r, b3, sizeof b3), b2);
			}
			if (later)
				continue;
			double v = gib(pts[i].r->peak_reserved);
			fprintf(d, "%ld %.6f %.6f %d\n", pts[i].batch, v,
				gib(pts[i].r->peak_allocated), pts[i].r->oom);
			if (pts[i].r->oom) {
				st->nooms++;
				fprintf(ooms, "%ld %.6f\n", pts[i].batch, v);
			} else {
				if (prev >= 0 && v < prev - 1e-9 && ++st->nmarks)
					fprintf(marks, "%ld %.6f\n", pts[i].batch, v);
				prev = v;
			}
			if (v > st->series_max[k])
				st->series_max[k] = v;
			if (v > st->data_top)
				st->data_top = v;
			if (gib(pts[i].r->peak_allocated) > st->live_top)
				st->live_top = gib(pts[i].r->peak_allocated);
		}
	}
	if (marks && !st->nmarks)
		fputs("? ?\n", marks);
	if (ooms && !st->nooms)
		fputs("? ?\n", ooms);
	if (d && fig_close_file(d, "batch.dat", err, errlen) < 0)
		bad = 1;
	if (marks && fig_close_file(marks, "nonmonotonic.dat", err, errlen) < 0)
		bad = 1;
	if (ooms && fig_close_file(ooms, "oom.dat", err, errlen) < 0)
		bad = 1;
	return bad ? -1 : 0;
}

/* floor.dat: the floor per batch where known; floor-above.dat: the
 * batches where every run ran out of memory (the floor is not known),
 * drawn on the smallest capacity among them. */
static int write_floor(struct fig *f, const struct plot_run *runs, int n,
		       const struct bpoint *pts, int np, struct bstate *st, char *err,
		       size_t errlen)
{
	FILE *fl = fig_file(f, "floor.dat", err, errlen);
	FILE *ab = fl ? fig_file(f, "floor-above.dat", err, errlen) : NULL;
	int bad = !ab;
	st->from_opt_all = 1;
	if (!bad) {
		fputs("# batch floor_GiB (optimal policy's peak, else peak of live requests; "
		      "runs without OOM)\n", fl);
		fputs("# batch capacity_GiB: every run ran out of memory, the floor is not known\n", ab);
	}
	for (int i = 0; i < np && !bad; i++) {
		if (i + 1 < np && pts[i + 1].batch == pts[i].batch)
			continue;
		int from_opt;
		uint64_t fb = trace_floor(runs, n, pts[i].r->trace_crc32, &from_opt);
		if (!fb) {
			uint64_t cap = 0;
			for (int j = 0; j < n; j++)
				if (runs[j].trace_crc32 == pts[i].r->trace_crc32 && runs[j].capacity &&
				    (!cap || runs[j].capacity < cap))
					cap = runs[j].capacity;
			if (cap) {
				fprintf(ab, "%ld %.6f\n", pts[i].batch, gib(cap));
				st->nabove++;
			}
			/* a break in the floor line rather than a drop to 0 */
			fputs("\n", fl);
			continue;
		}
		double v = gib(fb);
		st->from_opt_all &= from_opt;
		st->any_floor = 1;
		fprintf(fl, "%ld %.6f\n", pts[i].batch, v);
		if (v > st->live_top)
			st->live_top = v;
		if (v > st->data_top)
			st->data_top = v;
	}
	if (ab && !st->nabove)
		fputs("? ?\n", ab);
	if (fl && !st->any_floor)
		fputs("? ?\n", fl);
	if (fl && fig_close_file(fl, "floor.dat", err, errlen) < 0)
		bad = 1;
	if (ab && fig_close_file(ab, "floor-above.dat", err, errlen) < 0)
		bad = 1;
	return bad ? -1 : 0;
}

int fig_batch(struct fig *f, const struct plot_run *runs, int n, char *err, size_t errlen)
{
	struct bpoint *pts = calloc((size_t)n + 1, sizeof *pts);
	char (*series)[160] = calloc(BATCH_MAX_SERIES, sizeof *series);
	struct bstate st;
	int np = 0, ns = 0, nb = 0, ret = -1, caps = 0;
	long batches[64];
	memset(&st, 0, sizeof st);
	if (!pts || !series) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (collect(runs, n, pts, &np, batches, &nb, err, errlen) < 0)
		goto out;
	runs_capacity(runs, n, &caps);
	/* Series: each non-optimal setting (and capacity), in the runs' order. */
	for (int i = 0; i < n; i++) {
		long b;
		char name[160];
		if (parse_batch(runs[i].batch, &b) < 0 || !strcmp(runs[i].policy, "optimal"))
			continue;
		plot_run_setting(&runs[i], name, sizeof name);
		int seen = 0;
		for (int k = 0; k < ns && !seen; k++)
			seen = !strcmp(series[k], name);
		if (seen)
			continue;
		if (ns == BATCH_MAX_SERIES) {
			snprintf(err, errlen, "peak against batch size draws at most %d settings: "
				 "narrow the selection with --where", BATCH_MAX_SERIES);
			goto out;
		}
		snprintf(series[ns++], sizeof series[0], "%s", name);
	}
	if (write_series(f, pts, np, series, ns, &st, err, errlen) < 0 ||
	    write_floor(f, runs, n, pts, np, &st, err, errlen) < 0)
		goto out;

	FILE *gp = f->gp;
	int clipped, ncaps;
	double vis = 0;
	for (int k = 0; k < ns; k++) {
		double v = on_scale(st.series_max[k], st.live_top);
		vis = v > vis ? v : vis;
	}
	double top = y_top(st.data_top, st.live_top, vis, &clipped);
	top = capacity_lines(gp, runs, n, top, &ncaps);
	char title[512], cw[48];
	/* short lines: the title centres over the plot, left of the key */
	snprintf(title, sizeof title, "Peak reserved against batch size, %s%s%s%s\n%scircled: the "
		 "peak fell while the batch grew (runs without OOM)\ncrossed: a simulated OOM "
		 "(where it stopped; not on the line)", pts[0].r->workload,
		 *pts[0].r->workload ? " " : "",
		 *pts[0].r->model ? pts[0].r->model : "(no model label)",
		 capacity_words(runs, n, cw, sizeof cw),
		 caps ? "several capacities: each point the latest run of its setting\n" : "");
	fputs("set title ", gp);
	gp_str(gp, title);
	fputs("\nset xlabel 'batch size'\nset ylabel 'peak reserved (GiB)'\n", gp);
	fprintf(gp, "set yrange [0:%.6f]\nset offsets graph 0.04, graph 0.04, 0, 0\n", top);
	/* batch sweeps are geometric (8, 16, ... 256): a log axis keeps the
	 * small batches apart instead of piling their labels up at the left */
	if (nb >= 3 && batches[0] > 0 && batches[nb - 1] >= 8 * batches[0])
		fputs("set logscale x 2\n", gp);
	fputs("set xtics (", gp);
	for (int i = 0; i < nb; i++)
		fprintf(gp, "%s%ld", i ? ", " : "", batches[i]);
	fputs(")\nset key outside right top vertical Left reverse font ',11' samplen 2.5\nplot ", gp);
	for (int k = 0; k < ns; k++) {
		char t2[224], b3[32];
		if (st.series_max[k] > top)
			snprintf(t2, sizeof t2, "%s (%s, off scale)", series[k],
				 size_fmt((uint64_t)(st.series_max[k] * GIB), b3, sizeof b3));
		else
			snprintf(t2, sizeof t2, "%s", series[k]);
		if (k)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "batch.dat");
		/* an OOM run's peak is where it stopped: crossed, not on the line */
		fprintf(gp, " index %d using 1:($4 > 0 ? 1/0 : $2) with linespoints lt %d title ", k,
			k + 1);
		gp_str(gp, t2);
	}
	const char *sep = ns ? ", \\\n  " : "";
	if (st.any_floor) {
		fputs(sep, gp);
		gp_data(gp, f, "floor.dat");
		fprintf(gp, " using 1:2 with linespoints lc rgb '#000000' lw 2 dt 2 pt 5 title '%s'",
			st.from_opt_all ? "floor (optimal policy)" : "floor (peak of live requests)");
		sep = ", \\\n  ";
	}
	if (st.nabove) {
		fputs(sep, gp);
		gp_data(gp, f, "floor-above.dat");
		fputs(" using 1:2 with points pt 9 ps 2.5 lc rgb '#000000' "
		      "title 'floor unknown: every run OOM (drawn at the capacity)'", gp);
		sep = ", \\\n  ";
	}
	if (st.nmarks) {
		fputs(sep, gp);
		gp_data(gp, f, "nonmonotonic.dat");
		fputs(" using 1:2 with points pt 6 ps 4 lw 3 lc rgb '#c00000' title 'non-monotonic'", gp);
		sep = ", \\\n  ";
	}
	if (st.nooms) {
		fputs(sep, gp);
		gp_data(gp, f, "oom.dat");
		fputs(" using 1:2 with points pt 2 ps 3 lw 3 lc rgb '#c00000' title 'simulated OOM'", gp);
	}
	plot_capacity_terms(gp, ncaps);
	fputc('\n', gp);
	ret = 0;
out:
	free(pts);
	free(series);
	return ret;
}
