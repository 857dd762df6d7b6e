/*
 * plot_batch.c: `gpumemsim plot batch`: peak reserved against the trace's
 * batch label, one model, one line per setting, the floor, non-monotonic
 * points circled and OOM runs crossed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/size.h"
#include "plot_int.h"

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

int fig_batch(struct fig *f, const struct plot_run *runs, int n, char *err, size_t errlen)
{
	struct bpoint *pts = calloc((size_t)n, sizeof *pts);
	const char **series = calloc((size_t)n, sizeof *series);
	char (*names)[128] = calloc((size_t)n, sizeof *names);
	int np = 0, ns = 0, ret = -1;
	long batches[64];
	int nb = 0;
	const char *model = NULL;
	FILE *d = NULL;
	if (!pts || !series || !names) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		long b;
		if (parse_batch(runs[i].batch, &b) < 0)
			continue;
		if (model && strcmp(model, runs[i].model)) {
			snprintf(err, errlen, "peak against batch size compares one model; the "
				 "selection holds '%s' and '%s': narrow it, e.g. --label model=%s",
				 model, runs[i].model, model);
			goto out;
		}
		model = runs[i].model;
		pts[np].batch = b;
		pts[np++].r = &runs[i];
		int seen = 0;
		for (int k = 0; k < nb; k++)
			seen |= batches[k] == b;
		if (!seen && nb < 64)
			batches[nb++] = b;
	}
	if (!np) {
		snprintf(err, errlen, "no selected run has a numeric 'batch' label (the trace's "
			 "`L batch=N` line): nothing to plot against batch size");
		goto out;
	}
	qsort(pts, (size_t)np, sizeof *pts, cmp_bpoint);
	/* few distinct batches: insertion sort */
	for (int i = 1; i < nb; i++)
		for (int k = i; k > 0 && batches[k - 1] > batches[k]; k--) {
			long t = batches[k];
			batches[k] = batches[k - 1];
			batches[k - 1] = t;
		}
	/* Series: each non-optimal setting, in the runs' order. */
	for (int i = 0; i < n; i++) {
		long b;
		if (parse_batch(runs[i].batch, &b) < 0 || !strcmp(runs[i].policy, "optimal"))
			continue;
		plot_run_setting(&runs[i], names[ns], sizeof names[0]);
		int seen = 0;
		for (int k = 0; k < ns && !seen; k++)
			seen = !strcmp(names[k], names[ns]);
		if (!seen)
			series[ns] = names[ns], ns++;
	}
	double live_top = 0, data_top = 0;
	d = fig_file(f, "batch.dat", err, errlen);
	if (!d)
		goto out;
	FILE *marks = fig_file(f, "nonmonotonic.dat", err, errlen);
	if (!marks)
		goto out;
	FILE *ooms = fig_file(f, "oom.dat", err, errlen);
	if (!ooms) {
		fclose(marks);
		goto out;
	}
	int nmarks = 0, nooms = 0;
	double series_max[PLOT_MAX_FILES * 8] = {0};
	fputs("# batch peak_reserved_GiB peak_allocated_GiB oom; one block per setting\n", d);
	fputs("# batch peak_reserved_GiB: the peak fell while the batch grew\n", marks);
	fputs("# batch peak_reserved_GiB: a simulated OOM at this batch\n", ooms);
	for (int k = 0; k < ns; k++) {
		double prev = -1;
		char b2[128];
		if (k)
			fputs("\n\n", d);
		fprintf(d, "# %s\n", series[k]);
		for (int i = 0; i < np; i++) {
			plot_run_setting(pts[i].r, b2, sizeof b2);
			if (strcmp(b2, series[k]))
				continue;
			/* several runs at one batch (capacities): the latest counts */
			int later = 0;
			for (int j = i + 1; j < np && pts[j].batch == pts[i].batch && !later; j++) {
				char b3[128];
				later = !strcmp(plot_run_setting(pts[j].r, b3, sizeof b3), b2);
			}
			if (later)
				continue;
			double v = gib(pts[i].r->peak_reserved);
			fprintf(d, "%ld %.6f %.6f %d\n", pts[i].batch, v,
				gib(pts[i].r->peak_allocated), pts[i].r->oom);
			if (prev >= 0 && v < prev - 1e-9 && ++nmarks)
				fprintf(marks, "%ld %.6f\n", pts[i].batch, v);
			if (pts[i].r->oom && ++nooms)
				fprintf(ooms, "%ld %.6f\n", pts[i].batch, v);
			prev = v;
			if (k < (int)(sizeof series_max / sizeof series_max[0]) && v > series_max[k])
				series_max[k] = v;
			if (v > data_top)
				data_top = v;
			if (gib(pts[i].r->peak_allocated) > live_top)
				live_top = gib(pts[i].r->peak_allocated);
		}
	}
	if (!nmarks)
		fputs("? ?\n", marks);
	if (!nooms)
		fputs("? ?\n", ooms);
	int bad = fig_close_file(marks, "nonmonotonic.dat", err, errlen) < 0;
	bad |= fig_close_file(ooms, "oom.dat", err, errlen) < 0;
	if (bad)
		goto out;
	FILE *fl = fig_file(f, "floor.dat", err, errlen);
	if (!fl)
		goto out;
	int from_opt_all = 1, any_floor = 0;
	fputs("# batch floor_GiB (optimal policy's peak, else peak of live requests)\n", fl);
	for (int i = 0; i < np; i++) {
		if (i + 1 < np && pts[i + 1].batch == pts[i].batch)
			continue;
		int from_opt;
		double v = gib(trace_floor(runs, n, pts[i].r->trace_crc32, &from_opt));
		from_opt_all &= from_opt;
		any_floor = 1;
		fprintf(fl, "%ld %.6f\n", pts[i].batch, v);
		if (v > live_top)
			live_top = v;
		if (v > data_top)
			data_top = v;
	}
	if (fig_close_file(fl, "floor.dat", err, errlen) < 0)
		goto out;

	FILE *gp = f->gp;
	int clipped, ncaps;
	double vis = 0;
	for (int k = 0; k < ns && k < (int)(sizeof series_max / sizeof series_max[0]); k++) {
		double v = on_scale(series_max[k], live_top);
		vis = v > vis ? v : vis;
	}
	double top = y_top(data_top, live_top, vis, &clipped);
	top = capacity_lines(gp, runs, n, top, &ncaps);
	char title[512];
	snprintf(title, sizeof title, "Peak reserved memory against batch size, %s, per allocator "
		 "setting\ncircled: the peak fell while the batch grew (non-monotonic)",
		 *model ? model : "(no model label)");
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
		char t2[192], b3[32];
		if (k < (int)(sizeof series_max / sizeof series_max[0]) && series_max[k] > top)
			snprintf(t2, sizeof t2, "%s (%s, off scale)", series[k],
				 size_fmt((uint64_t)(series_max[k] * GIB), b3, sizeof b3));
		else
			snprintf(t2, sizeof t2, "%s", series[k]);
		if (k)
			fputs(", \\\n  ", gp);
		gp_data(gp, f, "batch.dat");
		fprintf(gp, " index %d using 1:2 with linespoints lt %d title ", k, k + 1);
		gp_str(gp, t2);
	}
	if (any_floor) {
		fputs(ns ? ", \\\n  " : "", gp);
		gp_data(gp, f, "floor.dat");
		fprintf(gp, " using 1:2 with linespoints lc rgb '#000000' lw 2 dt 2 pt 5 title '%s'",
			from_opt_all ? "floor (optimal policy)" : "floor (peak of live requests)");
	}
	if (nmarks) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "nonmonotonic.dat");
		fputs(" using 1:2 with points pt 6 ps 4 lw 3 lc rgb '#c00000' title 'non-monotonic'", gp);
	}
	if (nooms) {
		fputs(", \\\n  ", gp);
		gp_data(gp, f, "oom.dat");
		fputs(" using 1:2 with points pt 2 ps 3 lw 3 lc rgb '#c00000' title 'simulated OOM'", gp);
	}
	plot_capacity_terms(gp, ncaps);
	fputc('\n', gp);
	ret = 0;
out:
	if (d && fig_close_file(d, "batch.dat", err, errlen) < 0)
		ret = -1;
	free(pts);
	free(series);
	free(names);
	return ret;
}
